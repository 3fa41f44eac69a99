//! Promotion: slow blocks read often come back to FAST.
//!
//! * **Groups**: hits are counted per logical group the size of the
//!   smallest extent (64 KiB by default): a read request counts one hit
//!   for each group it reads a slow block of.
//! * **After n hits** (`promote_hits`, default 2) a group is hot; idle
//!   time promotes hot groups, most hits first, one group per step.
//! * **Sequential streams are never promoted**: reads are followed with
//!   the coalescer's rule (the next read starts where the last ended,
//!   within the window).  Once a stream has read more than `seq_cutoff`
//!   bytes, its reads count no hits and the hits its earlier reads
//!   counted are withdrawn.
//! * At most 2^20 groups are tracked: past that, groups read once are
//!   forgotten.
//! * Promotion needs room: the group's blocks must fit under the high
//!   watermark, and within the round's share and the bytes/s budget.
//!
//! ```text
//!   Read [ SLOW group's slow blocks ] -> scratch
//!   Write [ FAST new allocation ]  Flush [ FAST ]
//!   Write [ FAST map delta ]       Flush [ FAST ]   then: slow blocks freed
//! ```

use std::collections::HashMap;

use mosaic_core::{Method, PlanError, Program};
use mosaic_map::moves::Move;

use super::layout::TierLayout;
use super::mapstore::{Loc, MapStore};
use super::program;
use super::state::Core;
use super::{PolicyConfig, FAST, SLOW};
use crate::rehypar::AllocRequest;

/// Groups with hits tracked at most; beyond, groups read once are
/// forgotten (a random read workload over a huge volume would otherwise
/// grow the table without bound).
const MAX_TRACKED: usize = 1 << 20;

/// The read stream being followed.
#[derive(Clone, Debug)]
struct Stream {
    next: u64,
    blocks: u64,
    last_ns: u64,
    counted: Vec<u64>,
    long: bool,
}

/// Read-hit counting per group, with the sequential-stream filter.
#[derive(Clone, Debug)]
pub struct Hits {
    group_blocks: u64,
    cutoff_blocks: u64,
    window_ns: u64,
    counts: HashMap<u64, u32>,
    stream: Option<Stream>,
}

impl Hits {
    pub fn new(cfg: &PolicyConfig, lay: &TierLayout) -> Hits {
        let smallest = lay.sections.iter().map(|s| s.extent_bytes).min().unwrap_or(lay.block);
        Hits { group_blocks: (smallest / lay.block).max(1), cutoff_blocks: cfg.seq_cutoff / lay.block, window_ns: cfg.window_ns, counts: HashMap::new(), stream: None }
    }

    /// Blocks per group.
    pub fn group_blocks(&self) -> u64 {
        self.group_blocks
    }

    /// A read of `n` blocks from `lb` at `now` that read slow blocks of
    /// `groups` (each once).
    pub fn read(&mut self, lb: u64, n: u64, now: u64, groups: &[u64]) {
        let joins = self.stream.as_ref().is_some_and(|s| s.next == lb && now.saturating_sub(s.last_ns) <= self.window_ns);
        if !joins {
            self.stream = Some(Stream { next: lb, blocks: 0, last_ns: now, counted: Vec::new(), long: false });
        }
        let Some(s) = self.stream.as_mut() else { return };
        s.next = lb + n;
        s.blocks += n;
        s.last_ns = now;
        if s.blocks > self.cutoff_blocks {
            if !s.long {
                s.long = true;
                for g in std::mem::take(&mut s.counted) {
                    if let Some(c) = self.counts.get_mut(&g) {
                        *c = c.saturating_sub(1);
                        if *c == 0 {
                            self.counts.remove(&g);
                        }
                    }
                }
            }
            return;
        }
        for &g in groups {
            *self.counts.entry(g).or_insert(0) += 1;
            s.counted.push(g);
        }
        if self.counts.len() > MAX_TRACKED {
            self.counts.retain(|_, c| *c > 1);
        }
    }

    /// Groups with at least `min` hits, most first.
    pub fn hot(&self, min: u32) -> Vec<u64> {
        let mut v: Vec<(u32, u64)> = self.counts.iter().filter(|(_, &c)| c >= min).map(|(&g, &c)| (c, g)).collect();
        v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        v.into_iter().map(|(_, g)| g).collect()
    }

    /// Forget a group's hits (promoted, or nothing left on SLOW).
    pub fn forget(&mut self, g: u64) {
        self.counts.remove(&g);
    }
}

/// One idle promotion step within `allowance` bytes.
pub fn idle_promote(core: &mut Core, now: u64, allowance: u64) -> Result<Option<Program>, PlanError> {
    for g in core.hits.hot(core.cfg.promote_hits) {
        let gb = core.hits.group_blocks();
        let blocks: Vec<(u64, u64)> = core.map.locs.range(g * gb..(g + 1) * gb).filter_map(|(&lb, &l)| if let Loc::Slow(sb) = l { Some((lb, sb)) } else { None }).collect();
        if blocks.is_empty() {
            core.hits.forget(g);
            continue;
        }
        let n = blocks.len() as u64;
        let st = core.alloc.stats();
        let room = (st.allocated + n) as f64 <= core.cfg.high_water * st.total as f64;
        if n * core.lay.block > allowance || !room {
            return Ok(None);
        }
        let Ok(a) = core.alloc.allocate(AllocRequest { lba: blocks[0].0, blocks: n }, now) else { return Ok(None) };
        let fbs: Vec<u64> = a.pieces.iter().flat_map(|p| p.fast_block..p.fast_block + p.blocks).collect();
        let m = build(core, &blocks, &fbs);
        let mut updates = Vec::with_capacity(blocks.len());
        for (&(lb, sb), &fb) in blocks.iter().zip(&fbs) {
            core.map.locs.insert(lb, Loc::Fast(fb));
            core.fast_add(fb, lb, now);
            core.segs.remove(sb);
            updates.push(MapStore::record(&core.lay, lb, Loc::Fast(fb)));
        }
        let w = core.map.persist(&core.lay, &updates).map_err(PlanError::Invalid)?;
        let p = m.remap(FAST, w);
        core.hits.forget(g);
        core.st.promoted_bytes += n * core.lay.block;
        core.st.promote_batches += 1;
        core.charge(n * core.lay.block);
        return Ok(Some(p));
    }
    Ok(None)
}

/// The copies through the kit's migration protocol: read SLOW, write FAST.
fn build(core: &Core, blocks: &[(u64, u64)], fbs: &[u64]) -> Move {
    let blk = core.lay.block;
    let mut m = program::new_move(Method::Direct, (blocks.len() as u64 * blk) as usize);
    for (j, &(_, sb)) in blocks.iter().enumerate() {
        m.read(SLOW, core.lay.slow_offset(sb), blk, j * blk as usize);
    }
    for (j, &fb) in fbs.iter().enumerate() {
        m.write(FAST, core.lay.fast_offset(fb), blk, j * blk as usize);
    }
    m
}
