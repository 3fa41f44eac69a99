//! ReHypar fast-tier allocation on blocks: geometry (equations (1)–(5)
//! and MAP), configuration, the ReHypar allocator (per-level free lists,
//! ALLOCATE by least d/t) and the fixed-extent baseline, both behind
//! [`FastTierAllocator`]. Pure policy: no I/O, time is passed in.

mod alloc;
mod baseline;
mod config;
pub mod geometry;
mod pool;

pub use alloc::{ListKey, ReHypar};
pub use baseline::FixedExtent;
pub use config::{
    SectionConfig, TierConfig, DEFAULT_BLOCK_BYTES, DEFAULT_ERASE_BLOCK_BYTES, DEFAULT_EXPIRY_NS,
    DEFAULT_EXTENT_BYTES, DEFAULT_THRESHOLD_V,
};
pub use geometry::{Chunk, ChunkIdx, ExtentGeometry, MapOutcome};

/// Errors of the fast-tier policy. Bad input is an error, never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TierError {
    /// The configuration is invalid.
    #[error("bad tier config: {0}")]
    Config(String),
    /// A geometry query was out of range.
    #[error("bad geometry query: {0}")]
    Geometry(String),
    /// A request was malformed (zero length, overflow, out of range).
    #[error("bad request: {0}")]
    Request(String),
    /// The fast tier cannot hold the run: the caller should demote it.
    #[error("fast tier full: no room for {blocks} blocks")]
    Full {
        /// Length of the run that did not fit.
        blocks: u64,
    },
    /// A free named a block that is not live.
    #[error("fast-tier block {0} is not live")]
    NotLive(u64),
}

/// A write run to place: its logical (volume) start block and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocRequest {
    /// Logical start block on the volume (used for the distance d).
    pub lba: u64,
    /// Length in blocks (> 0).
    pub blocks: u64,
}

/// One contiguous piece of an allocation inside one extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Section index (in config order).
    pub section: usize,
    /// Global extent index in the fast tier.
    pub extent: u32,
    /// Block offset inside the extent.
    pub offset: u64,
    /// Length in blocks.
    pub blocks: u64,
    /// Flat fast-tier block number of the first block.
    pub fast_block: u64,
}

/// Where a run was placed: pieces in logical order (one unless the run
/// is longer than an extent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The pieces, in the run's logical order.
    pub pieces: Vec<Piece>,
}

/// Space accounting over the fast tier, in blocks.
/// Invariant: `allocated = live + dead + skipped + open_tail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpaceStats {
    /// Total fast-tier blocks.
    pub total: u64,
    /// Blocks in extents taken from the clean pool.
    pub allocated: u64,
    /// Blocks holding live data.
    pub live: u64,
    /// Blocks written and later freed, in extents still in use.
    pub dead: u64,
    /// Blocks never written and never reusable: chunk remainders skipped
    /// by MAP and tails of sealed extents.
    pub skipped: u64,
    /// Free tails of open extents, still reusable.
    pub open_tail: u64,
}

impl SpaceStats {
    /// The fragmentation metric: the fraction of allocated
    /// fast-tier space that holds live data (`live / allocated`; 1.0
    /// when nothing is allocated). Lower means more fragmented.
    pub fn live_fraction(&self) -> f64 {
        if self.allocated == 0 {
            return 1.0;
        }
        self.live as f64 / self.allocated as f64
    }
}

/// A fast-tier allocator: ReHypar or the fixed-extent baseline.
pub trait FastTierAllocator {
    /// Place a run of `req.blocks` blocks at time `now_ns`;
    /// [`TierError::Full`] when the fast tier cannot hold it.
    fn allocate(&mut self, req: AllocRequest, now_ns: u64) -> Result<Allocation, TierError>;
    /// Mark `blocks` blocks from flat fast-tier block `fast_block` dead.
    /// All must be live (else nothing changes). Extents left with no live
    /// data return to the clean pool.
    fn free(&mut self, fast_block: u64, blocks: u64) -> Result<(), TierError>;
    /// Seal open extents whose reuse window has expired at `now_ns`.
    fn expire(&mut self, now_ns: u64);
    /// Current space accounting.
    fn stats(&self) -> SpaceStats;
    /// Place a run right after flat block `after` in the same extent, if
    /// `after` is the highest block written there and the blocks after it
    /// are free and inside the extent (a write run growing in place, as a
    /// file grows); `None` when it cannot, and nothing changes.
    fn extend(&mut self, after: u64, req: AllocRequest, now_ns: u64) -> Result<Option<Piece>, TierError>;
    /// Recovery: flat block `fast_block` holds live data (its extent is
    /// taken and sealed).  A block adopted twice is an error.
    fn adopt(&mut self, fast_block: u64) -> Result<(), TierError>;
}
