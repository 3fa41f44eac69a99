//! `mosaic bench`: throughput as ratios against a reference measured in the
//! same run, because this machine is small and noisy.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::{Args, Subcommand};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use mosaic_array::{Array, CreateOptions};
use mosaic_core::Level;
use mosaic_dev::{MemMember, Member};

use crate::util::{human, median, print_json, table};

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Encode throughput of 4+1, 8+2, 10+4 with 64 KiB units, as a ratio to memcpy
    Encode(EncodeArgs),
    /// In-memory arrays (raid5 4+1, raid6 8+2) vs a single in-memory device
    Array(ArrayBenchArgs),
    /// Replay speed of a random-write trace on raid5 over 9 HDDs vs parsing the same trace
    Replay(ReplayBenchArgs),
    /// Small-write caches none/fpc/ppc/ppc+data on a real in-memory raid5 vs no cache
    Cache(crate::bench_cache::CacheBenchArgs),
    /// A real DVS array on zoned files vs raid5 with its journal: writes, scrub, rebuild
    Dvs(crate::bench_dvs::DvsBenchArgs),
    /// A real hybrid tier array (raid1 SSD + raid6 HDD files) vs its slow and its fast array alone
    Tier(crate::bench_tier::TierBenchArgs),
}

#[derive(Args)]
pub struct ReplayBenchArgs {
    /// Requests in the generated trace (1 to 100 million)
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=MAX_REPLAY_REQUESTS))]
    pub requests: u64,
    /// Runs (1 to 100); the rates are their medians
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeat: u16,
    /// Also write the replay's full report (JSON) here, to compare the
    /// simulator's output across versions
    #[arg(long)]
    pub report: Option<std::path::PathBuf>,
    /// Print the measurements as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct EncodeArgs {
    /// Seconds per measurement (fractions allowed)
    #[arg(long, default_value = "0.5", value_parser = bench_seconds)]
    pub seconds: Duration,
    /// Print the measurements as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ArrayBenchArgs {
    /// Seconds per measurement (fractions allowed)
    #[arg(long, default_value = "1", value_parser = bench_seconds)]
    pub seconds: Duration,
    /// Size of each in-memory member
    #[arg(long, value_parser = crate::util::size, default_value = "256M")]
    pub member_size: u64,
    /// Skip the 1 MiB sequential workload (profiling the small-write path)
    #[arg(long)]
    pub random_only: bool,
    /// Writers at once, each its own thread (a comma list measures each:
    /// `--threads 1,2,4` for the scaling table)
    #[arg(long, value_delimiter = ',', default_value = "1", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Vec<u16>,
    /// Give each array a RAM journal of this size, as `mosaic create`
    /// does (no write hole): the write path `mosaic serve` runs, each
    /// write also a journal record
    #[arg(long, value_parser = crate::util::size)]
    pub journal: Option<u64>,
    /// Give each array a write-intent bitmap of this much of each member
    /// a bit instead (`create --no-journal --bitmap internal`): what the
    /// bitmap costs a write once its regions are marked
    #[arg(long, value_parser = crate::util::size, conflicts_with = "journal")]
    pub bitmap: Option<u64>,
    /// Print the measurements as JSON
    #[arg(long)]
    pub json: bool,
}

/// The most `--requests` `bench replay` writes into its temporary trace
/// (about 5 GiB of text).
const MAX_REPLAY_REQUESTS: u64 = 100_000_000;

/// The longest `--seconds` a bench measures for (about 11.6 days).
const MAX_BENCH_SECONDS: f64 = 1e6;

/// clap value parser of the benches' `--seconds`: [`crate::util::seconds`]
/// up to [`MAX_BENCH_SECONDS`].
pub fn bench_seconds(s: &str) -> Result<Duration, String> {
    crate::util::seconds(s)
        .ok()
        .filter(|d| d.as_secs_f64() <= MAX_BENCH_SECONDS)
        .ok_or_else(|| format!("{s:?}: give a number of seconds above 0 and at most {MAX_BENCH_SECONDS}"))
}

pub fn run(cmd: BenchCmd) -> Result<i32> {
    match cmd {
        BenchCmd::Encode(a) => encode(a),
        BenchCmd::Array(a) => array(a),
        BenchCmd::Replay(a) => replay(a),
        BenchCmd::Cache(a) => crate::bench_cache::run(a),
        BenchCmd::Dvs(a) => crate::bench_dvs::run(a),
        BenchCmd::Tier(a) => crate::bench_tier::run(a),
    }
}

