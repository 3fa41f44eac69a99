//! Grow: add members and restripe, online and through power cuts.
//!
//! A power cut at any device write of a grow (the critical section's copy
//! included), then reopen and resume, must give back every byte, a clean
//! scrub and the new capacity.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_array::grow::GrowOptions;
use mosaic_array::{Array, CreateOptions, DATA_OFFSET};
use mosaic_core::Level;
use mosaic_dev::{MemMember, Member, PowerCut};

const UNIT: u64 = 4096;
const STRIPES: u64 = 64;

struct Rig {
    mems: Vec<Arc<MemMember>>,
    journal: Option<Arc<MemMember>>,
    budget: Arc<AtomicI64>,
    unit: u64,
}

impl Rig {
    fn new(n: usize, added: usize, journaled: bool) -> Rig {
        Rig::sized(n, added, journaled, UNIT, STRIPES)
    }
    fn sized(n: usize, added: usize, journaled: bool, unit: u64, stripes: u64) -> Rig {
        let size = DATA_OFFSET + unit * stripes;
        Rig {
            mems: (0..n + added).map(|i| Arc::new(MemMember::new(format!("m{i}"), size))).collect(),
            journal: journaled.then(|| Arc::new(MemMember::new("journal", 1 << 20))),
            budget: Arc::new(AtomicI64::new(i64::MAX)),
            unit,
        }
    }
    fn wrap(&self, m: &Arc<MemMember>) -> (Arc<dyn Member>, String) {
        (Arc::new(PowerCut::new(m.clone(), self.budget.clone())) as Arc<dyn Member>, m.describe())
    }
    fn create(&self, level: &str, n: usize) -> Array {
        let level: Level = level.parse().unwrap();
        let o = CreateOptions { level, members: Some(n), member_size: None, unit: self.unit, block: 4096, force: true, assume_clean: true };
        let j = self.journal.as_ref().map(|j| self.wrap(j));
        Array::create_with_journal(self.mems[..n].iter().map(|m| self.wrap(m)).collect(), &o, true, j).unwrap()
    }
    fn added(&self, n: usize) -> Vec<(Arc<dyn Member>, String)> {
        self.mems[n..].iter().map(|m| self.wrap(m)).collect()
    }
    /// Reopen from what reached the members (all of them, new ones too).
    /// Create a `level` array of `n` members holding random bytes, then
    /// grow it onto the rest with the power cut after `cut` device writes
    /// (in `grow_start`, it never began, or began); the bytes.
    fn grow_cut_off(&self, level: &str, n: usize, cut: i64) -> Vec<u8> {
        let arr = self.create(level, n);
        let data = random(cut as u64, arr.capacity());
        arr.write(0, &data).unwrap();
        self.budget.store(cut, Ordering::SeqCst);
        if arr.grow_start(self.added(n)).is_ok() {
            let _ = arr.grow_continue(&|_, _| {}, GrowOptions::default());
        }
        drop(arr); // power off: nothing more reaches the members
        data
    }
    fn reopen(&self) -> Array {
        self.budget.store(i64::MAX, Ordering::SeqCst);
        let ms: Vec<Arc<dyn Member>> = self.mems.iter().map(|m| self.wrap(m).0).collect();
        Array::open_members_with_journal(ms, true, self.journal.as_ref().map(|j| self.wrap(j).0)).unwrap()
    }
}

fn random(seed: u64, len: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..len).map(|_| rng.gen()).collect()
}

fn read_all(arr: &Array, len: u64) -> Vec<u8> {
    let mut buf = vec![0u8; len as usize];
    arr.read(0, &mut buf).unwrap();
    buf
}

fn assert_grown(arr: &Array, level: &str, n: usize, data: &[u8]) {
    assert_eq!(arr.grow_pending(), None);
    let g = arr.geometry();
    assert_eq!((g.members, g.level.to_string()), (n, level.to_string()));
    assert_eq!(arr.capacity(), g.k as u64 * UNIT * STRIPES, "the capacity of the new geometry");
    assert!(read_all(arr, data.len() as u64) == data, "the old data reads back after the grow");
    let rest = read_all(arr, arr.capacity());
    assert!(rest[data.len()..].iter().all(|&b| b == 0), "the new space reads zeros");
    let rep = arr.scrub(false, &|_, _| {}).unwrap();
    assert_eq!(rep.mismatched, 0, "every stripe's code agrees after the grow");
}

