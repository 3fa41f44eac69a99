//! Level changes that move no data (md's *takeover*, `mdadm --grow
//! --level`): the new geometry puts every logical byte where the old one
//! has it, so the change is new superblocks, plus a rebuild of the
//! members it adds.
//!
//! ```text
//!   raid1, 2 members  =  raid5, 2 members (a stripe's parity of one data
//!                        unit is that unit):
//!            member:  0    1                    member:  0    1
//!   stripe 0          D0   D0'       <──>      stripe 0  D0   P=D0
//!   stripe 1          D1   D1'                 stripe 1  P=D1 D1
//!   (superblocks only; then `grow --add` restripes it as any raid5)
//!
//!   raid0, n members + 1  ──>  raid4, n + 1 (data columns stay on 0..n,
//!                              parity on the new member n):
//!            member:  0    1    2    [3]
//!   stripe s          Ds0  Ds1  Ds2  [P]    P rebuilt from the data
//!
//!   raid1, n members + k  ──>  raid1, n + k (the new mirrors rebuilt)
//!
//!   raid4, n + 1 members  ──>  raid0, n (the parity member dropped)
//!   raid1, n members      ──>  raid1, m < n (the last mirrors dropped)
//! ```
//!
//! A member dropped is put out of service, its label erased, and only
//! then do the superblocks of the others record the smaller geometry: a
//! crash in between leaves the old level missing that member (raid4
//! without its parity, a mirror short of a copy), which opens, and the
//! same command finishes the change; the device is free for any array.
//!
//! The array must be whole (every member active, nothing to resync): the
//! copies or the parity the new level reads must agree with the data.  A
//! member added enters as a replacement does, `Rebuilding { done: 0 }`:
//! the rebuild that follows is the usual one, crash-safe and resumable
//! (`mosaic rebuild`), and until it passes a stripe the array is that
//! level degraded by one member, as md's raid0 → raid4 is.  Every other
//! level change moves data (raid4 ↔ raid5, raid5 → raid6 rotate code
//! columns) and is refused.

use std::sync::Arc;

use serde::Serialize;
use uuid::Uuid;

use mosaic_core::{Geometry, Level, MemberState};
use mosaic_dev::Member;

use crate::array::{Array, Shape};
use crate::grow::{bitmap_in_the_way, joiners_fit};
use crate::ArrayError;

/// What a level change did.
#[derive(Debug, Clone, Serialize)]
pub struct TakeoverReport {
    pub from: String,
    pub to: String,
    pub members: usize,
    /// Members added, to be rebuilt (`Array::rebuild`).
    pub rebuild: Vec<usize>,
    /// The paths of the members dropped (their labels erased).
    pub dropped: Vec<String>,
}

/// The level `old` becomes with `added` members: the changes that keep
/// every byte in place, or why not.
fn target(old: &Geometry, level: Level, added: usize) -> Result<Level, ArrayError> {
    let n = old.members;
    let moves = || {
        ArrayError::Usage(format!(
            "{} to {level} moves data, which a level change here does not do; without moving data: raid1 (2 members) <-> raid5, raid0 -> raid4 with one new member (--add), raid1 -> raid1 with new mirrors (--add)",
            old.level
        ))
    };
    match (old.level, level) {
        (Level::Raid1, Level::Raid1) if added == 0 => Err(ArrayError::Usage("the array is raid1 already: add mirrors with --add DRIVE".into())),
        (Level::Raid1, Level::Raid1) => Ok(level),
        (a, b) if a == b => Err(ArrayError::Usage(format!("the array is {a} already"))),
        (Level::Raid1, Level::Raid5) | (Level::Raid5, Level::Raid1) if n != 2 => Err(ArrayError::Usage(format!(
            "only a 2-member {} holds the same bytes as a 2-member {level}; this one has {n} members",
            old.level
        ))),
        (Level::Raid1, Level::Raid5) | (Level::Raid5, Level::Raid1) if added > 0 => Err(ArrayError::Usage(format!(
            "{} to {level} takes no new member: change the level, then add members with grow --add",
            old.level
        ))),
        (Level::Raid1, Level::Raid5) | (Level::Raid5, Level::Raid1) => Ok(level),
        (Level::Raid0, Level::Raid4) if added != 1 => Err(ArrayError::Usage(format!("raid0 to raid4 takes exactly one new member for the parity (--add DRIVE), not {added}"))),
        (Level::Raid0, Level::Raid4) => Ok(level),
        _ => Err(moves()),
    }
}

/// The level `old` becomes keeping its first `keep` members: raid4
/// without its parity member is raid0, a mirror keeps fewer copies.
fn target_dropping(old: &Geometry, level: Level, keep: usize) -> Result<Level, ArrayError> {
    let n = old.members;
    match (old.level, level) {
        (Level::Raid4, Level::Raid0) if keep + 1 == n => Ok(level),
        (Level::Raid4, Level::Raid0) => Err(ArrayError::Usage(format!("raid4 to raid0 drops the parity member alone: {} members are left, not {keep}", n - 1))),
        (Level::Raid1, Level::Raid1) if (2..n).contains(&keep) => Ok(level),
        (Level::Raid1, Level::Raid1) => Err(ArrayError::Usage(format!("a mirror of {n} members can keep 2 to {} of them, not {keep}", n - 1))),
        (a, b) => Err(ArrayError::Usage(format!("{a} to {b} with {keep} of {n} members moves data or loses it; members can be dropped from raid4 (to raid0) and raid1 only"))),
    }
}

