//! DVS geometry and addressing: logical bytes to (LSN, LCN), physical chunk
//! slots to member byte offsets.
//!
//! Every member is a host-managed zoned drive.  The first `conventional`
//! zones hold metadata (real arrays only); each sequential zone is one
//! *segment*.  Segment number `p` of every member together form one
//! physical Segment-based Stripe Group; the Global Translation Table maps a
//! logical SSG (LSN) to a physical one, and `spare` physical SSGs stay free
//! so garbage collection can compact an SSG into a fresh segment.
//!
//! ```text
//!             member 0        member 1        member 2        member 3      (n = N + k = 4, k = 1)
//!   zone 0  [ meta (conv) ] [ meta (conv) ] [ meta (conv) ] [ meta (conv) ]
//!   zone 1  [ seg p=0     ] [ seg p=0     ] [ seg p=0     ] [ seg p=0     ]  <- physical SSG 0
//!           | c0 c1 c2 .. | | c0 c1 .. wp | | c0 c1 c2 .. | | c0 .. wp    |     each member appends
//!   zone 2  [ seg p=1     ] [ seg p=1     ] [ seg p=1     ] [ seg p=1     ]  <- physical SSG 1
//!     ...
//!           chunk slot (member m, p, idx) = byte (conventional + p) * zone_size + idx * S_chk
//! ```
//!
//! Logical addressing follows the paper's equations with the *logical*
//! segment size: an SSG exposes `L = floor(seg_chunks * N * (100 - op) / 100)`
//! chunks (the rest is over-provisioning that makes room for parity of
//! partial stripes and garbage), so
//!
//! ```text
//!   LSN = LBA / (L * S_chk)            (paper: LBA / (S_seg * N), op = 0)
//!   LCN = (LBA mod (L * S_chk)) / S_chk
//! ```

use serde::{Deserialize, Serialize};

use crate::DvsError;

/// Array parameters.  All sizes in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DvsConfig {
    /// Drives, N data + k parity wide.
    pub members: usize,
    /// Parity chunks per stripe (1: XOR, 2: Reed-Solomon P+Q).
    pub parity: usize,
    /// Chunk size S_chk.
    pub chunk: u64,
    /// Zone (segment) size per member.
    pub zone_size: u64,
    /// Zones per member.
    pub zones: u64,
    /// Conventional zones at the start of each member (metadata).
    pub conventional: u64,
    /// Logical block size.
    pub block: u64,
    /// Physical SSGs kept free for garbage collection (>= 1).
    pub spare: u64,
    /// Over-provisioning of each SSG, percent of its data slots.
    pub op_pct: u64,
    /// Real arrays: write-cache capacity in chunks, made durable by a
    /// journal in the conventional zones (0: write-through).
    #[serde(default)]
    pub cache_chunks: u64,
    /// Bytes of the write-cache journal at the end of the conventional
    /// zones (0: the log and the journal share what the checkpoints leave,
    /// half each, as arrays made before this field did).
    #[serde(default)]
    pub journal_bytes: u64,
    /// The journal is a ring of segments retired piecewise (the records
    /// of destaged SSGs dropped, [`crate::meta::MetaState::retire`]), not
    /// retired whole by destaging the whole cache.  Absent (false) in
    /// arrays made before it: their journal keeps the old layout.
    #[serde(default, skip_serializing_if = "is_false")]
    pub journal_ring: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl DvsConfig {
    /// A config for `members` zoned drives of `zones` zones of `zone_size`.
    pub fn new(members: usize, parity: usize, chunk: u64, zone_size: u64, zones: u64, conventional: u64) -> DvsConfig {
        DvsConfig { members, parity, chunk, zone_size, zones, conventional, block: 512, spare: 1, op_pct: 20, cache_chunks: 0, journal_bytes: 0, journal_ring: false }
    }
}

