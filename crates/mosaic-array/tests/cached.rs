//! The small-write caches on a real (in-memory) array: the same bytes as
//! a reference under random workloads with member failures, hand-computed
//! device-op counts, and crash recovery of the write-back journal.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_array::journal::Entry;
use mosaic_array::{Array, CacheVolume, CreateOptions, DATA_OFFSET};
use mosaic_core::{CacheConfig, CachePolicy, Level};
use mosaic_dev::{MemMember, Member, PowerCut};

use crate::common;
use common::{check, write_until_cut};

const U: u64 = 4096;
const STRIPES: u64 = 24;

struct Rig {
    mems: Vec<Arc<MemMember>>,
    journal: Option<Arc<MemMember>>,
    budget: Arc<AtomicI64>,
}

fn make(level: &str, n: usize, journal: bool) -> (Rig, Array) {
    make_unit(level, n, journal, U)
}

fn make_unit(level: &str, n: usize, journal: bool, unit: u64) -> (Rig, Array) {
    let size = DATA_OFFSET + unit * STRIPES;
    let mems: Vec<Arc<MemMember>> = (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), size))).collect();
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let wrap = |m: &Arc<MemMember>| (Arc::new(PowerCut::new(m.clone(), budget.clone())) as Arc<dyn Member>, m.describe());
    let o = CreateOptions { level: level.parse::<Level>().unwrap(), members: Some(n), member_size: None, unit, block: 4096, force: true, assume_clean: true };
    let j = journal.then(|| Arc::new(MemMember::new("journal", 16 << 20)));
    let arr = Array::create_with_journal(mems.iter().map(wrap).collect(), &o, true, j.as_ref().map(wrap)).unwrap();
    (Rig { mems, journal: j, budget }, arr)
}

fn reopen(r: &Rig) -> Array {
    let ms: Vec<Arc<dyn Member>> = r.mems.iter().map(|m| m.clone() as Arc<dyn Member>).collect();
    Array::open_members_with_journal(ms, true, r.journal.clone().map(|j| j as Arc<dyn Member>)).unwrap()
}

fn cfg(policy: CachePolicy, pages: u64, m: u64, unit: u64) -> CacheConfig {
    CacheConfig { policy, write_cache: pages * unit, parity_cache: 3 * m * unit, old_data: 6 * unit }
}

fn read_all(v: &CacheVolume) -> Vec<u8> {
    let mut b = vec![0u8; v.array().capacity() as usize];
    v.read(0, &mut b).unwrap();
    b
}

