//! The ReHypar experiments (Park et al., "ReHypar: recursive hybrid chunk
//! partitioning", §4), paper beside mosaic, behind `mosaic eval tier`.
//!
//! ```text
//!   table 1   the chunk partitioning's deepest split level per (extent, V):
//!             the paper's Table 1 beside mosaic_tier's geometry
//!   space     fast-tier live/allocated, ReHypar vs fixed extents, 64/256 KiB
//!             extents, V = 8/32, Postmark-like (allocator only)   space.rs
//!   iozone    write bandwidth, 8 KiB records, 1..256 MiB files:
//!             tier 64K/256K vs all-ssd, all-hdd, lru-cache         rig.rs
//!   postmark  transactions/s, 1,000..20,000 files, same schemes
//!   trace     the CloudPhysics trace (first N requests): mean latency, MiB/s
//! ```
//!
//! Workloads are seeded ([`workload`]); everything runs in virtual time on
//! `mosaic-sim` drive models ([`rig`]), so results are reproducible.  The
//! paper measured ext2/ext4 on an 80 GB Fusion-io card and two 720 GB
//! disks with 1 KB blocks; its numbers are quoted as it gives them, and the
//! comparable mosaic figure printed beside.  The paper has no figure for
//! space utilisation (only Table 1's structure); that column says so.

pub mod lru;
pub mod plot;
pub mod report;
pub mod rig;
pub mod space;
pub mod tierfe;
pub mod workload;

use std::path::Path;

use mosaic_sim::Mode;
use mosaic_trace::{Request, TraceOptions};
use serde::Serialize;

use rig::{Rig, RunRow, Scheme};
use space::SpaceRow;
use workload::{IozoneSpec, PostmarkSpec};

