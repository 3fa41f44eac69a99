//! Grow in size (md's `--grow --size`): every member's drive replaced by a
//! larger one, the array takes more of each.  The old bytes stay where
//! they are, the new stripes read zeros with their code right (a failed
//! member is rebuilt from it), and a power cut anywhere leaves the old
//! size or the new one, never a mix.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use mosaic_array::superblock::Owner;
use mosaic_array::{Array, CreateOptions, DATA_OFFSET};
use mosaic_core::Level;
use mosaic_dev::{MemMember, Member, PowerCut};

use crate::common::{random, read_all};

const UNIT: u64 = 4096;
/// Rows before and after: the drives grow from 16 to 48 units of data.
const ROWS: u64 = 16;
const GROWN: u64 = 48;

struct Rig {
    mems: Vec<Arc<MemMember>>,
    journal: Arc<MemMember>,
    budget: Arc<AtomicI64>,
}

impl Rig {
    fn new(n: usize) -> Rig {
        Rig {
            mems: (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + ROWS * UNIT))).collect(),
            journal: Arc::new(MemMember::new("journal", 1 << 20)),
            budget: Arc::new(AtomicI64::new(i64::MAX)),
        }
    }
    fn wrap(&self, m: &Arc<MemMember>) -> Arc<dyn Member> {
        Arc::new(PowerCut::new(m.clone(), self.budget.clone()))
    }
    fn create(&self, level: &str) -> Array {
        let o = CreateOptions { level: level.parse::<Level>().unwrap(), members: Some(self.mems.len()), member_size: None, unit: UNIT, block: 4096, force: true, assume_clean: true };
        let ms = self.mems.iter().map(|m| (self.wrap(m), m.describe())).collect();
        Array::create_with_journal(ms, &o, true, Some((self.wrap(&self.journal), "journal".into()))).unwrap()
    }
    /// Every member's drive swapped for one of `rows` units of data,
    /// holding its bytes and junk after them (a used drive).
    fn larger_drives(&self, rows: u64) {
        for m in &self.mems {
            let mut b = m.snapshot();
            b.resize((DATA_OFFSET + rows * UNIT) as usize, 0xee);
            m.restore(b);
        }
    }
    fn open(&self) -> Array {
        self.budget.store(i64::MAX, Ordering::SeqCst);
        Array::open_members_with_journal(self.mems.iter().map(|m| self.wrap(m)).collect(), true, Some(self.wrap(&self.journal))).unwrap()
    }
}

/// `arr` holds `data` and then zeros up to its capacity, which is that of
/// `rows` rows, and every stripe's code agrees.
fn assert_holds(arr: &Array, data: &[u8], rows: u64, what: &str) {
    let g = arr.geometry();
    assert_eq!((g.stripes, arr.capacity()), (rows, rows * g.k as u64 * UNIT), "{what}: the size");
    let all = read_all(arr);
    assert!(all[..data.len()] == *data, "{what}: the old bytes read back");
    assert!(all[data.len()..].iter().all(|&b| b == 0), "{what}: the new stripes read zeros");
    assert_eq!(arr.scrub(false, &|_, _| {}).unwrap().mismatched, 0, "{what}: every stripe's code agrees");
}

