//! Client I/O through the map, and the migration protocol.
//!
//! A [`MappedVolume`] serves reads and writes of whole logical units by
//! resolving each through the [`BlockMap`] under a per-extent lock, and
//! moves extents between placements:
//!
//! ```text
//!   migrate(L):  lock(L)                          client write(L) / read(L):
//!     A = map[L]                                    lock(L)   <- held while L moves
//!     (1) B = allocate            (memory only)     p = map[L]
//!     (2) copy A -> B             (Store)           in place at p (Member / Tier)
//!     (3) flush B                                   or out of place, like a move
//!     (4) commit L -> B           (one map frame)     (Zone / Unmapped), flush
//!     (5) free A                  (memory only)   unlock(L)
//!   unlock(L)
//! ```
//!
//! Client I/O to L waits while L moves, so a write lands before the copy
//! (and is copied) or after the remap (and goes to B): never lost; a read
//! never sees A after it is freed.  A crash at any step leaves the map
//! pointing at A (still owned, bytes intact: nothing is written to A) or,
//! from step (4) on, at B (flushed in step (3)); the allocator, rebuilt
//! from the map at open, then owns exactly one of them.  Writes to zoned
//! placements never overwrite: they take the same path as a move, and
//! [`MappedVolume::clean`] empties the allocator's victim zone by moves so
//! that [`MappedVolume::reclaim`] can reset it.
//!
//! A plan that fails part-way (the copy to B hits a failed member) aborts
//! its reservation and returns the error; the caller re-plans, e.g. into
//! another pool.  Nothing leaks and nothing is handed out twice.

use std::io;
use std::sync::Arc;

use mosaic_dev::Member;
use parking_lot::{Mutex, MutexGuard};
use thiserror::Error;

use crate::alloc::{AllocError, Allocator, Pool, Reservation};
use crate::map::{BlockMap, MapError, Placement, Update};

/// The data path a volume reads and writes placements through.
pub trait Store: Send + Sync {
    /// Read `buf.len()` bytes at `p`.
    fn read(&self, p: &Placement, buf: &mut [u8]) -> io::Result<()>;
    /// Write `data` at `p`.
    fn write(&self, p: &Placement, data: &[u8]) -> io::Result<()>;
    /// Make completed writes to the device holding `p` durable (only that
    /// device, so a failed member never fails a flush meant for another).
    fn flush(&self, p: &Placement) -> io::Result<()>;
    /// Reset a zone before the allocator reuses it (plain members: nothing).
    fn reset_zone(&self, _member: u32, _zone: u32) -> io::Result<()> {
        Ok(())
    }
}

/// A [`Store`] over plain members: `Member` placements on `members`,
/// `Tier` placements on `tiers`, zone `z` of member `m` at byte
/// `z * zone_bytes` of `members[m]`.
pub struct MemberStore {
    pub members: Vec<Arc<dyn Member>>,
    pub tiers: Vec<Arc<dyn Member>>,
    pub zone_bytes: u64,
}

impl MemberStore {
    /// The device and byte offset of `p`.
    fn locate(&self, p: &Placement) -> io::Result<(&dyn Member, u64)> {
        let bad = || io::Error::new(io::ErrorKind::InvalidInput, format!("no device for {p:?}"));
        let (dev, off) = match *p {
            Placement::Member { member, offset } => (self.members.get(member as usize), Some(offset)),
            Placement::Tier { tier, offset } => (self.tiers.get(tier as usize), Some(offset)),
            Placement::Zone { member, zone, offset } => {
                (self.members.get(member as usize), (zone as u64).checked_mul(self.zone_bytes).and_then(|z| z.checked_add(offset)))
            }
            Placement::Unmapped => (None, None),
        };
        Ok((&**dev.ok_or_else(bad)?, off.ok_or_else(bad)?))
    }
}

impl Store for MemberStore {
    fn read(&self, p: &Placement, buf: &mut [u8]) -> io::Result<()> {
        let (d, off) = self.locate(p)?;
        d.read_at(buf, off)
    }
    fn write(&self, p: &Placement, data: &[u8]) -> io::Result<()> {
        let (d, off) = self.locate(p)?;
        d.write_at(data, off)
    }
    fn flush(&self, p: &Placement) -> io::Result<()> {
        self.locate(p)?.0.flush()
    }
}

