//! The DVS write cache (paper section IV) and a plain LRU read cache.
//!
//! ```text
//!   SSG LRU list (recent, recency bit 1)          SSG LFU list (candidates, recency bit 0,
//!   MRU ─ [SSG 7] [SSG 2] [SSG 9] ─ LRU  ──evict──>  sorted by reference count)
//!                                                    [SSG 1: 1] [SSG 4: 3] [SSG 0: 8]
//!   each SSG entry:                                        ^ destage victim: lowest count
//!     count, recency bit,
//!     per-disk chunk LRU lists:  disk 0: LCN 0 ─ LCN 5 ─ ...
//!                                disk 1: LCN 1 ─ ...      (disk = LCN mod members)
//! ```
//!
//! Any access to a chunk of an SSG moves the SSG's entry to the MRU end of
//! the LRU list (out of the LFU list if it was there), sets its recency bit
//! and increments its count.  When the LRU list is over its length, its LRU
//! entry moves to the LFU list.  Destage starts when the cache is over its
//! high-water mark and takes the LFU entry with the lowest count (the LRU
//! tail when the LFU list is empty), its chunks LRU-first, round-robin over
//! the per-disk lists.  Every `halve_ns` all counts become `ceil(C/2)`.
//!
//! The cache tracks which blocks of each chunk it holds (a bitmap), so a
//! partial-chunk write needs no read until destage; bytes live elsewhere
//! (the real executor), the simulator needs none.
//!
//! Its budget is counted in chunks (the paper's SSD cache, what the
//! simulator's `eval dvs` runs) or, with [`CacheParams::by_blocks`] (real
//! arrays), in dirty blocks: a random small write then costs one block of
//! the budget, not a whole chunk, and the victim is the SSG holding the
//! most dirty blocks, destaged whole, so one rewrite of its chunks
//! retires as many client writes as possible.

use std::collections::{BTreeMap, BTreeSet};

use mosaic_core::cache::KeyMap;

use crate::addr::ChunkKey;

/// Blocks of a chunk held in cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitmap(pub Vec<u64>);

impl Bitmap {
    pub fn new(blocks: usize) -> Bitmap {
        Bitmap(vec![0; blocks.div_ceil(64)])
    }
    pub fn set(&mut self, a: usize, b: usize) {
        for i in a..b {
            self.0[i / 64] |= 1 << (i % 64);
        }
    }
    pub fn get(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }
    pub fn all(&self, a: usize, b: usize) -> bool {
        (a..b).all(|i| self.get(i))
    }
    /// Blocks held.
    pub fn ones(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
}

#[derive(Debug, Clone)]
struct Entry {
    /// Per disk: stamp -> LCN (LRU first).
    lists: Vec<BTreeMap<u64, u32>>,
    /// LCN -> (stamp, blocks).
    chunks: KeyMap<u32, (u64, Bitmap)>,
    /// Blocks held over all its chunks.
    blocks: usize,
    count: u32,
    recency: bool,
    /// Key in the LRU map (when recency) or LFU set.
    lru_stamp: u64,
    lfu_seq: u64,
}

/// Write-cache parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheParams {
    /// Capacity in chunks, or in blocks when `by_blocks` (0: write-through).
    pub capacity: usize,
    /// Destage starts above this much (chunks, or blocks when `by_blocks`).
    pub high: usize,
    /// Length of the SSG LRU list.
    pub lru_len: usize,
    /// Count halving interval.
    pub halve_ns: u64,
    /// Budget counted in dirty blocks, and the victim is the SSG with the
    /// most of them (else chunks, and the LFU/LRU victim).
    pub by_blocks: bool,
}

impl CacheParams {
    /// The paper's cache: `chunks` chunks, destage above 90 %.
    pub fn sized(chunks: usize) -> CacheParams {
        CacheParams { capacity: chunks, high: chunks * 9 / 10, lru_len: 8, halve_ns: 10_000_000_000, by_blocks: false }
    }
    /// A block-granular cache of `blocks` dirty blocks, destaged only
    /// when full (or flushed).
    pub fn blocks(blocks: usize) -> CacheParams {
        CacheParams { capacity: blocks, high: blocks, lru_len: 8, halve_ns: 0, by_blocks: true }
    }
}

