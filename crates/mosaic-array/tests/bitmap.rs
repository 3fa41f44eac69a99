//! The write-intent bitmap: marked on every member before a region's
//! first write, cleared once the region is quiet, and after a crash the
//! resync scrubs the marked regions alone.

use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mosaic_array::bitmap::BITMAP_OFFSET;
use mosaic_array::{Array, DATA_OFFSET};
use mosaic_core::Level;
use mosaic_dev::{MemMember, Member, PowerCut};
use mosaic_format::bitmap::{decode_block, BlockRead, BLOCK};
use parking_lot::Mutex;

use crate::common::{mem, named, opts, pattern, read_all, U};

/// A member that records its writes and flushes, in order, in a log
/// shared by all members: (member, offset or `FLUSH`).
struct Recorder {
    inner: Arc<dyn Member>,
    idx: usize,
    log: Arc<Mutex<Vec<(usize, u64)>>>,
}

const FLUSH: u64 = u64::MAX;

impl Member for Recorder {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.log.lock().push((self.idx, offset));
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.log.lock().push((self.idx, FLUSH));
        self.inner.flush()
    }
}

const STRIPES: u64 = 64;
/// Four stripes a bit: 16 regions.
const CHUNK: u64 = 4 * U;

/// A raid5 array of four RAM members, each behind a power cut sharing
/// `budget` and a recorder, with a bitmap of four stripes a bit.
fn rig(budget: &Arc<AtomicI64>, log: &Arc<Mutex<Vec<(usize, u64)>>>) -> (Vec<Arc<MemMember>>, Array) {
    let mems: Vec<Arc<MemMember>> = (0..4).map(|i| mem(&format!("m{i}"), STRIPES)).collect();
    let arr = Array::create_on(named(&wrapped(&mems, budget, log)), &opts(Level::Raid5, 4), true).unwrap();
    arr.set_bitmap(Some(CHUNK)).unwrap();
    arr.set_epoch(Duration::ZERO);
    (mems, arr)
}

fn wrapped(mems: &[Arc<MemMember>], budget: &Arc<AtomicI64>, log: &Arc<Mutex<Vec<(usize, u64)>>>) -> Vec<Arc<dyn Member>> {
    mems.iter()
        .enumerate()
        .map(|(idx, m)| Arc::new(Recorder { inner: Arc::new(PowerCut::new(m.clone(), budget.clone())), idx, log: log.clone() }) as Arc<dyn Member>)
        .collect()
}

/// Logical offset of stripe `s` (raid5 of 4: three data units a stripe).
fn at(s: u64) -> u64 {
    s * 3 * U
}

/// Make stripe `s`'s parity disagree with its data, on the member.
fn spoil_parity(arr_geo: &mosaic_core::Geometry, mems: &[Arc<MemMember>], s: u64) {
    let p = arr_geo.member_of(s, arr_geo.k);
    mems[p].write_at(&[0xa5; 512], DATA_OFFSET + s * U).unwrap();
}

fn reopen(mems: &[Arc<MemMember>]) -> Array {
    let ms: Vec<Arc<dyn Member>> = mems.iter().map(|m| m.clone() as Arc<dyn Member>).collect();
    let arr = Array::open_members(ms, true).unwrap();
    arr.set_epoch(Duration::ZERO);
    arr
}

