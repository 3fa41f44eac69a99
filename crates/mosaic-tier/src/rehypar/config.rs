//! Tier configuration and its validation.

// `%` rather than `is_multiple_of`: the workspace's rust-version is 1.80.
#![allow(clippy::manual_is_multiple_of)]

use super::TierError;

/// One data section: its extent size and capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SectionConfig {
    /// Extent size in bytes (s = extent/block must be 2^n, n > 1).
    pub extent_bytes: u64,
    /// Section capacity in bytes (a multiple of max(extent, erase block)).
    pub capacity_bytes: u64,
}

/// Configuration of the fast tier's allocation policy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TierConfig {
    /// Block size in bytes (power of two, >= 512).
    pub block_bytes: u64,
    /// Flash erase-block size in bytes; extents never straddle one.
    pub erase_block_bytes: u64,
    /// Data sections, laid out in this order from fast block 0.
    pub sections: Vec<SectionConfig>,
    /// Threshold V in blocks (power of two, >= 2).
    pub threshold_v: u64,
    /// Reuse window: an open extent is sealed this long after it opened.
    pub expiry_ns: u64,
}

/// Default block size: 4 KiB.
pub const DEFAULT_BLOCK_BYTES: u64 = 4096;
/// Default erase block: 256 KiB (64 KiB extents tile it, 256 KiB equal it).
pub const DEFAULT_ERASE_BLOCK_BYTES: u64 = 256 << 10;
/// Default extent sizes of the two sections (the paper's 64 KB and 256 KB).
pub const DEFAULT_EXTENT_BYTES: [u64; 2] = [64 << 10, 256 << 10];
/// Default threshold V = 8 blocks (the paper's smaller V).
pub const DEFAULT_THRESHOLD_V: u64 = 8;
/// Default reuse window: 30 s (Linux dirty_expire_centisecs).
pub const DEFAULT_EXPIRY_NS: u64 = 30_000_000_000;

impl TierConfig {
    /// Defaults with `capacity_bytes` split evenly over the two default
    /// sections (each rounded down to whole erase blocks/extents).
    pub fn with_capacity(capacity_bytes: u64) -> Self {
        let unit = DEFAULT_ERASE_BLOCK_BYTES.max(DEFAULT_EXTENT_BYTES[1]);
        let per = capacity_bytes / 2 / unit * unit;
        let sections = DEFAULT_EXTENT_BYTES
            .iter()
            .map(|&e| SectionConfig {
                extent_bytes: e,
                capacity_bytes: per,
            })
            .collect();
        Self {
            block_bytes: DEFAULT_BLOCK_BYTES,
            erase_block_bytes: DEFAULT_ERASE_BLOCK_BYTES,
            sections,
            threshold_v: DEFAULT_THRESHOLD_V,
            expiry_ns: DEFAULT_EXPIRY_NS,
        }
    }

    /// Check every field; the first problem found is returned.
    pub fn validate(&self) -> Result<(), TierError> {
        let bad = |m: String| Err(TierError::Config(m));
        if !self.block_bytes.is_power_of_two() || self.block_bytes < 512 {
            return bad(format!(
                "block_bytes {} must be a power of two >= 512",
                self.block_bytes
            ));
        }
        let eb = self.erase_block_bytes;
        if eb == 0 || eb % self.block_bytes != 0 {
            return bad(format!(
                "erase_block_bytes {eb} must be a positive multiple of the block"
            ));
        }
        if !self.threshold_v.is_power_of_two() || self.threshold_v < 2 {
            return bad(format!(
                "threshold_v {} must be a power of two >= 2",
                self.threshold_v
            ));
        }
        if self.expiry_ns == 0 {
            return bad("expiry_ns must be > 0".into());
        }
        if self.sections.is_empty() {
            return bad("at least one section is needed".into());
        }
        for (i, s) in self.sections.iter().enumerate() {
            self.validate_section(i, s)?;
        }
        self.validate_totals()
    }

    fn validate_section(&self, i: usize, s: &SectionConfig) -> Result<(), TierError> {
        let bad = |m: String| Err(TierError::Config(format!("section {i}: {m}")));
        let e = s.extent_bytes;
        if e == 0 || e % self.block_bytes != 0 {
            return bad(format!("extent_bytes {e} is not a multiple of the block"));
        }
        let blocks = e / self.block_bytes;
        if !blocks.is_power_of_two() || blocks < 4 {
            return bad(format!("extent of {blocks} blocks: need 2^n blocks, n > 1"));
        }
        let eb = self.erase_block_bytes;
        if e % eb != 0 && eb % e != 0 {
            return bad(format!(
                "extent {e} and erase block {eb}: one must divide the other"
            ));
        }
        let unit = e.max(eb);
        if s.capacity_bytes == 0 || s.capacity_bytes % unit != 0 {
            return bad(format!(
                "capacity {} must be a positive multiple of {unit}",
                s.capacity_bytes
            ));
        }
        if self.sections[..i].iter().any(|o| o.extent_bytes == e) {
            return bad(format!("extent size {e} used by two sections"));
        }
        Ok(())
    }

    fn validate_totals(&self) -> Result<(), TierError> {
        let mut extents: u64 = 0;
        let mut bytes: u64 = 0;
        for s in &self.sections {
            extents = extents.saturating_add(s.capacity_bytes / s.extent_bytes);
            bytes = bytes
                .checked_add(s.capacity_bytes)
                .ok_or_else(|| TierError::Config("capacity overflows u64".into()))?;
        }
        if extents > u32::MAX as u64 {
            return Err(TierError::Config(format!(
                "{extents} extents: at most 2^32 - 1"
            )));
        }
        Ok(())
    }
}
