//! Lowering a fixed layout's stripe plans into [`Program`]s.
//!
//! The planner maps a request onto stripes ([`StripePlan`]: which columns,
//! which device ranges, which method); this module spells out the
//! computation between its reads and writes as data, so the one executor
//! runs it without knowing the layout.  One lane per stripe.
//!
//! ```text
//!   write, RMW, raid6 (unit u, one data column touched, [x,y) of it):
//!     Read     old D ─> rd[0..)      old P ─> rd[u..)     old Q ─> rd[2u..)
//!     Compute  cd[0..)  = P + 1·D + 1·D'        (D' in the client's bytes)
//!              cd[u..)  = Q + a·D + a·D'        (a = A[1][col])
//!     Write    D' from the input,  P' from cd[0..),  Q' from cd[u..)
//!
//!   write, RCW/FSW: every code range is Σ A[row][j]·column j, column j's
//!   bytes taken piecewise from the request (where it writes) or a read.
//!   Degraded write: lost columns first decoded into scratch, then the same.
//!   Read: reads land in the client's buffer; lost columns are decoded.
//! ```
//!
//! Sources of a column's bytes, by priority: the request's new bytes, a
//! decoded column, a read.  A range where none covers a column is a
//! planner bug, reported as [`PlanError::Invalid`].

use crate::compute::StripeMath;
use crate::geometry::Geometry;
use crate::plan::{DevOp, Method, Plan, Role, StripePlan};
use crate::program::{Buf, Combine, Io, Phase, Program, Ref};
use crate::PlanError;

/// Where the bytes of one column range live in a program being built.
#[derive(Debug, Clone, Copy)]
struct Piece {
    col: usize,
    start: u64,
    end: u64,
    at: Ref,
}

impl Piece {
    /// The reference to `[x, y)` of this column if the piece covers it.
    fn covers(&self, col: usize, x: u64, y: u64) -> Option<Ref> {
        (self.col == col && self.start <= x && y <= self.end).then(|| self.at.at((x - self.start) as usize))
    }
}

/// A program under construction: one scratch buffer for reads, one for
/// computed bytes, grown as ops are added.
struct Builder {
    p: Program,
    input: Option<usize>,
    rd: usize,
    rd_len: usize,
    cd: usize,
    cd_len: usize,
    reads: Vec<Io>,
    writes: Vec<Io>,
    combines: Vec<Combine>,
    /// Old XOR new data of (lane, column, range) computed so far (RMW).
    deltas: Vec<((u32, usize, u64, u64), Ref)>,
    lane: u32,
}

impl Builder {
    fn new(input: Option<Buf>) -> Builder {
        let mut p = Program { bufs: Vec::with_capacity(3), phases: Vec::with_capacity(3), ..Program::default() };
        let input = input.map(|b| p.buf(b));
        let rd = p.buf(Buf::Scratch(0));
        let cd = p.buf(Buf::Scratch(0));
        Builder { p, input, rd, rd_len: 0, cd, cd_len: 0, reads: Vec::with_capacity(8), writes: Vec::with_capacity(8), combines: Vec::with_capacity(4), deltas: vec![], lane: 0 }
    }

    /// Read `op` into scratch; where it landed.
    fn read(&mut self, op: &DevOp, lane: u32) -> Ref {
        let at = Ref::new(self.rd, self.rd_len);
        self.rd_len += op.len as usize;
        self.reads.push(Io { op: *op, at, lane });
        at
    }

    /// `len` bytes of computed scratch.
    fn scratch(&mut self, len: u64) -> Ref {
        let at = Ref::new(self.cd, self.cd_len);
        self.cd_len += len as usize;
        at
    }

    /// The program locks these stripes and counts their methods.
    fn stripes(&mut self, sps: &[StripePlan]) {
        self.p.locks = sps.iter().map(|s| s.stripe).collect();
        self.p.methods = sps.iter().map(|s| s.method).collect();
    }

