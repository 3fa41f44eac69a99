//! Client writes: everything lands on FAST.
//!
//! * A block already on FAST is overwritten in place: no map change
//!   (ReHypar updates in place).
//! * Other blocks get new fast space.  A "file" is a write run from the
//!   coalescer (`run.rs`): a stretch of new blocks continuing the run
//!   (the block before it is on FAST, written by this request or by the
//!   run's previous request) goes right after that block when its
//!   successor in the same extent is free; otherwise it is a new
//!   allocation (ReHypar's ALLOCATE, or the fixed-extent baseline), in
//!   pieces of at most the largest extent, so a long stretch never needs
//!   several clean extents of one section at once.  A write larger than
//!   the whole fast tier is refused.
//! * When FAST has no room, demotion runs in the foreground (chained in
//!   front of the write, never moving the write's own blocks); when it
//!   cannot, the write fails with a clear error and the state is
//!   `FastFull` (no busy loop).
//!
//! ```text
//!   [ commit, foreground demotion ]...   (FAST full)
//!   Write [ FAST blocks <- client data ]      new placements dirty
//!   [ commit ]                                (commit_blocks dirty)
//! ```
//!
//! The write is acknowledged when its program is done: its data is on
//! FAST.  Its new placements reach the map with the next commit (a
//! flush, idle time, a movement or a full batch; see `commit.rs`).
//! "Slow RMWs avoided" counts, per write, the slow stripes it touches
//! without covering them.

use mosaic_core::{Buf, Method, Phase, PlanError, Program, Role};

use super::mapstore::Loc;
use super::program::{self, Xfer};
use super::state::Core;
use super::{commit, demote, read, TierHealth, FAST};
use crate::rehypar::{AllocRequest, TierError};
use crate::run::BlockRequest;

/// Plan a write; on failure, the foreground demotions already planned
/// (their state applied) come back to be run before anything else.
pub fn plan(core: &mut Core, offset: u64, len: u64, now: u64) -> (Result<Program, PlanError>, Vec<Program>) {
    let mut demos = Vec::new();
    let r = plan_inner(core, offset, len, now, &mut demos);
    match r {
        Ok(p) => {
            demos.push(p);
            (Ok(program::chain_all(demos)), Vec::new())
        }
        Err(e) => (Err(e), demos),
    }
}

fn plan_inner(core: &mut Core, offset: u64, len: u64, now: u64, demos: &mut Vec<Program>) -> Result<Program, PlanError> {
    let (lb0, n) = read::check(core, offset, len)?;
    if core.effective().0 == TierHealth::Offline {
        return Err(PlanError::Invalid("fast tier offline: writes cannot be placed".into()));
    }
    if n > core.lay.fast_blocks {
        return Err(PlanError::Invalid(format!("a write of {n} blocks cannot land on a fast tier of {} blocks", core.lay.fast_blocks)));
    }
    let now = now.max(core.last_ns);
    core.last_ns = now;
    let joined = join_run(core, lb0, n, now);
    let mut fresh: Vec<(u64, u64)> = Vec::new();
    for (start, cnt) in pieces_needing_space(core, lb0, n) {
        match place(core, lb0, n, start, cnt, joined, now, demos) {
            Ok(fbs) => fresh.extend((start..start + cnt).zip(fbs)),
            Err(e) => {
                for &(_, fb) in &fresh {
                    let _ = core.alloc.free(fb, 1);
                }
                return Err(e);
            }
        }
    }
    let p = build(core, lb0, n, &fresh, now)?;
    count(core, offset, len, n - fresh.len() as u64);
    Ok(p)
}

/// Feed the coalescer; whether this request continues the open run.
fn join_run(core: &mut Core, lb0: u64, n: u64, now: u64) -> bool {
    let closed = core.coalescer.push(BlockRequest { time_ns: now, offset: lb0, len: n, stream: None });
    let joined = core.run_open && matches!(&closed, Ok(c) if c.is_empty());
    core.run_open = closed.is_ok();
    joined
}

/// Maximal stretches of the request's blocks not on FAST.
fn pieces_needing_space(core: &Core, lb0: u64, n: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for lb in lb0..lb0 + n {
        if matches!(core.map.locs.get(&lb), Some(Loc::Fast(_))) {
            continue;
        }
        match out.last_mut() {
            Some(p) if p.0 + p.1 == lb => p.1 += 1,
            _ => out.push((lb, 1)),
        }
    }
    out
}

