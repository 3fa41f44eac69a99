//! Evaluation commands: trace stats, replay, model, advise.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;

use mosaic_core::{CacheConfig, CachePolicy, CachedArray, Direct, FixedLayout, Frontend, Geometry, Level, WritePolicy};
use mosaic_drives::DriveModel;
use mosaic_sim::{Mode, SimConfig, SimReport, Simulator, Synthetic};
use mosaic_trace::{Format, TraceOptions};

use crate::util::{human, print_json, size, table};

#[derive(Subcommand)]
pub enum TraceCmd {
    /// Statistics of a trace: mix, sizes, footprint, sequentiality, inter-arrival times
    Stats(TraceStatsArgs),
}

#[derive(Args, Clone)]
pub struct TraceInput {
    /// Trace file (gzip and zstd are read transparently)
    #[arg(long = "trace")]
    pub trace: Option<PathBuf>,
    /// Trace format: spc, msr, blkparse, cloudphysics, fio2, fio3, alibaba,
    /// tencent or auto (detected from the first lines)
    #[arg(long, default_value = "auto")]
    pub format: String,
    /// Keep only this ASU / disk number / device or volume id
    #[arg(long = "trace-device")]
    pub trace_device: Option<String>,
    /// Use only the first N requests (default: all)
    #[arg(long)]
    pub first: Option<u64>,
    /// Multiply trace timestamps by X (0.5 = twice as fast)
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Count and skip malformed lines instead of stopping at the first
    #[arg(long)]
    pub skip_bad: bool,
}

impl TraceInput {
    pub fn options(&self) -> Result<TraceOptions> {
        let format = if self.format == "auto" { None } else { Some(self.format.parse::<Format>().map_err(|e| anyhow!("{e}"))?) };
        Ok(TraceOptions { format, device: self.trace_device.clone(), first: self.first, time_scale: self.time_scale, skip_bad: self.skip_bad })
    }

    pub fn open(&self, path: &Path) -> Result<mosaic_trace::TraceReader> {
        Ok(mosaic_trace::open(path, &self.options()?)?)
    }

    /// After a trace was read: say how many lines `--skip-bad` skipped and
    /// how many requests' times went back before the first (on stderr, as
    /// `trace stats` prints them), so a damaged trace is never replayed as
    /// if whole without a word.
    pub fn warn_skipped(path: &Path, r: &mosaic_trace::TraceReader) {
        if r.skipped_bad() > 0 {
            eprintln!("warning: {}: skipped {} malformed lines (--skip-bad)", path.display(), r.skipped_bad());
        }
        if r.clamped() > 0 {
            eprintln!(
                "warning: {}: {} requests earlier than the first request (timestamps out of order) were read at time 0",
                path.display(),
                r.clamped()
            );
        }
    }

    /// [`Self::open`] with `pb` following the bytes of the file read (its
    /// length set to the file's size).
    pub fn open_with_bar(&self, path: &Path, pb: &indicatif::ProgressBar) -> Result<mosaic_trace::TraceReader> {
        pb.set_length(std::fs::metadata(path).map(|m| m.len()).unwrap_or(0));
        let bar = pb.clone();
        Ok(mosaic_trace::open_with_progress(path, &self.options()?, move |n| bar.set_position(n))?)
    }
}

#[derive(Args)]
pub struct TraceStatsArgs {
    /// Trace file (or --trace FILE)
    #[arg(required_unless_present = "trace", conflicts_with = "trace")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub input: TraceInput,
    /// Print the statistics as JSON
    #[arg(long)]
    pub json: bool,
}

pub fn trace(cmd: TraceCmd) -> Result<i32> {
    match cmd {
        TraceCmd::Stats(a) => {
            let pb = crate::util::progress(0, "reading");
            let file = a.file.as_ref().or(a.input.trace.as_ref()).ok_or_else(|| anyhow!("give the trace file (FILE or --trace FILE)"))?;
            let r = a.input.open_with_bar(file, &pb)?;
            let st = mosaic_trace::stats(r)?;
            pb.finish_and_clear();
            if a.json {
                print_json(&st)?;
            } else {
                print!("{st}");
            }
            Ok(0)
        }
    }
}

