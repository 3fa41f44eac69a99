//! The paper's baselines, as front ends for the replay engine and, for
//! the two SMR schemes, on real zoned drives.
//!
//! * **HDD RAID-5**: mosaic's `raid5` layout on conventional drives.
//! * **Segment RAID-5** (HWSR segments under RAID-5, [`segment`]): the
//!   `raid5` planner's member ops, updated *in place* on segment-based SMR
//!   drives.  A segment is a zone; a write at or beyond the zone's write
//!   pointer appends (the gap is filled), a write below it rewrites the
//!   segment:
//!
//!   ```text
//!     zone: [ valid ......... wp )            write at x < wp:
//!           read [start, wp) ─> reset zone ─> write [start, max(wp, x+len))
//!   ```
//! * **Sblock RAID-5** (Cassuto's S-blocks, [`sblock`]): the `raid5`
//!   planner over drives that each keep a circular log of 4 KiB pages over
//!   their sequential zones with a page map; writes append at the head, and
//!   when fewer than two zones are free the tail zone is cleaned (its valid
//!   pages read and appended at the head, the zone reset).
//!
//! **One planning path.**  The two SMR schemes plan a request once
//! (`baseline/work.rs`): the `raid5` stripe plan lowered with its real computation
//! (`mosaic_core::StripeMath`), each member operation turned into what the
//! scheme does on a zoned drive.  The simulator gets the device operations
//! as byte-less programs ([`Backend::write`]/[`Backend::read`], lowered
//! with `Program::io_only`, reads and ordered zone writes as two programs,
//! as it always timed them); the real engine gets the same operations as
//! one program with bytes ([`Backend::write_programs`]), run by the one
//! executor on emulated zoned members ([`real::RealBaseline`]).  At queue
//! depth 1 both issue the same per-member operations and zone resets
//! (`tests/baseline_real.rs`).
//!
//! The schemes' state (write pointers, page maps) lives in memory: they
//! are the paper's comparison schemes, for the simulator and for real
//! measurement, not an array kind a user creates, so they have no
//! superblock and no crash recovery.
//!
//! All of them (and DVS) get the same cache: [`CachedFrontend`] is a
//! chunk-granular LRU write-back cache plus an LRU read cache of the same
//! size in front of any [`Backend`], destaging the LRU chunks in address
//! order above its high-water mark.  With size 0 it is write-through.  The
//! cache keeps no bytes: with bytes it serves write-through only
//! ([`CachedFrontend::programs`]).

use std::collections::{BTreeMap, HashMap};

use mosaic_core::{FixedLayout, Frontend, Geometry, Health, Layout, Level, Plan, PlanError, Program, Staged};
use mosaic_drives::{DriveModel, ZoneState};

use crate::addr::{DvsConfig, Geo};
use crate::backlog::Backlog;
use crate::cache::{Bitmap, ReadCache};
use crate::engine::DvsParams;
use crate::frontend::DvsFrontend;
use crate::DvsError;

pub mod real;
pub mod sblock;
pub mod segment;
mod work;

pub use sblock::SblockRaid5;
pub use segment::SegmentRaid5;

/// Plans device work for logical byte ranges.
pub trait Backend: Send {
    fn describe(&self) -> String;
    fn capacity(&self) -> u64;
    fn block_size(&self) -> u64;
    fn members(&self) -> usize;
    /// Whether the scheme appends to zones, so its writes must reach each
    /// drive in the order planned ([`mosaic_core::Program::ordered`]).
    fn zoned(&self) -> bool {
        false
    }
    fn write(&mut self, offset: u64, len: u64, h: &Health) -> Result<Vec<Plan>, PlanError>;
    fn read(&mut self, offset: u64, len: u64, h: &Health) -> Result<Vec<Plan>, PlanError>;
    /// The write planned with real bytes (the client's `len` bytes are the
    /// programs' input), and the plans of the same device operations that
    /// [`Backend::write`] would have returned.  Schemes without a byte
    /// form refuse.
    fn write_programs(&mut self, _offset: u64, _len: u64, _h: &Health) -> Result<(Vec<Program>, Vec<Plan>), PlanError> {
        Err(PlanError::Invalid(format!("{}: no programs with bytes (counting plans for the simulator only)", self.describe())))
    }
    /// The read planned with real bytes (into the client's buffer), and
    /// the plans of the same device operations.
    fn read_programs(&mut self, _offset: u64, _len: u64, _h: &Health) -> Result<(Vec<Program>, Vec<Plan>), PlanError> {
        Err(PlanError::Invalid(format!("{}: no programs with bytes (counting plans for the simulator only)", self.describe())))
    }
}

