//! The DVS experiments: every scheme on the same drive model, replayed in
//! virtual time.
//!
//! * overall: response time (mean, p99), device reads/writes and zone
//!   resets (in the foreground and in idle-time GC) of HDD RAID-5, DVS,
//!   Segment RAID-5 and Sblock RAID-5 on the CloudPhysics trace and on
//!   synthetic workloads (cache = 10% of the working set), beside each
//!   scheme's saturated throughput on the same workload;
//! * cache sweep: 5..50% of the working set, on the trace;
//! * band (segment = zone) size sweep, on the trace.
//!
//! **Drives.**  5 per array, all timed by one mechanical model: the
//! Seagate ST91000640SS of `hdd:seagate-st91000640ss-detailed` (seek curve,
//! 7200 rpm rotation, write settle; FIFO), HDD RAID-5 on it as a
//! conventional drive, the SMR schemes on it with host-managed zone rules
//! ([`Zoned::with_mechanics`]).  So an append right behind the head costs
//! its transfer only, and anything else (a read elsewhere, an append to
//! another zone) pays seek + rotation, for every scheme alike.  Capacity
//! 16 GiB per drive (the trace touches < 34 GB of the 64 GiB array, 40 GiB
//! for Sblock RAID-5; the short stroke is what the paper's traces see too:
//! 0.3-7 GB of data on 1 TB drives), 1% conventional zones.  Chunk (stripe unit) 64 KiB as in
//! the paper (128 sectors).  Every scheme has a write cache and a read
//! cache of the same size.  Seeded, so runs are reproducible.
//!
//! **Workloads** ([`WORKLOADS`]): footprints, ages and arrivals are stated
//! in [`Spec`].  Synthetic requests arrive open-loop in bursts with idle
//! gaps between them (the idle time in which DVS collects garbage, as the
//! paper's background GC); the trace at its timestamps times
//! `trace_time_scale`.  An aged workload's footprint is written once,
//! sequentially in 1 MiB requests, before the replay (not measured), so
//! reads find data and updates find old copies, as on the paper's 1 TB
//! drives that already hold the traces' data.
//!
//! **Saturated throughput** is completed requests per second of a
//! closed-loop replay at queue depth [`SAT_QD`] of the whole workload
//! (timestamps ignored), over the time until the drives finish its device
//! work (destages included; what the cache still holds at the end is not
//! counted, so a workload the cache absorbs whole has none: `-`).  When a
//! workload's offered rate is above a scheme's saturated throughput its
//! queue grows without bound and the mean only measures the run length:
//! the tables print `sat` instead of it.

use std::collections::HashSet;
use std::path::Path;

use mosaic_core::{Frontend, Health, Phase, Program};
use mosaic_drives::{preset, DriveConfig, DriveModel, DriveRequest, HddDetailedParams, ReqKind, Zoned, ZonedParams};
use mosaic_sim::{Mode, Pattern, SimConfig, SimReport, Simulator, Synthetic};
use mosaic_trace::{Op, Request, TraceOptions};
use serde::Serialize;

use mosaic_dvs::baseline::{build_frontend, SchemeSpec};
use mosaic_dvs::DvsError;

pub const SCHEMES: [&str; 4] = ["raid5", "dvs", "segment-raid5", "sblock-raid5"];
const CHUNK: u64 = 64 << 10;
const DRIVES: usize = 5;
const DRIVE_CAP: u64 = 16 << 30;
/// Queue depth of the saturated-throughput runs.
pub const SAT_QD: usize = 16;
/// The drive every scheme runs on.
const MECHANICS: &str = "hdd:seagate-st91000640ss-detailed";
/// Prefill request size.
const FILL: u64 = 1 << 20;

/// A synthetic workload's shape.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spec {
    pub name: &'static str,
    /// Request size.
    pub size: u64,
    /// Bytes of data touched.
    pub footprint: u64,
    /// The data is every `spread`-th 64 KiB chunk of `spread` times the
    /// footprint (2: half of each SSG and S-block holds data).
    pub spread: u64,
    /// Percent reads (the rest writes; 0 with `seq`: sequential writes).
    pub read_pct: u8,
    pub seq: bool,
    /// Written once before the replay.
    pub aged: bool,
    /// Requests per burst, ns between them, ns of idle after each burst.
    pub burst: u64,
    pub interval_ns: u64,
    pub idle_ns: u64,
}

