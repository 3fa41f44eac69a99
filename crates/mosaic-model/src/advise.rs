//! The stripe-unit advisor (Sect. 4.1 and 4.2 turned into a search).
//!
//! For each candidate stripe unit u, every write of s bytes in the
//! workload's write-size distribution is decomposed the way the planner
//! (`mosaic-core`) would plan it, under the brief's simplification that
//! writes start on a unit boundary which is also a stripe boundary:
//!
//! ```text
//!   units = ceil(s / u)          (the last one holds r = s − (units−1)·u <= u bytes)
//!   full  = units div (n − k)    whole-stripe pieces,  rem = units mod (n − k)
//!   rem > 0:  full FSWs + one partial stripe of rem units (last one r bytes)
//!   rem = 0:  full − 1 FSWs + one stripe of n − k units whose last is r bytes
//!             (an FSW if r = u, otherwise a partial stripe)
//! ```
//!
//! A partial stripe touching t units (t − 1 whole, the last r bytes), code
//! span c = u if t > 1 else r, costs, as in `mosaic-core`'s planner (which
//! plans per in-unit interval):
//!
//! ```text
//!   writes: t − 1 units of u, one of r, k code ranges of c
//!   RMW reads: the same t data ranges + k code ranges of c   (t + k ops)
//!   RCW reads: n − k − t untouched units over c, plus the untouched
//!              u − r tail of the last unit if t > 1 and r < u
//! ```
//!
//! The method is chosen per piece either by fewest reads (operations, then
//! bytes, ties to RCW — the real planner's rule, used by [`advise`]) or by
//! predicted time ([`Choice::Fastest`]).  Every operation costs the drive's
//! isolated random service time for its size; the n drives share the work
//! evenly, so a request occupies the array for (Σ op times)/n and the
//! predicted random-write throughput of the mix is Σ bytes / Σ array time.
//! The unit with the highest prediction wins; exact ties go to the larger
//! unit, because with real (not unit-aligned) starts a larger unit splits
//! fewer writes across a unit boundary (the paper's Fig. 10: 4096 KiB best
//! for RMW-range workloads).  Placement effects (random starts, uneven
//! load) are out of scope here; `mosaic-sim`'s placement-aware estimator
//! covers them.

use std::fmt;

use serde::Serialize;

use crate::{Array, Choice, DriveTiming, Method, ModelError};

/// One candidate unit's prediction.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateScore {
    pub unit: u64,
    /// Predicted array random-write throughput, fewest-reads planner.
    pub throughput_bytes_per_s: f64,
    /// Predicted mean array time per write request (Σ op times / n), ms,
    /// fewest-reads planner: the inverse of the predicted request rate.
    pub mean_service_ms: f64,
    /// The same prediction if each partial stripe used the faster method.
    pub fastest_throughput_bytes_per_s: f64,
    /// Fractions of the stripe updates (fewest reads) per method.
    pub rmw_share: f64,
    pub rcw_share: f64,
    pub fsw_share: f64,
}

/// The advisor's answer.
#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub best_unit: u64,
    /// The method rule the ranking used.
    pub choice: Choice,
    /// Per candidate, in the order given.
    pub per_candidate: Vec<CandidateScore>,
    pub rationale: String,
}

impl Advice {
    /// (unit, predicted throughput bytes/s, predicted mean service ms).
    pub fn table(&self) -> Vec<(u64, f64, f64)> {
        self.per_candidate.iter().map(|c| (c.unit, c.throughput_bytes_per_s, c.mean_service_ms)).collect()
    }
}

/// Powers of two from 4 KiB to 4 MiB that are multiples of (and at least)
/// `block`; `[block]` if there are none.  The paper has no other special
/// unit sizes: its crossovers (e.g. 896 KiB) are *request* sizes, and its
/// experiments are confined to md's power-of-two units >= 4 KiB (Sect. 6.1),
/// which this list matches; the flash page (8 KiB) of Sect. 4.2 is in it.
pub fn default_candidates(block: u64) -> Vec<u64> {
    let block = block.max(1);
    let v: Vec<u64> = (12..=22).map(|e| 1u64 << e).filter(|&u| u >= block && u % block == 0).collect();
    if v.is_empty() {
        vec![block]
    } else {
        v
    }
}

/// One stripe piece of a write: `t` touched units, the last `r` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    t: usize,
    r: u64,
}

/// The stripe pieces of a write of `s` bytes with unit `u` (module docs):
/// (number of whole-stripe FSWs, the remaining piece if any).
fn pieces(a: &Array, s: u64, u: u64) -> (u64, Option<Piece>) {
    let units = s.div_ceil(u);
    let r = s - (units - 1) * u;
    let dd = a.data() as u64;
    let (full, rem) = (units / dd, units % dd);
    if rem > 0 {
        (full, Some(Piece { t: rem as usize, r }))
    } else if r == u {
        (full, None)
    } else {
        (full - 1, Some(Piece { t: a.data(), r }))
    }
}

