//! Client reads: each block from where it lives, zeros where unmapped.
//!
//! ```text
//!   Read    [ FAST runs -> client buffer, SLOW runs -> client buffer ]
//!   Compute [ unmapped ranges of the client buffer = zeros ]
//! ```
//!
//! Blocks contiguous both logically and on their tier are one device
//! operation.  A read touches recency (fast blocks) and read hits (slow
//! blocks, for promotion).

#![allow(clippy::manual_is_multiple_of)] // rust-version 1.80

use mosaic_core::{Buf, Method, Phase, PlanError, Program, Role};

use super::mapstore::Loc;
use super::program::{self, Xfer};
use super::state::Core;
use super::{TierHealth, FAST, SLOW};

/// Check alignment and range; the request as (first block, blocks).
pub fn check(core: &Core, offset: u64, len: u64) -> Result<(u64, u64), PlanError> {
    let block = core.lay.block;
    PlanError::check_request(offset, len, block, core.lay.capacity_bytes())?;
    if len > u32::MAX as u64 {
        return Err(PlanError::Invalid(format!("request of {len} bytes: at most 4 GiB at once")));
    }
    Ok((offset / block, len / block))
}

/// Plan a read of `len` bytes at `offset`.
pub fn plan(core: &mut Core, offset: u64, len: u64, now: u64) -> Result<Program, PlanError> {
    let (lb0, n) = check(core, offset, len)?;
    let blk = core.lay.block;
    let (mut fast, mut slow, mut zeros) = (Vec::new(), Vec::new(), Vec::<(usize, usize)>::new());
    for i in 0..n {
        let at = (i * blk) as usize;
        match core.map.locs.get(&(lb0 + i)) {
            Some(Loc::Fast(fb)) => fast.push((Xfer { dev: core.lay.fast_offset(*fb), at }, *fb)),
            Some(Loc::Slow(sb)) => slow.push((Xfer { dev: core.lay.slow_offset(*sb), at }, lb0 + i)),
            None => match zeros.last_mut() {
                Some(z) if z.0 + z.1 == at => z.1 += blk as usize,
                _ => zeros.push((at, blk as usize)),
            },
        }
    }
    let (fh, sh) = core.effective();
    if fh == TierHealth::Offline && !fast.is_empty() {
        return Err(PlanError::Invalid(format!("fast tier offline: cannot read logical block {} (on the fast tier)", lb0 + fast_first(core, lb0, n))));
    }
    if sh == TierHealth::Offline && !slow.is_empty() {
        return Err(PlanError::Invalid(format!("slow tier offline: cannot read logical block {} (on the slow tier)", slow[0].1)));
    }
    let mut p = program::new(Method::Read);
    let out = p.buf(Buf::Output { off: 0, len: len as usize });
    let fx: Vec<Xfer> = fast.iter().map(|x| x.0).collect();
    let sx: Vec<Xfer> = slow.iter().map(|x| x.0).collect();
    let mut ios = program::merged(FAST, out, blk, &fx, Role::Data);
    ios.extend(program::merged(SLOW, out, blk, &sx, Role::Data));
    if !ios.is_empty() {
        p.phases.push(Phase::Read(ios));
    }
    if let Some(widest) = zeros.iter().map(|z| z.1).max() {
        let z = p.buf(Buf::Scratch(widest));
        p.phases.push(Phase::Compute(zeros.iter().map(|&(at, l)| program::zero(out, at, z, l)).collect()));
    }
    for (_, fb) in &fast {
        core.touch(*fb, now);
    }
    let gb = core.hits.group_blocks();
    let mut groups: Vec<u64> = slow.iter().map(|x| x.1 / gb).collect();
    groups.dedup();
    core.hits.read(lb0, n, now, &groups);
    Ok(p)
}

/// Index of the first fast-resident block of the request (for messages).
fn fast_first(core: &Core, lb0: u64, n: u64) -> u64 {
    (0..n).find(|i| matches!(core.map.locs.get(&(lb0 + i)), Some(Loc::Fast(_)))).unwrap_or(0)
}
