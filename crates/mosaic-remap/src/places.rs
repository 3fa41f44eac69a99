//! Where every unit is, and which slots are free.
//!
//! ```text
//!   moved:  unit -> (member, slot)      only units that were ever moved;
//!                                       every other unit is at its home
//!   owner:  (member, slot) -> unit      the slots moved units hold
//!   free:   member -> {slot}            slots nobody holds (the spare
//!                                       slots at first, then every slot
//!                                       a unit left, its home included)
//!
//!   a slot is held  <=>  owner has it, or it is the home of a unit not in `moved`
//!   free = every slot not held (kept as a set, so a move finds one at once)
//! ```
//!
//! A unit that moves back to its home slot keeps its record (and its
//! `owner` entry): simplest, and the map stays right without a special
//! case.

use std::collections::{BTreeMap, BTreeSet};

use crate::layout::RemapLayout;

/// The placement state of the array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Places {
    /// Unit -> (member, slot), for moved units only.
    pub moved: BTreeMap<u64, (usize, u64)>,
    /// (member, slot) -> the moved unit holding it.
    pub owner: BTreeMap<(usize, u64), u64>,
    /// Per member, the slots nobody holds.
    pub free: Vec<BTreeSet<u64>>,
}

impl Places {
    /// Every unit at home: the spare slots free.
    pub fn fresh(lay: &RemapLayout) -> Places {
        let free = (0..lay.members).map(|_| (lay.data_slots..lay.slots).collect()).collect();
        Places { moved: BTreeMap::new(), owner: BTreeMap::new(), free }
    }

    /// Where unit `l` is: (member, slot).
    pub fn of(&self, lay: &RemapLayout, l: u64) -> (usize, u64) {
        self.moved.get(&l).copied().unwrap_or_else(|| lay.home(l))
    }

    /// Whether (member, slot) holds a unit.
    pub fn held(&self, lay: &RemapLayout, member: usize, slot: u64) -> bool {
        self.owner.contains_key(&(member, slot)) || lay.home_unit(member, slot).is_some_and(|h| !self.moved.contains_key(&h))
    }

    /// Unit `l` now lives at `to` (a free slot): `to` leaves the free
    /// set, the old place joins it.  The caller frees old places only
    /// once the move's program has been planned (see `migrate.rs`).
    pub fn place(&mut self, lay: &RemapLayout, l: u64, to: (usize, u64)) -> Result<(), String> {
        if !self.free.get(to.0).is_some_and(|f| f.contains(&to.1)) {
            return Err(format!("unit {l}: slot {} of member {} is not free", to.1, to.0));
        }
        let from = self.of(lay, l);
        self.free[to.0].remove(&to.1);
        self.owner.remove(&from);
        self.owner.insert(to, l);
        self.moved.insert(l, to);
        self.free[from.0].insert(from.1);
        Ok(())
    }

    /// The lowest free slot of `member` not in `taken`.
    pub fn free_slot(&self, member: usize, taken: &BTreeSet<(usize, u64)>) -> Option<u64> {
        self.free.get(member)?.iter().copied().find(|s| !taken.contains(&(member, *s)))
    }

    /// Free slots in all.
    pub fn free_count(&self) -> u64 {
        self.free.iter().map(|f| f.len() as u64).sum()
    }

    /// Rebuild from recovered placements (each already checked to be a
    /// slot of the layout): no slot held twice, home slots of units
    /// without a record counted as held.  Errors name the unit.
    pub fn rebuild(lay: &RemapLayout, moved: BTreeMap<u64, (usize, u64)>) -> Result<Places, String> {
        let mut owner = BTreeMap::new();
        for (&l, &at) in &moved {
            if let Some(other) = owner.insert(at, l) {
                return Err(format!("units {other} and {l} both placed in slot {} of member {}", at.1, at.0));
            }
            if let Some(h) = lay.home_unit(at.0, at.1).filter(|h| *h != l && !moved.contains_key(h)) {
                return Err(format!("unit {l} placed in slot {} of member {}, the home of unit {h} which never moved", at.1, at.0));
            }
        }
        let mut p = Places { moved, owner, free: vec![BTreeSet::new(); lay.members] };
        for m in 0..lay.members {
            let free: BTreeSet<u64> = (0..lay.slots).filter(|&s| !p.held(lay, m, s)).collect();
            p.free[m] = free;
        }
        Ok(p)
    }
}
