//! Hard disk drives.
//!
//! # Simple model (`kind = "hdd"`)
//!
//! The model of Jeremic et al.: every read or write of `x` bytes costs a
//! positioning time plus a transfer, `t_pos + x / R`, requests are served
//! one at a time in submission order.  Nothing else (no head state, no
//! locality): it is exactly the analytical model.
//!
//! # Detailed model (`kind = "hdd-detailed"`)
//!
//! The head sits on a cylinder; the platter turns with virtual time.  A read
//! or write costs
//!
//! ```text
//!   seek(|target cylinder - head cylinder|)
//! + write settle                   (writes, only after a seek of >= 1 cylinder)
//! + rotational wait                (until the first byte's angle is under the head)
//! + len / R + crossings * skew     (transfer; each cylinder boundary crossed
//!                                   inside the request costs one track-to-track seek)
//! ```
//!
//! **Layout.**  Bytes map linearly to cylinders: cylinder = ⌊offset ·
//! cylinders / capacity⌋ (head switches inside a cylinder are free).  The
//! angle of a byte is its position in the serpentine of tracks with a
//! cylinder skew equal to the track-to-track seek:
//! `τ(offset) = offset / R + cylinder(offset) · seek(1)`, angle =
//! `frac(τ / T_rev)`.  The head's angle at virtual time `t` is
//! `frac(t / T_rev)`.  So a request that starts where the previous one ended,
//! dispatched the moment it completed, continues with no rotational wait,
//! even across a cylinder boundary; one dispatched later pays for the
//! rotation it missed (there is no read-ahead or write cache).  A head within
//! 1 µs past the target angle counts as on time.
//!
//! **Seek curve** (Ruemmler & Wilkes, "An introduction to disk drive
//! modeling", IEEE Computer 27(3), 1994): with `x = d / (cylinders - 1)` the
//! seek distance as a fraction of the full stroke,
//!
//! ```text
//!   seek(0) = 0
//!   seek(d) = a + b·√x     for x <  x_b   (short seeks: acceleration-limited)
//!   seek(d) = c + e·x      for x >= x_b   (long seeks: coast at top speed)
//! ```
//!
//! The four coefficients are fitted to the three numbers a datasheet gives,
//! `track_to_track_ms` = seek(1), `full_stroke_ms` = seek(cylinders - 1) and
//! `average_seek_ms` = the mean over uniformly random start and end
//! cylinders (distance density 2(1 - x), the same weighting as the
//! datasheets' "weighted average of all possible seeks"), plus continuity at
//! `x_b = short_seek_fraction` (default 0.2, about where the HP 97560 of
//! Ruemmler & Wilkes switches regime: 383 of 1962 cylinders).  The fit is a
//! 4×4 linear system; a configuration whose fit is not monotone (b < 0 or
//! e < 0) is rejected by validation.
//!
//! **Reordering.**  `scheduler = "fifo" | "sstf" | "sptf"`: with SSTF,
//! [`DriveModel::pick`] chooses the pending request with the shortest seek
//! distance from the head; with SPTF the shortest positioning time (seek +
//! settle + rotational wait) at the moment the drive becomes free.  Ties go to
//! the oldest request; nothing is reordered across a `Flush`.  Neither ages
//! requests, so a far request can starve under a steady stream of near ones
//! (as with real SPTF without aging).

use serde::{Deserialize, Serialize};

use crate::{
    check_range, ns, unsupported, xfer_ns, DriveError, DriveModel, DriveRequest, Nanos, ReqKind,
};

/// Parameters of the simple HDD model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HddSimpleParams {
    /// Bytes.
    pub capacity: u64,
    /// Positioning time (seek + rotational latency) per request.
    pub t_pos_ms: f64,
    /// Media transfer rate in KiB/s (KiB = 1024 bytes).
    pub rate_kib_s: f64,
}

impl HddSimpleParams {
    pub fn validate(&self) -> Result<(), DriveError> {
        nonneg(self.t_pos_ms, "t_pos_ms")?;
        positive(self.rate_kib_s, "rate_kib_s")?;
        positive_u(self.capacity, "capacity")
    }
}

/// `t_pos + x / R`, FIFO, one at a time.
#[derive(Debug, Clone)]
pub struct HddSimple {
    pub name: String,
    p: HddSimpleParams,
    busy_until: Nanos,
    /// The last read or write length and its service time: a replay
    /// sends the same few lengths millions of times, and the time is a
    /// pure function of the length (`p` does not change).
    last: (u64, Nanos),
}

