//! Hot replace (md's `--replace`): a working member copied onto a new
//! drive while it stays in service, the array keeping its redundancy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::superblock::MemberRole;
use mosaic_array::{Array, Superblock};
use mosaic_core::{Level, MemberState};
use mosaic_dev::{MemMember, Member};

use crate::common::{mem, named, opts, pattern, read_all};

/// What a [`Hooked`] drive's hook sees: a read or a write (a flush is a
/// write at `u64::MAX`), and its offset.
type Hook = Box<dyn Fn(bool, u64) -> std::io::Result<()> + Send + Sync>;

/// A RAM drive with a hook before each read, write and flush: an error
/// fails the operation.
struct Hooked {
    disk: Arc<MemMember>,
    hook: Hook,
}
impl Hooked {
    fn new(disk: Arc<MemMember>, hook: impl Fn(bool, u64) -> std::io::Result<()> + Send + Sync + 'static) -> Arc<Hooked> {
        Arc::new(Hooked { disk, hook: Box::new(hook) })
    }
}
impl Member for Hooked {
    fn describe(&self) -> String {
        self.disk.describe()
    }
    fn size(&self) -> u64 {
        self.disk.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        (self.hook)(true, off)?;
        self.disk.read_at(buf, off)
    }
    fn write_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        (self.hook)(false, off)?;
        self.disk.write_at(buf, off)
    }
    fn flush(&self) -> std::io::Result<()> {
        (self.hook)(false, u64::MAX)
    }
}

/// A RAM drive that fails its reads (`reads`) or its writes and flushes
/// once the returned flag is set.
fn flaky(disk: Arc<MemMember>, reads: bool) -> (Arc<Hooked>, Arc<AtomicBool>) {
    let broken = Arc::new(AtomicBool::new(false));
    let b = broken.clone();
    let d = Hooked::new(disk, move |read, _| if b.load(Ordering::SeqCst) && read == reads { Err(std::io::Error::other("medium error")) } else { Ok(()) });
    (d, broken)
}

/// A RAM drive whose label writes fail once the returned flag is set.
fn label_breaks(disk: Arc<MemMember>) -> (Arc<Hooked>, Arc<AtomicBool>) {
    let broken = Arc::new(AtomicBool::new(false));
    let b = broken.clone();
    let d = Hooked::new(disk, move |read, off| {
        let label = !read && off < mosaic_format::label::LABEL_AREA;
        if label && b.load(Ordering::SeqCst) { Err(std::io::Error::other("medium error")) } else { Ok(()) }
    });
    (d, broken)
}

/// Four RAM members of `stripes` units ("m0".."m3") in an array at `level`,
/// pattern `seed` written over all of it: the members, the array, the
/// pattern.
fn filled(level: Level, stripes: u64, seed: u8) -> (Vec<Arc<dyn Member>>, Array, Vec<u8>) {
    let ms: Vec<Arc<dyn Member>> = (0..4).map(|i| mem(&format!("m{i}"), stripes) as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&ms), &opts(level, 4), true).unwrap();
    let p1 = pattern(arr.capacity(), seed);
    arr.write(0, &p1).unwrap();
    (ms, arr, p1)
}

fn bytes(m: &dyn Member, off: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    m.read_at(&mut b, off).unwrap();
    b
}

/// A hot replace of member `idx` onto `new` (named `path`), stopped at
/// stripe `at`: paused there.
fn pause(arr: &Array, idx: usize, new: Arc<MemMember>, path: &str, at: u64) -> mosaic_core::HotReport {
    let stop = Arc::new(AtomicBool::new(false));
    let opts = RebuildOptions { stop: Some(stop.clone()), ..Default::default() };
    arr.replace_hot_with(idx, new, path, &|s, _| if s == at { stop.store(true, Ordering::SeqCst) }, opts).unwrap()
}

/// The copy of slot `idx` ended: the new drive holds every byte of data
/// the old one does (which took every write until the switch), and with
/// member 0 out the array reads `want`.
fn copied_whole(arr: &Array, idx: usize, old: &dyn Member, new: &dyn Member, want: &[u8]) {
    let len = arr.geometry().member_bytes(idx) as usize;
    assert!(bytes(old, mosaic_array::DATA_OFFSET, len) == bytes(new, mosaic_array::DATA_OFFSET, len), "the new drive of slot {idx} differs from the old one");
    arr.fail_member(0).unwrap();
    assert!(read_all(arr) == want, "wrong bytes from the new drive");
}

