//! Every kind through the trait only: write, read back, fail members up
//! to the level's tolerance and read degraded, refuse one more, replace,
//! rebuild and scrub.

use std::path::Path;
use std::time::Duration;

use mosaic_array::spec::ArraySpec;
use mosaic_array::{Array, CreateOptions};
use mosaic_core::{CacheConfig, CachePolicy, Level, MemberState};
use mosaic_dvs::files::{create_in_dir, CreateSpec};

use super::*;

fn fixed(dir: &Path, level: Level, members: usize) -> String {
    let opts = CreateOptions { level, members: Some(members), member_size: Some(4 << 20), unit: 16 << 10, block: 4096, force: false, assume_clean: false };
    let journal = dir.join(mosaic_array::array::JOURNAL_FILE);
    let arr = Array::create_journaled(&ArraySpec::Dir(dir.to_path_buf()), &opts, Some((journal.as_path(), 8 << 20))).unwrap();
    arr.close().unwrap();
    dir.to_str().unwrap().to_string()
}

fn dvs(dir: &Path, parity: usize) -> String {
    dvs_cached(dir, parity, 8)
}

fn dvs_cached(dir: &Path, parity: usize, cache_chunks: u64) -> String {
    let s = CreateSpec { members: 5, member_size: 16 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity, cache_chunks };
    drop(create_in_dir(dir, &s, false).unwrap());
    dir.to_str().unwrap().to_string()
}

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8).collect()
}

fn read_back(v: &dyn Volume, off: u64, want: &[u8], what: &str) {
    let mut got = vec![0u8; want.len()];
    v.read(off, &mut got).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(got == want, "{what}: bytes differ");
}

/// Write, read, fail up to `tolerates` members (reading degraded after
/// each), and check that one more failure and bad requests are refused.
fn write_fail_read(spec: &str, kind: &str, tolerates: usize) -> Vec<u8> {
    let v = open(spec, true).unwrap();
    let info = v.info();
    assert_eq!(info.kind, kind);
    assert!(!info.degraded);
    assert!(info.members.iter().all(|m| m.state == MemberState::Active && m.present), "{:?}", info.members);
    assert!(info.detail.is_object());
    let b = v.block_size();
    assert!(v.preferred_block() >= b);
    let off = 3 * b;
    let data = pattern(7, (300 * b) as usize);
    v.write(off, &data).unwrap();
    v.flush().unwrap();
    read_back(v.as_ref(), off, &data, "healthy");
    assert!(v.io_counters().device_writes > 0);

    // Bad requests are errors, never panics.
    assert!(v.read(1, &mut [0u8; 100]).is_err());
    assert!(v.write(v.capacity(), &vec![0u8; b as usize]).is_err());
    assert!(v.read(u64::MAX - b + 1, &mut vec![0u8; b as usize]).is_err());
    let e = v.fail_member(99).unwrap_err().to_string();
    assert!(e.contains("no member 99"), "{e}");

    for m in 0..tolerates {
        v.fail_member(m).unwrap();
        let info = v.info();
        assert!(info.degraded);
        assert_eq!(info.members[m].state, MemberState::Failed);
        assert!(info.members[m + 1..].iter().all(|x| x.state == MemberState::Active));
        read_back(v.as_ref(), off, &data, &format!("{kind}: degraded, {} failed", m + 1));
    }
    let e = v.fail_member(tolerates).unwrap_err().to_string();
    assert!(e.contains("data would be lost"), "{e}");
    let e = v.fail_member(0).unwrap_err().to_string();
    assert!(e.contains("already failed"), "{e}");
    read_back(v.as_ref(), off, &data, "after refused failures");
    // Writes still work degraded.
    let more = pattern(9, (20 * b) as usize);
    v.write(off, &more).unwrap();
    let mut want = data.clone();
    want[..more.len()].copy_from_slice(&more);
    read_back(v.as_ref(), off, &want, "degraded write");
    v.close().unwrap();
    want
}

fn replace_rebuild_scrub(v: &dyn Volume, members: usize, new_drive: &Path) {
    v.replace(members, new_drive).unwrap_err();
    v.replace(0, new_drive).unwrap();
    let rep = v.rebuild(&|_, _| {}, Default::default()).unwrap();
    assert_eq!(rep.members, vec![0]);
    assert!(rep.bytes_written > 0);
    let s = v.scrub(false, &|_, _| {}).unwrap();
    assert_eq!(s.mismatched, 0);
    assert!(s.stripes_checked > 0);
}

