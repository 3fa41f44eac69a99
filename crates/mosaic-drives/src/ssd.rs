//! Flash SSDs (SATA and NVMe alike; NVMe presets just have more units,
//! faster links and a deeper queue).
//!
//! # Geometry
//!
//! `channels × dies_per_channel` independent flash units ("dies"; a unit may
//! stand for a die-plane pair when multi-plane operations are modelled as
//! separate units).  Logical page `p` (= offset / `page`) lives on unit
//! `p mod units`, and unit `u` hangs off channel `u mod channels`, so
//! consecutive pages go to different channels first, then to the next die of
//! each channel.  Mapping is static (no FTL remapping): GC is accounted for
//! statistically, below.
//!
//! # Timing of one request
//!
//! 1. **Controller**: `controller_us` of firmware time, one command at a time
//!    (a serial resource: it caps IOPS at 1 / `controller_us`).
//! 2. Per page touched, in order:
//!    * **read**: the die senses the page (`read_us`, die busy), then the
//!      requested bytes cross the channel (`channel_mib_s`; channel and die
//!      busy), then the host link (`host_mib_s`, if set).
//!    * **write**: the bytes cross the host link, then a **whole page**
//!      crosses the channel to the die and the die programs it
//!      (`program_us`, die busy).
//! 3. The request completes when its last page does.  Pages of one request
//!    on different units overlap.  A die serves its operations in submission
//!    order (busy-until).  Channels and the host link keep a timeline of
//!    reserved transfers and a transfer takes the first gap long enough after
//!    its data is ready, so a page waiting for a busy die does not hold up
//!    transfers of other dies (no head-of-line blocking); the timeline keeps
//!    at most 64 gaps, closing the oldest ones beyond that.
//!
//! **Sub-page rule.**  Flash programs whole pages, so every page a write
//! touches is programmed in full: a write smaller than a page, or one not
//! aligned to pages, costs a full page transfer and program for every page
//! it touches (a 4 KiB write into an 8 KiB page costs what an 8 KiB write
//! costs on the flash side; an unaligned 8 KiB write costs two page
//! programs).  The merge with the old contents of the page (the "read" of the
//! read-modify-write) is assumed to come from the controller's DRAM mapping
//! cache and is free by default; with `subpage_read = true` each partially
//! written page first pays a page read and a page transfer to the controller.
//!
//! **No write cache**: a write completes when its pages are programmed (as
//! with the volatile cache off, or FUA), and a `Flush` only waits for what is
//! in flight.
//!
//! # Steady-state garbage collection
//!
//! With `steady_state = true` the drive is assumed full and overwritten
//! uniformly at random, so greedy GC relocates valid pages.  With ρ =
//! `over_provisioning` = (physical − user) / user, the write amplification
//! `WA` (flash page writes per host page write) is
//!
//! * `wa_model = "agarwal"` (default): `WA = (1 + ρ) / (2ρ)`, the closed form
//!   for greedy GC under uniform random writes of R. Agarwal and M. Marrow,
//!   "A closed-form expression for write amplification in NAND flash", IEEE
//!   GLOBECOM Workshops 2010 (clamped to at least 1: the form drops below 1
//!   for ρ > 1, where it no longer holds);
//! * `wa_model = "xiang-kurkoski"`: `WA = α / (α + W₀(−α e^(−α)))` with
//!   α = 1 + ρ and W₀ the principal Lambert W, L. Xiang and B. Kurkoski, "An
//!   improved analytic expression for write amplification in NAND flash",
//!   ICNC 2012 (arXiv:1110.4245) — the same expression as P. Desnoyers'
//!   LRW/FIFO-cleaning model ("Analytic modeling of SSD write performance",
//!   SYSTOR 2012).  It is the more accurate of the two (ρ = 0.3: 2.36 against
//!   2.17 for Agarwal; simulation 2.35).
//!
//! Each host page written then costs its die an extra
//! `(WA − 1)·(read_us + program_us)` (on-die copy-back of the relocated
//! pages) `+ WA·erase_us / pages_per_block` (erases, amortised).  With
//! `steady_state = false` (fresh drive) WA is 1 and there is no extra time.

