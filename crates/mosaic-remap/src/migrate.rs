//! Migration: the queued moves of a target layout, a batch per idle call,
//! through the kit's migration protocol (`mosaic_map::moves`).
//!
//! ```text
//!   set_target([(u7, c2), (u3, c0), ...])   queue, in the caller's order
//!                                           (benefit over cost); units
//!                                           already on their column dropped
//!
//!   idle -> one program: up to batch_units queued moves whose target
//!           column has a free slot (the lowest one), as ONE kit Move,
//!           every operation on the inner array (member 0):
//!
//!     Read  [ u7 @ c1 slot 0, u3 @ c3 slot 0, ... ] -> staging        (1) copy
//!     Write [ u7 -> c2 slot D, u3 -> c0 slot D, ... ] <- staging
//!     Flush [ inner ]                                                (2) durable
//!     Write [ map delta: u7 -> (c2, D), u3 -> (c0, D), ... ]         (3) remap
//!     Flush [ inner ]
//!   then, in memory at plan time: the new places taken, the old ones
//!   free (4): later programs may write them, never this one.
//! ```
//!
//! * **Old places stay untouched by their own batch.**  A batch lands
//!   only in slots free before it was planned; a slot it frees is taken
//!   by a later batch at the earliest, whose program runs after this one
//!   (the caller runs each program before planning the next, as for the
//!   tier).  A crash before (3) leaves the map naming old places nobody
//!   wrote; from (3) on, new places durable since (2).
//! * **Parity.**  On a parity inner array the write of (1) is the inner
//!   array's read-modify-write of the destination stripe, through its
//!   journal: that stripe's code takes the unit in.  The source stripe's
//!   code needs no change: the vacated unit keeps its bytes, which that
//!   code covers, until a later move or write lands there (again as a
//!   read-modify-write).  So a move is one unit write's cost, and a crash
//!   anywhere leaves both stripes consistent (the inner journal).
//! * **Blocked moves.**  A move whose target column has no free slot
//!   stays queued (counted as blocked) and goes once a move away from
//!   that column frees one.  `idle` gives nothing when no queued move can
//!   go: no busy loop.  Two columns full and each waiting for the other
//!   stay blocked: the caller plans with the spare room in mind.
//! * **Pause.**  Nothing moves while the inner array is degraded
//!   ([`RemapPolicy::set_degraded`]) or not Active: a degraded array is
//!   no time to add work, and raid0 has no redundancy.
//! * **Budget.**  A token bucket of `budget_bytes_per_s` (as the tier's),
//!   holding at least one unit, limits the bytes moved.

use std::collections::{HashMap, HashSet, VecDeque};

use mosaic_core::{Health, MemberState, Method, PlanError, Program};
use mosaic_map::moves::Move;

use crate::layout::RemapLayout;
use crate::places::Places;
use crate::{mapstore, RemapError, RemapPolicy};

/// The executor's one member: the inner array's logical space, which
/// holds the map region and every unit.
pub const MAP_MEMBER: usize = 0;

/// One planned move: a unit, its old place and its new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Step {
    unit: u64,
    from: (usize, u64),
    to: (usize, u64),
}

/// Check a target and make it the queue: every unit inside the capacity
/// and named once, every column in the array; units already on their
/// target column left out.
pub fn queue(lay: &RemapLayout, places: &Places, target: Vec<(u64, usize)>) -> Result<VecDeque<(u64, usize)>, RemapError> {
    let mut seen = HashSet::with_capacity(target.len());
    let mut q = VecDeque::with_capacity(target.len());
    for (l, m) in target {
        if l >= lay.capacity_units {
            return Err(RemapError::Target(format!("unit {l} is beyond the capacity of {} units", lay.capacity_units)));
        }
        if m >= lay.ncols() {
            return Err(RemapError::Target(format!("unit {l}: column {m} is not one of the {} columns", lay.ncols())));
        }
        if !seen.insert(l) {
            return Err(RemapError::Target(format!("unit {l} is named twice")));
        }
        if places.of(lay, l).0 != m {
            q.push_back((l, m));
        }
    }
    Ok(q)
}

/// Whether the inner array is Active (movement runs only then).
pub fn active(h: &Health) -> bool {
    matches!(h.states.get(MAP_MEMBER), Some(MemberState::Active))
}