#[test]
fn raid5_dir_array() {
    let t = tempfile::tempdir().unwrap();
    let spec = fixed(&t.path().join("a"), Level::Raid5, 4);
    let want = write_fail_read(&spec, "fixed", 1);
    // The failure was recorded: a new open still sees it.
    let v = open(&spec, true).unwrap();
    assert_eq!(v.info().members[0].state, MemberState::Failed);
    read_back(v.as_ref(), 3 * 4096, &want, "reopened degraded");
    let new0 = t.path().join("new0.img");
    replace_rebuild_scrub(v.as_ref(), 4, &new0);
    assert!(new0.exists());
    assert!(!v.info().degraded);
    let e = v.rebuild(&|_, _| {}, Default::default()).unwrap_err().to_string();
    assert!(e.contains("nothing to rebuild"), "{e}");
    v.close().unwrap();
    drop(v);
    let v = open(&spec, false).unwrap();
    read_back(v.as_ref(), 3 * 4096, &want, "after rebuild");
    assert!(v.write(0, &[0u8; 4096]).is_err(), "read-only open accepted a write");
}

#[test]
fn raid6_dir_array() {
    let t = tempfile::tempdir().unwrap();
    let spec = fixed(&t.path().join("a"), Level::Raid6, 6);
    let want = write_fail_read(&spec, "fixed", 2);
    let v = open(&spec, true).unwrap();
    let info = v.info();
    assert_eq!(info.level, "raid6");
    assert_eq!(info.detail["member_list"].as_array().unwrap().len(), 6);
    read_back(v.as_ref(), 3 * 4096, &want, "reopened with two failed");
}

#[test]
fn dvs_dir_array() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("z");
    let spec = dvs(&dir, 1);
    let want = write_fail_read(&spec, "dvs", 1);
    // The failure is recorded: a new open still sees it, and does not use
    // the member's file (failed on record: its label is stale).
    let v = open(&spec, true).unwrap();
    let info = v.info();
    assert!(info.degraded && info.members[0].state == MemberState::Failed && !info.members[0].present, "{:?}", info.members);
    read_back(v.as_ref(), 3 * 4096, &want, "dvs reopened");
    // The replacement is created and rebuilt where it is given; member
    // 0's old file is kept aside.
    let new0 = t.path().join("new0.zoned");
    replace_rebuild_scrub(v.as_ref(), 5, &new0);
    assert!(new0.exists() && !dir.join("dvs-0.zoned").exists() && dir.join("dvs-0.zoned.replaced").exists());
    assert_eq!(v.info().members[0].path, new0.display().to_string());
    let e = v.rebuild(&|_, _| {}, Default::default()).unwrap_err().to_string();
    assert!(e.contains("nothing to rebuild"), "{e}");
    let s = v.scrub(true, &|_, _| {}).unwrap();
    assert!(s.repaired && s.mismatched == 0 && s.notes.is_empty(), "{s:?}");
    v.close().unwrap();
    drop(v);
    // Degraded by a missing member file, found at open.
    std::fs::rename(dir.join("dvs-3.zoned"), t.path().join("away")).unwrap();
    let v = open(&spec, false).unwrap();
    let info = v.info();
    assert!(info.degraded && !info.members[3].present && info.members[3].state == MemberState::Failed, "{:?}", info.members);
    read_back(v.as_ref(), 3 * 4096, &want, "dvs with a member missing");
    assert!(v.write(0, &[0u8; 4096]).is_err(), "read-only open accepted a write");
    let e = v.scrub(true, &|_, _| {}).unwrap_err().to_string();
    assert!(e.contains("scrub --repair needs the array open for writing"), "{e}");
    let s = v.scrub(false, &|_, _| {}).unwrap();
    assert!(s.unverified_stripes > 0 && s.mismatched == 0);
}

#[test]
fn dvs2_tolerates_two() {
    let t = tempfile::tempdir().unwrap();
    let spec = dvs(&t.path().join("z"), 2);
    write_fail_read(&spec, "dvs", 2);
    assert_eq!(open(&spec, false).unwrap().info().level, "dvs:2");
}

