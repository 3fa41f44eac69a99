//! CBRO: Code Block Request Offloading (Sect. 5).

use serde::Serialize;

use crate::DriveTiming;

/// S_CBRO,RMW = n / (α + 1) over one data drive (Eq. 19).
pub fn cbro_speedup_rmw(n: usize, alpha: f64) -> f64 {
    n as f64 / (alpha + 1.0)
}

/// Gain of CBRO over distributed code blocks for RMW: (d + k) / d (Eq. 20).
pub fn cbro_gain(d: usize, k: usize) -> f64 {
    (d + k) as f64 / d as f64
}

/// Whether a check drive array keeps up.
#[derive(Debug, Clone, Serialize)]
pub struct CbroCheck {
    pub capacity_ok: bool,
    pub performance_ok: bool,
    /// RMWs per second one CDA can absorb at unit size u: 1 / t_RMW,CDA(u).
    pub cda_rmw_per_s: f64,
    /// RMWs per second n data drives can issue: n / t_RMW,data(u).
    pub data_rmw_per_s: f64,
    pub message: String,
}

/// Capacity (each CDA >= the used capacity of one data drive) and
/// performance (1/t_RMW,CDA(u) >= n/t_RMW,data(u)) checks.
pub fn cbro_check(n: usize, unit: u64, data: &dyn DriveTiming, cda: &dyn DriveTiming, cda_capacity: u64, data_used: u64) -> CbroCheck {
    let t_data = (data.read_ns(unit) + data.write_ns(unit)) / 1e9;
    let t_cda = (cda.read_ns(unit) + cda.write_ns(unit)) / 1e9;
    let cda_rate = 1.0 / t_cda;
    let data_rate = n as f64 / t_data;
    let capacity_ok = cda_capacity >= data_used;
    let performance_ok = cda_rate >= data_rate;
    let mut msg = Vec::new();
    if !capacity_ok {
        msg.push(format!("CDA capacity {cda_capacity} bytes is below the {data_used} bytes used on one data drive"));
    }
    if !performance_ok {
        msg.push(format!(
            "CDA will be the bottleneck: it absorbs {cda_rate:.0} code-block RMWs/s at unit {unit} B, the {n} data drives issue {data_rate:.0}/s"
        ));
    }
    CbroCheck { capacity_ok, performance_ok, cda_rmw_per_s: cda_rate, data_rmw_per_s: data_rate, message: msg.join("; ") }
}