/// Validated geometry with derived quantities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geo {
    pub cfg: DvsConfig,
    /// Members.
    pub n: usize,
    /// Data chunks of a full stripe (N).
    pub data: usize,
    /// Parity chunks (k).
    pub k: usize,
    pub chunk: u64,
    /// Chunk slots per segment per member.
    pub seg_chunks: u32,
    /// Physical SSGs.
    pub phys: u32,
    /// Logical SSGs.
    pub ssgs: u32,
    /// Logical chunks per SSG (L).
    pub lchunks: u32,
    pub block: u64,
}

/// Where a logical chunk lives: `(lsn, lcn)`.
pub type ChunkKey = (u32, u32);

impl Geo {
    pub fn new(cfg: DvsConfig) -> Result<Geo, DvsError> {
        let g = |m: String| Err(DvsError::Geometry(m));
        let c = &cfg;
        if c.parity == 0 || c.parity > 2 {
            return g(format!("parity chunks per stripe must be 1 or 2, got {}", c.parity));
        }
        if c.members < c.parity + 1 || c.members > 64 {
            return g(format!("{} members cannot hold stripes with {} parity chunks (need {}..=64)", c.members, c.parity, c.parity + 1));
        }
        if c.block == 0 || !c.block.is_power_of_two() {
            return g(format!("block size {} must be a power of two", c.block));
        }
        if c.chunk == 0 || c.chunk % c.block != 0 || c.chunk % 4096 != 0 {
            return g(format!("chunk size {} must be a positive multiple of 4096 and of the block size {}", c.chunk, c.block));
        }
        if c.zone_size == 0 || c.zone_size % c.chunk != 0 {
            return g(format!("zone size {} must be a positive multiple of the chunk size {}", c.zone_size, c.chunk));
        }
        let seg_chunks = c.zone_size / c.chunk;
        if seg_chunks >= 1 << 24 {
            return g(format!("{seg_chunks} chunks per segment is too many (max 2^24)"));
        }
        if c.op_pct >= 100 {
            return g(format!("over-provisioning {}% must be below 100", c.op_pct));
        }
        if c.spare == 0 {
            return g("at least one spare segment is needed for garbage collection".into());
        }
        if c.conventional >= c.zones || c.zones - c.conventional <= c.spare {
            return g(format!("{} zones with {} conventional leave no segment beyond the {} spare", c.zones, c.conventional, c.spare));
        }
        let phys = c.zones - c.conventional;
        if phys >= u32::MAX as u64 {
            return g("too many zones".into());
        }
        let data = c.members - c.parity;
        let lchunks = seg_chunks * data as u64 * (100 - c.op_pct) / 100;
        // GC must always fit an SSG's valid data as full stripes.
        let lchunks = lchunks.min(seg_chunks * data as u64);
        if lchunks == 0 {
            return g("segments are too small to hold any logical chunk".into());
        }
        Ok(Geo {
            n: c.members,
            data,
            k: c.parity,
            chunk: c.chunk,
            seg_chunks: seg_chunks as u32,
            phys: phys as u32,
            ssgs: (phys - c.spare) as u32,
            lchunks: lchunks as u32,
            block: c.block,
            cfg,
        })
    }

    /// Bytes of one logical SSG.
    pub fn ssg_bytes(&self) -> u64 {
        self.lchunks as u64 * self.chunk
    }

    /// Logical capacity.
    pub fn capacity(&self) -> u64 {
        self.ssgs as u64 * self.ssg_bytes()
    }

    /// Member size the geometry needs.
    pub fn member_size(&self) -> u64 {
        self.cfg.zones * self.cfg.zone_size
    }

    /// Eq. 1 and 2: the chunk holding logical byte `lba`.
    pub fn locate(&self, lba: u64) -> ChunkKey {
        let lsn = lba / self.ssg_bytes();
        let lcn = (lba % self.ssg_bytes()) / self.chunk;
        (lsn as u32, lcn as u32)
    }

    /// First logical byte of a chunk.
    pub fn chunk_start(&self, key: ChunkKey) -> u64 {
        key.0 as u64 * self.ssg_bytes() + key.1 as u64 * self.chunk
    }

    /// Zone index of physical segment `p`.
    pub fn zone_of(&self, p: u32) -> u64 {
        self.cfg.conventional + p as u64
    }

