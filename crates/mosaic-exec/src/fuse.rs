//! A large computation phase and the unjournaled write phase after it, run
//! together: each write goes out in pieces, each piece as soon as the last
//! computation that reads or writes its bytes is done, so the bytes a step
//! has just read or computed reach the member while they are still in the
//! cache instead of being fetched from memory a second time.
//!
//! ```text
//!   a DVS destage, rows r = 0..50, parity P_r = D0_r ^ D1_r ^ D2_r ^ D3_r
//!
//!   phase by phase:   compute P_0 .. P_49          (reads 12.8 MiB)
//!                     write m0: D0_0 .. D0_49 | m1: .. | m4: P_0 .. P_49
//!                                                  (reads them all again)
//!   fused:            compute P_0, P_1   -> write m0: D0_0 D0_1, .., m4: P_0 P_1
//!                     compute P_2, P_3   -> write m0: D0_2 D0_3, .., m4: P_2 P_3
//!                     ...
//! ```
//!
//! Only the order changes: every write is still one device operation of
//! the program, counted once, its pieces written in order from its first
//! byte, so a member sees the same bytes at the same offsets (a zone's
//! appends stay in order); a piece goes out only after every computation
//! touching its bytes, so it carries what it would have carried after the
//! whole phase.  A member that fails a piece gets no more of that write.
//! The executor fuses only on members that keep their bytes in memory
//! (`Executor::all_cheap`), where a write is a copy; elsewhere a write is
//! one system call.  [`crate::slots::lendable`] counts a lent buffer's
//! uses by the computation as uses by the write phase after it, since
//! fused they run among its writes.
//!
//! A destage's pair, on members that take writes in place, goes further
//! ([`in_place`]): one pass reads each source line once and streams it
//! and the XOR of its row straight into the members' memory, with no
//! parity buffer in between.
//!
//! ```text
//!   for each computation P = D0 ^ D1 ^ D2 ^ D3 (the plan: each Dj is the
//!   next bytes of the write to member mj, P those of the write to mp):
//!       for each 64 bytes: load D0..D3, stream each to mj, stream the XOR to mp
//! ```

use std::io;

use mosaic_core::{write_pieces, Combine, Io, Phase, Program, Ref, Role};

/// Computation phases writing at least this many bytes are fused with
/// the write phase after them: a DVS destage (megabytes of parity), not a
/// full-stripe write (a few hundred KiB, which stays in the cache anyway).
pub(crate) const FUSE_MIN: usize = 1 << 20;

/// Computation bytes (destinations) between two rounds of writes: a few
/// rows, so what they read is still in L2 when it is written.
const ROUND: usize = 128 << 10;

/// Pieces of a write are cut to at most this many bytes, so a long range
/// of one buffer (a member's parity for many rows) goes out row by row.
const PIECE: usize = 64 << 10;

/// Whether phase `i` of `phases` is a computation followed by a write
/// phase that is not journaled: the pair the executor may fuse (a
/// journaled phase logs all its writes' bytes before issuing any).
pub fn fusable(phases: &[Phase], i: usize) -> bool {
    matches!((phases.get(i), phases.get(i + 1)), (Some(Phase::Compute(_)), Some(Phase::Write { journal: false, .. })))
}

/// The pieces of one write, each with the index of the last computation
/// touching its bytes (made non-decreasing along the write, so the pieces
/// go out in order), and how far the write has gone.
struct Write {
    pieces: Vec<(Ref, usize, Option<usize>)>,
    /// A data write of one slice: issued whole, it goes to the member as
    /// phase by phase (`Member::write_at`, not as parts).
    single: bool,
    next: usize,
    done: u64,
    res: io::Result<()>,
}

/// The byte ranges each computation reads and writes, by buffer, sorted by
/// start, with the running maximum of their ends (so a lookup stops
/// once nothing before can reach the range).
struct Touches {
    by_buf: Vec<Vec<(usize, usize, usize)>>,
    reach: Vec<Vec<usize>>,
}

impl Touches {
    fn new(cs: &[Combine], bufs: usize) -> Touches {
        let mut by_buf: Vec<Vec<(usize, usize, usize)>> = vec![Vec::new(); bufs];
        for (i, c) in cs.iter().enumerate() {
            for r in std::iter::once(c.dst).chain(c.terms.iter().map(|t| t.1)) {
                if let Some(v) = by_buf.get_mut(r.buf as usize) {
                    v.push((r.off as usize, r.off as usize + c.len, i));
                }
            }
        }
        let reach = by_buf
            .iter_mut()
            .map(|v| {
                v.sort_unstable();
                v.iter().scan(0, |m, t| {
                    *m = t.1.max(*m);
                    Some(*m)
                })
                .collect()
            })
            .collect();
        Touches { by_buf, reach }
    }

