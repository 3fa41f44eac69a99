//! Allocators of placement space: an interface and two kinds.
//!
//! Allocation is two-phase, like a plan: [`Allocator::allocate`] hands out
//! a [`Reservation`] that lives in memory only; the caller writes its data
//! there, makes the map reference it durably (a [`crate::map::BlockMap`]
//! commit that carries [`Allocator::commit_records`]), and then calls
//! [`Allocator::commit`].  A plan that fails part-way (a member failed and
//! the request is re-planned) calls [`Allocator::abort`] and the space is
//! free again.  A `Reservation` is not `Clone`, so it is committed or
//! aborted exactly once.
//!
//! Nothing about reservations is ever persisted: after a crash the state is
//! rebuilt from the map ([`Allocator::rebuild`]: allocated = what the map
//! references), so it cannot disagree with the map; space that was
//! reserved and written but not yet mapped is simply free again.  Two map
//! entries that overlap are reported ([`AllocError::Overlap`]): space is
//! never doubly owned silently.
//!
//! The one piece of allocator state that is logged is a zone's write
//! pointer (`ZoneWp` with each remap into the zone, `ZoneReset` when it is
//! reclaimed), since dead space above a zone's last live extent cannot be
//! read off the map.  The extent allocator finds a double free when it
//! overlaps free space; the zone allocator tracks every owned extent, so
//! it refuses any free of space it does not own.

use std::collections::{BTreeMap, HashSet};

use thiserror::Error;

use crate::map::{MapState, Placement, Update};

/// Space handed out but not yet committed or aborted.
#[must_use = "a reservation must be committed or aborted"]
#[derive(Debug, PartialEq, Eq)]
pub struct Reservation {
    placement: Placement,
    len: u64,
    id: u64,
}

impl Reservation {
    /// Where the reserved space is.
    pub fn placement(&self) -> Placement {
        self.placement
    }
    /// Bytes reserved.
    pub fn bytes(&self) -> u64 {
        self.len
    }
}

/// What an allocator refuses.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum AllocError {
    #[error("{0:?} is not a reservation this allocator holds")]
    UnknownReservation(Placement),
    #[error("{0:?}+{1} is outside the allocator's space")]
    OutOfRange(Placement, u64),
    #[error("{0:?}+{1} overlaps space that is already free or owned")]
    Overlap(Placement, u64),
    #[error("zone {0}/{1} still holds live data or reservations")]
    ZoneBusy(u32, u32),
}

/// The allocator interface the map's users plan with.
pub trait Allocator: Send {
    /// Reserve `len` bytes somewhere, or `None` when no space is left.
    fn allocate(&mut self, len: u64) -> Option<Reservation>;
    /// Reserve `len` bytes in `pool` only (a zone allocator: in the zones
    /// of that member), e.g. to promote an extent to the fast tier.
    fn allocate_in(&mut self, len: u64, pool: Pool) -> Option<Reservation>;
    /// Records to commit to the map together with the remap to `r`.
    fn commit_records(&self, _r: &Reservation) -> Vec<Update> {
        Vec::new()
    }
    /// The map now references `r` durably: the space is owned.
    fn commit(&mut self, r: Reservation) -> Result<(), AllocError>;
    /// Give `r` back unused.
    fn abort(&mut self, r: Reservation) -> Result<(), AllocError>;
    /// `len` bytes at `p`, which the map no longer references, are free.
    fn free(&mut self, p: Placement, len: u64) -> Result<(), AllocError>;
    /// Forget everything and own exactly what `map` references, each
    /// extent `unit` bytes long.
    fn rebuild(&mut self, map: &MapState, unit: u64) -> Result<(), AllocError>;
    /// Give back space only a reclaim step frees (zones holding nothing
    /// live are reset); returns the records to commit to the map before
    /// the space is used again.
    fn reclaim(&mut self) -> Vec<Update> {
        Vec::new()
    }
    /// The zone a cleaner should empty next (greedy: the most dead bytes,
    /// not the one being appended to); `None` for allocators without zones.
    fn victim_zone(&self) -> Option<(u32, u32)> {
        None
    }
    /// Bytes that `allocate` can still hand out.
    fn free_bytes(&self) -> u64;
    /// Bytes neither free nor owned that only a reclaim step (a zone
    /// reset) gives back.
    fn reclaimable_bytes(&self) -> u64 {
        0
    }
    /// Total bytes managed.
    fn capacity(&self) -> u64;
}

/// A space of one member or tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pool {
    Member(u32),
    Tier(u8),
}

