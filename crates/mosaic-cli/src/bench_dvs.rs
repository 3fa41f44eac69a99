//! `mosaic bench dvs`: a real DVS array (4+1 on emulated zoned files)
//! against raid5 4+1 with its write-ahead journal on plain files, same
//! member size, same scratch directory (RAM when /dev/shm exists), as
//! ratios to raid5 measured in the same run.  Both close the write hole:
//! DVS by logging after its appends, raid5 by its journal.
//!
//! ```text
//!   4 KiB random writes   DVS write-through | DVS + 16 MiB SSG cache | raid5 + journal
//!                         (--threads writers at once; member ops, KiB and process
//!                         CPU microseconds per write;
//!                         each over its own capacity: the cached DVS's journal,
//!                         sized to its cache, takes conventional zones)
//!   1 MiB sequential      (each volume filled once first, so rebuild and scrub see full members)
//!   rebuild               fail member 1, replace with a new file, rebuild: member MiB/s
//!   scrub                 every stripe read and checked: array MiB/s read
//! ```

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::spec::ArraySpec;
use mosaic_array::{Array, CreateOptions};
use mosaic_core::Level;
use mosaic_dvs::files;
use mosaic_volume::Volume;

use crate::util::{cpu_seconds, human, print_json, size, table};

#[derive(Args)]
pub struct DvsBenchArgs {
    /// Seconds per random-write measurement
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Size of each member
    #[arg(long, value_parser = size, default_value = "64M")]
    pub member_size: u64,
    /// Writers issuing the random writes at once (queue depth): DVS
    /// writes that meet share one journal write and flush per member,
    /// raid5's share its journal's flush (group commit)
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Print the measurements as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Row {
    workload: &'static str,
    scheme: String,
    per_sec: f64,
    unit: &'static str,
    ratio_to_raid5: f64,
    /// Random writes: member reads + writes (data, parity, metadata log,
    /// DVS's journal; not raid5's journal device, not flushes) per
    /// client write, the final flush included.
    #[serde(skip_serializing_if = "Option::is_none")]
    member_ops_per_write: Option<f64>,
    /// Random writes: member KiB read + written per client write.
    #[serde(skip_serializing_if = "Option::is_none")]
    member_kib_per_write: Option<f64>,
    /// Random writes: CPU microseconds of the whole process (every
    /// thread: writers, DVS's destager, I/O threads) per client write,
    /// the final flush included; steadier than IOPS on a busy machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_us_per_write: Option<f64>,
}

const UNIT: u64 = 64 << 10;
const ZONE: u64 = 4 << 20;

/// Fail member 1, put a new file in, rebuild: member bytes written per second.
fn rebuild(v: &dyn Volume, dir: &Path) -> Result<f64> {
    v.fail_member(1)?;
    v.replace(1, &dir.join("replacement"))?;
    let r = v.rebuild(&|_, _| {}, RebuildOptions::default())?;
    Ok(r.bytes_written as f64 / r.seconds.max(1e-9))
}

/// Scrub without repair: array bytes read per second.
fn scrub(v: &dyn Volume) -> Result<f64> {
    let r = v.scrub(false, &|_, _| {})?;
    anyhow::ensure!(r.mismatched == 0, "scrub found {} bad stripes", r.mismatched);
    Ok(r.bytes_read as f64 / r.seconds.max(1e-9))
}

/// Create the array of `scheme` in `dir` and open it as a volume.
fn make(dir: &Path, scheme: &str, member_size: u64) -> Result<Box<dyn Volume>> {
    std::fs::create_dir_all(dir)?;
    if scheme == "raid5" {
        let o = CreateOptions { level: Level::Raid5, members: Some(5), member_size: Some(member_size), unit: UNIT, block: 4096, force: true, assume_clean: true };
        Array::create_journaled(&ArraySpec::Dir(dir.to_path_buf()), &o, Some((&dir.join("journal.img"), 64 << 20)))?.close()?;
    } else {
        let cache = if scheme == "dvs" { 0 } else { (16 << 20) / UNIT };
        let spec = files::CreateSpec { members: 5, member_size, chunk: UNIT, block: 4096, zone_size: ZONE, parity: 1, cache_chunks: cache };
        files::create_in_dir(dir, &spec, true)?.flush()?;
    }
    Ok(mosaic_volume::open(&dir.display().to_string(), true)?)
}

/// A scratch directory: in RAM when /dev/shm exists.
pub fn scratch() -> Result<tempfile::TempDir> {
    match std::fs::metadata("/dev/shm") {
        Ok(m) if m.is_dir() => Ok(tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir())?),
        _ => Ok(tempfile::tempdir()?),
    }
}

/// MiB/s of 1 MiB writes over `[0, footprint)`, flushed.
pub fn sequential(v: &dyn Volume, footprint: u64) -> Result<f64> {
    let buf = vec![0xa5u8; 1 << 20];
    let t0 = Instant::now();
    let mut off = 0;
    while off < footprint {
        let n = (footprint - off).min(1 << 20) as usize;
        v.write(off, &buf[..n])?;
        off += n as u64;
    }
    v.flush()?;
    Ok(footprint as f64 / (1 << 20) as f64 / t0.elapsed().as_secs_f64())
}