// ------------------------------------------------------------------ replay

#[derive(Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub input: TraceInput,
    /// Instead of a trace: randwrite, randread, seqwrite or mixed:PCT
    #[arg(long, conflicts_with = "trace")]
    pub synthetic: Option<String>,
    /// Synthetic request size
    #[arg(long, value_parser = size, default_value = "4K")]
    pub size: u64,
    /// Synthetic request count
    #[arg(long, default_value_t = 100_000)]
    pub count: u64,
    /// Synthetic footprint: the span the requests address
    #[arg(long, value_parser = size, default_value = "1G")]
    pub footprint: u64,
    /// Seed of the synthetic workload
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Layout: raid0, raid1, raid4, raid5, raid6, rs:K+M, cbro:N+K[,cda=...], tier (see --fast, --slow),
    /// remap:LEVEL (the remapped array over LEVEL on --drives, as create --level remap),
    /// or on SMR drives dvs, segment-raid5, sblock-raid5
    #[arg(long, default_value = "raid5")]
    pub layout: String,
    /// Compare several layouts on the same trace and drives (comma list)
    #[arg(long)]
    pub compare: Option<String>,
    /// Number of drives
    #[arg(long, default_value_t = 5)]
    pub drives: usize,
    /// Drive model: a preset (hdd:seagate-st91000640ss, ssd:samsung-830-128g, nvme:generic, ram:default, smr:default...)
    /// or file:PATH.toml; net:LINK/SPEC puts it on another machine behind a link (LINK: 1gbe, 10gbe, 25gbe,
    /// 100gbe or wan, with ,rtt_us=..,gbit=..,jitter_us=..); repeat with IDX=SPEC or A-B=SPEC to mix kinds per member
    #[arg(long, default_value = "hdd:seagate-st91000640ss")]
    pub device: Vec<String>,
    /// Stripe unit of the replayed array (chunk of DVS and the SMR baselines)
    #[arg(long, value_parser = size, default_value = "64K")]
    pub stripe_unit: u64,
    /// Logical block size of the replayed array, bytes: 512 or 4096
    #[arg(long, value_parser = size, default_value = "512")]
    pub block_size: u64,
    /// open (trace timestamps) or closed (fixed queue depth)
    #[arg(long, default_value = "open")]
    pub mode: String,
    /// Requests in flight in closed mode (and on --on)
    #[arg(long, default_value_t = 16)]
    pub queue_depth: usize,
    /// Members failed for the whole replay (degraded mode), comma list
    #[arg(long)]
    pub failed: Option<String>,
    /// auto (fewest reads), rmw or rcw
    #[arg(long, default_value = "auto")]
    pub policy: String,
    /// raid1: a member read only when no other copy serves, as a real
    /// mirror's `create --write-mostly` (mdadm's); repeat or comma list
    #[arg(long = "write-mostly", value_name = "N", value_delimiter = ',')]
    pub write_mostly: Vec<usize>,
    /// Write-back small-write cache in front of the array (the partial
    /// parity cache paper's policies): none (a write cache, no parity
    /// cache), fpc (full parity cache), ppc (partial parity cache) or
    /// ppc+data (ppc with an old-data buffer); a comma list compares them.
    /// The run ends with the caches destaged, so each policy pays for all
    /// it defers (--keep-cache to leave them)
    #[arg(long)]
    pub cache: Option<String>,
    /// --cache: end the run with the caches as they are (a real volume's
    /// flush keeps them, journaled): the work they defer is not counted
    #[arg(long, requires = "cache")]
    pub keep_cache: bool,
    /// Write-cache capacity (and, unless given, parity cache and old-data buffer)
    #[arg(long, value_parser = size, default_value = "64M")]
    pub cache_size: u64,
    /// Parity-cache capacity (default: --cache-size)
    #[arg(long, value_parser = size)]
    pub parity_cache_size: Option<u64>,
    /// Old-data buffer capacity (default: --cache-size)
    #[arg(long, value_parser = size)]
    pub old_data_size: Option<u64>,
    /// Print the report (and each --compare or --cache run) as JSON
    #[arg(long)]
    pub json: bool,
    /// Write an SVG: latency CDF and per-device utilisation
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Overwrite a plot file that is a member or journal of an array
    #[arg(long)]
    pub force: bool,
    /// Replay on this real array instead of modelled drives (closed loop at
    /// --queue-depth; the layout, drives, unit and block are the array's
    /// own, so the options that model them are refused; same report
    /// schema).  At queue depth 1 its per-member counts equal a simulated
    /// replay's (caches destaged at the end on both, as --keep-cache says).
    #[arg(long, conflicts_with_all = ["compare", "plot", "failed", "layout", "drives", "device", "stripe_unit", "block_size", "mode", "policy", "time_scale"])]
    pub on: Option<String>,
    #[command(flatten)]
    pub tier: TierArgs,
    /// remap:LEVEL: bytes used of each drive (as `create --member-size`); default the whole model
    #[arg(long, value_parser = size)]
    pub member_size: Option<u64>,
    /// remap:LEVEL: the unit that moves (divides --stripe-unit; default the stripe unit)
    #[arg(long, value_parser = size)]
    pub remap_unit: Option<u64>,
    /// remap:LEVEL: share of each drive's units kept spare (0.125)
    #[arg(long)]
    pub remap_spare: Option<f64>,
}

