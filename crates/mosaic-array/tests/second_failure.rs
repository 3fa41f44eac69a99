//! A failure beyond the one maintenance was dealing with: a second member
//! failing while a rebuild or a scrub runs.  Each test names what it used
//! to do wrong.

use std::sync::Arc;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::{Array, DATA_OFFSET};
use mosaic_core::{Level, MemberState};
use mosaic_dev::{FaultyMember, MemMember, Member};

use crate::common::{mem, named, opts, pattern, read_all, U};

/// RAM members, the fault injectors in front of them, the array on those,
/// the bytes it holds.
type Rig = (Vec<Arc<MemMember>>, Vec<Arc<FaultyMember>>, Array, Vec<u8>);

/// `n` RAM members of `stripes` units behind fault injectors, an array of
/// `level` on them holding a pattern.
fn faulty_array(level: Level, n: usize, stripes: u64) -> Rig {
    let ms: Vec<Arc<MemMember>> = (0..n).map(|i| mem(&format!("m{i}"), stripes)).collect();
    let faulty: Vec<Arc<FaultyMember>> = ms.iter().map(|m| Arc::new(FaultyMember::new(m.clone()))).collect();
    let devs: Vec<Arc<dyn Member>> = faulty.iter().map(|f| f.clone() as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&devs), &opts(level, n), true).unwrap();
    let data = pattern(arr.capacity(), 5);
    arr.write(0, &data).unwrap();
    (ms, faulty, arr, data)
}

fn members(ms: &[Arc<MemMember>], which: &[usize]) -> Vec<Arc<dyn Member>> {
    which.iter().map(|&i| ms[i].clone() as Arc<dyn Member>).collect()
}

/// The stripes of an array opened again below the rebuild position
/// `done` read `data`; reads from stripe `done` on fail with a plain
/// error, never with bytes.
fn reads_below(arr: &Array, data: &[u8], done: u64) {
    let sd = arr.geometry().stripe_data_bytes();
    let whole = (done * sd) as usize;
    let mut got = vec![0u8; whole];
    arr.read(0, &mut got).unwrap();
    assert!(got == data[..whole], "wrong bytes below the rebuild position");
    let mut b = vec![0u8; sd as usize];
    let e = arr.read(done * sd, &mut b).unwrap_err().to_string();
    assert!(e.contains(&format!("stripe {done}")) && e.contains("more than the"), "{e}");
    let mut b = vec![0u8; 2 * sd as usize];
    assert!(arr.read((done - 1) * sd, &mut b).is_err(), "a read across the position returned bytes");
}

/// raid5 of 5: member 1 replaced, member 2 breaks while it is rebuilt.
/// The RAM members (5 is member 1's replacement), the bytes written, how
/// far member 1 was rebuilt.
fn raid5_rebuild_meets_a_second_failure() -> (Vec<Arc<MemMember>>, Vec<u8>, u64) {
    let ms: Vec<Arc<MemMember>> = (0..6).map(|i| mem(&format!("m{i}"), 600)).collect();
    let faulty: Vec<Arc<FaultyMember>> = ms[..5].iter().map(|m| Arc::new(FaultyMember::new(m.clone()))).collect();
    let devs: Vec<Arc<dyn Member>> = faulty.iter().map(|f| f.clone() as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&devs), &opts(Level::Raid5, 5), true).unwrap();
    let data = pattern(arr.capacity(), 5);
    arr.write(0, &data).unwrap();
    arr.fail_member(1).unwrap();
    arr.replace_with(1, ms[5].clone(), "mem:m5").unwrap();
    faulty[2].break_after(300);
    let e = arr.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap_err().to_string();
    let st = arr.health().states;
    let MemberState::Rebuilding { done } = st[1] else { panic!("member 1: {st:?}") };
    assert!(done > 256 && done < 600 && st[2] == MemberState::Failed, "{st:?}");
    assert!(e.contains(&format!("rebuild stopped at stripe {done} of 600")) && e.contains("(recorded)"), "{e}");
    // While open: whole below the position, a plain error above it.
    reads_below(&arr, &data, done);
    drop(arr);
    (ms, data, done)
}

