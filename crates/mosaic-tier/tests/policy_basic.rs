//! The tier policy on the real executor: placement, reads, demotion in
//! whole segments, the RMW count, recovery.

use crate::policy_support;

use mosaic_core::Dir;
use mosaic_tier::{TierPolicy, FAST, SLOW};
use policy_support::*;

const STRIPE: u64 = 64 * KIB;

fn rig(fast_data: u64, segments: u64) -> Rig {
    let cfg = small_cfg();
    let g = geo(&cfg, fast_data, segments, STRIPE);
    Rig::new(cfg, g)
}

#[test]
fn fresh_tier_reads_zeros_and_recovers_empty() {
    let mut r = rig(512 * KIB, 64);
    // 64 segments, reserve max(2, 64/16) = 4: capacity 60 segments.
    assert_eq!(r.capacity(), 60 * STRIPE);
    assert_eq!(r.read(0, 3 * BLOCK).unwrap(), vec![0u8; 3 * BLOCK as usize]);
    r.recover();
    assert_eq!(r.pol.stats().blocks_fast + r.pol.stats().blocks_slow, 0);
    assert_eq!(r.read(r.capacity() - BLOCK, BLOCK).unwrap(), vec![0u8; BLOCK as usize]);
}

#[test]
fn writes_land_on_fast_and_overwrite_in_place() {
    let mut r = rig(512 * KIB, 64);
    let a = pattern(1, 8 * BLOCK, 3 * BLOCK);
    r.write(8 * BLOCK, &a).unwrap();
    let (m, off) = r.pol.placement(8).unwrap();
    assert_eq!(m, FAST);
    assert!(off >= TierPolicy::map_bytes(&r.cfg, &r.geo));
    let map_before = r.pol.stats().map_bytes_written;
    let b = pattern(2, 9 * BLOCK, BLOCK);
    r.write(9 * BLOCK, &b).unwrap();
    assert_eq!(r.pol.placement(9).unwrap(), (FAST, off + BLOCK), "in place");
    assert_eq!(r.pol.stats().map_bytes_written, map_before, "an in-place write changes no placement");
    let last = r.log.last().unwrap();
    assert!(ops_on(last, SLOW).is_empty());
    let mut want = a.clone();
    want[BLOCK as usize..2 * BLOCK as usize].copy_from_slice(&b);
    assert_eq!(r.read(8 * BLOCK, 3 * BLOCK).unwrap(), want);
    // Unmapped neighbours read as zeros inside the same request.
    let got = r.read(7 * BLOCK, 5 * BLOCK).unwrap();
    assert_eq!(&got[..BLOCK as usize], &[0u8; BLOCK as usize][..]);
    assert_eq!(&got[BLOCK as usize..4 * BLOCK as usize], &want[..]);
    assert_eq!(&got[4 * BLOCK as usize..], &[0u8; BLOCK as usize][..]);
}

#[test]
fn a_sequential_run_grows_in_place_and_reads_merge() {
    let mut r = rig(512 * KIB, 64);
    for i in 0..4 {
        r.write(100 * BLOCK + i * BLOCK, &pattern(i, 0, BLOCK)).unwrap();
    }
    let (_, first) = r.pol.placement(100).unwrap();
    for i in 1..4 {
        assert_eq!(r.pol.placement(100 + i).unwrap(), (FAST, first + i * BLOCK), "block {i} follows the run");
    }
    r.read(100 * BLOCK, 4 * BLOCK).unwrap();
    assert_eq!(ops_on(r.log.last().unwrap(), FAST), vec![(Dir::Read, first, 4 * BLOCK)], "one merged read");
}

