//! The correlators: the paper's Fig. 2 example, MBC == SBC on random
//! transactions for 1..=8 threads, and the real CloudPhysics trace.

use std::path::Path;

use mosaic_adapt::correlate::{mbc, sequential, speedup};
use mosaic_adapt::txn::{transactions, Txn, TxnConfig};
use mosaic_adapt::Graph;
use mosaic_trace::{Request, TraceOptions};
use proptest::prelude::*;

fn edges(g: &Graph) -> Vec<(u64, u64, u64)> {
    let mut e: Vec<_> = g.edges().collect();
    e.sort_unstable();
    e
}

#[test]
fn fig2_example_through_both_correlators() {
    let txns: Vec<Txn> = vec![vec![1, 2], vec![1, 3, 4], vec![4, 5]];
    let expect = vec![(1, 2, 1), (1, 3, 1), (1, 4, 1), (3, 4, 1), (4, 5, 1)];
    for g in [sequential(&txns), mbc(&txns, 1), mbc(&txns, 3)] {
        assert_eq!(edges(&g), expect);
        assert_eq!((g.vertex_count(), g.tcf(1), g.tcf(4)), (5, 3, 3));
    }
}

/// The paper's prose reads Fig. 2a's first transaction as {1, 2, 3}
/// ("blocks 1 and 3 are requested together twice").
#[test]
fn fig2_prose_variant_counts_repeated_pairs() {
    let txns: Vec<Txn> = vec![vec![1, 2, 3], vec![1, 3, 4], vec![4, 5]];
    let expect = vec![(1, 2, 1), (1, 3, 2), (1, 4, 1), (2, 3, 1), (3, 4, 1), (4, 5, 1)];
    assert_eq!(edges(&sequential(&txns)), expect);
    assert_eq!(edges(&mbc(&txns, 2)), expect);
}

#[test]
fn degenerate_inputs() {
    let empty: Vec<Txn> = Vec::new();
    assert_eq!(mbc(&empty, 4), Graph::new());
    let singles: Vec<Txn> = vec![vec![7], vec![], vec![7, 7]];
    assert_eq!(sequential(&singles), Graph::new());
    assert_eq!(mbc(&singles, 0), Graph::new());
    let txns: Vec<Txn> = vec![vec![1, 2]; 3];
    assert_eq!(mbc(&txns, 100_000), sequential(&txns));
}

#[test]
fn speedup_reports_one_row_per_thread_count() {
    let txns: Vec<Txn> = (0..200u64).map(|i| (i..i + 10).collect()).collect();
    let rows = speedup(&txns, &[1, 2]);
    assert_eq!(rows.iter().map(|r| r.threads).collect::<Vec<_>>(), vec![1, 2]);
    assert!(rows.iter().all(|r| r.seconds > 0.0 && r.txns_per_sec.is_finite()));
}

/// Random transactions over a small vertex range (so pairs repeat and
/// threads contend), sometimes unsorted or with duplicates.
fn txns_strategy() -> impl Strategy<Value = Vec<Txn>> {
    prop::collection::vec(prop::collection::vec(0u64..40, 0..12), 0..80)
}

proptest! {
    #[test]
    fn mbc_equals_sbc(txns in txns_strategy()) {
        let want = sequential(&txns);
        for t in 1..=8 {
            prop_assert_eq!(&mbc(&txns, t), &want, "threads {}", t);
        }
    }

    #[test]
    fn sbc_weights_are_pair_counts(txns in txns_strategy()) {
        let g = sequential(&txns);
        let pairs: u64 = txns.iter().map(|t| {
            let n = t.len();
            (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).filter(|&(i, j)| t[i] != t[j]).count() as u64
        }).sum();
        prop_assert_eq!(g.total_weight(), pairs);
    }
}

#[test]
fn cloudphysics_trace_both_correlators_agree() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/cloudphysics-vscsi-part1.csv");
    if !path.exists() {
        eprintln!("skipping: {} not present", path.display());
        return;
    }
    let opts = TraceOptions { first: Some(20_000), ..TraceOptions::default() };
    let reqs: Vec<Request> = mosaic_trace::open(&path, &opts).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(reqs.len(), 20_000);
    let (txns, stats) = transactions(TxnConfig::new(64 << 10, 1_000_000, 64), reqs).unwrap();
    let g = sequential(&txns);
    for t in [1, 2, 4, 8] {
        assert!(mbc(&txns, t) == g, "mbc({t}) differs from sequential");
    }
    assert!(g.edge_count() > 0);
    println!(
        "cloudphysics first 20000 requests: {} transactions, {} units, {} cap closes, {} splits -> graph {} vertices, {} edges, total weight {}",
        stats.transactions,
        stats.units,
        stats.cap_closes,
        stats.splits,
        g.vertex_count(),
        g.edge_count(),
        g.total_weight()
    );
}

