//! Crash consistency: a power cut at a random device write, then reopen.
//!
//! Every member and the journal share one budget of device writes; once it
//! is spent, writes are silently lost (as a drive's volatile cache is at a
//! power cut) and the array is dropped without closing.  Reopening from
//! what reached the "platters" must give back every acknowledged write,
//! the write in flight wholly or not at all, a clean scrub, and correct
//! bytes everywhere even after a member then fails: no write hole.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_array::{Array, CreateOptions, DATA_OFFSET};
use mosaic_core::Level;
use mosaic_dev::{MemMember, Member, PowerCut};

use crate::common;
use common::{check, read_all, write_until_cut, Outcome};

struct Rig {
    mems: Vec<Arc<MemMember>>,
    journal: Option<Arc<MemMember>>,
    budget: Arc<AtomicI64>,
}

const UNIT: u64 = 4096;
const STRIPES: u64 = 32;

fn rig(level: &str, n: usize, journaled: bool) -> (Rig, Array) {
    let size = DATA_OFFSET + UNIT * STRIPES;
    let mems: Vec<Arc<MemMember>> = (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), size))).collect();
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let wrap = |m: &Arc<MemMember>| (Arc::new(PowerCut::new(m.clone(), budget.clone())) as Arc<dyn Member>, m.describe());
    let level: Level = level.parse().unwrap();
    let o = CreateOptions { level, members: Some(n), member_size: None, unit: UNIT, block: 4096, force: true, assume_clean: true };
    // A small journal (1 MiB) so the runs wrap it and checkpoint.
    let journal = journaled.then(|| Arc::new(MemMember::new("journal", 1 << 20)));
    let arr = Array::create_with_journal(mems.iter().map(wrap).collect(), &o, true, journal.as_ref().map(wrap)).unwrap();
    (Rig { mems, journal, budget }, arr)
}

fn fill(rng: &mut ChaCha8Rng, len: u64) -> Vec<u8> {
    (0..len).map(|_| rng.gen()).collect()
}

fn crash_run(rig: &Rig, arr: Array, seed: u64, cut_after: i64) -> Outcome {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let cap = arr.capacity();
    rig.budget.store(cut_after, Ordering::SeqCst);
    let o = write_until_cut(&rig.budget, cap, &mut rng, 400, 6, |off, d| arr.write(off, d).unwrap());
    // Crash: no close, nothing more reaches the members.
    drop(arr);
    o
}

fn reopen(rig: &Rig) -> Array {
    reopen_without(rig, None)
}

/// Reopen with member `missing` gone (it died with the power cut).
fn reopen_without(rig: &Rig, missing: Option<usize>) -> Array {
    let ms: Vec<Arc<dyn Member>> =
        rig.mems.iter().enumerate().filter(|(i, _)| Some(*i) != missing).map(|(_, m)| m.clone() as Arc<dyn Member>).collect();
    Array::open_members_with_journal(ms, true, rig.journal.clone().map(|j| j as Arc<dyn Member>)).unwrap()
}

/// Returns how many journal records the reopen replayed.
fn journaled_case(level: &str, n: usize, seed: u64) -> u64 {
    let (rig, arr) = rig(level, n, true);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    // Each write is a handful of device writes: cut somewhere in the run.
    let cut = rng.gen_range(1..1500);
    let o = crash_run(&rig, arr, seed, cut);
    if seed % 3 == 2 {
        // The crash also took a member: replay skips it, and every block,
        // its own included, reads back right from the survivors.
        let gone = rng.gen_range(0..n);
        let arr = reopen_without(&rig, Some(gone));
        check(&read_all(&arr), &o, &format!("{level} seed {seed} cut {cut}, member {gone} lost in the crash"));
        return arr.info().journal_replayed.map(|r| r.records).unwrap_or(0);
    }
    let arr = reopen(&rig);
    let what = format!("{level} seed {seed} cut {cut}");
    assert!(!arr.opened_dirty(), "{what}: the journal replay leaves nothing to resync");
    check(&read_all(&arr), &o, &what);
    let s = arr.scrub(false, &|_, _| {}).unwrap();
    assert!(s.mismatched_stripes.is_empty(), "{what}: scrub found {:?}", s.mismatched_stripes);
    // A member failure after the crash reconstructs every block correctly.
    let victim = rng.gen_range(0..n);
    arr.fail_member(victim).unwrap();
    check(&read_all(&arr), &o, &format!("{what}, member {victim} failed"));
    arr.info().journal_replayed.map(|r| r.records).unwrap_or(0)
}

