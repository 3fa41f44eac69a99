//! Level changes that move no data (md's takeover): raid1 2 <-> raid5 2
//! in the superblocks alone, raid0 + a member -> raid4 and raid1 + mirrors
//! with the new members rebuilt.  Bytes read back, codes scrubbed, the new
//! redundancy proven by failing members, a power cut at every device
//! write of a change, refusals.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use mosaic_array::{Array, CreateOptions, DATA_OFFSET};
use mosaic_core::{Level, MemberState};
use mosaic_dev::{MemMember, Member, PowerCut};

use crate::common::{random, read_all};

const UNIT: u64 = 4096;
const ROWS: u64 = 16;

struct Rig {
    mems: Vec<Arc<MemMember>>,
    budget: Arc<AtomicI64>,
}

impl Rig {
    fn new(n: usize) -> Rig {
        Rig { mems: (0..n).map(Rig::drive).collect(), budget: Arc::new(AtomicI64::new(i64::MAX)) }
    }
    fn drive(i: usize) -> Arc<MemMember> {
        Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + ROWS * UNIT))
    }
    fn wrap(&self, m: &Arc<MemMember>) -> Arc<dyn Member> {
        Arc::new(PowerCut::new(m.clone(), self.budget.clone()))
    }
    fn create(&self, level: &str) -> Array {
        let o = CreateOptions { level: level.parse::<Level>().unwrap(), members: Some(self.mems.len()), member_size: None, unit: UNIT, block: 4096, force: true, assume_clean: true };
        Array::create_on(self.mems.iter().map(|m| (self.wrap(m), m.describe())).collect(), &o, true).unwrap()
    }
    /// A new drive for the array: kept in the rig, so `open` finds it.
    fn add(&mut self) -> (Arc<dyn Member>, String) {
        let m = Rig::drive(self.mems.len());
        self.mems.push(m.clone());
        (self.wrap(&m), m.describe())
    }
    fn open(&self) -> Array {
        self.budget.store(i64::MAX, Ordering::SeqCst);
        Array::open_members(self.mems.iter().map(|m| self.wrap(m)).collect(), true).unwrap()
    }
}

fn filled(rig: &Rig, level: &str, seed: u64) -> (Array, Vec<u8>) {
    let arr = rig.create(level);
    let data = random(seed, arr.capacity());
    arr.write(0, &data).unwrap();
    (arr, data)
}

#[test]
fn a_two_member_mirror_becomes_raid5_in_its_superblocks_and_grows_as_one() {
    let mut rig = Rig::new(2);
    let (arr, data) = filled(&rig, "raid1", 1);
    let before: Vec<Vec<u8>> = rig.mems.iter().map(|m| m.snapshot()[DATA_OFFSET as usize..].to_vec()).collect();
    let rep = arr.takeover(Level::Raid5, vec![]).unwrap();
    assert_eq!((rep.from.as_str(), rep.to.as_str(), rep.members, rep.rebuild.len()), ("raid1", "raid5", 2, 0));
    let after: Vec<Vec<u8>> = rig.mems.iter().map(|m| m.snapshot()[DATA_OFFSET as usize..].to_vec()).collect();
    assert!(before == after, "no data byte was written");
    assert_eq!(arr.scrub(false, &|_, _| {}).unwrap().mismatched, 0, "each parity is its unit");
    assert!(read_all(&arr) == data);
    drop(arr);
    let arr = rig.open();
    assert_eq!(arr.geometry().level, Level::Raid5, "the superblocks say raid5");
    assert!(read_all(&arr) == data);
    // Then it is a raid5 like any other: grown onto a third member.
    let new = rig.add();
    arr.grow_start(vec![new]).unwrap();
    arr.grow_continue(&|_, _| {}, Default::default()).unwrap();
    assert_eq!((arr.geometry().members, arr.capacity()), (3, 2 * ROWS * UNIT));
    assert!(read_all(&arr)[..data.len()] == data[..], "the mirror's bytes after the grow");
    assert_eq!(arr.scrub(false, &|_, _| {}).unwrap().mismatched, 0);
    // And back: a 2-member raid5 is a mirror.
    let rig = Rig::new(2);
    let (arr, data) = filled(&rig, "raid5", 2);
    arr.takeover(Level::Raid1, vec![]).unwrap();
    arr.fail_member(0).unwrap();
    assert!(read_all(&arr) == data, "member 1 alone holds it all");
}