/// raid5 3+1 on RAM: member 2 is copied onto `y` while a client rewrites
/// stripes the copy has passed (every 8th), and halfway through the copy
/// member 0 fails.  A plain replace would have had two members out; the
/// hot one ends with every byte readable (member 0's reconstructed with
/// the new drive's help), the new drive in slot 2 under a new identity,
/// and the old one recorded as replaced.
#[test]
fn a_hot_replace_keeps_redundancy_while_writes_go_on() {
    let ms: Vec<Arc<dyn Member>> = (0..4).map(|i| mem(&format!("m{i}"), 1024) as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&ms), &opts(Level::Raid5, 4), true).unwrap();
    let (p1, p2) = (pattern(arr.capacity(), 1), pattern(arr.capacity(), 2));
    arr.write(0, &p1).unwrap();
    let old_uuid = arr.superblock().member_uuids[2];
    let stripe = 3 * 4096;
    let rewrite = |at: u64| at % 8 == 0;
    // Between stripes (the copy holds no lock then): the stripe just
    // copied is rewritten, so only the mirrored write brings it to `y`.
    let client = |at: u64, _| {
        if rewrite(at) {
            let s = ((at - 1) * stripe) as usize;
            arr.write(s as u64, &p2[s..s + stripe as usize]).unwrap();
        }
        if at == 512 {
            arr.fail_member(0).unwrap();
        }
    };
    let y = mem("y", 1024);
    let r = arr.replace_hot_with(2, y.clone(), "mem:y", &client, RebuildOptions::default()).unwrap();
    assert!(!r.stopped && !r.rebuild_needed);
    assert_eq!(r.bytes_copied, arr.geometry().member_bytes(2));
    let sb = arr.superblock();
    assert_eq!(sb.member_paths[2], "mem:y");
    assert_ne!(sb.member_uuids[2], old_uuid, "slot 2 has the new drive's identity");
    assert!(sb.replaced.contains(&old_uuid), "the old drive is recorded as replaced");
    assert_eq!(arr.health().states[2], MemberState::Active);
    assert_eq!(arr.health().states[0], MemberState::Failed);
    let mut want = p1;
    for at in (1..=1024u64).filter(|&at| rewrite(at)) {
        let s = ((at - 1) * stripe) as usize;
        want[s..s + stripe as usize].copy_from_slice(&p2[s..s + stripe as usize]);
    }
    assert!(read_all(&arr) == want, "wrong bytes after the hot replace");
    // The new drive carries slot 2's label; the old one kept its own.
    let label = Superblock::read_from(y.as_ref()).unwrap();
    assert_eq!((label.member_index, label.member_uuid), (2, sb.member_uuids[2]));
    assert_eq!(Superblock::read_from(ms[2].as_ref()).unwrap().member_uuid, old_uuid);
}

/// After the switch, an open that finds both drives of slot 2 takes the
/// new one by identity (the old one's event counter is only a round
/// behind when the switch's second round was cut off; here it is two).
#[test]
fn an_open_after_a_hot_replace_takes_the_new_drive_not_the_old() {
    let (ms, arr, p1) = filled(Level::Raid5, 64, 3);
    let y = mem("y", 64);
    arr.replace_hot_with(1, y.clone(), "mem:y", &|_, _| {}, RebuildOptions::default()).unwrap();
    arr.write(0, &[9u8; 4096 * 3]).unwrap(); // reaches the new drive only
    std::mem::forget(arr); // a power cut
    let mut devs = ms.clone();
    devs.push(y.clone());
    let arr = Array::open_members(devs, true).unwrap();
    assert_eq!(arr.superblock().member_uuids[1], Superblock::read_from(y.as_ref()).unwrap().member_uuid);
    assert!(arr.health().states.iter().all(|s| *s == MemberState::Active));
    let mut want = p1;
    want[..4096 * 3].fill(9);
    assert!(read_all(&arr) == want, "wrong bytes");
    // And without the old drive's peers' help: slot 1 alone serves.
    arr.fail_member(0).unwrap();
    assert!(read_all(&arr) == want, "wrong bytes with member 0 out");
}