#[test]
fn power_cut_with_journal_raid5() {
    let replayed: u64 = (0..40).map(|seed| journaled_case("raid5", 5, seed)).sum();
    assert!(replayed > 0, "the cuts must leave records to replay");
}

#[test]
fn power_cut_with_journal_raid6_and_rs() {
    for seed in 0..20 {
        journaled_case("raid6", 6, seed);
        journaled_case("rs:3+2", 5, seed + 100);
    }
}

/// The same cuts without a journal do tear stripes (the test above would
/// catch a journal that did nothing).
#[test]
fn without_a_journal_the_write_hole_shows() {
    let mut torn = 0;
    for seed in 0..40 {
        let (rig, arr) = rig("raid5", 5, false);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
        let cut = rng.gen_range(1..1500);
        let _ = crash_run(&rig, arr, seed, cut);
        let arr = reopen(&rig);
        assert!(arr.opened_dirty(), "no journal: the crash leaves the array dirty");
        if !arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty() {
            torn += 1;
        }
    }
    assert!(torn > 0, "no run tore a stripe: the cut points are not exercising the hole");
}

/// A crash that tore a stripe of an array without a journal (the seed
/// whose cut tears one: the test above shows such cuts exist).
fn torn_unjournalled() -> Rig {
    for seed in 0..40 {
        let (rig, arr) = rig("raid5", 5, false);
        let cut = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed).gen_range(1..1500);
        let _ = crash_run(&rig, arr, seed, cut);
        let arr = reopen(&rig);
        if !arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty() {
            arr.close().unwrap();
            return rig;
        }
    }
    panic!("no cut tore a stripe");
}

/// Written and closed after the crash, the array still says it needs a
/// resync: a clean close records it clean only once a full repairing
/// scrub made code agree with data (before, the first clean close erased
/// the crash, and the torn stripe waited for a member failure).
#[test]
fn without_a_journal_the_array_stays_unclean_until_a_repairing_scrub() {
    let rig = torn_unjournalled();
    let arr = reopen(&rig);
    assert!(arr.opened_dirty());
    arr.write(0, &[7; 4096]).unwrap();
    arr.close().unwrap();
    drop(arr);
    let arr = reopen(&rig);
    assert!(arr.opened_dirty(), "written and closed after the crash, yet recorded clean");
    assert!(!arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty(), "the torn stripe is still there");
    // A scrub that only looks leaves it unclean too.
    arr.close().unwrap();
    drop(arr);
    let arr = reopen(&rig);
    assert!(arr.opened_dirty());
    arr.write(4096, &[8; 4096]).unwrap();
    let rep = arr.scrub(true, &|_, _| {}).unwrap();
    assert!(!rep.mismatched_stripes.is_empty());
    arr.close().unwrap();
    drop(arr);
    let arr = reopen(&rig);
    assert!(!arr.opened_dirty(), "repaired (with writes since open) and closed: clean");
    assert!(arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty());
}

/// A resync (a repairing scrub) interrupted part-way verified only the
/// stripes before it: the array stays unsynced, and a scrub started later
/// runs whole and records it clean.
#[test]
fn an_interrupted_resync_leaves_the_array_unsynced() {
    let rig = torn_unjournalled();
    let arr = reopen(&rig);
    assert!(arr.needs_resync());
    let rep = arr
        .scrub(true, &|done, _| {
            if done == 3 {
                arr.interrupt_scrub();
            }
        })
        .unwrap();
    assert!(rep.interrupted, "{rep:?}");
    assert_eq!((rep.stripes_checked, rep.unverified_stripes), (3, STRIPES - 3));
    assert!(arr.needs_resync() && arr.info().resync_needed);
    arr.close().unwrap();
    drop(arr);
    let arr = reopen(&rig);
    assert!(arr.opened_dirty(), "interrupted: not recorded clean");
    let rep = arr.scrub(true, &|_, _| {}).unwrap();
    assert!(!rep.interrupted && rep.stripes_checked == STRIPES && rep.unverified_stripes == 0, "{rep:?}");
    assert!(!arr.needs_resync());
    arr.close().unwrap();
    drop(arr);
    assert!(!reopen(&rig).opened_dirty());
}