/// Random writes (whole pages and partial ones), reads checked against a
/// reference, a planned member failure part-way, then close and reopen
/// without the cache: the members alone hold every byte, scrub clean.
/// With a 16 KiB unit the 4 KiB-granular writes cover pages partly, so the
/// volume widens them with bytes from the cache or the members.
fn workload(level: &str, n: usize, m: u64, policy: CachePolicy, journal: bool, seed: u64) {
    let unit = if seed % 2 == 1 { 4 * U } else { U };
    let (rig, arr) = make_unit(level, n, journal, unit);
    let v = CacheVolume::new(arr, cfg(policy, 1 + seed % 5, m, unit)).unwrap();
    assert_eq!(v.is_write_back(), journal);
    let cap = v.array().capacity();
    let mut model = vec![0u8; cap as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let what = format!("{level} {policy:?} journal={journal} unit {unit} seed {seed}");
    for i in 0..150 {
        let len = rng.gen_range(1..=12u64) * 4096;
        let off = rng.gen_range(0..(cap - len) / 4096) * 4096;
        let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        v.write(off, &data).unwrap();
        model[off as usize..(off + len) as usize].copy_from_slice(&data);
        if i == 70 {
            let victim = rng.gen_range(0..n);
            v.fail_member(victim).unwrap();
        }
        if i % 25 == 0 {
            assert!(read_all(&v) == model, "{what}: read back at op {i}");
        }
    }
    assert!(read_all(&v) == model, "{what}: final read");
    v.close().unwrap();
    drop(v);
    let arr = reopen(&rig);
    let mut b = vec![0u8; cap as usize];
    arr.read(0, &mut b).unwrap();
    assert!(b == model, "{what}: members after close");
    let s = arr.scrub(false, &|_, _| {}).unwrap();
    assert!(s.mismatched_stripes.is_empty(), "{what}: scrub {:?}", s.mismatched_stripes);
}

#[test]
fn every_policy_returns_the_reference_bytes_with_failures() {
    for p in CachePolicy::ALL {
        for seed in 0..3 {
            workload("raid5", 5, 1, p, true, seed);
            workload("raid5", 5, 1, p, false, seed + 10);
            workload("raid6", 6, 2, p, true, seed + 20);
        }
    }
}

/// A one-page write cache, writes to pages 0, 1, 0 of stripe 0, close:
/// the same counts the simulator's policy gives (mosaic-core's
/// `rewrite_through_a_one_page_cache`), now measured on the members.
#[test]
fn device_op_counts_of_three_small_writes() {
    let expect = [(CachePolicy::None, 6, 6), (CachePolicy::Fpc, 4, 4), (CachePolicy::Ppc, 4, 4), (CachePolicy::PpcData, 3, 4)];
    for (p, reads, writes) in expect {
        let (_rig, arr) = make("raid5", 5, true);
        let c = CacheConfig { policy: p, write_cache: U, parity_cache: U, old_data: 4 * U };
        let v = CacheVolume::new(arr, c).unwrap();
        for col in [0u64, 1, 0] {
            v.write(col * U, &vec![col as u8 + 1; U as usize]).unwrap();
        }
        v.close().unwrap();
        let (ops, _) = v.array().counters();
        assert_eq!((ops.device_reads(), ops.device_writes()), (reads, writes), "{p:?}");
    }
}

/// A write-back write and the destage it sets off share one journal
/// record (one sync): the write's logical entry rides in the record of
/// its first destage step, or is logged alone when nothing is destaged.
/// A page of the write that its own destage writes is logged with its
/// new bytes, never as a copy of an older record of the page.  Three-page
/// write cache: page D (stripe 0) is written and destaged (by X, Y, Z of
/// stripes 1-3), A (stripe 0) is written, then D and E (stripe 0 too):
/// making room for E destages stripe 0, D with it.
///
/// That last write makes room twice, so it has two destage steps.  Under
/// none, fpc and ppc they are on two rows (stripe 2, then stripe 0) and
/// run beside each other, in one record; under ppc+data both are on
/// stripe 0 and take a record each.
#[test]
fn a_write_and_its_destage_take_one_journal_record() {
    let (a, d) = (0u64, U);
    let writes = [(d, 1, 1u8), (4 * U, 1, 2), (8 * U, 1, 3), (12 * U, 1, 4), (a, 1, 5), (d, 2, 6)];
    let summary = |es: &[Entry]| es.iter().map(|e| format!("{:?}", e.extent())).collect::<Vec<_>>();
    for p in CachePolicy::ALL {
        let (rig, arr) = make("raid5", 5, true);
        let v = CacheVolume::new(arr, cfg(p, 3, 1, U)).unwrap();
        let j = v.array().journal().unwrap();
        let mut last_records = 0;
        for &(off, pages, fill) in &writes {
            let before = j.records.load(Ordering::Relaxed);
            v.write(off, &vec![fill; (pages * U) as usize]).unwrap();
            last_records = j.records.load(Ordering::Relaxed) - before;
            let want = if pages == 2 && p == CachePolicy::PpcData { 2 } else { 1 };
            assert_eq!(last_records, want, "{p:?}: write of {fill} at {off}");
        }
        // The last write's logical entry, and D on its member with the new
        // bytes (a copy naming D's first record would resolve to the old
        // ones).
        let jdev = rig.journal.as_ref().unwrap();
        let copy = Arc::new(MemMember::new("journal copy", jdev.size()));
        copy.restore(jdev.snapshot());
        let (_, log) = mosaic_array::Journal::open(copy, v.array().info().uuid).unwrap();
        // The records of the last write.
        let last: Vec<Entry> = log.records[log.records.len() - last_records as usize..].iter().flat_map(|r| r.1.clone()).collect();
        assert!(last.iter().any(|e| matches!(e, Entry::Logical { offset, data } if *offset == d && data.len() as u64 == 2 * U && data.iter().all(|&b| b == 6))), "{p:?}: {:?}", summary(&last));
        let geo = v.array().geometry();
        let (member, at) = (geo.member_of(0, 1), geo.offset_of(0, 1));
        let on_d: Vec<&Entry> = last.iter().filter(|e| matches!(e, Entry::Device { member: m, offset, .. } if *m == member && *offset == at)).collect();
        assert!(!on_d.is_empty(), "{p:?}: D is destaged with the write: {:?}", summary(&last));
        assert!(on_d.iter().all(|e| matches!(e, Entry::Device { data, .. } if data.iter().all(|&b| b == 6))), "{p:?}: D logged with old bytes");
        if last_records == 1 {
            // Stripe 2's destage (page 8 U) is in the same record.
            let (member, at) = (geo.member_of(2, 0), geo.offset_of(2, 0));
            let on_2 = |e: &Entry| matches!(*e, Entry::Device { member: m, offset, .. } | Entry::Copy { member: m, offset, .. } if m == member && offset == at);
            assert!(last.iter().any(on_2), "{p:?}: stripe 2's page in the record: {:?}", summary(&last));
        }
        // A crash now: replay gives every page its last bytes.
        rig.budget.store(i64::MIN / 2, Ordering::SeqCst);
        drop(v);
        let arr = reopen(&rig);
        let mut want = vec![0u8; 16 * U as usize];
        for &(off, pages, fill) in &writes {
            want[off as usize..(off + pages * U) as usize].fill(fill);
        }
        let mut got = vec![0u8; want.len()];
        arr.read(0, &mut got).unwrap();
        assert!(got == want, "{p:?}: bytes after the crash");
        assert!(arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty(), "{p:?}: scrub after the crash");
    }
}

/// Power cut during a write-back run: reopening the plain array replays
/// the journal; every acknowledged write is there and scrub is clean.
#[test]
fn write_back_cache_survives_a_power_cut() {
    let mut replayed = 0;
    for seed in 0..24u64 {
        let policy = CachePolicy::ALL[(seed % 4) as usize];
        let (rig, arr) = make("raid5", 5, true);
        let v = CacheVolume::new(arr, cfg(policy, 3, 1, U)).unwrap();
        let cap = v.array().capacity();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rig.budget.store(rng.gen_range(20..900), Ordering::SeqCst);
        let o = write_until_cut(&rig.budget, cap, &mut rng, 300, 3, |off, d| v.write(off, d).unwrap());
        drop(v);
        let arr = reopen(&rig);
        replayed += arr.info().journal_replayed.map(|r| r.records).unwrap_or(0);
        let mut got = vec![0u8; cap as usize];
        arr.read(0, &mut got).unwrap();
        check(&got, &o, &format!("{policy:?} seed {seed}"));
        let s = arr.scrub(false, &|_, _| {}).unwrap();
        assert!(s.mismatched_stripes.is_empty(), "{policy:?} seed {seed}: scrub {:?}", s.mismatched_stripes);
    }
    assert!(replayed > 0);
}

#[test]
fn a_small_journal_is_refused_for_a_big_cache() {
    let (_rig, arr) = make("raid5", 5, true);
    let e = CacheVolume::new(arr, CacheConfig::uniform(CachePolicy::PpcData, 4 << 20)).err().unwrap().to_string();
    assert!(e.contains("write-back ppc+data cache"), "{e}");
}

/// Cache sizes near 2^60 and past (given in bytes, e.g. `serve
/// --cache-size 1E`): the journal a write-back volume needs for them is
/// past 2^64 bytes.  Computing it overflowed (a panic, or a wrap to 4 MiB
/// that let a 16 MiB journal take an exabyte cache); it is refused.
#[test]
fn cached_sizes_past_an_exabyte_are_refused_not_overflowed() {
    let uniform = [1u64 << 60, u64::MAX / 2, u64::MAX].map(|b| CacheConfig::uniform(CachePolicy::Fpc, b));
    // A parity cache alone past 2^61 bytes, beside a 1 MiB write cache.
    let parity = [1u64 << 61, u64::MAX].map(|b| CacheConfig { write_cache: 1 << 20, ..CacheConfig::uniform(CachePolicy::Ppc, b) });
    for cfg in uniform.into_iter().chain(parity) {
        let (_rig, arr) = make("raid5", 5, true);
        let e = CacheVolume::new(arr, cfg).err().unwrap_or_else(|| panic!("{cfg:?} accepted")).to_string();
        assert!(e.contains("needs a journal of 8 x their sum + 4 MiB, more than 2^64 bytes"), "{cfg:?}: {e}");
        assert!(e.contains(&format!("cache of {} + {} bytes", cfg.write_cache, cfg.parity_cache)), "{e}");
    }
}

/// The in-flight write may be torn at unit granularity (a write that
/// bypasses the cache is journaled stripe by stripe, like a large
/// `Array::write`): every 4 KiB block is the acknowledged bytes or the
/// in-flight write's.
fn check_blocks(got: &[u8], o: &common::Outcome, what: &str) {
    let fly = o.inflight.as_ref();
    for (i, (g, a)) in got.chunks(4096).zip(o.acked.chunks(4096)).enumerate() {
        if g == a {
            continue;
        }
        let at = (i * 4096) as u64;
        let new = fly.filter(|(off, d)| at >= *off && at < off + d.len() as u64).map(|(off, d)| &d[(at - off) as usize..(at - off) as usize + 4096]);
        assert!(new == Some(g), "{what}: block {i} is neither acknowledged nor in-flight bytes");
    }
}

/// Power cut during a write-back run whose writes often exceed the write
/// cache (they bypass it and go to the members) over pages cached or
/// logged before: replay ends with the newest bytes of every page (no
/// older logical record rolls a bypassing write back), scrub is clean.
#[test]
fn bypassing_writes_survive_a_power_cut() {
    let (mut replayed, mut bypasses) = (0, 0);
    for seed in 0..24u64 {
        let policy = CachePolicy::ALL[(seed % 4) as usize];
        let (rig, arr) = make("raid5", 5, true);
        let v = CacheVolume::new(arr, cfg(policy, 3, 1, U)).unwrap();
        let cap = v.array().capacity();
        let mut rng = ChaCha8Rng::seed_from_u64(seed + 100);
        rig.budget.store(rng.gen_range(100..1500), Ordering::SeqCst);
        let o = write_until_cut(&rig.budget, cap, &mut rng, 300, 6, |off, d| {
            let _ = v.write(off, d);
        });
        bypasses += v.stats().bypasses;
        drop(v);
        let arr = reopen(&rig);
        replayed += arr.info().journal_replayed.map(|r| r.records).unwrap_or(0);
        let mut got = vec![0u8; cap as usize];
        arr.read(0, &mut got).unwrap();
        check_blocks(&got, &o, &format!("{policy:?} seed {seed}"));
        let s = arr.scrub(false, &|_, _| {}).unwrap();
        assert!(s.mismatched_stripes.is_empty(), "{policy:?} seed {seed}: scrub {:?}", s.mismatched_stripes);
    }
    assert!(replayed > 0 && bypasses > 24, "replayed {replayed} records, {bypasses} bypasses");
}

/// 16 KiB pages written in 4 KiB pieces on real members: the volume reads
/// exactly what the policy's counting mode plans (mosaic-core's
/// `partial_pages_are_filled_once_and_cached_pages_are_not_read`): the
/// missing part of each partly written page not cached, nothing for
/// cached pages; the bytes read back are right.
#[test]
fn partial_pages_and_cached_reads_cost_what_the_policy_plans() {
    const P: u64 = 16 << 10;
    for p in CachePolicy::ALL {
        let (_rig, arr) = make_unit("raid5", 5, true, P);
        let v = CacheVolume::new(arr, CacheConfig::uniform(p, 4 * P)).unwrap();
        let mut model = vec![0u8; 5 * P as usize];
        let mut step = |write: bool, off: u64, len: u64, expect: (u64, u64)| {
            v.array().reset_counters();
            if write {
                let d = vec![(off / 4096) as u8 + 1; len as usize];
                v.write(off, &d).unwrap();
                model[off as usize..(off + len) as usize].copy_from_slice(&d);
            } else {
                let mut b = vec![0u8; len as usize];
                v.read(off, &mut b).unwrap();
                assert!(b[..] == model[off as usize..(off + len) as usize], "{p:?}: read {off}+{len}");
            }
            let (ops, _) = v.array().counters();
            assert_eq!((ops.data_reads, ops.data_read_bytes, ops.code_reads, ops.device_writes()), (expect.0, expect.1, 0, 0), "{p:?}: {write} {off}+{len}");
        };
        step(true, 4096, 4096, (1, P));
        step(true, 12 << 10, 8192, (1, 12 << 10));
        step(false, 0, 2 * P, (0, 0));
        step(false, 0, 3 * P, (1, P));
        step(true, 60 << 10, 8192, (2, 24 << 10));
        step(false, 0, 5 * P, (1, P));
        v.close().unwrap();
    }
}

/// ppc+data's parity evictions by method 2 (read the uncovered pages), by
/// method 1 from the clean values of the covered pages (old parity read),
/// method 2 with clean uncovered pages (nothing read) and method 1 of a
/// kept change (old value read before the write-through, old parity at
/// eviction), on real members: the bytes read back and the members after
/// close are the reference, scrub is clean after every round, and the
/// members saw the reads mosaic-core's tests of the methods count.
#[test]
fn method_1_and_clean_pages_write_correct_parity() {
    let (rig, arr) = make("raid5", 5, true);
    let c = CacheConfig { policy: CachePolicy::PpcData, write_cache: 4 * U, parity_cache: U, old_data: 4 * U };
    let v = CacheVolume::new(arr, c).unwrap();
    let cap = v.array().capacity();
    let mut model = vec![0u8; cap as usize];
    // Pages 0-1 twice (method 2: 2 reads, then method 1: 1 read), the
    // whole row (nothing read), page 1 (method 2 from clean pages: nothing
    // read), stripe 1's page 0 (its change: 2 reads).
    let rounds: [(u64, u64, u8); 5] = [(0, 2 * U, 7), (0, 2 * U, 9), (0, 4 * U, 11), (U, U, 13), (4 * U, U, 15)];
    let mut reads = Vec::new();
    for (off, len, fill) in rounds {
        let data: Vec<u8> = (0..len).map(|i| fill ^ (i % 251) as u8).collect();
        let before = v.array().counters().0.device_reads();
        v.write(off, &data).unwrap();
        v.sync().unwrap();
        reads.push(v.array().counters().0.device_reads() - before);
        model[off as usize..(off + len) as usize].copy_from_slice(&data);
        assert!(read_all(&v) == model, "read back after writing {off}+{len}");
        // Destaged: the code on the members matches their data.
        let s = v.array().scrub(false, &|_, _| {}).unwrap();
        assert!(s.mismatched_stripes.is_empty(), "scrub after writing {off}+{len}: {:?}", s.mismatched_stripes);
    }
    assert_eq!(reads, [2, 1, 0, 0, 2]);
    v.close().unwrap();
    drop(v);
    let arr = reopen(&rig);
    let mut b = vec![0u8; cap as usize];
    arr.read(0, &mut b).unwrap();
    assert!(b == model, "members after close");
    let s = arr.scrub(false, &|_, _| {}).unwrap();
    assert!(s.mismatched_stripes.is_empty(), "scrub {:?}", s.mismatched_stripes);
}

/// Reopen with member `missing` gone (it died with the crash).
fn reopen_without(r: &Rig, missing: usize) -> Array {
    let ms: Vec<Arc<dyn Member>> = r.mems.iter().enumerate().filter(|(i, _)| *i != missing).map(|(_, m)| m.clone() as Arc<dyn Member>).collect();
    Array::open_members_with_journal(ms, true, r.journal.clone().map(|j| j as Arc<dyn Member>)).unwrap()
}

/// A crash with the caches full (a power cut, then the volume dropped:
/// nothing destaged or flushed after the last acknowledged write), or a
/// volume dropped without a close, then a reopen, with every member or
/// with one lost in the crash.  The destages logged the cached pages as
/// copies of their logical records (the journal holds fewer bytes than
/// with the pages in it), so replay resolves the copies into the device
/// writes that close the write hole.  Every acknowledged byte reads back,
/// except where a lost member held data of a row whose code a cache
/// (fpc, ppc, ppc+data) held: the code in memory died with the crash, so
/// those units cannot be rebuilt.  Replay names them, the superblock keeps
/// them across opens, reads of them fail (never wrong bytes), and writing
/// them again clears them.
#[test]
fn cached_writes_survive_a_crash_with_and_without_a_lost_member() {
    let mut named = 0;
    for (i, policy) in CachePolicy::ALL.into_iter().enumerate() {
        for seed in 0..40u64 {
            let (rig, arr) = make("raid5", 5, true);
            let v = CacheVolume::new(arr, cfg(policy, 3, 1, U)).unwrap();
            let cap = v.array().capacity();
            let mut model = vec![0u8; cap as usize];
            let mut rng = ChaCha8Rng::seed_from_u64(seed + 40 * i as u64);
            for _ in 0..200 {
                let len = rng.gen_range(1..=2u64) * U;
                let off = rng.gen_range(0..=(cap - len) / U) * U;
                let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                v.write(off, &data).unwrap();
                model[off as usize..(off + len) as usize].copy_from_slice(&data);
            }
            let j = v.array().journal().unwrap();
            assert!(j.used() < j.used_expanded(), "{policy:?} seed {seed}: destages logged copies");
            // The crash: the power goes (nothing the drop writes lands),
            // or, every third run, the volume is just dropped unclosed
            // (which destages like a close).
            if seed % 3 != 0 {
                rig.budget.store(i64::MIN / 2, Ordering::SeqCst);
            }
            drop(v);
            let lost = (seed % 2 == 1).then(|| rng.gen_range(0..5usize));
            let open = || match lost {
                Some(m) => reopen_without(&rig, m),
                None => reopen(&rig),
            };
            let arr = open();
            let what = format!("{policy:?} seed {seed}, member {lost:?} lost");
            let rep = arr.info().journal_replayed.expect("a journal was replayed");
            assert!((rep.records > 0) == (seed % 3 != 0), "{what}: {rep:?}");
            assert_eq!(rep.warning().is_some(), !rep.lost.is_empty(), "{what}: {rep:?}");
            assert!(rep.warning().map_or(true, |w| w.contains("are lost: reads of them fail") && arr.open_warnings().contains(&w)), "{what}: {rep:?}");
            for u in &rep.lost {
                assert_eq!(Some(u.member), lost, "{what}: {u:?}");
                assert_ne!(policy, CachePolicy::None, "{what}: no cache holds code: {rep:?}");
            }
            named += rep.lost.len();
            let ranges: Vec<(u64, u64)> = rep.lost.iter().map(|u| (u.offset, u.offset + u.len)).collect();
            assert_eq!(arr.lost().iter().map(|r| (r.offset, r.end())).collect::<Vec<_>>(), merged(&ranges), "{what}");
            check_around_lost(&arr, &model, &ranges, &what);
            if lost.is_none() {
                let s = arr.scrub(false, &|_, _| {}).unwrap();
                assert!(s.mismatched_stripes.is_empty(), "{what}: scrub {:?}", s.mismatched_stripes);
            }
            if ranges.is_empty() {
                continue;
            }
            // The superblock keeps them across opens; writing them whole
            // again clears them, for good.
            drop(arr);
            let arr = open();
            check_around_lost(&arr, &model, &ranges, &what);
            for &(lo, hi) in &ranges {
                arr.write(lo, &model[lo as usize..hi as usize]).unwrap();
            }
            assert!(arr.lost().is_empty(), "{what}: {:?}", arr.lost());
            drop(arr);
            let arr = open();
            assert!(arr.lost().is_empty() && arr.info().lost.is_empty(), "{what}");
            check_around_lost(&arr, &model, &[], &what);
        }
    }
    // Not vacuous: over these seeds, crashes with a member lost do leave
    // units no code can rebuild (reading them, before this was named,
    // gave wrong bytes in 7 of 240 runs).
    assert!(named > 0);
}

/// Sorted, touching ranges merged.
fn merged(r: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut v = r.to_vec();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(l) if a <= l.1 => l.1 = l.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Every unit outside `lost` reads back as `model`; a read touching a
/// lost range fails.
fn check_around_lost(arr: &Array, model: &[u8], lost: &[(u64, u64)], what: &str) {
    let mut b = vec![0u8; U as usize];
    for at in (0..model.len() as u64).step_by(U as usize) {
        let hit = lost.iter().any(|&(lo, hi)| lo < at + U && hi > at);
        match arr.read(at, &mut b) {
            Err(e) => assert!(hit && e.to_string().contains("were lost: a member failed while a cache held their code"), "{what}: read at {at}: {e}"),
            Ok(()) => {
                assert!(!hit, "{what}: a lost unit at {at} read without an error");
                assert!(b == model[at as usize..(at + U) as usize], "{what}: bytes at {at} differ");
            }
        }
    }
}

/// A raid5 4+1 cache volume of `policy` on members that fail on command,
/// with a journal (write-back) or without (write-through): the members
/// themselves, their fault switches, the journal, the volume.
#[allow(clippy::type_complexity)]
fn faulty_volume(policy: CachePolicy, journal: bool) -> (Vec<Arc<MemMember>>, Vec<Arc<mosaic_dev::FaultyMember>>, Option<Arc<MemMember>>, CacheVolume) {
    use mosaic_dev::FaultyMember;
    let n = 5;
    let size = DATA_OFFSET + U * STRIPES;
    let mems: Vec<Arc<MemMember>> = (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), size))).collect();
    let faulty: Vec<Arc<FaultyMember>> = mems.iter().map(|m| Arc::new(FaultyMember::new(m.clone() as Arc<dyn Member>))).collect();
    let o = CreateOptions { level: Level::Raid5, members: Some(n), member_size: None, unit: U, block: 4096, force: true, assume_clean: true };
    let jdev = journal.then(|| Arc::new(MemMember::new("journal", 16 << 20)));
    let members = faulty.iter().enumerate().map(|(i, f)| (f.clone() as Arc<dyn Member>, format!("m{i}"))).collect();
    let arr = Array::create_with_journal(members, &o, true, jdev.as_ref().map(|j| (j.clone() as Arc<dyn Member>, "journal".to_string()))).unwrap();
    let v = CacheVolume::new(arr, cfg(policy, 3, 1, U)).unwrap();
    (mems, faulty, jdev, v)
}

