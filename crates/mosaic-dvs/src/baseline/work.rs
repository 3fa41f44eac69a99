//! One request of a zoned baseline, planned once: the device operations
//! (for the simulator, as today's two byte-less plans) and, when asked,
//! the one program that carries them out with real bytes.
//!
//! A scheme starts from the `raid5` layout's stripe plan and its lowering
//! (`mosaic_core::StripeMath`: reads into the layout's targets, the parity
//! computation, writes from the client's bytes or computed code), then
//! turns each member operation into what it does on a zoned drive, by
//! calling [`Work::read`]/[`Work::read_into`] for device reads,
//! [`Work::copy`] to hand read bytes to the layout's targets, and
//! [`Work::write`]/[`Work::reset`] for the ordered zone writes, each write
//! assembled from pieces (old segment bytes, new data, code).  The
//! simulator's plans and the real program are both read off these lists:
//!
//! ```text
//!   plans (io_only, as before)          program (real bytes)
//!   A: stripe lanes: remapped reads     Read    every read of A (lane = stripe,
//!      + one Read stripe: extra reads             extras one lane more)
//!   B: one Direct stripe: the zone      Compute copies into the layout's read
//!      writes and resets, in order              targets, the layout's combines,
//!                                               assembly of each zone write
//!                                       Write / Reset / Write … as in B
//!                                       (a member's writes of a run in
//!                                       successive phases: in order)
//! ```
//!
//! So a real run and a simulated run issue the same device operations by
//! construction.  The copies into the layout's targets run before the
//! layout's combines, so they may only take bytes that exist by then
//! (device reads, the client's bytes): [`Work::program`] checks it.

use mosaic_core::{Buf, Combine, DevOp, FixedLayout, Io, Method, Phase, Plan, PlanError, Program, Ref, Role, StripePlan};

/// [`super::Backend`] for a zoned scheme that plans through [`Work`]: its
/// `layout` field, `check_bytes`, `write_work` and `read_work`, and the
/// description: `$name`, the layout, `$zone` and the zone size.  The simulator's plans and the real
/// program come off the same [`Work`] (the module's picture).
macro_rules! work_backend {
    ($ty:ty, $name:literal, $zone:literal) => {
        impl super::Backend for $ty {
            fn describe(&self) -> String {
                format!(concat!($name, " {} ", $zone, " {}K"), self.layout.describe(), self.zone >> 10)
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
            fn write(&mut self, offset: u64, len: u64, h: &mosaic_core::Health) -> Result<Vec<mosaic_core::Plan>, mosaic_core::PlanError> {
                Ok(self.write_work(offset, len, h, false)?.plans())
            }
            fn read(&mut self, offset: u64, len: u64, h: &mosaic_core::Health) -> Result<Vec<mosaic_core::Plan>, mosaic_core::PlanError> {
                Ok(self.read_work(offset, len, h, false)?.plans())
            }
            fn write_programs(&mut self, offset: u64, len: u64, h: &mosaic_core::Health) -> Result<(Vec<mosaic_core::Program>, Vec<mosaic_core::Plan>), mosaic_core::PlanError> {
                self.check_bytes()?;
                let w = self.write_work(offset, len, h, true)?;
                let plans = w.plans();
                Ok((vec![w.program()?], plans))
            }
            fn read_programs(&mut self, offset: u64, len: u64, h: &mosaic_core::Health) -> Result<(Vec<mosaic_core::Program>, Vec<mosaic_core::Plan>), mosaic_core::PlanError> {
                let w = self.read_work(offset, len, h, true)?;
                let plans = w.plans();
                Ok((vec![w.program()?], plans))
            }
        }
    };
}
pub(crate) use work_backend;

/// `len` bytes at `off` within a device write, taken from `src`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Piece {
    pub off: u64,
    pub src: Ref,
    pub len: u64,
}

/// The device operations of one request, and their bytes when asked.
pub(crate) struct Work {
    /// Per stripe of the layout's plan: stripe, method, device reads.
    lanes: Vec<(u64, Method, Vec<DevOp>)>,
    /// Reads the scheme adds (segment read-back, log cleaning).
    extra: Vec<DevOp>,
    /// Zone writes and resets, in order.
    writes: Vec<DevOp>,
    bytes: Option<Bytes>,
}

/// The byte side of a [`Work`].
struct Bytes {
    /// The layout's program: its buffers and locks (phases taken out).
    prog: Program,
    combines: Vec<Combine>,
    /// The layout's read targets and write sources, in plan order.
    targets: Vec<Ref>,
    sources: Vec<Ref>,
    /// Scratch buffers: device reads, assembled writes, zeros.
    rd: (usize, usize),
    wr: (usize, usize),
    zero: (usize, usize),
    reads: Vec<Io>,
    /// Copies before the layout's combines, and the writes' assembly.
    pre: Vec<Combine>,
    post: Vec<Combine>,
    /// Where each entry of `writes` takes its bytes (resets: unused).
    at: Vec<Ref>,
}

