//! The tier experiments' parts, on small inputs: the generators, the space
//! measurement, the LRU cache's device operations, and the tier against
//! all-HDD in virtual time.

use std::collections::HashSet;

use mosaic_core::{Frontend, Health, Phase, Program};
use mosaic_exp::tier::lru::LruCache;
use mosaic_exp::tier::rig::{Rig, Scheme};
use mosaic_exp::tier::space::{self, AllocKind, SpaceCase};
use mosaic_exp::tier::workload::{iozone, postmark, FsEvent, IozoneSpec, PostmarkSpec};
use mosaic_sim::{Mode, SimConfig, Simulator};
use mosaic_trace::{Op, Request};

fn small_postmark(seed: u64) -> PostmarkSpec {
    PostmarkSpec { files: 300, transactions: 3000, seed, ..Default::default() }
}

#[test]
fn postmark_sizes_ratio_and_layout() {
    let spec = small_postmark(3);
    let t = postmark(&spec);
    assert_eq!(t.events, postmark(&spec).events, "seeded");
    assert_ne!(t.events, postmark(&small_postmark(4)).events);
    // Created sizes: uniform in [500, 10000] bytes.
    assert_eq!(t.created_sizes.len() as u64, t.creates);
    assert!(t.created_sizes.iter().all(|&s| (500..=10_000).contains(&s)));
    let mean = t.created_sizes.iter().sum::<u64>() as f64 / t.created_sizes.len() as f64;
    assert!((mean - 5250.0).abs() < 400.0, "mean size {mean}");
    assert!(t.created_sizes.iter().any(|&s| s < 1500) && t.created_sizes.iter().any(|&s| s > 9000));
    // Transactions: read:append 5:5 and create:delete 5:5.
    assert_eq!(t.transactions, 3000);
    assert_eq!(t.reads + t.appends, 3000);
    let skew = (t.reads as f64 - t.appends as f64).abs() / 3000.0;
    assert!(skew < 0.06, "reads {} appends {}", t.reads, t.appends);
    assert!((t.creates - 300) as f64 / 3000.0 > 0.44 && (t.creates - 300) as f64 / 3000.0 < 0.56, "creates {}", t.creates);
    assert_eq!(t.live_files, t.creates - t.deletes);
    // A create's blocks are one write run: ceil(size / 1 KiB) blocks in one
    // request when the allocator had room (always, for the pool).
    let writes: Vec<u64> = t.events.iter().take(300).map(|e| if let FsEvent::Write { blocks, .. } = e { *blocks } else { 0 }).collect();
    for (w, s) in writes.iter().zip(&t.created_sizes) {
        assert_eq!(*w, s.div_ceil(1024));
    }
    // Times never go back; no file block is written while another file owns it.
    assert!(t.events.windows(2).all(|w| w[0].time_ns() <= w[1].time_ns()));
    let reqs = t.requests();
    assert!(reqs.iter().all(|r| r.len % 1024 == 0 && r.offset % 1024 == 0 && r.len <= 10 * 1024 + 1024));
}

#[test]
fn iozone_is_sequential_8k_records_in_time() {
    let v = iozone(&IozoneSpec { file_size: 1 << 20, record: 8 << 10, rate: 1 << 30 });
    assert_eq!(v.len(), 128);
    for (i, r) in v.iter().enumerate() {
        assert_eq!((r.op, r.offset, r.len), (Op::Write, i as u64 * 8192, 8192));
    }
    assert!(v.windows(2).all(|w| w[1].time_ns > w[0].time_ns));
    // 8 KiB at 1 GiB/s: 7,629 ns apart.
    assert_eq!(v[1].time_ns - v[0].time_ns, 7629);
}

/// Logical blocks of the files alive at the end, from the events alone.
fn live_blocks(events: &[FsEvent]) -> u64 {
    let mut live = HashSet::new();
    for e in events {
        match e {
            FsEvent::Write { lba, blocks, .. } => live.extend(*lba..lba + blocks),
            FsEvent::Delete { extents, .. } => extents.iter().for_each(|(s, n)| (*s..s + n).for_each(|b| {
                live.remove(&b);
            })),
            FsEvent::Read { .. } => {}
        }
    }
    live.len() as u64
}

