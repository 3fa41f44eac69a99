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

use mosaic_map::frame::{self, KIND_MAP_LABEL, SECTOR};
use mosaic_map::ledger::Ledger;
use mosaic_map::map::{decode_records, MapState, Placement, Update};

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
    let l = lay.ledger();
    let span = |a: u64, b: u64| &meta[a as usize..b as usize];
    let slots = [span(l.slots[0], l.slots[0] + l.slot_bytes), span(l.slots[1], l.slots[1] + l.slot_bytes)];
    let apply = |s: &mut MapState, p: &[u8]| decode_records(p).map(|ups| ups.iter().for_each(|u| s.apply(u))).is_ok();
    let (ledger, state, _) = Ledger::recover(l, slots, span(l.log_start, l.log_end), load, apply)
        .ok_or_else(|| PolicyError::Corrupt("no valid checkpoint in either map slot".into()))?;
    let mut core = Core::empty(cfg, geo, lay, ledger)?;
    let pos = core.map.ledger.pos;
    core.map.tail = span(pos / core.lay.block * core.lay.block, pos).to_vec();
    for (&lb, &placement) in &state.extents {
        let loc = locate(&core.lay, lb, placement)?;
        adopt(&mut core, lb, loc)?;
    }
    Ok(core)
}

/// A checkpoint body: map records only, each logical block once.
fn load(body: &[u8]) -> Option<MapState> {
    let mut s = MapState::default();
    for u in decode_records(body).ok()? {
        match u {
            Update::Map { logical, placement } if placement != Placement::Unmapped => {
                if s.extents.insert(logical, placement).is_some() {
                    return None;
                }
            }
            _ => return None,
        }
    }
    Some(s)
}

fn check_label(lay: &TierLayout, geo: &TierGeometry, meta: &[u8]) -> Result<(), PolicyError> {
    let (f, _) = frame::decode_kind(&meta[..SECTOR.min(meta.len())], KIND_MAP_LABEL)
        .ok_or_else(|| PolicyError::Corrupt("no valid tier label at the start of the map region (not formatted?)".into()))?;
    let got = mapstore::decode_label(&f.payload).ok_or_else(|| PolicyError::Corrupt("the label is not a tier map label".into()))?;
    let want = mapstore::decode_label(&mapstore::label_payload(lay, geo)).unwrap_or_default();
    for ((name, g), w) in mapstore::LABEL_FIELDS.iter().zip(got).zip(want) {
        if g != w {
            return Err(PolicyError::Corrupt(format!("the label's {name} is {g}, this configuration and geometry give {w}")));
        }
    }
    Ok(())
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
