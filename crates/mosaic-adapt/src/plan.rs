//! Layout planning as min-conflict bin packing (the paper's §3.3,
//! Algorithm 2): colour the correlation graph with N colours (one per
//! drive) so that correlated vertices land on different drives, without
//! filling any drive past a byte bound W.
//!
//! ```text
//!   before (P1: start from the real layout)   after one pass
//!
//!   drive 0: a b     a─b conflict (w=3)       drive 0:   b
//!   drive 1: c                                drive 1: c
//!   drive 2:                                  drive 2: a      conflicts 3 → 0
//!
//!   a and b tie on TCF, so a (lower id) goes first; drives 1 and 2 both
//!   cost it 0 conflicts and drive 2 is emptier (P4).
//! ```
//!
//! Proper N-colouring is NP-complete and usually infeasible (|V| ≫ N), so
//! this is *soft* colouring: minimise the total weight of same-colour
//! edges.  The heuristic is the MCBP local search with the paper's four
//! properties:
//!
//! * P1 — the initial colouring is the current placement, so a vertex
//!   that is already fine never moves;
//! * P2 — vertices are visited in descending total correlation frequency
//!   (ties by vertex id, for determinism), so hot blocks choose first;
//! * P3 — the conflicts of colour c for v are the summed weights of v's
//!   edges to neighbours coloured c, so frequent correlations count more;
//! * P4 — on equal conflicts the colour with more free capacity wins, so
//!   load stays balanced.
//!
//! Passes repeat until the total conflict weight improves by less than
//! ε (default 5 %) of the previous pass, reaches 0, or a pass bound hits.

use std::cmp::Reverse;
use std::collections::HashMap;

use crate::graph::{Graph, Vertex};

/// The paper's stopping threshold: stop once a pass removes less than 5 %
/// of the remaining conflict weight.
pub const DEFAULT_EPSILON: f64 = 0.05;

/// A safety bound on passes; the paper needed none, but each pass is
/// O(|V|·N + |E|) and an adversarial graph should not run unbounded.
pub const DEFAULT_MAX_PASSES: usize = 64;

/// The knobs of one planning run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlanConfig {
    /// N: the number of colours (drives); colours are `0..colours`.
    pub colours: usize,
    /// W: the most bytes any drive may hold after a move (inclusive).
    pub capacity: u64,
    /// ε: the relative improvement below which passes stop.
    pub epsilon: f64,
    /// The most passes to run.
    pub max_passes: usize,
    /// Also apply the P4 tie rule to vertices with no conflicts at all
    /// (literal Algorithm 2).  Off by default: such moves only rebalance
    /// fill, cost migration bytes and do nothing for concurrency, and the
    /// underlying MCBP heuristic only ever picks vertices in conflict.
    pub rebalance: bool,
}

impl PlanConfig {
    /// N colours, bound W, and the paper's defaults otherwise.
    pub fn new(colours: usize, capacity: u64) -> PlanConfig {
        PlanConfig { colours, capacity, epsilon: DEFAULT_EPSILON, max_passes: DEFAULT_MAX_PASSES, rebalance: false }
    }
}

/// A vertex whose drive differs between the old placement and the plan:
/// the data migration the plan asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Move {
    pub vertex: Vertex,
    pub from: usize,
    pub to: usize,
}

/// One recolouring made while visiting a vertex (the net result of the
/// line 14–18 scan), with the numbers that justified it, so callers and
/// tests can check every decision after the fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Step {
    /// 1-based pass number.
    pub pass: usize,
    pub vertex: Vertex,
    pub from: usize,
    pub to: usize,
    /// The vertex's size in bytes.
    pub size: u64,
    /// Conflict weight of `vertex` on `from` and on `to`, before the step.
    pub conflicts_from: u64,
    pub conflicts_to: u64,
    /// Bytes on `from` (including `vertex`) and on `to`, before the step.
    pub fill_from: u64,
    pub fill_to: u64,
}

