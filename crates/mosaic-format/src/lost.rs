//! Lost data: logical byte ranges no member can give back any more (md's
//! bad-block log, ZFS's permanent errors), as every kind of array records
//! them: a read that touches one fails (never wrong bytes), a write that
//! covers whole blocks of one makes them known again.  A fixed array keeps
//! them in its superblocks, a DVS array in its labels' policy.

use serde::{Deserialize, Serialize};

/// The most lost ranges a superblock or label keeps; past it the closest
/// neighbours merge ([`with`]: a range only grows).
pub const MAX_LOST: usize = 256;

/// A logical byte range whose data is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostRange {
    pub offset: u64,
    pub len: u64,
}

impl LostRange {
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// Lost ranges must be non-empty, sorted, apart and inside `capacity`.
pub fn check(lost: &[LostRange], capacity: u64) -> Result<(), String> {
    if lost.len() > MAX_LOST {
        return Err(format!("{} lost ranges, more than {MAX_LOST}", lost.len()));
    }
    let mut at = 0;
    for (i, r) in lost.iter().enumerate() {
        let end = r.offset.checked_add(r.len).filter(|&e| r.len > 0 && e <= capacity && (i == 0 || r.offset > at));
        at = end.ok_or_else(|| format!("lost range {}+{} is empty, out of order or past the capacity {capacity}", r.offset, r.len))?;
    }
    Ok(())
}

/// `lost` with `add` added: merged with what it touches, and past
/// [`MAX_LOST`] the closest neighbours merged (a range only grows).
pub fn with(lost: &[LostRange], add: &[LostRange]) -> Vec<LostRange> {
    let mut all: Vec<LostRange> = lost.iter().chain(add).copied().filter(|r| r.len > 0).collect();
    all.sort_unstable_by_key(|r| r.offset);
    let mut out: Vec<LostRange> = Vec::with_capacity(all.len());
    for r in all {
        match out.last_mut() {
            Some(l) if r.offset <= l.end() => l.len = l.len.max(r.end() - l.offset),
            _ => out.push(r),
        }
    }
    while out.len() > MAX_LOST {
        let i = (1..out.len()).min_by_key(|&i| out[i].offset - out[i - 1].end()).unwrap_or(1);
        out[i - 1].len = out[i].end() - out[i - 1].offset;
        out.remove(i);
    }
    out
}

/// `lost` without the whole `grain`s (the array's blocks) of `lo..hi`
/// (bytes written whole again are known): a range keeps what the write
/// does not cover.
pub fn without(lost: &[LostRange], lo: u64, hi: u64, grain: u64) -> Vec<LostRange> {
    let (lo, hi) = (lo.div_ceil(grain) * grain, hi / grain * grain);
    let mut out = Vec::with_capacity(lost.len() + 1);
    for r in lost {
        if hi <= lo || r.end() <= lo || r.offset >= hi {
            out.push(*r);
            continue;
        }
        if r.offset < lo {
            out.push(LostRange { offset: r.offset, len: lo - r.offset });
        }
        if r.end() > hi {
            out.push(LostRange { offset: hi, len: r.end() - hi });
        }
    }
    out
}

/// The first range of `lost` that `offset..offset + len` touches.
pub fn touched(lost: &[LostRange], offset: u64, len: u64) -> Option<LostRange> {
    let end = offset.saturating_add(len);
    lost.iter().find(|r| r.offset < end && r.end() > offset).copied()
}
