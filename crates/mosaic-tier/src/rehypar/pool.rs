//! The extent pool shared by both allocators: section layout, clean
//! extents, per-extent liveness and the space accounting.

use std::collections::BTreeSet;

use super::geometry::ExtentGeometry;
use super::{AllocRequest, Piece, SpaceStats, TierConfig, TierError};

/// One section laid out in the flat fast-tier block space.
#[derive(Debug, Clone)]
pub(crate) struct Section {
    pub geom: ExtentGeometry,
    pub first_extent: u32,
    pub extents: u32,
    pub base_block: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Clean,
    Open { opened_ns: u64 },
    Sealed,
}

#[derive(Debug, Clone)]
pub(crate) struct Extent {
    pub phase: Phase,
    /// Next writable offset (high-water mark).
    pub next: u64,
    /// Blocks written in this use of the extent.
    pub written: u64,
    pub live_bits: Vec<u64>,
    pub live: u64,
    /// Logical ranges (lba, blocks) of runs placed here, for d.
    pub runs: Vec<(u64, u64)>,
    /// One past the highest offset written in this use of the extent:
    /// offsets from here on have never been written.
    pub end: u64,
}

impl Extent {
    fn clean(s: u64) -> Self {
        let words = s.div_ceil(64) as usize;
        Self {
            phase: Phase::Clean,
            next: 0,
            written: 0,
            live_bits: vec![0; words],
            live: 0,
            runs: Vec::new(),
            end: 0,
        }
    }
    fn is_live(&self, off: u64) -> bool {
        self.live_bits[(off / 64) as usize] >> (off % 64) & 1 == 1
    }
    fn set(&mut self, off: u64, v: bool) {
        let w = &mut self.live_bits[(off / 64) as usize];
        if v {
            *w |= 1 << (off % 64)
        } else {
            *w &= !(1 << (off % 64))
        }
    }
}

/// Sections, extents and the clean pool.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    pub sections: Vec<Section>,
    pub extents: Vec<Extent>,
    clean: Vec<BTreeSet<u32>>,
    ext_section: Vec<usize>,
}

impl Pool {
    pub fn new(cfg: &TierConfig) -> Result<Self, TierError> {
        cfg.validate()?;
        let (mut sections, mut extents, mut clean, mut ext_section) =
            (vec![], vec![], vec![], vec![]);
        let mut base = 0u64;
        for (i, sc) in cfg.sections.iter().enumerate() {
            let s = sc.extent_bytes / cfg.block_bytes;
            let n = (sc.capacity_bytes / sc.extent_bytes) as u32;
            let first = extents.len() as u32;
            sections.push(Section {
                geom: ExtentGeometry::new(s, cfg.threshold_v)?,
                first_extent: first,
                extents: n,
                base_block: base,
            });
            extents.extend((0..n).map(|_| Extent::clean(s)));
            ext_section.extend((0..n).map(|_| i));
            clean.push((first..first + n).collect());
            base += sc.capacity_bytes / cfg.block_bytes;
        }
        Ok(Self {
            sections,
            extents,
            clean,
            ext_section,
        })
    }

    pub fn section_of(&self, ext: u32) -> usize {
        self.ext_section[ext as usize]
    }

    pub fn s_of(&self, ext: u32) -> u64 {
        self.sections[self.section_of(ext)].geom.s()
    }

    /// Sections to try for a run of `len` blocks: the smallest extent
    /// that holds it (else the largest), then larger ones ascending, then
    /// smaller ones descending.
    pub fn section_order(&self, len: u64) -> Vec<usize> {
        let mut by_size: Vec<usize> = (0..self.sections.len()).collect();
        by_size.sort_by_key(|&i| self.sections[i].geom.s());
        let pref = by_size
            .iter()
            .position(|&i| self.sections[i].geom.s() >= len)
            .unwrap_or(by_size.len() - 1);
        let mut order = by_size[pref..].to_vec();
        order.extend(by_size[..pref].iter().rev());
        order
    }

    pub fn clean_count(&self, sec: usize) -> usize {
        self.clean[sec].len()
    }

    /// Take the lowest-numbered clean extent of a section, opening it.
    pub fn take_clean(&mut self, sec: usize, now_ns: u64) -> Option<u32> {
        let ext = self.clean[sec].pop_first()?;
        self.extents[ext as usize].phase = Phase::Open { opened_ns: now_ns };
        Some(ext)
    }

    /// Write `req.blocks` at `off` of `ext` (caller checked the fit).
    pub fn write(&mut self, ext: u32, off: u64, req: AllocRequest) -> Piece {
        let sec = self.section_of(ext);
        let s = self.sections[sec].geom.s();
        let e = &mut self.extents[ext as usize];
        for b in off..off + req.blocks {
            e.set(b, true);
        }
        e.live += req.blocks;
        e.written += req.blocks;
        e.next = e.next.max(off + req.blocks);
        e.end = e.end.max(off + req.blocks);
        e.runs.push((req.lba, req.blocks));
        let base =
            self.sections[sec].base_block + (ext - self.sections[sec].first_extent) as u64 * s;
        Piece {
            section: sec,
            extent: ext,
            offset: off,
            blocks: req.blocks,
            fast_block: base + off,
        }
    }

    pub fn seal(&mut self, ext: u32) {
        self.extents[ext as usize].phase = Phase::Sealed;
    }

    pub fn set_next(&mut self, ext: u32, next: u64) {
        self.extents[ext as usize].next = next;
    }

