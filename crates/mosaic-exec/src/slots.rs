//! A running program's buffers: scratch memory, policy bytes, and the
//! client's data, split into the disjoint pieces each phase needs.

use mosaic_core::{write_pieces, Buf, Combine, DevOp, Io, Phase, Program, Ref};
use parking_lot::{Mutex, MutexGuard};

use crate::shard::{self, Padded};
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

/// Byte ranges `[a, b)` of one buffer, sorted, disjoint, not touching.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Ranges(Vec<(usize, usize)>);

impl Ranges {
    fn add(&mut self, a: usize, b: usize) {
        if a >= b {
            return;
        }
        let i = self.0.partition_point(|r| r.1 < a);
        let (mut lo, mut hi, mut j) = (a, b, i);
        while j < self.0.len() && self.0[j].0 <= hi {
            lo = lo.min(self.0[j].0);
            hi = hi.max(self.0[j].1);
            j += 1;
        }
        match j - i {
            0 => self.0.insert(i, (lo, hi)),
            1 => self.0[i] = (lo, hi),
            _ => {
                self.0.splice(i..j, [(lo, hi)]);
            }
        }
    }

    /// Add to `out` the parts of `[a, b)` outside these ranges.
    fn add_gaps(&self, a: usize, b: usize, out: &mut Ranges) {
        let mut pos = a;
        for &(lo, hi) in &self.0[self.0.partition_point(|r| r.1 <= a)..] {
            if lo >= b {
                break;
            }
            if lo > pos {
                out.add(pos, lo);
            }
            pos = pos.max(hi);
        }
        if pos < b {
            out.add(pos, b);
        }
    }

    pub(crate) fn total(&self) -> usize {
        self.0.iter().map(|r| r.1 - r.0).sum()
    }

    #[cfg(test)]
    pub(crate) fn spans(&self) -> &[(usize, usize)] {
        &self.0
    }
}

/// Scratch buffers at least this large are pooled with the large ones
/// (below it, in the pool's list of small buffers).
pub(crate) const LARGE: usize = 16 << 10;

/// The smallest read a member may lend ([`lendable`]): one page.  A
/// cache's flush reads its row's uncovered pages one by one, and on
/// members in memory the XOR then reads each from its home instead of
/// from a copy.  Below a page a copy costs less than looking.
pub(crate) const LEND_MIN: usize = 4 << 10;

/// For each buffer of `p`, the bytes that must read as zeros when the run
/// starts: those of a scratch buffer the program may read (a computation
/// term, the base of an accumulating computation, a device write, a kept
/// buffer) before a device read or a computation has written them (a
/// non-accumulating computation writes every byte of its destination; a
/// successful device read fills every byte of its target).  Every other
/// byte of a scratch buffer is written before anything reads it, so it
/// need not be zeroed.  Scratch buffers smaller than `min` are not looked
/// at: all of their bytes.  Empty for buffers that are not scratch.
pub(crate) fn must_zero(p: &Program, min: usize) -> Vec<Ranges> {
    let lens: Vec<Option<usize>> = p.bufs.iter().map(|b| if let Buf::Scratch(n) = b { Some(*n) } else { None }).collect();
    let mut zero: Vec<Ranges> = lens.iter().map(|n| Ranges(n.filter(|&n| n > 0 && n < min).map(|n| vec![(0, n)]).unwrap_or_default())).collect();
    if !lens.iter().any(|n| n.is_some_and(|n| n >= min)) {
        return zero;
    }
    let lens: Vec<Option<usize>> = lens.into_iter().map(|n| n.filter(|&n| n >= min)).collect();
    let mut written: Vec<Ranges> = vec![Ranges::default(); p.bufs.len()];
    // Only scratch buffers are tracked; ranges are clipped to the buffer
    // (a reference beyond it fails when the program runs).
    let span = |r: Ref, len: usize| -> Option<(usize, usize, usize)> {
        let n = (*lens.get(r.buf as usize)?)?;
        let a = (r.off as usize).min(n);
        Some((r.buf as usize, a, (r.off as usize).saturating_add(len).min(n)))
    };
    let read = |written: &[Ranges], zero: &mut [Ranges], r: Ref, len: usize| {
        if let Some((b, lo, hi)) = span(r, len) {
            written[b].add_gaps(lo, hi, &mut zero[b]);
        }
    };
    for phase in &p.phases {
        match phase {
            Phase::Read(ios) => {
                for io in ios {
                    if let Some((b, lo, hi)) = span(io.at, io.op.len as usize) {
                        written[b].add(lo, hi);
                    }
                }
            }
            Phase::Compute(cs) => {
                // In order: a computation reads its terms (and with `acc`
                // its destination) before it writes the destination.
                for c in cs {
                    for &(_, t) in &c.terms {
                        read(&written, &mut zero, t, c.len);
                    }
                    if c.acc {
                        read(&written, &mut zero, c.dst, c.len);
                    }
                    if let Some((b, lo, hi)) = span(c.dst, c.len) {
                        written[b].add(lo, hi);
                    }
                }
            }
            Phase::Write { ops, .. } => {
                for io in ops {
                    for (r, n) in write_pieces(&p.bufs, io.at, io.op.len as usize) {
                        read(&written, &mut zero, r, n);
                    }
                }
            }
            Phase::Flush(_) | Phase::Reset(_) => {}
        }
    }
    for &k in &p.keep {
        if let Some(Some(n)) = lens.get(k as usize) {
            read(&written, &mut zero, Ref::new(k as usize, 0), *n);
        }
    }
    zero
}