#[test]
fn demotion_writes_whole_aligned_segments_only_and_data_survives() {
    let mut r = rig(512 * KIB, 64);
    let cap = r.capacity();
    let mut model = Model::new(cap);
    // 3 MiB of 12 KiB writes: far more than the 512 KiB fast tier.
    let mut off = 0;
    let mut k = 0;
    while off + 3 * BLOCK <= 3 << 20 {
        let d = pattern(k, off, 3 * BLOCK);
        r.write(off, &d).unwrap();
        model.write(off, &d);
        off += 5 * BLOCK;
        k += 1;
    }
    let st = r.pol.stats();
    assert!(st.demote_batches > 0 && st.blocks_slow > 0, "{st:?}");
    for p in &r.log {
        for (dir, o, l) in ops_on(p, SLOW) {
            if dir == Dir::Write {
                assert_eq!((o % STRIPE, l), (0, STRIPE), "a slow write of {l} bytes at {o}");
            }
        }
    }
    for o in (0..3 << 20).step_by(64 * 1024) {
        assert_eq!(r.read(o, 64 * KIB).unwrap(), model.get(o, 64 * KIB), "at {o}");
    }
    // Everything still reads back after recovery from FAST's map bytes.
    r.recover();
    let st2 = r.pol.stats();
    assert_eq!((st2.blocks_fast, st2.blocks_slow, st2.slow_live), (st.blocks_fast, st.blocks_slow, st.slow_live));
    assert_eq!(st2.fast_live, st.fast_live);
    assert_eq!(r.read(0, 3 << 20).unwrap(), model.get(0, 3 << 20));
}

#[test]
fn slow_rmws_avoided_follow_the_stripe_equation() {
    let mut r = rig(512 * KIB, 64);
    // (offset, len) -> stripes touched but not covered, 64 KiB stripes.
    let cases = [(0, BLOCK, 1), (0, STRIPE, 0), (60 * KIB, 8 * KIB, 2), (32 * KIB, 128 * KIB, 2), (STRIPE, 2 * STRIPE, 0), (4 * KIB, 60 * KIB, 1)];
    let mut want = 0;
    for (i, &(o, l, n)) in cases.iter().enumerate() {
        r.write(o, &pattern(i as u64, o, l)).unwrap();
        want += n;
        assert_eq!(r.pol.stats().slow_rmw_avoided, want, "after case {i}");
    }
    assert_eq!(r.pol.stats().absorbed_writes, cases.len() as u64);
}

#[test]
fn bad_requests_are_errors() {
    let mut r = rig(512 * KIB, 64);
    assert!(r.write(100, &[0u8; 4096]).is_err());
    assert!(r.read(r.capacity(), BLOCK).is_err());
    assert!(r.write(r.capacity() - BLOCK, &[0u8; 8192]).is_err());
}

/// Many writes of mixed sizes, idle time between, then recovery: the
/// recovered tier reads exactly what the running one did, with both
/// allocators.
fn recover_reads_the_same(fixed: bool) {
    let cfg = mosaic_tier::PolicyConfig { fixed_extents: fixed, round_share: 0.5, ..small_cfg() };
    let g = geo(&cfg, 512 * KIB, 64, STRIPE);
    let mut r = Rig::new(cfg, g);
    let cap = r.capacity();
    let mut x = 12345u64;
    for i in 0..600u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let n = 1 + (x >> 60) % 12;
        let b = (x >> 20) % (cap / BLOCK - n);
        r.write(b * BLOCK, &pattern(i, b * BLOCK, n * BLOCK)).unwrap();
        if i % 97 == 0 {
            r.idle(4);
        }
    }
    let before = r.read(0, cap).unwrap();
    r.flush();
    let st = r.pol.stats();
    assert_eq!(st.map_dirty, 0);
    r.recover();
    assert_eq!(r.read(0, cap).unwrap(), before);
    let st2 = r.pol.stats();
    assert_eq!((st2.blocks_fast, st2.blocks_slow, st2.fast_live, st2.slow_live), (st.blocks_fast, st.blocks_slow, st.fast_live, st.slow_live));
    // And it keeps working: a full rewrite of a stretch, idle, recover.
    r.write(0, &pattern(99, 0, 64 * KIB)).unwrap();
    r.idle(10);
    r.recover();
    assert_eq!(r.read(0, 64 * KIB).unwrap(), pattern(99, 0, 64 * KIB));
    assert_eq!(r.read(64 * KIB, cap - 64 * KIB).unwrap(), &before[64 * KIB as usize..]);
}

