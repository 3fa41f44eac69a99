//! Segment RAID-5: the `raid5` planner's member operations updated *in
//! place* on segment-based SMR drives.  A segment is a zone; per request,
//! the writes of each (member, zone) form one group `[lo, hi)`:
//!
//! ```text
//!   zone: [ valid ......... wp )
//!   lo >= wp: append  write [wp, hi)            gap [wp, lo) written as zeros
//!   lo <  wp: rewrite read [start, wp) ─> reset ─> write [start, max(wp, hi))
//!             assembled: the old bytes, then the new data and code over them
//! ```
//!
//! Every read (the stripes' old data and code, the segments read back)
//! happens before any write of the request, so the old bytes are the ones
//! on the drive before it.

use std::collections::{BTreeMap, HashMap};

use mosaic_core::{FixedLayout, Geometry, Health, Layout, Level, PlanError, Role};

use super::work::{work_backend, Piece, Work};

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

/// One (member, zone)'s writes in a request.
struct Group {
    lo: u64,
    hi: u64,
    role: Role,
    /// (device offset, source, length) of each layout write.
    pieces: Vec<(u64, mosaic_core::Ref, u64)>,
}

impl SegmentRaid5 {
    /// `zone`: zone size; `conventional`: leading conventional zones
    /// (skipped); `zones`: zones per drive.
    pub fn new(n: usize, unit: u64, block: u64, zone: u64, zones: u64, conventional: u64) -> Result<SegmentRaid5, PlanError> {
        let per = (zones.saturating_sub(conventional)) * zone;
        let layout = FixedLayout::new(Geometry::new(Level::Raid5, n, unit, block, per)?)?;
        Ok(SegmentRaid5 { layout, zone, base: conventional * zone, wp: HashMap::new(), rewrites: 0, appends: 0 })
    }

    /// Whether requests can be run with bytes: a stripe unit never
    /// crosses a zone end (the drive refuses such a write).
    pub fn check_bytes(&self) -> Result<(), PlanError> {
        let u = self.layout.geometry().unit;
        if self.zone % u != 0 {
            return Err(PlanError::Geometry(format!("segment-raid5 on real drives needs zones of whole stripe units, got zones of {} bytes and units of {u}", self.zone)));
        }
        Ok(())
    }

    fn write_work(&mut self, offset: u64, len: u64, h: &Health, bytes: bool) -> Result<Work, PlanError> {
        let plan = self.layout.plan_write(offset, len, h)?;
        let mut work = Work::new(&self.layout, &plan, Some(len as usize), bytes)?;
        let mut groups: BTreeMap<(usize, u64), Group> = BTreeMap::new();
        let (mut ri, mut wi) = (0, 0);
        for (lane, s) in plan.stripes.iter().enumerate() {
            for r in &s.reads {
                let at = work.target(ri);
                work.read_into(Some(lane), mosaic_core::DevOp { offset: r.offset + self.base, ..*r }, at);
                ri += 1;
            }
            for w in &s.writes {
                let off = w.offset + self.base;
                let g = groups.entry((w.member, off / self.zone)).or_insert(Group { lo: off, hi: off + w.len, role: w.role, pieces: vec![] });
                g.lo = g.lo.min(off);
                g.hi = g.hi.max(off + w.len);
                g.pieces.push((off, work.source(wi), w.len));
                wi += 1;
            }
        }
        for ((m, z), g) in groups {
            self.group(&mut work, m, z, g);
        }
        Ok(work)
    }

    /// Append or rewrite one (member, zone).
    fn group(&mut self, work: &mut Work, m: usize, z: u64, g: Group) {
        let start = z * self.zone;
        let wp = *self.wp.get(&(m, z)).unwrap_or(&start);
        let at = |from: u64| g.pieces.iter().map(move |&(o, src, len)| Piece { off: o - from, src, len });
        let op = |offset: u64, len: u64| mosaic_core::DevOp { member: m, offset, len, role: g.role, col: 0 };
        if g.lo >= wp {
            self.appends += 1;
            work.write(op(wp, g.hi - wp), &at(wp).collect::<Vec<_>>());
        } else {
            self.rewrites += 1;
            let old = work.read(None, mosaic_core::DevOp { member: m, offset: start, len: wp - start, role: Role::Data, col: 0 });
            work.reset(m, start);
            let mut pieces = vec![Piece { off: 0, src: old, len: wp - start }];
            pieces.extend(at(start));
            work.write(op(start, g.hi.max(wp) - start), &pieces);
        }
        self.wp.insert((m, z), g.hi.max(wp));
    }

    fn read_work(&self, offset: u64, len: u64, h: &Health, bytes: bool) -> Result<Work, PlanError> {
        let plan = self.layout.plan_read(offset, len, h)?;
        let mut work = Work::new(&self.layout, &plan, None, bytes)?;
        let mut ri = 0;
        for (lane, s) in plan.stripes.iter().enumerate() {
            for r in &s.reads {
                let at = work.target(ri);
                work.read_into(Some(lane), mosaic_core::DevOp { offset: r.offset + self.base, ..*r }, at);
                ri += 1;
            }
        }
        Ok(work)
    }
}

work_backend!(SegmentRaid5, "segment-raid5", "seg");
