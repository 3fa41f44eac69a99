//! The ReHypar allocator: Algorithm 1 (ALLOCATE and MAP) over per-level
//! free lists, with reuse chosen by the least d/t.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use super::geometry::MapOutcome;
use super::pool::{check_request, Phase, Pool};
use super::{
    AllocRequest, Allocation, FastTierAllocator, Piece, SpaceStats, TierConfig, TierError,
};

/// Free-list key: (partitioning level L, chunk index i) of the chunk
/// where an extent's free tail begins.
pub type ListKey = (u32, u32);

/// One free list: extents by decreasing free tail (head = largest).
type FreeList = BTreeSet<(Reverse<u64>, u32)>;

/// Where an open extent sits in the free lists.
#[derive(Debug, Clone, Copy)]
struct OpenEntry {
    key: ListKey,
    tail: u64,
    opened_ns: u64,
}

/// The ReHypar fast-tier allocator.
#[derive(Debug, Clone)]
pub struct ReHypar {
    pool: Pool,
    /// Per section: list (L, i) → extents by decreasing free tail.
    lists: Vec<BTreeMap<ListKey, FreeList>>,
    open: BTreeMap<u32, OpenEntry>,
    expiry_ns: u64,
}

impl ReHypar {
    /// Build from a config (validated here).
    pub fn new(cfg: &TierConfig) -> Result<Self, TierError> {
        let pool = Pool::new(cfg)?;
        let lists = vec![BTreeMap::new(); pool.sections.len()];
        Ok(Self {
            pool,
            lists,
            open: BTreeMap::new(),
            expiry_ns: cfg.expiry_ns,
        })
    }

    /// The free lists of a section: (L, i) → extents, head first.
    pub fn lists(&self, section: usize) -> Vec<(ListKey, Vec<u32>)> {
        self.lists.get(section).map_or(vec![], |m| {
            m.iter()
                .map(|(k, set)| (*k, set.iter().map(|&(_, e)| e).collect()))
                .collect()
        })
    }

    /// Minimum free tail for an extent to be put on a list: V/2
    /// (Section 3.3: "leaving the unused space of at least V/2").
    fn min_tail(&self, sec: usize) -> u64 {
        self.pool.sections[sec].geom.v() / 2
    }

    fn unlist(&mut self, ext: u32) {
        if let Some(o) = self.open.remove(&ext) {
            let sec = self.pool.section_of(ext);
            let list = self.lists[sec]
                .get_mut(&o.key)
                .expect("listed extent has a list");
            list.remove(&(Reverse(o.tail), ext));
            if list.is_empty() {
                self.lists[sec].remove(&o.key);
            }
        }
    }

    /// ALLOCATE steps 4/12–14: MAP from the run's last block, then put
    /// the extent on list (L, i) or seal it.
    fn after_write(&mut self, ext: u32, last_pos: u64) -> Result<(), TierError> {
        let sec = self.pool.section_of(ext);
        let geom = self.pool.sections[sec].geom;
        let opened_ns = match self.pool.extents[ext as usize].phase {
            Phase::Open { opened_ns } => opened_ns,
            _ => return Ok(()),
        };
        match geom.map(last_pos)? {
            MapOutcome::Next { level, idx, start } if geom.s() - start >= self.min_tail(sec) => {
                self.pool.set_next(ext, start);
                let tail = geom.s() - start;
                self.lists[sec]
                    .entry((level, idx))
                    .or_default()
                    .insert((Reverse(tail), ext));
                self.open.insert(
                    ext,
                    OpenEntry {
                        key: (level, idx),
                        tail,
                        opened_ns,
                    },
                );
            }
            MapOutcome::Next { start, .. } => {
                self.pool.set_next(ext, start);
                self.pool.seal(ext);
            }
            MapOutcome::Full => {
                self.pool.set_next(ext, geom.s());
                self.pool.seal(ext);
            }
        }
        Ok(())
    }

