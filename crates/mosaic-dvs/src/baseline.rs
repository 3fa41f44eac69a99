//! The paper's baselines, as front ends for the replay engine.
//!
//! * **HDD RAID-5**: mosaic's `raid5` layout on conventional drives.
//! * **Segment RAID-5** (HWSR segments under RAID-5): the `raid5` planner's
//!   member ops, updated *in place* on segment-based SMR drives.  A segment
//!   is a zone; a write at or beyond the zone's write pointer appends (the
//!   gap is filled), a write below it rewrites the segment:
//!
//!   ```text
//!     zone: [ valid ......... wp )            write at x < wp:
//!           read [start, wp) ─> reset zone ─> write [start, max(wp, x+len))
//!   ```
//! * **Sblock RAID-5** (Cassuto's S-blocks): the `raid5` planner over
//!   drives that each keep a circular log of 4 KiB pages over their
//!   sequential zones with a page map; writes append at the head, and when
//!   fewer than two zones are free the tail zone is cleaned (its valid
//!   pages read and appended at the head, the zone reset).
//!
//! All of them (and DVS) get the same cache: [`CachedFrontend`] is a
//! chunk-granular LRU write-back cache plus an LRU read cache of the same
//! size in front of any [`Backend`], destaging the LRU chunks in address
//! order above its high-water mark.  With size 0 it is write-through.

use std::collections::{BTreeMap, HashMap};

use mosaic_core::{DevOp, FixedLayout, Frontend, Geometry, Health, Layout, Level, Method, Plan, PlanError, Role, Staged, StripePlan};
use mosaic_drives::{DriveModel, ZoneState};

use crate::addr::{DvsConfig, Geo};
use crate::backlog::Backlog;
use crate::cache::{Bitmap, ReadCache};
use crate::engine::DvsParams;
use crate::frontend::{coalesce, DvsFrontend};
use crate::DvsError;

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

fn sp(stripe: u64, method: Method, reads: Vec<DevOp>, writes: Vec<DevOp>) -> StripePlan {
    StripePlan { stripe, method, touched: vec![], reads, writes, span: (0, 0), missing: vec![] }
}

/// Split a plan into a read plan (keeping each stripe's method) and one
/// write plan, so zone writes enter the drive queues in planning order.
fn split(plan: Plan, extra_reads: Vec<DevOp>, writes: Vec<DevOp>) -> Vec<Plan> {
    let mut rp: Vec<StripePlan> = plan.stripes.into_iter().map(|s| sp(s.stripe, s.method, s.reads, vec![])).collect();
    if !extra_reads.is_empty() {
        rp.push(sp(0, Method::Read, extra_reads, vec![]));
    }
    let mut out = vec![Plan { stripes: rp }];
    if !writes.is_empty() {
        out.push(Plan { stripes: vec![sp(0, Method::Direct, vec![], writes)] });
    }
    out
}

/// RAID-5 over segment-based SMR drives that update segments in place.
pub struct SegmentRaid5 {
    layout: FixedLayout,
    zone: u64,
    base: u64,
    /// (member, zone) -> write pointer.
    wp: HashMap<(usize, u64), u64>,
    pub rewrites: u64,
    pub appends: u64,
}

impl SegmentRaid5 {
    /// `zone`: zone size; `conventional`: leading conventional zones
    /// (skipped); `zones`: zones per drive.
    pub fn new(n: usize, unit: u64, block: u64, zone: u64, zones: u64, conventional: u64) -> Result<SegmentRaid5, PlanError> {
        let per = (zones.saturating_sub(conventional)) * zone;
        let layout = FixedLayout::new(Geometry::new(Level::Raid5, n, unit, block, per)?)?;
        Ok(SegmentRaid5 { layout, zone, base: conventional * zone, wp: HashMap::new(), rewrites: 0, appends: 0 })
    }
}

