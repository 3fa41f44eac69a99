//! mosaic-core: the sans-I/O heart of mosaic.
//!
//! Layouts turn logical requests into [`Plan`]s of device operations; the
//! [`compute`] module does the stripe math between a plan's reads and
//! writes.  Nothing here owns a thread or a file: executors (the real one in
//! `mosaic-array`, the virtual-time one in `mosaic-sim`) run the plans.
//!
//! ```text
//!   request ──> Layout::plan_* ──> Plan { StripePlan { reads, writes } }
//!                                        │
//!            executor: reads ──> Layout::compute_* ──> writes ──> done
//! ```

pub mod cache;
pub mod compute;
pub mod frontend;
pub mod geometry;
pub mod health;
pub mod layout;
pub mod lower;
pub mod merge;
pub mod plan;
pub mod planner;
pub mod program;

pub use cache::{CacheConfig, CachePolicy, CacheStats, CachedArray, Step};
pub use compute::{ScrubOutcome, StripeMath};
pub use frontend::{Direct, Frontend, Staged};
pub use geometry::{ColRange, Geometry, Level, StripeExtent, MAX_UNIT};
pub use health::{Health, HotReport, MemberState, RebuildReport, ScrubAt, ScrubFinding, ScrubReport};
pub use layout::{FixedLayout, Layout};
pub use merge::merge_contiguous;
pub use plan::{DevOp, DeviceIo, Dir, Method, OpCounts, Plan, Role, StripePlan};
pub use planner::{StripePlanner, WritePolicy};
pub use program::{write_pieces, Buf, Combine, Io, Mark, Page, Phase, Program, Ref};

/// Errors from planning and stripe math.  All are caused by input (the
/// request, the geometry, the member states), never by a bug we expect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("bad geometry: {0}")]
    Geometry(String),
    #[error("request at offset {offset} length {len} is not aligned to the {block}-byte logical block size")]
    Unaligned { offset: u64, len: u64, block: u64 },
    #[error("request at offset {offset} length {len} is beyond the array capacity of {capacity} bytes")]
    OutOfRange { offset: u64, len: u64, capacity: u64 },
    #[error("stripe {stripe}: members {failed:?} failed, more than the {tolerable} the layout tolerates")]
    TooManyFailures { stripe: u64, failed: Vec<usize>, tolerable: usize },
    #[error("{0}")]
    Invalid(String),
}

impl PlanError {
    /// The one request rule every array kind applies: a request is not
    /// empty, starts and ends on a `block` boundary and lies inside
    /// `capacity` bytes.
    pub fn check_request(offset: u64, len: u64, block: u64, capacity: u64) -> Result<(), PlanError> {
        if len == 0 {
            return Err(PlanError::Invalid("zero-length request".into()));
        }
        if block == 0 || offset % block != 0 || len % block != 0 {
            return Err(PlanError::Unaligned { offset, len, block });
        }
        match offset.checked_add(len) {
            Some(end) if end <= capacity => Ok(()),
            _ => Err(PlanError::OutOfRange { offset, len, capacity }),
        }
    }
}
