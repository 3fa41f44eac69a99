//! How long background destage work keeps cache space busy.
//!
//! A front end learns nothing of plan completions, so a cache that freed
//! space the moment it *planned* a destage would never fill and writes
//! would never wait, however far behind the drives are.  [`Backlog`] keeps
//! an estimate per drive of when the work handed to it will be done
//! (`t_pos + len / R` per op from the drive model's isolated service time,
//! queued behind earlier work), and holds background-destaged chunks as
//! cache occupancy until then.  When a write finds the cache full it
//! destages in the foreground and waits for that destage, which the
//! drives' FIFO queues run after the backlog: the wait is the simulator's,
//! only the decision to wait uses the estimate.
//!
//! ```text
//!   occupancy = dirty chunks + chunks of background destages not yet estimated done
//!   occupancy > capacity  ──> foreground destage (the write waits)
//!   occupancy > high mark ──> background destage
//! ```

use std::collections::BTreeMap;

use mosaic_core::{DevOp, Phase, Plan, Program};
use mosaic_drives::{DriveModel, ReqKind};

#[derive(Debug, Clone, Default)]
pub struct Backlog {
    busy: Vec<u64>,
    /// Per drive: (positioning ns, ns per byte).
    est: Vec<(f64, f64)>,
    inflight: BTreeMap<u64, usize>,
    held: usize,
}

impl Backlog {
    pub fn new(models: &[Box<dyn DriveModel>]) -> Backlog {
        let est = models
            .iter()
            .map(|m| {
                let a = m.random_service_ns(ReqKind::Write, 0);
                let b = m.random_service_ns(ReqKind::Write, 1 << 20);
                (a, ((b - a) / (1 << 20) as f64).max(0.0))
            })
            .collect();
        Backlog { busy: vec![0; models.len()], est, ..Default::default() }
    }

    /// No estimate: background work frees its space at once.
    pub fn none() -> Backlog {
        Backlog::default()
    }

    /// Chunks held by background destages still running at `now`.
    pub fn held(&mut self, now: u64) -> usize {
        while let Some((&t, &c)) = self.inflight.first_key_value() {
            if t > now {
                break;
            }
            self.inflight.pop_first();
            self.held -= c;
        }
        self.held
    }

    /// Account `programs` issued at `now`; `chunks` of cache stay held
    /// until they are estimated done.  Zone resets take no time but wait
    /// behind the drive's earlier work.
    pub fn add(&mut self, programs: &[Program], now: u64, chunks: usize) {
        let ops = programs.iter().flat_map(|p| {
            p.phases.iter().flat_map(|ph| -> Box<dyn Iterator<Item = (&DevOp, bool)> + '_> {
                match ph {
                    Phase::Read(ios) | Phase::Write { ops: ios, .. } => Box::new(ios.iter().map(|io| (&io.op, true))),
                    Phase::Reset(zs) => Box::new(zs.iter().map(|z| (z, false))),
                    _ => Box::new(std::iter::empty()),
                }
            })
        });
        self.account(ops, now, chunks);
    }

    /// [`Backlog::add`] for plans (the baselines).
    pub fn add_plans(&mut self, plans: &[Plan], now: u64, chunks: usize) {
        let ops = plans.iter().flat_map(|p| p.reads().chain(p.writes())).map(|op| (op, op.role != mosaic_core::Role::ZoneReset));
        self.account(ops, now, chunks);
    }

    /// Queue each op (timed when its flag is set) behind its drive's work.
    fn account<'a>(&mut self, ops: impl Iterator<Item = (&'a DevOp, bool)>, now: u64, chunks: usize) {
        if self.est.is_empty() {
            return;
        }
        let mut done = now;
        for (op, timed) in ops {
            let Some(&(pos, per)) = self.est.get(op.member) else { continue };
            let t = if timed { pos + per * op.len as f64 } else { 0.0 };
            let b = &mut self.busy[op.member];
            *b = (*b).max(now) + t as u64;
            done = done.max(*b);
        }
        if chunks > 0 && done > now {
            *self.inflight.entry(done).or_insert(0) += chunks;
            self.held += chunks;
        }
    }
}
