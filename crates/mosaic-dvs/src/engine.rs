//! The sans-I/O DVS state machine: requests in, destage and GC jobs out.
//!
//! ```text
//!   write ──> SsgCache (blocks of chunks, per SSG) ──over high water──> destage(victim SSG)
//!                                                  ──over capacity───> destage, foreground
//!   destage(SSG s, chunks C):
//!       room in s's segment?  yes: new stripes of C (width 1..N + k parity), appended  (Job::Destage)
//!                             no:  foreground GC of s: valid chunks of s + all cached chunks of s,
//!                                  re-striped full-width into a spare segment           (Job::FgGc)
//!   idle ──> background GC of the SSG with the most garbage                             (Job::BgGc)
//!   read ──> cache | zeros (never written) | AMT -> member slot | SIT stripe -> reconstruct
//! ```
//!
//! Tables change when a job is made: executors run jobs in the order they
//! are made (the simulator's per-drive FIFO queues, the real executor one
//! at a time), so every append lands at the write pointer the tables
//! expect.  Old chunks are only marked invalid; nothing is read to update
//! parity.  A job reads only (a) the old bytes of chunks the cache holds
//! partly and (b) for GC, the valid chunks it moves.

use std::collections::BTreeMap;

use mosaic_core::Health;

use crate::addr::{ChunkKey, Geo};
use crate::cache::{Bitmap, CacheParams, ReadCache, SsgCache};
use crate::tables::{layout_on, Stripe, Tables};
use crate::DvsError;

/// Destage (foreground for backpressure, or background) only once this
/// many chunks are dirty; the cache may run over by less than this while
/// earlier destages are in flight.  The baselines' cache uses the same.
pub const MIN_BATCH: usize = 16;

/// Background destages start only while fewer chunks than this are held by
/// ones still in flight (see [`crate::backlog`]), and the baselines' cache
/// destages this many chunks at a time: the drives' FIFO queues hold at
/// most about this much destage work ahead of a read, whatever the cache
/// size (with no bound, reads waited behind ever longer queues as the cache
/// grew, and HDD RAID-5 got slower with a bigger cache).
pub const BG_HELD: usize = 32;

/// Policy parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct DvsParams {
    pub cache: CacheParams,
    /// Read cache capacity in chunks (0: none; a miss then reads only the
    /// requested range, otherwise the whole chunk).
    pub read_cache_chunks: usize,
    /// Most chunks one destage takes from the victim SSG.
    pub max_batch: usize,
    /// Background GC after this long without foreground I/O (None: never).
    pub idle_ns: Option<u64>,
    /// Background GC only of SSGs with at least this share (percent) of
    /// their segment slots holding garbage.
    pub gc_min_garbage_pct: u64,
}

impl DvsParams {
    /// Write-through (no cache), for real arrays without a journal.
    pub fn write_through() -> DvsParams {
        DvsParams { cache: CacheParams::sized(0), read_cache_chunks: 0, max_batch: 1 << 20, idle_ns: None, gc_min_garbage_pct: 25 }
    }
    /// A write cache and a read cache of `chunks` chunks each.
    pub fn cached(chunks: usize) -> DvsParams {
        DvsParams { cache: CacheParams::sized(chunks), read_cache_chunks: chunks, max_batch: 256, idle_ns: Some(50_000_000), gc_min_garbage_pct: 25 }
    }
}

/// Where the bytes of (part of) a chunk come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Src {
    /// Member byte offset of the chunk's first requested byte.
    Direct { member: usize, offset: u64 },
    /// The chunk's member failed: decode column `col` of `stripe` (in
    /// physical segment `phys`) from the other columns.
    Recon { phys: u32, stripe: Stripe, col: usize },
}

/// A read of bytes `[a, b)` of a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRead {
    pub key: ChunkKey,
    pub a: u64,
    pub b: u64,
    pub src: Src,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    Destage,
    /// GC forced by a destage into a full segment.
    FgGc,
    /// GC started on idle.
    BgGc,
}