/// The hybrid tier's two arrays (`--layout tier`): members are numbered
/// fast ones first, so `--device 0-1=ssd:... --device 2-7=hdd:...`.
#[derive(Args, Debug, Clone, Default)]
pub struct TierArgs {
    /// tier: the fast array, LEVEL:N (e.g. raid1:2)
    #[arg(long, default_value = "raid1:2")]
    pub fast: String,
    /// tier: the slow array, LEVEL:N (e.g. raid6:6)
    #[arg(long, default_value = "raid6:6")]
    pub slow: String,
    /// tier: bytes used of each fast drive (as `create --fast-size`); default the whole model
    #[arg(long, value_parser = size)]
    pub fast_size: Option<u64>,
    /// tier: bytes used of each slow drive (as `create --slow-size`); default the whole model
    #[arg(long, value_parser = size)]
    pub slow_size: Option<u64>,
    /// tier: extent sizes of the fast tier's data sections (equal shares)
    #[arg(long, default_value = "64K,256K")]
    pub tier_extents: String,
    /// tier: ReHypar's threshold V in blocks
    #[arg(long, default_value_t = 8)]
    pub tier_v: u64,
    /// tier: the fixed-extent baseline instead of ReHypar
    #[arg(long)]
    pub tier_fixed_extents: bool,
    /// tier: decide by a clock that advances this many ns per request
    /// instead of virtual time (as `create --tier-request-clock`; 0 = off)
    #[arg(long, default_value_t = 0)]
    pub tier_request_clock: u64,
}

/// Build one drive model per member from `--device` arguments.
pub fn build_drives(specs: &[String], n: usize) -> Result<Vec<Box<dyn DriveModel>>> {
    device_specs(specs, n)?
        .iter()
        .map(|spec| mosaic_drives::build_device(spec, None).map_err(|e| anyhow!("--device {spec:?}: {e}")))
        .collect()
}

