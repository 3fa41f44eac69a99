//! Client reads and writes: each unit from or to where it lives now.
//!
//! ```text
//!   request [offset, offset + len) split at unit boundaries:
//!
//!     logical  | u4 ....... | u5 ....... | u6 ..  |
//!     place    m0 slot 1    m3 slot 9    m2 slot 1       (u5 was moved)
//!     device   m0 @ map_bytes + 1*unit + (offset within u4) ...
//!
//!   read:   Read  [ per member runs -> client buffer (Output) ]
//!   write:  Write [ per member runs <- client data (Input) ]      in place
//! ```
//!
//! Transfers are merged (`mosaic_map::moves::push_merged`) where both
//! the device range and the buffer range run on: two logical neighbours
//! moved to neighbouring slots of one member are one device operation.
//! A write is in place and changes no map: as on every mosaic volume it
//! is durable after the next flush.  Range-lock keys are the units
//! touched, so a move of one of them never runs beside the request.

#![allow(clippy::manual_is_multiple_of)] // rust-version 1.80

use std::collections::BTreeMap;

use mosaic_core::{Buf, Health, Io, Method, Phase, PlanError, Program, Ref, Role};
use mosaic_map::moves::push_merged;

use crate::layout::RemapLayout;
use crate::places::Places;

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
    let method = if write { Method::Direct } else { Method::Read };
    let mut p = Program { locks: (first..=last).collect(), methods: vec![method], ..Program::default() };
    let buf = p.buf(if write { Buf::Input { off: 0, len: len as usize } } else { Buf::Output { off: 0, len: len as usize } });
    let mut runs: BTreeMap<usize, Vec<Io>> = BTreeMap::new();
    for l in first..=last {
        let (member, slot) = places.of(lay, l);
        if !h.available(member, slot) {
            return Err(PlanError::Invalid(format!("unit {l} lives on member {member}, which is failed or missing: raid0 has no redundancy to serve it")));
        }
        let lo = offset.max(l * lay.unit);
        let hi = (offset + len).min((l + 1) * lay.unit);
        let dev = lay.slot_offset(slot) + (lo - l * lay.unit);
        push_merged(runs.entry(member).or_default(), Role::Data, member, dev, hi - lo, Ref::new(buf, (lo - offset) as usize));
    }
    let ios: Vec<Io> = runs.into_values().flatten().collect();
    p.phases.push(if write { Phase::write(ios) } else { Phase::Read(ios) });
    Ok(p)
}