    fn finish(mut self, journal: bool) -> Program {
        self.p.bufs[self.rd] = Buf::Scratch(self.rd_len);
        self.p.bufs[self.cd] = Buf::Scratch(self.cd_len);
        if !self.reads.is_empty() {
            self.p.phases.push(Phase::Read(self.reads));
        }
        if !self.combines.is_empty() {
            self.p.phases.push(Phase::Compute(self.combines));
        }
        if !self.writes.is_empty() {
            self.p.phases.push(Phase::Write { ops: self.writes, journal, marks: vec![] });
        }
        self.p
    }
}

fn op_range(geo: &Geometry, stripe: u64, op: &DevOp) -> (u64, u64) {
    let s = op.offset - geo.offset_of(stripe, op.col);
    (s, s + op.len)
}

fn invalid(what: String) -> PlanError {
    PlanError::Invalid(what)
}

/// One stripe's column sources while lowering.
struct Sources {
    /// The request's new bytes, per touched range.
    new: Vec<Piece>,
    /// Decoded columns.
    decoded: Vec<Piece>,
    /// Read results.
    read: Vec<Piece>,
}

impl Sources {
    fn find(&self, col: usize, x: u64, y: u64) -> Option<Ref> {
        let hit = |ps: &[Piece]| ps.iter().find_map(|p| p.covers(col, x, y));
        hit(&self.new).or_else(|| hit(&self.decoded)).or_else(|| hit(&self.read))
    }

    /// Where the bytes of every column may change within `[a, b)`.
    fn breaks(&self, a: u64, b: u64) -> Vec<u64> {
        let mut v: Vec<u64> = vec![a, b];
        for p in self.new.iter().chain(&self.decoded).chain(&self.read) {
            v.extend([p.start, p.end].into_iter().filter(|&x| a < x && x < b));
        }
        v.sort_unstable();
        v.dedup();
        v
    }
}

impl StripeMath {
    fn coef(&self, row: usize, col: usize) -> Result<u8, PlanError> {
        Ok(self.code()?.coefficient(row, col))
    }

    /// The program of a read plan: `plan`'s reads land in the client's
    /// buffer where they match a requested range; the rest (degraded
    /// stripes) are read into scratch and decoded.
    pub fn read_program(&self, plan: &Plan) -> Result<Program, PlanError> {
        let mut b = Builder::new(None);
        for (lane, sp) in plan.stripes.iter().enumerate() {
            self.lower_read(&mut b, sp, lane as u32)?;
        }
        b.stripes(&plan.stripes);
        Ok(b.finish(false))
    }

    fn lower_read(&self, b: &mut Builder, sp: &StripePlan, lane: u32) -> Result<(), PlanError> {
        let g = &self.geo;
        if g.is_mirror() {
            // One read of some copy per requested range, in order.
            for (c, op) in sp.touched.iter().zip(&sp.reads) {
                let out = b.p.buf(Buf::Output { off: c.buf_off as usize, len: c.len() as usize });
                b.reads.push(Io { op: *op, at: Ref::new(out, 0), lane });
            }
            return Ok(());
        }
        let mut src = Sources { new: vec![], decoded: vec![], read: vec![] };
        let mut direct = vec![false; sp.touched.len()];
        for op in &sp.reads {
            let (s, e) = op_range(g, sp.stripe, op);
            let exact = sp.touched.iter().position(|c| c.col == op.col && c.start == s && c.end == e && !sp.missing.contains(&c.col));
            let at = match exact {
                Some(i) if !direct[i] => {
                    direct[i] = true;
                    let c = &sp.touched[i];
                    let out = b.p.buf(Buf::Output { off: c.buf_off as usize, len: c.len() as usize });
                    let at = Ref::new(out, 0);
                    b.reads.push(Io { op: *op, at, lane });
                    at
                }
                _ => b.read(op, lane),
            };
            src.read.push(Piece { col: op.col, start: s, end: e, at });
        }
        if !sp.missing.is_empty() {
            self.decode(b, &mut src, &sp.missing, sp.span)?;
        }
        for (c, _) in sp.touched.iter().zip(&direct).filter(|(_, d)| !**d) {
            let from = src.find(c.col, c.start, c.end).ok_or_else(|| invalid(format!("no read for column {}", c.col)))?;
            let out = b.p.buf(Buf::Output { off: c.buf_off as usize, len: c.len() as usize });
            b.combines.push(Combine::copy(Ref::new(out, 0), from, c.len() as usize));
        }
        Ok(())
    }

