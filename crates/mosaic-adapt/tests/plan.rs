//! Min-conflict bin packing: the planted-structure "done when" check,
//! P1–P4 on hand-built cases, the W bound, the ε stop, and invariants
//! over random graphs.

use std::collections::HashMap;

use mosaic_adapt::plan::{choose_colour, conflicts, plan, plan_units, Plan, PlanConfig, PlanError};
use mosaic_adapt::{Graph, Vertex};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Build a graph from `(a, b, w)` triples.
fn graph(edges: &[(Vertex, Vertex, u64)]) -> Graph {
    let mut g = Graph::new();
    for &(a, b, w) in edges {
        g.add(a, b, w);
    }
    g
}

fn placement(pairs: &[(Vertex, usize)]) -> HashMap<Vertex, usize> {
    pairs.iter().copied().collect()
}

/// Every recorded decision is one line 15 allows, and none overfills.
fn assert_steps_lawful(p: &Plan, capacity: u64) {
    for s in &p.steps {
        assert!(s.fill_to + s.size <= capacity, "move overfills drive {}: {s:?}", s.to);
        let strictly_better = s.conflicts_to < s.conflicts_from;
        let tie_emptier = s.conflicts_to == s.conflicts_from && s.fill_to + s.size < s.fill_from;
        assert!(strictly_better || tie_emptier, "unjustified move {s:?}");
    }
}

// ---------------------------------------------------------------------
// Planted structure: K cliques of N units each; a proper N-colouring
// exists (each clique across all N drives) and the planner must find it.

struct Planted {
    graph: Graph,
    placement: HashMap<Vertex, usize>,
}

/// K cliques of N units: clique k is units `k*N .. k*N + N`, edge weights
/// random in 1..=10.  `together` puts each whole clique on drive `k % N`
/// (the worst start: every edge a conflict); otherwise drives are random.
fn planted(k: u64, n: usize, together: bool, seed: u64) -> Planted {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut graph = Graph::new();
    let mut placement = HashMap::new();
    let n64 = n as u64;
    for clique in 0..k {
        for i in 0..n64 {
            for j in i + 1..n64 {
                graph.add(clique * n64 + i, clique * n64 + j, rng.gen_range(1..=10));
            }
            let drive = if together { (clique % n64) as usize } else { rng.gen_range(0..n) };
            placement.insert(clique * n64 + i, drive);
        }
    }
    Planted { graph, placement }
}

fn check_planted(k: u64, n: usize, together: bool, seed: u64, slack: u64) {
    let p = planted(k, n, together, seed);
    let start_max = (0..n).map(|d| p.placement.values().filter(|&&c| c == d).count() as u64).max().unwrap();
    let capacity = start_max.max(k) + slack;
    let plan = plan_units(&p.graph, &p.placement, &PlanConfig::new(n, capacity)).unwrap();
    let ctx = format!("k={k} n={n} together={together} seed={seed}");
    assert!(plan.conflicts_before > 0, "{ctx}");
    assert_eq!(plan.conflicts_after, 0, "{ctx}: history {:?}", plan.history);
    assert_eq!(conflicts(&p.graph, &plan.placement), 0, "{ctx}");
    for clique in 0..k {
        let mut drives: Vec<usize> = (0..n as u64).map(|i| plan.placement[&(clique * n as u64 + i)]).collect();
        drives.sort_unstable();
        assert_eq!(drives, (0..n).collect::<Vec<_>>(), "{ctx}: clique {clique} not spread over all drives");
    }
    assert!(plan.fill.iter().all(|&f| f <= capacity), "{ctx}: fill {:?} > {capacity}", plan.fill);
    assert_steps_lawful(&plan, capacity);
}

#[test]
fn planted_cliques_together_reach_zero_conflicts() {
    for n in [4usize, 8] {
        for seed in 0..6 {
            check_planted(3 * n as u64, n, true, seed, 2);
        }
    }
}

#[test]
fn planted_cliques_random_start_reach_zero_conflicts() {
    for n in [4usize, 8] {
        for seed in 0..6 {
            check_planted(5 * n as u64, n, false, 100 + seed, 2);
        }
    }
}

