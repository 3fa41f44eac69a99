//! Speedups (Sect. 3.2), array throughput (Sect. 4.1, Eq. 12 generalised to
//! any [`DriveTiming`]) and the closed-form crossovers (Ineq. 14 and 18).

use serde::Serialize;

use crate::{DriveTiming, ModelError};

/// Code block update method (Sect. 3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Read-modify-write: read old data and old code, write both.
    Rmw,
    /// Reconstruct write: read the untouched data units, write data and code.
    Rcw,
    /// Full stripe write: no reads.
    Fsw,
}

impl Method {
    pub fn name(&self) -> &'static str {
        match self {
            Method::Rmw => "RMW",
            Method::Rcw => "RCW",
            Method::Fsw => "FSW",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How the method of a partial stripe write is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Choice {
    /// Fewest read operations, ties to RCW: what the real planner
    /// (`mosaic-core`, like md) does, and the paper's rule (Eq. 1/8).
    #[default]
    FewestReads,
    /// Whichever the model predicts to be fastest, ties to RCW.
    Fastest,
}

/// An array shape: n drives, k code blocks per stripe, n − k data units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Array {
    pub n: usize,
    pub k: usize,
}

/// Most drives an array of mosaic has.
pub const MAX_DRIVES: usize = 255;

impl Array {
    /// Requires k >= 1 (there is no write penalty to model without code
    /// blocks) and n − k >= 1 data units.
    pub fn new(n: usize, k: usize) -> Result<Array, ModelError> {
        if k == 0 || k >= n {
            return Err(ModelError::Input(format!("need n > k >= 1 (drives n, code blocks per stripe k), got n = {n}, k = {k}")));
        }
        // The arrays mosaic builds (`mosaic_core::Geometry`), and a bound
        // on the model's work, which grows with n squared a size.
        if n > MAX_DRIVES {
            return Err(ModelError::Input(format!("at most {MAX_DRIVES} drives are supported, got {n}")));
        }
        Ok(Array { n, k })
    }

    /// Data units per stripe, n − k.
    pub fn data(&self) -> usize {
        self.n - self.k
    }

    /// The method the planner uses for d whole data units: FSW for
    /// d = n − k, otherwise the one with fewer reads, RMW (d + k reads) iff
    /// d + k < n − k − d ⇔ d < (n − 2k)/2 (Eq. 1 and 8); ties go to RCW
    /// (the paper: RCW for (n − 2k)/2 <= d; md and `mosaic-core` alike).
    pub fn method(&self, d: usize) -> Method {
        if d >= self.data() {
            Method::Fsw
        } else if d + self.k < self.data() - d {
            Method::Rmw
        } else {
            Method::Rcw
        }
    }

    /// The method the model predicts to be fastest for d whole units of
    /// s/d bytes (ties: RCW).  For whole-unit writes both methods write the
    /// same d + k units and read units of the same size, so this always
    /// agrees with [`method`](Array::method) — the paper's remark under
    /// Eq. 8 that the criterion does not depend on α.  The two can differ
    /// for writes that cover units partially (see the advisor).
    pub fn fastest_method(&self, drive: &dyn DriveTiming, s: f64, d: usize) -> Method {
        if d >= self.data() {
            return Method::Fsw;
        }
        if self.throughput(drive, s, d, Method::Rmw) > self.throughput(drive, s, d, Method::Rcw) {
            Method::Rmw
        } else {
            Method::Rcw
        }
    }

    /// The method under `choice`.
    pub fn method_by(&self, choice: Choice, drive: &dyn DriveTiming, s: f64, d: usize) -> Method {
        match choice {
            Choice::FewestReads => self.method(d),
            Choice::Fastest => self.fastest_method(drive, s, d),
        }
    }

    /// Units read (r) and written (w) for d data units with `m` (Sect. 3.2):
    /// RMW r = w = d + k; RCW r = n − k − d, w = d + k; FSW r = 0, w = n.
    pub fn reads_writes(&self, d: usize, m: Method) -> (usize, usize) {
        match m {
            Method::Rmw => (d + self.k, d + self.k),
            Method::Rcw => (self.data() - d, d + self.k),
            Method::Fsw => (0, self.n),
        }
    }

