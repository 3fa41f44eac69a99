//! Demotion: the coldest fast blocks go to SLOW in whole segments, with
//! compaction of the sparsest segment folded into the same batch.
//!
//! ```text
//!   Read  [ SLOW victims' live blocks ..., FAST cold blocks ... ] -> staging (k segments)
//!   Write [ SLOW segments s1, s2, ... (full stripes) ]
//!   Flush [ SLOW ]
//!   Write [ FAST map delta ]    Flush [ FAST ]
//!   then: fast blocks freed, victim segment free
//!
//! (the kit's migration protocol, `mosaic_map::moves::Move`)
//! ```
//!
//! * **Coldest first**: extents in LRU order (last read or write of any
//!   of their blocks), each extent's live blocks together, so a demoted
//!   extent usually empties and returns to the allocator's clean pool.
//! * **Whole segments**: a batch holds k segments' worth of blocks,
//!   rounded down (the rest of the last extent stays on FAST); only when
//!   fewer than one segment's worth is demotable is the last segment
//!   padded with zeros (dead slots compaction reclaims later), so the
//!   slow array never does a partial-stripe write.
//! * **Compaction**: while fewer than `reserve` segments are free, a
//!   batch is one segment and carries the live blocks of the sparsest
//!   segments first, as many whole segments' worth as fit with room for
//!   one fast block (they too land in a whole segment); the victims are
//!   free after, so a batch frees as many segments as it had victims.
//!   A batch never takes the last free segments below `reserve - 1`, so
//!   there is always a free segment to compact into.  Every batch moves
//!   at least one fast block, so demotion loops always end.

use std::ops::Range;

use mosaic_core::{Method, PlanError, Program};
use mosaic_map::moves::Move;

use mosaic_map::map::Update;

use super::mapstore::{Loc, MapStore};
use super::program;
use super::state::Core;
use super::{FAST, SLOW};

/// Largest demotion batch: 8 MiB (at least one segment).
pub const MAX_BATCH_BYTES: u64 = 8 << 20;

fn max_segs(core: &Core) -> u64 {
    (MAX_BATCH_BYTES / core.seg_bytes()).max(1)
}

/// An idle demotion step within `allowance` bytes (written to SLOW).
pub fn idle_batch(core: &mut Core, now: u64, allowance: u64) -> Result<Option<Program>, PlanError> {
    let st = core.alloc.stats();
    let target = (core.cfg.low_water * st.total as f64) as u64;
    let need = st.allocated.saturating_sub(target).div_ceil(core.lay.seg_blocks).max(1);
    let segs = need.min(allowance / core.seg_bytes()).min(max_segs(core));
    if segs == 0 {
        return Ok(None);
    }
    let Some((p, bytes)) = plan_batch(core, now, segs, None)? else { return Ok(None) };
    core.charge(bytes);
    Ok(Some(p))
}

/// A demotion inside a client write that found FAST full: enough
/// segments for `blocks`, never touching the logical blocks `exclude`
/// (the write's own).  `None` when demotion is impossible.
pub fn foreground(core: &mut Core, now: u64, blocks: u64, exclude: Range<u64>) -> Result<Option<Program>, PlanError> {
    if !core.can_move() {
        return Ok(None);
    }
    let segs = blocks.div_ceil(core.lay.seg_blocks).clamp(1, max_segs(core));
    let r = plan_batch(core, now, segs, Some(exclude))?;
    if r.is_some() {
        core.st.foreground_demotions += 1;
    }
    Ok(r.map(|(p, _)| p))
}

/// What one batch moves.
struct Batch {
    /// (old slow block, logical) of the compaction victims' live blocks.
    victim: Vec<(u64, u64)>,
    /// (fast block, logical) of the cold blocks.
    fast: Vec<(u64, u64)>,
    /// The segments written.
    segs: Vec<u64>,
    /// How many segments the victims emptied.
    victims: u64,
}

/// Plan a batch of at most `max` segments; its state applied.  Returns
/// the program and the bytes it writes to SLOW.
fn plan_batch(core: &mut Core, now: u64, max: u64, exclude: Option<Range<u64>>) -> Result<Option<(Program, u64)>, PlanError> {
    let Some(b) = choose(core, max, exclude) else { return Ok(None) };
    let m = build(core, &b);
    let updates = apply(core, &b, now)?;
    let w = core.map.persist(&core.lay, &updates).map_err(PlanError::Invalid)?;
    Ok(Some((m.remap(FAST, w), b.segs.len() as u64 * core.seg_bytes())))
}

