//! mosaic-model: the analytical random-write model of erasure-coded drive
//! arrays, after Jeremic, Parzyjegla and Mühl, "Improving Random Write
//! Performance in Homogeneous and Heterogeneous Erasure-Coded Drive Arrays",
//! ACM Applied Computing Review 15(4), 2015.  Pure math, no I/O.
//!
//! # Notation
//!
//! n drives, k code blocks per stripe (n − k data units), a logical write of
//! s bytes covering d whole data units (1 <= d <= n − k) of x = s/d bytes
//! (stripe unit u = s/d).  t_read(x), t_write(x): isolated random service
//! times of one drive ([`DriveTiming`]); λ_rr = x/t_read, λ_rw = x/t_write.
//!
//! # Reads and writes per method (Sect. 3.1–3.2)
//!
//! ```text
//!   RMW  d < (n − 2k)/2          r = d + k        w = d + k     (Eq. 1, 4)
//!   RCW  (n − 2k)/2 <= d < n − k r = n − k − d    w = d + k     (Eq. 5)
//!   FSW  d = n − k               r = 0            w = n         (Eq. 6)
//! ```
//!
//! RMW iff it reads fewer blocks (d + k < n − k − d); ties go to RCW.
//!
//! # Speedup and throughput (Eq. 2, 3, 11, 12)
//!
//! ```text
//!   λ_array(d) = n · (r/λ_rr + w/λ_rw)^-1                       (Eq. 2)
//!   S(d) = λ_array / (λ_rw / d) = d·n / (α·r + w),  α = λ_rw/λ_rr (Eq. 3)
//!
//!   S_RMW = d·n / ((α + 1)(d + k))                               (Eq. 4)
//!   S_RCW = d·n / (α(n − k − d) + d + k)                         (Eq. 5)
//!   S_FSW = d·n / (d + k) = d = n − k                            (Eq. 6)
//!
//!   HDD:  λ(x) = x / (t_pos + x/R),  α = 1                       (Eq. 11)
//!         S_RMW = d·n / (2(d + k)),  S_RCW = S_FSW = d           (Eq. 9, 10)
//!   array bytes/s:  λ_array(s, d) = S(d) · λ_rw(s/d)              (Eq. 12)
//!                                 = n·s / (r·t_read(s/d) + w·t_write(s/d))
//! ```
//!
//! The extraction renders Eq. 4 as "d·n / (α·(d+k) + (d+k))", which is the
//! (α + 1)(d + k) above, and Eq. 20 confirms it; Eq. 5 and 6 are as given.
//! α is the paper's λ_rw/λ_rr = t_read/t_write (see [`alpha`]; the brief's
//! "write/read service time" is its reciprocal).  This crate evaluates the
//! last form of Eq. 12 for any [`DriveTiming`] ([`Array::throughput`]); for
//! [`HddSimple`] it equals Eq. 12 exactly ([`throughput_hdd_closed_form`]).
//!
//! # Crossovers (Sect. 4.1, Ineq. 13–18)
//!
//! ```text
//!   RMW(d1) beats RMW(d2), d1 < d2:   s < (d1·d2 / k) · R·t_pos                           (14)
//!   RCW(d1) beats RCW(d2) iff d1 > d2 (FSW beats every RCW)                               (16)
//!   RMW(d1) beats RCW/FSW(d2):        s < d1·d2·(n − 2d1 − 2k) / (2d1·d2 + 2d2·k − d1·n) · R·t_pos (18)
//! ```
//!
//! Both follow from writing every candidate's reciprocal HDD throughput as
//! A/s + B with A = (r + w)·t_pos/n, B = (r + w)/(n·d·R); two candidates
//! tie at s = ΔA/(−ΔB).  With the paper's drive (t_pos = 5 ms,
//! R = 89,592 KiB/s, R·t_pos = 447.96 KiB):
//!
//! ```text
//!   n = 9,  k = 1: RMW d=1 beats FSW (d2 = 8) below 40/23 · 447.96 = 779.06 KiB
//!   n = 10, k = 2: RMW d=1 beats FSW (d2 = 8) below 32/38 · 447.96 = 377.23 KiB
//!   n = 10, k = 1: RMW d=1 beats FSW (d2 = 9) below 54/26 · 447.96 = 930.38 KiB
//!                  RMW d=2 wins on [2/1 · 447.96, 72/34 · 447.96] = [895.92, 948.62] KiB
//!                  (Ineq. 14 with d1 = 1, d2 = 2; Ineq. 18 with d1 = 2, d2 = 9)
//! ```
//!
//! (The paper quotes 930.38 and 895.92–948.62 KiB under "HDD RAID-5" in
//! Sect. 6.3.1; those are the n = 10, k = 1 array of that paragraph and of
//! Fig. 2.)  [`win_intervals`] computes such windows exactly for the HDD
//! and by bisection for other drives.
//!
//! # SSDs (Sect. 4.2), advisor, CBRO (Sect. 5)
//!
//! * [`ssd_advice`]: stripe unit = effective flash page when the vast
//!   majority of writes are page-aligned; α per size from the timing
//!   ([`alpha_by_size`]).
//! * [`advise`]: rank candidate stripe units for a write-size mix.
//! * [`cbro_speedup_rmw`], [`cbro_gain`], [`cbro_check`]:
//!   S_CBRO,RMW = n/(α + 1) (Eq. 19), gain (d + k)/d (Eq. 20), CDA capacity
//!   and performance checks (Eq. 21, Ineq. 23).
//! * [`model_report`]: everything above for `mosaic model`.

mod advise;
mod cbro;
mod drive;
mod intervals;
mod model;
mod report;

pub use advise::{
    advise, advise_with, default_candidates, ssd_advice, ssd_advice_with, ssd_unit_rule, write_cost, Advice, CandidateScore, SsdAdvice, SSD_ALIGNED_MAJORITY,
};
pub use cbro::{cbro_check, cbro_gain, cbro_speedup_rmw, cbro_throughput_rmw, CbroCheck};
pub use drive::{alpha, alpha_by_size, hdd_lambda, DriveTiming, FnTiming, HddSimple};
pub use intervals::{crossover_numeric, crossover_sizes, win_intervals, win_intervals_numeric, Beats, Interval, BISECT_REL, SCAN_PER_OCTAVE};
pub use model::{
    crossover_hdd, crossover_rmw_rcw, crossover_rmw_rmw, speedup_fsw, speedup_rcw, speedup_rmw, throughput_array, throughput_hdd_closed_form, winner, Array, Choice, Method, Winner, MAX_DRIVES,
};
pub use report::{model_report, parse_size_range, Crossover, ModelReport, Point, RmwCrossover, SizeRow, CROSSOVER_SEARCH};

/// Errors for bad model input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("{0}")]
    Input(String),
}

#[cfg(test)]
mod tests;