/// Device work the tables already reflect.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub kind: JobKind,
    pub lsn: u32,
    /// Segment the stripes are appended to.
    pub phys: u32,
    /// Old chunk bytes to read first (whole chunks).
    pub fills: Vec<ChunkRead>,
    /// For each fill read directly, where to decode it from should its
    /// member fail to read it (its stripe's other columns, as the tables
    /// were when the job was planned), when the engine keeps them
    /// ([`Dvs::alternates`]: the real array's); empty otherwise.
    pub alt: Vec<Option<Src>>,
    /// Chunks written: the cache's blocks (None: moved by GC, bytes from a fill).
    pub chunks: Vec<(u32, Option<Bitmap>)>,
    pub stripes: Vec<Stripe>,
    /// GC: the segment freed, and its zone resets `(member, zone)` to issue
    /// after the stripes are durable.
    pub old_phys: Option<u32>,
    pub resets: Vec<(usize, u64)>,
}

/// Where one piece of a read comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadSrc {
    /// All requested blocks are in the write cache (or read cache).
    Cache,
    /// Never written: zeros (cached blocks on top).
    Zero,
    Disk(ChunkRead),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPiece {
    pub buf_off: u64,
    pub key: ChunkKey,
    /// In-chunk range requested.
    pub a: u64,
    pub b: u64,
    pub src: ReadSrc,
}

/// Counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DvsStats {
    pub write_chunks: u64,
    pub write_hits: u64,
    pub read_chunks: u64,
    pub read_hits: u64,
    pub destages: u64,
    pub destaged_chunks: u64,
    pub full_stripes: u64,
    pub partial_stripes: u64,
    pub fills: u64,
    pub fg_gc: u64,
    pub bg_gc: u64,
    /// Zone resets of foreground and of idle-time (background) GC.
    pub fg_resets: u64,
    pub bg_resets: u64,
    pub gc_moved: u64,
    pub degraded_reads: u64,
    /// Chunks unmapped by a client's discard ([`Dvs::discard`]).
    pub discarded: u64,
}

/// The DVS state machine.
#[derive(Debug, Clone)]
pub struct Dvs {
    pub geo: Geo,
    pub tables: Tables,
    pub cache: SsgCache,
    pub rcache: ReadCache,
    pub p: DvsParams,
    pub healthy: Vec<bool>,
    pub stats: DvsStats,
    /// Cache chunks still held by background destages in flight (set by
    /// the front end, see [`crate::backlog`]).
    pub held: usize,
    /// Whether jobs carry their fills' alternate sources ([`Job::alt`]):
    /// the real array's destager decodes a fill its member cannot read.
    pub alternates: bool,
}

impl Dvs {
    pub fn new(geo: Geo, p: DvsParams) -> Dvs {
        Dvs {
            tables: Tables::new(geo.clone()),
            cache: SsgCache::new(p.cache.clone(), geo.n, geo.chunk_blocks()),
            rcache: ReadCache::new(p.read_cache_chunks),
            healthy: vec![true; geo.n],
            stats: DvsStats::default(),
            held: 0,
            alternates: false,
            p,
            geo,
        }
    }

    pub fn with_tables(tables: Tables, p: DvsParams) -> Dvs {
        let mut d = Dvs::new(tables.geo.clone(), p);
        d.tables = tables;
        d
    }

    pub fn set_health(&mut self, h: &Health) {
        for (i, s) in h.states.iter().enumerate().take(self.geo.n) {
            self.healthy[i] = matches!(s, mosaic_core::MemberState::Active);
        }
    }

    fn failed(&self) -> Vec<usize> {
        (0..self.geo.n).filter(|&m| !self.healthy[m]).collect()
    }

    /// Where to read bytes `[a, b)` of a written chunk.
    pub fn src_of(&self, key: ChunkKey, a: u64) -> Result<Option<Src>, DvsError> {
        self.src_with(key, a, &self.healthy)
    }