/// IOPS of 4 KiB writes at random blocks of `[0, footprint)` for `dur`, flushed.
pub fn random(v: &dyn Volume, footprint: u64, dur: Duration) -> Result<f64> {
    Ok(random_writers(v, footprint, dur, 1)?.0)
}

/// [`random`] from `threads` writers at once: IOPS and writes made.
pub fn random_writers(v: &dyn Volume, footprint: u64, dur: Duration, threads: usize) -> Result<(f64, u64)> {
    let blocks = footprint / 4096;
    let t0 = Instant::now();
    let writer = |seed: u64| -> Result<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let buf = vec![0x5au8; 4096];
        let mut n = 0u64;
        while t0.elapsed() < dur {
            for _ in 0..16 {
                v.write(rng.gen_range(0..blocks) * 4096, &buf)?;
                n += 1;
            }
        }
        Ok(n)
    };
    let counts: Vec<Result<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads.max(1) as u64).map(|i| s.spawn(move || writer(1 + i))).collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a writer panicked")))).collect()
    });
    let mut n = 0;
    for c in counts {
        n += c?;
    }
    v.flush()?;
    Ok((n as f64 / t0.elapsed().as_secs_f64(), n))
}

pub fn run(a: DvsBenchArgs) -> Result<i32> {
    let dur = Duration::from_secs_f64(a.seconds);
    let schemes = ["raid5", "dvs", "dvs+cache"];
    let mut rows: Vec<Row> = Vec::new();
    for scheme in schemes {
        let tmp = scratch()?;
        let dir = tmp.path().join("array");
        let v = make(&dir, scheme, a.member_size)?;
        let cap = v.capacity();
        let label = match scheme {
            "raid5" => "raid5 4+1 + journal".to_string(),
            "dvs" => "dvs 4+1 write-through".to_string(),
            _ => "dvs 4+1 + 16 MiB SSG cache".to_string(),
        };
        // Sequential fill of the whole capacity, then random writes over it.
        let row = |workload, scheme: &String, per_sec, unit| Row { workload, scheme: scheme.clone(), per_sec, unit, ratio_to_raid5: 0.0, member_ops_per_write: None, member_kib_per_write: None, cpu_us_per_write: None };
        rows.push(row("1 MiB sequential write", &label, sequential(v.as_ref(), cap)?, "MiB/s"));
        v.reset_counters();
        let c0 = cpu_seconds();
        let (iops, n) = random_writers(v.as_ref(), cap, dur, a.threads)?;
        let cpu = (cpu_seconds() - c0) * 1e6 / n.max(1) as f64;
        let io = v.io_counters().members;
        let per = |x: u64| x as f64 / n.max(1) as f64;
        let ops = per(io.iter().map(|m| m.reads + m.writes).sum());
        let kib = per(io.iter().map(|m| m.read_bytes + m.write_bytes).sum()) / 1024.0;
        rows.push(Row { member_ops_per_write: Some(ops), member_kib_per_write: Some(kib), cpu_us_per_write: Some(cpu), ..row("4 KiB random write", &label, iops, "IOPS") });
        let s = scrub(v.as_ref())?;
        rows.push(row("scrub (array bytes read)", &label, s / (1 << 20) as f64, "MiB/s"));
        let r = rebuild(v.as_ref(), tmp.path())?;
        rows.push(row("rebuild (member bytes written)", &label, r / (1 << 20) as f64, "MiB/s"));
    }
    let reference: Vec<(&'static str, f64)> = rows.iter().filter(|r| r.scheme.starts_with("raid5")).map(|r| (r.workload, r.per_sec)).collect();
    for r in &mut rows {
        let base = reference.iter().find(|x| x.0 == r.workload).map(|x| x.1).unwrap_or(f64::NAN);
        r.ratio_to_raid5 = r.per_sec / base;
    }
    rows.sort_by_key(|r| r.workload);
    if a.json {
        print_json(&rows)?;
        return Ok(0);
    }
    println!("members: 5 x {} ({} zones for DVS), unit {}, {} writer(s)", human(a.member_size), human(ZONE), human(UNIT), a.threads.max(1));
    let mut t = vec![vec!["workload".into(), "scheme".into(), "rate".into(), "unit".into(), "vs raid5".into(), "ops/write".into(), "KiB/write".into(), "CPU us/write".into()]];
    for r in &rows {
        let ops = r.member_ops_per_write.map_or(String::new(), |o| format!("{o:.1}"));
        let kib = r.member_kib_per_write.map_or(String::new(), |k| format!("{k:.0}"));
        let cpu = r.cpu_us_per_write.map_or(String::new(), |c| format!("{c:.1}"));
        t.push(vec![r.workload.to_string(), r.scheme.clone(), format!("{:.1}", r.per_sec), r.unit.to_string(), format!("{:.2}", r.ratio_to_raid5), ops, kib, cpu]);
    }
    print!("{}", table(&t));
    Ok(0)
}
