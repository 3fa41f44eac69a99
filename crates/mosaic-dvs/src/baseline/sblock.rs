//! Sblock RAID-5 (Cassuto's S-blocks): the `raid5` planner over drives
//! whose sequential zones are grouped into S-blocks of [`SBLOCK_ZONES`]
//! zones (one of all of them on a small drive); each S-block is a circular
//! log of 4 KiB pages holding a fixed range of the drive's logical pages
//! (`z - 3` of its `z` zones), with a page map in memory.  Logs are per
//! S-block, as in Cassuto et al., so a log wraps (and cleans) once its own
//! range has been rewritten by about the S-block's spare zones, not only
//! after a whole drive's worth of writes.
//!
//! ```text
//!   zones:   [ tail ........ | ........ | head ...   | free | free ]
//!   write:   pages appended at the head (the map points at the new place)
//!   clean:   fewer free zones than the write needs: the tail zone's valid
//!            pages read, appended at the head, the tail zone reset
//!   read:    through the map (a page never written reads as zeros)
//! ```
//!
//! With bytes, every page has a source in the request's program: a device
//! read of its place when that place was written before the request, else
//! the bytes the request itself wrote there (`pending`) — a page that
//! cleaning moved within the request is still read where the plan says,
//! as the simulator times it, but its bytes come from where they really
//! are.  A real run writes whole pages, so it needs requests (and stripe
//! units) of whole 4 KiB pages.

use std::collections::HashMap;
use std::ops::Range;

use mosaic_core::{DevOp, FixedLayout, Geometry, Health, Layout, Level, PlanError, Ref, Role};

use super::work::{work_backend, Piece, Work};
use crate::frontend::coalesce;

pub(crate) const PAGE: u64 = 4096;
/// Zones per S-block (fewer when the drive has fewer sequential zones).
pub const SBLOCK_ZONES: u64 = 8;
const NOPAGE: u64 = u64::MAX;

/// One drive's circular log of pages over its sequential zones.
struct Log {
    member: usize,
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
    /// Places written by the request being planned -> their bytes.
    pending: HashMap<u64, Ref>,
}

/// Where each page read lands: the coalesced reads and their buffers.
struct Landed(Vec<(DevOp, Ref)>);

impl Landed {
    /// Where the byte read at device `offset` lands (`offset` is one of
    /// the places read, so some read covers it).
    fn at(&self, offset: u64) -> Ref {
        let i = self.0.partition_point(|(op, _)| op.offset + op.len <= offset);
        self.0.get(i).map_or(Ref::new(0, 0), |(op, at)| at.at(offset.saturating_sub(op.offset) as usize))
    }
}

