//! `mosaic model`: predicted throughput per request size and (method, d),
//! winners, the size intervals where each (method, d) wins, and the
//! crossovers.

use std::fmt;

use serde::Serialize;

use crate::intervals::{crossover_sizes, intervals_hdd, intervals_numeric, Beats, Interval};
use crate::{alpha, crossover_rmw_rcw, crossover_rmw_rmw, Array, DriveTiming, Method, ModelError};

/// One (method, d) at one request size.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub d: usize,
    pub method: Method,
    pub throughput_bytes_per_s: f64,
    /// Logical writes per second.
    pub iops: f64,
    /// Eq. 3 with α at the unit size s/d.
    pub speedup: f64,
}

/// One request size.
#[derive(Debug, Clone, Serialize)]
pub struct SizeRow {
    pub size: u64,
    /// α = t_read/t_write at this size (Eq. 3; 1 for the HDD).
    pub alpha: f64,
    /// Every d = 1 .. n − k with the planner's method.
    pub by_d: Vec<Point>,
    pub winner_d: usize,
    pub winner: Method,
}

/// Up to which request size RMW with d units beats FSW.
#[derive(Debug, Clone, Serialize)]
pub struct Crossover {
    pub d: usize,
    /// RMW(d) beats FSW for s below this many bytes: Ineq. 18 (d2 = n − k)
    /// for the simple HDD, else the first crossing found numerically in
    /// [512 B, 1 TiB].  0 if it never does, +∞ (JSON null) if it always
    /// does.
    pub beats_fsw_below_bytes: f64,
    /// The numeric root of the throughput difference (checks the closed
    /// form; equal to the above for non-HDD drives).
    pub numeric_bytes: f64,
    /// Whether `beats_fsw_below_bytes` is the closed form.
    pub closed_form: bool,
}

/// Up to which request size RMW with d1 units beats RMW with d2 > d1.
#[derive(Debug, Clone, Serialize)]
pub struct RmwCrossover {
    pub d1: usize,
    pub d2: usize,
    /// Ineq. 14 for the simple HDD, else numeric (as [`Crossover`]).
    pub below_bytes: f64,
    pub numeric_bytes: f64,
    pub closed_form: bool,
}

/// The report behind `mosaic model`.
#[derive(Debug, Clone, Serialize)]
pub struct ModelReport {
    pub n: usize,
    pub k: usize,
    /// True when the drive is the simple HDD and intervals/crossovers come
    /// from the closed forms.
    pub closed_form: bool,
    pub rows: Vec<SizeRow>,
    pub win_intervals: Vec<Interval>,
    pub rmw_vs_fsw: Vec<Crossover>,
    pub rmw_vs_rmw: Vec<RmwCrossover>,
}

/// Range searched for numeric crossovers, bytes.
pub const CROSSOVER_SEARCH: (f64, f64) = (512.0, 1099511627776.0);

/// One size of a range, in the grammar of [`mosaic_size`].
fn parse_size(s: &str) -> Result<u64, ModelError> {
    mosaic_size::parse(s).map_err(|e| ModelError::Input(e.to_string()))
}

/// The smallest request size the model takes: one sector.
pub const MIN_REQUEST: u64 = 512;

/// Parse `MIN:MAX` into the powers of two in [MIN, MAX], or `MIN:MAX:STEP`
/// into MIN, MIN+STEP, ... <= MAX.  Sizes are [`mosaic_size`]'s (`4K:4M`).
pub fn parse_size_range(s: &str) -> Result<Vec<u64>, ModelError> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() < 2 || parts.len() > 3 {
        return Err(ModelError::Input(format!("bad size range {s:?}: expected MIN:MAX or MIN:MAX:STEP, e.g. 4K:4M")));
    }
    let (a, b) = (parse_size(parts[0])?, parse_size(parts[1])?);
    if a == 0 || a > b {
        return Err(ModelError::Input(format!("bad size range {s:?}: need 0 < MIN <= MAX in MIN:MAX")));
    }
    if a < MIN_REQUEST {
        return Err(ModelError::Input(format!("bad size range {s:?}: a request is at least a {MIN_REQUEST}-byte sector")));
    }
    if parts.len() == 3 {
        let step = parse_size(parts[2])?;
        if step == 0 {
            return Err(ModelError::Input(format!("bad size range {s:?}: STEP must be positive")));
        }
        let count = (b - a) / step + 1;
        if count > 100_000 {
            return Err(ModelError::Input(format!("size range {s:?} has {count} sizes; use a larger STEP (at most 100000 sizes)")));
        }
        return Ok((0..count).map(|i| a + i * step).collect());
    }
    let v: Vec<u64> = (0..64).map(|e| 1u64 << e).filter(|&p| p >= a && p <= b).collect();
    if v.is_empty() {
        return Err(ModelError::Input(format!("size range {s:?} contains no power of two; give MIN:MAX:STEP for other sizes")));
    }
    Ok(v)
}

fn beats_value(b: Beats) -> f64 {
    match b {
        Beats::Never => 0.0,
        Beats::Below(x) => x,
        Beats::Always => f64::INFINITY,
    }
}

