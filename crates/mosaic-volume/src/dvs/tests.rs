//! A cached DVS volume under concurrent writers and readers while its
//! destages run in the background.

use std::sync::Arc;

use mosaic_dvs::files::{create_in_dir, CreateSpec};

use super::DvsVolume;
use crate::Volume;

/// Block `i`'s bytes in round `r`.
fn block(i: u64, r: u64) -> Vec<u8> {
    let seed = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ r.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    (0..4096u64).map(|j| (seed.wrapping_add(j.wrapping_mul(31)) >> 7) as u8).collect()
}

/// A DVS array of five 16 MiB members (1 MiB zones, 64 KiB chunks, 8
/// cached chunks) in `dir`/z: its directory.
fn cached_dvs(dir: &std::path::Path) -> std::path::PathBuf {
    let z = dir.join("z");
    let s = CreateSpec { members: 5, member_size: 16 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 8 };
    drop(create_in_dir(&z, &s, false).unwrap());
    z
}

/// Four writers, each over its own blocks, read every block back right
/// after writing it (a read of a block whose chunk is being destaged
/// waits for the destage, or finds the block still cached); the cache
/// (8 chunks of 16 blocks) destages many times meanwhile.  After a close
/// and a reopen every block holds its last bytes.
#[test]
fn concurrent_writers_read_their_writes_while_destages_run_in_the_background() {
    let t = tempfile::tempdir().unwrap();
    let dir = cached_dvs(t.path());
    let spec = dir.to_str().unwrap().to_string();
    let v = Arc::new(DvsVolume::open(&spec, true).unwrap());
    let blocks = v.capacity() / 4096;
    const WRITERS: u64 = 4;
    const ROUNDS: u64 = 6;
    std::thread::scope(|sc| {
        for w in 0..WRITERS {
            let v = v.clone();
            sc.spawn(move || {
                let mut got = vec![0u8; 4096];
                for r in 0..ROUNDS {
                    // Every WRITERS-th block from w, a stride apart: many chunks.
                    for i in (w..blocks).step_by((WRITERS * 37) as usize) {
                        let data = block(i, r);
                        v.write(i * 4096, &data).unwrap();
                        v.read(i * 4096, &mut got).unwrap();
                        assert!(got == data, "writer {w}: block {i} round {r} reads back");
                    }
                }
            });
        }
    });
    v.close().unwrap();
    drop(v);
    let v = DvsVolume::open(&spec, false).unwrap();
    let mut got = vec![0u8; 4096];
    for w in 0..WRITERS {
        for i in (w..blocks).step_by((WRITERS * 37) as usize) {
            v.read(i * 4096, &mut got).unwrap();
            assert!(got == block(i, ROUNDS - 1), "block {i} after the reopen");
        }
    }
}

/// A scrub goes SSG by SSG with the array's lock released between
/// steps: a client's write and read made from its progress callback (a
/// server's client, while the scrub sleeps to hold its rate) finish at
/// once instead of waiting for the whole scrub; and it can be ended
/// before its last step.
#[test]
fn a_scrub_lets_clients_in_between_its_steps_and_can_be_interrupted() {
    let t = tempfile::tempdir().unwrap();
    let dir = cached_dvs(t.path());
    let v = Arc::new(DvsVolume::open(dir.to_str().unwrap(), true).unwrap());
    let blocks = v.capacity() / 4096;
    for i in (0..blocks).step_by(3) {
        v.write(i * 4096, &block(i, 0)).unwrap();
    }
    v.flush().unwrap();
    let steps = std::sync::atomic::AtomicU64::new(0);
    let rep = v
        .scrub(true, &|_, _| {
            if steps.fetch_add(1, std::sync::atomic::Ordering::Relaxed) != 1 {
                return;
            }
            let (tx, rx) = std::sync::mpsc::channel();
            let w = v.clone();
            std::thread::spawn(move || {
                w.write(7 * 4096, &block(7, 1)).unwrap();
                let mut got = vec![0u8; 4096];
                w.read(7 * 4096, &mut got).unwrap();
                tx.send(got).unwrap();
            });
            let got = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("a client waited for the whole scrub");
            assert!(got == block(7, 1));
        })
        .unwrap();
    assert!(steps.into_inner() > 2 && !rep.interrupted && rep.mismatched == 0, "{rep:?}");
    let mut got = vec![0u8; 4096];
    v.read(7 * 4096, &mut got).unwrap();
    assert!(got == block(7, 1));
    // Ended after its first step: the stripes left are not verified.
    let rep = v.scrub(false, &|_, _| v.interrupt_scrub()).unwrap();
    assert!(rep.interrupted && rep.unverified_stripes > 0 && rep.notes.iter().any(|n| n.contains("interrupted at SSG")), "{rep:?}");
    assert_eq!(v.scrub(false, &|_, _| {}).unwrap().mismatched, 0);
}