/// The new drive failing stops the copy: the member stays in service on
/// its old drive, which took every write.
#[test]
fn the_new_drive_failing_leaves_the_member_on_the_old_one() {
    let (ms, arr, p1) = filled(Level::Raid5, 256, 4);
    let (y, broken) = flaky(mem("y", 256), false);
    let e = arr
        .replace_hot_with(3, y, "mem:y", &|at, _| if at == 100 { broken.store(true, Ordering::SeqCst) }, RebuildOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("the new drive failed during the copy") && e.contains("member 3 stays in service"), "{e}");
    assert_eq!(arr.health().states[3], MemberState::Active);
    assert_eq!(arr.superblock().member_paths[3], ms[3].describe());
    arr.write(0, &[7u8; 4096]).unwrap();
    arr.fail_member(0).unwrap();
    let mut want = p1;
    want[..4096].fill(7);
    assert!(read_all(&arr) == want, "wrong bytes");
}

/// The old drive failing mid-copy: it is failed as any member is, and the
/// report says a plain replace by the new drive and a rebuild must follow.
#[test]
fn the_old_drive_failing_hands_the_slot_to_the_new_one_for_a_rebuild() {
    let (old, broken) = flaky(mem("m1", 256), true);
    let ms: Vec<Arc<dyn Member>> = vec![mem("m0", 256), old.clone(), mem("m2", 256), mem("m3", 256)];
    let arr = Array::create_on(named(&ms), &opts(Level::Raid5, 4), true).unwrap();
    let p1 = pattern(arr.capacity(), 5);
    arr.write(0, &p1).unwrap();
    let y = mem("y", 256);
    let r = arr.replace_hot_with(1, y.clone(), "mem:y", &|at, _| if at == 80 { broken.store(true, Ordering::SeqCst) }, RebuildOptions::default()).unwrap();
    assert!(r.rebuild_needed && !r.stopped);
    assert_eq!(arr.health().states[1], MemberState::Failed);
    arr.replace_with(1, y.clone(), "mem:y").unwrap();
    assert_eq!(arr.superblock().member_paths[1], "mem:y");
    arr.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap();
    assert_eq!(arr.health().states[1], MemberState::Active);
    arr.fail_member(0).unwrap();
    assert!(read_all(&arr) == p1, "wrong bytes");
}

/// A hot replace asked to stop (a server stopping, a signal) pauses: the
/// member stays on its old drive, the new drive carries the copy's label
/// (never a member's) and keeps taking every write, and asked again the
/// copy goes on from where it stopped.  A former member's label on the new
/// drive was cleared first, so a crash leaves no member there.
#[test]
fn a_stopped_hot_replace_pauses_and_resumes_where_it_stopped() {
    let (ms, arr, p1) = filled(Level::Raid5, 256, 6);
    let y = mem("y", 256);
    y.write_at(&bytes(ms[0].as_ref(), 0, 128 << 10), 0).unwrap();
    let r = pause(&arr, 1, y.clone(), "mem:y", 30);
    assert!(r.stopped && !r.rebuild_needed && r.paused_at == Some(30) && r.resumed_from.is_none(), "{r:?}");
    assert_eq!(r.bytes_copied, 30 * 4096);
    let sb = arr.superblock();
    assert_eq!(sb.member_paths[1], ms[1].describe());
    let rec = sb.hot.clone().expect("the labels record the paused copy");
    assert_eq!((rec.member, rec.copied, rec.old, rec.spare), (1, 30, sb.member_uuids[1], false));
    let label = Superblock::read_from(y.as_ref()).unwrap();
    assert_eq!((label.role, label.member_uuid), (MemberRole::Replacement, rec.uuid));
    assert!(arr.info().member_list[1].replacing.as_deref().is_some_and(|r| r.contains("paused at stripe 30")));
    let e = arr.grow_start(vec![(mem("g", 256) as Arc<dyn Member>, "mem:g".into())]).unwrap_err().to_string();
    assert!(e.contains("a hot replace of member 1 is paused: finish it first"), "{e}");
    // Stripes on both sides of the pause point change while it is paused.
    let w = pattern(3 * 4096 * 40, 7);
    arr.write(3 * 4096 * 10, &w).unwrap();
    let r = arr.replace_hot_from_spare(1, &|_, _| {}, RebuildOptions::default()).unwrap();
    assert!(!r.stopped && r.resumed_from == Some(30) && r.drive == "mem:y", "{r:?}");
    assert_eq!(r.bytes_copied, (256 - 30) * 4096, "only the stripes left are copied");
    let sb = arr.superblock();
    assert!(sb.hot.is_none() && sb.member_paths[1] == "mem:y");
    assert_eq!(Superblock::read_from(y.as_ref()).unwrap().role, MemberRole::Stripe);
    let mut want = p1;
    want[3 * 4096 * 10..3 * 4096 * 50].copy_from_slice(&w);
    copied_whole(&arr, 1, ms[1].as_ref(), y.as_ref(), &want);
}

