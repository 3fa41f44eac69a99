//! Where everything lives: the map region, the unit slots of every
//! column (drive), the spare room and the logical capacity.
//!
//! The remapped array sits on an inner fixed array (raid0, raid4/5/6,
//! rs; `mosaic_core::Geometry`), whose logical space is the policy's one
//! member.  The inner array keeps its own parity, journal, degraded reads
//! and rebuild; this layout only decides which inner data units a
//! logical unit occupies, and knows which drive each inner unit is on.
//!
//! ```text
//!   inner logical space (the executor's member 0), in inner stripes:
//!   0             map_stripes                      + data_stripes     + spare_stripes
//!   [ map region ][ home units, in the inner order   ][ spare units: where moves land ]
//!    label | ckpt 0 | ckpt 1 | delta log
//!
//!   home of logical unit l: inner byte base + l x unit  (the inner array's own
//!   striping: a fresh remapped array is the plain inner array, shifted)
//!
//!   raid5 over 4 drives, period P = 4 stripes (parity p rotates):
//!                drive 0   drive 1   drive 2   drive 3
//!   stripe 0     d0        d1        d2        p          slot j of a column =
//!   stripe 1     d4        d5        p         d3         its j-th data unit,
//!   stripe 2     d8        p         d6        d7         stripe by stripe
//!   stripe 3     p         d9        d10       d11        (x sub-units when the
//!                                                          remap unit < stripe unit)
//! ```
//!
//! * A **column** is a drive that holds data (raid4's parity drive and
//!   CBRO's check drives hold none).  Column `c`'s data stripes repeat
//!   with the layout's period `P` (the members for rotating layouts, 1
//!   otherwise): `table[c]` lists them within one period.
//! * The **remap unit** divides the stripe unit: `sub` units per stripe
//!   unit, all on the stripe unit's drive.
//! * **Spare room** is the last `spare_stripes` (at least one period,
//!   `spare_share` of the slot stripes): every column gets the same
//!   number of spare slots, `slots - data_slots`.
//! * The **map region** is whole periods of stripes at the start: a
//!   label block, two checkpoint slots of a record (32 bytes) for every
//!   unit the slot stripes could hold, and the delta log
//!   (`clamp(C / 4, 64 KiB, 16 MiB)`, as the tier's).  It lives on the
//!   inner array, so its parity protects it like any data.

#![allow(clippy::manual_is_multiple_of)] // rust-version 1.80

use mosaic_core::Geometry;
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
    /// The drive each column is (inner member index), ascending.
    pub columns: Vec<usize>,
    /// Bytes of one remap unit (one slot).
    pub unit: u64,
    /// Logical block bytes.
    pub block: u64,
    /// The inner array's stripe unit.
    pub stripe_unit: u64,
    /// Data bytes of one inner stripe.
    pub stripe_data: u64,
    /// Stripes after which the data placement repeats.
    pub period: u64,
    /// Per column, its data stripes within one period.
    pub table: Vec<Vec<u64>>,
    /// Stripes of the map region (whole periods).
    pub map_stripes: u64,
    /// Bytes of the map region (slot area starts here).
    pub map_bytes: u64,
    /// Bytes of each checkpoint slot.
    pub ckpt_bytes: u64,
    /// Bytes of the delta log.
    pub log_bytes: u64,
    /// Stripes holding home units.
    pub data_stripes: u64,
    /// Stripes of spare units.
    pub spare_stripes: u64,
    /// Unit slots per column S.
    pub slots: u64,
    /// Spare slots per column (S - D).
    pub spare: u64,
    /// Home slots per column D.
    pub data_slots: u64,
    /// Logical units.
    pub capacity_units: u64,
    #[serde(skip)]
    inner: Geometry,
}

impl RemapLayout {
    /// Derive the layout; every problem is named.
    pub fn new(cfg: &RemapConfig, geo: &RemapGeometry) -> Result<RemapLayout, RemapError> {
        cfg.validate()?;
        geo.validate()?;
        let inner = geo.inner.clone();
        if inner.unit % cfg.unit != 0 {
            return Err(RemapError::Config(format!("unit {} must divide the inner stripe unit {}", cfg.unit, inner.unit)));
        }
        let period = geo.period();
        let (columns, table) = columns(&inner, period)?;
        let stripe_data = inner.stripe_data_bytes();
        let sub = inner.unit / cfg.unit;
        let records = inner.stripes.checked_mul(inner.k as u64 * sub).ok_or_else(|| RemapError::Geometry("unit count overflows".into()))?;
        let ckpt_bytes = round_up(checkpoint_len(ckpt_payload(records)?) as u64, cfg.block);
        let want = map_region(cfg, ckpt_bytes)?;
        let map_stripes = round_up(want.div_ceil(stripe_data), period);
        let map_bytes = map_stripes * stripe_data;
        let log_bytes = (map_bytes - cfg.block - 2 * ckpt_bytes) / cfg.block * cfg.block;
        let slot_stripes = inner.stripes.saturating_sub(map_stripes) / period * period;
        let spare_stripes = round_up(((slot_stripes as f64 * cfg.spare_share).ceil() as u64).max(1), period);
        if slot_stripes <= spare_stripes {
            let m = format!("the inner array's {} stripes hold {slot_stripes} after the {map_stripes}-stripe map region: none for data once {spare_stripes} are kept spare", inner.stripes);
            return Err(RemapError::Geometry(m));
        }
        let data_stripes = slot_stripes - spare_stripes;
        let per_period = table[0].len() as u64 * sub;
        let (slots, data_slots) = (slot_stripes / period * per_period, data_stripes / period * per_period);
        let capacity_units = data_stripes * inner.k as u64 * sub;
        Ok(RemapLayout {
            columns,
            unit: cfg.unit,
            block: cfg.block,
            stripe_unit: inner.unit,
            stripe_data,
            period,
            table,
            map_stripes,
            map_bytes,
            ckpt_bytes,
            log_bytes,
            data_stripes,
            spare_stripes,
            slots,
            spare: slots - data_slots,
            data_slots,
            capacity_units,
            inner,
        })
    }