impl Array {
    /// Writable, with no grow and no paused hot replace.
    fn ready_to_change_level(&self) -> Result<(), ArrayError> {
        self.check_writable()?;
        self.not_growing("level change")?;
        self.no_paused_hot_replace()
    }

    /// Change the level to `level`, adding `new` members, where no data
    /// moves (see the module notes); the members added are to be rebuilt
    /// ([`Array::rebuild`]).  Refused unless the array is whole and
    /// writable, with no grow, hot replace or resync pending; an added
    /// member must be large enough; a write-intent bitmap must go first
    /// when members are added (as for a grow), write-mostly slots when the
    /// level is no mirror.  Requests in flight finish first.
    pub fn takeover(&self, level: Level, new: Vec<(Arc<dyn Member>, String)>) -> Result<TakeoverReport, ArrayError> {
        self.ready_to_change_level()?;
        let old = self.geometry();
        let level = target(&old, level, new.len())?;
        self.not_degraded("changing its level")?;
        if self.needs_resync() {
            return Err(ArrayError::Usage("the array was not shut down cleanly and is not resynced: its copies may disagree; resync it first (mosaic scrub --repair)".into()));
        }
        let sb = self.superblock();
        if !new.is_empty() && sb.bitmap.is_some() {
            return Err(bitmap_in_the_way("change the level"));
        }
        if level != Level::Raid1 && !sb.write_mostly.is_empty() {
            return Err(ArrayError::Usage(format!("members {:?} are write-mostly, which only a mirror has: clear them first (mosaic write-mostly -a ARRAY --none)", sb.write_mostly)));
        }
        let geo = Geometry::new(level, old.members + new.len(), old.unit, old.block, old.member_data_bytes())?;
        debug_assert_eq!((geo.k, geo.stripes), (old.k, old.stripes), "a takeover keeps every data column");
        joiners_fit(&geo, old.members, &new)?;
        // Journal records name columns of the old level: replayed after a
        // crash over the new one they could write a copy where parity now
        // lives (a cache volume empties its journal itself).
        if self.auto_checkpoint() {
            self.journal_checkpoint()?;
        }
        let shape = Shape::of(geo.clone(), None, &sb.write_mostly)?;
        let _g = self.gate.write();
        let added: Vec<usize> = (old.members..geo.members).collect();
        let paths: Vec<String> = new.iter().map(|(_, p)| p.clone()).collect();
        for (m, _) in new {
            self.push_member(m);
        }
        for &i in &added {
            self.set_health(i, MemberState::Rebuilding { done: 0 });
        }
        self.set_shape(shape);
        self.write_superblocks(|s| {
            s.geometry = geo.clone();
            for p in paths {
                s.member_uuids.push(Uuid::new_v4());
                s.member_paths.push(p);
                if !s.member_hosts.is_empty() {
                    s.member_hosts.push(String::new());
                }
            }
        })?;
        Ok(TakeoverReport { from: old.level.to_string(), to: level.to_string(), members: geo.members, rebuild: added, dropped: Vec::new() })
    }

