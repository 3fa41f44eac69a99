//! Merging a program's contiguous transfers on one member into one.
//!
//! A request that spans several stripes of a small unit puts one transfer
//! per stripe on each member, at adjacent device offsets: a 36 KiB write
//! on a 4+1 raid5 of 4 KiB units is five stripe pieces, so every member
//! sees four or five separate 4 KiB writes where one 16–20 KiB write
//! would do (Linux MD relies on the block layer to merge them).  Both the
//! real executor and the simulator run the merged program, so they keep
//! performing the same device operations.
//!
//! ```text
//!   Read  [ m0@0 4K ─> A ,  m0@4K 4K ─> B ]          (A, B anywhere)
//!     ==> Read    [ m0@0 8K ─> S[0..8K) ]            S: new scratch
//!         Compute [ A = S[0..4K) , B = S[4K..8K) ]    scatter back
//!
//!   Write [ m0@0 4K <─ A ,  m0@4K 4K <─ B ]
//!     ==> Write   [ m0@0 8K <─ G ]                   G: new Gather [A, B]
//! ```
//!
//! A merged write names its pieces where they lie ([`Buf::Gather`]): the
//! executor hands them to the member as one write and to the journal as
//! they are, so a large write's bytes are not copied together first (a
//! 1 MiB write on 64 KiB units puts four pieces 256 KiB apart in the
//! client's buffer on each member: gathering them was a whole extra pass
//! over every byte written, 10 % of the NBD server's CPU).  A merged read
//! still lands in scratch and is scattered back by copies.
//!
//! Only transfers of one phase merge: the ops of a phase are concurrent by
//! definition, so nothing orders them against each other, while phases
//! (a read before the write that depends on it, a flush, a zone reset)
//! keep their order.  A run merges when the offsets are exactly adjacent
//! on the same member; data and code pieces merge with each other (the
//! member does not care what the bytes are), metadata only with metadata.
//! A merged op counts once, as data if it carries any data.  Pieces that
//! already sit back to back in one buffer need no copy.  The lanes
//! (stripes) of a merged op become one lane: they now share a transfer.

use crate::plan::{DevOp, Role};
use crate::program::{write_pieces, Buf, Combine, Io, Phase, Program, Ref};

/// Merge every run of adjacent same-member transfers within each read
/// and write phase of `p` (see the module docs).
pub fn merge_contiguous(p: &mut Program) {
    // Most programs (a small write: one op per member and phase) have
    // nothing to merge: leave them as they are, without allocating.
    if !p.phases.iter().any(|ph| matches!(ph, Phase::Read(ios) | Phase::Write { ops: ios, .. } if has_adjacent(ios))) {
        return;
    }
    merge_all(p);
}

/// [`merge_contiguous`] without its shortcut.
fn merge_all(p: &mut Program) {
    let mut lanes = LaneSets::default();
    let mut out = Vec::with_capacity(p.phases.len() + 2);
    for ph in std::mem::take(&mut p.phases) {
        match ph {
            Phase::Read(ios) => {
                let (ios, copies) = merge_phase(&mut p.bufs, ios, true, &mut lanes);
                out.push(Phase::Read(ios));
                if !copies.is_empty() {
                    out.push(Phase::Compute(copies));
                }
            }
            Phase::Write { ops, journal, marks } => {
                let (ops, copies) = merge_phase(&mut p.bufs, ops, false, &mut lanes);
                debug_assert!(copies.is_empty(), "merged writes gather in place");
                out.push(Phase::Write { ops, journal, marks });
            }
            other => out.push(other),
        }
    }
    p.phases = out;
    lanes.relabel(&mut p.phases);
}

/// Whether two transfers of `ios` would join one run of [`merge_phase`].
/// Quadratic, which beats sorting for the few ops of a phase; long
/// phases are simply assumed to merge.
fn has_adjacent(ios: &[Io]) -> bool {
    if ios.len() > 32 {
        return true;
    }
    // Each pair once, both ways (an op never joins itself: lengths > 0).
    ios.iter().enumerate().any(|(i, a)| ios[i + 1..].iter().any(|b| joins(&a.op, &b.op) || joins(&b.op, &a.op)))
}