/// What a DVS array's scrub found is kept in its labels, as a fixed
/// array's superblocks keep it: asked of a writable open, recorded (in
/// two label rounds), shown by `info`, there after a reopen; a read-only
/// open's scrub checks and leaves the record as it was.
#[test]
fn a_scrub_asked_of_a_writable_open_is_kept_in_the_labels() {
    let t = tempfile::tempdir().unwrap();
    let dir = cached_dvs(t.path());
    let spec = dir.to_str().unwrap().to_string();
    let v = DvsVolume::open(&spec, true).unwrap();
    for i in (0..v.capacity() / 4096).step_by(5) {
        v.write(i * 4096, &block(i, 0)).unwrap();
    }
    v.flush().unwrap();
    let kept = |v: &DvsVolume| serde_json::from_value::<Option<mosaic_array::ScrubRecord>>(v.info().detail["last_scrub"].clone()).unwrap();
    let events = |v: &DvsVolume| v.info().detail["events"].as_u64().unwrap();
    assert_eq!(kept(&v), None);
    assert!(!v.info().summary.iter().any(|(k, _)| k == "last scrub"));
    let e0 = events(&v);
    let rep = v.scrub(false, &|_, _| {}).unwrap();
    assert!(rep.stripes_checked > 0 && rep.mismatched == 0, "{rep:?}");
    let r = kept(&v).expect("recorded");
    assert_eq!((r.stripes, r.mismatched, r.unverified, r.repaired, r.interrupted), (rep.stripes_checked, 0, 0, false, false), "{r:?}");
    assert!(r.end + 60 > mosaic_array::now_secs() && r.end <= mosaic_array::now_secs());
    assert_eq!(events(&v), e0 + 2, "two label rounds");
    // Ended after its first step.
    let rep = v.scrub(false, &|_, _| v.interrupt_scrub()).unwrap();
    let r = kept(&v).unwrap();
    assert!(rep.interrupted && r.interrupted && r.unverified == rep.unverified_stripes && r.unverified > 0, "{r:?}");
    v.close().unwrap();
    drop(v);
    let ro = DvsVolume::open(&spec, false).unwrap();
    assert_eq!(kept(&ro), Some(r), "read back from the labels");
    let line = ro.info().summary.into_iter().find(|(k, _)| k == "last scrub").map(|(_, l)| l).unwrap();
    assert!(line.contains("stopped before its end") && line.contains("not verified"), "{line}");
    assert!(ro.scrub(false, &|_, _| {}).unwrap().stripes_checked > r.stripes);
    assert_eq!(kept(&ro), Some(r), "a read-only scrub records nothing");
    drop(ro);
    // A writable open's repairing scrub replaces it.
    let v = DvsVolume::open(&spec, true).unwrap();
    v.scrub(true, &|_, _| {}).unwrap();
    let r2 = kept(&v).unwrap();
    assert!(r2.repaired && !r2.interrupted && r2.unverified == 0, "{r2:?}");
}

