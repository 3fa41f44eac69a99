//! Programs: the one plan vocabulary every policy hands the executor.
//!
//! A policy (a fixed layout, a small-write cache, DVS, …) turns a request,
//! idle time or maintenance into a [`Program`]: self-contained, it names
//! every buffer it uses, every device operation, every computation between
//! them, and its flushes and zone resets.  The real executor
//! (`mosaic-exec`) runs it on member devices; the simulator times the same
//! device operations on drive models ([`Program::io`]).
//!
//! ```text
//!   bufs:   0 Input[0..8K)  1 Scratch 4K  2 Scratch 4K  3 Scratch 4K
//!
//!   phases: Read  [ m1 @ off  -> buf 2 ,  m4 @ off -> buf 3 ]      old data, old P
//!           Compute [ buf 3 = 1·buf 3 + 1·buf 2 + 1·buf 0[4K..] ]  P' = P + D + D'
//!           Write [ m1 @ off <- buf 0[4K..] , m4 @ off <- buf 3 ]  (journaled)
//! ```
//!
//! **Computation is data.**  A [`Combine`] says `dst = base + Σ cᵢ·termᵢ`
//! over GF(2^8) (base is the destination itself when `acc`), with the
//! coefficients spelled out: an encode, a read-modify-write delta, a
//! decode (coefficients from `mosaic_ec::Code::decode_coefficients`), a
//! copy (one term, coefficient 1).  The executor knows no layout.
//!
//! **Buffers.**  [`Buf::Input`] and [`Buf::Output`] are ranges of the
//! client's write data and read buffer (a healthy read lands in the
//! client's buffer directly); [`Buf::Scratch`] is memory the executor
//! provides that reads as zeros until the program writes it (the executor
//! reuses its memory and zeroes only what a program may read before a
//! device read or a computation has written it); [`Buf::Bytes`] are bytes
//! the policy supplies (a metadata record, a client's bytes it kept), and
//! [`Buf::Page`] too, counted apart from them (a cache's pages, which it
//! hands from structure to structure); [`Buf::Gather`] is pieces of other
//! buffers one after another, the source of one merged device write, so
//! its bytes reach the member without being copied together first.  A
//! [`Ref`] is a byte offset in one buffer.  Reads of one phase land on
//! disjoint ranges.
//!
//! **Results.**  Buffers listed in [`Program::keep`] go back to the policy
//! after the run (a parity cache keeps the code it computed; scrub judges
//! the columns it read).  [`Program::methods`] says how each stripe was
//! handled, for the counters.

use std::sync::Arc;

use crate::plan::{DevOp, Dir, Method, OpCounts, Plan, Role};

/// One buffer of a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Buf {
    /// `len` bytes the executor provides, zeros wherever the program reads
    /// them before writing them (a successful device read fills its whole
    /// target; a computation without `acc` writes its whole destination).
    Scratch(usize),
    /// Bytes the policy supplies.
    Bytes(Arc<[u8]>),
    /// Bytes the policy supplies, counted apart from them ([`Page`]).
    Page(Page),
    /// `[off, off + len)` of the client's write data.
    Input { off: usize, len: usize },
    /// `[off, off + len)` of the client's read buffer.
    Output { off: usize, len: usize },
    /// The pieces `(at, len)` of other buffers (none of them a gather),
    /// one after another: the bytes of one merged device write (see
    /// [`crate::merge`]), which the executor hands the member as they lie.
    /// Read-only, and only a write of the whole buffer may name it.
    Gather(Vec<(Ref, usize)>),
}

/// Bytes a policy shares with its programs, as [`Buf::Bytes`], whose
/// reference counts live apart from them: a small allocation holds the
/// counts and the bytes' address.  A policy that keeps many pages and
/// hands them from structure to structure (the small-write caches) then
/// counts its references on lines it touches often, not on the first
/// line of a page that may have left the CPU's caches long ago.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page(Arc<Box<[u8]>>);

impl Page {
    /// A page holding a copy of `src`.
    pub fn copy_of(src: &[u8]) -> Page {
        Page(Arc::new(src.into()))
    }
    /// The bytes to write, when nothing else holds the page.
    pub fn get_mut(&mut self) -> Option<&mut [u8]> {
        Arc::get_mut(&mut self.0).map(|b| &mut b[..])
    }
    /// Whether nothing else holds the page (plain loads of its counts).
    pub fn is_unique(&self) -> bool {
        Arc::strong_count(&self.0) == 1 && Arc::weak_count(&self.0) == 0
    }
}

