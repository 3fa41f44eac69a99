//! Read errors corrected from redundancy, as md corrects them.
//!
//! A drive that cannot read a sector (a latent sector error, the commonest
//! fault of a disk) usually reads it again once the sector is written:
//! the drive remaps it.  So a member read that fails during a client's
//! request (a read, or a write's read-modify-write) does not fail the
//! member at once:
//!
//! ```text
//!   a read of member m fails
//!     ──> under the stripes' locks: the read's pieces (one a stripe unit)
//!         read again; those still failing rebuilt onto m from the other
//!         members (the rebuild program, m taken as failed for its reads;
//!         a source failing too is left out while the code tolerates it)
//!     ──> the pieces read again on m
//!           ok ──> corrected: counted, the request planned again as ever
//!                  (more than MAX_CORRECTED on m within the decay: m failed,
//!                  as md's max_read_errors)
//!           the rewrite or the read again fails ──> m failed, as before
//!           the others cannot rebuild the bytes: as many other members
//!           out as code columns ──> set aside (below); else (raid0, a
//!           second bad block beside it, ...) ──> m failed, as before
//!   an error saying m cannot be reached (a remote's timeout, a lost
//!   connection) or is too short (a truncated file) ──> m failed at once
//! ```
//!
//! When nothing can rebuild the bytes because other members are out of
//! the stripe (failed, or being rebuilt: the classic RAID-5 loss in a
//! rebuild), failing this one too would put every stripe out of reach
//! (md without a bad-block log).  Instead, with as many members out as
//! the stripe has code columns, the blocks are set aside ([`Array::lose_blocks`]), as md's
//! bad-block log and ZFS's permanent errors do: the logical bytes they
//! take with them recorded lost in the superblocks (reads of them fail),
//! zeros written over the blocks, and the rebuild, scrub or write goes on;
//! a read of them fails.  A member that reads nothing, not even its
//! label, is a dead drive and fails as before.
//!
//! A scrub's reads are corrected the same way (md's check rewrites the
//! sectors it cannot read: finding them before a rebuild needs them is
//! what a periodic check is for), and counted in its report; so are a
//! rebuild's, where the code has a column to spare besides the members
//! being rebuilt (raid6 or rs rebuilding one member, a three-way mirror),
//! and a hot replace's reads of the old drive (the unit rebuilt onto both
//! drives, as md's replace does).
//!
//! Only while the drives' code agrees with their data: not when opened
//! dirty without a journal and not resynced (the code where a crash cut
//! writes off is wrong, and a unit rebuilt from it would be too), not
//! during a grow (two layouts), not under a cache volume (it holds newer
//! code than the drives').  There, as for write errors and flush errors,
//! the member fails at its first error.
//!
//! The rewrite goes to the member outside the journal: it puts back the
//! bytes the stripe already implies, so a crash during it leaves the unit
//! as good as before it.

use std::io;
use std::sync::atomic::Ordering;
use std::time::Instant;

use mosaic_core::layout::MAINT_CHUNK;
use mosaic_core::{Buf, DevOp, FixedLayout, Io, Layout, MemberState, Phase, Program, Ref};
use mosaic_exec::{Client, ExecError, Failure};

use crate::{Array, ArrayError};

pub use mosaic_exec::corrected::{HALF_LIFE, MAX_CORRECTED};
pub(crate) use mosaic_exec::corrected::Corrected;
use mosaic_exec::corrected::unreadable_here;

impl Array {
    /// Whether a client request's failed member reads are corrected
    /// rather than failing the member (see the module's text).
    fn corrects_reads(&self) -> bool {
        self.correct_reads.load(Ordering::Relaxed) && !self.unsynced.load(Ordering::Acquire) && self.shape().reshape.is_none()
    }

    /// A cache volume in front keeps newer code than the drives': its
    /// array fails a member at a read error instead of rebuilding units
    /// from the drives' code.
    pub(crate) fn set_read_correction(&self, on: bool) {
        self.correct_reads.store(on, Ordering::Relaxed);
    }