#[test]
fn grows_every_level_and_keeps_the_bytes() {
    for (level, n, added, grown) in [("raid5", 4, 2, "raid5"), ("raid5", 3, 1, "raid5"), ("raid0", 2, 3, "raid0"), ("raid6", 4, 1, "raid6"), ("rs:3+2", 5, 2, "rs:5+2"), ("raid4", 3, 1, "raid4")] {
        let rig = Rig::new(n, added, true);
        let arr = rig.create(level, n);
        let data = random(n as u64, arr.capacity());
        arr.write(0, &data).unwrap();
        arr.grow_start(rig.added(n)).unwrap();
        assert_eq!(arr.capacity(), data.len() as u64, "{level}: the capacity stays until the grow is done");
        let steps = std::sync::Mutex::new(Vec::new());
        let rep = arr.grow_continue(&|d, t| steps.lock().unwrap().push((d, t)), GrowOptions::default()).unwrap();
        let steps = steps.into_inner().unwrap();
        assert!(steps.windows(2).all(|w| w[0].0 <= w[1].0) && steps.last() == Some(&(STRIPES, STRIPES)), "{level}: progress {steps:?}");
        assert_eq!((rep.stripes, rep.resumed), (STRIPES, false));
        assert_grown(&arr, grown, n + added, &data);
        drop(arr);
        assert_grown(&rig.reopen(), grown, n + added, &data);
    }
}

#[test]
fn a_power_cut_anywhere_in_a_grow_loses_nothing() {
    // Device writes of a whole raid5 4 -> 6 grow of 64 stripes: about
    // 64 x 6 units + superblocks; cut at points spread over it, the
    // critical section's first writes included.
    let mut cuts: Vec<i64> = (0..24).collect();
    cuts.extend((1..20).map(|i| 24 + i * 23));
    for cut in cuts {
        let rig = Rig::new(4, 2, true);
        let data = rig.grow_cut_off("raid5", 4, cut);
        let arr = rig.reopen();
        assert!(read_all(&arr, data.len() as u64) == data, "cut after {cut} writes: the bytes before resuming");
        match arr.grow_pending() {
            Some(_) => {
                arr.grow_continue(&|_, _| {}, GrowOptions::default()).unwrap();
                assert_grown(&arr, "raid5", 6, &data);
            }
            None if arr.geometry().members == 6 => assert_grown(&arr, "raid5", 6, &data),
            None => {
                // The grow never reached the superblocks: start it again.
                drop(arr);
                let arr = rig.reopen();
                assert_eq!(arr.geometry().members, 4, "cut after {cut}");
                arr.grow_start(rig.added(4)).unwrap();
                arr.grow_continue(&|_, _| {}, GrowOptions::default()).unwrap();
                assert_grown(&arr, "raid5", 6, &data);
            }
        }
    }
}

#[test]
fn clients_read_and_write_while_the_array_grows() {
    let rig = Rig::new(4, 2, true);
    let arr = Arc::new(rig.create("raid5", 4));
    let cap = arr.capacity();
    let mut model = random(7, cap);
    arr.write(0, &model).unwrap();
    arr.grow_start(rig.added(4)).unwrap();
    let writer = {
        let arr = arr.clone();
        std::thread::spawn(move || {
            let mut rng = ChaCha8Rng::seed_from_u64(9);
            let mut done = Vec::new();
            while arr.grow_pending().is_some() || done.len() < 50 {
                let blocks = rng.gen_range(1..=8u64);
                let off = rng.gen_range(0..=(cap / 4096 - blocks)) * 4096;
                let d: Vec<u8> = (0..blocks * 4096).map(|_| rng.gen()).collect();
                arr.write(off, &d).unwrap();
                let mut back = vec![0u8; d.len()];
                arr.read(off, &mut back).unwrap();
                assert!(back == d, "a write during the grow reads back");
                done.push((off, d));
            }
            done
        })
    };
    arr.grow_continue(&|_, _| std::thread::yield_now(), GrowOptions::default()).unwrap();
    for (off, d) in writer.join().unwrap() {
        model[off as usize..off as usize + d.len()].copy_from_slice(&d);
    }
    assert_grown(&arr, "raid5", 6, &model);
}