impl std::ops::Deref for Page {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Buf {
    pub fn len(&self) -> usize {
        match self {
            Buf::Scratch(n) => *n,
            Buf::Bytes(b) => b.len(),
            Buf::Page(b) => b.len(),
            Buf::Input { len, .. } | Buf::Output { len, .. } => *len,
            Buf::Gather(pieces) => pieces.iter().map(|p| p.1).sum(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether device reads and computations may write into it.
    pub fn is_writable(&self) -> bool {
        matches!(self, Buf::Scratch(_) | Buf::Output { .. })
    }
}

/// The ranges of `bufs` a write of `len` bytes at `at` takes, in order:
/// its own, or the pieces of the [`Buf::Gather`] it writes whole.  A
/// write of part of a gather ([`Program::validate`] rejects it) takes
/// none: it never reaches bytes beyond its length.
pub fn write_pieces(bufs: &[Buf], at: Ref, len: usize) -> impl Iterator<Item = (Ref, usize)> + '_ {
    let (gathered, own) = match bufs.get(at.buf as usize) {
        Some(b @ Buf::Gather(pieces)) => ((at.off == 0 && b.len() == len).then(|| pieces.iter().copied()), None),
        _ => (None, Some((at, len))),
    };
    gathered.into_iter().flatten().chain(own)
}

/// A byte position in one of the program's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ref {
    pub buf: u32,
    pub off: u32,
}

impl Ref {
    pub fn new(buf: usize, off: usize) -> Ref {
        Ref { buf: buf as u32, off: off as u32 }
    }
    pub fn at(self, delta: usize) -> Ref {
        Ref { buf: self.buf, off: self.off + delta as u32 }
    }
}

/// One device transfer: `op.len` bytes between the device and the buffer
/// at `at`.
///
/// `lane` groups the transfers of one stripe: the executor runs every lane
/// in lockstep (all reads of a phase, then the computation, then all
/// writes), while the simulator lets each lane move on to its next phase
/// as soon as its own transfers are done, as a drive queue would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Io {
    pub op: DevOp,
    pub at: Ref,
    pub lane: u32,
}

impl Io {
    pub fn new(op: DevOp, at: Ref) -> Io {
        Io { op, at, lane: 0 }
    }
}

/// `dst[..len] = (acc ? dst[..len] : 0) + Σ c·term[..len]` over GF(2^8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Combine {
    pub dst: Ref,
    pub len: usize,
    pub acc: bool,
    pub terms: Vec<(u8, Ref)>,
}

impl Combine {
    /// `dst = src` (a copy).
    pub fn copy(dst: Ref, src: Ref, len: usize) -> Combine {
        Combine { dst, len, acc: false, terms: vec![(1, src)] }
    }
}

/// The writes of `p` when it is at most a read, a computation and one
/// journaled write, in that order, and appends to no zone
/// ([`Program::fits_beside`]).
fn one_journaled_write(p: &Program) -> Option<&[Io]> {
    let ph = p.phases.as_slice();
    let write = match ph {
        [Phase::Read(_), Phase::Compute(_), w] | [Phase::Read(_) | Phase::Compute(_), w] | [w] => w,
        _ => return None,
    };
    match write {
        Phase::Write { ops, journal: true, .. } if !p.ordered => Some(ops),
        _ => None,
    }
}

/// One step of a program; phases run in order, the operations inside a
/// phase concurrently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Read(Vec<Io>),
    /// Device writes; with `journal`, the executor logs them (and `marks`,
    /// policy records the journal keeps beside them) before issuing any.
    Write { ops: Vec<Io>, journal: bool, marks: Vec<Mark> },
    Compute(Vec<Combine>),
    /// Make completed writes on these members durable (lane 0).
    Flush(Vec<usize>),
    /// Reset zones: ops of role [`Role::ZoneReset`], `offset` the zone's
    /// first byte, `len` 0 (lane 0).
    Reset(Vec<DevOp>),
}

/// A policy record that a journaled write phase logs beside its writes,
/// for replay after a crash to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Stripe row `row`'s code on the members goes stale (a parity cache
    /// keeps the current code): replay recomputes it from the row's data.
    Resync { row: u64 },
}

impl Phase {
    pub fn write(ops: Vec<Io>) -> Phase {
        Phase::Write { ops, journal: false, marks: Vec::new() }
    }
}

/// Everything the executor needs to carry out one request or one piece of
/// maintenance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Program {
    /// Range-lock keys (stripe numbers) held for the whole run.
    pub locks: Vec<u64>,
    pub bufs: Vec<Buf>,
    pub phases: Vec<Phase>,
    /// Buffers handed back to the policy after the run, in this order.
    pub keep: Vec<u32>,
    /// How each stripe was handled (counters only).
    pub methods: Vec<Method>,
    /// The program appends to zones: its writes and zone resets must reach
    /// each device after those of every earlier ordered program, as a
    /// host writes a zone in order.  The real executor runs such programs
    /// one after another (the policy holds `&mut`); the simulator keeps
    /// the order on each drive while their reads overlap.
    pub ordered: bool,
}

impl Program {
    /// Append `next`'s phases after this program's, its buffers renumbered
    /// after this one's: the two run as one program, in order.
    pub fn append(&mut self, next: Program) {
        let phases = self.absorb(next, 0);
        self.phases.extend(phases);
    }

    /// Whether `next` may run beside this program ([`Program::run_beside`]):
    /// each is at most a read, a computation and one journaled write, in
    /// that order, and `next` neither reads nor writes a range this
    /// program writes.
    pub fn fits_beside(&self, next: &Program) -> bool {
        let (Some(writes), Some(_)) = (one_journaled_write(self), one_journaled_write(next)) else { return false };
        let overlaps = |io: &Io| writes.iter().any(|w| w.op.overlaps(&io.op));
        !next.io().flat_map(|(_, ios)| ios).any(overlaps)
    }

