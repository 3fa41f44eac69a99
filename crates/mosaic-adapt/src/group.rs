//! Grouping sequential units for HDDs (the paper's §3.5).  Spreading
//! correlated units over drives buys concurrency, but on a disk it can
//! also break a sequential run into random I/O.  So before planning,
//! runs of sequential, correlated units on the same drive become one
//! group vertex that moves as a whole; planning then spreads groups.
//!
//! ```text
//!   unit    10  11  12 │ 13  14  15  16      20  21
//!   drive    0   0   0 │  1   1   1   1       0   0
//!   edge      ─── ───  │   ─── ─── ───          ·      ─── : {u, u+1} has weight
//!   groups  [10  11  12][13  14  15][16]    [20][21]  max 3 units per group
//!
//!   12|13 split: other drive.  15|16: cap.  20|21: not correlated.
//! ```
//!
//! Run rule: scan the graph's units in ascending order; a run continues
//! from unit `u` to `u + 1` while `u + 1` is on the same drive, the edge
//! `{u, u + 1}` has positive weight (the two are correlated, not just
//! adjacent), and the run's bytes stay within the maximum group size;
//! otherwise `u + 1` starts a new run.  Greedy from the low end: simple,
//! deterministic, and it never splits a run that fits.  A unit larger
//! than the maximum on its own is a group of one.
//!
//! A group vertex's id is its lowest unit number, so ungrouped units keep
//! their own id and the grouped graph is the paper's hybrid graph of
//! single-unit and group vertices.  Edges between groups carry the summed
//! weights of their members' edges; edges inside a group vanish.

use std::collections::{BTreeMap, HashMap};

use crate::graph::{Graph, Vertex};

/// Why grouping could not be done.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GroupError {
    #[error("the drive model needs a finite, non-negative {0}, got {1}")]
    BadDriveModel(&'static str, f64),
    #[error("maximum group size {0} bytes does not fit in u64")]
    GroupTooLarge(f64),
    #[error("unit {0} is in the correlation graph but has no drive in the placement")]
    Unplaced(Vertex),
}

/// The largest group worth keeping together: the bytes the drive can
/// transfer sequentially in the time a random access would cost beyond
/// an average one (worst-case minus average-case positioning time).
/// Larger groups spend more time transferring than they save positioning,
/// and so work against concurrency.  The paper's drive gives 512 KiB.
/// Rounded to the nearest byte (the inputs are measurements, and float
/// products like 0.005 × 100 MiB/s land a hair either side of the exact
/// value).
pub fn max_group_bytes(positioning_time_difference_seconds: f64, transfer_rate_bytes_per_s: f64) -> Result<u64, GroupError> {
    let t = non_negative("positioning time difference", positioning_time_difference_seconds)?;
    let r = non_negative("transfer rate", transfer_rate_bytes_per_s)?;
    let bytes = (t * r).round();
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(GroupError::GroupTooLarge(bytes));
    }
    Ok(bytes as u64)
}

fn non_negative(what: &'static str, x: f64) -> Result<f64, GroupError> {
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(GroupError::BadDriveModel(what, x))
    }
}

/// The grouped view of a graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grouping {
    /// Edges between group vertices (member weights summed).  A group
    /// whose edges were all internal has no vertex here.
    pub graph: Graph,
    /// Every group (singletons too) by id: its member units, ascending.
    pub members: BTreeMap<Vertex, Vec<Vertex>>,
    /// Each unit's group id.
    pub group_of: HashMap<Vertex, Vertex>,
    /// Each group's bytes: the sum of its members'.
    pub sizes: HashMap<Vertex, u64>,
    /// Each group's drive: the one all its members share.
    pub placement: HashMap<Vertex, usize>,
}

impl Grouping {
    /// Map a placement of groups (e.g. a plan over `self.graph`) back to
    /// units: every member goes where its group goes.  Groups absent from
    /// `group_placement` keep their own drive, since a plan only covers
    /// groups that still have edges after grouping.
    pub fn expand(&self, group_placement: &HashMap<Vertex, usize>) -> HashMap<Vertex, usize> {
        let mut units = HashMap::new();
        for (g, members) in &self.members {
            if let Some(&d) = group_placement.get(g).or_else(|| self.placement.get(g)) {
                units.extend(members.iter().map(|&u| (u, d)));
            }
        }
        units
    }
}

/// Group the graph's units (see the module docs for the run rule).
/// Every graph vertex must have a drive in `placement`.
pub fn group(
    graph: &Graph,
    placement: &HashMap<Vertex, usize>,
    sizes: impl Fn(Vertex) -> u64,
    max_group_bytes: u64,
) -> Result<Grouping, GroupError> {
    let mut units: Vec<Vertex> = graph.vertices().collect();
    units.sort_unstable();
    let runs = runs(graph, placement, &sizes, &units, max_group_bytes)?;
    Ok(assemble(graph, runs))
}

/// One run under construction: members, bytes and drive.
struct Run {
    members: Vec<Vertex>,
    bytes: u64,
    drive: usize,
}

impl Run {
    /// Whether unit `u` (of `w` bytes, on `drive`) continues this run.
    fn takes(&self, graph: &Graph, u: Vertex, w: u64, drive: usize, max: u64) -> bool {
        let last = self.members[self.members.len() - 1];
        last.checked_add(1) == Some(u)
            && drive == self.drive
            && graph.weight(last, u) > 0
            && self.bytes.checked_add(w).is_some_and(|b| b <= max)
    }
}

/// Split the ascending units into runs.
fn runs(
    graph: &Graph,
    placement: &HashMap<Vertex, usize>,
    sizes: &dyn Fn(Vertex) -> u64,
    units: &[Vertex],
    max: u64,
) -> Result<Vec<Run>, GroupError> {
    let mut out: Vec<Run> = Vec::new();
    for &u in units {
        let &drive = placement.get(&u).ok_or(GroupError::Unplaced(u))?;
        let w = sizes(u);
        match out.last_mut() {
            Some(run) if run.takes(graph, u, w, drive, max) => {
                run.members.push(u);
                run.bytes += w; // checked in `takes`
            }
            _ => out.push(Run { members: vec![u], bytes: w, drive }),
        }
    }
    Ok(out)
}

/// Build the grouped graph and the maps from the runs.
fn assemble(graph: &Graph, runs: Vec<Run>) -> Grouping {
    let mut g = Grouping {
        graph: Graph::new(),
        members: BTreeMap::new(),
        group_of: HashMap::new(),
        sizes: HashMap::new(),
        placement: HashMap::new(),
    };
    for run in runs {
        let id = run.members[0];
        g.group_of.extend(run.members.iter().map(|&u| (u, id)));
        g.sizes.insert(id, run.bytes);
        g.placement.insert(id, run.drive);
        g.members.insert(id, run.members);
    }
    for (a, b, w) in graph.edges() {
        g.graph.add(g.group_of[&a], g.group_of[&b], w); // self-pairs dropped
    }
    g
}
