//! From a correlation graph and the current placement to the moves a
//! remapped array should make, ordered by benefit over cost: the one
//! pipeline `mosaic adapt`, the periodic job in `mosaic serve` and the
//! evaluation share.
//!
//! ```text
//!   graph (at the threshold) + where each vertex is now + the fill of
//!   every drive outside the graph
//!     -> plan (MCBP, P1-P4, capacity bound W)  colours
//!     -> assign (Hungarian: colours -> drives, least data moved)
//!     -> moves: every vertex whose drive changes, with
//!          benefit = its conflict weight now - its conflict weight after
//!          cost    = its bytes
//!        sorted by benefit / cost, best first (ties: lower vertex)
//! ```
//!
//! A prefix of the list (`--max-move`) is the best use of a bounded
//! migration budget: each move's benefit is counted against the final
//! placement, so the first moves are those that remove the most conflict
//! weight per byte.

use std::collections::HashMap;

use crate::assign::{self, AssignError};
use crate::graph::{Graph, Vertex};
use crate::plan::{self, PlanConfig, PlanError};

/// What to plan for.
#[derive(Clone, Debug)]
pub struct TargetInput<'a> {
    /// The correlation graph (already cut at the threshold).
    pub graph: &'a Graph,
    /// Where every vertex of the graph is now (drive index).
    pub current: &'a HashMap<Vertex, usize>,
    /// Bytes each drive holds of data outside the graph.
    pub base: Vec<u64>,
    /// Drives.
    pub drives: usize,
    /// Per-drive capacity bound W in bytes.
    pub capacity: u64,
}

/// One move: a vertex, its drives, and why.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Move {
    pub vertex: Vertex,
    pub from: usize,
    pub to: usize,
    /// Conflict weight removed (may be negative for a move the capacity
    /// bound forced).
    pub benefit: i64,
    /// Bytes moved.
    pub bytes: u64,
}

/// The moves and the figures a dry run shows.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Target {
    /// Best first.
    pub moves: Vec<Move>,
    pub conflicts_before: u64,
    pub conflicts_after: u64,
    pub passes: usize,
    /// The assignment's cost over the identity mapping's (P1), when defined.
    pub identity_gap: Option<f64>,
    /// Where every graph vertex ends up.
    #[serde(skip)]
    pub placement: HashMap<Vertex, usize>,
}

impl Target {
    /// Bytes the moves relocate.
    pub fn bytes(&self) -> u64 {
        self.moves.iter().map(|m| m.bytes).sum()
    }

    /// Keep the best moves totalling at most `max_bytes`.
    pub fn truncate_bytes(&mut self, max_bytes: u64) {
        let mut total = 0u64;
        let keep = self.moves.iter().take_while(|m| {
            total += m.bytes;
            total <= max_bytes
        });
        let n = keep.count();
        self.moves.truncate(n);
    }
}

/// Why no target could be made.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Assign(#[from] AssignError),
}

/// Plan, assign, and list the moves best first; `size` gives each
/// vertex's bytes (a unit, or a group's units on HDDs).
pub fn target(input: &TargetInput<'_>, size: impl Fn(Vertex) -> u64 + Copy) -> Result<Target, TargetError> {
    let pc = PlanConfig::new(input.drives, input.capacity);
    let p = plan::plan(input.graph, input.current, size, &input.base, &pc)?;
    let a = assign::assign(input.current, &p.placement, size, input.drives)?;
    let placement = assign::apply(&p.placement, &a.mapping)?;
    let mut moves: Vec<Move> = input
        .current
        .iter()
        .filter_map(|(&v, &from)| {
            let to = *placement.get(&v)?;
            (to != from).then(|| Move { vertex: v, from, to, benefit: 0, bytes: size(v) })
        })
        .collect();
    for m in &mut moves {
        m.benefit = weight_on(input.graph, input.current, m.vertex, m.from) as i64 - weight_on(input.graph, &placement, m.vertex, m.to) as i64;
    }
    moves.sort_by(|a, b| {
        let (ra, rb) = (a.benefit as f64 / a.bytes.max(1) as f64, b.benefit as f64 / b.bytes.max(1) as f64);
        rb.partial_cmp(&ra).unwrap_or(std::cmp::Ordering::Equal).then(a.vertex.cmp(&b.vertex))
    });
    Ok(Target {
        moves,
        conflicts_before: p.conflicts_before,
        conflicts_after: plan::conflicts(input.graph, &placement),
        passes: p.passes,
        identity_gap: a.identity_gap(),
        placement,
    })
}

/// Weight of `v`'s edges to vertices on drive `d` under `place`.
fn weight_on(g: &Graph, place: &HashMap<Vertex, usize>, v: Vertex, d: usize) -> u64 {
    g.neighbours(v).filter(|(u, _)| place.get(u) == Some(&d)).map(|(_, w)| w).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two cliques of three units, all on drive 0 of three drives.
    fn cliques() -> (Graph, HashMap<Vertex, usize>) {
        let mut g = Graph::new();
        for c in [[1u64, 2, 3], [10, 11, 12]] {
            for i in 0..3 {
                for j in i + 1..3 {
                    g.add(c[i], c[j], if c[0] == 1 { 5 } else { 1 });
                }
            }
        }
        let cur = g.vertices().map(|v| (v, 0)).collect();
        (g, cur)
    }

    #[test]
    fn cliques_spread_with_the_heavier_clique_first() {
        let (g, cur) = cliques();
        let t = target(&TargetInput { graph: &g, current: &cur, base: vec![0; 3], drives: 3, capacity: 1 << 20 }, |_| 4096).unwrap();
        assert_eq!(t.conflicts_after, 0);
        assert_eq!(t.conflicts_before, 3 * 5 + 3);
        assert_eq!(t.moves.len(), 4, "two units of each clique leave drive 0");
        assert_eq!(t.bytes(), 4 * 4096);
        assert!(t.moves[..2].iter().all(|m| m.vertex < 10 && m.benefit == 10), "{:?}", t.moves);
        assert!(t.moves[2..].iter().all(|m| m.vertex >= 10 && m.benefit == 2), "{:?}", t.moves);
        let mut t2 = t.clone();
        t2.truncate_bytes(2 * 4096 + 100);
        assert_eq!(t2.moves, t.moves[..2].to_vec());
    }

    #[test]
    fn a_conflict_free_placement_moves_nothing() {
        let (g, _) = cliques();
        let cur: HashMap<Vertex, usize> = g.vertices().map(|v| (v, (v % 3) as usize)).collect();
        let t = target(&TargetInput { graph: &g, current: &cur, base: vec![0; 3], drives: 3, capacity: 1 << 20 }, |_| 4096).unwrap();
        assert_eq!((t.moves.len(), t.conflicts_before, t.conflicts_after), (0, 0, 0));
    }
}