impl HddSimple {
    pub fn new(name: &str, p: HddSimpleParams) -> HddSimple {
        HddSimple {
            name: name.to_string(),
            p,
            busy_until: 0,
            last: (u64::MAX, 0),
        }
    }

    /// [`service_ns`](Self::service_ns) of a read or write of `len`
    /// bytes, rounded, from `last` when it is that length's.
    #[inline]
    fn io_ns(&mut self, len: u64) -> Nanos {
        if self.last.0 != len {
            self.last = (len, ns(self.service_ns(ReqKind::Read, len)));
        }
        self.last.1
    }

    fn service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        match kind {
            ReqKind::Read | ReqKind::Write => {
                self.p.t_pos_ms * 1e6 + xfer_ns(len, self.p.rate_kib_s * 1024.0)
            }
            _ => 0.0,
        }
    }
}

impl DriveModel for HddSimple {
    fn describe(&self) -> String {
        format!("{} (simple)", self.name)
    }
    fn capacity(&self) -> u64 {
        self.p.capacity
    }
    fn queue_depth(&self) -> usize {
        1
    }
    fn reorders(&self) -> bool {
        false
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        let start = now.max(self.busy_until);
        match req.kind {
            ReqKind::Flush => return Ok(start),
            ReqKind::ZoneReset | ReqKind::ZoneFinish => {
                return Err(unsupported(&self.name, req.kind))
            }
            ReqKind::Read | ReqKind::Write => check_range(req, self.p.capacity)?,
        }
        self.busy_until = start.saturating_add(self.io_ns(req.len));
        Ok(self.busy_until)
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        self.service_ns(kind, len)
    }
}

/// Request reordering of the detailed HDD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduler {
    /// Submission order.
    #[default]
    Fifo,
    /// Shortest seek (cylinder distance) first.
    Sstf,
    /// Shortest positioning time (seek + settle + rotation) first.
    Sptf,
}

fn default_short_seek_fraction() -> f64 {
    0.2
}

/// Parameters of the detailed HDD model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HddDetailedParams {
    /// Bytes.
    pub capacity: u64,
    /// Spindle speed.
    pub rpm: f64,
    /// Cylinders the capacity is spread over (linearly).
    pub cylinders: u64,
    /// seek(1 cylinder).
    pub track_to_track_ms: f64,
    /// Mean seek over uniformly random start and end cylinders.
    pub average_seek_ms: f64,
    /// seek(cylinders - 1).
    pub full_stroke_ms: f64,
    /// Where the seek curve switches from `a + b√x` to `c + e·x`, as a
    /// fraction of the full stroke.
    #[serde(default = "default_short_seek_fraction")]
    pub short_seek_fraction: f64,
    /// Extra time before a write after a seek.
    #[serde(default)]
    pub write_settle_ms: f64,
    /// Media transfer rate in KiB/s (constant over the surface).
    pub rate_kib_s: f64,
    #[serde(default)]
    pub scheduler: Scheduler,
}

impl HddDetailedParams {
    pub fn validate(&self) -> Result<(), DriveError> {
        positive_u(self.capacity, "capacity")?;
        positive(self.rpm, "rpm")?;
        positive(self.rate_kib_s, "rate_kib_s")?;
        if self.cylinders < 2 {
            return Err(DriveError::config("cylinders", "must be at least 2"));
        }
        if self.capacity < self.cylinders {
            return Err(DriveError::config(
                "cylinders",
                "more cylinders than bytes of capacity",
            ));
        }
        nonneg(self.track_to_track_ms, "track_to_track_ms")?;
        nonneg(self.write_settle_ms, "write_settle_ms")?;
        if !(self.average_seek_ms.is_finite() && self.average_seek_ms >= self.track_to_track_ms) {
            return Err(DriveError::config(
                "average_seek_ms",
                "must be at least track_to_track_ms",
            ));
        }
        if !(self.full_stroke_ms.is_finite() && self.full_stroke_ms >= self.average_seek_ms) {
            return Err(DriveError::config(
                "full_stroke_ms",
                "must be at least average_seek_ms",
            ));
        }
        if !(self.short_seek_fraction > 0.0 && self.short_seek_fraction < 1.0) {
            return Err(DriveError::config(
                "short_seek_fraction",
                "must be strictly between 0 and 1",
            ));
        }
        SeekCurve::fit(self).map(|_| ())
    }
}