#[test]
fn recover_after_many_writes_reads_the_same_rehypar() {
    recover_reads_the_same(false);
}

#[test]
fn recover_after_many_writes_reads_the_same_fixed_extents() {
    recover_reads_the_same(true);
}

#[test]
fn recover_refuses_other_geometry_and_damaged_maps_naming_what() {
    let mut r = rig(512 * KIB, 64);
    r.write(0, &pattern(1, 0, 8 * BLOCK)).unwrap();
    let meta = r.meta();
    let other = mosaic_tier::TierGeometry { slow_stripe: 128 * KIB, ..r.geo };
    let e = TierPolicy::recover(r.cfg.clone(), other, &meta).err().unwrap().to_string();
    assert!(e.contains("corrupt") || e.contains("map"), "{e}");
    let cfg2 = mosaic_tier::PolicyConfig { block: 8192, ..r.cfg.clone() };
    assert!(TierPolicy::recover(cfg2, r.geo, &meta).is_err());
    let e = TierPolicy::recover(r.cfg.clone(), r.geo, &meta[..1000]).err().unwrap().to_string();
    assert!(e.contains("bytes of the map region"), "{e}");
    let mut blank = meta.clone();
    blank[..512].fill(0);
    let e = TierPolicy::recover(r.cfg.clone(), r.geo, &blank).err().unwrap().to_string();
    assert!(e.contains("label"), "{e}");
    // Both checkpoint slots damaged: no map to recover.
    let l = r.pol.layout().ledger();
    let mut bad = meta.clone();
    bad[l.slots[0] as usize + 30] ^= 1;
    bad[l.slots[1] as usize + 30] ^= 1;
    let e = TierPolicy::recover(r.cfg.clone(), r.geo, &bad).err().unwrap().to_string();
    assert!(e.contains("no valid checkpoint"), "{e}");
}

#[test]
fn bad_configurations_and_geometries_are_named() {
    let cfg = small_cfg();
    let g = geo(&cfg, 512 * KIB, 64, STRIPE);
    let bad = |c: mosaic_tier::PolicyConfig, g| TierPolicy::format(c, g).err().unwrap().to_string();
    assert!(bad(mosaic_tier::PolicyConfig { high_water: 0.5, low_water: 0.7, ..cfg.clone() }, g).contains("watermarks"));
    assert!(bad(mosaic_tier::PolicyConfig { sections: vec![(16 * KIB, 0.7), (64 * KIB, 0.7)], ..cfg.clone() }, g).contains("shares"));
    assert!(bad(cfg.clone(), mosaic_tier::TierGeometry { slow_stripe: 1000, ..g }).contains("slow stripe"));
    assert!(bad(cfg.clone(), mosaic_tier::TierGeometry { slow_bytes: 2 * STRIPE, ..g }).contains("segments"));
    assert!(bad(cfg.clone(), mosaic_tier::TierGeometry { fast_bytes: 4096, ..g }).contains("fast tier"));
    assert_eq!(TierPolicy::map_bytes(&cfg, &mosaic_tier::TierGeometry { slow_stripe: 0, ..g }), 0);
}

#[test]
fn the_map_region_holds_two_full_checkpoints_and_a_log() {
    let cfg = small_cfg();
    let g = geo(&cfg, 512 * KIB, 64, STRIPE);
    let (pol, _) = TierPolicy::format(cfg.clone(), g).unwrap();
    let l = pol.layout();
    // 960 logical blocks x 32 bytes + 8, framed, in each slot.
    assert!(l.slot_bytes >= 960 * 32 + 8);
    assert!(l.log_bytes >= 64 * KIB);
    assert_eq!(l.map_bytes % cfg.erase_block, 0, "fast data stays erase-aligned");
    assert!(512 + 2 * l.slot_bytes + l.log_bytes <= l.map_bytes);
}