    /// Run `next` beside this program, phase by phase: their reads, then
    /// their computations, then all their writes in one journaled phase,
    /// so the journal logs both in one record.  Only where `next`
    /// [fits beside](Program::fits_beside) it: run one after the other,
    /// `next`'s reads would come after this program's writes, which they
    /// do not overlap, so every read and write moves the same bytes
    /// either way.
    ///
    /// ```text
    ///   self: Read A  Compute A  Write A (journaled)
    ///   next:         Compute B  Write B (journaled)
    ///     ==> Read A  Compute A, B  Write A, B (journaled: one record)
    /// ```
    pub fn run_beside(&mut self, next: Program) {
        assert!(self.fits_beside(&next), "a program that does not fit beside this one");
        let lanes = self.lanes() as u32;
        let theirs = self.absorb(next, lanes);
        // Merged into this program's own phases (a read, a computation,
        // one journaled write: `fits_beside`), each added where it is
        // missing, so no phase's vector is built again.
        for ph in theirs {
            match ph {
                Phase::Read(ios) => match self.phases.first_mut() {
                    Some(Phase::Read(mine)) => mine.extend(ios),
                    _ => self.phases.insert(0, Phase::Read(ios)),
                },
                Phase::Compute(cs) => {
                    let at = self.phases.len() - 1;
                    match at.checked_sub(1).map(|i| &mut self.phases[i]) {
                        Some(Phase::Compute(mine)) => mine.extend(cs),
                        _ => self.phases.insert(at, Phase::Compute(cs)),
                    }
                }
                Phase::Write { ops, marks: m, .. } => match self.phases.last_mut() {
                    Some(Phase::Write { ops: mine, marks, .. }) => {
                        mine.extend(ops);
                        marks.extend(m);
                    }
                    _ => unreachable!("one_journaled_write ends in a journaled write"),
                },
                Phase::Flush(_) | Phase::Reset(_) => unreachable!("one_journaled_write admits reads, computations and writes only"),
            }
        }
    }

    /// Take `next`'s buffers, locks, methods and kept buffers after this
    /// program's; its phases, renumbered to match (lanes moved up by
    /// `lanes`), to put where the caller wants them.
    fn absorb(&mut self, next: Program, lanes: u32) -> Vec<Phase> {
        let base = self.bufs.len() as u32;
        let shift = |r: Ref| Ref { buf: r.buf + base, off: r.off };
        let shift_ios = |ios: Vec<Io>| ios.into_iter().map(|io| Io { at: shift(io.at), lane: io.lane + lanes, ..io }).collect();
        self.bufs.extend(next.bufs.into_iter().map(|b| match b {
            Buf::Gather(pieces) => Buf::Gather(pieces.into_iter().map(|(r, n)| (shift(r), n)).collect()),
            b => b,
        }));
        self.locks.extend(next.locks);
        self.methods.extend(next.methods);
        self.keep.extend(next.keep.iter().map(|k| k + base));
        self.ordered |= next.ordered;
        next.phases
            .into_iter()
            .map(|ph| match ph {
                Phase::Read(ios) => Phase::Read(shift_ios(ios)),
                Phase::Write { ops, journal, marks } => Phase::Write { ops: shift_ios(ops), journal, marks },
                Phase::Compute(cs) => {
                    let cs = cs.into_iter().map(|c| Combine { dst: shift(c.dst), terms: c.terms.into_iter().map(|(k, r)| (k, shift(r))).collect(), ..c });
                    Phase::Compute(cs.collect())
                }
                other => other,
            })
            .collect()
    }

    /// Add a buffer; its index.
    pub fn buf(&mut self, b: Buf) -> usize {
        self.bufs.push(b);
        self.bufs.len() - 1
    }

    /// The transfers, phase by phase, with their direction.  Flushes and
    /// resets are not transfers and are left out, as the per-device
    /// counters leave them out.
    pub fn io(&self) -> impl Iterator<Item = (Dir, &[Io])> {
        self.phases.iter().filter_map(|p| match p {
            Phase::Read(ops) => Some((Dir::Read, ops.as_slice())),
            Phase::Write { ops, .. } => Some((Dir::Write, ops.as_slice())),
            _ => None,
        })
    }

    /// The transfers on `member` as (direction, offset, length), in order.
    pub fn ops_on(&self, member: usize) -> Vec<(Dir, u64, u64)> {
        self.io().flat_map(|(d, ios)| ios.iter().filter(move |io| io.op.member == member).map(move |io| (d, io.op.offset, io.op.len))).collect()
    }

    /// Device operation counts by role, and stripes by method.
    pub fn counts(&self) -> OpCounts {
        let mut c = OpCounts::default();
        self.count_into(&mut c);
        c
    }

    /// Add [`Program::counts`] to `c` and return [`Program::lanes`], in
    /// one pass over the program (a replay does both for every request).
    pub fn count_into(&self, c: &mut OpCounts) -> usize {
        let mut lanes = 0;
        for p in &self.phases {
            match p {
                Phase::Read(ops) => ops.iter().for_each(|io| {
                    c.add_op(Dir::Read, &io.op);
                    lanes = lanes.max(io.lane as usize + 1);
                }),
                Phase::Write { ops, .. } => ops.iter().for_each(|io| {
                    c.add_op(Dir::Write, &io.op);
                    lanes = lanes.max(io.lane as usize + 1);
                }),
                Phase::Reset(r) => {
                    c.zone_resets += r.len() as u64;
                    lanes = lanes.max(!r.is_empty() as usize);
                }
                Phase::Flush(v) => lanes = lanes.max(!v.is_empty() as usize),
                Phase::Compute(_) => {}
            }
        }
        for m in &self.methods {
            c.add_method(*m);
        }
        lanes
    }

