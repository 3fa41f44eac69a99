//! The policy's configuration and the array's geometry, with validation.
//!
//! Everything a caller can get wrong is checked here and named in the
//! error, so the layout and the planners below can rely on it (no
//! division by zero, no offset overflowing a program's `u32` buffer
//! offsets).

#![allow(clippy::manual_is_multiple_of)] // rust-version 1.80

use mosaic_core::Geometry;

use crate::RemapError;

/// Largest staging buffer of one move program: a program's buffer
/// offsets are `u32`, and a batch holding more than this in memory at
/// once gains nothing.
pub const MAX_STAGING: u64 = 1 << 30;

/// Most members a map record can name sensibly (records carry a `u32`;
/// an array of more drives than this is not one anyone builds).
pub const MAX_MEMBERS: usize = 1 << 16;

/// How the remapped array places and moves units.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RemapConfig {
    /// Bytes of one unit: what a move relocates; it divides the inner
    /// array's stripe unit (power of two, >= 4096; 64 KiB, the default
    /// stripe unit).
    pub unit: u64,
    /// Logical block: requests are multiples of it, and the label and
    /// every map write are whole blocks (power of two, >= 512, divides
    /// the unit; 4096).
    pub block: u64,
    /// Share of each column's slots kept spare, the room moves land in
    /// (in (0, 0.5]; 0.125).  At least one slot per member is spare.
    pub spare_share: f64,
    /// Bytes of the map region; 0 = sized from the geometry (see
    /// `layout.rs`).  A multiple of the unit; rounded up to whole
    /// periods of stripes.
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

/// The inner array the remapped array sits on: its fixed geometry, with
/// `stripes` the stripes the remapped array may use from its start (the
/// caller keeps any label space before them, whole periods of stripes,
/// so the data placement of every stripe is the inner array's own).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RemapGeometry {
    /// The inner array's geometry.
    pub inner: Geometry,
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
    /// Over `inner`.
    pub fn new(inner: Geometry) -> RemapGeometry {
        RemapGeometry { inner }
    }

    /// Check the geometry on its own (whether it holds data at all is
    /// the layout's question).
    pub fn validate(&self) -> Result<(), RemapError> {
        let bad = |m: String| Err(RemapError::Geometry(m));
        let g = &self.inner;
        if g.members < 2 || g.members > MAX_MEMBERS {
            return bad(format!("{} members: a remapped array needs 2 to {MAX_MEMBERS}", g.members));
        }
        if g.is_mirror() {
            return bad("raid1 keeps every unit on every drive: nothing to re-place".into());
        }
        if g.stripes == 0 || g.k == 0 {
            return bad("an inner array of no stripes".into());
        }
        let p = self.period();
        let repeats = (0..2 * p).all(|s| (0..g.k).all(|c| g.member_of(s, c) == g.member_of(s % p, c)));
        if !repeats {
            return bad(format!("{}: the data placement does not repeat every {p} stripes", g.level));
        }
        Ok(())
    }

    /// Stripes after which the inner data placement repeats: the members
    /// for a rotating layout, else 1.  Label space before the remapped
    /// array must be a multiple of it.
    pub fn period(&self) -> u64 {
        let g = &self.inner;
        let rotates = (0..g.k).any(|c| g.member_of(1, c) != g.member_of(0, c));
        if rotates {
            g.members as u64
        } else {
            1
        }
    }
}