use serde::{Deserialize, Serialize};

use crate::hdd::{nonneg, positive, positive_u};
use crate::{
    check_range, ns, unsupported, xfer_ns, DriveError, DriveModel, DriveRequest, Nanos, ReqKind,
};

/// Closed form for steady-state write amplification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaModel {
    /// `(1 + ρ) / (2ρ)` (Agarwal & Marrow 2010).
    #[default]
    Agarwal,
    /// `α / (α + W₀(−α e^(−α)))`, α = 1 + ρ (Xiang & Kurkoski 2012).
    XiangKurkoski,
}

impl WaModel {
    /// Write amplification at over-provisioning ratio ρ = (physical − user) / user.
    pub fn write_amplification(self, rho: f64) -> f64 {
        let rho = if rho > 0.0 { rho } else { 1e-9 };
        match self {
            WaModel::Agarwal => ((1.0 + rho) / (2.0 * rho)).max(1.0),
            WaModel::XiangKurkoski => {
                let a = 1.0 + rho;
                let denom = a + lambert_w0(-a * (-a).exp());
                if denom > 0.0 {
                    a / denom
                } else {
                    f64::INFINITY
                }
            }
        }
    }
}

/// Principal branch of the Lambert W function for x in [−1/e, ∞).
pub fn lambert_w0(x: f64) -> f64 {
    let e = std::f64::consts::E;
    if x.is_nan() || x <= -1.0 / e {
        return -1.0;
    }
    if x == 0.0 {
        return 0.0;
    }
    // Start: branch-point series near −1/e, log-based for large x, x otherwise.
    let mut w = if x < -0.25 {
        let p = (2.0 * (e * x + 1.0)).sqrt();
        -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p * p * p
    } else if x > 3.0 {
        let l = x.ln();
        l - l.ln()
    } else {
        x / (1.0 + x)
    };
    // Halley's iteration.
    for _ in 0..64 {
        let ew = w.exp();
        let f = w * ew - x;
        let wp1 = w + 1.0;
        if wp1.abs() < 1e-300 {
            break;
        }
        let step = f / (ew * wp1 - (w + 2.0) * f / (2.0 * wp1));
        w -= step;
        if step.abs() <= 1e-15 * (1.0 + w.abs()) {
            break;
        }
    }
    w
}

/// SSD parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SsdParams {
    /// User capacity in bytes.
    pub capacity: u64,
    /// Effective flash page in bytes.
    pub page: u64,
    pub channels: u32,
    /// Independent units per channel (dies, or die-planes).
    pub dies_per_channel: u32,
    /// Array read (sense) time of a page.
    pub read_us: f64,
    /// Program time of a page.
    pub program_us: f64,
    /// Block erase time (only used in steady state).
    pub erase_us: f64,
    /// Pages per erase block (only used in steady state).
    pub pages_per_block: u64,
    /// Per-channel transfer rate in MiB/s.
    pub channel_mib_s: f64,
    /// Host link rate in MiB/s, shared by all requests; absent = unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_mib_s: Option<f64>,
    /// Firmware time per command, one command at a time.
    #[serde(default)]
    pub controller_us: f64,
    /// Host queue depth.
    pub queue_depth: usize,
    /// Spare over user capacity: (physical − user) / user.
    pub over_provisioning: f64,
    /// Apply steady-state GC write amplification to writes.
    #[serde(default)]
    pub steady_state: bool,
    #[serde(default)]
    pub wa_model: WaModel,
    /// Partially written pages are read first (read-modify-write on flash).
    #[serde(default)]
    pub subpage_read: bool,
}

