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
use std::hash::{BuildHasherDefault, Hasher};

/// A hash map keyed by vertices with a fast integer hasher (SipHash's
/// flooding resistance buys nothing for unit numbers from our own trace).
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<VertexHasher>>;

/// splitmix64's finaliser: vertex ids are often consecutive unit numbers,
/// and hashbrown needs entropy in both the high and the low bits.
#[derive(Default)]
pub struct VertexHasher(u64);

impl Hasher for VertexHasher {
    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.rotate_left(32) ^ n;
    }
}

/// A vertex: a remap unit number, or a group id.
pub type Vertex = u64;

/// An undirected graph with `u64` edge weights and no self-loops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    adj: FastMap<Vertex, FastMap<Vertex, u64>>,
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
