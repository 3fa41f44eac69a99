//! Read errors corrected from redundancy: what md and ZFS do with a sector
//! a drive cannot read, on zones that cannot be rewritten in place.
//!
//! ```text
//!   a member read fails (a client read, a scrub)
//!     medium error (EIO)            that member left out of this read: each
//!                                   chunk it held decoded from its stripe's
//!                                   other columns (the degraded read path)
//!     ──> the client gets its bytes; then each chunk under the failed
//!         read that its member still cannot read alone (md reads a
//!         stripe's pieces again too): every valid chunk of its stripe
//!         written again through the write path (its logical bytes: the
//!         unreadable one decoded, under the blocks the cache holds
//!         newer), so they are re-striped with fresh parity at the write
//!         pointers and the old stripe, which protects nothing any more,
//!         is garbage for GC, whose zone reset is the drive's rewrite
//!     ──> each failed read counted on its member (`mosaic_exec::corrected`,
//!         the rule fixed arrays count by): past MAX_CORRECTED within the
//!         decay it is failed, as md's max_read_errors
//!   the member cannot be reached (a timeout, a lost connection, a short
//!   file) ──> failed at once, the read served degraded
//!   the others cannot decode the bytes (more members out of a stripe than
//!   its parity) ──> the read fails, naming both
//! ```
//!
//! DVS has no write hole (a stripe is in the tables only once its appends
//! and their log record are durable), so a stripe's code always agrees
//! with its data and decoding from it is always sound.  A read-only open
//! decodes but writes nothing back and fails no one.
//!
//! A destage or GC program whose fill read fails (run by the destager, in
//! the background) is lowered again with that fill decoded from its
//! stripe ([`Relower`]); its member's read is counted, and the fill's old
//! stripe-mates written again, when the array next takes a request
//! ([`DvsArray::take_destager_errors`]).

use std::collections::BTreeSet;

use mosaic_exec::corrected::Corrected;
use mosaic_exec::{Client, ExecError, Failure};

use super::DvsArray;
use mosaic_core::cache::KeyMap;
use mosaic_core::Program;
use mosaic_ec::Code;

use crate::addr::{ChunkKey, Geo};
use crate::engine::{ChunkRead, Job, ReadPiece, ReadSrc, Src};
use crate::program::{self, Lower, Meta, Payload};
use crate::tables::Stripe;
use crate::DvsError;

/// What [`DvsArray::read_pieces`] read: the one buffer, where each disk
/// piece's bytes are in it, the chunks under a read their member could
/// not do (with that member: a read of a run of slots fails whole, so
/// some may read when asked alone), and the member of each such read.
pub(super) struct Got {
    pub bytes: Vec<u8>,
    pub at: Vec<usize>,
    pub unreadable: BTreeSet<(ChunkKey, usize)>,
    pub events: Vec<usize>,
}

/// The read errors of each member slot.
#[derive(Debug, Clone, Default)]
pub(super) struct ReadErrors {
    /// Failed member reads, corrected or not.
    pub seen: u64,
    pub corrected: Corrected,
}

impl DvsArray {
    /// Whether reads a member cannot do are written back and counted (a
    /// writable open) or only decoded (a read-only one: nothing written).
    pub fn set_read_correction(&mut self, on: bool) {
        self.rewrite_unreadable = on;
    }

    /// Member `m`'s failed reads and, of them, those corrected.
    pub fn read_errors(&self, m: usize) -> (u64, u64) {
        self.read_errors.get(m).map_or((0, 0), |e| (e.seen, e.corrected.total))
    }

