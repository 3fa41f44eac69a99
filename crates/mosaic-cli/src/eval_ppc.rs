//! `mosaic eval ppc`: the small-write caches of Chung & Hsu (IEEE TVLSI
//! 2014) side by side — the paper's RAID-5 (a write cache, destage by
//! reading the rest of the stripe), mosaic's `none` (RMW or RCW, the
//! cheaper), fpc, ppc and ppc+data — on an SSD raid5, replayed in virtual
//! time.  For every workload three things per policy, the paper's value
//! beside mosaic's where it gives one:
//!
//! * the paper's counts: parity-generation reads and parity writes per
//!   write request (its Figs. 10, 11), the final destage of the caches
//!   included;
//! * device work: the sum of the drives' service times for every
//!   operation (each at its isolated service time, as the paper's cycle
//!   count, its Eq. 1-3) and the busiest drive's share;
//! * closed-loop time (the final destage timed too) and the performance it
//!   gives over the paper's RAID-5 (its Fig. 12).
//!
//! Workloads: the Postmark-like and IOzone-like generators
//! (`mosaic_sim::fsgen`); the traces `scripts/record-traces.sh` records
//! from real `postmark` on ext2 and ext4 and from fio 8 KiB records with
//! fsync (IOzone-like), read from `--traces DIR`; the stripe-width sweep
//! 4+1 .. 7+1 (the paper's Fig. 15 quantity: each policy over itself at
//! 4+1); the CloudPhysics trace and 4 KiB random writes.
//!
//! The paper's numbers are in [`PAPER`]; `--plot DIR` draws every
//! experiment with them as markers beside mosaic's bars.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use mosaic_core::{CacheConfig, CachePolicy, CacheStats, CachedArray, Frontend, Health, PlanError, Program, Staged, WritePolicy};
use mosaic_drives::{DriveError, DriveModel, DriveRequest, Nanos, ReqKind, ZoneInfo};
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
    /// Size of each structure (write cache, parity cache, clean pages of
    /// the data buffer) for the Postmark-like and IOzone-like runs (the
    /// paper: 8 pages each)
    #[arg(long, value_parser = size, default_value = "32K")]
    pub cache_size: u64,
    /// Directory of the recorded traces postmark-ext2.csv,
    /// postmark-ext4.csv and iozone-fio.csv (scripts/record-traces.sh);
    /// default $MOSAIC_TRACES, else target/traces
    #[arg(long)]
    pub traces: Option<PathBuf>,
    /// Cache size for the recorded traces
    #[arg(long, value_parser = size, default_value = "256K")]
    pub recorded_cache_size: u64,
    /// Cache size for the CloudPhysics trace and the 4 KiB random writes
    #[arg(long, value_parser = size, default_value = "16M")]
    pub trace_cache_size: u64,
    /// The real trace (default shared/traces/cloudphysics-vscsi-part1.csv beside the checkout, skipped with a note when that is absent)
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
/// array in [`CachePolicy::ALL`] order: RAID-5 (a write cache only), FPC
/// (`fpc`), PPC (`ppc`), the proposed scheme (`ppc+data`).
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

/// The paper's values for one workload, per row of [`ROWS`].
#[derive(Clone, Copy)]
struct Quoted {
    reads: [f64; 4],
    writes: [f64; 4],
    perf: Option<[f64; 4]>,
}

const POSTMARK: Quoted = Quoted { reads: PAPER.postmark_reads, writes: PAPER.postmark_writes, perf: Some(PAPER.postmark_perf) };
const IOZONE: Quoted = Quoted { reads: PAPER.iozone_reads, writes: PAPER.iozone_writes, perf: None };

