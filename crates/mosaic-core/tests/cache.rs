//! Hand-computed device-operation counts of the small-write caches.

use mosaic_core::{CacheConfig, CachePolicy, CachedArray, FixedLayout, Frontend, Geometry, Health, Level, OpCounts};

const U: u64 = 4096;

fn layout() -> FixedLayout {
    FixedLayout::new(Geometry::new(Level::Raid5, 5, U, 4096, 1 << 20).unwrap()).unwrap()
}

/// Writes the 4 KiB pages `cols` of stripe 0 in order, then flushes the
/// caches; returns (foreground ops of the writes, flush ops).
fn run(policy: CachePolicy, wc_pages: u64, cols: &[u64]) -> (OpCounts, OpCounts) {
    let l = layout();
    let cfg = CacheConfig { policy, write_cache: wc_pages * U, parity_cache: U, old_data: 4 * U };
    let mut c = CachedArray::new(&l, cfg).unwrap();
    let h = Health::all_active(5);
    let mut fg = OpCounts::default();
    for &col in cols {
        let st = c.submit(true, col * U, U, 0, &h).unwrap();
        assert!(st.bg.is_empty());
        for p in &st.fg {
            fg.merge(&p.counts());
        }
    }
    let flush = c.flush_all(&h).unwrap().counts();
    let s = c.cache_stats();
    let mut all = fg;
    all.merge(&flush);
    assert_eq!(s.parity_reads, all.device_reads(), "{policy:?}: stats count every read");
    assert_eq!(s.parity_writes, all.code_writes, "{policy:?}");
    assert_eq!(s.data_writes, all.data_writes, "{policy:?}");
    (fg, flush)
}

fn rw(c: &OpCounts) -> (u64, u64) {
    (c.device_reads(), c.device_writes())
}

/// Three writes to one stripe of 4+1 that all fit the write cache cost
/// nothing until the flush; the flush writes 3 data + 1 code units and
/// reads the one unwritten unit (RCW for none/fpc, uncovered page for ppc).
#[test]
fn three_writes_fitting_the_cache() {
    for p in CachePolicy::ALL {
        let (fg, flush) = run(p, 4, &[0, 1, 2]);
        assert_eq!(rw(&fg), (0, 0), "{p:?}");
        assert_eq!(rw(&flush), (1, 4), "{p:?}");
        assert_eq!(flush.data_writes, 3);
        assert_eq!(flush.code_writes, 1);
    }
}

/// A one-page write cache, writes to pages 0, 1, 0 of stripe 0, flush.
///
/// * none: every destage is an RMW (2 reads: old data + old parity; 2
///   writes): 3 destages = 6 reads, 6 writes.
/// * fpc: first destage RMW (2 reads), keeps parity; the next two read only
///   old data (1 each); the flush writes the parity once: 4 reads, 3 data
///   + 1 code writes.
/// * ppc: page 0 alone starts an entry of its change (1 read: its old
///   value; with the old parity at eviction, 2 reads beat the 3 uncovered
///   pages), page 1 joins it (1 read), page 0 again (1 read), the eviction
///   reads the old parity (1): 4 reads, 4 writes.
/// * ppc+data: as ppc, but page 0's latest value is in the entry's data
///   buffer: 3 reads, 4 writes.
#[test]
fn rewrite_through_a_one_page_cache() {
    let expect = [
        (CachePolicy::None, 6, 6, 3),
        (CachePolicy::Fpc, 4, 4, 1),
        (CachePolicy::Ppc, 4, 4, 1),
        (CachePolicy::PpcData, 3, 4, 1),
    ];
    for (p, reads, writes, code_writes) in expect {
        let (fg, flush) = run(p, 1, &[0, 1, 0]);
        let mut all = fg;
        all.merge(&flush);
        assert_eq!(rw(&all), (reads, writes), "{p:?}");
        assert_eq!(all.code_writes, code_writes, "{p:?}");
        // The first write only fills the cache; the next two each destage.
        assert!(fg.device_writes() >= 2, "{p:?}");
    }
}

/// A full row needs no read under any policy.
#[test]
fn full_stripe_needs_no_read() {
    for p in CachePolicy::ALL {
        let (fg, flush) = run(p, 4, &[0, 1, 2, 3]);
        assert_eq!(fg.device_reads() + flush.device_reads(), 0, "{p:?}");
        assert_eq!(flush.data_writes, 4, "{p:?}");
        assert_eq!(flush.code_writes, 1, "{p:?}");
    }
}