#[test]
fn a_region_is_marked_on_every_member_and_flushed_before_its_first_write() {
    let (budget, log) = (Arc::new(AtomicI64::new(i64::MAX)), Arc::new(Mutex::new(Vec::new())));
    let (_mems, arr) = rig(&budget, &log);
    let plain = Array::create_on(named(&(0..4).map(|i| mem(&format!("p{i}"), STRIPES) as Arc<dyn Member>).collect::<Vec<_>>()), &opts(Level::Raid5, 4), true).unwrap();
    log.lock().clear();
    arr.write(at(10) + U, &pattern(4096, 1)).unwrap();
    let ops = std::mem::take(&mut *log.lock());
    let first_data = ops.iter().position(|&(_, off)| off != FLUSH && off >= DATA_OFFSET).expect("data written");
    for m in 0..4 {
        let mark = ops.iter().position(|&(i, off)| i == m && off == BITMAP_OFFSET).unwrap_or_else(|| panic!("member {m} not marked: {ops:?}"));
        let flush = mark + ops[mark..].iter().position(|&(i, off)| i == m && off == FLUSH).unwrap_or_else(|| panic!("member {m} not flushed: {ops:?}"));
        assert!(mark < flush && flush < first_data, "member {m}: the mark is durable before any data write: {ops:?}");
    }
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 1);
    // The region's next write, and one of the next region, write only data.
    arr.write(at(11), &pattern(4096, 2)).unwrap();
    assert!(log.lock().iter().all(|&(_, off)| off != FLUSH && off >= DATA_OFFSET), "{:?}", log.lock());
    arr.write(at(13), &pattern(4096, 3)).unwrap();
    assert_eq!(log.lock().iter().filter(|&&(_, off)| off == BITMAP_OFFSET).count(), 4, "a new region is marked once per member");
    let info = arr.info().bitmap.unwrap();
    assert_eq!((info.chunk_bytes, info.regions, info.dirty_regions), (CHUNK, STRIPES / 4, 2));
    // The executor's device operations are the same as without a bitmap.
    for (s, seed) in [(10, 1), (11, 2), (13, 3)] {
        plain.write(at(s) + if s == 10 { U } else { 0 }, &pattern(4096, seed)).unwrap();
    }
    assert_eq!(arr.counters(), plain.counters());
}

#[test]
fn a_quiet_region_is_cleared_after_two_flushes_and_a_busy_one_is_kept() {
    let (budget, log) = (Arc::new(AtomicI64::new(i64::MAX)), Arc::new(Mutex::new(Vec::new())));
    let (mems, arr) = rig(&budget, &log);
    arr.write(at(0), &pattern(4096, 1)).unwrap();
    arr.write(at(20), &pattern(4096, 1)).unwrap();
    arr.flush().unwrap();
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 2, "written since the last sweep: kept");
    arr.write(at(21), &pattern(4096, 1)).unwrap();
    arr.flush().unwrap();
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 1, "region 0 was quiet for a sweep; region 5 was written again");
    arr.flush().unwrap();
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 0);
    // Cleared on the members too: a crash now resyncs nothing.
    arr.write(at(40), &pattern(4096, 1)).unwrap();
    budget.store(0, Ordering::SeqCst);
    drop(arr);
    let arr = reopen(&mems);
    assert!(arr.info().resync_needed);
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 1);
}

#[test]
fn after_a_crash_the_resync_scrubs_only_the_marked_regions() {
    let (budget, log) = (Arc::new(AtomicI64::new(i64::MAX)), Arc::new(Mutex::new(Vec::new())));
    let (mems, arr) = rig(&budget, &log);
    let geo = arr.geometry();
    arr.write(at(10), &pattern(4096, 1)).unwrap();
    // Power cut: nothing more reaches the members, the close included.
    budget.store(0, Ordering::SeqCst);
    drop(arr);
    // Stripe 10's write was cut between data and parity; stripe 40 went
    // bad some other way (a scrub's business, not the resync's).
    spoil_parity(&geo, &mems, 10);
    spoil_parity(&geo, &mems, 40);
    budget.store(i64::MAX, Ordering::SeqCst);
    let arr = reopen(&mems);
    assert!(arr.info().resync_needed && arr.needs_resync());
    let rep = arr.resync(&|_, _| {}).unwrap();
    assert_eq!((rep.stripes_checked, rep.mismatched, rep.unverified_stripes), (4, 1, 0), "{rep:?}");
    assert!(rep.notes.iter().any(|n| n.contains("4 of 64 stripes were marked (1 of 16 regions)")), "{:?}", rep.notes);
    assert!(!arr.info().resync_needed);
    // A full scrub still finds the stripe the resync was not asked about.
    let full = arr.scrub(false, &|_, _| {}).unwrap();
    assert_eq!((full.stripes_checked, full.mismatched_stripes.clone()), (64, vec![40]), "{full:?}");
    arr.close().unwrap();
    drop(arr);
    let arr = reopen(&mems);
    assert!(!arr.opened_dirty() && !arr.info().resync_needed);
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 0, "a clean close clears every bit");
}