    /// Decode columns `want` over `[a, b)` from reads that cover it, into
    /// scratch; adds them to `src.decoded`.
    fn decode(&self, b: &mut Builder, src: &mut Sources, want: &[usize], (a, z): (u64, u64)) -> Result<(), PlanError> {
        if want.is_empty() {
            return Ok(());
        }
        let mut present: Vec<usize> = src.read.iter().filter(|p| p.start <= a && z <= p.end).map(|p| p.col).collect();
        present.sort_unstable();
        present.dedup();
        let (ids, rows) = self.code()?.decode_coefficients(&present, want).map_err(|e| invalid(format!("decode: {e}")))?;
        let terms_at: Vec<Ref> = ids.iter().map(|&c| src.read.iter().find_map(|p| p.covers(c, a, z))).collect::<Option<_>>().ok_or_else(|| invalid("decode input not read".into()))?;
        let k = ids.len();
        for (w, &col) in want.iter().enumerate() {
            let dst = b.scratch(z - a);
            let terms = rows[w * k..(w + 1) * k].iter().copied().zip(terms_at.iter().copied()).filter(|t| t.0 != 0).collect();
            b.combines.push(Combine { dst, len: (z - a) as usize, acc: false, terms });
            src.decoded.push(Piece { col, start: a, end: z, at: dst });
        }
        Ok(())
    }

    /// The program of a write plan for a request of `len` bytes (the
    /// client's bytes are the program's input).
    pub fn write_program(&self, plan: &Plan, len: usize) -> Result<Program, PlanError> {
        self.write_program_from(plan, Buf::Input { off: 0, len })
    }

    /// The program of a write plan whose new bytes are `input` (the
    /// client's, or bytes a policy holds, such as a cache's pages).
    pub fn write_program_from(&self, plan: &Plan, input: Buf) -> Result<Program, PlanError> {
        let mut b = Builder::new(Some(input));
        for (lane, sp) in plan.stripes.iter().enumerate() {
            self.lower_write(&mut b, sp, lane as u32)?;
        }
        b.stripes(&plan.stripes);
        Ok(b.finish(true))
    }

    fn lower_write(&self, b: &mut Builder, sp: &StripePlan, lane: u32) -> Result<(), PlanError> {
        let g = &self.geo;
        let input = b.input.ok_or_else(|| invalid("a write program without input".into()))?;
        b.lane = lane;
        let mut src = Sources { new: vec![], decoded: vec![], read: vec![] };
        for c in &sp.touched {
            src.new.push(Piece { col: c.col, start: c.start, end: c.end, at: Ref::new(input, c.buf_off as usize) });
        }
        for op in &sp.reads {
            let (s, e) = op_range(g, sp.stripe, op);
            let at = b.read(op, lane);
            src.read.push(Piece { col: op.col, start: s, end: e, at });
        }
        if sp.method == Method::DegradedWrite && !sp.missing.is_empty() {
            self.decode(b, &mut src, &sp.missing, sp.span)?;
        }
        for op in &sp.writes {
            let (x, y) = op_range(g, sp.stripe, op);
            let at = if op.role == Role::Data || sp.method == Method::Mirror {
                let col = if g.is_mirror() { 0 } else { op.col };
                src.new.iter().find_map(|p| p.covers(col, x, y)).ok_or_else(|| invalid(format!("no request bytes for column {col} [{x},{y})")))?
            } else {
                self.code_range(b, sp, &src, op.col - g.k, x, y)?
            };
            b.writes.push(Io { op: *op, at, lane });
        }
        Ok(())
    }