/// An unplanned member failure while the cache volume destages (the
/// member starts failing at a random operation): the destage it breaks
/// was planned against the old health, and its pages are already out of
/// the cache.  The volume stops: every request after fails, naming the
/// way back, and no read returns old bytes of an acknowledged write.
/// Opened again, the array replays the journal without the failed member
/// (its superblock is behind): every acknowledged write reads back, the
/// write that failed reads all old or all new bytes page by page, and
/// only pages in rows whose code a parity cache held on the failed
/// member fail to read, as lost (as after a crash that takes a member).
/// Without the stop, 102 of these 160 runs read old bytes back.
#[test]
fn an_unplanned_failure_mid_destage_stops_the_volume_and_loses_nothing() {
    let (mut stops, mut lost) = (0, 0);
    for policy in CachePolicy::ALL {
        for seed in 0..40u64 {
            let what = format!("{policy:?} seed {seed}");
            let n = 5;
            let (mems, faulty, jdev, v) = faulty_volume(policy, true);
            let jdev = jdev.unwrap();
            let cap = v.array().capacity();
            let mut model = vec![0u8; cap as usize];
            // The write that failed: its offset, old and new bytes.
            let mut failed: Option<(u64, Vec<u8>, Vec<u8>)> = None;
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let victim = rng.gen_range(0..n);
            for i in 0..120 {
                let len = rng.gen_range(1..=2u64) * U;
                let off = rng.gen_range(0..(cap - len) / U) * U;
                let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                if i == 60 {
                    faulty[victim].break_after(rng.gen_range(0..3));
                }
                match v.write(off, &data) {
                    Ok(()) => model[off as usize..(off + len) as usize].copy_from_slice(&data),
                    Err(e) => {
                        assert!(v.stopped().is_some(), "{what}: a write failed without stopping the volume: {e}");
                        failed = Some((off, model[off as usize..(off + len) as usize].to_vec(), data));
                        break;
                    }
                }
            }
            if v.stopped().is_some() {
                stops += 1;
                let e = v.read(0, &mut [0u8; 4096]).unwrap_err().to_string();
                assert!(e.contains("the cache volume has stopped") && e.contains("open it again"), "{what}: {e}");
                assert!(v.write(0, &[1u8; 4096]).is_err() && v.flush().is_err() && v.sync().is_err() && v.close().is_err(), "{what}");
            } else {
                let mut b = vec![0u8; cap as usize];
                v.read(0, &mut b).unwrap();
                assert!(b == model, "{what}: read back with the member failed");
            }
            drop(v);
            // Open again from the members themselves: the failed one is
            // behind, so it is left out.
            let ms: Vec<Arc<dyn Member>> = mems.iter().map(|m| m.clone() as Arc<dyn Member>).collect();
            let arr = Array::open_members_with_journal(ms, true, Some(jdev as Arc<dyn Member>)).unwrap();
            for p in 0..cap / U {
                let at = (p * U) as usize..((p + 1) * U) as usize;
                let mut b = vec![0u8; U as usize];
                match arr.read(p * U, &mut b) {
                    Ok(()) => {
                        let either = failed.as_ref().is_some_and(|(off, old, new)| {
                            let Some(r) = (p * U).checked_sub(*off).map(|d| d as usize..(d + U) as usize).filter(|r| r.end <= new.len()) else { return false };
                            b == old[r.clone()] || b == new[r]
                        });
                        assert!(b == model[at] || either, "{what}: page {p} after reopening");
                    }
                    Err(e) => {
                        // The code a parity cache held died with the
                        // volume: a row of the failed member's it marked
                        // is lost, and says so.
                        assert!(policy != CachePolicy::None && e.to_string().contains("were lost: a member failed while a cache held their code"), "{what}: page {p}: {e}");
                        lost += 1;
                    }
                }
            }
        }
    }
    // Each run's failure breaks a destage (160 stops); a few pages of the
    // 15,360 read back after reopening are lost (97 when written).
    assert!(stops >= 150, "the failure stopped only {stops} runs");
    assert!(lost < 300, "{lost} pages lost");
}

/// Without a journal the stop cannot promise what replay gives: its error
/// says that rows the destage was writing may keep stale code (the write
/// hole) and that the way back is to reopen and scrub.
#[test]
fn a_stopped_write_through_volume_names_the_write_hole() {
    let (_mems, faulty, _, v) = faulty_volume(CachePolicy::Fpc, false);
    assert!(!v.is_write_back());
    v.write(0, &[1u8; 4096]).unwrap();
    faulty[2].break_after(0);
    let e = (0..64u64).find_map(|i| v.write(i * 3 * U, &[i as u8; 4096]).err()).expect("a destage hit the failed member");
    assert!(v.stopped().is_some(), "{e}");
    let e = v.read(0, &mut [0u8; 4096]).unwrap_err().to_string();
    assert!(e.contains("the cache volume has stopped") && e.contains("without a journal") && e.contains("write hole") && e.contains("scrub it"), "{e}");
}