impl SsdParams {
    pub fn validate(&self) -> Result<(), DriveError> {
        positive_u(self.capacity, "capacity")?;
        positive_u(self.page, "page")?;
        positive_u(self.channels as u64, "channels")?;
        positive_u(self.dies_per_channel as u64, "dies_per_channel")?;
        nonneg(self.read_us, "read_us")?;
        nonneg(self.program_us, "program_us")?;
        nonneg(self.erase_us, "erase_us")?;
        positive_u(self.pages_per_block, "pages_per_block")?;
        positive(self.channel_mib_s, "channel_mib_s")?;
        if let Some(h) = self.host_mib_s {
            positive(h, "host_mib_s")?;
        }
        nonneg(self.controller_us, "controller_us")?;
        positive_u(self.queue_depth as u64, "queue_depth")?;
        nonneg(self.over_provisioning, "over_provisioning")?;
        if self.steady_state && self.over_provisioning <= 0.0 {
            return Err(DriveError::config(
                "over_provisioning",
                "must be positive when steady_state is on (WA is infinite at 0)",
            ));
        }
        Ok(())
    }

    /// Steady-state write amplification (1 when `steady_state` is off).
    pub fn write_amplification(&self) -> f64 {
        if self.steady_state {
            self.wa_model.write_amplification(self.over_provisioning)
        } else {
            1.0
        }
    }

    /// Extra die time per host page written, in µs (0 when fresh).
    pub fn gc_extra_us_per_page(&self) -> f64 {
        if !self.steady_state {
            return 0.0;
        }
        let wa = self.write_amplification();
        (wa - 1.0) * (self.read_us + self.program_us)
            + wa * self.erase_us / self.pages_per_block.max(1) as f64
    }

    pub fn units(&self) -> u64 {
        self.channels.max(1) as u64 * self.dies_per_channel.max(1) as u64
    }
}

/// An SSD.
#[derive(Debug, Clone)]
pub struct Ssd {
    pub name: String,
    pub p: SsdParams,
    page: u64,
    channels: usize,
    read_ns: Nanos,
    /// Program + steady-state GC.
    program_ns: Nanos,
    page_xfer_ns: Nanos,
    controller_ns: Nanos,
    chan_bps: f64,
    die_busy: Vec<Nanos>,
    chans: Vec<Timeline>,
    link: Timeline,
    ctrl_busy: Nanos,
}

/// Reserved transfer intervals of a shared resource: sorted, disjoint,
/// adjacent ones merged, intervals that ended before the last dispatch
/// dropped.
#[derive(Debug, Clone, Default)]
struct Timeline {
    busy: Vec<(Nanos, Nanos)>,
}

impl Timeline {
    const MAX_INTERVALS: usize = 64;

    /// Forget what ended by `now`.
    fn prune(&mut self, now: Nanos) {
        let k = self.busy.partition_point(|&(_, e)| e <= now);
        self.busy.drain(..k);
    }

    /// Reserve `dur` in the first gap starting at or after `earliest`;
    /// returns the end of the reservation.
    fn reserve(&mut self, earliest: Nanos, dur: Nanos) -> Nanos {
        if dur == 0 {
            return earliest;
        }
        let mut t = earliest;
        let mut i = self.busy.partition_point(|&(_, e)| e <= t);
        while i < self.busy.len() && t.saturating_add(dur) > self.busy[i].0 {
            t = t.max(self.busy[i].1);
            i += 1;
        }
        let end = t.saturating_add(dur);
        let joins_prev = i > 0 && self.busy[i - 1].1 == t;
        let joins_next = i < self.busy.len() && self.busy[i].0 == end;
        match (joins_prev, joins_next) {
            (true, true) => {
                self.busy[i - 1].1 = self.busy[i].1;
                self.busy.remove(i);
            }
            (true, false) => self.busy[i - 1].1 = end,
            (false, true) => self.busy[i].0 = t,
            (false, false) => self.busy.insert(i, (t, end)),
        }
        if self.busy.len() > Self::MAX_INTERVALS {
            // Close the oldest gap (conservative: that time is lost).
            self.busy[0].1 = self.busy[1].1;
            self.busy.remove(1);
        }
        end
    }

