//! The one real executor.
//!
//! Every kind of array is a policy that turns requests and maintenance into
//! [`Program`]s; an [`Executor`] runs them on member devices.  It owns what
//! is the same for every kind:
//!
//! ```text
//!   submit(planner) ─┬─> plan ─> lock the program's ranges ─> health still
//!                    │   the one planned against? ── no ──> abort, plan again
//!                    │        │ yes
//!                    │        ▼
//!                    │   phases in order:  Read ─ Compute ─ [journal] Write
//!                    │                     ─ Flush ─ Reset
//!                    │   (a large Compute and the unjournaled Write after it,
//!                    │    on members in memory: fused, see `fuse`)
//!                    │        │ a member errs
//!                    │        ▼
//!                    └── abort, planner.failed(failures) (the array
//!                        records the member failed, or rebuilds what a
//!                        read could not read), plan again
//!                             │ all phases done
//!                             ▼
//!                        count the ops, commit(kept buffers)
//! ```
//!
//! It knows no layout: the computation between phases is data
//! ([`mosaic_core::Combine`]: GF(2^8) linear combinations), run on the
//! erasure-code kernel chosen at start.  The simulator times the same
//! programs' device operations on drive models.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::{Mutex, MutexGuard};

use mosaic_core::{Combine, DevOp, DeviceIo, Dir, Io, Mark, OpCounts, Phase, Program, Role};
use mosaic_dev::Member;

pub mod corrected;
mod fuse;
mod shard;
mod slots;
#[cfg(test)]
mod tests;

pub use fuse::fusable;
pub use shard::{Gate, GateWrite};
pub use slots::lendable;
use slots::Slot;

/// Range-lock stripes (keys hash onto these).
const LOCKS: usize = 4096;

/// Phases moving at most this many bytes run on the calling thread.
const INLINE_BYTES: u64 = 64 << 10;

/// The largest write [`Executor::prefetch_writes`] fetches lines for.
const PREFETCH_MAX: u64 = 64 << 10;

/// How many times [`Executor::submit`] plans a request again after a
/// health change made its plan stale, before it gives up.
pub const MAX_STALE: usize = 1 << 16;

/// Why a program did not complete.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// Members returned I/O errors; the program stopped after the phase.
    #[error("{}", describe_failures(.0))]
    Device(Vec<Failure>),
    /// The array's health changed between planning and locking.
    #[error("the array changed while the request was planned")]
    Stale,
    /// The program is malformed (a policy bug) or a computation failed.
    #[error("invalid program: {0}")]
    Program(String),
    /// The journal could not log the writes; nothing was written.
    #[error("journal: {0}")]
    Journal(String),
}

/// Members' failures in words: `member M: error; ...`.
pub fn describe_failures(f: &[Failure]) -> String {
    f.iter().map(|x| format!("member {}: {}", x.member, x.error)).collect::<Vec<_>>().join("; ")
}

/// One member operation that failed.
#[derive(Debug)]
pub struct Failure {
    pub member: usize,
    /// The read that failed, when it was a read (a policy may repair what
    /// the member could not read, as md corrects a read error, instead of
    /// failing the member); None for a write, a flush or a zone reset.
    pub read: Option<DevOp>,
    pub error: io::Error,
}

impl Failure {
    /// A failure of `member` that was not a read.
    pub fn of(member: usize, error: io::Error) -> Failure {
        Failure { member, read: None, error }
    }
}