    /// Read the disk pieces of `pieces` in one program; a member read
    /// that fails leaves that member out and reads again, its pieces
    /// decoded from their stripes (each piece's source changed in place).
    pub(super) fn read_pieces(&mut self, pieces: &mut [ReadPiece]) -> Result<Got, DvsError> {
        let mut healthy = self.dvs.healthy.clone();
        let (mut unreadable, mut events) = (BTreeSet::new(), Vec::new());
        loop {
            let disk: Vec<&ChunkRead> = pieces.iter().filter_map(|p| if let ReadSrc::Disk(cr) = &p.src { Some(cr) } else { None }).collect();
            if disk.is_empty() {
                return Ok(Got { bytes: Vec::new(), at: Vec::new(), unreadable, events });
            }
            let (prog, at) = Lower { geo: &self.geo, code: &self.code, healthy: &healthy }.read(&disk)?;
            self.settle()?;
            let failures = match self.exec.run(&prog, Client::None, None) {
                Ok(mut kept) => return Ok(Got { bytes: kept.pop().unwrap_or_default(), at, unreadable, events }),
                Err(ExecError::Device(f)) => f,
                Err(e) => return Err(DvsError::Other(e.to_string())),
            };
            self.leave_out(&failures, &mut healthy)?;
            events.extend(failures.iter().filter(|f| f.medium_error()).map(|f| f.member));
            for p in pieces.iter_mut() {
                let ReadSrc::Disk(cr) = &mut p.src else { continue };
                let Src::Direct { member, offset } = cr.src else { continue };
                if healthy[member] {
                    continue;
                }
                let len = cr.b - cr.a;
                if failures.iter().any(|f| f.read.is_some_and(|op| op.member == member && op.offset < offset + len && offset < op.offset + op.len) && f.medium_error()) {
                    unreadable.insert((cr.key, member));
                }
                let src = self.dvs.src_with(cr.key, cr.a, &healthy).map_err(|e| DvsError::Other(format!("{}; the other members cannot rebuild those bytes: {e}", super::failures_error(&failures))))?;
                cr.src = src.ok_or_else(|| DvsError::Other(format!("chunk {:?} left the map during its read", cr.key)))?;
            }
        }
    }

    /// Take the members of `failures` out of `healthy` for the read again:
    /// a member that cannot be reached is failed for good; one that could
    /// not read is counted (and failed past the limit).  An error when a
    /// failure is not a read's, or when it would leave too few members.
    fn leave_out(&mut self, failures: &[Failure], healthy: &mut [bool]) -> Result<(), DvsError> {
        let read = healthy.to_vec();
        for f in failures {
            // Several of a member's reads may fail at once; one it was not
            // asked for means the plan is not what this loop thinks.
            if f.read.is_none() || !read.get(f.member).copied().unwrap_or(false) {
                return Err(super::failures_error(failures));
            }
            if let Some(e) = self.read_errors.get_mut(f.member) {
                e.seen += 1;
            }
            let first = std::mem::replace(&mut healthy[f.member], false);
            if first && !f.medium_error() && self.rewrite_unreadable {
                // Not a bad sector: the member is gone (as md fails it).
                self.fail(f.member).map_err(|e| DvsError::Other(format!("{}; failing member {} refused: {e}", super::failures_error(failures), f.member)))?;
                self.auto_failed.push((f.member, f.error.to_string()));
            }
        }
        Ok(())
    }

    /// Write again every valid chunk of each stripe holding a chunk of
    /// `got.unreadable` that its member still cannot read when asked alone
    /// (its logical bytes, the unreadable one decoded without its member),
    /// so the stripe protects nothing any more and is garbage for GC: its
    /// column on the bad sectors no longer stands between the other
    /// chunks and a lost member.  Each failed read counted on its member.
    /// A read-only open writes nothing.
    pub(super) fn rewrite_unreadable(&mut self, got: &Got) -> Result<(), DvsError> {
        if !self.rewrite_unreadable {
            return Ok(());
        }
        for &(key, m) in &got.unreadable {
            if self.dvs.healthy[m] && !self.reads_alone(key, m) {
                self.restripe(key, m)?;
            }
        }
        for &m in &got.events {
            if self.dvs.healthy[m] {
                self.count_corrected(m)?;
            }
        }
        Ok(())
    }

    /// Whether member `m` reads chunk `key` where the tables have it (as
    /// md reads a failed stripe's pieces again, rewriting those that
    /// still fail).
    fn reads_alone(&self, key: ChunkKey, m: usize) -> bool {
        let t = &self.dvs.tables;
        let Some((_, idx)) = t.lookup(key.0, key.1).filter(|x| x.0 == m) else { return true };
        let at = self.geo.slot_offset(t.gtt[key.0 as usize], idx);
        self.exec.run(&program::reads(&[(m, at, self.geo.chunk)]), Client::None, None).is_ok()
    }

    /// [`DvsArray::rewrite_unreadable`] of one chunk `key` on member `m`.
    fn restripe(&mut self, key: ChunkKey, m: usize) -> Result<(), DvsError> {
        let t = &self.dvs.tables;
        let (lsn, phys) = (key.0, t.gtt[key.0 as usize]);
        let Some(st) = t.lookup(lsn, key.1).filter(|x| x.0 == m).and_then(|(_, idx)| t.stripe_at(lsn, m, idx)).cloned() else {
            return Ok(()); // written again or moved since
        };
        self.rewrite_stripe((lsn, phys), &st, m, Some(key))
    }