/// The rows of every experiment: the paper's RAID-5 (`none` destaging by
/// RCW, as its RAID-5 reads the rest of the victim stripe), then each
/// policy with mosaic's own write policy (`none` takes RMW or RCW,
/// whichever reads less).  The paper's value of a row is at `paper`.
const ROWS: [(&str, CachePolicy, WritePolicy, Option<usize>); 5] = [
    ("raid5", CachePolicy::None, WritePolicy::ForceRcw, Some(0)),
    ("none", CachePolicy::None, WritePolicy::Auto, None),
    ("fpc", CachePolicy::Fpc, WritePolicy::Auto, Some(1)),
    ("ppc", CachePolicy::Ppc, WritePolicy::Auto, Some(2)),
    ("ppc+data", CachePolicy::PpcData, WritePolicy::Auto, Some(3)),
];

/// One policy on one workload.
#[derive(Serialize, Clone)]
pub struct PpcPoint {
    pub workload: String,
    pub width: usize,
    /// `raid5` (the paper's RAID-5: `none` with RCW destage) or a policy.
    pub policy: String,
    pub writes: u64,
    /// Parity-generation reads and code writes per write request, final
    /// destage of the caches included.
    pub parity_reads_per_write: f64,
    pub parity_writes_per_write: f64,
    /// The paper's values of this row and workload, where it gives them.
    pub paper_reads_per_write: Option<f64>,
    pub paper_writes_per_write: Option<f64>,
    pub paper_perf: Option<f64>,
    pub device_ops: u64,
    /// Sum over the drives of every operation's service time, ms.
    pub device_work_ms: f64,
    /// The busiest drive's sum, ms.
    pub busiest_drive_ms: f64,
    /// Closed-loop replay time, the final destage included ...
    pub duration_s: f64,
    /// ... of which the destage (its steps run one after the other, as a
    /// real volume's `sync` runs them).
    pub destage_s: f64,
    pub iops: f64,
    pub write_mean_us: f64,
    pub write_p99_us: f64,
    /// Performance (1 / replay time) over the paper's RAID-5 (`raid5`) ...
    pub perf_vs_raid5: f64,
    /// ... over `none`, and device work of `raid5` over this row's.
    pub perf_vs_none: f64,
    pub work_vs_raid5: f64,
    pub cache: CacheStats,
}

/// A drive that sums the isolated service time of every request it serves.
struct Metered {
    inner: Box<dyn DriveModel>,
    work_ns: Arc<AtomicU64>,
}

impl DriveModel for Metered {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }
    fn queue_depth(&self) -> usize {
        self.inner.queue_depth()
    }
    fn pick(&self, now: Nanos, pending: &[DriveRequest]) -> usize {
        self.inner.pick(now, pending)
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        if matches!(req.kind, ReqKind::Read | ReqKind::Write) {
            self.work_ns.fetch_add(self.inner.random_service_ns(req.kind, req.len) as u64, Ordering::Relaxed);
        }
        self.inner.submit(now, req)
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        self.inner.random_service_ns(kind, len)
    }
    fn zone_size(&self) -> Option<u64> {
        self.inner.zone_size()
    }
    fn zone_report(&self) -> Vec<ZoneInfo> {
        self.inner.zone_report()
    }
    fn write_pointer(&self, zone: u64) -> Option<u64> {
        self.inner.write_pointer(zone)
    }
}

/// The cache, whose closing flush is its final destage
/// ([`CachedArray::destage_at_end`]), noting when the destage starts
/// (virtual ns), to report its time.
struct Destaging<'a>(&'a mut CachedArray, Arc<AtomicU64>);

impl Frontend for Destaging<'_> {
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn capacity(&self) -> u64 {
        self.0.capacity()
    }
    fn block_size(&self) -> u64 {
        self.0.block_size()
    }
    fn members(&self) -> usize {
        self.0.members()
    }
    fn submit(&mut self, write: bool, offset: u64, len: u64, now_ns: u64, h: &Health) -> Result<Staged, PlanError> {
        self.0.submit(write, offset, len, now_ns, h)
    }
    fn flush(&mut self, now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        self.1.store(now_ns, Ordering::Relaxed);
        self.0.flush(now_ns, h)
    }
    fn stats(&self) -> Vec<(String, f64)> {
        self.0.stats()
    }
}