/// With a heavy non-graph fill on one drive, the planner still separates
/// every clique and keeps the full drive within W.
#[test]
fn planted_cliques_respect_base_fill() {
    let (k, n) = (8u64, 4usize);
    let p = planted(k, n, true, 7);
    let capacity = 40;
    let base = vec![30, 0, 0, 0]; // drive 0: 30 foreign + 8 own = 38
    let plan = plan(&p.graph, &p.placement, |_| 1, &base, &PlanConfig::new(n, capacity)).unwrap();
    assert_eq!(plan.conflicts_after, 0);
    assert!(plan.fill.iter().all(|&f| f <= capacity), "{:?}", plan.fill);
    assert_eq!(plan.fill.iter().sum::<u64>(), 30 + k * n as u64);
    assert_steps_lawful(&plan, capacity);
}

/// The picture at the top of `plan.rs`: a and b conflict on drive 0,
/// drive 1 holds c (foreign data here), drive 2 is empty.
#[test]
fn module_doc_example() {
    let (a, b) = (0, 1);
    let g = graph(&[(a, b, 3)]);
    let plan = plan(&g, &placement(&[(a, 0), (b, 0)]), |_| 1, &[0, 1, 0], &PlanConfig::new(3, 10)).unwrap();
    assert_eq!((plan.conflicts_before, plan.conflicts_after, plan.passes), (3, 0, 1));
    assert_eq!(plan.placement, placement(&[(a, 2), (b, 0)]));
    assert_eq!(plan.fill, vec![1, 1, 1]);
}

// ---------------------------------------------------------------------
// P1: conflict-free input is left alone.

#[test]
fn conflict_free_graph_yields_no_moves() {
    // A path 0-1-2-3 coloured alternately, and drives deliberately
    // unbalanced (drive 2 empty): P4 must not kick in without conflicts.
    let g = graph(&[(0, 1, 4), (1, 2, 9), (2, 3, 1)]);
    let start = placement(&[(0, 0), (1, 1), (2, 0), (3, 1)]);
    let plan = plan_units(&g, &start, &PlanConfig::new(3, 10)).unwrap();
    assert_eq!(plan.conflicts_before, 0);
    assert_eq!(plan.passes, 0);
    assert!(plan.moves.is_empty() && plan.steps.is_empty());
    assert_eq!(plan.bytes_moved, 0);
    assert_eq!(plan.placement, start);
}

/// Only the vertices in conflict move; their conflict-free neighbours
/// keep their drives even when another drive is emptier.
#[test]
fn only_conflicting_vertices_move() {
    let g = graph(&[(0, 1, 5), (2, 3, 1)]);
    let start = placement(&[(0, 0), (1, 0), (2, 0), (3, 1)]);
    let plan = plan_units(&g, &start, &PlanConfig::new(3, 10)).unwrap();
    assert_eq!(plan.conflicts_after, 0);
    assert_eq!(plan.moves.len(), 1);
    assert_eq!(plan.placement[&2], 0);
    assert_eq!(plan.placement[&3], 1);
}

// ---------------------------------------------------------------------
// P2: visiting order.

#[test]
fn higher_tcf_vertex_chooses_first() {
    // 0 and 1 conflict on drive 0; 1 has the higher TCF (edge to 2), so
    // it is visited first and moves, and 0 then has no conflict left.
    let g = graph(&[(0, 1, 2), (1, 2, 1)]);
    let start = placement(&[(0, 0), (1, 0), (2, 1)]);
    let plan = plan_units(&g, &start, &PlanConfig::new(3, 10)).unwrap();
    assert_eq!(plan.steps.len(), 1);
    assert_eq!(plan.steps[0].vertex, 1);
    assert_eq!(plan.placement[&1], 2);
}

// ---------------------------------------------------------------------
// P4: ties go to the less-used drive.