/// The full report for request sizes `sizes` (bytes) on n drives, k code
/// blocks per stripe.
pub fn model_report(n: usize, k: usize, drive: &dyn DriveTiming, sizes: &[u64]) -> Result<ModelReport, ModelError> {
    let a = Array::new(n, k)?;
    if sizes.is_empty() {
        return Err(ModelError::Input("no request sizes".into()));
    }
    if sizes.contains(&0) {
        return Err(ModelError::Input("request size 0".into()));
    }
    let rows = sizes
        .iter()
        .map(|&s| {
            let by_d = (1..=a.data())
                .map(|d| {
                    let m = a.method(d);
                    let t = a.throughput(drive, s as f64, d, m);
                    let x = s as f64 / d as f64;
                    let al = drive.read_ns_f64(x) / drive.write_ns_f64(x);
                    Point { d, method: m, throughput_bytes_per_s: t, iops: t / s as f64, speedup: a.speedup(d, m, al) }
                })
                .collect();
            let (wd, wm, _) = a.winner(drive, s as f64);
            SizeRow { size: s, alpha: alpha(drive, s), by_d, winner_d: wd, winner: wm }
        })
        .collect();
    let lo = *sizes.iter().min().unwrap() as f64;
    let hi = *sizes.iter().max().unwrap() as f64;
    let hdd = drive.hdd_params();
    let win_intervals = match &hdd {
        Some(h) => intervals_hdd(&a, h, lo, hi),
        None => intervals_numeric(&a, drive, lo, hi),
    };
    let (slo, shi) = CROSSOVER_SEARCH;
    let rmw_ds: Vec<usize> = (1..a.data()).filter(|&d| a.method(d) == Method::Rmw).collect();
    let fsw = (Method::Fsw, a.data());
    let mut rmw_vs_fsw = Vec::new();
    for &d in &rmw_ds {
        let numeric = beats_value(crossover_sizes(n, k, drive, (Method::Rmw, d), fsw, slo, shi)?);
        let closed = hdd.map(|h| crossover_rmw_rcw(n, k, d, a.data(), h.r_tpos()));
        rmw_vs_fsw.push(Crossover { d, beats_fsw_below_bytes: closed.unwrap_or(numeric), numeric_bytes: numeric, closed_form: closed.is_some() });
    }
    let mut rmw_vs_rmw = Vec::new();
    for (i, &d1) in rmw_ds.iter().enumerate() {
        for &d2 in &rmw_ds[i + 1..] {
            let numeric = beats_value(crossover_sizes(n, k, drive, (Method::Rmw, d1), (Method::Rmw, d2), slo, shi)?);
            let closed = hdd.map(|h| crossover_rmw_rmw(k, d1, d2, h.r_tpos()));
            rmw_vs_rmw.push(RmwCrossover { d1, d2, below_bytes: closed.unwrap_or(numeric), numeric_bytes: numeric, closed_form: closed.is_some() });
        }
    }
    Ok(ModelReport { n, k, closed_form: hdd.is_some(), rows, win_intervals, rmw_vs_fsw, rmw_vs_rmw })
}

fn kib(b: f64) -> String {
    if b.is_infinite() {
        "any size".into()
    } else if b == 0.0 {
        "never".into()
    } else {
        format!("{:.2} KiB", b / 1024.0)
    }
}

fn size_kib(b: u64) -> String {
    #[allow(clippy::manual_is_multiple_of)] // is_multiple_of needs Rust 1.87; MSRV is 1.80
    if b % 1024 == 0 {
        format!("{}", b / 1024)
    } else {
        format!("{:.2}", b as f64 / 1024.0)
    }
}

impl fmt::Display for ModelReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "random-write throughput (MiB/s) of n = {} drives, k = {}, {} data units per stripe; each write as d whole units of size/d with the planner's method",
            self.n,
            self.k,
            self.n - self.k
        )?;
        write!(f, "{:>10}", "size KiB")?;
        if let Some(r) = self.rows.first() {
            for p in &r.by_d {
                write!(f, " {:>9}", format!("{} d={}", p.method.name(), p.d))?;
            }
        }
        writeln!(f, "  {:>6}  winner", "alpha")?;
        for r in &self.rows {
            write!(f, "{:>10}", size_kib(r.size))?;
            for p in &r.by_d {
                write!(f, " {:>9.2}", p.throughput_bytes_per_s / 1048576.0)?;
            }
            writeln!(f, "  {:>6.3}  {} d={}", r.alpha, r.winner.name(), r.winner_d)?;
        }
        writeln!(f, "\nwinner by request size ({}):", if self.closed_form { "exact, Ineq. 14/18 roots" } else { "numeric, bisected" })?;
        for i in &self.win_intervals {
            writeln!(f, "  {:>12} .. {:<12}  {} d={}", kib(i.from_bytes), kib(i.to_bytes), i.method.name(), i.d)?;
        }
        if !self.rmw_vs_fsw.is_empty() {
            writeln!(f, "\nRMW with d units beats FSW (d = {}) for requests below{}:", self.n - self.k, if self.closed_form { " (Ineq. 18)" } else { "" })?;
            for c in &self.rmw_vs_fsw {
                writeln!(f, "  d = {}: {}", c.d, kib(c.beats_fsw_below_bytes))?;
            }
        } else {
            writeln!(f, "\nno RMW: with n = {} and k = {} every partial write reads fewer blocks with RCW (needs n > 2k + 2)", self.n, self.k)?;
        }
        if !self.rmw_vs_rmw.is_empty() {
            writeln!(f, "\nRMW with d1 units beats RMW with d2 units for requests below{}:", if self.closed_form { " (Ineq. 14)" } else { "" })?;
            for c in &self.rmw_vs_rmw {
                writeln!(f, "  d1 = {}, d2 = {}: {}", c.d1, c.d2, kib(c.below_bytes))?;
            }
        }
        Ok(())
    }
}