/// The synthetic workloads.  Dense: Financial1-like (0.45 GB of unique
/// data, 1.5 M writes); sparse: web0-like (7.26 GB, writes rarely
/// updated), here never written before.
pub const WORKLOADS: [Spec; 4] = [
    Spec { name: "rw-dense", size: 4096, footprint: 128 << 20, spread: 2, read_pct: 0, seq: false, aged: true, burst: 50, interval_ns: 2_000_000, idle_ns: 900_000_000 },
    Spec { name: "rw-sparse", size: 4096, footprint: 32 << 30, spread: 1, read_pct: 0, seq: false, aged: false, burst: 50, interval_ns: 2_000_000, idle_ns: 900_000_000 },
    Spec { name: "seqwrite", size: 64 << 10, footprint: 4 << 30, spread: 1, read_pct: 0, seq: true, aged: false, burst: 500, interval_ns: 1_000_000, idle_ns: 500_000_000 },
    Spec { name: "readheavy", size: 4096, footprint: 64 << 20, spread: 2, read_pct: 80, seq: false, aged: true, burst: 50, interval_ns: 2_000_000, idle_ns: 900_000_000 },
];

impl Spec {
    /// Offered requests per second (bursts and idle gaps).
    pub fn offered_iops(&self) -> f64 {
        self.burst as f64 * 1e9 / (self.burst * self.interval_ns + self.idle_ns) as f64
    }
}

/// A workload, materialised.
pub struct Workload {
    pub name: String,
    pub reqs: Vec<Request>,
    /// Bytes written before the replay (0: a fresh array), in order,
    /// every `spread`-th chunk.
    pub prefill: u64,
    pub spread: u64,
}

impl Workload {
    /// Distinct chunks touched.
    pub fn working_set_chunks(&self) -> usize {
        let mut s = HashSet::new();
        for r in &self.reqs {
            for c in r.offset / CHUNK..(r.offset + r.len).div_ceil(CHUNK) {
                s.insert(c);
            }
        }
        s.len()
    }

    /// Requests per second the arrivals offer.
    pub fn offered_iops(&self) -> f64 {
        let span = match (self.reqs.first(), self.reqs.last()) {
            (Some(a), Some(b)) if b.time_ns > a.time_ns => (b.time_ns - a.time_ns) as f64 / 1e9,
            _ => return 0.0,
        };
        self.reqs.len() as f64 / span
    }
}

/// Experiment sizes.
#[derive(Debug, Clone, Serialize)]
pub struct ExpConfig {
    /// Synthetic request count per workload.
    pub synthetic_count: u64,
    /// Use at most this many trace requests.
    pub trace_first: Option<u64>,
    pub seed: u64,
    /// Trace timestamps multiplied by this (> 1: slower arrivals).
    pub trace_time_scale: f64,
    pub zone_size: u64,
    pub cache_fracs: Vec<u32>,
    pub zone_sizes: Vec<u64>,
}

impl Default for ExpConfig {
    fn default() -> Self {
        ExpConfig { synthetic_count: 20_000, trace_first: None, seed: 1, trace_time_scale: 4.0, zone_size: 4 << 20, cache_fracs: vec![5, 10, 20, 30, 40, 50], zone_sizes: vec![1 << 20, 4 << 20, 16 << 20, 64 << 20] }
    }
}

impl ExpConfig {
    /// A small run for tests: fewer requests, three cache sizes, two bands.
    pub fn quick() -> ExpConfig {
        ExpConfig { synthetic_count: 3000, trace_first: Some(8000), cache_fracs: vec![5, 20, 50], zone_sizes: vec![1 << 20, 16 << 20], ..Default::default() }
    }
}