    /// Old XOR new bytes of column `col` over `[s, e)`, computed once per
    /// stripe.
    fn delta(&self, b: &mut Builder, src: &Sources, col: usize, s: u64, e: u64) -> Result<Ref, PlanError> {
        let key = (b.lane, col, s, e);
        if let Some(&(_, at)) = b.deltas.iter().find(|d| d.0 == key) {
            return Ok(at);
        }
        let old_d = src.read.iter().find_map(|p| p.covers(col, s, e)).ok_or_else(|| invalid("rmw without old data".into()))?;
        let new_d = src.find(col, s, e).ok_or_else(|| invalid("rmw without new data".into()))?;
        let at = b.scratch(e - s);
        b.combines.push(Combine { dst: at, len: (e - s) as usize, acc: false, terms: vec![(1, old_d), (1, new_d)] });
        b.deltas.push((key, at));
        Ok(at)
    }

    /// Compute code row `row` over `[x, y)` into scratch.
    fn code_range(&self, b: &mut Builder, sp: &StripePlan, src: &Sources, row: usize, x: u64, y: u64) -> Result<Ref, PlanError> {
        let k = self.geo.k;
        let dst = b.scratch(y - x);
        match sp.method {
            Method::Rmw => {
                // P' = P + Σ c·(D + D') over each touched range.  One
                // pass with m = 1; with more code rows each delta D + D'
                // is computed once and multiplied into every row.
                let old = src.read.iter().find_map(|p| p.covers(k + row, x, y)).ok_or_else(|| invalid("rmw without old code".into()))?;
                let mut deltas = Vec::new();
                for t in &sp.touched {
                    let (s, e) = (t.start.max(x), t.end.min(y));
                    if s >= e {
                        continue;
                    }
                    let c = self.coef(row, t.col)?;
                    let delta = match self.geo.m {
                        1 => {
                            let old_d = src.read.iter().find_map(|p| p.covers(t.col, s, e)).ok_or_else(|| invalid("rmw without old data".into()))?;
                            let new_d = src.find(t.col, s, e).ok_or_else(|| invalid("rmw without new data".into()))?;
                            vec![(c, old_d), (c, new_d)]
                        }
                        _ => vec![(c, self.delta(b, src, t.col, s, e)?)],
                    };
                    deltas.push(Combine { dst: dst.at((s - x) as usize), len: (e - s) as usize, acc: true, terms: delta });
                }
                match deltas.as_mut_slice() {
                    [one] if one.len as u64 == y - x => {
                        one.acc = false;
                        one.terms.insert(0, (1, old));
                    }
                    _ => b.combines.push(Combine::copy(dst, old, (y - x) as usize)),
                }
                b.combines.append(&mut deltas);
            }
            Method::Fsw | Method::Rcw | Method::DegradedWrite => {
                let cuts = src.breaks(x, y);
                for w in cuts.windows(2) {
                    let (s, e) = (w[0], w[1]);
                    let mut terms = Vec::with_capacity(k);
                    for j in 0..k {
                        let at = src.find(j, s, e).ok_or_else(|| invalid(format!("column {j} [{s},{e}) has no bytes to encode")))?;
                        terms.push((self.coef(row, j)?, at));
                    }
                    b.combines.push(Combine { dst: dst.at((s - x) as usize), len: (e - s) as usize, acc: false, terms });
                }
            }
            m => return Err(invalid(format!("method {} writes no code", m.name()))),
        }
        Ok(dst)
    }

