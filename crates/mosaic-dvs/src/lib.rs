//! mosaic-dvs: DVS-RAID, Dynamic Variable-width Striping for shingled
//! (host-managed zoned) drives (Luo et al.), the first *mapped* layout of
//! mosaic, plus the paper's SMR baselines.
//!
//! ```text
//!   addr      geometry, LSN/LCN addressing, slot offsets
//!   tables    GTT, per-SSG AMT and SIT, the stripe builder
//!   cache     SSG LRU/LFU write cache, LRU read cache
//!   engine    the sans-I/O state machine: writes -> destage / GC jobs, reads -> sources
//!   program   the one lowering: jobs, reads, metadata writes -> mosaic_core Programs
//!   frontend  DVS as a mosaic_core::Frontend for mosaic-sim (the programs, counting mode)
//!   baseline  Segment RAID-5 and Sblock RAID-5 on SMR (simulator and real zoned members), and a chunk write cache for any layout
//!   meta      metadata persistence: labels, checkpoint + log (+ journal) in conventional zones
//!   array     the real array on zoned members (ZonedFile): the programs on mosaic-exec
//! ```

// `is_multiple_of` needs Rust 1.87; the workspace MSRV is 1.80.
#![allow(clippy::manual_is_multiple_of)]

pub mod addr;
pub mod array;
pub mod backlog;
pub mod baseline;
pub mod cache;
pub mod engine;
pub mod files;
pub mod frontend;
pub mod meta;
pub mod program;
pub mod tables;

pub use addr::{ChunkKey, DvsConfig, Geo};
pub use array::{BlockPool, DvsArray, Prepared, ZonedMember};
pub use baseline::real::RealBaseline;
pub use baseline::{build_frontend, CachedFrontend, SblockRaid5, SegmentRaid5};
pub use engine::{Dvs, DvsParams, DvsStats, Job, JobKind};
pub use frontend::DvsFrontend;

/// Errors of DVS planning, metadata and arrays.
#[derive(Debug, thiserror::Error)]
pub enum DvsError {
    #[error("bad DVS geometry: {0}")]
    Geometry(String),
    #[error(transparent)]
    Plan(#[from] mosaic_core::PlanError),
    #[error("SSG {lsn}: no room: {msg}")]
    NoSpace { lsn: u32, msg: String },
    #[error("corrupt DVS metadata: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
}