#[test]
fn bad_configs_are_clear_errors() {
    let l = layout();
    let e = CachedArray::new(&l, CacheConfig::uniform(CachePolicy::Ppc, 1024)).err().unwrap();
    assert!(e.to_string().contains("holds no 4096-byte page"), "{e}");
    let r0 = FixedLayout::new(Geometry::new(Level::Raid0, 4, U, 4096, 1 << 20).unwrap()).unwrap();
    let e = CachedArray::new(&r0, CacheConfig::uniform(CachePolicy::Fpc, 1 << 20)).err().unwrap();
    assert!(e.to_string().contains("needs a parity layout"), "{e}");
    assert!(CachePolicy::parse("lru").unwrap_err().to_string().contains("expected none, fpc, ppc or ppc+data"));
}

/// Foreground counts of one request on `c` (no background work).
fn submit(c: &mut CachedArray, write: bool, off: u64, len: u64, h: &Health) -> OpCounts {
    let st = c.submit(write, off, len, 0, h).unwrap();
    assert!(st.bg.is_empty());
    let mut n = OpCounts::default();
    st.fg.iter().for_each(|p| n.merge(&p.counts()));
    n
}

/// (data reads, data read bytes, device writes) of some counts.
fn reads_of(c: &OpCounts) -> (u64, u64, u64) {
    (c.data_reads, c.data_read_bytes, c.device_writes())
}

/// 16 KiB pages written in 4 KiB pieces: the policy widens each write to
/// whole pages, reading only the missing part of a partly written page
/// the cache does not hold (one read each, in the foreground, as the real
/// array does); reads take only the pages not cached from the drives.
#[test]
fn partial_pages_are_filled_once_and_cached_pages_are_not_read() {
    const P: u64 = 16 << 10;
    let l = FixedLayout::new(Geometry::new(Level::Raid5, 5, P, 4096, 1 << 20).unwrap()).unwrap();
    for p in CachePolicy::ALL {
        let mut c = CachedArray::new(&l, CacheConfig::uniform(p, 4 * P)).unwrap();
        let h = Health::all_active(5);
        // The middle of page 0: the page is read whole (one op).
        assert_eq!(reads_of(&submit(&mut c, true, 4096, 4096, &h)), (1, P, 0), "{p:?}");
        // Page 0 (cached) and the head of page 1: only page 1's rest.
        assert_eq!(reads_of(&submit(&mut c, true, 12 << 10, 8192, &h)), (1, 12 << 10, 0), "{p:?}");
        // Pages 0 and 1 are in the cache: a hit, no device op.
        assert_eq!(submit(&mut c, false, 0, 2 * P, &h), OpCounts::default(), "{p:?}");
        // Pages 0..3: only page 2 from the drive.
        let r = submit(&mut c, false, 0, 3 * P, &h);
        assert_eq!((r.data_reads, r.data_read_bytes), (1, P), "{p:?}");
        // The tail of page 3 and the head of page 4 (stripe 1): two fills.
        assert_eq!(reads_of(&submit(&mut c, true, 60 << 10, 8192, &h)), (2, 24 << 10, 0), "{p:?}");
        let s = c.cache_stats();
        assert_eq!((s.fills, s.read_hits, s.parity_reads, s.victims), (4, 1, 0, 0), "{p:?}");
    }
}

/// The caches do no idle-time work: a real volume never destages while
/// idle (`mosaic replay --on`, `mosaic serve`), so the simulator must not
/// either, or replays would differ with idle gaps.  Idle destage would be
/// a policy decision here, run by both executors.
#[test]
fn caches_have_no_idle_work() {
    let l = layout();
    let h = Health::all_active(5);
    for p in CachePolicy::ALL {
        let mut c = CachedArray::new(&l, CacheConfig::uniform(p, 4 * U)).unwrap();
        submit(&mut c, true, 0, U, &h);
        assert_eq!(c.idle_after_ns(), None, "{p:?}");
        assert!(c.idle(1 << 40, &h).unwrap().is_empty(), "{p:?}");
    }
}

/// A full row destaged over its cached partial parity reads nothing: the
/// row's partial parity is its full parity (the paper), so nothing cached
/// is merged and no page's old value is read.  4-page write cache: pages
/// 0-2 of stripe 0 and page 0 of stripe 1; page 1 of stripe 1 evicts
/// stripe 0's row (its partial parity covers pages 0-2, nothing read);
/// stripe 0 whole evicts stripe 1's row (a partial parity of 2 pages);
/// the flush destages stripe 0's full row (nothing read) and writes
/// stripe 1's parity, reading its 2 uncovered pages.
/// (ppc; ppc+data prefers rows with a cached parity as victims, so its
/// sequence differs.)
#[test]
fn a_full_row_over_its_partial_parity_reads_nothing() {
    for policy in [CachePolicy::Ppc] {
        let l = layout();
        let cfg = CacheConfig { policy, write_cache: 4 * U, parity_cache: 4 * U, old_data: 4 * U };
        let mut c = CachedArray::new(&l, cfg).unwrap();
        let h = Health::all_active(5);
        let s1 = 4 * U;
        let mut all = OpCounts::default();
        for (off, len) in [(0, 3 * U), (s1, U), (s1 + U, U), (0, 4 * U)] {
            for p in &c.submit(true, off, len, 0, &h).unwrap().fg {
                all.merge(&p.counts());
            }
        }
        all.merge(&c.flush_all(&h).unwrap().counts());
        assert_eq!(all.device_reads(), 2, "{policy:?}: only stripe 1's uncovered pages are read");
        assert_eq!((all.data_writes, all.code_writes), (9, 2), "{policy:?}: 9 pages, one parity per stripe");
        assert_eq!(c.cache_stats().merges, 0, "{policy:?}: a full row merges nothing");
    }
}

