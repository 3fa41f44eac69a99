//! `mosaic bench cache`: the small-write caches on a real in-memory raid5
//! 4+1 with a RAM journal, as ratios to the same array without a cache
//! measured in the same run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use mosaic_array::{Array, CacheVolume, CreateOptions};
use mosaic_core::{CacheConfig, CachePolicy, Level};
use mosaic_dev::{MemMember, Member};
use mosaic_sim::fsgen::Postmark;
use mosaic_trace::Op;

use crate::util::{human, print_json, size, table};

#[derive(Args)]
pub struct CacheBenchArgs {
    /// Seconds per random-write measurement
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Size of each cache structure (write cache, parity cache, old-data buffer)
    #[arg(long, value_parser = size, default_value = "1M")]
    pub cache_size: u64,
    /// Span the random 4 KiB writes address
    #[arg(long, value_parser = size, default_value = "8M")]
    pub footprint: u64,
    /// Print the measurements as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Row {
    workload: String,
    config: String,
    ops_per_sec: f64,
    ratio_to_no_cache: f64,
    device_reads_per_write: f64,
    device_writes_per_write: f64,
}

fn array(journal: bool) -> Result<Array> {
    let members: Vec<(Arc<dyn Member>, String)> = (0..5).map(|i| (Arc::new(MemMember::new(format!("m{i}"), 65 << 20)) as Arc<dyn Member>, format!("mem{i}"))).collect();
    let o = CreateOptions { level: Level::Raid5, members: Some(5), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
    let j = journal.then(|| (Arc::new(MemMember::new("journal", 96 << 20)) as Arc<dyn Member>, "mem-journal".to_string()));
    Ok(Array::create_with_journal(members, &o, true, j)?)
}

/// A volume under test: the bare array or a cache in front of it.
enum Vol {
    Bare(Box<Array>),
    Cached(Box<CacheVolume>),
}

impl Vol {
    fn write(&self, off: u64, d: &[u8]) -> Result<()> {
        match self {
            Vol::Bare(a) => a.write(off, d)?,
            Vol::Cached(v) => v.write(off, d)?,
        }
        Ok(())
    }
    fn read(&self, off: u64, d: &mut [u8]) -> Result<()> {
        match self {
            Vol::Bare(a) => a.read(off, d)?,
            Vol::Cached(v) => v.read(off, d)?,
        }
        Ok(())
    }
    fn array(&self) -> &Array {
        match self {
            Vol::Bare(a) => a,
            Vol::Cached(v) => v.array(),
        }
    }
    fn finish(&self) -> Result<()> {
        if let Vol::Cached(v) = self {
            v.sync()?;
        }
        Ok(())
    }
}

pub fn run(a: CacheBenchArgs) -> Result<i32> {
    let configs: Vec<(String, Option<CachePolicy>)> =
        std::iter::once(("no cache".to_string(), None)).chain(CachePolicy::ALL.iter().map(|p| (p.name().to_string(), Some(*p)))).collect();
    let pm = Postmark { files: 300, transactions: 1500, ..Default::default() }.requests();
    let mut rows: Vec<Row> = Vec::new();
    for (name, p) in &configs {
        let make = || -> Result<Vol> {
            let arr = array(true)?;
            Ok(match p {
                None => Vol::Bare(Box::new(arr)),
                Some(p) => Vol::Cached(Box::new(CacheVolume::new(arr, CacheConfig::uniform(*p, a.cache_size))?)),
            })
        };
        // 4 KiB random writes over the footprint, for a fixed time.
        let v = make()?;
        let blocks = a.footprint / 4096;
        let buf = vec![0x5au8; 4096];
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let t0 = Instant::now();
        let mut n = 0u64;
        while t0.elapsed() < Duration::from_secs_f64(a.seconds) {
            v.write(rng.gen_range(0..blocks) * 4096, &buf)?;
            n += 1;
        }
        v.finish()?;
        let secs = t0.elapsed().as_secs_f64();
        let (c, _) = v.array().counters();
        rows.push(Row {
            workload: format!("4 KiB random writes over {}", human(a.footprint)),
            config: name.clone(),
            ops_per_sec: n as f64 / secs,
            ratio_to_no_cache: 0.0,
            device_reads_per_write: c.device_reads() as f64 / n as f64,
            device_writes_per_write: c.device_writes() as f64 / n as f64,
        });
        // The Postmark-like request stream, start to end.
        let v = make()?;
        let mut rbuf = vec![0u8; 64 << 10];
        let t0 = Instant::now();
        let mut writes = 0u64;
        for r in &pm {
            let len = r.len as usize;
            if r.op == Op::Write {
                v.write(r.offset, &buf.repeat(len / 4096))?;
                writes += 1;
            } else {
                if rbuf.len() < len {
                    rbuf.resize(len, 0);
                }
                v.read(r.offset, &mut rbuf[..len])?;
            }
        }
        v.finish()?;
        let secs = t0.elapsed().as_secs_f64();
        let (c, _) = v.array().counters();
        rows.push(Row {
            workload: "Postmark-like".into(),
            config: name.clone(),
            ops_per_sec: pm.len() as f64 / secs,
            ratio_to_no_cache: 0.0,
            device_reads_per_write: c.device_reads() as f64 / writes as f64,
            device_writes_per_write: c.device_writes() as f64 / writes as f64,
        });
    }
    for i in 0..rows.len() {
        let base = rows.iter().find(|r| r.workload == rows[i].workload && r.config == "no cache").map(|r| r.ops_per_sec).unwrap_or(1.0);
        rows[i].ratio_to_no_cache = rows[i].ops_per_sec / base;
    }
    rows.sort_by(|x, y| x.workload.cmp(&y.workload));
    if a.json {
        print_json(&rows)?;
        return Ok(0);
    }
    println!("raid5 4+1 on RAM members, unit 4 KiB, RAM journal; caches {} each (write-back)", human(a.cache_size));
    let mut t = vec![vec!["workload".into(), "config".into(), "ops/s".into(), "vs no cache".into(), "dev reads/write".into(), "dev writes/write".into()]];
    for r in &rows {
        t.push(vec![
            r.workload.clone(),
            r.config.clone(),
            format!("{:.0}", r.ops_per_sec),
            format!("{:.2}", r.ratio_to_no_cache),
            format!("{:.2}", r.device_reads_per_write),
            format!("{:.2}", r.device_writes_per_write),
        ]);
    }
    print!("{}", table(&t));
    Ok(0)
}
