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

use crate::util::{print_json, table};

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
    /// Requests in the generated trace
    #[arg(long, default_value_t = 1_000_000)]
    pub requests: u64,
    /// Print the measurements as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct EncodeArgs {
    /// Seconds per measurement (fractions allowed)
    #[arg(long, default_value_t = 0.5)]
    pub seconds: f64,
    /// Print the measurements as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ArrayBenchArgs {
    /// Seconds per measurement (fractions allowed)
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Size of each in-memory member
    #[arg(long, value_parser = crate::util::size, default_value = "256M")]
    pub member_size: u64,
    /// Skip the 1 MiB sequential workload (profiling the small-write path)
    #[arg(long)]
    pub random_only: bool,
    /// Print the measurements as JSON
    #[arg(long)]
    pub json: bool,
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
    let dur = Duration::from_secs_f64(a.seconds);
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
    array_per_sec: f64,
    reference_per_sec: f64,
    ratio: f64,
    unit: &'static str,
}

/// Run `f` repeatedly for about `dur`; return operations per second.
fn rate(dur: Duration, mut f: impl FnMut(u64) -> Result<()>) -> Result<f64> {
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < dur {
        for _ in 0..64 {
            f(n)?;
            n += 1;
        }
    }
    Ok(n as f64 / t0.elapsed().as_secs_f64())
}

fn array(a: ArrayBenchArgs) -> Result<i32> {
    let dur = Duration::from_secs_f64(a.seconds);
    let member_size = a.member_size;
    let mut rows = Vec::new();
    for (level, n) in [(Level::Raid5, 5usize), (Level::Raid6, 10usize)] {
        let members: Vec<(Arc<dyn Member>, String)> =
            (0..n).map(|i| (Arc::new(MemMember::new(format!("m{i}"), member_size)) as Arc<dyn Member>, format!("mem{i}"))).collect();
        let opts = CreateOptions { level, members: Some(n), member_size: None, unit: 64 << 10, block: 4096, force: true, assume_clean: true };
        let arr = Array::create_on(members, &opts, true)?;
        let cap = arr.capacity();
        // The reference: one RAM device of the array's capacity, no redundancy.
        let reference = MemMember::new("ref", cap);
        let g = arr.geometry().clone();
        let name = format!("{} {}+{}", level, g.k, g.m);
        // Touch every page first so neither side pays page faults while timed.
        let warm = vec![0u8; 1 << 20];
        for off in (0..cap).step_by(1 << 20) {
            let n = (cap - off).min(1 << 20) as usize;
            arr.write(off, &warm[..n])?;
            reference.write_at(&warm[..n], off)?;
        }

        let blocks = cap / 4096;
        let buf4k = vec![0x5au8; 4096];
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let arr_iops = rate(dur, |_| Ok(arr.write(rng.gen_range(0..blocks) * 4096, &buf4k)?))?;
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let ref_iops = rate(dur, |_| Ok(reference.write_at(&buf4k, rng.gen_range(0..blocks) * 4096)?))?;
        rows.push(ArrayBenchRow {
            layout: name.clone(),
            workload: "4 KiB random write".into(),
            array_per_sec: arr_iops,
            reference_per_sec: ref_iops,
            ratio: arr_iops / ref_iops,
            unit: "IOPS",
        });

        if a.random_only {
            continue;
        }
        let buf1m = vec![0xa5u8; 1 << 20];
        let mibs = cap >> 20;
        let arr_mbs = rate(dur, |i| Ok(arr.write((i % mibs) << 20, &buf1m)?))?;
        let ref_mbs = rate(dur, |i| Ok(reference.write_at(&buf1m, (i % mibs) << 20)?))?;
        rows.push(ArrayBenchRow {
            layout: name,
            workload: "1 MiB sequential write".into(),
            array_per_sec: arr_mbs,
            reference_per_sec: ref_mbs,
            ratio: arr_mbs / ref_mbs,
            unit: "MiB/s",
        });
    }
    if a.json {
        print_json(&rows)?;
        return Ok(0);
    }
    let mut t = vec![vec!["layout".into(), "workload".into(), "array".into(), "single device".into(), "ratio".into()]];
    for r in &rows {
        t.push(vec![
            r.layout.clone(),
            r.workload.clone(),
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
    parse_per_sec: f64,
    replay_per_sec: f64,
    ratio: f64,
    simulated_seconds: f64,
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
    let t0 = Instant::now();
    let parsed = mosaic_trace::open(&path, &opts)?.try_fold(0u64, |n, r| r.map(|_| n + 1))?;
    let parse_s = t0.elapsed().as_secs_f64();

    let drive = mosaic_drives::preset("hdd:seagate-st91000640ss")?;
    let drives: Vec<Box<dyn mosaic_drives::DriveModel>> = (0..9).map(|_| drive.build(None)).collect();
    let geo = mosaic_core::Geometry::new(Level::Raid5, 9, 64 << 10, 512, drives[0].capacity())?;
    let layout = mosaic_core::FixedLayout::new(geo)?;
    let t0 = Instant::now();
    let sim = Simulator::new(&layout, drives, SimConfig { mode: Mode::Closed { queue_depth: 32 }, ..Default::default() })?;
    let rep = sim.run(mosaic_trace::open(&path, &opts)?)?;
    let replay_s = t0.elapsed().as_secs_f64();
    anyhow::ensure!(rep.requests == parsed, "replayed {} of {} requests", rep.requests, parsed);
    let out = ReplayBench {
        requests: parsed,
        parse_per_sec: parsed as f64 / parse_s,
        replay_per_sec: parsed as f64 / replay_s,
        ratio: parse_s / replay_s,
        simulated_seconds: rep.duration_s,
    };
    if a.json {
        print_json(&out)?;
    } else {
        println!(
            "{} requests: parse only {:.0} req/s, replay (parse + plan + simulate, raid5 9 x HDD) {:.0} req/s, ratio {:.3}; {:.0} s of virtual time",
            out.requests, out.parse_per_sec, out.replay_per_sec, out.ratio, out.simulated_seconds
        );
    }
    Ok(0)
}
