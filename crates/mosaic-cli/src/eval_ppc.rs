//! `mosaic eval ppc`: the small-write caches of Chung & Hsu (IEEE TVLSI
//! 2014) side by side — none (RAID-5 behind a write cache), fpc, ppc and
//! ppc+data — on an SSD raid5, replayed in virtual time.
//!
//! * Postmark-like small-file churn and IOzone-like sequential rewrite
//!   (`mosaic_sim::fsgen`) on raid5 4+1: parity-generation reads and writes
//!   per write request, and performance normalised to `none`;
//! * the stripe-width sweep 4+1 .. 7+1 under the Postmark-like workload;
//! * the real trace and synthetic 4 KiB random writes.
//!
//! The paper's numbers to set beside ours: performance 1.0 / 1.13 / 1.47 /
//! 1.76 for RAID-5 / FPC / PPC / proposed under Postmark, and 1.0 / 1.15 /
//! 1.29 / 1.47 for the proposed scheme across widths 4+1 .. 7+1.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use mosaic_core::{CacheConfig, CachePolicy, CacheStats, CachedArray, Health, WritePolicy};
use mosaic_sim::fsgen::{iozone, Postmark};
use mosaic_sim::{Mode, Pattern, SimConfig, SimReport, Simulator, Synthetic};
use mosaic_trace::Request;

use crate::cmd_sim::{build_drives, layout_for};
use crate::util::{print_json, size, table};

#[derive(Args)]
pub struct PpcArgs {
    /// Drive model of every member
    #[arg(long, default_value = "ssd:samsung-830-128g")]
    pub device: String,
    /// Stripe unit = cache page
    #[arg(long, value_parser = size, default_value = "4K")]
    pub unit: u64,
    /// Size of each structure (write cache, parity cache, old-data buffer)
    /// for the Postmark-like and IOzone-like runs (the paper: 8 pages each)
    #[arg(long, value_parser = size, default_value = "32K")]
    pub cache_size: u64,
    /// Cache size for the real trace and the 4 KiB random writes
    #[arg(long, value_parser = size, default_value = "16M")]
    pub trace_cache_size: u64,
    /// The real trace (default ../shared/traces/cloudphysics-vscsi-part1.csv, skipped with a note when that is absent)
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Seed of the Postmark-like and random workloads
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print every point as JSON
    #[arg(long)]
    pub json: bool,
    /// Write SVG plots into this directory
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Overwrite plot files that are members or journals of an array
    #[arg(long)]
    pub force: bool,
}

/// The files `--plot DIR` receives.
const PLOTS: [&str; 2] = ["ppc-postmark.svg", "ppc-width.svg"];

/// One policy on one workload.
#[derive(Serialize, Clone)]
pub struct PpcPoint {
    pub workload: String,
    pub width: usize,
    pub policy: String,
    pub writes: u64,
    /// Parity-generation reads and code writes per write request, final
    /// flush of the caches included.
    pub parity_reads_per_write: f64,
    pub parity_writes_per_write: f64,
    pub device_ops: u64,
    pub duration_s: f64,
    pub iops: f64,
    pub write_mean_us: f64,
    pub write_p99_us: f64,
    /// Performance (1 / replay time) over the `none` policy's.
    pub perf_vs_none: f64,
    /// ... and over `none` with the paper's RAID-5 destage (always RCW).
    pub perf_vs_rcw_raid5: f64,
    pub cache: CacheStats,
}

/// Replay `reqs` closed loop (queue depth `qd`) through one cache policy.
pub fn run_policy(device: &str, k: usize, unit: u64, cfg: CacheConfig, wp: WritePolicy, reqs: &[Request], qd: usize) -> Result<(SimReport, CacheStats)> {
    let n = k + 1;
    let drives = build_drives(&[device.to_string()], n)?;
    let cap = drives.iter().map(|d| d.capacity()).min().unwrap_or(0);
    let layout = layout_for("raid5", n, unit, 4096.min(unit), cap, wp)?;
    let mut cache = CachedArray::new(&layout, cfg)?;
    let sim = Simulator::with_frontend(Box::new(&mut cache), drives, SimConfig { mode: Mode::Closed { queue_depth: qd }, ..Default::default() })?;
    let rep = sim.run(reqs.iter().map(|r| Ok::<_, std::convert::Infallible>(*r)))?;
    // What is still cached is written too, so every policy pays for all it defers.
    cache.flush_all(&Health::all_active(n))?;
    Ok((rep, cache.cache_stats()))
}