/// The result of planning.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    /// The new colour of every graph vertex (and only graph vertices).
    pub placement: HashMap<Vertex, usize>,
    /// Total weight of same-colour edges before and after.
    pub conflicts_before: u64,
    pub conflicts_after: u64,
    /// Passes run (0 when the input was already conflict-free).
    pub passes: usize,
    /// `history[0]` is `conflicts_before`, `history[p]` the total after
    /// pass p; so `history.len() == passes + 1`.
    pub history: Vec<u64>,
    /// Net moves (old drive → planned drive), sorted by vertex.
    pub moves: Vec<Move>,
    /// Bytes of the vertices in `moves`.
    pub bytes_moved: u64,
    /// Every recolouring in order (a vertex may appear more than once).
    pub steps: Vec<Step>,
    /// Final bytes per drive: the base fill plus planned graph vertices.
    pub fill: Vec<u64>,
}

/// Why a plan could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("no colours: planning needs at least one drive")]
    NoColours,
    #[error("vertex {0} is in the correlation graph but has no drive in the current placement")]
    Unplaced(Vertex),
    #[error("vertex {vertex} is placed on drive {colour}, but there are only {colours} drives")]
    ColourOutOfRange { vertex: Vertex, colour: usize, colours: usize },
    #[error("base fill lists {got} drives, expected one per colour ({expected})")]
    FillLength { expected: usize, got: usize },
    #[error("epsilon must be finite and >= 0, got {0}")]
    BadEpsilon(f64),
    #[error("drive {0} would hold more than u64::MAX bytes")]
    FillOverflow(usize),
}

/// Total weight of edges whose two ends have the same colour.  Edges with
/// an end missing from `placement` are not conflicts (nothing is known
/// about where that end lives).  Saturates rather than overflowing.
pub fn conflicts(graph: &Graph, placement: &HashMap<Vertex, usize>) -> u64 {
    graph
        .edges()
        .filter(|&(a, b, _)| matches!((placement.get(&a), placement.get(&b)), (Some(x), Some(y)) if x == y))
        .fold(0u64, |acc, (_, _, w)| acc.saturating_add(w))
}

/// Algorithm 2 lines 14–18 for one vertex: scan colours `0..N` in order
/// and recolour whenever colour c beats the vertex's *current* colour
/// (which changes as the scan accepts), exactly as the paper's loop does.
/// Returns the final colour; `current` when nothing beats it.
///
/// `confs[c]` is the vertex's conflict weight on c; `fill[c]` the bytes on
/// c, where `fill[current]` includes the vertex itself (the paper's
/// `caps`).  c beats the current colour `k` when the vertex fits on c,
/// `fill[c] + size <= capacity`, and either
///
/// * `confs[c] < confs[k]` — strictly fewer conflicts, or
/// * `confs[c] == confs[k]` and `fill[c] + size < fill[k]` — a tie, and c
///   *after* receiving the vertex is still less used than k is now (P4).
///
/// Reading of line 15: the paper writes `caps[c] + w < W`; we treat W as an
/// inclusive bound ("the most bytes a drive may hold"), i.e. `<=`, so a
/// drive can be filled to exactly W.  The tie test is kept literally: it
/// compares capacities *used*, and picks the less-used colour; the `+ w`
/// margin means a move must lower the larger of the two fills, which
/// rules out ping-ponging between two equally loaded drives.  We also
/// apply the W test to ties (the paper leaves it implicit: a tie move is
/// only possible when `fill[k] > fill[c] + w`, which is ≤ W unless k was
/// already overfull), so no move ever takes a drive past W.
///
/// Malformed input (lengths differ, `current` out of range) returns
/// `current`: no move.
pub fn choose_colour(confs: &[u64], fill: &[u64], current: usize, size: u64, capacity: u64) -> usize {
    if confs.len() != fill.len() || current >= confs.len() {
        return current;
    }
    let mut caps = fill.to_vec();
    let mut clr = current;
    for c in 0..confs.len() {
        if c != clr && beats(confs[c], confs[clr], caps[c], caps[clr], size, capacity) {
            caps[clr] = caps[clr].saturating_sub(size);
            caps[c] += size; // cannot overflow: checked in `beats`
            clr = c;
        }
    }
    clr
}