/// The device spec of each of `n` members from `--device` arguments.
pub fn device_specs(specs: &[String], n: usize) -> Result<Vec<String>> {
    let mut per: Vec<Option<String>> = vec![None; n];
    let mut default: Option<String> = None;
    for s in specs {
        match s.split_once('=') {
            Some((range, spec)) if !range.contains(':') => {
                let (a, b) = match range.split_once('-') {
                    Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
                    None => (range.trim().parse::<usize>(), range.trim().parse::<usize>()),
                };
                let (a, b) = (a.map_err(|_| anyhow!("bad member range {range:?} in --device {s:?}"))?, b.map_err(|_| anyhow!("bad member range {range:?} in --device {s:?}"))?);
                if a > b || b >= n {
                    bail!("member range {range:?} in --device {s:?} is outside 0..{}", n - 1);
                }
                for slot in per.iter_mut().take(b + 1).skip(a) {
                    *slot = Some(spec.to_string());
                }
            }
            _ => default = Some(s.clone()),
        }
    }
    per.into_iter().enumerate().map(|(i, p)| p.or_else(|| default.clone()).ok_or_else(|| anyhow!("no --device given for member {i}"))).collect()
}

/// The layout and drive models of `level` over `n` members (when the
/// level does not imply a count).  A cbro level with a parity check drive
/// array (`cda=raid5:W`, `cda=cbro:...`) gets one [`ArrayDrive`] per CDA,
/// built the same way from that member's device spec.
///
/// [`ArrayDrive`]: mosaic_sim::nested::ArrayDrive
/// Every `--layout` replay takes, for the message naming an unknown one.
const LAYOUTS: &str = "raid0, raid1, raid4, raid5, raid6, rs:K+M, cbro:N+K[,cda=...], tier, remap:LEVEL, dvs, segment-raid5 or sblock-raid5";

/// An unknown `--layout` is named with every layout replay takes (the
/// fixed levels' parser knows only its own).
fn check_layout_name(level: &str) -> Result<()> {
    let t = level.trim().to_ascii_lowercase();
    let fixed = matches!(t.as_str(), "raid0" | "raid1" | "raid4" | "raid5" | "raid6") || t.starts_with("rs:") || t.starts_with("cbro:");
    if !fixed {
        bail!("unknown --layout {level:?}: expected {LAYOUTS}");
    }
    Ok(())
}

pub fn sim_array(level: &str, n: usize, devices: &[String], unit: u64, block: u64, policy: WritePolicy) -> Result<(FixedLayout, Vec<Box<dyn DriveModel>>)> {
    let Some((outer, inner, inner_n)) = mosaic_array::nested::split_cda(level)? else {
        let lvl: Level = level.parse()?;
        let n = lvl.implied_members().unwrap_or(n);
        let drives = build_drives(devices, n)?;
        let cap = drives.iter().map(|d| d.capacity()).min().unwrap_or(0);
        return Ok((layout_for(level, n, unit, block, cap, policy)?, drives));
    };
    let Level::Cbro { n: d, k, .. } = outer else { bail!("{level}: only cbro has check drive arrays") };
    let (d, k) = (d as usize, k as usize);
    let specs = device_specs(devices, d + k)?;
    let mut drives = build_drives(&specs[..d], d)?;
    for spec in &specs[d..] {
        let (il, idrives) = sim_array(&inner, inner_n, std::slice::from_ref(spec), unit, block, policy)?;
        drives.push(Box::new(mosaic_sim::nested::ArrayDrive::new(il, idrives).map_err(|e| anyhow!(e))?));
    }
    // As for every replayed array, the smallest drive bounds what is used.
    let cap = drives.iter().map(|x| x.capacity()).min().unwrap_or(0);
    let geo = Geometry::new(outer, d + k, unit, block, cap)?;
    Ok((FixedLayout::new(geo)?.with_policy(policy), drives))
}

pub fn layout_for(level: &str, drives: usize, unit: u64, block: u64, capacity: u64, policy: WritePolicy) -> Result<FixedLayout> {
    let level: Level = level.parse()?;
    let n = level.implied_members().unwrap_or(drives);
    let geo = Geometry::new(level, n, unit, block, capacity)?;
    Ok(FixedLayout::new(geo)?.with_policy(policy))
}

fn policy(s: &str) -> Result<WritePolicy> {
    Ok(match s {
        "auto" => WritePolicy::Auto,
        "rmw" => WritePolicy::ForceRmw,
        "rcw" => WritePolicy::ForceRcw,
        _ => bail!("unknown --policy {s:?}: expected auto, rmw or rcw"),
    })
}

