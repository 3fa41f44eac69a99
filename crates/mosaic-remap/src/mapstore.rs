//! The map's durable form at the start of the inner array's space: a
//! label, then the kit's ledger of map records written as whole blocks
//! (`mosaic_map::blocklog`).
//!
//! ```text
//!   inner space: [ label block | ckpt slot 0 | ckpt slot 1 | delta log ] [ units ... ]
//!   record of a moved unit: Update::Map { logical: unit,
//!                                         placement: Member { member: column,
//!                                                             offset: inner offset of the slot } }
//! ```
//!
//! Only moved units have records: a fresh array's map is empty, and a
//! unit without a record is at its static home.  A move program carries
//! its units' records as one delta frame (or, when the log has no room,
//! a checkpoint of every record after the change).

use std::collections::BTreeMap;

use mosaic_map::blocklog::Label;
use mosaic_map::map::{Placement, Update};

use crate::layout::RemapLayout;
use crate::RemapGeometry;

/// The label at offset 0 of the map region: what it was laid out for,
/// so `recover` with another configuration or geometry refuses.
pub const LABEL: Label<'static> = Label {
    magic: b"mosaicRM",
    names: &[
        "drives", "data_columns", "code_columns", "stripe_unit", "stripes", "period", "unit", "block", "map_bytes", "ckpt_bytes", "log_bytes", "slots", "spare",
        "capacity_units",
    ],
    what: "remap array",
    at: "the start of the inner array",
};

/// The record placing unit `l` at (column, slot).
pub fn record(lay: &RemapLayout, l: u64, at: (usize, u64)) -> Update {
    Update::Map { logical: l, placement: Placement::Member { member: at.0 as u32, offset: lay.slot_offset(at.0, at.1) } }
}

/// Every moved unit's record, with `over` (records about to be written)
/// taking precedence: the whole map after a change, for a checkpoint.
pub fn all(lay: &RemapLayout, moved: &BTreeMap<u64, (usize, u64)>, over: &[(u64, (usize, u64))]) -> Vec<Update> {
    let mut m = moved.clone();
    m.extend(over.iter().copied());
    m.iter().map(|(&l, &at)| record(lay, l, at)).collect()
}

/// The label's fields, in [`LABEL`] order.
pub fn label_fields(lay: &RemapLayout, geo: &RemapGeometry) -> [u64; 14] {
    let g = &geo.inner;
    [
        g.members as u64,
        g.k as u64,
        g.m as u64,
        g.unit,
        g.stripes,
        lay.period,
        lay.unit,
        lay.block,
        lay.map_bytes,
        lay.ckpt_bytes,
        lay.log_bytes,
        lay.slots,
        lay.spare,
        lay.capacity_units,
    ]
}
