//! md's `resync_offset` for arrays without a write-intent bitmap: a
//! resync a stop cut off is recorded where it got to, and the next one
//! starts there, unless writes came after it and a crash followed.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mosaic_array::{Array, DATA_OFFSET};
use mosaic_core::Level;
use mosaic_dev::{MemMember, Member, PowerCut};

use crate::common::{mem, named, opts, pattern, U};

const STRIPES: u64 = 64;

/// A raid5 array of four RAM members behind a power cut sharing
/// `budget`, without a journal or a bitmap, left dirty by a cut after a
/// write.
fn crashed(budget: &Arc<AtomicI64>) -> Vec<Arc<MemMember>> {
    let mems: Vec<Arc<MemMember>> = (0..4).map(|i| mem(&format!("m{i}"), STRIPES)).collect();
    let cut: Vec<Arc<dyn Member>> = mems.iter().map(|m| Arc::new(PowerCut::new(m.clone(), budget.clone())) as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&cut), &opts(Level::Raid5, 4), true).unwrap();
    assert!(arr.info().bitmap.is_none());
    arr.write(0, &pattern(4096, 1)).unwrap();
    budget.store(0, Ordering::SeqCst);
    drop(arr);
    budget.store(i64::MAX, Ordering::SeqCst);
    mems
}

fn open(mems: &[Arc<MemMember>], budget: &Arc<AtomicI64>) -> Array {
    let ms: Vec<Arc<dyn Member>> = mems.iter().map(|m| Arc::new(PowerCut::new(m.clone(), budget.clone())) as Arc<dyn Member>).collect();
    Array::open_members(ms, true).unwrap()
}

/// Make stripe `s`'s parity disagree with its data, on the member.
fn spoil_parity(geo: &mosaic_core::Geometry, mems: &[Arc<MemMember>], s: u64) {
    let p = geo.member_of(s, geo.k);
    mems[p].write_at(&[0xa5; 512], DATA_OFFSET + s * U).unwrap();
}

/// A resync that `stop_at` stripes interrupt.
fn resync_until(arr: &Array, stop_at: u64) -> mosaic_array::ScrubReport {
    arr.resync(&|done, _| {
        if done == stop_at {
            arr.interrupt_scrub();
        }
    })
    .unwrap()
}

#[test]
fn an_interrupted_resync_goes_on_after_a_clean_close_where_it_stopped() {
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let mems = crashed(&budget);
    let arr = open(&mems, &budget);
    let geo = arr.geometry();
    spoil_parity(&geo, &mems, 10);
    let rep = resync_until(&arr, 20);
    assert!(rep.interrupted && rep.stripes_checked == 20 && rep.mismatched == 1, "{rep:?}");
    assert_eq!((arr.info().resync_needed, arr.info().resync_from), (true, 20));
    arr.close().unwrap();
    drop(arr);
    assert_eq!(sb(&mems[0]).resync_from, 20, "recorded at the close");
    // Spoilt while closed: one stripe the first resync had passed, one
    // it had not.
    spoil_parity(&geo, &mems, 5);
    spoil_parity(&geo, &mems, 50);
    let arr = open(&mems, &budget);
    assert!(arr.opened_dirty() && arr.needs_resync() && arr.info().resync_from == 20);
    let rep = arr.resync(&|_, _| {}).unwrap();
    assert_eq!((rep.stripes_checked, rep.mismatched, rep.interrupted), (STRIPES - 20, 1, false), "{rep:?}");
    assert!(rep.notes.iter().any(|n| n.contains("resumed at stripe 20 of 64")), "{:?}", rep.notes);
    assert!(!arr.info().resync_needed && arr.info().resync_from == 0);
    // The stripe below the checkpoint is a scrub's business, as md's.
    assert_eq!(arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes, vec![5]);
    arr.close().unwrap();
    drop(arr);
    let sb = sb(&mems[0]);
    assert_eq!((sb.state, sb.resync_from), (mosaic_array::ArrayState::Clean, 0));
}

#[test]
fn a_write_after_the_checkpoint_then_a_crash_resyncs_every_stripe_and_a_clean_close_keeps_it() {
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let mems = crashed(&budget);
    let arr = open(&mems, &budget);
    resync_until(&arr, 20);
    arr.close().unwrap();
    drop(arr);
    // Written after the checkpoint, then a clean close: kept.
    let arr = open(&mems, &budget);
    arr.write(30 * 3 * U, &pattern(4096, 2)).unwrap();
    assert_eq!(sb(&mems[0]).resync_from, 0, "cleared on disk while writes are in progress");
    arr.close().unwrap();
    drop(arr);
    assert_eq!(sb(&mems[0]).resync_from, 20);
    // Written and cut off: any stripe may be torn, so all are resynced.
    let arr = open(&mems, &budget);
    arr.write(3 * 3 * U, &pattern(4096, 3)).unwrap();
    budget.store(0, Ordering::SeqCst);
    drop(arr);
    budget.store(i64::MAX, Ordering::SeqCst);
    let arr = open(&mems, &budget);
    assert!(arr.needs_resync() && arr.info().resync_from == 0);
    let rep = arr.resync(&|_, _| {}).unwrap();
    assert_eq!((rep.stripes_checked, rep.interrupted), (STRIPES, false), "{rep:?}");
}

#[test]
fn a_crash_during_a_quiet_resync_resumes_from_its_last_checkpoint() {
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let mems = crashed(&budget);
    let arr = open(&mems, &budget);
    let geo = arr.geometry();
    spoil_parity(&geo, &mems, 40);
    // Half a second after the start, the resync records where it is; the
    // power is cut 20 stripes later, the close with it.
    let rep = arr.resync(&|done, _| {
        if done == 10 {
            std::thread::sleep(Duration::from_millis(600));
        }
        if done == 30 {
            budget.store(0, Ordering::SeqCst);
            arr.interrupt_scrub();
        }
    });
    assert!(rep.unwrap().interrupted);
    drop(arr);
    budget.store(i64::MAX, Ordering::SeqCst);
    let from = sb(&mems[0]).resync_from;
    assert!((11..=30).contains(&from), "checkpointed at {from}");
    let arr = open(&mems, &budget);
    assert_eq!(arr.info().resync_from, from);
    let rep = arr.resync(&|_, _| {}).unwrap();
    assert_eq!((rep.stripes_checked, rep.mismatched), (STRIPES - from, 1), "{rep:?}");
    assert_eq!(arr.scrub(false, &|_, _| {}).unwrap().mismatched, 0);
}

/// The newest superblock a member holds.
fn sb(m: &MemMember) -> mosaic_array::Superblock {
    mosaic_array::Superblock::read_from(m).unwrap()
}