    /// Member `m`'s corrected read errors since open.
    pub(crate) fn corrected_reads(&self, m: usize) -> u64 {
        self.corrected.lock().get(&m).map_or(0, |c| c.total)
    }

    /// A new device in slot `m`: its count starts over.
    pub(crate) fn forget_corrected(&self, m: usize) {
        self.corrected.lock().remove(&m);
    }

    /// A client request's member failures, on `layout`: failed reads
    /// corrected where they can be, every other failure failing its
    /// member; then the request is planned again, as ever, unless it is a
    /// read and bytes were set aside ([`Array::lose_blocks`]): what it
    /// reads is among them, and it fails.
    pub(crate) fn absorb_request(&self, layout: &FixedLayout, failures: &[Failure], write: bool) -> Result<(), ArrayError> {
        let mut ran = Ran::default();
        self.absorb_reads(layout, failures, false, &mut ran);
        match ran.lost.first() {
            Some(u) if !write => Err(ArrayError::Io(format!(
                "bytes {}..{} of array {} were lost: a member cannot read them, and the members out of their stripe held the only other way to them; recorded (mosaic info lists them), write them again to clear",
                u.offset,
                u.offset + u.len,
                self.superblock().array_uuid
            ))),
            _ => Ok(()),
        }
    }

    /// Run `p`, a maintenance program over stripes whose locks the caller
    /// holds, without journaled writes (a scrub's reads, a rebuild's): a
    /// failed read corrected, or its blocks set aside
    /// ([`Array::lose_blocks`]), and the program run again, as md's check
    /// and recovery rewrite what they cannot read; any other failure
    /// fails its member, as [`Array::run_program`] does.
    pub(crate) fn run_correcting(&self, p: &Program, what: &str) -> Result<Ran, ArrayError> {
        let layout = self.layout();
        let mut ran = Ran::default();
        for _ in 0..=self.geometry().members {
            match self.exec.run(p, Client::None, None) {
                Ok(kept) => {
                    ran.kept = kept;
                    return Ok(ran);
                }
                Err(ExecError::Device(f)) => {
                    if !self.absorb_reads(&layout, &f, true, &mut ran) {
                        return Err(ArrayError::Io(format!("{what}: {}", ExecError::Device(f))));
                    }
                }
                Err(e) => return Err(ArrayError::Io(format!("{what}: {e}"))),
            }
        }
        Err(ArrayError::Io(format!("{what}: members kept failing reads corrected just before")))
    }

    /// [`Array::absorb_request`], the stripes' locks taken or (`held`)
    /// held by the caller: whether every failure was a read, corrected or
    /// its blocks set aside, counted in `ran`.
    fn absorb_reads(&self, layout: &FixedLayout, failures: &[Failure], held: bool, ran: &mut Ran) -> bool {
        let correct = self.corrects_reads();
        let mut all = true;
        for f in failures.iter().filter(|f| f.member < self.geometry().members) {
            let Some(op) = f.read.filter(|_| correct && unreadable_here(&f.error)) else {
                self.fail_on_error(f.member, &f.error);
                all = false;
                continue;
            };
            let why = match self.correct_read(layout, op, held) {
                Ok(()) => {
                    self.counted(f.member, op);
                    ran.corrected += 1;
                    continue;
                }
                Err(why) => why,
            };
            match self.lose_blocks(layout, op, held) {
                Ok(lost) => ran.lost.extend(lost),
                Err(e) => {
                    self.fail_on_error(f.member, &io::Error::new(f.error.kind(), format!("{}; not corrected: {why}; nor set aside: {e}", f.error)));
                    all = false;
                }
            }
        }
        all
    }