#[test]
fn chunk_partitioning_beats_fixed_extents_on_small_files() {
    let t = postmark(&small_postmark(7));
    let expect_live = live_blocks(&t.events);
    for extent in [64u64 << 10, 256 << 10] {
        let cap = 8000 * extent;
        let fixed = space::run_case(&t, &SpaceCase { kind: AllocKind::Fixed, extent_bytes: extent, v: 0 }, 300, cap, 10).unwrap();
        for v in [8, 32] {
            let re = space::run_case(&t, &SpaceCase { kind: AllocKind::ReHypar, extent_bytes: extent, v }, 300, cap, 10).unwrap();
            assert!(re.live_fraction > fixed.live_fraction, "{extent} V={v}: rehypar {} fixed {}", re.live_fraction, fixed.live_fraction);
            assert!(re.stats.allocated < fixed.stats.allocated);
            // Both allocators hold exactly the live files' blocks, and
            // account for every allocated block.
            for r in [&re, &fixed] {
                assert_eq!(r.refused_blocks, 0);
                assert_eq!(r.stats.live, expect_live, "{}", r.case);
                let s = r.stats;
                assert_eq!(s.allocated, s.live + s.dead + s.skipped + s.open_tail, "{}", r.case);
                assert!((r.live_fraction - s.live as f64 / s.allocated as f64).abs() < 1e-12);
            }
        }
        // Fixed extents: each allocation seals an extent, nothing is reused.
        assert_eq!(fixed.stats.open_tail, 0);
    }
}

/// (member, is_write, offset, len) of a program's transfers.
fn ops(p: &Program) -> Vec<(usize, bool, u64, u64)> {
    let mut v = Vec::new();
    for ph in &p.phases {
        match ph {
            Phase::Read(ios) => v.extend(ios.iter().map(|i| (i.op.member, false, i.op.offset, i.op.len))),
            Phase::Write { ops, .. } => v.extend(ops.iter().map(|i| (i.op.member, true, i.op.offset, i.op.len))),
            _ => {}
        }
    }
    v
}

#[test]
fn lru_cache_hits_and_dirty_eviction() {
    const B: u64 = 4096;
    let h = Health::all_active(2);
    let mut c = LruCache::new(B, 2, 1 << 20).unwrap();
    // Write A (block 0), write B (block 1): misses into slots 0 and 1.
    let s = c.submit(true, 0, B, 0, &h).unwrap();
    assert_eq!(ops(&s.fg[0]), vec![(0, true, 0, B)]);
    let s = c.submit(true, B, B, 1, &h).unwrap();
    assert_eq!(ops(&s.fg[0]), vec![(0, true, B, B)]);
    // Read A: a hit on FAST, nothing in the background.
    let s = c.submit(false, 0, B, 2, &h).unwrap();
    assert_eq!((ops(&s.fg[0]), s.bg.len()), (vec![(0, false, 0, B)], 0));
    // Write C (block 2): the cache is full, B is least recently used and
    // dirty: read from slot 1, written to SLOW at its own address, then C
    // goes into slot 1.
    let s = c.submit(true, 2 * B, B, 3, &h).unwrap();
    assert_eq!(s.fg[0].phases.len(), 2);
    assert_eq!(ops(&s.fg[0]), vec![(0, false, B, B), (0, true, B, B), (1, true, B, B)]);
    // Read B: a miss, read from SLOW; promoting it evicts A (dirty) from slot 0.
    let s = c.submit(false, B, B, 4, &h).unwrap();
    assert_eq!(ops(&s.fg[0]), vec![(1, false, B, B)]);
    assert_eq!(ops(&s.bg[0]), vec![(0, false, 0, B), (0, true, 0, B), (1, true, 0, B)]);
    let st = c.counters();
    assert_eq!((st.read_hits, st.read_misses, st.write_hits, st.write_misses), (1, 1, 0, 3));
    assert_eq!((st.dirty_evictions, st.clean_evictions), (2, 0));
    // Write C again: a hit, in place in slot 1.
    let s = c.submit(true, 2 * B, B, 5, &h).unwrap();
    assert_eq!(ops(&s.fg[0]), vec![(0, true, B, B)]);
    // Misaligned and out-of-range requests are errors.
    assert!(c.submit(true, 100, B, 6, &h).is_err());
    assert!(c.submit(true, 1 << 20, B, 6, &h).is_err());
}

