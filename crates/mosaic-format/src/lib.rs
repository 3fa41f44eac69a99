//! mosaic-format: the on-disk formats every kind of array shares.
//!
//! * [`frame`]: the one crc32c frame codec; every piece of metadata
//!   mosaic writes (labels, journal records, DVS metadata, the block map,
//!   an emulated zoned drive's header) is a frame;
//! * [`label`]: the one member label (superblock) format: shared fields
//!   plus a policy blob for what a kind needs more;
//! * [`journal`]: the one journal record format (typed entries: device
//!   writes, logical writes, resync marks) every journal writes;
//! * [`bitmap`]: the write-intent bitmap's blocks (md's internal bitmap);
//! * [`scrub`]: the one record of the last scrub, kept in the labels;
//! * [`fresh`]: the one freshness rule (event counters decide) and the
//!   assignment of devices to member slots that applies it.
//!
//! Pure formats: no device I/O beyond a caller's read closure, so every
//! decoder here is fuzzed directly.

pub mod bitmap;
pub mod frame;
pub mod fresh;
pub mod journal;
pub mod label;
pub mod lost;
pub mod scrub;

pub use frame::{Frame, FrameError};
pub use label::{Label, LabelError};