#[test]
fn a_size_grow_keeps_the_bytes_and_writes_new_stripes_whose_code_rebuilds_a_member() {
    for (level, n) in [("raid5", 5), ("raid6", 6), ("rs:3+2", 5), ("raid1", 3), ("raid4", 4), ("raid0", 3)] {
        let rig = Rig::new(n);
        let arr = rig.create(level);
        let data = random(n as u64, arr.capacity());
        arr.write(0, &data).unwrap();
        drop(arr);
        rig.larger_drives(GROWN);
        let arr = rig.open();
        assert_eq!(arr.geometry().stripes, ROWS, "{level}: larger drives alone change nothing");
        let (before, mb) = arr.counters();
        let steps = std::sync::Mutex::new(Vec::new());
        let rep = arr.grow_size(None, &|d, t| steps.lock().unwrap().push((d, t))).unwrap();
        let (after, ma) = arr.counters();
        let g = arr.geometry();
        assert_eq!((rep.stripes_added, rep.member_data_size, rep.capacity_before), (GROWN - ROWS, GROWN * UNIT, data.len() as u64), "{level}");
        assert_eq!(steps.into_inner().unwrap().last(), Some(&(GROWN - ROWS, GROWN - ROWS)), "{level}: progress to the end");
        // Each new stripe written whole, once: its unit on every member,
        // nothing read.
        assert_eq!(after.device_reads() - before.device_reads(), 0, "{level}: a size grow reads nothing");
        assert_eq!(rep.bytes_written, (GROWN - ROWS) * UNIT * n as u64, "{level}");
        let written: Vec<u64> = ma.iter().zip(&mb).map(|(a, b)| a.write_bytes - b.write_bytes).collect();
        assert_eq!(written, vec![(GROWN - ROWS) * UNIT; n], "{level}: each member's new units, once");
        assert_holds(&arr, &data, GROWN, level);
        // New bytes across the old end and in the new stripes.
        let more = random(100 + n as u64, 5 * UNIT * g.k as u64);
        let at = data.len() as u64 - UNIT;
        arr.write(at, &more).unwrap();
        let mut want = data.clone();
        want.truncate(at as usize);
        want.extend_from_slice(&more);
        drop(arr);
        let arr = rig.open();
        assert_holds(&arr, &want, GROWN, &format!("{level} reopened"));
        if g.m > 0 && level != "raid0" {
            arr.fail_member(1).unwrap();
            assert!(read_all(&arr)[..want.len()] == *want, "{level}: member 1 rebuilt from the new stripes' code");
        }
    }
}

#[test]
fn a_power_cut_anywhere_in_a_size_grow_leaves_the_old_size_or_the_new() {
    // Device writes of a raid5 5-member grow of 32 stripes: one merged
    // write of zeros a member, then the superblocks' two rounds (a lost
    // write is dropped, as power off drops it); cut at each.
    let (mut old, mut new) = (0, 0);
    for cut in 0..20 {
        let rig = Rig::new(5);
        let arr = rig.create("raid5");
        let data = random(cut as u64, arr.capacity());
        arr.write(0, &data).unwrap();
        drop(arr);
        rig.larger_drives(GROWN);
        let arr = rig.open();
        rig.budget.store(cut, Ordering::SeqCst);
        let _ = arr.grow_size(None, &|_, _| {});
        drop(arr); // power off
        let arr = rig.open();
        if arr.geometry().stripes == ROWS {
            assert_holds(&arr, &data, ROWS, &format!("cut after {cut}, old size"));
            old += 1;
            // The same command again finishes it.
            arr.grow_size(None, &|_, _| {}).unwrap();
        } else {
            new += 1;
        }
        assert_holds(&arr, &data, GROWN, &format!("cut after {cut}, new size"));
    }
    assert!(old > 0 && new > 0, "cuts on both sides of the record: {old} old, {new} new");
}