/// One replay's results: the simulator's report, the cache's counters and
/// each drive's summed service time (ns).
pub struct Run {
    pub report: SimReport,
    pub stats: CacheStats,
    pub work_ns: Vec<u64>,
    /// Virtual time the final destage started at.
    pub destage_at_ns: u64,
}

/// Replay `reqs` closed loop (queue depth `qd`) through one cache policy,
/// then destage the caches (timed), so every policy pays for all it defers.
pub fn run_policy(device: &str, k: usize, unit: u64, cfg: CacheConfig, wp: WritePolicy, reqs: &[Request], qd: usize) -> Result<Run> {
    let n = k + 1;
    let meters: Vec<Arc<AtomicU64>> = (0..n).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let drives: Vec<Box<dyn DriveModel>> = build_drives(&[device.to_string()], n)?
        .into_iter()
        .zip(&meters)
        .map(|(inner, w)| Box::new(Metered { inner, work_ns: w.clone() }) as Box<dyn DriveModel>)
        .collect();
    let cap = drives.iter().map(|d| d.capacity()).min().unwrap_or(0);
    let layout = layout_for("raid5", n, unit, 4096.min(unit), cap, wp)?;
    let mut cache = CachedArray::new(&layout, cfg)?.destage_at_end(true);
    let at = Arc::new(AtomicU64::new(0));
    let sim = Simulator::with_frontend(Box::new(Destaging(&mut cache, at.clone())), drives, SimConfig { mode: Mode::Closed { queue_depth: qd }, ..Default::default() })?;
    let report = sim.run(reqs.iter().map(|r| Ok::<_, std::convert::Infallible>(*r)))?;
    let work_ns = meters.iter().map(|w| w.load(Ordering::Relaxed)).collect();
    Ok(Run { report, stats: cache.cache_stats(), work_ns, destage_at_ns: at.load(Ordering::Relaxed) })
}

/// One workload: its name, requests, closed-loop queue depth and the
/// paper's values for it.
struct Workload<'a> {
    name: &'a str,
    reqs: &'a [Request],
    qd: usize,
    paper: Option<Quoted>,
}

/// Every row of [`ROWS`] on one workload at width `k` with caches of
/// `bytes` each, the paper's values beside.
fn points(w: &Workload, a: &PpcArgs, k: usize, bytes: u64) -> Result<Vec<PpcPoint>> {
    let (workload, device, unit, reqs, qd, paper) = (w.name, a.device.as_str(), a.unit, w.reqs, w.qd, w.paper);
    let mut out: Vec<PpcPoint> = Vec::new();
    let pb = crate::util::steps(ROWS.len() as u64, "eval");
    for (name, policy, wp, at) in ROWS {
        let r = run_policy(device, k, unit, CacheConfig::uniform(policy, bytes), wp, reqs, qd).with_context(|| format!("{workload}, {name}"))?;
        pb.inc(1);
        let (rep, s) = (&r.report, r.stats);
        let per = |x: u64| if s.writes > 0 { x as f64 / s.writes as f64 } else { 0.0 };
        let quote = |f: fn(&Quoted) -> Option<[f64; 4]>| paper.as_ref().and_then(f).zip(at).map(|(v, i)| v[i]);
        out.push(PpcPoint {
            workload: workload.into(),
            width: k,
            policy: name.into(),
            writes: s.writes,
            parity_reads_per_write: per(s.parity_reads),
            parity_writes_per_write: per(s.parity_writes),
            paper_reads_per_write: quote(|q| Some(q.reads)),
            paper_writes_per_write: quote(|q| Some(q.writes)),
            paper_perf: quote(|q| q.perf),
            device_ops: rep.device_reads + rep.device_writes,
            device_work_ms: r.work_ns.iter().sum::<u64>() as f64 / 1e6,
            busiest_drive_ms: r.work_ns.iter().copied().max().unwrap_or(0) as f64 / 1e6,
            duration_s: rep.duration_s,
            destage_s: (rep.duration_s - r.destage_at_ns as f64 / 1e9).max(0.0),
            iops: rep.iops,
            write_mean_us: rep.write_latency.mean_us,
            write_p99_us: rep.write_latency.p99_us,
            perf_vs_raid5: 0.0,
            perf_vs_none: 0.0,
            work_vs_raid5: 0.0,
            cache: s,
        });
    }
    pb.finish_and_clear();
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let (raid5, none) = (out[0].clone(), out[1].clone());
    for p in &mut out {
        p.perf_vs_raid5 = ratio(raid5.duration_s, p.duration_s);
        p.perf_vs_none = ratio(none.duration_s, p.duration_s);
        p.work_vs_raid5 = ratio(raid5.device_work_ms, p.device_work_ms);
    }
    Ok(out)
}

