//! The map's durable form on member 0: a label, then the kit's ledger of
//! map records written as whole blocks (`mosaic_map::blocklog`).
//!
//! ```text
//!   member 0: [ label block | ckpt slot 0 | ckpt slot 1 | delta log ] [ slots ... ]
//!   record of a moved unit: Update::Map { logical: unit,
//!                                         placement: Member { member, offset: slot start } }
//! ```
//!
//! Only moved units have records: a fresh array's map is empty, and a
//! unit without a record is at its static home.  A move program carries
//! its units' records as one delta frame (or, when the log has no room,
//! a checkpoint of every record after the change).

use std::collections::BTreeMap;

use mosaic_map::frame::{self, KIND_MAP_LABEL};
use mosaic_map::map::{Placement, Update};

use crate::layout::RemapLayout;
use crate::RemapGeometry;

/// Magic at the start of the label payload.
const MAGIC: &[u8; 8] = b"mosaicRM";

/// Names of the label's fields, for error messages.
pub const LABEL_FIELDS: [&str; 10] = ["members", "member_bytes", "unit", "block", "map_bytes", "ckpt_bytes", "log_bytes", "slots", "spare", "capacity_units"];

/// The record placing unit `l` at (member, slot).
pub fn record(lay: &RemapLayout, l: u64, at: (usize, u64)) -> Update {
    Update::Map { logical: l, placement: Placement::Member { member: at.0 as u32, offset: lay.slot_offset(at.1) } }
}

/// Every moved unit's record, with `over` (records about to be written)
/// taking precedence: the whole map after a change, for a checkpoint.
pub fn all(lay: &RemapLayout, moved: &BTreeMap<u64, (usize, u64)>, over: &[(u64, (usize, u64))]) -> Vec<Update> {
    let mut m = moved.clone();
    m.extend(over.iter().copied());
    m.iter().map(|(&l, &at)| record(lay, l, at)).collect()
}

/// The label frame at offset 0 of member 0: what the map region was laid
/// out for, so `recover` with another configuration or geometry refuses.
pub fn label(lay: &RemapLayout, geo: &RemapGeometry) -> Vec<u8> {
    frame::encode(KIND_MAP_LABEL, 0, &label_payload(lay, geo))
}

/// The label's payload: magic, then the fields (u64 little-endian).
pub fn label_payload(lay: &RemapLayout, geo: &RemapGeometry) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    for x in label_fields(lay, geo) {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

/// The label's fields, in [`LABEL_FIELDS`] order.
pub fn label_fields(lay: &RemapLayout, geo: &RemapGeometry) -> [u64; 10] {
    [geo.members as u64, geo.member_bytes, lay.unit, lay.block, lay.map_bytes, lay.ckpt_bytes, lay.log_bytes, lay.slots, lay.spare, lay.capacity_units]
}

/// Decode a label payload into its fields; `None` when it is not one.
pub fn decode_label(p: &[u8]) -> Option<[u64; 10]> {
    if p.len() != MAGIC.len() + LABEL_FIELDS.len() * 8 || &p[..MAGIC.len()] != MAGIC {
        return None;
    }
    let mut out = [0u64; 10];
    for (i, c) in p[MAGIC.len()..].chunks_exact(8).enumerate() {
        out[i] = u64::from_le_bytes(c.try_into().ok()?);
    }
    Some(out)
}
