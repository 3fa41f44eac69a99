//! The evaluation's remapped raid0 on one drive model per drive.
//!
//! The remapped array's policy plans on one member, its inner array's
//! logical space (`mosaic_remap`).  For a raid0 inner array (stripe unit
//! = remap unit) that space maps to the drives by arithmetic, so here
//! every program is lowered onto the drives before the simulator sees it:
//! each drive keeps its own queue and the model's own scheduling (SPTF on
//! the detailed HDD), as the paper's DiskSim disks do.  A nested
//! `ArrayDrive` would hand its inner drives requests in arrival order.
//!
//! ```text
//!   inner op [off, off+len) on member 0, split at stripe units:
//!     unit q = off / su  ->  drive q % n, offset (q / n) x su + off % su
//!   Flush [0] -> Flush [every drive]
//! ```

use mosaic_core::{DevOp, Frontend, Health, Io, MemberState, Phase, PlanError, Program, Ref, Staged};

/// A one-member front end over raid0 of `drives` drives of stripe unit `su`.
pub struct Striped<F> {
    inner: F,
    drives: usize,
    su: u64,
}

impl<F: Frontend> Striped<F> {
    pub fn new(inner: F, drives: usize, su: u64) -> Striped<F> {
        Striped { inner, drives: drives.max(1), su: su.max(1) }
    }

    fn lower(&self, p: Program) -> Program {
        let phases = p.phases.into_iter().map(|ph| self.phase(ph)).collect();
        Program { phases, ..p }
    }

    fn phase(&self, ph: Phase) -> Phase {
        match ph {
            Phase::Read(ios) => Phase::Read(self.split(ios)),
            Phase::Write { ops, journal, marks } => Phase::Write { ops: self.split(ops), journal, marks },
            Phase::Flush(_) => Phase::Flush((0..self.drives).collect()),
            other => other,
        }
    }

    fn split(&self, ios: Vec<Io>) -> Vec<Io> {
        let (n, su) = (self.drives as u64, self.su);
        let mut out = Vec::with_capacity(ios.len());
        for io in ios {
            let (mut off, end) = (io.op.offset, io.op.offset + io.op.len);
            while off < end {
                let (q, within) = (off / su, off % su);
                let take = (su - within).min(end - off);
                let op = DevOp { member: (q % n) as usize, offset: (q / n) * su + within, len: take, ..io.op };
                let at = Ref { buf: io.at.buf, off: io.at.off + (off - io.op.offset) as u32 };
                out.push(Io { op, at, lane: io.lane });
                off += take;
            }
        }
        out
    }

    /// The inner array as the policy sees it: failed when a drive is.
    fn health(h: &Health) -> Health {
        let up = h.states.iter().all(|s| matches!(s, MemberState::Active));
        Health { states: vec![if up { MemberState::Active } else { MemberState::Failed }] }
    }

    fn staged(&self, s: Staged) -> Staged {
        Staged { fg: s.fg.into_iter().map(|p| self.lower(p)).collect(), bg: s.bg.into_iter().map(|p| self.lower(p)).collect() }
    }
}

impl<F: Frontend> Frontend for Striped<F> {
    fn describe(&self) -> String {
        format!("{} (raid0 over {} drives)", self.inner.describe(), self.drives)
    }
    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }
    fn block_size(&self) -> u64 {
        self.inner.block_size()
    }
    fn members(&self) -> usize {
        self.drives
    }
    fn submit(&mut self, write: bool, offset: u64, len: u64, now_ns: u64, h: &Health) -> Result<Staged, PlanError> {
        let s = self.inner.submit(write, offset, len, now_ns, &Self::health(h))?;
        Ok(self.staged(s))
    }
    fn idle_after_ns(&self) -> Option<u64> {
        self.inner.idle_after_ns()
    }
    fn idle(&mut self, now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        let ps = self.inner.idle(now_ns, &Self::health(h))?;
        Ok(ps.into_iter().map(|p| self.lower(p)).collect())
    }
    fn flush(&mut self, now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        let ps = self.inner.flush(now_ns, &Self::health(h))?;
        Ok(ps.into_iter().map(|p| self.lower(p)).collect())
    }
    fn stats(&self) -> Vec<(String, f64)> {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_core::{Geometry, Level};
    use mosaic_remap::{RemapConfig, RemapGeometry, RemapPolicy};

    /// Every byte of a whole-array read lands where raid0 puts it: the
    /// lowered ops equal the inner layout's own read plan, drive by drive.
    #[test]
    fn lowered_ops_are_the_raid0_layouts_own() {
        let su = 4096;
        let inner = Geometry::new(Level::Raid0, 3, su, 512, 256 * su).unwrap();
        let (pol, _) = RemapPolicy::format(RemapConfig { unit: su, block: 512, ..RemapConfig::default() }, RemapGeometry::new(inner.clone())).unwrap();
        let map = pol.layout().map_bytes;
        let mut s = Striped::new(pol, 3, su);
        let st = s.submit(false, 5 * 512, 3 * su, 0, &Health::all_active(3)).unwrap();
        let mut got: Vec<(usize, u64, u64)> = st.fg[0].io().flat_map(|(_, ios)| ios.iter().map(|io| (io.op.member, io.op.offset, io.op.len)).collect::<Vec<_>>()).collect();
        got.sort_unstable();
        let l = mosaic_core::FixedLayout::new(inner).unwrap();
        let plan = mosaic_core::Layout::plan_read(&l, map + 5 * 512, 3 * su, &Health::all_active(3)).unwrap();
        let mut want: Vec<(usize, u64, u64)> = plan.stripes.iter().flat_map(|sp| sp.reads.iter().map(|op| (op.member, op.offset, op.len))).collect();
        want.sort_unstable();
        assert_eq!(got, want);
        assert_eq!(s.members(), 3);
        // A failed drive is an offline raid0: the request fails.
        let mut h = Health::all_active(3);
        h.states[1] = MemberState::Failed;
        assert!(s.submit(false, 0, su, 0, &h).is_err());
    }
}
