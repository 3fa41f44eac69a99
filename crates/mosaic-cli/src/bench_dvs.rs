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
//!
//! `--repeat N` runs N rounds; in each, every scheme gets a fresh array
//! and every measurement, one scheme after the other, so a ratio is taken
//! within a round (load from other processes hits raid5 and DVS alike) and
//! the table shows medians: of the rates, and of the same-round ratios.
//! `--threads 1,2,8` measures the random writes at each writer count (a
//! fresh array each); `--random-only` skips scrub and rebuild.

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

use crate::util::{cpu_seconds, human, median, print_json, size, table};

#[derive(Args)]
pub struct DvsBenchArgs {
    /// Seconds per random-write measurement
    #[arg(long, default_value = "1", value_parser = crate::cmd_bench::bench_seconds)]
    pub seconds: Duration,
    /// Size of each member: a whole number of 4 MiB zones, at least 12
    /// MiB (the bench needs room for it, 6 times, in its scratch directory)
    #[arg(long, value_parser = member_size, default_value = "64M")]
    pub member_size: u64,
    /// Writers issuing the random writes at once (queue depth): DVS
    /// writes that meet share one journal write and flush per member,
    /// raid5's share its journal's flush (group commit).  A comma list
    /// measures each (`--threads 1,2,8`), on a fresh array each
    #[arg(long, value_delimiter = ',', default_value = "1", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Vec<u16>,
    /// Rounds; every scheme is measured once a round, and the table shows
    /// medians of the rates and of the ratios within a round
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeat: u16,
    /// Only the sequential fill and the random writes (no scrub, no rebuild)
    #[arg(long)]
    pub random_only: bool,
    /// Print the measurements as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Row {
    workload: &'static str,
    scheme: String,
    /// Writers at once, for the random writes; the fill, scrub and
    /// rebuild rows are those of the first count's array.
    threads: u16,
    /// Median over the rounds.
    per_sec: f64,
    unit: &'static str,
    /// Median of the rounds' ratios to raid5 (same workload, writers and
    /// round).
    ratio_to_raid5: f64,
    /// Each round's rate, and its ratio to raid5 in that round.
    per_round: Vec<f64>,
    ratios_per_round: Vec<f64>,
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
/// The smallest member: 3 zones (fewer leave a DVS array with its cache no
/// zone for data besides its metadata and journal).
const MIN_MEMBER: u64 = 3 * ZONE;
/// raid5's journal, a file beside its members.
const RAID5_JOURNAL: u64 = 64 << 20;

/// clap value parser of `--member-size`: whole zones, at least
/// [`MIN_MEMBER`].
fn member_size(s: &str) -> Result<u64, String> {
    match size(s).map_err(|e| e.to_string())? {
        b if b < MIN_MEMBER || b % ZONE != 0 => Err(format!("{s:?}: give a whole number of {} zones, at least {} (3 zones)", human(ZONE), human(MIN_MEMBER))),
        b => Ok(b),
    }
}

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
        Array::create_journaled(&ArraySpec::Dir(dir.to_path_buf()), &o, Some((&dir.join("journal.img"), RAID5_JOURNAL)))?.close()?;
    } else {
        let cache = if scheme == "dvs" { 0 } else { (16 << 20) / UNIT };
        let spec = files::CreateSpec { members: 5, member_size, chunk: UNIT, block: 4096, zone_size: ZONE, parity: 1, cache_chunks: cache };
        files::create_in_dir(dir, &spec, true)?.flush()?;
    }
    Ok(mosaic_volume::open(&dir.display().to_string(), true)?)
}

/// Where [`scratch`] makes its directory: /dev/shm (RAM) when it exists,
/// else the temporary directory.
pub fn scratch_base() -> std::path::PathBuf {
    match std::fs::metadata("/dev/shm") {
        Ok(m) if m.is_dir() => "/dev/shm".into(),
        _ => std::env::temp_dir(),
    }
}

