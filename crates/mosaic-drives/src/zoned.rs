//! Host-managed zoned (SMR) drives.
//!
//! ```text
//!   zone:  0 .. c-1                c ..  zones-1
//!          conventional            sequential-write-required
//!          (random writes)         [start ──written──▶ wp ........ end)
//! ```
//!
//! The capacity is a whole number of equal zones; the first
//! `conventional_zones` take random writes like a normal disk.  The rules of
//! the sequential zones, as on a ZBC/ZAC host-managed drive:
//!
//! * a write must start exactly at the zone's write pointer
//!   ([`DriveError::NotAtWritePointer`] names zone, write pointer and
//!   offset), must not cross the zone end ([`DriveError::CrossesZone`]), and
//!   a full zone takes no write until it is reset ([`DriveError::ZoneFull`]);
//!   a write advances the pointer by its length;
//! * a write starting in the conventional zones must end there too;
//! * `ZoneReset` rewinds the pointer to the zone start, `ZoneFinish` moves it
//!   to the zone end (the zone becomes full); both take the zone's first byte
//!   as `offset` ([`DriveError::NotZoneStart`] otherwise) and are refused on
//!   conventional zones ([`DriveError::ConventionalZone`]);
//! * reads may go anywhere, also at or beyond a write pointer: the drive
//!   returns zeros there (ZBC's default for unwritten blocks) and the model
//!   times them like any other read.
//!
//! Open-zone limits and implicit/explicit open and closed states are not
//! modelled.
//!
//! **Timing** is the simple HDD model (`t_pos + x / R`, FIFO, one at a time)
//! with a *sequential-continuation discount*: a read or write that starts at
//! the byte where the previous read or write ended pays no positioning time,
//! only its transfer (the head is already there, and the drive's buffer
//! hides the rotation it may have missed).  So appending to one zone streams
//! at `R`, while interleaved appends to several zones pay `t_pos` each time
//! the drive switches zones.  Zone resets and finishes are metadata
//! operations and take no time beyond waiting for the drive.
//!
//! **Mechanical timing** ([`Zoned::with_mechanics`]): the zone rules on the
//! detailed HDD's head ([`HddDetailed`], FIFO): every read or write pays
//! seek (by cylinder distance) + settle + rotational wait + transfer, from
//! wherever the head is.  An append right behind the previous request costs
//! its transfer only; one to another zone (or to the same zone after the
//! head moved away) pays the seek and the rotation like any HDD request.
//! This is the same positioning the HDD RAID-5 baseline pays on
//! `hdd-detailed`, so schemes on zoned and on conventional drives are timed
//! by one model.

use serde::{Deserialize, Serialize};

use crate::hdd::{nonneg, positive, positive_u};
use crate::{
    check_range, ns, xfer_ns, DriveError, DriveModel, DriveRequest, Nanos, ReqKind, ZoneInfo,
    ZoneState,
};
use crate::{HddDetailed, HddDetailedParams, Scheduler};

/// Parameters of a host-managed zoned drive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZonedParams {
    /// Bytes: a whole number of zones.
    pub capacity: u64,
    /// Bytes per zone.
    pub zone_size: u64,
    /// Conventional (randomly writable) zones at the start.
    pub conventional_zones: u64,
    /// Positioning time of a request that does not continue the previous one.
    pub t_pos_ms: f64,
    /// Media transfer rate in KiB/s.
    pub rate_kib_s: f64,
}

/// Most zones a modelled drive has.
pub const MAX_ZONES: u64 = 1 << 22;