/// A copy paused, the array written and closed cleanly: the next open
/// finds the new drive by its label, puts the twin back and says the copy
/// resumes; asked again it copies only the rest, and the new drive holds
/// what the old one did, the writes after the pause included.
#[test]
fn a_paused_hot_replace_resumes_after_a_clean_close() {
    let (ms, arr, p1) = filled(Level::Raid5, 128, 16);
    let y = mem("y", 128);
    let r = pause(&arr, 2, y.clone(), "mem:y", 40);
    assert_eq!(r.paused_at, Some(40));
    let w = pattern(3 * 4096 * 60, 17);
    arr.write(3 * 4096 * 20, &w).unwrap();
    arr.close().unwrap();
    drop(arr);
    let mut devs = ms.clone();
    devs.push(y.clone());
    // Read-only: shown, but nothing to resume (and the record stays).
    let ro = Array::open_members(devs.clone(), false).unwrap();
    assert!(ro.hot_paused().is_none() && ro.info().hot_paused.is_some_and(|h| h.copied == 40));
    drop(ro);
    let arr = Array::open_members(devs, true).unwrap();
    assert!(arr.open_warnings().iter().any(|w| w.contains("the hot replace of member 2 onto mem:y resumes at stripe 40 of 128")), "{:?}", arr.open_warnings());
    assert_eq!(arr.info().hot_paused.map(|h| h.copied), Some(40));
    // Written while paused again: the twin is back in the slot.
    let w2 = pattern(3 * 4096 * 4, 18);
    arr.write(0, &w2).unwrap();
    let r = arr.replace_hot(2, std::path::Path::new("mem:y"), &|_, _| {}, RebuildOptions::default()).unwrap();
    assert!(!r.stopped && r.resumed_from == Some(40) && r.bytes_copied == (128 - 40) * 4096, "{r:?}");
    let mut want = p1;
    want[3 * 4096 * 20..3 * 4096 * 80].copy_from_slice(&w);
    want[..3 * 4096 * 4].copy_from_slice(&w2);
    copied_whole(&arr, 2, ms[2].as_ref(), y.as_ref(), &want);
}

/// A paused copy cannot resume after a crash (the new drive may have
/// missed a write the old one took) nor without its drive: the open says
/// so and drops the record, and the copy, asked again, starts over.
#[test]
fn a_paused_hot_replace_starts_over_after_a_crash_or_without_its_drive() {
    let (ms, arr, p1) = filled(Level::Raid5, 64, 19);
    let y = mem("y", 64);
    pause(&arr, 3, y.clone(), "mem:y", 20);
    arr.write(0, &[5u8; 4096]).unwrap();
    std::mem::forget(arr); // a power cut
    let mut devs = ms.clone();
    devs.push(y.clone());
    let arr = Array::open_members(devs.clone(), true).unwrap();
    assert!(arr.open_warnings().iter().any(|w| w.contains("cannot resume (the array was not closed cleanly after the copy stopped): it starts over")), "{:?}", arr.open_warnings());
    assert!(arr.superblock().hot.is_none() && arr.info().hot_paused.is_none());
    let r = arr.replace_hot_with(3, y.clone(), "mem:y", &|_, _| {}, RebuildOptions::default()).unwrap();
    assert!(r.resumed_from.is_none() && r.bytes_copied == 64 * 4096, "{r:?}");
    let mut want = p1;
    want[..4096].fill(5);
    assert!(read_all(&arr) == want);

    // Paused, closed cleanly, opened without the new drive.
    let z = mem("z", 64);
    pause(&arr, 0, z.clone(), "mem:z", 10);
    arr.close().unwrap();
    drop(arr);
    let mut devs = ms.clone();
    devs[3] = y.clone();
    let arr = Array::open_members(devs, true).unwrap();
    assert!(arr.open_warnings().iter().any(|w| w.contains("the hot replace of member 0 onto mem:z cannot resume") && w.contains("starts over when asked again")), "{:?}", arr.open_warnings());
    assert!(arr.superblock().hot.is_none());
    arr.fail_member(1).unwrap();
    assert!(read_all(&arr) == want, "wrong bytes");
}

