//! Host-managed zoned (SMR) drives.
//!
//! ```text
//!   zone:  0 .. c-1                c ..
//!          conventional            sequential-write-required
//!          (random writes)         [start ──written──▶ wp ........ end)
//! ```
//!
//! A write to a sequential zone must start exactly at the zone's write
//! pointer and stay inside the zone; otherwise the drive returns an error,
//! as a real host-managed drive does.  `ZoneReset` rewinds a pointer,
//! `ZoneFinish` moves it to the zone end.  Timing follows the simple HDD
//! model, except that a request starting where the previous one ended (a
//! sequential append) pays no positioning time.

use serde::{Deserialize, Serialize};

use crate::{check_range, xfer_ns, DriveError, DriveModel, DriveRequest, Nanos, ReqKind};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZonedParams {
    pub capacity: u64,
    pub zone_size: u64,
    pub conventional_zones: u64,
    pub t_pos_ms: f64,
    pub rate_kib_s: f64,
}

/// Zone condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ZoneState {
    Conventional,
    Empty,
    Open,
    Full,
}

/// One row of a zone report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ZoneInfo {
    pub zone: u64,
    pub start: u64,
    pub len: u64,
    pub wp: u64,
    pub state: ZoneState,
}

#[derive(Debug, Clone)]
pub struct Zoned {
    pub name: String,
    pub p: ZonedParams,
    wps: Vec<u64>,
    last_end: Option<u64>,
    busy_until: Nanos,
}

impl Zoned {
    pub fn new(name: &str, p: ZonedParams) -> Result<Zoned, DriveError> {
        if p.zone_size == 0 || p.capacity % p.zone_size != 0 {
            return Err(DriveError::Config { field: "zone_size".into(), message: "must be positive and divide the capacity".into() });
        }
        let zones = p.capacity / p.zone_size;
        if p.conventional_zones > zones {
            return Err(DriveError::Config { field: "conventional_zones".into(), message: format!("more than the {zones} zones") });
        }
        let wps = (0..zones).map(|z| z * p.zone_size).collect();
        Ok(Zoned { name: name.to_string(), p, wps, last_end: None, busy_until: 0 })
    }

    pub fn zones(&self) -> u64 {
        self.wps.len() as u64
    }

    /// Write pointer of a sequential zone.
    pub fn write_pointer(&self, zone: u64) -> Option<u64> {
        (zone >= self.p.conventional_zones && zone < self.zones()).then(|| self.wps[zone as usize])
    }

    pub fn zone_report(&self) -> Vec<ZoneInfo> {
        (0..self.zones())
            .map(|z| {
                let start = z * self.p.zone_size;
                let wp = self.wps[z as usize];
                let state = if z < self.p.conventional_zones {
                    ZoneState::Conventional
                } else if wp == start {
                    ZoneState::Empty
                } else if wp == start + self.p.zone_size {
                    ZoneState::Full
                } else {
                    ZoneState::Open
                };
                ZoneInfo { zone: z, start, len: self.p.zone_size, wp, state }
            })
            .collect()
    }

    fn apply(&mut self, req: &DriveRequest) -> Result<(), DriveError> {
        let zs = self.p.zone_size;
        let zone = req.offset / zs;
        let end = (zone + 1) * zs;
        let conventional = zone < self.p.conventional_zones;
        match req.kind {
            ReqKind::Write if !conventional => {
                let wp = self.wps[zone as usize];
                if wp == end {
                    return Err(DriveError::ZoneFull { zone });
                }
                if req.offset != wp {
                    return Err(DriveError::NotAtWritePointer { zone, offset: req.offset, wp });
                }
                if req.offset + req.len > end {
                    return Err(DriveError::CrossesZone { zone, offset: req.offset, len: req.len, end });
                }
                self.wps[zone as usize] += req.len;
            }
            // Conventional zones and reads behave like a normal disk.
            ReqKind::Write | ReqKind::Read => {}
            ReqKind::ZoneReset | ReqKind::ZoneFinish => {
                if conventional {
                    return Err(DriveError::Conventional { zone, op: if req.kind == ReqKind::ZoneReset { "reset" } else { "finish" } });
                }
                self.wps[zone as usize] = if req.kind == ReqKind::ZoneReset { zone * zs } else { end };
            }
            ReqKind::Flush => {}
        }
        Ok(())
    }
}