/// Line 15 for one candidate colour (see `choose_colour`).
fn beats(conf_c: u64, conf_k: u64, fill_c: u64, fill_k: u64, size: u64, capacity: u64) -> bool {
    let Some(after) = fill_c.checked_add(size) else { return false };
    after <= capacity && (conf_c < conf_k || (conf_c == conf_k && after < fill_k))
}

/// Plan a new placement: see the module docs.  `sizes` gives each graph
/// vertex's bytes; `base_fill[d]` the bytes on drive d that are *not* in
/// the graph (so capacities start from the real fill, line 2).  Placement
/// entries for vertices outside the graph are ignored: their bytes belong
/// in `base_fill`.  A drive that already starts above W is allowed; moves
/// only ever take bytes *off* it.
pub fn plan(
    graph: &Graph,
    placement: &HashMap<Vertex, usize>,
    sizes: impl Fn(Vertex) -> u64,
    base_fill: &[u64],
    config: &PlanConfig,
) -> Result<Plan, PlanError> {
    check_config(config, base_fill)?;
    let mut work = Work::build(graph, placement, &sizes, base_fill, config.colours)?;
    let original = work.colour.clone();
    let before = work.total_conflicts();
    let mut history = vec![before];
    let mut steps = Vec::new();
    while history.len() <= config.max_passes && before_pass_ok(&history) {
        let made = work.pass(history.len(), config, &mut steps);
        let prev = history[history.len() - 1];
        let now = work.total_conflicts();
        history.push(now);
        if made == 0 || !improved_enough(prev, now, config.epsilon) {
            break;
        }
    }
    Ok(work.finish(&original, history, steps))
}

/// `plan` with every vertex one unit in size and no data outside the
/// graph: W is then a count of vertices per drive.
pub fn plan_units(graph: &Graph, placement: &HashMap<Vertex, usize>, config: &PlanConfig) -> Result<Plan, PlanError> {
    plan(graph, placement, |_| 1, &vec![0; config.colours], config)
}

fn check_config(config: &PlanConfig, base_fill: &[u64]) -> Result<(), PlanError> {
    if config.colours == 0 {
        return Err(PlanError::NoColours);
    }
    if !(config.epsilon.is_finite() && config.epsilon >= 0.0) {
        return Err(PlanError::BadEpsilon(config.epsilon));
    }
    if base_fill.len() != config.colours {
        return Err(PlanError::FillLength { expected: config.colours, got: base_fill.len() });
    }
    Ok(())
}

/// A pass is worth running only while conflicts remain: a conflict-free
/// colouring is what BLOP asks for, so P1 says leave it alone.
fn before_pass_ok(history: &[u64]) -> bool {
    history.last().is_some_and(|&c| c > 0)
}

/// Line 19: keep going while the last pass removed at least ε of the
/// conflict weight before it, and some conflict is left.
fn improved_enough(prev: u64, now: u64, epsilon: f64) -> bool {
    now > 0 && (prev.saturating_sub(now) as f64) >= epsilon * prev as f64
}

/// The graph flattened into arrays indexed by visiting order (P2), so a
/// pass is plain indexing rather than hash lookups.
struct Work {
    order: Vec<Vertex>,
    colour: Vec<usize>,
    size: Vec<u64>,
    adj: Vec<Vec<(usize, u64)>>,
    caps: Vec<u64>,
    confs: Vec<u64>,
}

impl Work {
    fn build(
        graph: &Graph,
        placement: &HashMap<Vertex, usize>,
        sizes: &dyn Fn(Vertex) -> u64,
        base_fill: &[u64],
        n: usize,
    ) -> Result<Work, PlanError> {
        let order = by_tcf(graph);
        let index: HashMap<Vertex, usize> = order.iter().enumerate().map(|(i, &v)| (v, i)).collect();
        let colour = order.iter().map(|&v| colour_of(v, placement, n)).collect::<Result<Vec<_>, _>>()?;
        let size: Vec<u64> = order.iter().map(|&v| sizes(v)).collect();
        let adj = order.iter().map(|&v| graph.neighbours(v).map(|(u, w)| (index[&u], w)).collect()).collect();
        let caps = initial_caps(&colour, &size, base_fill)?;
        Ok(Work { order, colour, size, adj, caps, confs: vec![0; n] })
    }