/// Replay one layout; the trace is opened afresh for each run.
/// The cache configuration of `--cache NAME` and the size options.
pub fn cache_config(a: &ReplayArgs, name: &str) -> Result<CacheConfig> {
    Ok(CacheConfig {
        policy: CachePolicy::parse(name)?,
        write_cache: a.cache_size,
        parity_cache: a.parity_cache_size.unwrap_or(a.cache_size),
        old_data: a.old_data_size.unwrap_or(a.cache_size),
    })
}

fn replay_one(a: &ReplayArgs, level: &str, cache: Option<&str>, keep: bool) -> Result<SimReport> {
    // Synthetic workloads carry no timestamps: they always run closed-loop.
    let mode = match (a.mode.as_str(), a.synthetic.is_some()) {
        ("open", false) => Mode::Open { time_scale: 1.0 },
        ("open", true) | ("closed", _) => Mode::Closed { queue_depth: a.queue_depth },
        (m, _) => bail!("unknown --mode {m:?}: expected open or closed"),
    };
    let failed: Vec<usize> = match &a.failed {
        None => vec![],
        Some(s) => s.split(',').map(|x| x.trim().parse().map_err(|_| anyhow!("bad --failed member {x:?}"))).collect::<Result<_>>()?,
    };
    let cfg = SimConfig { mode, failed, keep_latencies: keep };
    let layout;
    let fixed = !(level.starts_with("remap:") || level == "tier" || crate::cmd_dvs::is_dvs_scheme(level));
    if !a.write_mostly.is_empty() && !fixed {
        bail!("--write-mostly is for raid1 (mirror) layouts, not {level}");
    }
    let (fe, drives): (Box<dyn Frontend>, _) = if let Some(inner) = level.strip_prefix("remap:") {
        if cache.is_some() {
            bail!("--cache is for fixed parity layouts, not remapped ones");
        }
        crate::remap_sim::frontend(a, inner, policy(&a.policy)?)?
    } else if level == "tier" {
        if cache.is_some() {
            bail!("--cache is for fixed parity layouts; the tier's fast array is its cache");
        }
        crate::tier_sim::frontend(&a.tier, &a.device, a.stripe_unit, a.block_size, policy(&a.policy)?)?
    } else if crate::cmd_dvs::is_dvs_scheme(level) {
        if cache.is_some() {
            bail!("--cache is for fixed parity layouts; {level} has its own write cache");
        }
        let drives = build_drives(&a.device, a.drives)?;
        (crate::cmd_dvs::replay_frontend(level, &drives, a.stripe_unit, a.block_size, 0)?, drives)
    } else {
        check_layout_name(level)?;
        let (l, d) = sim_array(level, a.drives, &a.device, a.stripe_unit, a.block_size, policy(&a.policy)?)?;
        layout = l.with_write_mostly(&a.write_mostly)?;
        let fe: Box<dyn Frontend> = match cache {
            None => Box::new(Direct(&layout)),
            Some(name) => Box::new(CachedArray::new(&layout, cache_config(a, name)?)?.destage_at_end(!a.keep_cache)),
        };
        // Fixed layouts overwrite in place: on SMR models they run on
        // conventional drives of the same timing (the paper's HDD RAID-5).
        (fe, crate::cmd_dvs::drives_for_fixed_layout(d))
    };
    let syn = match &a.synthetic {
        Some(p) => Some(synthetic_for(a, p, fe.capacity(), fe.block_size())?),
        None => None,
    };
    let sim = Simulator::with_frontend(fe, drives, cfg)?;
    // A bar over the trace file's bytes, or the synthetic requests' bytes.
    let pb = crate::util::progress(0, "replay");
    let rep = match (&syn, &a.input.trace) {
        (Some(syn), _) => {
            pb.set_length(syn.count.saturating_mul(syn.size));
            sim.run(syn.requests().inspect(|_| pb.inc(syn.size)))?
        }
        (None, Some(path)) => {
            let mut r = a.input.open_with_bar(path, &pb)?;
            let rep = sim.run(&mut r)?;
            TraceInput::warn_skipped(path, &r);
            rep
        }
        (None, None) => bail!("give --trace FILE or --synthetic KIND"),
    };
    pb.finish_and_clear();
    Ok(rep)
}

