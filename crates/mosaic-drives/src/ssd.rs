//! Flash SSDs (and NVMe, with other parameters).
//!
//! A request is cut into flash pages; page p lives on unit `p mod units`
//! (units = channels × dies).  Each unit serves one page at a time:
//!
//! ```text
//!   read page:   transfer + t_read
//!   write page:  transfer + t_prog · WA            (whole page written)
//!   write part of a page: t_read + transfer + t_prog · WA
//!                (the page's other bytes are read and programmed again)
//! ```
//!
//! In steady state (`steady_state = true`) garbage collection moves valid
//! pages; with over-provisioning ratio ρ (spare / user capacity) greedy GC
//! under uniform random writes has write amplification about
//! WA = (1 + ρ) / (2ρ) (Hu et al., "Write amplification analysis in
//! flash-based solid state drives", SYSTOR 2009, first-order form).  WA is
//! 1 when fresh.

use serde::{Deserialize, Serialize};

use crate::{check_range, xfer_ns, DriveError, DriveModel, DriveRequest, Nanos, ReqKind};

/// SSD parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SsdParams {
    pub capacity: u64,
    /// Effective flash page in bytes.
    pub page: u64,
    pub channels: u32,
    pub dies_per_channel: u32,
    pub read_us: f64,
    pub program_us: f64,
    /// Per-channel transfer in MiB/s.
    pub channel_mib_s: f64,
    /// Host queue depth.
    pub queue_depth: usize,
    /// Spare / user capacity.
    pub over_provisioning: f64,
    #[serde(default)]
    pub steady_state: bool,
}

impl SsdParams {
    pub fn validate(&self) -> Result<(), DriveError> {
        let bad = |f: &str, m: &str| Err(DriveError::Config { field: f.into(), message: m.into() });
        if self.page == 0 {
            return bad("page", "must be positive");
        }
        if self.channels == 0 || self.dies_per_channel == 0 {
            return bad("channels", "channels and dies_per_channel must be positive");
        }
        if !(self.channel_mib_s > 0.0) {
            return bad("channel_mib_s", "must be positive");
        }
        if self.queue_depth == 0 {
            return bad("queue_depth", "must be at least 1");
        }
        if self.steady_state && !(self.over_provisioning > 0.0) {
            return bad("over_provisioning", "must be positive in steady state");
        }
        if self.capacity == 0 {
            return bad("capacity", "must be positive");
        }
        Ok(())
    }

    /// Steady-state write amplification (1 when fresh).
    pub fn write_amplification(&self) -> f64 {
        if self.steady_state {
            (1.0 + self.over_provisioning) / (2.0 * self.over_provisioning)
        } else {
            1.0
        }
    }
}

/// An SSD.
#[derive(Debug, Clone)]
pub struct Ssd {
    pub name: String,
    pub p: SsdParams,
    unit_busy: Vec<Nanos>,
}

impl Ssd {
    pub fn new(name: &str, p: SsdParams) -> Ssd {
        let units = (p.channels * p.dies_per_channel) as usize;
        Ssd { name: name.to_string(), p, unit_busy: vec![0; units] }
    }

    fn units(&self) -> u64 {
        self.unit_busy.len() as u64
    }

    /// Cost of one page touched by a request: `bytes` of it moved.
    fn page_ns(&self, kind: ReqKind, bytes: u64) -> f64 {
        let xfer = xfer_ns(bytes, self.p.channel_mib_s * 1048576.0);
        match kind {
            ReqKind::Read => xfer + self.p.read_us * 1e3,
            ReqKind::Write => {
                let prog = self.p.program_us * 1e3 * self.p.write_amplification();
                let rmw = if bytes < self.p.page { self.p.read_us * 1e3 } else { 0.0 };
                rmw + xfer + prog
            }
            _ => 0.0,
        }
    }

    /// Pages touched: (page number, bytes of it).
    fn pages(&self, offset: u64, len: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let pg = self.p.page;
        let first = offset / pg;
        let last = if len == 0 { first } else { (offset + len - 1) / pg };
        (first..=last).map(move |p| {
            let s = (p * pg).max(offset);
            let e = ((p + 1) * pg).min(offset + len);
            (p, e.saturating_sub(s))
        })
    }
}

impl DriveModel for Ssd {
    fn describe(&self) -> String {
        format!("{} (ssd, {} KiB page, {} units{})", self.name, self.p.page / 1024, self.units(), if self.p.steady_state { ", steady state" } else { "" })
    }
    fn capacity(&self) -> u64 {
        self.p.capacity
    }
    fn queue_depth(&self) -> usize {
        self.p.queue_depth
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        check_range(req, self.p.capacity)?;
        if !matches!(req.kind, ReqKind::Read | ReqKind::Write) {
            // Flush: wait for everything in flight.
            return Ok(now.max(self.unit_busy.iter().copied().max().unwrap_or(0)));
        }
        let units = self.units();
        let mut done = now;
        let pages: Vec<(u64, u64)> = self.pages(req.offset, req.len).collect();
        for (p, bytes) in pages {
            let u = (p % units) as usize;
            let start = now.max(self.unit_busy[u]);
            let end = start + self.page_ns(req.kind, bytes).round() as u64;
            self.unit_busy[u] = end;
            done = done.max(end);
        }
        Ok(done)
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        // Page-aligned request on an idle drive: pages spread over units,
        // the busiest unit serves ceil(pages / units) of them.
        let pages = len.div_ceil(self.p.page).max(1);
        let per_unit = pages.div_ceil(self.units());
        let page_bytes = len.min(self.p.page);
        per_unit as f64 * self.page_ns(kind, page_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssd(steady: bool) -> Ssd {
        Ssd::new(
            "t",
            SsdParams {
                capacity: 1 << 30,
                page: 8192,
                channels: 4,
                dies_per_channel: 2,
                read_us: 50.0,
                program_us: 500.0,
                channel_mib_s: 200.0,
                queue_depth: 32,
                over_provisioning: 0.07,
                steady_state: steady,
            },
        )
    }

    #[test]
    fn sub_page_write_costs_a_page_plus_read() {
        let mut a = ssd(false);
        let mut b = ssd(false);
        let full = a.submit(0, &DriveRequest { kind: ReqKind::Write, offset: 0, len: 8192 }).unwrap();
        let part = b.submit(0, &DriveRequest { kind: ReqKind::Write, offset: 0, len: 4096 }).unwrap();
        // Partial page: read + program of the page, less transfer.
        assert!(part > 500_000 && part >= full - 50_000, "part {part} full {full}");
        assert!(part > full, "a sub-page write needs the page read first");
    }

    #[test]
    fn pages_spread_over_units_in_parallel() {
        let mut d = ssd(false);
        let t = d.submit(0, &DriveRequest { kind: ReqKind::Write, offset: 0, len: 16 * 8192 }).unwrap();
        let one = d.page_ns(ReqKind::Write, 8192);
        // 16 pages over 8 units: two pages per unit.
        assert!((t as f64 - 2.0 * one).abs() < 10.0, "t {t} one {one}");
        assert_eq!(d.queue_depth(), 32);
    }

    #[test]
    fn steady_state_write_amplification_slows_writes() {
        let fresh = ssd(false);
        let steady = ssd(true);
        let wa = steady.p.write_amplification();
        assert!((wa - (1.07 / 0.14)).abs() < 1e-9);
        assert!(steady.random_service_ns(ReqKind::Write, 8192) > 5.0 * fresh.random_service_ns(ReqKind::Write, 8192));
        assert_eq!(steady.random_service_ns(ReqKind::Read, 8192), fresh.random_service_ns(ReqKind::Read, 8192));
    }
}