/// Which of `p`'s buffers a member may lend in place of a copy
/// ([`mosaic_dev::Member::view`]; empty when none may):
///
/// ```text
///   Scratch(n), n >= LEND_MIN ── one device read fills it whole, and no other read does
///                          ── no computation writes it; the program does not keep it
///                          ── from that read to its last use (a term, a write's bytes;
///                             a term of a computation phase fused with the write phase
///                             after it counts as a use in that write phase),
///                             no write of the program touches the read's member range
///                             and no zone reset touches its member
/// ```
///
/// Then the bytes it would copy are the member's own and nothing changes
/// them while the program reads them: a destage's old chunks, a
/// rebuild's columns, a cache flush's uncovered pages, and the old
/// values a cache step's computation takes before its writes start.  A
/// read-modify-write whose computation runs among its writes (fused)
/// keeps its copy.  Programs whose reads share one buffer (a plain small
/// write's) or are all below a page are looked at no further than that.
pub fn lendable(p: &Program) -> Vec<bool> {
    let whole = |io: &Io| io.at.off == 0 && io.op.len >= LEND_MIN as u64 && matches!(p.bufs.get(io.at.buf as usize), Some(Buf::Scratch(n)) if *n as u64 == io.op.len);
    let reads = || p.phases.iter().enumerate().filter_map(|(i, ph)| if let Phase::Read(ios) = ph { Some((i, ios)) } else { None });
    if !reads().any(|(_, ios)| ios.iter().any(whole)) {
        return Vec::new();
    }
    let n = p.bufs.len();
    let mut fill: Vec<Option<(usize, DevOp)>> = vec![None; n];
    let mut ok = vec![true; n];
    for (i, ios) in reads() {
        for io in ios {
            let b = io.at.buf as usize;
            if b < n {
                ok[b] &= fill[b].is_none() && whole(io);
                fill[b] = Some((i, io.op));
            }
        }
    }
    // The first and last phase reading each buffer.
    let mut used: Vec<Option<(usize, usize)>> = vec![None; n];
    let mut use_at = |b: u32, i: usize| {
        if let Some(u) = used.get_mut(b as usize) {
            *u = Some(u.map_or((i, i), |(a, _)| (a, i)));
        }
    };
    for (i, ph) in p.phases.iter().enumerate() {
        match ph {
            Phase::Compute(cs) => {
                // Fused with the write phase after it, a computation may
                // run among its writes (`crate::fuse`).
                let at = if crate::fuse::fusable(&p.phases, i) { i + 1 } else { i };
                for c in cs {
                    c.terms.iter().for_each(|t| use_at(t.1.buf, at));
                    if let Some(o) = ok.get_mut(c.dst.buf as usize) {
                        *o = false;
                    }
                }
            }
            Phase::Write { ops, .. } => {
                for io in ops {
                    write_pieces(&p.bufs, io.at, io.op.len as usize).for_each(|(r, _)| use_at(r.buf, i));
                }
            }
            _ => {}
        }
    }
    for &k in &p.keep {
        if let Some(o) = ok.get_mut(k as usize) {
            *o = false;
        }
    }
    let touched = |read: usize, last: usize, op: &DevOp| {
        p.phases[read + 1..=last].iter().any(|ph| match ph {
            Phase::Write { ops, .. } => ops.iter().any(|w| w.op.overlaps(op)),
            Phase::Reset(zs) => zs.iter().any(|z| z.member == op.member),
            _ => false,
        })
    };
    (0..n)
        .map(|b| match (fill[b], used[b]) {
            (Some((read, op)), Some((first, last))) => ok[b] && first > read && !touched(read, last, &op),
            (Some(_), None) => ok[b],
            _ => false,
        })
        .collect()
}