impl Pool {
    fn at(self, offset: u64) -> Placement {
        match self {
            Pool::Member(member) => Placement::Member { member, offset },
            Pool::Tier(tier) => Placement::Tier { tier, offset },
        }
    }
    fn of(p: Placement) -> Option<(Pool, u64)> {
        match p {
            Placement::Member { member, offset } => Some((Pool::Member(member), offset)),
            Placement::Tier { tier, offset } => Some((Pool::Tier(tier), offset)),
            _ => None,
        }
    }
}

/// Free extents per pool, first-fit, coalescing on free.
#[derive(Clone, Debug)]
pub struct ExtentAllocator {
    /// Per pool: its size, and free extents offset -> length.
    pools: BTreeMap<Pool, (u64, BTreeMap<u64, u64>)>,
    reserved: HashSet<u64>,
    next_id: u64,
    /// The pool the next search starts at, so allocations spread.
    cursor: usize,
}

impl ExtentAllocator {
    /// All of each pool's `size` bytes free.
    pub fn new(pools: &[(Pool, u64)]) -> ExtentAllocator {
        let pools = pools.iter().map(|&(p, size)| (p, (size, Self::whole(size)))).collect();
        ExtentAllocator { pools, reserved: HashSet::new(), next_id: 0, cursor: 0 }
    }

    fn whole(size: u64) -> BTreeMap<u64, u64> {
        if size == 0 {
            BTreeMap::new()
        } else {
            BTreeMap::from([(0, size)])
        }
    }

    /// Every free extent, for comparing two allocators.
    pub fn free_extents(&self) -> Vec<(Pool, u64, u64)> {
        self.pools.iter().flat_map(|(&p, (_, f))| f.iter().map(move |(&o, &l)| (p, o, l))).collect()
    }

    /// Take `len` bytes at `off` of a free extent of `pool` (first fit).
    fn take_first_fit(free: &mut BTreeMap<u64, u64>, len: u64) -> Option<u64> {
        let (&off, &flen) = free.iter().find(|(_, &l)| l >= len)?;
        free.remove(&off);
        if flen > len {
            free.insert(off + len, flen - len);
        }
        Some(off)
    }

    /// Mark `[off, off+len)` of `pool` free, coalescing with neighbours.
    fn give_back(&mut self, p: Placement, len: u64) -> Result<(), AllocError> {
        let (pool, off) = Pool::of(p).ok_or(AllocError::OutOfRange(p, len))?;
        let (size, free) = self.pools.get_mut(&pool).ok_or(AllocError::OutOfRange(p, len))?;
        let end = off.checked_add(len).filter(|&e| e <= *size && len > 0).ok_or(AllocError::OutOfRange(p, len))?;
        let prev = free.range(..=off).next_back().map(|(&o, &l)| (o, l));
        let next = free.range(off..).next().map(|(&o, &l)| (o, l));
        if prev.is_some_and(|(o, l)| o + l > off) || next.is_some_and(|(o, _)| o < end) {
            return Err(AllocError::Overlap(p, len));
        }
        let (mut start, mut stop) = (off, end);
        if let Some((o, _)) = prev.filter(|&(o, l)| o + l == off) {
            free.remove(&o);
            start = o;
        }
        if let Some((o, l)) = next.filter(|&(o, _)| o == end) {
            free.remove(&o);
            stop = o + l;
        }
        free.insert(start, stop - start);
        Ok(())
    }

    /// Carve `[off, off+len)` of `pool` out of the free space (rebuild).
    fn carve(&mut self, p: Placement, len: u64) -> Result<(), AllocError> {
        let (pool, off) = Pool::of(p).ok_or(AllocError::OutOfRange(p, len))?;
        let (size, free) = self.pools.get_mut(&pool).ok_or(AllocError::OutOfRange(p, len))?;
        let end = off.checked_add(len).filter(|&e| e <= *size).ok_or(AllocError::OutOfRange(p, len))?;
        let (fo, fl) = free.range(..=off).next_back().map(|(&o, &l)| (o, l)).ok_or(AllocError::Overlap(p, len))?;
        if fo + fl < end {
            return Err(AllocError::Overlap(p, len));
        }
        free.remove(&fo);
        if fo < off {
            free.insert(fo, off - fo);
        }
        if end < fo + fl {
            free.insert(end, fo + fl - end);
        }
        Ok(())
    }
}