/// The recorded traces `--traces DIR` holds: file, label, the paper's
/// benchmark it stands for.
const RECORDED: [(&str, &str, Quoted); 3] = [
    ("postmark-ext2.csv", "recorded postmark on ext2", POSTMARK),
    ("postmark-ext4.csv", "recorded postmark on ext4", POSTMARK),
    ("iozone-fio.csv", "recorded fio 8 KiB + fsync (IOzone-like)", IOZONE),
];

/// The directory of the recorded traces: `--traces`, else
/// `$MOSAIC_TRACES`, else `target/traces`.
pub fn traces_dir(given: Option<&Path>) -> PathBuf {
    given.map(Path::to_path_buf).or_else(|| std::env::var_os("MOSAIC_TRACES").map(PathBuf::from)).unwrap_or_else(|| PathBuf::from("target/traces"))
}

/// The requests of a trace file.
pub fn read_trace(path: &Path) -> Result<Vec<Request>> {
    let opts = mosaic_trace::TraceOptions::default();
    let reqs: Vec<Request> = mosaic_trace::open(path, &opts).with_context(|| format!("opening {}", path.display()))?.collect::<Result<_, _>>()?;
    Ok(reqs)
}

/// One recorded trace's rows, or why there are none.
#[derive(Serialize)]
pub struct Recorded {
    pub name: String,
    pub path: PathBuf,
    pub points: Vec<PpcPoint>,
    pub note: Option<String>,
}

#[derive(Serialize)]
pub struct PpcOut {
    pub postmark: Vec<PpcPoint>,
    pub iozone: Vec<PpcPoint>,
    pub recorded: Vec<Recorded>,
    /// Width sweep: on the recorded ext2 Postmark trace when present,
    /// else the Postmark-like generator.
    pub width_workload: String,
    pub width_sweep: Vec<PpcPoint>,
    pub trace: Vec<PpcPoint>,
    pub randwrite_4k: Vec<PpcPoint>,
    pub trace_note: Option<String>,
}

/// Requests in flight: enough to keep the SSDs busy, so throughput follows
/// the device work each policy causes (at queue depth 1 the parallel reads
/// of RMW and RCW take the same time and hide the difference).
const QD: usize = 32;

/// The recorded traces of `dir`, each replayed (or noted missing).
fn recorded(dir: &Path, a: &PpcArgs) -> Result<Vec<Recorded>> {
    let mut out = Vec::new();
    for (file, name, paper) in RECORDED {
        let path = dir.join(file);
        let (points, note) = if path.exists() {
            let reqs = read_trace(&path)?;
            (points(&Workload { name, reqs: &reqs, qd: QD, paper: Some(paper) }, a, 4, a.recorded_cache_size)?, None)
        } else {
            (vec![], Some(format!("{} is missing: run scripts/record-traces.sh (it writes {file} into {})", path.display(), dir.display())))
        };
        out.push(Recorded { name: name.into(), path, points, note });
    }
    Ok(out)
}

