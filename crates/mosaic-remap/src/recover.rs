//! Recovery from the map region: label, newest checkpoint, deltas; then
//! the slot state rebuilt from the records.
//!
//! ```text
//!   region = inner bytes [0, map_bytes):
//!   [label: mosaicRM + layout fields][ckpt 0][ckpt 1][delta log]
//!      |                               \________ BlockLedger::recover ________/
//!      must equal what cfg + geo give        -> unit -> Placement::Member
//!                                            -> each checked, then Places::rebuild
//! ```
//!
//! Every record is checked: a unit inside the capacity, a column of the
//! array, an offset that is the start of one of its slots, no slot held twice
//! (home slots of units without a record count as held).  The errors
//! name the unit.  Damaged bytes are an error or an older consistent
//! map (a torn delta ends the log replay), never a panic.

use std::collections::BTreeMap;

use mosaic_map::blocklog::BlockLedger;
use mosaic_map::map::Placement;

use crate::layout::RemapLayout;
use crate::mapstore;
use crate::places::Places;
use crate::{RemapConfig, RemapError, RemapGeometry};

/// The layout, the slot state and the positioned ledger from `region`.
pub fn recover(cfg: &RemapConfig, geo: &RemapGeometry, region: &[u8]) -> Result<(RemapLayout, Places, BlockLedger), RemapError> {
    let lay = RemapLayout::new(cfg, geo)?;
    if (region.len() as u64) < lay.map_bytes {
        return Err(RemapError::Corrupt(format!("given {} bytes of the map region, it has {}", region.len(), lay.map_bytes)));
    }
    check_label(&lay, geo, region)?;
    let (log, state) = BlockLedger::recover(lay.ledger(), lay.block, region).ok_or_else(|| RemapError::Corrupt("no valid checkpoint in either map slot".into()))?;
    if let Some(((m, z), _)) = state.zone_wps.iter().next() {
        return Err(RemapError::Corrupt(format!("a zone record (member {m}, zone {z}) in a remap map")));
    }
    let mut moved = BTreeMap::new();
    for (&l, &p) in &state.extents {
        moved.insert(l, locate(&lay, l, p)?);
    }
    let places = Places::rebuild(&lay, moved).map_err(RemapError::Corrupt)?;
    Ok((lay, places, log))
}

/// The label must be ours and describe this configuration and geometry.
fn check_label(lay: &RemapLayout, geo: &RemapGeometry, region: &[u8]) -> Result<(), RemapError> {
    mapstore::LABEL.check(region, &mapstore::label_fields(lay, geo)).map_err(RemapError::Corrupt)
}

/// A record's place as (column, slot), checked against the layout.
fn locate(lay: &RemapLayout, l: u64, p: Placement) -> Result<(usize, u64), RemapError> {
    let bad = |m: String| Err(RemapError::Corrupt(format!("unit {l}: {m}")));
    if l >= lay.capacity_units {
        return bad(format!("beyond the capacity of {} units", lay.capacity_units));
    }
    match p {
        Placement::Member { member, offset } if (member as usize) < lay.ncols() => match lay.slot_at(offset) {
            Some((c, s)) if c == member as usize => Ok((c, s)),
            _ => bad(format!("offset {offset} is not the start of one of column {member}'s {} slots", lay.slots)),
        },
        Placement::Member { member, .. } => bad(format!("column {member} is not one of the {} columns", lay.ncols())),
        other => bad(format!("placement {other:?} is not on a member")),
    }
}
