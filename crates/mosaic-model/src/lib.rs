//! mosaic-model: the analytical random-write model of erasure-coded drive
//! arrays, after Jeremic, Parzyjegla and Mühl, "Improving Random Write
//! Performance in Homogeneous and Heterogeneous Erasure-Coded Drive Arrays",
//! ACM Applied Computing Review 15(4), 2015.
//!
//! Notation: n drives, k code blocks per stripe, a logical write of s bytes
//! touching d data units of x = s/d bytes.  A write reads r and writes w
//! units (Sect. 3.2):
//!
//! ```text
//!   RMW  (d < (n-2k)/2):        r = d + k        w = d + k
//!   RCW  ((n-2k)/2 <= d < n-k): r = n - k - d    w = d + k
//!   FSW  (d = n-k):             r = 0            w = n
//!
//!   speedup over one drive (Eq. 3):  S = d·n / (α·r + w),   α = λ_rw / λ_rr
//!   array throughput (Eq. 12):       λ_array = S · λ_rw(x)
//!                                            = n·s / (r·t_read(x) + w·t_write(x))
//!   HDD (Eq. 11):                    λ(x) = x / (t_pos + x/R),  α = 1
//! ```
//!
//! The last form is what this crate evaluates, for any drive that can say
//! how long an isolated random read or write of x bytes takes
//! ([`DriveTiming`]); for the simple HDD it reduces exactly to the paper's
//! closed forms, including the crossovers (Ineq. 14 and 18):
//!
//! ```text
//!   RMW(d1) beats RMW(d2), d1 < d2:   s < (d1·d2 / k) · R·t_pos
//!   RMW(d1) beats RCW/FSW(d2):        s < d1·d2·(n-2·d1-2·k) / (2·d1·d2 + 2·d2·k - d1·n) · R·t_pos
//! ```
//!
//! CBRO (Sect. 5): code blocks on k separate check drive arrays leave the
//! data drives r = w = d, so S_CBRO,RMW = n / (α+1), a gain of (d+k)/d over
//! distributed code blocks (Eq. 19–20).

mod advise;
mod cbro;
mod report;

use serde::Serialize;

pub use advise::{advise, default_candidates, ssd_unit_rule, Advice, CandidateScore};
pub use cbro::{cbro_check, cbro_gain, cbro_speedup_rmw, CbroCheck};
pub use report::{model_report, parse_size_range, ModelReport, SizeRow};

/// Errors for bad model input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("{0}")]
    Input(String),
}

/// Isolated random request service times of one drive, in nanoseconds.
pub trait DriveTiming {
    fn read_ns(&self, bytes: u64) -> f64;
    fn write_ns(&self, bytes: u64) -> f64;
}

/// The simple HDD: t_pos + x/R for reads and writes alike.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HddSimple {
    pub t_pos_s: f64,
    pub rate_bytes_per_s: f64,
}

impl HddSimple {
    /// The paper's Seagate ST91000640SS: t_pos = 5 ms, R = 89,592 KiB/s.
    pub fn seagate_st91000640ss() -> HddSimple {
        HddSimple { t_pos_s: 0.005, rate_bytes_per_s: 89_592.0 * 1024.0 }
    }

    /// R · t_pos in bytes, the drive's scale for every crossover.
    pub fn r_tpos(&self) -> f64 {
        self.rate_bytes_per_s * self.t_pos_s
    }
}

impl DriveTiming for HddSimple {
    fn read_ns(&self, bytes: u64) -> f64 {
        (self.t_pos_s + bytes as f64 / self.rate_bytes_per_s) * 1e9
    }
    fn write_ns(&self, bytes: u64) -> f64 {
        self.read_ns(bytes)
    }
}

/// Any pair of closures as a drive (adapts other crates' drive models).
pub struct FnTiming<R: Fn(u64) -> f64, W: Fn(u64) -> f64> {
    pub read: R,
    pub write: W,
}