    /// Write again each chunk of stripe `st` of SSG `lsn` (in segment
    /// `phys`) that still lies where the stripe has it, decoded without
    /// member `m` (which cannot read its column), `first` first: a write
    /// after it may garbage-collect the SSG, whose fills read every valid
    /// chunk but the one written.  Nothing once the SSG has moved.
    pub(super) fn rewrite_stripe(&mut self, (lsn, phys): (u32, u32), st: &Stripe, m: usize, first: Option<ChunkKey>) -> Result<(), DvsError> {
        let t = &self.dvs.tables;
        let at = |d: usize| (st.members[d] as usize, st.idx[d]);
        let mut chunks: Vec<(ChunkKey, (usize, u32))> = (0..st.width()).filter(|&d| t.lookup(lsn, st.lcns[d]) == Some(at(d))).map(|d| ((lsn, st.lcns[d]), at(d))).collect();
        chunks.sort_by_key(|c| Some(c.0) != first);
        let c = self.geo.chunk;
        for (k, was) in chunks {
            // A write before it may have garbage-collected the SSG.
            if self.dvs.tables.gtt[lsn as usize] != phys || self.dvs.tables.lookup(lsn, k.1) != Some(was) {
                continue;
            }
            let mut healthy = self.dvs.healthy.clone();
            healthy[m] = false;
            let Some(src) = self.dvs.src_with(k, 0, &healthy)? else { continue };
            let mut pieces = [ReadPiece { buf_off: 0, key: k, a: 0, b: c, src: ReadSrc::Disk(ChunkRead { key: k, a: 0, b: c, src }) }];
            let got = self.read_pieces(&mut pieces)?;
            let mut chunk = got.bytes.get(got.at[0]..got.at[0] + c as usize).ok_or_else(|| DvsError::Other("a chunk read came back short".into()))?.to_vec();
            self.overlay_cached(k, 0, &mut chunk);
            self.write_inner(self.geo.chunk_start(k), &chunk)?;
        }
        Ok(())
    }

    /// Count the fill reads the destager decoded since last asked (its
    /// job wrote their chunks anew), and write again the other chunks of
    /// their old stripes, which still lean on the column that cannot be
    /// read (as a client read's correction does): called where a request
    /// or command starts, never inside one, as it may fail a member.
    /// Whether anything was written.
    pub(super) fn take_destager_errors(&mut self) -> Result<bool, DvsError> {
        let d = self.destager.take_read_errors();
        for &m in &d.members {
            if let Some(e) = self.read_errors.get_mut(m) {
                e.seen += 1;
            }
        }
        if !self.rewrite_unreadable {
            return Ok(false);
        }
        let wrote = !d.stripes.is_empty();
        for (lsn, phys, st, m) in d.stripes {
            if self.dvs.healthy[m] {
                self.rewrite_stripe((lsn, phys), &st, m, None)?;
            }
        }
        for m in d.members {
            self.count_corrected(m)?;
        }
        Ok(wrote)
    }