#[test]
fn default_config_on_a_realistic_geometry() {
    // raid1 of SSDs with 24 MiB usable, raid6 over 6 HDDs with 256 KiB
    // chunks: 1 MiB of data per full stripe, 256 MiB usable.
    let cfg = mosaic_tier::PolicyConfig::default();
    let g = mosaic_tier::TierGeometry { fast_bytes: 24 << 20, slow_bytes: 256 << 20, slow_stripe: 1 << 20 };
    let mut r = Rig::new(cfg, g);
    // 256 segments, reserve 16: 240 MiB logical.
    assert_eq!(r.capacity(), 240 << 20);
    let l = r.pol.layout().clone();
    assert_eq!(l.map_bytes % (256 * KIB), 0);
    assert_eq!(l.sections.len(), 2);
    let mut m = Model::new(r.capacity());
    for i in 0..48u64 {
        let off = i * (1 << 20);
        let d = pattern(i, off, 1 << 20);
        r.write(off, &d).unwrap();
        m.write(off, &d);
    }
    let st = r.pol.stats();
    assert!(st.demote_batches > 0 && st.blocks_slow > 0, "{st:?}");
    for p in &r.log {
        for (dir, o, len) in ops_on(p, SLOW) {
            if dir == Dir::Write {
                assert_eq!((o % (1 << 20), len), (0, 1 << 20));
            }
        }
    }
    assert_eq!(r.read(0, 48 << 20).unwrap(), m.get(0, 48 << 20));
    r.recover();
    assert_eq!(r.read(0, 48 << 20).unwrap(), m.get(0, 48 << 20));
}

/// Damaged map bytes never panic: recovery refuses them or gives a tier
/// whose accounting holds and whose reads plan.
#[test]
fn damaged_map_bytes_never_panic() {
    let mut r = rig(512 * KIB, 64);
    for i in 0..40u64 {
        r.write(i * 7 * BLOCK, &pattern(i, 0, 3 * BLOCK)).unwrap();
    }
    let meta = r.meta();
    let l = r.pol.layout().ledger();
    // The label, checkpoint 1 in slot 0, and the deltas written so far.
    let regions = [(0, 512), (l.slots[0] as usize, 512), (l.log_start as usize, 40 * 512)];
    let mut x = 99u64;
    let (mut ok, mut refused) = (0, 0);
    for i in 0..300 {
        let mut m = meta.clone();
        let (start, len) = regions[i % 3];
        for _ in 0..2 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let at = start + (x >> 33) as usize % len;
            m[at] ^= (x >> 8) as u8 | 1;
        }
        match TierPolicy::recover(r.cfg.clone(), r.geo, &m) {
            Ok(mut p) => {
                ok += 1;
                let st = p.stats();
                assert_eq!((st.blocks_fast, st.blocks_slow), (st.fast_live, st.slow_live));
                let cap = mosaic_core::Frontend::capacity(&p);
                mosaic_core::Frontend::submit(&mut p, false, 0, cap, 0, &health()).unwrap();
            }
            Err(_) => refused += 1,
        }
    }
    assert!(ok > 0 && refused > 0, "ok {ok} refused {refused}");
}

/// A well-framed checkpoint whose records make no sense is refused, the
/// message naming the logical block and what is wrong.
#[test]
fn recovery_names_bad_records() {
    use mosaic_map::ledger::Ledger;
    use mosaic_map::map::{encode_records, Placement, Update};
    let r = rig(512 * KIB, 64);
    let meta = r.meta();
    let lay = r.pol.layout().clone();
    let with = |ups: &[Update]| {
        let mut m = meta.clone();
        let mut l = Ledger::fresh(lay.ledger());
        l.checkpoint(&[]).unwrap(); // seq 1, as format wrote
        let w = l.checkpoint(&encode_records(ups)).unwrap(); // seq 2, slot 1
        m[w.offset as usize..w.offset as usize + w.bytes.len()].copy_from_slice(&w.bytes);
        TierPolicy::recover(r.cfg.clone(), r.geo, &m).err().map(|e| e.to_string())
    };
    let fast = |offset| Placement::Tier { tier: FAST as u8, offset };
    let good = lay.map_bytes;
    assert_eq!(with(&[Update::Map { logical: 5, placement: fast(good) }]), None, "a sound record recovers");
    let e = with(&[Update::Map { logical: 5, placement: fast(100) }]).unwrap();
    assert!(e.contains("logical block 5") && e.contains("fast offset 100"), "{e}");
    let e = with(&[Update::Map { logical: 5, placement: fast(good) }, Update::Map { logical: 6, placement: fast(good) }]).unwrap();
    assert!(e.contains("logical block 6"), "{e}");
    let e = with(&[Update::Map { logical: 1 << 40, placement: fast(good) }]).unwrap();
    assert!(e.contains("beyond the capacity"), "{e}");
    let e = with(&[Update::Map { logical: 3, placement: Placement::Tier { tier: 7, offset: 0 } }]).unwrap();
    assert!(e.contains("not on tier"), "{e}");
    let e = with(&[Update::Map { logical: 3, placement: Placement::Tier { tier: SLOW as u8, offset: 64 << 20 } }]).unwrap();
    assert!(e.contains("slow offset"), "{e}");
}