/// Plain layout (HDD RAID-5).
pub struct Plain(pub FixedLayout);

impl Backend for Plain {
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn capacity(&self) -> u64 {
        self.0.capacity()
    }
    fn block_size(&self) -> u64 {
        self.0.block_size()
    }
    fn members(&self) -> usize {
        self.0.members()
    }
    fn write(&mut self, offset: u64, len: u64, h: &Health) -> Result<Vec<Plan>, PlanError> {
        Ok(vec![self.0.plan_write(offset, len, h)?])
    }
    fn read(&mut self, offset: u64, len: u64, h: &Health) -> Result<Vec<Plan>, PlanError> {
        Ok(vec![self.0.plan_read(offset, len, h)?])
    }
}

/// A chunk-granular LRU write-back cache and LRU read cache in front of a
/// backend.
pub struct CachedFrontend {
    pub b: Box<dyn Backend>,
    chunk: u64,
    cap: usize,
    high: usize,
    batch: usize,
    dirty: HashMap<u64, (u64, Bitmap)>,
    order: BTreeMap<u64, u64>,
    rcache: ReadCache,
    clock: u64,
    stats: [u64; 4],
    pub backlog: Backlog,
}

impl CachedFrontend {
    pub fn new(b: Box<dyn Backend>, chunk: u64, cache_chunks: usize) -> CachedFrontend {
        CachedFrontend { b, chunk, cap: cache_chunks, high: cache_chunks * 9 / 10, batch: crate::engine::BG_HELD, dirty: HashMap::new(), order: BTreeMap::new(), rcache: ReadCache::new(cache_chunks), clock: 0, stats: [0; 4], backlog: Backlog::none() }
    }

    /// See [`DvsFrontend::with_backlog`].
    pub fn with_backlog(mut self, models: &[Box<dyn DriveModel>]) -> CachedFrontend {
        self.backlog = Backlog::new(models);
        self
    }

    fn blocks(&self) -> usize {
        (self.chunk / self.b.block_size()) as usize
    }

    fn destage(&mut self, h: &Health) -> Result<(Vec<Plan>, usize), PlanError> {
        let mut picked: Vec<(u64, Bitmap)> = Vec::new();
        while picked.len() < self.batch {
            let Some((_, c)) = self.order.pop_first() else { break };
            let (_, bm) = self.dirty.remove(&c).unwrap();
            picked.push((c, bm));
        }
        picked.sort_by_key(|p| p.0);
        let blk = self.b.block_size();
        // Dirty block runs as byte extents, merged across chunks.
        let mut ext: Vec<(u64, u64)> = Vec::new();
        for (c, bm) in &picked {
            let mut i = 0;
            let nb = self.blocks();
            while i < nb {
                if !bm.get(i) {
                    i += 1;
                    continue;
                }
                let s = i;
                while i < nb && bm.get(i) {
                    i += 1;
                }
                let (a, b) = (c * self.chunk + s as u64 * blk, c * self.chunk + i as u64 * blk);
                match ext.last_mut() {
                    Some(l) if l.1 == a => l.1 = b,
                    _ => ext.push((a, b)),
                }
            }
        }
        self.stats[2] += picked.len() as u64;
        let mut out = Vec::new();
        for (a, b) in ext {
            out.extend(self.b.write(a, b - a, h)?);
        }
        Ok((out, picked.len()))
    }
}

impl CachedFrontend {
    /// A request as programs with real bytes, for the one executor: the
    /// backend's write-through programs.  The cache keeps no bytes, so a
    /// cached front end refuses (the simulator's cache is counting only).
    pub fn programs(&mut self, write: bool, offset: u64, len: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        check(offset, len, self.block_size(), self.capacity())?;
        if self.cap != 0 {
            return Err(PlanError::Invalid(format!("{}: a write cache that keeps bytes is not implemented; run write-through (cache size 0)", self.describe())));
        }
        let (p, _) = if write { self.b.write_programs(offset, len, h)? } else { self.b.read_programs(offset, len, h)? };
        Ok(p)
    }

    /// The backend's plans as programs for the simulator, ordered when the
    /// scheme appends to zones.
    fn staged(&self, fg: &[Plan], bg: &[Plan]) -> Staged {
        let mut st = Staged::io_only(fg, bg);
        for p in st.fg.iter_mut().chain(st.bg.iter_mut()) {
            p.ordered = self.b.zoned();
        }
        st
    }
}

fn check(offset: u64, len: u64, block: u64, cap: u64) -> Result<(), PlanError> {
    PlanError::check_request(offset, len, block, cap)
}