/// A scratch directory: in RAM when /dev/shm exists.
pub fn scratch() -> Result<tempfile::TempDir> {
    Ok(tempfile::tempdir_in(scratch_base()).or_else(|_| tempfile::tempdir())?)
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

/// What one round measured of one scheme at one writer count: per
/// workload, the rate; for the random writes, ops, KiB and CPU us a write.
struct Measured {
    rates: Vec<(&'static str, f64, &'static str)>,
    per_write: (f64, f64, f64),
}

/// Fresh array of `scheme`, filled, then `threads` writers at random
/// blocks for `dur`: their rate, with the fill's when `fill`, and scrub's
/// and rebuild's (measured after) when `maint`.
fn measure(scheme: &str, member_size: u64, dur: Duration, threads: usize, fill: bool, maint: bool) -> Result<Measured> {
    let tmp = scratch()?;
    let dir = tmp.path().join("array");
    let v = make(&dir, scheme, member_size)?;
    let cap = v.capacity();
    // Sequential fill of the whole capacity, then random writes over it.
    let seq = sequential(v.as_ref(), cap)?;
    let mut rates = if fill { vec![("1 MiB sequential write", seq, "MiB/s")] } else { Vec::new() };
    v.reset_counters();
    let c0 = cpu_seconds();
    let (iops, n) = random_writers(v.as_ref(), cap, dur, threads)?;
    let cpu = (cpu_seconds() - c0) * 1e6 / n.max(1) as f64;
    let io = v.io_counters().members;
    let per = |x: u64| x as f64 / n.max(1) as f64;
    let ops = per(io.iter().map(|m| m.reads + m.writes).sum());
    let kib = per(io.iter().map(|m| m.read_bytes + m.write_bytes).sum()) / 1024.0;
    rates.push(("4 KiB random write", iops, "IOPS"));
    if maint {
        rates.push(("scrub (array bytes read)", scrub(v.as_ref())? / (1 << 20) as f64, "MiB/s"));
        rates.push(("rebuild (member bytes written)", rebuild(v.as_ref(), tmp.path())? / (1 << 20) as f64, "MiB/s"));
    }
    Ok(Measured { rates, per_write: (ops, kib, cpu) })
}

const SCHEMES: [(&str, &str); 3] = [("raid5", "raid5 4+1 + journal"), ("dvs", "dvs 4+1 write-through"), ("dvs+cache", "dvs 4+1 + 16 MiB SSG cache")];

/// One round's measurement of (workload, scheme label, writers).
struct Sample {
    workload: &'static str,
    scheme: &'static str,
    threads: u16,
    round: u16,
    rate: f64,
    unit: &'static str,
    per_write: Option<(f64, f64, f64)>,
}

/// The rows: per (workload, scheme, writers) in measurement order, the
/// medians over rounds of the rates, of the same-round ratios to raid5
/// and of the per-write figures.
fn rows(samples: &[Sample]) -> Vec<Row> {
    let mut keys: Vec<(&'static str, &'static str, u16)> = Vec::new();
    for s in samples {
        if !keys.contains(&(s.workload, s.scheme, s.threads)) {
            keys.push((s.workload, s.scheme, s.threads));
        }
    }
    let raid5 = |w: &str, t: u16, r: u16| samples.iter().find(|s| s.workload == w && s.scheme == SCHEMES[0].1 && s.threads == t && s.round == r).map_or(f64::NAN, |s| s.rate);
    let mut rows: Vec<Row> = keys
        .into_iter()
        .map(|(workload, scheme, threads)| {
            let mine: Vec<&Sample> = samples.iter().filter(|s| (s.workload, s.scheme, s.threads) == (workload, scheme, threads)).collect();
            let per_round: Vec<f64> = mine.iter().map(|s| s.rate).collect();
            let ratios_per_round: Vec<f64> = mine.iter().map(|s| s.rate / raid5(workload, threads, s.round)).collect();
            let pw = |f: fn(&(f64, f64, f64)) -> f64| {
                let v: Vec<f64> = mine.iter().filter_map(|s| s.per_write.as_ref().map(f)).collect();
                (!v.is_empty()).then(|| median(v))
            };
            Row {
                workload,
                scheme: scheme.to_string(),
                threads,
                per_sec: median(per_round.clone()),
                unit: mine[0].unit,
                ratio_to_raid5: median(ratios_per_round.clone()),
                per_round,
                ratios_per_round,
                member_ops_per_write: pw(|p| p.0),
                member_kib_per_write: pw(|p| p.1),
                cpu_us_per_write: pw(|p| p.2),
            }
        })
        .collect();
    rows.sort_by_key(|r| r.workload);
    rows
}

pub fn run(a: DvsBenchArgs) -> Result<i32> {
    let dur = a.seconds;
    // One scheme's files at a time, every one filled: the fill writes
    // the whole capacity, the rebuild a whole replacement member.
    let (files, which) = if a.random_only { (5, "5 members") } else { (6, "5 members and a rebuild's replacement") };
    crate::util::check_space(
        &scratch_base(),
        &[
            (format!("--member-size {} x {files} ({which})", human(a.member_size)), a.member_size.saturating_mul(files)),
            (format!("raid5's journal of {}", human(RAID5_JOURNAL)), RAID5_JOURNAL),
        ],
    )?;
    let mut counts: Vec<u16> = Vec::new();
    for &t in &a.threads {
        if !counts.contains(&t) {
            counts.push(t);
        }
    }
    let mut samples: Vec<Sample> = Vec::new();
    for round in 0..a.repeat {
        for (i, &threads) in counts.iter().enumerate() {
            for (scheme, label) in SCHEMES {
                // Fill, scrub and rebuild once a round (they take no writers).
                let m = measure(scheme, a.member_size, dur, threads as usize, i == 0, !a.random_only && i == 0)?;
                for (workload, rate, unit) in m.rates {
                    let per_write = workload.starts_with("4 KiB").then_some(m.per_write);
                    samples.push(Sample { workload, scheme: label, threads, round, rate, unit, per_write });
                }
            }
        }
    }
    let rows = rows(&samples);
    if a.json {
        print_json(&rows)?;
        return Ok(0);
    }
    println!("members: 5 x {} ({} zones for DVS), unit {}; medians of {} round(s)", human(a.member_size), human(ZONE), human(UNIT), a.repeat);
    let mut t = vec![vec!["workload".into(), "scheme".into(), "writers".into(), "rate".into(), "unit".into(), "vs raid5".into(), "ops/write".into(), "KiB/write".into(), "CPU us/write".into()]];
    for r in &rows {
        let ops = r.member_ops_per_write.map_or(String::new(), |o| format!("{o:.1}"));
        let kib = r.member_kib_per_write.map_or(String::new(), |k| format!("{k:.0}"));
        let cpu = r.cpu_us_per_write.map_or(String::new(), |c| format!("{c:.1}"));
        t.push(vec![r.workload.to_string(), r.scheme.clone(), r.threads.to_string(), format!("{:.1}", r.per_sec), r.unit.to_string(), format!("{:.2}", r.ratio_to_raid5), ops, kib, cpu]);
    }
    print!("{}", table(&t));
    Ok(0)
}
