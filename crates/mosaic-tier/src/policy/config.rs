//! The policy's configuration and the tier's geometry, with validation.

#![allow(clippy::manual_is_multiple_of)] // rust-version 1.80

use super::PolicyError;
use crate::rehypar::{DEFAULT_BLOCK_BYTES, DEFAULT_ERASE_BLOCK_BYTES, DEFAULT_EXPIRY_NS, DEFAULT_THRESHOLD_V};
use crate::run::DEFAULT_WINDOW_NS;

/// How the tier places and moves blocks.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PolicyConfig {
    /// Logical block bytes (4096).
    pub block: u64,
    /// Fast data sections: (extent bytes, share of fast data space).
    /// Default `[(64 KiB, 0.5), (256 KiB, 0.5)]`.
    pub sections: Vec<(u64, f64)>,
    /// Flash erase block of the fast tier (256 KiB).
    pub erase_block: u64,
    /// ReHypar's threshold V in blocks (8).
    pub threshold_v: u64,
    /// ReHypar's reuse window of an open extent (30 s).
    pub expiry_ns: u64,
    /// The write-run coalescing window (10 ms).
    pub window_ns: u64,
    /// The fixed-extent baseline instead of ReHypar.
    pub fixed_extents: bool,
    /// Bytes of FAST's map region; 0 = sized from the geometry.
    pub map_bytes: u64,
    /// Demote when fast fill (allocated / total) is above this (0.8).
    pub high_water: f64,
    /// ... until it is at or below this (0.6).
    pub low_water: f64,
    /// Promote a slow group after this many read hits (2).
    pub promote_hits: u32,
    /// Never promote what a sequential read stream longer than this
    /// many bytes read (1 MiB).
    pub seq_cutoff: u64,
    /// Movement budget in bytes per second; 0 = unlimited.
    pub budget_bytes_per_s: u64,
    /// Largest share of fast data space moved in one idle round (0.1).
    pub round_share: f64,
    /// Idle time before background movement starts (100 ms).
    pub idle_after_ns: u64,
    /// 0: the policy's time is the caller's clock.  Otherwise its time
    /// advances by this many ns per client request, so its time-based
    /// choices (runs, d/t, expiry, recency) depend on the request sequence
    /// only: a replay on drive models and one on real members decide the
    /// same (`mosaic replay` and `create --tier-request-clock`).
    #[serde(default)]
    pub request_clock_ns: u64,
    /// Placements (blocks a client write put on new fast space) kept in
    /// memory at most before the write that reaches this many commits the
    /// map itself; a flush, idle time and every movement commit before
    /// that (2048).  0: every write that places blocks commits at once
    /// (its placements are durable when it completes, flush or not).
    #[serde(default = "default_commit_blocks")]
    pub commit_blocks: u64,
}

fn default_commit_blocks() -> u64 {
    2048
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            block: DEFAULT_BLOCK_BYTES,
            sections: vec![(64 << 10, 0.5), (256 << 10, 0.5)],
            erase_block: DEFAULT_ERASE_BLOCK_BYTES,
            threshold_v: DEFAULT_THRESHOLD_V,
            expiry_ns: DEFAULT_EXPIRY_NS,
            window_ns: DEFAULT_WINDOW_NS,
            fixed_extents: false,
            map_bytes: 0,
            high_water: 0.8,
            low_water: 0.6,
            promote_hits: 2,
            seq_cutoff: 1 << 20,
            budget_bytes_per_s: 0,
            round_share: 0.1,
            idle_after_ns: 100_000_000,
            request_clock_ns: 0,
            commit_blocks: default_commit_blocks(),
        }
    }
}

/// Usable bytes of each inner array, and the slow array's full stripe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TierGeometry {
    /// Usable bytes of the fast inner array.
    pub fast_bytes: u64,
    /// Usable bytes of the slow inner array.
    pub slow_bytes: u64,
    /// Data bytes of one full stripe of the slow array (one segment).
    pub slow_stripe: u64,
}

impl PolicyConfig {
    /// Check the fields the allocator does not check itself.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let bad = |m: String| Err(PolicyError::Config(m));
        if !self.block.is_power_of_two() || self.block < 512 {
            return bad(format!("block {} must be a power of two >= 512", self.block));
        }
        if self.sections.is_empty() {
            return bad("at least one section is needed".into());
        }
        let total: f64 = self.sections.iter().map(|s| s.1).sum();
        if self.sections.iter().any(|s| !(s.1 > 0.0 && s.1 <= 1.0)) || total > 1.0 + 1e-9 {
            return bad(format!("section shares {:?} must be in (0, 1] and sum to at most 1", self.sections.iter().map(|s| s.1).collect::<Vec<_>>()));
        }
        let w = (self.low_water, self.high_water);
        if !(w.0 >= 0.0 && w.0 < w.1 && w.1 <= 1.0) {
            return bad(format!("watermarks low {} high {}: need 0 <= low < high <= 1", w.0, w.1));
        }
        if !(self.round_share > 0.0 && self.round_share <= 1.0) {
            return bad(format!("round_share {} must be in (0, 1]", self.round_share));
        }
        if self.promote_hits == 0 {
            return bad("promote_hits must be >= 1".into());
        }
        if self.window_ns == 0 {
            return bad("window_ns must be > 0".into());
        }
        if self.map_bytes % self.block != 0 {
            return bad(format!("map_bytes {} is not a multiple of the block", self.map_bytes));
        }
        Ok(())
    }
}

impl TierGeometry {
    /// Check the geometry against the block size.
    pub fn validate(&self, block: u64) -> Result<(), PolicyError> {
        let bad = |m: String| Err(PolicyError::Geometry(m));
        if self.slow_stripe == 0 || self.slow_stripe % block != 0 {
            return bad(format!("slow stripe {} is not a positive multiple of the {block}-byte block", self.slow_stripe));
        }
        if self.fast_bytes == 0 || self.slow_bytes < self.slow_stripe {
            return bad(format!("fast {} bytes, slow {} bytes: each tier needs room", self.fast_bytes, self.slow_bytes));
        }
        Ok(())
    }
}