/// The SSG-managed write cache.
#[derive(Debug, Clone)]
pub struct SsgCache {
    pub p: CacheParams,
    members: usize,
    blocks: usize,
    entries: KeyMap<u32, Entry>,
    lru: BTreeMap<u64, u32>,
    lfu: BTreeSet<(u32, u64, u32)>,
    /// Chunks held.
    used: usize,
    /// Blocks held.
    blocks_used: usize,
    clock: u64,
    last_halve: u64,
}

impl SsgCache {
    pub fn new(p: CacheParams, members: usize, chunk_blocks: usize) -> SsgCache {
        SsgCache { p, members, blocks: chunk_blocks, entries: KeyMap::default(), lru: BTreeMap::new(), lfu: BTreeSet::new(), used: 0, blocks_used: 0, clock: 0, last_halve: 0 }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// What the budget counts: chunks held, or blocks when `by_blocks`.
    pub fn used(&self) -> usize {
        if self.p.by_blocks {
            self.blocks_used
        } else {
            self.used
        }
    }

    /// Chunks held.
    pub fn chunks_used(&self) -> usize {
        self.used
    }

    /// Blocks held.
    pub fn blocks_used(&self) -> usize {
        self.blocks_used
    }

    /// An access to SSG `lsn`: to the MRU end of the LRU list.
    fn access(&mut self, lsn: u32, now: u64) {
        self.maybe_halve(now);
        let stamp = self.tick();
        let members = self.members;
        let e = self.entries.entry(lsn).or_insert_with(|| Entry { lists: vec![BTreeMap::new(); members], chunks: KeyMap::default(), blocks: 0, count: 0, recency: false, lru_stamp: 0, lfu_seq: 0 });
        if e.recency {
            self.lru.remove(&e.lru_stamp);
        } else if e.count > 0 || !e.chunks.is_empty() {
            self.lfu.remove(&(e.count, e.lfu_seq, lsn));
        }
        e.recency = true;
        e.count = e.count.saturating_add(1);
        e.lru_stamp = stamp;
        self.lru.insert(stamp, lsn);
        while self.lru.len() > self.p.lru_len.max(1) {
            let (_, victim) = self.lru.pop_first().unwrap();
            let seq = self.tick();
            let v = self.entries.get_mut(&victim).unwrap();
            v.recency = false;
            v.lfu_seq = seq;
            self.lfu.insert((v.count, seq, victim));
        }
    }

    fn maybe_halve(&mut self, now: u64) {
        if self.p.halve_ns == 0 || now < self.last_halve + self.p.halve_ns {
            return;
        }
        self.last_halve = now;
        let mut lfu = BTreeSet::new();
        for (&lsn, e) in self.entries.iter_mut() {
            e.count = e.count.div_ceil(2);
            if !e.recency {
                lfu.insert((e.count, e.lfu_seq, lsn));
            }
        }
        self.lfu = lfu;
    }

    /// Cache blocks `[a, b)` of a chunk.  Returns whether the chunk was
    /// already cached (a write hit).
    pub fn write(&mut self, key: ChunkKey, a: usize, b: usize, now: u64) -> bool {
        self.access(key.0, now);
        let stamp = self.tick();
        let disk = key.1 as usize % self.members;
        let blocks = self.blocks;
        let e = self.entries.get_mut(&key.0).unwrap();
        let (hit, added) = match e.chunks.get_mut(&key.1) {
            Some((st, bm)) => {
                e.lists[disk].remove(st);
                *st = stamp;
                let before = bm.ones();
                bm.set(a, b);
                (true, bm.ones() - before)
            }
            None => {
                let mut bm = Bitmap::new(blocks);
                bm.set(a, b);
                let added = bm.ones();
                e.chunks.insert(key.1, (stamp, bm));
                self.used += 1;
                (false, added)
            }
        };
        e.blocks += added;
        self.blocks_used += added;
        e.lists[disk].insert(stamp, key.1);
        hit
    }

    /// Blocks of a cached chunk.
    pub fn get(&self, key: ChunkKey) -> Option<&Bitmap> {
        self.entries.get(&key.0)?.chunks.get(&key.1).map(|c| &c.1)
    }

    /// A read hit counts as an access to the SSG.
    pub fn touch(&mut self, lsn: u32, now: u64) {
        if self.entries.contains_key(&lsn) {
            self.access(lsn, now);
        }
    }

    /// The destage victim: by blocks, the SSG holding the most blocks
    /// (the lowest LSN of equals); else the lowest count in the LFU list,
    /// else the LRU tail.
    pub fn victim(&self) -> Option<u32> {
        if self.p.by_blocks {
            return self.entries.iter().max_by_key(|(&l, e)| (e.blocks, std::cmp::Reverse(l))).map(|(&l, _)| l);
        }
        self.lfu.first().map(|v| v.2).or_else(|| self.lru.first_key_value().map(|(_, &l)| l))
    }

    /// Remove up to `max` chunks of SSG `lsn`, LRU-first round-robin over
    /// its per-disk lists.
    pub fn take(&mut self, lsn: u32, max: usize) -> Vec<(u32, Bitmap)> {
        let Some(e) = self.entries.get_mut(&lsn) else { return vec![] };
        let mut out = Vec::new();
        'outer: loop {
            let mut any = false;
            for d in 0..e.lists.len() {
                if out.len() >= max {
                    break 'outer;
                }
                if let Some((_, lcn)) = e.lists[d].pop_first() {
                    let (_, bm) = e.chunks.remove(&lcn).unwrap();
                    let n = bm.ones();
                    e.blocks -= n;
                    self.blocks_used -= n;
                    out.push((lcn, bm));
                    any = true;
                }
            }
            if !any {
                break;
            }
        }
        self.used -= out.len();
        if e.chunks.is_empty() {
            let e = self.entries.remove(&lsn).unwrap();
            if e.recency {
                self.lru.remove(&e.lru_stamp);
            } else {
                self.lfu.remove(&(e.count, e.lfu_seq, lsn));
            }
        }
        out
    }

