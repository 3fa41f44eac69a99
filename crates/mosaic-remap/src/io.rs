//! Client reads and writes: each unit from or to where it lives now.
//!
//! ```text
//!   request [offset, offset + len) split at unit boundaries:
//!
//!     logical  | u4 ....... | u5 ....... | u6 ..  |
//!     place    col 0 slot 1  col 3 slot 9  col 2 slot 1     (u5 was moved)
//!     inner    base + 4 x unit (+ offset within u4), the spare unit's
//!              offset, base + 6 x unit ...
//!
//!   read:   Read  [ inner runs -> client buffer (Output) ]
//!   write:  Write [ inner runs <- client data (Input) ]      in place
//! ```
//!
//! Every operation is on member 0, the inner array's logical space:
//! the inner array plans its own parity (a raid5 small write is its
//! read-modify-write, through its journal) and serves degraded reads.
//! Transfers are merged (`mosaic_map::moves::push_merged`) where both
//! the inner range and the buffer range run on, so units at home are
//! one inner request, as on the plain inner array (full-stripe writes
//! stay full-stripe writes).  A write is in place and changes no map: as
//! on every mosaic volume it is durable after the next flush.  Range-lock
//! keys are the units touched, so a move of one of them never runs
//! beside the request.

#![allow(clippy::manual_is_multiple_of)] // rust-version 1.80

use mosaic_core::{Buf, Health, Io, Method, Phase, PlanError, Program, Ref, Role};
use mosaic_map::moves::push_merged;

use crate::layout::RemapLayout;
use crate::places::Places;
use crate::MAP_MEMBER;

/// Check alignment and range; the request's units as (first, last).
pub fn check(lay: &RemapLayout, offset: u64, len: u64) -> Result<(u64, u64), PlanError> {
    PlanError::check_request(offset, len, lay.block, lay.capacity_bytes())?;
    if len > u32::MAX as u64 {
        return Err(PlanError::Invalid(format!("request of {len} bytes: at most 4 GiB at once")));
    }
    Ok((offset / lay.unit, (offset + len - 1) / lay.unit))
}

/// Plan a client read (`write` false) or write of `len` bytes at `offset`.
pub fn plan(lay: &RemapLayout, places: &Places, write: bool, offset: u64, len: u64, h: &Health) -> Result<Program, PlanError> {
    let (first, last) = check(lay, offset, len)?;
    if !h.available(MAP_MEMBER, 0) {
        return Err(PlanError::Invalid("the inner array is offline: it lost more drives than its code tolerates".into()));
    }
    let method = if write { Method::Direct } else { Method::Read };
    let mut p = Program { locks: (first..=last).collect(), methods: vec![method], ..Program::default() };
    let buf = p.buf(if write { Buf::Input { off: 0, len: len as usize } } else { Buf::Output { off: 0, len: len as usize } });
    let mut ios: Vec<Io> = Vec::new();
    for l in first..=last {
        let (c, slot) = places.of(lay, l);
        let lo = offset.max(l * lay.unit);
        let hi = (offset + len).min((l + 1) * lay.unit);
        let dev = lay.slot_offset(c, slot) + (lo - l * lay.unit);
        push_merged(&mut ios, Role::Data, MAP_MEMBER, dev, hi - lo, Ref::new(buf, (lo - offset) as usize));
    }
    p.phases.push(if write { Phase::write(ios) } else { Phase::Read(ios) });
    Ok(p)
}