impl Log {
    fn new(member: usize, base_zone: u64, zones: u64, zone: u64) -> Log {
        Log { member, base_zone, zones, ppz: zone / PAGE, head: 0, head_fill: 0, tail: 0, used: 1, map: HashMap::new(), rev: HashMap::new(), pending: HashMap::new() }
    }
    fn loc_offset(&self, loc: u64) -> u64 {
        (self.base_zone + loc / self.ppz) * self.ppz * PAGE + (loc % self.ppz) * PAGE
    }
    fn free(&self) -> u64 {
        self.zones - self.used
    }
    fn op(&self, offset: u64, role: Role) -> DevOp {
        DevOp { member: self.member, offset, len: PAGE, role, col: 0 }
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

    /// Read the places `locs` (coalesced); each one's bytes: what this
    /// request wrote there, else the device read.
    fn read_locs(&self, work: &mut Work, lane: Option<usize>, locs: &[u64], role: Role) -> Vec<Ref> {
        let ops = coalesce(locs.iter().map(|&l| self.op(self.loc_offset(l), role)).collect());
        let landed = Landed(ops.into_iter().map(|op| (op, work.read(lane, op))).collect());
        locs.iter().map(|l| self.pending.get(l).copied().unwrap_or_else(|| landed.at(self.loc_offset(*l)))).collect()
    }

    /// Write `pages` at the head, cleaning the tail first if needed; page
    /// `p`'s bytes at `src` + (p - first page) pages.
    fn write(&mut self, work: &mut Work, pages: Range<u64>, role: Role, src: Ref) {
        // Room for the pages and a zone to clean into (a full range of
        // `z - 3` zones and a partial head leave two).
        let need = (pages.end - pages.start).div_ceil(self.ppz) + 1;
        let mut guard = 0;
        while self.free() < need && guard < self.zones {
            self.clean(work);
            guard += 1;
        }
        let first = pages.start;
        let placed: Vec<(u64, Ref)> = pages.map(|p| (self.append(p), if work.has_bytes() { src.at(((p - first) * PAGE) as usize) } else { src })).collect();
        self.put(work, &placed, role);
    }

    /// Write pages at their new places `(loc, bytes)`, merged in order.
    fn put(&mut self, work: &mut Work, placed: &[(u64, Ref)], role: Role) {
        let ops: Vec<DevOp> = placed.iter().map(|&(l, _)| self.op(self.loc_offset(l), role)).collect();
        let mut rest = placed;
        for op in merge_in_order(ops, self.ppz * PAGE) {
            let (mine, after) = rest.split_at((op.len / PAGE) as usize);
            let pieces: Vec<Piece> = mine.iter().enumerate().map(|(i, &(_, src))| Piece { off: i as u64 * PAGE, src, len: PAGE }).collect();
            work.write(op, &pieces);
            rest = after;
        }
        self.pending.extend(placed.iter().copied());
    }

    fn clean(&mut self, work: &mut Work) {
        if self.used <= 1 {
            return;
        }
        let t = self.tail;
        let live: Vec<u64> = self.rev.remove(&t).map(|r| r.into_iter().filter(|&p| p != NOPAGE).collect()).unwrap_or_default();
        let old: Vec<u64> = live.iter().map(|p| self.map[p]).collect();
        let placed: Vec<u64> = live.iter().map(|&p| self.append(p)).collect();
        let bytes = self.read_locs(work, None, &old, Role::Data);
        let placed: Vec<(u64, Ref)> = placed.into_iter().zip(bytes).collect();
        self.put(work, &placed, Role::Data);
        work.reset(self.member, (self.base_zone + t) * self.ppz * PAGE);
        let ppz = self.ppz;
        self.pending.retain(|l, _| l / ppz != t);
        self.tail = (t + 1) % self.zones;
        self.used -= 1;
    }

    /// Read `[offset, offset + len)` of this member's logical space
    /// through the map into `target` (a layout read target).
    fn read(&self, work: &mut Work, lane: usize, r: &DevOp, target: Ref) {
        let pages = r.offset / PAGE..(r.offset + r.len).div_ceil(PAGE);
        let found: Vec<(u64, u64)> = pages.clone().filter_map(|p| self.map.get(&p).map(|&l| (p, l))).collect();
        let locs: Vec<u64> = found.iter().map(|f| f.1).collect();
        let srcs = self.read_locs(work, Some(lane), &locs, r.role);
        if !work.has_bytes() {
            return;
        }
        let mut src = found.iter().map(|f| f.0).zip(srcs).peekable();
        for p in pages {
            let (a, b) = ((p * PAGE).max(r.offset), ((p + 1) * PAGE).min(r.offset + r.len));
            let from = match src.next_if(|s| s.0 == p) {
                Some((_, s)) => s.at((a - p * PAGE) as usize),
                None => work.zeros(b - a),
            };
            work.copy(target.at((a - r.offset) as usize), from, b - a);
        }
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

/// RAID-5 over drives whose S-blocks each run a circular log.
pub struct SblockRaid5 {
    layout: FixedLayout,
    /// Per member, its S-blocks' logs.
    logs: Vec<Vec<Log>>,
    zone: u64,
    /// Logical pages per S-block.
    span: u64,
}

impl SblockRaid5 {
    /// Each drive's sequential zones form S-blocks of [`SBLOCK_ZONES`] zones
    /// (left-over zones unused), or one S-block when there are fewer than
    /// twice that; an S-block of `z`
    /// zones holds `z - 3` zones of logical pages: a full range and a partly
    /// written head still leave the two free zones a write of up to a zone
    /// checks for.
    pub fn new(n: usize, unit: u64, block: u64, zone: u64, zones: u64, conventional: u64) -> Result<SblockRaid5, PlanError> {
        if zone % PAGE != 0 || zones < conventional + 4 {
            return Err(PlanError::Geometry(format!("sblock-raid5 needs zones of whole 4 KiB pages and at least 4 sequential zones, got {zones} zones of {zone} bytes")));
        }
        let seq = zones - conventional;
        // A drive too small for two S-blocks is one.
        let z = if seq < 2 * SBLOCK_ZONES { seq } else { SBLOCK_ZONES };
        let count = seq / z;
        let span = (z - 3) * zone / PAGE;
        let layout = FixedLayout::new(Geometry::new(Level::Raid5, n, unit, block, count * span * PAGE)?)?;
        let logs = (0..n).map(|m| (0..count).map(|s| Log::new(m, conventional + s * z, z, zone)).collect()).collect();
        Ok(SblockRaid5 { layout, logs, zone, span })
    }

    /// `[offset, offset + len)` of a member's logical space cut at S-block
    /// boundaries: (S-block, piece offset, piece length).
    fn cut(&self, offset: u64, len: u64) -> Vec<(usize, u64, u64)> {
        let span = self.span * PAGE;
        let mut out = Vec::new();
        let (mut at, end) = (offset, offset + len);
        while at < end {
            let s = at / span;
            let e = end.min((s + 1) * span);
            out.push((s as usize, at, e - at));
            at = e;
        }
        out
    }

    /// Read a layout read `r` through its S-blocks' maps into `target`.
    fn read_op(&self, work: &mut Work, lane: usize, r: &DevOp, target: Ref) {
        for (s, at, len) in self.cut(r.offset, r.len) {
            let t = if work.has_bytes() { target.at((at - r.offset) as usize) } else { target };
            self.logs[r.member][s].read(work, lane, &DevOp { offset: at, len, ..*r }, t);
        }
    }

    /// Append a layout write `w` (bytes at `src`) to its S-blocks' logs.
    fn write_op(&mut self, work: &mut Work, w: &DevOp, src: Ref) {
        for (s, at, len) in self.cut(w.offset, w.len) {
            let from = if work.has_bytes() { src.at((at - w.offset) as usize) } else { src };
            self.logs[w.member][s].write(work, at / PAGE..(at + len).div_ceil(PAGE), w.role, from);
        }
    }

    /// Whether requests can be run with bytes: whole pages only.
    pub fn check_bytes(&self) -> Result<(), PlanError> {
        let g = self.layout.geometry();
        if g.block % PAGE != 0 || g.unit % PAGE != 0 {
            return Err(PlanError::Geometry(format!(
                "sblock-raid5 on real drives writes whole 4 KiB pages: it needs a block size and stripe unit of whole pages, got {} and {} (a smaller write would need a fill read the scheme does not make)",
                g.block, g.unit
            )));
        }
        Ok(())
    }

    /// A new request: no place is written by it yet.
    fn begin(&mut self) {
        for l in self.logs.iter_mut().flatten() {
            l.pending.clear();
        }
    }

    fn write_work(&mut self, offset: u64, len: u64, h: &Health, bytes: bool) -> Result<Work, PlanError> {
        self.begin();
        let plan = self.layout.plan_write(offset, len, h)?;
        let mut work = Work::new(&self.layout, &plan, Some(len as usize), bytes)?;
        let (mut ri, mut wi) = (0, 0);
        for (lane, s) in plan.stripes.iter().enumerate() {
            for r in &s.reads {
                let at = work.target(ri);
                self.read_op(&mut work, lane, r, at);
                ri += 1;
            }
            for w in &s.writes {
                let src = work.source(wi);
                self.write_op(&mut work, w, src);
                wi += 1;
            }
        }
        Ok(work)
    }

    fn read_work(&mut self, offset: u64, len: u64, h: &Health, bytes: bool) -> Result<Work, PlanError> {
        self.begin();
        let plan = self.layout.plan_read(offset, len, h)?;
        let mut work = Work::new(&self.layout, &plan, None, bytes)?;
        let mut ri = 0;
        for (lane, s) in plan.stripes.iter().enumerate() {
            for r in &s.reads {
                let at = work.target(ri);
                self.read_op(&mut work, lane, r, at);
                ri += 1;
            }
        }
        Ok(work)
    }
}

work_backend!(SblockRaid5, "sblock-raid5", "zone");
