//! The allocator additions the tier policy needs: a run growing in place
//! (`extend`) and recovery's `adopt`.

use mosaic_tier::rehypar::{AllocRequest, FastTierAllocator, FixedExtent, ReHypar, SectionConfig, TierConfig};

const KIB: u64 = 1024;

/// 16-block extents (4 of them), V = 4, 64 KiB erase blocks.
fn cfg() -> TierConfig {
    TierConfig {
        block_bytes: 4 * KIB,
        erase_block_bytes: 64 * KIB,
        sections: vec![SectionConfig { extent_bytes: 64 * KIB, capacity_bytes: 256 * KIB }],
        threshold_v: 4,
        expiry_ns: 1_000_000_000_000,
    }
}

fn req(lba: u64, blocks: u64) -> AllocRequest {
    AllocRequest { lba, blocks }
}

fn check_accounting(a: &dyn FastTierAllocator) {
    let s = a.stats();
    assert_eq!(s.allocated, s.live + s.dead + s.skipped + s.open_tail, "{s:?}");
}

#[test]
fn a_run_grows_right_after_its_last_block() {
    for mut a in [Box::new(ReHypar::new(&cfg()).unwrap()) as Box<dyn FastTierAllocator>, Box::new(FixedExtent::new(&cfg()).unwrap())] {
        let p = a.allocate(req(0, 2), 0).unwrap().pieces[0];
        assert_eq!((p.fast_block, p.blocks), (0, 2));
        let e = a.extend(1, req(2, 3), 1).unwrap().unwrap();
        assert_eq!((e.fast_block, e.offset, e.blocks), (2, 2, 3));
        assert_eq!(a.stats().live, 5);
        check_accounting(&*a);
        // Not after the highest written block, past the extent's end, or
        // in a clean extent: no.
        assert!(a.extend(0, req(9, 1), 2).unwrap().is_none());
        assert!(a.extend(4, req(5, 12), 2).unwrap().is_none());
        assert!(a.extend(40, req(5, 1), 2).unwrap().is_none());
        assert_eq!(a.stats().live, 5, "a refused extend changes nothing");
        // Up to the extent's last block.
        assert!(a.extend(4, req(5, 11), 3).unwrap().is_some());
        assert_eq!(a.stats().live, 16);
        check_accounting(&*a);
        a.free(0, 16).unwrap();
        assert_eq!(a.stats().allocated, 0, "the emptied extent is clean again");
    }
}

#[test]
fn rehypar_growing_into_the_listed_tail_maps_again() {
    let mut a = ReHypar::new(&cfg()).unwrap();
    a.allocate(req(0, 1), 0).unwrap();
    // MAP after block 0 (V = 4): the free tail starts at chunk c0_1.
    let heads: Vec<_> = a.lists(0).into_iter().flat_map(|(_, es)| es).collect();
    assert_eq!(heads, vec![0]);
    // Grow to 6 blocks: the tail moved; the extent is listed (or sealed)
    // after its new last block, and a new run reusing it goes after it.
    a.extend(0, req(1, 5), 1).unwrap().unwrap();
    check_accounting(&a);
    let p = a.allocate(req(100, 2), 2).unwrap().pieces[0];
    assert_eq!(p.extent, 0, "the tail is reused");
    assert!(p.offset >= 6, "after the grown run: {p:?}");
    check_accounting(&a);
}

#[test]
fn adopt_seals_extents_and_refuses_a_block_twice() {
    let mut a = ReHypar::new(&cfg()).unwrap();
    a.adopt(3).unwrap();
    a.adopt(5).unwrap();
    a.adopt(20).unwrap();
    assert!(a.adopt(5).is_err());
    assert!(a.adopt(1000).is_err());
    let s = a.stats();
    assert_eq!((s.allocated, s.live, s.open_tail), (32, 3, 0));
    check_accounting(&a);
    // A new run never lands in an adopted extent's middle; growing after
    // its highest live block does.
    let p = a.allocate(req(0, 4), 0).unwrap().pieces[0];
    assert!(p.extent >= 2, "{p:?}");
    assert_eq!(a.extend(5, req(9, 2), 0).unwrap().unwrap().fast_block, 6);
    a.free(3, 1).unwrap();
    a.free(5, 3).unwrap();
    assert_eq!(a.stats().allocated, 32, "extent 1 still holds block 20");
    a.free(20, 1).unwrap();
    assert_eq!(a.stats().allocated, 16);
}
