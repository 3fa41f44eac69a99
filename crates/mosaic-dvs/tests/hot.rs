//! Hot replace of a DVS member: a working member copied zone by zone onto
//! a new zoned drive under client writes, GC and destages, then switched.

use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use mosaic_core::MemberState;
use mosaic_dev::zoned::ZonedFile;
use mosaic_dvs::array::{PowerCut, ZonedMember};
use mosaic_dvs::{DvsArray, DvsConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::array::{cfg, cfg_cached, check_all, files_for, fill, more_writes, scratch};

/// The zoned file `name` in `dir`, made with `c`'s zone geometry.
fn new_drive(dir: &Path, name: &str, c: &DvsConfig) -> Arc<dyn ZonedMember> {
    Arc::new(ZonedFile::create(&dir.join(name), c.zone_size, c.zones, c.conventional).unwrap())
}

/// The five member files and the new drive, opened again from disk.
fn all_files(dir: &Path) -> Vec<Arc<dyn ZonedMember>> {
    ["m0", "m1", "m2", "m3", "m4", "new"].iter().map(|n| Arc::new(ZonedFile::open(&dir.join(n)).unwrap()) as Arc<dyn ZonedMember>).collect()
}

/// Member `m`'s UUID as the labels name it.
fn member_uuid(a: &DvsArray, m: usize) -> uuid::Uuid {
    a.info().member_list[m].uuid
}

/// Hot-replace member 2 one zone a step, `writes` random writes (and a GC
/// step now and then) between steps; the reference of the logical space.
fn copy_under_writes(a: &mut DvsArray, rng: &mut ChaCha8Rng, reference: &mut [u8], writes: usize) -> u64 {
    let mut steps = 0;
    loop {
        let p = a.hot_step(1).unwrap();
        steps += 1;
        assert_eq!(a.info().hot_replace, Some(p));
        if p.done == p.total {
            return steps;
        }
        more_writes(a, rng, reference, writes);
        if rng.gen_bool(0.3) {
            a.gc_step().unwrap();
        }
    }
}

#[test]
fn a_hot_replaced_member_is_copied_under_writes_and_its_new_drive_serves_it() {
    for (seed, c) in [(1u64, cfg(1)), (2, cfg(2)), (3, cfg_cached(1, 16)), (4, DvsConfig { journal_ring: true, ..cfg_cached(2, 16) })] {
        let dir = scratch();
        let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut reference = fill(&mut a, &mut rng, 300);
        let former = member_uuid(&a, 2);
        a.hot_start(2, new_drive(dir.path(), "new", &c)).unwrap();
        assert!(a.hot_start(1, new_drive(dir.path(), "other", &c)).unwrap_err().to_string().contains("member 2 is being hot-replaced already"));
        let steps = copy_under_writes(&mut a, &mut rng, &mut reference, 20);
        // The conventional zones are one step, then one a sequential zone.
        assert_eq!(steps, 1 + c.zones - c.conventional, "seed {seed}");
        let p = a.hot_progress().unwrap();
        assert!(p.bytes > 0 && p.member == 2);
        more_writes(&mut a, &mut rng, &mut reference, 50);
        let new_uuid = a.hot_switch().unwrap();
        assert_eq!(a.hot_progress(), None);
        assert_eq!(member_uuid(&a, 2), new_uuid);
        assert!(a.info().replaced.contains(&former));
        assert!(a.info().member_list[2].describe.contains("new"), "{:?}", a.info().member_list[2]);
        more_writes(&mut a, &mut rng, &mut reference, 50);
        check_all(&mut a, &reference);
        assert_eq!(a.scrub().unwrap(), 0, "seed {seed}");
        drop(a);
        // Reopened from every file: the old drive is passed over as
        // replaced, the new one serves member 2.
        let mut b = DvsArray::open(all_files(dir.path())).unwrap();
        assert_eq!(member_uuid(&b, 2), new_uuid);
        assert!(b.info().member_list[2].describe.contains("new"));
        assert!(b.info().member_list.iter().all(|m| m.state == MemberState::Active));
        check_all(&mut b, &reference);
        assert_eq!(b.scrub().unwrap(), 0, "seed {seed}");
        // The new drive's bytes are the member's: with member 2 alone
        // left of what parity needs, every read goes through it.
        for m in (0..5).filter(|&m| m != 2).take(c.parity) {
            b.fail(m).unwrap();
        }
        check_all(&mut b, &reference);
    }
}

#[test]
fn a_hot_replace_cut_off_leaves_the_old_drive_serving_and_the_new_one_blank() {
    let c = cfg_cached(1, 16);
    let dir = scratch();
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut reference = fill(&mut a, &mut rng, 300);
    let former = member_uuid(&a, 2);
    a.hot_start(2, new_drive(dir.path(), "new", &c)).unwrap();
    for _ in 0..4 {
        a.hot_step(1).unwrap();
        more_writes(&mut a, &mut rng, &mut reference, 30);
    }
    // Two label rounds on every member while the labels' zone is copied:
    // they reach the old drive only.
    a.add_spare(new_drive(dir.path(), "spare", &c)).unwrap();
    assert!(a.hot_switch().unwrap_err().to_string().contains("has not copied every zone yet"));
    drop(a);
    let mut b = DvsArray::open(all_files(dir.path())).unwrap();
    assert_eq!(member_uuid(&b, 2), former);
    assert!(!b.info().member_list[2].describe.contains("new"));
    assert!(b.info().member_list.iter().all(|m| m.state == MemberState::Active));
    assert_eq!(b.hot_progress(), None);
    check_all(&mut b, &reference);
    drop(b);
    // Without the old drive (in a copy of the files: an open records a
    // missing member failed), the new one, copied part-way, is not taken
    // for member 2: it carries no label.
    let copy = scratch();
    for n in ["m0", "m1", "m3", "m4", "new"] {
        std::fs::copy(dir.path().join(n), copy.path().join(n)).unwrap();
    }
    let open = |n: &&str| Arc::new(ZonedFile::open(&copy.path().join(n)).unwrap()) as Arc<dyn ZonedMember>;
    let mut b = DvsArray::open(["m0", "m1", "m3", "m4", "new"].iter().map(open).collect()).unwrap();
    assert!(!b.info().member_list[2].present, "{:?}", b.info().member_list[2]);
    check_all(&mut b, &reference);
    drop(b);
    let devs: Vec<_> = all_files(dir.path());
    // Asked again, the copy starts over on the same drive and ends.
    let mut b = DvsArray::open(devs[..5].to_vec()).unwrap();
    b.hot_start(2, devs[5].clone()).unwrap();
    assert_eq!(b.hot_progress().unwrap().done, 0);
    copy_under_writes(&mut b, &mut rng, &mut reference, 10);
    b.hot_switch().unwrap();
    check_all(&mut b, &reference);
    assert_eq!(b.scrub().unwrap(), 0);
}

#[test]
fn the_new_drive_failing_ends_the_hot_replace_and_the_member_stays_on_its_old_drive() {
    let c = cfg(1);
    for fail_at in [0i64, 3, 40, 200] {
        let dir = scratch();
        let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(fail_at as u64);
        let mut reference = fill(&mut a, &mut rng, 300);
        let budget = Arc::new(AtomicI64::new(i64::MAX));
        let new = Arc::new(PowerCut::new(new_drive(dir.path(), "new", &c), budget.clone(), Arc::new(AtomicU64::new(0))));
        a.hot_start(2, new).unwrap();
        budget.store(fail_at, Ordering::SeqCst);
        let e = loop {
            match a.hot_step(1) {
                Ok(p) => {
                    assert!(p.done < p.total, "fail_at {fail_at}: the copy ended on a failed drive");
                    more_writes(&mut a, &mut rng, &mut reference, 20);
                }
                Err(e) => break e.to_string(),
            }
        };
        assert!(e.contains("the new drive failed") && e.contains("stays on its old drive"), "{e}");
        assert_eq!(a.hot_progress(), None);
        assert!(a.stopped().is_none());
        more_writes(&mut a, &mut rng, &mut reference, 50);
        check_all(&mut a, &reference);
        assert_eq!(a.scrub().unwrap(), 0);
        assert!(a.hot_step(1).unwrap_err().to_string().contains("no hot replace is in progress"));
    }
}

#[test]
fn a_member_failing_during_a_hot_replace_ends_it_and_so_does_a_plain_replace() {
    let c = cfg(2);
    let dir = scratch();
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut reference = fill(&mut a, &mut rng, 200);
    assert!(a.hot_start(7, new_drive(dir.path(), "x", &c)).unwrap_err().to_string().contains("no member 7"));
    a.fail(4).unwrap();
    assert!(a.hot_start(4, new_drive(dir.path(), "y", &c)).unwrap_err().to_string().contains("not in service"));
    a.replace(4, new_drive(dir.path(), "z", &c)).unwrap();
    a.rebuild(&|_, _| {}, None).unwrap();
    a.hot_start(1, new_drive(dir.path(), "new", &c)).unwrap();
    a.hot_step(3).unwrap();
    // Refused for its own reason, a plain replace leaves the copy going.
    assert!(a.replace(3, new_drive(dir.path(), "w", &c)).unwrap_err().to_string().contains("member 3 is active"));
    assert!(a.hot_progress().is_some());
    a.fail(3).unwrap();
    assert_eq!(a.hot_progress(), None);
    // A paused copy ends when a failed member is put back.
    a.hot_start(1, new_drive(dir.path(), "new2", &c)).unwrap();
    a.hot_step(3).unwrap();
    a.hot_pause().unwrap();
    a.replace(3, new_drive(dir.path(), "v", &c)).unwrap();
    assert_eq!(a.hot_progress(), None);
    a.rebuild(&|_, _| {}, None).unwrap();
    more_writes(&mut a, &mut rng, &mut reference, 50);
    check_all(&mut a, &reference);
}

/// The power cut at every operation of the switch: the array opens
/// whole or degraded, never with a stale member, and every acknowledged
/// write reads back.
#[test]
fn a_power_cut_anywhere_in_the_switch_loses_no_acknowledged_write() {
    let c = cfg_cached(1, 16);
    let mut outcomes = std::collections::BTreeMap::new();
    for cut in 0..40i64 {
        let dir = scratch();
        let budget = Arc::new(AtomicI64::new(i64::MAX));
        let refusals = Arc::new(AtomicU64::new(0));
        let wrap = |d: Arc<dyn ZonedMember>| Arc::new(PowerCut::new(d, budget.clone(), refusals.clone())) as Arc<dyn ZonedMember>;
        let mut a = DvsArray::create(files_for(dir.path(), 5, &c).into_iter().map(wrap).collect(), c.clone()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(cut as u64);
        let mut reference = fill(&mut a, &mut rng, 200);
        let former = member_uuid(&a, 2);
        a.hot_start(2, wrap(new_drive(dir.path(), "new", &c))).unwrap();
        copy_under_writes(&mut a, &mut rng, &mut reference, 30);
        budget.store(cut, Ordering::SeqCst);
        let switched = a.hot_switch();
        drop(a);
        let mut b = DvsArray::open(all_files(dir.path())).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        let slot2 = member_uuid(&b, 2);
        let state = b.info().member_list[2].state;
        let on = if slot2 == former { "old" } else if b.info().member_list[2].present { "new" } else { "none" };
        if switched.is_ok() {
            assert_eq!(on, "new", "cut {cut}");
        }
        *outcomes.entry(format!("{on} {state:?}")).or_insert(0) += 1;
        check_all(&mut b, &reference);
        assert_eq!(refusals.load(Ordering::SeqCst), 0, "cut {cut}: a zone write off its write pointer");
        if state == MemberState::Active {
            // Member 2's drive, whichever it is, holds the member's bytes.
            assert_eq!(b.scrub().unwrap(), 0, "cut {cut}");
            b.fail(0).unwrap();
            check_all(&mut b, &reference);
        }
    }
    // Cuts fell before the first label round, after the last, and between.
    assert!(outcomes.keys().any(|k| k.starts_with("old")) && outcomes.keys().any(|k| k.starts_with("new")), "{outcomes:?}");
}

/// An array of `cfg(1)` in a fresh directory, 200 random writes in, its
/// member 2 hot-replaced three steps and paused, then stopped.
struct Stopped {
    dir: tempfile::TempDir,
    c: DvsConfig,
    rng: ChaCha8Rng,
    reference: Vec<u8>,
    /// Member 2's UUID (its old drive's).
    former: uuid::Uuid,
}

fn stopped_while_paused(seed: u64) -> Stopped {
    let c = cfg(1);
    let dir = scratch();
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut reference = fill(&mut a, &mut rng, 200);
    let former = member_uuid(&a, 2);
    paused_copy(&mut a, dir.path(), &c, &mut rng, &mut reference, 3);
    drop(a);
    Stopped { dir, c, rng, reference, former }
}

/// Member 2 hot-replaced onto "new" up to `steps` steps, then paused.
fn paused_copy(a: &mut DvsArray, dir: &Path, c: &DvsConfig, rng: &mut ChaCha8Rng, reference: &mut [u8], steps: usize) {
    a.hot_start(2, new_drive(dir, "new", c)).unwrap();
    for _ in 0..steps {
        a.hot_step(1).unwrap();
        more_writes(a, rng, reference, 20);
    }
    let p = a.hot_pause().unwrap();
    assert!(p.paused && p.done > 0, "{p:?}");
}

/// Finish the copy, switch, and read everything back with member 2's
/// new drive needed for every read.
fn finish_and_check(a: &mut DvsArray, rng: &mut ChaCha8Rng, reference: &mut [u8], parity: usize) {
    copy_under_writes(a, rng, reference, 10);
    a.hot_switch().unwrap();
    assert!(a.info().member_list[2].describe.contains("new"));
    check_all(a, reference);
    assert_eq!(a.scrub().unwrap(), 0);
    for m in [0, 1].into_iter().take(parity) {
        a.fail(m).unwrap();
    }
    check_all(a, reference);
}

/// Paused by a clean stop, the copy is recorded: the new drive carries a
/// `replacement` label, the twin stays (writes reach both drives), and
/// the copy resumes in the same session or after a close and an open.
#[test]
fn a_paused_hot_replace_resumes_in_the_session_and_after_a_reopen() {
    for reopen in [false, true] {
        let c = cfg_cached(1, 16);
        let dir = scratch();
        let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let mut reference = fill(&mut a, &mut rng, 300);
        paused_copy(&mut a, dir.path(), &c, &mut rng, &mut reference, 5);
        let at = a.hot_progress().unwrap().done;
        more_writes(&mut a, &mut rng, &mut reference, 100);
        a.gc_step().unwrap();
        if reopen {
            drop(a);
            a = DvsArray::open(all_files(dir.path())).unwrap();
            assert!(a.warnings().is_empty(), "{:?}", a.warnings());
            let p = a.hot_progress().unwrap();
            // The conventional zones are copied again.
            assert!(p.paused && p.member == 2 && p.resumed_from == Some(at - c.conventional) && p.done == at - c.conventional, "{p:?} at {at}");
            assert_eq!(a.hot_source(), Some(5));
            more_writes(&mut a, &mut rng, &mut reference, 50);
        }
        finish_and_check(&mut a, &mut rng, &mut reference, c.parity);
    }
}

/// A power cut while the copy is paused, at any operation of the writes
/// after it: the next open resumes at the first zone the cut left apart on
/// the two drives (or the recorded one), and the copy, finished, holds
/// every acknowledged write.
#[test]
fn a_power_cut_while_paused_resumes_where_the_drives_still_agree() {
    let c = cfg(1);
    let mut lowered = 0;
    // Thirty cuts, and more until one lands between a mirrored write's two
    // halves (the destager's timing moves where the cuts fall).
    for cut in 0..300i64 {
        if cut >= 30 && lowered > 0 {
            break;
        }
        let dir = scratch();
        let budget = Arc::new(AtomicI64::new(i64::MAX));
        let refusals = Arc::new(AtomicU64::new(0));
        let wrap = |d: Arc<dyn ZonedMember>| Arc::new(PowerCut::new(d, budget.clone(), refusals.clone())) as Arc<dyn ZonedMember>;
        let mut a = DvsArray::create(files_for(dir.path(), 5, &c).into_iter().map(wrap).collect(), c.clone()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(100 + cut as u64);
        let mut reference = fill(&mut a, &mut rng, 200);
        a.hot_start(2, wrap(new_drive(dir.path(), "new", &c))).unwrap();
        copy_under_writes(&mut a, &mut rng, &mut reference, 10);
        let recorded = {
            // Paused with every zone copied: the cut then lands in mirrored writes.
            let p = a.hot_pause().unwrap();
            p.done - c.conventional
        };
        budget.store(cut * 7, Ordering::SeqCst);
        let cap = reference.len() as u64;
        let mut inflight = None;
        for _ in 0..200 {
            let (off, data) = crate::array::random_write(&mut rng, cap);
            match a.write(off, &data) {
                Ok(()) => reference[off as usize..off as usize + data.len()].copy_from_slice(&data),
                Err(_) => {
                    inflight = Some((off, data));
                    break;
                }
            }
        }
        drop(a);
        let mut b = DvsArray::open(all_files(dir.path())).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        // The write cut off is whatever the array holds now.
        if let Some((off, data)) = inflight {
            let mut got = vec![0u8; data.len()];
            b.read(off, &mut got).unwrap();
            reference[off as usize..off as usize + data.len()].copy_from_slice(&got);
        }
        let p = b.hot_progress().unwrap_or_else(|| panic!("cut {cut}: not resumed: {:?}", b.warnings()));
        if p.done < recorded {
            lowered += 1;
        }
        finish_and_check(&mut b, &mut rng, &mut reference, c.parity);
    }
    assert!(lowered > 0, "no cut left the drives apart");
}

/// Opened without its new drive, a paused copy is dropped for good: the
/// drive found later is passed over, and the member stays on its drive.
#[test]
fn a_paused_hot_replace_opened_without_its_drive_is_dropped() {
    let Stopped { dir, c, mut rng, mut reference, former } = stopped_while_paused(33);
    let devs = all_files(dir.path());
    let mut b = DvsArray::open(devs[..5].to_vec()).unwrap();
    assert!(b.warnings().iter().any(|w| w.contains("paused hot replace of member 2 was dropped")), "{:?}", b.warnings());
    assert_eq!(b.hot_progress(), None);
    more_writes(&mut b, &mut rng, &mut reference, 100);
    b.gc_step().unwrap();
    drop(b);
    let mut b = DvsArray::open(all_files(dir.path())).unwrap();
    assert_eq!(b.hot_progress(), None);
    assert!(b.warnings().iter().any(|w| w.contains("former hot replace's drive")), "{:?}", b.warnings());
    assert_eq!(member_uuid(&b, 2), former);
    check_all(&mut b, &reference);
    // Asked again, it starts over on that drive.
    drop(b);
    let devs = all_files(dir.path());
    let mut b = DvsArray::open(devs[..5].to_vec()).unwrap();
    b.hot_start(2, devs[5].clone()).unwrap();
    finish_and_check(&mut b, &mut rng, &mut reference, c.parity);
}

/// Each refusal and failure of a hot replace says what and why.
#[test]
fn hot_replace_refusals_and_failures_say_why() {
    let c = cfg(1);
    let dir = scratch();
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let refusals = Arc::new(AtomicU64::new(0));
    // Member 2's drive on a budget of its own, to fail its reads.
    let devs: Vec<Arc<dyn ZonedMember>> = files_for(dir.path(), 5, &c).into_iter().enumerate().map(|(i, d)| if i == 2 { Arc::new(PowerCut::new(d, budget.clone(), refusals.clone())) as Arc<dyn ZonedMember> } else { d }).collect();
    let mut a = DvsArray::create(devs, c.clone()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(44);
    let mut reference = fill(&mut a, &mut rng, 200);
    let m1 = Arc::new(ZonedFile::open(&dir.path().join("m1")).unwrap()) as Arc<dyn ZonedMember>;
    let e = a.hot_start(2, m1).unwrap_err().to_string();
    assert!(e.contains("is member 1 of this array"), "{e}");
    let spare = new_drive(dir.path(), "spare", &c);
    a.add_spare(spare.clone()).unwrap();
    let e = a.hot_start(2, spare).unwrap_err().to_string();
    assert!(e.contains("is a hot spare of this array: remove it from the spares first"), "{e}");
    // A new drive that cannot be written is refused before it is used.
    let dead = Arc::new(PowerCut::new(new_drive(dir.path(), "dead", &c), Arc::new(AtomicI64::new(0)), Arc::new(AtomicU64::new(0))));
    let e = a.hot_start(2, dead).unwrap_err().to_string();
    assert!(e.contains("clearing the new drive") && e.contains("power cut"), "{e}");
    assert_eq!(a.hot_progress(), None);
    // The old drive failing a read: the copy stays where it was.
    a.hot_start(2, new_drive(dir.path(), "new", &c)).unwrap();
    a.hot_step(2).unwrap();
    let at = a.hot_progress().unwrap().done;
    budget.store(0, Ordering::SeqCst);
    let e = a.hot_step(1).unwrap_err().to_string();
    assert!(e.contains("member 2's drive") && e.contains("for the hot replace") && e.contains("power cut"), "{e}");
    assert_eq!(a.hot_progress().map(|p| p.done), Some(at));
    budget.store(i64::MAX, Ordering::SeqCst);
    more_writes(&mut a, &mut rng, &mut reference, 20);
    check_all(&mut a, &reference);
}

/// At open, a paused copy whose old drive is missing is dropped and the
/// warning says why; a paused copy's drive of another array is named as
/// such and not used.
#[test]
fn an_open_says_why_it_does_not_resume_a_paused_hot_replace() {
    let Stopped { dir, c, reference, .. } = stopped_while_paused(55);
    // Another array, opened with this one's paused drive among its own.
    let other = scratch();
    drop(DvsArray::create(files_for(other.path(), 5, &c), c.clone()).unwrap());
    let mut devs: Vec<Arc<dyn ZonedMember>> = (0..5).map(|i| Arc::new(ZonedFile::open(&other.path().join(format!("m{i}"))).unwrap()) as Arc<dyn ZonedMember>).collect();
    devs.push(Arc::new(ZonedFile::open(&dir.path().join("new")).unwrap()));
    let b = DvsArray::open(devs).unwrap();
    assert!(b.warnings().iter().any(|w| w.contains("a paused hot replace's drive of another DVS array")), "{:?}", b.warnings());
    assert_eq!(b.hot_progress(), None);
    drop(b);
    // This array without member 2's old drive.
    let devs = all_files(dir.path());
    let mut b = DvsArray::open([0, 1, 3, 4, 5].iter().map(|&i| devs[i].clone()).collect()).unwrap();
    assert!(b.warnings().iter().any(|w| w.contains("the paused hot replace of member 2 onto it was dropped: member 2's drive is missing")), "{:?}", b.warnings());
    assert_eq!(b.hot_progress(), None);
    check_all(&mut b, &reference);
}

/// At open, a paused copy whose member is out of service (its drive holds
/// less of a zone than the metadata records: it missed writes) is
/// dropped with a warning that says so: the member is failed, never read,
/// and a copy of it would copy stale bytes.  The array serves every byte
/// degraded, and the labels stop recording the copy.
#[test]
fn a_paused_hot_replace_of_a_member_out_of_service_is_dropped_at_open() {
    let Stopped { dir, c, reference, .. } = stopped_while_paused(66);
    // Member 2's drive loses a written zone behind the array's back.
    let m2 = ZonedFile::open(&dir.path().join("m2")).unwrap();
    let z = (c.conventional..c.zones).find(|&z| m2.write_pointer(z).is_some_and(|wp| wp > z * c.zone_size)).expect("a written zone");
    m2.reset_zone(z).unwrap();
    drop(m2);
    let mut b = DvsArray::open(all_files(dir.path())).unwrap();
    assert!(b.warnings().iter().any(|w| w == "the paused hot replace was dropped: its member is out of service"), "{:?}", b.warnings());
    assert!(b.warnings().iter().any(|w| w.contains("member 2 is stale")), "{:?}", b.warnings());
    assert_eq!(b.hot_progress(), None);
    assert_eq!(b.state(2), MemberState::Failed);
    check_all(&mut b, &reference);
    drop(b);
    // The labels no longer record the copy: its drive is a former one.
    let b = DvsArray::open(all_files(dir.path())).unwrap();
    assert_eq!(b.hot_progress(), None);
    assert!(b.warnings().iter().any(|w| w.contains("former hot replace's drive")), "{:?}", b.warnings());
}