    /// [`Dvs::src_of`] with only the members `healthy` marks read: a
    /// chunk on another is decoded from its stripe (a member that could
    /// not read it, whose bytes are rebuilt from the others).
    pub fn src_with(&self, key: ChunkKey, a: u64, healthy: &[bool]) -> Result<Option<Src>, DvsError> {
        let Some((m, idx)) = self.tables.lookup(key.0, key.1) else { return Ok(None) };
        let phys = self.tables.gtt[key.0 as usize];
        if healthy[m] {
            return Ok(Some(Src::Direct { member: m, offset: self.geo.slot_offset(phys, idx) + a }));
        }
        let st = self.tables.stripe_at(key.0, m, idx).ok_or_else(|| DvsError::Corrupt(format!("SSG {}: slot {m}:{idx} of LCN {} is in no stripe", key.0, key.1)))?;
        if st.members.iter().filter(|&&x| !healthy[x as usize]).count() > self.geo.k {
            let lost: Vec<usize> = st.members.iter().map(|&x| x as usize).filter(|&x| !healthy[x]).collect();
            return Err(DvsError::Plan(mosaic_core::PlanError::TooManyFailures { stripe: key.0 as u64, failed: lost, tolerable: self.geo.k }));
        }
        let col = st.col_of(m).unwrap();
        Ok(Some(Src::Recon { phys, stripe: st.clone(), col }))
    }

    /// A logical write.  Returns jobs the write must wait for (cache over
    /// capacity) and background jobs (over the high-water mark).
    pub fn write(&mut self, offset: u64, len: u64, now: u64) -> Result<(Vec<Job>, Vec<Job>), DvsError> {
        self.geo.check(offset, len)?;
        let blk = self.geo.block;
        for (key, a, b, _) in self.geo.pieces(offset, len) {
            self.stats.write_chunks += 1;
            if self.cache.write(key, (a / blk) as usize, (b / blk) as usize, now) {
                self.stats.write_hits += 1;
            }
            self.rcache.invalidate(key);
        }
        let mut fg = Vec::new();
        // Over capacity by cached chunks alone: destage until it fits.
        while self.cache.used() > self.cache.p.capacity {
            let v = self.cache.victim().expect("a non-empty cache has a victim");
            fg.push(self.destage(v)?);
        }
        // Over capacity counting destages still in flight: this write waits
        // for one more destage (queued behind them), if it can fill a stripe.
        let min = MIN_BATCH.min(self.cache.p.capacity);
        if self.cache.used() >= min.max(1) && self.cache.used() + self.held > self.cache.p.capacity {
            let v = self.cache.victim().expect("a non-empty cache has a victim");
            fg.push(self.destage(v)?);
        }
        // Background work in flight is bounded by BG_HELD, not by the cache:
        // unbounded, every write over the mark queued another batch, so the
        // drives' FIFO queues (and every read behind them) grew with the
        // cache size.
        let mut bg = Vec::new();
        if self.held < BG_HELD && self.cache.used() >= min.max(1) && self.cache.used() > self.cache.p.high {
            let v = self.cache.victim().expect("a non-empty cache has a victim");
            bg.push(self.destage(v)?);
        }
        Ok((fg, bg))
    }

    /// Destage every cached chunk.
    pub fn flush(&mut self) -> Result<Vec<Job>, DvsError> {
        let mut out = Vec::new();
        while let Some(v) = self.cache.victim() {
            out.push(self.destage(v)?);
        }
        Ok(out)
    }

    /// Destage up to `max_batch` chunks of SSG `lsn`.
    /// With at least N chunks cached it takes a multiple of N, so the
    /// stripes are full and the remainder waits for company.
    pub fn destage(&mut self, lsn: u32) -> Result<Job, DvsError> {
        let have = self.cache.len_of(lsn).min(self.p.max_batch.max(1));
        let n = self.geo.data;
        let want = if have >= n { have / n * n } else { have };
        let taken = self.cache.take(lsn, want.max(1));
        self.stats.destages += 1;
        self.stats.destaged_chunks += taken.len() as u64;
        let lcns: Vec<u32> = taken.iter().map(|t| t.0).collect();
        let Some(stripes) = self.tables.layout(lsn, &lcns, &self.healthy) else {
            return self.gc(lsn, taken, JobKind::FgGc);
        };
        let mut fills = Vec::new();
        for (lcn, bm) in &taken {
            if !bm.all(0, self.geo.chunk_blocks()) {
                if let Some(src) = self.src_of((lsn, *lcn), 0)? {
                    fills.push(ChunkRead { key: (lsn, *lcn), a: 0, b: self.geo.chunk, src });
                }
            }
        }
        self.count_stripes(&stripes);
        self.stats.fills += fills.len() as u64;
        let alt = self.alternates(&fills);
        self.tables.commit(lsn, &stripes)?;
        Ok(Job { kind: JobKind::Destage, lsn, phys: self.tables.gtt[lsn as usize], fills, alt, chunks: taken.into_iter().map(|(l, b)| (l, Some(b))).collect(), stripes, old_phys: None, resets: vec![] })
    }