fn invalid(what: impl Into<String>) -> PlanError {
    PlanError::Invalid(what.into())
}

/// Append a copy, merged into the last one when both sides continue it.
fn push_copy(list: &mut Vec<Combine>, dst: Ref, src: Ref, len: usize) {
    if let Some(l) = list.last_mut() {
        if let (false, [(1, s)]) = (l.acc, l.terms.as_slice()) {
            let follows = |a: Ref, b: Ref| a.buf == b.buf && a.off as usize + l.len == b.off as usize;
            if follows(l.dst, dst) && follows(*s, src) {
                l.len += len;
                return;
            }
        }
    }
    list.push(Combine::copy(dst, src, len));
}

/// A placeholder reference when no bytes are planned.
const NOWHERE: Ref = Ref { buf: 0, off: 0 };

impl Bytes {
    /// Lower `plan` with the layout's computation: a write program when
    /// `write_len` is given, else a read program.
    fn lower(layout: &FixedLayout, plan: &Plan, write_len: Option<usize>) -> Result<Bytes, PlanError> {
        let mut prog = match write_len {
            Some(n) => layout.math.write_program(plan, n)?,
            None => layout.math.read_program(plan)?,
        };
        let (mut targets, mut sources, mut combines) = (vec![], vec![], vec![]);
        for ph in std::mem::take(&mut prog.phases) {
            match ph {
                Phase::Read(ios) => targets.extend(ios.iter().map(|io| io.at)),
                Phase::Write { ops, .. } => sources.extend(ops.iter().map(|io| io.at)),
                Phase::Compute(cs) => combines.extend(cs),
                _ => return Err(invalid("a layout program with flushes or resets")),
            }
        }
        if targets.len() != plan.reads().count() || sources.len() != plan.writes().count() {
            return Err(invalid("the layout's program does not follow its plan"));
        }
        let rd = prog.buf(Buf::Scratch(0));
        let wr = prog.buf(Buf::Scratch(0));
        let zero = prog.buf(Buf::Scratch(0));
        Ok(Bytes { prog, combines, targets, sources, rd: (rd, 0), wr: (wr, 0), zero: (zero, 0), reads: vec![], pre: vec![], post: vec![], at: vec![] })
    }
}

/// Grow scratch `(buf, len)` by `n` bytes; where they start.
fn grow(s: &mut (usize, usize), n: u64) -> Ref {
    let at = Ref::new(s.0, s.1);
    s.1 += n as usize;
    at
}

impl Work {
    /// The request planned by the layout as `plan`; lowered with bytes
    /// when `bytes` (a write of `write_len` bytes, or a read).
    pub fn new(layout: &FixedLayout, plan: &Plan, write_len: Option<usize>, bytes: bool) -> Result<Work, PlanError> {
        let lanes = plan.stripes.iter().map(|s| (s.stripe, s.method, vec![])).collect();
        let bytes = if bytes { Some(Bytes::lower(layout, plan, write_len)?) } else { None };
        Ok(Work { lanes, extra: vec![], writes: vec![], bytes })
    }

    pub fn has_bytes(&self) -> bool {
        self.bytes.is_some()
    }

    /// Where the layout's `i`-th read (in plan order) wants its bytes.
    pub fn target(&self, i: usize) -> Ref {
        self.bytes.as_ref().and_then(|b| b.targets.get(i).copied()).unwrap_or(NOWHERE)
    }

    /// Where the layout's `i`-th write (in plan order) has its bytes.
    pub fn source(&self, i: usize) -> Ref {
        self.bytes.as_ref().and_then(|b| b.sources.get(i).copied()).unwrap_or(NOWHERE)
    }

    fn list(&mut self, lane: Option<usize>) -> &mut Vec<DevOp> {
        match lane {
            Some(l) => &mut self.lanes[l].2,
            None => &mut self.extra,
        }
    }

    /// A device read landing at `at` (a layout target); `lane` None: an
    /// extra read of the scheme.
    pub fn read_into(&mut self, lane: Option<usize>, op: DevOp, at: Ref) {
        self.list(lane).push(op);
        let l = lane.unwrap_or(self.lanes.len()) as u32;
        if let Some(b) = &mut self.bytes {
            b.reads.push(Io { op, at, lane: l });
        }
    }

    /// A device read into scratch; where its bytes land.
    pub fn read(&mut self, lane: Option<usize>, op: DevOp) -> Ref {
        let at = match &mut self.bytes {
            Some(b) => grow(&mut b.rd, op.len),
            None => NOWHERE,
        };
        self.read_into(lane, op, at);
        at
    }

