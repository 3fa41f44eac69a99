//! Maintenance meeting failures and power cuts: a replacement's journal,
//! a replacement failed while it is rebuilt, client writes during
//! rebuilds, and the recorded rebuild position on drives with a volatile
//! write cache.  Each test names what it used to do wrong.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::Array;
use mosaic_core::{Level, MemberState};
use mosaic_dev::{MemMember, Member};

use crate::common::{mem, named, opts, pattern};

/// A journal record from before a member failed names its slot; replayed
/// after a crash, it used to write its old bytes over what the rebuild put
/// on the replacement.  A replacement empties the journal first.
#[test]
fn a_journal_record_from_before_a_failure_never_reaches_the_replacement() {
    let ms: Vec<Arc<MemMember>> = (0..4).map(|i| mem(&format!("m{i}"), 16)).collect();
    let (y, j) = (mem("y", 16), Arc::new(MemMember::new("j", 4 << 20)));
    let devs: Vec<Arc<dyn Member>> = ms.iter().map(|m| m.clone() as Arc<dyn Member>).collect();
    let arr = Array::create_with_journal(named(&devs), &opts(Level::Raid5, 4), true, Some((j.clone(), "j".into()))).unwrap();
    let victim = arr.geometry().member_of(0, 0); // holds logical block 0
    arr.write(0, &[1u8; 4096]).unwrap(); // journaled, with an entry for the victim
    arr.fail_member(victim).unwrap();
    arr.write(0, &[2u8; 4096]).unwrap(); // degraded: the victim is not written
    arr.replace_with(victim, y.clone(), "mem:y").unwrap();
    arr.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap();
    let mut b = [0u8; 4096];
    arr.read(0, &mut b).unwrap();
    assert_eq!(b[0], 2);
    std::mem::forget(arr); // power cut: no close, so the ring is not checkpointed
    let mut devs: Vec<Arc<dyn Member>> = ms.iter().map(|m| m.clone() as Arc<dyn Member>).collect();
    devs.push(y);
    let arr = Array::open_members_with_journal(devs, true, Some(j)).unwrap();
    arr.read(0, &mut b).unwrap();
    assert_eq!(b[0], 2, "acknowledged write lost: the replay put the pre-failure bytes (1) on the replacement");
}


/// A replacement failed while the rebuild runs used to be marked active
/// at the end, the rest of it never rebuilt.  It stays failed, and the
/// rebuild says so.
#[test]
fn a_replacement_failed_during_its_rebuild_stays_failed() {
    let ms: Vec<Arc<dyn Member>> = (0..4).map(|i| mem(&format!("m{i}"), 64) as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&ms), &opts(Level::Raid5, 4), true).unwrap();
    let data = pattern(arr.capacity(), 7);
    arr.write(0, &data).unwrap();
    arr.fail_member(1).unwrap();
    arr.replace_with(1, mem("y", 64), "mem:y").unwrap();
    let e = arr.rebuild(&|done, _| if done == 10 { arr.fail_member(1).unwrap() }, RebuildOptions::default()).unwrap_err().to_string();
    assert!(e.contains("failed (or were replaced again) while being rebuilt"), "{e}");
    let mut got = vec![0u8; data.len()];
    arr.read(0, &mut got).unwrap();
    assert_eq!(arr.health().states[1], MemberState::Failed, "failed by the administrator at region 10");
    assert!(got == data, "wrong bytes");
}


/// Client writes while rebuilds run: each region a rebuild finishes makes
/// plans stale, which used to count as member failures ("members kept
/// failing" after members + 1 of them, no member failed).  Every write
/// succeeds now.
#[test]
fn client_writes_during_rebuilds_never_fail_spuriously() {
    let ms: Vec<Arc<dyn Member>> = (0..5).map(|i| mem(&format!("m{i}"), 2048) as Arc<dyn Member>).collect();
    let arr = Arc::new(Array::create_on(named(&ms), &opts(Level::Raid5, 5), true).unwrap());
    arr.write(0, &pattern(arr.capacity(), 1)).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = {
        let (arr, stop) = (arr.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut errors = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let off = (i * 7919 % (arr.capacity() / 4096 - 4)) * 4096;
                if let Err(e) = arr.write(off, &[i as u8; 16384]) {
                    errors.push(e.to_string());
                    break;
                }
                i += 1;
            }
            errors
        })
    };
    for _ in 0..12 {
        if client.is_finished() {
            break;
        }
        arr.fail_member(2).unwrap();
        arr.replace_with(2, mem("y", 2048), "mem:y").unwrap();
        arr.rebuild(&|_, _| std::thread::yield_now(), RebuildOptions::default()).unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    let errors = client.join().unwrap();
    assert!(errors.is_empty(), "{} client writes failed, e.g. {:?}", errors.len(), errors.first());
}


