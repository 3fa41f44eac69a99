//! mosaic-drives: timing models of drives, in virtual nanoseconds.
//!
//! The replay engine dispatches requests to a [`DriveModel`] and gets back a
//! completion time; the model keeps whatever state decides service time
//! (head position, per-unit busy times, write pointers).  Models are
//! deterministic: no clocks, no unseeded randomness.
//!
//! | kind | model |
//! |---|---|
//! | `hdd` | simple: `t_pos + x / R` per request, FIFO |
//! | `hdd-detailed` | seek curve over cylinder distance, rotation from virtual time, head state, optional SPTF reordering |
//! | `ssd` | flash pages (sub-page writes cost a page read + program), channels × dies units, host queue depth, steady-state GC write amplification from over-provisioning |
//! | `smr` | host-managed zoned: conventional zones, write pointers enforced, HDD timing with sequential-append discount |
//! | `ram` | fixed latency + bandwidth (RAM, NVRAM) |

mod config;
mod hdd;
mod ram;
mod ssd;
mod zoned;

pub use config::{list_presets, parse_device_spec, preset, DriveConfig};
pub use hdd::{HddDetailed, HddDetailedParams, HddSimple};
pub use ram::Ram;
pub use ssd::{Ssd, SsdParams};
pub use zoned::{ZoneInfo, ZoneState, Zoned, ZonedParams};

/// Virtual time in nanoseconds.
pub type Nanos = u64;

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReqKind {
    Read,
    Write,
    Flush,
    ZoneReset,
    ZoneFinish,
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

/// Errors a drive returns for requests a real drive would reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriveError {
    #[error("request at {offset}+{len} is beyond the drive capacity of {capacity} bytes")]
    OutOfRange { offset: u64, len: u64, capacity: u64 },
    #[error("zone {zone}: write at {offset} is not at the write pointer {wp}")]
    NotAtWritePointer { zone: u64, offset: u64, wp: u64 },
    #[error("zone {zone}: write at {offset}+{len} crosses the zone boundary at {end}")]
    CrossesZone { zone: u64, offset: u64, len: u64, end: u64 },
    #[error("zone {zone} is full")]
    ZoneFull { zone: u64 },
    #[error("zone {zone} is conventional: {op} is not allowed")]
    Conventional { zone: u64, op: &'static str },
    #[error("{0}")]
    Unsupported(String),
    #[error("bad drive configuration: field '{field}': {message}")]
    Config { field: String, message: String },
    #[error("{0}")]
    Preset(String),
}

/// A timing model of one drive.
pub trait DriveModel: Send {
    /// e.g. `hdd:seagate-st91000640ss (simple)`.
    fn describe(&self) -> String;
    /// Capacity in bytes.
    fn capacity(&self) -> u64;
    /// Most requests the engine may have dispatched to the drive at once.
    fn queue_depth(&self) -> usize;
    /// Which pending request to dispatch next (default FIFO).
    fn pick(&self, _now: Nanos, _pending: &[DriveRequest]) -> usize {
        0
    }
    /// Dispatch `req` at `now`; returns its completion time (>= now).
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError>;
    /// Mean service time of an isolated random request on an idle drive.
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64;
}

pub(crate) fn check_range(req: &DriveRequest, capacity: u64) -> Result<(), DriveError> {
    match req.offset.checked_add(req.len) {
        Some(end) if end <= capacity => Ok(()),
        _ => Err(DriveError::OutOfRange { offset: req.offset, len: req.len, capacity }),
    }
}

/// Nanoseconds to move `bytes` at `bytes_per_s`.
pub(crate) fn xfer_ns(bytes: u64, bytes_per_s: f64) -> f64 {
    bytes as f64 * 1e9 / bytes_per_s
}