/// After a second failure stopped a raid5 rebuild, the array could not be
/// opened again at all (the member being rebuilt counted wholly out: two
/// members out of a raid5), though the stripes below the rebuild position
/// are whole and the live array read them.  It opens read-only as it
/// was: the position it had (recorded when the rebuild stopped, not only
/// at the last checkpoint), those stripes served, a warning naming the
/// stripes and bytes that cannot be read, reads there failing.  With
/// nothing rebuilt, it is still refused.
#[test]
fn a_raid5_array_whose_rebuild_met_a_second_failure_opens_read_only() {
    let (ms, data, done) = raid5_rebuild_meets_a_second_failure();
    let arr = Array::open_members(members(&ms, &[0, 3, 4, 5]), false).unwrap();
    let st = arr.health().states;
    let want = [MemberState::Active, MemberState::Rebuilding { done }, MemberState::Failed, MemberState::Active, MemberState::Active];
    assert_eq!(st, want, "the position the live array had");
    let sd = arr.geometry().stripe_data_bytes();
    let w = arr.open_warnings().join("\n");
    let range = format!("stripes {done}..600 (bytes {}..{}) cannot be read", done * sd, arr.capacity());
    assert!(w.contains(&range) && w.contains(&format!("member 1 is rebuilt only below stripe {done}, member 2 is failed or missing")) && w.contains("than the 1 raid5 tolerates"), "{w}");
    reads_below(&arr, &data, done);
    let info = arr.info();
    assert_eq!(info.columns_out, 2);
    assert!(info.degraded);
    assert_eq!(info.member_list.iter().map(|m| m.state).collect::<Vec<_>>(), want);
    assert!(!info.member_list[2].present);
    assert!(arr.write(0, &[0u8; 4096]).unwrap_err().to_string().contains("read-only"));
    drop(arr);

    // Nothing rebuilt when member 2 broke: no stripe is whole.
    let ms: Vec<Arc<MemMember>> = (0..6).map(|i| mem(&format!("m{i}"), 64)).collect();
    let faulty: Vec<Arc<FaultyMember>> = ms[..5].iter().map(|m| Arc::new(FaultyMember::new(m.clone()))).collect();
    let devs: Vec<Arc<dyn Member>> = faulty.iter().map(|f| f.clone() as Arc<dyn Member>).collect();
    let arr = Array::create_on(named(&devs), &opts(Level::Raid5, 5), true).unwrap();
    arr.write(0, &pattern(arr.capacity(), 3)).unwrap();
    arr.fail_member(1).unwrap();
    arr.replace_with(1, ms[5].clone(), "mem:m5").unwrap();
    faulty[2].break_now();
    arr.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap_err();
    assert_eq!(arr.health().states[1], MemberState::Rebuilding { done: 0 });
    drop(arr);
    let e = Array::open_members(members(&ms, &[0, 3, 4, 5]), false).err().expect("opened with no stripe whole").to_string();
    assert!(e.contains("cannot assemble") && e.contains("more than the 1 raid5 tolerates"), "{e}");
}

/// The same array opened for writing, as the live array was writable:
/// the devices of member 2 (its superblock behind) and of member 1 before
/// its replacement given too and not used, writes below the rebuild
/// position taking and read back (also after another open), writes at or
/// across it refused whole, and a close failing in its flush as the live
/// array's does (bytes above the position are out of reach).
#[test]
fn a_raid5_array_whose_rebuild_met_a_second_failure_opens_for_writing() {
    let (ms, mut data, done) = raid5_rebuild_meets_a_second_failure();
    // Its close failed (dirty), without a journal, degraded: started as
    // md's start_dirty_degraded would.
    let arr = Array::open_members_with(members(&ms, &[0, 1, 2, 3, 4, 5]), true, None, true).unwrap();
    let st = arr.health().states;
    assert_eq!((st[1], st[2]), (MemberState::Rebuilding { done }, MemberState::Failed), "{st:?}");
    assert!(!arr.info().member_list[2].present, "member 2's stale device is used");
    let w = arr.open_warnings().join("\n");
    assert!(w.contains("mem:m1: was member 1 before that member was replaced; not used"), "{w}");
    let sd = arr.geometry().stripe_data_bytes();
    // Stripe 3 in full (member 2's old units there differ from now on) and
    // a block of the last whole stripe.
    let new = pattern(sd, 77);
    arr.write(3 * sd, &new).unwrap();
    data[(3 * sd) as usize..(4 * sd) as usize].copy_from_slice(&new);
    let last = (done - 1) * sd + 4096;
    arr.write(last, &[9u8; 4096]).unwrap();
    data[last as usize..last as usize + 4096].fill(9);
    reads_below(&arr, &data, done);
    let e = arr.write(done * sd, &[1u8; 4096]).unwrap_err().to_string();
    assert!(e.contains(&format!("stripe {done}")) && e.contains("more than the"), "{e}");
    // A write across the position is refused whole: nothing of it lands.
    assert!(arr.write((done - 1) * sd, &vec![1u8; 2 * sd as usize]).is_err());
    // The array does not hold every acknowledged byte (those above the
    // position are out of reach): a flush, and so a close, says so, as
    // the live array's do.
    let e = arr.close().unwrap_err().to_string();
    assert!(e.contains("flush") && e.contains("tolerates"), "{e}");
    drop(arr);
    let arr = Array::open_members(members(&ms, &[0, 3, 4, 5]), false).unwrap();
    assert_eq!(arr.health().states[1], MemberState::Rebuilding { done });
    reads_below(&arr, &data, done);
}

