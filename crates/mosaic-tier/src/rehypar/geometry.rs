//! Chunk geometry of one extent: the paper's equations (1)–(5) and MAP.
//!
//! ```text
//! Level-0 partition of an extent of s = 256 blocks, V = 32 (paper Fig. 1):
//!
//!   block 0 1 2   4     8    16      32        64              128                256
//!         |H|0|1 |  2  |  3  |   4   |    5    |       6       |        7         |
//!          1 1 2    4     8     16      32 >=V      64 >=V          128 >=V
//!
//! Recursive split of c0_7 (start 128, 128 blocks) at level 1, eq. (1)-(3):
//!
//!   128 129 130 132  136  144   160        192                  256
//!    |H |0  |1  | 2  | 3  |  4  |    5     |          6          |
//!                               32 >=V: split    64 >=V: split
//!   c1_5 -> level 2 at 160: |H|0|1|2|3|4|        (16 < V, stop)
//!   c1_6 -> level 2 at 192: |H|0|1|2|3|4|  5  |  (c2_5 = 32 >= V, split
//!                                                  again at 224 to level 3)
//! ```
//!
//! Equation (3) is Fig. 1's instance of (1)–(2), reproduced by the test
//! `eq3_recursive_split_of_fig1`:
//!
//! ```text
//! φ(128, c0^7) → {c1H, c1^0, c1^1, ..., c1^6},
//! φ(160, c1^5) → {c2H, c2^0, c2^1, ..., c2^4},
//! φ(192, c1^6) → {c2H, c2^0, c2^1, ..., c2^5},
//! φ(224, c2^5) → {c3H, c3^0, c3^1, ..., c3^4}.          (3)
//! ```
//!
//! Equation (5) is Fig. 2's instance of split (4) for a file on blocks
//! 0..=107 of an extent of 128 blocks, V = 32 (test
//! `eq4_eq5_split_and_map_of_fig2`, and [`ExtentGeometry::path`]):
//!
//! ```text
//! L = 0: φ(0, E) = {c0H, c0^0, ..., c0^6}
//!        split(c0H, 107) = c0^6,  2^6 ≤ 107 − start(c0H) < 2^7
//! L = 1: φ(64, c0^6) = {c1H, c1^0, ..., c1^5}
//!        split(c0^6, 107) = c1^5, 2^5 ≤ 107 − start(c0^6) < 2^6
//! L = 2: φ(96, c1^5) = {c2H, c2^0, ..., c2^4}
//!        split(c1^5, 107) = c2^3, 2^3 ≤ 107 − start(c1^5) < 2^4   (5)
//!
//!   64        96      104     112      128
//!   |  c1^0..c1^4 |c2H..c2^2| c2^3 |  c2^4  |
//!                          ^ pos 107: |c2^3| = 8 < V, so the next
//!                            file starts at c2^4 = block 112 (MAP)
//! ```
//!
//! A chunk index is `H` (the one-block head, the paper's i = H = -1) or
//! `k >= 0` (a chunk of 2^k blocks starting 2^k after the head).

use super::TierError;

/// Index of a chunk inside one partition: the head or the 2^k chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChunkIdx {
    /// The one-block head chunk c^H (the paper's i = H = -1).
    Head,
    /// The chunk c^k of 2^k blocks.
    Pow(u32),
}

impl ChunkIdx {
    /// The index that follows this one (H+1 = 0, k+1).
    pub fn next(self) -> u32 {
        match self {
            ChunkIdx::Head => 0,
            ChunkIdx::Pow(k) => k + 1,
        }
    }
}

/// One chunk c^i_L: its level, index, first block (extent offset) and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Partitioning level L (0 = the extent itself is partitioned).
    pub level: u32,
    /// Chunk index i.
    pub idx: ChunkIdx,
    /// start(c^i_L), in blocks from the extent start.
    pub start: u64,
    /// |c^i_L|, in blocks.
    pub len: u64,
}

/// Where MAP says the next run in an extent begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapOutcome {
    /// The next allocation starts at chunk `idx` of `level`, block `start`.
    Next {
        /// Partitioning level of the chunk.
        level: u32,
        /// Index of the chunk at that level.
        idx: u32,
        /// First block (extent offset) of that chunk.
        start: u64,
    },
    /// No chunk is left after `pos`: the extent is full.
    Full,
}

/// Geometry of an extent of s = 2^n blocks with threshold V = 2^v.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtentGeometry {
    log2_s: u32,
    log2_v: u32,
}

fn floor_log2(x: u64) -> u32 {
    63 - x.leading_zeros()
}

impl ExtentGeometry {
    /// Geometry for extents of `s` blocks and threshold `v` blocks.
    /// Definition 1 requires s = 2^n with n > 1; V must be a power of two
    /// of at least 2 (V = 1 would split one-block heads forever).
    pub fn new(s: u64, v: u64) -> Result<Self, TierError> {
        if !s.is_power_of_two() || s < 4 {
            return Err(TierError::Config(format!(
                "extent of {s} blocks: need 2^n blocks, n > 1"
            )));
        }
        if !v.is_power_of_two() || v < 2 {
            return Err(TierError::Config(format!(
                "threshold V = {v}: need a power of two >= 2"
            )));
        }
        Ok(Self {
            log2_s: floor_log2(s),
            log2_v: floor_log2(v),
        })
    }

    /// Extent size s in blocks.
    pub fn s(&self) -> u64 {
        1 << self.log2_s
    }

    /// Threshold V in blocks.
    pub fn v(&self) -> u64 {
        1 << self.log2_v
    }

