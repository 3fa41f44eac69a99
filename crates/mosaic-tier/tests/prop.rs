//! Random allocate/free sequences against an independent model: no
//! overlap, no leak, accounting adds up, and live/allocated matches an
//! independent count. Run for ReHypar and the baseline.

use std::collections::{BTreeMap, BTreeSet};

use mosaic_tier::rehypar::{
    AllocRequest, FastTierAllocator, FixedExtent, ReHypar, SectionConfig, TierConfig, TierError,
};
use proptest::prelude::*;

const KIB: u64 = 1024;

/// 4 KiB blocks: 8 extents of 16 blocks (fast 0..128), then 4 of 64
/// (fast 128..384). Small so the tier fills and frees often.
fn cfg(v: u64, expiry_ns: u64) -> TierConfig {
    TierConfig {
        block_bytes: 4 * KIB,
        erase_block_bytes: 64 * KIB,
        sections: vec![
            SectionConfig {
                extent_bytes: 64 * KIB,
                capacity_bytes: 512 * KIB,
            },
            SectionConfig {
                extent_bytes: 256 * KIB,
                capacity_bytes: 1024 * KIB,
            },
        ],
        threshold_v: v,
        expiry_ns,
    }
}

/// Independent layout: the extent (start block, size) holding a fast block.
fn extent_of(b: u64) -> (u64, u64) {
    if b < 128 {
        (b / 16 * 16, 16)
    } else {
        (128 + (b - 128) / 64 * 64, 64)
    }
}

#[derive(Debug, Clone)]
enum Op {
    Alloc {
        lba: u64,
        blocks: u64,
        dt: u64,
    },
    /// Free part of the `pick`-th live allocation piece: [from, from+len) as fractions.
    Free {
        pick: usize,
        from: u8,
        len: u8,
    },
    /// Free a block that may or may not be live.
    FreeAny {
        block: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..10_000, prop_oneof![1u64..20, 1u64..80, 1u64..200], 0u64..3_000).prop_map(|(lba, blocks, dt)| Op::Alloc { lba, blocks, dt }),
        3 => (any::<usize>(), any::<u8>(), any::<u8>()).prop_map(|(pick, from, len)| Op::Free { pick, from, len }),
        1 => (0u64..400).prop_map(|block| Op::FreeAny { block }),
    ]
}

fn check<A: FastTierAllocator>(a: &mut A, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut live: BTreeSet<u64> = BTreeSet::new();
    // Live pieces as (fast_block, blocks), keyed by an id.
    let mut pieces: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let (mut now, mut next_id) = (0u64, 0u64);
    for op in ops {
        match *op {
            Op::Alloc { lba, blocks, dt } => {
                now += dt;
                let before = a.stats();
                match a.allocate(AllocRequest { lba, blocks }, now) {
                    Ok(al) => {
                        prop_assert_eq!(al.pieces.iter().map(|p| p.blocks).sum::<u64>(), blocks);
                        for p in &al.pieces {
                            let (start, s) = extent_of(p.fast_block);
                            prop_assert_eq!(p.fast_block - start, p.offset);
                            prop_assert!(p.offset + p.blocks <= s, "piece crosses its extent");
                            for b in p.fast_block..p.fast_block + p.blocks {
                                prop_assert!(
                                    b < 384 && live.insert(b),
                                    "block {} handed out twice",
                                    b
                                );
                            }
                            pieces.insert(next_id, (p.fast_block, p.blocks));
                            next_id += 1;
                        }
                    }
                    Err(TierError::Full { blocks: n }) => {
                        prop_assert_eq!(n, blocks);
                        prop_assert_eq!(a.stats().live, before.live);
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("{e}"))),
                }
            }
            Op::Free { pick, from, len } => {
                if pieces.is_empty() {
                    continue;
                }
                let id = *pieces.keys().nth(pick % pieces.len()).unwrap();
                let (start, n) = pieces.remove(&id).unwrap();
                let off = from as u64 * n / 256;
                let cnt = (len as u64 * (n - off) / 256).max(1);
                a.free(start + off, cnt)
                    .map_err(|e| TestCaseError::fail(format!("{e}")))?;
                for b in start + off..start + off + cnt {
                    live.remove(&b);
                }
                // Keep the surviving parts as pieces.
                if off > 0 {
                    pieces.insert(next_id, (start, off));
                    next_id += 1;
                }
                if off + cnt < n {
                    pieces.insert(next_id, (start + off + cnt, n - off - cnt));
                    next_id += 1;
                }
            }
            Op::FreeAny { block } => {
                if !live.contains(&block) {
                    let before = a.stats();
                    prop_assert!(a.free(block, 1).is_err());
                    prop_assert_eq!(a.stats(), before);
                }
            }
        }
        let st = a.stats();
        // Accounting adds up and matches the model.
        prop_assert_eq!(st.total, 384);
        prop_assert_eq!(st.allocated, st.live + st.dead + st.skipped + st.open_tail);
        prop_assert_eq!(st.live, live.len() as u64);
        // No leak: allocated extents are exactly those holding live data.
        let extents: BTreeSet<(u64, u64)> = live.iter().map(|&b| extent_of(b)).collect();
        let allocated: u64 = extents.iter().map(|&(_, s)| s).sum();
        prop_assert_eq!(st.allocated, allocated);
        let frac = if allocated == 0 {
            1.0
        } else {
            live.len() as f64 / allocated as f64
        };
        prop_assert!((st.live_fraction() - frac).abs() < 1e-12);
    }
    // Free everything: the whole tier is clean again.
    for (_, (start, n)) in pieces {
        a.free(start, n)
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    }
    prop_assert_eq!(a.stats().allocated, 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn rehypar_never_overlaps_or_leaks(v in prop_oneof![Just(2u64), Just(8), Just(32)], expiry in prop_oneof![Just(1_000u64), Just(u64::MAX)], ops in prop::collection::vec(op(), 1..200)) {
        check(&mut ReHypar::new(&cfg(v, expiry)).unwrap(), &ops)?;
    }

    #[test]
    fn baseline_never_overlaps_or_leaks(ops in prop::collection::vec(op(), 1..200)) {
        let mut b = FixedExtent::new(&cfg(8, 1_000)).unwrap();
        check(&mut b, &ops)?;
        // Fixed extents: a fresh extent per piece, so nothing is ever open.
        prop_assert_eq!(b.stats().open_tail, 0);
    }
}