/// Synthetic workload `name` (one of [`WORKLOADS`]).
pub fn synthetic(name: &str, count: u64, seed: u64) -> Result<Workload, DvsError> {
    let s = WORKLOADS.iter().find(|s| s.name == name).ok_or_else(|| DvsError::Other(format!("unknown DVS workload {name:?}")))?;
    let pattern = match (s.seq, s.read_pct) {
        (true, _) => Pattern::SeqWrite,
        (false, 0) => Pattern::RandWrite,
        (false, p) => Pattern::Mixed { read_pct: p },
    };
    let syn = Synthetic { pattern, size: s.size, count, footprint: s.footprint, seed, interval_ns: 0 };
    let period = s.burst * s.interval_ns + s.idle_ns;
    let reqs = syn
        .requests()
        .enumerate()
        .map(|(i, r)| {
            let (i, r) = (i as u64, r.unwrap_or_else(|e| match e {}));
            let offset = r.offset / CHUNK * s.spread * CHUNK + r.offset % CHUNK;
            Request { time_ns: i / s.burst * period + i % s.burst * s.interval_ns, offset, ..r }
        })
        .collect();
    Ok(Workload { name: name.to_string(), reqs, prefill: if s.aged { s.footprint } else { 0 }, spread: s.spread })
}

pub fn trace(path: &Path, first: Option<u64>, time_scale: f64) -> Result<Workload, DvsError> {
    let opts = TraceOptions { first, time_scale, ..Default::default() };
    let r = mosaic_trace::open(path, &opts).map_err(|e| DvsError::Other(e.to_string()))?;
    let reqs = r.collect::<Result<Vec<_>, _>>().map_err(|e| DvsError::Other(e.to_string()))?;
    Ok(Workload { name: "cloudphysics".into(), reqs, prefill: 0, spread: 1 })
}

fn mechanics() -> HddDetailedParams {
    match preset(MECHANICS) {
        Ok(DriveConfig::HddDetailed { params, .. }) => HddDetailedParams { scheduler: mosaic_drives::Scheduler::Fifo, ..params },
        _ => unreachable!("{MECHANICS} is a detailed HDD preset"),
    }
}

/// Five drive models for a scheme: the same mechanics, zoned for the SMR
/// schemes.
pub fn models(scheme: &str, zone_size: u64) -> Vec<Box<dyn DriveModel>> {
    (0..DRIVES)
        .map(|_| -> Box<dyn DriveModel> {
            if scheme == "raid5" {
                DriveConfig::HddDetailed { name: MECHANICS.into(), params: mechanics() }.build(Some(DRIVE_CAP))
            } else {
                let zones = DRIVE_CAP / zone_size;
                let p = ZonedParams { capacity: zones * zone_size, zone_size, conventional_zones: (zones / 100).max(1), t_pos_ms: 0.0, rate_kib_s: 89_592.0 };
                Box::new(Zoned::with_mechanics("smr", p, mechanics()))
            }
        })
        .collect()
}

/// Run `programs` on the drive models one after another from `now` (the
/// ops of a program's phases in order); returns when the last completes.
fn apply(models: &mut [Box<dyn DriveModel>], programs: &[Program], mut now: u64) -> Result<u64, DvsError> {
    for p in programs {
        for ph in &p.phases {
            let reqs: Vec<(usize, DriveRequest)> = match ph {
                Phase::Read(ios) => ios.iter().map(|io| (io.op.member, DriveRequest::read(io.op.offset, io.op.len))).collect(),
                Phase::Write { ops, .. } => ops.iter().map(|io| (io.op.member, DriveRequest::write(io.op.offset, io.op.len))).collect(),
                Phase::Reset(ops) => ops.iter().map(|o| (o.member, DriveRequest { kind: ReqKind::ZoneReset, offset: o.offset, len: 0 })).collect(),
                _ => vec![],
            };
            let mut end = now;
            for (m, r) in reqs {
                let d = models.get_mut(m).ok_or_else(|| DvsError::Other(format!("no member {m}")))?;
                end = end.max(d.submit(now, &r).map_err(|e| DvsError::Other(format!("prefill: {e}")))?);
            }
            now = end;
        }
    }
    Ok(now)
}

/// Age the array: write `bytes` of data in address order, every
/// `spread`-th chunk ([`FILL`] requests when contiguous, one per chunk
/// otherwise), through the front end, running its work on the models.
/// Returns the virtual time the drives finish.
pub fn prefill(fe: &mut dyn Frontend, models: &mut [Box<dyn DriveModel>], bytes: u64, spread: u64) -> Result<u64, DvsError> {
    let h = Health::all_active(models.len());
    let step = if spread > 1 { CHUNK } else { FILL };
    let mut now = 0;
    let mut off = 0;
    while off < bytes {
        let len = step.min(bytes - off);
        let at = off / CHUNK * spread.max(1) * CHUNK + off % CHUNK;
        let st = fe.submit(true, at, len, now, &h).map_err(|e| DvsError::Other(format!("prefill: {e}")))?;
        now = apply(models, &st.fg, now)?;
        now = apply(models, &st.bg, now)?;
        off += len;
    }
    Ok(now)
}

