//! The one scrub record: what the last scrub an array was asked for
//! found, kept in its labels (a fixed array's superblock, a DVS array's
//! policy blob) as ZFS keeps its scan's result, so `status` and `info`
//! say it and a server's `--scrub-every` knows when the next is due.

use serde::{Deserialize, Serialize};

/// What a scrub found, and when it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubRecord {
    /// When it ended, seconds since the Unix epoch.
    pub end: u64,
    pub millis: u64,
    /// Stripes checked, and of them mismatched and not verifiable.
    pub stripes: u64,
    pub mismatched: u64,
    pub unverified: u64,
    pub repaired: bool,
    /// Stopped before its end (cancelled, or a server stopping).
    pub interrupted: bool,
}

impl ScrubRecord {
    /// The record of the most digits: what a label must leave room for.
    pub const WIDEST: ScrubRecord = ScrubRecord { end: u64::MAX, millis: u64::MAX, stripes: u64::MAX, mismatched: u64::MAX, unverified: u64::MAX, repaired: false, interrupted: false };

    /// The record as `status` and `info` say it, `now` seconds since the
    /// Unix epoch: what it found, how long ago it ended.
    pub fn line(&self, now: u64) -> String {
        let ago = match now.saturating_sub(self.end) {
            s if s < 120 => format!("{s} s ago"),
            s if s < 7200 => format!("{} min ago", s / 60),
            s if s < 172_800 => format!("{} h ago", s / 3600),
            s => format!("{} days ago", s / 86_400),
        };
        format!(
            "{} stripes in {:.1} s, {} mismatched{}{}{}, ended {ago}",
            self.stripes,
            self.millis as f64 / 1000.0,
            self.mismatched,
            if self.repaired && self.mismatched > 0 { " (repaired)" } else { "" },
            if self.unverified > 0 { format!(", {} not verified", self.unverified) } else { String::new() },
            if self.interrupted { ", stopped before its end" } else { "" },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_says_what_it_found_and_how_long_ago() {
        let r = ScrubRecord { end: 1_000_000, millis: 2_150, stripes: 1792, mismatched: 2, unverified: 3, repaired: true, interrupted: true };
        assert_eq!(r.line(1_000_000 + 3 * 3600 + 5), "1792 stripes in 2.1 s, 2 mismatched (repaired), 3 not verified, stopped before its end, ended 3 h ago");
        let clean = ScrubRecord { mismatched: 0, unverified: 0, interrupted: false, ..r };
        assert_eq!(clean.line(1_000_090), "1792 stripes in 2.1 s, 0 mismatched, ended 90 s ago");
        assert_eq!(clean.line(1_000_000 + 3 * 86_400), "1792 stripes in 2.1 s, 0 mismatched, ended 3 days ago");
        // A clock behind the record, or a record of any digits, says something.
        assert!(ScrubRecord::WIDEST.line(0).ends_with("ended 0 s ago"));
    }

    #[test]
    fn the_widest_record_encodes_longest() {
        let widest = serde_json::to_string(&ScrubRecord::WIDEST).unwrap().len();
        let r = ScrubRecord { end: 1_800_000_000, millis: 10, stripes: 7, mismatched: 0, unverified: 0, repaired: true, interrupted: true };
        assert!(serde_json::to_string(&r).unwrap().len() <= widest);
    }
}