    /// Columns (drives holding data).
    pub fn ncols(&self) -> usize {
        self.columns.len()
    }

    /// The column of inner drive `drive`, if it holds data.
    pub fn column_of_drive(&self, drive: usize) -> Option<usize> {
        self.columns.binary_search(&drive).ok()
    }

    /// The ledger's positions (the map region starts at 0).
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

    /// Bytes of the inner space the layout uses (map, homes, spares).
    pub fn used_bytes(&self) -> u64 {
        (self.map_stripes + self.data_stripes + self.spare_stripes) * self.stripe_data
    }

    fn sub(&self) -> u64 {
        self.stripe_unit / self.unit
    }

    /// Inner byte offset of slot `j` of column `c`.
    pub fn slot_offset(&self, c: usize, j: u64) -> u64 {
        let (g, i) = (j / self.sub(), j % self.sub());
        let tab = &self.table[c];
        let per = tab.len() as u64;
        let s = self.map_stripes + g / per * self.period + tab[(g % per) as usize];
        let col = self.inner.column_of(s, self.columns[c]).unwrap_or(0) as u64;
        s * self.stripe_data + col * self.stripe_unit + i * self.unit
    }

    /// The slot (column, index) starting at inner byte `offset`, if it is one.
    pub fn slot_at(&self, offset: u64) -> Option<(usize, u64)> {
        let rel = offset.checked_sub(self.map_bytes)?;
        if rel % self.unit != 0 || offset >= self.used_bytes() {
            return None;
        }
        let (s, in_stripe) = (offset / self.stripe_data, offset % self.stripe_data);
        let col = (in_stripe / self.stripe_unit) as usize;
        let i = in_stripe % self.stripe_unit / self.unit;
        let c = self.column_of_drive(self.inner.member_of(s, col))?;
        let (per, t) = ((s - self.map_stripes) / self.period, (s - self.map_stripes) % self.period);
        let pos = self.table[c].iter().position(|&x| x == t)? as u64;
        Some((c, (per * self.table[c].len() as u64 + pos) * self.sub() + i))
    }

    /// The home of unit `l`: (column, slot).
    pub fn home(&self, l: u64) -> (usize, u64) {
        self.slot_at(self.map_bytes + l * self.unit).expect("a unit inside the capacity has a home slot")
    }

    /// The unit whose home is slot `j` of column `c`, if it is a home slot.
    pub fn home_unit(&self, c: usize, j: u64) -> Option<u64> {
        (j < self.data_slots).then(|| (self.slot_offset(c, j) - self.map_bytes) / self.unit)
    }
}

/// The drives holding data, and per drive its data stripes in a period.
fn columns(inner: &Geometry, period: u64) -> Result<(Vec<usize>, Vec<Vec<u64>>), RemapError> {
    let mut cols: Vec<usize> = (0..period).flat_map(|s| (0..inner.k).map(move |c| inner.member_of(s, c))).collect();
    cols.sort_unstable();
    cols.dedup();
    if cols.len() < 2 {
        return Err(RemapError::Geometry(format!("{} keeps its data on {} drive: nothing to re-place", inner.level, cols.len())));
    }
    let table: Vec<Vec<u64>> = cols.iter().map(|&d| (0..period).filter(|&s| inner.column_of(s, d).is_some_and(|c| c < inner.k)).collect()).collect();
    if table.iter().any(|t| t.len() != table[0].len()) {
        return Err(RemapError::Geometry(format!("{}: drives hold different shares of the data", inner.level)));
    }
    Ok((cols, table))
}

/// Payload of a checkpoint holding `records` records.
fn ckpt_payload(records: u64) -> Result<usize, RemapError> {
    let p = records.checked_mul(RECORD).and_then(|b| b.checked_add(8));
    p.filter(|&b| b <= (usize::MAX / 2) as u64).map(|b| b as usize).ok_or_else(|| RemapError::Geometry("map of the whole array overflows".into()))
}

/// Bytes the map region needs: the configured size (checked), or sized.
fn map_region(cfg: &RemapConfig, ckpt_bytes: u64) -> Result<u64, RemapError> {
    let fixed = 2 * cfg.block + 2 * ckpt_bytes; // label + checkpoints + one log block
    if cfg.map_bytes == 0 {
        let log = (ckpt_bytes / 4).clamp(LOG_MIN, LOG_MAX);
        return Ok(cfg.block + 2 * ckpt_bytes + log);
    }
    if cfg.map_bytes < fixed {
        return Err(RemapError::Config(format!("map_bytes {} below the {fixed} a label, two checkpoints of a full map and one log block need", cfg.map_bytes)));
    }
    Ok(cfg.map_bytes)
}

fn round_up(v: u64, unit: u64) -> u64 {
    v.div_ceil(unit) * unit
}