    /// Member byte offset of chunk slot `idx` of physical segment `p`.
    pub fn slot_offset(&self, p: u32, idx: u32) -> u64 {
        self.zone_of(p) * self.cfg.zone_size + idx as u64 * self.chunk
    }

    /// Check a request: aligned to blocks, inside the capacity.
    pub fn check(&self, offset: u64, len: u64) -> Result<(), DvsError> {
        if offset % self.block != 0 || len % self.block != 0 {
            return Err(DvsError::Plan(mosaic_core::PlanError::Unaligned { offset, len, block: self.block }));
        }
        if offset.checked_add(len).is_none_or(|e| e > self.capacity()) {
            return Err(DvsError::Plan(mosaic_core::PlanError::OutOfRange { offset, len, capacity: self.capacity() }));
        }
        Ok(())
    }

    /// Split `[offset, offset+len)` into per-chunk pieces:
    /// `(key, in-chunk start, in-chunk end, buffer offset)`.
    pub fn pieces(&self, offset: u64, len: u64) -> Vec<(ChunkKey, u64, u64, u64)> {
        let mut out = Vec::new();
        let mut pos = offset;
        while pos < offset + len {
            let key = self.locate(pos);
            let cs = self.chunk_start(key);
            let a = pos - cs;
            let b = (offset + len - cs).min(self.chunk);
            out.push((key, a, b, pos - offset));
            pos = cs + b;
        }
        out
    }

    /// Blocks per chunk.
    pub fn chunk_blocks(&self) -> usize {
        (self.chunk / self.block) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geo {
        // 5 drives, 4+1, 64K chunks, 50-chunk segments like the paper.
        Geo::new(DvsConfig { op_pct: 0, ..DvsConfig::new(5, 1, 64 << 10, 50 * (64 << 10), 12, 2) }).unwrap()
    }

    #[test]
    fn paper_equations() {
        let g = geo();
        // S_seg * N = 50 chunks * 4 data drives.
        assert_eq!(g.lchunks, 200);
        let s_seg = 50 * (64u64 << 10);
        for lba in [0u64, 65535, 65536, s_seg * 4 - 1, s_seg * 4, s_seg * 4 * 7 + 3 * 65536 + 17] {
            let (lsn, lcn) = g.locate(lba);
            assert_eq!(lsn as u64, lba / (s_seg * 4));
            assert_eq!(lcn as u64, (lba % (s_seg * 4)) / (64 << 10));
        }
        assert_eq!(g.ssgs, 9);
        assert_eq!(g.capacity(), 9 * 200 * 65536);
        assert_eq!(g.slot_offset(0, 3), 2 * s_seg + 3 * 65536);
    }

    #[test]
    fn pieces_cover_the_request() {
        let g = geo();
        let p = g.pieces(65536 - 512, 65536 + 1024);
        assert_eq!(p, vec![((0, 0), 65024, 65536, 0), ((0, 1), 0, 65536, 512), ((0, 2), 0, 512, 66048)]);
        let s = g.ssg_bytes();
        let p = g.pieces(s - 512, 1024);
        assert_eq!(p, vec![((0, 199), 65024, 65536, 0), ((1, 0), 0, 512, 512)]);
    }

    #[test]
    fn bad_geometry_is_refused() {
        let ok = DvsConfig::new(5, 1, 64 << 10, 1 << 20, 12, 2);
        for bad in [
            DvsConfig { parity: 3, ..ok.clone() },
            DvsConfig { members: 1, ..ok.clone() },
            DvsConfig { chunk: 1000, ..ok.clone() },
            DvsConfig { zone_size: 100 << 10, ..ok.clone() },
            DvsConfig { zones: 3, ..ok.clone() },
            DvsConfig { spare: 0, ..ok.clone() },
            DvsConfig { op_pct: 100, ..ok.clone() },
        ] {
            assert!(matches!(Geo::new(bad), Err(DvsError::Geometry(_))));
        }
        let g = Geo::new(ok).unwrap();
        assert!(g.check(1, 512).is_err());
        assert!(g.check(g.capacity(), 512).is_err());
        assert!(g.check(g.capacity() - 512, 512).is_ok());
    }
}