    /// A hot replace's copy of member `m`'s unit of `stripe` (column
    /// `col`) could not read the old drive (`e`): the unit rebuilt from
    /// the other members onto the twin under the slot (the old drive and
    /// the new, as md's replace does), the caller holding the stripe's
    /// lock.  Whether it was, so that the copy may go on.
    pub(crate) fn corrected_in_place(&self, m: usize, stripe: u64, col: usize, e: &io::Error) -> bool {
        if !self.corrects_reads() || !unreadable_here(e) {
            return false;
        }
        let layout = self.layout();
        let geo = &layout.planner.geo;
        let role = if col < geo.k { mosaic_core::Role::Data } else { mosaic_core::Role::Code };
        let op = DevOp { member: m, offset: geo.offset_of(stripe, col), len: geo.unit, role, col };
        let ok = self.correct_read(&layout, op, true).is_ok();
        if ok {
            self.counted(m, op);
        }
        ok
    }

    /// One more corrected read error on `m`: logged, and `m` failed past
    /// [`MAX_CORRECTED`].
    fn counted(&self, m: usize, op: DevOp) {
        let recent = self.corrected.lock().entry(m).or_default().add(Instant::now());
        tracing::warn!(member = m, offset = op.offset, len = op.len, "read error corrected ({} bytes at member byte {})", op.len, op.offset);
        if recent > MAX_CORRECTED {
            let why = format!("{recent} read errors corrected within about an hour, more than {MAX_CORRECTED} (md's max_read_errors): failing it");
            self.fail_on_error(m, &io::Error::other(why));
        }
    }

    /// Rebuild the parts of `op`'s range its member cannot read from the
    /// other members, and read them again; why not, if not.
    /// The stripes' locks are taken, unless `held` by the caller.
    fn correct_read(&self, layout: &FixedLayout, op: DevOp, held: bool) -> Result<(), String> {
        let m = op.member;
        let geo = &layout.planner.geo;
        let mut h = self.health();
        h.states.truncate(geo.members);
        if !matches!(h.states.get(m), Some(MemberState::Active | MemberState::Rebuilding { .. })) {
            return Err("not in service".into());
        }
        let pieces = pieces(geo, op);
        let _g = (!held).then(|| self.lock_stripes(pieces.iter().map(|p| p.0)));
        // A read merged over many stripes rewrites only the stripes'
        // pieces that still fail, as md rewrites a stripe's pages.
        let bad: Vec<(u64, DevOp)> = match pieces.len() {
            1 => pieces,
            _ => pieces.into_iter().filter(|p| self.read_again(p.1).is_err()).collect(),
        };
        h.states[m] = MemberState::Failed;
        loop {
            let p = match repair_program(layout, &bad, &h) {
                Ok(p) => p,
                Err(e) => return Err(format!("the other members cannot rebuild its bytes: {e}")),
            };
            let again = |_| bad.iter().try_for_each(|p| self.read_again(p.1).map(drop));
            match self.exec.run(&p, Client::None, None).and_then(again) {
                Ok(()) => return Ok(()),
                Err(ExecError::Device(fs)) => {
                    if let Some(f) = fs.iter().find(|f| f.member == m) {
                        return Err(format!("rebuilding the unreadable bytes onto it failed: {}", f.error));
                    }
                    // A source could not read its part either: leave it
                    // out too, while the code tolerates that.
                    let before = h.states.clone();
                    for f in &fs {
                        if let Some(s) = h.states.get_mut(f.member) {
                            *s = MemberState::Failed;
                        }
                    }
                    if h.states == before {
                        return Err(format!("the other members cannot rebuild its bytes: {}", ExecError::Device(fs)));
                    }
                }
                Err(e) => return Err(format!("the other members cannot rebuild its bytes: {e}")),
            }
        }
    }