/// Cost of one piece: (ns of all ops, method).
fn piece_cost(a: &Array, drive: &dyn DriveTiming, u: u64, p: Piece, choice: Choice) -> (f64, Method) {
    let k = a.k as f64;
    let span = if p.t > 1 { u } else { p.r };
    let whole = (p.t - 1) as f64;
    let writes = whole * drive.write_ns(u) + drive.write_ns(p.r) + k * drive.write_ns(span);
    // RMW reads: the data ranges and the code ranges.
    let rmw_ops = p.t + a.k;
    let rmw_bytes = (p.t as u64 - 1) * u + p.r + a.k as u64 * span;
    let rmw_ns = whole * drive.read_ns(u) + drive.read_ns(p.r) + k * drive.read_ns(span);
    // RCW reads: untouched columns over the span, the last unit's tail.
    let tail = p.t > 1 && p.r < u;
    let untouched = a.data() - p.t;
    let rcw_ops = untouched + tail as usize;
    let rcw_bytes = untouched as u64 * span + if tail { u - p.r } else { 0 };
    let rcw_ns = untouched as f64 * drive.read_ns(span) + if tail { drive.read_ns(u - p.r) } else { 0.0 };
    let rmw = match choice {
        Choice::FewestReads => (rmw_ops, rmw_bytes) < (rcw_ops, rcw_bytes),
        Choice::Fastest => rmw_ns < rcw_ns,
    };
    if rmw {
        (rmw_ns + writes, Method::Rmw)
    } else {
        (rcw_ns + writes, Method::Rcw)
    }
}

/// Predicted array time per write (ns, Σ op times / n) and the stripe
/// updates per method (rmw, rcw, fsw) for one write of `s` bytes.
pub fn write_cost(n: usize, k: usize, drive: &dyn DriveTiming, s: u64, unit: u64, choice: Choice) -> Result<(f64, [u64; 3]), ModelError> {
    let a = Array::new(n, k)?;
    if s == 0 || unit == 0 {
        return Err(ModelError::Input("write size and stripe unit must be positive".into()));
    }
    Ok(cost(&a, drive, s, unit, choice))
}

fn cost(a: &Array, drive: &dyn DriveTiming, s: u64, u: u64, choice: Choice) -> (f64, [u64; 3]) {
    let (full, rest) = pieces(a, s, u);
    let mut ns = full as f64 * a.n as f64 * drive.write_ns(u);
    let mut counts = [0, 0, full];
    if let Some(p) = rest {
        let (t, m) = piece_cost(a, drive, u, p, choice);
        ns += t;
        counts[if m == Method::Rmw { 0 } else { 1 }] += 1;
    }
    (ns / a.n as f64, counts)
}

/// Pick the stripe unit that maximises the predicted random-write
/// throughput of the write mix `write_sizes` = [(size bytes, count)], with
/// the real planner's fewest-reads rule (module docs).
pub fn advise(write_sizes: &[(u64, u64)], n: usize, k: usize, drive: &dyn DriveTiming, candidates: &[u64]) -> Result<Advice, ModelError> {
    advise_with(write_sizes, n, k, drive, candidates, Choice::FewestReads)
}

/// [`advise`] ranking by `choice` (the other rule's throughput is still
/// reported per candidate).
pub fn advise_with(write_sizes: &[(u64, u64)], n: usize, k: usize, drive: &dyn DriveTiming, candidates: &[u64], choice: Choice) -> Result<Advice, ModelError> {
    let a = Array::new(n, k)?;
    if candidates.is_empty() {
        return Err(ModelError::Input("no candidate stripe units".into()));
    }
    if candidates.contains(&0) {
        return Err(ModelError::Input("stripe unit 0 among the candidates".into()));
    }
    let mix: Vec<(u64, u64)> = write_sizes.iter().copied().filter(|&(s, c)| s > 0 && c > 0).collect();
    let total: u64 = mix.iter().map(|w| w.1).sum();
    if total == 0 {
        return Err(ModelError::Input("no writes to advise on".into()));
    }
    let bytes: f64 = mix.iter().map(|&(s, c)| s as f64 * c as f64).sum();
    let mut per = Vec::with_capacity(candidates.len());
    for &u in candidates {
        let (mut t_few, mut t_fast) = (0.0, 0.0);
        let mut counts = [0f64; 3];
        for &(s, c) in &mix {
            let (tf, cs) = cost(&a, drive, s, u, Choice::FewestReads);
            let (tq, _) = cost(&a, drive, s, u, Choice::Fastest);
            t_few += tf * c as f64;
            t_fast += tq * c as f64;
            for i in 0..3 {
                counts[i] += cs[i] as f64 * c as f64;
            }
        }
        let stripes: f64 = counts.iter().sum();
        per.push(CandidateScore {
            unit: u,
            throughput_bytes_per_s: bytes / (t_few / 1e9),
            mean_service_ms: t_few / total as f64 / 1e6,
            fastest_throughput_bytes_per_s: bytes / (t_fast / 1e9),
            rmw_share: counts[0] / stripes,
            rcw_share: counts[1] / stripes,
            fsw_share: counts[2] / stripes,
        });
    }
    let score = |c: &CandidateScore| match choice {
        Choice::FewestReads => c.throughput_bytes_per_s,
        Choice::Fastest => c.fastest_throughput_bytes_per_s,
    };
    let top = per.iter().map(score).fold(f64::MIN, f64::max);
    let best = per.iter().filter(|c| score(c) >= top * (1.0 - 1e-12)).max_by_key(|c| c.unit).unwrap();
    let runner = per
        .iter()
        .filter(|c| c.unit != best.unit)
        .max_by(|x, y| score(x).total_cmp(&score(y)))
        .map(|c| format!("{} at {:.2} MiB/s", unit_str(c.unit), score(c) / 1048576.0))
        .unwrap_or_else(|| "none".into());
    let rationale = format!(
        "stripe unit {} predicts {:.2} MiB/s of random writes on {n} drives with k = {k} ({:.0}% RMW / {:.0}% RCW / {:.0}% FSW stripe updates, {} planner); next best {runner}. \
         Model: unit- and stripe-aligned starts, evenly spread load, isolated random service times (Jeremic et al. 2015, Sect. 3-4).",
        unit_str(best.unit),
        score(best) / 1048576.0,
        best.rmw_share * 100.0,
        best.rcw_share * 100.0,
        best.fsw_share * 100.0,
        match choice {
            Choice::FewestReads => "fewest-reads",
            Choice::Fastest => "fastest-method",
        },
    );
    Ok(Advice { best_unit: best.unit, choice, per_candidate: per, rationale })
}

