//! Colour-to-drive assignment: a hand-built case with a known optimum,
//! Hungarian versus brute force over all permutations, and the
//! plan → assign → apply round trip.

use std::collections::HashMap;

use mosaic_adapt::assign::{apply, assign, cost_matrix, mapping_cost, AssignError};
use mosaic_adapt::plan::{plan_units, PlanConfig};
use mosaic_adapt::{Graph, Vertex};
use proptest::prelude::*;

fn map(pairs: &[(Vertex, usize)]) -> HashMap<Vertex, usize> {
    pairs.iter().copied().collect()
}

/// ```text
///   vertex    1 2 3 4 | 5 6 7
///   colour    0 0 0 0 | 1 1 1
///   original  1 1 1 0 | 0 0 1
///
///   cost = [[3, 1],      identity 3 + 2 = 5
///           [1, 2]]      swap     1 + 1 = 2  (optimal)
/// ```
#[test]
fn swap_beats_identity() {
    let original = map(&[(1, 1), (2, 1), (3, 1), (4, 0), (5, 0), (6, 0), (7, 1)]);
    let colouring = map(&[(1, 0), (2, 0), (3, 0), (4, 0), (5, 1), (6, 1), (7, 1)]);
    assert_eq!(cost_matrix(&original, &colouring, |_| 1, 2).unwrap(), vec![vec![3, 1], vec![1, 2]]);
    let a = assign(&original, &colouring, |_| 1, 2).unwrap();
    assert_eq!(a.mapping, vec![1, 0]);
    assert_eq!((a.bytes_moved, a.identity_bytes_moved), (2, 5));
    assert_eq!(a.identity_gap(), Some(1.5));

    let placed = apply(&colouring, &a.mapping).unwrap();
    let moved: u64 = placed.iter().filter(|(v, d)| original[v] != **d).count() as u64;
    assert_eq!(moved, a.bytes_moved);
}

/// Sizes matter: three colours where the byte-heavy vertices decide.
///
/// ```text
///   colour 0: A (100 B, drive 2), B (1 B, drive 0)
///   colour 1: C (50 B, drive 0)
///   colour 2: D (10 B, drive 1), E (10 B, drive 2)
///
///   cost = [[100,  101, 1],
///           [  0,   50, 50],
///           [ 20,   10, 10]]
///   identity: 100 + 50 + 10 = 160;  optimum 0→2, 1→0, 2→1: 1 + 0 + 10 = 11
/// ```
#[test]
fn weighted_optimum_is_exact() {
    let original = map(&[(0, 2), (1, 0), (2, 0), (3, 1), (4, 2)]);
    let colouring = map(&[(0, 0), (1, 0), (2, 1), (3, 2), (4, 2)]);
    let size = |v: Vertex| [100, 1, 50, 10, 10][v as usize];
    let cost = cost_matrix(&original, &colouring, size, 3).unwrap();
    assert_eq!(cost, vec![vec![100, 101, 1], vec![0, 50, 50], vec![20, 10, 10]]);
    let a = assign(&original, &colouring, size, 3).unwrap();
    assert_eq!(a.mapping, vec![2, 0, 1]);
    assert_eq!((a.bytes_moved, a.identity_bytes_moved), (11, 160));
}

#[test]
fn identity_is_optimal_when_nothing_moves() {
    let original = map(&[(0, 0), (1, 1), (2, 2)]);
    let a = assign(&original, &original, |_| 7, 3).unwrap();
    assert_eq!(a.mapping, vec![0, 1, 2]);
    assert_eq!((a.bytes_moved, a.identity_bytes_moved), (0, 0));
    assert_eq!(a.identity_gap(), Some(0.0));
}

#[test]
fn gap_undefined_when_optimum_is_free() {
    // The colouring is a pure relabelling: optimum 0, identity moves all.
    let original = map(&[(0, 0), (1, 1)]);
    let colouring = map(&[(0, 1), (1, 0)]);
    let a = assign(&original, &colouring, |_| 1, 2).unwrap();
    assert_eq!((a.bytes_moved, a.identity_bytes_moved), (0, 2));
    assert_eq!(a.identity_gap(), None);
}