#[test]
fn a_grow_is_refused_with_a_reason() {
    let rig = Rig::new(4, 1, false);
    let arr = rig.create("raid5", 4);
    arr.fail_member(1).unwrap();
    let e = arr.grow_start(rig.added(4)).unwrap_err().to_string();
    assert!(e.contains("degraded"), "{e}");
    let rig = Rig::new(2, 1, false);
    let arr = rig.create("raid1", 2);
    let e = arr.grow_start(rig.added(2)).unwrap_err().to_string();
    assert!(e.contains("cannot grow"), "{e}");
    let rig = Rig::new(3, 1, false);
    let arr = rig.create("raid5", 3);
    arr.grow_start(rig.added(3)).unwrap();
    let e = arr.scrub(false, &|_, _| {}).unwrap_err().to_string();
    assert!(e.contains("grow is in progress"), "{e}");
}

impl Rig {
    /// Open from what reached the members, without the members `missing`.
    fn open(&self, writable: bool, missing: &[usize]) -> Array {
        self.budget.store(i64::MAX, Ordering::SeqCst);
        let ms = self.mems.iter().enumerate().filter(|(i, _)| !missing.contains(i)).map(|(_, m)| self.wrap(m).0).collect();
        // A cut without a journal and a member lost: a dirty degraded
        // array, started as md's start_dirty_degraded would (the grow's
        // own copy and position are what these tests check).
        Array::open_members_with(ms, writable, self.journal.as_ref().map(|j| self.wrap(j).0), true).unwrap()
    }
}

/// A raid5 4 -> 5 grow cut off after `cut` device writes; the data
/// written before it.  `Some` only when the cut left the grow in its
/// critical section: the first stripes' copy saved, none restriped.
fn cut_in_critical_section(rig: &Rig, cut: i64) -> Option<Vec<u8>> {
    let data = rig.grow_cut_off("raid5", 4, cut);
    let ro = rig.open(false, &[]);
    let r = ro.superblock().reshape;
    r.is_some_and(|r| r.pos == 0 && r.backup_crc.is_some()).then_some(data)
}

#[test]
fn a_grow_cut_off_in_its_critical_section_is_finished_at_open() {
    // The critical section rewrites the first stripes in place: a cut
    // there leaves rows that neither layout reads whole, so until it is
    // finished, only the saved copy holds those bytes.
    let mut hit = 0;
    for journaled in [false, true] {
        for cut in 0..40 {
            let rig = Rig::new(4, 1, journaled);
            let Some(data) = cut_in_critical_section(&rig, cut) else { continue };
            hit += 1;
            let what = format!("journaled {journaled}, cut after {cut} writes");
            {
                let ro = rig.open(false, &[]);
                assert!(read_all(&ro, data.len() as u64) == data, "{what}: a read-only open reads the saved copy");
                assert!(ro.open_warnings().iter().any(|w| w.contains("saved copy serves reads")), "{what}: {:?}", ro.open_warnings());
                assert!(ro.grow_pending().is_some_and(|(pos, _)| pos == 0), "{what}: a read-only open writes nothing");
            }
            let arr = rig.open(true, &[]);
            assert!(arr.open_warnings().iter().any(|w| w.contains("restored from their saved copy")), "{what}: {:?}", arr.open_warnings());
            assert!(arr.grow_pending().is_some_and(|(pos, _)| pos > 0), "{what}: the writable open finished the critical section");
            assert!(read_all(&arr, data.len() as u64) == data, "{what}: the bytes before the resume");
            // A write there now is never undone by the resumed grow.
            let mut model = data.clone();
            let d = random(99, 2 * UNIT);
            arr.write(UNIT, &d).unwrap();
            model[UNIT as usize..3 * UNIT as usize].copy_from_slice(&d);
            arr.grow_continue(&|_, _| {}, GrowOptions::default()).unwrap();
            assert_grown(&arr, "raid5", 5, &model);
        }
    }
    assert!(hit >= 4, "the cuts reached the critical section {hit} times");
}