    /// Equations (1) and (2) at level 0:
    /// `φ(b, E) = {c0H, c00, c01, ..., c0^((log2 s)-1)}` if L = 0, with
    /// `start(c0H) = 0, |c0H| = 1` and `start(c0j) = 2^j, |c0j| = 2^j if (j > H)`.
    pub fn level0(&self) -> Vec<Chunk> {
        partition(0, 0, self.log2_s)
    }

    /// Equation (1) at L > 0 with (2):
    /// `φ(start(cLi), cLi) = {cL+1H, cL+10, ..., cL+1^(i-1)}, if i ≥ log2 V`,
    /// `start(cL+1H) = start(cLi)`, `start(cL+1k) = start(cL+1H) + 2^k`,
    /// `|cL+1H| = 1`, `|cL+1k| = 2^k`. `None` when the chunk is below V
    /// (or is a head) and so is not partitioned.
    pub fn phi(&self, c: &Chunk) -> Option<Vec<Chunk>> {
        match c.idx {
            ChunkIdx::Pow(i) if i >= self.log2_v => Some(partition(c.level + 1, c.start, i)),
            _ => None,
        }
    }

    /// Equation (4), at level 0 (the paper's `split(c0H, pos)` in (5),
    /// where the extent E itself is split): the level-0 chunk holding `pos`.
    pub fn split_extent(&self, pos: u64) -> Result<Chunk, TierError> {
        self.check_pos(pos)?;
        Ok(child_at(0, 0, pos))
    }

    /// Equation (4): `split(cLi, pos) = cL+1k, where 2^k ≤ pos − start(cLi) < 2^(k+1)`
    /// (pos − start = 0 gives the head). Defined only for i ≥ log2 V and
    /// pos inside the chunk.
    pub fn split(&self, c: &Chunk, pos: u64) -> Result<Chunk, TierError> {
        if self.phi(c).is_none() {
            return Err(TierError::Geometry(format!(
                "chunk {c:?} is below V = {}",
                self.v()
            )));
        }
        if pos < c.start || pos - c.start >= c.len {
            return Err(TierError::Geometry(format!(
                "pos {pos} outside chunk {c:?}"
            )));
        }
        Ok(child_at(c.level + 1, c.start, pos))
    }

    /// The chain of split results for `pos` (equation (5) shape): the
    /// level-0 chunk, then each split while the chunk is ≥ V; the last
    /// element is the chunk smaller than V (or a head) that holds `pos`.
    pub fn path(&self, pos: u64) -> Result<Vec<Chunk>, TierError> {
        let mut out = vec![self.split_extent(pos)?];
        while let Some(c) = out.last().copied().filter(|c| self.phi(c).is_some()) {
            out.push(self.split(&c, pos)?);
        }
        Ok(out)
    }

    /// Algorithm 1, MAP: given the last block `pos` of a run in the
    /// extent, the chunk where the next run begins. When the next index
    /// runs past its parent's children the result is carried up to the
    /// parent's next sibling (same block, canonical label).
    pub fn map(&self, pos: u64) -> Result<MapOutcome, TierError> {
        let path = self.path(pos)?;
        let last = path[path.len() - 1];
        let next_start = last.start + last.len;
        // Walk up while the index overflows the children of the parent.
        let mut level = last.level;
        let mut idx = last.idx.next();
        loop {
            let siblings = if level == 0 {
                self.log2_s
            } else {
                pow_of(&path[level as usize - 1])
            };
            if idx < siblings {
                return Ok(MapOutcome::Next {
                    level,
                    idx,
                    start: next_start,
                });
            }
            if level == 0 {
                return Ok(MapOutcome::Full);
            }
            level -= 1;
            idx = pow_of(&path[level as usize]) + 1;
        }
    }

    /// Deepest level at which any chunk is partitioned (Table 1's
    /// "0 ≤ L ≤ …"), or `None` if no chunk reaches V.
    pub fn max_split_level(&self) -> Option<u32> {
        // The largest chunk at level L is 2^(log2 s - 1 - L).
        (self.log2_s - 1).checked_sub(self.log2_v)
    }

    fn check_pos(&self, pos: u64) -> Result<(), TierError> {
        if pos >= self.s() {
            return Err(TierError::Geometry(format!(
                "pos {pos} outside extent of {}",
                self.s()
            )));
        }
        Ok(())
    }
}

fn pow_of(c: &Chunk) -> u32 {
    match c.idx {
        ChunkIdx::Pow(k) => k,
        ChunkIdx::Head => 0,
    }
}

/// Head at `base` plus chunks 2^k at base + 2^k, k < count.
fn partition(level: u32, base: u64, count: u32) -> Vec<Chunk> {
    let head = Chunk {
        level,
        idx: ChunkIdx::Head,
        start: base,
        len: 1,
    };
    let pows = (0..count).map(|k| Chunk {
        level,
        idx: ChunkIdx::Pow(k),
        start: base + (1 << k),
        len: 1 << k,
    });
    std::iter::once(head).chain(pows).collect()
}

/// The chunk of the partition at `base` (level `level`) holding `pos`.
fn child_at(level: u32, base: u64, pos: u64) -> Chunk {
    let off = pos - base;
    if off == 0 {
        return Chunk {
            level,
            idx: ChunkIdx::Head,
            start: base,
            len: 1,
        };
    }
    let k = floor_log2(off);
    Chunk {
        level,
        idx: ChunkIdx::Pow(k),
        start: base + (1 << k),
        len: 1 << k,
    }
}