impl ZonedParams {
    pub fn validate(&self) -> Result<(), DriveError> {
        positive_u(self.zone_size, "zone_size")?;
        positive_u(self.capacity, "capacity")?;
        #[allow(clippy::manual_is_multiple_of)] // is_multiple_of needs Rust 1.87; MSRV is 1.80
        if self.capacity % self.zone_size != 0 {
            return Err(DriveError::config(
                "capacity",
                format!(
                    "must be a whole number of zones of zone_size {} bytes",
                    self.zone_size
                ),
            ));
        }
        let zones = self.capacity / self.zone_size;
        // The model keeps state for every zone: a zone of a few bytes on
        // a terabyte drive would take all memory.
        if zones > MAX_ZONES {
            return Err(DriveError::config(
                "zone_size",
                format!(
                    "{} bytes makes {zones} zones of the {}-byte drive, more than the {MAX_ZONES} modelled: use larger zones (SMR drives have 256 MiB) or a smaller capacity",
                    self.zone_size, self.capacity
                ),
            ));
        }
        if self.conventional_zones > zones {
            return Err(DriveError::config(
                "conventional_zones",
                format!("more than the {zones} zones of the drive"),
            ));
        }
        nonneg(self.t_pos_ms, "t_pos_ms")?;
        positive(self.rate_kib_s, "rate_kib_s")
    }

    /// The same drive with another capacity: rounded down to whole zones
    /// (at least one), conventional zones scaled to keep their share.
    pub fn with_capacity(&self, capacity: u64) -> ZonedParams {
        let zs = self.zone_size.max(1);
        let old = (self.capacity / zs).max(1);
        let zones = (capacity / zs).max(1);
        let conv = if self.conventional_zones == 0 {
            0
        } else {
            ((self.conventional_zones as u128 * zones as u128 + old as u128 / 2) / old as u128)
                .max(1) as u64
        };
        ZonedParams {
            capacity: zones * zs,
            conventional_zones: conv.min(zones),
            ..self.clone()
        }
    }
}

#[derive(Debug, Clone)]
pub struct Zoned {
    pub name: String,
    pub p: ZonedParams,
    /// Absolute write pointer of every zone (conventional ones unused).
    wps: Vec<u64>,
    last_end: Option<u64>,
    busy_until: Nanos,
    /// The head model of [`Zoned::with_mechanics`] (None: `t_pos + x / R`
    /// with the append discount).
    mech: Option<HddDetailed>,
}

impl Zoned {
    /// Never fails: an unvalidated configuration is made consistent (zone
    /// size at least 1 byte, capacity rounded down to at least one zone,
    /// conventional zones at most all of them).
    pub fn new(name: &str, mut p: ZonedParams) -> Zoned {
        p.zone_size = p.zone_size.max(1);
        let zones = (p.capacity / p.zone_size).max(1);
        p.capacity = zones * p.zone_size;
        p.conventional_zones = p.conventional_zones.min(zones);
        let wps = (0..zones).map(|z| z * p.zone_size).collect();
        Zoned {
            name: name.to_string(),
            p,
            wps,
            last_end: None,
            busy_until: 0,
            mech: None,
        }
    }

    /// The zone rules of `p` timed by the detailed HDD head of `m`
    /// (short-stroked to this drive's capacity like `hdd-detailed` with a
    /// capacity override; FIFO, since appends must reach a zone in order).
    /// `p`'s `t_pos_ms` and `rate_kib_s` are not used.
    pub fn with_mechanics(name: &str, p: ZonedParams, m: HddDetailedParams) -> Zoned {
        let mut z = Zoned::new(name, p);
        let m = HddDetailedParams {
            scheduler: Scheduler::Fifo,
            ..m
        };
        z.mech = Some(HddDetailed::with_capacity(name, m, z.p.capacity));
        z
    }

    pub fn zones(&self) -> u64 {
        self.wps.len() as u64
    }

    fn conventional(&self, zone: u64) -> bool {
        zone < self.p.conventional_zones
    }