/// The two-regime seek curve: `a + b√x` below `boundary`, `c + e·x` above,
/// `x` = distance / `max_distance`; coefficients in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeekCurve {
    pub a_ns: f64,
    pub b_ns: f64,
    pub c_ns: f64,
    pub e_ns: f64,
    pub boundary: f64,
    /// cylinders - 1.
    pub max_distance: u64,
}

impl SeekCurve {
    /// Fit to track-to-track, average and full-stroke times (module docs).
    pub fn fit(p: &HddDetailedParams) -> Result<SeekCurve, DriveError> {
        let max_distance = p.cylinders.saturating_sub(1).max(1);
        let xb = p.short_seek_fraction;
        let x1 = 1.0 / max_distance as f64;
        // Moments of the random seek distance density f(x) = 2(1 - x).
        let f_short = 2.0 * xb - xb * xb; // ∫0^xb f
        let s_short = 2.0 * (2.0 / 3.0 * xb.powf(1.5) - 2.0 / 5.0 * xb.powf(2.5)); // ∫0^xb √x f
        let f_long = (1.0 - xb) * (1.0 - xb); // ∫xb^1 f
        let x_long = 1.0 / 3.0 - xb * xb + 2.0 / 3.0 * xb * xb * xb; // ∫xb^1 x f
        let m = [
            [1.0, x1.sqrt(), 0.0, 0.0, p.track_to_track_ms * 1e6],
            [0.0, 0.0, 1.0, 1.0, p.full_stroke_ms * 1e6],
            [1.0, xb.sqrt(), -1.0, -xb, 0.0],
            [f_short, s_short, f_long, x_long, p.average_seek_ms * 1e6],
        ];
        let sol = solve4(m).ok_or_else(|| {
            DriveError::config(
                "average_seek_ms",
                "the seek curve cannot be fitted to these times",
            )
        })?;
        let [a_ns, b_ns, c_ns, e_ns] = sol;
        if !sol.iter().all(|v| v.is_finite()) || b_ns < -1e-6 || e_ns < -1e-6 || a_ns < -1e-6 {
            return Err(DriveError::config(
                "average_seek_ms",
                format!(
                    "with track_to_track_ms {}, full_stroke_ms {} and short_seek_fraction {} the fitted seek curve is not monotone \
                     (a {:.3} ms, b {:.3} ms, c {:.3} ms, e {:.3} ms): change the average or the boundary",
                    p.track_to_track_ms,
                    p.full_stroke_ms,
                    xb,
                    a_ns / 1e6,
                    b_ns / 1e6,
                    c_ns / 1e6,
                    e_ns / 1e6
                ),
            ));
        }
        Ok(SeekCurve {
            a_ns: a_ns.max(0.0),
            b_ns: b_ns.max(0.0),
            c_ns,
            e_ns: e_ns.max(0.0),
            boundary: xb,
            max_distance,
        })
    }

    /// A straight line from track-to-track to full stroke: the fallback for
    /// configurations that were not validated.
    fn linear(p: &HddDetailedParams) -> SeekCurve {
        let t2t = p.track_to_track_ms.max(0.0) * 1e6;
        let full = (p.full_stroke_ms * 1e6).max(t2t);
        SeekCurve {
            a_ns: 0.0,
            b_ns: 0.0,
            c_ns: t2t,
            e_ns: full - t2t,
            boundary: 0.0,
            max_distance: p.cylinders.saturating_sub(1).max(1),
        }
    }

    pub fn seek_ns(&self, distance: u64) -> f64 {
        if distance == 0 {
            return 0.0;
        }
        let x = distance.min(self.max_distance) as f64 / self.max_distance as f64;
        if x < self.boundary {
            self.a_ns + self.b_ns * x.sqrt()
        } else {
            self.c_ns + self.e_ns * x
        }
    }
}

/// Gaussian elimination with partial pivoting on an augmented 4×5 matrix.
fn solve4(mut m: [[f64; 5]; 4]) -> Option<[f64; 4]> {
    for col in 0..4 {
        let piv = (col..4).max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs()))?;
        if m[piv][col].abs() < 1e-300 {
            return None;
        }
        m.swap(col, piv);
        let pivot = m[col];
        for (r, row) in m.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot[col];
                for (x, p) in row.iter_mut().zip(pivot.iter()).skip(col) {
                    *x -= f * p;
                }
            }
        }
    }
    Some([
        m[0][4] / m[0][0],
        m[1][4] / m[1][1],
        m[2][4] / m[2][2],
        m[3][4] / m[3][3],
    ])
}