/// Map writes (FAST, below the data) of a program.
fn map_writes(r: &Rig, p: &mosaic_core::Program) -> usize {
    let end = TierPolicy::map_bytes(&r.cfg, &r.geo);
    ops_on(p, FAST).iter().filter(|o| o.0 == Dir::Write && o.1 < end).count()
}

#[test]
fn placements_commit_in_groups_at_flush_idle_and_the_batch_bound() {
    let cfg = mosaic_tier::PolicyConfig { commit_blocks: 3, ..small_cfg() };
    let g = geo(&cfg, 512 * KIB, 64, STRIPE);
    let mut r = Rig::new(cfg, g);
    let start = r.log.len();
    // Blocks far apart: each write places one new block.
    for i in 0..7u64 {
        r.write(i * 40 * BLOCK, &pattern(i, i * 40 * BLOCK, BLOCK)).unwrap();
    }
    let per_write: Vec<usize> = r.log[start..].iter().map(|p| map_writes(&r, p)).collect();
    assert_eq!(per_write, vec![0, 0, 1, 0, 0, 1, 0], "every third placement commits the group");
    assert_eq!(r.pol.stats().map_dirty, 1);
    // An in-place overwrite places nothing.
    r.write(0, &pattern(50, 0, BLOCK)).unwrap();
    assert_eq!(map_writes(&r, r.log.last().unwrap()), 0);
    // Idle time commits the last one; a flush with nothing dirty only
    // flushes FAST.
    assert_eq!(r.idle_once(), 1);
    assert_eq!((map_writes(&r, r.log.last().unwrap()), r.pol.stats().map_dirty), (1, 0));
    r.flush();
    let p = r.log.last().unwrap();
    assert_eq!((write_ops(p), p.phases.clone()), (0, vec![mosaic_core::Phase::Flush(vec![FAST])]));
    assert_eq!(r.pol.stats().map_commits, 3);
    r.crash();
    assert_eq!(r.read(0, BLOCK).unwrap(), pattern(50, 0, BLOCK));
    for i in 1..7u64 {
        assert_eq!(r.read(i * 40 * BLOCK, BLOCK).unwrap(), pattern(i, i * 40 * BLOCK, BLOCK), "block {}", i * 40);
    }
}

#[test]
fn commit_blocks_zero_commits_every_placing_write() {
    let cfg = mosaic_tier::PolicyConfig { commit_blocks: 0, ..small_cfg() };
    let g = geo(&cfg, 512 * KIB, 64, STRIPE);
    let mut r = Rig::new(cfg, g);
    r.write(5 * BLOCK, &pattern(1, 5 * BLOCK, 2 * BLOCK)).unwrap();
    let p = r.log.last().unwrap();
    assert_eq!(map_writes(&r, p), 1);
    // data, then flush FAST, then the map, then flush FAST.
    let kinds: Vec<&str> = p
        .phases
        .iter()
        .map(|ph| match ph {
            mosaic_core::Phase::Write { .. } => "write",
            mosaic_core::Phase::Flush(_) => "flush",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, vec!["write", "flush", "write", "flush"]);
    r.crash();
    assert_eq!(r.read(5 * BLOCK, 2 * BLOCK).unwrap(), pattern(1, 5 * BLOCK, 2 * BLOCK));
}