/// The client's side of a program: the bytes a write carries, or the
/// buffer a read fills.
pub enum Client<'a> {
    None,
    In(&'a [u8]),
    Out(&'a mut [u8]),
}

/// Anything held while a journaled write phase runs (the journal's
/// in-flight guard), dropped when its writes are done.
pub trait Held {}
impl<T> Held for T {}

/// Where a write phase marked `journal` is logged before any of its writes
/// is issued.
pub trait JournalHook: Sync {
    /// Log `writes` (member, offset, and the bytes as the parts that
    /// follow each other from that offset: one, or a merged write's
    /// pieces) and `marks` (the policy's records for replay) durably.
    /// The returned value is held until the writes complete.
    fn log<'a>(&'a self, writes: &[DevWrite<'_>], marks: &[Mark]) -> Result<Box<dyn Held + 'a>, String>;
    /// Some of the `writes` just logged failed on their members: called
    /// before the value [`JournalHook::log`] returned is dropped (so a
    /// write-intent bitmap can keep their regions marked until the failed
    /// member is recorded out, which happens later).
    fn writes_failed(&self, _writes: &[DevWrite<'_>]) {}
}

/// One device write of a phase: the operation and its bytes, as parts
/// one after another (a merged write's pieces, where they lie).
pub type DevWrite<'b> = (DevOp, &'b [&'b [u8]]);

/// A policy's side of [`Executor::submit`]: plan against the current
/// health, then commit or abort.
pub trait Planner {
    type Error: From<ExecError>;
    /// The program for the request against the current health.
    fn plan(&mut self) -> Result<Program, Self::Error>;
    /// The program ran; `kept` holds its [`Program::keep`] buffers.
    fn commit(&mut self, _p: &Program, _kept: Vec<Vec<u8>>) -> Result<(), Self::Error> {
        Ok(())
    }
    /// The program will not run (or stopped part-way): undo what `plan`
    /// reserved.  The next `plan` must not depend on it.
    fn abort(&mut self, _p: &Program) {}
    /// Members failed while the program ran: record them failed (or, for
    /// a failed read, repair what the member could not read).  Return an
    /// error to stop instead of planning again.
    fn failed(&mut self, failures: &[Failure]) -> Result<(), Self::Error>;
}

/// Per-member counters of completed operations.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub ops: OpCounts,
    pub members: Vec<DeviceIo>,
    /// Failed operations per member: reads, writes (flushes count as writes).
    pub errors: Vec<[u64; 2]>,
}

impl Counters {
    fn new(n: usize) -> Counters {
        Counters { ops: OpCounts::default(), members: vec![DeviceIo::default(); n], errors: vec![[0; 2]; n] }
    }

    /// Add a thread's tally to these.
    fn merge(&mut self, o: &Tally) {
        self.ops.merge(&o.ops);
        for (a, b) in self.members.iter_mut().zip(&o.members) {
            a.reads += b.0.reads;
            a.writes += b.0.writes;
            a.read_bytes += b.0.read_bytes;
            a.write_bytes += b.0.write_bytes;
        }
        for (a, b) in self.errors.iter_mut().zip(&o.errors) {
            a[0] += b.0[0];
            a[1] += b.0[1];
        }
    }
}

/// One thread's [`Counters`] ([`shard`]).  Each member's entry has its
/// own cache lines: the vectors of different threads' tallies, allocated
/// one after the other, would otherwise share lines.
struct Tally {
    ops: OpCounts,
    members: Vec<shard::Padded<DeviceIo>>,
    errors: Vec<shard::Padded<[u64; 2]>>,
}

impl Tally {
    fn new(n: usize) -> Tally {
        Tally { ops: OpCounts::default(), members: (0..n).map(|_| Default::default()).collect(), errors: (0..n).map(|_| Default::default()).collect() }
    }
}

/// The members as a run found them: slot `i` holds member `i`'s device,
/// `None` when it is missing.
type Members = [Option<Arc<dyn Member>>];

/// Member `m`'s device in `ms`.
fn dev(ms: &Members, m: usize) -> io::Result<&dyn Member> {
    ms.get(m).and_then(|d| d.as_deref()).ok_or_else(|| io::Error::other("member missing"))
}

/// Runs programs on members.  One per array.
pub struct Executor {
    /// Each run loads the table once and runs on it (no lock, no
    /// reference count taken per operation: those lines are written by
    /// every thread running programs); a change stores a new table.
    members: ArcSwap<Vec<Option<Arc<dyn Member>>>>,
    /// Held while the table changes (changes never race each other).
    changing: Mutex<()>,
    /// Added to every device offset (the fixed arrays' data area starts
    /// after their superblock slots).
    base: u64,
    /// Bumped whenever the array's health changes; a program planned
    /// against an older epoch is planned again.
    epoch: AtomicU64,
    locks: Vec<Mutex<()>>,
    /// Counters by thread ([`shard`]); [`Executor::counters`] sums them.
    counts: Box<[shard::Padded<Mutex<Tally>>]>,
    pool: std::sync::OnceLock<rayon::ThreadPool>,
    /// Every member is RAM or a file on a RAM file system: an operation is
    /// a memory copy, so phases run on the calling thread (perf under 1 MiB
    /// writes on /dev/shm files: handing them to I/O threads spent 44 % of
    /// the server's samples in those threads' yields and wake-ups).
    all_cheap: AtomicBool,
    /// Some member is remote: its operations wait on a network round
    /// trip, so a phase's operations always go out together.
    any_remote: AtomicBool,
    /// Scratch memory reused from run to run.
    scratch: slots::Pool,
    kernel: mosaic_ec::Kernel,
}

impl Executor {
    pub fn new(members: Vec<Option<Arc<dyn Member>>>, base: u64) -> Executor {
        let n = members.len();
        let ex = Executor {
            members: ArcSwap::from_pointee(members),
            changing: Mutex::new(()),
            base,
            epoch: AtomicU64::new(0),
            locks: (0..LOCKS).map(|_| Mutex::new(())).collect(),
            counts: shard::each(|| Mutex::new(Tally::new(n))),
            pool: std::sync::OnceLock::new(),
            any_remote: AtomicBool::new(false),
            all_cheap: AtomicBool::new(false),
            scratch: slots::Pool::default(),
            kernel: mosaic_ec::default_kernel().unwrap_or(mosaic_ec::Kernel::Rse),
        };
        ex.kinds_changed(&ex.members.load());
        ex
    }

    pub fn width(&self) -> usize {
        self.members.load().len()
    }

    pub fn member(&self, i: usize) -> Option<Arc<dyn Member>> {
        self.members.load().get(i).cloned().flatten()
    }

    /// Change the member table with `f` (a new table replaces the old;
    /// runs that loaded the old one finish on it), then note the new
    /// kinds and bump the epoch.
    fn change<T>(&self, f: impl FnOnce(&mut Vec<Option<Arc<dyn Member>>>) -> T) -> T {
        let _g = self.changing.lock();
        let mut ms = Vec::clone(&self.members.load());
        let out = f(&mut ms);
        self.install(ms);
        out
    }

    /// Put `ms` in place of the member table (`changing` held).
    fn install(&self, ms: Vec<Option<Arc<dyn Member>>>) {
        self.kinds_changed(&ms);
        self.members.store(Arc::new(ms));
        self.bump();
    }

    pub fn set_member(&self, i: usize, m: Option<Arc<dyn Member>>) {
        self.change(|ms| ms[i] = m);
    }

    /// Put `m` in slot `i` only while the slot holds `expected` (the same
    /// device): whether it did.  Maintenance that lent a slot a device of
    /// its own gives it back this way, never over what someone else put
    /// there meanwhile (a hot spare taking a failed member's place).
    pub fn swap_member(&self, i: usize, expected: &Arc<dyn Member>, m: Arc<dyn Member>) -> bool {
        let _g = self.changing.lock();
        let now = self.members.load();
        if !now.get(i).and_then(Option::as_ref).is_some_and(|now| Arc::ptr_eq(now, expected)) {
            return false;
        }
        let mut ms = Vec::clone(&now);
        ms[i] = Some(m);
        self.install(ms);
        true
    }

    /// Add a member after the last (an array that grows).
    pub fn add_member(&self, m: Arc<dyn Member>) {
        self.change(|ms| {
            ms.push(Some(m));
            for c in self.counts.iter() {
                let mut c = c.0.lock();
                c.members.push(Default::default());
                c.errors.push(Default::default());
            }
        })
    }

    /// Take the last member away (an array that drops one): its device.
    pub fn remove_last_member(&self) -> Option<Arc<dyn Member>> {
        self.change(|ms| {
            let m = ms.pop().flatten();
            for c in self.counts.iter() {
                let mut c = c.0.lock();
                c.members.truncate(ms.len());
                c.errors.truncate(ms.len());
            }
            m
        })
    }

    /// Note which kinds of members the array has (after any change).
    fn kinds_changed(&self, ms: &[Option<Arc<dyn Member>>]) {
        self.any_remote.store(ms.iter().flatten().any(|m| m.is_remote()), Ordering::Relaxed);
        self.all_cheap.store(ms.iter().flatten().all(|m| m.cheap_flush()), Ordering::Relaxed);
    }

    /// Whether every member in service is RAM or a file on a RAM file
    /// system: each operation is a copy that completes in microseconds.
    pub fn all_cheap(&self) -> bool {
        self.all_cheap.load(Ordering::Relaxed)
    }

    /// Whether some member is remote (its operations wait on the network).
    fn any_remote(&self) -> bool {
        self.any_remote.load(Ordering::Relaxed)
    }

    /// The health epoch programs are planned against.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Note a health change: programs planned before it are planned again.
    pub fn bump(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    pub fn counters(&self) -> Counters {
        let mut sum = Counters::new(self.counts[0].0.lock().members.len());
        for c in self.counts.iter() {
            sum.merge(&c.0.lock());
        }
        sum
    }

    /// Member `m`'s error counts start over (a new device in its slot).
    pub fn forget_errors(&self, m: usize) {
        for c in self.counts.iter() {
            if let Some(e) = c.0.lock().errors.get_mut(m) {
                e.0 = [0; 2];
            }
        }
    }

    pub fn reset_counters(&self) {
        let n = self.width();
        for c in self.counts.iter() {
            *c.0.lock() = Tally::new(n);
        }
    }

    /// This thread's counters.
    fn counts(&self) -> MutexGuard<'_, Tally> {
        self.counts[shard::mine()].0.lock()
    }

    /// Lock the ranges `keys` (sorted, so two programs never wait on each
    /// other in opposite orders).
    pub fn lock(&self, keys: impl Iterator<Item = u64>) -> Vec<MutexGuard<'_, ()>> {
        let mut idx: Vec<usize> = keys.map(|s| (s % LOCKS as u64) as usize).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(|i| self.locks[i].lock()).collect()
    }

    /// Plan, lock, run, and on a member failure abort, record it and plan
    /// again, at most once per member plus one.  A plan made stale by a
    /// health change (a rebuild moving on, a member failed elsewhere) is
    /// made again without counting as a failure, up to [`MAX_STALE`] times.
    pub fn submit<P: Planner>(&self, planner: &mut P, mut client: Client<'_>, journal: Option<&dyn JournalHook>) -> Result<(), P::Error> {
        let attempts = self.width() + 1;
        let (mut failures, mut stale) = (0, 0);
        while failures < attempts && stale < MAX_STALE {
            let epoch = self.epoch();
            let p = planner.plan()?;
            let res = self.run_at(&p, reborrow(&mut client), journal, Some(epoch));
            match res {
                Ok(kept) => return planner.commit(&p, kept),
                Err(ExecError::Stale) => {
                    planner.abort(&p);
                    stale += 1;
                }
                Err(ExecError::Device(f)) => {
                    planner.abort(&p);
                    planner.failed(&f)?;
                    failures += 1;
                }
                Err(e) => {
                    planner.abort(&p);
                    return Err(e.into());
                }
            }
        }
        let why = if stale >= MAX_STALE { "the array's health kept changing while the request was planned" } else { "members kept failing" };
        Err(ExecError::Device(vec![Failure::of(usize::MAX, io::Error::other(why))]).into())
    }

    /// Take back buffers a program kept ([`Executor::run`]'s result) once
    /// their bytes have been used, for later runs' scratch (a kept code
    /// then costs no allocation).  Their bytes are never shown again: a
    /// run zeroes what it reads before writing.
    pub fn give_back(&self, kept: Vec<Vec<u8>>) {
        for v in kept {
            self.scratch.put(v);
        }
    }

    /// Run one program (no re-planning): lock, phases, count.
    pub fn run(&self, p: &Program, client: Client<'_>, journal: Option<&dyn JournalHook>) -> Result<Vec<Vec<u8>>, ExecError> {
        self.run_at(p, client, journal, None)
    }

    fn run_at(&self, p: &Program, client: Client<'_>, journal: Option<&dyn JournalHook>, epoch: Option<u64>) -> Result<Vec<Vec<u8>>, ExecError> {
        if cfg!(debug_assertions) {
            p.validate().map_err(ExecError::Program)?;
        }
        let _g = self.lock(p.locks.iter().copied());
        // The members the whole run goes to, loaded before the epoch is
        // checked (a change stores its table before it bumps the epoch).
        let ms = self.members.load();
        if epoch.is_some_and(|e| e != self.epoch()) {
            return Err(ExecError::Stale);
        }
        // Members lend the bytes of reads nothing changes while the
        // program runs (held here, so the loans outlive the slots).
        let lend = slots::lendable(p);
        let mut slots = slots::materialize(p, &self.scratch, client, &lend).map_err(ExecError::Program)?;
        if self.all_cheap() {
            self.prefetch_writes(p, &ms);
        }
        let res = self.phases(p, &ms, &mut slots, journal, Loans { lend: &lend, lenders: &ms });
        let kept = res.map(|()| p.keep.iter().map(|&b| slots::take(&mut slots, b as usize)).collect());
        self.scratch.recycle(slots);
        kept
    }

    /// Before a program runs on members in memory: hint its small data
    /// and code writes to ranges it does not read first
    /// ([`Member::prefetch_write`]).  Their lines are fetched while the
    /// reads, computations and journal record before them run, instead of
    /// each write stalling on lines nothing had read (a cache's destage
    /// writes pages whose homes are cold; an RMW's writes go where its
    /// reads just were).  Metadata is streamed around the CPU cache, and a
    /// large write is left to the hardware's own prefetching.
    fn prefetch_writes(&self, p: &Program, ms: &Members) {
        let reads = || p.phases.iter().filter_map(|ph| if let Phase::Read(ios) = ph { Some(ios) } else { None }).flatten();
        for ph in &p.phases {
            let Phase::Write { ops, .. } = ph else { continue };
            for io in ops.iter().filter(|io| io.op.role != Role::Meta && io.op.len <= PREFETCH_MAX) {
                let (m, at, end) = (io.op.member, io.op.offset, io.op.offset.saturating_add(io.op.len));
                if reads().any(|r| r.op.member == m && r.op.offset <= at && r.op.offset.saturating_add(r.op.len) >= end) {
                    continue;
                }
                if let Ok(d) = dev(ms, m) {
                    d.prefetch_write(self.base.saturating_add(at), io.op.len as usize);
                }
            }
        }
    }

    /// Run `p`'s phases in order, then count its stripes.
    fn phases<'s>(&self, p: &Program, ms: &Members, slots: &mut [Slot<'s>], journal: Option<&dyn JournalHook>, loans: Loans<'_, 's>) -> Result<(), ExecError> {
        let mut fused = false;
        for (i, phase) in p.phases.iter().enumerate() {
            if std::mem::take(&mut fused) {
                continue;
            }
            match phase {
                Phase::Read(ios) => self.read_phase(ms, ios, slots, loans)?,
                Phase::Compute(cs) if self.fuses(p, i, cs) => {
                    let Some(Phase::Write { ops, .. }) = p.phases.get(i + 1) else { unreachable!("fusable") };
                    self.fused_phases(p, i, ms, cs, ops, slots)?;
                    fused = true;
                }
                Phase::Compute(cs) => self.compute_phase(cs, slots)?,
                Phase::Write { ops, journal: j, marks } => self.write_phase(p, ms, ops, (*j).then_some(marks.as_slice()).zip(journal), slots)?,
                Phase::Flush(fs) => {
                    // Flushes move no bytes; they go to the I/O threads
                    // unless every one of them is cheap.
                    let cheap = fs.iter().all(|&m| dev(ms, m).is_ok_and(|d| d.cheap_flush()));
                    let res = self.each(fs, if cheap { 0 } else { u64::MAX }, |&m| dev(ms, m)?.flush());
                    self.count_errors(Dir::Write, fs.iter().copied(), &res);
                    failures(fs.iter().map(|&m| (m, None)), res)?;
                }
                Phase::Reset(zs) => {
                    let res = self.each(zs, u64::MAX, |z| dev(ms, z.member)?.reset_zone(self.base + z.offset));
                    failures(zs.iter().map(|z| (z.member, None)), res)?;
                    self.counts().ops.zone_resets += zs.len() as u64;
                }
            }
        }
        let mut c = self.counts();
        for m in &p.methods {
            c.ops.add_method(*m);
        }
        Ok(())
    }

    /// Log the writes first when the phase is journaled (`journal`: its
    /// marks and the hook), then issue them; each write's bytes are one
    /// slice, or the pieces of its gather buffer, written as one.
    fn write_phase(&self, p: &Program, ms: &Members, ops: &[Io], journal: Option<(&[Mark], &dyn JournalHook)>, slots: &[Slot<'_>]) -> Result<(), ExecError> {
        let mut parts = Vec::with_capacity(ops.len());
        let mut spans = Vec::with_capacity(ops.len());
        for io in ops {
            let start = parts.len();
            slots::write_parts(p, slots, io.at, io.op.len as usize, &mut parts);
            spans.push(start..parts.len());
        }
        let writes: Vec<DevWrite<'_>> = ops.iter().zip(spans).map(|(io, span)| (io.op, &parts[span])).collect();
        let held = match journal {
            Some((marks, hook)) => Some(hook.log(&writes, marks).map_err(ExecError::Journal)?),
            None => None,
        };
        let bytes = ops.iter().map(|io| io.op.len).sum();
        let res = self.each(&writes, bytes, |&(op, b)| {
            let dev = dev(ms, op.member)?;
            match b {
                // Metadata (log and journal records, tables) is appended
                // and not read back before an open: streamed like a log
                // append ([`Member::write_parts_at`]).
                [one] if op.role != Role::Meta => dev.write_at(one, self.base + op.offset),
                _ => dev.write_parts_at(b, self.base + op.offset),
            }
        });
        if let (Some(_), Some((_, hook))) = (&held, journal) {
            if res.iter().any(|r| r.is_err()) {
                hook.writes_failed(&writes);
            }
        }
        drop(held);
        self.settle(Dir::Write, ops, res)
    }

    /// A read phase: each read the program lets a member lend
    /// ([`slots::lendable`]) takes the member's bytes if it lends them,
    /// else a buffer of its own; the others copy into their buffers.
    /// Either way each read counts as one.
    fn read_phase<'s>(&self, ms: &Members, ios: &[Io], slots: &mut [Slot<'s>], loans: Loans<'_, 's>) -> Result<(), ExecError> {
        let mut lent = Vec::new();
        if !loans.lend.is_empty() {
            lent = ios.iter().map(|io| self.borrow(io, slots, loans)).collect();
        }
        let mut targets = slots::read_targets(slots, ios, &lent).map_err(ExecError::Program)?;
        let bytes = ios.iter().map(|io| io.op.len).sum();
        let res = self.each_mut(&mut targets, bytes, |(i, buf)| {
            let op = &ios[*i].op;
            dev(ms, op.member)?.read_at(buf, self.base + op.offset)
        });
        // Results in `targets` order: put them back in `ios` order.
        let mut by_io: Vec<Option<io::Result<()>>> = (0..ios.len()).map(|_| None).collect();
        for ((i, _), r) in targets.iter().zip(res) {
            by_io[*i] = Some(r);
        }
        self.settle(Dir::Read, ios, by_io.into_iter().map(|r| r.unwrap_or(Ok(()))).collect())
    }

    /// Whether `io`'s member lent its bytes into its buffer's slot; a
    /// lendable buffer it does not lend gets scratch for the read to fill.
    fn borrow<'s>(&self, io: &Io, slots: &mut [Slot<'s>], loans: Loans<'_, 's>) -> bool {
        let b = io.at.buf as usize;
        if !loans.lend.get(b).copied().unwrap_or(false) {
            return false;
        }
        let view = loans.lenders.get(io.op.member).and_then(|m| m.as_deref()).and_then(|m| m.view(self.base + io.op.offset, io.op.len as usize));
        let lent = view.is_some();
        slots[b] = match view {
            Some(v) => Slot::Shared(v),
            // Filled whole by the read: nothing to zero.
            None => Slot::Owned(self.scratch.get(io.op.len as usize, &slots::Ranges::default())),
        };
        lent
    }

    /// Whether computation phase `i` of `p` runs fused with the write
    /// phase after it ([`fuse`]): it computes [`fuse::FUSE_MIN`] bytes or
    /// more, on members whose writes are copies into memory.
    fn fuses(&self, p: &Program, i: usize, cs: &[Combine]) -> bool {
        self.all_cheap() && !self.any_remote() && fusable(&p.phases, i) && cs.iter().map(|c| c.len).sum::<usize>() >= fuse::FUSE_MIN
    }

    /// Computations `cs` and the writes `ops` after them, fused: each
    /// write goes out piece by piece behind the computations its bytes
    /// depend on ([`fuse::run`]).
    fn fused_phases(&self, p: &Program, i: usize, ms: &Members, cs: &[Combine], ops: &[Io], slots: &mut [Slot<'_>]) -> Result<(), ExecError> {
        // A computation that would fail fails before any write goes out,
        // as phase by phase (`run` validates whole programs only in debug
        // builds).
        for c in cs {
            p.validate_combine(c).map_err(ExecError::Program)?;
        }
        if let Some(r) = self.in_place(p, i, ms, cs, ops, slots) {
            let res = ops.iter().map(|_| r.as_ref().map(|_| ()).map_err(|e| io::Error::new(e.kind(), e.to_string()))).collect();
            return self.settle(Dir::Write, ops, res);
        }
        let slots = std::cell::RefCell::new(slots);
        let res = fuse::run(
            p,
            cs,
            ops,
            |c| slots::combine(self.kernel, c, &mut slots.borrow_mut()).map_err(ExecError::Program),
            |io, pieces, done, single| {
                let dev = dev(ms, io.op.member)?;
                let s = slots.borrow();
                let parts: Vec<&[u8]> = pieces.iter().map(|&(r, n)| slots::bytes(&s, r, n)).collect();
                match parts.as_slice() {
                    [one] if single => dev.write_at(one, self.base + io.op.offset),
                    _ => dev.write_parts_at(&parts, self.base + io.op.offset + done),
                }
            },
        )?;
        self.settle(Dir::Write, ops, res)
    }

    /// Computations `cs` and the writes `ops` after them made in one
    /// pass straight into the members' memory ([`fuse::in_place`]), when
    /// the program has that shape and every member takes a write in place
    /// ([`Member::write_in_place`]): the writes' outcome once the pass
    /// ran (an error then fails every write: which member's bytes are in
    /// place is not known), None when it did not run.  Then nothing was
    /// written: a member that refuses its write, or cannot take it in
    /// place, leaves every write to the fused run.
    fn in_place(&self, p: &Program, i: usize, ms: &Members, cs: &[Combine], ops: &[Io], slots: &[Slot<'_>]) -> Option<io::Result<()>> {
        let steps = fuse::in_place(p, i, cs, ops)?;
        let devs = ops.iter().map(|io| dev(ms, io.op.member)).collect::<Result<Vec<_>, _>>().ok()?;
        // Every source whole before any member is touched.
        let srcs: Vec<Vec<&[u8]>> = cs.iter().map(|c| c.terms.iter().map(|t| slots::bytes(slots, t.1, c.len)).collect()).collect();
        if srcs.iter().zip(cs).any(|(v, c)| v.iter().any(|s| s.len() != c.len)) {
            return None;
        }
        let mut ran = false;
        let mut kernel = |outs: &[*mut u8]| {
            for ((c, st), srcs) in cs.iter().zip(&steps).zip(&srcs) {
                let to: Vec<*mut u8> = st.srcs.iter().map(|&(k, off)| outs[k].wrapping_add(off as usize)).collect();
                // SAFETY: every write's memory is `outs[k]` for its whole
                // length, held by its member for this write; the plan puts
                // each byte of each write once, inside it (`fuse::in_place`
                // checked every write is made whole, exactly once).  The
                // sources are the program's buffers or bytes a member lends
                // (below a write pointer, or a range no write of the
                // program touches), never memory being written.
                unsafe { fuse::copy_and_xor(srcs, &to, outs[st.dst.0].wrapping_add(st.dst.1 as usize), c.len) };
            }
            ran = true;
        };
        let mut outs = Vec::with_capacity(ops.len());
        let r = nest(&devs, ops, self.base, &mut outs, &mut kernel);
        ran.then_some(r)
    }

    fn compute_phase(&self, cs: &[Combine], slots: &mut [Slot<'_>]) -> Result<(), ExecError> {
        for c in cs {
            slots::combine(self.kernel, c, slots).map_err(ExecError::Program)?;
        }
        Ok(())
    }

    /// Count the completed ops; the failures as an error.
    fn settle(&self, dir: Dir, ios: &[Io], res: Vec<io::Result<()>>) -> Result<(), ExecError> {
        {
            let mut c = self.counts();
            for (io, r) in ios.iter().zip(&res) {
                if r.is_ok() {
                    c.ops.add_op(dir, &io.op);
                    if let Some(m) = c.members.get_mut(io.op.member) {
                        m.0.add(dir, io.op.len);
                    }
                }
            }
        }
        self.count_errors(dir, ios.iter().map(|io| io.op.member), &res);
        failures(ios.iter().map(|io| (io.op.member, matches!(dir, Dir::Read).then_some(io.op))), res)
    }

    /// Count the failed operations of `res` by member and direction.
    fn count_errors(&self, dir: Dir, members: impl Iterator<Item = usize>, res: &[io::Result<()>]) {
        if res.iter().all(|r| r.is_ok()) {
            return;
        }
        let mut c = self.counts();
        for (m, r) in members.zip(res) {
            if let (Err(_), Some(e)) = (r, c.errors.get_mut(m)) {
                e.0[matches!(dir, Dir::Write) as usize] += 1;
            }
        }
    }

    /// Run a phase's ops on the calling thread: one op, RAM members or
    /// files on a RAM file system (`all_cheap`), or a
    /// caller that is itself an I/O thread (a nested array used as a
    /// member): blocking on another pool from inside a pool job can
    /// deadlock work stealing.  Phases of at most [`INLINE_BYTES`] run
    /// inline too (see `each_mut`): a 4 KiB read-modify-write moves 8 KiB
    /// per phase, waking pool threads costs more than the copies, and
    /// throughput callers (the NBD server) issue requests from several
    /// threads anyway.  Not with remote members: there an operation waits
    /// a round trip, and a phase's operations wait them together.
    fn inline(&self, n: usize) -> bool {
        n <= 1 || self.all_cheap.load(Ordering::Relaxed) || rayon::current_thread_index().is_some()
    }

    fn pool(&self) -> &rayon::ThreadPool {
        self.pool.get_or_init(|| {
            // Remote members take up to 4 requests each at once.
            let per = if self.any_remote() { 4 } else { 2 };
            rayon::ThreadPoolBuilder::new()
                .num_threads((per * self.width()).clamp(4, 64))
                .thread_name(|i| format!("mosaic-io-{i}"))
                .build()
                .expect("starting I/O threads")
        })
    }

    /// `each_mut` over shared items.
    fn each<T: Sync>(&self, items: &[T], bytes: u64, f: impl Fn(&T) -> io::Result<()> + Sync) -> Vec<io::Result<()>> {
        let mut refs: Vec<&T> = items.iter().collect();
        self.each_mut(&mut refs, bytes, |t| f(t))
    }

    /// `f` on every item: inline (see [`Executor::inline`]) or one task
    /// per item on the I/O threads; the results in item order.
    fn each_mut<T: Send>(&self, items: &mut [T], bytes: u64, f: impl Fn(&mut T) -> io::Result<()> + Sync) -> Vec<io::Result<()>> {
        if self.inline(items.len()) || (bytes <= INLINE_BYTES && !self.any_remote()) {
            return items.iter_mut().map(&f).collect();
        }
        let mut out: Vec<Option<io::Result<()>>> = (0..items.len()).map(|_| None).collect();
        // `in_place_scope`, not `scope`: the calling thread (never an I/O
        // thread, see `inline`) spawns the operations and then blocks.
        // A `scope` hands its body to an I/O thread, which, while it waits
        // for its own operations, takes up any other program's queued
        // operation, and returns only once that one has: a journal flush
        // then waited for a background destage's writes to a slow drive.
        self.pool().in_place_scope(|s| {
            for (it, slot) in items.iter_mut().zip(out.iter_mut()) {
                let f = &f;
                s.spawn(move |_| *slot = Some(f(it)));
            }
        });
        out.into_iter().map(|r| r.unwrap_or_else(|| Err(io::Error::other("I/O thread lost")))).collect()
    }
}

/// The buffers a run's members may lend ([`slots::lendable`]), and the
/// members as the run found them (empty when nothing may be lent).
#[derive(Clone, Copy)]
struct Loans<'r, 's> {
    lend: &'r [bool],
    lenders: &'s Members,
}

fn reborrow<'a>(c: &'a mut Client<'_>) -> Client<'a> {
    match c {
        Client::None => Client::None,
        Client::In(b) => Client::In(b),
        Client::Out(b) => Client::Out(b),
    }
}

/// Begin an in-place write of each of `ops` on its member `devs[i]`,
/// one inside the other, and run `kernel` on all their memory at once
/// (the innermost); a member that cannot or will not take its write
/// aborts every one begun (none counts as written) and `kernel` does not
/// run.
fn nest(devs: &[&dyn Member], ops: &[Io], base: u64, outs: &mut Vec<*mut u8>, kernel: &mut dyn FnMut(&[*mut u8])) -> io::Result<()> {
    let Some((d, rest)) = devs.split_first() else {
        kernel(outs);
        return Ok(());
    };
    let io = &ops[outs.len()];
    let r = d.write_in_place(base + io.op.offset, io.op.len, &mut |mem: &mut [u8]| {
        outs.push(mem.as_mut_ptr());
        let r = nest(rest, ops, base, outs, kernel);
        outs.pop();
        r
    });
    r.unwrap_or_else(|| Err(io::Error::new(io::ErrorKind::Unsupported, "no in-place write")))
}

/// The failed operations of `res`, each of a member and, for a read, the
/// read.
fn failures(ops: impl Iterator<Item = (usize, Option<DevOp>)>, res: Vec<io::Result<()>>) -> Result<(), ExecError> {
    // Every phase passes here: nothing is built when nothing failed.
    if res.iter().all(|r| r.is_ok()) {
        return Ok(());
    }
    Err(ExecError::Device(ops.zip(res).filter_map(|((member, read), r)| r.err().map(|error| Failure { member, read, error })).collect()))
}
