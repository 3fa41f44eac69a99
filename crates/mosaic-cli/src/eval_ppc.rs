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
//! The paper's numbers to set beside ours are in [`PAPER`]; `--plot DIR`
//! draws every experiment with them as markers beside mosaic's bars.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use mosaic_core::{CacheConfig, CachePolicy, CacheStats, CachedArray, Health, WritePolicy};
use mosaic_sim::fsgen::{iozone, Postmark};
use mosaic_sim::plot::{Axis, BarSeries, Figure, Panel, Plot};
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
pub const PLOTS: [&str; 4] = ["ppc-parity.svg", "ppc-perf.svg", "ppc-width.svg", "ppc-latency.svg"];

/// The paper's numbers (Chung & Hsu, IEEE TVLSI 2014, Sect. V), each
/// array in [`CachePolicy::ALL`] order: RAID-5 (`none`: a write cache
/// only), FPC (`fpc`), PPC (`ppc`), the proposed scheme (`ppc+data`).
pub struct PaperValues {
    /// Fig. 10, Postmark: parity-generation reads and writes per write request.
    pub postmark_reads: [f64; 4],
    pub postmark_writes: [f64; 4],
    /// Fig. 11, Iozone: the same.
    pub iozone_reads: [f64; 4],
    pub iozone_writes: [f64; 4],
    /// Fig. 12, Postmark: I/O performance over RAID-5.
    pub postmark_perf: [f64; 4],
    /// Fig. 15, Postmark: the proposed scheme at 4+1 .. 7+1 data + parity
    /// drives, performance over 4+1.
    pub width_perf: [(usize, f64); 4],
}

/// The paper's values, as its text gives them (checked against it by a test).
pub const PAPER: PaperValues = PaperValues {
    postmark_reads: [1.31, 1.31, 1.068, 0.65],
    postmark_writes: [0.66, 0.37, 0.37, 0.32],
    iozone_reads: [0.28, 0.28, 0.5, 0.32],
    iozone_writes: [0.3, 0.19, 0.19, 0.18],
    postmark_perf: [1.0, 1.13, 1.47, 1.76],
    width_perf: [(4, 1.0), (5, 1.15), (6, 1.29), (7, 1.47)],
};

/// "1.00 / 1.13 / 1.068 ..." for a table title: two decimals, more where
/// the paper gives more.
fn slashed(v: impl IntoIterator<Item = f64>) -> String {
    let f = |x: f64| match format!("{x:.2}") {
        s if s.parse::<f64>() == Ok(x) => s,
        _ => x.to_string(),
    };
    v.into_iter().map(f).collect::<Vec<_>>().join(" / ")
}

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
pub struct PpcOut {
    pub postmark: Vec<PpcPoint>,
    pub iozone: Vec<PpcPoint>,
    pub width_sweep: Vec<PpcPoint>,
    pub trace: Vec<PpcPoint>,
    pub randwrite_4k: Vec<PpcPoint>,
    pub trace_note: Option<String>,
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
    let out = PpcOut { postmark, iozone: iozone_pts, width_sweep: sweep, trace, randwrite_4k: rand, trace_note };
    let written = match &a.plot {
        Some(dir) => write_plots(dir, &a.device, &out)?,
        None => Vec::new(),
    };
    if a.json {
        print_json(&out)?;
        crate::util::say_written(&written, true);
        return Ok(0);
    }
    println!("Small-write caches on raid5 over {} (unit {}; caches {} each for Postmark/IOzone)", a.device, crate::util::human(a.unit), crate::util::human(a.cache_size));
    let p = &PAPER;
    print_section(&format!("Postmark-like (paper: perf {}; parity reads/write {}, writes/write {})", slashed(p.postmark_perf), slashed(p.postmark_reads), slashed(p.postmark_writes)), &out.postmark);
    print_section(&format!("IOzone-like sequential rewrite (paper: parity reads/write {}, writes/write {})", slashed(p.iozone_reads), slashed(p.iozone_writes)), &out.iozone);
    print_section(&format!("Width sweep, Postmark-like (paper, proposed: {} for 4+1..7+1, over 4+1)", slashed(p.width_perf.map(|w| w.1))), &out.width_sweep);
    if let Some(n) = &out.trace_note {
        println!("\n{n}");
    } else {
        let name = trace_path.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        print_section(&format!("Real trace {name}, queue depth 16, caches {}", crate::util::human(a.trace_cache_size)), &out.trace);
    }
    print_section("Synthetic 4 KiB random writes over 256 MiB, queue depth 16", &out.randwrite_4k);
    crate::util::say_written(&written, false);
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

/// The legend names of [`CachePolicy::ALL`], with the paper's names.
const POLICY_NAMES: [&str; 4] = ["none (RAID-5)", "fpc", "ppc", "ppc+data (proposed)"];

/// One group of bars: a label, its points (one per policy) and the
/// paper's values for it, per policy.
type Group<'a> = (String, Vec<&'a PpcPoint>, [Option<f64>; 4]);