pub fn run(a: PpcArgs) -> Result<i32> {
    if a.unit != 512 && a.unit != 4096 {
        anyhow::bail!("--unit {}: the stripe unit is the cache page and the arrays' logical block here, 512 or 4096 bytes (the paper's is 4K)", a.unit);
    }
    if let Some(dir) = &a.plot {
        crate::util::check_output_dir(dir, &PLOTS, a.force)?;
    }
    let trace_path = crate::util::eval_trace(a.trace.as_deref(), "the real-trace experiment is skipped")?;
    let pm = Postmark { seed: a.seed, ..Default::default() }.requests();
    let postmark = points(&Workload { name: "postmark-like", reqs: &pm, qd: QD, paper: Some(POSTMARK) }, &a, 4, a.cache_size)?;
    let io = iozone(8 << 20, a.unit, 2);
    let iozone_pts = points(&Workload { name: "iozone-like", reqs: &io, qd: QD, paper: Some(IOZONE) }, &a, 4, a.cache_size)?;
    let dir = traces_dir(a.traces.as_deref());
    let recorded = recorded(&dir, &a)?;
    let ext2 = dir.join(RECORDED[0].0);
    let (width_workload, width_reqs, width_cache) = if ext2.exists() { (RECORDED[0].1, read_trace(&ext2)?, a.recorded_cache_size) } else { ("postmark-like", pm.clone(), a.cache_size) };
    let mut sweep = Vec::new();
    for k in 4..=7 {
        let paper = (k == 4).then_some(POSTMARK);
        sweep.extend(points(&Workload { name: width_workload, reqs: &width_reqs, qd: QD, paper }, &a, k, width_cache)?);
    }
    let (trace, trace_note) = if let Some(tp) = &trace_path {
        (points(&Workload { name: "cloudphysics trace", reqs: &read_trace(tp)?, qd: 16, paper: None }, &a, 4, a.trace_cache_size)?, None)
    } else {
        (vec![], Some(format!("no trace ({}): skipped", crate::util::DEFAULT_TRACE)))
    };
    let rw: Vec<Request> = Synthetic { pattern: Pattern::RandWrite, size: 4096, count: 50_000, footprint: 256 << 20, seed: a.seed, interval_ns: 0 }
        .requests()
        .map(|r| r.unwrap_or_else(|e| match e {}))
        .collect();
    let rand = points(&Workload { name: "4K random writes", reqs: &rw, qd: 16, paper: None }, &a, 4, a.trace_cache_size)?;
    let out = PpcOut { postmark, iozone: iozone_pts, recorded, width_workload: width_workload.into(), width_sweep: sweep, trace, randwrite_4k: rand, trace_note };
    let written = match &a.plot {
        Some(dir) => write_plots(dir, &a.device, &out)?,
        None => Vec::new(),
    };
    if a.json {
        print_json(&out)?;
        crate::util::say_written(&written, true);
        return Ok(0);
    }
    print_all(&a, &out, trace_path.as_deref());
    crate::util::say_written(&written, false);
    Ok(0)
}

fn print_all(a: &PpcArgs, out: &PpcOut, trace_path: Option<&Path>) {
    let h = crate::util::human;
    println!("Small-write caches on raid5 over {} (unit {}); paper values in brackets", a.device, h(a.unit));
    println!("raid5 = the paper's RAID-5 (destage reads the rest of the stripe); none: RMW or RCW");
    println!("reads/w, writes/w: parity I/O per write request; work: sum of the drives' service");
    println!("times, ms (busiest: the busiest drive's); time: closed loop, ms, the final destage");
    println!("included (destage: its part); perf: raid5's time over the row's; work (last):");
    println!("raid5's work over the row's");
    print_section(&format!("Postmark-like generator, caches {} each (paper: Figs. 10, 12)", h(a.cache_size)), &out.postmark);
    print_section(&format!("IOzone-like generator, caches {} each (paper: Fig. 11)", h(a.cache_size)), &out.iozone);
    for r in &out.recorded {
        match &r.note {
            Some(n) => println!("\n{}: {n}", r.name),
            None => print_section(&format!("{}, caches {} each ({})", r.name, h(a.recorded_cache_size), r.path.file_name().unwrap_or_default().to_string_lossy()), &r.points),
        }
    }
    print_widths(&out.width_workload, &out.width_sweep);
    match &out.trace_note {
        Some(n) => println!("\n{n}"),
        None => {
            let name = trace_path.and_then(|p| p.file_name()).map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            print_section(&format!("Real trace {name}, QD 16, caches {}", h(a.trace_cache_size)), &out.trace);
        }
    }
    print_section("Synthetic 4 KiB random writes over 256 MiB, QD 16", &out.randwrite_4k);
}