/// What a volume operation can fail with.
#[derive(Debug, Error)]
pub enum VolumeError {
    #[error(transparent)]
    Map(#[from] MapError),
    #[error("allocator: {0}")]
    Alloc(#[from] AllocError),
    #[error("data I/O: {0}")]
    Io(#[from] io::Error),
    #[error("no free space for a {0}-byte extent")]
    NoSpace(u64),
    #[error("buffer of {0} bytes is not one {1}-byte unit")]
    Length(usize, u64),
}

/// Per-extent lock stripes: extent L is guarded by stripe `L % LOCKS`.
const LOCKS: usize = 64;

/// Counters, for tests and `info`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VolumeStats {
    pub migrations: u64,
    pub aborted: u64,
}

/// Logical units mapped onto placements, with moves.
pub struct MappedVolume {
    map: BlockMap,
    alloc: Mutex<Box<dyn Allocator>>,
    store: Arc<dyn Store>,
    locks: Vec<Mutex<()>>,
    unit: u64,
    stats: Mutex<VolumeStats>,
}

impl MappedVolume {
    /// A volume over an opened (or formatted) map; the allocator is
    /// rebuilt from it, so it owns exactly what the map references.
    pub fn open(map: BlockMap, mut alloc: Box<dyn Allocator>, store: Arc<dyn Store>) -> Result<MappedVolume, VolumeError> {
        let unit = map.geometry().unit;
        alloc.rebuild(&map.snapshot(), unit)?;
        let locks = (0..LOCKS).map(|_| Mutex::new(())).collect();
        Ok(MappedVolume { map, alloc: Mutex::new(alloc), store, locks, unit, stats: Mutex::default() })
    }

    fn lock(&self, logical: u64) -> MutexGuard<'_, ()> {
        self.locks[(logical % LOCKS as u64) as usize].lock()
    }

    fn check_len(&self, len: usize) -> Result<(), VolumeError> {
        if len as u64 != self.unit {
            return Err(VolumeError::Length(len, self.unit));
        }
        Ok(())
    }

    /// Read logical unit `logical` (zeros when unmapped).
    pub fn read(&self, logical: u64, buf: &mut [u8]) -> Result<(), VolumeError> {
        self.check_len(buf.len())?;
        let _g = self.lock(logical);
        match self.map.get(logical) {
            Placement::Unmapped => buf.fill(0),
            p => self.store.read(&p, buf)?,
        }
        Ok(())
    }

    /// Write logical unit `logical`; durable when this returns.
    pub fn write(&self, logical: u64, data: &[u8]) -> Result<(), VolumeError> {
        self.check_len(data.len())?;
        let _g = self.lock(logical);
        match self.map.get(logical) {
            p @ (Placement::Member { .. } | Placement::Tier { .. }) => {
                self.store.write(&p, data)?;
                Ok(self.store.flush(&p)?)
            }
            old => self.relocate(logical, old, data, None),
        }
    }

    /// Move `logical` to new space (in `to`, or wherever the allocator
    /// chooses).  `Ok(None)` when it is unmapped; else (from, to).
    pub fn migrate(&self, logical: u64, to: Option<Pool>) -> Result<Option<(Placement, Placement)>, VolumeError> {
        let _g = self.lock(logical);
        self.move_locked(logical, to)
    }

    /// [`Self::migrate`] with `logical`'s lock held.
    fn move_locked(&self, logical: u64, to: Option<Pool>) -> Result<Option<(Placement, Placement)>, VolumeError> {
        let from = self.map.get(logical);
        if from == Placement::Unmapped {
            return Ok(None);
        }
        let mut buf = vec![0u8; self.unit as usize];
        self.store.read(&from, &mut buf)?;
        self.relocate(logical, from, &buf, to)?;
        self.stats.lock().migrations += 1;
        Ok(Some((from, self.map.get(logical))))
    }

    /// Drop `logical`'s mapping and free its space.
    pub fn trim(&self, logical: u64) -> Result<(), VolumeError> {
        let _g = self.lock(logical);
        let old = self.map.get(logical);
        if old != Placement::Unmapped {
            self.map.commit(&[Update::Unmap { logical }])?;
            self.alloc.lock().free(old, self.unit)?;
        }
        Ok(())
    }

    /// Steps (1)-(5): `data` to new space, remap, free `old`.  The caller
    /// holds `logical`'s lock.  A failed data write or a map commit that
    /// wrote nothing aborts the reservation (the plan can be made again);
    /// a map commit that failed in its device I/O may or may not have
    /// landed, so both places stay owned until the map is reopened.
    fn relocate(&self, logical: u64, old: Placement, data: &[u8], to: Option<Pool>) -> Result<(), VolumeError> {
        let r = self.reserve(to)?;
        if let Err(e) = self.store.write(&r.placement(), data).and_then(|_| self.store.flush(&r.placement())) {
            return self.abandon(r, e.into());
        }
        let mut ups = vec![Update::Map { logical, placement: r.placement() }];
        ups.extend(self.alloc.lock().commit_records(&r));
        match self.map.commit(&ups) {
            Ok(()) => {
                let mut a = self.alloc.lock();
                a.commit(r)?;
                if old != Placement::Unmapped {
                    a.free(old, self.unit)?;
                }
                Ok(())
            }
            Err(e @ MapError::Io(_)) => {
                self.alloc.lock().commit(r)?;
                Err(e.into())
            }
            Err(e) => self.abandon(r, e.into()),
        }
    }

    /// Step (1): a reservation in `to`, or anywhere.
    fn reserve(&self, to: Option<Pool>) -> Result<Reservation, VolumeError> {
        let mut a = self.alloc.lock();
        let r = match to {
            Some(pool) => a.allocate_in(self.unit, pool),
            None => a.allocate(self.unit),
        };
        r.ok_or(VolumeError::NoSpace(self.unit))
    }

    /// Abort `r` and fail with `e`.
    fn abandon(&self, r: Reservation, e: VolumeError) -> Result<(), VolumeError> {
        self.stats.lock().aborted += 1;
        self.alloc.lock().abort(r)?;
        Err(e)
    }

    /// Reset zones that hold only dead space: in the allocator, on the
    /// devices, then durably in the map, all before any allocation can
    /// reuse them (the allocator stays locked).  Returns how many.
    pub fn reclaim(&self) -> Result<usize, VolumeError> {
        let mut a = self.alloc.lock();
        let records = a.reclaim();
        for u in &records {
            if let Update::ZoneReset { member, zone } = *u {
                self.store.reset_zone(member, zone)?;
            }
        }
        if !records.is_empty() {
            self.map.commit(&records)?;
        }
        Ok(records.len())
    }

    /// One cleaning pass: move every extent out of the allocator's victim
    /// zone (through the migration protocol), then [`Self::reclaim`].
    /// Returns the extents moved.
    pub fn clean(&self) -> Result<usize, VolumeError> {
        let Some((vm, vz)) = self.alloc.lock().victim_zone() else { return Ok(0) };
        let in_victim = |p: &Placement| matches!(*p, Placement::Zone { member, zone, .. } if (member, zone) == (vm, vz));
        let victims: Vec<u64> = self.map.snapshot().extents.into_iter().filter(|(_, p)| in_victim(p)).map(|(l, _)| l).collect();
        let mut moved = 0;
        for l in victims {
            // Skip extents a client moved meanwhile.
            let _g = self.lock(l);
            if in_victim(&self.map.get(l)) {
                self.move_locked(l, None)?;
                moved += 1;
            }
        }
        self.reclaim()?;
        Ok(moved)
    }

    /// The map (for checks and checkpoints).
    pub fn map(&self) -> &BlockMap {
        &self.map
    }

    /// Bytes of the logical unit.
    pub fn unit(&self) -> u64 {
        self.unit
    }

    /// (free, reclaimable, capacity) bytes of the allocator.
    pub fn space(&self) -> (u64, u64, u64) {
        let a = self.alloc.lock();
        (a.free_bytes(), a.reclaimable_bytes(), a.capacity())
    }

    /// Moves done and plans aborted so far.
    pub fn stats(&self) -> VolumeStats {
        *self.stats.lock()
    }
}
