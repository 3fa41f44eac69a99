//! `mosaic bench cache`: the small-write caches on a real in-memory raid5
//! 4+1 with a RAM journal, as ratios to the same array without a cache
//! measured in the same run.

use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use mosaic_array::{Array, CacheVolume, CreateOptions};
use mosaic_core::{CacheConfig, CachePolicy, Level};
use mosaic_sim::fsgen::Postmark;
use mosaic_trace::{Op, Request};

use crate::util::{cpu_seconds, human, median, print_json, ram, size, table};

#[derive(Args)]
pub struct CacheBenchArgs {
    /// Random 4 KiB writes per measurement (a fixed count, so every run
    /// does the same device operations; 1 to 100 million)
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=MAX_WRITES))]
    pub writes: u64,
    /// Runs (1 to 100); rates are their medians
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeat: u16,
    /// Size of each cache structure (write cache, parity cache, old-data
    /// buffer): at least one 4 KiB page
    #[arg(long, value_parser = cache_size, default_value = "1M")]
    pub cache_size: u64,
    /// Span the random 4 KiB writes address (at least one 4 KiB page, at
    /// most the array's capacity)
    #[arg(long, value_parser = footprint, default_value = "8M")]
    pub footprint: u64,
    /// Size of the RAM journal.  A cache volume destages everything each
    /// time its journal passes half full, so a larger journal means fewer
    /// of those destages (and other device operations than the default's)
    #[arg(long, value_parser = size, default_value = "96M")]
    pub journal_size: u64,
    /// Measure only these caches (none, fpc, ppc, ppc+data; "no cache" is
    /// always measured, the ratios need it); default: all
    #[arg(long = "config", value_parser = CachePolicy::parse)]
    pub configs: Vec<CachePolicy>,
    /// Skip the Postmark-like workload (random writes only)
    #[arg(long)]
    pub random_only: bool,
    /// Print the measurements as JSON
    #[arg(long)]
    pub json: bool,
}

/// clap value parser of `--footprint`: a size of at least one page
/// (the random writes pick one of its 4 KiB blocks).
fn footprint(s: &str) -> Result<u64, String> {
    at_least_a_page(s, "the random 4 KiB writes need a footprint of at least one page, 4 KiB")
}

/// The size `s`, refused with `why` below one page.
fn at_least_a_page(s: &str, why: &str) -> Result<u64, String> {
    match size(s).map_err(|e| e.to_string())? {
        b if b < PAGE => Err(format!("{s:?}: {why}")),
        b => Ok(b),
    }
}

/// clap value parser of `--cache-size`: a size of at least one page (the
/// array's unit: the write cache holds whole pages, the parity cache a
/// page of code a row).
fn cache_size(s: &str) -> Result<u64, String> {
    at_least_a_page(s, "each cache must hold at least one page, 4 KiB")
}

/// The most `--writes` a measurement makes (each run of every
/// configuration makes them all).
const MAX_WRITES: u64 = 100_000_000;
/// The random writes' size and alignment.
const PAGE: u64 = 4096;
/// Each of the array's 5 RAM members.
const MEMBER: u64 = 65 << 20;

#[derive(Serialize)]
struct Row {
    workload: String,
    config: String,
    /// Wall-clock rate (median).
    ops_per_sec: f64,
    /// Per core: operations per CPU second (median); the caches' CPU cost
    /// shows here even when other processes load the machine.
    ops_per_cpu_sec: f64,
    /// `ops_per_cpu_sec` over the same for no cache.
    ratio_to_no_cache: f64,
    device_reads_per_write: f64,
    device_writes_per_write: f64,
    /// Journal records appended per logical write: the records of the
    /// destage steps a cached write sets off (the first carries its
    /// logical entry), or its logical entry alone when it destages
    /// nothing.
    journal_records_per_write: f64,
    /// Journal checkpoints in one run.  A cache volume destages
    /// everything at each (past half a ring); no cache's only flush the
    /// members, which RAM members do not pay for.
    journal_checkpoints: u64,
}