impl Backend for SegmentRaid5 {
    fn describe(&self) -> String {
        format!("segment-raid5 {} seg {}K", self.layout.describe(), self.zone >> 10)
    }
    fn capacity(&self) -> u64 {
        self.layout.capacity()
    }
    fn block_size(&self) -> u64 {
        self.layout.block_size()
    }
    fn members(&self) -> usize {
        self.layout.members()
    }
    fn zoned(&self) -> bool {
        true
    }
    fn write(&mut self, offset: u64, len: u64, h: &Health) -> Result<Vec<Plan>, PlanError> {
        let mut plan = self.layout.plan_write(offset, len, h)?;
        let mut groups: BTreeMap<(usize, u64), (u64, u64, Role)> = BTreeMap::new();
        for s in plan.stripes.iter_mut() {
            for r in s.reads.iter_mut() {
                r.offset += self.base;
            }
            for w in &s.writes {
                let off = w.offset + self.base;
                let z = off / self.zone;
                let g = groups.entry((w.member, z)).or_insert((off, off + w.len, w.role));
                g.0 = g.0.min(off);
                g.1 = g.1.max(off + w.len);
            }
        }
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for ((m, z), (lo, hi, role)) in groups {
            let start = z * self.zone;
            let wp = self.wp.entry((m, z)).or_insert(start);
            if lo >= *wp {
                self.appends += 1;
                writes.push(DevOp { member: m, offset: *wp, len: hi - *wp, role, col: 0 });
            } else {
                self.rewrites += 1;
                reads.push(DevOp { member: m, offset: start, len: *wp - start, role: Role::Data, col: 0 });
                writes.push(DevOp { member: m, offset: start, len: 0, role: Role::ZoneReset, col: 0 });
                writes.push(DevOp { member: m, offset: start, len: hi.max(*wp) - start, role, col: 0 });
            }
            *wp = hi.max(*wp);
        }
        Ok(split(plan, reads, writes))
    }
    fn read(&mut self, offset: u64, len: u64, h: &Health) -> Result<Vec<Plan>, PlanError> {
        let mut plan = self.layout.plan_read(offset, len, h)?;
        for s in plan.stripes.iter_mut() {
            for r in s.reads.iter_mut() {
                r.offset += self.base;
            }
        }
        Ok(vec![plan])
    }
}

const PAGE: u64 = 4096;
const NOPAGE: u64 = u64::MAX;

/// One drive's circular log of pages over its sequential zones.
struct Log {
    base_zone: u64,
    zones: u64,
    ppz: u64,
    head: u64,
    head_fill: u64,
    tail: u64,
    /// Zones in use, tail..=head.
    used: u64,
    map: HashMap<u64, u64>,
    /// Zone -> slot -> page.
    rev: HashMap<u64, Vec<u64>>,
}

impl Log {
    fn new(base_zone: u64, zones: u64, zone: u64) -> Log {
        Log { base_zone, zones, ppz: zone / PAGE, head: 0, head_fill: 0, tail: 0, used: 1, map: HashMap::new(), rev: HashMap::new() }
    }
    fn loc_offset(&self, loc: u64) -> u64 {
        (self.base_zone + loc / self.ppz) * self.ppz * PAGE + (loc % self.ppz) * PAGE
    }
    fn free(&self) -> u64 {
        self.zones - self.used
    }
    /// Append `page` at the head; returns its location.
    fn append(&mut self, page: u64) -> u64 {
        if self.head_fill == self.ppz {
            self.head = (self.head + 1) % self.zones;
            self.head_fill = 0;
            self.used += 1;
        }
        let loc = self.head * self.ppz + self.head_fill;
        self.head_fill += 1;
        if let Some(old) = self.map.insert(page, loc) {
            if let Some(r) = self.rev.get_mut(&(old / self.ppz)) {
                r[(old % self.ppz) as usize] = NOPAGE;
            }
        }
        let ppz = self.ppz as usize;
        self.rev.entry(self.head).or_insert_with(|| vec![NOPAGE; ppz])[(loc % self.ppz) as usize] = page;
        loc
    }
    /// Write `pages` at the head, cleaning the tail first if needed.
    fn write(&mut self, member: usize, pages: std::ops::Range<u64>, role: Role, reads: &mut Vec<DevOp>, writes: &mut Vec<DevOp>) {
        let need = (pages.end - pages.start).div_ceil(self.ppz) + 2;
        let mut guard = 0;
        while self.free() < need && guard < self.zones {
            self.clean(member, reads, writes);
            guard += 1;
        }
        let mut ops = Vec::new();
        for p in pages {
            let loc = self.append(p);
            ops.push(DevOp { member, offset: self.loc_offset(loc), len: PAGE, role, col: 0 });
        }
        writes.extend(merge_in_order(ops, self.ppz * PAGE));
    }
    fn clean(&mut self, member: usize, reads: &mut Vec<DevOp>, writes: &mut Vec<DevOp>) {
        if self.used <= 1 {
            return;
        }
        let t = self.tail;
        let live: Vec<u64> = self.rev.remove(&t).map(|r| r.into_iter().filter(|&p| p != NOPAGE).collect()).unwrap_or_default();
        let mut rops = Vec::new();
        let mut wops = Vec::new();
        for p in live {
            let old = self.map[&p];
            rops.push(DevOp { member, offset: self.loc_offset(old), len: PAGE, role: Role::Data, col: 0 });
            let loc = self.append(p);
            wops.push(DevOp { member, offset: self.loc_offset(loc), len: PAGE, role: Role::Data, col: 0 });
        }
        reads.extend(coalesce(rops));
        writes.extend(merge_in_order(wops, self.ppz * PAGE));
        writes.push(DevOp { member, offset: (self.base_zone + t) * self.ppz * PAGE, len: 0, role: Role::ZoneReset, col: 0 });
        self.tail = (t + 1) % self.zones;
        self.used -= 1;
    }
    fn read(&self, member: usize, pages: std::ops::Range<u64>, role: Role) -> Vec<DevOp> {
        let ops = pages.filter_map(|p| self.map.get(&p)).map(|&l| DevOp { member, offset: self.loc_offset(l), len: PAGE, role, col: 0 }).collect();
        coalesce(ops)
    }
}