/// Most scratch buffers the pool holds between runs.
const POOL_BUFS: usize = 16;
/// Most bytes the pool holds between runs.
const POOL_BYTES: usize = 32 << 20;
/// Most small buffers (below [`LARGE`]) each thread's list holds between
/// runs (besides the large ones).
const SMALL_BUFS: usize = 32;

/// Scratch memory reused from run to run, so a buffer that the program
/// fills before reading it is not zeroed every time.  A buffer from the
/// pool holds an earlier run's bytes: [`Pool::get`] zeroes every byte the
/// program may read before writing ([`must_zero`]), so none of them is
/// ever seen.  Large buffers ([`LARGE`] bytes and more) and small ones
/// are kept in separate lists, so many small buffers never push out the
/// large ones a program needs.  Small ones, which every small request
/// takes and gives back, are kept by thread ([`shard`]): two threads
/// running programs never wait for each other there.
pub(crate) struct Pool {
    large: Mutex<Vec<Vec<u8>>>,
    small: Box<[Padded<Mutex<Vec<Vec<u8>>>>]>,
}

impl Default for Pool {
    fn default() -> Pool {
        Pool { large: Mutex::default(), small: shard::each(Mutex::default) }
    }
}

impl Pool {
    /// The list buffers of capacity `cap` go to (this thread's, when small).
    fn list(&self, cap: usize) -> MutexGuard<'_, Vec<Vec<u8>>> {
        if cap < LARGE {
            self.small[shard::mine()].0.lock()
        } else {
            self.large.lock()
        }
    }

    /// `n` bytes, zero at least in `zero`.  A buffer the program keeps
    /// leaves the executor: it comes from the pool as any other (its
    /// bytes not written by the program are in `zero`).
    pub(crate) fn get(&self, n: usize, zero: &Ranges) -> Vec<u8> {
        if n == 0 || zero.total() >= n {
            return vec![0u8; n];
        }
        let small = n < LARGE;
        let mut pool = self.list(n);
        // The smallest that fits, if it is not much larger; among small
        // ones as large, the most recently given back (warmest in the CPU
        // caches).
        let fits = |i: &usize| pool[*i].capacity() >= n && pool[*i].capacity() <= 2 * n;
        let fit = if small { (0..pool.len()).rev().filter(fits).min_by_key(|&i| pool[i].capacity()) } else { (0..pool.len()).filter(fits).min_by_key(|&i| pool[i].capacity()) };
        let Some(i) = fit else {
            drop(pool);
            return vec![0u8; n];
        };
        let mut v = if small { pool.remove(i) } else { pool.swap_remove(i) };
        drop(pool);
        v.resize(n, 0); // within its capacity: no new allocation
        for &(a, b) in &zero.0 {
            v[a..b].fill(0);
        }
        v
    }

    /// Keep `v` for a later run, dropping the oldest kept beyond the
    /// pool's limits (so the pool follows what recent programs need).
    pub(crate) fn put(&self, v: Vec<u8>) {
        let cap = v.capacity();
        if cap == 0 || cap > POOL_BYTES {
            return;
        }
        let mut pool = self.list(cap);
        if cap < LARGE {
            if pool.len() >= SMALL_BUFS {
                pool.remove(0);
            }
            pool.push(v);
            return;
        }
        pool.push(v);
        let mut held: usize = pool.iter().map(|v| v.capacity()).sum();
        while pool.len() > POOL_BUFS || held > POOL_BYTES {
            held -= pool.remove(0).capacity();
        }
    }

    /// Give a finished run's scratch buffers back.
    pub(crate) fn recycle(&self, slots: Vec<Slot<'_>>) {
        for s in slots {
            if let Slot::Owned(v) = s {
                self.put(v);
            }
        }
    }
}

