//! Where everything lives: the map region, the unit slots, the spare
//! room and the logical capacity.
//!
//! ```text
//!   every member: [ map region (map_bytes) | slot 0 | slot 1 | ... | slot S-1 ]   slot = one unit
//!                 0                          map_bytes  slot s at map_bytes + s*unit
//!
//!   member 0's map region:
//!       0      B            B+C          B+2C                       map_bytes
//!       [label][ckpt slot 0][ckpt slot 1][ delta log ............. ]
//!   (B = the block, C = a checkpoint slot; the other members keep the
//!   region unused, so a slot's offset is the same on every member)
//!
//!   static home of logical unit l: member l % N, slot l / N   (raid0 striping)
//!
//!              member 0   member 1   member 2   member 3
//!   slot 0     u0         u1         u2         u3
//!   slot 1     u4         u5         u6         u7          data slots 0..D
//!   ...
//!   slot D-1   ...
//!   slot D     spare      spare      spare      spare       spare slots D..S
//!   slot S-1   spare      spare      spare      spare       (where moves land first)
//! ```
//!
//! * spare = max(1, ceil(S x spare_share)) per member, D = S - spare,
//!   capacity = N x D units: every unit has a home, and every member
//!   starts with room for at least one incoming unit.
//! * A checkpoint slot C holds a record (32 bytes) for every unit the
//!   members could hold, N x (member_bytes / unit): an upper bound on
//!   the capacity, which itself depends on the map region's size.
//! * The log is `clamp(C / 4, 64 KiB, 16 MiB)` (as the tier's): a
//!   checkpoint, a whole-map write, is rare next to the deltas.
//! * `map_bytes` is rounded up to the unit so slots stay unit-aligned.

#![allow(clippy::manual_is_multiple_of)] // rust-version 1.80

use mosaic_map::frame::{KIND_MAP_CHECKPOINT, KIND_MAP_DELTA};
use mosaic_map::ledger::{checkpoint_len, LedgerLayout};

use crate::{RemapConfig, RemapError, RemapGeometry};

/// Bytes of one map record.
pub const RECORD: u64 = 32;
const LOG_MIN: u64 = 64 << 10;
const LOG_MAX: u64 = 16 << 20;

/// The derived layout of a remapped array.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RemapLayout {
    /// Members N.
    pub members: usize,
    /// Bytes of one unit (one slot).
    pub unit: u64,
    /// Logical block bytes.
    pub block: u64,
    /// Bytes of every member's map region (slot 0 starts here).
    pub map_bytes: u64,
    /// Bytes of each checkpoint slot.
    pub ckpt_bytes: u64,
    /// Bytes of the delta log.
    pub log_bytes: u64,
    /// Unit slots per member S.
    pub slots: u64,
    /// Spare slots per member (S - D).
    pub spare: u64,
    /// Data slots per member D (the homes).
    pub data_slots: u64,
    /// Logical units N x D.
    pub capacity_units: u64,
}

impl RemapLayout {
    /// Derive the layout; every problem is named.
    pub fn new(cfg: &RemapConfig, geo: &RemapGeometry) -> Result<RemapLayout, RemapError> {
        cfg.validate()?;
        geo.validate()?;
        let (unit, block, n) = (cfg.unit, cfg.block, geo.members as u64);
        let ckpt_bytes = round_up(checkpoint_len(ckpt_payload(n, geo.member_bytes / unit)?), block);
        let map_bytes = map_region(cfg, ckpt_bytes)?;
        let log_bytes = (map_bytes - block - 2 * ckpt_bytes) / block * block;
        let room = geo.member_bytes.saturating_sub(map_bytes);
        let slots = room / unit;
        let spare = ((slots as f64 * cfg.spare_share).ceil() as u64).max(1);
        if slots <= spare {
            let m = format!("members of {} bytes hold {slots} unit slots after the {map_bytes}-byte map region: no data slot once {spare} are kept spare", geo.member_bytes);
            return Err(RemapError::Geometry(m));
        }
        let data_slots = slots - spare;
        let capacity_units = n.checked_mul(data_slots).filter(|c| c.checked_mul(unit).is_some());
        let capacity_units = capacity_units.ok_or_else(|| RemapError::Geometry("capacity overflows".into()))?;
        Ok(RemapLayout { members: geo.members, unit, block, map_bytes, ckpt_bytes, log_bytes, slots, spare, data_slots, capacity_units })
    }

    /// The ledger's positions on member 0.
    pub fn ledger(&self) -> LedgerLayout {
        let s0 = self.block;
        let log_start = s0 + 2 * self.ckpt_bytes;
        LedgerLayout {
            slots: [s0, s0 + self.ckpt_bytes],
            slot_bytes: self.ckpt_bytes,
            log_start,
            log_end: log_start + self.log_bytes,
            checkpoint_kind: KIND_MAP_CHECKPOINT,
            delta_kind: KIND_MAP_DELTA,
        }
    }

    /// Logical capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_units * self.unit
    }

    /// Byte offset of slot `s` on any member.
    pub fn slot_offset(&self, s: u64) -> u64 {
        self.map_bytes + s * self.unit
    }

    /// The slot starting at byte `offset`, if it is one.
    pub fn slot_at(&self, offset: u64) -> Option<u64> {
        let rel = offset.checked_sub(self.map_bytes)?;
        (rel % self.unit == 0 && rel / self.unit < self.slots).then_some(rel / self.unit)
    }

    /// The static raid0 home of unit `l`: (member, slot).
    pub fn home(&self, l: u64) -> (usize, u64) {
        let n = self.members as u64;
        ((l % n) as usize, l / n)
    }

    /// The unit whose home is (member, slot), if the slot is a data slot.
    pub fn home_unit(&self, member: usize, slot: u64) -> Option<u64> {
        (slot < self.data_slots).then(|| slot * self.members as u64 + member as u64)
    }
}

/// Payload of a checkpoint holding a record for each of `n x slots` units.
fn ckpt_payload(n: u64, slots: u64) -> Result<usize, RemapError> {
    let p = n.checked_mul(slots).and_then(|u| u.checked_mul(RECORD)).and_then(|b| b.checked_add(8));
    p.filter(|&b| b <= (usize::MAX / 2) as u64).map(|b| b as usize).ok_or_else(|| RemapError::Geometry("map of the whole array overflows".into()))
}

/// Bytes of the map region: the configured size (checked), or sized.
fn map_region(cfg: &RemapConfig, ckpt_bytes: u64) -> Result<u64, RemapError> {
    let fixed = 2 * cfg.block + 2 * ckpt_bytes; // label + checkpoints + one log block
    if cfg.map_bytes == 0 {
        let log = (ckpt_bytes / 4).clamp(LOG_MIN, LOG_MAX);
        return Ok(round_up(cfg.block + 2 * ckpt_bytes + log, cfg.unit));
    }
    if cfg.map_bytes < fixed {
        return Err(RemapError::Config(format!("map_bytes {} below the {fixed} a label, two checkpoints of a full map and one log block need", cfg.map_bytes)));
    }
    Ok(cfg.map_bytes)
}

fn round_up(v: u64, unit: u64) -> u64 {
    v.div_ceil(unit) * unit
}
