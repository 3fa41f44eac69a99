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
/// * ppc: page 0 starts the partial parity (0 reads), page 1 merges (0
///   reads), page 0 again must read its old value (1); the parity flush
///   reads the 2 uncovered pages: 3 reads, 4 writes.
/// * ppc+data: as ppc, but page 0's old value is in the old-data buffer:
///   2 reads, 4 writes.
#[test]
fn rewrite_through_a_one_page_cache() {
    let expect = [
        (CachePolicy::None, 6, 6, 3),
        (CachePolicy::Fpc, 4, 4, 1),
        (CachePolicy::Ppc, 3, 4, 1),
        (CachePolicy::PpcData, 2, 4, 1),
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
