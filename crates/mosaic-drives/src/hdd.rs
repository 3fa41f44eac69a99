//! Hard disk drives.
//!
//! *Simple*: the model of Jeremic et al. — a random request of x bytes costs
//! a positioning time plus transfer, `t_pos + x / R`, one at a time.
//!
//! *Detailed*: the head sits on a cylinder at an angle that turns with
//! virtual time.  A request costs
//!
//! ```text
//!   seek(|cyl - head|) + rotational wait to the target angle + x / R (+ settle for writes)
//!   seek(0) = 0,  seek(d) = t2t + (full - t2t) · sqrt(d / cylinders)     (d >= 1)
//! ```
//!
//! Logical bytes map linearly to cylinders; the angle of a byte is its
//! position within a track, a track being the bytes that pass under the head
//! in one revolution (R × revolution time), so sequential requests continue
//! without rotational delay.  The
//! square-root seek curve is the usual short-seek shape (Ruemmler & Wilkes,
//! "An introduction to disk drive modeling", 1994); over uniformly random
//! distances its mean is about t2t + 0.53 (full - t2t).  With reordering on,
//! [`DriveModel::pick`] chooses the pending request with the shortest
//! positioning time (SPTF).

use serde::{Deserialize, Serialize};

use crate::{check_range, xfer_ns, DriveError, DriveModel, DriveRequest, Nanos, ReqKind};

/// `t_pos + x / R`.
#[derive(Debug, Clone)]
pub struct HddSimple {
    pub name: String,
    pub t_pos_ns: f64,
    pub rate_bytes_per_s: f64,
    pub capacity: u64,
    busy_until: Nanos,
}

impl HddSimple {
    pub fn new(name: &str, t_pos_ms: f64, rate_kib_s: f64, capacity: u64) -> HddSimple {
        HddSimple { name: name.to_string(), t_pos_ns: t_pos_ms * 1e6, rate_bytes_per_s: rate_kib_s * 1024.0, capacity, busy_until: 0 }
    }

    fn service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        match kind {
            ReqKind::Read | ReqKind::Write => self.t_pos_ns + xfer_ns(len, self.rate_bytes_per_s),
            _ => 0.0,
        }
    }
}

impl DriveModel for HddSimple {
    fn describe(&self) -> String {
        format!("{} (simple)", self.name)
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn queue_depth(&self) -> usize {
        1
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        check_range(req, self.capacity)?;
        let start = now.max(self.busy_until);
        self.busy_until = start + self.service_ns(req.kind, req.len).round() as u64;
        Ok(self.busy_until)
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        self.service_ns(kind, len)
    }
}

/// Parameters of the detailed HDD model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HddDetailedParams {
    pub capacity: u64,
    pub rpm: f64,
    pub cylinders: u64,
    pub track_to_track_ms: f64,
    pub full_stroke_ms: f64,
    pub write_settle_ms: f64,
    /// Media transfer rate in KiB/s.
    pub rate_kib_s: f64,
    /// Shortest-positioning-time-first among pending requests.
    #[serde(default)]
    pub reorder: bool,
}

/// Seek curve, rotation and head state.
#[derive(Debug, Clone)]
pub struct HddDetailed {
    pub name: String,
    pub p: HddDetailedParams,
    head_cyl: u64,
    busy_until: Nanos,
}

impl HddDetailed {
    pub fn new(name: &str, p: HddDetailedParams) -> HddDetailed {
        HddDetailed { name: name.to_string(), p, head_cyl: 0, busy_until: 0 }
    }

    fn rev_ns(&self) -> f64 {
        60e9 / self.p.rpm
    }

    fn bytes_per_cyl(&self) -> f64 {
        self.p.capacity as f64 / self.p.cylinders as f64
    }

    fn cyl_of(&self, offset: u64) -> u64 {
        ((offset as f64 / self.bytes_per_cyl()) as u64).min(self.p.cylinders - 1)
    }

    /// Bytes passing under the head in one revolution.
    fn track_bytes(&self) -> f64 {
        self.p.rate_kib_s * 1024.0 * self.rev_ns() / 1e9
    }

    /// Angle of `offset` within its track, as a fraction of a turn.
    fn angle_of(&self, offset: u64) -> f64 {
        let b = self.track_bytes();
        (offset as f64 % b) / b
    }

    pub fn seek_ns(&self, distance: u64) -> f64 {
        if distance == 0 {
            return 0.0;
        }
        let t2t = self.p.track_to_track_ms * 1e6;
        let full = self.p.full_stroke_ms * 1e6;
        t2t + (full - t2t) * (distance as f64 / self.p.cylinders as f64).sqrt()
    }

    /// Seek plus rotational wait from `from_cyl` at time `t` to `offset`.
    fn positioning_ns(&self, from_cyl: u64, t: f64, offset: u64) -> f64 {
        let cyl = self.cyl_of(offset);
        let seek = self.seek_ns(cyl.abs_diff(from_cyl));
        let rev = self.rev_ns();
        let angle_after = ((t + seek) / rev).fract();
        let mut frac = (self.angle_of(offset) - angle_after).rem_euclid(1.0);
        if frac > 1.0 - 1e-6 {
            frac = 0.0; // just passed by rounding: the head is there
        }
        let wait = frac * rev;
        seek + wait
    }
}

