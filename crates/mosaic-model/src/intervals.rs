//! Which (method, d) wins at which request size: exact envelope for the
//! simple HDD, bisection for any other drive.

use serde::Serialize;

use crate::model::{check_d, hdd_affine};
use crate::{Array, DriveTiming, Method, ModelError};

/// A request-size interval in which one (method, d) is the winner, i.e.
/// writing each request as d whole units of s/d bytes with the planner's
/// method gives the highest array random-write throughput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub method: Method,
    pub d: usize,
    pub from_bytes: f64,
    pub to_bytes: f64,
}

/// Relative width to which numeric boundaries are bisected (the brief asks
/// for 1e-9; we go further, it costs a few dozen more evaluations).
pub const BISECT_REL: f64 = 1e-13;

/// Grid density (points per octave) of the numeric scan that brackets the
/// boundaries before bisection.  A winner whose whole window is narrower
/// than 1/32 octave (~2.2 %) and falls between two grid points could be
/// missed by the numeric path; the HDD path is exact.
pub const SCAN_PER_OCTAVE: f64 = 32.0;

/// The request-size intervals of [s_min, s_max] (bytes) in which each
/// (method, d) wins, contiguous and in order.  The candidates are d = 1 ..
/// n − k whole units with the planner's method ([`Array::method`]).
///
/// For a drive that reports [`DriveTiming::hdd_params`] the boundaries are
/// the exact crossover roots of the affine forms behind Ineq. 14 and 18
/// (lower envelope, see [`crate::crossover_hdd`]); otherwise the winner
/// is scanned on a log grid and every change is bisected to
/// [`BISECT_REL`].
pub fn win_intervals(n: usize, k: usize, drive: &dyn DriveTiming, s_min: f64, s_max: f64) -> Result<Vec<Interval>, ModelError> {
    let a = Array::new(n, k)?;
    check_range(s_min, s_max)?;
    Ok(match drive.hdd_params() {
        Some(h) => intervals_hdd(&a, &h, s_min, s_max),
        None => intervals_numeric(&a, drive, s_min, s_max),
    })
}

/// The numeric path for any drive (also usable for an HDD, e.g. to check
/// it against the exact one).
pub fn win_intervals_numeric(n: usize, k: usize, drive: &dyn DriveTiming, s_min: f64, s_max: f64) -> Result<Vec<Interval>, ModelError> {
    let a = Array::new(n, k)?;
    check_range(s_min, s_max)?;
    Ok(intervals_numeric(&a, drive, s_min, s_max))
}

fn check_range(s_min: f64, s_max: f64) -> Result<(), ModelError> {
    if !(s_min > 0.0 && s_min.is_finite() && s_max.is_finite() && s_min <= s_max) {
        return Err(ModelError::Input(format!("bad size range {s_min}..{s_max}: need 0 < min <= max")));
    }
    Ok(())
}

fn push(out: &mut Vec<Interval>, method: Method, d: usize, from: f64, to: f64) {
    if let Some(last) = out.last_mut() {
        if last.d == d && last.method == method {
            last.to_bytes = to;
            return;
        }
    }
    if to > from {
        out.push(Interval { method, d, from_bytes: from, to_bytes: to });
    }
}

/// The last interval, also when the range is a single point.
fn push_last(out: &mut Vec<Interval>, method: Method, d: usize, from: f64, to: f64) {
    push(out, method, d, from, to);
    if out.is_empty() {
        out.push(Interval { method, d, from_bytes: from, to_bytes: to });
    }
}

pub(crate) fn intervals_hdd(a: &Array, h: &crate::HddSimple, s_min: f64, s_max: f64) -> Vec<Interval> {
    let cands: Vec<(usize, Method, f64, f64)> = (1..=a.data())
        .map(|d| {
            let m = a.method(d);
            let (aa, bb) = hdd_affine(a, h, d, m);
            (d, m, aa, bb)
        })
        .collect();
    // 1/λ = A/s + B; the winner minimises it.  Start: best at s_min, ties
    // to the one better just above (smaller B), then smaller d.
    let val = |c: &(usize, Method, f64, f64), s: f64| c.2 / s + c.3;
    let mut cur = 0;
    for i in 1..cands.len() {
        let (vi, vc) = (val(&cands[i], s_min), val(&cands[cur], s_min));
        if vi < vc || (vi == vc && cands[i].3 < cands[cur].3) {
            cur = i;
        }
    }
    let mut out = Vec::new();
    let mut from = s_min;
    loop {
        let c = cands[cur];
        // The next line of the envelope: among the candidates better for
        // large s (smaller B), the one crossing first.
        let mut next: Option<(usize, f64)> = None;
        for (j, cj) in cands.iter().enumerate() {
            if j == cur || cj.3 >= c.3 {
                continue;
            }
            let s = ((cj.2 - c.2) / (c.3 - cj.3)).max(from);
            let better = match next {
                None => true,
                Some((nj, ns)) => s < ns || (s == ns && cj.3 < cands[nj].3),
            };
            if better {
                next = Some((j, s));
            }
        }
        match next {
            Some((j, s)) if s < s_max => {
                push(&mut out, c.1, c.0, from, s);
                from = s;
                cur = j;
            }
            _ => {
                push_last(&mut out, c.1, c.0, from, s_max);
                break;
            }
        }
    }
    out
}