/// A 4+1 cache of `policy` with a 4-page write cache, one parity entry
/// and 4 clean pages; each element of `rounds` writes those 4 KiB pages of
/// stripe 0, then destages everything (`flush_all`).  Returns the reads
/// of each round and the final stats.
fn rounds(policy: CachePolicy, rounds: &[&[u64]]) -> (Vec<u64>, mosaic_core::CacheStats) {
    let l = layout();
    let cfg = CacheConfig { policy, write_cache: 4 * U, parity_cache: U, old_data: 4 * U };
    let mut c = CachedArray::new(&l, cfg).unwrap();
    let h = Health::all_active(5);
    let mut reads = Vec::new();
    for cols in rounds {
        let mut n = OpCounts::default();
        for &col in cols.iter() {
            n.merge(&submit(&mut c, true, col * U, U, &h));
        }
        n.merge(&c.flush_all(&h).unwrap().counts());
        assert_eq!(n.data_writes, cols.len() as u64, "{policy:?}: every page written once");
        assert_eq!(n.code_writes, 1, "{policy:?}: one parity write per round");
        reads.push(n.device_reads());
    }
    (reads, c.cache_stats())
}

/// Method 1 vs method 2 (the paper's Sect. IV-E), each where it reads
/// less, by ppc: one page destaged alone keeps its change (its old value
/// read before the write-through) and the eviction adds the old parity:
/// 2 reads, not the 3 uncovered pages; two pages keep their partial
/// parity (nothing read) and the eviction reads the 2 uncovered pages,
/// not 2 old values + the old parity.
#[test]
fn each_method_where_it_reads_less() {
    let (reads, s) = rounds(CachePolicy::Ppc, &[&[0]]);
    assert_eq!(reads, [2]);
    assert_eq!((s.method1, s.method2), (1, 0));
    let (reads, s) = rounds(CachePolicy::Ppc, &[&[0, 1]]);
    assert_eq!(reads, [2]);
    assert_eq!((s.method1, s.method2), (0, 1));
}

/// Method 1 from the data buffer: pages 0-1 destaged, their partial
/// parity written by method 2 (read pages 2-3), pages 0-1 again: ppc+data
/// kept their flushed values (they match the code on the drives), so the
/// second eviction reads only the old parity (1 read) instead of pages
/// 2-3 (2); ppc, with no data buffer, reads pages 2-3 again.
#[test]
fn method_1_reads_the_old_parity_when_the_covered_pages_are_clean() {
    let (reads, s) = rounds(CachePolicy::PpcData, &[&[0, 1], &[0, 1]]);
    assert_eq!(reads, [2, 1]);
    assert_eq!((s.method1, s.method2), (1, 1));
    let (reads, s) = rounds(CachePolicy::Ppc, &[&[0, 1], &[0, 1]]);
    assert_eq!(reads, [2, 2]);
    assert_eq!((s.method1, s.method2), (0, 2));
}

/// Method 2 with clean pages: a full row destaged (nothing read; all four
/// pages clean after its parity is written), then page 0 rewritten: its
/// partial parity plus the clean pages 1-3 make the code, nothing read
/// (method 1 would read the old parity).  ppc keeps page 0's change and
/// reads its old value and the old parity.
#[test]
fn method_2_takes_clean_uncovered_pages_without_reading() {
    let (reads, s) = rounds(CachePolicy::PpcData, &[&[0, 1, 2, 3], &[0]]);
    assert_eq!(reads, [0, 0]);
    assert_eq!((s.method1, s.method2, s.clean_hits), (0, 1, 3));
    let (reads, _) = rounds(CachePolicy::Ppc, &[&[0, 1, 2, 3], &[0]]);
    assert_eq!(reads, [0, 2]);
}