    /// The last computation touching `[at, at + len)`, if any does.
    fn last(&self, at: Ref, len: usize) -> Option<usize> {
        let (v, reach) = (self.by_buf.get(at.buf as usize)?, &self.reach[at.buf as usize]);
        let (lo, hi) = (at.off as usize, at.off as usize + len);
        let mut k = v.partition_point(|t| t.0 < hi);
        let mut last = None;
        while k > 0 && reach[k - 1] > lo {
            k -= 1;
            if v[k].1 > lo {
                last = last.max(Some(v[k].2));
            }
        }
        last
    }
}

/// Run computations `cs` and writes `ops` of `p` fused: `compute(c)` runs
/// one computation; `write(op, pieces, offset, single)` writes bytes of
/// `op` at `offset` from its start (`single`: the whole write at once, from
/// one buffer), given the pieces as `(Ref, len)`.  The result of each write.
pub(crate) fn run<E>(
    p: &Program,
    cs: &[Combine],
    ops: &[Io],
    mut compute: impl FnMut(&Combine) -> Result<(), E>,
    mut write: impl FnMut(&Io, &[(Ref, usize)], u64, bool) -> io::Result<()>,
) -> Result<Vec<io::Result<()>>, E> {
    let touches = Touches::new(cs, p.bufs.len());
    let mut writes: Vec<Write> = ops
        .iter()
        .map(|io| {
            let single = io.op.role != Role::Meta && write_pieces(&p.bufs, io.at, io.op.len as usize).count() == 1;
            let mut need = None;
            let pieces: Vec<_> = write_pieces(&p.bufs, io.at, io.op.len as usize)
                .flat_map(|(r, n)| (0..n).step_by(PIECE).map(move |o| (r.at(o), PIECE.min(n - o))))
                .map(|(r, n)| {
                    need = need.max(touches.last(r, n));
                    (r, n, need)
                })
                .collect();
            Write { pieces, single, next: 0, done: 0, res: Ok(()) }
        })
        .collect();
    let mut bytes = 0;
    for (i, c) in cs.iter().enumerate() {
        compute(c)?;
        bytes += c.len;
        if bytes >= ROUND && i + 1 < cs.len() {
            bytes = 0;
            round(ops, &mut writes, Some(i), &mut write);
        }
    }
    round(ops, &mut writes, None, &mut write);
    Ok(writes.into_iter().map(|w| w.res).collect())
}

/// Write every piece whose computations are done (`upto`: the last one
/// run; None: all of them), each write's ready pieces as one.  A write
/// waits until the writes before it on its member are complete (or
/// failed), as they would be phase by phase: a zone takes its appends in
/// order.
fn round(ops: &[Io], writes: &mut [Write], upto: Option<usize>, write: &mut impl FnMut(&Io, &[(Ref, usize)], u64, bool) -> io::Result<()>) {
    let mut ready: Vec<(Ref, usize)> = Vec::new();
    let mut busy: Vec<usize> = Vec::new();
    for (io, w) in ops.iter().zip(writes.iter_mut()) {
        if w.res.is_err() || busy.contains(&io.op.member) {
            continue;
        }
        let end = match upto {
            None => w.pieces.len(),
            Some(i) => w.next + w.pieces[w.next..].partition_point(|pc| pc.2.is_none_or(|n| n <= i)),
        };
        if end < w.pieces.len() {
            busy.push(io.op.member);
        }
        if end == w.next {
            continue;
        }
        ready.clear();
        ready.extend(w.pieces[w.next..end].iter().map(|pc| (pc.0, pc.1)));
        let whole = w.next == 0 && end == w.pieces.len();
        w.res = write(io, &ready, w.done, w.single && whole);
        w.done += ready.iter().map(|pc| pc.1 as u64).sum::<u64>();
        w.next = if w.res.is_ok() { end } else { w.pieces.len() };
    }
}

/// One computation of a run made in place ([`in_place`]): for each of
/// its terms and for its destination, the write that takes those bytes
/// and where in that write they go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    pub(crate) srcs: Vec<(usize, u64)>,
    pub(crate) dst: (usize, u64),
}