#[test]
fn raid0_with_a_new_member_becomes_raid4_whose_parity_the_rebuild_writes() {
    let mut rig = Rig::new(3);
    let (arr, data) = filled(&rig, "raid0", 3);
    let new = rig.add();
    let rep = arr.takeover(Level::Raid4, vec![new]).unwrap();
    assert_eq!((rep.members, rep.rebuild.clone()), (4, vec![3]));
    assert!(matches!(arr.health().states[3], MemberState::Rebuilding { done: 0 }));
    assert!(read_all(&arr) == data, "read while the parity is built");
    arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    assert!(arr.health().states.iter().all(|s| matches!(s, MemberState::Active)));
    assert_eq!(arr.scrub(false, &|_, _| {}).unwrap().mismatched, 0);
    // The parity is real: any one data member can go.
    arr.fail_member(1).unwrap();
    assert!(read_all(&arr) == data, "member 1 computed from the parity");
    drop(arr);
    let arr = rig.open();
    assert_eq!((arr.geometry().level, arr.geometry().members), (Level::Raid4, 4));
    assert!(read_all(&arr) == data);
}

#[test]
fn a_mirror_takes_new_copies_and_lives_on_the_last_of_them() {
    let mut rig = Rig::new(2);
    let (arr, data) = filled(&rig, "raid1", 4);
    let (a, b) = (rig.add(), rig.add());
    let rep = arr.takeover(Level::Raid1, vec![a, b]).unwrap();
    assert_eq!(rep.rebuild, vec![2, 3]);
    arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    for i in 0..3 {
        arr.fail_member(i).unwrap();
    }
    assert!(read_all(&arr) == data, "member 3 alone");
}

#[test]
fn a_power_cut_anywhere_in_a_level_change_loses_nothing() {
    // raid0 3 -> raid4 4: the superblocks' rounds, then the rebuild's
    // writes; cut at each, reopen, finish what is pending, read back.
    let (mut old, mut new) = (0, 0);
    for cut in 0..24 {
        let mut rig = Rig::new(3);
        let (arr, data) = filled(&rig, "raid0", 10 + cut as u64);
        let drive = rig.add();
        rig.budget.store(cut, Ordering::SeqCst);
        let r = arr.takeover(Level::Raid4, vec![drive]);
        if r.is_ok() {
            let _ = arr.rebuild(&|_, _| {}, Default::default());
        }
        drop(arr); // power off
        let arr = if rig.open_raid0_only() { old += 1; rig.open_first(3) } else { new += 1; rig.open() };
        assert!(read_all(&arr) == data, "cut after {cut}: the bytes read back");
        if arr.geometry().level == Level::Raid4 {
            arr.rebuild(&|_, _| {}, Default::default()).unwrap();
            assert_eq!(arr.scrub(false, &|_, _| {}).unwrap().mismatched, 0, "cut after {cut}");
        }
    }
    assert!(old > 0 && new > 0, "cuts on both sides of the change: {old} old, {new} new");
}

impl Rig {
    /// Whether the new drive got no label: the array is still the old
    /// raid0 of the first three.
    fn open_raid0_only(&self) -> bool {
        mosaic_array::Superblock::read_from(self.mems[3].as_ref() as &dyn Member).is_err()
    }
    fn open_first(&self, n: usize) -> Array {
        self.budget.store(i64::MAX, Ordering::SeqCst);
        Array::open_members(self.mems[..n].iter().map(|m| self.wrap(m)).collect(), true).unwrap()
    }
}

#[test]
fn a_level_change_says_why_it_is_refused() {
    let refused = |arr: &Array, level: Level, new: Vec<(Arc<dyn Member>, String)>| arr.takeover(level, new).unwrap_err().to_string();
    let mut rig = Rig::new(2);
    let (arr, _) = filled(&rig, "raid1", 5);
    arr.fail_member(1).unwrap();
    assert!(refused(&arr, Level::Raid5, vec![]).contains("degraded"));
    let mut rig3 = Rig::new(3);
    let (arr, _) = filled(&rig3, "raid0", 6);
    let small = (Arc::new(MemMember::new("small", DATA_OFFSET + UNIT)) as Arc<dyn Member>, "small".to_string());
    assert!(refused(&arr, Level::Raid4, vec![small]).contains("too small to join"));
    assert_eq!(arr.geometry().members, 3, "nothing changed");
    let (x, y) = (rig3.add(), rig3.add());
    assert!(refused(&arr, Level::Raid4, vec![x, y]).contains("exactly one new member"));
    assert!(refused(&arr, Level::Raid5, vec![rig.add()]).contains("moves data"));
    // A bitmap has a slot per member: it goes first when members come or go.
    let (_rig, arr, _) = raid4_from_raid0(7);
    arr.set_bitmap(Some(4 * UNIT)).unwrap();
    let e = arr.takeover_dropping(Level::Raid0, 3).unwrap_err().to_string();
    assert!(e.contains("write-intent bitmap: remove it first (mosaic bitmap -a ARRAY none), change the level"), "{e}");
    let mut rig1 = Rig::new(2);
    let arr = rig1.create("raid1");
    arr.set_bitmap(Some(4 * UNIT)).unwrap();
    let e = arr.takeover(Level::Raid1, vec![rig1.add()]).unwrap_err().to_string();
    assert!(e.contains("write-intent bitmap: remove it first"), "{e}");
    assert_eq!(arr.takeover(Level::Raid5, vec![]).unwrap().to, "raid5", "no member added: the bitmap stays");
    let rig = Rig::new(2);
    let arr = rig.create("raid1");
    arr.set_write_mostly(&[1]).unwrap();
    assert!(refused(&arr, Level::Raid5, vec![]).contains("write-mostly"));
    drop(arr);
    let ro = Array::open_members(rig.mems.iter().map(|m| m.clone() as Arc<dyn Member>).collect(), false).unwrap();
    assert!(refused(&ro, Level::Raid5, vec![]).contains("read-only"));
}