/// A head within this much past the target angle is on time.
const ON_TIME_NS: f64 = 1000.0;

/// Seek curve, rotation and head state.
#[derive(Debug, Clone)]
pub struct HddDetailed {
    pub name: String,
    pub p: HddDetailedParams,
    curve: SeekCurve,
    rev_ns: f64,
    ns_per_byte: f64,
    skew_ns: f64,
    /// Usable bytes (the first `limit` bytes of the geometry in `p`).
    limit: u64,
    /// Mean seek between random cylinders of the usable range.
    mean_seek_ns: f64,
    head_cyl: u64,
    busy_until: Nanos,
}

impl HddDetailed {
    /// Never fails: a configuration whose seek curve cannot be fitted (which
    /// [`HddDetailedParams::validate`] rejects) gets a linear curve, and
    /// zero rates are replaced by tiny ones.
    pub fn new(name: &str, p: HddDetailedParams) -> HddDetailed {
        let curve = SeekCurve::fit(&p).unwrap_or_else(|_| SeekCurve::linear(&p));
        let rev_ns = if p.rpm > 0.0 { 60e9 / p.rpm } else { 60e9 };
        let ns_per_byte = if p.rate_kib_s > 0.0 {
            1e9 / (p.rate_kib_s * 1024.0)
        } else {
            1e9
        };
        let skew_ns = curve.seek_ns(1);
        let (limit, mean_seek_ns) = (p.capacity, p.average_seek_ms * 1e6);
        HddDetailed {
            name: name.to_string(),
            p,
            curve,
            rev_ns,
            ns_per_byte,
            skew_ns,
            limit,
            mean_seek_ns,
            head_cyl: 0,
            busy_until: 0,
        }
    }

    /// The same drive with another capacity.  Smaller: only the first
    /// `capacity` bytes are used (short-stroking: same geometry, so seeks
    /// are shorter and the random mean seek is recomputed).  Larger: more
    /// cylinders of the same density, with the same datasheet seek times
    /// over the longer stroke.
    pub fn with_capacity(name: &str, mut p: HddDetailedParams, capacity: u64) -> HddDetailed {
        if capacity > p.capacity && p.capacity > 0 {
            let c = (p.cylinders as u128 * capacity as u128).div_ceil(p.capacity as u128);
            p.cylinders = c.min(u64::MAX as u128) as u64;
            p.capacity = capacity;
            return HddDetailed::new(name, p);
        }
        let mut d = HddDetailed::new(name, p);
        if capacity < d.p.capacity {
            d.limit = capacity;
            let span = d.cylinder_of(capacity.saturating_sub(1));
            let n = 4096;
            d.mean_seek_ns = (0..n)
                .map(|i| {
                    let y = (i as f64 + 0.5) / n as f64;
                    d.curve.seek_ns((y * span as f64).round() as u64) * 2.0 * (1.0 - y) / n as f64
                })
                .sum();
        }
        d
    }

    pub fn seek_curve(&self) -> SeekCurve {
        self.curve
    }

    pub fn seek_ns(&self, distance: u64) -> f64 {
        self.curve.seek_ns(distance)
    }

    pub fn revolution_ns(&self) -> f64 {
        self.rev_ns
    }

    pub fn head_cylinder(&self) -> u64 {
        self.head_cyl
    }

    /// Cylinder holding byte `offset` (clamped to the last cylinder).
    pub fn cylinder_of(&self, offset: u64) -> u64 {
        let c = self.p.cylinders.max(1);
        let cap = self.p.capacity.max(1);
        ((offset as u128 * c as u128 / cap as u128) as u64).min(c - 1)
    }

    /// Rotational position of byte `offset`, in nanoseconds of rotation.
    fn tau(&self, offset: u64) -> f64 {
        offset as f64 * self.ns_per_byte + self.cylinder_of(offset) as f64 * self.skew_ns
    }