impl DriveModel for Zoned {
    fn describe(&self) -> String {
        format!("{} (smr, {} MiB zones)", self.name, self.p.zone_size >> 20)
    }
    fn capacity(&self) -> u64 {
        self.p.capacity
    }
    fn queue_depth(&self) -> usize {
        1
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        check_range(req, self.p.capacity)?;
        self.apply(req)?;
        let start = now.max(self.busy_until);
        let service = match req.kind {
            ReqKind::Read | ReqKind::Write => {
                let pos = if self.last_end == Some(req.offset) { 0.0 } else { self.p.t_pos_ms * 1e6 };
                self.last_end = Some(req.offset + req.len);
                pos + xfer_ns(req.len, self.p.rate_kib_s * 1024.0)
            }
            _ => 0.0,
        };
        self.busy_until = start + service.round() as u64;
        Ok(self.busy_until)
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        match kind {
            ReqKind::Read | ReqKind::Write => self.p.t_pos_ms * 1e6 + xfer_ns(len, self.p.rate_kib_s * 1024.0),
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn z() -> Zoned {
        Zoned::new("z", ZonedParams { capacity: 16 << 20, zone_size: 1 << 20, conventional_zones: 2, t_pos_ms: 5.0, rate_kib_s: 100_000.0 }).unwrap()
    }
    fn w(offset: u64, len: u64) -> DriveRequest {
        DriveRequest { kind: ReqKind::Write, offset, len }
    }

    #[test]
    fn write_pointer_rules() {
        let mut d = z();
        let zs = 1 << 20;
        d.submit(0, &w(3 * zs, 4096)).unwrap();
        assert_eq!(d.write_pointer(3), Some(3 * zs + 4096));
        let e = d.submit(0, &w(3 * zs, 4096)).unwrap_err();
        assert_eq!(e, DriveError::NotAtWritePointer { zone: 3, offset: 3 * zs, wp: 3 * zs + 4096 });
        assert!(e.to_string().contains("zone 3"));
        assert!(matches!(d.submit(0, &w(4 * zs - 4096 + 0, 8192)), Err(DriveError::NotAtWritePointer { .. })));
        let e = d.submit(0, &w(3 * zs + 4096, zs)).unwrap_err();
        assert!(matches!(e, DriveError::CrossesZone { .. }));
        // Conventional zones take random writes.
        d.submit(0, &w(12345 * 512 % zs / 512 * 512, 4096)).unwrap();
        d.submit(0, &w(0, 4096)).unwrap();
        assert!(matches!(d.submit(0, &DriveRequest { kind: ReqKind::ZoneReset, offset: 0, len: 0 }), Err(DriveError::Conventional { .. })));
        d.submit(0, &DriveRequest { kind: ReqKind::ZoneReset, offset: 3 * zs, len: 0 }).unwrap();
        assert_eq!(d.write_pointer(3), Some(3 * zs));
        d.submit(0, &DriveRequest { kind: ReqKind::ZoneFinish, offset: 5 * zs, len: 0 }).unwrap();
        assert!(matches!(d.submit(0, &w(5 * zs, 512)), Err(DriveError::ZoneFull { zone: 5 })));
        let rep = d.zone_report();
        assert_eq!(rep[0].state, ZoneState::Conventional);
        assert_eq!(rep[5].state, ZoneState::Full);
        assert_eq!(rep[3].state, ZoneState::Empty);
    }

    #[test]
    fn appends_skip_positioning() {
        let mut d = z();
        let zs = 1 << 20;
        let t1 = d.submit(0, &w(4 * zs, 4096)).unwrap();
        let t2 = d.submit(t1, &w(4 * zs + 4096, 4096)).unwrap();
        assert!(t2 - t1 < t1 / 10, "append {} vs first {}", t2 - t1, t1);
    }
}