#[test]
fn dvs_idle_work_collects_garbage_and_keeps_data() {
    let t = tempfile::tempdir().unwrap();
    // Write-through: every small write appends a new stripe and leaves
    // the old chunk and parity as garbage.
    let spec = dvs_cached(&t.path().join("z"), 1, 0);
    let v = open(&spec, true).unwrap();
    let b = v.block_size() as usize;
    v.write(0, &pattern(3, 64 * b)).unwrap();
    for i in 0..30u32 {
        v.write(((i % 4) as u64) * 4096, &pattern(i, b)).unwrap();
    }
    let mut want = vec![0u8; 64 * b];
    v.read(0, &mut want).unwrap();
    assert!(!v.idle_work().unwrap(), "GC ran right after a request");
    v.set_idle_after(Duration::ZERO);
    let mut steps = 0;
    while v.idle_work().unwrap() {
        steps += 1;
        assert!(steps < 1000, "GC does not converge");
    }
    assert!(steps > 0, "no garbage collected");
    assert_eq!(v.info().detail["valid_chunks"], 4);
    read_back(v.as_ref(), 0, &want, "after idle GC");
    v.close().unwrap();
    drop(v);
    read_back(open(&spec, false).unwrap().as_ref(), 0, &want, "reopened after idle GC");
}

#[test]
fn cached_volume_and_refusals() {
    let t = tempfile::tempdir().unwrap();
    let spec = fixed(&t.path().join("a"), Level::Raid5, 4);
    let cfg = CacheConfig::uniform(CachePolicy::PpcData, 128 << 10);
    let v = open_cached(&spec, true, cfg).unwrap();
    let info = v.info();
    assert_eq!(info.kind, "cached");
    assert_eq!(info.detail["cache"]["write_back"], true);
    assert!(!v.idle_work().unwrap());
    let data = pattern(1, 40 * 4096);
    v.write(8192, &data).unwrap();
    read_back(v.as_ref(), 8192, &data, "cached");
    v.fail_member(2).unwrap();
    read_back(v.as_ref(), 8192, &data, "cached, degraded");
    v.close().unwrap();
    drop(v);
    read_back(open(&spec, false).unwrap().as_ref(), 8192, &data, "after the cache closed");

    let z = dvs(&t.path().join("z"), 1);
    let e = open_cached(&z, true, cfg).err().unwrap().to_string();
    assert!(e.contains("DVS array has its own write cache"), "{e}");
    let e = open(t.path().join("nothing").to_str().unwrap(), false).err().unwrap().to_string();
    assert!(e.starts_with("no array at ") && e.ends_with("nothing: no such file or directory"), "{e}");
    let e = open("", false).err().unwrap().to_string();
    assert!(e.contains("empty array spec"), "{e}");
}

/// An array whose members and journal are all on the RAM file system says
/// it is in memory (the NBD server then serves its small requests on the
/// connection's reader); with its journal on disk, or once a member is
/// replaced by a file on disk, it does not.
#[test]
fn in_memory_only_while_every_device_is() {
    let shm = tempfile::tempdir_in("/dev/shm").expect("a RAM file system at /dev/shm");
    let disk = tempfile::tempdir().unwrap();
    let disk_is_ram = mosaic_dev::on_ram_fs(&std::fs::File::open(disk.path()).unwrap());
    let v = open(&fixed(&shm.path().join("a"), Level::Raid5, 4), true).unwrap();
    assert!(v.in_memory());
    let data = pattern(7, 3 << 16);
    v.write(4096, &data).unwrap();
    read_back(v.as_ref(), 4096, &data, "mapped members");
    v.fail_member(0).unwrap();
    assert!(v.in_memory(), "a failed member is out of service");
    v.replace(0, &disk.path().join("new0.img")).unwrap();
    assert_eq!(v.in_memory(), disk_is_ram, "a member on disk");
    v.rebuild(&|_, _| {}, Default::default()).unwrap();
    read_back(v.as_ref(), 4096, &data, "rebuilt onto disk");
    v.close().unwrap();

    let opts = CreateOptions { level: Level::Raid5, members: Some(4), member_size: Some(4 << 20), unit: 16 << 10, block: 4096, force: false, assume_clean: false };
    let journal = disk.path().join("journal.img");
    let dir = shm.path().join("b");
    Array::create_journaled(&ArraySpec::Dir(dir.clone()), &opts, Some((journal.as_path(), 8 << 20))).unwrap().close().unwrap();
    let v = open(dir.to_str().unwrap(), true).unwrap();
    assert_eq!(v.in_memory(), disk_is_ram, "the journal on disk");
    v.close().unwrap();
}

/// What `v` reports as holes over its whole capacity, checked: the runs
/// cover exactly what was asked, every hole reads as zeros, and no byte of
/// `written` (offset, length) lies in a hole.  The holes' bytes.
fn checked_holes(v: &dyn Volume, written: &[(u64, u64)]) -> u64 {
    let cap = v.capacity();
    let runs = v.allocation(0, cap).unwrap();
    assert_eq!(runs.iter().map(|r| r.0).sum::<u64>(), cap, "the runs cover the capacity");
    let (mut at, mut holes) = (0, 0);
    for &(n, hole) in &runs {
        if hole {
            read_back(v, at, &vec![0u8; n as usize], &format!("the hole at {at}, {n} bytes"));
            assert!(written.iter().all(|&(o, l)| o + l <= at || o >= at + n), "written bytes in the hole at {at}, {n} bytes");
            holes += n;
        }
        at += n;
    }
    holes
}