    fn last_end(&self) -> Nanos {
        self.busy.last().map_or(0, |&(_, e)| e)
    }
}

impl Ssd {
    /// Never fails; zero counts are raised to 1 (validation rejects them).
    pub fn new(name: &str, p: SsdParams) -> Ssd {
        let page = p.page.max(1);
        let channels = p.channels.max(1) as usize;
        let units = p.units() as usize;
        let chan_bps = p.channel_mib_s * 1048576.0;
        Ssd {
            name: name.to_string(),
            page,
            channels,
            read_ns: ns(p.read_us * 1e3),
            program_ns: ns((p.program_us + p.gc_extra_us_per_page()) * 1e3),
            page_xfer_ns: ns(xfer_ns(page, chan_bps)),
            controller_ns: ns(p.controller_us * 1e3),
            chan_bps,
            die_busy: vec![0; units],
            chans: vec![Timeline::default(); channels],
            link: Timeline::default(),
            ctrl_busy: 0,
            p,
        }
    }

    pub fn units(&self) -> usize {
        self.die_busy.len()
    }

    /// Die time of one page write (program plus steady-state GC share).
    pub fn page_program_ns(&self) -> Nanos {
        self.program_ns
    }

    /// Channel time of a whole page.
    pub fn page_transfer_ns(&self) -> Nanos {
        self.page_xfer_ns
    }

    fn chan_ns(&self, bytes: u64) -> Nanos {
        ns(xfer_ns(bytes, self.chan_bps))
    }

    fn link_ns(&self, bytes: u64) -> Nanos {
        match self.p.host_mib_s {
            Some(h) => ns(xfer_ns(bytes, h * 1048576.0)),
            None => 0,
        }
    }

    fn in_flight_until(&self) -> Nanos {
        let dies = self.die_busy.iter().copied().max().unwrap_or(0);
        let chans = self.chans.iter().map(Timeline::last_end).max().unwrap_or(0);
        dies.max(chans)
            .max(self.link.last_end())
            .max(self.ctrl_busy)
    }
}