#[test]
fn tie_goes_to_less_used_drive() {
    // v = 0 has one unit of conflict on every drive; drive 2 is the
    // emptiest, so v moves there although drive 1 is also emptier.
    // Base fills 10, 5, 2 plus the graph vertices: 12, 6, 3.
    let g = graph(&[(0, 1, 1), (0, 2, 1), (0, 3, 1)]);
    let start = placement(&[(0, 0), (1, 0), (2, 1), (3, 2)]);
    let mut cfg = PlanConfig::new(3, 100);
    cfg.max_passes = 1;
    let plan = plan(&g, &start, |_| 1, &[10, 5, 2], &cfg).unwrap();
    let first = plan.steps[0];
    assert_eq!((first.vertex, first.from, first.to), (0, 0, 2));
    assert_eq!((first.conflicts_from, first.conflicts_to), (1, 1));
    assert_eq!((first.fill_from, first.fill_to), (12, 3)); // v and 1 on drive 0; 3 on drive 2
    assert_steps_lawful(&plan, 100);
}

#[test]
fn choose_colour_tie_rule() {
    // All tied: the least-used drive wins.
    assert_eq!(choose_colour(&[1, 1, 1], &[11, 5, 2], 0, 1, 100), 2);
    // Tied, but the other drive after the move would be as full as this
    // one is now: no move (no ping-pong between equal drives).
    assert_eq!(choose_colour(&[1, 1], &[6, 5], 0, 1, 100), 0);
    assert_eq!(choose_colour(&[1, 1], &[7, 5], 0, 1, 100), 1);
    // Fewer conflicts beats more free space.
    assert_eq!(choose_colour(&[2, 2, 1], &[3, 0, 50], 0, 1, 100), 2);
    // Malformed input: no move, no panic.
    assert_eq!(choose_colour(&[1, 0], &[1], 0, 1, 100), 0);
    assert_eq!(choose_colour(&[1, 0], &[1, 0], 5, 1, 100), 5);
}

// ---------------------------------------------------------------------
// W: a full drive is not a candidate.

#[test]
fn full_drive_is_skipped() {
    // v = 0 conflicts with 1 (weight 5) on drive 0.  Drive 1 would be
    // conflict-free but is full with foreign data; drive 2 costs 1.
    let g = graph(&[(0, 1, 5), (0, 2, 1)]);
    let start = placement(&[(0, 0), (1, 0), (2, 2)]);
    let plan = plan(&g, &start, |_| 1, &[0, 10, 0], &PlanConfig::new(3, 10)).unwrap();
    assert_eq!(plan.placement[&0], 2);
    assert_eq!(plan.fill[1], 10);
    assert!(plan.steps.iter().all(|s| s.to != 1));
    assert_eq!(plan.conflicts_after, 0); // vertex 2 then leaves drive 2
    assert_steps_lawful(&plan, 10);

    assert_eq!(choose_colour(&[5, 0, 1], &[1, 10, 0], 0, 1, 10), 2);
    assert_eq!(choose_colour(&[5, 0, 1], &[1, 10, 0], 0, 1, 11), 1, "W is inclusive");
}

#[test]
fn sizes_count_against_capacity() {
    // The only conflict-free drive has 4 bytes free; the vertex is 5.
    let g = graph(&[(0, 1, 1)]);
    let start = placement(&[(0, 0), (1, 0)]);
    let sizes = |v: Vertex| if v == 0 { 5 } else { 3 };
    let plan = plan(&g, &start, sizes, &[0, 6], &PlanConfig::new(2, 10)).unwrap();
    // Vertex 0 (id-first on TCF tie) cannot move; vertex 1 (3 bytes) can.
    assert_eq!(plan.placement[&0], 0);
    assert_eq!(plan.placement[&1], 1);
    assert_eq!(plan.fill, vec![5, 9]);
    assert_eq!(plan.bytes_moved, 3);
}

// ---------------------------------------------------------------------
// ε: passes repeat while they pay.