#[test]
fn a_bitmap_block_whole_on_no_member_resyncs_its_regions_whole() {
    let (budget, log) = (Arc::new(AtomicI64::new(i64::MAX)), Arc::new(Mutex::new(Vec::new())));
    let (mems, arr) = rig(&budget, &log);
    arr.write(at(10), &pattern(4096, 1)).unwrap();
    budget.store(0, Ordering::SeqCst);
    drop(arr);
    // Torn on one member: the others' copies say what it said.
    mems[1].write_at(&[0x5a; 100], BITMAP_OFFSET + 40).unwrap();
    let arr = reopen(&mems);
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 1);
    assert!(arr.open_warnings().is_empty(), "{:?}", arr.open_warnings());
    std::mem::forget(arr);
    // Torn on every member: every region of the block is resynced.
    for m in &mems {
        m.write_at(&[0x5a; 100], BITMAP_OFFSET + 40).unwrap();
    }
    let arr = reopen(&mems);
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, STRIPES / 4);
    assert!(arr.open_warnings().iter().any(|w| w.contains("write-intent bitmap block 0 is whole on no member")), "{:?}", arr.open_warnings());
    let rep = arr.resync(&|_, _| {}).unwrap();
    assert_eq!(rep.stripes_checked, STRIPES);
}

#[test]
fn bits_stay_while_a_member_is_out_and_a_replacement_carries_the_bitmap() {
    let (budget, log) = (Arc::new(AtomicI64::new(i64::MAX)), Arc::new(Mutex::new(Vec::new())));
    let (_mems, arr) = rig(&budget, &log);
    arr.fail_member(2).unwrap();
    arr.write(at(8), &pattern(4096, 1)).unwrap();
    for _ in 0..3 {
        arr.flush().unwrap();
    }
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 1, "what member 2 missed stays marked");
    let new = mem("new", STRIPES);
    arr.replace_with(2, new.clone(), "new").unwrap();
    let mut b = vec![0u8; BLOCK];
    new.read_at(&mut b, BITMAP_OFFSET).unwrap();
    let uuid = arr.superblock().array_uuid;
    let BlockRead::Bits(bits) = decode_block(&b, uuid, 4, 0) else { panic!("the new member carries no bitmap") };
    assert_eq!(bits[0], 1 << 2, "region 2 (stripe 8) is marked on it");
    arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    for _ in 0..3 {
        arr.flush().unwrap();
    }
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 0, "whole again: cleared");
}