    fn count_stripes(&mut self, stripes: &[Stripe]) {
        for s in stripes {
            if s.width() == self.geo.data {
                self.stats.full_stripes += 1;
            } else {
                self.stats.partial_stripes += 1;
            }
        }
    }

    /// Garbage-collect SSG `lsn`: its valid chunks, the chunks in `extra`
    /// and every chunk of it still cached, re-striped into a spare segment.
    pub fn gc(&mut self, lsn: u32, extra: Vec<(u32, Bitmap)>, kind: JobKind) -> Result<Job, DvsError> {
        let mut set: BTreeMap<u32, Option<Bitmap>> = BTreeMap::new();
        for (l, b) in extra.into_iter().chain(self.cache.take(lsn, usize::MAX)) {
            set.insert(l, Some(b));
        }
        for l in self.tables.valid_lcns(lsn) {
            set.entry(l).or_insert(None);
        }
        let cb = self.geo.chunk_blocks();
        let mut fills = Vec::new();
        let mut moved = 0;
        for (&l, b) in &set {
            if b.as_ref().is_none_or(|b| !b.all(0, cb)) {
                if let Some(src) = self.src_of((lsn, l), 0)? {
                    fills.push(ChunkRead { key: (lsn, l), a: 0, b: self.geo.chunk, src });
                    moved += b.is_none() as u64;
                }
            }
        }
        let spare = self.tables.spares().next().ok_or_else(|| DvsError::NoSpace { lsn, msg: "no spare segment for garbage collection".into() })?;
        let lcns: Vec<u32> = set.keys().copied().collect();
        let mut wp = vec![0u32; self.geo.n];
        let stripes = layout_on(&self.geo, &mut wp, 0, &lcns, &self.healthy).ok_or_else(|| DvsError::NoSpace {
            lsn,
            msg: format!("{} chunks do not fit one segment on the {} working members", lcns.len(), self.healthy.iter().filter(|&&h| h).count()),
        })?;
        let old_wp = self.tables.get(lsn).map(|s| s.wp.clone()).unwrap_or_else(|| vec![0; self.geo.n]);
        let alt = self.alternates(&fills);
        let old = self.tables.switch(lsn, spare)?;
        self.tables.commit(lsn, &stripes)?;
        let zone = self.geo.zone_of(old);
        let resets: Vec<(usize, u64)> = (0..self.geo.n).filter(|&m| self.healthy[m] && old_wp[m] > 0).map(|m| (m, zone)).collect();
        let (jobs, zones) = match kind {
            JobKind::BgGc => (&mut self.stats.bg_gc, &mut self.stats.bg_resets),
            _ => (&mut self.stats.fg_gc, &mut self.stats.fg_resets),
        };
        *jobs += 1;
        *zones += resets.len() as u64;
        self.stats.gc_moved += moved;
        self.stats.fills += fills.len() as u64;
        self.count_stripes(&stripes);
        Ok(Job { kind, lsn, phys: spare, fills, alt, chunks: set.into_iter().collect(), stripes, old_phys: Some(old), resets })
    }

    /// [`Job::alt`] of `fills`, planned before the tables move on: each
    /// direct fill decoded without its member (None where it cannot be).
    fn alternates(&self, fills: &[ChunkRead]) -> Vec<Option<Src>> {
        if !self.alternates {
            return Vec::new();
        }
        let mut h = self.healthy.clone();
        fills
            .iter()
            .map(|f| {
                let Src::Direct { member, .. } = f.src else { return None };
                h[member] = false;
                let alt = self.src_with(f.key, f.a, &h).ok().flatten();
                h[member] = self.healthy[member];
                alt
            })
            .collect()
    }

