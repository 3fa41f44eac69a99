//! A tier program that fails part-way: the tier stops when the map read
//! back would lose placements of completed writes, and serves on when it
//! would not.  The failure is injected at the tier's executor (a
//! `FaultyMember` over one inner array), where the tier's own programs
//! see it and the map is still readable from the array underneath: the
//! case where reading the map back used to serve older bytes.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mosaic_dev::FaultyMember;
use mosaic_tier::policy::{PolicyConfig, FAST, SLOW};

use super::{InnerSpec, TierCreate, TierVolume};
use crate::Volume;

fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// A tier in `dir`: raid1 over 2 x 8 MiB fast, raid5 over 4 x 16 MiB
/// slow (64 KiB units, 4 KiB blocks, 4 MiB journals).
pub(crate) fn create(dir: &Path, config: PolicyConfig) -> TierVolume {
    let c = TierCreate {
        fast: InnerSpec::parse("raid1:2", 8 << 20).unwrap(),
        slow: InnerSpec::parse("raid5:4", 16 << 20).unwrap(),
        unit: 64 << 10,
        block: 4096,
        force: false,
        journal_size: Some(4 << 20),
        config,
    };
    TierVolume::create(dir, &c).unwrap()
}

/// A policy that demotes as soon as the tier is idle.
pub(crate) fn eager() -> PolicyConfig {
    PolicyConfig { high_water: 0.05, low_water: 0.0, round_share: 1.0, idle_after_ns: 0, ..PolicyConfig::default() }
}

fn read(v: &dyn Volume, off: u64, len: usize) -> Result<Vec<u8>, String> {
    let mut b = vec![0u8; len];
    v.read(off, &mut b).map(|()| b).map_err(|e| e.to_string())
}

/// Put a `FaultyMember` over the tier's `side` and break it.
fn break_side(v: &TierVolume, side: usize) {
    let f = Arc::new(FaultyMember::new(v.exec.member(side).unwrap()));
    f.break_now();
    v.exec.set_member(side, Some(f));
}

#[test]
fn a_failed_write_with_placements_not_in_the_map_stops_the_tier() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("tier");
    let (a, b, c) = (bytes(64 << 10, 1), bytes(64 << 10, 2), bytes(64 << 10, 3));
    {
        let v = create(&dir, PolicyConfig::default());
        v.set_idle_after(Duration::from_secs(3600));
        v.write(0, &a).unwrap();
        v.flush().unwrap();
        // Completed, its placements not yet in the map on FAST.
        v.write(1 << 20, &b).unwrap();
        assert!(v.lock().as_ref().unwrap().dirty_placements() > 0);
        break_side(&v, FAST);
        let e = v.write(2 << 20, &c).unwrap_err().to_string();
        assert!(e.contains("the tier has stopped") && e.contains("tier program failed") && e.contains("open it again"), "{e}");
        assert!(v.stopped().is_some_and(|w| w.contains("injected I/O error")), "{:?}", v.stopped());
        // Nothing is served from the map read back (it would give b's
        // blocks their older bytes): every request fails, and says why.
        for (off, len) in [(1u64 << 20, b.len()), (0, a.len())] {
            let e = read(&v, off, len).unwrap_err();
            assert!(e.contains("the tier has stopped"), "{e}");
        }
        assert!(v.write(0, &c).is_err() && v.flush().is_err() && v.allocation(0, 4096).is_err());
        v.set_idle_after(Duration::ZERO);
        assert!(v.idle_work().unwrap_err().to_string().contains("the tier has stopped"));
        let i = v.info();
        assert!(i.detail["stopped"].as_str().is_some_and(|w| w.contains("tier program failed")), "{}", i.detail["stopped"]);
        assert!(i.summary.iter().any(|(k, s)| k == "state" && s.starts_with("stopped")), "{:?}", i.summary);
        assert!(v.warnings().iter().any(|w| w.contains("the tier has stopped")), "{:?}", v.warnings());
        assert!(v.close().is_err());
    }
    // Opened again, as after a crash: what was flushed is there, the
    // rest as written or as before, and the tier works.
    let v = TierVolume::open(&dir, true).unwrap();
    assert!(v.stopped().is_none());
    assert!(read(&v, 0, a.len()).unwrap() == a);
    for (off, new) in [(1u64 << 20, &b), (2 << 20, &c)] {
        let got = read(&v, off, new.len()).unwrap();
        assert!(got == *new || got.iter().all(|&x| x == 0), "the block at {off} is neither written nor as before");
    }
    v.write(2 << 20, &c).unwrap();
    v.flush().unwrap();
    assert!(read(&v, 2 << 20, c.len()).unwrap() == c);
}

/// A movement commits every placement first, so when it fails nothing
/// is lost: the map read back is exact and the tier serves on.
#[test]
fn a_failed_movement_with_nothing_placed_since_the_commit_serves_on() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("tier");
    let v = create(&dir, eager());
    let a = bytes(2 << 20, 4);
    v.write(0, &a).unwrap();
    v.flush().unwrap();
    break_side(&v, SLOW);
    v.set_idle_after(Duration::ZERO);
    let e = v.idle_work().unwrap_err().to_string();
    assert!(e.contains("tier program failed") && e.contains("read back from the fast tier"), "{e}");
    assert!(v.stopped().is_none() && v.info().detail["stopped"].is_null());
    assert!(read(&v, 0, a.len()).unwrap() == a, "a block left on the fast tier reads differently");
}