    /// Map a flat block to (extent, offset).
    pub fn locate(&self, fast_block: u64) -> Result<(u32, u64), TierError> {
        for sec in &self.sections {
            let len = sec.extents as u64 * sec.geom.s();
            if fast_block >= sec.base_block && fast_block - sec.base_block < len {
                let rel = fast_block - sec.base_block;
                return Ok((
                    sec.first_extent + (rel / sec.geom.s()) as u32,
                    rel % sec.geom.s(),
                ));
            }
        }
        Err(TierError::Request(format!(
            "fast block {fast_block} outside the tier"
        )))
    }

    /// Kill `blocks` live blocks from `fast_block`; returns the extents
    /// left with no live data (still to be released by the caller).
    pub fn free(&mut self, fast_block: u64, blocks: u64) -> Result<Vec<u32>, TierError> {
        if blocks == 0 {
            return Err(TierError::Request("free of 0 blocks".into()));
        }
        let end = fast_block
            .checked_add(blocks)
            .ok_or_else(|| TierError::Request("free range overflows".into()))?;
        let mut targets = Vec::with_capacity(blocks as usize);
        for b in fast_block..end {
            let (ext, off) = self.locate(b)?;
            if !self.extents[ext as usize].is_live(off) {
                return Err(TierError::NotLive(b));
            }
            targets.push((ext, off));
        }
        let mut emptied = Vec::new();
        for (ext, off) in targets {
            let e = &mut self.extents[ext as usize];
            e.set(off, false);
            e.live -= 1;
            if e.live == 0 {
                emptied.push(ext);
            }
        }
        Ok(emptied)
    }

    /// Return an extent with no live data to the clean pool.
    pub fn release(&mut self, ext: u32) {
        let s = self.s_of(ext);
        let sec = self.section_of(ext);
        self.extents[ext as usize] = Extent::clean(s);
        self.clean[sec].insert(ext);
    }

    pub fn stats(&self) -> SpaceStats {
        let mut st = SpaceStats::default();
        for (i, e) in self.extents.iter().enumerate() {
            let s = self.s_of(i as u32);
            st.total += s;
            if e.phase == Phase::Clean {
                continue;
            }
            st.allocated += s;
            st.live += e.live;
            st.dead += e.written - e.live;
            let tail = if matches!(e.phase, Phase::Open { .. }) {
                s - e.next
            } else {
                0
            };
            st.open_tail += tail;
            st.skipped += s - e.written - tail;
        }
        st
    }
}

impl Pool {
    /// Where `req.blocks` blocks can go right after flat block `after`:
    /// the same extent (in use, not clean), `after` its highest written
    /// block, and the extent long enough.  `None` otherwise.
    pub fn successor(&self, after: u64, req: AllocRequest) -> Option<(u32, u64)> {
        let (ext, off) = self.locate(after).ok()?;
        let e = &self.extents[ext as usize];
        let fits = off.checked_add(1 + req.blocks).is_some_and(|end| end <= self.s_of(ext));
        (e.phase != Phase::Clean && e.end == off + 1 && fits).then_some((ext, off + 1))
    }

    /// Recovery: flat block `fast_block` holds live data.  Its extent is
    /// taken from the clean pool and sealed (what else was written there
    /// before the crash is unknown, so nothing but its never-written end
    /// is reused); a block already live is an error.
    pub fn adopt(&mut self, fast_block: u64) -> Result<(), TierError> {
        let (ext, off) = self.locate(fast_block)?;
        let sec = self.section_of(ext);
        let s = self.s_of(ext);
        let e = &mut self.extents[ext as usize];
        if e.is_live(off) {
            return Err(TierError::Request(format!("fast block {fast_block} adopted twice")));
        }
        if e.phase == Phase::Clean {
            self.clean[sec].remove(&ext);
            e.phase = Phase::Sealed;
            e.next = s;
        }
        e.set(off, true);
        e.live += 1;
        e.written += 1;
        e.end = e.end.max(off + 1);
        Ok(())
    }
}

/// Validate a request.
pub(crate) fn check_request(req: AllocRequest) -> Result<(), TierError> {
    if req.blocks == 0 {
        return Err(TierError::Request("run of 0 blocks".into()));
    }
    req.lba
        .checked_add(req.blocks)
        .ok_or_else(|| TierError::Request("lba + blocks overflows".into()))?;
    Ok(())
}

impl Pool {
    /// ALLOCATE steps 1–2: give the run ⌈len/s⌉ clean extents of `sec`,
    /// filled from offset 0. Every piece but the last fills its extent
    /// (sealed here); the caller decides what happens to the last one.
    pub fn take_whole(&mut self, sec: usize, req: AllocRequest, now_ns: u64) -> Option<Vec<Piece>> {
        let s = self.sections[sec].geom.s();
        let m = req.blocks.div_ceil(s);
        if (self.clean_count(sec) as u64) < m {
            return None;
        }
        let mut pieces = Vec::with_capacity(m as usize);
        let mut done = 0;
        while done < req.blocks {
            let n = (req.blocks - done).min(s);
            let ext = self.take_clean(sec, now_ns)?;
            pieces.push(self.write(
                ext,
                0,
                AllocRequest {
                    lba: req.lba + done,
                    blocks: n,
                },
            ));
            if n == s {
                self.seal(ext);
            }
            done += n;
        }
        Some(pieces)
    }
}
