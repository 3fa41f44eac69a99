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
}

#[derive(Args)]
pub struct EncodeArgs {
    /// Seconds per measurement
    #[arg(long, default_value_t = 0.5)]
    pub seconds: f64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ArrayBenchArgs {
    /// Seconds per measurement
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Member size in MiB
    #[arg(long, default_value_t = 256)]
    pub member_mib: u64,
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: BenchCmd) -> Result<i32> {
    match cmd {
        BenchCmd::Encode(a) => encode(a),
        BenchCmd::Array(a) => array(a),
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
    let member_size = a.member_mib << 20;
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
