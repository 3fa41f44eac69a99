//! Fast-tier space utilisation: the allocator alone, no simulator.
//!
//! The Postmark-like run's writes go, in arrival order, through the tier's
//! write-run coalescer ([`mosaic_tier::Coalescer`], 10 ms window); each
//! closed run is placed by the allocator under test (ReHypar or the
//! fixed-extent baseline, through [`FastTierAllocator`]):
//!
//! ```text
//!   Write events ──> Coalescer ──> runs ──> split into blocks already on
//!                                          FAST (updated in place: no
//!                                          allocation) and sub-runs not
//!                                          yet placed ──> allocate
//!   Delete events ──> free the file's fast blocks (as with discard)
//! ```
//!
//! A delete that comes while one of the file's blocks is still in an open
//! run is remembered and applied when that run is placed.  The fast tier
//! is made large enough that nothing is refused (a refused run would be
//! demoted; those blocks are counted in `refused_blocks`), so the figure
//! measures the allocator, not demotion.  The metric is
//! [`SpaceStats::live_fraction`]: live / allocated, sampled through the
//! run and at its end.

use std::collections::{HashMap, HashSet};

use mosaic_tier::{AllocRequest, BlockRequest, Coalescer, FastTierAllocator, FixedExtent, ReHypar, RunConfig, SectionConfig, SpaceStats, TierConfig, TierError, WriteRun};
use serde::Serialize;

use super::workload::{FsEvent, PostmarkTrace};
use super::TierEvalError;

/// Which allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AllocKind {
    ReHypar,
    Fixed,
}

/// One allocator configuration.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SpaceCase {
    pub kind: AllocKind,
    pub extent_bytes: u64,
    /// Threshold V in blocks (ignored by the fixed baseline).
    pub v: u64,
}

impl SpaceCase {
    pub fn label(&self) -> String {
        match self.kind {
            AllocKind::ReHypar => format!("rehypar {}K V={}", self.extent_bytes >> 10, self.v),
            AllocKind::Fixed => format!("fixed {}K", self.extent_bytes >> 10),
        }
    }
}

/// One measured configuration.
#[derive(Debug, Clone, Serialize)]
pub struct SpaceRow {
    pub case: String,
    pub kind: AllocKind,
    pub extent_kib: u64,
    pub v: u64,
    pub files: usize,
    /// live / allocated at the end of the run.
    pub live_fraction: f64,
    /// Mean of the samples taken every `sample_every` events.
    pub mean_live_fraction: f64,
    pub stats: SpaceStatsOut,
    pub runs: u64,
    pub refused_blocks: u64,
    /// (event index, live fraction) through the run.
    pub samples: Vec<(u64, f64)>,
}

/// [`SpaceStats`] for the JSON output.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SpaceStatsOut {
    pub total: u64,
    pub allocated: u64,
    pub live: u64,
    pub dead: u64,
    pub skipped: u64,
    pub open_tail: u64,
}

impl From<SpaceStats> for SpaceStatsOut {
    fn from(s: SpaceStats) -> Self {
        SpaceStatsOut { total: s.total, allocated: s.allocated, live: s.live, dead: s.dead, skipped: s.skipped, open_tail: s.open_tail }
    }
}

/// Where a logical block lives in the space experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Fast(u64),
    /// Refused by a full fast tier.
    Slow,
}

/// The replay of one trace on one allocator.
struct Replay {
    alloc: Box<dyn FastTierAllocator>,
    map: HashMap<u64, Place>,
    /// Deleted blocks still in an open run.
    doomed: HashSet<u64>,
    runs: u64,
    refused: u64,
}

impl Replay {
    fn place(&mut self, run: &WriteRun) -> Result<(), TierEvalError> {
        self.runs += 1;
        let mut lb = run.offset;
        let end = run.offset + run.len;
        while lb < end {
            let mapped = self.map.contains_key(&lb);
            let mut n = 1;
            while lb + n < end && self.map.contains_key(&(lb + n)) == mapped {
                n += 1;
            }
            if !mapped {
                self.allocate(lb, n, run.last_ns)?;
            }
            lb += n;
        }
        let doomed: Vec<u64> = (run.offset..end).filter(|b| self.doomed.remove(b)).collect();
        self.free_blocks(&doomed)
    }

    fn allocate(&mut self, lba: u64, blocks: u64, now: u64) -> Result<(), TierEvalError> {
        match self.alloc.allocate(AllocRequest { lba, blocks }, now) {
            Ok(a) => {
                let mut l = lba;
                for p in &a.pieces {
                    for i in 0..p.blocks {
                        self.map.insert(l + i, Place::Fast(p.fast_block + i));
                    }
                    l += p.blocks;
                }
                Ok(())
            }
            Err(TierError::Full { .. }) => {
                self.refused += blocks;
                (lba..lba + blocks).for_each(|b| {
                    self.map.insert(b, Place::Slow);
                });
                Ok(())
            }
            Err(e) => Err(TierEvalError::Tier(e)),
        }
    }

