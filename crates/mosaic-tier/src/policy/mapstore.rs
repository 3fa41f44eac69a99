//! The tier's map and its ledger on FAST.
//!
//! The map holds one entry per mapped logical block, as `mosaic_map`
//! records (`Update::Map { logical, placement: Placement::Tier { tier,
//! offset } }`, offset = byte offset on that tier's inner array).  A
//! program that moves data carries its placements as one delta frame of
//! the ledger; when the log has no room for it, a checkpoint of the whole
//! map (after the change) goes to the other slot instead.
//!
//! Client writes do not write the map: the blocks they place are `dirty`
//! (placed in memory, not yet in a durable frame) until the next map
//! write, which carries them all (a group commit; see `commit.rs`).

use std::collections::{BTreeMap, BTreeSet};

use mosaic_map::blocklog::{BlockLedger, Label};
use mosaic_map::ledger::LedgerWrite;
use mosaic_map::map::{Placement, Update};

use super::layout::TierLayout;
use super::{TierGeometry, FAST, SLOW};

/// Where a logical block lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loc {
    /// Fast data block (flat ReHypar block number).
    Fast(u64),
    /// Slow block (segment = block / seg_blocks).
    Slow(u64),
}

/// The map and its ledger.
#[derive(Clone, Debug)]
pub struct MapStore {
    /// Logical block -> place.
    pub locs: BTreeMap<u64, Loc>,
    /// Logical blocks whose place in `locs` no durable frame names yet.
    pub dirty: BTreeSet<u64>,
    /// The kit's ledger of map records, written as whole blocks.
    pub log: BlockLedger,
}

impl MapStore {
    /// The record for `lb` at `loc`.
    pub fn record(lay: &TierLayout, lb: u64, loc: Loc) -> Update {
        let placement = match loc {
            Loc::Fast(fb) => Placement::Tier { tier: FAST as u8, offset: lay.fast_offset(fb) },
            Loc::Slow(sb) => Placement::Tier { tier: SLOW as u8, offset: lay.slow_offset(sb) },
        };
        Update::Map { logical: lb, placement }
    }

    /// The durable write for `updates`, already applied to `locs`: a
    /// delta, or a checkpoint of the whole map when the log has no room
    /// (whole blocks either way: `mosaic_map::blocklog`).  The frame also
    /// carries every dirty block's record (first, so the program's own
    /// records win a replay), and the dirty set empties.
    pub fn persist(&mut self, lay: &TierLayout, updates: &[Update]) -> Result<LedgerWrite, String> {
        let mut all: Vec<Update> = std::mem::take(&mut self.dirty).into_iter().filter_map(|lb| Some(Self::record(lay, lb, *self.locs.get(&lb)?))).collect();
        all.extend_from_slice(updates);
        let locs = &self.locs;
        self.log.persist(&all, || Self::all(lay, locs))
    }

    /// A checkpoint of the whole map.
    pub fn checkpoint(&mut self, lay: &TierLayout) -> Result<LedgerWrite, String> {
        self.log.checkpoint(&Self::all(lay, &self.locs))
    }

    /// Every block's record.
    fn all(lay: &TierLayout, locs: &BTreeMap<u64, Loc>) -> Vec<Update> {
        locs.iter().map(|(&lb, &loc)| Self::record(lay, lb, loc)).collect()
    }
}

/// The label at offset 0 of FAST: what the map region was laid out for,
/// so `recover` with another configuration or geometry refuses.
pub const LABEL: Label<'static> = Label {
    magic: b"mosaicTR",
    names: &["block", "map_bytes", "slot_bytes", "log_bytes", "fast_bytes", "slow_bytes", "slow_stripe"],
    what: "tier map",
    at: "the map region",
};

/// The label's fields, in [`LABEL`] order.
pub fn label_fields(lay: &TierLayout, geo: &TierGeometry) -> [u64; 7] {
    [lay.block, lay.map_bytes, lay.slot_bytes, lay.log_bytes, geo.fast_bytes, geo.slow_bytes, geo.slow_stripe]
}