/// A drive with a volatile write cache: writes reach the platter (`disk`)
/// only at `flush`, and only while the shared power budget (flushes left)
/// lasts: a power cut.
struct Cached {
    disk: Arc<MemMember>,
    power: Arc<AtomicI64>,
    cache: std::sync::Mutex<Vec<(u64, Vec<u8>)>>,
}
impl Member for Cached {
    fn describe(&self) -> String {
        self.disk.describe()
    }
    fn size(&self) -> u64 {
        self.disk.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        self.disk.read_at(buf, off)?;
        for (o, d) in self.cache.lock().unwrap().iter() {
            let (a, b) = ((*o).max(off), (o + d.len() as u64).min(off + buf.len() as u64));
            if a < b {
                buf[(a - off) as usize..(b - off) as usize].copy_from_slice(&d[(a - o) as usize..(b - o) as usize]);
            }
        }
        Ok(())
    }
    fn write_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        self.cache.lock().unwrap().push((off, buf.to_vec()));
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        let mut c = self.cache.lock().unwrap();
        if self.power.fetch_sub(1, Ordering::SeqCst) > 0 {
            for (o, d) in c.drain(..) {
                self.disk.write_at(&d, o)?;
            }
        }
        Ok(())
    }
}

/// During a rebuild, a superblock update other than the rebuild's own
/// checkpoint (here the first client write after open marks the array
/// dirty) used to record the rebuild position in memory, before the
/// replacement's rebuilt units were flushed: a power cut then left an
/// array reading never-flushed units as rebuilt.  Only the checkpoint,
/// after its flush, moves the recorded position.
#[test]
fn only_a_rebuild_checkpoint_records_how_far_the_rebuild_is() {
    let disks: Vec<Arc<MemMember>> = (0..5).map(|i| mem(&format!("m{i}"), 64)).collect();
    let power = Arc::new(AtomicI64::new(i64::MAX));
    let dev = |i: usize| Arc::new(Cached { disk: disks[i].clone(), power: power.clone(), cache: Default::default() }) as Arc<dyn Member>;
    let devs: Vec<Arc<dyn Member>> = (0..4).map(dev).collect();
    let arr = Array::create_on(named(&devs), &opts(Level::Raid5, 4), true).unwrap();
    let data = pattern(arr.capacity(), 4);
    arr.write(0, &data).unwrap();
    arr.close().unwrap();
    drop(arr);
    let arr = Array::open_members((0..4).map(dev).collect(), true).unwrap();
    arr.fail_member(0).unwrap(); // member 0 is written last in every superblock round
    arr.replace_with(0, dev(4), "mem:m4").unwrap();
    let last = arr.capacity() - 4096;
    arr.rebuild(
        &|done, _| {
            if done == 40 {
                power.store(1, Ordering::SeqCst); // one more flush (member 3's superblock), then the power is off
                arr.write(last, &data[last as usize..]).unwrap(); // same bytes: the data does not change
            }
        },
        RebuildOptions::default(),
    )
    .unwrap();
    drop(arr);
    let platters: Vec<Arc<dyn Member>> = disks.iter().map(|d| d.clone() as Arc<dyn Member>).collect();
    let arr = Array::open_members(platters, false).unwrap();
    println!("states at reopen: {:?}", arr.health().states);
    let mut got = vec![0u8; data.len()];
    arr.read(0, &mut got).unwrap();
    assert!(got == data, "wrong bytes: the replacement's unflushed units are read as rebuilt");
}