#[test]
fn a_size_grow_says_why_it_is_refused() {
    let rig = Rig::new(5);
    let arr = rig.create("raid5");
    let e = arr.grow_size(None, &|_, _| {}).unwrap_err().to_string();
    assert!(e.starts_with("nothing to grow: each member gives 65536 bytes already, all its smallest drive (mem:m0) holds"), "{e}");
    drop(arr);
    rig.larger_drives(GROWN);
    // One drive left small: --size max grows to it; a size beyond names it.
    let mut b = rig.mems[3].snapshot();
    b.truncate((DATA_OFFSET + 32 * UNIT) as usize);
    rig.mems[3].restore(b);
    let arr = rig.open();
    let e = arr.grow_size(Some(40 * UNIT), &|_, _| {}).unwrap_err().to_string();
    assert_eq!(e, format!("mem:m3: too small for {} bytes a member: it holds {} after the array's {DATA_OFFSET}-byte header (replace it with a larger drive first)", 40 * UNIT, 32 * UNIT));
    let e = arr.grow_size(Some(8 * UNIT), &|_, _| {}).unwrap_err().to_string();
    assert_eq!(e, format!("--size {}: each member gives {} bytes already; a size grow takes more (shrinking is not supported)", 8 * UNIT, ROWS * UNIT));
    // A hot spare the grown members would not fit in.
    let spare: Arc<dyn Member> = Arc::new(MemMember::new("spare", DATA_OFFSET + ROWS * UNIT));
    arr.add_spare_with(spare, "spare").unwrap();
    let e = arr.grow_size(None, &|_, _| {}).unwrap_err().to_string();
    assert!(e.starts_with(&format!("hot spare spare: too small for the grown members: {} bytes, they need {}", DATA_OFFSET + ROWS * UNIT, DATA_OFFSET + 32 * UNIT)), "{e}");
    arr.remove_spare(std::path::Path::new("spare")).unwrap();
    // A write-intent bitmap (an array without a journal), sized for the
    // capacity: as mdadm asked, it goes first.
    let plain = Rig::new(5);
    let o = CreateOptions { level: Level::Raid5, members: Some(5), member_size: None, unit: UNIT, block: 4096, force: true, assume_clean: true };
    let b = Array::create_with_journal(plain.mems.iter().map(|m| (plain.wrap(m), m.describe())).collect(), &o, true, None).unwrap();
    b.set_bitmap(Some(UNIT)).unwrap();
    let e = b.grow_size(None, &|_, _| {}).unwrap_err().to_string();
    assert!(e.starts_with("the array has a write-intent bitmap, sized for its capacity: remove it first (mosaic bitmap -a ARRAY none)"), "{e}");
    // Degraded.
    arr.fail_member(2).unwrap();
    let e = arr.grow_size(None, &|_, _| {}).unwrap_err().to_string();
    assert_eq!(e, "the array is degraded: rebuild it before growing");
    assert_eq!(arr.geometry().stripes, ROWS, "nothing changed");
}

/// The refusals that need another kind of state: a grow by members in
/// progress, a paused hot replace, CBRO, an array inside another.
#[test]
fn a_size_grow_says_why_it_is_refused_mid_grow_mid_copy_for_cbro_and_inner_arrays() {
    // A grow by members in progress (on drives of 64 rows: a grow needs
    // room for its first steps' copy).
    let rig = Rig::new(5);
    rig.larger_drives(64);
    let arr = rig.create("raid5");
    let extra: Arc<dyn Member> = Arc::new(MemMember::new("m5", DATA_OFFSET + 64 * UNIT));
    arr.grow_start(vec![(extra, "m5".into())]).unwrap();
    let e = arr.grow_size(None, &|_, _| {}).unwrap_err().to_string();
    assert_eq!(e, "a grow is in progress: resume it first (mosaic grow -a ARRAY)");
    // A paused hot replace.
    let rig = Rig::new(5);
    let arr = rig.create("raid5");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let opts = mosaic_array::maint::RebuildOptions { stop: Some(stop), ..Default::default() };
    let rep = arr.replace_hot_with(1, Arc::new(MemMember::new("new", DATA_OFFSET + ROWS * UNIT)), "new", &|_, _| {}, opts).unwrap();
    assert!(arr.hot_paused().is_some(), "{rep:?}");
    let e = arr.grow_size(None, &|_, _| {}).unwrap_err().to_string();
    assert_eq!(e, "a hot replace of member 1 is paused: finish it first (mosaic replace --hot 1)");
    // CBRO.
    let rig = Rig::new(5);
    let o = CreateOptions { level: Level::Cbro { n: 3, k: 1, w: 2 }, members: Some(5), member_size: None, unit: UNIT, block: 4096, force: true, assume_clean: true };
    let arr = Array::create_with_journal(rig.mems.iter().map(|m| (rig.wrap(m), m.describe())).collect(), &o, true, None).unwrap();
    let e = arr.grow_size(None, &|_, _| {}).unwrap_err().to_string();
    assert_eq!(e, "a cbro array cannot grow in size: grow --size works on raid0, raid1, raid4, raid5, raid6 and rs arrays");
    // An array inside another.
    let rig = Rig::new(5);
    let arr = rig.create("raid5");
    let uuid = uuid::Uuid::new_v4();
    arr.set_owner(Owner { role: "the fast side of tier".into(), uuid }).unwrap();
    let e = arr.grow_size(None, &|_, _| {}).unwrap_err().to_string();
    assert_eq!(e, format!("this array is the fast side of tier {uuid}, whose layout fixes its size: it cannot grow by itself"));
}