impl DriveModel for Ssd {
    fn describe(&self) -> String {
        let ss = if self.p.steady_state {
            format!(", steady state WA {:.2}", self.p.write_amplification())
        } else {
            String::new()
        };
        format!(
            "{} (ssd, {} KiB pages, {}x{} units, QD {}{ss})",
            self.name,
            self.page as f64 / 1024.0,
            self.channels,
            self.units() / self.channels,
            self.p.queue_depth
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
            ReqKind::Flush => return Ok(now.max(self.in_flight_until())),
            ReqKind::ZoneReset | ReqKind::ZoneFinish => {
                return Err(unsupported(&self.name, req.kind))
            }
            ReqKind::Read | ReqKind::Write => check_range(req, self.p.capacity)?,
        }
        for c in &mut self.chans {
            c.prune(now);
        }
        self.link.prune(now);
        let t0 = now.max(self.ctrl_busy).saturating_add(self.controller_ns);
        self.ctrl_busy = t0;
        let mut done = t0;
        if req.len == 0 {
            return Ok(done);
        }
        let units = self.units() as u64;
        let (first, last) = (
            req.offset / self.page,
            (req.offset + req.len - 1) / self.page,
        );
        for pg in first..=last {
            let s = (pg * self.page).max(req.offset);
            let e = ((pg + 1) * self.page).min(req.offset + req.len);
            let bytes = e - s;
            let u = (pg % units) as usize;
            let ch = u % self.channels;
            if req.kind == ReqKind::Read {
                let sensed = t0.max(self.die_busy[u]).saturating_add(self.read_ns);
                let xfer = self.chan_ns(bytes);
                let moved = self.chans[ch].reserve(sensed, xfer);
                self.die_busy[u] = moved;
                let link = self.link_ns(bytes);
                let at_host = self.link.reserve(moved, link);
                done = done.max(at_host);
            } else {
                let link = self.link_ns(bytes);
                let ready = self.link.reserve(t0, link);
                let mut die_free = self.die_busy[u];
                if bytes < self.page && self.p.subpage_read {
                    let sensed = t0.max(die_free).saturating_add(self.read_ns);
                    die_free = self.chans[ch].reserve(sensed, self.page_xfer_ns);
                }
                let moved = self.chans[ch].reserve(ready.max(die_free), self.page_xfer_ns);
                let programmed = moved.saturating_add(self.program_ns);
                self.die_busy[u] = programmed;
                done = done.max(programmed);
            }
        }
        Ok(done)
    }
    /// Simulated exactly: a page-aligned request on an idle copy of the drive.
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        if !matches!(kind, ReqKind::Read | ReqKind::Write) {
            return 0.0;
        }
        let mut idle = Ssd::new(&self.name, self.p.clone());
        let len = len.min(self.p.capacity);
        idle.submit(
            0,
            &DriveRequest {
                kind,
                offset: 0,
                len,
            },
        )
        .map(|t| t as f64)
        .unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn params(steady: bool) -> SsdParams {
        SsdParams {
            capacity: 1 << 30,
            page: 8192,
            channels: 4,
            dies_per_channel: 2,
            read_us: 50.0,
            program_us: 600.0,
            erase_us: 3000.0,
            pages_per_block: 128,
            channel_mib_s: 200.0,
            host_mib_s: None,
            controller_us: 0.0,
            queue_depth: 32,
            over_provisioning: 0.07,
            steady_state: steady,
            wa_model: WaModel::Agarwal,
            subpage_read: false,
        }
    }

    fn ssd(steady: bool) -> Ssd {
        Ssd::new("t", params(steady))
    }

    #[test]
    fn sub_page_write_costs_a_full_page() {
        let x = 8192.0 * 1e9 / (200.0 * 1048576.0); // 39,062.5 ns
        let full = ssd(false).submit(0, &DriveRequest::write(0, 8192)).unwrap();
        assert_eq!(full, ns(x) + 600_000);
        let part = ssd(false).submit(0, &DriveRequest::write(0, 4096)).unwrap();
        assert_eq!(
            part, full,
            "a sub-page write programs (and moves) the whole page"
        );
        let tiny = ssd(false)
            .submit(0, &DriveRequest::write(8192 + 512, 512))
            .unwrap();
        assert_eq!(tiny, full);
        // Unaligned 8 KiB touches two pages: two programs, on two units.
        let mut d = ssd(false);
        assert_eq!(d.submit(0, &DriveRequest::write(4096, 8192)).unwrap(), full);
        assert_eq!(d.die_busy.iter().filter(|&&b| b > 0).count(), 2);
        // Reads move only the bytes asked for.
        let r4 = ssd(false).submit(0, &DriveRequest::read(0, 4096)).unwrap();
        assert_eq!(r4, 50_000 + ns(x / 2.0));
        // With the flash read-modify-write turned on: read + page out first.
        let rmw = Ssd::new(
            "t",
            SsdParams {
                subpage_read: true,
                ..params(false)
            },
        )
        .submit(0, &DriveRequest::write(0, 4096))
        .unwrap();
        assert_eq!(rmw, 50_000 + 2 * ns(x) + 600_000);
        assert_eq!(
            Ssd::new(
                "t",
                SsdParams {
                    subpage_read: true,
                    ..params(false)
                }
            )
            .submit(0, &DriveRequest::write(0, 8192))
            .unwrap(),
            full
        );
    }

