//! Client discards (NBD's TRIM, a guest's `fstrim`): every mapped block
//! of the range leaves the map, and its place, on FAST or on SLOW, is
//! free for new data.  So a discarded block costs the fast tier no room
//! and is never demoted or promoted again; it reads as zeros and is a
//! hole in `base:allocation`.
//!
//! ```text
//!   Flush [ FAST ]  Write [ FAST map delta: the dirty placements, then
//!                           Unmap of each discarded block ]  Flush [ FAST ]
//! ```
//!
//! The map's rule holds as for every movement: a place is reused only
//! once the map stops naming it.  The places are freed when the program
//! is planned, and the caller runs each program to completion before it
//! plans the next, so no program written after can land in a place the
//! durable map still names.  A crash before the frame is durable leaves
//! the blocks where they were, with their bytes (which a discard allows:
//! a client may assume nothing of trimmed bytes until it writes them).

use mosaic_core::{PlanError, Program};
use mosaic_map::map::Update;

use super::mapstore::Loc;
use super::state::Core;
use super::{program, read, TierHealth};

/// Plan the discard of `[offset, offset + len)` (whole blocks): the map
/// write that drops the mapped blocks, or `None` when none is mapped.
/// With FAST, which holds the map, offline it fails, as a write would: a
/// caller zeroing by discard must not take "nothing to do" for done.
pub fn plan(core: &mut Core, offset: u64, len: u64) -> Result<Option<Program>, PlanError> {
    let (lb0, n) = read::check(core, offset, len)?;
    if core.effective().0 == TierHealth::Offline {
        return Err(PlanError::Invalid("fast tier offline: the map cannot drop blocks".into()));
    }
    let gone: Vec<(u64, Loc)> = core.map.locs.range(lb0..lb0 + n).map(|(&lb, &loc)| (lb, loc)).collect();
    if gone.is_empty() {
        return Ok(None);
    }
    let mut unmaps = Vec::with_capacity(gone.len());
    for &(lb, loc) in &gone {
        core.map.locs.remove(&lb);
        core.map.dirty.remove(&lb);
        match loc {
            Loc::Fast(fb) => core.fast_remove(fb).map_err(PlanError::Invalid)?,
            Loc::Slow(sb) => core.segs.remove(sb),
        }
        unmaps.push(Update::Unmap { logical: lb });
    }
    let w = core.map.persist(&core.lay, &unmaps).map_err(PlanError::Invalid)?;
    core.st.map_commits += 1;
    core.st.discarded_blocks += gone.len() as u64;
    Ok(Some(program::commit(w)))
}