/// raid6 and rs:4+2: the member being rebuilt and two more out.  A first
/// failure during the rebuild is absorbed; a second stops it, and the
/// array opens again (it could not: three members out) with the stripes
/// below the position whole.
#[test]
fn raid6_and_rs_arrays_whose_rebuild_met_two_more_failures_open_again() {
    for level in [Level::Raid6, "rs:4+2".parse().unwrap()] {
        let ms: Vec<Arc<MemMember>> = (0..7).map(|i| mem(&format!("m{i}"), 400)).collect();
        let faulty: Vec<Arc<FaultyMember>> = ms[..6].iter().map(|m| Arc::new(FaultyMember::new(m.clone()))).collect();
        let devs: Vec<Arc<dyn Member>> = faulty.iter().map(|f| f.clone() as Arc<dyn Member>).collect();
        let arr = Array::create_on(named(&devs), &opts(level, 6), true).unwrap();
        let data = pattern(arr.capacity(), 8);
        arr.write(0, &data).unwrap();
        arr.fail_member(0).unwrap();
        arr.replace_with(0, ms[6].clone(), "mem:m6").unwrap();
        faulty[3].break_after(50);
        faulty[4].break_after(250);
        let e = arr.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap_err().to_string();
        let st = arr.health().states;
        let MemberState::Rebuilding { done } = st[0] else { panic!("{level}: {st:?}") };
        assert!(done > 60 && done < 400 && st[3] == MemberState::Failed && st[4] == MemberState::Failed, "{level}: {st:?}");
        assert!(e.contains(&format!("rebuild stopped at stripe {done}")), "{e}");
        drop(arr);
        let arr = Array::open_members(members(&ms, &[6, 1, 2, 5]), false).unwrap_or_else(|e| panic!("{level}: {e}"));
        let st = arr.health().states;
        assert_eq!(st, [MemberState::Rebuilding { done }, MemberState::Active, MemberState::Active, MemberState::Failed, MemberState::Failed, MemberState::Active]);
        let w = arr.open_warnings().join("\n");
        assert!(w.contains(&format!("stripes {done}..400")) && w.contains(&format!("than the 2 {level} tolerates (member 0 is rebuilt only below stripe {done}, member 3 is failed or missing, member 4 is failed or missing)")), "{w}");
        assert_eq!(arr.info().columns_out, 3);
        reads_below(&arr, &data, done);
    }
}

/// Corrupt a code unit in the first two stripes where member `out` holds
/// the other code column (so that, with `out` gone, every data column is
/// still there and the wrong unit's stripe reads and repairs right): the
/// stripes and the members corrupted.
fn corrupt_code(arr: &Array, ms: &[Arc<MemMember>], out: usize) -> Vec<(u64, usize)> {
    let g = arr.geometry();
    let code = |s: u64| (g.k..g.k + g.m).map(|c| g.member_of(s, c)).collect::<Vec<usize>>();
    let bad: Vec<(u64, usize)> = (1..20).filter(|&s| code(s).contains(&out)).take(2).map(|s| (s, code(s).into_iter().find(|&m| m != out).unwrap())).collect();
    assert_eq!(bad.len(), 2);
    for &(s, m) in &bad {
        ms[m].corrupt(DATA_OFFSET + s * U + 100, 16);
    }
    bad
}

