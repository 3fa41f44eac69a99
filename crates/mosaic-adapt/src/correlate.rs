//! Block correlation (the paper's §3.2): every pair of units in a
//! transaction adds 1 to that edge of the correlation graph (the FIM
//! result for set size 2, Fig. 2b–c).
//!
//! * [`sequential`] — the Sequential Block Correlator (SBC).
//! * [`mbc`] — the Multithreaded Block Correlator after Algorithm 1.
//!
//! Both count into the same working structure — adjacency maps keyed by
//! the smaller vertex of each pair, with a fast integer hasher — and
//! convert it to a [`Graph`] at the end, so the SBC is a fair baseline:
//! the MBC differs only by threads and locks.  Storing each edge once
//! (under its smaller end) replaces Algorithm 1's second half (lines
//! 11–18, the reverse direction): [`Graph::add`] writes both directions
//! during the final conversion, and the locked work is halved.
//!
//! MBC design:
//! * Assignment: the paper's scheme (ii), transactions handed out in
//!   arrival order through a shared atomic counter, which it found
//!   balances load better than static chunks (transaction sizes vary from
//!   1 unit to the cap).  Each increment claims [`CLAIM`] consecutive
//!   transactions rather than one, since most real transactions are tiny.
//! * Locking: the working maps are split into [`SHARDS`] shards by a hash
//!   of the vertex, each behind a `parking_lot::Mutex`.  A thread
//!   enumerates its claimed transactions' pairs into per-shard buffers,
//!   then locks each touched shard once and applies all its updates —
//!   coarser than the paper's one lock per vertex's batch (a shard holds
//!   the batches of every vertex that hashes to it), never per pair.
//!
//! The result equals the SBC's for any input (the counts are sums, so
//! order does not matter), including unsorted or duplicated transactions.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use crate::graph::{Graph, Vertex};
use crate::txn::Txn;

/// Number of lock shards of the MBC's working maps: many more than
/// threads, so two threads rarely want the same shard.
pub const SHARDS: usize = 256;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

/// Most threads [`mbc`] uses; more are clamped to this.
pub const MAX_THREADS: usize = 256;

use crate::graph::FastMap;

/// Edge counts keyed by the smaller vertex, then the larger one.
type Counts = FastMap<Vertex, FastMap<Vertex, u64>>;

/// The shard owning the edges whose smaller end is `v` (Fibonacci hashing,
/// independent of the map hasher so one shard's keys still spread in it).
fn shard_of(v: Vertex) -> usize {
    (v.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SHARD_BITS)) as usize
}

/// Call `f(lo, hi)` for every pair of positions `i < j` of `t` holding
/// different vertices, with `lo < hi`: the pairs the SBC counts.
fn for_each_pair(t: &[Vertex], mut f: impl FnMut(Vertex, Vertex)) {
    for (i, &a) in t.iter().enumerate() {
        for &b in &t[i + 1..] {
            if a != b {
                f(a.min(b), a.max(b));
            }
        }
    }
}

/// Sequential Block Correlator: every pair of every transaction adds 1.
pub fn sequential(txns: &[Txn]) -> Graph {
    let mut counts = Counts::default();
    for t in txns {
        for_each_pair(t, |lo, hi| *counts.entry(lo).or_default().entry(hi).or_insert(0) += 1);
    }
    to_graph(std::iter::once(counts))
}

/// The working maps as a [`Graph`]; every edge appears in exactly one map.
fn to_graph(parts: impl Iterator<Item = Counts>) -> Graph {
    let mut g = Graph::new();
    for counts in parts {
        for (lo, m) in counts {
            for (hi, w) in m {
                g.add(lo, hi, w);
            }
        }
    }
    g
}

/// Multithreaded Block Correlator (Algorithm 1; see the module doc for the
/// assignment and locking).  `threads` counts the calling thread, which
/// works too; 0 is taken as 1, more than [`MAX_THREADS`] or than there are
/// transactions is clamped.  If the OS refuses a thread, the others do its
/// share — the result is the same.
pub fn mbc(txns: &[Txn], threads: usize) -> Graph {
    let threads = threads.clamp(1, MAX_THREADS).min(txns.len().max(1));
    let shards: Vec<Mutex<Counts>> = (0..SHARDS).map(|_| Mutex::new(Counts::default())).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 1..threads {
            // A failed spawn only means fewer helpers.
            let _ = std::thread::Builder::new().spawn_scoped(s, || worker(txns, &next, &shards));
        }
        worker(txns, &next, &shards);
    });
    to_graph(shards.into_iter().map(Mutex::into_inner))
}

/// Transactions a thread claims per counter increment.  Small, so load
/// stays balanced (a capped transaction has at most a few thousand pairs),
/// but more than 1: real traces are mostly one- and two-unit transactions,
/// where a counter increment and a lock per transaction would cost more
/// than the pairs.
pub const CLAIM: usize = 8;

/// One MBC thread: claim [`CLAIM`] transactions at a time until none are
/// left; enumerate their pairs into per-shard buffers, then lock each
/// touched shard once for the whole claim.
fn worker(txns: &[Txn], next: &AtomicUsize, shards: &[Mutex<Counts>]) {
    let mut buffers: Vec<Vec<(Vertex, Vertex)>> = vec![Vec::new(); SHARDS];
    let mut touched: Vec<usize> = Vec::new();
    loop {
        let start = next.fetch_add(CLAIM, Ordering::Relaxed);
        let Some(claim) = txns.get(start..start.saturating_add(CLAIM).min(txns.len())) else { break };
        for t in claim {
            for_each_pair(t, |lo, hi| {
                let s = shard_of(lo);
                if buffers[s].is_empty() {
                    touched.push(s);
                }
                buffers[s].push((lo, hi));
            });
        }
        for s in touched.drain(..) {
            apply(&mut shards[s].lock(), &buffers[s]);
            buffers[s].clear();
        }
    }
}

/// Add a shard's buffered pairs; a run of pairs with the same smaller end
/// (one vertex's batch, Algorithm 1 lines 7–9) looks its map up once.
fn apply(counts: &mut Counts, pairs: &[(Vertex, Vertex)]) {
    for run in pairs.chunk_by(|a, b| a.0 == b.0) {
        let Some(&(lo, _)) = run.first() else { continue };
        let m = counts.entry(lo).or_default();
        for &(_, hi) in run {
            *m.entry(hi).or_insert(0) += 1;
        }
    }
}

/// One row of [`speedup`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Speedup {
    /// MBC threads.
    pub threads: usize,
    /// Wall-clock seconds of one MBC run (including the conversion).
    pub seconds: f64,
    pub txns_per_sec: f64,
    /// SBC seconds / MBC seconds.
    pub speedup: f64,
}

/// Time the SBC once, then the MBC once per entry of `threads`, by wall
/// clock.  For reports only: the numbers depend on the machine and its
/// load, so never assert on them.
pub fn speedup(txns: &[Txn], threads: &[usize]) -> Vec<Speedup> {
    let base = seconds(|| sequential(txns));
    threads
        .iter()
        .map(|&n| {
            let s = seconds(|| mbc(txns, n));
            Speedup { threads: n, seconds: s, txns_per_sec: txns.len() as f64 / s, speedup: base / s }
        })
        .collect()
}

/// Wall-clock seconds of `f`, at least 1 ns so rates stay finite.
fn seconds(f: impl FnOnce() -> Graph) -> f64 {
    let t = Instant::now();
    std::hint::black_box(f());
    t.elapsed().as_secs_f64().max(1e-9)
}