impl Frontend for CachedFrontend {
    fn describe(&self) -> String {
        if self.cap == 0 {
            self.b.describe()
        } else {
            format!("{} cache {} chunks", self.b.describe(), self.cap)
        }
    }
    fn capacity(&self) -> u64 {
        self.b.capacity()
    }
    fn block_size(&self) -> u64 {
        self.b.block_size()
    }
    fn members(&self) -> usize {
        self.b.members()
    }
    fn submit(&mut self, write: bool, offset: u64, len: u64, now_ns: u64, h: &Health) -> Result<Staged, PlanError> {
        check(offset, len, self.block_size(), self.capacity())?;
        let held = self.backlog.held(now_ns);
        if self.cap == 0 {
            let p = if write { self.b.write(offset, len, h)? } else { self.b.read(offset, len, h)? };
            return Ok(self.staged(&p, &[]));
        }
        let blk = self.block_size();
        let mut fg = Vec::new();
        let mut pos = offset;
        while pos < offset + len {
            let c = pos / self.chunk;
            let end = ((c + 1) * self.chunk).min(offset + len);
            let (a, b) = (((pos - c * self.chunk) / blk) as usize, ((end - c * self.chunk) / blk) as usize);
            let key = ((c >> 32) as u32, c as u32);
            if write {
                self.clock += 1;
                let nb = self.blocks();
                let e = self.dirty.entry(c).or_insert_with(|| (0, Bitmap::new(nb)));
                if e.0 != 0 {
                    self.order.remove(&e.0);
                    self.stats[0] += 1;
                }
                e.0 = self.clock;
                e.1.set(a, b);
                self.order.insert(self.clock, c);
                self.rcache.invalidate(key);
            } else {
                let hit = self.dirty.get(&c).is_some_and(|d| d.1.all(a, b)) || (!self.dirty.contains_key(&c) && self.rcache.hit(key));
                if hit {
                    self.stats[1] += 1;
                } else {
                    let cs = c * self.chunk;
                    let whole = (cs + self.chunk).min(self.capacity()) - cs;
                    fg.extend(self.b.read(cs, whole, h)?);
                    if !self.dirty.contains_key(&c) {
                        self.rcache.insert(key);
                    }
                }
            }
            pos = end;
        }
        let mut bg = Vec::new();
        if write {
            while self.dirty.len() > self.cap {
                fg.extend(self.destage(h)?.0);
            }
            // Counting destages in flight: wait for one more batch (see
            // `Dvs::write`), if there is a stripe's worth to write.
            let min = crate::engine::MIN_BATCH.min(self.cap).max(1);
            if self.dirty.len() >= min && self.dirty.len() + held > self.cap {
                fg.extend(self.destage(h)?.0);
            }
            // Background work in flight bounded (see `Dvs::write`).
            if held < crate::engine::BG_HELD && self.dirty.len() >= min && self.dirty.len() > self.high {
                let (p, n) = self.destage(h)?;
                self.backlog.add_plans(&p, now_ns, n);
                bg.extend(p);
            }
        }
        self.backlog.add_plans(&fg, now_ns, 0);
        Ok(self.staged(&fg, &bg))
    }
    fn stats(&self) -> Vec<(String, f64)> {
        vec![("write hits".into(), self.stats[0] as f64), ("read hits".into(), self.stats[1] as f64), ("destaged chunks".into(), self.stats[2] as f64)]
    }
}

/// What a named scheme is built with.
#[derive(Debug, Clone)]
pub struct SchemeSpec {
    pub chunk: u64,
    pub block: u64,
    /// Write (and read) cache size in chunks; 0: none.
    pub cache_chunks: usize,
    /// DVS parity chunks (1 or 2).
    pub parity: usize,
}

/// Zone size, zones and conventional zones of a zoned drive model.
pub fn zone_geometry(m: &dyn DriveModel) -> Option<(u64, u64, u64)> {
    let zs = m.zone_size()?;
    let rep = m.zone_report();
    let conv = rep.iter().filter(|z| z.state == ZoneState::Conventional).count() as u64;
    Some((zs, m.capacity() / zs, conv))
}