/// Fast blocks for `cnt` blocks from `start`: after the run's previous
/// block when it can, else a new allocation; demoting in the foreground
/// while FAST is full.
#[allow(clippy::too_many_arguments)]
fn place(core: &mut Core, lb0: u64, n: u64, start: u64, cnt: u64, joined: bool, now: u64, demos: &mut Vec<Program>) -> Result<Vec<u64>, PlanError> {
    let req = AllocRequest { lba: start, blocks: cnt };
    let prev = match (start > lb0 || joined, start.checked_sub(1).and_then(|p| core.map.locs.get(&p))) {
        (true, Some(Loc::Fast(fb))) => Some(*fb),
        _ => None,
    };
    if let Some(fb) = prev {
        if let Some(piece) = core.alloc.extend(fb, req, now).map_err(alloc_err)? {
            return Ok((piece.fast_block..piece.fast_block + piece.blocks).collect());
        }
    }
    let mut out = Vec::with_capacity(cnt as usize);
    let most = core.lay.sections.iter().map(|s| s.extent_bytes / core.lay.block).max().unwrap_or(1);
    for c in (0..cnt).step_by(most as usize) {
        let chunk = AllocRequest { lba: start + c, blocks: most.min(cnt - c) };
        match allocate(core, chunk, lb0..lb0 + n, now, demos) {
            Ok(fbs) => out.extend(fbs),
            Err(e) => {
                for &fb in &out {
                    let _ = core.alloc.free(fb, 1);
                }
                return Err(e);
            }
        }
    }
    Ok(out)
}

/// One allocation of at most an extent, demoting in the foreground while
/// FAST is full.
fn allocate(core: &mut Core, req: AllocRequest, own: std::ops::Range<u64>, now: u64, demos: &mut Vec<Program>) -> Result<Vec<u64>, PlanError> {
    loop {
        match core.alloc.allocate(req, now) {
            Ok(a) => return Ok(a.pieces.iter().flat_map(|p| p.fast_block..p.fast_block + p.blocks).collect()),
            Err(TierError::Full { .. }) => match commit_then_demote(core, now, req.blocks, own.clone(), demos)? {
                Some(p) => demos.push(p),
                None => {
                    core.fast_full = true;
                    return Err(full_error(core, req.blocks));
                }
            },
            Err(e) => return Err(alloc_err(e)),
        }
    }
}

/// A foreground demotion, after a commit of the dirty placements (a move
/// plans against a clean map).
fn commit_then_demote(core: &mut Core, now: u64, blocks: u64, own: std::ops::Range<u64>, demos: &mut Vec<Program>) -> Result<Option<Program>, PlanError> {
    if let Some(c) = commit::commit(core)? {
        demos.push(c);
    }
    demote::foreground(core, now, blocks, own)
}

fn alloc_err(e: TierError) -> PlanError {
    PlanError::Invalid(format!("fast-tier allocator: {e}"))
}

fn full_error(core: &Core, cnt: u64) -> PlanError {
    let (f, s) = core.effective();
    let why = if s == TierHealth::Offline {
        "the slow tier is offline".to_string()
    } else if (f, s) != (TierHealth::Ok, TierHealth::Ok) {
        "movement is paused while a tier is degraded".to_string()
    } else {
        "nothing more can be demoted".to_string()
    };
    PlanError::Invalid(format!("fast tier full: no room for {cnt} new blocks and demotion is impossible ({why})"))
}

/// The write program; the new placements applied to the state.
fn build(core: &mut Core, lb0: u64, n: u64, fresh: &[(u64, u64)], now: u64) -> Result<Program, PlanError> {
    let blk = core.lay.block;
    let mut p = program::new(Method::Direct);
    let input = p.buf(Buf::Input { off: 0, len: (n * blk) as usize });
    let mut xs = Vec::with_capacity(n as usize);
    let mut fi = fresh.iter().peekable();
    for i in 0..n {
        let lb = lb0 + i;
        let fb = match fi.peek() {
            Some(&&(l, fb)) if l == lb => {
                fi.next();
                fb
            }
            _ => match core.map.locs.get(&lb) {
                Some(Loc::Fast(fb)) => *fb,
                _ => return Err(PlanError::Invalid(format!("logical block {lb} has no fast place (policy bug)"))),
            },
        };
        xs.push(Xfer { dev: core.lay.fast_offset(fb), at: (i * blk) as usize });
        core.touch(fb, now);
    }
    p.phases.push(Phase::write(program::merged(FAST, input, blk, &xs, Role::Data)));
    for &(lb, fb) in fresh {
        if let Some(Loc::Slow(sb)) = core.map.locs.insert(lb, Loc::Fast(fb)) {
            core.segs.remove(sb);
        }
        core.map.dirty.insert(lb);
        core.fast_add(fb, lb, now);
    }
    if !fresh.is_empty() {
        core.fast_full = false;
    }
    if commit::due(core) {
        if let Some(c) = commit::commit(core)? {
            p.append(c);
        }
    }
    Ok(p)
}

/// Counters of an absorbed write.
fn count(core: &mut Core, offset: u64, len: u64, inplace: u64) {
    core.st.absorbed_writes += 1;
    core.st.inplace_blocks += inplace;
    core.st.slow_rmw_avoided += partial_stripes(offset, len, core.geo.slow_stripe);
}

/// Stripes of `stripe` bytes that `[offset, offset + len)` touches but
/// does not cover: the read-modify-writes the slow array would do.
pub fn partial_stripes(offset: u64, len: u64, stripe: u64) -> u64 {
    if len == 0 || stripe == 0 {
        return 0;
    }
    let end = offset + len;
    let touched = (end - 1) / stripe - offset / stripe + 1;
    let full = (end / stripe).saturating_sub(offset.div_ceil(stripe));
    touched - full
}