/// The slots of `p`'s buffers: scratch from `pool` (zero where
/// [`must_zero`] says), client ranges cut out of `client`; a buffer
/// `lend` marks ([`lendable`]) is left empty for its read to fill.
pub(crate) fn materialize<'a>(p: &'a Program, pool: &Pool, client: Client<'a>, lend: &[bool]) -> Result<Vec<Slot<'a>>, String> {
    let bufs = &p.bufs;
    let zero = must_zero(p, 0);
    let mut slots: Vec<Option<Slot<'a>>> = Vec::with_capacity(bufs.len());
    let mut outs: Vec<(usize, usize, usize)> = Vec::new();
    let (input, output): (Option<&'a [u8]>, Option<&'a mut [u8]>) = match client {
        Client::None => (None, None),
        Client::In(b) => (Some(b), None),
        Client::Out(b) => (None, Some(b)),
    };
    for (i, b) in bufs.iter().enumerate() {
        slots.push(match b {
            Buf::Scratch(_) if lend.get(i).copied().unwrap_or(false) => Some(Slot::Shared(&[])),
            Buf::Scratch(n) => Some(Slot::Owned(pool.get(*n, &zero[i]))),
            Buf::Bytes(b) => Some(Slot::Shared(b)),
            Buf::Page(b) => Some(Slot::Shared(b)),
            Buf::Input { off, len } => {
                let src = input.ok_or("an input buffer without client data")?;
                Some(Slot::Shared(src.get(*off..off + len).ok_or_else(|| format!("input {off}+{len} beyond the {} bytes given", src.len()))?))
            }
            Buf::Output { off, len } => {
                outs.push((*off, *len, i));
                None
            }
            // Read through its pieces' own slots (see `write_parts`).
            Buf::Gather(_) => Some(Slot::Shared(&[])),
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

/// Add to `out` the bytes a write of `len` at `at` takes, in order: one
/// slice, or each piece of the gather buffer it writes (as [`bytes`]
/// does, a bad reference of an unvalidated program yields empty slices).
pub(crate) fn write_parts<'s>(p: &Program, slots: &'s [Slot<'_>], at: Ref, len: usize, out: &mut Vec<&'s [u8]>) {
    out.extend(write_pieces(&p.bufs, at, len).map(|(r, n)| bytes(slots, r, n)));
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
/// bytes), sorted by buffer and offset; none for the reads `lent` marks.
pub(crate) fn read_targets<'s>(slots: &'s mut [Slot<'_>], ios: &[Io], lent: &[bool]) -> Result<Vec<(usize, &'s mut [u8])>, String> {
    let mut order: Vec<usize> = (0..ios.len()).filter(|&i| !lent.get(i).copied().unwrap_or(false)).collect();
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
    // Terms in the destination's own buffer are read where they are when
    // they lie wholly before or after the destination (a parity computed
    // beside its data), and copied first only when they overlap it.
    let overlaps = |o: usize| o < lo + len && lo < o + len;
    let own: Vec<Vec<u8>> = c
        .terms
        .iter()
        .filter(|t| t.1.buf == d && overlaps(t.1.off as usize))
        .map(|t| whole.get(t.1.off as usize..t.1.off as usize + len).map(|s| s.to_vec()).ok_or_else(|| "term beyond its buffer".to_string()))
        .collect::<Result<_, _>>()?;
    let (head, rest) = whole.split_at_mut(lo);
    let (dst, tail) = rest.split_at_mut(len);
    let (head, tail): (&[u8], &[u8]) = (head, tail);
    let mut own_it = own.iter();
    let mut inputs: Vec<&[u8]> = Vec::with_capacity(c.terms.len());
    for (_, t) in &c.terms {
        let o = t.off as usize;
        let s = if t.buf != d {
            let b = slots.get(t.buf as usize).ok_or_else(|| format!("term in buffer {} of {}", t.buf, slots.len()))?.bytes();
            b.get(o..o + len).ok_or_else(|| format!("term {}+{len} beyond buffer {}", t.off, t.buf))?
        } else if overlaps(o) {
            own_it.next().map(|v| v.as_slice()).unwrap_or_default()
        } else if o + len <= lo {
            &head[o..o + len]
        } else {
            tail.get(o - lo - len..o - lo).ok_or_else(|| "term beyond its buffer".to_string())?
        };
        inputs.push(s);
    }
    match (c.acc, c.terms.as_slice()) {
        (false, [(1, _)]) => dst.copy_from_slice(inputs[0]),
        _ => {
            let coefs: Vec<u8> = c.terms.iter().map(|t| t.0).collect();
            mosaic_ec::combine_with(kernel, &coefs, &inputs, dst, c.acc).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