/// A cut in the critical section that the old members recorded (an
/// earlier one rolls the grow back without the new member: nothing was
/// restriped), on a raid5 4 -> 5.
fn recorded_cut_in_critical_section() -> (Rig, Vec<u8>) {
    (0..40)
        .find_map(|cut| {
            let rig = Rig::new(4, 1, false);
            let d = cut_in_critical_section(&rig, cut)?;
            let without = rig.open(false, &[4]).superblock().reshape;
            without.is_some_and(|r| r.backup_crc.is_some()).then_some((rig, d))
        })
        .expect("a cut in the critical section")
}

#[test]
fn a_new_member_lost_in_the_critical_section_loses_nothing() {
    // The copy on the new member is gone; the second one, spread over the
    // old members' reserved bytes, restores the first stripes.
    let (rig, data) = recorded_cut_in_critical_section();
    {
        let ro = rig.open(false, &[4]);
        assert!(read_all(&ro, data.len() as u64) == data, "read-only, from the second copy");
    }
    let arr = rig.open(true, &[4]);
    assert!(arr.open_warnings().iter().any(|w| w.contains("restored from their saved copy")), "{:?}", arr.open_warnings());
    assert!(read_all(&arr, data.len() as u64) == data, "the bytes after the restore, the new member missing");
    arr.grow_continue(&|_, _| {}, GrowOptions::default()).unwrap();
    assert_eq!(arr.grow_pending(), None);
    assert!(read_all(&arr, data.len() as u64) == data, "the bytes after the grow, degraded");
}

#[test]
fn with_no_whole_copy_left_the_first_stripes_are_unreadable_not_wrong() {
    let (rig, data) = recorded_cut_in_critical_section();
    rig.mems[0].corrupt(mosaic_format::label::LABEL_AREA, 64); // old member 0's piece of the second copy
    for writable in [false, true] {
        let arr = rig.open(writable, &[4]);
        // The critical section: ⌈D/(D'−D)⌉ = 3 new stripes of 4 units.
        let len = (arr.geometry().stripe_data_bytes() * 3) as usize;
        let w = arr.open_warnings().join("; ");
        assert!(w.contains("cannot be read") && w.contains("member 4 (new) is missing") && w.contains("CRC mismatch"), "{w}");
        let mut b = vec![0u8; UNIT as usize];
        let e = arr.read(0, &mut b).unwrap_err().to_string();
        assert!(e.contains("cannot be read") && e.contains("no copy of the first stripes"), "{e}");
        // Past the critical section the old layout still serves.
        let mut rest = vec![0u8; data.len() - len];
        arr.read(len as u64, &mut rest).unwrap();
        assert!(rest == data[len..], "writable {writable}: the bytes past the first stripes");
        if writable {
            let e = arr.write(0, &b).unwrap_err().to_string();
            assert!(e.contains("cannot be written"), "{e}");
        }
    }
}