/// Choose the victim, the cold blocks and the segments.
fn choose(core: &mut Core, max: u64, exclude: Option<Range<u64>>) -> Option<Batch> {
    let (sb, reserve, free) = (core.lay.seg_blocks, core.lay.reserve, core.segs.free_count());
    if free == 0 {
        return None;
    }
    let compact = free < reserve;
    let kmax = if compact { 1 } else { max.min(free - (reserve - 1)).max(1) };
    // Victims fill the segment but leave room for one fast block at least.
    let victims = if compact { core.segs.sparsest(kmax * sb - 1) } else { Vec::new() };
    if compact && victims.is_empty() && free <= 1 {
        return None; // keep a segment to compact into
    }
    let victim: Vec<(u64, u64)> = victims.iter().flat_map(|&v| core.segs.blocks_of(v)).collect();
    let v = victim.len() as u64;
    let mut fast = pick_cold(core, kmax * sb - v, exclude);
    if fast.is_empty() {
        return None;
    }
    let k = ((v + fast.len() as u64) / sb).max(1);
    fast.truncate((k * sb - v) as usize);
    fast.sort_by_key(|&(_, lb)| lb);
    let segs = (0..k).map(|_| core.segs.take()).collect::<Option<Vec<u64>>>()?;
    Some(Batch { victim, fast, segs, victims: victims.len() as u64 })
}

/// Up to `want` live fast blocks, coldest extent first.
fn pick_cold(core: &Core, want: u64, exclude: Option<Range<u64>>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(_, ext) in &core.lru {
        for fb in core.ext_live.get(&ext).into_iter().flatten() {
            if out.len() as u64 >= want {
                return out;
            }
            let Some(&lb) = core.fast_owner.get(fb) else { continue };
            if !exclude.as_ref().is_some_and(|r| r.contains(&lb)) {
                out.push((*fb, lb));
            }
        }
    }
    out
}

/// Slot `j` of the batch as a slow block.
fn slot(b: &Batch, seg_blocks: u64, j: usize) -> u64 {
    b.segs[j / seg_blocks as usize] * seg_blocks + j as u64 % seg_blocks
}

/// The batch's copies through the kit's migration protocol: the live
/// blocks (victims' first) into staging slots, whole segments out
/// (adjacent segments merge into one full-stripe write).
fn build(core: &Core, b: &Batch) -> Move {
    let (bs, blk) = (core.lay.seg_blocks, core.lay.block);
    let seg_bytes = bs * blk;
    let mut m = program::new_move(Method::Fsw, (b.segs.len() as u64 * seg_bytes) as usize);
    let v = b.victim.len();
    for (j, &(sb, _)) in b.victim.iter().enumerate() {
        m.read(SLOW, core.lay.slow_offset(sb), blk, j * blk as usize);
    }
    for (j, &(fb, _)) in b.fast.iter().enumerate() {
        m.read(FAST, core.lay.fast_offset(fb), blk, (v + j) * blk as usize);
    }
    for (i, &s) in b.segs.iter().enumerate() {
        m.write(SLOW, core.lay.slow_offset(s * bs), seg_bytes, i * seg_bytes as usize);
    }
    m
}

/// Apply the batch: the map, the segment table, the fast frees; the
/// map records to persist.
fn apply(core: &mut Core, b: &Batch, _now: u64) -> Result<Vec<Update>, PlanError> {
    let mut updates = Vec::with_capacity(b.victim.len() + b.fast.len());
    let bs = core.lay.seg_blocks;
    let v = b.victim.len();
    for (j, &(old, lb)) in b.victim.iter().enumerate() {
        let new = slot(b, bs, j);
        core.segs.remove(old);
        core.segs.add(new, lb).map_err(PlanError::Invalid)?;
        core.map.locs.insert(lb, Loc::Slow(new));
        updates.push(MapStore::record(&core.lay, lb, Loc::Slow(new)));
    }
    for (j, &(fb, lb)) in b.fast.iter().enumerate() {
        let new = slot(b, bs, v + j);
        core.fast_remove(fb).map_err(PlanError::Invalid)?;
        core.segs.add(new, lb).map_err(PlanError::Invalid)?;
        core.map.locs.insert(lb, Loc::Slow(new));
        updates.push(MapStore::record(&core.lay, lb, Loc::Slow(new)));
    }
    let blk = core.lay.block;
    core.st.demoted_bytes += b.fast.len() as u64 * blk;
    core.st.demote_batches += 1;
    if !b.victim.is_empty() {
        core.st.compactions += b.victims;
        core.st.compacted_bytes += b.victim.len() as u64 * blk;
    }
    core.fast_full = false;
    Ok(updates)
}