/// raid0 has no redundancy to rebuild from: a hot replace is its only
/// replace, and it works.  Refusals name the reason.
#[test]
fn raid0_members_are_hot_replaced_and_refusals_say_why() {
    let ms: Vec<Arc<dyn Member>> = (0..3).map(|i| mem(&format!("m{i}"), 128) as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&ms), &opts(Level::Raid0, 3), true).unwrap();
    let p1 = pattern(arr.capacity(), 7);
    arr.write(0, &p1).unwrap();
    let e = arr.replace_hot_with(1, mem("small", 64), "mem:small", &|_, _| {}, RebuildOptions::default()).unwrap_err().to_string();
    assert!(e.contains("replacement too small"), "{e}");
    let e = arr.replace_hot_with(3, mem("y", 128), "mem:y", &|_, _| {}, RebuildOptions::default()).unwrap_err().to_string();
    assert!(e.contains("no member 3"), "{e}");
    arr.replace_hot_with(1, mem("y", 128), "mem:y", &|_, _| {}, RebuildOptions::default()).unwrap();
    assert_eq!(arr.superblock().member_paths[1], "mem:y");
    assert!(read_all(&arr) == p1);

    let r5: Vec<Arc<dyn Member>> = (0..3).map(|i| mem(&format!("r{i}"), 64) as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&r5), &opts(Level::Raid5, 3), true).unwrap();
    arr.fail_member(2).unwrap();
    let e = arr.replace_hot_with(2, mem("y", 64), "mem:y", &|_, _| {}, RebuildOptions::default()).unwrap_err().to_string();
    assert!(e.contains("member 2 is failed: replace it without --hot"), "{e}");
}

/// A client thread writing all through the copy (real concurrency: the
/// copy's stripe locks against the client's): every byte it wrote reads
/// back afterwards with another member out.
#[test]
fn a_client_writing_throughout_the_copy_loses_nothing() {
    let ms: Vec<Arc<dyn Member>> = (0..5).map(|i| mem(&format!("m{i}"), 2048) as Arc<dyn Member>).collect();
    let arr = Arc::new(Array::create_on(named(&ms), &opts(Level::Raid5, 5), true).unwrap());
    let cap = arr.capacity();
    arr.write(0, &pattern(cap, 9)).unwrap();
    let model = Arc::new(std::sync::Mutex::new(pattern(cap, 9)));
    let (stop, writes) = (Arc::new(AtomicBool::new(false)), Arc::new(std::sync::atomic::AtomicU64::new(0)));
    let client = {
        let (arr, model, stop, writes) = (arr.clone(), model.clone(), stop.clone(), writes.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let blocks = 1 + i % 5;
                let off = (i.wrapping_mul(7919) % (cap / 4096 - blocks)) * 4096;
                let b = vec![(i % 251) as u8 + 1; (blocks * 4096) as usize];
                arr.write(off, &b).unwrap();
                model.lock().unwrap()[off as usize..off as usize + b.len()].copy_from_slice(&b);
                writes.fetch_add(1, Ordering::SeqCst);
                i += 1;
            }
        })
    };
    while writes.load(Ordering::SeqCst) < 50 {
        std::thread::yield_now();
    }
    let at_start = writes.load(Ordering::SeqCst);
    let y = mem("y", 2048);
    arr.replace_hot_with(3, y, "mem:y", &|at, _| if at % 64 == 0 { std::thread::sleep(std::time::Duration::from_micros(200)) }, RebuildOptions::default()).unwrap();
    stop.store(true, Ordering::SeqCst);
    client.join().unwrap();
    assert!(writes.load(Ordering::SeqCst) > at_start + 20, "the client wrote during the copy");
    arr.fail_member(0).unwrap();
    assert!(read_all(&arr) == *model.lock().unwrap(), "wrong bytes");
}