/// Whether `b` continues `a` on the same member in one transfer.
fn joins(a: &DevOp, b: &DevOp) -> bool {
    a.member == b.member && a.len > 0 && b.len > 0 && a.offset + a.len == b.offset && roles_mix(a.role, b.role)
}

/// Whether two pieces' roles may share one transfer.
fn roles_mix(a: Role, b: Role) -> bool {
    a == b || matches!((a, b), (Role::Data, Role::Code) | (Role::Code, Role::Data))
}

/// One phase's transfers merged; for reads, the copies that scatter the
/// bytes of runs whose pieces are not back to back (such a write run
/// takes its bytes from a new [`Buf::Gather`] of its pieces).
fn merge_phase(bufs: &mut Vec<Buf>, ios: Vec<Io>, read: bool, lanes: &mut LaneSets) -> (Vec<Io>, Vec<Combine>) {
    let mut order: Vec<usize> = (0..ios.len()).collect();
    order.sort_by_key(|&i| (ios[i].op.member, ios[i].op.offset));
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for i in order {
        let joined = runs.last().and_then(|r| r.last()).is_some_and(|&j| joins(&ios[j].op, &ios[i].op));
        match runs.last_mut() {
            Some(r) if joined => r.push(i),
            _ => runs.push(vec![i]),
        }
    }
    if runs.len() == ios.len() {
        return (ios, Vec::new());
    }
    // Keep the phase's first-seen order of runs, as the planner issued them.
    runs.sort_by_key(|r| *r.iter().min().unwrap_or(&0));
    let mut scratch: Option<(usize, usize)> = None;
    let mut copies = Vec::new();
    let mut merged = Vec::with_capacity(runs.len());
    for run in runs {
        let first = ios[run[0]];
        if run.len() == 1 {
            merged.push(first);
            continue;
        }
        let len: u64 = run.iter().map(|&i| ios[i].op.len).sum();
        let role = if run.iter().any(|&i| ios[i].op.role == Role::Data) { Role::Data } else { first.op.role };
        let lane = lanes.join(run.iter().map(|&i| ios[i].lane));
        let op = DevOp { len, role, ..first.op };
        let at = if back_to_back(&ios, &run) {
            first.at
        } else if !read {
            // A piece that is itself a gather (a program merged again)
            // joins as its pieces, so gathers never nest.
            let pieces = run.iter().flat_map(|&i| write_pieces(bufs, ios[i].at, ios[i].op.len as usize)).collect();
            bufs.push(Buf::Gather(pieces));
            Ref::new(bufs.len() - 1, 0)
        } else {
            let (buf, used) = *scratch.get_or_insert((bufs.len(), 0));
            if used == 0 {
                bufs.push(Buf::Scratch(0));
            }
            let at = Ref::new(buf, used);
            let mut o = 0;
            for &i in &run {
                let (piece, n) = (at.at(o), ios[i].op.len as usize);
                copies.push(Combine::copy(ios[i].at, piece, n));
                o += n;
            }
            scratch = Some((buf, used + len as usize));
            bufs[buf] = Buf::Scratch(used + len as usize);
            at
        };
        merged.push(Io { op, at, lane });
    }
    (merged, copies)
}

/// Whether the run's pieces follow each other in one buffer.
fn back_to_back(ios: &[Io], run: &[usize]) -> bool {
    run.windows(2).all(|w| {
        let (a, b) = (&ios[w[0]], &ios[w[1]]);
        a.at.buf == b.at.buf && a.at.off as u64 + a.op.len == b.at.off as u64
    })
}

/// Lanes joined by merged transfers (a union-find over lane numbers).
#[derive(Default)]
struct LaneSets {
    parent: Vec<u32>,
}

impl LaneSets {
    fn find(&mut self, l: u32) -> u32 {
        while self.parent.len() <= l as usize {
            self.parent.push(self.parent.len() as u32);
        }
        let mut r = l;
        while self.parent[r as usize] != r {
            r = self.parent[r as usize];
        }
        self.parent[l as usize] = r;
        r
    }