/// DVS knows which chunks were never written, cached or destaged, before
/// and after a reopen (write-through too); a fixed array says "all data".
#[test]
fn allocation_names_never_written_chunks_of_dvs_and_all_data_of_fixed_arrays() {
    let t = tempfile::tempdir().unwrap();
    const CHUNK: u64 = 64 << 10;
    let written = [(0, 4096), (3 * CHUNK + 8192, 8192), (40 * CHUNK, CHUNK)];
    for cache in [8, 0] {
        let spec = dvs_cached(&t.path().join(format!("z{cache}")), 1, cache);
        let v = open(&spec, true).unwrap();
        let cap = v.capacity();
        assert_eq!(checked_holes(v.as_ref(), &[]), cap, "nothing written yet");
        for (i, &(o, l)) in written.iter().enumerate() {
            v.write(o, &pattern(i as u32 + 1, l as usize)).unwrap();
        }
        let holes = checked_holes(v.as_ref(), &written);
        assert_eq!(holes, cap - 3 * CHUNK, "cache {cache}: three chunks hold data");
        // A range inside one chunk, and one across written and unwritten ones.
        assert_eq!(v.allocation(CHUNK + 4096, 8192).unwrap(), [(8192, true)]);
        let runs = v.allocation(3 * CHUNK + 4096, CHUNK).unwrap();
        assert_eq!(runs, [(CHUNK - 4096, false), (4096, true)], "cache {cache}");
        v.close().unwrap();
        drop(v);
        let v = open(&spec, false).unwrap();
        assert_eq!(checked_holes(v.as_ref(), &written), holes, "cache {cache}: the same after a reopen");
        for (i, &(o, l)) in written.iter().enumerate() {
            read_back(v.as_ref(), o, &pattern(i as u32 + 1, l as usize), "written");
        }
        assert!(v.allocation(cap - 4096, 8192).is_err(), "past the end");
    }
    let spec = fixed(&t.path().join("r5"), Level::Raid5, 4);
    let v = open(&spec, true).unwrap();
    assert_eq!(v.allocation(0, v.capacity()).unwrap(), [(v.capacity(), false)]);
}

/// A discard through the volume (windows of one chunk here): the written
/// chunks wholly inside it become holes that read as zeros, the ones it
/// cuts keep their bytes; a fixed array keeps everything (md's raid5).
#[test]
fn a_discard_makes_whole_dvs_chunks_holes_and_a_fixed_array_keeps_its_bytes() {
    let t = tempfile::tempdir().unwrap();
    const CHUNK: u64 = 64 << 10;
    let data = pattern(7, 10 * CHUNK as usize);
    for cache in [8, 0] {
        let v = open(&dvs_cached(&t.path().join(format!("z{cache}")), 1, cache), true).unwrap();
        v.write(0, &data).unwrap();
        v.flush().unwrap();
        // 4 KiB into chunk 1 to 4 KiB into chunk 8: chunks 2..8 whole.
        v.discard(CHUNK + 4096, 7 * CHUNK).unwrap();
        let mut want = data.clone();
        want[2 * CHUNK as usize..8 * CHUNK as usize].fill(0);
        read_back(v.as_ref(), 0, &want, "after the discard");
        let runs = v.allocation(0, 10 * CHUNK).unwrap();
        let holes: Vec<bool> = runs.iter().map(|r| r.1).collect();
        assert_eq!(holes, (0..10).map(|i| (2..8).contains(&i)).collect::<Vec<_>>(), "cache {cache}");
        assert!(v.discard(4096 + 512, 4096).is_err(), "not whole blocks");
        assert!(v.discard(v.capacity(), CHUNK).is_err(), "past the end");
    }
    let v = open(&dvs_cached(&t.path().join("ro"), 1, 0), false).unwrap();
    assert!(v.discard(0, CHUNK).unwrap_err().to_string().contains("open for writing"));
    let v = open(&fixed(&t.path().join("r5"), Level::Raid5, 4), true).unwrap();
    v.write(0, &data).unwrap();
    v.discard(0, 10 * CHUNK).unwrap();
    read_back(v.as_ref(), 0, &data, "a fixed array keeps its bytes");
}

