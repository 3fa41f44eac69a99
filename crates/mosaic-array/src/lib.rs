//! mosaic-array: arrays on real members.
//!
//! * [`superblock`]: the on-disk format;
//! * [`spec`]: naming an array (`-a DIR` or `-a PATH,PATH,...`);
//! * `assemble`: which device is which member, stale and bad members,
//!   path hints (a copy of an array directory is its own array);
//! * [`array`]: the real executor: runs a layout's plans against member
//!   devices, marks members failed on I/O errors, and retries degraded;
//! * [`cached`]: the small-write caches in front of an array;
//! * [`journal`]: the write-ahead journal that closes the write hole;
//! * [`bitmap`]: without a journal, the write-intent bitmap that says
//!   what a crash leaves to resync;
//! * [`nested`]: check drive arrays that are arrays of their own;
//! * [`maint`]: replace, rebuild with checkpoints, and scrub;
//! * `hot`: hot replace, a working member copied onto a new drive.

pub mod array;
mod assemble;
pub mod correct;
pub mod bitmap;
pub mod cached;
pub mod domain;
pub mod grow;
pub mod grow_size;
mod hot;
pub mod journal;
pub mod lost;
pub mod maint;
pub mod nested;
pub mod spare;
pub mod spec;
pub mod superblock;
pub mod takeover;
mod write_mostly;

pub use array::{now_secs, set_start_dirty_degraded, start_dirty_degraded, Array, ArrayInfo, BitmapStatus, CreateOptions, JournalReplaced, MemberInfo, EPOCH};
pub use cached::CacheVolume;
pub use grow_size::GrowSizeReport;
pub use journal::{Journal, LostUnit, ReplayReport};
pub use maint::{RebuildReport, ScrubReport};
pub use superblock::{ArrayState, LostRange, ScrubRecord, Superblock, DATA_OFFSET};

/// Errors from array operations.  Each message names what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum ArrayError {
    /// The array specification or command input is wrong.
    #[error("{0}")]
    Usage(String),
    /// A member cannot be used (no/corrupt superblock, wrong size, foreign).
    #[error("{0}")]
    BadMember(String),
    /// Superblock encoding problems.
    #[error("{0}")]
    Format(String),
    /// Device I/O failed.
    #[error("{0}")]
    Io(String),
    /// Planning failed (geometry, alignment, range, too many failures).
    #[error(transparent)]
    Plan(#[from] mosaic_core::PlanError),
}

impl From<mosaic_exec::ExecError> for ArrayError {
    fn from(e: mosaic_exec::ExecError) -> ArrayError {
        match e {
            mosaic_exec::ExecError::Program(m) => ArrayError::Plan(mosaic_core::PlanError::Invalid(m)),
            e => ArrayError::Io(e.to_string()),
        }
    }
}