    /// ALLOCATE steps 9–10: among the first extent of each list of the
    /// section, those whose free tail holds the run; the least d/t wins
    /// (ties: lowest extent number).
    pub fn choose_reuse(&self, section: usize, req: AllocRequest, now_ns: u64) -> Option<u32> {
        let heads = self
            .lists
            .get(section)?
            .values()
            .filter_map(|set| set.first().map(|&(_, e)| e));
        heads
            .filter(|e| self.open[e].tail >= req.blocks)
            .min_by(|&a, &b| {
                let (da, ta) = self.d_t(a, req, now_ns);
                let (db, tb) = self.d_t(b, req, now_ns);
                (da as u128 * tb as u128)
                    .cmp(&(db as u128 * ta as u128))
                    .then(a.cmp(&b))
            })
    }

    /// d: logical distance (blocks) from the run to the nearest run
    /// placed in the extent (0 if they touch or overlap); t: time the
    /// extent has been open, at least 1 ns.
    pub fn d_t(&self, ext: u32, req: AllocRequest, now_ns: u64) -> (u64, u64) {
        let runs = &self.pool.extents[ext as usize].runs;
        let d = runs
            .iter()
            .map(|&(lba, n)| gap(req.lba, req.blocks, lba, n))
            .min()
            .unwrap_or(u64::MAX);
        let t = now_ns.saturating_sub(self.open[&ext].opened_ns).max(1);
        (d, t)
    }

    fn try_section(
        &mut self,
        sec: usize,
        req: AllocRequest,
        now_ns: u64,
    ) -> Result<Option<Vec<Piece>>, TierError> {
        let s = self.pool.sections[sec].geom.s();
        if req.blocks < s {
            if let Some(ext) = self.choose_reuse(sec, req, now_ns) {
                self.unlist(ext);
                let off = self.pool.extents[ext as usize].next;
                let piece = self.pool.write(ext, off, req);
                self.after_write(ext, off + req.blocks - 1)?;
                return Ok(Some(vec![piece]));
            }
        }
        let Some(pieces) = self.pool.take_whole(sec, req, now_ns) else {
            return Ok(None);
        };
        let last = pieces[pieces.len() - 1];
        self.after_write(last.extent, last.offset + last.blocks - 1)?;
        Ok(Some(pieces))
    }
}

/// Distance between logical ranges [a, a+n) and [b, b+m).
fn gap(a: u64, n: u64, b: u64, m: u64) -> u64 {
    a.saturating_sub(b + m).max(b.saturating_sub(a + n))
}

impl FastTierAllocator for ReHypar {
    fn allocate(&mut self, req: AllocRequest, now_ns: u64) -> Result<Allocation, TierError> {
        check_request(req)?;
        self.expire(now_ns);
        for sec in self.pool.section_order(req.blocks) {
            if let Some(pieces) = self.try_section(sec, req, now_ns)? {
                return Ok(Allocation { pieces });
            }
        }
        Err(TierError::Full { blocks: req.blocks })
    }

    fn free(&mut self, fast_block: u64, blocks: u64) -> Result<(), TierError> {
        for ext in self.pool.free(fast_block, blocks)? {
            self.unlist(ext);
            self.pool.release(ext);
        }
        Ok(())
    }

    fn expire(&mut self, now_ns: u64) {
        let expired: Vec<u32> = self
            .open
            .iter()
            .filter(|(_, o)| now_ns.saturating_sub(o.opened_ns) >= self.expiry_ns)
            .map(|(&e, _)| e)
            .collect();
        for ext in expired {
            self.unlist(ext);
            self.pool.seal(ext);
        }
    }

    fn stats(&self) -> SpaceStats {
        self.pool.stats()
    }

    fn extend(&mut self, after: u64, req: AllocRequest, now_ns: u64) -> Result<Option<Piece>, TierError> {
        check_request(req)?;
        self.expire(now_ns);
        let Some((ext, off)) = self.pool.successor(after, req) else { return Ok(None) };
        let tail_start = self.pool.extents[ext as usize].next;
        let piece = self.pool.write(ext, off, req);
        if off + req.blocks > tail_start && self.open.contains_key(&ext) {
            // The run grew into the listed free tail: MAP again from its
            // new last block, as ALLOCATE does after a write.
            self.unlist(ext);
            self.after_write(ext, off + req.blocks - 1)?;
        }
        Ok(Some(piece))
    }

    fn adopt(&mut self, fast_block: u64) -> Result<(), TierError> {
        self.pool.adopt(fast_block)
    }
}
