//! The real tier array: fast and slow inner arrays on files, the policy's
//! programs run by the one executor.  Bytes are checked after writes,
//! idle demotion, reopen, member failure and rebuild; identity through
//! the tier labels; the guard at create.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::spec::ArraySpec;
use mosaic_array::{Array, CreateOptions};
use mosaic_core::{Level, MemberState};
use mosaic_tier::policy::{PolicyConfig, TierState, FAST, SLOW};
use mosaic_volume::{InnerSpec, TierCreate, TierVolume, Volume};

const BLOCK: u64 = 4096;

fn data(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2246822519).wrapping_add(seed.wrapping_mul(0x9e37_79b9)) >> 11) as u8).collect()
}

/// A policy that demotes as soon as the tier is idle.
fn eager() -> PolicyConfig {
    PolicyConfig { high_water: 0.05, low_water: 0.0, round_share: 1.0, idle_after_ns: 0, ..PolicyConfig::default() }
}

/// raid1 over 2 x 8 MiB for the fast tier, raid5 over 4 x 16 MiB (64 KiB
/// units: 192 KiB stripes, so the slow data offset is rounded up) for
/// the slow one.
fn spec(cfg: PolicyConfig) -> TierCreate {
    TierCreate {
        fast: InnerSpec::parse("raid1:2", 8 << 20).unwrap(),
        slow: InnerSpec::parse("raid5:4", 16 << 20).unwrap(),
        unit: 64 << 10,
        block: BLOCK,
        force: false,
        journal_size: Some(4 << 20),
        config: cfg,
    }
}

fn create(dir: &Path, cfg: PolicyConfig) -> TierVolume {
    TierVolume::create(dir, &spec(cfg)).unwrap()
}

fn read(v: &dyn Volume, off: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    v.read(off, &mut b).unwrap();
    b
}

/// Run idle steps until there is nothing left; how many ran.
fn idle_until_done(v: &dyn Volume) -> u64 {
    v.set_idle_after(Duration::ZERO);
    let mut steps = 0;
    while v.idle_work().unwrap() {
        steps += 1;
        assert!(steps < 10_000, "idle work never ends");
    }
    steps
}

/// The writes of the test: (offset, bytes), some overlapping.
fn writes() -> Vec<(u64, Vec<u8>)> {
    vec![
        (0, data(256 << 10, 1)),
        (1 << 20, data(64 << 10, 2)),
        (3 << 20, data(512 << 10, 3)),
        (64 << 10, data(8 << 10, 4)),
        (5 << 20, data(4 << 10, 5)),
        (3 << 20, data(128 << 10, 6)),
    ]
}

/// What the volume should hold after `writes`.
fn expected(len: usize, ws: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut want = vec![0u8; len];
    for (off, d) in ws {
        want[*off as usize..*off as usize + d.len()].copy_from_slice(d);
    }
    want
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

#[test]
fn bytes_survive_writes_idle_demotion_full_stripe_only_and_reopen() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("tier");
    let span = 6 << 20;
    let ws = writes();
    let want = expected(span, &ws);
    let placed;
    {
        let v = create(&dir, eager());
        assert_eq!(v.info().kind, "tier");
        v.reset_counters();
        for (off, d) in &ws {
            v.write(*off, d).unwrap();
        }
        assert!(read(&v, 0, span) == want, "read after writes differs");
        let st = v.stats().unwrap();
        assert!(st.blocks_fast > 0 && st.blocks_slow == 0, "writes land on the fast tier: {st:?}");
        let steps = idle_until_done(&v);
        let st = v.stats().unwrap();
        assert!(steps > 0 && st.demoted_bytes > 0 && st.blocks_slow > 0, "idle demotion moved nothing: {steps} steps, {st:?}");
        // Demotion fills whole slow stripes: the slow array never read-modify-writes.
        let (ops, _) = v.inner()[SLOW].counters();
        assert_eq!(ops.stripes_rmw + ops.stripes_rcw, 0, "slow tier partial-stripe writes: {ops:?}");
        assert!(ops.stripes_fsw > 0, "no full-stripe write on the slow tier: {ops:?}");
        let io = v.io_counters();
        assert!(io.members[SLOW].writes > 0 && io.members[FAST].reads > 0, "{:?}", io.members);
        assert!(read(&v, 0, span) == want, "read after demotion differs");
        placed = (0..(span as u64 / BLOCK)).map(|b| v.placement(b)).collect::<Vec<_>>();
        assert!(placed.iter().any(|p| matches!(p, Some((SLOW, _)))));
        v.close().unwrap();
    }
    let v = TierVolume::open(&dir, false).unwrap();
    assert!(read(&v, 0, span) == want, "read after reopen differs");
    let again: Vec<_> = (0..(span as u64 / BLOCK)).map(|b| v.placement(b)).collect();
    assert_eq!(again, placed, "the map read back differs from the one written");
    assert!(v.warnings().is_empty(), "{:?}", v.warnings());
}