/// How far one write's pieces have been taken.
struct Cursor {
    pieces: Vec<(Ref, usize)>,
    pi: usize,
    po: usize,
    done: u64,
}

impl Cursor {
    /// Whether `len` bytes at `at` are exactly this write's next bytes,
    /// within one piece.
    fn fits(&self, at: Ref, len: usize) -> bool {
        self.pieces.get(self.pi).is_some_and(|&(r, n)| r.buf == at.buf && r.off as usize + self.po == at.off as usize && n - self.po >= len)
    }

    /// Take the `len` bytes [`Cursor::fits`] found: where in the write
    /// they go.
    fn take(&mut self, len: usize) -> u64 {
        let n = self.pieces[self.pi].1;
        let off = self.done;
        (self.done, self.po) = (self.done + len as u64, self.po + len);
        if self.po == n {
            (self.pi, self.po) = (self.pi + 1, 0);
        }
        off
    }
}

/// The plan of a computation phase and the write phase after it run in
/// one pass, straight into the members' memory: each computation is a
/// parity (the XOR of its terms, nothing accumulated); each term's bytes
/// are the next bytes of one write and the result those of another, so
/// one loop reads each term once and streams it and the XOR to their
/// members.  None unless every write goes to its own member and is made
/// whole this way, exactly once, and no result is read again (a term,
/// kept, or named by any other phase of `p`; `cs` is phase `i`, `ops`
/// phase `i + 1`): then the computations' own buffers need not be
/// written at all.
pub(crate) fn in_place(p: &Program, i: usize, cs: &[Combine], ops: &[Io]) -> Option<Vec<Step>> {
    let mut members: Vec<usize> = ops.iter().map(|io| io.op.member).collect();
    members.sort_unstable();
    members.dedup();
    if members.len() != ops.len() || cs.iter().any(|c| c.acc || c.terms.is_empty() || c.terms.iter().any(|t| t.0 != 1)) {
        return None;
    }
    let terms: Vec<u32> = cs.iter().flat_map(|c| c.terms.iter().map(|t| t.1.buf)).collect();
    let elsewhere = elsewhere(p, i);
    if cs.iter().any(|c| terms.contains(&c.dst.buf) || p.keep.contains(&c.dst.buf) || elsewhere.contains(&c.dst.buf)) {
        return None;
    }
    let mut curs: Vec<Cursor> = ops.iter().map(|io| Cursor { pieces: write_pieces(&p.bufs, io.at, io.op.len as usize).collect(), pi: 0, po: 0, done: 0 }).collect();
    let mut steps = Vec::with_capacity(cs.len());
    for c in cs {
        let mut used: Vec<usize> = Vec::with_capacity(c.terms.len() + 1);
        let mut take = |at: Ref| {
            let k = (0..curs.len()).find(|k| !used.contains(k) && curs[*k].fits(at, c.len))?;
            let off = curs[k].take(c.len);
            used.push(k);
            Some((k, off))
        };
        let srcs = c.terms.iter().map(|t| take(t.1)).collect::<Option<Vec<_>>>()?;
        let dst = take(c.dst)?;
        steps.push(Step { srcs, dst });
    }
    curs.iter().zip(ops).all(|(c, io)| c.done == io.op.len).then_some(steps)
}

/// The buffers phases other than `i` and `i + 1` of `p` name (through
/// gathers too).
fn elsewhere(p: &Program, i: usize) -> Vec<u32> {
    let ios = |ios: &[Io]| -> Vec<u32> { ios.iter().flat_map(|io| std::iter::once(io.at.buf).chain(write_pieces(&p.bufs, io.at, io.op.len as usize).map(|r| r.0.buf))).collect() };
    let mut out = Vec::new();
    for (_, ph) in p.phases.iter().enumerate().filter(|(j, _)| *j != i && *j != i + 1) {
        match ph {
            Phase::Read(v) | Phase::Write { ops: v, .. } => out.extend(ios(v)),
            Phase::Compute(cs) => out.extend(cs.iter().flat_map(|c| std::iter::once(c.dst.buf).chain(c.terms.iter().map(|t| t.1.buf)))),
            Phase::Flush(_) | Phase::Reset(_) => {}
        }
    }
    out
}