    /// `len` zeros (the bytes of a page never written).
    pub fn zeros(&mut self, len: u64) -> Ref {
        match &mut self.bytes {
            Some(b) => {
                b.zero.1 = b.zero.1.max(len as usize);
                Ref::new(b.zero.0, 0)
            }
            None => NOWHERE,
        }
    }

    /// Copy read bytes into a layout target, before the layout computes.
    pub fn copy(&mut self, dst: Ref, src: Ref, len: u64) {
        if let Some(b) = &mut self.bytes {
            push_copy(&mut b.pre, dst, src, len as usize);
        }
    }

    /// A zone write assembled from `pieces` (later pieces over earlier
    /// ones; bytes no piece covers are zeros).
    pub fn write(&mut self, op: DevOp, pieces: &[Piece]) {
        self.writes.push(op);
        let Some(b) = &mut self.bytes else { return };
        let at = match pieces {
            [one] if one.off == 0 && one.len == op.len => one.src,
            _ => {
                let at = grow(&mut b.wr, op.len);
                for p in pieces {
                    push_copy(&mut b.post, at.at(p.off as usize), p.src, p.len as usize);
                }
                at
            }
        };
        b.at.push(at);
    }

    /// Reset the zone starting at byte `offset` of `member`.
    pub fn reset(&mut self, member: usize, offset: u64) {
        self.writes.push(DevOp { member, offset, len: 0, role: Role::ZoneReset, col: 0 });
        if let Some(b) = &mut self.bytes {
            b.at.push(NOWHERE);
        }
    }

    /// The device operations as the simulator's plans: the stripes'
    /// reads (with one more stripe for the extra reads), then one stripe
    /// of zone writes in order.
    pub fn plans(&self) -> Vec<Plan> {
        let sp = |stripe, method, reads: Vec<DevOp>, writes: Vec<DevOp>| StripePlan { stripe, method, touched: vec![], reads, writes, span: (0, 0), missing: vec![] };
        let mut a: Vec<StripePlan> = self.lanes.iter().map(|(s, m, r)| sp(*s, *m, r.clone(), vec![])).collect();
        if !self.extra.is_empty() {
            a.push(sp(0, Method::Read, self.extra.clone(), vec![]));
        }
        let mut out = vec![Plan { stripes: a }];
        if !self.writes.is_empty() {
            out.push(Plan { stripes: vec![sp(0, Method::Direct, vec![], self.writes.clone())] });
        }
        out
    }

    /// The one program with bytes (an error when planned without).
    pub fn program(self) -> Result<Program, PlanError> {
        let mut b = self.bytes.ok_or_else(|| invalid("planned without bytes"))?;
        let computed: Vec<u32> = b.combines.iter().map(|c| c.dst.buf).collect();
        if b.pre.iter().any(|c| c.terms.iter().any(|t| computed.contains(&t.1.buf))) {
            return Err(invalid("a read target would take bytes the layout has not computed yet"));
        }
        let mut p = b.prog;
        p.bufs[b.rd.0] = Buf::Scratch(b.rd.1);
        p.bufs[b.wr.0] = Buf::Scratch(b.wr.1);
        p.bufs[b.zero.0] = Buf::Scratch(b.zero.1);
        p.methods = self.lanes.iter().map(|l| l.1).collect();
        if !self.extra.is_empty() {
            p.methods.push(Method::Read);
        }
        if !self.writes.is_empty() {
            p.methods.push(Method::Direct);
        }
        if !b.reads.is_empty() {
            p.phases.push(Phase::Read(b.reads));
        }
        let mut cs = b.pre;
        cs.append(&mut b.combines);
        cs.append(&mut b.post);
        if !cs.is_empty() {
            p.phases.push(Phase::Compute(cs));
        }
        let ops: Vec<(DevOp, Ref)> = self.writes.into_iter().zip(b.at).collect();
        for run in ops.chunk_by(|x, y| (x.0.role == Role::ZoneReset) == (y.0.role == Role::ZoneReset)) {
            match run[0].0.role {
                Role::ZoneReset => p.phases.push(Phase::Reset(run.iter().map(|w| w.0).collect())),
                _ => p.phases.extend(in_order(run).into_iter().map(Phase::write)),
            }
        }
        p.ordered = true;
        Ok(p)
    }
}

/// Write phases for a run of zone writes: the executor issues a phase's
/// writes concurrently, so phase `i` holds each member's `i`-th write and
/// every member's appends reach it in the order planned.
fn in_order(run: &[(DevOp, Ref)]) -> Vec<Vec<Io>> {
    let mut phases: Vec<Vec<Io>> = Vec::new();
    let mut seen: Vec<usize> = Vec::new();
    for &(op, at) in run {
        if seen.len() <= op.member {
            seen.resize(op.member + 1, 0);
        }
        let i = seen[op.member];
        seen[op.member] += 1;
        if phases.len() <= i {
            phases.push(Vec::new());
        }
        phases[i].push(Io::new(op, at));
    }
    phases
}