/// One result row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scheme: String,
    pub workload: String,
    pub cache_pct: u32,
    pub zone_kib: u64,
    pub mean_ms: f64,
    pub p99_ms: f64,
    pub read_mean_ms: f64,
    pub write_mean_ms: f64,
    pub device_reads: u64,
    pub device_writes: u64,
    pub zone_resets: u64,
    /// Zone resets of DVS's idle-time GC (the rest are in the foreground:
    /// destages, segment rewrites, log cleaning).
    pub idle_resets: u64,
    pub requests: u64,
    /// Offered requests per second of the open-loop replay.
    pub offered_iops: f64,
    /// Saturated throughput (see the module docs), when measured.
    pub sat_iops: Option<f64>,
}

impl Row {
    /// Offered load above the saturated throughput: the mean is unbounded.
    pub fn saturated(&self) -> bool {
        self.sat_iops.is_some_and(|s| self.offered_iops > s)
    }
}

fn policy(rep: &SimReport, name: &str) -> u64 {
    rep.policy.iter().find(|p| p.0 == name).map_or(0, |p| p.1 as u64)
}

/// A front end, its drives, and when they finish the prefill.
type Setup = (Box<dyn Frontend + Send>, Vec<Box<dyn DriveModel>>, u64);

/// `scheme`'s front end and drives for `w`, aged by its prefill; the time
/// the prefill ends.
fn setup(scheme: &str, w: &Workload, cache_pct: u32, zone_size: u64) -> Result<Setup, DvsError> {
    let mut ms = models(scheme, zone_size);
    let cache = w.working_set_chunks() * cache_pct as usize / 100;
    let spec = SchemeSpec { chunk: CHUNK, block: 512, cache_chunks: cache, parity: 1 };
    let mut fe = build_frontend(scheme, &ms, &spec)?;
    let t = prefill(fe.as_mut(), &mut ms, w.prefill, w.spread)?;
    Ok((fe, ms, t))
}

/// Replay `w` on `scheme` open-loop (after its prefill, plus one second).
pub fn run_one(scheme: &str, w: &Workload, cache_pct: u32, zone_size: u64) -> Result<(Row, SimReport), DvsError> {
    let (fe, ms, t0) = setup(scheme, w, cache_pct, zone_size)?;
    let start = if w.prefill > 0 { t0 + 1_000_000_000 } else { 0 };
    let sim = Simulator::with_frontend(fe, ms, SimConfig { mode: Mode::Open { time_scale: 1.0 }, failed: vec![], keep_latencies: true }).map_err(|e| DvsError::Other(e.to_string()))?;
    let reqs = w.reqs.iter().map(|r| Ok::<_, std::convert::Infallible>(Request { time_ns: r.time_ns + start, ..*r }));
    let rep = sim.run(reqs).map_err(|e| DvsError::Other(format!("{scheme} on {}: {e}", w.name)))?;
    let mut all: Vec<u64> = rep.read_latencies_ns.iter().chain(&rep.write_latencies_ns).copied().collect();
    all.sort_unstable();
    let n = all.len().max(1) as f64;
    let mean = all.iter().map(|&x| x as f64).sum::<f64>() / n / 1e6;
    let p99 = all.get(((all.len().saturating_sub(1)) as f64 * 0.99).round() as usize).copied().unwrap_or(0) as f64 / 1e6;
    let row = Row {
        scheme: scheme.to_string(),
        workload: w.name.clone(),
        cache_pct,
        zone_kib: zone_size >> 10,
        mean_ms: mean,
        p99_ms: p99,
        read_mean_ms: rep.read_latency.mean_us / 1e3,
        write_mean_ms: rep.write_latency.mean_us / 1e3,
        device_reads: rep.devices.iter().map(|d| d.reads).sum(),
        device_writes: rep.devices.iter().map(|d| d.writes).sum(),
        zone_resets: rep.ops.zone_resets,
        idle_resets: policy(&rep, "background gc resets"),
        requests: rep.requests,
        offered_iops: w.offered_iops(),
        sat_iops: None,
    };
    Ok((row, rep))
}