#[test]
fn a_journal_or_a_grow_takes_no_bitmap_and_it_can_be_taken_away() {
    let journal: Arc<dyn Member> = Arc::new(MemMember::new("j", 1 << 20));
    let ms: Vec<Arc<dyn Member>> = (0..4).map(|i| mem(&format!("j{i}"), STRIPES) as Arc<dyn Member>).collect();
    let arr = Array::create_with_journal(named(&ms), &opts(Level::Raid5, 4), true, Some((journal, "j".into()))).unwrap();
    let e = arr.set_bitmap(Some(CHUNK)).unwrap_err().to_string();
    assert!(e.contains("journal"), "{e}");

    let (budget, log) = (Arc::new(AtomicI64::new(i64::MAX)), Arc::new(Mutex::new(Vec::new())));
    let (mems, arr) = rig(&budget, &log);
    let e = arr.grow_start_with(vec![(mem("g", STRIPES) as Arc<dyn Member>, "g".into())], None).unwrap_err().to_string();
    assert!(e.contains("write-intent bitmap: remove it first"), "{e}");
    assert_eq!(arr.superblock().format_version, mosaic_array::superblock::FORMAT_VERSION);
    let mut b = vec![0u8; 4096];
    mems[0].read_at(&mut b, 0).unwrap();
    let on_disk = mosaic_format::label::Label::decode(&b).unwrap();
    assert_eq!(on_disk.policy::<serde_json::Value>().unwrap()["format_version"], mosaic_array::superblock::BITMAP_VERSION, "older mosaics refuse it");
    arr.set_bitmap(None).unwrap();
    assert!(arr.info().bitmap.is_none());
    arr.write(at(3), &pattern(4096, 1)).unwrap();
    arr.close().unwrap();
    drop(arr);
    assert!(reopen(&mems).superblock().bitmap.is_none());
}

/// md's re-add: a member whose device stopped answering (its writes
/// failed) comes back with the bytes it had; its rebuild passes over
/// every region no write touched while it was out.
#[test]
fn a_member_that_comes_back_is_re_added_and_only_the_regions_written_meanwhile_are_rebuilt() {
    let (mems, faulty, arr) = with_faulty_member_2();
    arr.set_epoch(Duration::ZERO);
    let mut model = pattern(arr.capacity(), 1);
    arr.write(0, &model).unwrap();
    for _ in 0..3 {
        arr.flush().unwrap();
    }
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 0);
    // Member 2 stops answering in the middle of a write; another follows.
    faulty.break_now();
    for (s, seed) in [(12, 2), (36, 3)] {
        let d = pattern(4096, seed);
        arr.write(at(s), &d).unwrap();
        model[at(s) as usize..at(s) as usize + 4096].copy_from_slice(&d);
    }
    assert_eq!(arr.health().states[2], mosaic_core::MemberState::Failed);
    for _ in 0..3 {
        arr.flush().unwrap();
    }
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 2, "regions 3 and 9 stay marked while member 2 is out");
    // It answers again, with the bytes it had.
    arr.replace_with(2, mems[2].clone(), "m2").unwrap();
    let rep = arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    assert_eq!((rep.skipped_regions, rep.bytes_written), (STRIPES - 8, 8 * U), "{rep:?}");
    assert_eq!(read_all(&arr), model);
    assert_eq!(arr.scrub(false, &|_, _| {}).unwrap().mismatched, 0);
    // Its bytes are right without the others: fail member 0 and read.
    arr.fail_member(0).unwrap();
    assert_eq!(read_all(&arr), model);
}

/// `arr` written at each of `stripes` (one page each), closed and opened
/// again after the first two: two opens later.
fn two_opens_later(arr: Array, mems: &[Arc<MemMember>], stripes: [u64; 3]) -> Array {
    let mut arr = arr;
    for (i, s) in stripes.into_iter().enumerate() {
        arr.write(at(s), &pattern(4096, s as u8)).unwrap();
        if i < 2 {
            arr.close().unwrap();
            drop(arr);
            arr = reopen(mems);
        }
    }
    arr
}

