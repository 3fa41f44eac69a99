//! mosaic-drives: timing models of drives, in virtual nanoseconds.
//!
//! The replay engine dispatches requests to a [`DriveModel`] and gets back a
//! completion time; the model keeps whatever state decides service time
//! (head position, per-die and per-channel busy times, write pointers).
//! Models are deterministic: no clocks and no randomness at all, so a replay
//! is a pure function of the request sequence and the dispatch times.
//!
//! | `kind` | model | module |
//! |---|---|---|
//! | `hdd` | simple: `t_pos + x / R` per request, FIFO, one at a time | [`hdd`] |
//! | `hdd-detailed` | two-regime seek curve over cylinder distance, rotation from virtual time, head state, cylinder skew, write settle, optional SSTF / SPTF reordering | [`hdd`] |
//! | `ssd` | flash pages (a partial page costs a whole page program), channels × dies, per-channel and host-link transfer, controller time, host queue depth, steady-state GC write amplification from over-provisioning | [`ssd`] |
//! | `smr` | host-managed zoned: conventional zones, write pointers enforced, HDD timing with a sequential-append discount | [`zoned`] |
//! | `ram` | fixed latency + bandwidth (RAM, NVRAM) | [`ram`] |
//!
//! Drives are described by a [`DriveConfig`] (TOML-loadable, see
//! [`config`]) or by a named [`preset`]; [`DriveConfig::build`] makes the
//! model.
//!
//! # Requests
//!
//! * `Read` / `Write`: `offset` and `len` in bytes; `offset + len` must not
//!   exceed the capacity.  Zero-length requests are allowed (they cost the
//!   fixed part of the service time).
//! * `Flush`: completes when everything dispatched before it has completed;
//!   `offset` and `len` are ignored.  No model has a volatile write cache, so
//!   a flush adds no time of its own.
//! * `ZoneReset` / `ZoneFinish`: zoned drives only; `offset` must be the
//!   first byte of a sequential zone, `len` is ignored.  Other models return
//!   [`DriveError::Unsupported`].
//!
//! A model never panics on a bad request: it returns a [`DriveError`] and
//! its state is left unchanged.

pub mod config;
pub mod hdd;
pub mod net;
pub mod ram;
pub mod ssd;
pub mod zoned;

pub use config::{build_device, list_presets, parse_device_spec, preset, DriveConfig};
pub use hdd::{HddDetailed, HddDetailedParams, HddSimple, HddSimpleParams, Scheduler, SeekCurve};
pub use ram::{Ram, RamParams};
pub use ssd::{Ssd, SsdParams, WaModel};
pub use zoned::{Zoned, ZonedParams};

use serde::Serialize;

/// Virtual time in nanoseconds.
pub type Nanos = u64;

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReqKind {
    Read,
    Write,
    Flush,
    ZoneReset,
    ZoneFinish,
}

impl ReqKind {
    pub fn name(self) -> &'static str {
        match self {
            ReqKind::Read => "read",
            ReqKind::Write => "write",
            ReqKind::Flush => "flush",
            ReqKind::ZoneReset => "zone reset",
            ReqKind::ZoneFinish => "zone finish",
        }
    }
}

/// One request to a drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriveRequest {
    pub kind: ReqKind,
    /// Byte offset.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

impl DriveRequest {
    pub fn read(offset: u64, len: u64) -> DriveRequest {
        DriveRequest {
            kind: ReqKind::Read,
            offset,
            len,
        }
    }
    pub fn write(offset: u64, len: u64) -> DriveRequest {
        DriveRequest {
            kind: ReqKind::Write,
            offset,
            len,
        }
    }
}