    /// Change the level to `level` keeping the first `keep` members: raid4
    /// to raid0 without its parity member, a mirror without its last
    /// copies (see the module notes for the order that makes a crash
    /// harmless).  The members kept must be in service; refused with a
    /// bitmap, a grow or a paused hot replace, or when every slot left
    /// would be write-mostly.
    pub fn takeover_dropping(&self, level: Level, keep: usize) -> Result<TakeoverReport, ArrayError> {
        self.ready_to_change_level()?;
        let old = self.geometry();
        let level = target_dropping(&old, level, keep)?;
        let out: Vec<usize> = self.health().states[..keep].iter().enumerate().filter(|(_, s)| !matches!(s, MemberState::Active)).map(|(i, _)| i).collect();
        if !out.is_empty() {
            return Err(ArrayError::Usage(format!("member(s) {out:?}, which the array keeps, are not in service: rebuild them first")));
        }
        let sb = self.superblock();
        if sb.bitmap.is_some() {
            return Err(bitmap_in_the_way("change the level"));
        }
        let wm: Vec<usize> = sb.write_mostly.iter().copied().filter(|&i| i < keep).collect();
        let geo = Geometry::new(level, keep, old.unit, old.block, old.member_data_bytes())?;
        debug_assert_eq!((geo.k, geo.stripes), (old.k, old.stripes), "a takeover keeps every data column");
        let shape = Shape::of(geo.clone(), None, &wm)?;
        if self.auto_checkpoint() {
            self.journal_checkpoint()?;
        }
        let _g = self.gate.write();
        for i in keep..old.members {
            self.set_health(i, MemberState::Failed);
        }
        for i in (keep..old.members).rev() {
            let Some(m) = self.member(i) else { continue };
            let erased = mosaic_format::label::erase(&mut |b, off| m.write_at(b, off)).and_then(|_| m.flush());
            erased.map_err(|e| ArrayError::Io(format!("{}: erasing the label of the member dropped: {e} (it is out of service; run the command again)", sb.member_paths[i])))?;
        }
        for _ in keep..old.members {
            self.pop_member();
        }
        self.set_shape(shape);
        self.write_superblocks(|s| {
            s.geometry = geo.clone();
            s.member_uuids.truncate(keep);
            s.member_paths.truncate(keep);
            s.member_hosts.truncate(keep);
            s.left.truncate(keep);
            s.write_mostly = wm;
        })?;
        Ok(TakeoverReport { from: old.level.to_string(), to: level.to_string(), members: keep, rebuild: Vec::new(), dropped: sb.member_paths[keep..].to_vec() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(level: Level, n: usize) -> Geometry {
        Geometry::new(level, n, 64 << 10, 4096, 1 << 20).unwrap()
    }

    #[test]
    fn only_changes_that_keep_every_byte_in_place_are_taken() {
        assert_eq!(target(&geo(Level::Raid1, 2), Level::Raid5, 0).unwrap(), Level::Raid5);
        assert_eq!(target(&geo(Level::Raid5, 2), Level::Raid1, 0).unwrap(), Level::Raid1);
        assert_eq!(target(&geo(Level::Raid0, 3), Level::Raid4, 1).unwrap(), Level::Raid4);
        assert_eq!(target(&geo(Level::Raid1, 2), Level::Raid1, 2).unwrap(), Level::Raid1);
        let refused = |g: Geometry, l: Level, a: usize| match target(&g, l, a) {
            Err(ArrayError::Usage(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(refused(geo(Level::Raid1, 3), Level::Raid5, 0).contains("2-member"));
        assert!(refused(geo(Level::Raid5, 3), Level::Raid1, 0).contains("2-member"));
        assert!(refused(geo(Level::Raid0, 3), Level::Raid4, 0).contains("exactly one new member"));
        assert!(refused(geo(Level::Raid0, 3), Level::Raid4, 2).contains("exactly one new member"));
        assert!(refused(geo(Level::Raid4, 4), Level::Raid5, 0).contains("moves data"));
        assert!(refused(geo(Level::Raid5, 4), Level::Raid6, 1).contains("moves data"));
        assert!(refused(geo(Level::Raid0, 3), Level::Raid5, 1).contains("moves data"));
        assert!(refused(geo(Level::Raid5, 4), Level::Raid5, 0).contains("raid5 already"));
        assert!(refused(geo(Level::Raid1, 2), Level::Raid5, 1).contains("takes no new member"));
        assert_eq!(target_dropping(&geo(Level::Raid4, 4), Level::Raid0, 3).unwrap(), Level::Raid0);
        assert_eq!(target_dropping(&geo(Level::Raid1, 4), Level::Raid1, 2).unwrap(), Level::Raid1);
        let refused = |g: Geometry, l: Level, keep: usize| target_dropping(&g, l, keep).unwrap_err().to_string();
        assert!(refused(geo(Level::Raid4, 4), Level::Raid0, 2).contains("parity member alone"));
        assert!(refused(geo(Level::Raid1, 3), Level::Raid1, 1).contains("keep 2 to 2"));
        assert!(refused(geo(Level::Raid5, 4), Level::Raid0, 3).contains("moves data or loses it"));
    }

    /// The claim the module rests on.  raid0 -> raid4 and new mirrors:
    /// every data unit keeps its member and offset.  raid1 2 <-> raid5 2:
    /// one data column, and each member's unit of a stripe is either it or
    /// a copy of it (a mirror, or the parity of one unit), at one offset.
    #[test]
    fn the_geometries_a_takeover_joins_put_every_data_unit_in_the_same_place() {
        for (a, b) in [(geo(Level::Raid0, 3), geo(Level::Raid4, 4)), (geo(Level::Raid1, 2), geo(Level::Raid1, 4)), (geo(Level::Raid1, 3), geo(Level::Raid1, 4))] {
            for stripe in 0..a.stripes {
                for col in 0..a.k {
                    assert_eq!((a.member_of(stripe, col), a.offset_of(stripe, col)), (b.member_of(stripe, col), b.offset_of(stripe, col)), "{} -> {}: stripe {stripe} column {col}", a.level, b.level);
                }
            }
        }
        for g in [geo(Level::Raid1, 2), geo(Level::Raid5, 2)] {
            assert_eq!((g.k, g.m), (1, 1), "{}", g.level);
            for stripe in 0..g.stripes {
                let mut held: Vec<usize> = (0..2).map(|c| g.member_of(stripe, c)).collect();
                held.sort();
                assert_eq!(held, [0, 1], "{} stripe {stripe}: both members hold the unit", g.level);
                assert_eq!(g.offset_of(stripe, 0), g.offset_of(stripe, 1));
                assert_eq!(g.offset_of(stripe, 0), geo(Level::Raid1, 2).offset_of(stripe, 0));
            }
        }
    }
}
