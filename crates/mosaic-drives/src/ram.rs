//! RAM and NVRAM: a fixed access latency plus a bandwidth shared by all
//! requests.

use crate::{check_range, xfer_ns, DriveError, DriveModel, DriveRequest, Nanos, ReqKind};

#[derive(Debug, Clone)]
pub struct Ram {
    pub name: String,
    pub capacity: u64,
    pub latency_ns: f64,
    pub bytes_per_s: f64,
    pub queue_depth: usize,
    link_busy: Nanos,
}

impl Ram {
    pub fn new(name: &str, capacity: u64, latency_ns: f64, gib_s: f64, queue_depth: usize) -> Ram {
        Ram { name: name.to_string(), capacity, latency_ns, bytes_per_s: gib_s * (1u64 << 30) as f64, queue_depth, link_busy: 0 }
    }
}

impl DriveModel for Ram {
    fn describe(&self) -> String {
        format!("{} (ram)", self.name)
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn queue_depth(&self) -> usize {
        self.queue_depth
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        check_range(req, self.capacity)?;
        if !matches!(req.kind, ReqKind::Read | ReqKind::Write) {
            return Ok(now.max(self.link_busy));
        }
        let start = now.max(self.link_busy);
        self.link_busy = start + xfer_ns(req.len, self.bytes_per_s).round() as u64;
        Ok(self.link_busy + self.latency_ns.round() as u64)
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        match kind {
            ReqKind::Read | ReqKind::Write => self.latency_ns + xfer_ns(len, self.bytes_per_s),
            _ => 0.0,
        }
    }
}