#[test]
fn reopen_recovers_the_map_and_writes_go_on() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("tier");
    let mut ws = writes();
    {
        let v = create(&dir, PolicyConfig::default());
        for (off, d) in &ws[..3] {
            v.write(*off, d).unwrap();
        }
        // No close: dropping the volume flushes (a crash would lose
        // the unflushed placements, see the tier crash tests).
    }
    {
        let v = TierVolume::open(&dir, true).unwrap();
        assert!(read(&v, 0, 4 << 20) == expected(4 << 20, &ws[..3]), "after reopen");
        for (off, d) in &ws[3..] {
            v.write(*off, d).unwrap();
        }
        let extra = (2 << 20, data(300 << 10, 9));
        v.write(extra.0, &extra.1).unwrap();
        ws.push(extra);
        v.close().unwrap();
    }
    let v = mosaic_volume::open(dir.to_str().unwrap(), false).unwrap();
    assert_eq!(v.info().kind, "tier");
    assert!(read(v.as_ref(), 0, 6 << 20) == expected(6 << 20, &ws), "after a second reopen");
}

#[test]
fn a_copied_tier_is_itself_and_swapped_or_stale_inner_arrays_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let bytes = data(128 << 10, 7);
    let uuid_a = {
        let v = create(&a, PolicyConfig::default());
        v.write(0, &bytes).unwrap();
        v.uuid()
    };
    drop(create(&b, PolicyConfig::default()));

    // A copy of the whole directory is the same tier, on its own files.
    let copy = t.path().join("copy");
    copy_dir(&a, &copy);
    {
        let v = TierVolume::open(&copy, true).unwrap();
        assert_eq!(v.uuid(), uuid_a);
        assert!(read(&v, 0, bytes.len()) == bytes);
        v.write(0, &data(128 << 10, 8)).unwrap();
    }
    let v = TierVolume::open(&a, false).unwrap();
    assert!(read(&v, 0, bytes.len()) == bytes, "writing the copy changed the original");
    drop(v);

    // Another tier's slow array in place of ours.
    let mixed = t.path().join("mixed");
    copy_dir(&a.join("fast"), &mixed.join("fast"));
    copy_dir(&b.join("slow"), &mixed.join("slow"));
    let e = TierVolume::open(&mixed, false).err().expect("a foreign slow array was accepted").to_string();
    assert!(e.contains("belongs to tier") && e.contains("swapped for another tier's"), "{e}");

    // The fast and slow arrays swapped.
    let swapped = t.path().join("swapped");
    copy_dir(&a.join("fast"), &swapped.join("slow"));
    copy_dir(&a.join("slow"), &swapped.join("fast"));
    let e = TierVolume::open(&swapped, false).err().expect("swapped inner arrays were accepted").to_string();
    assert!(e.contains("inner arrays were swapped"), "{e}");

    // An old copy of the slow array put back after the tier moved on.
    let old_slow = t.path().join("old-slow");
    copy_dir(&a.join("slow"), &old_slow);
    drop(TierVolume::open(&a, true).unwrap());
    drop(TierVolume::open(&a, true).unwrap());
    std::fs::remove_dir_all(a.join("slow")).unwrap();
    copy_dir(&old_slow, &a.join("slow"));
    let e = TierVolume::open(&a, false).err().expect("a stale slow array was accepted").to_string();
    assert!(e.contains("stale"), "{e}");

    // A fixed array where an inner array should be.
    let plain = t.path().join("plain");
    copy_dir(&a.join("fast"), &plain.join("fast"));
    let o = CreateOptions { level: Level::Raid5, members: Some(3), member_size: Some(4 << 20), unit: 64 << 10, block: BLOCK, force: false, assume_clean: false };
    drop(Array::create(&ArraySpec::Dir(plain.join("slow")), &o).unwrap());
    let e = TierVolume::open(&plain, false).err().expect("an untiered array was accepted").to_string();
    assert!(e.contains("no tier label"), "{e}");

    // An inner array missing.
    std::fs::remove_dir_all(plain.join("slow")).unwrap();
    let e = mosaic_volume::open(plain.to_str().unwrap(), false).err().expect("half a tier was accepted").to_string();
    assert!(e.contains("the slow tier") && e.contains("plain/slow"), "{e}");
}