#[test]
fn lru_cache_device_counts_through_the_simulator() {
    const B: u64 = 4096;
    let rig = Rig::default();
    let seq = [(Op::Write, 0), (Op::Write, 1), (Op::Read, 0), (Op::Write, 2), (Op::Read, 1)];
    let reqs: Vec<Request> = seq.iter().enumerate().map(|(i, &(op, b))| Request { time_ns: i as u64 * 1_000_000, op, offset: b * B, len: B }).collect();
    let c = LruCache::new(B, 2, 1 << 30).unwrap();
    let sim = Simulator::with_frontend(Box::new(c), rig.members().unwrap(), SimConfig { mode: Mode::Closed { queue_depth: 1 }, ..Default::default() }).unwrap();
    let r = sim.run(reqs.into_iter().map(Ok::<_, std::convert::Infallible>)).unwrap();
    // FAST: reads = hit A + evict B + evict A; writes = A, B, C, promoted B.
    assert_eq!((r.devices[0].reads, r.devices[0].writes), (3, 4));
    // SLOW: the miss of B; the write-backs of B and A.
    assert_eq!((r.devices[1].reads, r.devices[1].writes), (1, 2));
}

#[test]
fn tier_beats_all_hdd_on_iozone_writes() {
    let rig = Rig::default();
    let reqs = iozone(&IozoneSpec { file_size: 4 << 20, ..Default::default() });
    let mode = Mode::Closed { queue_depth: 32 };
    let hdd = rig.run(&Scheme::AllHdd, "iozone", &reqs, mode).unwrap();
    let tier = rig.run(&Scheme::Tier { extent: 64 << 10, v: 8 }, "iozone", &reqs, mode).unwrap();
    assert_eq!(tier.requests, 512);
    assert!(tier.mib_per_s > 2.0 * hdd.mib_per_s, "tier {} MiB/s, all-hdd {}", tier.mib_per_s, hdd.mib_per_s);
    // Every byte landed on FAST (member 0); SLOW wrote nothing.
    assert!(tier.member_write_bytes[0] >= 4 << 20, "{:?}", tier.member_write_bytes);
    assert_eq!(tier.member_write_bytes[1], 0);
}

#[test]
fn quick_eval_runs_every_scheme_and_prints_the_paper() {
    use mosaic_exp::tier::{run_all, TierEvalConfig};
    let cfg = TierEvalConfig { iozone_sizes: vec![1 << 20], postmark_transactions: 300, space_transactions: 1000, ..TierEvalConfig::quick() };
    let r = run_all(None, &cfg).unwrap();
    // 7 schemes per IOzone size and per Postmark file count; the tier ran.
    assert_eq!(r.iozone.len(), 7, "{:?}", r.notes);
    assert_eq!(r.postmark.len(), 7);
    assert!(r.notes.iter().all(|n| !n.contains("not run (")), "{:?}", r.notes);
    // Per extent size: V=8, V=32 and the fixed baseline.
    assert_eq!(r.space.len(), 6);
    assert!(r.table1.iter().all(|t| t.paper_max_level == t.mosaic_max_level));
    let t = r.table();
    for needle in ["ext2 +12%", "ext2 +4%", "no figure", "all-hdd", "lru-cache", "tier 256K V=32"] {
        assert!(t.contains(needle), "missing {needle:?} in\n{t}");
    }
    // The same numbers as JSON-ready values: every IOzone rate is positive.
    assert!(r.iozone.iter().all(|x| x.run.mib_per_s > 0.0));
}
