//! Where everything lives: FAST's map region and data sections, SLOW's
//! segments, the compaction reserve and the logical capacity.
//!
//! ```text
//!   FAST: 0      B            B+S          B+2S                 map_bytes
//!         [label][ckpt slot 0][ckpt slot 1][delta log ......... ][ section 0 | section 1 | ... ]
//!   (B = the block: every piece starts on one, and the label and every
//!   checkpoint and delta are written as whole blocks)
//!   SLOW: [ segment 0 | segment 1 | ... ]  (segment = slow_stripe bytes)
//! ```
//!
//! * A checkpoint slot S holds the map of a **full** volume: one 32-byte
//!   record per logical block (`mosaic_map::encode_records`), framed.
//! * The log is `clamp(S / 4, 64 KiB, 16 MiB)`: big enough that a
//!   checkpoint (a whole-map write) is rare next to the deltas, small
//!   enough to keep the region a few per cent of a small SSD.  A delta
//!   that does not fit the log's rest triggers a checkpoint instead.
//! * `map_bytes` is rounded up to the erase block (and the block), so the
//!   fast data sections, and every extent in them, stay erase-aligned.
//! * Reserve: `max(2, segments / 16)` segments are kept out of the
//!   logical capacity, so compaction always has a free segment to write
//!   to and demotion can always empty FAST.  Capacity = (segments -
//!   reserve) x slow_stripe: every logical block fits on SLOW alone.

#![allow(clippy::manual_is_multiple_of)] // rust-version 1.80

use mosaic_map::frame::{KIND_MAP_CHECKPOINT, KIND_MAP_DELTA};
use mosaic_map::ledger::{checkpoint_len, LedgerLayout};

use super::{PolicyConfig, PolicyError, TierGeometry};
use crate::rehypar::{SectionConfig, TierConfig};

/// Bytes of one map record.
pub const RECORD: u64 = 32;
const LOG_MIN: u64 = 64 << 10;
const LOG_MAX: u64 = 16 << 20;

/// The derived layout of a tier.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TierLayout {
    /// Logical block bytes.
    pub block: u64,
    /// Bytes of FAST's map region (fast data starts here).
    pub map_bytes: u64,
    /// Bytes of each checkpoint slot.
    pub slot_bytes: u64,
    /// Bytes of the delta log.
    pub log_bytes: u64,
    /// Fast data blocks covered by sections.
    pub fast_blocks: u64,
    /// The sections handed to the allocator.
    pub sections: Vec<SectionConfig>,
    /// Blocks per segment (one full slow stripe).
    pub seg_blocks: u64,
    /// Segments on SLOW.
    pub segments: u64,
    /// Segments kept free for compaction.
    pub reserve: u64,
    /// Logical blocks of the volume.
    pub capacity_blocks: u64,
}

impl TierLayout {
    /// Derive the layout; every problem is named.
    pub fn new(cfg: &PolicyConfig, geo: &TierGeometry) -> Result<TierLayout, PolicyError> {
        cfg.validate()?;
        geo.validate(cfg.block)?;
        let block = cfg.block;
        let seg_blocks = geo.slow_stripe / block;
        let segments = geo.slow_bytes / geo.slow_stripe;
        let reserve = (segments / 16).max(2);
        if segments <= reserve {
            return Err(PolicyError::Geometry(format!("{segments} slow segments: need more than the {reserve} kept for compaction")));
        }
        let capacity_blocks = (segments - reserve) * seg_blocks;
        let payload = capacity_blocks.checked_mul(RECORD).and_then(|b| b.checked_add(8)).filter(|&b| b <= usize::MAX as u64 / 2);
        let payload = payload.ok_or_else(|| PolicyError::Geometry("map of the whole volume overflows".into()))?;
        // Every piece starts on a block, so FAST may be an array of 4 KiB blocks.
        let slot_bytes = round_up(checkpoint_len(payload as usize), block);
        let fixed = 2 * block + 2 * slot_bytes; // label block + slots + one log block
        let map_bytes = if cfg.map_bytes != 0 {
            if cfg.map_bytes < fixed {
                return Err(PolicyError::Config(format!("map_bytes {} below the {fixed} two checkpoints of a full map need", cfg.map_bytes)));
            }
            cfg.map_bytes
        } else {
            let log = (slot_bytes / 4).clamp(LOG_MIN, LOG_MAX);
            round_up(block + 2 * slot_bytes + log, cfg.erase_block.max(block))
        };
        let log_bytes = (map_bytes - block - 2 * slot_bytes) / block * block;
        let data = geo.fast_bytes.checked_sub(map_bytes).filter(|&d| d > 0);
        let data = data.ok_or_else(|| PolicyError::Geometry(format!("fast tier of {} bytes holds no data after its {map_bytes}-byte map", geo.fast_bytes)))?;
        let sections = sections(cfg, data)?;
        let fast_blocks = sections.iter().map(|s| s.capacity_bytes / block).sum();
        Ok(TierLayout { block, map_bytes, slot_bytes, log_bytes, fast_blocks, sections, seg_blocks, segments, reserve, capacity_blocks })
    }

    /// The allocator's configuration.
    pub fn tier_config(&self, cfg: &PolicyConfig) -> TierConfig {
        TierConfig {
            block_bytes: cfg.block,
            erase_block_bytes: cfg.erase_block,
            sections: self.sections.clone(),
            threshold_v: cfg.threshold_v,
            expiry_ns: cfg.expiry_ns,
        }
    }

    /// The ledger's positions on FAST.
    pub fn ledger(&self) -> LedgerLayout {
        let s0 = self.block;
        LedgerLayout {
            slots: [s0, s0 + self.slot_bytes],
            slot_bytes: self.slot_bytes,
            log_start: s0 + 2 * self.slot_bytes,
            log_end: s0 + 2 * self.slot_bytes + self.log_bytes,
            checkpoint_kind: KIND_MAP_CHECKPOINT,
            delta_kind: KIND_MAP_DELTA,
        }
    }

    /// Logical capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_blocks * self.block
    }

    /// Byte offset on FAST of fast block `fb`.
    pub fn fast_offset(&self, fb: u64) -> u64 {
        self.map_bytes + fb * self.block
    }

    /// Byte offset on SLOW of slow block `sb`.
    pub fn slow_offset(&self, sb: u64) -> u64 {
        sb * self.block
    }

    /// Bytes of fast data space.
    pub fn fast_data_bytes(&self) -> u64 {
        self.fast_blocks * self.block
    }
}

fn round_up(v: u64, unit: u64) -> u64 {
    v.div_ceil(unit) * unit
}

/// Section capacities: each share of the data space, rounded down to
/// whole max(extent, erase block) units.
fn sections(cfg: &PolicyConfig, data: u64) -> Result<Vec<SectionConfig>, PolicyError> {
    let mut out = Vec::with_capacity(cfg.sections.len());
    for (i, &(extent, share)) in cfg.sections.iter().enumerate() {
        let unit = extent.max(cfg.erase_block).max(1);
        let cap = ((data as f64 * share) as u64) / unit * unit;
        if cap == 0 {
            return Err(PolicyError::Geometry(format!("section {i} ({extent}-byte extents, share {share}) gets no whole {unit}-byte unit of the {data} fast data bytes")));
        }
        out.push(SectionConfig { extent_bytes: extent, capacity_bytes: cap });
    }
    Ok(out)
}