/// "0.650 [0.32]": mosaic's value, the paper's in brackets.
fn beside(v: f64, paper: Option<f64>, prec: usize) -> String {
    match paper {
        Some(p) => format!("{v:.prec$} [{p}]"),
        None => format!("{v:.prec$}"),
    }
}

fn print_section(title: &str, pts: &[PpcPoint]) {
    let mut t = vec![["policy", "reads/w", "writes/w", "dev ops", "work", "busiest", "time", "destage", "perf", "work"].map(String::from).to_vec()];
    for p in pts {
        t.push(vec![
            p.policy.clone(),
            beside(p.parity_reads_per_write, p.paper_reads_per_write, 3),
            beside(p.parity_writes_per_write, p.paper_writes_per_write, 3),
            p.device_ops.to_string(),
            format!("{:.0}", p.device_work_ms),
            format!("{:.0}", p.busiest_drive_ms),
            format!("{:.0}", p.duration_s * 1e3),
            format!("{:.0}", p.destage_s * 1e3),
            beside(p.perf_vs_raid5, p.paper_perf, 2),
            format!("{:.2}", p.work_vs_raid5),
        ]);
    }
    println!("\n{title}");
    print!("{}", table(&t));
}

/// The sweep as the paper's Fig. 15 gives it: each policy's performance
/// at k+1 over its own at 4+1, and its counts.
fn print_widths(workload: &str, sweep: &[PpcPoint]) {
    let mut t = vec![["width", "policy", "reads/w", "writes/w", "time ms", "perf vs 4+1", "work vs 4+1", "vs raid5"].map(String::from).to_vec()];
    for p in sweep.iter().filter(|p| p.policy != "none") {
        let at4 = sweep.iter().find(|q| q.width == 4 && q.policy == p.policy);
        let paper = (p.policy == "ppc+data").then(|| PAPER.width_perf.iter().find(|w| w.0 == p.width).map(|w| w.1)).flatten();
        let work4 = at4.map(|q| q.device_work_ms).unwrap_or(0.0);
        t.push(vec![
            format!("{}+1", p.width),
            p.policy.clone(),
            beside(p.parity_reads_per_write, p.paper_reads_per_write, 3),
            beside(p.parity_writes_per_write, p.paper_writes_per_write, 3),
            format!("{:.0}", p.duration_s * 1e3),
            beside(vs_width_4(sweep, p), paper, 2),
            format!("{:.2}", if p.device_work_ms > 0.0 { work4 / p.device_work_ms } else { 0.0 }),
            format!("{:.2}", p.perf_vs_raid5),
        ]);
    }
    println!("\nWidth sweep, {workload} (paper, Fig. 15: the proposed scheme over itself at 4+1)");
    println!("perf, work vs 4+1: the row's policy at 4+1 over itself at this width");
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
    for (rec, (file, _, _)) in r.recorded.iter().zip(RECORDED).filter(|(rec, _)| !rec.points.is_empty()) {
        let label = file.trim_end_matches(".csv").to_string();
        g.push((label, rec.points.iter().collect(), quoted(if file.starts_with("postmark") { paper.0 } else { paper.1 })));
    }
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
            policy_panel("over the paper's RAID-5 (destage always RCW)", rcw_axis, wl, &workload_groups(r, (Some(p.postmark_perf), None)), &|q| q.perf_vs_raid5),
            policy_panel("over none (RAID-5 behind the write cache, RMW or RCW)", perf_axis(), wl, &workload_groups(r, (Some(p.postmark_perf), None)), &|q| q.perf_vs_none),
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
        format!("Stripe width sweep, {}, raid5 over {device}; stars: the paper (Figs. 10, 12, 15)", r.width_workload),
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
    let all = || r.postmark.iter().chain(&r.iozone).chain(r.recorded.iter().flat_map(|x| &x.points)).chain(&r.trace).chain(&r.randwrite_4k);
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