impl Allocator for ExtentAllocator {
    /// First fit, trying the pools round-robin from the cursor.
    fn allocate(&mut self, len: u64) -> Option<Reservation> {
        let pools: Vec<Pool> = self.pools.keys().copied().collect();
        let n = pools.len();
        let i = (0..n).find(|i| self.pools[&pools[(self.cursor + i) % n]].1.values().any(|&l| l >= len.max(1)))?;
        let pool = pools[(self.cursor + i) % n];
        self.cursor = (self.cursor + i + 1) % n;
        self.allocate_in(len, pool)
    }

    fn allocate_in(&mut self, len: u64, pool: Pool) -> Option<Reservation> {
        let off = Self::take_first_fit(&mut self.pools.get_mut(&pool)?.1, len.max(1))?;
        self.next_id += 1;
        self.reserved.insert(self.next_id);
        Some(Reservation { placement: pool.at(off), len: len.max(1), id: self.next_id })
    }

    fn commit(&mut self, r: Reservation) -> Result<(), AllocError> {
        self.reserved.remove(&r.id).then_some(()).ok_or(AllocError::UnknownReservation(r.placement))
    }

    fn abort(&mut self, r: Reservation) -> Result<(), AllocError> {
        if !self.reserved.remove(&r.id) {
            return Err(AllocError::UnknownReservation(r.placement));
        }
        self.give_back(r.placement, r.len)
    }

    fn free(&mut self, p: Placement, len: u64) -> Result<(), AllocError> {
        self.give_back(p, len)
    }

    fn rebuild(&mut self, map: &MapState, unit: u64) -> Result<(), AllocError> {
        for (_, (size, free)) in self.pools.iter_mut() {
            *free = Self::whole(*size);
        }
        self.reserved.clear();
        map.extents.values().try_for_each(|&p| self.carve(p, unit))
    }

    fn free_bytes(&self) -> u64 {
        self.pools.values().flat_map(|(_, f)| f.values()).sum()
    }

    fn capacity(&self) -> u64 {
        self.pools.values().map(|(s, _)| s).sum()
    }
}

/// One zone's state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZoneState {
    pub size: u64,
    /// Next append offset.
    pub wp: u64,
    /// Bytes below `wp` the map references (or that are being committed).
    pub live: u64,
    /// Reservations not yet committed or aborted.
    pub pending: u32,
}

/// Append-only allocation in zones: a write pointer each, space below it
/// that is freed is dead until the zone is empty and reset.
#[derive(Clone, Debug)]
pub struct ZoneAllocator {
    zones: BTreeMap<(u32, u32), ZoneState>,
    /// Every owned or reserved extent: (member, zone, offset) -> length.
    owned: BTreeMap<(u32, u32, u64), u64>,
    reserved: HashSet<u64>,
    next_id: u64,
    /// The zone of the latest allocation.
    appending: Option<(u32, u32)>,
}

impl ZoneAllocator {
    /// Zones `(member, zone, size)`, all empty.
    pub fn new(zones: &[(u32, u32, u64)]) -> ZoneAllocator {
        let zones = zones.iter().map(|&(m, z, size)| ((m, z), ZoneState { size, ..ZoneState::default() })).collect();
        ZoneAllocator { zones, owned: BTreeMap::new(), reserved: HashSet::new(), next_id: 0, appending: None }
    }

    /// Every zone's state, for comparing two allocators.
    pub fn zones(&self) -> Vec<((u32, u32), ZoneState)> {
        self.zones.iter().map(|(&k, &v)| (k, v)).collect()
    }

    /// Reset an empty zone: the caller resets the device zone, then commits
    /// the returned record to the map.
    pub fn reset(&mut self, member: u32, zone: u32) -> Result<Update, AllocError> {
        let p = Placement::Zone { member, zone, offset: 0 };
        let z = self.zones.get_mut(&(member, zone)).ok_or(AllocError::OutOfRange(p, 0))?;
        if z.live != 0 || z.pending != 0 {
            return Err(AllocError::ZoneBusy(member, zone));
        }
        z.wp = 0;
        Ok(Update::ZoneReset { member, zone })
    }

    /// After [`Allocator::rebuild`], raise a zone's write pointer to what
    /// the device reports (on real zoned drives, where data written to a
    /// reservation that was never mapped still moved the pointer).
    pub fn raise_write_pointer(&mut self, member: u32, zone: u32, wp: u64) {
        if let Some(z) = self.zones.get_mut(&(member, zone)) {
            z.wp = z.wp.max(wp.min(z.size));
        }
    }