    /// The SSG with the most garbage, if worth collecting.
    pub fn gc_victim(&self) -> Option<u32> {
        let slots = self.geo.seg_chunks as u64 * self.geo.n as u64;
        self.tables
            .live
            .iter()
            .filter_map(|&l| self.tables.get(l).map(|s| (s.garbage(self.geo.data, self.geo.k), l)))
            .filter(|&(g, _)| g * 100 >= self.p.gc_min_garbage_pct * slots && g > 0)
            .max_by_key(|&(g, l)| (g, std::cmp::Reverse(l)))
            .map(|x| x.1)
    }

    /// One background GC step.
    pub fn idle(&mut self) -> Result<Option<Job>, DvsError> {
        match self.gc_victim() {
            Some(l) => Ok(Some(self.gc(l, vec![], JobKind::BgGc)?)),
            None => Ok(None),
        }
    }

    /// A logical read: where each piece's bytes come from.
    pub fn read(&mut self, offset: u64, len: u64, now: u64) -> Result<Vec<ReadPiece>, DvsError> {
        self.geo.check(offset, len)?;
        let blk = self.geo.block;
        let mut out = Vec::new();
        for (key, a, b, buf_off) in self.geo.pieces(offset, len) {
            self.stats.read_chunks += 1;
            let cached = self.cache.get(key).map(|bm| bm.all((a / blk) as usize, (b / blk) as usize));
            if cached == Some(true) {
                self.stats.read_hits += 1;
                self.cache.touch(key.0, now);
                out.push(ReadPiece { buf_off, key, a, b, src: ReadSrc::Cache });
                continue;
            }
            if cached.is_none() && self.rcache.hit(key) {
                self.stats.read_hits += 1;
                out.push(ReadPiece { buf_off, key, a, b, src: ReadSrc::Cache });
                continue;
            }
            let (ra, rb) = if self.rcache.enabled() { (0, self.geo.chunk) } else { (a, b) };
            let src = match self.src_of(key, ra)? {
                None => ReadSrc::Zero,
                Some(src) => {
                    if matches!(src, Src::Recon { .. }) {
                        self.stats.degraded_reads += 1;
                    }
                    if cached.is_none() {
                        self.rcache.insert(key);
                    }
                    ReadSrc::Disk(ChunkRead { key, a: ra, b: rb, src })
                }
            };
            out.push(ReadPiece { buf_off, key, a, b, src });
        }
        Ok(out)
    }

    /// Each chunk piece of `[offset, offset+len)` in order: its bytes, and
    /// whether it was never written (no block cached, no slot in the map),
    /// so it reads as zeros.  Pure: no counter or cache moves.
    pub fn holes(&self, offset: u64, len: u64) -> Result<Vec<(u64, bool)>, DvsError> {
        self.geo.check(offset, len)?;
        Ok(self
            .geo
            .pieces(offset, len)
            .into_iter()
            .map(|(key, a, b, _)| (b - a, self.cache.get(key).is_none() && self.tables.lookup(key.0, key.1).is_none()))
            .collect())
    }

    /// A client's discard of `[offset, offset+len)`: every chunk wholly
    /// inside it that is written and holds no cached block is unmapped
    /// ([`Tables::unmap`]), so it reads as a hole and a GC no longer moves
    /// it.  A chunk cut by the range's ends, or with blocks in the write
    /// cache, keeps its bytes: a discard is a hint.  The tables in memory
    /// change, nothing durable: the next GC of the SSG, which leaves the
    /// chunk out of its segment, makes it so (see the real array's
    /// `DvsArray::discard`).  Returns how many chunks it unmapped.
    pub fn discard(&mut self, offset: u64, len: u64) -> Result<u64, DvsError> {
        self.geo.check(offset, len)?;
        let c = self.geo.chunk;
        let (mut at, end) = (offset.div_ceil(c) * c, (offset + len) / c * c);
        let mut n = 0;
        while at < end {
            let key = self.geo.locate(at);
            if self.cache.get(key).is_none() && self.tables.unmap(key.0, key.1) {
                self.rcache.invalidate(key);
                n += 1;
            }
            at += c;
        }
        self.stats.discarded += n;
        Ok(n)
    }

