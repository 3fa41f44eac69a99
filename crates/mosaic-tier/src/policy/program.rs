//! Building the tier's programs: merged block transfers, the map write
//! with its flushes, and chaining programs so they run in order.
//!
//! Every tier program takes range-lock key 0: the executor never runs two
//! of them at once, which is what the plan-time state assumes anyway.

use mosaic_core::{Buf, Combine, DevOp, Io, Method, Phase, Program, Ref, Role};
use mosaic_map::ledger::LedgerWrite;

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
/// merged where both the device and the buffer offsets run on.
pub fn merged(member: usize, buf: usize, block: u64, xs: &[Xfer], role: Role) -> Vec<Io> {
    let mut out: Vec<Io> = Vec::new();
    for x in xs {
        if let Some(last) = out.last_mut() {
            let next_dev = last.op.offset + last.op.len;
            let next_at = last.at.off as usize + last.op.len as usize;
            if next_dev == x.dev && next_at == x.at {
                last.op.len += block;
                continue;
            }
        }
        out.push(Io::new(DevOp { member, offset: x.dev, len: block, role, col: 0 }, Ref::new(buf, x.at)));
    }
    out
}

/// Append the map write (data already flushed): the ledger write on
/// FAST, then a flush of FAST.
pub fn push_map(p: &mut Program, w: LedgerWrite) {
    let len = w.bytes.len() as u64;
    let b = p.buf(Buf::Bytes(w.bytes.into()));
    let op = DevOp { member: FAST, offset: w.offset, len, role: Role::Meta, col: 0 };
    p.phases.push(Phase::write(vec![Io::new(op, Ref::new(b, 0))]));
    p.phases.push(Phase::Flush(vec![FAST]));
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

