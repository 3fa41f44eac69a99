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
//!   several clean extents of one section at once.
//! * When FAST has no room, demotion runs in the foreground (chained in
//!   front of the write, never moving the blocks being written); when it
//!   cannot, the write fails with a clear error and the state is
//!   `FastFull` (no busy loop).
//! * **Parts.**  A request larger than half the fast tier (a client may
//!   send 32 MiB at once, the fast tier may be smaller) is placed in
//!   parts of at most half the tier, one after another in one program,
//!   each as a write of its own: the foreground demotion of a later part
//!   may move an earlier part's blocks to SLOW (written, committed, then
//!   moved by the one migration protocol).  A part that finds FAST full
//!   with nothing demotable outside itself (its own extents hold dead
//!   blocks) is halved and tried again.  Without movement (a tier
//!   degraded or offline) the request is one part, and one larger than
//!   the fast tier is refused.  Each part's program writes its range of
//!   the client's bytes (`Buf::Input { off, len }`).
//!
//! ```text
//!   per part:
//!   [ commit, foreground demotion ]...   (FAST full)
//!   Write [ FAST blocks <- client data ]      new placements dirty
//!   [ commit ]                                (commit_blocks dirty)
//! ```
//!
//! The write is acknowledged when its program is done: its data is on
//! FAST, or, for a part moved on by a later part, on SLOW.  Its new
//! placements reach the map with the next commit (a flush, idle time, a
//! movement or a full batch; see `commit.rs`).  "Slow RMWs avoided"
//! counts, per write, the slow stripes it touches without covering them.
//!
//! Sending the part that does not fit straight to SLOW would save the
//! copy through FAST, but SLOW is written in whole free segments only,
//! and a fragmented slow tier may have too few: that needs compaction,
//! which only a demotion brings.  Parts keep one write path and one
//! migration protocol for every size.

use std::ops::Range;

use mosaic_core::{Buf, Method, Phase, PlanError, Program, Role};

use super::mapstore::Loc;
use super::program::{self, Xfer};
use super::state::Core;
use super::{commit, demote, read, TierHealth, FAST};
use crate::rehypar::{AllocRequest, TierError};
use crate::run::BlockRequest;

/// Plan a write; on failure, what was already planned (its state
/// applied: foreground demotions, commits, and the parts of a split
/// write placed before the failure, their client bytes replaced by
/// zeros) comes back to be run before anything else.
pub fn plan(core: &mut Core, offset: u64, len: u64, now: u64) -> (Result<Program, PlanError>, Vec<Program>) {
    let mut out = Vec::new();
    match plan_inner(core, offset, len, now, &mut out) {
        Ok(()) => (Ok(program::chain_all(out)), Vec::new()),
        Err(e) => (Err(e), out.into_iter().map(without_input).collect()),
    }
}

/// A part that could not be placed; `full` when FAST had no room and
/// demotion could make none, so a smaller part may still fit.
struct Miss {
    err: PlanError,
    full: bool,
}

impl From<PlanError> for Miss {
    fn from(err: PlanError) -> Miss {
        Miss { err, full: false }
    }
}

/// Check the request, feed the coalescer, place it in parts, count it.
fn plan_inner(core: &mut Core, offset: u64, len: u64, now: u64, out: &mut Vec<Program>) -> Result<(), PlanError> {
    let (lb0, n) = read::check(core, offset, len)?;
    if core.effective().0 == TierHealth::Offline {
        return Err(PlanError::Invalid("fast tier offline: writes cannot be placed".into()));
    }
    if n > core.lay.fast_blocks && !core.can_move() {
        let why = stuck_reason(core);
        return Err(PlanError::Invalid(format!("a write of {n} blocks is larger than the fast tier ({} blocks) and cannot pass through it while {why}", core.lay.fast_blocks)));
    }
    let now = now.max(core.last_ns);
    core.last_ns = now;
    let joined = join_run(core, lb0, n, now);
    let inplace = place_parts(core, lb0, n, joined, now, out)?;
    count(core, offset, len, inplace);
    Ok(())
}

/// The `n` blocks from `lb0` in parts placed one after another (see
/// [`part_blocks`]); a part that finds FAST full with nothing left to
/// demote is halved and tried again.  Without movement the request is
/// one part: it fits FAST as it is, or fails whole.  Returns the blocks
/// written in place.
fn place_parts(core: &mut Core, lb0: u64, n: u64, joined: bool, now: u64, out: &mut Vec<Program>) -> Result<u64, PlanError> {
    let mut step = if core.can_move() { part_blocks(core) } else { n };
    let (mut done, mut inplace) = (0, 0);
    while done < n {
        let part = lb0 + done..lb0 + done + step.min(n - done);
        match place_part(core, lb0, part.clone(), joined, now, out) {
            Ok(k) => {
                inplace += k;
                done = part.end - lb0;
            }
            Err(m) if m.full && part.end - part.start > 1 && core.can_move() => {
                core.fast_full = false;
                step = (part.end - part.start) / 2;
            }
            Err(m) => return Err(m.err),
        }
    }
    Ok(inplace)
}