fn unit_str(u: u64) -> String {
    mosaic_size::human(u)
}

/// Sect. 4.2's threshold for "the vast majority of the requests are
/// page-aligned".  The paper gives no number; we read "vast majority" as
/// 90 %.
pub const SSD_ALIGNED_MAJORITY: f64 = 0.9;

/// The SSD stripe-unit rule of Sect. 4.2.
#[derive(Debug, Clone, Serialize)]
pub struct SsdAdvice {
    pub page: u64,
    pub aligned_fraction: f64,
    /// Whether the page rule applies (aligned_fraction >= the threshold).
    pub page_rule_applies: bool,
    /// The recommended unit: the page if the rule applies.
    pub unit: Option<u64>,
    /// Otherwise the paper's fallback: a small multiple (2-, 4-, 8-fold) of
    /// the page, so small and medium writes stay within one unit; rank
    /// these with [`advise`].
    pub alternatives: Vec<u64>,
    pub rationale: String,
}

/// Sect. 4.2: "set the stripe unit size equal to the flash page size if the
/// vast majority of the requests are page-aligned" (threshold
/// [`SSD_ALIGNED_MAJORITY`]); otherwise 2-, 4- or 8-fold the page.
pub fn ssd_advice(page: u64, aligned_fraction: f64) -> SsdAdvice {
    ssd_advice_with(page, aligned_fraction, SSD_ALIGNED_MAJORITY)
}

/// [`ssd_advice`] with an explicit threshold.
pub fn ssd_advice_with(page: u64, aligned_fraction: f64, threshold: f64) -> SsdAdvice {
    let applies = page > 0 && aligned_fraction >= threshold;
    let alternatives = if applies || page == 0 { Vec::new() } else { vec![2 * page, 4 * page, 8 * page] };
    let rationale = if applies {
        format!(
            "{:.0}% of writes are page-aligned: a stripe unit of one flash page ({}) spreads multi-page writes over the most units (more RCW/FSW) without sub-page writes (Sect. 4.2)",
            aligned_fraction * 100.0,
            unit_str(page)
        )
    } else {
        format!(
            "only {:.0}% of writes are page-aligned (rule needs {:.0}%): a small multiple of the {} page keeps small unaligned writes in one unit (Sect. 4.2)",
            aligned_fraction * 100.0,
            threshold * 100.0,
            unit_str(page)
        )
    };
    SsdAdvice { page, aligned_fraction, page_rule_applies: applies, unit: applies.then_some(page), alternatives, rationale }
}

/// The page rule alone: `Some(page)` if it applies.
pub fn ssd_unit_rule(page: u64, aligned_fraction: f64) -> Option<u64> {
    ssd_advice(page, aligned_fraction).unit
}

impl fmt::Display for Advice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:>10} {:>12} {:>12} {:>12} {:>16}", "unit", "MiB/s", "ms/write", "fastest MiB/s", "RMW/RCW/FSW %")?;
        for c in &self.per_candidate {
            writeln!(
                f,
                "{:>10} {:>12.2} {:>12.3} {:>12.2} {:>16}{}",
                unit_str(c.unit),
                c.throughput_bytes_per_s / 1048576.0,
                c.mean_service_ms,
                c.fastest_throughput_bytes_per_s / 1048576.0,
                format!("{:.0}/{:.0}/{:.0}", c.rmw_share * 100.0, c.rcw_share * 100.0, c.fsw_share * 100.0),
                if c.unit == self.best_unit { "  <- best" } else { "" }
            )?;
        }
        writeln!(f, "{}", self.rationale)
    }
}
