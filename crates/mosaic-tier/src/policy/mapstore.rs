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

use mosaic_map::frame::{self, KIND_MAP_LABEL};
use mosaic_map::ledger::{Ledger, LedgerWrite};
use mosaic_map::map::{encode_records, Placement, Update};

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

/// The map and the ledger positions.
#[derive(Clone, Debug)]
pub struct MapStore {
    /// Logical block -> place.
    pub locs: BTreeMap<u64, Loc>,
    /// Logical blocks whose place in `locs` no durable frame names yet.
    pub dirty: BTreeSet<u64>,
    /// Where the next delta or checkpoint goes.
    pub ledger: Ledger,
    /// The log's bytes from the block holding the ledger's position up to
    /// it: a delta is written as whole blocks, so it carries them again.
    pub tail: Vec<u8>,
    /// Bytes of deltas and checkpoints planned.
    pub bytes_written: u64,
    /// Checkpoints planned.
    pub checkpoints: u64,
}

/// Magic at the start of the label payload.
const MAGIC: &[u8; 8] = b"mosaicTR";

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
    /// delta, or a checkpoint of the whole map when the log has no room.
    ///
    /// Every write covers whole blocks (FAST may be an array of 4 KiB
    /// blocks, and frames are 512-byte sectors):
    ///
    /// ```text
    ///   log:  ... | block b: [ tail (earlier frames) | new frame | zeros ] | ...
    ///                        ^ b*block               ^ ledger pos          written whole
    /// ```
    ///
    /// The zeros past the frame end a log replay there, as unwritten log does.
    /// The frame also carries every dirty block's record (first, so the
    /// program's own records win a replay), and the dirty set empties.
    pub fn persist(&mut self, lay: &TierLayout, updates: &[Update]) -> Result<LedgerWrite, String> {
        let mut all: Vec<Update> = std::mem::take(&mut self.dirty).into_iter().filter_map(|lb| Some(Self::record(lay, lb, *self.locs.get(&lb)?))).collect();
        all.extend_from_slice(updates);
        let payload = encode_records(&all);
        let w = match self.ledger.delta(&payload) {
            Ok(Some(w)) => self.whole_blocks(lay.block, w),
            Ok(None) | Err(_) => self.checkpoint(lay)?,
        };
        self.bytes_written += w.bytes.len() as u64;
        Ok(w)
    }

    /// A checkpoint of the whole map (whole blocks; the log starts over).
    pub fn checkpoint(&mut self, lay: &TierLayout) -> Result<LedgerWrite, String> {
        let all: Vec<Update> = self.locs.iter().map(|(&lb, &loc)| Self::record(lay, lb, loc)).collect();
        self.checkpoints += 1;
        let w = self.ledger.checkpoint(&encode_records(&all)).map_err(|e| e.to_string())?;
        self.tail.clear();
        Ok(LedgerWrite { offset: w.offset, bytes: pad(w.bytes, lay.block) })
    }

    /// Delta `w` (at the old ledger position) as whole blocks: the tail
    /// before it, the frame, zeros; the new tail kept.
    fn whole_blocks(&mut self, block: u64, w: LedgerWrite) -> LedgerWrite {
        let start = w.offset / block * block;
        debug_assert_eq!(self.tail.len() as u64, w.offset - start);
        let mut bytes = std::mem::take(&mut self.tail);
        bytes.extend_from_slice(&w.bytes);
        let end = start + bytes.len() as u64;
        self.tail = bytes[(end / block * block - start) as usize..].to_vec();
        LedgerWrite { offset: start, bytes: pad(bytes, block) }
    }
}

/// `b` padded with zeros to whole blocks.
pub fn pad(mut b: Vec<u8>, block: u64) -> Vec<u8> {
    b.resize((b.len() as u64).div_ceil(block) as usize * block as usize, 0);
    b
}

/// The label frame at offset 0 of FAST: what the map region was laid out
/// for, so `recover` with another configuration or geometry refuses.
pub fn label(lay: &TierLayout, geo: &TierGeometry) -> Vec<u8> {
    frame::encode(KIND_MAP_LABEL, 0, &label_payload(lay, geo))
}

/// The label's payload: magic, then the sizes (u64 little-endian).
pub fn label_payload(lay: &TierLayout, geo: &TierGeometry) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    for x in [lay.block, lay.map_bytes, lay.slot_bytes, lay.log_bytes, geo.fast_bytes, geo.slow_bytes, geo.slow_stripe] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

/// Names of the label's fields, for error messages.
pub const LABEL_FIELDS: [&str; 7] = ["block", "map_bytes", "slot_bytes", "log_bytes", "fast_bytes", "slow_bytes", "slow_stripe"];

/// Decode a label payload into its seven fields.
pub fn decode_label(p: &[u8]) -> Option<[u64; 7]> {
    if p.len() != MAGIC.len() + 7 * 8 || &p[..MAGIC.len()] != MAGIC {
        return None;
    }
    let mut out = [0u64; 7];
    for (i, c) in p[MAGIC.len()..].chunks_exact(8).enumerate() {
        out[i] = u64::from_le_bytes(c.try_into().ok()?);
    }
    Some(out)
}
