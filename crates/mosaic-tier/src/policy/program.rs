//! Building the tier's programs: merged block transfers, moves and map
//! commits through the kit's migration protocol (`mosaic_map::moves`),
//! and chaining programs so they run in order.
//!
//! Every tier program takes range-lock key 0: the executor never runs two
//! of them at once, which is what the plan-time state assumes anyway.

use mosaic_core::{Combine, Io, Method, Program, Ref, Role};
use mosaic_map::ledger::LedgerWrite;
use mosaic_map::moves::{self, Move};

use super::FAST;

/// The lock key every tier program holds.
pub const LOCK: u64 = 0;

/// A fresh program holding the tier lock.
pub fn new(method: Method) -> Program {
    Program { locks: vec![LOCK], methods: vec![method], ..Program::default() }
}

/// One block's transfer: device byte offset and byte offset in the buffer.
#[derive(Clone, Copy, Debug)]
pub struct Xfer {
    pub dev: u64,
    pub at: usize,
}

/// Transfers of `block` bytes each on `member` into/out of buffer `buf`,
/// merged where both the device and the buffer offsets run on (the
/// kit's rule, `mosaic_map::moves::push_merged`).
pub fn merged(member: usize, buf: usize, block: u64, xs: &[Xfer], role: Role) -> Vec<Io> {
    let mut out: Vec<Io> = Vec::new();
    for x in xs {
        moves::push_merged(&mut out, role, member, x.dev, block, Ref::new(buf, x.at));
    }
    out
}

/// A move of the kit's migration protocol holding the tier lock.
pub fn new_move(method: Method, staging: usize) -> Move {
    Move::new(vec![LOCK], method, staging)
}

/// The kit's group commit of placements written to FAST: flush FAST,
/// the map frame `w` on FAST, flush FAST.
pub fn commit(w: LedgerWrite) -> Program {
    moves::commit(vec![LOCK], Method::Direct, &[FAST], FAST, w)
}

/// Zero `[at, at + len)` of buffer `dst` by copying from a zeroed scratch
/// buffer `zeros` (at least `len` bytes).
pub fn zero(dst: usize, at: usize, zeros: usize, len: usize) -> Combine {
    Combine::copy(Ref::new(dst, at), Ref::new(zeros, 0), len)
}

/// The programs one after another, as one program (buffers renumbered).
pub fn chain_all(ps: Vec<Program>) -> Program {
    let mut it = ps.into_iter();
    let Some(mut p) = it.next() else { return Program::default() };
    for next in it {
        p.append(next);
    }
    p.locks.sort_unstable();
    p.locks.dedup();
    p
}

