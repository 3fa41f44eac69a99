//! Map records on a [`Ledger`], written as whole blocks: the sans-I/O map
//! store of mapped policies whose map lives on an array of `block`-byte
//! blocks (the hybrid tier's on its fast array), so every map write is a
//! program's device write like any other.
//!
//! ```text
//!   log:  ... | block b: [ tail (earlier frames) | new frame | zeros ] | ...
//!                        ^ b*block               ^ ledger pos          written whole
//! ```
//!
//! A delta carries the bytes of the earlier frames in its first block
//! (kept in memory as `tail`, read back by [`BlockLedger::recover`]) and
//! zeros after it: the zeros end a log replay there, as unwritten log
//! does.  When the log has no room for a delta (or the delta is larger
//! than the log), a checkpoint of the whole map goes to the other slot
//! instead, padded to whole blocks.  Records are the kit's
//! ([`crate::map::encode_records`]); a checkpoint holds each logical unit
//! once.

use crate::ledger::{Ledger, LedgerLayout, LedgerWrite};
use crate::map::{decode_records, encode_records, MapState, Placement, Update};

/// A ledger of map records whose writes are whole blocks.
#[derive(Clone, Debug)]
pub struct BlockLedger {
    /// Where the next delta or checkpoint goes.
    pub ledger: Ledger,
    block: u64,
    /// The log's bytes from the block holding the ledger's position up to it.
    tail: Vec<u8>,
    /// Bytes of deltas and checkpoints planned.
    pub bytes_written: u64,
    /// Checkpoints planned.
    pub checkpoints: u64,
}

impl BlockLedger {
    /// A ledger about to write its first checkpoint.
    pub fn fresh(layout: LedgerLayout, block: u64) -> BlockLedger {
        BlockLedger { ledger: Ledger::fresh(layout), block: block.max(1), tail: Vec::new(), bytes_written: 0, checkpoints: 0 }
    }

    /// The write for `updates` (already applied to the caller's map): a
    /// delta, or, when the log has no room, a checkpoint of `all()` (the
    /// whole map after the change).
    pub fn persist(&mut self, updates: &[Update], all: impl FnOnce() -> Vec<Update>) -> Result<LedgerWrite, String> {
        let w = match self.ledger.delta(&encode_records(updates)) {
            Ok(Some(w)) => self.whole_blocks(w),
            Ok(None) | Err(_) => return self.checkpoint(&all()),
        };
        self.bytes_written += w.bytes.len() as u64;
        Ok(w)
    }

    /// A checkpoint of the whole map `all` (whole blocks; the log starts over).
    pub fn checkpoint(&mut self, all: &[Update]) -> Result<LedgerWrite, String> {
        self.checkpoints += 1;
        let w = self.ledger.checkpoint(&encode_records(all)).map_err(|e| e.to_string())?;
        self.tail.clear();
        let w = LedgerWrite { offset: w.offset, bytes: pad(w.bytes, self.block) };
        self.bytes_written += w.bytes.len() as u64;
        Ok(w)
    }

    /// Bytes left in the delta log.
    pub fn log_room(&self) -> u64 {
        self.ledger.layout.log_end - self.ledger.pos
    }

    /// Delta `w` (at the old ledger position) as whole blocks: the tail
    /// before it, the frame, zeros; the new tail kept.
    fn whole_blocks(&mut self, w: LedgerWrite) -> LedgerWrite {
        let start = w.offset / self.block * self.block;
        debug_assert_eq!(self.tail.len() as u64, w.offset - start);
        let mut bytes = std::mem::take(&mut self.tail);
        bytes.extend_from_slice(&w.bytes);
        let end = start + bytes.len() as u64;
        self.tail = bytes[(end / self.block * self.block - start) as usize..].to_vec();
        LedgerWrite { offset: start, bytes: pad(bytes, self.block) }
    }

    /// Recover from `region` = the device's bytes from offset 0 up to at
    /// least the log's end: the newest checkpoint whose records hold each
    /// logical unit once, then the deltas in sequence; the ledger
    /// positioned after them with its tail.  `None` when no slot holds a
    /// valid checkpoint (or the region is short).
    pub fn recover(layout: LedgerLayout, block: u64, region: &[u8]) -> Option<(BlockLedger, MapState)> {
        let need = layout.log_end.max(layout.slots[0] + layout.slot_bytes).max(layout.slots[1] + layout.slot_bytes);
        if (region.len() as u64) < need {
            return None;
        }
        let span = |a: u64, b: u64| &region[a as usize..b as usize];
        let l = layout;
        let slots = [span(l.slots[0], l.slots[0] + l.slot_bytes), span(l.slots[1], l.slots[1] + l.slot_bytes)];
        let apply = |s: &mut MapState, p: &[u8]| decode_records(p).map(|ups| ups.iter().for_each(|u| s.apply(u))).is_ok();
        let (ledger, state, _) = Ledger::recover(l, slots, span(l.log_start, l.log_end), load, apply)?;
        let block = block.max(1);
        let pos = ledger.pos;
        let tail = span(pos / block * block, pos).to_vec();
        Some((BlockLedger { ledger, block, tail, bytes_written: 0, checkpoints: 0 }, state))
    }
}

/// A checkpoint body: map records only, each logical unit once.
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

/// `b` padded with zeros to whole blocks of `block` bytes.
pub fn pad(mut b: Vec<u8>, block: u64) -> Vec<u8> {
    let block = block.max(1);
    b.resize((b.len() as u64).div_ceil(block) as usize * block as usize, 0);
    b
}

/// The label at offset 0 of a map region: a policy's 8-byte magic and the
/// named numbers its layout was derived from, so a recovery with another
/// configuration or geometry refuses, naming the first field that
/// differs.  One frame of kind `KIND_MAP_LABEL`, sequence 0.
pub struct Label<'a> {
    pub magic: &'a [u8; 8],
    /// Field names, for errors.
    pub names: &'a [&'a str],
    /// What the label names: the tier's map, the remapped array's.
    pub what: &'a str,
    /// Where the label is, for errors ("the map region", "member 0").
    pub at: &'a str,
}

impl Label<'_> {
    /// The label frame for `fields` (in `names` order).
    pub fn encode(&self, fields: &[u64]) -> Vec<u8> {
        let mut v = self.magic.to_vec();
        fields.iter().for_each(|x| v.extend_from_slice(&x.to_le_bytes()));
        crate::frame::encode(crate::frame::KIND_MAP_LABEL, 0, &v)
    }

    /// Check the label at the start of `region` against `want`.
    pub fn check(&self, region: &[u8], want: &[u64]) -> Result<(), String> {
        let head = &region[..crate::frame::SECTOR.min(region.len())];
        let (f, _) = crate::frame::decode_kind(head, crate::frame::KIND_MAP_LABEL)
            .ok_or_else(|| format!("no valid {} label at the start of {} (not formatted?)", self.what, self.at))?;
        let p = &f.payload;
        if p.len() != 8 + 8 * self.names.len() || &p[..8] != self.magic {
            return Err(format!("the label is not a {} label", self.what));
        }
        for ((name, c), w) in self.names.iter().zip(p[8..].chunks_exact(8)).zip(want) {
            let g = u64::from_le_bytes(c.try_into().map_err(|_| "short label".to_string())?);
            if g != *w {
                return Err(format!("the label's {name} is {g}, this configuration and geometry give {w}"));
            }
        }
        Ok(())
    }
}