    /// Speedup over one drive, Eq. 3: S = d·n / (α·r + w).
    pub fn speedup(&self, d: usize, m: Method, alpha: f64) -> f64 {
        let (r, w) = self.reads_writes(d, m);
        (d * self.n) as f64 / (alpha * r as f64 + w as f64)
    }

    /// Random-write throughput of the array in bytes/s for logical writes
    /// of `s` bytes covering d whole units of x = s/d bytes, updated with
    /// `m` (Eq. 2 in bytes):
    ///
    /// ```text
    ///   λ_array = n · s / (r · t_read(x) + w · t_write(x))  =  S(d) · λ_rw(x)
    /// ```
    ///
    /// For [`crate::HddSimple`] this is exactly Eq. 12.
    pub fn throughput(&self, drive: &dyn DriveTiming, s: f64, d: usize, m: Method) -> f64 {
        let x = s / d as f64;
        let (r, w) = self.reads_writes(d, m);
        let t_ns = r as f64 * drive.read_ns_f64(x) + w as f64 * drive.write_ns_f64(x);
        self.n as f64 * s / (t_ns / 1e9)
    }

    /// Throughput of d units with the planner's method ([`Array::method`]).
    pub fn throughput_auto(&self, drive: &dyn DriveTiming, s: f64, d: usize) -> f64 {
        self.throughput(drive, s, d, self.method(d))
    }

    /// The best d (with its planner method) for logical writes of `s`
    /// bytes, by direct comparison of the throughputs; ties go to the
    /// smaller d.  Returns (d, method, bytes/s).
    pub fn winner(&self, drive: &dyn DriveTiming, s: f64) -> (usize, Method, f64) {
        let mut best = (1, self.method(1), self.throughput_auto(drive, s, 1));
        for d in 2..=self.data() {
            let t = self.throughput_auto(drive, s, d);
            if t > best.2 {
                best = (d, self.method(d), t);
            }
        }
        best
    }
}

/// The winning (method, d) at one request size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Winner {
    pub method: Method,
    pub d: usize,
    pub throughput_bytes_per_s: f64,
}

/// Which (method, d) wins for logical writes of `s` bytes, by direct
/// comparison of [`Array::throughput`] over d = 1 .. n − k with the
/// planner's method (ties: smaller d).
pub fn winner(n: usize, k: usize, drive: &dyn DriveTiming, s: f64) -> Result<Winner, ModelError> {
    let a = Array::new(n, k)?;
    if !(s > 0.0 && s.is_finite()) {
        return Err(ModelError::Input(format!("bad request size {s}")));
    }
    let (d, method, t) = a.winner(drive, s);
    Ok(Winner { method, d, throughput_bytes_per_s: t })
}

/// Eq. 4: S_RMW = d·n / ((α + 1)(d + k)).
pub fn speedup_rmw(n: usize, k: usize, d: usize, alpha: f64) -> f64 {
    (d * n) as f64 / ((alpha + 1.0) * (d + k) as f64)
}

/// Eq. 5: S_RCW = d·n / (α(n − k − d) + d + k).
pub fn speedup_rcw(n: usize, k: usize, d: usize, alpha: f64) -> f64 {
    (d * n) as f64 / (alpha * (n - k - d) as f64 + (d + k) as f64)
}

/// Eq. 6: S_FSW = d·n / (d + k) = n − k (d = n − k, no reads).
pub fn speedup_fsw(n: usize, k: usize) -> f64 {
    (n - k) as f64
}

/// The random-write throughput of an n-drive array, k code blocks, logical
/// writes of `s` bytes split into d units of s/d, updated with `method`.
/// Same as [`Array::throughput`]; errors on a bad shape or d.
pub fn throughput_array(n: usize, k: usize, drive: &dyn DriveTiming, s: f64, d: usize, method: Method) -> Result<f64, ModelError> {
    let a = Array::new(n, k)?;
    check_d(&a, d, method)?;
    Ok(a.throughput(drive, s, d, method))
}