/// md's "cannot start dirty degraded array": the crash of an array
/// without a journal also took a member, so the member's blocks could
/// only come from code the crash may have left wrong.  A writable open
/// is refused (and writes nothing); a read-only one works and says why.
#[test]
fn without_a_journal_a_dirty_degraded_array_is_not_opened_for_writing() {
    let torn = torn_unjournalled();
    let ms = |missing: usize| -> Vec<Arc<dyn Member>> {
        torn.mems.iter().enumerate().filter(|(i, _)| *i != missing).map(|(_, m)| m.clone() as Arc<dyn Member>).collect()
    };
    let before: Vec<Vec<u8>> = torn.mems.iter().map(|m| m.snapshot()).collect();
    let err = Array::open_members(ms(1), true).err().expect("a writable open of a dirty degraded array is refused").to_string();
    assert!(err.contains("not shut down cleanly") && err.contains("degraded") && err.contains("[1]") && err.contains("--start-dirty-degraded"), "{err}");
    assert!(torn.mems.iter().zip(&before).all(|(m, b)| m.snapshot() == *b), "the refusal wrote nothing");
    let ro = Array::open_members(ms(1), false).unwrap();
    assert!(ro.opened_dirty());
    assert_eq!(ro.unsynced_degraded(), vec![1]);
    let mut buf = vec![0u8; 4096];
    ro.read(0, &mut buf).unwrap();
    drop(ro);
    // Whole, the same array opens for writing (and is repaired); a mirror
    // is exempt (its copy is the data itself).
    let arr = reopen(&torn);
    assert!(arr.unsynced_degraded().is_empty());
    arr.scrub(true, &|_, _| {}).unwrap();
    arr.close().unwrap();
    drop(arr);
    let (rig1, arr) = rig("raid1", 3, false);
    let _ = crash_run(&rig1, arr, 1, 40);
    let ms: Vec<Arc<dyn Member>> = rig1.mems[1..].iter().map(|m| m.clone() as Arc<dyn Member>).collect();
    let arr = Array::open_members(ms, true).expect("a dirty degraded mirror opens");
    assert!(arr.opened_dirty());
    drop(arr);
    // raid4 without its parity member: no data block comes from code (a
    // raid0 taking a parity member is this array until it is rebuilt);
    // without a data member it is refused as any other.
    let (rig4, arr) = rig("raid4", 4, false);
    let _ = crash_run(&rig4, arr, 1, 40);
    let without = |missing: usize| -> Vec<Arc<dyn Member>> {
        rig4.mems.iter().enumerate().filter(|(i, _)| *i != missing).map(|(_, m)| m.clone() as Arc<dyn Member>).collect()
    };
    let err = Array::open_members(without(1), true).err().expect("a data member missing: refused").to_string();
    assert!(err.contains("[1]"), "{err}");
    let arr = Array::open_members(without(3), true).expect("the parity member missing: it opens");
    assert!(arr.opened_dirty() && arr.unsynced_degraded().is_empty());
}

#[test]
fn journal_wraps_and_reopens_clean() {
    let (rig, arr) = rig("raid5", 5, true);
    let cap = arr.capacity();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mut model = vec![0u8; cap as usize];
    for _ in 0..600 {
        let off = rng.gen_range(0..cap / 4096) * 4096;
        let data = fill(&mut rng, 4096);
        arr.write(off, &data).unwrap();
        model[off as usize..off as usize + 4096].copy_from_slice(&data);
    }
    let j = arr.journal().unwrap();
    assert!(j.checkpoints.load(Ordering::Relaxed) > 0, "600 records of 8 KiB wrap a 1 MiB journal");
    assert!(j.syncs.load(Ordering::Relaxed) > 0);
    arr.close().unwrap();
    drop(arr);
    let arr = reopen(&rig);
    assert_eq!(read_all(&arr), model);
    // A missing journal is a clear error for writing, not for reading.
    let ms: Vec<Arc<dyn Member>> = rig.mems.iter().map(|m| m.clone() as Arc<dyn Member>).collect();
    drop(arr);
    let e = Array::open_members(ms.clone(), true).err().unwrap().to_string();
    assert!(e.contains("needs its write-ahead journal"), "{e}");
    assert_eq!(read_all(&Array::open_members(ms, false).unwrap()), model);
}