    /// Join these lanes; the smallest stands for them.
    fn join(&mut self, ls: impl Iterator<Item = u32>) -> u32 {
        let roots: Vec<u32> = ls.map(|l| self.find(l)).collect();
        let min = roots.iter().copied().min().unwrap_or(0);
        for r in roots {
            self.parent[r as usize] = min;
        }
        min
    }

    /// Every transfer on its set's lane, the lanes renumbered densely in
    /// order (lane 0 stays 0, where flushes and resets run).
    fn relabel(mut self, phases: &mut [Phase]) {
        if self.parent.iter().enumerate().all(|(i, &p)| p as usize == i) {
            return;
        }
        let mut roots = Vec::new();
        for ph in phases.iter_mut() {
            if let Phase::Read(ios) | Phase::Write { ops: ios, .. } = ph {
                for io in ios.iter_mut() {
                    io.lane = self.find(io.lane);
                    roots.push(io.lane);
                }
            }
        }
        roots.sort_unstable();
        roots.dedup();
        for ph in phases.iter_mut() {
            if let Phase::Read(ios) | Phase::Write { ops: ios, .. } = ph {
                for io in ios.iter_mut() {
                    io.lane = roots.binary_search(&io.lane).unwrap_or(0) as u32;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Dir;

    fn op(member: usize, offset: u64, len: u64, role: Role) -> DevOp {
        DevOp { member, offset, len, role, col: 0 }
    }

    /// A program with the given reads (or writes), each landing in (or
    /// taken from) its own 4 KiB of one scratch buffer, one lane each.
    fn program(write: bool, ops: &[DevOp]) -> Program {
        let mut p = Program::default();
        let total: u64 = ops.iter().map(|o| o.len).sum();
        let s = p.buf(Buf::Scratch(total as usize));
        // Reverse buffer order, so no run is back to back by accident.
        let mut at = total as usize;
        let ios = ops
            .iter()
            .enumerate()
            .map(|(i, o)| {
                at -= o.len as usize;
                Io { op: *o, at: Ref::new(s, at), lane: i as u32 }
            })
            .collect();
        p.phases.push(if write { Phase::write(ios) } else { Phase::Read(ios) });
        p
    }

    fn ops(p: &Program) -> Vec<(Dir, usize, u64, u64)> {
        p.io().flat_map(|(d, ios)| ios.iter().map(move |io| (d, io.op.member, io.op.offset, io.op.len))).collect()
    }

    #[test]
    fn adjacent_ops_on_one_member_merge_with_their_bytes_gathered_in_place() {
        let k = 4096;
        let mut p = program(true, &[op(0, 0, k, Role::Data), op(1, 0, k, Role::Data), op(0, k, k, Role::Code), op(0, 2 * k, k, Role::Data)]);
        merge_contiguous(&mut p);
        assert_eq!(ops(&p), vec![(Dir::Write, 0, 0, 3 * k), (Dir::Write, 1, 0, k)]);
        assert!(p.validate().is_ok());
        // No copies: the merged write takes a gather of its pieces, in
        // device order.  Input offsets were reversed: member 0's pieces
        // at 12K, 4K, 0.
        assert_eq!(p.phases.len(), 1, "no gather phase: {:?}", p.phases);
        let Phase::Write { ops: ws, .. } = &p.phases[0] else { panic!("{:?}", p.phases) };
        let Buf::Gather(pieces) = &p.bufs[ws[0].at.buf as usize] else { panic!("{:?}", p.bufs) };
        assert_eq!(*pieces, vec![(Ref::new(0, 12288), 4096), (Ref::new(0, 4096), 4096), (Ref::new(0, 0), 4096)]);
        assert_eq!(ws[0].at, Ref::new(1, 0));
        let c = p.counts();
        assert_eq!((c.data_writes, c.data_write_bytes, c.code_writes), (2, 4 * k, 0));
        // The stripes (lanes 0, 2, 3) share the merged write: one lane.
        assert_eq!(p.lanes(), 2);
    }

    #[test]
    fn merged_reads_scatter_back_after_the_read() {
        let k = 4096;
        let mut p = program(false, &[op(2, 8 * k, k, Role::Data), op(2, 9 * k, 2 * k, Role::Data)]);
        merge_contiguous(&mut p);
        assert_eq!(ops(&p), vec![(Dir::Read, 2, 8 * k, 3 * k)]);
        assert!(matches!(&p.phases[1], Phase::Compute(cs) if cs.len() == 2 && cs[0].terms[0].1.off == 0 && cs[1].terms[0].1.off == 4096));
        assert!(p.validate().is_ok());
    }

    #[test]
    fn gaps_other_members_metadata_and_other_phases_do_not_merge() {
        let k = 4096;
        let gap = [op(0, 0, k, Role::Data), op(0, 2 * k, k, Role::Data)];
        let members = [op(0, 0, k, Role::Data), op(1, k, k, Role::Data)];
        let meta = [op(0, 0, k, Role::Meta), op(0, k, k, Role::Data)];
        for set in [&gap[..], &members[..], &meta[..]] {
            let mut p = program(true, set);
            let before = p.clone();
            merge_contiguous(&mut p);
            assert_eq!(p, before);
        }
        // A read and then a write of the next range: two phases, two ops.
        let mut p = program(false, &[op(0, 0, k, Role::Data)]);
        let w = program(true, &[op(0, k, k, Role::Data)]);
        p.append(w);
        let before = ops(&p);
        merge_contiguous(&mut p);
        assert_eq!(ops(&p), before);
    }

    #[test]
    fn the_shortcut_leaves_programs_as_the_full_merge_does() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let roles = [Role::Data, Role::Code, Role::Meta];
        let (mut merged, mut kept) = (0, 0);
        for _ in 0..2000 {
            let n = rng.gen_range(1..6);
            let set: Vec<DevOp> = (0..n).map(|_| op(rng.gen_range(0..3), rng.gen_range(0..4) * 4096, 4096, roles[rng.gen_range(0..3)])).collect();
            let mut p = program(rng.gen_bool(0.5), &set);
            let mut q = p.clone();
            let before = p.clone();
            merge_contiguous(&mut p);
            merge_all(&mut q);
            assert_eq!(p, q, "{set:?}");
            if p == before {
                kept += 1;
            } else {
                merged += 1;
            }
        }
        // Both kinds of program were drawn.
        assert!(merged > 100 && kept > 100, "{merged} merged, {kept} kept");
    }

    #[test]
    fn a_gathered_write_merged_again_never_nests_gathers() {
        // A write already merged (a program merged, then extended, then
        // merged again) joins its next piece: one gather of all three.
        let k = 4096;
        let mut p = Program::default();
        let s = p.buf(Buf::Scratch(3 * k as usize));
        let g = p.buf(Buf::Gather(vec![(Ref::new(s, 4096), 4096), (Ref::new(s, 0), 4096)]));
        p.phases.push(Phase::write(vec![Io::new(op(0, 0, 2 * k, Role::Data), Ref::new(g, 0)), Io::new(op(0, 2 * k, k, Role::Data), Ref::new(s, 8192))]));
        merge_contiguous(&mut p);
        assert_eq!(ops(&p), vec![(Dir::Write, 0, 0, 3 * k)]);
        p.validate().unwrap();
        let Phase::Write { ops: ws, .. } = &p.phases[0] else { panic!() };
        let Buf::Gather(pieces) = &p.bufs[ws[0].at.buf as usize] else { panic!("{:?}", p.bufs) };
        assert_eq!(*pieces, vec![(Ref::new(s, 4096), 4096), (Ref::new(s, 0), 4096), (Ref::new(s, 8192), 4096)]);
    }

    #[test]
    fn back_to_back_pieces_merge_without_a_copy() {
        let k = 4096;
        let mut p = Program::default();
        let s = p.buf(Buf::Scratch(2 * k as usize));
        p.phases.push(Phase::Read(vec![Io::new(op(0, 0, k, Role::Data), Ref::new(s, 0)), Io::new(op(0, k, k, Role::Data), Ref::new(s, k as usize))]));
        merge_contiguous(&mut p);
        assert_eq!(p.phases.len(), 1);
        assert_eq!(p.bufs.len(), 1);
        assert_eq!(ops(&p), vec![(Dir::Read, 0, 0, 2 * k)]);
    }
}