    /// Run `head` (a zone reset, or nothing), then the rebuild of slots
    /// `first..` of segment `phys` of SSG `lsn` onto member `m` from
    /// `cols`.  A source read that fails is left out and the columns
    /// decoded from the others, while the code spares one (k >= 2 with
    /// one member rebuilt); its member is noted in `noted` (a scrub writes
    /// the bad chunk again when it meets it).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rebuild_run(&self, head: Program, (lsn, phys, m, first): (u32, u32, usize, u32), cols: &[Option<(&Stripe, usize)>], noted: &mut Vec<usize>, lossy: &mut super::lost::Lossy) -> Result<(), DvsError> {
        let mut healthy = self.dvs.healthy.clone();
        loop {
            let mut p = head.clone();
            let lower = Lower { geo: &self.geo, code: &self.code, healthy: &healthy };
            match lower.rebuild(lsn, phys, m, first, cols) {
                Ok(r) => p.append(r),
                // The code spares no column for what a source cannot read:
                // slot by slot, those bytes set aside (array/lost.rs).
                Err(_) if !noted.is_empty() => return self.rebuild_lossy(head, (lsn, phys, m, first), cols, &self.dvs.healthy, lossy),
                Err(e) => return Err(e),
            }
            self.destager.wait()?;
            let failures = match self.exec.run(&p, Client::None, None) {
                Ok(_) => return Ok(()),
                Err(ExecError::Device(f)) => f,
                Err(e) => return Err(super::exec_error(e)),
            };
            if !failures.iter().all(|f| f.medium_error() && f.member != m && healthy[f.member]) {
                return Err(super::failures_error(&failures));
            }
            for f in &failures {
                healthy[f.member] = false;
                noted.push(f.member);
            }
        }
    }

    /// Bytes `at..at + buf.len()` of member `m` in one sequential zone,
    /// decoded from the other members into `buf`: each chunk slot from its
    /// stripe, a slot in none (garbage, unwritten) as zeros; the read
    /// counted on `m`.  False for bytes outside one sequential zone (the
    /// conventional zones' metadata has no code to decode from).
    pub(super) fn decode_slots(&mut self, m: usize, at: u64, buf: &mut [u8]) -> Result<bool, DvsError> {
        let (z, c, conv) = (self.geo.cfg.zone_size, self.geo.chunk, self.geo.cfg.conventional);
        let zone = at / z;
        if buf.is_empty() || zone < conv || (at + buf.len() as u64 - 1) / z != zone {
            return Ok(false);
        }
        let p = (zone - conv) as u32;
        let (first, last) = ((at - zone * z) / c, (at - zone * z + buf.len() as u64 - 1) / c);
        let t = &self.dvs.tables;
        let owner = t.phys_owner.get(p as usize).copied().unwrap_or(crate::tables::NONE);
        let ssg = t.get(owner).filter(|s| s.phys == p);
        let mut reads = Vec::new();
        for idx in first..=last {
            let row = ssg.and_then(|s| s.owner[m].get(idx as usize).copied()).filter(|&r| r != crate::tables::NONE);
            if let Some((st, col)) = row.and_then(|r| ssg?.sit.get(r as usize)).and_then(|st| Some((st, st.col_of(m)?))) {
                reads.push((idx, ChunkRead { key: (owner, st.lcns.get(col).copied().unwrap_or(0)), a: 0, b: c, src: Src::Recon { phys: p, stripe: st.clone(), col } }));
            }
        }
        let mut healthy = self.dvs.healthy.clone();
        healthy[m] = false;
        let refs: Vec<&ChunkRead> = reads.iter().map(|r| &r.1).collect();
        let (prog, offs) = Lower { geo: &self.geo, code: &self.code, healthy: &healthy }.read(&refs)?;
        self.destager.wait()?;
        let got = if refs.is_empty() { Vec::new() } else { super::run_on(&self.exec, &prog)?.pop().unwrap_or_default() };
        let mut slots = vec![0u8; ((last - first + 1) * c) as usize];
        for ((idx, _), o) in reads.iter().zip(offs) {
            let dst = ((idx - first) * c) as usize;
            slots[dst..dst + c as usize].copy_from_slice(got.get(o..o + c as usize).ok_or_else(|| DvsError::Other("a decoded slot came back short".into()))?);
        }
        let skip = (at - zone * z - first * c) as usize;
        buf.copy_from_slice(&slots[skip..skip + buf.len()]);
        if let Some(e) = self.read_errors.get_mut(m) {
            e.seen += 1;
            // Counted, not held against the limit: the drive is leaving.
            e.corrected.total += 1;
        }
        Ok(true)
    }

    /// One more corrected read on `m`: past the limit, `m` is failed.
    pub(super) fn count_corrected(&mut self, m: usize) -> Result<(), DvsError> {
        let Some(e) = self.read_errors.get_mut(m) else { return Ok(()) };
        if e.corrected.one_too_many() && self.dvs.healthy[m] {
            // Refused only when too many members are out already: then it
            // stays, as the last copy of what the others lack.
            if self.fail(m).is_ok() {
                self.auto_failed.push((m, format!("more than {} read errors corrected within the hourly decay", mosaic_exec::corrected::MAX_CORRECTED)));
            }
        }
        Ok(())
    }

    /// Every column of stripe `st` (segment `phys`), in column order, for
    /// a scrub, and the columns whose member could not read them, decoded
    /// from the others.
    pub(super) fn stripe_columns(&mut self, phys: u32, st: &Stripe) -> Result<(Vec<Vec<u8>>, Vec<usize>), DvsError> {
        let mut skip: Vec<usize> = Vec::new();
        loop {
            let read: Vec<usize> = (0..st.members.len()).filter(|i| !skip.contains(i)).collect();
            self.settle()?;
            let failures = match self.exec.run(&program::stripe_columns(&self.geo, phys, st, &skip), Client::None, None) {
                Ok(kept) => {
                    let mut cols = vec![Vec::new(); st.members.len()];
                    for (i, v) in read.into_iter().zip(kept) {
                        cols[i] = v;
                    }
                    for &col in &skip {
                        cols[col] = self.decode_column(st, &cols, &skip, col)?;
                    }
                    return Ok((cols, skip));
                }
                Err(ExecError::Device(f)) => f,
                Err(e) => return Err(DvsError::Other(e.to_string())),
            };
            let mut healthy = self.dvs.healthy.clone();
            for &col in &skip {
                healthy[st.members[col] as usize] = false;
            }
            self.leave_out(&failures, &mut healthy)?;
            if skip.len() + failures.len() > self.geo.k {
                return Err(DvsError::Other(format!("{}; the stripe's other columns cannot rebuild them (k = {})", super::failures_error(&failures), self.geo.k)));
            }
            for f in &failures {
                skip.extend(st.members.iter().position(|&x| x as usize == f.member));
            }
        }
    }

    /// Column `col` of `st` decoded from `cols` (those not in `skip`; a
    /// narrow stripe's absent columns are zeros).
    pub(super) fn decode_column(&self, st: &Stripe, cols: &[Vec<u8>], skip: &[usize], col: usize) -> Result<Vec<u8>, DvsError> {
        let c = self.geo.chunk as usize;
        let zero = vec![0u8; c];
        let mut present: Vec<(usize, &[u8])> = (0..cols.len()).filter(|i| !skip.contains(i)).map(|i| (program::shard(&self.geo, st, i), cols[i].as_slice())).collect();
        for j in st.width()..self.geo.data {
            present.push((j, zero.as_slice()));
        }
        let mut out = vec![0u8; c];
        self.code.decode(&present, &mut [(program::shard(&self.geo, st, col), out.as_mut_slice())]).map_err(|e| DvsError::Other(format!("cannot reconstruct: {e}")))?;
        Ok(out)
    }
}