    /// Check a request against the zone rules and update the write pointers.
    fn apply(&mut self, req: &DriveRequest) -> Result<(), DriveError> {
        let zs = self.p.zone_size;
        let zone = req.offset / zs;
        let zone_start = zone * zs;
        let zone_end = zone_start + zs;
        match req.kind {
            ReqKind::Read | ReqKind::Flush => {}
            ReqKind::Write if self.conventional(zone) => {
                let last = (req.offset + req.len.max(1) - 1) / zs;
                if !self.conventional(last) {
                    let conv_end = self.p.conventional_zones * zs;
                    return Err(DriveError::CrossesZone {
                        zone,
                        offset: req.offset,
                        len: req.len,
                        zone_end: conv_end,
                    });
                }
            }
            ReqKind::Write => {
                let wp = self.wps[zone as usize];
                if wp == zone_end {
                    return Err(DriveError::ZoneFull { zone });
                }
                if req.offset != wp {
                    return Err(DriveError::NotAtWritePointer {
                        zone,
                        offset: req.offset,
                        wp,
                    });
                }
                if req.offset + req.len > zone_end {
                    return Err(DriveError::CrossesZone {
                        zone,
                        offset: req.offset,
                        len: req.len,
                        zone_end,
                    });
                }
                self.wps[zone as usize] += req.len;
            }
            ReqKind::ZoneReset | ReqKind::ZoneFinish => {
                let op = req.kind.name();
                if self.conventional(zone) {
                    return Err(DriveError::ConventionalZone { zone, op });
                }
                if req.offset != zone_start {
                    return Err(DriveError::NotZoneStart {
                        zone,
                        op,
                        offset: req.offset,
                        zone_start,
                    });
                }
                self.wps[zone as usize] = if req.kind == ReqKind::ZoneReset {
                    zone_start
                } else {
                    zone_end
                };
            }
        }
        Ok(())
    }
}