pub(crate) fn intervals_numeric(a: &Array, drive: &dyn DriveTiming, s_min: f64, s_max: f64) -> Vec<Interval> {
    let win = |s: f64| {
        let (d, m, _) = a.winner(drive, s);
        (d, m)
    };
    let steps = (((s_max / s_min).log2() * SCAN_PER_OCTAVE).ceil() as usize).max(1);
    let at = |i: usize| if i == steps { s_max } else { s_min * (s_max / s_min).powf(i as f64 / steps as f64) };
    let mut out = Vec::new();
    let mut from = s_min;
    let mut prev = win(s_min);
    let mut prev_s = s_min;
    for i in 1..=steps {
        let s = at(i);
        let w = win(s);
        if w != prev {
            let mut bounds = Vec::new();
            refine(&win, prev_s, s, prev, w, &mut bounds, 0);
            for (b, left, _right) in bounds {
                push(&mut out, left.1, left.0, from, b);
                from = b;
            }
            prev = w;
        }
        prev_s = s;
    }
    push_last(&mut out, prev.1, prev.0, from, s_max);
    out
}

type Cand = (usize, Method);

/// Bisect on the winner between lo (winner `wl`) and hi (winner `wh`),
/// collecting (boundary, left winner, right winner) in order.
fn refine(win: &dyn Fn(f64) -> Cand, lo: f64, hi: f64, wl: Cand, wh: Cand, out: &mut Vec<(f64, Cand, Cand)>, depth: usize) {
    let mid = 0.5 * (lo + hi);
    if hi - lo <= BISECT_REL * hi || depth > 300 || mid <= lo || mid >= hi {
        out.push((mid, wl, wh));
        return;
    }
    let wm = win(mid);
    if wm == wl {
        refine(win, mid, hi, wl, wh, out, depth + 1);
    } else if wm == wh {
        refine(win, lo, mid, wl, wh, out, depth + 1);
    } else {
        refine(win, lo, mid, wl, wm, out, depth + 1);
        refine(win, mid, hi, wm, wh, out, depth + 1);
    }
}

/// The first request size in [lo, hi] (bytes) at which candidate `c1`
/// (method, d) stops being faster than `c2`, found numerically (log-grid
/// scan, then bisection on the throughput difference to [`BISECT_REL`]).
/// `Ok(None)` if `c1` is not faster at `lo` or is faster all the way to
/// `hi`; [`crossover_sizes`] tells the two apart.
pub fn crossover_numeric(n: usize, k: usize, drive: &dyn DriveTiming, c1: (Method, usize), c2: (Method, usize), lo: f64, hi: f64) -> Result<Option<f64>, ModelError> {
    Ok(match crossover_sizes(n, k, drive, c1, c2, lo, hi)? {
        Beats::Below(s) => Some(s),
        _ => None,
    })
}

/// Where `c1` beats `c2` in [lo, hi].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Beats {
    /// Not even at the smallest size.
    Never,
    /// Below this size (the first crossing).
    Below(f64),
    /// Up to the largest size.
    Always,
}

/// Like [`crossover_numeric`], distinguishing "never" from "always".
pub fn crossover_sizes(n: usize, k: usize, drive: &dyn DriveTiming, c1: (Method, usize), c2: (Method, usize), lo: f64, hi: f64) -> Result<Beats, ModelError> {
    let a = Array::new(n, k)?;
    check_d(&a, c1.1, c1.0)?;
    check_d(&a, c2.1, c2.0)?;
    check_range(lo, hi)?;
    let f = |s: f64| a.throughput(drive, s, c1.1, c1.0) - a.throughput(drive, s, c2.1, c2.0);
    if f(lo) <= 0.0 {
        return Ok(Beats::Never);
    }
    let steps = (((hi / lo).log2() * SCAN_PER_OCTAVE).ceil() as usize).max(1);
    let mut prev = lo;
    for i in 1..=steps {
        let s = if i == steps { hi } else { lo * (hi / lo).powf(i as f64 / steps as f64) };
        if f(s) <= 0.0 {
            return Ok(Beats::Below(bisect(&f, prev, s)));
        }
        prev = s;
    }
    Ok(Beats::Always)
}

/// Root of `f` in [lo, hi] with f(lo) > 0 >= f(hi).
fn bisect(f: &dyn Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    for _ in 0..300 {
        let mid = 0.5 * (lo + hi);
        if hi - lo <= BISECT_REL * hi || mid <= lo || mid >= hi {
            break;
        }
        if f(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}