/// The paper's values of every policy, or of none.
fn quoted(v: Option<[f64; 4]>) -> [Option<f64>; 4] {
    v.map(|v| v.map(Some)).unwrap_or([None; 4])
}

/// One bar per policy in each group: `metric` of mosaic's point, the
/// paper's value (where it has one) as a marker beside it.
fn policy_panel(title: &str, y: Axis, xdesc: &str, groups: &[Group], metric: &dyn Fn(&PpcPoint) -> f64) -> Panel {
    let series = CachePolicy::ALL
        .iter()
        .enumerate()
        .map(|(pi, pol)| {
            let values = groups.iter().map(|g| g.1.iter().find(|q| q.policy == pol.name()).map(|q| metric(q))).collect();
            BarSeries::new(pi, POLICY_NAMES[pi], values).with_paper(groups.iter().map(|g| g.2[pi]).collect())
        })
        .collect();
    Panel { title: title.into(), y, plot: Plot::Bars { xdesc: xdesc.into(), groups: groups.iter().map(|g| g.0.clone()).collect(), series } }
}

/// The workloads run on 4+1, with the paper's values of `paper` (Postmark, IOzone).
fn workload_groups<'a>(r: &'a PpcOut, paper: (Option<[f64; 4]>, Option<[f64; 4]>)) -> Vec<Group<'a>> {
    let mut g: Vec<Group> = vec![("Postmark-like".into(), r.postmark.iter().collect(), quoted(paper.0)), ("IOzone-like".into(), r.iozone.iter().collect(), quoted(paper.1))];
    if !r.trace.is_empty() {
        g.push(("real trace".into(), r.trace.iter().collect(), [None; 4]));
    }
    g.push(("4 KiB random".into(), r.randwrite_4k.iter().collect(), [None; 4]));
    g
}

/// Performance of `p` over its own policy at 4+1 (the paper's Fig. 15).
fn vs_width_4(sweep: &[PpcPoint], p: &PpcPoint) -> f64 {
    let base = sweep.iter().find(|q| q.width == 4 && q.policy == p.policy).map(|q| q.duration_s).unwrap_or(0.0);
    if p.duration_s > 0.0 {
        base / p.duration_s
    } else {
        0.0
    }
}

/// The figures of `--plot DIR`, in [`PLOTS`] order: every experiment,
/// the paper's values beside mosaic's bars.
pub fn figures(device: &str, r: &PpcOut) -> Vec<Figure> {
    let p = &PAPER;
    let skipped = r.trace_note.as_ref().map(|n| format!("\n({n})")).unwrap_or_default();
    let wl = "workload (raid5 4+1)";
    let per_write = |what: &str| Axis::linear(format!("parity {what} per write request")).from_zero();
    let parity = Figure::new(
        format!("Parity-generation I/O per write request, raid5 4+1 over {device}; stars: the paper (Figs. 10, 11){skipped}"),
        vec![
            policy_panel("parity-generation reads", per_write("reads"), wl, &workload_groups(r, (Some(p.postmark_reads), Some(p.iozone_reads))), &|q| q.parity_reads_per_write),
            policy_panel("parity writes", per_write("writes"), wl, &workload_groups(r, (Some(p.postmark_writes), Some(p.iozone_writes))), &|q| q.parity_writes_per_write),
        ],
        2,
        (640, 460),
    );
    let perf_axis = || Axis::linear("performance (1 / replay time) over none").from_zero();
    let rcw_axis = Axis::linear("performance over none with RCW destage").from_zero();
    let perf = Figure::new(
        format!("Performance over RAID-5, raid5 4+1 over {device}; stars: the paper (Fig. 12){skipped}"),
        vec![
            policy_panel("over none (RAID-5 behind the write cache, RMW or RCW)", perf_axis(), wl, &workload_groups(r, (Some(p.postmark_perf), None)), &|q| q.perf_vs_none),
            policy_panel("over none with the paper's RAID-5 destage (always RCW)", rcw_axis, wl, &workload_groups(r, (Some(p.postmark_perf), None)), &|q| q.perf_vs_rcw_raid5),
        ],
        2,
        (640, 460),
    );
    let mut widths: Vec<usize> = r.width_sweep.iter().map(|q| q.width).collect();
    widths.dedup();
    let by_width = |paper: &dyn Fn(usize) -> [Option<f64>; 4]| -> Vec<Group> {
        widths.iter().map(|&k| (format!("{k}+1"), r.width_sweep.iter().filter(|q| q.width == k).collect(), paper(k))).collect()
    };
    let at_4 = |v: [f64; 4]| move |k: usize| quoted((k == 4).then_some(v));
    let proposed = |k: usize| [None, None, None, p.width_perf.iter().find(|w| w.0 == k).map(|w| w.1)];
    let sd = "stripe width (data + parity drives)";
    let width = Figure::new(
        format!("Stripe width sweep, Postmark-like, raid5 over {device}; stars: the paper (Figs. 10, 12, 15)"),
        vec![
            policy_panel("performance over the same policy at 4+1", Axis::linear("performance over 4+1").from_zero(), sd, &by_width(&proposed), &|q| vs_width_4(&r.width_sweep, q)),
            policy_panel("performance over none at the same width", perf_axis(), sd, &by_width(&at_4(p.postmark_perf)), &|q| q.perf_vs_none),
            policy_panel("parity-generation reads", per_write("reads"), sd, &by_width(&at_4(p.postmark_reads)), &|q| q.parity_reads_per_write),
            policy_panel("parity writes", per_write("writes"), sd, &by_width(&at_4(p.postmark_writes)), &|q| q.parity_writes_per_write),
        ],
        2,
        (640, 440),
    );
    let none = (None, None);
    let all = || r.postmark.iter().chain(&r.iozone).chain(&r.trace).chain(&r.randwrite_4k);
    let ops = |q: &PpcPoint| if q.writes > 0 { q.device_ops as f64 / q.writes as f64 } else { 0.0 };
    let latency = Figure::new(
        format!("Write latency and device work, raid5 4+1 over {device} (the paper gives none){skipped}"),
        vec![
            policy_panel("mean write latency", Axis::linear("mean write latency (µs)").log_when_wide(all().map(|q| q.write_mean_us)), wl, &workload_groups(r, none), &|q| q.write_mean_us),
            policy_panel("99th percentile write latency", Axis::linear("p99 write latency (µs)").log_when_wide(all().map(|q| q.write_p99_us)), wl, &workload_groups(r, none), &|q| q.write_p99_us),
            policy_panel("device operations per write request", Axis::linear("device reads + writes per write").from_zero(), wl, &workload_groups(r, none), &ops),
        ],
        3,
        (520, 460),
    );
    vec![parity, perf, width, latency]
}