    /// Drop the owned extent `p`+`len` (it must be exactly one).
    fn disown(&mut self, p: Placement, len: u64) -> Result<&mut ZoneState, AllocError> {
        let Placement::Zone { member, zone, offset } = p else { return Err(AllocError::OutOfRange(p, len)) };
        if self.owned.get(&(member, zone, offset)) != Some(&len) {
            return Err(AllocError::Overlap(p, len));
        }
        self.owned.remove(&(member, zone, offset));
        let z = self.zones.get_mut(&(member, zone)).ok_or(AllocError::OutOfRange(p, len))?;
        z.live -= len;
        Ok(z)
    }

    /// Own `p`+`unit` found in the map (rebuild), refusing overlaps.
    fn own(&mut self, p: Placement, unit: u64) -> Result<(), AllocError> {
        let Placement::Zone { member, zone, offset } = p else { return Err(AllocError::OutOfRange(p, unit)) };
        let z = self.zones.get_mut(&(member, zone)).ok_or(AllocError::OutOfRange(p, unit))?;
        let end = offset.checked_add(unit).filter(|&e| e <= z.size).ok_or(AllocError::OutOfRange(p, unit))?;
        let prev = self.owned.range(..=(member, zone, offset)).next_back();
        let next = self.owned.range((member, zone, offset)..).next();
        let hits_prev = prev.is_some_and(|(&(m, zn, o), &l)| (m, zn) == (member, zone) && o + l > offset);
        let hits_next = next.is_some_and(|(&(m, zn, o), _)| (m, zn) == (member, zone) && o < end);
        if hits_prev || hits_next {
            return Err(AllocError::Overlap(p, unit));
        }
        z.wp = z.wp.max(end);
        z.live += unit;
        self.owned.insert((member, zone, offset), unit);
        Ok(())
    }
}

impl ZoneAllocator {
    /// Append `len` bytes to the first zone of a member `ok` accepts.
    fn append(&mut self, len: u64, ok: impl Fn(u32) -> bool) -> Option<Reservation> {
        let len = len.max(1);
        let (&(member, zone), z) = self.zones.iter_mut().find(|((m, _), z)| ok(*m) && z.size - z.wp >= len)?;
        let offset = z.wp;
        z.wp += len;
        z.live += len;
        z.pending += 1;
        self.owned.insert((member, zone, offset), len);
        self.appending = Some((member, zone));
        self.next_id += 1;
        self.reserved.insert(self.next_id);
        Some(Reservation { placement: Placement::Zone { member, zone, offset }, len, id: self.next_id })
    }
}

impl Allocator for ZoneAllocator {
    /// The first zone with room.
    fn allocate(&mut self, len: u64) -> Option<Reservation> {
        self.append(len, |_| true)
    }

    fn allocate_in(&mut self, len: u64, pool: Pool) -> Option<Reservation> {
        self.append(len, |m| pool == Pool::Member(m))
    }

    fn commit_records(&self, r: &Reservation) -> Vec<Update> {
        match r.placement {
            Placement::Zone { member, zone, offset } => vec![Update::ZoneWp { member, zone, wp: offset + r.len }],
            _ => Vec::new(),
        }
    }

    fn commit(&mut self, r: Reservation) -> Result<(), AllocError> {
        let Placement::Zone { member, zone, .. } = r.placement else { return Err(AllocError::UnknownReservation(r.placement)) };
        match self.zones.get_mut(&(member, zone)) {
            Some(z) if self.reserved.remove(&r.id) => {
                z.pending -= 1;
                Ok(())
            }
            _ => Err(AllocError::UnknownReservation(r.placement)),
        }
    }

    /// The space goes back if it is the zone's tail; otherwise it is dead.
    fn abort(&mut self, r: Reservation) -> Result<(), AllocError> {
        if !self.reserved.remove(&r.id) {
            return Err(AllocError::UnknownReservation(r.placement));
        }
        let Placement::Zone { offset, .. } = r.placement else { return Err(AllocError::UnknownReservation(r.placement)) };
        let z = self.disown(r.placement, r.len)?;
        z.pending -= 1;
        if offset + r.len == z.wp {
            z.wp = offset;
        }
        Ok(())
    }

    fn free(&mut self, p: Placement, len: u64) -> Result<(), AllocError> {
        self.disown(p, len).map(|_| ())
    }

