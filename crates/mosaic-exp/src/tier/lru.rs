//! A plain LRU block cache (dm-cache-like) over the tier's two members,
//! the baseline the paper's hybrid is compared with.
//!
//! Member 0 is the fast array (the cache device), member 1 the slow array
//! (the origin, which holds the logical address space one to one).  The
//! cache holds `slots` blocks of `block` bytes; block *s* of the cache is
//! at `s * block` on member 0.
//!
//! ```text
//!   write, block cached     -> write it in its slot, dirty        (no eviction)
//!   write, block not cached -> take a slot (free, else the LRU block:
//!                              if dirty, read it from FAST and write it
//!                              to SLOW first), write there, dirty
//!   read, block cached      -> read its slot on FAST
//!   read, block not cached  -> read SLOW (the request waits for this);
//!                              then, in the background, take a slot as
//!                              above and write the block there (clean)
//!   a write larger than the cache -> straight to SLOW; cached copies of
//!                              its blocks are dropped (they are overwritten)
//! ```
//!
//! Write-back, block granularity, LRU over every access, no background
//! cleaning: a dirty block reaches SLOW only when it is evicted.  A
//! request's evictions and writes are one program `Read [dirty victims on
//! FAST] -> Write [victims to SLOW, new blocks to FAST]`, so a victim's
//! slot is read before it is overwritten; device operations on contiguous
//! bytes of one member are merged.  Like the SMR baselines this policy
//! lives only in the simulator: its programs carry no bytes (the promoted
//! block's write is timed from the moment the read is planned, not from
//! when the slow read returns).

use std::collections::{BTreeMap, HashMap};

use mosaic_core::{Buf, DevOp, Frontend, Health, Io, Phase, PlanError, Program, Ref, Role, Staged};

/// Member index of the cache device.
pub const FAST: usize = 0;
/// Member index of the origin.
pub const SLOW: usize = 1;

#[derive(Debug, Clone, Copy)]
struct Entry {
    slot: u64,
    dirty: bool,
    stamp: u64,
}

/// Hit, miss and eviction counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LruStats {
    pub read_hits: u64,
    pub read_misses: u64,
    pub write_hits: u64,
    pub write_misses: u64,
    pub clean_evictions: u64,
    pub dirty_evictions: u64,
    pub bypassed_blocks: u64,
}

/// The LRU write-back block cache.
pub struct LruCache {
    block: u64,
    slots: u64,
    capacity: u64,
    map: HashMap<u64, Entry>,
    /// stamp -> logical block, oldest first.
    lru: BTreeMap<u64, u64>,
    clock: u64,
    next_fresh: u64,
    /// Slots given back by bypassing writes, reused first.
    free: Vec<u64>,
    stats: LruStats,
}

/// Device operations of one request, before they become programs.
#[derive(Default)]
struct Ops {
    victim_reads: Vec<DevOp>,
    writes: Vec<DevOp>,
}

fn op(member: usize, offset: u64, len: u64) -> DevOp {
    DevOp { member, offset, len, role: Role::Data, col: 0 }
}

/// Merge operations on contiguous bytes of one member (keeps order of first appearance per run).
fn merge(mut v: Vec<DevOp>) -> Vec<DevOp> {
    v.sort_by_key(|o| (o.member, o.offset));
    let mut out: Vec<DevOp> = Vec::with_capacity(v.len());
    for o in v {
        match out.last_mut() {
            Some(p) if p.member == o.member && p.offset + p.len == o.offset => p.len += o.len,
            _ => out.push(o),
        }
    }
    out
}

/// One program: an optional read phase, then an optional write phase, on
/// one scratch buffer (reads on disjoint ranges of it).
fn program(reads: Vec<DevOp>, writes: Vec<DevOp>) -> Option<Program> {
    let (reads, writes) = (merge(reads), merge(writes));
    if reads.is_empty() && writes.is_empty() {
        return None;
    }
    let mut p = Program::default();
    let total: u64 = reads.iter().map(|o| o.len).sum();
    let widest = writes.iter().map(|o| o.len).max().unwrap_or(0);
    let b = p.buf(Buf::Scratch(total.max(widest) as usize));
    let mut at = 0usize;
    let r: Vec<Io> = reads
        .into_iter()
        .map(|o| {
            let io = Io::new(o, Ref::new(b, at));
            at += o.len as usize;
            io
        })
        .collect();
    if !r.is_empty() {
        p.phases.push(Phase::Read(r));
    }
    if !writes.is_empty() {
        p.phases.push(Phase::write(writes.into_iter().map(|o| Io::new(o, Ref::new(b, 0))).collect()));
    }
    Some(p)
}

impl LruCache {
    /// A cache of `slots` blocks of `block` bytes in front of `capacity`
    /// logical bytes.
    pub fn new(block: u64, slots: u64, capacity: u64) -> Result<LruCache, PlanError> {
        if block == 0 || slots == 0 || capacity < block {
            return Err(PlanError::Geometry(format!("lru cache: block {block}, {slots} slots, capacity {capacity}: need block > 0, slots > 0, capacity >= block")));
        }
        Ok(LruCache { block, slots, capacity: capacity / block * block, map: HashMap::new(), lru: BTreeMap::new(), clock: 0, next_fresh: 0, free: Vec::new(), stats: LruStats::default() })
    }