impl DriveModel for HddDetailed {
    fn describe(&self) -> String {
        format!("{} (detailed{})", self.name, if self.p.reorder { ", SPTF" } else { "" })
    }
    fn capacity(&self) -> u64 {
        self.p.capacity
    }
    fn queue_depth(&self) -> usize {
        1
    }
    fn pick(&self, now: Nanos, pending: &[DriveRequest]) -> usize {
        if !self.p.reorder {
            return 0;
        }
        let t = now.max(self.busy_until) as f64;
        let mut best = (0, f64::INFINITY);
        for (i, r) in pending.iter().enumerate() {
            let pt = self.positioning_ns(self.head_cyl, t, r.offset);
            if pt < best.1 {
                best = (i, pt);
            }
        }
        best.0
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        check_range(req, self.p.capacity)?;
        let start = now.max(self.busy_until) as f64;
        let service = match req.kind {
            ReqKind::Read | ReqKind::Write => {
                let pos = self.positioning_ns(self.head_cyl, start, req.offset);
                let settle = if req.kind == ReqKind::Write { self.p.write_settle_ms * 1e6 } else { 0.0 };
                let xfer = xfer_ns(req.len, self.p.rate_kib_s * 1024.0);
                self.head_cyl = self.cyl_of(req.offset + req.len.saturating_sub(1));
                pos + settle + xfer
            }
            _ => 0.0,
        };
        self.busy_until = (start + service).round() as u64;
        Ok(self.busy_until)
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        // Mean seek over uniform random start/end cylinders: E[sqrt(d/C)] = 8/15.
        let t2t = self.p.track_to_track_ms * 1e6;
        let full = self.p.full_stroke_ms * 1e6;
        let seek = t2t + (full - t2t) * 8.0 / 15.0;
        let settle = if kind == ReqKind::Write { self.p.write_settle_ms * 1e6 } else { 0.0 };
        seek + self.rev_ns() / 2.0 + settle + xfer_ns(len, self.p.rate_kib_s * 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(offset: u64, len: u64) -> DriveRequest {
        DriveRequest { kind: ReqKind::Write, offset, len }
    }

    #[test]
    fn simple_is_tpos_plus_transfer_and_fifo() {
        let mut d = HddSimple::new("x", 5.0, 89_592.0, 1 << 40);
        let expect = 5e6 + 4096.0 * 1e9 / (89_592.0 * 1024.0);
        assert!((d.random_service_ns(ReqKind::Write, 4096) - expect).abs() < 1e-6);
        let t1 = d.submit(0, &w(0, 4096)).unwrap();
        let t2 = d.submit(0, &w(1 << 30, 4096)).unwrap();
        assert_eq!(t1, expect.round() as u64);
        assert_eq!(t2, 2 * t1);
        assert!(d.submit(0, &w(1 << 40, 1)).is_err());
    }

    fn detailed(reorder: bool) -> HddDetailed {
        HddDetailed::new(
            "d",
            HddDetailedParams {
                capacity: 1_000_204_886_016,
                rpm: 7200.0,
                cylinders: 200_000,
                track_to_track_ms: 0.8,
                full_stroke_ms: 15.0,
                write_settle_ms: 0.3,
                rate_kib_s: 89_592.0,
                reorder,
            },
        )
    }

    #[test]
    fn seek_is_monotone_and_sequential_is_cheap() {
        let d = detailed(false);
        let mut last = 0.0;
        for dist in [0u64, 1, 10, 100, 1000, 10_000, 100_000, 199_999] {
            let s = d.seek_ns(dist);
            assert!(s >= last, "seek not monotone at {dist}");
            last = s;
        }
        let mut seq = detailed(false);
        let mut t = 0;
        for i in 0..100u64 {
            t = seq.submit(t, &DriveRequest { kind: ReqKind::Read, offset: i * 4096, len: 4096 }).unwrap();
        }
        let mut rnd = detailed(false);
        let mut t2 = 0;
        for i in 0..100u64 {
            let off = (i * 7_919_993_321) % (1 << 39) / 4096 * 4096;
            t2 = rnd.submit(t2, &DriveRequest { kind: ReqKind::Read, offset: off, len: 4096 }).unwrap();
        }
        assert!(t * 5 < t2, "sequential {t} vs random {t2}");
    }

    #[test]
    fn sptf_beats_fifo() {
        let reqs: Vec<DriveRequest> =
            (0..64u64).map(|i| DriveRequest { kind: ReqKind::Read, offset: (i * 104_729 * 1_000_003) % (1 << 39) / 512 * 512, len: 4096 }).collect();
        let run = |reorder: bool| {
            let mut d = detailed(reorder);
            let mut pending = reqs.clone();
            let mut t = 0;
            while !pending.is_empty() {
                let i = d.pick(t, &pending);
                let r = pending.remove(i);
                t = d.submit(t, &r).unwrap();
            }
            t
        };
        let (fifo, sptf) = (run(false), run(true));
        assert!(sptf < fifo * 8 / 10, "sptf {sptf} fifo {fifo}");
    }
}