/// One measurement: requests and logical writes done, wall and CPU
/// seconds, the array's device reads and writes, and its journal's
/// records and checkpoints during the run.
struct Sample {
    ops: u64,
    writes: u64,
    wall: f64,
    cpu: f64,
    dev: (u64, u64),
    journal: (u64, u64),
}

/// Records appended and checkpoints taken by the array's journal so far.
fn journal_counts(a: &Array) -> (u64, u64) {
    a.journal().map(|j| (j.records.load(Ordering::Relaxed), j.checkpoints.load(Ordering::Relaxed))).unwrap_or((0, 0))
}

fn array(journal: u64) -> Result<Array> {
    let members = (0..5).map(|i| Ok((ram(&format!("m{i}"), MEMBER)?, format!("mem{i}")))).collect::<Result<Vec<_>>>()?;
    let o = CreateOptions { level: Level::Raid5, members: Some(5), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
    Ok(Array::create_with_journal(members, &o, true, Some((ram("journal", journal)?, "mem-journal".to_string())))?)
}

/// A fresh volume: the array with a journal of `journal` bytes, bare
/// (`None`) or behind `p`'s caches of `cache_size` bytes each.
fn volume(p: Option<CachePolicy>, cache_size: u64, journal: u64) -> Result<Vol> {
    let arr = array(journal)?;
    Ok(match p {
        None => Vol::Bare(Box::new(arr)),
        Some(p) => Vol::Cached(Box::new(CacheVolume::new(arr, CacheConfig::uniform(p, cache_size))?)),
    })
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

/// Run `f` on a fresh volume to its end (cache synced): one sample.
fn measure(v: Vol, f: impl FnOnce(&Vol) -> Result<(u64, u64)>) -> Result<Sample> {
    let j0 = journal_counts(v.array());
    let (t0, c0) = (Instant::now(), cpu_seconds());
    let (ops, writes) = f(&v)?;
    v.finish()?;
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    let (c, _) = v.array().counters();
    let j1 = journal_counts(v.array());
    Ok(Sample { ops, writes, wall, cpu, dev: (c.device_reads(), c.device_writes()), journal: (j1.0 - j0.0, j1.1 - j0.1) })
}

/// `n` random 4 KiB writes over `footprint` bytes (the same ones every run).
fn random_writes(v: &Vol, n: u64, footprint: u64) -> Result<(u64, u64)> {
    let blocks = footprint / 4096;
    let buf = [0x5au8; 4096];
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..n {
        v.write(rng.gen_range(0..blocks) * 4096, &buf)?;
    }
    Ok((n, n))
}

/// The Postmark-like request stream, start to end.
fn postmark(v: &Vol, pm: &[Request]) -> Result<(u64, u64)> {
    let wbuf = vec![0x5au8; pm.iter().map(|r| r.len as usize).max().unwrap_or(0)];
    let mut rbuf = vec![0u8; wbuf.len()];
    let mut writes = 0u64;
    for r in pm {
        let len = r.len as usize;
        if r.op == Op::Write {
            v.write(r.offset, &wbuf[..len])?;
            writes += 1;
        } else {
            v.read(r.offset, &mut rbuf[..len])?;
        }
    }
    Ok((pm.len() as u64, writes))
}

/// The row of one (workload, config) from its samples: median rates;
/// device and journal counts from the last run (every run does the same
/// operations).
fn row(workload: &str, config: &str, s: &[Sample]) -> Row {
    let med = |f: &dyn Fn(&Sample) -> f64| median(s.iter().map(f).collect());
    let last = &s[s.len() - 1];
    Row {
        workload: workload.into(),
        config: config.into(),
        ops_per_sec: med(&|x| x.ops as f64 / x.wall),
        ops_per_cpu_sec: med(&|x| x.ops as f64 / x.cpu),
        ratio_to_no_cache: 0.0,
        device_reads_per_write: last.dev.0 as f64 / last.writes as f64,
        device_writes_per_write: last.dev.1 as f64 / last.writes as f64,
        journal_records_per_write: last.journal.0 as f64 / last.writes as f64,
        journal_checkpoints: last.journal.1,
    }
}

pub fn run(a: CacheBenchArgs) -> Result<i32> {
    let wanted = |p: &CachePolicy| a.configs.is_empty() || a.configs.contains(p);
    let configs: Vec<(String, Option<CachePolicy>)> = std::iter::once(("no cache".to_string(), None))
        .chain(CachePolicy::ALL.iter().filter(|p| wanted(p)).map(|p| (p.name().to_string(), Some(*p))))
        .collect();
    let pm = Postmark { files: 300, transactions: 1500, ..Default::default() }.requests();
    // One volume at a time: its 5 RAM members, its RAM journal and its
    // (up to) three cache structures.
    crate::util::check_ram(
        "RAM",
        &[
            (format!("5 RAM members of {}", human(MEMBER)), 5 * MEMBER),
            (format!("--journal-size {}", human(a.journal_size)), a.journal_size),
            (format!("--cache-size {} x 3 caches", human(a.cache_size)), a.cache_size.saturating_mul(3)),
        ],
    )?;
    // A write-back cache needs a journal that holds it many times over
    // (the volume's own check, said in the bench's flags before anything
    // is made).
    let need = CacheVolume::journal_needed(&CacheConfig::uniform(CachePolicy::PpcData, a.cache_size)).and_then(|n| n.checked_add(mosaic_array::journal::HEADER_BYTES));
    if need.map_or(true, |n| a.journal_size < n) {
        let need = need.map_or_else(|| format!("over {}", human(u64::MAX)), |n| format!("{} ({n} bytes)", human(n)));
        anyhow::bail!(
            "--journal-size {} is too small for --cache-size {}: the write-back caches need a journal of at least 8 x (write cache + parity cache) + 4 MiB and its 4 KiB header, {need}",
            human(a.journal_size),
            human(a.cache_size)
        );
    }
    let make = |p: &Option<CachePolicy>| volume(*p, a.cache_size, a.journal_size);
    let first = make(&None)?;
    let cap = first.array().capacity();
    anyhow::ensure!(a.footprint <= cap, "--footprint {}: more than the bench array's capacity of {}", human(a.footprint), human(cap));
    // One run unmeasured first: the process's first use of its heap (the
    // executor's and the caches' buffers; the devices are touched when
    // made) would otherwise fall on the first configuration measured, no
    // cache.
    measure(first, |v| random_writes(v, a.writes, a.footprint))?;
    // Runs interleave the configurations, so a slow spell of the machine
    // hits them all alike.
    let mut samples: Vec<[Vec<Sample>; 2]> = configs.iter().map(|_| [vec![], vec![]]).collect();
    for _ in 0..a.repeat {
        for (i, (_, p)) in configs.iter().enumerate() {
            samples[i][0].push(measure(make(p)?, |v| random_writes(v, a.writes, a.footprint))?);
            if !a.random_only {
                samples[i][1].push(measure(make(p)?, |v| postmark(v, &pm))?);
            }
        }
    }
    let random = format!("{} random 4 KiB writes over {}", a.writes, human(a.footprint));
    let mut rows: Vec<Row> = Vec::new();
    for ((name, _), s) in configs.iter().zip(&samples) {
        rows.push(row(&random, name, &s[0]));
        if !a.random_only {
            rows.push(row("Postmark-like", name, &s[1]));
        }
    }
    for i in 0..rows.len() {
        let base = rows.iter().find(|r| r.workload == rows[i].workload && r.config == "no cache").map(|r| r.ops_per_cpu_sec).unwrap_or(1.0);
        rows[i].ratio_to_no_cache = rows[i].ops_per_cpu_sec / base;
    }
    rows.sort_by(|x, y| x.workload.cmp(&y.workload));
    if a.json {
        print_json(&rows)?;
        return Ok(0);
    }
    println!("raid5 4+1 on RAM members, unit 4 KiB, RAM journal of {}; caches {} each (write-back)", human(a.journal_size), human(a.cache_size));
    println!("medians of {} runs; \"vs no cache\" compares operations per CPU second", a.repeat);
    let mut t = vec![vec!["workload".into(), "config".into(), "ops/s".into(), "ops/CPU s".into(), "vs no cache".into(), "dev r/write".into(), "dev w/write".into(), "records/write".into(), "checkpoints".into()]];
    for r in &rows {
        t.push(vec![
            r.workload.clone(),
            r.config.clone(),
            format!("{:.0}", r.ops_per_sec),
            format!("{:.0}", r.ops_per_cpu_sec),
            format!("{:.2}", r.ratio_to_no_cache),
            format!("{:.2}", r.device_reads_per_write),
            format!("{:.2}", r.device_writes_per_write),
            format!("{:.2}", r.journal_records_per_write),
            r.journal_checkpoints.to_string(),
        ]);
    }
    print!("{}", table(&t));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench's default journal (`--journal-size`).
    const JOURNAL: u64 = 96 << 20;

    /// `--journal-size` too small for the caches: the volume's own error,
    /// which says how much it needs.
    #[test]
    fn a_journal_too_small_for_the_caches_is_refused_with_what_it_needs() {
        let e = volume(Some(CachePolicy::PpcData), 1 << 20, 8 << 20).err().expect("refused").to_string();
        assert!(e.starts_with("journal mem:journal holds 8384512 bytes; a write-back ppc+data cache of 1048576 + 1048576 bytes needs at least 20971520 (8 x the caches + 4 MiB"), "{e}");
        assert!(e.ends_with("give smaller caches (--cache-size) or a larger journal (create --journal-size, or mosaic replace-journal)"), "{e}");
    }

    /// Device reads and writes of each configuration on the bench's two
    /// workloads (1 MiB caches): CPU work on the cache path must not change
    /// them.  Pinned from the code before the cache-CPU work; they equal
    /// `mosaic bench cache --writes 20000`'s per-write columns times the
    /// writes.  So are the journal checkpoints of the random writes, since
    /// a cache volume destages everything at each.  No cache journals one
    /// record a write; a cache at least its logical record.
    #[test]
    fn bench_workloads_do_the_same_device_operations() {
        let pm = Postmark { files: 300, transactions: 1500, ..Default::default() }.requests();
        let configs = [None, Some(CachePolicy::None), Some(CachePolicy::Fpc), Some(CachePolicy::Ppc), Some(CachePolicy::PpcData)];
        let mut got = Vec::new();
        let mut checkpoints = Vec::new();
        for p in configs {
            let r = measure(volume(p, 1 << 20, JOURNAL).unwrap(), |v| random_writes(v, 20_000, 8 << 20)).unwrap();
            let m = measure(volume(p, 1 << 20, JOURNAL).unwrap(), |v| postmark(v, &pm)).unwrap();
            got.push((r.dev, m.dev, m.writes));
            checkpoints.push(r.journal.1);
            match p {
                None => assert_eq!(r.journal.0, 20_000, "no cache: one record a write"),
                Some(p) => assert!(r.journal.0 >= 20_000, "{}: {} records for 20000 writes", p.name(), r.journal.0),
            }
        }
        assert_eq!(checkpoints, [1, 4, 3, 3, 3]);
        // (random reads, writes), (Postmark-like reads, writes), its writes
        let want = [
            ((40_000, 40_000), (12_853, 11_254), 5_428),
            ((20_861, 28_052), (2_329, 5_170), 5_428),
            ((20_760, 25_814), (2_246, 4_158), 5_428),
            ((17_287, 25_814), (2_238, 4_158), 5_428),
            ((9_373, 23_553), (1_407, 4_135), 5_428),
        ];
        assert_eq!(got, want);
    }
}
