//! Map commits: a client write puts its data on FAST at once and its new
//! placements in memory (dirty); the next map write carries them all, in
//! one delta frame (a group commit).
//!
//! ```text
//!   write A   Write [ FAST data ]                       A's placements dirty
//!   write B   Write [ FAST data ]                       A's and B's dirty
//!   flush     Flush [ FAST ]  Write [ FAST map delta: A, B ]  Flush [ FAST ]
//! ```
//!
//! * **Acknowledgement.**  A write completes when its data is on FAST:
//!   ReHypar governs placement only, nothing is acknowledged from memory.
//!   As for every mosaic volume (`Volume::flush`, a disk with a volatile
//!   write cache), a completed write is durable after the next flush; a
//!   crash before it leaves each of its blocks old or new (a lost
//!   placement reads what the durable map names).  `commit_blocks = 0`
//!   makes every placing write commit at once.
//! * **Commit points.**  A flush (NBD FLUSH and FUA, `Volume::flush`,
//!   close, the end of a replay); idle time; before every movement; a
//!   write that brings the dirty count to `commit_blocks`.
//! * **Superseded slow blocks.**  A write that places a block held on
//!   SLOW frees the slow block in memory at once, while the durable map
//!   may still name it.  Only a movement writes SLOW, and every movement
//!   commits first (a commit program chained in front of it): the map
//!   stops naming the slow block before anything can overwrite it.
//!
//! The phase order of a commit keeps the map's rule (a place is named
//! only once its data is durable): the flush of FAST goes first.

use mosaic_core::{Method, Phase, PlanError, Program};

use super::program;
use super::state::Core;
use super::FAST;

/// The program that makes every dirty placement durable, or `None` when
/// nothing is dirty.
pub fn commit(core: &mut Core) -> Result<Option<Program>, PlanError> {
    if core.map.dirty.is_empty() {
        return Ok(None);
    }
    let w = core.map.persist(&core.lay, &[]).map_err(PlanError::Invalid)?;
    core.st.map_commits += 1;
    Ok(Some(program::commit(w)))
}

/// A client flush: the commit, or a flush of FAST when nothing is dirty
/// (client data is written without a flush).
pub fn flush(core: &mut Core) -> Result<Program, PlanError> {
    if let Some(p) = commit(core)? {
        return Ok(p);
    }
    let mut p = program::new(Method::Direct);
    p.phases.push(Phase::Flush(vec![FAST]));
    Ok(p)
}

/// Whether a write that leaves `dirty` placements must commit now.
pub fn due(core: &Core) -> bool {
    core.map.dirty.len() as u64 >= core.cfg.commit_blocks.max(1)
}
