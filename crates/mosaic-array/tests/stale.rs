//! Event counters decide which members are fresh: a member that missed
//! writes is stale and never read, while a crash in the middle of a
//! superblock update (members one event apart) is not mistaken for it.

use std::sync::Arc;

use mosaic_array::superblock::{Superblock, SLOT_SIZE};
use mosaic_array::{Array, CreateOptions, DATA_OFFSET};
use mosaic_core::{Level, MemberState};
use mosaic_dev::{MemMember, Member};

fn raid5() -> (Vec<Arc<MemMember>>, Array) {
    let unit = 4096;
    let ms: Vec<Arc<MemMember>> = (0..4).map(|i| Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + unit * 64))).collect();
    let o = CreateOptions { level: Level::Raid5, members: Some(4), member_size: None, unit, block: 4096, force: true, assume_clean: true };
    let arr = Array::create_on(members(&ms), &o, true).unwrap();
    (ms, arr)
}

fn members(ms: &[Arc<MemMember>]) -> Vec<(Arc<dyn Member>, String)> {
    ms.iter().map(|m| (m.clone() as Arc<dyn Member>, m.describe())).collect()
}

fn reopen(ms: &[Arc<MemMember>], writable: bool) -> Array {
    Array::open_members(ms.iter().map(|m| m.clone() as Arc<dyn Member>).collect(), writable).unwrap()
}

fn fill(arr: &Array, seed: u8) -> Vec<u8> {
    let data: Vec<u8> = (0..arr.capacity()).map(|i| (i as u8).wrapping_mul(seed) ^ seed).collect();
    arr.write(0, &data).unwrap();
    data
}

#[test]
fn a_member_swapped_for_an_old_copy_after_a_crash_is_stale() {
    let (ms, arr) = raid5();
    fill(&arr, 3);
    arr.close().unwrap();
    drop(arr);
    let old = ms[2].snapshot();
    let arr = reopen(&ms, true);
    let new = fill(&arr, 7);
    // A crash: no close, so the superblocks say dirty and are one update
    // (two events) ahead of the copy.
    std::mem::forget(arr);
    ms[2].restore(old);
    let arr = reopen(&ms, false);
    assert_eq!(arr.health().states[2], MemberState::Failed);
    let w = arr.open_warnings().join("\n");
    assert!(w.contains("mem:m2") && w.contains("member 2 is stale"), "{w}");
    let mut got = vec![0u8; new.len()];
    arr.read(0, &mut got).unwrap();
    assert!(got == new, "the stale member was read");
}

/// Rewrite member `m`'s superblock `behind` events back, as if the last
/// update had not reached it.
fn set_behind(ms: &[Arc<MemMember>], m: usize, behind: u64) {
    let mut sb = Superblock::read_from(ms[m].as_ref()).unwrap();
    sb.events -= behind;
    sb.write_to(ms[m].as_ref()).unwrap();
    // The other copy would be newer: spoil it.
    ms[m].corrupt((sb.events + 1) % 2 * SLOT_SIZE, 8);
    assert_eq!(Superblock::read_from(ms[m].as_ref()).unwrap().events, sb.events);
}

#[test]
fn one_event_behind_is_an_interrupted_update_two_is_stale() {
    let (ms, arr) = raid5();
    let data = fill(&arr, 5);
    arr.close().unwrap();
    drop(arr);
    set_behind(&ms, 1, 1);
    let arr = reopen(&ms, false);
    assert!(!arr.health().is_degraded(), "a member one event behind was failed: {:?}", arr.open_warnings());
    drop(arr);
    set_behind(&ms, 3, 2);
    let arr = reopen(&ms, false);
    assert_eq!(arr.health().states[3], MemberState::Failed);
    assert_eq!(arr.health().states[1], MemberState::Active);
    let mut got = vec![0u8; data.len()];
    arr.read(0, &mut got).unwrap();
    assert!(got == data);
}

/// A member restored from a snapshot taken within the session that then
/// crashed carries that session and, without epochs, the array's event
/// counter: it was read.  A flush after writes updates the superblocks
/// once an epoch, so the copy is two events behind, stale, never read.
#[test]
fn a_member_restored_from_a_snapshot_taken_within_the_session_is_stale() {
    let (ms, arr) = raid5();
    arr.close().unwrap();
    drop(arr);
    let arr = reopen(&ms, true);
    arr.set_epoch(std::time::Duration::ZERO);
    fill(&arr, 3);
    arr.flush().unwrap();
    let old = ms[2].snapshot();
    let new = fill(&arr, 9);
    arr.flush().unwrap();
    std::mem::forget(arr); // a crash: same session on every member
    ms[2].restore(old);
    let arr = reopen(&ms, false);
    assert_eq!(arr.health().states[2], MemberState::Failed, "{:?}", arr.open_warnings());
    assert!(arr.open_warnings().join("\n").contains("member 2 is stale"), "{:?}", arr.open_warnings());
    let mut got = vec![0u8; new.len()];
    arr.read(0, &mut got).unwrap();
    assert!(got == new, "the restored copy was read");
}

