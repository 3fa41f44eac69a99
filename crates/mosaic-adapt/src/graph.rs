//! The weighted correlation graph: one vertex per remap unit (or per
//! group of units, see `group`), one undirected edge per pair of vertices
//! requested together, weighted by how often (the paper's Fig. 2c).
//!
//! ```text
//!   transactions  {1,2} {1,3,4} {4,5} {1,2}      graph   1 ──2── 2
//!                                                        │╲
//!   pairs         (1,2)×2 (1,3) (1,4) (3,4) (4,5)        1 1
//!                                                        3─1─4──1── 5
//! ```
//!
//! Stored as adjacency maps in both directions, so a vertex's neighbours
//! and its total correlation frequency (TCF, the sum of its edge weights)
//! are one lookup.  Vertices are `u64` ids; the caller says what they
//! name.

use std::collections::HashMap;

/// A vertex: a remap unit number, or a group id.
pub type Vertex = u64;

/// An undirected graph with `u64` edge weights and no self-loops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    adj: HashMap<Vertex, HashMap<Vertex, u64>>,
}

impl Graph {
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Add `w` to the weight of edge `{a, b}` (created at 0); a self-pair
    /// is ignored.
    pub fn add(&mut self, a: Vertex, b: Vertex, w: u64) {
        if a == b || w == 0 {
            return;
        }
        *self.adj.entry(a).or_default().entry(b).or_insert(0) += w;
        *self.adj.entry(b).or_default().entry(a).or_insert(0) += w;
    }

    /// The weight of edge `{a, b}`, 0 when absent.
    pub fn weight(&self, a: Vertex, b: Vertex) -> u64 {
        self.adj.get(&a).and_then(|m| m.get(&b)).copied().unwrap_or(0)
    }

    /// The neighbours of `v` with their edge weights.
    pub fn neighbours(&self, v: Vertex) -> impl Iterator<Item = (Vertex, u64)> + '_ {
        self.adj.get(&v).into_iter().flat_map(|m| m.iter().map(|(&u, &w)| (u, w)))
    }

    /// Total correlation frequency: the sum of `v`'s edge weights.
    pub fn tcf(&self, v: Vertex) -> u64 {
        self.neighbours(v).map(|(_, w)| w).sum()
    }

    /// Every vertex with at least one edge.
    pub fn vertices(&self) -> impl Iterator<Item = Vertex> + '_ {
        self.adj.keys().copied()
    }

    pub fn vertex_count(&self) -> usize {
        self.adj.len()
    }

    /// Every edge once, as `(a, b, w)` with `a < b`.
    pub fn edges(&self) -> impl Iterator<Item = (Vertex, Vertex, u64)> + '_ {
        self.adj.iter().flat_map(|(&a, m)| m.iter().filter(move |(&b, _)| a < b).map(move |(&b, &w)| (a, b, w)))
    }

    pub fn edge_count(&self) -> usize {
        self.adj.values().map(|m| m.len()).sum::<usize>() / 2
    }

    /// Sum of all edge weights.
    pub fn total_weight(&self) -> u64 {
        self.edges().map(|(_, _, w)| w).sum()
    }

    /// Add every edge of `other` (the union of two partial graphs, e.g.
    /// one per correlator thread).
    pub fn merge(&mut self, other: &Graph) {
        for (a, b, w) in other.edges() {
            self.add(a, b, w);
        }
    }

    /// Only the edges of weight at least `min` (the correlation threshold);
    /// vertices left without edges drop out.
    pub fn at_least(&self, min: u64) -> Graph {
        let mut g = Graph::new();
        for (a, b, w) in self.edges().filter(|e| e.2 >= min) {
            g.add(a, b, w);
        }
        g
    }
}
