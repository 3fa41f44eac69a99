//! CBRO: Code Block Request Offloading (Sect. 5).
//!
//! n data drives hold only data; each of the k code columns lives on its own
//! check drive array (CDA).  An RMW of d units then costs the data drives
//! only r = d reads and w = d writes (the k code reads/writes go to the
//! CDAs), so by Eq. 3
//!
//! ```text
//!   S_CBRO,RMW = d·n / (α·d + d) = n / (α + 1)            (Eq. 19)
//!   S_CBRO,RMW / S_RMW = (d + k) / d                       (Eq. 20)
//! ```
//!
//! provided every CDA keeps up (Sect. 5.3):
//!
//! ```text
//!   capacity:     C_CDA >= C_D (used capacity of one data drive)     (Eq. 21)
//!   performance:  1 / t_RMW,CDA(u) >= n / t_RMW,D(u)                 (Ineq. 23)
//! ```
//!
//! with t_RMW(u) = t_read(u) + t_write(u), the service time of one RMW of a
//! u-byte block (read then write), taken from the [`DriveTiming`] given.
//! For a CDA that is itself an array, or an SSD serving many requests at
//! once, pass timings that already reflect that (e.g. saturated per-op
//! times); the check only compares rates.

use serde::Serialize;

use crate::DriveTiming;

/// Eq. 19: S_CBRO,RMW = n / (α + 1) over one data drive, independent of d
/// and k.
pub fn cbro_speedup_rmw(n: usize, alpha: f64) -> f64 {
    n as f64 / (alpha + 1.0)
}

/// Eq. 20: CBRO's gain over distributed code blocks for RMW, (d + k) / d
/// (2 over RAID-5 and 3 over RAID-6 for d = 1).
pub fn cbro_gain(d: usize, k: usize) -> f64 {
    (d + k) as f64 / d as f64
}

/// Random-write throughput (bytes/s) of n CBRO data drives doing RMWs of d
/// units of `unit` bytes, assuming the CDAs keep up: n·d·u / (d·(t_r + t_w))
/// = n·u / t_RMW,D(u).
pub fn cbro_throughput_rmw(n: usize, drive: &dyn DriveTiming, unit: u64) -> f64 {
    n as f64 * unit as f64 / ((drive.read_ns(unit) + drive.write_ns(unit)) / 1e9)
}

/// Result of the CDA requirement checks.
#[derive(Debug, Clone, Serialize)]
pub struct CbroCheck {
    pub capacity_ok: bool,
    pub performance_ok: bool,
    /// RMWs per second one CDA can absorb at unit size u: 1 / t_RMW,CDA(u).
    pub cda_rmw_per_s: f64,
    /// RMWs per second the n data drives issue: n / t_RMW,D(u).
    pub data_rmw_per_s: f64,
    /// cda_rmw_per_s / data_rmw_per_s; below 1 the CDA is the bottleneck
    /// and caps the array at this fraction of the CBRO prediction.
    pub cda_headroom: f64,
    pub cda_capacity_bytes: u64,
    pub data_used_bytes: u64,
    /// Empty if both checks pass; otherwise the warnings, e.g.
    /// "CDA will be the bottleneck: ...".
    pub message: String,
}

/// Capacity (Eq. 21: each CDA >= the used capacity of one data drive) and
/// performance (Ineq. 23: 1/t_RMW,CDA(u) >= n/t_RMW,D(u)) checks for n data
/// drives `data`, one CDA `cda`, stripe unit `unit`.
pub fn cbro_check(n: usize, unit: u64, data: &dyn DriveTiming, cda: &dyn DriveTiming, cda_capacity: u64, data_used: u64) -> CbroCheck {
    let t_data = (data.read_ns(unit) + data.write_ns(unit)) / 1e9;
    let t_cda = (cda.read_ns(unit) + cda.write_ns(unit)) / 1e9;
    let cda_rate = 1.0 / t_cda;
    let data_rate = n as f64 / t_data;
    let capacity_ok = cda_capacity >= data_used;
    let performance_ok = cda_rate >= data_rate;
    let mut msg = Vec::new();
    if !capacity_ok {
        msg.push(format!("CDA too small: {cda_capacity} bytes, below the {data_used} bytes used on one data drive (Eq. 21)"));
    }
    if !performance_ok {
        msg.push(format!(
            "CDA will be the bottleneck: it absorbs {cda_rate:.0} code-block RMWs/s at unit {unit} B, the {n} data drives issue {data_rate:.0}/s (Ineq. 23), so CBRO reaches only {:.0}% of its predicted throughput",
            cda_rate / data_rate * 100.0
        ));
    }
    CbroCheck {
        capacity_ok,
        performance_ok,
        cda_rmw_per_s: cda_rate,
        data_rmw_per_s: data_rate,
        cda_headroom: cda_rate / data_rate,
        cda_capacity_bytes: cda_capacity,
        data_used_bytes: data_used,
        message: msg.join("; "),
    }
}