/// Only the device that left the slot, with the session it carried
/// then, is re-added, however many opens later: a copy of it that was
/// written apart (a session of its own), or a new device, is rebuilt
/// whole.
#[test]
fn a_re_add_is_for_the_device_that_left_the_slot_and_not_a_copy_written_apart() {
    let (budget, log) = (Arc::new(AtomicI64::new(i64::MAX)), Arc::new(Mutex::new(Vec::new())));
    let (mems, arr) = rig(&budget, &log);
    arr.write(0, &pattern(arr.capacity(), 1)).unwrap();
    for _ in 0..3 {
        arr.flush().unwrap();
    }
    arr.fail_member(2).unwrap();
    arr.write(at(12), &pattern(4096, 2)).unwrap();
    arr.close().unwrap();
    drop(arr);
    // An open later (a server restarted): a re-add.
    let arr = reopen(&mems);
    assert_eq!(arr.health().states[2], mosaic_core::MemberState::Failed, "stale: failed until rebuilt");
    arr.write(at(36), &pattern(4096, 3)).unwrap();
    let model = read_all(&arr);
    arr.replace_with(2, mems[2].clone(), "m2").unwrap();
    let rep = arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    assert_eq!(rep.skipped_regions, STRIPES - 8, "{rep:?}");
    assert_eq!(read_all(&arr), model);
    // The same device failed again and copied; the copy is opened as an
    // array of its own (a new session in its superblock, events on).
    arr.fail_member(2).unwrap();
    let copy = Arc::new(MemMember::new("copy", mems[2].size()));
    let mut all = vec![0u8; mems[2].size() as usize];
    mems[2].read_at(&mut all, 0).unwrap();
    copy.write_at(&all, 0).unwrap();
    let mut apart = mosaic_array::Superblock::read_from(copy.as_ref()).unwrap();
    (apart.prev_session, apart.session, apart.events) = (apart.session, uuid::Uuid::new_v4(), apart.events + 2);
    apart.write_to(copy.as_ref()).unwrap();
    let arr = two_opens_later(arr, &mems, [40, 44, 48]);
    let model = read_all(&arr);
    arr.replace_with(2, copy.clone(), "copy").unwrap();
    let rep = arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    assert_eq!((rep.skipped_regions, rep.bytes_written), (0, STRIPES * U), "{rep:?}");
    assert_eq!(read_all(&arr), model);
    // That device (slot 2 now), two opens after it left: a re-add.
    arr.fail_member(2).unwrap();
    let arr = two_opens_later(arr, &mems, [52, 56, 60]);
    let model = read_all(&arr);
    arr.replace_with(2, copy, "copy").unwrap();
    let rep = arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    // Regions 3 and 9 to 15: written since the bits were last swept.
    assert_eq!((rep.skipped_regions, rep.bytes_written), (STRIPES - 32, 32 * U), "{rep:?}");
    assert_eq!(read_all(&arr), model);
    assert_eq!(arr.scrub(false, &|_, _| {}).unwrap().mismatched, 0);
    // A new device: rebuilt whole.
    arr.fail_member(1).unwrap();
    arr.replace_with(1, mem("new", STRIPES), "new").unwrap();
    assert_eq!(arr.rebuild(&|_, _| {}, Default::default()).unwrap().skipped_regions, 0);
    assert_eq!(read_all(&arr), model);
}

/// A resync cut off (a server stopping) has cleared the bits of the
/// regions it finished: the next open resyncs only the rest, as md
/// resumes a resync where it stopped.
#[test]
fn an_interrupted_resync_goes_on_at_the_next_open_where_it_stopped() {
    let (budget, log) = (Arc::new(AtomicI64::new(i64::MAX)), Arc::new(Mutex::new(Vec::new())));
    let (mems, arr) = rig(&budget, &log);
    let geo = arr.geometry();
    for s in [0, 20, 40] {
        arr.write(at(s), &pattern(4096, 1)).unwrap();
    }
    budget.store(0, Ordering::SeqCst);
    drop(arr);
    for s in [1, 22, 43] {
        spoil_parity(&geo, &mems, s);
    }
    let arr = reopen(&mems);
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 3);
    let rep = arr.resync(&|done, _| {
        if done == 4 {
            arr.interrupt_scrub();
        }
    });
    let rep = rep.unwrap();
    assert!(rep.interrupted && rep.stripes_checked == 4 && rep.mismatched == 1, "{rep:?}");
    assert_eq!(arr.info().bitmap.unwrap().dirty_regions, 2, "region 0 is done");
    assert!(arr.info().resync_needed);
    arr.close().unwrap();
    drop(arr);
    let arr = reopen(&mems);
    assert!(arr.opened_dirty() && arr.info().resync_needed, "still dirty on disk");
    let rep = arr.resync(&|_, _| {}).unwrap();
    assert_eq!((rep.stripes_checked, rep.mismatched, rep.interrupted), (8, 2, false), "{rep:?}");
    assert_eq!(arr.scrub(false, &|_, _| {}).unwrap().mismatched, 0);
}