/// raid6 and rs:4+2 with a member failed: a member breaking during a
/// repairing scrub (at stripe 20) used to end the scrub with an error.
/// It is failed and the scrub goes on without it: both mismatches found
/// and repaired once, the stripes past the break counted unverified (two
/// members out leave no redundancy to check them with), every byte
/// reads back.
#[test]
fn raid6_and_rs_repairing_scrubs_go_on_past_a_second_failure() {
    for level in [Level::Raid6, "rs:4+2".parse().unwrap()] {
        let (ms, faulty, arr, data) = faulty_array(level, 6, 64);
        arr.fail_member(0).unwrap();
        let clean: Vec<Vec<u8>> = ms.iter().map(|m| m.snapshot()[DATA_OFFSET as usize..].to_vec()).collect();
        let bad = corrupt_code(&arr, &ms, 0);
        assert!(bad.iter().all(|b| b.1 != 3));
        faulty[3].break_after(20); // one read a stripe: it fails at stripe 20
        let rep = arr.scrub(true, &|_, _| {}).unwrap_or_else(|e| panic!("{level}: {e}"));
        assert_eq!(rep.mismatched_stripes, bad.iter().map(|b| b.0).collect::<Vec<_>>(), "{level}: {rep:?}");
        assert_eq!((rep.mismatched, rep.unlocated_stripes, rep.unverified_stripes), (2, 2, 64 - 20), "{level}: {rep:?}");
        assert!(rep.notes.iter().any(|n| n.contains("member(s) [3] failed during the scrub, at stripe 20")), "{:?}", rep.notes);
        assert_eq!(arr.health().states[3], MemberState::Failed);
        assert_eq!(arr.auto_failed().iter().map(|f| f.0).collect::<Vec<_>>(), vec![3]);
        for &(s, m) in &bad {
            assert!(ms[m].snapshot()[DATA_OFFSET as usize..] == clean[m][..], "{level}: stripe {s}: member {m}'s code not repaired");
        }
        assert!(read_all(&arr) == data, "{level}: wrong bytes");
    }
}

/// raid6 and rs:4+2, every member in service: a member breaking during a
/// checking scrub used to end it with an error.  The scrub goes on with
/// the redundancy left: both mismatches found (located while every column
/// was there), every stripe verified; a repairing scrub then repairs them
/// and every byte reads back.
#[test]
fn raid6_and_rs_checking_scrubs_go_on_past_a_member_failure() {
    for level in [Level::Raid6, "rs:4+2".parse().unwrap()] {
        let (ms, faulty, arr, data) = faulty_array(level, 6, 64);
        let bad = corrupt_code(&arr, &ms, 3);
        let stripes: Vec<u64> = bad.iter().map(|b| b.0).collect();
        faulty[3].break_after(20);
        let rep = arr.scrub(false, &|_, _| {}).unwrap_or_else(|e| panic!("{level}: {e}"));
        assert_eq!(rep.mismatched_stripes, stripes, "{level}: {rep:?}");
        assert_eq!((rep.mismatched, rep.unlocated_stripes, rep.unverified_stripes), (2, 0, 0), "{level}: {rep:?}");
        assert_eq!(rep.findings.iter().map(|f| f.member.unwrap()).collect::<Vec<_>>(), bad.iter().map(|b| b.1).collect::<Vec<_>>());
        assert_eq!(arr.health().states[3], MemberState::Failed);
        let rep = arr.scrub(true, &|_, _| {}).unwrap();
        assert_eq!((rep.mismatched, rep.unverified_stripes), (2, 0), "{level}: {rep:?}");
        let rep = arr.scrub(false, &|_, _| {}).unwrap();
        assert_eq!((rep.mismatched, rep.unverified_stripes), (0, 0), "{level}: {rep:?}");
        assert!(read_all(&arr) == data, "{level}: wrong bytes");
    }
}

/// A member breaking on a repair's own write: both code units of stripe 5
/// are wrong (the wrong column cannot be located), the repair writes
/// both, and the write to one of them fails.  The stripe is scrubbed
/// again without that member (every data column still there; the other
/// unit repaired then if its write did not take): one mismatch counted,
/// not two, and the stripes are consistent afterwards.
#[test]
fn a_failure_during_a_scrub_repair_counts_the_mismatch_once() {
    for level in [Level::Raid6, "rs:4+2".parse().unwrap()] {
        let (ms, faulty, arr, data) = faulty_array(level, 6, 64);
        let g = arr.geometry();
        let (p, q) = (g.member_of(5, g.k), g.member_of(5, g.k + 1));
        ms[p].corrupt(DATA_OFFSET + 5 * U, 8);
        ms[q].corrupt(DATA_OFFSET + 5 * U + 1000, 8);
        faulty[p].break_after(6); // its reads of stripes 0..=5, then the repair's write
        let rep = arr.scrub(true, &|_, _| {}).unwrap_or_else(|e| panic!("{level}: {e}"));
        assert_eq!(rep.mismatched_stripes, vec![5], "{level}: {rep:?}");
        assert_eq!((rep.mismatched, rep.unverified_stripes), (1, 0), "{level}: {rep:?}");
        assert_eq!(arr.health().states[p], MemberState::Failed);
        assert!(rep.notes.iter().any(|n| n.contains(&format!("member(s) [{p}] failed during the scrub, at stripe 5"))), "{:?}", rep.notes);
        let rep = arr.scrub(false, &|_, _| {}).unwrap();
        assert_eq!((rep.mismatched, rep.unverified_stripes), (0, 0), "{level}: {rep:?}");
        assert!(read_all(&arr) == data, "{level}: wrong bytes");
    }
}