fn encode(a: EncodeArgs) -> Result<i32> {
    let dur = a.seconds;
    let mut results = Vec::new();
    for (k, m) in [(4, 1), (8, 2), (10, 4)] {
        results.push(mosaic_ec::bench_encode(k, m, 64 << 10, dur)?);
    }
    if a.json {
        print_json(&results)?;
        return Ok(0);
    }
    println!("encode kernel in use: {} (available: {})", mosaic_ec::kernel_name(), mosaic_ec::available_kernels().join(", "));
    let mut header: Vec<String> = vec!["code".into(), "kernel".into(), "encode MiB/s".into(), "memcpy MiB/s".into(), "ratio".into()];
    for (name, _) in results.first().map(|r| r.per_kernel.clone()).unwrap_or_default() {
        header.push(format!("{name} MiB/s"));
    }
    let mut rows = vec![header];
    for r in &results {
        let mut row = vec![
            format!("{}+{}", r.k, r.m),
            r.kernel.to_string(),
            format!("{:.0}", r.bytes_per_sec / 1048576.0),
            format!("{:.0}", r.memcpy_bytes_per_sec / 1048576.0),
            format!("{:.3}", r.ratio),
        ];
        for (_, v) in &r.per_kernel {
            row.push(format!("{:.0}", v / 1048576.0));
        }
        rows.push(row);
    }
    print!("{}", table(&rows));
    Ok(0)
}

#[derive(Serialize)]
struct ArrayBenchRow {
    layout: String,
    workload: String,
    threads: u16,
    array_per_sec: f64,
    reference_per_sec: f64,
    ratio: f64,
    unit: &'static str,
    /// Journal records appended per array write (`--journal`; else absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    journal_records_per_write: Option<f64>,
}

/// Run `f(thread, i)` from `threads` threads at once, each for about
/// `dur`; return operations per second, all threads together.
fn rate(dur: Duration, threads: u16, f: impl Fn(u16, u64) -> Result<()> + Sync) -> Result<f64> {
    rate_count(dur, threads, f).map(|(r, _)| r)
}