    pub fn counters(&self) -> LruStats {
        self.stats
    }

    /// Cached blocks and how many are dirty.
    pub fn occupancy(&self) -> (u64, u64) {
        (self.map.len() as u64, self.map.values().filter(|e| e.dirty).count() as u64)
    }

    fn touch(&mut self, lb: u64, dirty: bool) {
        self.clock += 1;
        let e = self.map.get_mut(&lb).expect("touch a cached block");
        self.lru.remove(&e.stamp);
        e.stamp = self.clock;
        e.dirty |= dirty;
        self.lru.insert(self.clock, lb);
    }

    /// A slot for a new block: a fresh one, else the LRU block's (written
    /// back first when dirty).
    fn take_slot(&mut self, ops: &mut Ops) -> u64 {
        if let Some(s) = self.free.pop() {
            return s;
        }
        if self.next_fresh < self.slots {
            self.next_fresh += 1;
            return self.next_fresh - 1;
        }
        let (_, victim) = self.lru.pop_first().expect("a full cache has an LRU block");
        let e = self.map.remove(&victim).expect("the LRU block is cached");
        if e.dirty {
            self.stats.dirty_evictions += 1;
            ops.victim_reads.push(op(FAST, e.slot * self.block, self.block));
            ops.writes.push(op(SLOW, victim * self.block, self.block));
        } else {
            self.stats.clean_evictions += 1;
        }
        e.slot
    }

    fn insert(&mut self, lb: u64, dirty: bool, ops: &mut Ops) {
        let slot = self.take_slot(ops);
        self.clock += 1;
        self.map.insert(lb, Entry { slot, dirty, stamp: self.clock });
        self.lru.insert(self.clock, lb);
        ops.writes.push(op(FAST, slot * self.block, self.block));
    }

    fn check(&self, offset: u64, len: u64) -> Result<(), PlanError> {
        PlanError::check_request(offset, len, self.block, self.capacity)
    }

    fn write(&mut self, first: u64, n: u64) -> Staged {
        let mut ops = Ops::default();
        if n > self.slots {
            self.stats.bypassed_blocks += n;
            for lb in first..first + n {
                if let Some(e) = self.map.remove(&lb) {
                    self.lru.remove(&e.stamp);
                    self.free.push(e.slot);
                }
            }
            ops.writes.push(op(SLOW, first * self.block, n * self.block));
        }
        let cached = n <= self.slots;
        for lb in (first..first + n).filter(|_| cached) {
            if let Some(e) = self.map.get(&lb).copied() {
                self.stats.write_hits += 1;
                self.touch(lb, true);
                ops.writes.push(op(FAST, e.slot * self.block, self.block));
            } else {
                self.stats.write_misses += 1;
                self.insert(lb, true, &mut ops);
            }
        }
        Staged { fg: program(ops.victim_reads, ops.writes).into_iter().collect(), bg: vec![] }
    }

    fn read(&mut self, first: u64, n: u64) -> Staged {
        let mut fg = Vec::new();
        let mut promote = Ops::default();
        for lb in first..first + n {
            if let Some(e) = self.map.get(&lb).copied() {
                self.stats.read_hits += 1;
                self.touch(lb, false);
                fg.push(op(FAST, e.slot * self.block, self.block));
            } else {
                self.stats.read_misses += 1;
                fg.push(op(SLOW, lb * self.block, self.block));
                if n <= self.slots {
                    self.insert(lb, false, &mut promote);
                }
            }
        }
        Staged { fg: program(fg, vec![]).into_iter().collect(), bg: program(promote.victim_reads, promote.writes).into_iter().collect() }
    }
}

impl Frontend for LruCache {
    fn describe(&self) -> String {
        format!("lru write-back cache, {} x {} B blocks", self.slots, self.block)
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn block_size(&self) -> u64 {
        self.block
    }
    fn members(&self) -> usize {
        2
    }
    fn submit(&mut self, write: bool, offset: u64, len: u64, _now_ns: u64, _h: &Health) -> Result<Staged, PlanError> {
        self.check(offset, len)?;
        let (first, n) = (offset / self.block, len / self.block);
        Ok(if write { self.write(first, n) } else { self.read(first, n) })
    }
    fn stats(&self) -> Vec<(String, f64)> {
        let s = self.stats;
        let (cached, dirty) = self.occupancy();
        vec![
            ("read hits".into(), s.read_hits as f64),
            ("read misses".into(), s.read_misses as f64),
            ("write hits".into(), s.write_hits as f64),
            ("write misses".into(), s.write_misses as f64),
            ("clean evictions".into(), s.clean_evictions as f64),
            ("dirty evictions".into(), s.dirty_evictions as f64),
            ("bypassed blocks".into(), s.bypassed_blocks as f64),
            ("cached blocks".into(), cached as f64),
            ("dirty blocks".into(), dirty as f64),
        ]
    }
}