fn points(workload: &str, device: &str, k: usize, unit: u64, bytes: u64, reqs: &[Request], qd: usize) -> Result<Vec<PpcPoint>> {
    let mut out: Vec<PpcPoint> = Vec::new();
    // A bar over this workload's runs: the baseline, then each policy.
    let pb = crate::util::steps(1 + CachePolicy::ALL.len() as u64, "eval");
    // The paper's RAID-5 baseline reads the rest of the victim stripe.
    let (rcw, _) = run_policy(device, k, unit, CacheConfig::uniform(CachePolicy::None, bytes), WritePolicy::ForceRcw, reqs, qd)?;
    pb.inc(1);
    for p in CachePolicy::ALL {
        let (r, s) = run_policy(device, k, unit, CacheConfig::uniform(p, bytes), WritePolicy::Auto, reqs, qd).with_context(|| format!("{workload}, {}", p.name()))?;
        pb.inc(1);
        let per = |x: u64| if s.writes > 0 { x as f64 / s.writes as f64 } else { 0.0 };
        out.push(PpcPoint {
            workload: workload.into(),
            width: k,
            policy: p.name().into(),
            writes: s.writes,
            parity_reads_per_write: per(s.parity_reads),
            parity_writes_per_write: per(s.parity_writes),
            device_ops: r.device_reads + r.device_writes,
            duration_s: r.duration_s,
            iops: r.iops,
            write_mean_us: r.write_latency.mean_us,
            write_p99_us: r.write_latency.p99_us,
            perf_vs_none: 0.0,
            perf_vs_rcw_raid5: if r.duration_s > 0.0 { rcw.duration_s / r.duration_s } else { 0.0 },
            cache: s,
        });
    }
    pb.finish_and_clear();
    let base = out[0].duration_s;
    for p in &mut out {
        p.perf_vs_none = if p.duration_s > 0.0 { base / p.duration_s } else { 0.0 };
    }
    Ok(out)
}

#[derive(Serialize)]
struct PpcOut {
    postmark: Vec<PpcPoint>,
    iozone: Vec<PpcPoint>,
    width_sweep: Vec<PpcPoint>,
    trace: Vec<PpcPoint>,
    randwrite_4k: Vec<PpcPoint>,
    trace_note: Option<String>,
}

/// Requests in flight: enough to keep the SSDs busy, so throughput follows
/// the device work each policy causes (at queue depth 1 the parallel reads
/// of RMW and RCW take the same time and hide the difference).
const QD: usize = 32;