/// A grow whose critical section is too large for a second copy in the
/// old members' reserved bytes (raid5 4 -> 5 with 512 KiB units: 3
/// stripes of 4 units, 6 MiB, 1.5 MiB a member against 896 KiB) is refused without a backup file, as
/// mdadm's is.  With one, a power cut in the critical section and the new
/// member lost with it lose nothing: the file restores the first stripes,
/// and it is removed when the grow ends.
#[test]
fn a_critical_section_too_large_for_a_second_copy_takes_a_backup_file() {
    const U: u64 = 512 << 10;
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("grow-backup");
    let critical = 3 * 4 * U as usize;
    // Paused after its first step: the file holds the first stripes' data.
    {
        let rig = Rig::sized(4, 1, false, U, 16);
        let arr = rig.create("raid5", 4);
        let data = random(7, arr.capacity());
        arr.write(0, &data).unwrap();
        std::fs::write(&file, b"mine").unwrap();
        let e = arr.grow_start_with(rig.added(4), Some(&file)).unwrap_err().to_string();
        assert!(e.contains("grow-backup exists already: give a new path"), "{e}");
        assert_eq!(std::fs::read(&file).unwrap(), b"mine", "an existing file is never written over");
        std::fs::remove_file(&file).unwrap();
        arr.grow_start_with(rig.added(4), Some(&file)).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let rep = arr.grow_continue(&|_, _| stop.store(true, Ordering::SeqCst), GrowOptions { stop: Some(stop.clone()), ..GrowOptions::default() }).unwrap();
        assert!(rep.paused && arr.grow_pending().is_some_and(|(pos, _)| pos > 0), "{rep:?}");
        assert!(std::fs::read(&file).unwrap() == data[..critical], "the file holds the critical section's data");
        arr.grow_continue(&|_, _| {}, GrowOptions::default()).unwrap();
        assert!(!file.exists(), "the grow's end removes the file");
        assert_eq!((arr.grow_pending(), arr.geometry().members, arr.capacity()), (None, 5, 4 * U * 16));
        assert!(read_all(&arr, data.len() as u64) == data, "the bytes after the grow");
        assert_eq!(arr.scrub(false, &|_, _| {}).unwrap().mismatched, 0);
    }
    let mut cut_hit = false;
    for cut in 0..24 {
        let rig = Rig::sized(4, 1, false, U, 16);
        let arr = rig.create("raid5", 4);
        let data = random(cut as u64, arr.capacity());
        arr.write(0, &data).unwrap();
        let e = arr.grow_start(rig.added(4)).unwrap_err().to_string();
        assert!(e.contains("first 6291456 bytes") && e.contains("needs 1572864 bytes a member, more than the 917504") && e.contains("--backup-file"), "{e}");
        assert_eq!(arr.grow_pending(), None, "a refused grow starts nothing");
        let e = arr.grow_start_with(rig.added(4), Some(std::path::Path::new("relative"))).unwrap_err().to_string();
        assert!(e.contains("must be an absolute path"), "{e}");
        rig.budget.store(cut, Ordering::SeqCst);
        if arr.grow_start_with(rig.added(4), Some(&file)).is_ok() {
            let _ = arr.grow_continue(&|_, _| {}, GrowOptions::default());
        }
        drop(arr);
        // The process ran on past the power cut (writes after it are
        // dropped): its unlink of the file at the grow's end would not
        // have happened either.
        if !file.exists() {
            std::fs::write(&file, &data[..critical]).unwrap();
        }
        let sb = rig.open(false, &[]).superblock();
        let in_section = sb.reshape.as_ref().is_some_and(|r| r.pos == 0 && r.backup_crc.is_some());
        let recorded = rig.open(false, &[4]).superblock().reshape.is_some_and(|r| r.backup_crc.is_some());
        if !(in_section && recorded) {
            let _ = std::fs::remove_file(&file);
            continue;
        }
        cut_hit = true;
        assert_eq!(sb.reshape.unwrap().backup_file.as_deref(), file.to_str(), "the superblocks name the file");
        {
            let ro = rig.open(false, &[4]);
            assert!(read_all(&ro, data.len() as u64) == data, "cut {cut}: read-only, the new member lost: from the backup file");
        }
        let arr = rig.open(true, &[4]);
        assert!(arr.open_warnings().iter().any(|w| w.contains("restored from their saved copy")), "{:?}", arr.open_warnings());
        arr.grow_continue(&|_, _| {}, GrowOptions::default()).unwrap();
        assert!(!file.exists(), "cut {cut}: the grow's end removes the file");
        assert!(read_all(&arr, data.len() as u64) == data, "cut {cut}: the bytes after the grow, degraded");
        // Damaged, the file restores nothing wrong.
        let rig = Rig::sized(4, 1, false, U, 16);
        let arr = rig.create("raid5", 4);
        arr.write(0, &data).unwrap();
        rig.budget.store(cut, Ordering::SeqCst);
        let _ = arr.grow_start_with(rig.added(4), Some(&file)).map(|_| arr.grow_continue(&|_, _| {}, GrowOptions::default()));
        drop(arr);
        let mut b = data[..critical].to_vec();
        b[100] ^= 1;
        std::fs::write(&file, b).unwrap();
        let ro = rig.open(false, &[4]);
        let w = ro.open_warnings().join("; ");
        assert!(w.contains("cannot be read") && w.contains("is damaged (CRC mismatch)"), "{w}");
        let mut one = vec![0u8; 4096];
        assert!(ro.read(0, &mut one).is_err(), "unreadable, never wrong");
        break;
    }
    assert!(cut_hit, "no cut landed in the critical section");
}