/// Saturated throughput of `scheme` on `w` (see the module docs), timed
/// from the end of the prefill; None when the drives had no work.
pub fn saturated_iops(scheme: &str, w: &Workload, cache_pct: u32, zone_size: u64) -> Result<Option<f64>, DvsError> {
    let (fe, ms, t0) = setup(scheme, w, cache_pct, zone_size)?;
    let sim = Simulator::with_frontend(fe, ms, SimConfig { mode: Mode::Closed { queue_depth: SAT_QD }, failed: vec![], keep_latencies: false }).map_err(|e| DvsError::Other(e.to_string()))?;
    let reqs = w.reqs.iter().map(|r| Ok::<_, std::convert::Infallible>(*r));
    let rep = sim.run(reqs).map_err(|e| DvsError::Other(format!("{scheme} on {} (closed loop): {e}", w.name)))?;
    let busy = rep.duration_s - t0 as f64 / 1e9;
    Ok((busy > 0.0).then(|| rep.requests as f64 / busy))
}

/// All three experiments.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub config: ExpConfig,
    pub workloads: Vec<Spec>,
    pub overall: Vec<Row>,
    pub cache_sweep: Vec<Row>,
    pub band_sweep: Vec<Row>,
}

pub fn run_all(trace_path: Option<&Path>, cfg: &ExpConfig) -> Result<Results, DvsError> {
    run_all_with(trace_path, cfg, &|_, _| {})
}

/// [`run_all`], calling `progress(done, total)` after each replay.
pub fn run_all_with(trace_path: Option<&Path>, cfg: &ExpConfig, progress: &dyn Fn(u64, u64)) -> Result<Results, DvsError> {
    let mut wls = Vec::new();
    if let Some(p) = trace_path {
        wls.push(trace(p, cfg.trace_first, cfg.trace_time_scale)?);
    }
    for s in &WORKLOADS {
        wls.push(synthetic(s.name, cfg.synthetic_count, cfg.seed)?);
    }
    const BAND: [&str; 3] = ["dvs", "segment-raid5", "sblock-raid5"];
    let total = ((2 * wls.len() + cfg.cache_fracs.len()) * SCHEMES.len() + cfg.zone_sizes.len() * BAND.len()) as u64;
    let done = std::cell::Cell::new(0u64);
    let tick = || {
        done.set(done.get() + 1);
        progress(done.get(), total);
    };
    let run = |s: &str, w: &Workload, f: u32, z: u64| -> Result<Row, DvsError> {
        let r = run_one(s, w, f, z)?.0;
        tick();
        Ok(r)
    };
    let mut overall = Vec::new();
    for w in &wls {
        for s in SCHEMES {
            let mut r = run(s, w, 10, cfg.zone_size)?;
            r.sat_iops = saturated_iops(s, w, 10, cfg.zone_size)?;
            tick();
            overall.push(r);
        }
    }
    let sweep_wl = &wls[0];
    let mut cache_sweep = Vec::new();
    for &f in &cfg.cache_fracs {
        for s in SCHEMES {
            cache_sweep.push(run(s, sweep_wl, f, cfg.zone_size)?);
        }
    }
    let mut band_sweep = Vec::new();
    for &z in &cfg.zone_sizes {
        for s in BAND {
            band_sweep.push(run(s, sweep_wl, 10, z)?);
        }
    }
    Ok(Results { config: cfg.clone(), workloads: WORKLOADS.to_vec(), overall, cache_sweep, band_sweep })
}

