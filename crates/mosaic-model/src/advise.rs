//! The stripe-unit advisor.
//!
//! For each candidate unit u, every write of s bytes (from the trace's
//! write-size distribution) starts at a uniformly random sector, so it
//! touches a known mix of ceil-ish units (see `cost`); whole stripes are full-stripe writes and the
//! remainder is one partial stripe, updated with the method the planner
//! picks (fewest reads).  Each unit read or write costs the drive's isolated
//! random service time for its bytes, and the n drives share the work, so
//! the predicted random-write throughput is total bytes over total drive
//! time divided by n.  The unit with the highest prediction wins.

use std::fmt;

use serde::Serialize;

use crate::{Array, DriveTiming, Method, ModelError};

#[derive(Debug, Clone, Serialize)]
pub struct CandidateScore {
    pub unit: u64,
    pub throughput_bytes_per_s: f64,
    pub mean_service_ms: f64,
    pub rmw_share: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub best_unit: u64,
    pub per_candidate: Vec<CandidateScore>,
    pub rationale: String,
}

/// Powers of two from 4 KiB (or the block size) to 4 MiB.
pub fn default_candidates(block: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut u = block.max(4096);
    while u <= 4 << 20 {
        v.push(u);
        u *= 2;
    }
    v
}

/// Expected drive time (ns summed over drives) of one write of s bytes with
/// unit u, and the probability that it is an RMW.  Starts are uniform over
/// 512-byte sectors, so a write touches 1 + floor(t) or 2 + floor(t) units,
/// t = (s - 512) / u, the latter with probability frac(t).
fn cost(a: &Array, drive: &dyn DriveTiming, s: u64, u: u64) -> (f64, f64) {
    let t = s.saturating_sub(512) as f64 / u as f64;
    let lo = 1 + t.floor() as usize;
    let p_hi = t.fract();
    let (c_lo, r_lo) = cost_units(a, drive, s, u, lo);
    let (c_hi, r_hi) = cost_units(a, drive, s, u, lo + 1);
    let rmw = |r: bool| if r { 1.0 } else { 0.0 };
    ((1.0 - p_hi) * c_lo + p_hi * c_hi, (1.0 - p_hi) * rmw(r_lo) + p_hi * rmw(r_hi))
}

/// Drive time for a write of s bytes spread over `units` units.
fn cost_units(a: &Array, drive: &dyn DriveTiming, s: u64, u: u64, units: usize) -> (f64, bool) {
    let per = (s as f64 / units as f64).round().max(512.0) as u64;
    let full = units / a.data();
    let rest = units % a.data();
    let mut t = full as f64 * a.n as f64 * drive.write_ns(u);
    let mut rmw = false;
    if rest > 0 {
        let m = a.method(rest);
        rmw = m == Method::Rmw;
        let (r, w) = a.reads_writes(rest, m);
        t += r as f64 * drive.read_ns(per) + w as f64 * drive.write_ns(per);
    }
    (t, rmw)
}

/// Pick the unit that maximises predicted random-write throughput.
pub fn advise(write_sizes: &[(u64, u64)], n: usize, k: usize, drive: &dyn DriveTiming, candidates: &[u64]) -> Result<Advice, ModelError> {
    let a = Array::new(n, k)?;
    if candidates.is_empty() {
        return Err(ModelError::Input("no candidate stripe units".into()));
    }
    let total: u64 = write_sizes.iter().map(|w| w.1).sum();
    if total == 0 {
        return Err(ModelError::Input("no writes to advise on".into()));
    }
    let bytes: f64 = write_sizes.iter().map(|&(s, c)| s as f64 * c as f64).sum();
    let mut per = Vec::new();
    for &u in candidates {
        let mut t = 0.0;
        let mut rmw = 0.0;
        for &(s, c) in write_sizes {
            let (ts, r) = cost(&a, drive, s, u);
            t += ts * c as f64;
            rmw += r * c as f64;
        }
        let wall = t / n as f64 / 1e9;
        per.push(CandidateScore {
            unit: u,
            throughput_bytes_per_s: bytes / wall,
            mean_service_ms: t / total as f64 / 1e6,
            rmw_share: rmw / total as f64,
        });
    }
    let best = per.iter().max_by(|x, y| x.throughput_bytes_per_s.total_cmp(&y.throughput_bytes_per_s)).unwrap();
    let rationale = format!(
        "unit {} B predicts {:.1} MiB/s of random writes ({:.0}% of writes as RMW); next best {}",
        best.unit,
        best.throughput_bytes_per_s / 1048576.0,
        best.rmw_share * 100.0,
        per.iter()
            .filter(|c| c.unit != best.unit)
            .max_by(|x, y| x.throughput_bytes_per_s.total_cmp(&y.throughput_bytes_per_s))
            .map(|c| format!("{} B at {:.1} MiB/s", c.unit, c.throughput_bytes_per_s / 1048576.0))
            .unwrap_or_else(|| "none".into())
    );
    Ok(Advice { best_unit: best.unit, per_candidate: per, rationale })
}

/// SSD rule (Sect. 4.2): when most requests are page-aligned, the stripe
/// unit should be the effective flash page size.
pub fn ssd_unit_rule(page: u64, aligned_fraction: f64) -> Option<u64> {
    (aligned_fraction >= 0.5).then_some(page)
}

impl fmt::Display for Advice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:>10} {:>12} {:>12} {:>8}", "unit", "MiB/s", "ms/write", "RMW")?;
        for c in &self.per_candidate {
            writeln!(
                f,
                "{:>10} {:>12.2} {:>12.3} {:>7.0}%{}",
                format!("{}K", c.unit / 1024),
                c.throughput_bytes_per_s / 1048576.0,
                c.mean_service_ms,
                c.rmw_share * 100.0,
                if c.unit == self.best_unit { "  <- best" } else { "" }
            )?;
        }
        writeln!(f, "{}", self.rationale)
    }
}
