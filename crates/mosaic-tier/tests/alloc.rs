//! ReHypar and the fixed-extent baseline on hand-built cases.

use mosaic_tier::rehypar::{
    AllocRequest, FastTierAllocator, FixedExtent, ReHypar, SectionConfig, TierConfig, TierError,
};

const KIB: u64 = 1024;

/// 4 KiB blocks, 64 KiB erase blocks; sections of 16-block (4 extents,
/// fast blocks 0..64) and 64-block extents (4 extents, fast blocks 64..320).
fn two_sections() -> TierConfig {
    TierConfig {
        block_bytes: 4 * KIB,
        erase_block_bytes: 64 * KIB,
        sections: vec![
            SectionConfig {
                extent_bytes: 64 * KIB,
                capacity_bytes: 256 * KIB,
            },
            SectionConfig {
                extent_bytes: 256 * KIB,
                capacity_bytes: 1024 * KIB,
            },
        ],
        threshold_v: 8,
        expiry_ns: 1_000_000_000_000,
    }
}

fn req(lba: u64, blocks: u64) -> AllocRequest {
    AllocRequest { lba, blocks }
}

/// (section, extent, offset, blocks, fast_block) of each piece.
fn placed(a: &mosaic_tier::Allocation) -> Vec<(usize, u32, u64, u64, u64)> {
    a.pieces
        .iter()
        .map(|p| (p.section, p.extent, p.offset, p.blocks, p.fast_block))
        .collect()
}

#[test]
fn section_choice_by_run_length() {
    let mut r = ReHypar::new(&two_sections()).unwrap();
    // ≤ 16 blocks → the 64 KiB section; 17..=64 → 256 KiB; longer → the
    // largest section, one piece per extent.
    assert_eq!(
        placed(&r.allocate(req(0, 16), 0).unwrap()),
        vec![(0, 0, 0, 16, 0)]
    );
    assert_eq!(
        placed(&r.allocate(req(100, 17), 0).unwrap()),
        vec![(1, 4, 0, 17, 64)]
    );
    assert_eq!(
        placed(&r.allocate(req(200, 100), 0).unwrap()),
        vec![(1, 5, 0, 64, 128), (1, 6, 0, 36, 192)]
    );
    assert_eq!(
        placed(&r.allocate(req(400, 3), 0).unwrap()),
        vec![(0, 1, 0, 3, 16)]
    );
}

#[test]
fn reuse_of_free_tail_small_extent() {
    // s = 16, V = 8. Run of 5 ends at pos 4 ∈ c02 (< V): MAP → c03 at 8,
    // tail 8 ≥ V/2, listed at (0, 3); blocks 5..8 are skipped.
    let mut r = ReHypar::new(&two_sections()).unwrap();
    assert_eq!(
        placed(&r.allocate(req(0, 5), 0).unwrap()),
        vec![(0, 0, 0, 5, 0)]
    );
    assert_eq!(r.lists(0), vec![((0, 3), vec![0])]);
    let st = r.stats();
    assert_eq!(
        (st.allocated, st.live, st.skipped, st.open_tail),
        (16, 5, 3, 8)
    );
    // A run of 8 fits the tail: same extent, offset 8. It ends at 15,
    // the last block: MAP says full and the extent leaves the lists.
    assert_eq!(
        placed(&r.allocate(req(50, 8), 1).unwrap()),
        vec![(0, 0, 8, 8, 8)]
    );
    assert!(r.lists(0).is_empty());
    let st = r.stats();
    assert_eq!(
        (st.allocated, st.live, st.skipped, st.open_tail),
        (16, 13, 3, 0)
    );
    assert!((st.live_fraction() - 13.0 / 16.0).abs() < 1e-12);
}

#[test]
fn fig2_case_through_the_allocator() {
    // 1 KiB blocks, 128 KiB extents: s = 128, V = 32 (the paper's Fig. 2).
    let cfg = TierConfig {
        block_bytes: KIB,
        erase_block_bytes: 128 * KIB,
        sections: vec![SectionConfig {
            extent_bytes: 128 * KIB,
            capacity_bytes: 256 * KIB,
        }],
        threshold_v: 32,
        expiry_ns: u64::MAX,
    };
    let mut r = ReHypar::new(&cfg).unwrap();
    r.allocate(req(0, 108), 0).unwrap(); // blocks 0..=107
    assert_eq!(r.lists(0), vec![((2, 4), vec![0])], "next file from c24");
    // A 16-block file goes to c24 = blocks 112..128 of extent 0.
    assert_eq!(
        placed(&r.allocate(req(108, 16), 5).unwrap()),
        vec![(0, 0, 112, 16, 112)]
    );
    let st = r.stats();
    assert_eq!(
        (st.allocated, st.live, st.skipped),
        (128, 124, 4),
        "108..112 skipped"
    );
    // A 17-block file cannot reuse anything: a clean extent.
    assert_eq!(
        placed(&r.allocate(req(0, 17), 6).unwrap()),
        vec![(0, 1, 0, 17, 128)]
    );
}