/// [`rate`] and the operations made.
fn rate_count(dur: Duration, threads: u16, f: impl Fn(u16, u64) -> Result<()> + Sync) -> Result<(f64, u64)> {
    let t0 = Instant::now();
    let counts: Vec<Result<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let f = &f;
                s.spawn(move || {
                    // At least one batch, even from a thread that starts late.
                    let mut n = 0u64;
                    loop {
                        for _ in 0..64 {
                            f(t, n)?;
                            n += 1;
                        }
                        if t0.elapsed() >= dur {
                            return Ok(n);
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a benchmark thread panicked")))).collect()
    });
    let n: u64 = counts.into_iter().sum::<Result<u64>>()?;
    Ok((n as f64 / t0.elapsed().as_secs_f64(), n))
}

/// Block `i` of thread `t`'s random sequence over `blocks` blocks (a
/// splitmix64 step: a few instructions, so the single device's rate is
/// not the generator's).
fn random_block(t: u16, i: u64, blocks: u64) -> u64 {
    let mut z = (((t as u64) << 48) ^ i).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) % blocks
}

fn array(a: ArrayBenchArgs) -> Result<i32> {
    let dur = a.seconds;
    let member_size = a.member_size;
    // At most raid6 8+2's 10 RAM members, a reference device of its 8 data
    // members' size and the journal at once.
    let mut need = vec![(format!("--member-size {} x 18 (raid6 8+2's 10 RAM members and a reference device of their capacity)", human(member_size)), member_size.saturating_mul(18))];
    if let Some(j) = a.journal {
        need.push((format!("--journal {}", human(j)), j));
    }
    crate::util::check_ram("RAM", &need)?;
    let mut rows = Vec::new();
    for (level, n) in [(Level::Raid5, 5usize), (Level::Raid6, 10usize)] {
        let members: Vec<(Arc<dyn Member>, String)> =
            (0..n).map(|i| (Arc::new(MemMember::new(format!("m{i}"), member_size)) as Arc<dyn Member>, format!("mem{i}"))).collect();
        let opts = CreateOptions { level, members: Some(n), member_size: None, unit: 64 << 10, block: 4096, force: true, assume_clean: true };
        let journal = a.journal.map(|size| Ok::<_, anyhow::Error>((crate::util::ram("journal", size)?, "mem-journal".to_string()))).transpose()?;
        let arr = Array::create_with_journal(members, &opts, true, journal)?;
        if a.bitmap.is_some() {
            arr.set_bitmap(a.bitmap)?;
        }
        let cap = arr.capacity();
        // The reference: one RAM device of the array's capacity, no redundancy.
        let reference = MemMember::new("ref", cap);
        let g = arr.geometry().clone();
        let extra = match (a.journal, a.bitmap) {
            (Some(_), _) => " + journal",
            (None, Some(_)) => " + bitmap",
            (None, None) => "",
        };
        let name = format!("{} {}+{}{extra}", level, g.k, g.m);
        // Journal records per array write over one measurement.
        let records = || arr.journal().map(|j| j.records.load(std::sync::atomic::Ordering::Relaxed));
        let timed = |threads: u16, f: &(dyn Fn(u16, u64) -> Result<()> + Sync)| -> Result<(f64, Option<f64>)> {
            let before = records();
            let (r, n) = rate_count(dur, threads, f)?;
            Ok((r, records().zip(before).map(|(a, b)| (a - b) as f64 / n.max(1) as f64)))
        };
        // Touch every page first so neither side pays page faults while timed.
        let warm = vec![0u8; 1 << 20];
        for off in (0..cap).step_by(1 << 20) {
            let n = (cap - off).min(1 << 20) as usize;
            arr.write(off, &warm[..n])?;
            reference.write_at(&warm[..n], off)?;
        }
        let blocks = cap / 4096;
        let buf4k = vec![0x5au8; 4096];
        let buf1m = vec![0xa5u8; 1 << 20];
        // Each thread writes its own run of whole MiBs, in turn.
        let mibs = cap >> 20;
        for &threads in &a.threads {
            let (arr_iops, per) = timed(threads, &|t, i| Ok(arr.write(random_block(t, i, blocks) * 4096, &buf4k)?))?;
            let ref_iops = rate(dur, threads, |t, i| Ok(reference.write_at(&buf4k, random_block(t, i, blocks) * 4096)?))?;
            let row = |workload: &str, a: f64, r: f64, unit, per| ArrayBenchRow {
                layout: name.clone(),
                workload: workload.into(),
                threads,
                array_per_sec: a,
                reference_per_sec: r,
                ratio: a / r,
                unit,
                journal_records_per_write: per,
            };
            rows.push(row("4 KiB random write", arr_iops, ref_iops, "IOPS", per));
            if a.random_only {
                continue;
            }
            let at = |t: u16, i: u64| ((t as u64 * mibs / threads as u64 + i) % mibs) << 20;
            let (arr_mbs, per) = timed(threads, &|t, i| Ok(arr.write(at(t, i), &buf1m)?))?;
            let ref_mbs = rate(dur, threads, |t, i| Ok(reference.write_at(&buf1m, at(t, i))?))?;
            rows.push(row("1 MiB sequential write", arr_mbs, ref_mbs, "MiB/s", per));
        }
    }
    if a.json {
        print_json(&rows)?;
        return Ok(0);
    }
    let mut t = vec![vec!["layout".into(), "workload".into(), "threads".into(), "array".into(), "single device".into(), "ratio".into()]];
    for r in &rows {
        t.push(vec![
            r.layout.clone(),
            r.workload.clone(),
            r.threads.to_string(),
            format!("{:.0} {}", r.array_per_sec, r.unit),
            format!("{:.0} {}", r.reference_per_sec, r.unit),
            format!("{:.3}", r.ratio),
        ]);
    }
    print!("{}", table(&t));
    Ok(0)
}

#[derive(Serialize)]
struct ReplayBench {
    requests: u64,
    runs: usize,
    /// Wall-clock rates (medians).
    parse_per_sec: f64,
    replay_per_sec: f64,
    ratio: f64,
    /// Per core: requests per CPU second (medians), which other
    /// processes on the machine disturb far less than wall time.
    parse_per_cpu_sec: f64,
    replay_per_cpu_sec: f64,
    simulated_seconds: f64,
}

/// Wall and CPU seconds `f` takes, and its result.
fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, f64, f64)> {
    let (t0, c0) = (Instant::now(), crate::util::cpu_seconds());
    let out = f()?;
    Ok((out, t0.elapsed().as_secs_f64(), crate::util::cpu_seconds() - c0))
}

