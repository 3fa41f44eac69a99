//! Where every unit is, and which slots are free.
//!
//! ```text
//!   moved:  unit -> (column, slot)      only units that were ever moved;
//!                                       every other unit is at its home
//!   owner:  (column, slot) -> unit      the slots moved units hold
//!   free:   column -> { spare slots not taken, home slots a unit left }
//!
//!   a slot is held  <=>  owner has it, or it is the home of a unit not in `moved`
//!   free = every slot not held
//! ```
//!
//! Memory follows the moves, not the array's size: the spare slots are a
//! range with the taken ones listed (`spare_taken`), and only home slots
//! that units left are listed (`freed`).  Recovery walks the moved units,
//! never every slot.
//!
//! A unit that moves back to its home slot keeps its record (and its
//! `owner` entry): simplest, and the map stays right without a special
//! case.

use std::collections::{BTreeMap, BTreeSet};

use crate::layout::RemapLayout;

/// The free slots of one column.
///
/// ```text
///   spare range  spare.0 ............ next ............ spare.1
///                [ taken, or free again (spare_freed) ][ never taken ]
/// ```
///
/// Moves take the lowest free slot, so the never-taken part is one
/// cursor and every operation costs a set lookup, not a scan.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FreeSlots {
    /// The spare slots: `spare.0..spare.1`.
    spare: (u64, u64),
    /// Spare slots from here on were never taken.
    next: u64,
    /// Spare slots below `next` that are free again.
    spare_freed: BTreeSet<u64>,
    /// Home slots whose unit moved away and nobody took.
    freed: BTreeSet<u64>,
}

impl FreeSlots {
    fn new(lay: &RemapLayout) -> FreeSlots {
        FreeSlots { spare: (lay.data_slots, lay.slots), next: lay.data_slots, ..FreeSlots::default() }
    }

    fn is_spare(&self, s: u64) -> bool {
        (self.spare.0..self.spare.1).contains(&s)
    }

    /// Whether slot `s` is free.
    pub fn contains(&self, s: u64) -> bool {
        if self.is_spare(s) {
            s >= self.next || self.spare_freed.contains(&s)
        } else {
            self.freed.contains(&s)
        }
    }

    /// Slot `s` (free) is taken.
    fn take(&mut self, s: u64) {
        if !self.is_spare(s) {
            self.freed.remove(&s);
        } else if s >= self.next {
            // The never-taken slots skipped over stay free.
            self.spare_freed.extend(self.next..s);
            self.next = s + 1;
        } else {
            self.spare_freed.remove(&s);
        }
    }

    /// Slot `s` (held) is free again.
    fn give_back(&mut self, s: u64) {
        if !self.is_spare(s) {
            self.freed.insert(s);
        } else if s < self.next {
            self.spare_freed.insert(s);
        }
    }

    /// The lowest free slot from `from` on: freed home slots (the lowest
    /// numbers), then freed spare slots, then the never-taken ones.
    fn lowest_from(&self, from: u64) -> Option<u64> {
        let again = self.freed.range(from..).next().or_else(|| self.spare_freed.range(from..).next()).copied();
        again.or_else(|| Some(self.next.max(from)).filter(|&s| s < self.spare.1))
    }

    fn len(&self) -> u64 {
        (self.freed.len() + self.spare_freed.len()) as u64 + (self.spare.1 - self.next)
    }
}

/// The placement state of the array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Places {
    /// Unit -> (column, slot), for moved units only.
    pub moved: BTreeMap<u64, (usize, u64)>,
    /// (column, slot) -> the moved unit holding it.
    pub owner: BTreeMap<(usize, u64), u64>,
    /// Per column, the slots nobody holds.
    pub free: Vec<FreeSlots>,
}

impl Places {
    /// Every unit at home: the spare slots free.
    pub fn fresh(lay: &RemapLayout) -> Places {
        let free = (0..lay.ncols()).map(|_| FreeSlots::new(lay)).collect();
        Places { moved: BTreeMap::new(), owner: BTreeMap::new(), free }
    }

    /// Where unit `l` is: (column, slot).
    pub fn of(&self, lay: &RemapLayout, l: u64) -> (usize, u64) {
        self.moved.get(&l).copied().unwrap_or_else(|| lay.home(l))
    }

    /// Unit `l` now lives at `to` (a free slot): `to` leaves the free
    /// set, the old place joins it.  The caller frees old places only
    /// once the move's program has been planned (see `migrate.rs`).
    pub fn place(&mut self, lay: &RemapLayout, l: u64, to: (usize, u64)) -> Result<(), String> {
        if !self.free.get(to.0).is_some_and(|f| f.contains(to.1)) {
            return Err(format!("unit {l}: slot {} of column {} is not free", to.1, to.0));
        }
        let from = self.of(lay, l);
        self.free[to.0].take(to.1);
        self.owner.remove(&from);
        self.owner.insert(to, l);
        self.moved.insert(l, to);
        self.free[from.0].give_back(from.1);
        Ok(())
    }

    /// The lowest free slot of column `member` from slot `from` on (a batch
    /// passes one past the last slot it took there, as it takes them in
    /// ascending order).
    pub fn free_slot(&self, member: usize, from: u64) -> Option<u64> {
        self.free.get(member)?.lowest_from(from)
    }

    /// Free slots of column `c`.
    pub fn free_in(&self, c: usize) -> u64 {
        self.free.get(c).map(FreeSlots::len).unwrap_or(0)
    }

    /// Free slots in all.
    pub fn free_count(&self) -> u64 {
        self.free.iter().map(FreeSlots::len).sum()
    }

    /// Rebuild from recovered placements (each already checked to be a
    /// slot of the layout): no slot held twice, home slots of units
    /// without a record counted as held.  Errors name the unit.
    pub fn rebuild(lay: &RemapLayout, moved: BTreeMap<u64, (usize, u64)>) -> Result<Places, String> {
        let mut owner = BTreeMap::new();
        for (&l, &at) in &moved {
            if let Some(other) = owner.insert(at, l) {
                return Err(format!("units {other} and {l} both placed in slot {} of column {}", at.1, at.0));
            }
            if let Some(h) = lay.home_unit(at.0, at.1).filter(|h| *h != l && !moved.contains_key(h)) {
                return Err(format!("unit {l} placed in slot {} of column {}, the home of unit {h} which never moved", at.1, at.0));
            }
        }
        let mut free: Vec<FreeSlots> = (0..lay.ncols()).map(|_| FreeSlots::new(lay)).collect();
        for &(m, s) in owner.keys() {
            free[m].take(s);
        }
        for &l in moved.keys() {
            let (m, s) = lay.home(l);
            if !owner.contains_key(&(m, s)) {
                free[m].give_back(s);
            }
        }
        Ok(Places { moved, owner, free })
    }
}
