//! A running program's buffers: scratch memory, policy bytes, and the
//! client's data, split into the disjoint pieces each phase needs.

use mosaic_core::{Buf, Combine, Io, Ref};

use crate::Client;

/// One buffer while a program runs.
pub(crate) enum Slot<'a> {
    Owned(Vec<u8>),
    Shared(&'a [u8]),
    Out(&'a mut [u8]),
}

impl Slot<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Slot::Owned(v) => v,
            Slot::Shared(s) => s,
            Slot::Out(s) => s,
        }
    }
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Slot::Owned(v) => Some(v),
            Slot::Shared(_) => None,
            Slot::Out(s) => Some(s),
        }
    }
}

/// The slots of `bufs`: client ranges cut out of `client`.
pub(crate) fn materialize<'a>(bufs: &'a [Buf], client: Client<'a>) -> Result<Vec<Slot<'a>>, String> {
    let mut slots: Vec<Option<Slot<'a>>> = Vec::with_capacity(bufs.len());
    let mut outs: Vec<(usize, usize, usize)> = Vec::new();
    let (input, output): (Option<&'a [u8]>, Option<&'a mut [u8]>) = match client {
        Client::None => (None, None),
        Client::In(b) => (Some(b), None),
        Client::Out(b) => (None, Some(b)),
    };
    for (i, b) in bufs.iter().enumerate() {
        slots.push(match b {
            Buf::Scratch(n) => Some(Slot::Owned(vec![0u8; *n])),
            Buf::Bytes(b) => Some(Slot::Shared(b)),
            Buf::Input { off, len } => {
                let src = input.ok_or("an input buffer without client data")?;
                Some(Slot::Shared(src.get(*off..off + len).ok_or_else(|| format!("input {off}+{len} beyond the {} bytes given", src.len()))?))
            }
            Buf::Output { off, len } => {
                outs.push((*off, *len, i));
                None
            }
        });
    }
    if !outs.is_empty() {
        let mut rest: &'a mut [u8] = output.ok_or("an output buffer without a client buffer")?;
        outs.sort_unstable();
        let mut at = 0;
        for (off, len, i) in outs {
            if off < at || off + len > at + rest.len() {
                return Err(format!("output {off}+{len} overlaps another or is beyond the client buffer"));
            }
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(off - at);
            let (mine, after) = tail.split_at_mut(len);
            slots[i] = Some(Slot::Out(mine));
            rest = after;
            at = off + len;
        }
    }
    Ok(slots.into_iter().map(|s| s.unwrap_or(Slot::Shared(&[]))).collect())
}

/// `len` bytes at `at` (validated programs only: a bad reference yields
/// an empty slice, which the device write then rejects by length).
pub(crate) fn bytes<'s>(slots: &'s [Slot<'_>], at: Ref, len: usize) -> &'s [u8] {
    let b = slots.get(at.buf as usize).map(|s| s.bytes()).unwrap_or_default();
    b.get(at.off as usize..at.off as usize + len).unwrap_or_default()
}

/// Buffer `b`'s bytes, moved out when they are the executor's own.
pub(crate) fn take(slots: &mut [Slot<'_>], b: usize) -> Vec<u8> {
    match slots.get_mut(b) {
        Some(Slot::Owned(v)) => std::mem::take(v),
        Some(s) => s.bytes().to_vec(),
        None => Vec::new(),
    }
}

/// Disjoint mutable targets for a read phase, as (index into `ios`,
/// bytes), sorted by buffer and offset.
pub(crate) fn read_targets<'s>(slots: &'s mut [Slot<'_>], ios: &[Io]) -> Result<Vec<(usize, &'s mut [u8])>, String> {
    let mut order: Vec<usize> = (0..ios.len()).collect();
    order.sort_unstable_by_key(|&i| (ios[i].at.buf, ios[i].at.off));
    let mut out = Vec::with_capacity(ios.len());
    let mut it = order.into_iter().peekable();
    for (b, slot) in slots.iter_mut().enumerate() {
        if it.peek().is_none_or(|&i| ios[i].at.buf as usize != b) {
            continue;
        }
        let mut rest: &'s mut [u8] = slot.bytes_mut().ok_or_else(|| format!("a read into read-only buffer {b}"))?;
        let mut at = 0usize;
        while let Some(&i) = it.peek() {
            if ios[i].at.buf as usize != b {
                break;
            }
            it.next();
            let (off, len) = (ios[i].at.off as usize, ios[i].op.len as usize);
            if off < at || off - at + len > rest.len() {
                return Err(format!("read {off}+{len} into buffer {b} overlaps another read or is beyond the buffer"));
            }
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(off - at);
            let (mine, after) = tail.split_at_mut(len);
            out.push((i, mine));
            rest = after;
            at = off + len;
        }
    }
    if it.next().is_some() {
        return Err("a read into a buffer the program does not have".into());
    }
    Ok(out)
}

/// Run one computation step.
pub(crate) fn combine(kernel: mosaic_ec::Kernel, c: &Combine, slots: &mut [Slot<'_>]) -> Result<(), String> {
    let d = c.dst.buf as usize;
    if d >= slots.len() {
        return Err(format!("computation into buffer {d} of {}", slots.len()));
    }
    let mut dst_slot = std::mem::replace(&mut slots[d], Slot::Shared(&[]));
    let res = combine_into(kernel, c, &mut dst_slot, slots);
    slots[d] = dst_slot;
    res
}

fn combine_into(kernel: mosaic_ec::Kernel, c: &Combine, dst_slot: &mut Slot<'_>, slots: &[Slot<'_>]) -> Result<(), String> {
    let (d, lo, len) = (c.dst.buf, c.dst.off as usize, c.len);
    let whole = dst_slot.bytes_mut().ok_or_else(|| format!("a computation into read-only buffer {d}"))?;
    if lo + len > whole.len() {
        return Err(format!("computation {lo}+{len} beyond buffer {d}"));
    }
    // Terms in the destination's own buffer are copied first.
    let own: Vec<Vec<u8>> = c
        .terms
        .iter()
        .filter(|t| t.1.buf == d)
        .map(|t| whole.get(t.1.off as usize..t.1.off as usize + len).map(|s| s.to_vec()).ok_or_else(|| "term beyond its buffer".to_string()))
        .collect::<Result<_, _>>()?;
    let mut own_it = own.iter();
    let mut inputs: Vec<&[u8]> = Vec::with_capacity(c.terms.len());
    for (_, t) in &c.terms {
        let s = if t.buf == d {
            own_it.next().map(|v| v.as_slice()).unwrap_or_default()
        } else {
            let b = slots.get(t.buf as usize).ok_or_else(|| format!("term in buffer {} of {}", t.buf, slots.len()))?.bytes();
            b.get(t.off as usize..t.off as usize + len).ok_or_else(|| format!("term {}+{len} beyond buffer {}", t.off, t.buf))?
        };
        inputs.push(s);
    }
    let dst = &mut whole[lo..lo + len];
    match (c.acc, c.terms.as_slice()) {
        (false, [(1, _)]) => dst.copy_from_slice(inputs[0]),
        _ => {
            let coefs: Vec<u8> = c.terms.iter().map(|t| t.0).collect();
            mosaic_ec::combine_with(kernel, &coefs, &inputs, dst, c.acc).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