fn replay(a: ReplayBenchArgs) -> Result<i32> {
    use mosaic_sim::{Mode, SimConfig, Simulator};
    use mosaic_trace::{Op, Request, TraceOptions, TraceWriter};
    // A random 4 KiB write trace over 100 GiB, written in MSR format.
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("randwrite.csv");
    {
        let f = std::io::BufWriter::new(std::fs::File::create(&path)?);
        let mut w = TraceWriter::new(f, "bench");
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for i in 0..a.requests {
            let r = Request { time_ns: i * 1_000, op: Op::Write, offset: rng.gen_range(0..(100u64 << 30) / 4096) * 4096, len: 4096 };
            w.write(&r, 0)?;
        }
        w.flush()?;
    }
    let opts = TraceOptions::default();
    let drive = mosaic_drives::preset("hdd:seagate-st91000640ss")?;
    let capacity = drive.build(None).capacity();
    let geo = mosaic_core::Geometry::new(Level::Raid5, 9, 64 << 10, 512, capacity)?;
    let layout = mosaic_core::FixedLayout::new(geo)?;
    let (mut parse, mut replay) = (vec![], vec![]);
    let mut last = None;
    for _ in 0..a.repeat {
        let (parsed, wall, cpu) = timed(|| Ok(mosaic_trace::open(&path, &opts)?.try_fold(0u64, |n, r| r.map(|_| n + 1))?))?;
        parse.push((parsed, wall, cpu));
        let drives: Vec<Box<dyn mosaic_drives::DriveModel>> = (0..9).map(|_| drive.build(None)).collect();
        let (rep, wall, cpu) = timed(|| {
            let sim = Simulator::new(&layout, drives, SimConfig { mode: Mode::Closed { queue_depth: 32 }, ..Default::default() })?;
            Ok(sim.run(mosaic_trace::open(&path, &opts)?)?)
        })?;
        anyhow::ensure!(rep.requests == parsed, "replayed {} of {} requests", rep.requests, parsed);
        replay.push((wall, cpu));
        last = Some(rep);
    }
    let rep = last.expect("at least one run");
    if let Some(p) = &a.report {
        std::fs::write(p, serde_json::to_string_pretty(&rep)?)?;
    }
    let n = rep.requests as f64;
    let rate = |v: Vec<f64>| median(v.into_iter().map(|s| n / s).collect());
    let out = ReplayBench {
        requests: rep.requests,
        runs: replay.len(),
        parse_per_sec: rate(parse.iter().map(|p| p.1).collect()),
        replay_per_sec: rate(replay.iter().map(|r| r.0).collect()),
        ratio: median(parse.iter().zip(&replay).map(|(p, r)| p.1 / r.0).collect()),
        parse_per_cpu_sec: rate(parse.iter().map(|p| p.2).collect()),
        replay_per_cpu_sec: rate(replay.iter().map(|r| r.1).collect()),
        simulated_seconds: rep.duration_s,
    };
    if a.json {
        print_json(&out)?;
    } else {
        println!("{} requests, raid5 9 x HDD, {:.0} s of virtual time; medians of {} runs:", out.requests, out.simulated_seconds, out.runs);
        println!("  parse only                  {:>10.0} req/s {:>10.0} req/CPU s", out.parse_per_sec, out.parse_per_cpu_sec);
        println!("  parse + plan + simulate     {:>10.0} req/s {:>10.0} req/CPU s", out.replay_per_sec, out.replay_per_cpu_sec);
        println!("  ratio (wall)                {:>10.3}", out.ratio);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Every thread writes, the rate counts all of them, and an error in
    /// one thread is the benchmark's error.
    #[test]
    fn rate_runs_every_thread_and_counts_all() {
        let calls: Vec<AtomicU64> = (0..3).map(|_| AtomicU64::new(0)).collect();
        let t0 = Instant::now();
        let r = rate(Duration::from_millis(30), 3, |t, _| {
            calls[t as usize].fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
        let total: u64 = calls.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert!(calls.iter().all(|c| c.load(Ordering::Relaxed) >= 64), "each thread ran: {calls:?}");
        let measured = total as f64 / t0.elapsed().as_secs_f64();
        assert!(r >= measured * 0.99, "the rate counts every thread's operations: {r} < {measured}");
        let e = rate(Duration::from_millis(5), 2, |t, i| if t == 1 && i == 3 { anyhow::bail!("device gone") } else { Ok(()) }).unwrap_err();
        assert_eq!(e.to_string(), "device gone");
    }

    #[test]
    fn random_blocks_stay_inside_and_differ_by_thread() {
        let a: Vec<u64> = (0..1000).map(|i| random_block(0, i, 777)).collect();
        let b: Vec<u64> = (0..1000).map(|i| random_block(1, i, 777)).collect();
        assert!(a.iter().chain(&b).all(|&x| x < 777));
        assert_ne!(a, b);
        let distinct: std::collections::BTreeSet<u64> = a.iter().copied().collect();
        assert!(distinct.len() > 500, "spread over the device: {}", distinct.len());
    }
}