    /// The program of rebuild plans: survivors read, lost columns decoded
    /// (or a copy taken, for mirrors) and written to the members rebuilt.
    pub fn rebuild_program(&self, sps: &[StripePlan]) -> Result<Program, PlanError> {
        let mut b = Builder::new(None);
        for (lane, sp) in sps.iter().enumerate() {
            let lane = lane as u32;
            let mut src = Sources { new: vec![], decoded: vec![], read: vec![] };
            for op in &sp.reads {
                let (s, e) = op_range(&self.geo, sp.stripe, op);
                let at = b.read(op, lane);
                src.read.push(Piece { col: op.col, start: s, end: e, at });
            }
            if self.geo.is_mirror() {
                let from = src.read.first().ok_or_else(|| invalid("no surviving copy".into()))?.at;
                b.writes.extend(sp.writes.iter().map(|op| Io { op: *op, at: from, lane }));
                continue;
            }
            let want: Vec<usize> = sp.writes.iter().map(|o| o.col).collect();
            self.decode(&mut b, &mut src, &want, sp.span)?;
            for op in &sp.writes {
                let (x, y) = op_range(&self.geo, sp.stripe, op);
                let at = src.decoded.iter().find_map(|p| p.covers(op.col, x, y)).ok_or_else(|| invalid("rebuilt column not decoded".into()))?;
                b.writes.push(Io { op: *op, at, lane });
            }
        }
        b.stripes(sps);
        Ok(b.finish(false))
    }

    /// The program that reads what scrub verifies: every read of `sps`
    /// into one kept buffer, in order ([`split_reads`] cuts it up again).
    pub fn scrub_program(&self, sps: &[StripePlan]) -> Program {
        let mut b = Builder::new(None);
        for (lane, sp) in sps.iter().enumerate() {
            for op in &sp.reads {
                b.read(op, lane as u32);
            }
        }
        b.stripes(sps);
        b.p.keep = vec![b.rd as u32];
        b.finish(false)
    }
}

/// The kept read buffer of a [`StripeMath::scrub_program`], cut into each
/// stripe's reads.
pub fn split_reads(sps: &[StripePlan], buf: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let mut at = 0usize;
    sps.iter()
        .map(|sp| {
            sp.reads
                .iter()
                .map(|op| {
                    let end = (at + op.len as usize).min(buf.len());
                    let v = buf[at.min(end)..end].to_vec();
                    at = end;
                    v
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::health::{Health, MemberState};
    use crate::layout::{FixedLayout, Layout};
    use crate::plan::Dir;
    use crate::program::Program;
    use crate::{Geometry, Level};

    fn io(p: &Program) -> Vec<(Dir, Vec<(usize, u64, u64, u32)>)> {
        p.io().map(|(d, ios)| (d, ios.iter().map(|i| (i.op.member, i.op.offset, i.op.len, i.lane)).collect())).collect()
    }

    /// The simulator's programs (no computation) have exactly the device
    /// phases of the programs the executor runs, healthy and degraded.
    #[test]
    fn counting_programs_have_the_real_programs_device_phases() {
        for (level, n) in [("raid5", 5), ("raid6", 6), ("rs:3+3", 6), ("raid1", 3), ("raid0", 4)] {
            let geo = Geometry::new(level.parse::<Level>().unwrap(), n, 8192, 512, 64 * 8192).unwrap();
            let l = FixedLayout::new(geo).unwrap();
            let m = l.geometry().m;
            let mut healths = vec![Health::all_active(n)];
            for failed in 1..=m.min(2) {
                let mut h = Health::all_active(n);
                for f in 0..failed {
                    h.states[(2 * f + 1) % n] = MemberState::Failed;
                }
                healths.push(h);
            }
            for h in &healths {
                for (off, len) in [(0, 512), (4096, 8192), (7680, 1024), (8192, 3 * 8192 * 4), (512, 20 * 8192 + 1024)] {
                    let len = len.min(l.capacity() - off);
                    for write in [false, true] {
                        let full = if write { l.write_program(off, len, h).unwrap() } else { l.read_program(off, len, h).unwrap() };
                        let counted = l.io_program(write, off, len, h).unwrap();
                        assert_eq!(io(&full), io(&counted), "{level} {h:?} write={write} {off}+{len}");
                        assert_eq!(full.methods, counted.methods);
                        assert!(counted.validate().is_ok());
                    }
                }
            }
        }
    }
}