/// Write [`figures`] into `dir` (created if need be); the files written.
fn write_plots(dir: &Path, device: &str, r: &PpcOut) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut out = Vec::new();
    for (f, name) in figures(device, r).iter().zip(PLOTS) {
        let path = dir.join(name);
        f.write(&path).map_err(anyhow::Error::msg)?;
        out.push(path);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::PAPER;

    /// How the paper writes a number: 1.0, 0.3, 1.068.
    fn quoted(v: f64) -> String {
        if v.fract() == 0.0 {
            format!("{v:.1}")
        } else {
            format!("{v}")
        }
    }

    fn listed(v: impl IntoIterator<Item = f64>) -> String {
        let v: Vec<String> = v.into_iter().map(quoted).collect();
        format!("{}, and {}", v[..v.len() - 1].join(", "), v[v.len() - 1])
    }

    /// [`PAPER`] says what the paper's text says, figure by figure (the
    /// paper is in the shared folder beside the repository; skipped
    /// where it is not, or read from $PPC_PAPER).
    #[test]
    fn the_paper_values_are_the_papers() {
        let path = std::env::var_os("PPC_PAPER")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/papers/partial-parity-cache-ssd-raid.txt"));
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!("skipping: no {}", path.display());
            return;
        };
        // Fig. 10 (Postmark) is described before Fig. 11 (Iozone).
        let (postmark, iozone) = text.split_once("Fig. 11 shows the simulation results for the Iozone benchmark").expect("the Fig. 11 paragraph");
        let times = |kind: &str, v: [f64; 4]| format!("normalized {kind} times for the parity generation of RAID-5, FPC, PPC, and the proposed scheme are {}, respectively", listed(v));
        for (part, kind, v) in [(postmark, "read", PAPER.postmark_reads), (postmark, "write", PAPER.postmark_writes), (iozone, "read", PAPER.iozone_reads), (iozone, "write", PAPER.iozone_writes)] {
            let want = times(kind, v);
            assert!(part.contains(&want), "the paper does not say {want:?}");
        }
        let perf = format!("Postmark benchmark inputs for RAID-5, FPC, PPC, and the proposed scheme are {}, respectively", listed(PAPER.postmark_perf));
        assert!(text.contains(&perf), "the paper does not say {perf:?}");
        let widths: Vec<String> = PAPER.width_perf.iter().map(|w| format!("{} + 1", w.0)).collect();
        let width = format!("performance of {}, and {} RAID systems is {}, respectively", widths[..3].join(", "), widths[3], listed(PAPER.width_perf.map(|w| w.1)));
        assert!(text.contains(&width), "the paper does not say {width:?}");
    }
}