    /// Chunks cached for SSG `lsn`.
    pub fn len_of(&self, lsn: u32) -> usize {
        self.entries.get(&lsn).map_or(0, |e| e.chunks.len())
    }

    /// SSGs with cached chunks.
    pub fn ssgs(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.entries.keys().copied().collect();
        v.sort_unstable();
        v
    }

    pub fn count(&self, lsn: u32) -> Option<(u32, bool)> {
        self.entries.get(&lsn).map(|e| (e.count, e.recency))
    }
}

/// LRU read cache of clean chunks.
#[derive(Debug, Clone, Default)]
pub struct ReadCache {
    cap: usize,
    map: KeyMap<ChunkKey, u64>,
    order: BTreeMap<u64, ChunkKey>,
    clock: u64,
}

impl ReadCache {
    pub fn new(cap: usize) -> ReadCache {
        ReadCache { cap, ..Default::default() }
    }
    pub fn enabled(&self) -> bool {
        self.cap > 0
    }
    /// Whether `key` is cached; refreshes it.
    pub fn hit(&mut self, key: ChunkKey) -> bool {
        self.clock += 1;
        match self.map.get_mut(&key) {
            Some(s) => {
                self.order.remove(s);
                *s = self.clock;
                self.order.insert(self.clock, key);
                true
            }
            None => false,
        }
    }
    pub fn insert(&mut self, key: ChunkKey) {
        if self.cap == 0 || self.hit(key) {
            return;
        }
        self.clock += 1;
        self.map.insert(key, self.clock);
        self.order.insert(self.clock, key);
        while self.map.len() > self.cap {
            let (_, k) = self.order.pop_first().unwrap();
            self.map.remove(&k);
        }
    }
    pub fn invalidate(&mut self, key: ChunkKey) {
        if let Some(s) = self.map.remove(&key) {
            self.order.remove(&s);
        }
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_then_lfu_lowest_count_is_the_victim() {
        let mut c = SsgCache::new(CacheParams { capacity: 100, high: 90, lru_len: 2, halve_ns: 0, by_blocks: false }, 5, 8);
        // SSG 1 accessed 3 times, SSG 2 once, SSG 3 twice, then 4 and 5.
        for l in 0..3 {
            c.write((1, l), 0, 8, 0);
        }
        c.write((2, 0), 0, 8, 0);
        c.write((3, 0), 0, 4, 0);
        c.write((3, 0), 4, 8, 0);
        assert_eq!(c.count(3), Some((2, true)));
        c.write((4, 0), 0, 8, 0);
        c.write((5, 0), 0, 8, 0);
        // LRU holds 4 and 5; 1 (3), 2 (1), 3 (2) are in the LFU list.
        assert_eq!(c.count(1), Some((3, false)));
        assert_eq!(c.victim(), Some(2));
        assert_eq!(c.used(), 7);
        assert!(c.get((3, 0)).unwrap().all(0, 8));
        let t = c.take(2, 10);
        assert_eq!(t.len(), 1);
        assert_eq!(c.victim(), Some(3));
        // Access moves SSG 3 back to the LRU list, pushing 4 out.
        c.write((3, 1), 0, 1, 0);
        assert_eq!(c.count(3), Some((3, true)));
        assert_eq!(c.victim(), Some(4));
        assert_eq!(c.used(), 7);
    }

    #[test]
    fn counts_halve_on_the_interval_and_take_round_robins_disks() {
        let mut c = SsgCache::new(CacheParams { capacity: 100, high: 90, lru_len: 1, halve_ns: 1000, by_blocks: false }, 4, 8);
        for i in 0..8 {
            c.write((1, i), 0, 8, 0);
        }
        c.write((2, 0), 0, 8, 10);
        assert_eq!(c.count(1), Some((8, false)));
        c.write((3, 0), 0, 8, 2000);
        assert_eq!(c.count(1), Some((4, false)));
        assert_eq!(c.count(2), Some((1, false)));
        let t: Vec<u32> = c.take(1, 5).into_iter().map(|x| x.0).collect();
        // Disks 0,1,2,3 (LCN mod 4) first, oldest first, then disk 0 again.
        assert_eq!(t, vec![0, 1, 2, 3, 4]);
        assert_eq!(c.take(1, 100).len(), 3);
        assert!(c.count(1).is_none());
        assert_eq!(c.used(), 2);
    }

    #[test]
    fn by_blocks_counts_dirty_blocks_and_picks_the_ssg_holding_most() {
        let mut c = SsgCache::new(CacheParams::blocks(100), 5, 16);
        // SSG 1: one block in each of 3 chunks; SSG 2: 5 blocks of one chunk.
        for l in 0..3 {
            c.write((1, l), 4, 5, 0);
        }
        c.write((2, 0), 0, 4, 0);
        c.write((2, 0), 2, 5, 0);
        assert_eq!((c.used(), c.chunks_used(), c.blocks_used()), (8, 4, 8));
        assert_eq!(c.victim(), Some(2));
        c.write((1, 0), 0, 3, 0);
        assert_eq!(c.victim(), Some(1), "SSG 1 now holds 6 blocks");
        let t = c.take(1, usize::MAX);
        assert_eq!(t.len(), 3);
        assert_eq!(t.iter().map(|x| x.1.ones()).sum::<usize>(), 6);
        assert_eq!((c.used(), c.chunks_used()), (5, 1));
        assert_eq!(c.victim(), Some(2));
    }

    #[test]
    fn read_cache_is_lru() {
        let mut r = ReadCache::new(2);
        r.insert((0, 1));
        r.insert((0, 2));
        assert!(r.hit((0, 1)));
        r.insert((0, 3));
        assert!(!r.hit((0, 2)));
        assert!(r.hit((0, 1)) && r.hit((0, 3)));
    }
}