    /// Seek + settle + rotational wait for `req`, starting at time `t` with
    /// the head on `from_cyl`.  May be up to 1 µs negative (a head just past
    /// the target counts as on time and the transfer is realigned).
    fn positioning(&self, from_cyl: u64, t: f64, req: &DriveRequest) -> f64 {
        let d = self.cylinder_of(req.offset).abs_diff(from_cyl);
        let mut seek = self.curve.seek_ns(d);
        if d > 0 && req.kind == ReqKind::Write {
            seek += self.p.write_settle_ms * 1e6;
        }
        let arrive = t + seek;
        let mut wait = (self.tau(req.offset) - arrive).rem_euclid(self.rev_ns);
        if self.rev_ns - wait < ON_TIME_NS {
            wait -= self.rev_ns;
        }
        seek + wait
    }

    /// Positioning time `req` would have if dispatched at `now`.
    pub fn positioning_ns(&self, now: Nanos, req: &DriveRequest) -> f64 {
        self.positioning(self.head_cyl, now.max(self.busy_until) as f64, req)
            .max(0.0)
    }

    fn transfer(&self, offset: u64, len: u64) -> f64 {
        if len == 0 {
            return 0.0;
        }
        let crossings = self.cylinder_of(offset + len - 1) - self.cylinder_of(offset);
        len as f64 * self.ns_per_byte + crossings as f64 * self.skew_ns
    }
}

impl DriveModel for HddDetailed {
    fn describe(&self) -> String {
        let s = match self.p.scheduler {
            Scheduler::Fifo => "",
            Scheduler::Sstf => ", SSTF",
            Scheduler::Sptf => ", SPTF",
        };
        format!("{} (detailed, {} rpm{s})", self.name, self.p.rpm)
    }
    fn capacity(&self) -> u64 {
        self.limit
    }
    fn queue_depth(&self) -> usize {
        1
    }
    fn reorders(&self) -> bool {
        self.p.scheduler != Scheduler::Fifo
    }
    fn pick(&self, now: Nanos, pending: &[DriveRequest]) -> usize {
        if self.p.scheduler == Scheduler::Fifo || pending.len() < 2 {
            return 0;
        }
        // Nothing moves ahead of a flush.
        let n = pending
            .iter()
            .position(|r| r.kind == ReqKind::Flush)
            .unwrap_or(pending.len());
        if n == 0 {
            return 0;
        }
        let t = now.max(self.busy_until) as f64;
        let cost = |r: &DriveRequest| -> f64 {
            if !matches!(r.kind, ReqKind::Read | ReqKind::Write) {
                return 0.0;
            }
            match self.p.scheduler {
                Scheduler::Sstf => self.cylinder_of(r.offset).abs_diff(self.head_cyl) as f64,
                _ => self.positioning(self.head_cyl, t, r),
            }
        };
        let mut best = (0, f64::INFINITY);
        for (i, r) in pending[..n].iter().enumerate() {
            let c = cost(r);
            if c < best.1 {
                best = (i, c);
            }
        }
        best.0
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        let start = now.max(self.busy_until);
        match req.kind {
            ReqKind::Flush => return Ok(start),
            ReqKind::ZoneReset | ReqKind::ZoneFinish => {
                return Err(unsupported(&self.name, req.kind))
            }
            ReqKind::Read | ReqKind::Write => check_range(req, self.limit)?,
        }
        let t = start as f64;
        let end = t + self.positioning(self.head_cyl, t, req) + self.transfer(req.offset, req.len);
        self.head_cyl = self.cylinder_of(req.offset + req.len.saturating_sub(1));
        self.busy_until = ns(end).max(start);
        Ok(self.busy_until)
    }
    /// Average seek (+ settle for writes) + half a revolution + transfer
    /// (with the expected number of cylinder crossings).
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        let settle = match kind {
            ReqKind::Write => self.p.write_settle_ms * 1e6,
            ReqKind::Read => 0.0,
            _ => return 0.0,
        };
        let bytes_per_cyl = self.p.capacity as f64 / self.p.cylinders.max(1) as f64;
        self.mean_seek_ns
            + settle
            + self.rev_ns / 2.0
            + len as f64 * self.ns_per_byte
            + len as f64 / bytes_per_cyl * self.skew_ns
    }
}

pub(crate) fn positive(v: f64, field: &str) -> Result<(), DriveError> {
    if v > 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(DriveError::config(
            field,
            format!("must be a positive number, not {v}"),
        ))
    }
}

pub(crate) fn nonneg(v: f64, field: &str) -> Result<(), DriveError> {
    if v >= 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(DriveError::config(
            field,
            format!("must be a non-negative number, not {v}"),
        ))
    }
}

