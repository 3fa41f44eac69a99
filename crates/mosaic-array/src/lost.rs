//! Lost data: what a crash took with a member while a cache held code,
//! and what a member could not read while another was out of the stripe
//! (set aside by [`crate::correct`], as md's bad-block log keeps it).
//!
//! A cache volume (fpc, ppc, ppc+data) keeps the newest code of some rows
//! in memory; the drives hold older code there until it is destaged, and
//! the journal holds a resync mark for each such row.  After a crash the
//! journal's logical records bring back every acknowledged write, and
//! replay recomputes those rows' code from their data.  If a member is
//! missing at that replay, its data units in such rows cannot be rebuilt:
//! the code on the drives is stale, and reconstructing from it gives
//! wrong bytes.  The paper's caches assume non-volatile memory; here the
//! loss is named instead of hidden:
//!
//! ```text
//!   replay ── resync rows with a data unit on a missing member ──> LostUnit
//!      │        (not if a later code write or logical write covers it)
//!      ▼
//!   superblock.lost (logical ranges, before the journal is emptied)
//!      │
//!      ├── read overlapping a range ──> error (NBD: EIO), never wrong bytes
//!      ├── write covering whole blocks ──> those blocks known again: cleared
//!      └── status / info --json list them; older mosaic refuses the array
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use mosaic_core::{Geometry, Health, Level};

use crate::journal::{Entry, Records};
use crate::superblock::{lost_with, lost_without, LostRange};
use crate::{Array, ArrayError, LostUnit};

impl Array {
    /// A read of `offset..offset + len` must not touch lost data.
    pub(crate) fn check_not_lost(&self, offset: u64, len: u64) -> Result<(), ArrayError> {
        if !self.any_lost.load(Ordering::Acquire) {
            return Ok(());
        }
        match mosaic_format::lost::touched(&self.lost(), offset, len) {
            None => Ok(()),
            Some(r) => Err(ArrayError::Io(format!(
                "bytes {}..{} of array {} were lost: a member failed while a cache held their code (in a crash, or as a write-through cache volume stopped), or a member could not read them while another was out of their stripe; write them again to clear",
                r.offset,
                r.end(),
                self.superblock().array_uuid
            ))),
        }
    }

    /// Blocks of `offset..offset + len` written whole and durable are no
    /// longer lost (as md's bad-block log clears a sector once written):
    /// every code is linear byte by byte, so the bytes written are right
    /// in the code wherever the rest of the unit stays unknown.
    pub(crate) fn written_whole(&self, offset: u64, len: u64) -> Result<(), ArrayError> {
        if !self.any_lost.load(Ordering::Acquire) {
            return Ok(());
        }
        let block = self.geometry().block;
        let lost = self.lost();
        let left = lost_without(&lost, offset, offset.saturating_add(len), block);
        if left == lost {
            return Ok(());
        }
        self.flush()?;
        self.any_lost.store(!left.is_empty(), Ordering::Release);
        self.write_superblocks(|sb| sb.lost = left)
    }

    /// Add what a replay could not rebuild to the superblock (before the
    /// journal that told it is emptied).
    pub(crate) fn record_lost(&self, units: &[LostUnit]) -> Result<(), ArrayError> {
        if units.is_empty() {
            return Ok(());
        }
        let add: Vec<LostRange> = units.iter().map(|u| LostRange { offset: u.offset, len: u.len }).collect();
        let all = lost_with(&self.lost(), &add);
        self.any_lost.store(true, Ordering::Release);
        self.write_superblocks(|sb| sb.lost = all)
    }
}

/// The data units a replay cannot rebuild: those on members missing now,
/// in rows whose code a cache still held when the array stopped.  The
/// code on the drives is stale there (the cache's newer code died with
/// it), so reconstructing from it gives wrong bytes.  A row's code is
/// held from a resync mark until every code unit of it is written again;
/// a unit the replayed logical writes cover whole gets its bytes from
/// them.  A code column on a missing member loses nothing.
pub(crate) fn lost_units(geo: &Geometry, h: &Health, records: &Records) -> Vec<LostUnit> {
    // Stripe -> code bytes (column, range in the unit) written since its mark.
    let mut held: BTreeMap<u64, Vec<(usize, u64, u64)>> = BTreeMap::new();
    let mut logical = Vec::new();
    for e in records.iter().flat_map(|(_, es)| es) {
        match e {
            Entry::Resync { row } if *row < geo.stripes => {
                held.insert(*row, Vec::new());
            }
            Entry::Device { member, offset, data } => {
                let Some((stripe, col)) = code_unit_at(geo, *member, *offset) else { continue };
                if let Some(w) = held.get_mut(&stripe) {
                    let lo = offset - geo.offset_of(stripe, col);
                    w.push((col, lo, lo + data.len() as u64));
                    if (geo.k..geo.k + geo.m).all(|c| covers(w.iter().filter(|x| x.0 == c).map(|x| (x.1, x.2)), 0, geo.unit)) {
                        held.remove(&stripe);
                    }
                }
            }
            Entry::Logical { offset, data } => logical.push((*offset, *offset + data.len() as u64)),
            _ => {}
        }
    }
    held.keys().flat_map(|&stripe| units_out(geo, h, stripe)).filter(|u| !covers(logical.iter().copied(), u.offset, u.offset + u.len)).collect()
}

/// The data units of `stripe` on members not in service there.
pub(crate) fn units_out<'a>(geo: &'a Geometry, h: &'a Health, stripe: u64) -> impl Iterator<Item = LostUnit> + 'a {
    (0..geo.k).filter_map(move |col| {
        let member = geo.member_of(stripe, col);
        let offset = stripe * geo.stripe_data_bytes() + col as u64 * geo.unit;
        (!h.available(member, stripe)).then_some(LostUnit { stripe, member, offset, len: geo.unit })
    })
}

/// The (stripe, code column) whose unit holds member byte `offset`: one
/// unit per stripe on every member, except a CBRO check drive array's
/// members, which hold one per `w` stripes (raid0 by stripe number, see
/// [`Geometry::member_of`]).
fn code_unit_at(geo: &Geometry, member: usize, offset: u64) -> Option<(u64, usize)> {
    if member >= geo.members {
        return None;
    }
    let stripe = match geo.level {
        Level::Cbro { .. } if member < geo.k => return None,
        Level::Cbro { w, .. } => offset / geo.unit * w as u64 + ((member - geo.k) % w as usize) as u64,
        _ => offset / geo.unit,
    };
    let col = geo.column_of(stripe, member).filter(|&c| c >= geo.k)?;
    (stripe < geo.stripes).then_some((stripe, col))
}

/// Whether the ranges cover `lo..hi` whole.
fn covers(ranges: impl Iterator<Item = (u64, u64)>, lo: u64, hi: u64) -> bool {
    let mut rs: Vec<(u64, u64)> = ranges.filter(|r| r.1 > lo && r.0 < hi).collect();
    rs.sort_unstable();
    let mut at = lo;
    for (a, b) in rs {
        if a > at {
            return false;
        }
        at = at.max(b);
    }
    at >= hi
}