/// Errors a drive returns for requests a real drive would reject, and for
/// bad configurations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriveError {
    #[error("request at {offset}+{len} is beyond the drive capacity of {capacity} bytes")]
    OutOfRange {
        offset: u64,
        len: u64,
        capacity: u64,
    },
    #[error("zone {zone}: write at offset {offset} is not at the write pointer {wp}")]
    NotAtWritePointer { zone: u64, offset: u64, wp: u64 },
    #[error("zone {zone} is full: no write is possible until it is reset")]
    ZoneFull { zone: u64 },
    #[error("zone {zone}: write at {offset}+{len} crosses the zone boundary at {zone_end}")]
    CrossesZone {
        zone: u64,
        offset: u64,
        len: u64,
        zone_end: u64,
    },
    #[error("zone {zone} is a conventional zone: {op} is not allowed")]
    ConventionalZone { zone: u64, op: &'static str },
    #[error("zone {zone}: {op} at offset {offset} is not at the zone start {zone_start}")]
    NotZoneStart {
        zone: u64,
        op: &'static str,
        offset: u64,
        zone_start: u64,
    },
    #[error("{model}: {op} is not supported by this drive")]
    Unsupported { model: String, op: &'static str },
    #[error("bad drive configuration: field '{field}': {message}")]
    Config { field: String, message: String },
    #[error("unknown drive preset {spec:?}; known: {known}")]
    UnknownPreset { spec: String, known: String },
    #[error("drive TOML: {0}")]
    Toml(String),
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

impl DriveError {
    pub(crate) fn config(field: &str, message: impl Into<String>) -> DriveError {
        DriveError::Config {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// Condition of a zone (ZBC terms; implicitly/explicitly open and closed are
/// not distinguished).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZoneState {
    /// Random writes allowed, no write pointer.
    Conventional,
    Empty,
    /// Partly written.
    Open,
    Full,
}

/// One row of a zone report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ZoneInfo {
    pub zone: u64,
    /// First byte.
    pub start: u64,
    /// Bytes.
    pub len: u64,
    /// Absolute byte offset of the write pointer; `None` for conventional zones.
    pub wp: Option<u64>,
    pub state: ZoneState,
}

/// A timing model of one drive.
pub trait DriveModel: Send {
    /// e.g. `hdd:seagate-st91000640ss (simple)`.
    fn describe(&self) -> String;
    /// Capacity in bytes.
    fn capacity(&self) -> u64;
    /// Most requests the engine may have dispatched to this drive at once
    /// (host queue depth).  HDD: 1 (the engine queues the rest and asks
    /// [`pick`](DriveModel::pick)); SSD: e.g. 32.  Advisory: a model accepts
    /// more and queues them internally in submission order.  Constant: the
    /// replay engine reads it once.
    fn queue_depth(&self) -> usize;
    /// Which pending request to dispatch next when the drive can take one.
    /// Default FIFO (0).  The detailed HDD with a scheduler picks by seek
    /// distance (SSTF) or positioning time (SPTF) from its head state.
    /// Must return an index `< pending.len()` when `pending` is non-empty.
    fn pick(&self, _now: Nanos, _pending: &[DriveRequest]) -> usize {
        0
    }
    /// Whether [`pick`](DriveModel::pick) may choose anything but the
    /// oldest request; a model that answers false is served in submission
    /// order without being asked.  The default (true) always asks.
    fn reorders(&self) -> bool {
        true
    }
    /// Dispatch `req` at `now`; returns its completion time (>= now).
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError>;
    /// Expected service time in nanoseconds of an isolated random request of
    /// this kind and size on an idle drive (for analytical models).
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64;
    /// Zone size in bytes, for zoned drives.
    fn zone_size(&self) -> Option<u64> {
        None
    }
    /// All zones, for zoned drives (empty otherwise).
    fn zone_report(&self) -> Vec<ZoneInfo> {
        Vec::new()
    }
    /// Write pointer (absolute byte offset) of a sequential zone.
    fn write_pointer(&self, _zone: u64) -> Option<u64> {
        None
    }
}

/// `offset + len` within `capacity`.
#[inline]
pub(crate) fn check_range(req: &DriveRequest, capacity: u64) -> Result<(), DriveError> {
    match req.offset.checked_add(req.len) {
        Some(end) if end <= capacity => Ok(()),
        _ => Err(out_of_range(req, capacity)),
    }
}

#[cold]
#[inline(never)]
fn out_of_range(req: &DriveRequest, capacity: u64) -> DriveError {
    DriveError::OutOfRange {
        offset: req.offset,
        len: req.len,
        capacity,
    }
}

/// Nanoseconds to move `bytes` at `bytes_per_s`.
pub(crate) fn xfer_ns(bytes: u64, bytes_per_s: f64) -> f64 {
    bytes as f64 * 1e9 / bytes_per_s
}

/// A non-negative duration in f64 nanoseconds, rounded to whole
/// nanoseconds (NaN and negatives give 0, huge values saturate).
pub(crate) fn ns(x: f64) -> Nanos {
    if x > 0.0 && x < TWO_POW_52 {
        // `x.round()` (half away from zero) without the libm call: below
        // 2^52 the fraction `x - trunc(x)` is exact.
        let whole = x as u64;
        whole + (x - whole as f64 >= 0.5) as u64
    } else if x > 0.0 {
        x.round() as u64
    } else {
        0
    }
}

const TWO_POW_52: f64 = 4_503_599_627_370_496.0;

/// `err` for zone operations on drives without zones (out of line:
/// models' `submit` stays small on its common path).
#[cold]
#[inline(never)]
pub(crate) fn unsupported(model: &str, kind: ReqKind) -> DriveError {
    DriveError::Unsupported {
        model: model.to_string(),
        op: kind.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::ns;

    #[test]
    fn ns_rounds_as_round_does() {
        let mut xs = vec![0.0, -0.0, -1.5, 0.5, 1.5, 2.5, 0.49999999999999994, 1e-300, f64::NAN, f64::INFINITY, 1.8e19, 1e300];
        xs.extend([0.5f64, 1.5, 1e6 + 0.5, 4_503_599_627_370_495.5, 4_503_599_627_370_496.0, 9_007_199_254_740_993.0].iter().flat_map(|&b| [b, f64::from_bits(b.to_bits() - 1), f64::from_bits(b.to_bits() + 1)]));
        let mut x = 0.123_456_789f64;
        for _ in 0..10_000 {
            xs.push(x);
            x = x * 1.37 + 0.31;
            if x > 1e17 {
                x /= 1e15;
            }
        }
        for x in xs {
            let want = if x > 0.0 { x.round() as u64 } else { 0 };
            assert_eq!(ns(x), want, "{x:e}");
        }
    }
}