pub(crate) fn positive_u(v: u64, field: &str) -> Result<(), DriveError> {
    if v > 0 {
        Ok(())
    } else {
        Err(DriveError::config(field, "must be positive"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn w(offset: u64, len: u64) -> DriveRequest {
        DriveRequest::write(offset, len)
    }

    fn seagate_simple() -> HddSimple {
        HddSimple::new(
            "s",
            HddSimpleParams {
                capacity: 1_000_204_886_016,
                t_pos_ms: 5.0,
                rate_kib_s: 89_592.0,
            },
        )
    }

    #[test]
    fn simple_is_tpos_plus_transfer_and_fifo() {
        let mut d = seagate_simple();
        let expect = 5e6 + 4096.0 * 1e9 / (89_592.0 * 1024.0); // 5,044,646.7 ns
        assert!((d.random_service_ns(ReqKind::Write, 4096) - expect).abs() < 1e-6);
        assert_eq!(
            d.random_service_ns(ReqKind::Write, 4096),
            d.random_service_ns(ReqKind::Read, 4096)
        );
        let t1 = d.submit(0, &w(0, 4096)).unwrap();
        let t2 = d.submit(0, &w(1 << 30, 4096)).unwrap();
        assert_eq!(t1, 5_044_647);
        assert_eq!(t1, expect.round() as u64);
        assert_eq!(t2, 2 * t1);
        // Arriving after the drive went idle: served at once.
        assert_eq!(d.submit(3 * t1, &w(0, 4096)).unwrap(), 4 * t1);
        assert_eq!(
            d.submit(
                0,
                &DriveRequest {
                    kind: ReqKind::Flush,
                    offset: 0,
                    len: 0
                }
            )
            .unwrap(),
            4 * t1
        );
        assert!(matches!(
            d.submit(0, &w(1_000_204_886_016 - 100, 4096)),
            Err(DriveError::OutOfRange { .. })
        ));
        assert!(matches!(
            d.submit(0, &w(u64::MAX, 2)),
            Err(DriveError::OutOfRange { .. })
        ));
        assert!(matches!(
            d.submit(
                0,
                &DriveRequest {
                    kind: ReqKind::ZoneReset,
                    offset: 0,
                    len: 0
                }
            ),
            Err(DriveError::Unsupported { .. })
        ));
        // Rejected requests leave the state alone.
        assert_eq!(
            d.submit(
                0,
                &DriveRequest {
                    kind: ReqKind::Flush,
                    offset: 0,
                    len: 0
                }
            )
            .unwrap(),
            4 * t1
        );
    }

    /// The remembered last length's time is the formula's, whatever
    /// order lengths and kinds come in (a length of 0 and the largest
    /// included).
    #[test]
    fn simple_service_times_are_the_formulas_in_any_order() {
        let mut d = seagate_simple();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let lens = [0u64, 512, 4096, 4096, 65536, 4096, 1 << 20, 1 << 20, 512, 0, 7 << 30];
        let mut now = 0;
        for i in 0..2000 {
            let len = if i < lens.len() { lens[i] } else { lens[rng.gen_range(0..lens.len())] };
            let kind = if rng.gen_bool(0.5) { ReqKind::Read } else { ReqKind::Write };
            let req = DriveRequest { kind, offset: 0, len };
            let want = now + ns(d.random_service_ns(kind, len));
            assert_eq!(d.submit(now, &req).unwrap(), want, "request {i}: {len} bytes");
            now = want;
        }
    }

    pub(crate) fn params(scheduler: Scheduler) -> HddDetailedParams {
        HddDetailedParams {
            capacity: 1_000_204_886_016,
            rpm: 7200.0,
            cylinders: 165_800,
            track_to_track_ms: 0.23,
            average_seek_ms: 7.5,
            full_stroke_ms: 17.06,
            short_seek_fraction: 0.2,
            write_settle_ms: 1.0,
            rate_kib_s: 89_592.0,
            scheduler,
        }
    }

    #[test]
    fn seek_curve_fits_the_datasheet_points_and_is_monotone() {
        let p = params(Scheduler::Fifo);
        p.validate().unwrap();
        let d = HddDetailed::new("d", p.clone());
        assert_eq!(d.seek_ns(0), 0.0);
        assert!((d.seek_ns(1) - 0.23e6).abs() < 1.0, "{}", d.seek_ns(1));
        assert!(
            (d.seek_ns(165_799) - 17.06e6).abs() < 1.0,
            "{}",
            d.seek_ns(165_799)
        );
        let mut prev = 0.0;
        for dist in 0..165_800u64 {
            let s = d.seek_ns(dist);
            assert!(
                s >= prev,
                "seek({dist}) = {s} < seek({}) = {prev}",
                dist - 1
            );
            prev = s;
        }
        // Continuous at the boundary.
        let b = (0.2 * 165_799.0) as u64;
        assert!((d.seek_ns(b + 1) - d.seek_ns(b)).abs() < 2_000.0);
        // The mean over random (start, end) pairs is the datasheet average.
        let n = 200_000;
        let mut mean = 0.0;
        for i in 0..n {
            let x = (i as f64 + 0.5) / n as f64;
            mean += d.seek_ns((x * 165_799.0).round() as u64) * 2.0 * (1.0 - x) / n as f64;
        }
        assert!((mean - 7.5e6).abs() < 5e3, "mean seek {mean}");
        // Inconsistent datasheet numbers are rejected, naming the field.
        let bad = HddDetailedParams {
            average_seek_ms: 16.0,
            ..p.clone()
        };
        let e = bad.validate().unwrap_err();
        assert!(
            e.to_string().contains("average_seek_ms") && e.to_string().contains("monotone"),
            "{e}"
        );
        // ...but still build (linear fallback) without panicking.
        let mut m = HddDetailed::new("d", bad);
        assert!(m.submit(0, &w(1 << 30, 4096)).is_ok());
    }

    #[test]
    fn rotation_follows_virtual_time() {
        let mut d = HddDetailed::new("d", params(Scheduler::Fifo));
        let rev = d.revolution_ns();
        assert!((rev - 8_333_333.33).abs() < 0.01);
        // Byte 0 is under the head at t = 0: no wait.
        let t1 = d.submit(0, &DriveRequest::read(0, 4096)).unwrap();
        let x: f64 = 4096.0 * 1e9 / (89_592.0 * 1024.0);
        assert_eq!(t1, x.round() as u64);
        // Reading the same sector again: a full revolution less the transfer.
        let t2 = d.submit(t1, &DriveRequest::read(0, 4096)).unwrap();
        assert!(((t2 - t1) as f64 - rev).abs() < 2.0, "{} vs {rev}", t2 - t1);
        // Continuing where it stopped: transfer only.
        let t3 = d.submit(t2, &DriveRequest::read(4096, 4096)).unwrap();
        assert!(((t3 - t2) as f64 - x).abs() < 2.0);
        // Arriving a quarter turn late: waits the other three quarters.
        let late = t3 + (rev / 4.0) as u64;
        let t4 = d.submit(late, &DriveRequest::read(8192, 4096)).unwrap();
        assert!(
            ((t4 - late) as f64 - (0.75 * rev + x)).abs() < 3.0,
            "{}",
            t4 - late
        );
    }

    #[test]
    fn sequential_is_much_faster_than_random_and_crosses_cylinders_cheaply() {
        let mut seq = HddDetailed::new("d", params(Scheduler::Fifo));
        let mut t = 0;
        // 100 x 64 KiB = 6.25 MiB: crosses a cylinder boundary (6.03 MB each).
        for i in 0..100u64 {
            t = seq
                .submit(t, &DriveRequest::read(i * 65536, 65536))
                .unwrap();
        }
        let per_seq = t as f64 / 100.0;
        let x = 65536.0 * 1e9 / (89_592.0 * 1024.0);
        assert!(per_seq < x * 1.01, "sequential {per_seq} vs transfer {x}");
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut rnd = HddDetailed::new("d", params(Scheduler::Fifo));
        let mut t2 = 0;
        for _ in 0..100 {
            let off = rng.gen_range(0..(1_000_204_886_016u64 - 65536) / 512) * 512;
            t2 = rnd.submit(t2, &DriveRequest::read(off, 65536)).unwrap();
        }
        let per_rnd = t2 as f64 / 100.0;
        assert!(
            per_rnd > 10.0 * per_seq,
            "random {per_rnd} vs sequential {per_seq}"
        );
        // Near the analytical mean (7.5 + 4.17 ms + transfer) within sampling noise.
        let want = rnd.random_service_ns(ReqKind::Read, 65536);
        assert!(
            (per_rnd / want - 1.0).abs() < 0.15,
            "random {per_rnd} vs expected {want}"
        );
    }

    #[test]
    fn writes_pay_settle_after_a_seek_only() {
        let p = params(Scheduler::Fifo);
        let d = HddDetailed::new("d", p);
        let far = 500_000_000_000;
        let r = d.positioning_ns(0, &DriveRequest::read(far, 4096));
        let wr = d.positioning_ns(0, &w(far, 4096));
        // Settle moves the arrival 1 ms later: same seek, different rotational wait.
        let seek = d.seek_ns(d.cylinder_of(far));
        assert!(r >= seek && wr >= seek + 1e6);
        assert_eq!(d.positioning_ns(0, &w(0, 4096)), 0.0);
        assert_eq!(
            d.random_service_ns(ReqKind::Write, 4096) - d.random_service_ns(ReqKind::Read, 4096),
            1e6
        );
    }

    fn run_batch(scheduler: Scheduler, reqs: &[DriveRequest]) -> f64 {
        let mut d = HddDetailed::new("d", params(scheduler));
        let mut pending = reqs.to_vec();
        let mut t = 0;
        while !pending.is_empty() {
            let i = d.pick(t, &pending);
            let r = pending.remove(i);
            t = d.submit(t, &r).unwrap();
        }
        t as f64 / reqs.len() as f64
    }

    #[test]
    fn reordering_beats_fifo() {
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let reqs: Vec<DriveRequest> = (0..64)
            .map(|_| {
                let off = rng.gen_range(0..(1_000_204_886_016u64 - 4096) / 4096) * 4096;
                if rng.gen_bool(0.5) {
                    DriveRequest::read(off, 4096)
                } else {
                    w(off, 4096)
                }
            })
            .collect();
        let fifo = run_batch(Scheduler::Fifo, &reqs);
        let sstf = run_batch(Scheduler::Sstf, &reqs);
        let sptf = run_batch(Scheduler::Sptf, &reqs);
        assert!(sstf < 0.8 * fifo, "sstf {sstf} fifo {fifo}");
        assert!(sptf < 0.6 * fifo, "sptf {sptf} fifo {fifo}");
        assert!(sptf < sstf, "sptf {sptf} sstf {sstf}");
    }

    #[test]
    fn capacity_override_short_strokes_or_extends() {
        let p = params(Scheduler::Fifo);
        let full = HddDetailed::new("d", p.clone());
        let short = HddDetailed::with_capacity("d", p.clone(), p.capacity / 10);
        assert_eq!(short.capacity(), p.capacity / 10);
        assert_eq!(short.seek_ns(1000), full.seek_ns(1000), "same geometry");
        let (rf, rs) = (
            full.random_service_ns(ReqKind::Read, 4096),
            short.random_service_ns(ReqKind::Read, 4096),
        );
        assert!(rs < rf - 3e6, "short-stroked {rs} vs full {rf}");
        let mut s = short.clone();
        assert!(matches!(
            s.submit(0, &DriveRequest::read(p.capacity / 10, 1)),
            Err(DriveError::OutOfRange { .. })
        ));
        let big = HddDetailed::with_capacity("d", p.clone(), 2 * p.capacity);
        assert_eq!(big.capacity(), 2 * p.capacity);
        assert_eq!(big.p.cylinders, 2 * p.cylinders);
        assert!((big.seek_ns(2 * p.cylinders - 1) - 17.06e6).abs() < 1.0);
        assert_eq!(big.random_service_ns(ReqKind::Read, 4096), rf);
    }

    #[test]
    fn only_reordering_schedulers_are_asked_to_pick() {
        assert!(!HddDetailed::new("d", params(Scheduler::Fifo)).reorders());
        assert!(HddDetailed::new("d", params(Scheduler::Sstf)).reorders());
        assert!(HddDetailed::new("d", params(Scheduler::Sptf)).reorders());
    }

    #[test]
    fn pick_respects_flush_barriers() {
        let d = HddDetailed::new("d", params(Scheduler::Sptf));
        let far = DriveRequest::read(900_000_000_000, 4096);
        let near = DriveRequest::read(0, 4096);
        let flush = DriveRequest {
            kind: ReqKind::Flush,
            offset: 0,
            len: 0,
        };
        assert_eq!(d.pick(0, &[far, near]), 1);
        assert_eq!(d.pick(0, &[far, flush, near]), 0);
        assert_eq!(d.pick(0, &[flush, near]), 0);
        assert_eq!(d.pick(0, &[]), 0);
    }
}