/// The gate of a drive whose first read at `at` (once armed) waits until
/// released: the copy's read of one unit, held open.
struct Gate {
    at: u64,
    armed: AtomicBool,
    reading: AtomicBool,
    released: (std::sync::Mutex<bool>, std::sync::Condvar),
}
impl Gate {
    fn pass(&self, read: bool, off: u64) -> std::io::Result<()> {
        if read && off == self.at && self.armed.swap(false, Ordering::SeqCst) {
            self.reading.store(true, Ordering::SeqCst);
            let (m, cv) = &self.released;
            let mut r = m.lock().unwrap();
            while !*r {
                r = cv.wait(r).unwrap();
            }
        }
        Ok(())
    }
}

/// The copy of a stripe and a client's write to it exclude each other:
/// while the copy reads member 1's unit of stripe 5 (held open here), a
/// write to that stripe waits; once the copy is done with the stripe it
/// goes on, and reaches the new drive.  Without the stripe's lock the
/// copy would write the unit's old bytes over the new drive's new ones.
#[test]
fn a_client_write_waits_for_the_copy_of_its_stripe() {
    let g = Arc::new(Gate {
        at: mosaic_array::DATA_OFFSET + 5 * 4096,
        armed: AtomicBool::new(false),
        reading: AtomicBool::new(false),
        released: (std::sync::Mutex::new(false), std::sync::Condvar::new()),
    });
    let gate = g.clone();
    let m1 = Hooked::new(mem("m1", 64), move |read, off| gate.pass(read, off));
    let ms: Vec<Arc<dyn Member>> = vec![mem("m0", 64), m1, mem("m2", 64)];
    let arr = Arc::new(Array::create_on(named(&ms), &opts(Level::Raid5, 3), true).unwrap());
    let p1 = pattern(arr.capacity(), 11);
    arr.write(0, &p1).unwrap();
    g.armed.store(true, Ordering::SeqCst);
    let copy = {
        let arr = arr.clone();
        std::thread::spawn(move || arr.replace_hot_with(1, mem("y", 64), "mem:y", &|_, _| {}, RebuildOptions::default()).unwrap())
    };
    while !g.reading.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    // Stripe 5 whole (2 data units): the client's write.
    let stripe = 2 * 4096u64;
    let done = Arc::new(AtomicBool::new(false));
    let client = {
        let (arr, done) = (arr.clone(), done.clone());
        std::thread::spawn(move || {
            arr.write(5 * stripe, &vec![0xee; stripe as usize]).unwrap();
            done.store(true, Ordering::SeqCst);
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(!done.load(Ordering::SeqCst), "the write to the stripe being copied went ahead of the copy");
    *g.released.0.lock().unwrap() = true;
    g.released.1.notify_all();
    client.join().unwrap();
    copy.join().unwrap();
    let mut want = p1;
    want[(5 * stripe) as usize..(6 * stripe) as usize].fill(0xee);
    arr.fail_member(0).unwrap();
    assert!(read_all(&arr) == want, "wrong bytes");
}

/// Without a drive named, the first hot spare is the new drive (md's
/// `--replace` without `--with`): stopped, the copy pauses on it, and a
/// paused copy abandoned for another drive gives the spare back; with no
/// spare the refusal says what to do.
#[test]
fn a_hot_replace_onto_the_first_spare_pauses_on_it_and_gives_it_back_when_abandoned() {
    let (_, arr, p1) = filled(Level::Raid5, 128, 12);
    let e = arr.replace_hot_from_spare(1, &|_, _| {}, RebuildOptions::default()).unwrap_err().to_string();
    assert!(e.contains("no hot spare to copy member 1 onto") && e.contains("mosaic add --spare"), "{e}");
    let (s0, s1) = (mem("s0", 128), mem("s1", 128));
    arr.add_spare_with(s0.clone(), "mem:s0").unwrap();
    arr.add_spare_with(s1.clone(), "mem:s1").unwrap();
    // Stopped: paused on s0, which is a spare no more while it waits.
    let stop = Arc::new(AtomicBool::new(false));
    let opts = RebuildOptions { stop: Some(stop.clone()), ..Default::default() };
    let r = arr.replace_hot_from_spare(1, &|at, _| if at == 7 { stop.store(true, Ordering::SeqCst) }, opts).unwrap();
    assert!(r.stopped && r.drive == "mem:s0" && r.paused_at == Some(7), "{r:?}");
    assert_eq!(arr.spare_paths(), ["mem:s1"]);
    assert!(arr.superblock().hot.as_ref().is_some_and(|h| h.spare && h.path == "mem:s0"));
    assert_eq!(Superblock::read_from(s0.as_ref()).unwrap().role, MemberRole::Replacement);
    // Asked again: s0 takes slot 1 from stripe 7 on, and s1 stays a spare.
    let r = arr.replace_hot_from_spare(1, &|_, _| {}, RebuildOptions::default()).unwrap();
    assert!(!r.stopped && !r.rebuild_needed && r.drive == "mem:s0" && r.resumed_from == Some(7), "{r:?}");
    assert_eq!(arr.spare_paths(), ["mem:s1"]);
    let sb = arr.superblock();
    assert_eq!((sb.member_paths[1].as_str(), sb.spares.len()), ("mem:s0", 1));
    assert_eq!(Superblock::read_from(s0.as_ref()).unwrap().member_uuid, sb.member_uuids[1]);
    // Paused on s1 for slot 2, then another drive named: s1 is a spare
    // again (with a spare's label), and the other drive takes the slot.
    let stop = Arc::new(AtomicBool::new(false));
    let opts = RebuildOptions { stop: Some(stop.clone()), ..Default::default() };
    arr.replace_hot_from_spare(2, &|at, _| if at == 5 { stop.store(true, Ordering::SeqCst) }, opts).unwrap();
    assert!(arr.spare_paths().is_empty());
    let z = mem("z", 128);
    let r = arr.replace_hot_with(2, z.clone(), "mem:z", &|_, _| {}, RebuildOptions::default()).unwrap();
    assert!(!r.stopped && r.resumed_from.is_none() && r.bytes_copied == 128 * 4096, "{r:?}");
    assert_eq!(arr.spare_paths(), ["mem:s1"]);
    assert_eq!(Superblock::read_from(s1.as_ref()).unwrap().role, MemberRole::Spare);
    let sb = arr.superblock();
    assert!(sb.hot.is_none() && sb.member_paths[2] == "mem:z" && sb.spares.len() == 1);
    arr.fail_member(0).unwrap();
    assert!(read_all(&arr) == p1, "wrong bytes");
}

/// The new drive failing its label writes as it takes the slot: the
/// member is failed (the other labels say so), the hot replace says it
/// failed, and the array serves degraded with every byte.
#[test]
fn the_new_drive_failing_as_it_takes_the_slot_is_reported() {
    let (_, arr, p1) = filled(Level::Raid5, 64, 13);
    let (y, broken) = label_breaks(mem("y", 64));
    let e = arr
        .replace_hot_with(2, y, "mem:y", &|at, total| if at == total { broken.store(true, Ordering::SeqCst) }, RebuildOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("failed as it took member 2's place"), "{e}");
    assert_eq!(arr.health().states[2], MemberState::Failed);
    assert!(read_all(&arr) == p1, "wrong bytes");
}

/// The other refusals say why: a member being rebuilt, or another member
/// being rebuilt (finish the rebuild first); and raid0's old drive failing
/// mid-copy, which nothing can rebuild from.
#[test]
fn a_rebuild_pending_or_raid0_s_old_drive_failing_is_said() {
    let ms: Vec<Arc<dyn Member>> = (0..4).map(|i| mem(&format!("m{i}"), 64) as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&ms), &opts(Level::Raid5, 4), true).unwrap();
    arr.fail_member(1).unwrap();
    arr.replace_with(1, mem("r", 64), "mem:r").unwrap();
    let e = arr.replace_hot_with(1, mem("y", 64), "mem:y", &|_, _| {}, RebuildOptions::default()).unwrap_err().to_string();
    assert!(e.contains("member 1 is being rebuilt: finish the rebuild first (mosaic rebuild)"), "{e}");
    let e = arr.replace_hot_with(2, mem("y", 64), "mem:y", &|_, _| {}, RebuildOptions::default()).unwrap_err().to_string();
    assert!(e.contains("member(s) [1] are being rebuilt: finish the rebuild first"), "{e}");

    let (old, broken) = flaky(mem("m1", 64), true);
    let ms: Vec<Arc<dyn Member>> = vec![mem("m0", 64), old];
    let arr = Array::create_on(named(&ms), &opts(Level::Raid0, 2), true).unwrap();
    let e = arr.replace_hot_with(1, mem("y", 64), "mem:y", &|at, _| if at == 10 { broken.store(true, Ordering::SeqCst) }, RebuildOptions::default()).unwrap_err().to_string();
    assert!(e.contains("member 1 failed during its hot replace, and raid0 has no redundancy"), "{e}");
}

/// Another change of the slot between the hot replace's checks and the
/// copy's start (here the member is failed and replaced by another drive
/// while the new drive's label is being cleared): the hot replace does
/// not start, says why, and leaves the slot as the other change made it.
#[test]
fn a_slot_changed_as_the_hot_replace_starts_is_said_and_left_alone() {
    let ms: Vec<Arc<dyn Member>> = (0..4).map(|i| mem(&format!("m{i}"), 64) as Arc<dyn Member>).collect();
    let arr = Arc::new(Array::create_on(named(&ms), &opts(Level::Raid5, 4), true).unwrap());
    let p1 = pattern(arr.capacity(), 14);
    arr.write(0, &p1).unwrap();
    let (other, done) = (arr.clone(), AtomicBool::new(false));
    let y = Hooked::new(mem("y", 64), move |read, off| {
        if !read && off == 0 && !done.swap(true, Ordering::SeqCst) {
            other.fail_member(2).unwrap();
            other.replace_with(2, mem("r", 64), "mem:r").unwrap();
        }
        Ok(())
    });
    let e = arr.replace_hot_with(2, y, "mem:y", &|_, _| {}, RebuildOptions::default()).unwrap_err().to_string();
    assert!(e.contains("member 2 changed drives meanwhile: ask again"), "{e}");
    assert_eq!(arr.superblock().member_paths[2], "mem:r");
    assert!(matches!(arr.health().states[2], MemberState::Rebuilding { .. }), "{:?}", arr.health().states[2]);
    arr.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap();
    arr.fail_member(0).unwrap();
    assert!(read_all(&arr) == p1, "wrong bytes");
}

/// A hot replace onto the first spare that stops, when the spare can take
/// neither the paused copy's label nor its spare label back: the error names the drive and why, the
/// drive is no longer listed as a spare (by the array or its labels), and
/// the member stays in service on its old drive.
#[test]
fn a_spare_that_cannot_be_given_back_is_said() {
    let (ms, arr, p1) = filled(Level::Raid5, 64, 15);
    // Its label area fails once the copy has begun (and is stopped).
    let (s, broken) = label_breaks(mem("s", 64));
    arr.add_spare_with(s, "mem:s").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let opts = RebuildOptions { stop: Some(stop.clone()), ..Default::default() };
    let progress = |at: u64, _: u64| {
        if at == 1 {
            broken.store(true, Ordering::SeqCst);
            stop.store(true, Ordering::SeqCst);
        }
    };
    let e = arr.replace_hot_from_spare(1, &progress, opts).unwrap_err().to_string();
    assert!(e.contains("stopped at stripe 1 and could not pause there") && e.contains("giving mem:s back as a hot spare failed too") && e.contains("medium error"), "{e}");
    assert!(arr.spare_paths().is_empty() && arr.superblock().spares.is_empty());
    assert_eq!(arr.health().states[1], MemberState::Active);
    assert_eq!(arr.superblock().member_paths[1], ms[1].describe());
    arr.fail_member(0).unwrap();
    assert!(read_all(&arr) == p1, "wrong bytes");
}