/// Make `len` bytes of parity at `dst` from `srcs`, copying each source
/// to its own place in `outs` on the way: one pass over the sources,
/// every output streamed around the CPU cache where the CPU can.
///
/// # Safety
/// Each of `outs` and `dst` valid for `len` bytes of writes, overlapping
/// none of the others nor the sources; `outs.len() == srcs.len()`, and
/// every source at least `len` bytes long.
pub(crate) unsafe fn copy_and_xor(srcs: &[&[u8]], outs: &[*mut u8], dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_setzero_si128, _mm_stream_si128, _mm_xor_si128};
        let aligned = len % 64 == 0 && (dst as usize) % 16 == 0 && outs.iter().all(|o| (*o as usize) % 16 == 0);
        if aligned {
            let mut i = 0;
            while i < len {
                let mut acc = [_mm_setzero_si128(); 4];
                for (s, o) in srcs.iter().zip(outs) {
                    for (k, a) in acc.iter_mut().enumerate() {
                        let v = _mm_loadu_si128(s.as_ptr().add(i + 16 * k) as *const __m128i);
                        _mm_stream_si128(o.add(i + 16 * k) as *mut __m128i, v);
                        *a = _mm_xor_si128(*a, v);
                    }
                }
                for (k, a) in acc.iter().enumerate() {
                    _mm_stream_si128(dst.add(i + 16 * k) as *mut __m128i, *a);
                }
                i += 64;
            }
            return;
        }
    }
    for i in 0..len {
        let mut x = 0u8;
        for (s, o) in srcs.iter().zip(outs) {
            *o.add(i) = s[i];
            x ^= s[i];
        }
        *dst.add(i) = x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_core::{Buf, DevOp};

    fn io(member: usize, offset: u64, len: usize, at: Ref) -> Io {
        Io::new(DevOp { member, offset, len: len as u64, role: Role::Data, col: member }, at)
    }

    /// The last computation touching a range: as destination or term,
    /// overlapping at all, nested or long before.
    #[test]
    fn a_range_waits_for_the_last_computation_reading_or_writing_it() {
        let cs = vec![
            Combine { dst: Ref::new(1, 0), len: 100, acc: false, terms: vec![(1, Ref::new(0, 0))] },
            Combine { dst: Ref::new(1, 100), len: 100, acc: false, terms: vec![(1, Ref::new(0, 100))] },
            Combine { dst: Ref::new(2, 0), len: 1000, acc: false, terms: vec![(1, Ref::new(0, 1000))] },
            Combine::copy(Ref::new(2, 1000), Ref::new(0, 150), 10),
        ];
        let t = Touches::new(&cs, 4);
        assert_eq!(t.last(Ref::new(0, 0), 100), Some(0));
        assert_eq!(t.last(Ref::new(0, 99), 2), Some(1));
        assert_eq!(t.last(Ref::new(0, 140), 20), Some(3));
        assert_eq!(t.last(Ref::new(0, 200), 800), None);
        assert_eq!(t.last(Ref::new(0, 1999), 1), Some(2));
        assert_eq!(t.last(Ref::new(2, 500), 1), Some(2));
        assert_eq!(t.last(Ref::new(2, 1005), 1), Some(3));
        assert_eq!(t.last(Ref::new(3, 0), 1 << 20), None);
        assert_eq!(t.last(Ref::new(9, 0), 1), None);
    }

    /// Rows of 64 KiB: computation r writes row r of buffer 1 from row r
    /// of buffer 0.  Writes: member 0 takes buffer 0 in one gathered
    /// write, member 1 buffer 1 in two writes (the second waits for the
    /// first), member 2 the last row only.
    fn rows(n: usize) -> (Program, Vec<Combine>, Vec<Io>) {
        const R: usize = 64 << 10;
        let mut p = Program::default();
        let (a, b) = (p.buf(Buf::Scratch(n * R)), p.buf(Buf::Scratch(n * R)));
        let g = p.buf(Buf::Gather((0..n).map(|r| (Ref::new(a, r * R), R)).collect()));
        let cs: Vec<Combine> = (0..n).map(|r| Combine::copy(Ref::new(b, r * R), Ref::new(a, r * R), R)).collect();
        let half = n / 2 * R;
        let ops = vec![io(0, 0, n * R, Ref::new(g, 0)), io(1, 0, half, Ref::new(b, 0)), io(1, half as u64, n * R - half, Ref::new(b, half)), io(2, 0, R, Ref::new(b, (n - 1) * R))];
        (p, cs, ops)
    }

    type Call = (usize, u64, usize, Option<usize>);

    /// Run `rows(n)` fused, recording each write call as (member, offset,
    /// bytes, the computations done by then); member `fail` fails.
    fn record(n: usize, fail: Option<usize>) -> (Vec<Call>, Vec<bool>) {
        let (p, cs, ops) = rows(n);
        let mut done = None;
        let done_at = std::cell::Cell::new(None);
        let mut calls = Vec::new();
        let res = run::<()>(
            &p,
            &cs,
            &ops,
            |_| {
                done = Some(done.map_or(0, |d: usize| d + 1));
                done_at.set(done);
                Ok(())
            },
            |io, pieces, at, _| {
                calls.push((io.op.member, io.op.offset + at, pieces.iter().map(|pc| pc.1).sum(), done_at.get()));
                if Some(io.op.member) == fail {
                    Err(io::Error::other("failed"))
                } else {
                    Ok(())
                }
            },
        )
        .unwrap();
        (calls, res.iter().map(|r| r.is_ok()).collect())
    }

    #[test]
    fn each_write_goes_out_in_order_behind_the_computations_of_its_bytes() {
        let n = 8;
        let (calls, ok) = record(n, None);
        assert_eq!(ok, vec![true; 4]);
        const R: usize = 64 << 10;
        for m in 0..3 {
            let mine: Vec<&Call> = calls.iter().filter(|c| c.0 == m).collect();
            // Contiguous from the first byte, in order, every byte once.
            let mut at = 0;
            for c in &mine {
                assert_eq!(c.1, at, "member {m}: {calls:?}");
                at += c.2 as u64;
                // Every row in the call had its computation run.
                let last_row = (c.1 as usize + c.2 - 1) / R;
                assert!(c.3 >= Some(last_row), "member {m} row {last_row} written before its computation: {calls:?}");
            }
            assert_eq!(at as usize, [n * R, n * R, R][m]);
        }
        // Rounds of two rows (128 KiB of computation): member 0's write
        // goes out in four calls, interleaved with member 1's.
        assert_eq!(calls.iter().filter(|c| c.0 == 0).count(), n / 2);
        let first_m1 = calls.iter().position(|c| c.0 == 1).unwrap();
        let last_m0 = calls.iter().rposition(|c| c.0 == 0).unwrap();
        assert!(first_m1 < last_m0, "{calls:?}");
        // Member 2's one row waits for the last computation.
        assert_eq!(calls.iter().filter(|c| c.0 == 2).map(|c| c.3).collect::<Vec<_>>(), vec![Some(n - 1)]);
    }

    /// A write whose bytes are final waits while an earlier write on its
    /// member is not complete: a zone takes its appends in order.
    #[test]
    fn a_write_waits_for_the_earlier_writes_on_its_member() {
        const R: usize = 64 << 10;
        let (p, cs, _) = rows(8);
        // Member 3: first the last row of buffer 1 (computed last), then
        // its first row (computed first); member 0: the first row alone.
        let ops = vec![io(3, 0, R, Ref::new(1, 7 * R)), io(3, R as u64, R, Ref::new(1, 0)), io(0, 0, R, Ref::new(1, 0))];
        let mut calls = Vec::new();
        let done = std::cell::Cell::new(0);
        let res = run::<()>(
            &p,
            &cs,
            &ops,
            |_| {
                done.set(done.get() + 1);
                Ok(())
            },
            |io, _, at, _| {
                calls.push((io.op.member, io.op.offset + at, done.get()));
                Ok(())
            },
        )
        .unwrap();
        assert!(res.iter().all(|r| r.is_ok()));
        // Member 0's row went out after the first round; member 3's two
        // writes only after the last computation, in order.
        assert_eq!(calls, vec![(0, 0, 2), (3, 0, 8), (3, R as u64, 8)]);
    }

    #[test]
    fn a_write_that_fails_gets_no_more_pieces_and_the_others_complete() {
        let n = 8;
        let (calls, ok) = record(n, Some(1));
        assert_eq!(ok, vec![true, false, false, true]);
        // Member 1's first write failed at its first piece and got no
        // more; its second was still tried, as phase by phase, once the
        // first was done with.
        assert_eq!(calls.iter().filter(|c| c.0 == 1).count(), 2, "{calls:?}");
        assert_eq!(calls.iter().filter(|c| c.0 == 0).map(|c| c.2).sum::<usize>(), n * (64 << 10));
    }
}