    /// Forget logical blocks; free their fast blocks in contiguous ranges.
    fn free_blocks(&mut self, lbs: &[u64]) -> Result<(), TierEvalError> {
        let mut fast: Vec<u64> = lbs.iter().filter_map(|b| self.map.remove(b)).filter_map(|p| if let Place::Fast(f) = p { Some(f) } else { None }).collect();
        fast.sort_unstable();
        let mut i = 0;
        while i < fast.len() {
            let mut j = i + 1;
            while j < fast.len() && fast[j] == fast[j - 1] + 1 {
                j += 1;
            }
            self.alloc.free(fast[i], (j - i) as u64)?;
            i = j;
        }
        Ok(())
    }

    fn delete(&mut self, extents: &[(u64, u64)]) -> Result<(), TierEvalError> {
        let mut now = Vec::new();
        for &(s, n) in extents {
            for b in s..s + n {
                if self.map.contains_key(&b) {
                    now.push(b);
                } else {
                    self.doomed.insert(b);
                }
            }
        }
        self.free_blocks(&now)
    }
}

/// The allocator configuration for a case: one section of `extent_bytes`
/// with room for `capacity` bytes, 256 KiB erase blocks, the trace's block.
pub fn tier_config(case: &SpaceCase, block: u64, capacity: u64) -> TierConfig {
    let unit = case.extent_bytes.max(256 << 10);
    let mut cfg = TierConfig::with_capacity(2 * unit);
    cfg.block_bytes = block;
    cfg.threshold_v = case.v.max(2);
    cfg.sections = vec![SectionConfig { extent_bytes: case.extent_bytes, capacity_bytes: capacity.div_ceil(unit).max(1) * unit }];
    cfg
}

/// Replay `trace` through the coalescer and `case`'s allocator.
pub fn run_case(trace: &PostmarkTrace, case: &SpaceCase, files: usize, capacity: u64, samples: usize) -> Result<SpaceRow, TierEvalError> {
    let cfg = tier_config(case, trace.block, capacity);
    let alloc: Box<dyn FastTierAllocator> = match case.kind {
        AllocKind::ReHypar => Box::new(ReHypar::new(&cfg)?),
        AllocKind::Fixed => Box::new(FixedExtent::new(&cfg)?),
    };
    let mut r = Replay { alloc, map: HashMap::new(), doomed: HashSet::new(), runs: 0, refused: 0 };
    let mut co = Coalescer::new(RunConfig::default())?;
    let every = (trace.events.len() / samples.max(1)).max(1);
    let mut out = Vec::new();
    for (i, e) in trace.events.iter().enumerate() {
        match e {
            FsEvent::Write { time_ns, lba, blocks } => {
                for run in co.push(BlockRequest { time_ns: *time_ns, offset: *lba, len: *blocks, stream: None })? {
                    r.place(&run)?;
                }
            }
            FsEvent::Delete { time_ns, extents } => {
                for run in co.close_expired(*time_ns) {
                    r.place(&run)?;
                }
                r.delete(extents)?;
            }
            FsEvent::Read { .. } => {}
        }
        if (i + 1) % every == 0 {
            out.push(((i + 1) as u64, r.alloc.stats().live_fraction()));
        }
    }
    for run in co.finish() {
        r.place(&run)?;
    }
    let st = r.alloc.stats();
    let mean = if out.is_empty() { st.live_fraction() } else { out.iter().map(|s| s.1).sum::<f64>() / out.len() as f64 };
    Ok(SpaceRow {
        case: case.label(),
        kind: case.kind,
        extent_kib: case.extent_bytes >> 10,
        v: case.v,
        files,
        live_fraction: st.live_fraction(),
        mean_live_fraction: mean,
        stats: st.into(),
        runs: r.runs,
        refused_blocks: r.refused,
        samples: out,
    })
}

/// The cases of the experiment: per extent size, ReHypar at each V and the
/// fixed baseline.
pub fn cases(extents: &[u64], vs: &[u64]) -> Vec<SpaceCase> {
    let mut out = Vec::new();
    for &e in extents {
        for &v in vs {
            out.push(SpaceCase { kind: AllocKind::ReHypar, extent_bytes: e, v });
        }
        out.push(SpaceCase { kind: AllocKind::Fixed, extent_bytes: e, v: 0 });
    }
    out
}