/// Errors of the tier experiments.
#[derive(Debug, thiserror::Error)]
pub enum TierEvalError {
    #[error(transparent)]
    Tier(#[from] mosaic_tier::TierError),
    #[error(transparent)]
    Run(#[from] mosaic_tier::RunError),
    #[error(transparent)]
    Plan(#[from] mosaic_core::PlanError),
    #[error("trace: {0}")]
    Trace(#[from] mosaic_trace::TraceError),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The tier policy could not be used (not built, or refused its configuration).
    #[error("tier policy unavailable: {0}")]
    NotReady(String),
    #[error("{0}")]
    Other(String),
}

/// The paper's numbers (ext2 unless named), as fractions.
pub mod paper {
    /// IOzone, 256 MB file: ReHypar 64 KB extents over ext2 on SSD.
    pub const IOZONE_64K_OVER_SSD: f64 = 0.10;
    /// IOzone, 256 MB file: ReHypar 256 KB extents over ext2 on SSD.
    pub const IOZONE_256K_OVER_SSD: f64 = 0.14;
    /// The same on ext4 (256 KB extents).
    pub const IOZONE_256K_OVER_SSD_EXT4: f64 = 0.11;
    /// IOzone, 256 KB extents, 256 MB file: V = 32 over V = 8.
    pub const IOZONE_V32_OVER_V8: f64 = 0.03;
    /// Postmark, 1,000 files: 256 KB over 64 KB extents (ext2; ext4 14%).
    pub const POSTMARK_256K_OVER_64K: f64 = 0.12;
    pub const POSTMARK_256K_OVER_64K_EXT4: f64 = 0.14;
    /// Postmark, 1,000 files, 256 KB extents: V = 32 over V = 8 (ext2;
    /// "not noticeable" on ext4).
    pub const POSTMARK_V32_OVER_V8: f64 = 0.04;
    /// Table 1: deepest split level for (extent KB, V) with 1 KB blocks.
    pub const TABLE1: [(u64, u64, Option<u32>); 4] = [(64, 8, Some(2)), (64, 32, Some(0)), (256, 8, Some(4)), (256, 32, Some(2))];
}

/// Sizes of every experiment.
#[derive(Debug, Clone, Serialize)]
pub struct TierEvalConfig {
    pub seed: u64,
    /// Space experiment: file counts and transactions.
    pub space_files: Vec<usize>,
    pub space_transactions: usize,
    pub extents: Vec<u64>,
    pub vs: Vec<u64>,
    /// IOzone-like file sizes (bytes), and the writer's rate (bytes/s)
    /// that sets the stream's arrival times (the eval replays it closed
    /// loop, see [`run_iozone`]).
    pub iozone_sizes: Vec<u64>,
    pub iozone_rate: u64,
    /// Postmark-like replays: file counts, transactions, block size.
    pub postmark_files: Vec<usize>,
    pub postmark_transactions: usize,
    /// Trace requests replayed at most (the stored trace has 56,936), and
    /// the time scale of their arrivals.
    pub trace_first: u64,
    pub trace_time_scale: f64,
    pub rig: Rig,
}

impl Default for TierEvalConfig {
    fn default() -> Self {
        TierEvalConfig {
            seed: 1,
            space_files: vec![1000, 5000, 20_000],
            space_transactions: 100_000,
            extents: vec![64 << 10, 256 << 10],
            vs: vec![8, 32],
            iozone_sizes: vec![1 << 20, 16 << 20, 256 << 20],
            iozone_rate: 1 << 30,
            postmark_files: vec![1000, 20_000],
            postmark_transactions: 20_000,
            trace_first: 100_000,
            trace_time_scale: 1.0,
            rig: Rig::default(),
        }
    }
}

impl TierEvalConfig {
    /// A small run for tests and `--quick`.
    pub fn quick() -> Self {
        TierEvalConfig {
            space_files: vec![1000],
            space_transactions: 5000,
            iozone_sizes: vec![1 << 20, 8 << 20],
            postmark_files: vec![1000],
            postmark_transactions: 2000,
            trace_first: 2000,
            ..Default::default()
        }
    }

    fn postmark_spec(&self, files: usize, transactions: usize) -> PostmarkSpec {
        PostmarkSpec { files, transactions, block: self.rig.block, seed: self.seed, ..Default::default() }
    }
}

/// Table 1: the paper's deepest split level beside mosaic's geometry.
#[derive(Debug, Clone, Serialize)]
pub struct Table1Row {
    pub extent_kib: u64,
    pub v: u64,
    pub chunks_level0: usize,
    pub paper_max_level: Option<u32>,
    pub mosaic_max_level: Option<u32>,
}

/// An IOzone-like replay.
#[derive(Debug, Clone, Serialize)]
pub struct IozoneRow {
    pub file_size: u64,
    pub run: RunRow,
}

/// A Postmark-like replay.
#[derive(Debug, Clone, Serialize)]
pub struct PostmarkRow {
    pub files: usize,
    pub transactions: u64,
    pub tx_per_s: f64,
    pub run: RunRow,
}

/// Everything `mosaic eval tier` measured.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub config: TierEvalConfig,
    pub table1: Vec<Table1Row>,
    pub space: Vec<SpaceRow>,
    pub space_workloads: Vec<workload::PostmarkTrace>,
    pub iozone: Vec<IozoneRow>,
    pub postmark: Vec<PostmarkRow>,
    pub trace: Vec<TraceRow>,
    /// Trace read requests none of whose blocks the trace wrote before:
    /// data older than the trace.  The tier starts empty and answers them
    /// with zeros and no I/O; every baseline reads them from a device.
    pub trace_cold_reads: u64,
    /// What could not run, and why.
    pub notes: Vec<String>,
}

/// Table 1 from the geometry.
pub fn table1() -> Result<Vec<Table1Row>, TierEvalError> {
    paper::TABLE1
        .iter()
        .map(|&(kb, v, paper)| {
            let g = mosaic_tier::ExtentGeometry::new(kb, v)?;
            Ok(Table1Row { extent_kib: kb, v, chunks_level0: g.level0().len(), paper_max_level: paper, mosaic_max_level: g.max_split_level() })
        })
        .collect()
}

/// The space experiment (1 KiB blocks, as the paper).
pub fn run_space(cfg: &TierEvalConfig) -> Result<(Vec<SpaceRow>, Vec<workload::PostmarkTrace>), TierEvalError> {
    let mut rows = Vec::new();
    let mut wls = Vec::new();
    for &files in &cfg.space_files {
        let spec = PostmarkSpec { files, transactions: cfg.space_transactions, block: 1024, seed: cfg.seed, ..Default::default() };
        let t = workload::postmark(&spec);
        // Room for every write in its own extent (no run here is longer
        // than an extent): nothing is refused.
        let writes = t.events.iter().filter(|e| matches!(e, workload::FsEvent::Write { .. })).count() as u64;
        for case in space::cases(&cfg.extents, &cfg.vs) {
            let capacity = (writes + 16) * case.extent_bytes;
            rows.push(space::run_case(&t, &case, files, capacity, 50)?);
        }
        wls.push(t);
    }
    Ok((rows, wls))
}

/// Schemes of the simulator experiments.
pub fn schemes(cfg: &TierEvalConfig) -> Vec<Scheme> {
    let mut v = vec![Scheme::AllSsd, Scheme::AllHdd, Scheme::Lru];
    for &e in &cfg.extents {
        for &t in &cfg.vs {
            v.push(Scheme::Tier { extent: e, v: t });
        }
    }
    v
}

/// Run `f` on every scheme; a tier scheme that cannot be built becomes a
/// note (once), everything else an error.
fn each_scheme<T>(cfg: &TierEvalConfig, notes: &mut Vec<String>, mut f: impl FnMut(&Scheme) -> Result<T, TierEvalError>) -> Result<Vec<T>, TierEvalError> {
    let mut out = Vec::new();
    for s in schemes(cfg) {
        match f(&s) {
            Ok(x) => out.push(x),
            Err(TierEvalError::NotReady(m)) => {
                let n = format!("{}: not run ({m})", s.name());
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The block layer's queue depth for the IOzone-like writes.
pub const IOZONE_QUEUE_DEPTH: usize = 32;

/// IOzone-like write bandwidth.  The writer is faster than every device,
/// so the block layer's queue is always full: the records are replayed
/// closed loop at [`IOZONE_QUEUE_DEPTH`] outstanding (the kernel bounds
/// the requests in flight the same way), in order.
pub fn run_iozone(cfg: &TierEvalConfig, notes: &mut Vec<String>) -> Result<Vec<IozoneRow>, TierEvalError> {
    let mut rows = Vec::new();
    for &size in &cfg.iozone_sizes {
        let reqs = workload::iozone(&IozoneSpec { file_size: size, record: 8 << 10, rate: cfg.iozone_rate });
        let name = format!("iozone {}M", size >> 20);
        rows.extend(each_scheme(cfg, notes, |s| Ok(IozoneRow { file_size: size, run: cfg.rig.run(s, &name, &reqs, Mode::Closed { queue_depth: IOZONE_QUEUE_DEPTH })? }))?);
    }
    Ok(rows)
}

/// Postmark-like transaction rate (closed loop, one request at a time, as
/// Postmark is one process).  As Postmark does, the rate counts the
/// transaction phase only: at queue depth 1 each request starts when the
/// previous one ends, so that phase lasts the sum of its requests'
/// response times (all of them less the pool creation's, which are the
/// first writes).
pub fn run_postmark(cfg: &TierEvalConfig, notes: &mut Vec<String>) -> Result<Vec<PostmarkRow>, TierEvalError> {
    let mut rows = Vec::new();
    for &files in &cfg.postmark_files {
        let t = workload::postmark(&cfg.postmark_spec(files, cfg.postmark_transactions));
        let reqs = t.requests();
        let name = format!("postmark {files} files");
        rows.extend(each_scheme(cfg, notes, |s| {
            let (run, rep) = cfg.rig.run_report(s, &name, &reqs, Mode::Closed { queue_depth: 1 }, true)?;
            let all: u64 = rep.read_latencies_ns.iter().chain(&rep.write_latencies_ns).sum();
            let setup: u64 = rep.write_latencies_ns.iter().take(t.setup_requests as usize).sum();
            let secs = all.saturating_sub(setup) as f64 / 1e9;
            Ok(PostmarkRow { files, transactions: t.transactions, tx_per_s: t.transactions as f64 / secs.max(1e-12), run })
        })?);
    }
    Ok(rows)
}

/// The first `cfg.trace_first` requests of the trace.
pub fn load_trace(path: &Path, cfg: &TierEvalConfig) -> Result<Vec<Request>, TierEvalError> {
    let opts = TraceOptions { first: Some(cfg.trace_first), time_scale: cfg.trace_time_scale, ..Default::default() };
    Ok(mosaic_trace::open(path, &opts)?.collect::<Result<Vec<_>, _>>()?)
}

/// Queue depth of the trace's throughput replay.
pub const TRACE_QUEUE_DEPTH: usize = 16;

/// The trace on one scheme, twice: open loop at its timestamps (response
/// times) and closed loop at [`TRACE_QUEUE_DEPTH`] (throughput: at its own
/// timestamps a trace's MiB/s is only its offered load).
#[derive(Debug, Clone, Serialize)]
pub struct TraceRow {
    pub scheme: String,
    pub open: RunRow,
    pub closed: RunRow,
}

/// Read requests none of whose `block`-byte blocks an earlier write touched.
pub fn cold_reads(reqs: &[Request], block: u64) -> u64 {
    let mut written = std::collections::HashSet::new();
    let mut cold = 0;
    for r in reqs {
        let blocks = r.offset / block..(r.offset + r.len).div_ceil(block);
        match r.op {
            mosaic_trace::Op::Write => written.extend(blocks),
            mosaic_trace::Op::Read => cold += u64::from(!blocks.into_iter().any(|b| written.contains(&b))),
        }
    }
    cold
}

/// The real trace on every scheme, and its count of cold reads.
pub fn run_trace(path: &Path, cfg: &TierEvalConfig, notes: &mut Vec<String>) -> Result<(Vec<TraceRow>, u64), TierEvalError> {
    let reqs = load_trace(path, cfg)?;
    let cold = cold_reads(&reqs, cfg.rig.block);
    let rows = each_scheme(cfg, notes, |s| {
        let open = cfg.rig.run(s, "cloudphysics", &reqs, Mode::Open { time_scale: 1.0 })?;
        let closed = cfg.rig.run(s, "cloudphysics", &reqs, Mode::Closed { queue_depth: TRACE_QUEUE_DEPTH })?;
        Ok(TraceRow { scheme: s.name(), open, closed })
    })?;
    Ok((rows, cold))
}

/// Every experiment; the trace ones only when `trace` is given.
pub fn run_all(trace: Option<&Path>, cfg: &TierEvalConfig) -> Result<Results, TierEvalError> {
    run_all_with(trace, cfg, &|_, _| {})
}

/// [`run_all`], calling `progress(done, 4)` after each of its four parts.
pub fn run_all_with(trace: Option<&Path>, cfg: &TierEvalConfig, progress: &dyn Fn(u64, u64)) -> Result<Results, TierEvalError> {
    let mut notes = Vec::new();
    let (space, space_workloads) = run_space(cfg)?;
    progress(1, 4);
    let iozone = run_iozone(cfg, &mut notes)?;
    progress(2, 4);
    let postmark = run_postmark(cfg, &mut notes)?;
    progress(3, 4);
    let (trace, trace_cold_reads) = match trace {
        Some(p) => run_trace(p, cfg, &mut notes)?,
        None => {
            notes.push("trace: not found, not run".into());
            (vec![], 0)
        }
    };
    progress(4, 4);
    Ok(Results { config: cfg.clone(), table1: table1()?, space, space_workloads, iozone, postmark, trace, trace_cold_reads, notes })
}