    /// Member `op.member` cannot read `op`, and the other members cannot
    /// rebuild it: as many members out of the stripe (failed, or being
    /// rebuilt there) as it has code columns (raid5's one, raid6's two, a
    /// mirror's other copies).  Rather than fail it too, which
    /// would put every stripe out of reach (the classic RAID-5 loss in a
    /// rebuild), its unreadable blocks are set aside, as md's bad-block
    /// log and ZFS's permanent errors do: the logical bytes of the data
    /// columns among its and the out members' there are recorded lost in
    /// the superblocks first ([`crate::lost`]: reads of them fail; a write
    /// of their whole blocks clears them); then its blocks are written with
    /// zeros (the drive remaps them).  The stripe agrees with itself again
    /// once the out members are rebuilt from them, as from any bytes, so
    /// later degraded reads and writes of its other bytes stay right.
    /// Recorded before anything is written: a crash in between leaves them
    /// lost, never silently wrong.  The units set aside.  The stripes'
    /// locks are taken, unless `held` by the caller.
    fn lose_blocks(&self, layout: &FixedLayout, op: DevOp, held: bool) -> Result<Vec<crate::LostUnit>, String> {
        let geo = &layout.planner.geo;
        let s = op.member;
        if geo.m == 0 || matches!(geo.level, mosaic_core::Level::Cbro { .. }) || !self.is_writable() {
            return Err(format!("only a writable array whose stripes hold their own code sets blocks aside, not {} {}+{}", geo.level, geo.k, geo.m));
        }
        let _g = (!held).then(|| self.lock_stripes(pieces(geo, op).into_iter().map(|p| p.0)));
        let bad = self.unreadable_blocks(op, geo);
        if bad.is_empty() {
            // It reads them now: nothing to set aside, the caller goes on.
            return Ok(Vec::new());
        }
        if bad.iter().map(|(a, b)| b - a).sum::<u64>() == op.len && !self.reads_its_label(s) {
            return Err("it reads nothing, not even its label: a dead drive, not a bad block".into());
        }
        let h = self.health();
        let (mut lost, mut zeros) = (Vec::new(), Vec::new());
        for &(a, b) in &bad {
            let stripe = geo.stripes_at(s, a, b - a).0;
            let cs = geo.column_of(stripe, s).ok_or_else(|| format!("stripe {stripe} has no unit on member {s}"))?;
            // Every code column spent on the members out of the stripe.
            let out: Vec<usize> = (0..geo.members).filter(|&x| x != s && !h.available(x, stripe)).collect();
            if out.len() != geo.m {
                return Err(match out.is_empty() {
                    true => format!("no other member is out of stripe {stripe}, yet the others cannot rebuild it (another bad block beside it)"),
                    false if out.len() < geo.m => format!("only members {out:?} are out of stripe {stripe}, which its {} code columns cover, yet the others cannot rebuild it (another bad block beside it)", geo.m),
                    false => format!("members {out:?} are out of stripe {stripe} besides it"),
                });
            }
            let mut cols = vec![cs];
            for &o in &out {
                cols.push(geo.column_of(stripe, o).ok_or_else(|| format!("stripe {stripe} has no unit on member {o}"))?);
            }
            let lo = a - geo.offset_of(stripe, cs);
            let role = if cs < geo.k { mosaic_core::Role::Data } else { mosaic_core::Role::Code };
            zeros.push(DevOp { member: s, offset: a, len: b - a, role, col: cs });
            for c in cols.into_iter().filter(|&c| c < geo.k) {
                let offset = stripe * geo.stripe_data_bytes() + c as u64 * geo.unit + lo;
                lost.push(crate::LostUnit { stripe, member: geo.member_of(stripe, c), offset, len: b - a });
            }
        }
        self.record_lost(&lost).map_err(|e| format!("recording the lost bytes: {e}"))?;
        for u in &lost {
            tracing::error!(stripe = u.stripe, member = u.member, "logical bytes {}..{} lost: member {s} cannot read them, and the members out of the stripe held the only other way to them", u.offset, u.offset + u.len);
        }
        self.write_zeros(&zeros).map_err(|e| format!("writing zeros over its unreadable blocks: {e}"))?;
        Ok(lost)
    }