/// Epochs are rate-limited: within one, flushes after writes update no
/// superblock; a flush with no writes since the last epoch updates none.
#[test]
fn an_epoch_updates_the_superblocks_at_most_once_an_epoch_and_only_after_writes() {
    let (ms, arr) = raid5();
    let events = |ms: &[Arc<MemMember>]| Superblock::read_from(ms[0].as_ref()).unwrap().events;
    fill(&arr, 4);
    let e0 = events(&ms);
    for _ in 0..3 {
        fill(&arr, 5);
        arr.flush().unwrap();
    }
    assert_eq!(events(&ms), e0, "within the default epoch ({:?}), no update", mosaic_array::EPOCH);
    arr.set_epoch(std::time::Duration::ZERO);
    arr.flush().unwrap();
    assert_eq!(events(&ms), e0 + 2, "writes came: one update, two rounds");
    arr.flush().unwrap();
    assert_eq!(events(&ms), e0 + 2, "no writes since: no update");
}

/// `cp -a P Q`, Q written further, then one of Q's members put in P's
/// place (a wrong restore): the intruder's event counter is ahead, but
/// event counters decide within one copy only.  P opens degraded from its
/// own three members, reads its own bytes, and names the intruder as
/// another copy's member; P's members are never called stale.
#[test]
fn one_member_of_a_copy_written_further_does_not_out_vote_the_array() {
    let (ms, arr) = raid5();
    let p_data = fill(&arr, 3);
    arr.close().unwrap();
    drop(arr);
    let qs: Vec<Arc<MemMember>> = ms
        .iter()
        .map(|m| {
            let q = Arc::new(MemMember::new(m.describe().replace("mem:m", "q"), m.size()));
            q.restore(m.snapshot());
            q
        })
        .collect();
    for seed in [5, 9] {
        let q = reopen(&qs, true);
        fill(&q, seed);
        q.close().unwrap();
    }
    ms[2].restore(qs[2].snapshot());
    for writable in [false, true] {
        let arr = reopen(&ms, writable);
        assert_eq!(arr.health().states, [MemberState::Active, MemberState::Active, MemberState::Failed, MemberState::Active]);
        let w = arr.open_warnings().join("\n");
        assert!(w.contains("mem:m2: member 2 carries the writes of another copy") && w.contains("another copy's member") && w.contains("not used"), "{w}");
        assert!(!w.contains("stale"), "P's own members were called stale: {w}");
        let mut got = vec![0u8; p_data.len()];
        arr.read(0, &mut got).unwrap();
        assert!(got == p_data, "P read another copy's bytes");
        arr.close().unwrap();
    }
}

/// A member replaced onto a device outside the array's directory leaves
/// its old file there: the array recorded the replacement, so later opens
/// of the directory pass over that file without a warning (as md and ZFS
/// pass over a replaced disk), while naming it in a list still says why it
/// is not used.
#[test]
fn a_replaced_members_file_left_in_the_directory_is_passed_over_quietly() {
    use mosaic_array::spec::ArraySpec;
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("s");
    let o = CreateOptions { level: Level::Raid5, members: Some(3), member_size: Some(DATA_OFFSET + (1 << 20)), unit: 4096, block: 4096, force: false, assume_clean: false };
    let arr = Array::create(&ArraySpec::Dir(dir.clone()), &o).unwrap();
    let data = fill(&arr, 11);
    let old = arr.info().member_list[0].uuid;
    arr.fail_member(0).unwrap();
    let size = std::fs::metadata(dir.join("member-00.img")).unwrap().len();
    std::fs::File::create(t.path().join("new0.img")).unwrap().set_len(size).unwrap();
    arr.replace(0, &t.path().join("new0.img")).unwrap();
    arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    arr.close().unwrap();
    drop(arr);
    let arr = Array::open(&ArraySpec::Dir(dir.clone()), true).unwrap();
    assert_eq!(arr.info().replaced, [old], "the replacement is recorded");
    assert!(arr.open_warnings().is_empty(), "{:?}", arr.open_warnings());
    let mut got = vec![0u8; data.len()];
    arr.read(0, &mut got).unwrap();
    assert!(got == data);
    arr.close().unwrap();
    drop(arr);
    let listed = ArraySpec::Paths(vec![dir.join("member-00.img"), dir.join("member-01.img"), dir.join("member-02.img"), t.path().join("new0.img")]);
    let arr = Array::open(&listed, false).unwrap();
    let w = arr.open_warnings().join("\n");
    assert!(w.contains("member-00.img: was member 0 before that member was replaced; not used"), "{w}");
}
