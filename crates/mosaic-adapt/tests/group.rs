//! HDD grouping: the drive-model formula with the paper's 512 KiB, and a
//! hand-built placement where runs are grouped, split and capped.

use std::collections::{BTreeMap, HashMap};

use mosaic_adapt::group::{group, max_group_bytes, GroupError, Grouping};
use mosaic_adapt::plan::{plan, PlanConfig};
use mosaic_adapt::{Graph, Vertex};

fn graph(edges: &[(Vertex, Vertex, u64)]) -> Graph {
    let mut g = Graph::new();
    for &(a, b, w) in edges {
        g.add(a, b, w);
    }
    g
}

const MIB: f64 = 1024.0 * 1024.0;

#[test]
fn paper_example_is_512_kib() {
    // The paper's HDD: 512 KB = 1024 blocks of 512 B, the data it moves
    // sequentially in the gap between average and worst-case positioning.
    // E.g. a 5 ms gap at 100 MiB/s.
    assert_eq!(max_group_bytes(0.005, 100.0 * MIB), Ok(512 * 1024));
    assert_eq!(max_group_bytes(0.005, 100.0 * MIB).unwrap() / 512, 1024);
    assert_eq!(max_group_bytes(0.0, 100.0 * MIB), Ok(0));
    // An SSD: no positioning gap, no groups.
    assert_eq!(max_group_bytes(0.0, 500.0 * MIB), Ok(0));
}

#[test]
fn bad_drive_model_is_an_error() {
    assert!(matches!(max_group_bytes(f64::NAN, 1.0), Err(GroupError::BadDriveModel(..))));
    assert!(matches!(max_group_bytes(-0.001, 1.0), Err(GroupError::BadDriveModel(..))));
    assert!(matches!(max_group_bytes(0.01, f64::INFINITY), Err(GroupError::BadDriveModel(..))));
    assert!(matches!(max_group_bytes(1e30, 1e30), Err(GroupError::GroupTooLarge(_))));
}

/// The module doc's picture, 512 B units, at most 3 units per group.
///
/// ```text
///   unit    10  11  12 │ 13  14  15  16      20  21
///   drive    0   0   0 │  1   1   1   1       0   0
///   groups  [10  11  12][13  14  15][16]    [20][21]
/// ```
fn picture() -> (Graph, HashMap<Vertex, usize>) {
    let g = graph(&[
        (10, 11, 3),
        (11, 12, 3),
        (12, 13, 1), // correlated but on another drive: splits
        (13, 14, 2),
        (14, 15, 2),
        (15, 16, 2), // would make 4 units: capped
        (20, 10, 5),
        (20, 12, 1),
        (21, 14, 4),
        (16, 11, 1),
    ]);
    let drives = [(10, 0), (11, 0), (12, 0), (13, 1), (14, 1), (15, 1), (16, 1), (20, 0), (21, 0)];
    (g, drives.into_iter().collect())
}

#[test]
fn runs_are_grouped_split_and_capped() {
    let (g, placement) = picture();
    let grouping = group(&g, &placement, |_| 512, 3 * 512).unwrap();

    let expect: BTreeMap<Vertex, Vec<Vertex>> =
        [(10, vec![10, 11, 12]), (13, vec![13, 14, 15]), (16, vec![16]), (20, vec![20]), (21, vec![21])].into_iter().collect();
    assert_eq!(grouping.members, expect);
    assert_eq!(grouping.sizes, [(10, 1536), (13, 1536), (16, 512), (20, 512), (21, 512)].into_iter().collect());
    assert_eq!(grouping.placement, [(10, 0), (13, 1), (16, 1), (20, 0), (21, 0)].into_iter().collect());
    assert_eq!(grouping.group_of[&12], 10);
    assert_eq!(grouping.group_of[&15], 13);

    // Member edges summed; intra-group edges (weight 10 of 24) dropped.
    let expect_edges = graph(&[(10, 13, 1), (13, 16, 2), (10, 20, 6), (13, 21, 4), (10, 16, 1)]);
    assert_eq!(grouping.graph, expect_edges);
    assert_eq!(g.total_weight() - grouping.graph.total_weight(), 3 + 3 + 2 + 2);
}

#[test]
fn byte_cap_counts_sizes_not_units() {
    // Units 0..4 on one drive, all correlated in a chain; sizes 300 B,
    // cap 1000 B: [0 1 2] = 900 B, then 3 starts a new group.  A unit
    // larger than the cap on its own is a group of one.
    let g = graph(&[(0, 1, 1), (1, 2, 1), (2, 3, 1), (3, 4, 1), (4, 5, 1)]);
    let placement: HashMap<Vertex, usize> = (0..6).map(|u| (u, 0)).collect();
    let size = |u: Vertex| if u == 5 { 5000 } else { 300 };
    let grouping = group(&g, &placement, size, 1000).unwrap();
    let groups: Vec<Vec<Vertex>> = grouping.members.values().cloned().collect();
    assert_eq!(groups, vec![vec![0, 1, 2], vec![3, 4], vec![5]]);
    assert!(grouping.sizes.iter().all(|(g, &b)| b <= 1000 || grouping.members[g].len() == 1));
}

#[test]
fn gaps_and_zero_cap_make_singletons() {
    // 30 and 32 are correlated and on one drive but not adjacent.
    let g = graph(&[(30, 32, 9), (32, 33, 1)]);
    let placement: HashMap<Vertex, usize> = [(30, 0), (32, 0), (33, 0)].into_iter().collect();
    let grouping = group(&g, &placement, |_| 1, 10).unwrap();
    assert_eq!(grouping.members.len(), 2);
    assert_eq!(grouping.members[&32], vec![32, 33]);
    let none = group(&g, &placement, |_| 1, 0).unwrap();
    assert_eq!(none.members.len(), 3);
    assert_eq!(none.graph, g);
}

#[test]
fn unplaced_unit_is_an_error() {
    let g = graph(&[(1, 2, 1)]);
    let placement: HashMap<Vertex, usize> = [(1, 0)].into_iter().collect();
    assert_eq!(group(&g, &placement, |_| 1, 10).unwrap_err(), GroupError::Unplaced(2));
}

/// Group, plan the groups, expand back: members never separate, and
/// groups whose edges were all internal keep their drive.
#[test]
fn plan_over_groups_keeps_runs_together() {
    let (mut g, mut placement) = picture();
    g.add(40, 41, 7); // an isolated run: no edges left after grouping
    placement.insert(40, 2);
    placement.insert(41, 2);
    let grouping: Grouping = group(&g, &placement, |_| 512, 3 * 512).unwrap();
    assert!(grouping.members.contains_key(&40) && !grouping.graph.vertices().any(|v| v == 40));

    let sizes = |v: Vertex| grouping.sizes[&v];
    let planned = plan(&grouping.graph, &grouping.placement, sizes, &[0, 0, 0], &PlanConfig::new(3, 1 << 20)).unwrap();
    assert_eq!(planned.conflicts_after, 0);
    let units = grouping.expand(&planned.placement);
    assert_eq!(units.len(), placement.len());
    for (gid, members) in &grouping.members {
        let d = units[gid];
        assert!(members.iter().all(|u| units[u] == d), "group {gid} split");
    }
    assert_eq!(units[&40], 2);
}
