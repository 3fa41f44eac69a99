//! The migration protocol as programs for the one executor.
//!
//! A mapped policy (the hybrid tier, the adaptive layout) moves data and
//! commits its map through these two builders, so every move keeps the
//! protocol's order whatever the policy:
//!
//! ```text
//!   Move::new ─ read(old place -> staging) ... write(staging -> new place) ...
//!   Move::remap(map member, ledger write)  gives the program:
//!
//!     Read  [ old places ]              -> staging buffer        (1) copy
//!     Write [ new places ]              <- staging buffer
//!     Flush [ every member written ]                             (2) make durable
//!     Write [ map frame on the map member ]                      (3) remap
//!     Flush [ map member ]
//!   then the policy frees the old places (memory only)           (4) free
//!
//!   commit(data members, map member, ledger write): Flush [ data ] Write [ map ] Flush [ map ]
//!     the same (2)-(3) for data written earlier (a group commit of placements)
//! ```
//!
//! A crash before (3) completes leaves the map naming the old places,
//! untouched (nothing writes them); from (3) on it names the new ones,
//! durable since (2).  A policy reuses an old place only after the program
//! that remapped it has run, so no step can overwrite data the durable
//! map names.  The map frame is the caller's: a `Ledger` delta or
//! checkpoint, written whole.
//!
//! Transfers are merged where both the device range and the staging
//! range run on, so a policy adds them block by block and the device sees
//! as few operations as the layout allows.

use std::collections::BTreeSet;

use mosaic_core::{Buf, DevOp, Io, Method, Phase, Program, Ref, Role};

use crate::ledger::LedgerWrite;

/// A move being built: its copies, before the remap.
#[derive(Debug, Clone)]
pub struct Move {
    p: Program,
    staging: usize,
    reads: Vec<Io>,
    writes: Vec<Io>,
    written: BTreeSet<usize>,
}

impl Move {
    /// A move holding range-lock keys `locks`, counted as `method`, with
    /// `staging` bytes of scratch to copy through.
    pub fn new(locks: Vec<u64>, method: Method, staging: usize) -> Move {
        let mut p = Program { locks, methods: vec![method], ..Program::default() };
        let staging = p.buf(Buf::Scratch(staging));
        Move { p, staging, reads: Vec::new(), writes: Vec::new(), written: BTreeSet::new() }
    }

    /// Copy `len` bytes at `offset` of `member` (an old place) into the
    /// staging buffer at `at`.
    pub fn read(&mut self, member: usize, offset: u64, len: u64, at: usize) {
        push_merged(&mut self.reads, Role::Data, member, offset, len, Ref::new(self.staging, at));
    }

    /// Write `len` bytes of the staging buffer at `at` to `offset` of
    /// `member` (a new place).
    pub fn write(&mut self, member: usize, offset: u64, len: u64, at: usize) {
        push_merged(&mut self.writes, Role::Data, member, offset, len, Ref::new(self.staging, at));
        self.written.insert(member);
    }

    /// The program: copies, flush of every member written, then the map
    /// frame `w` on `map_member` and its flush.
    pub fn remap(mut self, map_member: usize, w: LedgerWrite) -> Program {
        if !self.reads.is_empty() {
            self.p.phases.push(Phase::Read(self.reads));
        }
        if !self.writes.is_empty() {
            self.p.phases.push(Phase::write(self.writes));
            self.p.phases.push(Phase::Flush(self.written.into_iter().collect()));
        }
        push_map(&mut self.p, map_member, w);
        self.p
    }
}

/// A group commit of data written earlier: flush `data_members`, then the
/// map frame `w` on `map_member` and its flush.
pub fn commit(locks: Vec<u64>, method: Method, data_members: &[usize], map_member: usize, w: LedgerWrite) -> Program {
    let mut p = Program { locks, methods: vec![method], ..Program::default() };
    if !data_members.is_empty() {
        p.phases.push(Phase::Flush(data_members.to_vec()));
    }
    push_map(&mut p, map_member, w);
    p
}

/// Step (3) alone: the map write `w` on `member` and its flush, appended
/// to `p` (whose data the caller has made durable).
pub fn push_map(p: &mut Program, member: usize, w: LedgerWrite) {
    let len = w.bytes.len() as u64;
    let b = p.buf(Buf::Bytes(w.bytes.into()));
    let op = DevOp { member, offset: w.offset, len, role: Role::Meta, col: 0 };
    p.phases.push(Phase::write(vec![Io::new(op, Ref::new(b, 0))]));
    p.phases.push(Phase::Flush(vec![member]));
}

/// Append a transfer of `len` bytes between `member` at `offset` and the
/// buffer position `at`, merged with the last one when the device range,
/// the buffer range and the role all run on.
pub fn push_merged(ios: &mut Vec<Io>, role: Role, member: usize, offset: u64, len: u64, at: Ref) {
    if let Some(last) = ios.last_mut() {
        let runs_on = last.op.member == member
            && last.op.role == role
            && last.op.offset + last.op.len == offset
            && last.at.buf == at.buf
            && last.at.off as u64 + last.op.len == at.off as u64;
        if runs_on {
            last.op.len += len;
            return;
        }
    }
    ios.push(Io::new(DevOp { member, offset, len, role, col: 0 }, at));
}

/// The bytes/s budget of a policy's data movement: a token bucket that
/// holds at most one second of `rate` (and at least `least` bytes, so a
/// budget below one move still makes progress), refilled from the
/// policy's clock.
#[derive(Clone, Debug, Default)]
pub struct Budget {
    /// Bytes the bucket holds.
    credit: u64,
    /// When it was last filled.
    filled_ns: Option<u64>,
}

impl Budget {
    /// Bytes movement may move at `now` under `rate` bytes/s (0: no
    /// limit, `u64::MAX`).
    pub fn allowance(&mut self, now: u64, rate: u64, least: u64) -> u64 {
        if rate == 0 {
            return u64::MAX;
        }
        let cap = rate.max(least);
        let add = match self.filled_ns {
            None => cap,
            Some(t) => (rate as u128 * now.saturating_sub(t) as u128 / 1_000_000_000).min(cap as u128) as u64,
        };
        self.credit = (self.credit + add).min(cap);
        self.filled_ns = Some(now);
        self.credit
    }

    /// Charge `bytes` moved.
    pub fn charge(&mut self, bytes: u64) {
        self.credit = self.credit.saturating_sub(bytes);
    }
}