impl DriveModel for Zoned {
    fn describe(&self) -> String {
        format!(
            "{} (host-managed zoned, {} zones of {} MiB, {} conventional)",
            self.name,
            self.zones(),
            self.p.zone_size as f64 / 1048576.0,
            self.p.conventional_zones
        )
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
            ReqKind::Read | ReqKind::Write => check_range(req, self.p.capacity)?,
            ReqKind::ZoneReset | ReqKind::ZoneFinish => {
                if req.offset >= self.p.capacity {
                    return Err(DriveError::OutOfRange {
                        offset: req.offset,
                        len: req.len,
                        capacity: self.p.capacity,
                    });
                }
            }
        }
        self.apply(req)?;
        if let (Some(m), ReqKind::Read | ReqKind::Write) = (&mut self.mech, req.kind) {
            // In range (checked above; the head model has this capacity).
            self.busy_until = m.submit(start, req)?;
        } else if matches!(req.kind, ReqKind::Read | ReqKind::Write) {
            let pos = if self.last_end == Some(req.offset) {
                0.0
            } else {
                self.p.t_pos_ms * 1e6
            };
            self.last_end = Some(req.offset + req.len);
            self.busy_until =
                start.saturating_add(ns(pos + xfer_ns(req.len, self.p.rate_kib_s * 1024.0)));
        }
        Ok(start.max(self.busy_until))
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        if let Some(m) = &self.mech {
            return m.random_service_ns(kind, len);
        }
        match kind {
            ReqKind::Read | ReqKind::Write => {
                self.p.t_pos_ms * 1e6 + xfer_ns(len, self.p.rate_kib_s * 1024.0)
            }
            _ => 0.0,
        }
    }
    fn zone_size(&self) -> Option<u64> {
        Some(self.p.zone_size)
    }
    fn zone_report(&self) -> Vec<ZoneInfo> {
        let zs = self.p.zone_size;
        (0..self.zones())
            .map(|z| {
                let start = z * zs;
                let wp = self.wps[z as usize];
                let (wp, state) = if self.conventional(z) {
                    (None, ZoneState::Conventional)
                } else if wp == start {
                    (Some(wp), ZoneState::Empty)
                } else if wp == start + zs {
                    (Some(wp), ZoneState::Full)
                } else {
                    (Some(wp), ZoneState::Open)
                };
                ZoneInfo {
                    zone: z,
                    start,
                    len: zs,
                    wp,
                    state,
                }
            })
            .collect()
    }
    fn write_pointer(&self, zone: u64) -> Option<u64> {
        (zone < self.zones() && !self.conventional(zone)).then(|| self.wps[zone as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZS: u64 = 1 << 20;

    fn z() -> Zoned {
        Zoned::new(
            "z",
            ZonedParams {
                capacity: 16 * ZS,
                zone_size: ZS,
                conventional_zones: 2,
                t_pos_ms: 5.0,
                rate_kib_s: 100_000.0,
            },
        )
    }
    fn w(offset: u64, len: u64) -> DriveRequest {
        DriveRequest::write(offset, len)
    }
    fn op(kind: ReqKind, offset: u64) -> DriveRequest {
        DriveRequest {
            kind,
            offset,
            len: 0,
        }
    }

    #[test]
    fn writes_at_the_write_pointer_advance_it() {
        let mut d = z();
        assert_eq!(d.zones(), 16);
        assert_eq!(d.zone_size(), Some(ZS));
        assert_eq!(d.write_pointer(3), Some(3 * ZS));
        d.submit(0, &w(3 * ZS, 4096)).unwrap();
        assert_eq!(d.write_pointer(3), Some(3 * ZS + 4096));
        d.submit(0, &w(3 * ZS + 4096, 8192)).unwrap();
        assert_eq!(d.write_pointer(3), Some(3 * ZS + 12288));
        assert_eq!(d.zone_report()[3].state, ZoneState::Open);
        // Filling the zone exactly makes it full.
        d.submit(0, &w(3 * ZS + 12288, ZS - 12288)).unwrap();
        assert_eq!(d.zone_report()[3].state, ZoneState::Full);
        assert_eq!(
            d.submit(0, &w(4 * ZS - 512, 512)).unwrap_err(),
            DriveError::ZoneFull { zone: 3 }
        );
    }

    #[test]
    fn writes_elsewhere_are_errors_naming_zone_and_pointer() {
        let mut d = z();
        d.submit(0, &w(3 * ZS, 4096)).unwrap();
        let e = d.submit(0, &w(3 * ZS, 4096)).unwrap_err();
        assert_eq!(
            e,
            DriveError::NotAtWritePointer {
                zone: 3,
                offset: 3 * ZS,
                wp: 3 * ZS + 4096
            }
        );
        let msg = e.to_string();
        assert!(
            msg.contains("zone 3")
                && msg.contains(&(3 * ZS + 4096).to_string())
                && msg.contains(&(3 * ZS).to_string()),
            "{msg}"
        );
        assert!(matches!(
            d.submit(0, &w(3 * ZS + 8192, 4096)),
            Err(DriveError::NotAtWritePointer { zone: 3, .. })
        ));
        assert!(
            matches!(d.submit(0, &w(5 * ZS + 4096, 4096)), Err(DriveError::NotAtWritePointer { zone: 5, wp, .. }) if wp == 5 * ZS)
        );
        // Crossing into the next zone, from the write pointer.
        let e = d.submit(0, &w(3 * ZS + 4096, ZS)).unwrap_err();
        assert_eq!(
            e,
            DriveError::CrossesZone {
                zone: 3,
                offset: 3 * ZS + 4096,
                len: ZS,
                zone_end: 4 * ZS
            }
        );
        assert!(e.to_string().contains("crosses"));
        // Failed writes leave the pointer alone.
        assert_eq!(d.write_pointer(3), Some(3 * ZS + 4096));
        assert!(matches!(
            d.submit(0, &w(16 * ZS - 4096, 8192)),
            Err(DriveError::OutOfRange { .. })
        ));
    }

    #[test]
    fn conventional_zones_take_random_writes_only_among_themselves() {
        let mut d = z();
        for off in [1_234 * 512, 0, 300_000 * 4, ZS + 4096, 4096] {
            d.submit(0, &w(off, 4096)).unwrap();
        }
        d.submit(0, &w(ZS - 4096, 8192)).unwrap(); // conventional zone 0 into 1: fine
        let e = d.submit(0, &w(2 * ZS - 4096, 8192)).unwrap_err();
        assert_eq!(
            e,
            DriveError::CrossesZone {
                zone: 1,
                offset: 2 * ZS - 4096,
                len: 8192,
                zone_end: 2 * ZS
            }
        );
        assert_eq!(d.write_pointer(0), None);
        assert_eq!(d.write_pointer(1), None);
        assert_eq!(d.write_pointer(99), None);
        assert_eq!(
            d.zone_report()[0],
            ZoneInfo {
                zone: 0,
                start: 0,
                len: ZS,
                wp: None,
                state: ZoneState::Conventional
            }
        );
        assert_eq!(
            d.submit(0, &op(ReqKind::ZoneReset, 0)).unwrap_err(),
            DriveError::ConventionalZone {
                zone: 0,
                op: "zone reset"
            }
        );
        assert!(matches!(
            d.submit(0, &op(ReqKind::ZoneFinish, ZS)),
            Err(DriveError::ConventionalZone { zone: 1, .. })
        ));
    }

    #[test]
    fn reset_and_finish() {
        let mut d = z();
        d.submit(0, &w(3 * ZS, 65536)).unwrap();
        d.submit(0, &op(ReqKind::ZoneReset, 3 * ZS)).unwrap();
        assert_eq!(d.write_pointer(3), Some(3 * ZS));
        assert_eq!(d.zone_report()[3].state, ZoneState::Empty);
        d.submit(0, &w(3 * ZS, 4096)).unwrap();
        d.submit(0, &op(ReqKind::ZoneFinish, 5 * ZS)).unwrap();
        assert_eq!(d.write_pointer(5), Some(6 * ZS));
        assert_eq!(
            d.submit(0, &w(5 * ZS, 512)).unwrap_err(),
            DriveError::ZoneFull { zone: 5 }
        );
        let rep = d.zone_report();
        assert_eq!(rep.len(), 16);
        assert_eq!(
            (rep[3].state, rep[5].state, rep[6].state),
            (ZoneState::Open, ZoneState::Full, ZoneState::Empty)
        );
        assert_eq!(
            d.submit(0, &op(ReqKind::ZoneReset, 5 * ZS + 512))
                .unwrap_err(),
            DriveError::NotZoneStart {
                zone: 5,
                op: "zone reset",
                offset: 5 * ZS + 512,
                zone_start: 5 * ZS
            }
        );
        assert!(matches!(
            d.submit(0, &op(ReqKind::ZoneReset, 16 * ZS)),
            Err(DriveError::OutOfRange { .. })
        ));
        // Reads anywhere, also past the write pointer.
        d.submit(0, &DriveRequest::read(7 * ZS + 4096, 4096))
            .unwrap();
    }

    #[test]
    fn appends_skip_positioning() {
        let mut d = z();
        let x = 4096.0 * 1e9 / (100_000.0 * 1024.0);
        let t1 = d.submit(0, &w(4 * ZS, 4096)).unwrap();
        assert_eq!(t1, ns(5e6 + x));
        let t2 = d.submit(t1, &w(4 * ZS + 4096, 4096)).unwrap();
        assert_eq!(t2 - t1, ns(x), "an append costs its transfer only");
        // Switching to another zone pays positioning again, and so does coming back.
        let t3 = d.submit(t2, &w(6 * ZS, 4096)).unwrap();
        assert_eq!(t3 - t2, ns(5e6 + x));
        let t4 = d.submit(t3, &w(4 * ZS + 8192, 4096)).unwrap();
        assert_eq!(t4 - t3, ns(5e6 + x));
        assert_eq!(d.random_service_ns(ReqKind::Write, 4096), 5e6 + x);
    }

    fn seagate_mechanics() -> HddDetailedParams {
        match crate::preset("hdd:seagate-st91000640ss-detailed").unwrap() {
            crate::DriveConfig::HddDetailed { params, .. } => params,
            _ => unreachable!("a detailed preset"),
        }
    }

    #[test]
    fn mechanical_zone_switches_pay_seek_and_rotation_appends_at_the_head_do_not() {
        let zs = 64 << 20;
        let p = ZonedParams {
            capacity: 64 * zs,
            zone_size: zs,
            conventional_zones: 1,
            t_pos_ms: 0.0,
            rate_kib_s: 1.0,
        };
        let mut d = Zoned::with_mechanics("m", p, seagate_mechanics());
        let head = HddDetailed::with_capacity("h", seagate_mechanics(), 64 * zs);
        let xfer = 65536.0 * 1e9 / (89_592.0 * 1024.0);
        // Two back-to-back appends in zone 10: the second is at the head.
        let t1 = d.submit(0, &w(10 * zs, 65536)).unwrap();
        let t2 = d.submit(t1, &w(10 * zs + 65536, 65536)).unwrap();
        assert!(
            ((t2 - t1) as f64 - xfer).abs() < 2.0,
            "an append at the head costs its transfer only: {} vs {xfer}",
            t2 - t1
        );
        // An append to a far zone pays the seek to it (and settle), plus rotation.
        let far = 60 * zs;
        let seek = head.seek_ns(
            head.cylinder_of(far)
                .abs_diff(head.cylinder_of(10 * zs + 131071)),
        );
        let t3 = d.submit(t2, &w(far, 65536)).unwrap();
        assert!(
            (t3 - t2) as f64 >= seek + xfer,
            "a zone switch pays the seek: {} < {seek} + {xfer}",
            t3 - t2
        );
        // Back to zone 10's write pointer: the head moved away, so it pays again.
        let t4 = d.submit(t3, &w(10 * zs + 131072, 65536)).unwrap();
        assert!((t4 - t3) as f64 >= seek + xfer, "{}", t4 - t3);
        // An append at the head issued late pays the rotation it missed (no
        // more than one revolution), but no seek.
        let late = t4 + 3_000_000;
        let t5 = d.submit(late, &w(10 * zs + 196608, 65536)).unwrap();
        let rot = (t5 - late) as f64 - xfer;
        assert!(rot > 0.0 && rot < head.revolution_ns(), "{rot}");
        // The zone rules still hold, and the isolated random time is the HDD's.
        assert!(matches!(
            d.submit(t5, &w(10 * zs, 4096)),
            Err(DriveError::NotAtWritePointer { .. })
        ));
        assert_eq!(
            d.random_service_ns(ReqKind::Write, 4096),
            head.random_service_ns(ReqKind::Write, 4096)
        );
    }

    #[test]
    fn capacity_override_keeps_the_conventional_share() {
        let p = ZonedParams {
            capacity: 100 * ZS,
            zone_size: ZS,
            conventional_zones: 10,
            t_pos_ms: 5.0,
            rate_kib_s: 1e5,
        };
        let q = p.with_capacity(40 * ZS + 123);
        assert_eq!((q.capacity, q.conventional_zones), (40 * ZS, 4));
        q.validate().unwrap();
        let tiny = p.with_capacity(1);
        assert_eq!((tiny.capacity, tiny.conventional_zones), (ZS, 1));
        let e = ZonedParams {
            capacity: 100 * ZS + 1,
            ..p.clone()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("'capacity'"), "{e}");
        let e = ZonedParams {
            zone_size: 0,
            ..p.clone()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("zone_size"), "{e}");
        // Unvalidated nonsense still builds.
        let mut m = Zoned::new(
            "z",
            ZonedParams {
                zone_size: 0,
                capacity: 0,
                ..p
            },
        );
        assert_eq!((m.capacity(), m.zones()), (1, 1));
        m.submit(0, &w(0, 1)).unwrap();
        assert!(m.submit(0, &w(0, 2)).is_err());
    }
}