/// A member whose superblock write fails is failed, and the round written
/// again.  It used to stay in service: each later metadata update stopped
/// at it, the members after it in the round fell behind, and one dead
/// member of a raid6 plus two updates and a crash left an array judged
/// to have four stale members, which would not assemble.
#[test]
fn a_member_whose_superblock_cannot_be_written_is_failed() {
    use mosaic_dev::FaultyMember;
    let ms: Vec<Arc<MemMember>> = (0..6).map(|i| mem(&format!("m{i}"), 64)).collect();
    let faulty: Vec<Arc<FaultyMember>> = ms.iter().map(|m| Arc::new(FaultyMember::new(m.clone()))).collect();
    let devs: Vec<Arc<dyn Member>> = faulty.iter().map(|f| f.clone() as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&devs), &opts(Level::Raid6, 6), true).unwrap();
    let data = pattern(arr.capacity(), 3);
    arr.write(0, &data).unwrap();
    faulty[3].break_now();
    arr.set_member_host(0, "a").unwrap();
    arr.set_member_host(1, "b").unwrap();
    assert_eq!(arr.health().states[3], MemberState::Failed);
    assert!(arr.auto_failed().iter().any(|(i, _)| *i == 3), "{:?}", arr.auto_failed());
    std::mem::forget(arr);
    let live: Vec<Arc<dyn Member>> = [0, 1, 2, 4, 5].iter().map(|&i| ms[i].clone() as Arc<dyn Member>).collect();
    let arr = Array::open_members(live, false).unwrap();
    let mut got = vec![0u8; data.len()];
    arr.read(0, &mut got).unwrap();
    assert!(got == data);
}

/// raid6 rebuilding one member meets a second failure it can absorb: the
/// region is planned again without that member and the rebuild goes on
/// (it used to stop with the error), every byte reads back, and a
/// scrub finds the stripes consistent.
#[test]
fn a_raid6_rebuild_goes_on_past_a_second_failure() {
    use mosaic_dev::FaultyMember;
    let ms: Vec<Arc<MemMember>> = (0..7).map(|i| mem(&format!("m{i}"), 300)).collect();
    let faulty: Vec<Arc<FaultyMember>> = ms[..6].iter().map(|m| Arc::new(FaultyMember::new(m.clone()))).collect();
    let devs: Vec<Arc<dyn Member>> = faulty.iter().map(|f| f.clone() as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&devs), &opts(Level::Raid6, 6), true).unwrap();
    let data = pattern(arr.capacity(), 9);
    arr.write(0, &data).unwrap();
    arr.fail_member(0).unwrap();
    arr.replace_with(0, ms[6].clone(), "mem:m6").unwrap();
    faulty[3].break_after(100);
    arr.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap();
    let st = arr.health().states;
    assert_eq!((st[0], st[3]), (MemberState::Active, MemberState::Failed), "{st:?}");
    let mut got = vec![0u8; data.len()];
    arr.read(0, &mut got).unwrap();
    assert!(got == data);
    assert!(arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty());
}

/// A rebuild asked to stop (a server stopping) pauses at a checkpoint
/// instead of running to the end: the member stays `Rebuilding` where it
/// got to, on disk too, and the next rebuild (after a reopen) resumes
/// there and ends with every byte in place.
#[test]
fn a_rebuild_asked_to_stop_pauses_at_a_checkpoint_and_the_next_resumes_it() {
    let ms: Vec<Arc<MemMember>> = (0..4).map(|i| mem(&format!("m{i}"), 64)).collect();
    let devs: Vec<Arc<dyn Member>> = ms.iter().map(|m| m.clone() as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&devs), &opts(Level::Raid5, 4), true).unwrap();
    let data = pattern(arr.capacity(), 7);
    arr.write(0, &data).unwrap();
    arr.fail_member(2).unwrap();
    let y = mem("y", 64);
    arr.replace_with(2, y.clone(), "mem:y").unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let o = RebuildOptions { stop: Some(stop.clone()), ..Default::default() };
    let rep = arr.rebuild(&|done, _| if done == 20 { stop.store(true, Ordering::Relaxed) }, o).unwrap();
    assert!(rep.paused && rep.regions == 64 && rep.resumed_from == 0, "{rep:?}");
    assert_eq!(arr.health().states[2], MemberState::Rebuilding { done: 20 });
    arr.close().unwrap();
    drop(arr);
    let mut devs: Vec<Arc<dyn Member>> = ms.iter().map(|m| m.clone() as Arc<dyn Member>).collect();
    devs[2] = y;
    let arr = Array::open_members(devs, true).unwrap();
    assert_eq!(arr.health().states[2], MemberState::Rebuilding { done: 20 }, "recorded on disk");
    let rep = arr.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap();
    assert!(!rep.paused && rep.resumed_from == 20, "{rep:?}");
    arr.fail_member(0).unwrap();
    let mut back = vec![0u8; data.len()];
    arr.read(0, &mut back).unwrap();
    assert!(back == data);
}
