//! The policy's configuration and the array's geometry, with validation.
//!
//! Everything a caller can get wrong is checked here and named in the
//! error, so the layout and the planners below can rely on it (no
//! division by zero, no offset overflowing a program's `u32` buffer
//! offsets).

#![allow(clippy::manual_is_multiple_of)] // rust-version 1.80

use crate::RemapError;

/// Largest staging buffer of one move program: a program's buffer
/// offsets are `u32`, and a batch holding more than this in memory at
/// once gains nothing.
pub const MAX_STAGING: u64 = 1 << 30;

/// Most members a map record can name sensibly (records carry a `u32`;
/// an array of more drives than this is not a raid0 anyone builds).
pub const MAX_MEMBERS: usize = 1 << 16;

/// How the remapped array places and moves units.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RemapConfig {
    /// Bytes of one unit: the stripe unit of the static raid0 layout and
    /// what a move relocates (power of two, >= 4096; 64 KiB).
    pub unit: u64,
    /// Logical block: requests are multiples of it, and the label and
    /// every map write are whole blocks (power of two, >= 512, divides
    /// the unit; 4096).
    pub block: u64,
    /// Share of each member's slots kept spare, the room moves land in
    /// (in (0, 0.5]; 0.125).  At least one slot per member is spare.
    pub spare_share: f64,
    /// Bytes of every member's map region; 0 = sized from the geometry
    /// (see `layout.rs`).  A multiple of the unit.
    pub map_bytes: u64,
    /// Moves per migration program (16).
    pub batch_units: u32,
    /// Idle time before migration starts (100 ms).
    pub idle_after_ns: u64,
    /// Migration budget in bytes per second; 0 = unlimited.
    pub budget_bytes_per_s: u64,
}

impl Default for RemapConfig {
    fn default() -> Self {
        RemapConfig { unit: 64 << 10, block: 4096, spare_share: 0.125, map_bytes: 0, batch_units: 16, idle_after_ns: 100_000_000, budget_bytes_per_s: 0 }
    }
}

/// The members of the array: how many, and the usable bytes of each
/// (the smallest member's, as for any raid0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RemapGeometry {
    /// Member (drive) count, >= 2.
    pub members: usize,
    /// Usable bytes of each member.
    pub member_bytes: u64,
}

impl RemapConfig {
    /// Check every field; the first problem found is named.
    pub fn validate(&self) -> Result<(), RemapError> {
        let bad = |m: String| Err(RemapError::Config(m));
        if !self.unit.is_power_of_two() || self.unit < 4096 {
            return bad(format!("unit {} must be a power of two >= 4096", self.unit));
        }
        if !self.block.is_power_of_two() || self.block < 512 || self.unit % self.block != 0 {
            return bad(format!("block {} must be a power of two >= 512 dividing the {}-byte unit", self.block, self.unit));
        }
        if !(self.spare_share > 0.0 && self.spare_share <= 0.5) {
            return bad(format!("spare_share {} must be in (0, 0.5]", self.spare_share));
        }
        if self.batch_units == 0 {
            return bad("batch_units must be >= 1".into());
        }
        if self.batch_units as u64 * self.unit > MAX_STAGING {
            return bad(format!("batch_units {} x unit {} exceeds the {MAX_STAGING}-byte staging limit of one move", self.batch_units, self.unit));
        }
        if self.map_bytes % self.unit != 0 {
            return bad(format!("map_bytes {} is not a multiple of the {}-byte unit", self.map_bytes, self.unit));
        }
        Ok(())
    }
}

impl RemapGeometry {
    /// Check the geometry on its own (whether it holds data at all is
    /// the layout's question).
    pub fn validate(&self) -> Result<(), RemapError> {
        let bad = |m: String| Err(RemapError::Geometry(m));
        if self.members < 2 || self.members > MAX_MEMBERS {
            return bad(format!("{} members: a remapped array needs 2 to {MAX_MEMBERS}", self.members));
        }
        if self.member_bytes == 0 {
            return bad("members of 0 bytes".into());
        }
        Ok(())
    }
}