/// raid5: a member breaking during a scrub used to end it with an error
/// though the array still served every byte.  The scrub completes
/// degraded (the stripes past the break cannot be verified without
/// redundancy) and every byte reads back.  With a member out already,
/// the break leaves two out: the scrub stops with an error that says
/// where and why.
#[test]
fn a_raid5_scrub_meeting_a_member_failure_completes_degraded() {
    for repair in [false, true] {
        let (_, faulty, arr, data) = faulty_array(Level::Raid5, 5, 64);
        faulty[2].break_after(20);
        let rep = arr.scrub(repair, &|_, _| {}).unwrap_or_else(|e| panic!("repair {repair}: {e}"));
        assert_eq!((rep.mismatched, rep.unverified_stripes), (0, 64 - 20), "{rep:?}");
        assert!(rep.notes.iter().any(|n| n.contains("member(s) [2] failed during the scrub, at stripe 20")), "{:?}", rep.notes);
        assert_eq!(arr.health().states[2], MemberState::Failed);
        assert!(read_all(&arr) == data, "repair {repair}: wrong bytes");
    }
    let (_, faulty, arr, _) = faulty_array(Level::Raid5, 5, 64);
    arr.fail_member(0).unwrap();
    faulty[2].break_after(20);
    let e = arr.scrub(false, &|_, _| {}).unwrap_err().to_string();
    assert!(e.contains("scrub stopped at stripe 20 of 64") && e.contains("more than the 1"), "{e}");
    assert_eq!(arr.health().states[2], MemberState::Failed);
}

/// A journaled raid5 whose rebuild met a second failure, then a crash
/// with a degraded write below the rebuild position torn (its parity did
/// not reach the member).  The open for writing replays the journal (it
/// used to fail in the replay's flush: two members out), so the member 2
/// column of that stripe, rebuilt from the parity, reads right.
#[test]
fn a_journaled_array_whose_rebuild_met_a_second_failure_replays_its_journal() {
    let ms: Vec<Arc<MemMember>> = (0..6).map(|i| mem(&format!("m{i}"), 600)).collect();
    let j = Arc::new(MemMember::new("j", 4 << 20));
    let faulty: Vec<Arc<FaultyMember>> = ms[..5].iter().map(|m| Arc::new(FaultyMember::new(m.clone()))).collect();
    let devs: Vec<Arc<dyn Member>> = faulty.iter().map(|f| f.clone() as Arc<dyn Member>).collect();
    let arr = Array::create_with_journal(named(&devs), &opts(Level::Raid5, 5), true, Some((j.clone(), "j".into()))).unwrap();
    let mut data = pattern(arr.capacity(), 5);
    arr.write(0, &data).unwrap();
    arr.fail_member(1).unwrap();
    arr.replace_with(1, ms[5].clone(), "mem:m5").unwrap();
    faulty[2].break_after(300);
    arr.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap_err();
    let MemberState::Rebuilding { done } = arr.health().states[1] else { panic!() };
    let g = arr.geometry();
    let sd = g.stripe_data_bytes();
    // A stripe below the position where member 2 holds data and member 1 does not hold the column written.
    let s = (1..done).find(|&s| g.column_of(s, 2).unwrap() < g.k && g.column_of(s, 1).unwrap() != 0 && g.member_of(s, g.k) != 1).unwrap();
    let pm = g.member_of(s, g.k);
    let old_parity = ms[pm].snapshot()[(DATA_OFFSET + s * U) as usize..(DATA_OFFSET + (s + 1) * U) as usize].to_vec();
    let new = vec![0x5au8; U as usize];
    arr.write(s * sd, &new).unwrap(); // column 0 of stripe s
    data[(s * sd) as usize..(s * sd + U) as usize].copy_from_slice(&new);
    std::mem::forget(arr); // power cut: the record stays in the ring
    ms[pm].write_at(&old_parity, DATA_OFFSET + s * U).unwrap(); // the parity write did not land
    let arr = Array::open_members_with_journal(members(&ms, &[0, 3, 4, 5]), true, Some(j.clone())).unwrap_or_else(|e| panic!("{e}"));
    assert!(arr.info().journal_replayed.is_some_and(|r| r.records > 0));
    reads_below(&arr, &data, done);
}

