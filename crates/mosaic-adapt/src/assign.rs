//! Colour-to-drive assignment with minimum data movement (the paper's
//! §3.4).  Planning returns colours, not drives: any permutation of the
//! colours is an equally good layout, but they move different amounts of
//! data.  P1 (start colours from the real drives) makes the identity
//! mapping a good guess; this module finds the exact optimum and reports
//! how far the guess was from it.
//!
//! ```text
//!   cost[c][d] = bytes coloured c that do not already sit on drive d
//!
//!               drive 0  drive 1           identity  0→0, 1→1 : 3 + 2 = 5
//!   colour 0  [    3        1   ]          optimum   0→1, 1→0 : 1 + 1 = 2
//!   colour 1  [    1        2   ]
//! ```
//!
//! Picking one drive per colour with the least total cost is the
//! assignment problem; the paper solves it as a min-cost flow
//! (source → colour → drive → sink, unit capacities), which on this
//! bipartite graph is exactly what the Hungarian (Kuhn–Munkres) algorithm
//! computes in O(N³).  We use `pathfinding`'s implementation.

use std::collections::HashMap;

use pathfinding::kuhn_munkres::kuhn_munkres_min;
use pathfinding::matrix::Matrix;

use crate::graph::Vertex;

/// The chosen mapping and what it, and the identity, would move.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Assignment {
    /// `mapping[c]` is the drive colour c goes to; a permutation of `0..N`.
    pub mapping: Vec<usize>,
    /// Bytes moved under `mapping` (the minimum).
    pub bytes_moved: u64,
    /// Bytes moved under the identity mapping (P1's answer).
    pub identity_bytes_moved: u64,
}

impl Assignment {
    /// `(identity - optimal) / optimal`: how much extra data P1's identity
    /// mapping moves (the paper reports 1–2 %).  `Some(0.0)` when both are
    /// 0; `None` when the optimum moves nothing but identity does (the
    /// ratio is undefined).
    pub fn identity_gap(&self) -> Option<f64> {
        match (self.identity_bytes_moved, self.bytes_moved) {
            (0, 0) => Some(0.0),
            (_, 0) => None,
            (id, opt) => Some(id.saturating_sub(opt) as f64 / opt as f64),
        }
    }
}

/// Why an assignment could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignError {
    #[error("vertex {0} is coloured but has no drive in the original placement")]
    Missing(Vertex),
    #[error("vertex {vertex} has {what} {index}, but there are only {n} drives")]
    OutOfRange { vertex: Vertex, what: &'static str, index: usize, n: usize },
    #[error("mapping has {got} entries, expected {expected}")]
    MappingLength { expected: usize, got: usize },
    #[error("mapping is not a permutation of the drives (drive {0} is out of range or used twice)")]
    NotPermutation(usize),
    #[error("{0} bytes in all is too large for exact assignment over {1} drives")]
    TooLarge(u64, usize),
}

/// The N×N matrix `cost[c][d]`: bytes of vertices coloured c whose
/// original drive is not d.  Only vertices in `colouring` count; each
/// must have an original drive.
pub fn cost_matrix(
    original: &HashMap<Vertex, usize>,
    colouring: &HashMap<Vertex, usize>,
    sizes: impl Fn(Vertex) -> u64,
    n: usize,
) -> Result<Vec<Vec<u64>>, AssignError> {
    let mut class = vec![0u64; n];
    let mut stay = vec![vec![0u64; n]; n];
    for (&v, &c) in colouring {
        let d = *original.get(&v).ok_or(AssignError::Missing(v))?;
        check_index(v, "colour", c, n)?;
        check_index(v, "original drive", d, n)?;
        let w = sizes(v);
        class[c] = class[c].checked_add(w).ok_or(AssignError::TooLarge(u64::MAX, n))?;
        stay[c][d] += w; // ≤ class[c], cannot overflow
    }
    Ok((0..n).map(|c| (0..n).map(|d| class[c] - stay[c][d]).collect()).collect())
}

fn check_index(vertex: Vertex, what: &'static str, index: usize, n: usize) -> Result<(), AssignError> {
    if index < n {
        Ok(())
    } else {
        Err(AssignError::OutOfRange { vertex, what, index, n })
    }
}

/// Bytes moved if colour c goes to drive `mapping[c]`; `None` when the
/// mapping does not fit the matrix.
pub fn mapping_cost(cost: &[Vec<u64>], mapping: &[usize]) -> Option<u64> {
    if mapping.len() != cost.len() {
        return None;
    }
    mapping.iter().enumerate().try_fold(0u64, |acc, (c, &d)| acc.checked_add(*cost[c].get(d)?))
}

/// The least-movement mapping of colours to drives, with the identity's
/// cost for comparison.  See `cost_matrix` for which vertices count.
pub fn assign(
    original: &HashMap<Vertex, usize>,
    colouring: &HashMap<Vertex, usize>,
    sizes: impl Fn(Vertex) -> u64,
    n: usize,
) -> Result<Assignment, AssignError> {
    let cost = cost_matrix(original, colouring, sizes, n)?;
    let identity: Vec<usize> = (0..n).collect();
    let identity_bytes_moved = mapping_cost(&cost, &identity).unwrap_or(u64::MAX);
    let mapping = hungarian(&cost)?;
    let bytes_moved = mapping_cost(&cost, &mapping).unwrap_or(u64::MAX);
    Ok(Assignment { mapping, bytes_moved, identity_bytes_moved })
}

/// Solve the assignment exactly.  `kuhn_munkres_min` panics on i64
/// overflow, so refuse inputs whose costs could overflow its labels: every
/// entry is at most the total bytes T, and labels stay within a few
/// multiples of N·T, so T ≤ i64::MAX / (4·(N+1)) is safe.
fn hungarian(cost: &[Vec<u64>]) -> Result<Vec<usize>, AssignError> {
    let n = cost.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let total = cost.iter().flat_map(|r| r.iter()).copied().max().unwrap_or(0);
    let limit = (i64::MAX as u64) / (4 * (n as u64 + 1));
    if total > limit {
        return Err(AssignError::TooLarge(total, n));
    }
    let values: Vec<i64> = cost.iter().flat_map(|r| r.iter()).map(|&x| x as i64).collect();
    let got = values.len();
    let matrix = Matrix::from_vec(n, n, values).map_err(|_| AssignError::MappingLength { expected: n * n, got })?;
    Ok(kuhn_munkres_min(&matrix).1)
}

/// The final placement: each vertex goes to the drive its colour maps to.
pub fn apply(colouring: &HashMap<Vertex, usize>, mapping: &[usize]) -> Result<HashMap<Vertex, usize>, AssignError> {
    check_permutation(mapping)?;
    colouring
        .iter()
        .map(|(&v, &c)| match mapping.get(c) {
            Some(&d) => Ok((v, d)),
            None => Err(AssignError::OutOfRange { vertex: v, what: "colour", index: c, n: mapping.len() }),
        })
        .collect()
}

/// A mapping must send the N colours to N distinct drives in `0..N`;
/// otherwise two colours would share a drive and undo the plan.
fn check_permutation(mapping: &[usize]) -> Result<(), AssignError> {
    let mut seen = vec![false; mapping.len()];
    for &d in mapping {
        match seen.get_mut(d) {
            Some(s) if !*s => *s = true,
            _ => return Err(AssignError::NotPermutation(d)),
        }
    }
    Ok(())
}