impl<R: Fn(u64) -> f64, W: Fn(u64) -> f64> DriveTiming for FnTiming<R, W> {
    fn read_ns(&self, bytes: u64) -> f64 {
        (self.read)(bytes)
    }
    fn write_ns(&self, bytes: u64) -> f64 {
        (self.write)(bytes)
    }
}

/// Code block update method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Rmw,
    Rcw,
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

/// An array shape: n drives, k code blocks per stripe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Array {
    pub n: usize,
    pub k: usize,
}

impl Array {
    pub fn new(n: usize, k: usize) -> Result<Array, ModelError> {
        if n == 0 || k >= n {
            return Err(ModelError::Input(format!("need n > k >= 0 drives and code blocks, got n = {n}, k = {k}")));
        }
        Ok(Array { n, k })
    }

    /// Data units per stripe.
    pub fn data(&self) -> usize {
        self.n - self.k
    }

    /// The method the fewest-reads rule picks for d data units (ties: RCW),
    /// which is also the paper's rule: RMW iff d < (n-2k)/2.
    pub fn method(&self, d: usize) -> Method {
        if d >= self.data() {
            Method::Fsw
        } else if d + self.k < self.data() - d {
            Method::Rmw
        } else {
            Method::Rcw
        }
    }

    /// Units read and written for d data units with `m`.
    pub fn reads_writes(&self, d: usize, m: Method) -> (usize, usize) {
        match m {
            Method::Rmw => (d + self.k, d + self.k),
            Method::Rcw => (self.data() - d, d + self.k),
            Method::Fsw => (0, self.n),
        }
    }

    /// Speedup over one drive (Eq. 3–6).
    pub fn speedup(&self, d: usize, m: Method, alpha: f64) -> f64 {
        let (r, w) = self.reads_writes(d, m);
        (d * self.n) as f64 / (alpha * r as f64 + w as f64)
    }

    /// Random-write throughput in bytes/s of logical writes of `s` bytes
    /// split into d units, updated with `m`.
    pub fn throughput(&self, drive: &dyn DriveTiming, s: f64, d: usize, m: Method) -> f64 {
        let x = (s / d as f64).round().max(1.0) as u64;
        let (r, w) = self.reads_writes(d, m);
        let t = r as f64 * drive.read_ns(x) + w as f64 * drive.write_ns(x);
        self.n as f64 * s / (t / 1e9)
    }

    /// Throughput of d units with the method the planner picks.
    pub fn throughput_auto(&self, drive: &dyn DriveTiming, s: f64, d: usize) -> f64 {
        self.throughput(drive, s, d, self.method(d))
    }

    /// The best (d, method) for logical writes of `s` bytes.
    pub fn winner(&self, drive: &dyn DriveTiming, s: f64) -> (usize, Method, f64) {
        (1..=self.data())
            .map(|d| (d, self.method(d), self.throughput_auto(drive, s, d)))
            .fold((1, Method::Rmw, f64::MIN), |best, c| if c.2 > best.2 { c } else { best })
    }
}

/// Ineq. 14: RMW(d1) beats RMW(d2) while s is below this (bytes).
pub fn crossover_rmw_rmw(k: usize, d1: usize, d2: usize, r_tpos: f64) -> f64 {
    (d1 * d2) as f64 / k as f64 * r_tpos
}

/// Ineq. 18: RMW(d1) beats RCW/FSW(d2) while s is below this (bytes);
/// infinite when the denominator is not positive (RMW always wins).
pub fn crossover_rmw_rcw(n: usize, k: usize, d1: usize, d2: usize, r_tpos: f64) -> f64 {
    let (n, k, d1, d2) = (n as f64, k as f64, d1 as f64, d2 as f64);
    let den = 2.0 * d1 * d2 + 2.0 * d2 * k - d1 * n;
    if den <= 0.0 {
        return f64::INFINITY;
    }
    d1 * d2 * (n - 2.0 * d1 - 2.0 * k) / den * r_tpos
}

#[cfg(test)]
mod tests;
