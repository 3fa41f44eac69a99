//! SLOW's segment table: which slow block holds which logical block, each
//! segment's live count, and the free segments.
//!
//! A segment is one full stripe of the slow array.  Demotion writes whole
//! segments only, into free ones; a segment becomes free again when its
//! last live block is rewritten elsewhere (overwritten on FAST, promoted,
//! or moved by compaction).  Compaction picks the sparsest used segments.
//!
//! Memory follows the segments in use, not the slow tier's size: the
//! segments from `fresh` on have never been used, freed ones wait in
//! `freed`, and only used segments have a live count.

use std::collections::{BTreeMap, BTreeSet};

/// The segment table.
#[derive(Clone, Debug)]
pub struct Segments {
    seg_blocks: u64,
    segments: u64,
    /// Segments from here on were never used.
    fresh: u64,
    /// Segments used once and free again.
    freed: BTreeSet<u64>,
    /// Used segment -> live blocks (> 0).
    live: BTreeMap<u64, u64>,
    /// (live blocks, segment) of every used segment, sparsest first.
    by_live: BTreeSet<(u64, u64)>,
    /// Slow block -> logical block.
    owner: BTreeMap<u64, u64>,
}

impl Segments {
    /// `segments` empty segments of `seg_blocks` blocks.
    pub fn new(segments: u64, seg_blocks: u64) -> Segments {
        Segments { seg_blocks, segments, fresh: 0, freed: BTreeSet::new(), live: BTreeMap::new(), by_live: BTreeSet::new(), owner: BTreeMap::new() }
    }

    /// Free segments.
    pub fn free_count(&self) -> u64 {
        self.segments - self.live.len() as u64
    }

    /// Segments with live blocks.
    pub fn used_count(&self) -> u64 {
        self.live.len() as u64
    }

    /// Live blocks in all segments.
    pub fn live_total(&self) -> u64 {
        self.owner.len() as u64
    }

    /// Take the lowest free segment (reserved until blocks are added: the
    /// caller adds them before taking another).
    pub fn take(&mut self) -> Option<u64> {
        let lowest_freed = self.freed.first().copied().filter(|&f| f < self.fresh);
        match lowest_freed {
            Some(f) => {
                self.freed.remove(&f);
                Some(f)
            }
            None => self.take_fresh(),
        }
    }

    fn take_fresh(&mut self) -> Option<u64> {
        while self.fresh < self.segments {
            let s = self.fresh;
            self.fresh += 1;
            if !self.live.contains_key(&s) {
                return Some(s);
            }
        }
        None
    }

    /// Slow block `sb` now holds logical block `lb`; an error if it holds
    /// one already or lies beyond the last segment.
    pub fn add(&mut self, sb: u64, lb: u64) -> Result<(), String> {
        let seg = sb / self.seg_blocks;
        if seg >= self.segments {
            return Err(format!("slow block {sb} beyond the last segment"));
        }
        if let Some(&other) = self.owner.get(&sb) {
            return Err(format!("slow block {sb} holds logical blocks {other} and {lb}"));
        }
        self.owner.insert(sb, lb);
        let n = self.live.entry(seg).or_insert(0);
        self.by_live.remove(&(*n, seg));
        *n += 1;
        self.by_live.insert((*n, seg));
        self.freed.remove(&seg);
        Ok(())
    }

    /// Slow block `sb` no longer holds live data; its segment is free when
    /// it was the last.
    pub fn remove(&mut self, sb: u64) {
        if self.owner.remove(&sb).is_none() {
            return;
        }
        let seg = sb / self.seg_blocks;
        let Some(n) = self.live.get_mut(&seg) else { return };
        self.by_live.remove(&(*n, seg));
        *n -= 1;
        if *n == 0 {
            self.live.remove(&seg);
            if seg < self.fresh {
                self.freed.insert(seg);
            }
        } else {
            self.by_live.insert((*n, seg));
        }
    }

    /// Compaction victims: the sparsest used segments (fewest live
    /// blocks first, lowest number on ties) whose live blocks together
    /// fit in `room` blocks; none with a full segment's worth.
    pub fn sparsest(&self, room: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut used = 0;
        for &(n, seg) in &self.by_live {
            if n >= self.seg_blocks || used + n > room {
                break;
            }
            used += n;
            out.push(seg);
        }
        out
    }

    /// The live (slow block, logical block) pairs of segment `seg`.
    pub fn blocks_of(&self, seg: u64) -> Vec<(u64, u64)> {
        let lo = seg * self.seg_blocks;
        self.owner.range(lo..lo + self.seg_blocks).map(|(&sb, &lb)| (sb, lb)).collect()
    }
}
