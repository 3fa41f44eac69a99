//! The real remapped array: an inner raid5 (or raid0) array on files,
//! units re-placed on its drives by the policy's programs through the one
//! executor.  Bytes are checked after writes, moves, reopen, member
//! failure (degraded reads, paused movement), rebuild and scrub; the
//! inner code stays consistent across moves; identity through the label.

use std::path::Path;
use std::time::Duration;

use mosaic_array::maint::RebuildOptions;
use mosaic_remap::RemapConfig;
use mosaic_volume::{InnerSpec, RemapCreate, RemapVolume, Volume};

const UNIT: u64 = 64 << 10;

fn data(len: u64, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2246822519).wrapping_add(seed.wrapping_mul(0x9e37_79b9)) >> 11) as u8).collect()
}

fn spec(level: &str) -> RemapCreate {
    RemapCreate {
        inner: InnerSpec::parse(level, 16 << 20).unwrap(),
        unit: UNIT,
        block: 4096,
        force: false,
        journal_size: Some(4 << 20),
        config: RemapConfig { unit: UNIT, batch_units: 4, ..RemapConfig::default() },
    }
}

fn read(v: &dyn Volume, off: u64, len: u64) -> Vec<u8> {
    let mut b = vec![0u8; len as usize];
    v.read(off, &mut b).unwrap();
    b
}

fn steps(v: &RemapVolume) -> u64 {
    let mut moved = 0;
    for _ in 0..10_000 {
        match v.step().unwrap() {
            0 => return moved,
            b => moved += b,
        }
    }
    panic!("moves never end")
}

/// Every third unit to the next drive (of `drives`).
fn shuffle(v: &RemapVolume, units: u64, drives: usize) -> Vec<(u64, usize)> {
    (0..units).filter(|l| l % 3 == 0).map(|l| (l, (v.drive_of(l).unwrap() + 1) % drives)).collect()
}

#[test]
fn raid5_units_move_between_drives_with_consistent_parity_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("arr");
    let v = RemapVolume::create(&d, &spec("raid5:4")).unwrap();
    let cap = Volume::capacity(&v);
    assert!(cap > 20 * UNIT, "capacity {cap}");
    let bytes = data(cap, 1);
    v.write(0, &bytes).unwrap();
    let units = cap / UNIT;
    let target = shuffle(&v, units.min(60), 4);
    assert_eq!(v.set_target(&target).unwrap(), target.len());
    v.inner().reset_counters();
    let moved = steps(&v);
    assert_eq!(moved, target.len() as u64 * UNIT);
    for &(l, d) in &target {
        assert_eq!(v.drive_of(l), Some(d), "unit {l}");
    }
    // A move is the destination stripe's RMW on the inner array: device
    // writes at least the unit and its parity.
    let io = Volume::io_counters(v.inner());
    assert!(io.device_writes >= 2 * target.len() as u64, "{io:?}");
    assert_eq!(read(&v, 0, cap), bytes, "bytes after the moves");
    let s = Volume::scrub(&v, false, &|_, _| {}).unwrap();
    assert_eq!((s.mismatched, s.unverified_stripes), (0, 0), "inner code consistent after moves: {s:?}");
    // Writes after moves land where units are now.
    let w = data(3 * UNIT, 7);
    v.write(UNIT, &w).unwrap();
    let mut model = bytes.clone();
    model[UNIT as usize..4 * UNIT as usize].copy_from_slice(&w);
    Volume::close(&v).unwrap();
    drop(v);
    let v = RemapVolume::open(&d, true).unwrap();
    for &(l, d) in &target {
        assert_eq!(v.drive_of(l), Some(d), "unit {l} after reopen");
    }
    assert_eq!(read(&v, 0, cap), model, "bytes after reopen");
    let info = Volume::info(&v);
    assert_eq!((info.kind.as_str(), info.level.as_str(), info.members.len()), ("remap", "remap", 4));
    assert!(info.summary.iter().any(|(k, v)| k == "Units moved" && v.starts_with(&format!("{} of", target.len()))), "{:?}", info.summary);
}

