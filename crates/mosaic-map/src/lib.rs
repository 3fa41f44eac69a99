//! mosaic-map: the shared mapped-layout kit.
//!
//! * [`frame`]: the one crc32c frame codec for on-disk metadata (it lives
//!   in `mosaic-format`, re-exported here);
//! * [`ledger`]: a checkpoint plus a delta log of frames, the durable
//!   form of every mapped layout's tables (the block map's, DVS's);
//! * [`blocklog`]: map records on a ledger written as whole blocks,
//!   sans-I/O (the hybrid tier's map on its fast array);
//! * [`map`]: a persistent, crash-safe block map from logical extents to
//!   placements (member, tier or zone): two checkpoint slots plus a delta
//!   log of frames;
//! * [`alloc`]: an allocator interface with reservations that commit or
//!   abort, an extent allocator and a zone-append allocator, both rebuilt
//!   from the map at open;
//! * [`moves`]: the migration protocol (copy, flush, log the remap, free)
//!   as programs for the one executor, and the group commit of
//!   placements; what mapped policies (the hybrid tier) move data with;
//! * [`migrate`]: client I/O through the map and the same protocol under
//!   per-extent locks, run directly on a [`Store`] (the kit's reference
//!   volume, which its power-cut tests drive).
//!
//! DVS keeps its own tables on top of this kit; the hybrid tier and the
//! adaptive layout use it as it is.

pub mod alloc;
pub mod blocklog;
pub mod ledger;
pub use mosaic_format::frame;
pub mod map;
pub mod migrate;
pub mod moves;

pub use ledger::{Ledger, LedgerLayout, LedgerWrite};
pub use alloc::{AllocError, Allocator, ExtentAllocator, Pool, Reservation, ZoneAllocator};
pub use map::{BlockMap, Geometry, MapError, MapState, Placement, Update};
pub use migrate::{MappedVolume, MemberStore, Store, VolumeError};