/// A member missing altogether at an open (a server restarted while a
/// remote member was unreachable) is re-added when its device comes
/// back: it carries the session of the last update before.
#[test]
fn a_member_missing_at_an_open_is_re_added_when_it_comes_back() {
    let (budget, log) = (Arc::new(AtomicI64::new(i64::MAX)), Arc::new(Mutex::new(Vec::new())));
    let (mems, arr) = rig(&budget, &log);
    arr.write(0, &pattern(arr.capacity(), 1)).unwrap();
    arr.close().unwrap();
    drop(arr);
    let without: Vec<Arc<dyn Member>> = [0, 1, 3].iter().map(|&i| mems[i].clone() as Arc<dyn Member>).collect();
    let arr = Array::open_members(without, true).unwrap();
    assert_eq!(arr.health().states[2], mosaic_core::MemberState::Failed);
    assert!(arr.info().member_list[2].readd, "re-addable");
    arr.write(at(12), &pattern(4096, 2)).unwrap();
    arr.close().unwrap();
    drop(arr);
    // Back, two opens later: stale, so failed until rebuilt; a re-add.
    let arr = reopen(&mems);
    let model = read_all(&arr);
    arr.replace_with(2, mems[2].clone(), "m2").unwrap();
    let rep = arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    assert_eq!((rep.skipped_regions, rep.bytes_written), (STRIPES - 4, 4 * U), "{rep:?}");
    arr.fail_member(0).unwrap();
    assert_eq!(read_all(&arr), model);
}

/// A raid5 array of four RAM members with a bitmap of four stripes a
/// bit, member 2 behind a fault switch.
fn with_faulty_member_2() -> (Vec<Arc<MemMember>>, Arc<mosaic_dev::FaultyMember>, Array) {
    let mems: Vec<Arc<MemMember>> = (0..4).map(|i| mem(&format!("m{i}"), STRIPES)).collect();
    let faulty = Arc::new(mosaic_dev::FaultyMember::new(mems[2].clone()));
    let ms: Vec<Arc<dyn Member>> = (0..4).map(|i| if i == 2 { faulty.clone() as Arc<dyn Member> } else { mems[i].clone() as Arc<dyn Member> }).collect();
    let arr = Array::create_on(named(&ms), &opts(Level::Raid5, 4), true).unwrap();
    arr.set_bitmap(Some(CHUNK)).unwrap();
    (mems, faulty, arr)
}

/// A member whose first failed write is a superblock update (not a data
/// write) left while active too: it is re-addable, with the session its
/// own superblock carries.
#[test]
fn a_member_lost_in_a_superblock_update_is_re_addable() {
    let (mems, faulty, arr) = with_faulty_member_2();
    arr.write(0, &pattern(4096, 1)).unwrap();
    faulty.break_now();
    arr.set_member_host(0, "h0").unwrap();
    assert_eq!(arr.health().states[2], mosaic_core::MemberState::Failed);
    assert!(arr.info().member_list[2].readd, "{:?}", arr.info().member_list[2]);
    arr.replace_with(2, mems[2].clone(), "m2").unwrap();
    let rep = arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    // Only region 0, written just before and not yet quiet, is rebuilt.
    assert_eq!(rep.skipped_regions, STRIPES - 4, "{rep:?}");
}