/// The per-entry data buffer (the paper's Fig. 3 and 16b): a two-page
/// write cache, two parity entries; pages 0-1 of stripes 0, 1, 0, 1, 0
/// (two pages a request).  Stripes 0 and 1 start partial parities (nothing
/// read), then each is updated once with both pages rewritten: ppc+data
/// reads nothing from the members for the updates (the covered pages'
/// latest values are in the entry's buffer); ppc reads two pages for each.
#[test]
fn partial_parity_updates_read_nothing_with_the_data_buffer() {
    let l = layout();
    let h = Health::all_active(5);
    for (policy, update_reads) in [(CachePolicy::PpcData, 0), (CachePolicy::Ppc, 4)] {
        let cfg = CacheConfig { policy, write_cache: 2 * U, parity_cache: 2 * U, old_data: U };
        let mut c = CachedArray::new(&l, cfg).unwrap();
        let mut fg = OpCounts::default();
        for s in [0u64, 1, 0, 1, 0] {
            fg.merge(&submit(&mut c, true, s * 4 * U, 2 * U, &h));
        }
        assert_eq!(fg.device_reads(), update_reads, "{policy:?}: reads of the partial-parity updates");
        assert_eq!((fg.data_writes, fg.code_writes), (8, 0), "{policy:?}");
        let s = c.cache_stats();
        assert_eq!(s.merges, 2, "{policy:?}");
        if policy == CachePolicy::PpcData {
            assert_eq!(s.old_data_hits, 4, "the rewrites of covered pages");
        }
    }
}

/// ppc folding three rewritten covered pages into a partial parity would
/// read their three old values; reading the row's fourth page instead
/// recomputes the code of the whole row (1 read) and the entry then
/// covers it all, so its eviction reads nothing.  4-page write cache, two
/// parity entries: stripe 0 pages 0-2 start an entry (evicted by stripe
/// 1's pages 0-1, which start another when stripe 0's rewrite of pages 0-2
/// needs room), flush: 1 read for stripe 0, 2 for stripe 1's uncovered
/// pages (3 + 1 + 2 = 6 when folding page by page).
#[test]
fn ppc_recomputes_a_row_when_reading_the_rest_is_cheaper() {
    let l = layout();
    let h = Health::all_active(5);
    let cfg = CacheConfig { policy: CachePolicy::Ppc, write_cache: 4 * U, parity_cache: 2 * U, old_data: U };
    let mut c = CachedArray::new(&l, cfg).unwrap();
    let mut all = OpCounts::default();
    for (off, len) in [(0, 3 * U), (4 * U, 2 * U), (0, 3 * U)] {
        all.merge(&submit(&mut c, true, off, len, &h));
    }
    all.merge(&c.flush_all(&h).unwrap().counts());
    assert_eq!(all.device_reads(), 3);
    assert_eq!((all.data_writes, all.code_writes), (8, 2));
    assert_eq!(c.cache_stats().merges, 1);
}

/// ppc+data's victim rule: among rows with as many pages, one whose
/// partial parity is cached is destaged first (it merges instead of taking
/// a new entry), unless it is hot, written within the last quarter write
/// cache's worth of writes (here 2 of 8 pages).  Stripe 0 gets an entry,
/// is written again; the next write takes the LRU row (stripe 0 is hot),
/// the one after takes stripe 0 (cold by then) and merges.
#[test]
fn the_victim_rule_skips_hot_rows() {
    let l = layout();
    let h = Health::all_active(5);
    let cfg = CacheConfig { policy: CachePolicy::PpcData, write_cache: 8 * U, parity_cache: 8 * U, old_data: U };
    let mut c = CachedArray::new(&l, cfg).unwrap();
    let row = |s: u64| s * 4 * U;
    for s in 0..=8 {
        submit(&mut c, true, row(s), U, &h);
    }
    // Stripe 0 was the LRU victim: its entry exists; now its page 1.
    submit(&mut c, true, row(0) + U, U, &h);
    assert_eq!(c.cache_stats().merges, 0);
    submit(&mut c, true, row(9), U, &h);
    assert_eq!(c.cache_stats().merges, 0, "stripe 0 is hot: the LRU row goes");
    submit(&mut c, true, row(10), U, &h);
    assert_eq!(c.cache_stats().merges, 1, "stripe 0 is cold now: it goes and merges");
    assert_eq!(c.cache_stats().victims, 4);
}

#[test]
fn column_sets_list_their_columns_in_order_across_words() {
    let mut s = mosaic_core::cache::ColSet::default();
    let cols = [0usize, 1, 63, 64, 127, 128, 200, 255];
    for &c in cols.iter().rev() {
        assert!(s.insert(c));
    }
    assert!(!s.insert(64));
    assert_eq!(s.iter().collect::<Vec<_>>(), cols);
    assert_eq!(s.len(), cols.len());
    assert_eq!(mosaic_core::cache::ColSet::default().iter().count(), 0);
}