    /// Write pointers: the logged ones, raised to cover every reference.
    fn rebuild(&mut self, map: &MapState, unit: u64) -> Result<(), AllocError> {
        self.reserved.clear();
        self.owned.clear();
        for (k, z) in self.zones.iter_mut() {
            let wp = map.zone_wps.get(k).copied().unwrap_or(0).min(z.size);
            *z = ZoneState { size: z.size, wp, ..ZoneState::default() };
        }
        map.extents.values().try_for_each(|&p| self.own(p, unit))
    }

    /// Reset every zone that holds only dead space.
    fn reclaim(&mut self) -> Vec<Update> {
        let empty: Vec<(u32, u32)> =
            self.zones.iter().filter(|(_, z)| z.wp > 0 && z.live == 0 && z.pending == 0).map(|(&k, _)| k).collect();
        empty.into_iter().filter_map(|(m, z)| self.reset(m, z).ok()).collect()
    }

    fn victim_zone(&self) -> Option<(u32, u32)> {
        let candidates = self.zones.iter().filter(|(&k, z)| Some(k) != self.appending && z.pending == 0 && z.wp > z.live);
        candidates.max_by_key(|(_, z)| z.wp - z.live).map(|(&k, _)| k)
    }

    fn free_bytes(&self) -> u64 {
        self.zones.values().map(|z| z.size - z.wp).sum()
    }

    fn reclaimable_bytes(&self) -> u64 {
        self.zones.values().map(|z| z.wp - z.live).sum()
    }

    fn capacity(&self) -> u64 {
        self.zones.values().map(|z| z.size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_coalesce_and_double_frees_are_refused() {
        let mut a = ExtentAllocator::new(&[(Pool::Member(0), 4096)]);
        let r: Vec<Reservation> = (0..4).map(|_| a.allocate(1024).unwrap()).collect();
        assert!(a.allocate(1).is_none());
        let ps: Vec<Placement> = r.iter().map(|r| r.placement).collect();
        assert_eq!(ps[3], Placement::Member { member: 0, offset: 3072 });
        let mut it = r.into_iter();
        a.commit(it.next().unwrap()).unwrap();
        a.abort(it.next().unwrap()).unwrap();
        a.commit(it.next().unwrap()).unwrap();
        a.commit(it.next().unwrap()).unwrap();
        a.free(ps[2], 1024).unwrap();
        assert_eq!(a.free_extents(), vec![(Pool::Member(0), 1024, 2048)], "1024..2048 and 2048..3072 merged");
        assert_eq!(a.free(ps[1], 1024), Err(AllocError::Overlap(ps[1], 1024)));
        a.free(ps[0], 1024).unwrap();
        a.free(ps[3], 1024).unwrap();
        assert_eq!(a.free_extents(), vec![(Pool::Member(0), 0, 4096)]);
    }

    #[test]
    fn zones_append_rewind_on_tail_abort_and_reset_when_empty() {
        let mut a = ZoneAllocator::new(&[(0, 0, 4096), (0, 1, 4096)]);
        let r1 = a.allocate(1024).unwrap();
        let r2 = a.allocate(1024).unwrap();
        assert_eq!(r2.placement, Placement::Zone { member: 0, zone: 0, offset: 1024 });
        assert_eq!(a.commit_records(&r2), vec![Update::ZoneWp { member: 0, zone: 0, wp: 2048 }]);
        a.abort(r2).unwrap();
        let r2b = a.allocate(1024).unwrap();
        assert_eq!(r2b.placement, Placement::Zone { member: 0, zone: 0, offset: 1024 }, "the tail abort rewound");
        let p1 = r1.placement;
        a.commit(r1).unwrap();
        assert_eq!(a.reset(0, 0), Err(AllocError::ZoneBusy(0, 0)));
        assert_eq!(a.free_bytes(), 2048 + 4096);
        let r3 = a.allocate(1024).unwrap();
        assert_eq!(a.free(p1, 512), Err(AllocError::Overlap(p1, 512)), "only whole extents are freed");
        a.free(p1, 1024).unwrap();
        assert_eq!(a.free(p1, 1024), Err(AllocError::Overlap(p1, 1024)), "a double free is refused");
        a.abort(r2b).unwrap();
        assert_eq!(a.reset(0, 0), Err(AllocError::ZoneBusy(0, 0)), "a reservation is pending");
        a.abort(r3).unwrap();
        assert_eq!(a.reclaimable_bytes(), 2048, "0..1024 freed, 1024..2048 aborted but not the tail");
        assert_eq!(a.reset(0, 0), Ok(Update::ZoneReset { member: 0, zone: 0 }));
        assert_eq!(a.free_bytes(), 8192);
    }
}
