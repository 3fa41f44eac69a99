//! mosaic-tier: the hybrid SSD+HDD tier's fast-tier allocation policy.
//!
//! * [`rehypar`] — ReHypar (recursive hybrid chunk partitioning) on
//!   blocks: the chunk geometry of equations (1)–(5) and MAP, data
//!   sections with per-section extent sizes aligned to the erase block,
//!   per-level free lists, ALLOCATE by least distance/time, freeing, the
//!   live/allocated fragmentation metric, and a fixed-extent baseline
//!   behind the same [`FastTierAllocator`] trait.
//! * [`run`] — the write-run coalescer: block requests become "files"
//!   (runs of sequential requests of one stream within a time window).
//! * [`policy`] — the tier policy: client requests, idle time and
//!   movement between the fast and the slow tier as
//!   `mosaic_core::Program`s (writes on FAST, demotion in whole slow
//!   stripes, promotion of hot groups, the crash-safe map on FAST).
//!
//! Pure policy: no I/O, time is an argument. See the crate README for
//! how the paper's file-system notions map onto blocks.

#![warn(missing_docs)]

pub mod policy;
pub mod rehypar;
pub mod run;

pub use policy::{
    PolicyConfig, PolicyError, TierGeometry, TierHealth, TierLayout, TierPolicy, TierState,
    TierStats, FAST, SLOW,
};

pub use rehypar::{
    AllocRequest, Allocation, ExtentGeometry, FastTierAllocator, FixedExtent, Piece, ReHypar,
    SectionConfig, SpaceStats, TierConfig, TierError,
};
pub use run::{coalesce, BlockRequest, Coalescer, RunConfig, RunError, WriteRun};