    /// The device operations of `plan` with no bytes and no computation,
    /// one lane per stripe: reads, then writes, with each zone reset in
    /// its own phase where the stripe's write list has it (a segment
    /// rewrite resets its zone before writing it again).  For the
    /// simulator's side of policies whose real programs are built
    /// separately from the same plan (the SMR baselines); such a program
    /// is counted and timed, never executed (its writes would carry zeros).
    pub fn io_only(plan: &Plan) -> Program {
        let n = plan.stripes.len();
        let mut p = spare();
        p.locks.reserve(n);
        p.methods.reserve(n);
        // Sizes first (plain loops: replays build millions of these).
        let (mut reads, mut n_reads, mut widest, mut n_writes, mut resets) = (0u64, 0usize, 0u64, 0usize, false);
        for sp in &plan.stripes {
            n_reads += sp.reads.len();
            for o in &sp.reads {
                reads += o.len;
            }
            n_writes += sp.writes.len();
            for o in &sp.writes {
                widest = widest.max(o.len);
                resets |= o.role == Role::ZoneReset;
            }
        }
        let scratch = p.buf(Buf::Scratch(reads.max(widest) as usize));
        for sp in &plan.stripes {
            p.locks.push(sp.stripe);
            p.methods.push(sp.method);
        }
        let mut used = 0;
        if n_reads > 0 {
            fill_phase(&mut p.phases, used, Dir::Read, |r| {
                r.reserve(n_reads);
                let mut at = 0;
                for (lane, sp) in plan.stripes.iter().enumerate() {
                    for op in &sp.reads {
                        r.push(Io { op: *op, at: Ref::new(scratch, at), lane: lane as u32 });
                        at += op.len as usize;
                    }
                }
            });
            used += 1;
        }
        let io = |lane: usize, op: &DevOp| Io { op: *op, at: Ref::new(scratch, 0), lane: lane as u32 };
        if !resets && n_writes > 0 {
            fill_phase(&mut p.phases, used, Dir::Write, |w| {
                w.reserve(n_writes);
                for (lane, sp) in plan.stripes.iter().enumerate() {
                    w.extend(sp.writes.iter().map(|op| io(lane, op)));
                }
            });
            used += 1;
        }
        p.phases.truncate(used);
        if !resets {
            return p;
        }
        for (lane, sp) in plan.stripes.iter().enumerate() {
            for run in sp.writes.chunk_by(|a, b| (a.role == Role::ZoneReset) == (b.role == Role::ZoneReset)) {
                p.phases.push(match run[0].role {
                    Role::ZoneReset => Phase::Reset(run.to_vec()),
                    _ => Phase::write(run.iter().map(|op| io(lane, op)).collect()),
                });
            }
        }
        p
    }

    /// [`Program::io_only`] of a plan of one stripe, `stripe` handled by
    /// `method`, whose reads and writes (no zone resets, at least one
    /// write) are given as the planner makes them, each as a count and the
    /// op at each index: no `Plan` in between (a replay's small writes).
    /// A test holds it equal to `io_only`.
    pub fn one_stripe_io(stripe: u64, method: Method, reads: (usize, impl Fn(usize) -> DevOp), writes: (usize, impl Fn(usize) -> DevOp)) -> Program {
        let mut p = spare();
        p.locks.push(stripe);
        p.methods.push(method);
        // The scratch buffer is the program's first (spare programs have
        // none); its size is known once the transfers are.
        let (mut at, mut widest, mut used) = (0usize, 0u64, 0);
        if reads.0 > 0 {
            fill_phase(&mut p.phases, 0, Dir::Read, |r| {
                // `extend` of an exact-size iterator: one capacity check.
                r.extend((0..reads.0).map(|i| {
                    let op = reads.1(i);
                    let io = Io { op, at: Ref::new(0, at), lane: 0 };
                    at += op.len as usize;
                    io
                }));
            });
            used = 1;
        }
        fill_phase(&mut p.phases, used, Dir::Write, |w| {
            w.extend((0..writes.0).map(|i| {
                let op = writes.1(i);
                debug_assert!(op.role != Role::ZoneReset);
                widest = widest.max(op.len);
                Io { op, at: Ref::new(0, 0), lane: 0 }
            }));
        });
        p.phases.truncate(used + 1);
        p.bufs.push(Buf::Scratch((at as u64).max(widest) as usize));
        p
    }

    /// Hand a program that has run back, so that [`Program::io_only`]
    /// reuses its vectors (a replay builds and drops millions of small
    /// programs).  Only small programs are kept, a bounded number per
    /// thread; dropping a program instead is always correct.  Its read
    /// and write phases stay in place, for `io_only` to refill.
    pub fn recycle(mut self) {
        let small = self.locks.capacity() <= SPARE_LEN && self.methods.capacity() <= SPARE_LEN && self.bufs.capacity() <= SPARE_LEN && self.phases.capacity() <= SPARE_LEN;
        if !small || !self.keep.is_empty() {
            return;
        }
        let _ = SPARE.try_with(|cell| {
            let Ok(mut spare) = cell.try_borrow_mut() else { return };
            if spare.len() >= SPARE_COUNT {
                return;
            }
            let reusable = |ph: &Phase| matches!(ph, Phase::Read(ios) | Phase::Write { ops: ios, .. } if ios.capacity() <= SPARE_LEN);
            // Usually every phase is (a replay's reads and writes): no
            // need to shuffle them.
            if !self.phases.iter().all(reusable) {
                self.phases.retain(reusable);
            }
            self.locks.clear();
            self.bufs.clear();
            self.methods.clear();
            self.ordered = false;
            spare.push(self);
        });
    }

