//! The comparison baseline: fixed extents, no chunk partitioning. A run
//! takes ⌈len/s⌉ clean extents of its section from offset 0; the unused
//! tail of the last one is never reused (the extent is sealed at once).

use super::pool::{check_request, Pool};
use super::{AllocRequest, Allocation, FastTierAllocator, Piece, SpaceStats, TierConfig, TierError};

/// Fixed-extent allocator: same sections and section choice as ReHypar.
#[derive(Debug, Clone)]
pub struct FixedExtent {
    pool: Pool,
}

impl FixedExtent {
    /// Build from a validated config.
    pub fn new(cfg: &TierConfig) -> Result<Self, TierError> {
        Ok(Self {
            pool: Pool::new(cfg)?,
        })
    }
}

impl FastTierAllocator for FixedExtent {
    fn allocate(&mut self, req: AllocRequest, now_ns: u64) -> Result<Allocation, TierError> {
        check_request(req)?;
        for sec in self.pool.section_order(req.blocks) {
            if let Some(pieces) = self.pool.take_whole(sec, req, now_ns) {
                for p in &pieces {
                    self.pool.seal(p.extent);
                }
                return Ok(Allocation { pieces });
            }
        }
        Err(TierError::Full { blocks: req.blocks })
    }

    fn free(&mut self, fast_block: u64, blocks: u64) -> Result<(), TierError> {
        for ext in self.pool.free(fast_block, blocks)? {
            self.pool.release(ext);
        }
        Ok(())
    }

    fn expire(&mut self, _now_ns: u64) {}

    fn stats(&self) -> SpaceStats {
        self.pool.stats()
    }

    fn extend(&mut self, after: u64, req: AllocRequest, _now_ns: u64) -> Result<Option<Piece>, TierError> {
        check_request(req)?;
        Ok(self.pool.successor(after, req).map(|(ext, off)| self.pool.write(ext, off, req)))
    }

    fn adopt(&mut self, fast_block: u64) -> Result<(), TierError> {
        self.pool.adopt(fast_block)
    }
}