/// A case needing two passes: x (highest TCF) is conflict-free in pass 1,
/// so it is skipped; then y moves onto x's drive (its cheapest option),
/// and only pass 2 can move x away.
///
/// ```text
///   x=0 d0 ──5── a=1 d1      y=3 d1 ──3── z=4 d1   (initial conflict 3)
///        ──5── b=2 d2           ──3── t=5 d2
///        ──1── y=3 d1           ──3── s=6 d3
/// ```
fn two_pass_case() -> (Graph, HashMap<Vertex, usize>) {
    let g = graph(&[(0, 1, 5), (0, 2, 5), (0, 3, 1), (3, 4, 3), (3, 5, 3), (3, 6, 3)]);
    let start = placement(&[(0, 0), (1, 1), (2, 2), (3, 1), (4, 1), (5, 2), (6, 3)]);
    (g, start)
}

#[test]
fn epsilon_stop_counts_passes() {
    let (g, start) = two_pass_case();
    let plan5 = plan_units(&g, &start, &PlanConfig::new(4, 100)).unwrap();
    assert_eq!(plan5.history, vec![3, 1, 0]);
    assert_eq!(plan5.passes, 2);
    assert_eq!(plan5.moves.len(), 2);

    // Pass 1 removes 2/3 of the conflict weight: below ε = 0.9, so stop.
    let mut cfg = PlanConfig::new(4, 100);
    cfg.epsilon = 0.9;
    let plan90 = plan_units(&g, &start, &cfg).unwrap();
    assert_eq!(plan90.history, vec![3, 1]);
    assert_eq!(plan90.passes, 1);

    let mut cfg = PlanConfig::new(4, 100);
    cfg.max_passes = 1;
    assert_eq!(plan_units(&g, &start, &cfg).unwrap().passes, 1);
    cfg.max_passes = 0;
    let none = plan_units(&g, &start, &cfg).unwrap();
    assert_eq!((none.passes, none.conflicts_after), (0, 3));
}

/// Over random dense graphs, every pass but the last removed at least ε
/// of the conflicts, and a larger ε never runs more passes.
#[test]
fn epsilon_rule_on_random_graphs() {
    let mut several = 0;
    for seed in 0..20 {
        let (g, start) = random_graph(seed, 60, 400, 4);
        let mut runs = Vec::new();
        for eps in [0.0, 0.05, 0.3] {
            let mut cfg = PlanConfig::new(4, 20);
            cfg.epsilon = eps;
            let p = plan_units(&g, &start, &cfg).unwrap();
            for w in p.history.windows(2).take(p.passes.saturating_sub(1)) {
                assert!((w[0] - w[1]) as f64 >= eps * w[0] as f64, "seed {seed} eps {eps}: {:?}", p.history);
            }
            runs.push(p.passes);
        }
        assert!(runs[0] >= runs[1] && runs[1] >= runs[2], "seed {seed}: {runs:?}");
        several += usize::from(runs[1] > 1);
    }
    assert!(several > 0, "no random case needed more than one pass");
}

fn random_graph(seed: u64, vertices: u64, edges: usize, n: usize) -> (Graph, HashMap<Vertex, usize>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut g = Graph::new();
    for _ in 0..edges {
        g.add(rng.gen_range(0..vertices), rng.gen_range(0..vertices), rng.gen_range(1..=20));
    }
    let start = g.vertices().map(|v| (v, rng.gen_range(0..n))).collect();
    (g, start)
}

// ---------------------------------------------------------------------
// Bad input is an error, not a panic.

#[test]
fn bad_input_is_an_error() {
    let g = graph(&[(0, 1, 1)]);
    let cfg = PlanConfig::new(2, 10);
    assert_eq!(plan_units(&g, &placement(&[(0, 0)]), &cfg), Err(PlanError::Unplaced(1)));
    let err = plan_units(&g, &placement(&[(0, 0), (1, 2)]), &cfg);
    assert_eq!(err, Err(PlanError::ColourOutOfRange { vertex: 1, colour: 2, colours: 2 }));
    assert!(err.unwrap_err().to_string().contains("only 2 drives"));
    let both = placement(&[(0, 0), (1, 0)]);
    assert_eq!(plan_units(&g, &both, &PlanConfig::new(0, 10)), Err(PlanError::NoColours));
    assert_eq!(plan(&g, &both, |_| 1, &[0], &cfg), Err(PlanError::FillLength { expected: 2, got: 1 }));
    let mut nan = cfg.clone();
    nan.epsilon = f64::NAN;
    assert!(matches!(plan_units(&g, &both, &nan), Err(PlanError::BadEpsilon(_))));
    let huge = plan(&g, &both, |_| u64::MAX, &[1, 0], &cfg);
    assert_eq!(huge, Err(PlanError::FillOverflow(0)));
}