    /// The number of lanes (one more than the highest lane of any
    /// transfer; 1 for a program with only flushes and resets, 0 for an
    /// empty one).
    pub fn lanes(&self) -> usize {
        let mut n = 0;
        for p in &self.phases {
            match p {
                Phase::Read(ops) | Phase::Write { ops, .. } => {
                    for io in ops {
                        n = n.max(io.lane as usize + 1);
                    }
                }
                Phase::Flush(v) if !v.is_empty() => n = n.max(1),
                Phase::Reset(v) if !v.is_empty() => n = n.max(1),
                _ => {}
            }
        }
        n
    }

    /// The buffer `[r, r + len)` lies in, if it lies inside one.
    fn span(&self, r: Ref, len: usize) -> Result<&Buf, String> {
        let b = self.bufs.get(r.buf as usize).ok_or_else(|| format!("buffer {} of {}", r.buf, self.bufs.len()))?;
        if r.off as usize + len > b.len() {
            return Err(format!("range {}+{len} beyond buffer {} of {} bytes", r.off, r.buf, b.len()));
        }
        Ok(b)
    }

    /// [`Program::span`], in a buffer the program may write.
    fn writable_span(&self, r: Ref, len: usize) -> Result<(), String> {
        if !self.span(r, len)?.is_writable() {
            return Err(format!("buffer {} is read-only", r.buf));
        }
        Ok(())
    }

    /// [`Program::validate`]'s rule for one computation: destination and
    /// terms inside their buffers, the destination writable, no term in a
    /// gather buffer.  (The executor also checks a fused phase's
    /// computations with it before the phase's first write.)
    pub fn validate_combine(&self, c: &Combine) -> Result<(), String> {
        self.writable_span(c.dst, c.len)?;
        for (_, t) in &c.terms {
            if matches!(self.span(*t, c.len)?, Buf::Gather(_)) {
                return Err(format!("a computation reads gather buffer {}", t.buf));
            }
        }
        Ok(())
    }

    /// Check the program's invariants: every reference inside its buffer,
    /// reads and computations only into writable buffers, the reads of a
    /// phase on disjoint ranges, zone resets carrying no bytes.  A policy
    /// bug caught here is an error, not memory corruption or a wrong byte.
    pub fn validate(&self) -> Result<(), String> {
        let span = |r: Ref, len: usize| self.span(r, len).map(drop);
        let gather = |r: Ref| matches!(self.bufs.get(r.buf as usize), Some(Buf::Gather(_)));
        for b in &self.bufs {
            if let Buf::Gather(pieces) = b {
                for &(r, n) in pieces {
                    span(r, n)?;
                    if gather(r) {
                        return Err(format!("a gather buffer names gather buffer {}", r.buf));
                    }
                }
            }
        }
        for &k in &self.keep {
            span(Ref { buf: k, off: 0 }, 0)?;
            if gather(Ref { buf: k, off: 0 }) {
                return Err(format!("gather buffer {k} is kept"));
            }
        }
        for p in &self.phases {
            match p {
                Phase::Read(ops) => {
                    let mut ranges = Vec::with_capacity(ops.len());
                    for io in ops {
                        self.writable_span(io.at, io.op.len as usize)?;
                        ranges.push((io.at.buf, io.at.off as u64, io.at.off as u64 + io.op.len));
                    }
                    ranges.sort_unstable();
                    if ranges.windows(2).any(|w| w[0].0 == w[1].0 && w[1].1 < w[0].2) {
                        return Err("two reads of one phase land on overlapping bytes".into());
                    }
                }
                Phase::Write { ops, .. } => {
                    for io in ops {
                        span(io.at, io.op.len as usize)?;
                        if io.op.role == Role::ZoneReset {
                            return Err("a zone reset is a Reset phase, not a write".into());
                        }
                        if gather(io.at) && (io.at.off != 0 || io.op.len as usize != self.bufs[io.at.buf as usize].len()) {
                            return Err(format!("a write of part of gather buffer {}", io.at.buf));
                        }
                    }
                }
                Phase::Compute(cs) => {
                    for c in cs {
                        self.validate_combine(c)?;
                    }
                }
                Phase::Reset(ops) => {
                    if ops.iter().any(|o| o.role != Role::ZoneReset || o.len != 0) {
                        return Err("a Reset phase holds only zone resets".into());
                    }
                }
                Phase::Flush(_) => {}
            }
        }
        Ok(())
    }
}

/// Programs kept per thread, and the longest vector kept.
const SPARE_COUNT: usize = 64;
const SPARE_LEN: usize = 64;

