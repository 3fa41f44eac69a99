//! Recovery from FAST's map region: label, newest checkpoint, deltas;
//! then the allocator and the segment table rebuilt from the live blocks.
//!
//! Every record is checked (a logical block inside the capacity, a place
//! on a tier, aligned, inside its data space, no place held twice).  The
//! allocator takes every extent holding a live block and **seals** it:
//! what else was written there before the crash (dead blocks, a tail
//! ReHypar was still filling) is unknown, so only each extent's
//! never-written end stays usable for a run growing in place, and an
//! extent returns to the clean pool when its last live block leaves.
//! This wastes at most the free tails of the extents open at the crash.

use mosaic_map::blocklog::BlockLedger;
use mosaic_map::map::Placement;

use super::layout::TierLayout;
use super::mapstore::{self, Loc};
use super::state::Core;
use super::{PolicyConfig, PolicyError, TierGeometry, FAST, SLOW};

/// Rebuild the policy from `meta` = bytes `[0, map_bytes)` of FAST.
pub fn recover(cfg: PolicyConfig, geo: TierGeometry, meta: &[u8]) -> Result<Core, PolicyError> {
    let lay = TierLayout::new(&cfg, &geo)?;
    if (meta.len() as u64) < lay.map_bytes {
        return Err(PolicyError::Corrupt(format!("given {} bytes of the map region, it has {}", meta.len(), lay.map_bytes)));
    }
    check_label(&lay, &geo, meta)?;
    let (log, state) = BlockLedger::recover(lay.ledger(), lay.block, meta).ok_or_else(|| PolicyError::Corrupt("no valid checkpoint in either map slot".into()))?;
    let mut core = Core::empty(cfg, geo, lay, log)?;
    for (&lb, &placement) in &state.extents {
        let loc = locate(&core.lay, lb, placement)?;
        adopt(&mut core, lb, loc)?;
    }
    Ok(core)
}

fn check_label(lay: &TierLayout, geo: &TierGeometry, meta: &[u8]) -> Result<(), PolicyError> {
    mapstore::LABEL.check(meta, &mapstore::label_fields(lay, geo)).map_err(PolicyError::Corrupt)
}

/// A record's place, checked against the layout.
fn locate(lay: &TierLayout, lb: u64, p: Placement) -> Result<Loc, PolicyError> {
    let bad = |m: String| Err(PolicyError::Corrupt(format!("logical block {lb}: {m}")));
    if lb >= lay.capacity_blocks {
        return bad(format!("beyond the capacity of {} blocks", lay.capacity_blocks));
    }
    match p {
        Placement::Tier { tier, offset } if tier as usize == FAST => {
            let rel = offset.checked_sub(lay.map_bytes).filter(|r| r % lay.block == 0);
            match rel.map(|r| r / lay.block) {
                Some(fb) if fb < lay.fast_blocks => Ok(Loc::Fast(fb)),
                _ => bad(format!("fast offset {offset} is not a data block of the fast tier")),
            }
        }
        Placement::Tier { tier, offset } if tier as usize == SLOW => {
            let sb = offset / lay.block;
            if offset % lay.block == 0 && sb < lay.segments * lay.seg_blocks {
                Ok(Loc::Slow(sb))
            } else {
                bad(format!("slow offset {offset} is not a block of the slow tier's segments"))
            }
        }
        other => bad(format!("placement {other:?} is not on tier {FAST} or {SLOW}")),
    }
}

/// Take a live block into the allocator or the segment table.
fn adopt(core: &mut Core, lb: u64, loc: Loc) -> Result<(), PolicyError> {
    match loc {
        Loc::Fast(fb) => {
            core.alloc.adopt(fb).map_err(|e| PolicyError::Corrupt(format!("logical block {lb}: {e}")))?;
            core.fast_add(fb, lb, 0);
        }
        Loc::Slow(sb) => core.segs.add(sb, lb).map_err(PolicyError::Corrupt)?,
    }
    core.map.locs.insert(lb, loc);
    Ok(())
}