/// Eq. 12 literally, for the simple HDD: S_method(d) · λ(s/d) with α = 1.
pub fn throughput_hdd_closed_form(n: usize, k: usize, hdd: &crate::HddSimple, s: f64, d: usize, method: Method) -> f64 {
    let sp = match method {
        Method::Rmw => speedup_rmw(n, k, d, 1.0),
        Method::Rcw => speedup_rcw(n, k, d, 1.0),
        Method::Fsw => speedup_fsw(n, k),
    };
    sp * hdd.lambda(s / d as f64)
}

pub(crate) fn check_d(a: &Array, d: usize, m: Method) -> Result<(), ModelError> {
    let ok = match m {
        Method::Fsw => d == a.data(),
        _ => d >= 1 && d < a.data(),
    };
    if ok {
        Ok(())
    } else {
        Err(ModelError::Input(format!("{} cannot write d = {d} units in a stripe of {} data units", m.name(), a.data())))
    }
}

/// Ineq. 14 (Sect. 4.1): with d1 < d2 < (n − 2k)/2, RMW writing d1 units
/// beats RMW writing d2 units while
///
/// ```text
///   s < (d1·d2 / k) · R·t_pos
/// ```
///
/// (bytes, `r_tpos` = R·t_pos in bytes).  The extraction's
/// "2·k−1·R·tpos" and "d·(d−1)·k−1·R·tpos" are 2/k·R·t_pos and
/// d(d−1)/k·R·t_pos, the cases d1 = 1, d2 = 2 and d1 = d−1, d2 = d.
pub fn crossover_rmw_rmw(k: usize, d1: usize, d2: usize, r_tpos: f64) -> f64 {
    (d1 * d2) as f64 / k as f64 * r_tpos
}

/// Ineq. 18 (Sect. 4.1): with d1 < (n − 2k)/2 <= d2 (d2 = n − k is FSW),
/// RMW writing d1 units beats RCW/FSW writing d2 units while
///
/// ```text
///   s < d1·d2·(n − 2·d1 − 2·k) / (2·d1·d2 + 2·d2·k − d1·n) · R·t_pos
/// ```
///
/// (bytes).  If the denominator is not positive, RMW wins at every size and
/// this returns +∞.
pub fn crossover_rmw_rcw(n: usize, k: usize, d1: usize, d2: usize, r_tpos: f64) -> f64 {
    let (n, k, d1, d2) = (n as f64, k as f64, d1 as f64, d2 as f64);
    let den = 2.0 * d1 * d2 + 2.0 * d2 * k - d1 * n;
    if den <= 0.0 {
        return f64::INFINITY;
    }
    d1 * d2 * (n - 2.0 * d1 - 2.0 * k) / den * r_tpos
}

/// For the simple HDD, every candidate's reciprocal throughput is affine in
/// 1/s:  1/λ = A/s + B  with  A = (r + w)·t_pos / n,  B = (r + w) / (n·d·R).
/// Two candidates i, j are equally fast at  s = (A_i − A_j) / (B_j − B_i);
/// Ineq. 14 and 18 are this formula for RMW/RMW and RMW/RCW.
pub(crate) fn hdd_affine(a: &Array, hdd: &crate::HddSimple, d: usize, m: Method) -> (f64, f64) {
    let (r, w) = a.reads_writes(d, m);
    let ops = (r + w) as f64;
    (ops * hdd.t_pos_s / a.n as f64, ops / (a.n as f64 * d as f64 * hdd.rate_bytes_per_s))
}

/// The size at which two (method, d) candidates are equally fast on the
/// simple HDD, from the affine form above; `None` if they never cross
/// (parallel or identical), or at s <= 0.  Below the returned size the
/// candidate with the smaller A (fewer operations) wins.
pub fn crossover_hdd(n: usize, k: usize, hdd: &crate::HddSimple, c1: (Method, usize), c2: (Method, usize)) -> Result<Option<f64>, ModelError> {
    let a = Array::new(n, k)?;
    check_d(&a, c1.1, c1.0)?;
    check_d(&a, c2.1, c2.0)?;
    let (a1, b1) = hdd_affine(&a, hdd, c1.1, c1.0);
    let (a2, b2) = hdd_affine(&a, hdd, c2.1, c2.0);
    let den = b2 - b1;
    if den == 0.0 {
        return Ok(None);
    }
    let s = (a1 - a2) / den;
    Ok((s > 0.0 && s.is_finite()).then_some(s))
}