/// Milliseconds: two decimals, none from 1,000 on (keeps columns narrow).
fn fmt_ms(x: f64) -> String {
    if x >= 1000.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

fn fmt_rows(title: &str, rows: &[Row]) -> String {
    let mut s = format!(
        "{title}\n{:<7} {:<12} {:>3} {:>6} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:>6} {:>4} {:>6}\n",
        "scheme", "workload", "c%", "zone", "mean ms", "p99 ms", "read ms", "writ ms", "dev rd", "dev wr", "resets", "idle", "sat/s"
    );
    for r in rows {
        let ms = |x: f64| if r.saturated() { "sat".to_string() } else { fmt_ms(x) };
        let sat = r.sat_iops.map_or("-".to_string(), |x| format!("{x:.0}"));
        s.push_str(&format!(
            "{:<7} {:<12} {:>3} {:>5}K {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:>6} {:>4} {:>6}\n",
            crate::dvs_paper::short(&r.scheme),
            r.workload,
            r.cache_pct,
            r.zone_kib,
            ms(r.mean_ms),
            ms(r.p99_ms),
            ms(r.read_mean_ms),
            ms(r.write_mean_ms),
            r.device_reads,
            r.device_writes,
            r.zone_resets,
            r.idle_resets,
            sat
        ));
    }
    s
}

fn fmt_workloads() -> String {
    let mut s = String::from(
        "workloads (synthetic: open loop, bursts then idle; aged: data written once before;\n\
         'of N': the data is every other 64 KiB chunk of N, so half of each SSG holds data)\n",
    );
    for w in &WORKLOADS {
        let kind = if w.seq { "seq write".to_string() } else { format!("{}% read", w.read_pct) };
        let data = if w.spread > 1 { format!("{} of {} MiB", w.footprint >> 20, (w.footprint * w.spread) >> 20) } else { format!("{} MiB", w.footprint >> 20) };
        s.push_str(&format!(
            "  {:<10} {:>5} B {:<9} {:>15} {:<5} {} every {} ms, {} ms idle: {:.0} req/s\n",
            w.name,
            w.size,
            kind,
            data,
            if w.aged { "aged" } else { "fresh" },
            w.burst,
            w.interval_ns / 1_000_000,
            w.idle_ns / 1_000_000,
            w.offered_iops()
        ));
    }
    s.push_str(&format!("  sat/s: saturated throughput, closed loop at queue depth {SAT_QD}; 'sat': offered load above it\n"));
    s.push_str("  HDD: HDD RAID-5, Seg: Segment RAID-5, Sblk: Sblock RAID-5; idle: resets in idle-time GC\n");
    s
}

impl Results {
    pub fn table(&self) -> String {
        let mut s = fmt_workloads();
        s.push('\n');
        s.push_str(&fmt_rows("overall (cache 10% of the working set)", &self.overall));
        s.push('\n');
        s.push_str(&fmt_rows("cache size sweep", &self.cache_sweep));
        s.push('\n');
        s.push_str(&fmt_rows("band (segment = zone) size sweep", &self.band_sweep));
        s.push('\n');
        s.push_str(&crate::dvs_paper::compare(self));
        s
    }

    /// The SVGs [`Results::plot`] writes.
    pub const PLOTS: [&'static str; 3] = ["dvs-overall.svg", "dvs-cache.svg", "dvs-band.svg"];

    /// Three SVGs into `dir`; the paths written.
    pub fn plot(&self, dir: &Path) -> Result<Vec<std::path::PathBuf>, DvsError> {
        use mosaic_sim::plot::Axis;
        std::fs::create_dir_all(dir)?;
        let files: Vec<std::path::PathBuf> = Self::PLOTS.iter().map(|f| dir.join(f)).collect();
        crate::dvs_plot::bars(&files[0], "DVS: mean response time per workload, cache 10% of the working set", &self.overall).map_err(DvsError::Other)?;
        let pct: Vec<f64> = self.config.cache_fracs.iter().map(|&f| f as f64).collect();
        let cache = Axis::linear("cache size (% of the working set)").ticks(pct);
        crate::dvs_plot::lines(&files[1], "DVS: mean response time vs cache size", cache, &self.cache_sweep, |r| r.cache_pct as f64).map_err(DvsError::Other)?;
        let mib: Vec<f64> = self.config.zone_sizes.iter().map(|&z| z as f64 / 1048576.0).collect();
        let band = Axis::log("segment (zone) size (MiB)").ticks(mib);
        crate::dvs_plot::lines(&files[2], "DVS: mean response time vs segment (zone) size", band, &self.band_sweep, |r| r.zone_kib as f64 / 1024.0).map_err(DvsError::Other)?;
        Ok(files)
    }
}

/// Count of writes in a workload (for reports).
pub fn writes(w: &Workload) -> usize {
    w.reqs.iter().filter(|r| r.op == Op::Write).count()
}