pub fn run(a: PpcArgs) -> Result<i32> {
    if let Some(dir) = &a.plot {
        crate::util::check_output_dir(dir, &PLOTS, a.force)?;
    }
    let trace_path = crate::util::eval_trace(a.trace.as_deref(), "the real-trace experiment is skipped")?;
    let pm = Postmark { seed: a.seed, ..Default::default() }.requests();
    let postmark = points("postmark-like", &a.device, 4, a.unit, a.cache_size, &pm, QD)?;
    let io = iozone(8 << 20, a.unit, 2);
    let iozone_pts = points("iozone-like", &a.device, 4, a.unit, a.cache_size, &io, QD)?;
    let mut sweep = Vec::new();
    for k in 4..=7 {
        sweep.extend(points("postmark-like", &a.device, k, a.unit, a.cache_size, &pm, QD)?);
    }
    let (trace, trace_note) = if let Some(tp) = &trace_path {
        let opts = mosaic_trace::TraceOptions::default();
        let reqs: Vec<Request> = mosaic_trace::open(tp, &opts)?.collect::<Result<_, _>>()?;
        (points("cloudphysics trace", &a.device, 4, a.unit, a.trace_cache_size, &reqs, 16)?, None)
    } else {
        (vec![], Some(format!("no trace ({}): skipped", crate::util::DEFAULT_TRACE)))
    };
    let rw: Vec<Request> = Synthetic { pattern: Pattern::RandWrite, size: 4096, count: 50_000, footprint: 256 << 20, seed: a.seed, interval_ns: 0 }
        .requests()
        .map(|r| r.unwrap_or_else(|e| match e {}))
        .collect();
    let rand = points("4K random writes", &a.device, 4, a.unit, a.trace_cache_size, &rw, 16)?;
    if let Some(dir) = &a.plot {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        plot_bars(&dir.join(PLOTS[0]), "Postmark-like, raid5 4+1 SSD: performance vs RAID-5", &postmark, |p| p.policy.clone())?;
        plot_bars(&dir.join(PLOTS[1]), "Postmark-like, stripe width sweep: performance vs RAID-5", &sweep, |p| format!("{}+1 {}", p.width, p.policy))?;
    }
    if a.json {
        print_json(&PpcOut { postmark, iozone: iozone_pts, width_sweep: sweep, trace, randwrite_4k: rand, trace_note })?;
        return Ok(0);
    }
    println!("Small-write caches on raid5 over {} (unit {}; caches {} each for Postmark/IOzone)", a.device, crate::util::human(a.unit), crate::util::human(a.cache_size));
    print_section("Postmark-like (paper: perf 1.00 / 1.13 / 1.47 / 1.76)", &postmark);
    print_section("IOzone-like sequential rewrite", &iozone_pts);
    print_section("Width sweep, Postmark-like (paper, proposed: 1.00 / 1.15 / 1.29 / 1.47 for 4+1..7+1)", &sweep);
    if let Some(n) = &trace_note {
        println!("\n{n}");
    } else {
        let name = trace_path.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        print_section(&format!("Real trace {name}, queue depth 16, caches {}", crate::util::human(a.trace_cache_size)), &trace);
    }
    print_section("Synthetic 4 KiB random writes over 256 MiB, queue depth 16", &rand);
    Ok(0)
}

fn print_section(title: &str, pts: &[PpcPoint]) {
    let mut t = vec![vec![
        "width".into(),
        "policy".into(),
        "parity reads/write".into(),
        "parity writes/write".into(),
        "device ops".into(),
        "write mean/p99 us".into(),
        "perf vs none".into(),
        "vs RCW raid5".into(),
    ]];
    for p in pts {
        t.push(vec![
            format!("{}+1", p.width),
            p.policy.clone(),
            format!("{:.3}", p.parity_reads_per_write),
            format!("{:.3}", p.parity_writes_per_write),
            p.device_ops.to_string(),
            format!("{:.0}/{:.0}", p.write_mean_us, p.write_p99_us),
            format!("{:.2}", p.perf_vs_none),
            format!("{:.2}", p.perf_vs_rcw_raid5),
        ]);
    }
    println!("\n{title}");
    print!("{}", table(&t));
}

fn plot_bars(path: &std::path::Path, title: &str, pts: &[PpcPoint], label: impl Fn(&PpcPoint) -> String) -> Result<()> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("plot {}: {e}", path.display());
    let root = SVGBackend::new(path, (160 + 60 * pts.len() as u32, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let max = pts.iter().map(|p| p.perf_vs_none).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(90)
        .y_label_area_size(50)
        .build_cartesian_2d(0..pts.len(), 0.0..max)
        .map_err(|e| err(&e))?;
    let labels: Vec<String> = pts.iter().map(&label).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(pts.len())
        .x_label_formatter(&|i| labels.get(*i).cloned().unwrap_or_default())
        .y_desc("performance / RAID-5")
        .draw()
        .map_err(|e| err(&e))?;
    let colors = [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40)];
    chart
        .draw_series(pts.iter().enumerate().map(|(i, p)| {
            let c = colors[CachePolicy::ALL.iter().position(|q| q.name() == p.policy).unwrap_or(0)];
            Rectangle::new([(i, 0.0), (i + 1, p.perf_vs_none)], c.filled())
        }))
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