#[test]
fn conflicts_counts_same_colour_weight() {
    let g = graph(&[(0, 1, 4), (1, 2, 3), (0, 2, 2), (2, 9, 7)]);
    // 9 is unplaced: its edge is not a conflict.
    let p = placement(&[(0, 0), (1, 0), (2, 0)]);
    assert_eq!(conflicts(&g, &p), 9);
    assert_eq!(conflicts(&g, &placement(&[(0, 0), (1, 1), (2, 0)])), 2);
    assert_eq!(conflicts(&Graph::new(), &p), 0);
}

#[test]
fn extra_placement_entries_are_ignored() {
    let g = graph(&[(0, 1, 1)]);
    let start = placement(&[(0, 0), (1, 0), (77, 1)]);
    let plan = plan_units(&g, &start, &PlanConfig::new(2, 10)).unwrap();
    assert_eq!(plan.placement.len(), 2);
    assert_eq!(plan.fill.iter().sum::<u64>(), 2);
}

// ---------------------------------------------------------------------
// Invariants over random inputs.

/// Edges, each vertex's drive, each vertex's size, base fill, N, W.
type Case = (Vec<(u64, u64, u64)>, Vec<usize>, Vec<u64>, Vec<u64>, usize, u64);

fn arb_case() -> impl Strategy<Value = Case> {
    (1usize..6).prop_flat_map(|n| {
        (
            prop::collection::vec((0u64..25, 0u64..25, 1u64..10), 0..80),
            prop::collection::vec(0..n, 25),
            prop::collection::vec(1u64..5, 25),
            prop::collection::vec(0u64..10, n),
            Just(n),
            10u64..60,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn plan_invariants((edges, drives, sizes, base, n, cap) in arb_case(), rebalance in any::<bool>()) {
        let g = graph(&edges);
        let start: HashMap<Vertex, usize> = g.vertices().map(|v| (v, drives[v as usize])).collect();
        let mut cfg = PlanConfig::new(n, cap);
        cfg.rebalance = rebalance;
        let p = plan(&g, &start, |v| sizes[v as usize], &base, &cfg).unwrap();

        prop_assert!(p.conflicts_after <= p.conflicts_before);
        prop_assert!(p.history.windows(2).all(|w| w[1] <= w[0]));
        prop_assert_eq!(p.history.len(), p.passes + 1);
        prop_assert_eq!(conflicts(&g, &start), p.conflicts_before);
        prop_assert_eq!(conflicts(&g, &p.placement), p.conflicts_after);
        assert_steps_lawful(&p, cap);

        // Fill is consistent, and no drive grew past max(W, its start).
        let mut initial = base.clone();
        let mut fill = base.clone();
        for (&v, &d) in &start { initial[d] += sizes[v as usize]; }
        for (&v, &d) in &p.placement { fill[d] += sizes[v as usize]; }
        prop_assert_eq!(&fill, &p.fill);
        for d in 0..n { prop_assert!(fill[d] <= cap.max(initial[d])); }

        // Net moves match the placements.
        let moved: Vec<Vertex> = p.moves.iter().map(|m| m.vertex).collect();
        let mut expect: Vec<Vertex> = start.iter().filter(|(v, d)| p.placement[v] != **d).map(|(&v, _)| v).collect();
        expect.sort_unstable();
        prop_assert_eq!(moved, expect);
        prop_assert_eq!(p.bytes_moved, p.moves.iter().map(|m| sizes[m.vertex as usize]).sum::<u64>());
        for m in &p.moves { prop_assert_eq!(start[&m.vertex], m.from); prop_assert_eq!(p.placement[&m.vertex], m.to); }
    }
}