/// A discard on a tier array: its mapped blocks, on the fast tier and on
/// the slow one, leave the map (holes, zeros), free their fast space, are
/// never demoted, and stay holes across a reopen; the blocks around them
/// keep their bytes.
#[test]
fn a_discard_on_a_tier_array_frees_its_blocks_on_both_tiers() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("tier");
    let v = crate::tier::tests::create(&dir, crate::tier::tests::eager());
    const MIB: u64 = 1 << 20;
    let old = pattern(3, 2 * MIB as usize);
    v.write(0, &old).unwrap();
    v.flush().unwrap();
    // Moved to the slow tier while idle, then 1 MiB more on the fast tier.
    v.set_idle_after(Duration::ZERO);
    while v.idle_work().unwrap() {}
    let slow = v.stats().unwrap().blocks_slow;
    assert!(slow > 0, "some of the first 2 MiB were demoted");
    let new = pattern(4, MIB as usize);
    v.write(4 * MIB, &new).unwrap();
    let before = v.stats().unwrap();
    // Half of each: 1 MiB from 512 KiB (slow and fast blocks alike), and
    // 512 KiB of the new write (fast, placed but not yet committed).
    v.discard(MIB / 2, MIB).unwrap();
    v.discard(4 * MIB, MIB / 2).unwrap();
    let after = v.stats().unwrap();
    assert_eq!(after.discarded_blocks - before.discarded_blocks, (MIB + MIB / 2) / 4096);
    let mapped = |s: &mosaic_tier::TierStats| s.blocks_fast + s.blocks_slow;
    assert_eq!(mapped(&before) - mapped(&after), (MIB + MIB / 2) / 4096);
    assert!(after.fast_live < before.fast_live, "fast space freed: {} -> {}", before.fast_live, after.fast_live);
    assert!(after.blocks_slow < before.blocks_slow && after.slow_live < before.slow_live, "slow blocks left the map and the segment table");
    let mut want = vec![0u8; 5 * MIB as usize];
    want[..2 * MIB as usize].copy_from_slice(&old);
    want[4 * MIB as usize..].copy_from_slice(&new);
    want[MIB as usize / 2..3 * MIB as usize / 2].fill(0);
    want[4 * MIB as usize..9 * MIB as usize / 2].fill(0);
    let written = [(0, MIB / 2), (3 * MIB / 2, MIB / 2), (9 * MIB / 2, MIB / 2)];
    read_back(&v, 0, &want, "after the discards");
    let holes = checked_holes(&v, &written);
    assert_eq!(holes, v.capacity() - 3 * MIB / 2);
    while v.idle_work().unwrap() {}
    assert_eq!(checked_holes(&v, &written), holes, "idle work moved no discarded block back");
    v.close().unwrap();
    drop(v);
    let v = TierVolume::open(&dir, true).unwrap();
    read_back(&v, 0, &want, "after a reopen");
    assert_eq!(checked_holes(&v, &written), holes);
    let e = v.discard(512, 4096).unwrap_err().to_string();
    assert!(e.contains("discard of 4096 bytes at 512: not whole 4096-byte blocks"), "{e}");
    drop(v);
    let v = TierVolume::open(&dir, false).unwrap();
    assert!(v.discard(0, 4096).unwrap_err().to_string().contains("open for writing"));
}

/// A tier array's blocks with no place in its map are holes; written
/// blocks stay data after demotion to the slow tier and a reopen.
#[test]
fn allocation_of_a_tier_array_follows_its_map() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("tier");
    let v = crate::tier::tests::create(&dir, crate::tier::tests::eager());
    let cap = v.capacity();
    assert_eq!(checked_holes(&v, &[]), cap);
    let written: Vec<(u64, u64)> = (0..64).map(|i| (i * 7 * 4096 + (i % 3) * (1 << 20), 4096 * (1 + i % 2))).collect();
    for (i, &(o, l)) in written.iter().enumerate() {
        v.write(o, &pattern(i as u32, l as usize)).unwrap();
    }
    let bytes: u64 = written.iter().map(|w| w.1).sum();
    assert_eq!(checked_holes(&v, &written), cap - bytes, "exactly the written blocks are data");
    v.set_idle_after(Duration::ZERO);
    while v.idle_work().unwrap() {}
    assert_eq!(checked_holes(&v, &written), cap - bytes, "after demotion");
    v.close().unwrap();
    drop(v);
    let v = TierVolume::open(&dir, false).unwrap();
    assert_eq!(checked_holes(&v, &written), cap - bytes, "after a reopen");
    assert!(v.allocation(4096 + 512, 4096).is_err(), "not whole blocks");
}