/// Build a scheme's front end by name: `dvs`, `dvs2` (k = 2),
/// `segment-raid5`, `sblock-raid5` (zoned drives), `raid5` (any drives).
pub fn build_frontend(name: &str, models: &[Box<dyn DriveModel>], spec: &SchemeSpec) -> Result<Box<dyn Frontend + Send>, DvsError> {
    let n = models.len();
    let zoned = || -> Result<(u64, u64, u64), DvsError> {
        let mut g = None;
        for m in models {
            let z = zone_geometry(m.as_ref()).ok_or_else(|| DvsError::Geometry(format!("{name} needs host-managed zoned drives (e.g. smr:default), got {}", m.describe())))?;
            if g.is_some_and(|x| x != z) {
                return Err(DvsError::Geometry(format!("{name} needs identical zoned drives")));
            }
            g = Some(z);
        }
        g.ok_or_else(|| DvsError::Geometry("no drives".into()))
    };
    Ok(match name {
        "dvs" | "dvs2" => {
            let (zs, zones, conv) = zoned()?;
            let k = if name == "dvs2" { 2 } else { spec.parity };
            let cfg = DvsConfig { block: spec.block, ..DvsConfig::new(n, k, spec.chunk, zs, zones, conv) };
            // Write-through: the twin of a real array on these drives (its
            // policy, metadata log and checkpoints), so a replay at queue
            // depth 1 issues the real array's operations; when the drives'
            // conventional zones cannot hold its metadata, the paper's model.
            if spec.cache_chunks == 0 {
                if let Ok(fe) = DvsFrontend::for_array(&cfg) {
                    return Ok(Box::new(fe));
                }
            }
            Box::new(DvsFrontend::new(Geo::new(cfg)?, DvsParams::cached(spec.cache_chunks)).with_backlog(models))
        }
        "segment-raid5" => {
            let (zs, zones, conv) = zoned()?;
            Box::new(CachedFrontend::new(Box::new(SegmentRaid5::new(n, spec.chunk, spec.block, zs, zones, conv)?), spec.chunk, spec.cache_chunks).with_backlog(models))
        }
        "sblock-raid5" => {
            let (zs, zones, conv) = zoned()?;
            Box::new(CachedFrontend::new(Box::new(SblockRaid5::new(n, spec.chunk, spec.block, zs, zones, conv)?), spec.chunk, spec.cache_chunks).with_backlog(models))
        }
        "raid5" => {
            let cap = models.iter().map(|m| m.capacity()).min().unwrap_or(0);
            let geo = Geometry::new(Level::Raid5, n, spec.chunk, spec.block, cap)?;
            Box::new(CachedFrontend::new(Box::new(Plain(FixedLayout::new(geo)?)), spec.chunk, spec.cache_chunks).with_backlog(models))
        }
        other => return Err(DvsError::Geometry(format!("unknown scheme {other:?}: expected dvs, dvs2, segment-raid5, sblock-raid5 or raid5"))),
    })
}

/// Names [`build_frontend`] builds that need zoned drives.
pub fn is_zoned_scheme(name: &str) -> bool {
    matches!(name, "dvs" | "dvs2" | "segment-raid5" | "sblock-raid5")
}