#[test]
fn a_failed_fast_member_keeps_reads_right_and_replace_rebuild_scrub_work() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("tier");
    let ws = writes();
    let want = expected(6 << 20, &ws);
    {
        let v = create(&dir, PolicyConfig::default());
        for (off, d) in &ws {
            v.write(*off, d).unwrap();
        }
        v.fail_member(0).unwrap();
        let i = v.info();
        assert!(i.degraded && matches!(i.members[0].state, MemberState::Failed), "{:?}", i.members);
        assert_eq!(v.state(), Some(TierState::Paused), "movement pauses while a tier is degraded");
        assert!(read(&v, 0, 6 << 20) == want, "degraded read differs");
    }
    let v = TierVolume::open(&dir, true).unwrap();
    assert!(read(&v, 0, 6 << 20) == want, "degraded read after reopen differs");
    let more = data(64 << 10, 11);
    v.write(4 << 20, &more).unwrap();
    let mut want = want;
    want[4 << 20..(4 << 20) + more.len()].copy_from_slice(&more);
    let slow_members = v.inner()[SLOW].geometry().members;
    assert_eq!(v.info().members.len(), 2 + slow_members, "members are flattened, fast first");
    assert!(v.fail_member(2 + slow_members).is_err(), "no such member");
    v.replace(0, &t.path().join("new-fast-0.img")).unwrap();
    let r = v.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap();
    assert_eq!(r.members, vec![0]);
    assert!(!v.info().degraded);
    assert_eq!(v.state(), Some(TierState::Normal));
    assert!(read(&v, 0, 6 << 20) == want, "read after rebuild differs");
    // A slow member too, by its flattened index.
    v.fail_member(3).unwrap();
    assert!(v.inner()[SLOW].health().is_degraded() && !v.inner()[FAST].health().is_degraded());
    assert!(read(&v, 0, 6 << 20) == want, "read with a slow member out differs");
    v.replace(3, &t.path().join("new-slow-1.img")).unwrap();
    let r = v.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap();
    assert_eq!(r.members, vec![3]);
    let s = v.scrub(false, &|_, _| {}).unwrap();
    assert_eq!((s.mismatched, s.unverified_stripes), (0, 0), "{s:?}");
    assert!(s.stripes_checked > 0);
    assert!(v.rebuild(&|_, _| {}, RebuildOptions::default()).unwrap_err().to_string().contains("nothing to rebuild"));
}

#[test]
fn the_guard_refuses_a_tier_over_existing_arrays_without_force() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("tier");
    let o = CreateOptions { level: Level::Raid5, members: Some(3), member_size: Some(4 << 20), unit: 64 << 10, block: BLOCK, force: false, assume_clean: false };
    let slow: PathBuf = dir.join("slow");
    let old = Array::create(&ArraySpec::Dir(slow.clone()), &o).unwrap();
    let old_uuid = old.info().uuid;
    drop(old);
    let e = TierVolume::create(&dir, &spec(PolicyConfig::default())).err().expect("created over an array").to_string();
    assert!(e.contains("use --force") && e.contains(&old_uuid.to_string()), "{e}");
    assert!(!dir.join("fast").exists(), "a refused create made files");
    let v = TierVolume::create(&dir, &TierCreate { force: true, ..spec(PolicyConfig::default()) }).unwrap();
    assert_ne!(v.inner()[SLOW].info().uuid, old_uuid);
    drop(v);
    // And over an existing tier.
    let e = TierVolume::create(&dir, &spec(PolicyConfig::default())).err().expect("created over a tier").to_string();
    assert!(e.contains("use --force"), "{e}");
    assert!(TierVolume::open(&dir, false).is_ok(), "the refused create damaged the tier");
}