/// raid0 3 made raid4 4 (parity rebuilt), for the tests that drop it.
fn raid4_from_raid0(seed: u64) -> (Rig, Array, Vec<u8>) {
    let mut rig = Rig::new(3);
    let (arr, data) = filled(&rig, "raid0", seed);
    let new = rig.add();
    arr.takeover(Level::Raid4, vec![new]).unwrap();
    arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    (rig, arr, data)
}

fn labelled(m: &MemMember) -> bool {
    mosaic_array::Superblock::read_from(m as &dyn Member).is_ok()
}

#[test]
fn raid4_drops_its_parity_member_to_raid0_even_when_that_member_failed() {
    let (rig, arr, data) = raid4_from_raid0(20);
    let rep = arr.takeover_dropping(Level::Raid0, 3).unwrap();
    assert_eq!((rep.to.as_str(), rep.members, rep.dropped.len()), ("raid0", 3, 1));
    assert_eq!((arr.geometry().level, arr.geometry().members), (Level::Raid0, 3));
    assert!(read_all(&arr) == data);
    assert!(!labelled(&rig.mems[3]), "the dropped drive's label is erased: free for any array");
    drop(arr);
    let arr = rig.open_first(3);
    assert_eq!((arr.geometry().level, arr.geometry().members), (Level::Raid0, 3));
    assert!(read_all(&arr) == data);
    // The parity drive died: the array becomes raid0 without it.
    let (_rig, arr, data) = raid4_from_raid0(21);
    arr.fail_member(3).unwrap();
    arr.takeover_dropping(Level::Raid0, 3).unwrap();
    assert!(read_all(&arr) == data);
    // A data member out is refused: raid0 could not read it.
    let (_rig, arr, _) = raid4_from_raid0(22);
    arr.fail_member(1).unwrap();
    let e = arr.takeover_dropping(Level::Raid0, 3).unwrap_err().to_string();
    assert!(e.contains("member(s) [1], which the array keeps, are not in service"), "{e}");
}

#[test]
fn a_mirror_keeps_its_first_copies() {
    let mut rig = Rig::new(2);
    let (arr, data) = filled(&rig, "raid1", 23);
    let (a, b) = (rig.add(), rig.add());
    arr.takeover(Level::Raid1, vec![a, b]).unwrap();
    arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    arr.set_write_mostly(&[1, 3]).unwrap();
    let rep = arr.takeover_dropping(Level::Raid1, 2).unwrap();
    assert_eq!(rep.dropped.len(), 2);
    assert_eq!(arr.write_mostly(), vec![1], "write-mostly slots past the end go with them");
    assert!(!labelled(&rig.mems[2]) && !labelled(&rig.mems[3]));
    arr.fail_member(0).unwrap();
    assert!(read_all(&arr) == data, "member 1 alone");
    let e = arr.takeover_dropping(Level::Raid1, 1).unwrap_err().to_string();
    assert!(e.contains("can keep 2 to 1"), "{e}");
}

#[test]
fn a_power_cut_anywhere_in_dropping_a_member_loses_nothing() {
    let (mut old, mut new) = (0, 0);
    for cut in 0..8 {
        let (rig, arr, data) = raid4_from_raid0(30 + cut as u64);
        rig.budget.store(cut, Ordering::SeqCst);
        let _ = arr.takeover_dropping(Level::Raid0, 3);
        drop(arr); // power off
        // With its label the parity drive is still a member; without it
        // the first three are raid4 missing its parity, or raid0.
        let arr = if labelled(&rig.mems[3]) { rig.open() } else { rig.open_first(3) };
        assert!(read_all(&arr) == data, "cut after {cut}");
        if arr.geometry().level == Level::Raid4 {
            old += 1;
            arr.takeover_dropping(Level::Raid0, 3).unwrap();
            assert!(read_all(&arr) == data, "cut after {cut}, finished");
        } else {
            new += 1;
        }
        assert_eq!(arr.geometry().level, Level::Raid0);
    }
    assert!(old > 0 && new > 0, "cuts on both sides: {old} old, {new} new");
}