/// The synthetic sizes on their own: no zero, a request within the span.
fn check_synthetic_sizes(a: &ReplayArgs) -> Result<()> {
    if a.size == 0 {
        bail!("--size 0: a synthetic request needs at least one block");
    }
    if a.footprint == 0 {
        bail!("--footprint 0: a synthetic workload needs a span to address");
    }
    if a.count == 0 {
        bail!("--count 0: a synthetic workload needs at least one request");
    }
    if a.size > a.footprint {
        bail!("--size {} is larger than --footprint {}: every request must fit in the span", a.size, a.footprint);
    }
    Ok(())
}

/// The synthetic workload of `--synthetic KIND` for an array of
/// `capacity` bytes and `block`-byte blocks: requests whole blocks, the
/// span within the array.
pub fn synthetic_for(a: &ReplayArgs, kind: &str, capacity: u64, block: u64) -> Result<Synthetic> {
    let pattern = Synthetic::parse_pattern(kind).map_err(|e| anyhow!(e))?;
    check_synthetic_sizes(a)?;
    // `%` rather than `is_multiple_of`: the workspace's rust-version is 1.80.
    #[allow(clippy::manual_is_multiple_of)]
    if a.size % block != 0 {
        bail!("--size {} is not a multiple of the array's {block}-byte block size", a.size);
    }
    if a.footprint > capacity {
        bail!("--footprint {} is beyond the array's capacity of {capacity} bytes", a.footprint);
    }
    Ok(Synthetic { pattern, size: a.size, count: a.count, footprint: a.footprint, seed: a.seed, interval_ns: 0 })
}

/// Split a `--compare` list on commas, keeping `cbro:N+K,cda=...` whole.
fn split_layouts(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match out.last_mut() {
            Some(last) if part.starts_with("cda=") => {
                last.push(',');
                last.push_str(part);
            }
            _ => out.push(part.to_string()),
        }
    }
    out
}

#[derive(Serialize)]
struct ReplayOut<'a> {
    #[serde(flatten)]
    first: &'a SimReport,
    compare: &'a [SimReport],
}

pub fn replay(a: ReplayArgs) -> Result<i32> {
    let layouts: Vec<String> = match &a.compare {
        Some(c) => split_layouts(c),
        None => vec![a.layout.clone()],
    };
    if layouts.is_empty() {
        bail!("--compare needs at least one layout");
    }
    if let Some(p) = &a.plot {
        crate::util::check_output(p, a.force)?;
    }
    if a.synthetic.is_some() {
        check_synthetic_sizes(&a)?;
    }
    if let Some(spec) = &a.on {
        let rep = crate::replay_real::run(&a, spec)?;
        if a.json {
            print_json(&ReplayOut { first: &rep, compare: &[] })?;
        } else {
            print!("{}", replay_table(std::slice::from_ref(&rep)));
        }
        return Ok(0);
    }
    let keep = a.plot.is_some();
    let caches: Vec<Option<&str>> = match &a.cache {
        None => vec![None],
        Some(c) => c.split(',').map(|s| Some(s.trim())).collect(),
    };
    let mut reports = Vec::new();
    for l in &layouts {
        for c in &caches {
            reports.push(replay_one(&a, l, *c, keep).with_context(|| format!("replaying on {l}"))?);
        }
    }
    if let Some(p) = &a.plot {
        let title = match (&a.input.trace, &a.synthetic) {
            (Some(t), _) => format!("replay of {}", t.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()),
            (_, Some(s)) => format!("synthetic {s}, {} requests", a.count),
            _ => "replay".into(),
        };
        mosaic_sim::plot::write_svg(p, &title, &reports).map_err(|e| anyhow!(e))?;
    }
    if a.json {
        print_json(&ReplayOut { first: &reports[0], compare: &reports[1..] })?;
    } else {
        print!("{}", replay_table(&reports));
    }
    crate::util::say_written(&a.plot.iter().collect::<Vec<_>>(), a.json);
    Ok(0)
}

