//! Front ends: policies between logical requests and the drives that may
//! absorb, defer or reshape requests.
//!
//! A plain [`Layout`] turns every request into one [`Plan`] the request
//! waits for.  Write caches (the partial-parity cache), log-structured
//! layouts (DVS) and tiering do more: a write may finish in cache with no
//! device operation at all, and the work it causes (destage, parity
//! update, garbage collection) runs later, on the same drives, without the
//! request waiting for it.  A [`Frontend`] says which is which:
//!
//! ```text
//!   request ──> Frontend::submit ──> Staged { fg: [Program], bg: [Program] }
//!                                        │              │
//!                request completes when ─┘              └─ runs on the drives,
//!                every fg program is done                  nobody waits for it
//!
//!   drives idle for idle_after_ns ──> Frontend::idle ──> more bg programs (GC steps)
//!   client FLUSH (and the end of a replay) ──> Frontend::flush ──> programs it waits for
//! ```
//!
//! A completed write is durable after the next flush, as on a disk with a
//! volatile write cache (the `Volume` contract): a policy that keeps
//! metadata in memory between flushes (the tier's map records) writes it
//! in [`Frontend::flush`].
//!
//! Like layouts, front ends are sans-I/O: they plan in the executor's
//! (virtual or real) time and own no thread or file.  The simulator runs
//! any `Frontend`; [`Direct`] adapts a bare layout.

use crate::health::Health;
use crate::layout::Layout;
use crate::plan::Plan;
use crate::program::Program;
use crate::PlanError;

/// The device work one logical request causes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Staged {
    /// Programs the request waits for; they run concurrently.
    pub fg: Vec<Program>,
    /// Programs started now that the request does not wait for (destage, GC).
    pub bg: Vec<Program>,
}

impl Staged {
    pub fn foreground(p: Program) -> Staged {
        Staged { fg: vec![p], bg: vec![] }
    }

    /// Device operations only ([`Program::io_only`]), for the simulator's
    /// side of policies whose real programs are built separately from the
    /// same plans (the SMR baselines).
    pub fn io_only(fg: &[Plan], bg: &[Plan]) -> Staged {
        Staged { fg: fg.iter().map(Program::io_only).collect(), bg: bg.iter().map(Program::io_only).collect() }
    }
}

/// A policy in front of an array's drives.
pub trait Frontend {
    fn describe(&self) -> String;
    /// Logical capacity in bytes, fixed for the policy's life (the
    /// simulator reads it once).
    fn capacity(&self) -> u64;
    /// Logical block size; requests are multiples of it.  Fixed, as the
    /// capacity is.
    fn block_size(&self) -> u64;
    /// Member (drive) count the plans address.
    fn members(&self) -> usize;
    /// Plan a request arriving at `now_ns` (virtual or real nanoseconds).
    fn submit(&mut self, write: bool, offset: u64, len: u64, now_ns: u64, h: &Health) -> Result<Staged, PlanError>;
    /// [`Frontend::submit`], appending the programs to `out`'s (a replay
    /// reuses one `Staged` for every request instead of allocating one).
    fn submit_into(&mut self, write: bool, offset: u64, len: u64, now_ns: u64, h: &Health, out: &mut Staged) -> Result<(), PlanError> {
        let s = self.submit(write, offset, len, now_ns, h)?;
        out.fg.extend(s.fg);
        out.bg.extend(s.bg);
        Ok(())
    }
    /// After how long without foreground requests [`Frontend::idle`] should
    /// be called; `None` (the default) when the policy has no idle work.
    fn idle_after_ns(&self) -> Option<u64> {
        None
    }
    /// The drives have been idle: background work to start now.  Called
    /// again when that work finishes and the drives are still idle, so a
    /// policy does its idle work in steps and foreground I/O aborts it
    /// between steps.
    fn idle(&mut self, _now_ns: u64, _h: &Health) -> Result<Vec<Program>, PlanError> {
        Ok(vec![])
    }
    /// A client flush at `now_ns`: programs that make every completed
    /// write durable (they run concurrently: a policy chains what must be
    /// ordered); the flush completes when they are done.  Default: none
    /// (the volume flushes the members itself).
    fn flush(&mut self, _now_ns: u64, _h: &Health) -> Result<Vec<Program>, PlanError> {
        Ok(vec![])
    }
    /// Whether the programs of the replay's closing [`Frontend::flush`]
    /// are write work the policy deferred (a write-back cache's destage),
    /// counted as the writes' device operations.  Default: no (metadata).
    fn flush_is_deferred_writes(&self) -> bool {
        false
    }
    /// Policy counters for reports (cache hits, destages, GC moves, ...).
    fn stats(&self) -> Vec<(String, f64)> {
        vec![]
    }
}