#[test]
fn a_failed_drive_is_read_degraded_pauses_movement_and_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("arr");
    let v = RemapVolume::create(&d, &spec("raid5:4")).unwrap();
    let cap = Volume::capacity(&v);
    let bytes = data(cap, 2);
    v.write(0, &bytes).unwrap();
    v.set_target(&shuffle(&v, 30, 4)).unwrap();
    assert!(v.step().unwrap() > 0);
    Volume::fail_member(&v, 2).unwrap();
    assert_eq!(v.step().unwrap(), 0, "paused while degraded");
    assert!(v.stats().unwrap().paused >= 1);
    assert_eq!(read(&v, 0, cap), bytes, "degraded reads");
    let new = dir.path().join("new2.img");
    Volume::replace(&v, 2, &new).unwrap();
    Volume::rebuild(&v, &|_, _| {}, RebuildOptions::default()).unwrap();
    assert!(steps(&v) > 0, "movement resumes after the rebuild");
    assert_eq!(v.stats().unwrap().pending_moves, 0);
    assert_eq!(read(&v, 0, cap), bytes, "bytes after rebuild and moves");
    let s = Volume::scrub(&v, false, &|_, _| {}).unwrap();
    assert_eq!(s.mismatched, 0, "{s:?}");
}

#[test]
fn raid0_idle_work_moves_and_open_dispatches_by_what_is_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("arr");
    let v = RemapVolume::create(&d, &spec("raid0:3")).unwrap();
    let cap = Volume::capacity(&v);
    let bytes = data(cap, 3);
    v.write(0, &bytes).unwrap();
    v.set_target(&[(0, 2), (1, 0)]).unwrap();
    v.set_idle_after(Duration::ZERO);
    while v.idle_work().unwrap() {}
    assert_eq!((v.drive_of(0), v.drive_of(1)), (Some(2), Some(0)));
    assert!(v.set_target(&[(0, 3)]).unwrap_err().to_string().contains("drive 3"));
    Volume::close(&v).unwrap();
    drop(v);
    let any = mosaic_volume::open(d.to_str().unwrap(), false).unwrap();
    assert_eq!(any.info().kind, "remap");
    assert_eq!(read(any.as_ref(), 0, cap), bytes);
    assert!(any.as_remap().is_some());
    assert!(any.write(0, &bytes[..4096]).is_err(), "read-only open");
    // Created over existing files: refused without force.
    let e = RemapVolume::create(&d, &spec("raid0:3")).err().unwrap().to_string();
    assert!(!e.is_empty());
}

#[test]
fn another_arrays_inner_array_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for d in [&a, &b] {
        let v = RemapVolume::create(d, &spec("raid0:2")).unwrap();
        Volume::close(&v).unwrap();
    }
    // b's inner array put under a: its label names b's array, the
    // inner array is b's own: it opens as b (a copy is its own array).
    std::fs::remove_dir_all(a.join("inner")).unwrap();
    copy_dir(&b.join("inner"), &a.join("inner"));
    let va = RemapVolume::open(&a, false).unwrap();
    let vb = RemapVolume::open(&b, false).unwrap();
    assert_eq!(va.uuid(), vb.uuid(), "the label travels with its inner array");
    // A plain array without a remap label is refused with a clear error.
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let o = mosaic_array::CreateOptions { level: mosaic_core::Level::Raid0, members: Some(2), member_size: Some(8 << 20), unit: UNIT, block: 4096, force: false, assume_clean: false };
    mosaic_array::nested::create_dir(&plain.join("inner"), "raid0", &o, None).unwrap();
    let e = RemapVolume::open(&plain, false).err().unwrap().to_string();
    assert!(e.contains("no remap label"), "{e}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}