/// One idle step: the next batch as a program, or `None` when paused,
/// out of budget, or no queued move can go.
pub fn step(pol: &mut RemapPolicy, now: u64, h: &Health) -> Result<Option<Program>, PlanError> {
    if pol.queue.is_empty() {
        return Ok(None);
    }
    if pol.degraded || !active(h) {
        pol.st.paused += 1;
        return Ok(None);
    }
    let unit = pol.lay.unit;
    let budget = pol.bucket.allowance(now, pol.cfg.budget_bytes_per_s, unit) / unit;
    let max = budget.min(pol.cfg.batch_units as u64) as usize;
    if max == 0 {
        return Ok(None);
    }
    let steps = select(pol, max);
    if steps.is_empty() {
        return Ok(None);
    }
    build(pol, &steps).map(Some)
}

/// Take up to `max` queued moves that can go, lowest free slot of their
/// target column each (slots free before this batch only); drop moves
/// already done; keep the rest queued and count the blocked ones.
fn select(pol: &mut RemapPolicy, max: usize) -> Vec<Step> {
    let (lay, places) = (&pol.lay, &pol.places);
    // Per column, one past the last slot this batch took there.
    let mut taken: HashMap<usize, u64> = HashMap::new();
    let (mut steps, mut keep, mut blocked) = (Vec::new(), VecDeque::new(), 0u64);
    for (l, m) in std::mem::take(&mut pol.queue) {
        let from = places.of(lay, l);
        if from.0 == m {
            continue;
        }
        match places.free_slot(m, taken.get(&m).copied().unwrap_or(0)) {
            Some(s) if steps.len() < max => {
                taken.insert(m, s + 1);
                steps.push(Step { unit: l, from, to: (m, s) });
            }
            Some(_) => keep.push_back((l, m)),
            None => {
                blocked += 1;
                keep.push_back((l, m));
            }
        }
    }
    pol.queue = keep;
    pol.st.moves_blocked = blocked;
    pol.st.blocked_skips += blocked;
    // Writes in inner order, so moves into neighbouring slots merge.
    steps.sort_by_key(|s| lay.slot_offset(s.to.0, s.to.1));
    steps
}

/// The batch as one kit `Move`, its map frame, and its state applied.
fn build(pol: &mut RemapPolicy, steps: &[Step]) -> Result<Program, PlanError> {
    let unit = pol.lay.unit;
    let mut locks: Vec<u64> = steps.iter().map(|s| s.unit).collect();
    locks.sort_unstable();
    let mut mv = Move::new(locks, Method::Direct, steps.len() * unit as usize);
    for (j, s) in steps.iter().enumerate() {
        mv.read(MAP_MEMBER, pol.lay.slot_offset(s.from.0, s.from.1), unit, j * unit as usize);
    }
    for (j, s) in steps.iter().enumerate() {
        mv.write(MAP_MEMBER, pol.lay.slot_offset(s.to.0, s.to.1), unit, j * unit as usize);
    }
    let over: Vec<(u64, (usize, u64))> = steps.iter().map(|s| (s.unit, s.to)).collect();
    let updates: Vec<_> = over.iter().map(|&(l, at)| mapstore::record(&pol.lay, l, at)).collect();
    let (lay, moved) = (&pol.lay, &pol.places.moved);
    let w = pol.log.persist(&updates, || mapstore::all(lay, moved, &over)).map_err(|e| PlanError::Invalid(format!("remap map write: {e}")))?;
    apply(&pol.lay, &mut pol.places, steps)?;
    pol.bucket.charge(steps.len() as u64 * unit);
    pol.st.moves += steps.len() as u64;
    pol.st.move_programs += 1;
    pol.st.bytes_moved += steps.len() as u64 * unit;
    Ok(mv.remap(MAP_MEMBER, w))
}

/// The new places taken and the old ones freed, in memory.
fn apply(lay: &RemapLayout, places: &mut Places, steps: &[Step]) -> Result<(), PlanError> {
    for s in steps {
        places.place(lay, s.unit, s.to).map_err(|e| PlanError::Invalid(format!("remap state: {e}")))?;
    }
    Ok(())
}