pub fn replay_table(reports: &[SimReport]) -> String {
    let mut rows = vec![vec![
        "layout".into(),
        "requests".into(),
        "IOPS".into(),
        "MiB/s".into(),
        "read mean/p99 ms".into(),
        "write mean/p99 ms".into(),
        "dev reads/writes".into(),
        "rd+wr per write".into(),
        "rmw/rcw/fsw".into(),
    ]];
    for r in reports {
        rows.push(vec![
            r.layout.clone(),
            r.requests.to_string(),
            format!("{:.0}", r.iops),
            format!("{:.1}", r.mib_per_s),
            format!("{:.2}/{:.2}", r.read_latency.mean_us / 1e3, r.read_latency.p99_us / 1e3),
            format!("{:.2}/{:.2}", r.write_latency.mean_us / 1e3, r.write_latency.p99_us / 1e3),
            format!("{}/{}", r.device_reads, r.device_writes),
            format!("{:.2}+{:.2}", r.device_reads_per_write, r.device_writes_per_write),
            format!("{}/{}/{}", r.ops.stripes_rmw, r.ops.stripes_rcw, r.ops.stripes_fsw),
        ]);
    }
    let mut out = table(&rows);
    for r in reports {
        let mut d = vec![vec!["device".into(), "model".into(), "reads".into(), "writes".into(), "read".into(), "written".into(), "util".into()]];
        for s in &r.devices {
            d.push(vec![
                s.index.to_string(),
                s.model.clone(),
                s.reads.to_string(),
                s.writes.to_string(),
                human(s.read_bytes),
                human(s.write_bytes),
                format!("{:.1}%", s.utilisation * 100.0),
            ]);
        }
        out.push_str(&format!("\n{}:\n", r.layout));
        out.push_str(&table(&d));
        if !r.policy.is_empty() {
            let kv: Vec<String> = r.policy.iter().map(|(k, v)| if v.fract() == 0.0 { format!("{k}={v}") } else { format!("{k}={v:.3}") }).collect();
            out.push_str(&format!("policy: {}\n", kv.join(" ")));
        }
        out.push_str(&fitted_note(r));
    }
    out
}

/// What the replay changed in the trace's requests to fit the array, in
/// words (the JSON has the counts): none when it changed nothing.
fn fitted_note(r: &SimReport) -> String {
    let mut s = String::new();
    if r.wrapped > 0 {
        s += &format!(
            "note: {} of {} requests lay past the array's capacity and were wrapped into it (offset modulo the capacity): give larger drives to keep them apart\n",
            r.wrapped, r.requests
        );
    }
    if r.realigned > 0 {
        s += &format!("note: {} of {} requests were widened (or moved) to whole blocks of the array, so the byte totals are of the widened requests\n", r.realigned, r.requests);
    }
    s
}

/// One line per report: the comparison table without per-device detail.
pub fn replay_table_brief(reports: &[SimReport]) -> String {
    let mut rows = vec![vec!["array".into(), "IOPS".into(), "write mean ms".into(), "write p99 ms".into(), "dev reads+writes per write".into()]];
    for r in reports {
        rows.push(vec![
            r.layout.clone(),
            format!("{:.0}", r.iops),
            format!("{:.2}", r.write_latency.mean_us / 1e3),
            format!("{:.2}", r.write_latency.p99_us / 1e3),
            format!("{:.2}+{:.2}", r.device_reads_per_write, r.device_writes_per_write),
        ]);
    }
    table(&rows)
}

#[cfg(test)]
mod tests {
    #[test]
    fn compare_lists_keep_cbro_specs_whole() {
        assert_eq!(super::split_layouts("raid5, cbro:16+1,cda=raid0:4,raid6"), vec!["raid5", "cbro:16+1,cda=raid0:4", "raid6"]);
    }
}