    /// Lines 11–13: the conflict weight of vertex `i` on every colour.
    fn fill_confs(&mut self, i: usize) {
        self.confs.iter_mut().for_each(|c| *c = 0);
        for &(j, w) in &self.adj[i] {
            let c = &mut self.confs[self.colour[j]];
            *c = c.saturating_add(w);
        }
    }

    /// Lines 9–18 once over all vertices; returns how many were recoloured.
    fn pass(&mut self, pass: usize, config: &PlanConfig, steps: &mut Vec<Step>) -> usize {
        let mut made = 0;
        for i in 0..self.order.len() {
            self.fill_confs(i);
            let from = self.colour[i];
            if self.confs[from] == 0 && !config.rebalance {
                continue;
            }
            let to = choose_colour(&self.confs, &self.caps, from, self.size[i], config.capacity);
            if to != from {
                steps.push(self.step(pass, i, from, to));
                self.recolour(i, from, to);
                made += 1;
            }
        }
        made
    }

    fn step(&self, pass: usize, i: usize, from: usize, to: usize) -> Step {
        Step {
            pass,
            vertex: self.order[i],
            from,
            to,
            size: self.size[i],
            conflicts_from: self.confs[from],
            conflicts_to: self.confs[to],
            fill_from: self.caps[from],
            fill_to: self.caps[to],
        }
    }

    /// Lines 16–18.
    fn recolour(&mut self, i: usize, from: usize, to: usize) {
        let w = self.size[i];
        self.caps[from] = self.caps[from].saturating_sub(w);
        self.caps[to] = self.caps[to].saturating_add(w);
        self.colour[i] = to;
    }

    fn total_conflicts(&self) -> u64 {
        let mut total = 0u64;
        for (i, nbrs) in self.adj.iter().enumerate() {
            for &(j, w) in nbrs.iter().filter(|&&(j, _)| j > i) {
                if self.colour[i] == self.colour[j] {
                    total = total.saturating_add(w);
                }
            }
        }
        total
    }

    fn finish(self, original: &[usize], history: Vec<u64>, steps: Vec<Step>) -> Plan {
        let mut moves = Vec::new();
        let mut bytes_moved = 0u64;
        for (i, (&from, &to)) in original.iter().zip(&self.colour).enumerate() {
            if from != to {
                moves.push(Move { vertex: self.order[i], from, to });
                bytes_moved = bytes_moved.saturating_add(self.size[i]);
            }
        }
        moves.sort_by_key(|m| m.vertex);
        let placement = self.order.iter().copied().zip(self.colour.iter().copied()).collect();
        Plan {
            placement,
            conflicts_before: history[0],
            conflicts_after: history[history.len() - 1],
            passes: history.len() - 1,
            history,
            moves,
            bytes_moved,
            steps,
            fill: self.caps,
        }
    }
}

/// Lines 3–7: vertices by descending TCF, ties by ascending id.
fn by_tcf(graph: &Graph) -> Vec<Vertex> {
    let mut keyed: Vec<(Reverse<u64>, Vertex)> = graph.vertices().map(|v| (Reverse(graph.tcf(v)), v)).collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, v)| v).collect()
}

/// Line 1 (P1): a vertex's starting colour is its current drive.
fn colour_of(v: Vertex, placement: &HashMap<Vertex, usize>, n: usize) -> Result<usize, PlanError> {
    match placement.get(&v) {
        None => Err(PlanError::Unplaced(v)),
        Some(&c) if c >= n => Err(PlanError::ColourOutOfRange { vertex: v, colour: c, colours: n }),
        Some(&c) => Ok(c),
    }
}

/// Line 2: each drive's bytes, from outside the graph plus its vertices.
fn initial_caps(colour: &[usize], size: &[u64], base_fill: &[u64]) -> Result<Vec<u64>, PlanError> {
    let mut caps = base_fill.to_vec();
    for (&c, &w) in colour.iter().zip(size) {
        caps[c] = caps[c].checked_add(w).ok_or(PlanError::FillOverflow(c))?;
    }
    Ok(caps)
}