/// A hot replace while two writers write and read back: the copy takes
/// the lock zone by zone, so they are served meanwhile.  The new drive
/// (outside the array's directory) is member 2 after it, recorded for the
/// next open, and the old file is set aside as `dvs-2.zoned.replaced`.
#[test]
fn a_hot_replace_copies_a_member_while_writers_are_served() {
    let t = tempfile::tempdir().unwrap();
    let dir = cached_dvs(t.path());
    let spec = dir.to_str().unwrap().to_string();
    let v = Arc::new(DvsVolume::open(&spec, true).unwrap());
    let blocks = v.capacity() / 4096;
    for i in (0..blocks).step_by(3) {
        v.write(i * 4096, &block(i, 0)).unwrap();
    }
    let new = t.path().join("new.zoned");
    let ticks = std::sync::Mutex::new(Vec::new());
    let writes = std::sync::atomic::AtomicU64::new(0);
    let done = std::sync::atomic::AtomicBool::new(false);
    let rep = std::thread::scope(|sc| {
        for w in 0..2u64 {
            let (v, done, writes) = (v.clone(), &done, &writes);
            sc.spawn(move || {
                let mut got = vec![0u8; 4096];
                let mut r = 1;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    for i in (w..blocks).step_by(2 * 41) {
                        v.write(i * 4096, &block(i, r)).unwrap();
                        v.read(i * 4096, &mut got).unwrap();
                        assert!(got == block(i, r), "writer {w}: block {i} round {r}");
                        writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    r += 1;
                }
            });
        }
        let rep = v.replace_hot(2, Some(&new), &|d, n| ticks.lock().unwrap().push((d, n)), Default::default());
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        rep
    });
    let rep = rep.unwrap();
    assert!(!rep.stopped && rep.bytes_copied > 0 && rep.member == 2, "{rep:?}");
    let ticks = ticks.into_inner().unwrap();
    assert!(ticks.len() > 2 && ticks.last().map(|&(d, n)| d == n) == Some(true), "{ticks:?}");
    assert!(writes.load(std::sync::atomic::Ordering::Relaxed) > 0);
    assert!(v.info().members[2].path.ends_with("new.zoned"), "{:?}", v.info().members[2]);
    assert!(dir.join("dvs-2.zoned.replaced").exists() && !dir.join("dvs-2.zoned").exists());
    // What each block holds now, read back after a reopen of the directory.
    let mut now = vec![vec![0u8; 4096]; blocks as usize];
    for (i, b) in now.iter_mut().enumerate() {
        v.read(i as u64 * 4096, b).unwrap();
    }
    v.close().unwrap();
    drop(v);
    let v = DvsVolume::open(&spec, true).unwrap();
    assert!(v.info().members[2].path.ends_with("new.zoned"));
    assert!(!v.info().degraded);
    let mut got = vec![0u8; 4096];
    for (i, b) in now.iter().enumerate() {
        v.read(i as u64 * 4096, &mut got).unwrap();
        assert!(&got == b, "block {i}");
    }
    assert_eq!(v.scrub(false, &|_, _| {}).unwrap().mismatched, 0);
    // Asked to stop after a step, a hot replace onto a named drive pauses:
    // the member stays on its drive, the new one mirrors what was copied.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let other = t.path().join("other.zoned");
    let halt = |d: u64, _: u64| stop.store(d >= 4, std::sync::atomic::Ordering::Relaxed);
    let rep = v.replace_hot(1, Some(&other), &halt, mosaic_array::maint::RebuildOptions { stop: Some(stop.clone()), ..Default::default() }).unwrap();
    assert!(rep.stopped && rep.paused_at.is_some_and(|z| z > 0 && z < rep.regions), "{rep:?}");
    assert!(v.info().members[1].path.ends_with("dvs-1.zoned"));
    assert!(v.info().members[1].replacing.as_deref().is_some_and(|r| r.ends_with("other.zoned")), "{:?}", v.info().members[1]);
    assert_eq!(v.hot_paused(), Some((1, other.display().to_string())));
    // Written while paused, closed, opened again: the copy is found
    // paused, and resumes where it stopped.
    for i in (0..blocks).step_by(5) {
        v.write(i * 4096, &block(i, 99)).unwrap();
        now[i as usize] = block(i, 99);
    }
    v.close().unwrap();
    drop(v);
    let ro = DvsVolume::open(&spec, false).unwrap();
    assert_eq!(ro.hot_paused(), None, "a read-only open cannot resume it");
    drop(ro);
    let v = DvsVolume::open(&spec, true).unwrap();
    assert_eq!(v.hot_paused(), Some((1, other.display().to_string())), "{:?}", v.warnings());
    let rep = v.replace_hot(1, Some(&other), &|_, _| {}, Default::default()).unwrap();
    assert!(!rep.stopped && rep.resumed_from.is_some_and(|z| z > 0), "{rep:?}");
    assert!(v.info().members[1].path.ends_with("other.zoned") && v.hot_paused().is_none());
    v.fail_member(0).unwrap();
    for (i, b) in now.iter().enumerate() {
        v.read(i as u64 * 4096, &mut got).unwrap();
        assert!(&got == b, "block {i} with member 1 on the resumed drive");
    }
    v.replace(0, &t.path().join("m0.zoned")).unwrap();
    v.rebuild(&|_, _| {}, Default::default()).unwrap();
    // Stopped, a hot replace onto a spare gives the spare back.
    let spare = t.path().join("spare.zoned");
    v.add_spare(&spare).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let rep = v.replace_hot(3, None, &|_, _| {}, mosaic_array::maint::RebuildOptions { stop: Some(stop), ..Default::default() }).unwrap();
    assert!(rep.stopped && rep.paused_at.is_none() && rep.drive.ends_with("spare.zoned"), "{rep:?}");
    assert_eq!(v.spare_list(), vec![spare.display().to_string()]);
    v.close().unwrap();
    drop(v);
    let v = DvsVolume::open(&spec, true).unwrap();
    assert_eq!(v.spare_list(), vec![spare.display().to_string()], "{:?}", v.warnings());
    assert!(v.info().members[3].path.ends_with("dvs-3.zoned") && v.hot_paused().is_none());
    // Refused: its own drive, another member's, a spare named.
    for (d, why) in [(dir.join("dvs-3.zoned"), "is member 3 of this array"), (new.clone(), "is member 2 of this array"), (spare.clone(), "is a hot spare of this array: replace --hot without --drive takes the first spare")] {
        let e = v.replace_hot(3, Some(&d), &|_, _| {}, Default::default()).unwrap_err().to_string();
        assert!(e.contains(why), "{e}");
    }
    // Cut off before it paused (as a killed process), the copy is not
    // recorded: the next open has none to resume.
    let cut = t.path().join("cut.zoned");
    let e = v.replace_hot(3, Some(&cut), &|_, _| {}, mosaic_array::maint::RebuildOptions { abort_after_regions: Some(2), ..Default::default() }).unwrap_err().to_string();
    assert!(e.contains("hot replace stopped after 2 steps (as asked); it starts over when asked again"), "{e}");
    v.close().unwrap();
    drop(v);
    let v = DvsVolume::open(&spec, true).unwrap();
    assert_eq!(v.hot_paused(), None);
    // Not stopped, the spare takes the slot.
    let rep = v.replace_hot(3, None, &|_, _| {}, Default::default()).unwrap();
    assert!(!rep.stopped && v.info().members[3].path.ends_with("spare.zoned") && v.spare_list().is_empty(), "{rep:?}");
    assert!(v.replace_hot(0, None, &|_, _| {}, Default::default()).unwrap_err().to_string().contains("no hot spare to copy member 0 onto"));
}