#[test]
fn bad_geometries_are_refused_before_anything_is_created() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("tier");
    let big_fast = TierCreate { fast: InnerSpec::parse("raid1:2", 64 << 20).unwrap(), ..spec(PolicyConfig::default()) };
    let e = TierVolume::create(&dir, &big_fast).err().expect("fast larger than slow").to_string();
    assert!(e.contains("larger than the slow tier"), "{e}");
    let tiny_slow = TierCreate { slow: InnerSpec::parse("raid6:6", (1 << 20) + (64 << 10)).unwrap(), ..spec(PolicyConfig::default()) };
    assert!(TierVolume::create(&dir, &tiny_slow).is_err(), "a slow tier without room was accepted");
    assert!(!dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none(), "a refused create made files");
}

#[test]
fn a_lost_slow_tier_fails_only_reads_of_slow_blocks() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("tier");
    let v = create(&dir, eager());
    let old = data(2 << 20, 21);
    v.write(0, &old).unwrap();
    idle_until_done(&v);
    assert!((0..512).all(|b| matches!(v.placement(b), Some((SLOW, _)))), "the eager policy left blocks on the fast tier");
    // New writes land on the fast tier (not idle again: no demotion).
    v.set_idle_after(Duration::from_secs(3600));
    let new = data(64 << 10, 22);
    v.write(4 << 20, &new).unwrap();
    v.flush().unwrap();
    assert!(matches!(v.placement(1024), Some((FAST, _))));
    // Two of the slow raid5's four members lose their data area.
    for m in ["member-00.img", "member-01.img"] {
        let f = std::fs::OpenOptions::new().write(true).open(dir.join("slow").join(m)).unwrap();
        f.set_len(1 << 20).unwrap();
    }
    let mut buf = vec![0u8; old.len()];
    let e = v.read(0, &mut buf).unwrap_err().to_string();
    // A read changes nothing on the members: the policy (and the
    // placements not yet flushed) stays.
    assert!(e.contains("tier read failed"), "{e}");
    assert_eq!(v.state(), Some(TierState::SlowOffline));
    assert!(read(&v, 4 << 20, new.len()) == new, "a fast block is still read right");
    v.set_idle_after(Duration::ZERO);
    assert!(!v.idle_work().unwrap(), "no movement while the slow tier is offline");
    assert!(v.info().summary.iter().any(|(k, s)| k == "state" && s.starts_with("SlowOffline")), "{:?}", v.info().summary);
}

#[test]
fn slow_blocks_read_often_are_promoted_when_idle() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("tier");
    let v = create(&dir, eager());
    let bytes = data(1 << 20, 31);
    v.write(0, &bytes).unwrap();
    idle_until_done(&v);
    assert!(matches!(v.placement(0), Some((SLOW, _))));
    v.set_idle_after(Duration::from_secs(3600));
    // The first 64 KiB group, read twice (promote_hits = 2, not a sequential stream).
    for _ in 0..2 {
        assert!(read(&v, 0, 64 << 10) == bytes[..64 << 10]);
        assert!(read(&v, 512 << 10, 4096) == bytes[512 << 10..(512 << 10) + 4096]);
    }
    idle_until_done(&v);
    let st = v.stats().unwrap();
    assert!(st.promoted_bytes >= 64 << 10 && st.promote_batches > 0, "{st:?}");
    assert!((0..16).all(|b| matches!(v.placement(b), Some((FAST, _)))), "the hot group is not on the fast tier");
    assert!(read(&v, 0, bytes.len()) == bytes, "read after promotion differs");
    drop(v);
    let v = TierVolume::open(&dir, false).unwrap();
    assert!(matches!(v.placement(0), Some((FAST, _))), "the promotion did not reach the map");
    assert!(read(&v, 0, bytes.len()) == bytes, "read after reopen differs");
}