#[test]
fn bad_input_is_an_error() {
    let original = map(&[(0, 0)]);
    assert_eq!(assign(&original, &map(&[(1, 0)]), |_| 1, 2), Err(AssignError::Missing(1)));
    let err = assign(&original, &map(&[(0, 5)]), |_| 1, 2).unwrap_err();
    assert_eq!(err, AssignError::OutOfRange { vertex: 0, what: "colour", index: 5, n: 2 });
    let bad_drive = map(&[(0, 9)]);
    assert!(matches!(assign(&bad_drive, &original, |_| 1, 2), Err(AssignError::OutOfRange { what: "original drive", .. })));
    assert!(matches!(assign(&original, &original, |_| u64::MAX / 2, 2), Err(AssignError::TooLarge(..))));
    assert_eq!(apply(&original, &[1, 1]), Err(AssignError::NotPermutation(1)));
    assert_eq!(apply(&original, &[3, 0]), Err(AssignError::NotPermutation(3)));
    assert!(apply(&map(&[(0, 2)]), &[1, 0]).is_err());
    assert_eq!(mapping_cost(&[vec![1, 2]], &[0, 1]), None);
    let empty = assign(&HashMap::new(), &HashMap::new(), |_| 1, 0).unwrap();
    assert!(empty.mapping.is_empty());
}

/// The end-to-end use: plan a colouring, then pick the cheapest drives.
#[test]
fn plan_then_assign_never_moves_more_than_identity() {
    let mut g = Graph::new();
    for k in 0..6u64 {
        for i in 0..4 {
            for j in i + 1..4 {
                g.add(k * 4 + i, k * 4 + j, 1 + (k + i + j) % 3);
            }
        }
    }
    let original: HashMap<Vertex, usize> = (0..24).map(|v| (v, (v / 4 % 4) as usize)).collect();
    let planned = plan_units(&g, &original, &PlanConfig::new(4, 12)).unwrap();
    let a = assign(&original, &planned.placement, |_| 1, 4).unwrap();
    assert!(a.bytes_moved <= a.identity_bytes_moved);
    assert_eq!(a.identity_bytes_moved, planned.bytes_moved);
    let placed = apply(&planned.placement, &a.mapping).unwrap();
    let moved = placed.iter().filter(|(v, d)| original[v] != **d).count() as u64;
    assert_eq!(moved, a.bytes_moved);
}

/// Every permutation of `0..n` (Heap's algorithm would do; n ≤ 5 so a
/// simple recursion is plenty).
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in 0..=p.len() {
            let mut q = p.clone();
            q.insert(at, n - 1);
            out.push(q);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn hungarian_matches_brute_force(
        n in 1usize..=5,
        rows in prop::collection::vec((0usize..5, 0usize..5, 1u64..1000), 0..40),
    ) {
        let mut original = HashMap::new();
        let mut colouring = HashMap::new();
        let mut sizes = HashMap::new();
        for (v, &(d, c, w)) in rows.iter().enumerate() {
            original.insert(v as Vertex, d % n);
            colouring.insert(v as Vertex, c % n);
            sizes.insert(v as Vertex, w);
        }
        let size = |v: Vertex| sizes[&v];
        let cost = cost_matrix(&original, &colouring, size, n).unwrap();
        let best = permutations(n).iter().map(|p| mapping_cost(&cost, p).unwrap()).min().unwrap();
        let a = assign(&original, &colouring, size, n).unwrap();
        prop_assert_eq!(a.bytes_moved, best);
        prop_assert_eq!(mapping_cost(&cost, &a.mapping), Some(best));
        prop_assert!(a.bytes_moved <= a.identity_bytes_moved);
        let placed = apply(&colouring, &a.mapping).unwrap();
        let moved: u64 = placed.iter().filter(|(v, d)| original[v] != **d).map(|(v, _)| sizes[v]).sum();
        prop_assert_eq!(moved, a.bytes_moved);
    }
}