/// A bare layout as a front end: every request is one foreground plan.
pub struct Direct<'a>(pub &'a dyn Layout);

impl Frontend for Direct<'_> {
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
    fn submit(&mut self, write: bool, offset: u64, len: u64, _now_ns: u64, h: &Health) -> Result<Staged, PlanError> {
        Ok(Staged::foreground(self.0.io_program(write, offset, len, h)?))
    }
    fn submit_into(&mut self, write: bool, offset: u64, len: u64, _now_ns: u64, h: &Health, out: &mut Staged) -> Result<(), PlanError> {
        out.fg.push(self.0.io_program(write, offset, len, h)?);
        Ok(())
    }
}

/// A borrowed front end, so a caller keeps it (and its counters) after a
/// replay that took it by value.
impl<F: Frontend + ?Sized> Frontend for &mut F {
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn capacity(&self) -> u64 {
        (**self).capacity()
    }
    fn block_size(&self) -> u64 {
        (**self).block_size()
    }
    fn members(&self) -> usize {
        (**self).members()
    }
    fn submit(&mut self, write: bool, offset: u64, len: u64, now_ns: u64, h: &Health) -> Result<Staged, PlanError> {
        (**self).submit(write, offset, len, now_ns, h)
    }
    fn submit_into(&mut self, write: bool, offset: u64, len: u64, now_ns: u64, h: &Health, out: &mut Staged) -> Result<(), PlanError> {
        (**self).submit_into(write, offset, len, now_ns, h, out)
    }
    fn idle_after_ns(&self) -> Option<u64> {
        (**self).idle_after_ns()
    }
    fn idle(&mut self, now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        (**self).idle(now_ns, h)
    }
    fn flush(&mut self, now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        (**self).flush(now_ns, h)
    }
    fn stats(&self) -> Vec<(String, f64)> {
        (**self).stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FixedLayout, Geometry, Level};

    /// A front end that only has `submit`: `submit_into`'s default.
    struct Plain<'a>(Direct<'a>);

    impl Frontend for Plain<'_> {
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
        fn submit(&mut self, write: bool, offset: u64, len: u64, now_ns: u64, h: &Health) -> Result<Staged, PlanError> {
            let mut s = self.0.submit(write, offset, len, now_ns, h)?;
            s.bg.push(Program::default());
            Ok(s)
        }
    }

    /// `submit_into` appends what `submit` returns, for `Direct` (which
    /// has its own) and for the default; a refused request adds nothing.
    #[test]
    fn submit_into_appends_what_submit_returns() {
        let geo = Geometry::new(Level::Raid5, 5, 8192, 512, 64 * 8192).unwrap();
        let l = FixedLayout::new(geo).unwrap();
        let h = Health::all_active(5);
        let mut out = Staged::default();
        for (write, off, len) in [(true, 4096, 4096), (false, 0, 65536), (true, 8192, 3 * 8192)] {
            let want = Direct(&l).submit(write, off, len, 0, &h).unwrap();
            Direct(&l).submit_into(write, off, len, 0, &h, &mut out).unwrap();
            assert_eq!(out, want);
            out.fg.clear();
            let mut plain = Plain(Direct(&l));
            let want = plain.submit(write, off, len, 0, &h).unwrap();
            plain.submit_into(write, off, len, 0, &h, &mut out).unwrap();
            assert_eq!(out, want);
            out = Staged::default();
        }
        assert!(Direct(&l).submit_into(true, 1 << 40, 4096, 0, &h, &mut out).is_err());
        assert_eq!(out, Staged::default());
    }
}
