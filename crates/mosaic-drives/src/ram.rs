//! RAM and NVRAM: a fixed access latency plus a bandwidth shared by all
//! requests.
//!
//! A read or write of `x` bytes occupies the memory bus for `x / bandwidth`
//! (requests queue for the bus in submission order) and completes `latency`
//! after its data has moved.  Nothing depends on the offset.

use serde::{Deserialize, Serialize};

use crate::hdd::{nonneg, positive, positive_u};
use crate::{
    check_range, ns, unsupported, xfer_ns, DriveError, DriveModel, DriveRequest, Nanos, ReqKind,
};

/// RAM / NVRAM parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RamParams {
    /// Bytes.
    pub capacity: u64,
    /// Access latency per request.
    pub latency_ns: f64,
    /// Bandwidth in GiB/s.
    pub gib_s: f64,
    pub queue_depth: usize,
}

impl RamParams {
    pub fn validate(&self) -> Result<(), DriveError> {
        positive_u(self.capacity, "capacity")?;
        nonneg(self.latency_ns, "latency_ns")?;
        positive(self.gib_s, "gib_s")?;
        positive_u(self.queue_depth as u64, "queue_depth")
    }
}

#[derive(Debug, Clone)]
pub struct Ram {
    pub name: String,
    pub p: RamParams,
    bytes_per_s: f64,
    bus_busy: Nanos,
    last_done: Nanos,
}

impl Ram {
    pub fn new(name: &str, p: RamParams) -> Ram {
        let bytes_per_s = p.gib_s * (1u64 << 30) as f64;
        Ram {
            name: name.to_string(),
            p,
            bytes_per_s,
            bus_busy: 0,
            last_done: 0,
        }
    }
}

impl DriveModel for Ram {
    fn describe(&self) -> String {
        format!(
            "{} (memory, {} ns, {} GiB/s)",
            self.name, self.p.latency_ns, self.p.gib_s
        )
    }
    fn capacity(&self) -> u64 {
        self.p.capacity
    }
    fn queue_depth(&self) -> usize {
        self.p.queue_depth.max(1)
    }
    fn reorders(&self) -> bool {
        false
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        match req.kind {
            ReqKind::Flush => return Ok(now.max(self.last_done)),
            ReqKind::ZoneReset | ReqKind::ZoneFinish => {
                return Err(unsupported(&self.name, req.kind))
            }
            ReqKind::Read | ReqKind::Write => check_range(req, self.p.capacity)?,
        }
        self.bus_busy = now
            .max(self.bus_busy)
            .saturating_add(ns(xfer_ns(req.len, self.bytes_per_s)));
        let done = self.bus_busy.saturating_add(ns(self.p.latency_ns));
        self.last_done = self.last_done.max(done);
        Ok(done)
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        match kind {
            ReqKind::Read | ReqKind::Write => self.p.latency_ns + xfer_ns(len, self.bytes_per_s),
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_plus_shared_bandwidth() {
        let mut m = Ram::new(
            "r",
            RamParams {
                capacity: 1 << 30,
                latency_ns: 100.0,
                gib_s: 1.0,
                queue_depth: 64,
            },
        );
        let x = 1e9 * 4096.0 / (1u64 << 30) as f64; // 3814.7 ns
        let a = m.submit(0, &DriveRequest::write(0, 4096)).unwrap();
        assert_eq!(a, ns(x) + 100);
        let b = m.submit(0, &DriveRequest::read(1 << 20, 4096)).unwrap();
        assert_eq!(
            b,
            2 * ns(x) + 100,
            "the bus is shared, the latency overlaps"
        );
        assert_eq!(m.random_service_ns(ReqKind::Read, 4096), 100.0 + x);
        assert_eq!(
            m.submit(
                0,
                &DriveRequest {
                    kind: ReqKind::Flush,
                    offset: 0,
                    len: 0
                }
            )
            .unwrap(),
            b
        );
        assert!(m.submit(0, &DriveRequest::read(1 << 30, 1)).is_err());
        assert_eq!(m.queue_depth(), 64);
    }
}