/// Merge contiguous ops keeping their order (appends must stay in order),
/// never across a zone boundary.
fn merge_in_order(ops: Vec<DevOp>, zone: u64) -> Vec<DevOp> {
    let mut out: Vec<DevOp> = Vec::new();
    for o in ops {
        if let Some(l) = out.last_mut() {
            if l.member == o.member && l.role == o.role && l.offset + l.len == o.offset && o.offset % zone != 0 {
                l.len += o.len;
                continue;
            }
        }
        out.push(o);
    }
    out
}

/// RAID-5 over drives that each run an S-block circular log.
pub struct SblockRaid5 {
    layout: FixedLayout,
    logs: Vec<Log>,
    zone: u64,
}

impl SblockRaid5 {
    /// Each drive's logical space is 80% of its sequential zones.
    pub fn new(n: usize, unit: u64, block: u64, zone: u64, zones: u64, conventional: u64) -> Result<SblockRaid5, PlanError> {
        if zone % PAGE != 0 || zones < conventional + 4 {
            return Err(PlanError::Geometry(format!("sblock-raid5 needs zones of whole 4 KiB pages and at least 4 sequential zones, got {zones} zones of {zone} bytes")));
        }
        let seq = zones - conventional;
        let per = seq * zone / 10 * 8;
        let layout = FixedLayout::new(Geometry::new(Level::Raid5, n, unit, block, per)?)?;
        Ok(SblockRaid5 { layout, logs: (0..n).map(|_| Log::new(conventional, seq, zone)).collect(), zone })
    }
}

impl Backend for SblockRaid5 {
    fn describe(&self) -> String {
        format!("sblock-raid5 {} zone {}K", self.layout.describe(), self.zone >> 10)
    }
    fn capacity(&self) -> u64 {
        self.layout.capacity()
    }
    fn block_size(&self) -> u64 {
        self.layout.block_size()
    }
    fn members(&self) -> usize {
        self.layout.members()
    }
    fn zoned(&self) -> bool {
        true
    }
    fn write(&mut self, offset: u64, len: u64, h: &Health) -> Result<Vec<Plan>, PlanError> {
        let mut plan = self.layout.plan_write(offset, len, h)?;
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for s in plan.stripes.iter_mut() {
            let rs = std::mem::take(&mut s.reads);
            for r in rs {
                s.reads.extend(self.logs[r.member].read(r.member, r.offset / PAGE..(r.offset + r.len).div_ceil(PAGE), r.role));
            }
            for w in &s.writes {
                self.logs[w.member].write(w.member, w.offset / PAGE..(w.offset + w.len).div_ceil(PAGE), w.role, &mut reads, &mut writes);
            }
        }
        Ok(split(plan, reads, writes))
    }
    fn read(&mut self, offset: u64, len: u64, h: &Health) -> Result<Vec<Plan>, PlanError> {
        let mut plan = self.layout.plan_read(offset, len, h)?;
        for s in plan.stripes.iter_mut() {
            let rs = std::mem::take(&mut s.reads);
            for r in rs {
                s.reads.extend(self.logs[r.member].read(r.member, r.offset / PAGE..(r.offset + r.len).div_ceil(PAGE), r.role));
            }
        }
        Ok(vec![plan])
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
        CachedFrontend { b, chunk, cap: cache_chunks, high: cache_chunks * 9 / 10, batch: 256, dirty: HashMap::new(), order: BTreeMap::new(), rcache: ReadCache::new(cache_chunks), clock: 0, stats: [0; 4], backlog: Backlog::none() }
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
    if offset % block != 0 || len % block != 0 {
        return Err(PlanError::Unaligned { offset, len, block });
    }
    if offset.checked_add(len).is_none_or(|e| e > cap) {
        return Err(PlanError::OutOfRange { offset, len, capacity: cap });
    }
    Ok(())
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
            if self.dirty.len() >= min && self.dirty.len() + held > self.high {
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