thread_local! {
    /// Emptied programs of [`Program::recycle`].  Const-initialised: no
    /// lazy-initialisation check on each use.
    static SPARE: std::cell::RefCell<Vec<Program>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty program (a recycled one when there is one; its phases may
/// hold emptied transfer lists, see [`fill_phase`]).
fn spare() -> Program {
    SPARE.try_with(|cell| cell.try_borrow_mut().ok().and_then(|mut spare| spare.pop())).ok().flatten().unwrap_or_default()
}

/// Make `phases[i]` (`i <= phases.len()`) a plain read or write phase
/// (no journal, no marks) whose transfers `fill` writes, reusing the
/// transfer list already there when the phase has that shape.
fn fill_phase(phases: &mut Vec<Phase>, i: usize, dir: Dir, fill: impl FnOnce(&mut Vec<Io>)) {
    match (phases.get_mut(i), dir) {
        (Some(Phase::Read(ios)), Dir::Read) => {
            ios.clear();
            fill(ios);
        }
        (Some(Phase::Write { ops, journal: false, marks }), Dir::Write) if marks.is_empty() => {
            ops.clear();
            fill(ops);
        }
        _ => {
            let mut ios = Vec::new();
            fill(&mut ios);
            let ph = match dir {
                Dir::Read => Phase::Read(ios),
                Dir::Write => Phase::write(ios),
            };
            if i < phases.len() {
                phases[i] = ph;
            } else {
                phases.push(ph);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(member: usize, offset: u64, len: u64) -> DevOp {
        DevOp { member, offset, len, role: Role::Data, col: 0 }
    }

    /// A page is its bytes; it may be written only while nothing else
    /// holds it, and says so without locking its counts.
    #[test]
    fn a_page_is_written_only_while_nothing_else_holds_it() {
        let mut a = Page::copy_of(&[7u8; 4096]);
        assert!(a.is_unique() && a[..] == [7u8; 4096]);
        let b = a.clone();
        assert!(!a.is_unique() && !b.is_unique());
        assert!(a.get_mut().is_none(), "shared: not writable");
        drop(b);
        a.get_mut().expect("alone again")[0] = 9;
        assert_eq!((a[0], a[1], a.len()), (9, 7, 4096));
        assert_eq!(Buf::Page(a.clone()).len(), 4096);
        assert!(!Buf::Page(a).is_writable());
    }

    /// A read-modify-write of row 0 (A) and a code write of row 1 (B)
    /// run beside each other: A's read, both computations, one journaled
    /// write phase with both rows' writes and marks; B's buffers, kept
    /// buffers and lanes follow A's.  Programs that do not fit do not run
    /// beside each other.
    #[test]
    fn programs_on_other_ranges_run_beside_each_other() {
        let page: Arc<[u8]> = vec![7u8; 4096].into();
        let a = || {
            let mut p = Program { locks: vec![0], ..Program::default() };
            let s = p.buf(Buf::Scratch(8192));
            let i = p.buf(Buf::Input { off: 0, len: 4096 });
            p.phases.push(Phase::Read(vec![Io::new(op(1, 0, 4096), Ref::new(s, 0)), Io::new(op(4, 0, 4096), Ref::new(s, 4096))]));
            p.phases.push(Phase::Compute(vec![Combine { dst: Ref::new(s, 4096), len: 4096, acc: true, terms: vec![(1, Ref::new(s, 0)), (1, Ref::new(i, 0))] }]));
            p.phases.push(Phase::Write { ops: vec![Io::new(op(1, 0, 4096), Ref::new(i, 0)), Io::new(op(4, 0, 4096), Ref::new(s, 4096))], journal: true, marks: vec![] });
            p.keep.push(s as u32);
            p
        };
        let b = |page: &Arc<[u8]>, write_at: (usize, u64)| {
            let mut p = Program { locks: vec![1], ..Program::default() };
            let d = p.buf(Buf::Bytes(page.clone()));
            let c = p.buf(Buf::Scratch(4096));
            p.phases.push(Phase::Compute(vec![Combine::copy(Ref::new(c, 0), Ref::new(d, 0), 4096)]));
            let mut w = Io::new(op(write_at.0, write_at.1, 4096), Ref::new(c, 0));
            w.lane = 1;
            p.phases.push(Phase::Write { ops: vec![Io::new(op(2, 4096, 4096), Ref::new(d, 0)), w], journal: true, marks: vec![Mark::Resync { row: 1 }] });
            p.keep.push(c as u32);
            p
        };

        let mut p = a();
        p.run_beside(b(&page, (4, 4096)));
        p.validate().unwrap();
        assert_eq!((p.locks.clone(), p.keep.clone(), p.bufs.len()), (vec![0, 1], vec![0, 3], 4));
        let [Phase::Read(reads), Phase::Compute(cs), Phase::Write { ops, journal: true, marks }] = p.phases.as_slice() else { panic!("{:?}", p.phases) };
        assert_eq!(reads.len(), 2);
        assert_eq!(cs[1], Combine::copy(Ref::new(3, 0), Ref::new(2, 0), 4096), "B's buffers renumbered after A's");
        let placed: Vec<(usize, u64, u32, u32)> = ops.iter().map(|io| (io.op.member, io.op.offset, io.at.buf, io.lane)).collect();
        assert_eq!(placed, [(1, 0, 1, 0), (4, 0, 0, 0), (2, 4096, 2, 1), (4, 4096, 3, 2)], "A's writes, then B's, its lanes after A's");
        assert_eq!(marks, &[Mark::Resync { row: 1 }]);

        // The phases this program lacks come from the next, in their
        // places: a read before its computation, a computation before its
        // write.
        let mut q = b(&page, (4, 4096));
        q.run_beside(a());
        q.validate().unwrap();
        let [Phase::Read(reads), Phase::Compute(cs), Phase::Write { ops, .. }] = q.phases.as_slice() else { panic!("{:?}", q.phases) };
        assert_eq!((reads.len(), cs.len(), ops.len()), (2, 2, 4));
        assert_eq!(cs[0], Combine::copy(Ref::new(1, 0), Ref::new(0, 0), 4096), "the first program's computation first");
        let mut w = Program { locks: vec![2], ..Program::default() };
        let d = w.buf(Buf::Bytes(page.clone()));
        w.phases.push(Phase::Write { ops: vec![Io::new(op(3, 0, 4096), Ref::new(d, 0))], journal: true, marks: vec![] });
        w.run_beside(b(&page, (4, 4096)));
        w.validate().unwrap();
        let [Phase::Compute(cs), Phase::Write { ops, marks, .. }] = w.phases.as_slice() else { panic!("{:?}", w.phases) };
        assert_eq!((cs.len(), ops.len(), marks.as_slice()), (1, 3, &[Mark::Resync { row: 1 }][..]));

        // Not beside: B writing or reading what A writes, a flush, an
        // unjournaled write, zone appends.
        let overlap = b(&page, (4, 2048));
        let mut reads_a = b(&page, (4, 4096));
        reads_a.phases.insert(0, Phase::Read(vec![Io::new(op(1, 0, 512), Ref::new(1, 0))]));
        let mut flushes = b(&page, (4, 4096));
        flushes.phases.push(Phase::Flush(vec![2]));
        let mut plain = b(&page, (4, 4096));
        plain.phases[1] = Phase::write(vec![Io::new(op(2, 4096, 4096), Ref::new(0, 0))]);
        let mut ordered = b(&page, (4, 4096));
        ordered.ordered = true;
        for (what, q) in [("overlapping write", overlap), ("read of A's write", reads_a), ("flush", flushes), ("unjournaled", plain), ("ordered", ordered)] {
            assert!(a().fits_beside(&b(&page, (4, 4096))));
            assert!(!a().fits_beside(&q), "{what}");
        }
    }

    #[test]
    fn validate_catches_overlapping_reads_and_bad_refs() {
        let mut p = Program::default();
        let s = p.buf(Buf::Scratch(8192));
        let i = p.buf(Buf::Input { off: 0, len: 4096 });
        p.phases.push(Phase::Read(vec![Io::new(op(0, 0, 4096), Ref::new(s, 0)), Io::new(op(1, 0, 4096), Ref::new(s, 4096))]));
        assert_eq!(p.validate(), Ok(()));
        p.phases.push(Phase::Read(vec![Io::new(op(0, 0, 4096), Ref::new(s, 0)), Io::new(op(1, 0, 4096), Ref::new(s, 2048))]));
        assert!(p.validate().unwrap_err().contains("overlapping"));
        p.phases.pop();
        p.phases.push(Phase::Read(vec![Io::new(op(0, 0, 4096), Ref::new(i, 0))]));
        assert!(p.validate().unwrap_err().contains("read-only"));
        p.phases.pop();
        p.phases.push(Phase::Compute(vec![Combine::copy(Ref::new(s, 4096), Ref::new(i, 1), 4096)]));
        assert!(p.validate().unwrap_err().contains("beyond"));
    }

    #[test]
    fn validate_keeps_gather_buffers_to_whole_writes_of_plain_pieces() {
        fn w(at: Ref, len: u64) -> Phase {
            Phase::write(vec![Io::new(op(0, 0, len), at)])
        }
        let base = || {
            let mut p = Program::default();
            let s = p.buf(Buf::Scratch(8192));
            let g = p.buf(Buf::Gather(vec![(Ref::new(s, 4096), 4096), (Ref::new(s, 0), 4096)]));
            (p, Ref::new(g, 0))
        };
        let (mut p, g) = base();
        assert_eq!(p.bufs[1].len(), 8192);
        p.phases.push(w(g, 8192));
        p.validate().unwrap();
        type Spoil = fn(&mut Program, Ref);
        let bad: [(&str, Spoil, &str); 7] = [
            ("part of it", |p, g| p.phases.push(w(g, 4096)), "a write of part of gather buffer 1"),
            ("from inside it", |p, g| p.phases.push(w(g.at(4096), 4096)), "a write of part of gather buffer 1"),
            ("read into it", |p, g| p.phases.push(Phase::Read(vec![Io::new(op(0, 0, 8192), g)])), "buffer 1 is read-only"),
            ("a term", |p, g| p.phases.push(Phase::Compute(vec![Combine::copy(Ref::new(0, 0), g, 4096)])), "a computation reads gather buffer 1"),
            ("kept", |p, g| p.keep.push(g.buf), "gather buffer 1 is kept"),
            ("nested", |p, g| p.bufs.push(Buf::Gather(vec![(g, 8192)])), "a gather buffer names gather buffer 1"),
            ("a piece beyond its buffer", |p, _| p.bufs.push(Buf::Gather(vec![(Ref::new(0, 4096), 8192)])), "range 4096+8192 beyond buffer 0 of 8192 bytes"),
        ];
        for (what, f, msg) in bad {
            let (mut p, g) = base();
            f(&mut p, g);
            assert_eq!(p.validate().unwrap_err(), msg, "{what}");
        }
        // Appended after another program, its pieces follow their buffer.
        let (mut q, _) = base();
        let (p, _) = base();
        q.append(p);
        assert_eq!(q.bufs[3], Buf::Gather(vec![(Ref::new(2, 4096), 4096), (Ref::new(2, 0), 4096)]));
    }

    #[test]
    fn recycled_programs_come_back_empty() {
        use crate::plan::StripePlan;
        let sp = |stripe: u64| StripePlan {
            stripe,
            method: Method::Rmw,
            touched: vec![],
            reads: vec![op(1, stripe * 4096, 4096), op(4, stripe * 4096, 4096)],
            writes: vec![op(1, stripe * 4096, 4096), op(4, stripe * 4096, 4096)],
            span: (0, 0),
            missing: vec![],
        };
        let plan = Plan { stripes: vec![sp(3), sp(4)] };
        let fresh = Program::io_only(&plan);
        let mut used = Program::io_only(&Plan { stripes: vec![sp(9)] });
        used.ordered = true;
        used.phases.push(Phase::Flush(vec![0, 1]));
        used.recycle();
        assert_eq!(Program::io_only(&plan), fresh);
        assert_eq!(Program::io_only(&Plan::default()), Program { bufs: vec![Buf::Scratch(0)], ..Program::default() });
    }

    /// Recycled programs of every shape (journaled writes with marks,
    /// computations, a write where a read was, resets) give back exactly
    /// the programs fresh vectors give.
    #[test]
    fn io_only_on_recycled_phases_is_io_only_on_fresh_ones() {
        use crate::plan::StripePlan;
        let sp = |stripe: u64, reads: Vec<DevOp>, writes: Vec<DevOp>| StripePlan { stripe, method: Method::Rmw, touched: vec![], reads, writes, span: (0, 0), missing: vec![] };
        let reset = DevOp { member: 2, offset: 1 << 20, len: 0, role: Role::ZoneReset, col: 0 };
        let plans = [
            Plan { stripes: vec![sp(1, vec![op(1, 0, 4096), op(2, 0, 4096)], vec![op(1, 0, 4096)])] },
            Plan { stripes: vec![sp(2, vec![], vec![op(3, 0, 8192), op(4, 0, 4096)]), sp(3, vec![op(0, 0, 512)], vec![])] },
            Plan { stripes: vec![sp(4, vec![op(1, 0, 4096)], vec![reset, op(2, 1 << 20, 4096)])] },
            Plan::default(),
        ];
        let fresh: Vec<Program> = plans.iter().map(Program::io_only).collect();
        let mut odd = Program::default();
        let s = odd.buf(Buf::Scratch(4096));
        odd.phases.push(Phase::Write { ops: vec![Io::new(op(5, 0, 4096), Ref::new(s, 0))], journal: true, marks: vec![Mark::Resync { row: 7 }] });
        odd.phases.push(Phase::Compute(vec![Combine::copy(Ref::new(s, 0), Ref::new(s, 0), 1)]));
        odd.phases.push(Phase::Read(vec![Io::new(op(6, 0, 4096), Ref::new(s, 0))]));
        odd.phases.push(Phase::Flush(vec![0]));
        // Each shape handed back, then reused (the last one in comes
        // out first) for each plan.
        for (i, plan) in plans.iter().enumerate() {
            for (j, used) in std::iter::once(&odd).chain(&fresh).enumerate() {
                used.clone().recycle();
                assert_eq!(Program::io_only(plan), fresh[i], "plan {i} on recycled program {j}");
            }
        }
    }

    #[test]
    fn count_into_adds_the_counts_and_gives_the_lanes() {
        let mut p = Program::default();
        let s = p.buf(Buf::Scratch(8192));
        let io = |m: usize, lane: u32| Io { op: op(m, 0, 4096), at: Ref::new(s, 0), lane };
        p.phases.push(Phase::Read(vec![io(1, 0), io(2, 2)]));
        p.phases.push(Phase::write(vec![io(3, 1)]));
        p.methods.push(Method::Rmw);
        let mut c = p.counts();
        assert_eq!(p.count_into(&mut c), p.lanes());
        assert_eq!(p.lanes(), 3);
        let twice = (c.data_reads, c.data_read_bytes, c.data_writes, c.stripes_rmw);
        assert_eq!(twice, (4, 4 * 4096, 2, 2));
        // Flushes and resets alone are one lane; nothing is none.
        let flush = Program { phases: vec![Phase::Flush(vec![0, 1])], ..Program::default() };
        assert_eq!(flush.count_into(&mut OpCounts::default()), 1);
        assert_eq!(Program::default().count_into(&mut OpCounts::default()), 0);
    }

    #[test]
    fn counts_and_io_view_list_the_same_ops() {
        let mut p = Program::default();
        let s = p.buf(Buf::Scratch(4096));
        p.phases.push(Phase::Read(vec![Io::new(op(2, 0, 4096), Ref::new(s, 0))]));
        p.phases.push(Phase::Compute(vec![]));
        p.phases.push(Phase::write(vec![Io::new(op(3, 0, 4096), Ref::new(s, 0))]));
        p.phases.push(Phase::Reset(vec![DevOp { member: 1, offset: 7 << 20, len: 0, role: Role::ZoneReset, col: 0 }]));
        p.methods.push(Method::Rmw);
        let c = p.counts();
        assert_eq!((c.data_reads, c.data_writes, c.zone_resets, c.stripes_rmw), (1, 1, 1, 1));
        let io: Vec<(Dir, Vec<usize>)> = p.io().map(|(d, ops)| (d, ops.iter().map(|i| i.op.member).collect())).collect();
        assert_eq!(io, vec![(Dir::Read, vec![2]), (Dir::Write, vec![3])]);
    }
}