/// What a destage or GC program was lowered from, kept with it in the
/// destager's queue, so that when a fill read fails (a sector its member
/// cannot read) the destager lowers the job again with those fills
/// decoded from their stripes ([`Job::alt`], planned with the job) and
/// runs that instead.  A job's Read phase is its first: nothing was
/// written when it failed.  The chunk is then written anew by the job
/// itself; its old stripe's other chunks, which lean on the bad column,
/// are written again when the array next takes a request
/// ([`DvsArray::take_destager_errors`]).
pub(super) struct Relower {
    pub job: Job,
    /// The cached chunks' bytes, by LCN, as the first lowering took them.
    pub payloads: KeyMap<u32, Payload>,
    pub writes_to: Vec<bool>,
    pub meta: Option<Meta>,
    pub resets: Vec<(usize, u64)>,
    /// Members read at planning, less those found unable to read since.
    pub healthy: Vec<bool>,
}

impl Relower {
    /// The job's program again with the fills on the members of
    /// `failures` decoded from the others, and the old stripes of those
    /// fills (SSG, segment, row, the member left out); None when a failure
    /// is not a medium error or a fill has no other source.
    #[allow(clippy::type_complexity)]
    pub(super) fn again(&mut self, failures: &[Failure], geo: &Geo, code: &Code) -> Option<(Program, Vec<(u32, u32, Stripe, usize)>)> {
        let read = self.healthy.clone();
        for f in failures {
            if !f.medium_error() || !read.get(f.member).copied().unwrap_or(false) {
                return None;
            }
            self.healthy[f.member] = false;
        }
        let mut stripes = Vec::new();
        for (i, fill) in self.job.fills.iter_mut().enumerate() {
            if let Src::Direct { member, .. } = fill.src {
                if !self.healthy[member] {
                    fill.src = self.job.alt.get(i).cloned().flatten()?;
                    if let Src::Recon { phys, stripe, .. } = &fill.src {
                        stripes.push((self.job.lsn, *phys, stripe.clone(), member));
                    }
                }
            }
        }
        let payloads = &self.payloads;
        let mut cached = |lcn: u32, _: &crate::cache::Bitmap| payloads.get(&lcn).cloned().ok_or_else(|| DvsError::Other(format!("cached chunk {lcn} has no bytes")));
        let p = Lower { geo, code, healthy: &self.healthy }.job(&self.job, &mut cached, &self.writes_to, self.meta.clone(), &self.resets).ok()?;
        Some((p, stripes))
    }
}