/// One 64-block section, V = 8. Extent 0 holds lba 0..40 (opened t=0,
/// tail 24 at list (1,3)); extent 1 holds lba 1000..1030 (opened t=10,
/// tail 32 at list (0,5)).
fn dt_setup() -> ReHypar {
    let cfg = TierConfig {
        block_bytes: 4 * KIB,
        erase_block_bytes: 256 * KIB,
        sections: vec![SectionConfig {
            extent_bytes: 256 * KIB,
            capacity_bytes: 1024 * KIB,
        }],
        threshold_v: 8,
        expiry_ns: u64::MAX,
    };
    let mut r = ReHypar::new(&cfg).unwrap();
    r.allocate(req(0, 40), 0).unwrap();
    // 30 > tail 24 of extent 0: a clean extent.
    assert_eq!(
        placed(&r.allocate(req(1000, 30), 10).unwrap()),
        vec![(0, 1, 0, 30, 64)]
    );
    assert_eq!(r.lists(0), vec![((0, 5), vec![1]), ((1, 3), vec![0])]);
    r
}

#[test]
fn dt_rule_picks_least_distance_over_time() {
    // Near extent 1's data: d0 = 1060, t0 = 100; d1 = 70, t1 = 90 → 1.
    let mut r = dt_setup();
    assert_eq!(r.d_t(0, req(1100, 10), 100), (1060, 100));
    assert_eq!(r.d_t(1, req(1100, 10), 100), (70, 90));
    assert_eq!(
        placed(&r.allocate(req(1100, 10), 100).unwrap()),
        vec![(0, 1, 32, 10, 96)]
    );
    // Adjacent to extent 0's data: d0 = 0 → extent 0 at its tail (40).
    let mut r = dt_setup();
    assert_eq!(
        placed(&r.allocate(req(40, 10), 100).unwrap()),
        vec![(0, 0, 40, 10, 40)]
    );
    // lba 520: d0 = 480, d1 = 470 — extent 1 is nearer, but extent 0 has
    // waited longer: 480/100 = 4.8 < 470/90 ≈ 5.2 → extent 0.
    let mut r = dt_setup();
    assert_eq!(r.choose_reuse(0, req(520, 10), 100), Some(0));
    // A run of 30 fits only extent 1's tail of 32, whatever d/t says.
    assert_eq!(r.choose_reuse(0, req(41, 30), 100), Some(1));
    // A run of 33 fits no tail: a clean extent (2, fast block 128).
    assert_eq!(
        placed(&r.allocate(req(41, 33), 100).unwrap()),
        vec![(0, 2, 0, 33, 128)]
    );
}

#[test]
fn expiry_seals_open_extents() {
    let mut cfg = two_sections();
    cfg.expiry_ns = 1000;
    let mut r = ReHypar::new(&cfg).unwrap();
    r.allocate(req(0, 5), 0).unwrap();
    assert_eq!(r.stats().open_tail, 8);
    // At t = 1000 extent 0's window is over: its tail is lost and the
    // new run takes extent 1.
    assert_eq!(
        placed(&r.allocate(req(5, 4), 1000).unwrap()),
        vec![(0, 1, 0, 4, 16)]
    );
    let st = r.stats();
    // Extent 0: 3 skipped by MAP + 8 sealed tail; extent 1: pos 3 ∈ c01,
    // next c02 at 4, open tail 12.
    assert_eq!(
        (st.allocated, st.live, st.skipped, st.open_tail),
        (32, 9, 3 + 8, 12)
    );
    r.expire(5000);
    assert_eq!((r.stats().open_tail, r.stats().skipped), (0, 11 + 12));
}

#[test]
fn free_returns_dead_extents_to_the_pool() {
    let mut r = ReHypar::new(&two_sections()).unwrap();
    r.allocate(req(0, 5), 0).unwrap(); // extent 0, blocks 0..5
    r.allocate(req(9, 8), 0).unwrap(); // extent 0, blocks 8..16
    r.free(1, 3).unwrap();
    let st = r.stats();
    assert_eq!((st.allocated, st.live, st.dead), (16, 10, 3));
    // Freeing a dead or never-written block is an error and changes nothing.
    assert_eq!(r.free(2, 1), Err(TierError::NotLive(2)));
    assert_eq!(r.free(6, 1), Err(TierError::NotLive(6)));
    assert_eq!(
        r.free(0, 0).unwrap_err(),
        TierError::Request("free of 0 blocks".into())
    );
    assert!(r.free(10_000, 1).is_err());
    assert_eq!(r.stats(), st);
    r.free(0, 1).unwrap();
    r.free(4, 1).unwrap();
    r.free(8, 8).unwrap();
    assert_eq!(r.stats().allocated, 0, "extent 0 is clean again");
    assert!(r.lists(0).is_empty());
    assert_eq!(
        placed(&r.allocate(req(0, 2), 1).unwrap()),
        vec![(0, 0, 0, 2, 0)]
    );
}