/// Conventional drives with the timing of the given drives (isolated
/// random service time `t_pos + x / R`): HDD RAID-5 "on the same drive
/// models" when the array's drives are zoned.  Non-zoned models are
/// rebuilt the same way, which keeps their simple timing.
pub fn conventional_twin(models: &[Box<dyn DriveModel>]) -> Vec<Box<dyn DriveModel>> {
    use mosaic_drives::{HddSimple, HddSimpleParams, ReqKind};
    models
        .iter()
        .map(|m| {
            let a = m.random_service_ns(ReqKind::Write, 0);
            let b = m.random_service_ns(ReqKind::Write, 1 << 20);
            let rate = if b > a { (1u64 << 20) as f64 / ((b - a) / 1e9) / 1024.0 } else { 1e9 };
            Box::new(HddSimple::new("conventional twin", HddSimpleParams { capacity: m.capacity(), t_pos_ms: a / 1e6, rate_kib_s: rate })) as Box<dyn DriveModel>
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_core::{Method, Role};
    use mosaic_drives::ReqKind;

    #[test]
    fn segment_raid5_appends_then_rewrites_segments() {
        let mut s = SegmentRaid5::new(3, 4096, 512, 64 << 10, 8, 1).unwrap();
        let h = Health::all_active(3);
        // First write of a stripe unit: an append at the zone start.
        let p = s.write(0, 4096, &h).unwrap();
        assert_eq!(s.appends, 2);
        assert_eq!(s.rewrites, 0);
        assert!(p.iter().flat_map(|p| p.writes()).all(|w| w.role != Role::ZoneReset));
        // Overwrite: read the segment, reset, rewrite it whole.
        let p = s.write(0, 4096, &h).unwrap();
        assert_eq!(s.rewrites, 2);
        let resets = p.iter().flat_map(|p| p.writes()).filter(|w| w.role == Role::ZoneReset).count();
        assert_eq!(resets, 2);
        let seg_reads: Vec<_> = p.iter().flat_map(|p| &p.stripes).filter(|s| s.method == Method::Read).flat_map(|s| &s.reads).collect();
        assert_eq!(seg_reads.len(), 2, "the valid part of each segment is read back");
        assert!(seg_reads.iter().all(|r| r.offset % (64 << 10) == 0 && r.len == 4096));
    }

    #[test]
    fn sblock_log_appends_and_cleans_the_tail() {
        let mut s = SblockRaid5::new(3, 4096, 512, 16 << 10, 10, 1).unwrap();
        let h = Health::all_active(3);
        let cap = s.capacity();
        let mut resets = 0;
        for i in 0..200u64 {
            let p = s.write((i * 4096) % cap, 4096, &h).unwrap();
            resets += p.iter().flat_map(|p| p.writes()).filter(|w| w.role == Role::ZoneReset).count();
            // Every write goes to where its member's log head was.
            for w in p.iter().flat_map(|p| p.writes()).filter(|w| w.role != Role::ZoneReset) {
                assert!(w.offset >= 16 << 10);
            }
        }
        assert!(resets > 0, "the circular log cleaned zones");
    }

    /// A member's reads (sorted), and its writes and resets in order, as
    /// (offset, length; resets u64::MAX).
    type MemberOps = (Vec<(u64, u64)>, Vec<(u64, u64)>);

    fn per_member(programs: &[mosaic_core::Program]) -> Vec<MemberOps> {
        use mosaic_core::Phase;
        let mut out = vec![(vec![], vec![]); 4];
        for ph in programs.iter().flat_map(|p| &p.phases) {
            match ph {
                Phase::Read(ios) => ios.iter().for_each(|i| out[i.op.member].0.push((i.op.offset, i.op.len))),
                Phase::Write { ops, .. } => ops.iter().for_each(|i| out[i.op.member].1.push((i.op.offset, i.op.len))),
                Phase::Reset(ops) => ops.iter().for_each(|o| out[o.member].1.push((o.offset, u64::MAX))),
                Phase::Compute(_) => {}
                Phase::Flush(_) => panic!("the baselines flush nothing"),
            }
        }
        for m in &mut out {
            m.0.sort_unstable();
        }
        out
    }

    #[test]
    fn byte_programs_issue_the_simulators_operations_in_its_order() {
        use rand::{Rng, SeedableRng};
        let h = Health::all_active(4);
        let schemes: Vec<Box<dyn Backend>> = vec![Box::new(SegmentRaid5::new(4, 4096, 512, 32 << 10, 12, 1).unwrap()), Box::new(SblockRaid5::new(4, 4096, 4096, 32 << 10, 12, 1).unwrap())];
        for mut s in schemes {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
            let (cap, blk) = (s.capacity(), s.block_size());
            let (mut resets, mut extra) = (0, 0);
            for _ in 0..400 {
                let len = rng.gen_range(1..=20u64) * blk;
                let off = rng.gen_range(0..=(cap / 2 - len) / blk) * blk;
                let write = rng.gen_range(0..4) != 0;
                let (progs, plans) = if write { s.write_programs(off, len, &h).unwrap() } else { s.read_programs(off, len, &h).unwrap() };
                let counted: Vec<_> = plans.iter().map(mosaic_core::Program::io_only).collect();
                assert_eq!(per_member(&progs), per_member(&counted), "{} {off}+{len}", s.describe());
                let (mut c, mut d) = (mosaic_core::OpCounts::default(), mosaic_core::OpCounts::default());
                progs.iter().for_each(|p| c.merge(&p.counts()));
                counted.iter().for_each(|p| d.merge(&p.counts()));
                assert_eq!(c, d);
                assert!(progs.iter().all(|p| p.validate().is_ok() && p.ordered));
                resets += c.zone_resets;
                extra += plans[0].stripes.iter().filter(|s| s.method == Method::Read).count();
            }
            assert!(resets > 0 && extra > 0, "{}: segment rewrites / cleaning happened", s.describe());
        }
    }

    #[test]
    fn twins_keep_the_timing() {
        let z = mosaic_drives::preset("smr:default").unwrap().build(Some(10 << 30));
        let t = conventional_twin(std::slice::from_ref(&z));
        for len in [4096u64, 1 << 20] {
            let (a, b) = (z.random_service_ns(ReqKind::Read, len), t[0].random_service_ns(ReqKind::Read, len));
            assert!((a - b).abs() / a < 1e-6, "{a} vs {b}");
        }
        assert!(t[0].zone_size().is_none());
    }
}
