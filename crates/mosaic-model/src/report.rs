//! `mosaic model`: predicted throughput per method and size, winners and
//! the size intervals where each (method, d) wins.

use std::fmt;

use serde::Serialize;

use crate::{Array, DriveTiming, Method, ModelError};

/// One request size.
#[derive(Debug, Clone, Serialize)]
pub struct SizeRow {
    pub size: u64,
    /// (d, method, bytes/s, IOPS) for every d.
    pub by_d: Vec<(usize, Method, f64, f64)>,
    pub winner_d: usize,
    pub winner: Method,
}

/// A size interval where one (method, d) is best.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    pub d: usize,
    pub method: Method,
    pub from_bytes: f64,
    pub to_bytes: f64,
}

/// The size up to which RMW with d units beats FSW.
#[derive(Debug, Clone, Serialize)]
pub struct Crossover {
    pub d: usize,
    pub beats_fsw_below_bytes: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelReport {
    pub n: usize,
    pub k: usize,
    pub rows: Vec<SizeRow>,
    pub win_intervals: Vec<Interval>,
    pub rmw_vs_fsw: Vec<Crossover>,
}

/// Parse `MIN:MAX` into the powers of two in that range.
pub fn parse_size_range(s: &str) -> Result<Vec<u64>, ModelError> {
    let (a, b) = s.split_once(':').ok_or_else(|| ModelError::Input(format!("bad size range {s:?}: expected MIN:MAX, e.g. 4K:4M")))?;
    let (a, b) = (parse_size(a)?, parse_size(b)?);
    if a == 0 || a > b {
        return Err(ModelError::Input(format!("bad size range {s:?}: need 0 < MIN <= MAX")));
    }
    let mut v = Vec::new();
    let mut x = a;
    while x <= b {
        v.push(x);
        x = x.checked_mul(2).ok_or_else(|| ModelError::Input("size range too large".into()))?;
    }
    Ok(v)
}

fn parse_size(s: &str) -> Result<u64, ModelError> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>().map(|n| n * mult).map_err(|_| ModelError::Input(format!("bad size {s:?}")))
}

/// Bisection for the size where `f` changes sign between lo and hi.
fn root(f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    let flo = f(lo) > 0.0;
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if (f(mid) > 0.0) == flo {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= hi * 1e-12 {
            break;
        }
    }
    (lo + hi) / 2.0
}

/// Intervals of [lo, hi] (bytes) where each (d, method) is the winner.
pub fn win_intervals(a: &Array, drive: &dyn DriveTiming, lo: f64, hi: f64) -> Vec<Interval> {
    let steps = 4000;
    let at = |i: usize| lo * (hi / lo).powf(i as f64 / steps as f64);
    let mut out: Vec<Interval> = Vec::new();
    let mut prev = a.winner(drive, lo);
    let mut start = lo;
    for i in 1..=steps {
        let s = at(i);
        let w = a.winner(drive, s);
        if w.0 != prev.0 {
            let (d1, d2) = (prev.0, w.0);
            let b = root(|x| a.throughput_auto(drive, x, d1) - a.throughput_auto(drive, x, d2), at(i - 1), s);
            out.push(Interval { d: d1, method: prev.1, from_bytes: start, to_bytes: b });
            start = b;
            prev = w;
        }
    }
    out.push(Interval { d: prev.0, method: prev.1, from_bytes: start, to_bytes: hi });
    out
}

/// The full report for sizes `sizes`.
pub fn model_report(n: usize, k: usize, drive: &dyn DriveTiming, sizes: &[u64]) -> Result<ModelReport, ModelError> {
    let a = Array::new(n, k)?;
    if sizes.is_empty() {
        return Err(ModelError::Input("no request sizes".into()));
    }
    let rows = sizes
        .iter()
        .map(|&s| {
            let by_d: Vec<_> = (1..=a.data())
                .map(|d| {
                    let m = a.method(d);
                    let t = a.throughput(drive, s as f64, d, m);
                    (d, m, t, t / s as f64)
                })
                .collect();
            let (wd, wm, _) = a.winner(drive, s as f64);
            SizeRow { size: s, by_d, winner_d: wd, winner: wm }
        })
        .collect();
    let lo = *sizes.iter().min().unwrap() as f64;
    let hi = *sizes.iter().max().unwrap() as f64;
    let fsw = a.data();
    let rmw_vs_fsw = (1..=a.data())
        .filter(|&d| a.method(d) == Method::Rmw)
        .map(|d| {
            let f = |s: f64| a.throughput_auto(drive, s, d) - a.throughput_auto(drive, s, fsw);
            let x = if f(512.0) <= 0.0 { 0.0 } else if f(1e13) > 0.0 { f64::INFINITY } else { root(f, 512.0, 1e13) };
            Crossover { d, beats_fsw_below_bytes: x }
        })
        .collect();
    Ok(ModelReport { n, k, rows, win_intervals: win_intervals(&a, drive, lo, hi), rmw_vs_fsw })
}

fn kib(b: f64) -> String {
    if b.is_infinite() {
        "inf".into()
    } else {
        format!("{:.2} KiB", b / 1024.0)
    }
}

impl fmt::Display for ModelReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ds: Vec<usize> = self.rows.first().map(|r| r.by_d.iter().map(|x| x.0).collect()).unwrap_or_default();
        write!(f, "{:>10}", "size")?;
        for (d, m, _, _) in self.rows.first().map(|r| r.by_d.clone()).unwrap_or_default() {
            write!(f, " {:>11}", format!("{}(d={d})", m.name()))?;
        }
        writeln!(f, "  winner   (MiB/s)")?;
        for r in &self.rows {
            write!(f, "{:>10}", kib(r.size as f64))?;
            for (_, _, t, _) in &r.by_d {
                write!(f, " {:>11.1}", t / 1048576.0)?;
            }
            writeln!(f, "  {} d={}", r.winner.name(), r.winner_d)?;
        }
        let _ = ds;
        writeln!(f, "\nwinner by request size:")?;
        for i in &self.win_intervals {
            writeln!(f, "  {:>12} .. {:<12} {} with d = {}", kib(i.from_bytes), kib(i.to_bytes), i.method.name(), i.d)?;
        }
        writeln!(f, "\nRMW beats FSW (d = {}) below:", self.n - self.k)?;
        for c in &self.rmw_vs_fsw {
            writeln!(f, "  d = {}: {}", c.d, kib(c.beats_fsw_below_bytes))?;
        }
        Ok(())
    }
}