    #[test]
    fn pages_spread_over_units_in_parallel() {
        let mut d = ssd(false);
        let x = d.page_transfer_ns();
        let prog = d.page_program_ns();
        let t = d.submit(0, &DriveRequest::write(0, 16 * 8192)).unwrap();
        // 16 pages over 8 units (4 channels x 2 dies): two program rounds, plus
        // the serialised transfers of the last page pair on each channel.
        assert_eq!(t, 2 * prog + 3 * x);
        assert!(t < 2 * prog + prog / 5, "{t} vs 2 x {prog}");
        assert!(t * 6 < 16 * (prog + x));
        // The same 16 pages on a 1-unit drive: fully serial.
        let mut one = Ssd::new(
            "t",
            SsdParams {
                channels: 1,
                dies_per_channel: 1,
                ..params(false)
            },
        );
        assert_eq!(
            one.submit(0, &DriveRequest::write(0, 16 * 8192)).unwrap(),
            16 * (prog + x)
        );
        // Requests to different units overlap; to the same unit they queue.
        let mut d = ssd(false);
        let a = d.submit(0, &DriveRequest::write(0, 8192)).unwrap();
        let b = d.submit(0, &DriveRequest::write(8192, 8192)).unwrap();
        let c = d.submit(0, &DriveRequest::write(8 * 8192, 8192)).unwrap();
        assert_eq!(a, prog + x);
        assert_eq!(b, prog + x, "unit 1 on channel 1: parallel");
        assert_eq!(
            c,
            2 * (prog + x),
            "unit 0 again: its transfer waits for the first program"
        );
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
            c
        );
        assert_eq!(d.queue_depth(), 32);
    }

    #[test]
    fn controller_and_host_link_are_serial_resources() {
        let p = SsdParams {
            controller_us: 10.0,
            host_mib_s: Some(500.0),
            ..params(false)
        };
        let mut d = Ssd::new("t", p.clone());
        let link = ns(xfer_ns(4096, 500.0 * 1048576.0));
        let chan = ns(xfer_ns(4096, 200.0 * 1048576.0));
        let r1 = d.submit(0, &DriveRequest::read(0, 4096)).unwrap();
        assert_eq!(r1, 10_000 + 50_000 + chan + link);
        let r2 = d.submit(0, &DriveRequest::read(8192, 4096)).unwrap();
        assert_eq!(
            r2,
            20_000 + 50_000 + chan + link,
            "second command waits for the controller"
        );
        assert_eq!(d.random_service_ns(ReqKind::Read, 4096), r1 as f64);
        // A big read is limited by the host link.
        let mut d = Ssd::new("t", p);
        let mib = 1 << 20;
        let t = d.submit(0, &DriveRequest::read(0, 64 * mib)).unwrap();
        let link_only = xfer_ns(64 * mib, 500.0 * 1048576.0);
        assert!(
            t as f64 > link_only && (t as f64) < link_only * 1.02,
            "{t} vs {link_only}"
        );
    }

    #[test]
    fn write_amplification_formulas() {
        assert!((WaModel::Agarwal.write_amplification(0.07) - 1.07 / 0.14).abs() < 1e-12);
        assert!((WaModel::Agarwal.write_amplification(0.3) - 2.1667).abs() < 1e-4);
        // Xiang & Kurkoski's own example: rho 0.3 -> 2.36.
        assert!((WaModel::XiangKurkoski.write_amplification(0.3) - 2.36).abs() < 0.005);
        for rho in [0.02, 0.07, 0.28, 1.0, 3.0] {
            let (a, x) = (
                WaModel::Agarwal.write_amplification(rho),
                WaModel::XiangKurkoski.write_amplification(rho),
            );
            assert!(x > a && x < a * 1.35 + 0.1, "rho {rho}: agarwal {a} xk {x}");
        }
        for x in [
            -0.36787944117144233 + 1e-12,
            -0.3,
            -0.1,
            0.0,
            0.5,
            1.0,
            10.0,
            1e6,
        ] {
            let w = lambert_w0(x);
            assert!(
                (w * w.exp() - x).abs() < 1e-9 * (1.0 + x.abs()),
                "W({x}) = {w}"
            );
        }
    }

    #[test]
    fn steady_state_slows_writes_by_the_formula() {
        let fresh = ssd(false);
        let steady = ssd(true);
        let wa = steady.p.write_amplification();
        assert_eq!(fresh.p.write_amplification(), 1.0);
        let extra_us = (wa - 1.0) * (50.0 + 600.0) + wa * 3000.0 / 128.0;
        assert_eq!(steady.page_program_ns(), ns((600.0 + extra_us) * 1e3));
        let (tf, ts) = (
            fresh.random_service_ns(ReqKind::Write, 8192),
            steady.random_service_ns(ReqKind::Write, 8192),
        );
        assert!((ts - tf - extra_us * 1e3).abs() < 1.0, "{ts} - {tf}");
        assert!(ts > 5.0 * tf);
        assert_eq!(
            steady.random_service_ns(ReqKind::Read, 8192),
            fresh.random_service_ns(ReqKind::Read, 8192)
        );
        let xk = Ssd::new(
            "t",
            SsdParams {
                wa_model: WaModel::XiangKurkoski,
                ..params(true)
            },
        );
        assert!(xk.random_service_ns(ReqKind::Write, 8192) > ts);
        assert!(
            steady.describe().contains("WA 7.64"),
            "{}",
            steady.describe()
        );
        let e = SsdParams {
            over_provisioning: 0.0,
            ..params(true)
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("over_provisioning"), "{e}");
    }

    #[test]
    fn timeline_fills_gaps() {
        let mut t = Timeline::default();
        assert_eq!(t.reserve(100, 10), 110);
        assert_eq!(t.reserve(0, 10), 10, "fits before");
        assert_eq!(
            t.reserve(0, 95),
            205,
            "too long for the gaps: after the last"
        );
        assert_eq!(t.reserve(10, 90), 100, "exactly fills [10, 100)");
        assert_eq!(t.busy, vec![(0, 205)]);
        t.prune(205);
        assert!(t.busy.is_empty());
        for i in 0..200 {
            t.reserve(i * 100, 10);
        }
        assert!(t.busy.len() <= Timeline::MAX_INTERVALS);
        assert_eq!(t.last_end(), 19_910);
    }

    #[test]
    fn a_read_behind_a_busy_die_does_not_block_other_reads() {
        let mut d = Ssd::new(
            "t",
            SsdParams {
                host_mib_s: Some(500.0),
                ..params(false)
            },
        );
        let w = d.submit(0, &DriveRequest::write(0, 8192)).unwrap(); // unit 0 busy programming
        let r0 = d.submit(0, &DriveRequest::read(0, 4096)).unwrap(); // waits for unit 0
        let r4 = d.submit(0, &DriveRequest::read(4 * 8192, 4096)).unwrap(); // unit 4, same channel 0
        assert!(r0 > w);
        assert!(
            r4 < 100_000,
            "independent read finished at {r4}, not behind the program"
        );
    }

    #[test]
    fn bad_requests_are_errors() {
        let mut d = ssd(false);
        assert!(matches!(
            d.submit(0, &DriveRequest::write((1 << 30) - 4096, 8192)),
            Err(DriveError::OutOfRange { .. })
        ));
        assert!(matches!(
            d.submit(
                0,
                &DriveRequest {
                    kind: ReqKind::ZoneFinish,
                    offset: 0,
                    len: 0
                }
            ),
            Err(DriveError::Unsupported { .. })
        ));
        assert_eq!(d.submit(5, &DriveRequest::read(0, 0)).unwrap(), 5);
        // Degenerate (unvalidated) geometry does not panic.
        let mut z = Ssd::new(
            "t",
            SsdParams {
                channels: 0,
                dies_per_channel: 0,
                page: 0,
                channel_mib_s: 0.0,
                ..params(false)
            },
        );
        assert!(z.submit(0, &DriveRequest::write(0, 4096)).is_ok());
    }
}