    /// Failed members.
    pub fn failed_members(&self) -> Vec<usize> {
        self.failed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::DvsConfig;

    fn dvs(cache: usize) -> Dvs {
        let g = Geo::new(DvsConfig::new(5, 1, 4096, 16 * 4096, 8, 1)).unwrap();
        let mut p = DvsParams::cached(cache);
        p.cache.lru_len = 2;
        Dvs::new(g, p)
    }

    #[test]
    fn write_hits_are_absorbed_and_high_water_destages_in_background() {
        let mut d = dvs(20);
        let c = d.geo.chunk;
        // 18 distinct chunks: at 18 > high (18)? high = 18, so no destage yet.
        for i in 0..18 {
            let (fg, bg) = d.write(i * c, c, 0).unwrap();
            assert!(fg.is_empty() && bg.is_empty());
        }
        let (fg, bg) = d.write(0, 512, 0).unwrap();
        assert!(fg.is_empty() && bg.is_empty());
        assert_eq!(d.stats.write_hits, 1);
        let (fg, bg) = d.write(18 * c, c, 0).unwrap();
        assert!(fg.is_empty());
        assert_eq!(bg.len(), 1);
        let j = &bg[0];
        assert_eq!(j.kind, JobKind::Destage);
        // Nothing on disk yet: no fills; chunk 0 (partial 512 B rewrite of a full chunk) stays full.
        assert!(j.fills.is_empty());
        let w: usize = j.stripes.iter().map(|s| s.width()).sum();
        assert_eq!(w, j.chunks.len());
        assert!(d.cache.used() <= 18);
    }

    #[test]
    fn a_block_counted_cache_destages_the_ssg_holding_most_blocks_whole_when_full() {
        let g = Geo::new(DvsConfig::new(5, 1, 4096, 16 * 4096, 8, 1)).unwrap();
        let mut p = DvsParams::cached(0);
        p.cache = CacheParams::blocks(20);
        p.max_batch = usize::MAX;
        let mut d = Dvs::new(g, p);
        let (c, ssg) = (d.geo.chunk, d.geo.ssg_bytes());
        // One 512-byte block in each of 12 chunks of SSG 0 and 8 of SSG 1:
        // 20 blocks in 20 chunks, within the budget.
        for i in 0..12 {
            assert_eq!(d.write(i * c, 512, 0).unwrap(), (vec![], vec![]));
        }
        for i in 0..8 {
            assert_eq!(d.write(ssg + i * c, 512, 0).unwrap(), (vec![], vec![]));
        }
        assert_eq!((d.cache.used(), d.cache.chunks_used()), (20, 20));
        // The 21st block: SSG 0 (12 blocks) goes whole, 12 chunks = 3 full stripes.
        let (fg, bg) = d.write(ssg + 8 * c, 512, 0).unwrap();
        assert!(bg.is_empty());
        assert_eq!(fg.len(), 1);
        assert_eq!((fg[0].lsn, fg[0].chunks.len(), fg[0].stripes.len()), (0, 12, 3));
        assert_eq!(d.cache.used(), 9);
    }

    #[test]
    fn partial_chunk_destage_reads_the_old_chunk_and_gc_moves_valid_chunks() {
        let mut d = dvs(0); // write-through
        let c = d.geo.chunk;
        let (fg, _) = d.write(0, 4 * c, 0).unwrap();
        assert_eq!(fg.len(), 1);
        assert_eq!(fg[0].stripes.len(), 1);
        assert_eq!(fg[0].stripes[0].width(), 4);
        let (fg, _) = d.write(512, 512, 0).unwrap();
        assert_eq!(fg[0].fills.len(), 1, "the old chunk is read to complete the partial chunk");
        assert_eq!(fg[0].stripes[0].width(), 1);
        // Overwrite chunk 1 until its segment is full: a foreground GC.
        let mut gcs = 0;
        for _ in 0..40 {
            let (fg, _) = d.write(c, c, 0).unwrap();
            for j in &fg {
                if j.kind == JobKind::FgGc {
                    gcs += 1;
                    // Valid chunks 0, 2, 3 moved (read), chunk 1 comes from the cache.
                    assert_eq!(j.fills.len(), 3);
                    assert_eq!(j.stripes.len(), 1);
                    assert_eq!(j.stripes[0].width(), 4);
                    assert_eq!(j.resets.len(), 5);
                }
            }
        }
        assert!(gcs >= 1);
        assert_eq!(d.tables.get(0).unwrap().valid, 4);
        for l in 0..4 {
            assert!(d.tables.lookup(0, l).is_some());
        }
    }

    /// A discard unmaps the written chunks wholly inside it and no
    /// other: not those it cuts, not a cached one, not one never written.
    /// They read as holes, count as garbage, and the SSG's GC leaves them
    /// out (it moves only what is still mapped).
    #[test]
    fn a_discard_unmaps_whole_written_chunks_and_gc_leaves_them_behind() {
        let mut d = dvs(8);
        let c = d.geo.chunk;
        let b = d.geo.block;
        d.write(0, 8 * c, 0).unwrap();
        d.flush().unwrap();
        assert_eq!(d.tables.get(0).unwrap().valid, 8);
        // Chunk 5 gets a cached block again.
        d.write(5 * c + b, b, 0).unwrap();
        // From the middle of chunk 1 to the middle of chunk 7: chunks 2-6
        // whole, 5 cached, so 2, 3, 4, 6; and chunk 9 never written.
        assert_eq!(d.discard(c + b, 6 * c).unwrap(), 4);
        assert_eq!(d.discard(9 * c, c).unwrap(), 0, "never written");
        assert_eq!(d.discard(2 * c, c).unwrap(), 0, "already unmapped");
        assert_eq!(d.stats.discarded, 4);
        let holes: Vec<bool> = (0..10).map(|i| d.holes(i * c, c).unwrap()[0].1).collect();
        assert_eq!(holes, [false, false, true, true, true, false, true, false, true, true]);
        for i in [2, 3, 4, 6] {
            assert_eq!(d.read(i * c, c, 0).unwrap()[0].src, ReadSrc::Zero, "chunk {i} reads as zeros");
        }
        let s = d.tables.get(0).unwrap();
        assert_eq!(s.valid, 4);
        assert!(s.garbage(d.geo.data, d.geo.k) >= 4, "the unmapped slots are garbage");
        assert!(d.discard(1, c).is_err(), "not whole blocks");
        assert!(d.discard(d.geo.capacity(), c).is_err(), "past the end");
        // The GC moves the four chunks still mapped and the cached one.
        let j = d.gc(0, vec![], JobKind::BgGc).unwrap();
        let mut moved: Vec<u32> = j.chunks.iter().map(|x| x.0).collect();
        moved.sort_unstable();
        assert_eq!(moved, [0, 1, 5, 7]);
        assert_eq!(d.tables.valid_lcns(0), [0, 1, 5, 7]);
    }

    #[test]
    fn idle_gc_picks_the_ssg_with_most_garbage() {
        let mut d = dvs(0);
        let c = d.geo.chunk;
        let ssg = d.geo.ssg_bytes();
        for _ in 0..12 {
            d.write(ssg + c, c, 0).unwrap();
        }
        for _ in 0..4 {
            d.write(2 * ssg, c, 0).unwrap();
        }
        assert_eq!(d.gc_victim(), Some(1));
        let j = d.idle().unwrap().unwrap();
        assert_eq!(j.kind, JobKind::BgGc);
        assert_eq!(j.lsn, 1);
        assert_eq!(d.tables.get(1).unwrap().garbage(4, 1), 0, "one chunk plus its parity, nothing to reclaim");
        assert_eq!(d.gc_victim(), None, "SSG 2's garbage is under the threshold");
    }

    #[test]
    fn degraded_reads_reconstruct_through_the_sit() {
        let mut d = dvs(0);
        let c = d.geo.chunk;
        d.write(0, 3 * c, 0).unwrap();
        let (m, _) = d.tables.lookup(0, 1).unwrap();
        let mut h = Health::all_active(5);
        h.states[m] = mosaic_core::MemberState::Failed;
        d.set_health(&h);
        let r = d.read(c, c, 0).unwrap();
        match &r[0].src {
            ReadSrc::Disk(ChunkRead { src: Src::Recon { stripe, col, .. }, .. }) => {
                assert_eq!(stripe.width(), 3);
                assert_eq!(stripe.members[*col] as usize, m);
            }
            other => panic!("expected a reconstruction, got {other:?}"),
        }
        // New stripes hold no data on the failed member.
        let (fg, _) = d.write(5 * c, c, 0).unwrap();
        let st = &fg[0].stripes[0];
        assert!(st.col_of(m).is_none_or(|col| col >= st.width()));
    }
}
