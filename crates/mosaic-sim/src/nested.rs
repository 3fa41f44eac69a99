//! A drive model that is an array of drive models: a CBRO check drive
//! array that is itself raid5, raid6, rs:K+M or cbro, in virtual time.
//!
//! ```text
//!   outer op (one code unit) ──> inner Layout::io_program ──> per lane:
//!       reads on the inner drives at `now`      ─┐ completion = latest
//!       writes on the inner drives once read    ─┘ inner write
//! ```
//!
//! The inner drives keep their own state and queues (each model serves
//! what it is given in order), so a busy check drive array delays later
//! code units exactly as its drives are loaded.

use mosaic_core::{Dir, FixedLayout, Health, Layout};
use mosaic_drives::{DriveError, DriveModel, DriveRequest, Nanos, ReqKind};

/// An array of drive models seen as one drive.
pub struct ArrayDrive {
    layout: FixedLayout,
    drives: Vec<Box<dyn DriveModel>>,
    health: Health,
}

impl ArrayDrive {
    pub fn new(layout: FixedLayout, drives: Vec<Box<dyn DriveModel>>) -> Result<ArrayDrive, String> {
        if drives.len() != layout.members() {
            return Err(format!("{} drive models for the {} members of {}", drives.len(), layout.members(), layout.describe()));
        }
        let n = drives.len();
        Ok(ArrayDrive { layout, drives, health: Health::all_active(n) })
    }

    /// The inner array's layout.
    pub fn layout(&self) -> &FixedLayout {
        &self.layout
    }
}

impl DriveModel for ArrayDrive {
    fn describe(&self) -> String {
        format!("array {} of [{}]", self.layout.describe(), self.drives.first().map(|d| d.describe()).unwrap_or_default())
    }
    fn capacity(&self) -> u64 {
        self.layout.capacity()
    }
    fn queue_depth(&self) -> usize {
        self.drives.iter().map(|d| d.queue_depth()).sum::<usize>().max(1)
    }
    fn reorders(&self) -> bool {
        false
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        let write = match req.kind {
            ReqKind::Read => false,
            ReqKind::Write => true,
            _ => return Ok(now),
        };
        // The inner array's own program, contiguous transfers merged as
        // the real inner array merges them: per lane (stripe, or stripes
        // sharing a merged transfer) its reads at `now`, its writes once
        // they are done.
        let prog = self.layout.io_program(write, req.offset, req.len, &self.health);
        let prog = prog.map_err(|_| DriveError::OutOfRange { offset: req.offset, len: req.len, capacity: self.layout.capacity() })?;
        let mut done = now;
        for lane in 0..prog.lanes() as u32 {
            let mut t = now;
            for (dir, ios) in prog.io() {
                let (kind, start) = if dir == Dir::Read { (ReqKind::Read, now) } else { (ReqKind::Write, t) };
                let mut end = start;
                for io in ios.iter().filter(|io| io.lane == lane) {
                    end = end.max(self.drives[io.op.member].submit(start, &DriveRequest { kind, offset: io.op.offset, len: io.op.len })?);
                }
                t = t.max(end);
            }
            done = done.max(t);
        }
        Ok(done)
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        let d = &self.drives[0];
        match kind {
            // A small write on a parity array: read old data and code, write both.
            ReqKind::Write if self.layout.geometry().m > 0 => d.random_service_ns(ReqKind::Read, len) + d.random_service_ns(ReqKind::Write, len),
            k => d.random_service_ns(k, len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_core::{Geometry, Level};

    #[test]
    fn a_code_unit_write_is_an_inner_rmw() {
        let cfg = mosaic_drives::parse_device_spec("ssd:samsung-830-128g").unwrap();
        let drives: Vec<Box<dyn DriveModel>> = (0..3).map(|_| cfg.build(None)).collect();
        let cap = drives[0].capacity();
        let l = FixedLayout::new(Geometry::new(Level::Raid5, 3, 4096, 4096, cap).unwrap()).unwrap();
        let mut a = ArrayDrive::new(l, drives).unwrap();
        let single = cfg.build(None);
        let (r, w) = (single.random_service_ns(ReqKind::Read, 4096), single.random_service_ns(ReqKind::Write, 4096));
        let t = a.submit(0, &DriveRequest { kind: ReqKind::Write, offset: 8192, len: 4096 }).unwrap();
        // One unit of a 2+1 raid5: RMW (2 reads in parallel, then 2 writes in parallel).
        assert!(t as f64 >= r + w - 1.0, "t {t} r {r} w {w}");
        assert!((t as f64) < 2.0 * (r + w), "t {t} r {r} w {w}");
        assert_eq!(a.capacity(), l_cap(cap));
    }

    fn l_cap(cap: u64) -> u64 {
        Geometry::new(Level::Raid5, 3, 4096, 4096, cap).unwrap().capacity()
    }
}