/// Most blocks of one request placed in one part: half the fast tier,
/// in whole largest extents.  Each part lands on FAST as a write of its
/// own would, its foreground demotion free to move everything but the
/// part itself, the request's earlier parts included (written and
/// committed earlier in the same program).  Half the tier leaves the
/// other half to demote into even when the part's own extents hold dead
/// blocks.
fn part_blocks(core: &Core) -> u64 {
    let most = largest_extent(core);
    (core.lay.fast_blocks / 2 / most * most).max(most).min(core.lay.fast_blocks).max(1)
}

/// Blocks of the largest extent.
fn largest_extent(core: &Core) -> u64 {
    core.lay.sections.iter().map(|s| s.extent_bytes / core.lay.block).max().unwrap_or(1).max(1)
}

/// Place the blocks `part` of the request starting at `lb0`: new fast
/// space for those not on FAST, then the program writing the part's
/// client bytes, pushed to `out`.  Returns the blocks written in place.
fn place_part(core: &mut Core, lb0: u64, part: Range<u64>, joined: bool, now: u64, out: &mut Vec<Program>) -> Result<u64, Miss> {
    let mut fresh: Vec<(u64, u64)> = Vec::new();
    for (start, cnt) in pieces_needing_space(core, part.start, part.end - part.start) {
        match place(core, lb0, part.clone(), start, cnt, joined, now, out) {
            Ok(fbs) => fresh.extend((start..start + cnt).zip(fbs)),
            Err(e) => {
                for &(_, fb) in &fresh {
                    let _ = core.alloc.free(fb, 1);
                }
                return Err(e);
            }
        }
    }
    let p = build(core, lb0, part.clone(), &fresh, now)?;
    out.push(p);
    Ok(part.end - part.start - fresh.len() as u64)
}

/// `p` with the client's bytes replaced by zeros (scratch reads as
/// zeros): a part planned before a later part failed still runs (its
/// state is applied), so each block the policy placed holds what its
/// program wrote, and the failed write leaves each of its blocks old or
/// zeros.
fn without_input(mut p: Program) -> Program {
    for b in &mut p.bufs {
        if let Buf::Input { len, .. } = *b {
            *b = Buf::Scratch(len);
        }
    }
    p
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
/// (never the blocks of `part`) while FAST is full.
#[allow(clippy::too_many_arguments)]
fn place(core: &mut Core, lb0: u64, part: Range<u64>, start: u64, cnt: u64, joined: bool, now: u64, demos: &mut Vec<Program>) -> Result<Vec<u64>, Miss> {
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
    let most = largest_extent(core);
    for c in (0..cnt).step_by(most as usize) {
        let chunk = AllocRequest { lba: start + c, blocks: most.min(cnt - c) };
        match allocate(core, chunk, part.clone(), now, demos) {
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
fn allocate(core: &mut Core, req: AllocRequest, own: Range<u64>, now: u64, demos: &mut Vec<Program>) -> Result<Vec<u64>, Miss> {
    loop {
        match core.alloc.allocate(req, now) {
            Ok(a) => return Ok(a.pieces.iter().flat_map(|p| p.fast_block..p.fast_block + p.blocks).collect()),
            Err(TierError::Full { .. }) => match commit_then_demote(core, now, req.blocks, own.clone(), demos)? {
                Some(p) => demos.push(p),
                None => {
                    core.fast_full = true;
                    let err = PlanError::Invalid(format!("fast tier full: no room for {} new blocks and demotion is impossible ({})", req.blocks, stuck_reason(core)));
                    return Err(Miss { err, full: true });
                }
            },
            Err(e) => return Err(alloc_err(e).into()),
        }
    }
}

/// A foreground demotion, after a commit of the dirty placements (a move
/// plans against a clean map).
fn commit_then_demote(core: &mut Core, now: u64, blocks: u64, own: Range<u64>, demos: &mut Vec<Program>) -> Result<Option<Program>, PlanError> {
    if let Some(c) = commit::commit(core)? {
        demos.push(c);
    }
    demote::foreground(core, now, blocks, own)
}

fn alloc_err(e: TierError) -> PlanError {
    PlanError::Invalid(format!("fast-tier allocator: {e}"))
}

/// Why nothing can move to the slow tier now (or nothing is left to).
fn stuck_reason(core: &Core) -> &'static str {
    let (f, s) = core.effective();
    if s == TierHealth::Offline {
        "the slow tier is offline"
    } else if (f, s) != (TierHealth::Ok, TierHealth::Ok) {
        "movement is paused while a tier is degraded"
    } else {
        "nothing more can be demoted"
    }
}

/// The program writing the client bytes of `part` (of the request
/// starting at `lb0`); the new placements applied to the state.
fn build(core: &mut Core, lb0: u64, part: Range<u64>, fresh: &[(u64, u64)], now: u64) -> Result<Program, PlanError> {
    let blk = core.lay.block;
    let mut p = program::new(Method::Direct);
    let n = part.end - part.start;
    let input = p.buf(Buf::Input { off: ((part.start - lb0) * blk) as usize, len: (n * blk) as usize });
    let mut xs = Vec::with_capacity(n as usize);
    let mut fi = fresh.iter().peekable();
    for (i, lb) in part.enumerate() {
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
        xs.push(Xfer { dev: core.lay.fast_offset(fb), at: i * blk as usize });
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
