//! The one rule for member read errors that every kind of array corrects
//! (md's `max_read_errors`): which errors a rewrite can cure, and how many
//! corrections a member may have before the next one fails it.
//!
//! A fixed array rewrites the unit in place (`mosaic_array::correct`); a
//! DVS array, whose zones cannot be rewritten in place, writes the chunk
//! again elsewhere.  Both count here.

use std::io;
use std::time::{Duration, Instant};

use crate::Failure;

/// Corrected read errors a member may have (decayed, see [`HALF_LIFE`])
/// before the next one fails it: md's `max_read_errors` default.
pub const MAX_CORRECTED: u64 = 20;

/// The recent count of corrected read errors halves this often (md halves
/// its count every hour).
pub const HALF_LIFE: Duration = Duration::from_secs(3600);

/// One member's corrected read errors.
#[derive(Debug, Clone, Copy)]
pub struct Corrected {
    /// Since open (shown by `status`).
    pub total: u64,
    /// Decayed: what [`MAX_CORRECTED`] is held against.
    recent: u64,
    since: Instant,
}

impl Default for Corrected {
    fn default() -> Corrected {
        Corrected { total: 0, recent: 0, since: Instant::now() }
    }
}

impl Corrected {
    /// Count one more at `now`: the recent count after it.
    pub fn add(&mut self, now: Instant) -> u64 {
        let halvings = (now.saturating_duration_since(self.since).as_secs() / HALF_LIFE.as_secs()).min(63) as u32;
        if halvings > 0 {
            self.recent >>= halvings;
            self.since += HALF_LIFE * halvings;
        }
        self.total += 1;
        self.recent += 1;
        self.recent
    }

    /// Count one more now: whether the member has had too many and fails.
    pub fn one_too_many(&mut self) -> bool {
        self.add(Instant::now()) > MAX_CORRECTED
    }
}

/// Whether `e` says the member could not read these bytes (a medium
/// error: EIO from a disk, or from a remote's server), not that the
/// member cannot be reached or is too short: a remote that timed out or
/// lost its connection, a truncated file.  Those fail the member at once,
/// without a rewrite that would wait out the same timeout again.
pub fn unreadable_here(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    !matches!(e.kind(), TimedOut | BrokenPipe | ConnectionReset | ConnectionAborted | NotConnected | UnexpectedEof | Unsupported | PermissionDenied | NotFound | InvalidInput)
}

/// Whether a device still reads its label (its first bytes), `read_at`
/// being its read: one that does not is a dead drive, not a drive with a
/// few bad sectors, and fails rather than being corrected around.
pub fn reads_its_label(read_at: impl FnOnce(&mut [u8], u64) -> io::Result<()>) -> bool {
    let mut b = vec![0u8; 4096];
    read_at(&mut b, 0).is_ok()
}

impl Failure {
    /// A read the member could not do here, which rebuilding the bytes
    /// from the others and writing them again may cure
    /// ([`unreadable_here`]).
    pub fn medium_error(&self) -> bool {
        self.read.is_some() && unreadable_here(&self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count decays by half each [`HALF_LIFE`]; the total does not.
    #[test]
    fn the_recent_count_halves_each_half_life() {
        let t0 = Instant::now();
        let mut c = Corrected { total: 0, recent: 0, since: t0 };
        for i in 1..=8 {
            assert_eq!(c.add(t0), i);
        }
        assert_eq!(c.add(t0 + HALF_LIFE), 5, "8 halved to 4, then one more");
        assert_eq!(c.add(t0 + HALF_LIFE * 3 + Duration::from_secs(1)), 2, "5 quartered to 1, then one more");
        assert_eq!(c.total, 10);
        assert_eq!(c.add(t0 + HALF_LIFE * 500), 1);
    }

    #[test]
    fn a_timeout_or_a_short_file_is_not_a_medium_error() {
        let op = mosaic_core::DevOp { member: 1, offset: 0, len: 4096, role: mosaic_core::Role::Data, col: 0 };
        let f = |kind, read| Failure { member: 1, read, error: io::Error::new(kind, "x") };
        assert!(f(io::ErrorKind::Other, Some(op)).medium_error());
        assert!(!f(io::ErrorKind::TimedOut, Some(op)).medium_error());
        assert!(!f(io::ErrorKind::UnexpectedEof, Some(op)).medium_error());
        assert!(!f(io::ErrorKind::Other, None).medium_error(), "a write error is no read error");
    }
}