    /// The block-sized pieces of `op` its member cannot read, as member
    /// ranges merged within a stripe unit of `geo`.
    fn unreadable_blocks(&self, op: DevOp, geo: &mosaic_core::Geometry) -> Vec<(u64, u64)> {
        let (block, unit) = (geo.block, geo.unit);
        let mut bad: Vec<(u64, u64)> = Vec::new();
        let mut at = op.offset;
        while at < op.offset + op.len {
            let n = block.min(op.offset + op.len - at);
            if self.read_again(DevOp { offset: at, len: n, ..op }).is_err() {
                match bad.last_mut() {
                    Some(l) if l.1 == at && at % unit != 0 => l.1 = at + n,
                    _ => bad.push((at, at + n)),
                }
            }
            at += n;
        }
        bad
    }

    /// Whether member `m` still reads its label (the first bytes of the
    /// device, before the data area).
    fn reads_its_label(&self, m: usize) -> bool {
        self.member(m).is_some_and(|d| mosaic_exec::corrected::reads_its_label(|b, at| d.read_at(b, at)))
    }

    /// Write zeros over `ops`.
    fn write_zeros(&self, ops: &[DevOp]) -> Result<(), ExecError> {
        let mut p = Program::default();
        let ios = ops.iter().map(|op| Io::new(*op, Ref::new(p.buf(Buf::Bytes(vec![0u8; op.len as usize].into())), 0))).collect();
        p.phases.push(Phase::write(ios));
        self.exec.run(&p, Client::None, None).map(drop)
    }

    /// Read `op` again, into scratch.
    fn read_again(&self, op: DevOp) -> Result<Vec<Vec<u8>>, ExecError> {
        let mut p = Program::default();
        let b = p.buf(Buf::Scratch(op.len as usize));
        p.phases.push(Phase::Read(vec![Io::new(op, Ref::new(b, 0))]));
        self.exec.run(&p, Client::None, None)
    }
}

/// What [`Array::run_correcting`] did: the buffers the program kept, the
/// reads corrected, the logical bytes set aside as lost.
#[derive(Default)]
pub(crate) struct Ran {
    pub kept: Vec<Vec<u8>>,
    pub corrected: u64,
    pub lost: Vec<crate::LostUnit>,
}

impl Ran {
    /// The logical bytes set aside.
    pub fn lost_bytes(&self) -> u64 {
        self.lost.iter().map(|u| u.len).sum()
    }
}

/// `op` cut at its member's stripe units: each piece with its stripe.
fn pieces(geo: &mosaic_core::Geometry, op: DevOp) -> Vec<(u64, DevOp)> {
    let (first, last) = geo.stripes_at(op.member, op.offset, op.len);
    let (start, end) = (op.offset, op.offset + op.len);
    (first..=last.min(geo.stripes.saturating_sub(1)))
        .filter_map(|s| {
            let col = geo.column_of(s, op.member)?;
            let at = geo.offset_of(s, col);
            let (lo, hi) = (start.max(at), end.min(at + geo.unit));
            (lo < hi).then_some((s, DevOp { offset: lo, len: hi - lo, col, ..op }))
        })
        .collect()
}

/// The program rebuilding the `pieces` of a member (each within one
/// stripe unit), at most [`MAINT_CHUNK`] a plan, from the members `h`
/// has in service (the member itself taken as failed).
fn repair_program(layout: &FixedLayout, pieces: &[(u64, DevOp)], h: &mosaic_core::Health) -> Result<Program, ArrayError> {
    let geo = &layout.planner.geo;
    let mut sps = Vec::new();
    for &(s, op) in pieces {
        let at = geo.offset_of(s, op.col);
        let (mut x, hi) = (op.offset - at, op.offset + op.len - at);
        while x < hi {
            let y = (x + MAINT_CHUNK).min(hi);
            sps.push(layout.planner.plan_rebuild(s, x, y, &[op.member], h)?);
            x = y;
        }
    }
    Ok(layout.rebuild_program(&sps)?)
}