#[test]
fn full_tier_says_full_and_sections_fall_back() {
    let mut r = ReHypar::new(&two_sections()).unwrap();
    for i in 0..4 {
        assert_eq!(r.allocate(req(i * 16, 16), 0).unwrap().pieces[0].section, 0);
    }
    // Section 0 full: a small run falls back to the 64-block section.
    assert_eq!(
        placed(&r.allocate(req(64, 16), 0).unwrap()),
        vec![(1, 4, 0, 16, 64)]
    );
    // 4 × 64 blocks left minus 16 used: a 256-block run cannot fit.
    assert_eq!(
        r.allocate(req(0, 256), 0),
        Err(TierError::Full { blocks: 256 })
    );
    assert_eq!(
        r.allocate(req(0, 0), 0).unwrap_err(),
        TierError::Request("run of 0 blocks".into())
    );
}

#[test]
fn baseline_is_a_fixed_extent_allocator() {
    let mut b = FixedExtent::new(&two_sections()).unwrap();
    // Every run takes fresh extents from offset 0; tails are never reused.
    assert_eq!(
        placed(&b.allocate(req(0, 5), 0).unwrap()),
        vec![(0, 0, 0, 5, 0)]
    );
    assert_eq!(
        placed(&b.allocate(req(5, 5), 0).unwrap()),
        vec![(0, 1, 0, 5, 16)]
    );
    assert_eq!(
        placed(&b.allocate(req(0, 70), 0).unwrap()),
        vec![(1, 4, 0, 64, 64), (1, 5, 0, 6, 128)]
    );
    let st = b.stats();
    assert_eq!(
        (st.allocated, st.live, st.skipped, st.open_tail),
        (32 + 128, 80, 11 + 11 + 58, 0)
    );
    b.free(16, 5).unwrap();
    assert_eq!(b.stats().allocated, 16 + 128);
    // Two more 16-block extents, then section 0 is full and small runs
    // fall back to section 1 (2 of 4 extents left), then full.
    for _ in 0..3 {
        assert_eq!(b.allocate(req(0, 1), 0).unwrap().pieces[0].section, 0);
    }
    assert_eq!(b.allocate(req(0, 1), 0).unwrap().pieces[0].section, 1);
    assert_eq!(b.allocate(req(0, 1), 0).unwrap().pieces[0].section, 1);
    assert_eq!(b.allocate(req(0, 1), 0), Err(TierError::Full { blocks: 1 }));
}

#[test]
fn rehypar_packs_where_baseline_wastes() {
    // Same workload: 3-block runs. ReHypar reuses tails, baseline does not.
    let mut r = ReHypar::new(&two_sections()).unwrap();
    let mut b = FixedExtent::new(&two_sections()).unwrap();
    for i in 0..4 {
        r.allocate(req(i * 3, 3), i).unwrap();
        b.allocate(req(i * 3, 3), i).unwrap();
    }
    assert_eq!(r.stats().allocated, 16);
    assert_eq!(b.stats().allocated, 64);
    assert!(r.stats().live_fraction() > b.stats().live_fraction());
}

#[test]
fn bad_config_is_an_error() {
    let base = two_sections();
    let mut bad: Vec<TierConfig> = Vec::new();
    let mut push = |f: &dyn Fn(&mut TierConfig)| {
        let mut c = base.clone();
        f(&mut c);
        bad.push(c);
    };
    push(&|c| c.block_bytes = 3000);
    push(&|c| c.block_bytes = 256);
    push(&|c| c.erase_block_bytes = 0);
    push(&|c| c.erase_block_bytes = 6 * KIB);
    push(&|c| c.erase_block_bytes = 192 * KIB); // neither divides 256 KiB... nor 64 KiB
    push(&|c| c.threshold_v = 6);
    push(&|c| c.threshold_v = 1);
    push(&|c| c.expiry_ns = 0);
    push(&|c| c.sections.clear());
    push(&|c| c.sections[0].extent_bytes = 48 * KIB);
    push(&|c| c.sections[0].extent_bytes = 8 * KIB); // 2 blocks: n > 1 fails
    push(&|c| c.sections[0].capacity_bytes = 0);
    push(&|c| c.sections[0].capacity_bytes = 100 * KIB);
    push(&|c| c.sections[1].extent_bytes = 64 * KIB);
    push(&|c| c.sections[0].capacity_bytes = u64::MAX / 65536 * 65536);
    for c in &bad {
        assert!(
            matches!(ReHypar::new(c), Err(TierError::Config(_))),
            "{c:?}"
        );
        assert!(
            matches!(FixedExtent::new(c), Err(TierError::Config(_))),
            "{c:?}"
        );
    }
    assert!(TierConfig::with_capacity(1 << 30).validate().is_ok());
    assert!(TierConfig::with_capacity(0).validate().is_err());
}
