//! The one lowering of DVS work into [`Program`]s, for both executors.
//!
//! The real array ([`crate::DvsArray`]) runs these programs on its members
//! through `mosaic_exec::Executor`; the replay front end
//! ([`crate::DvsFrontend`]) hands the same programs to the simulator.  The
//! only difference is [`Payload`]: the array supplies the bytes of cached
//! chunks and metadata records, the simulator only their lengths (zeroed
//! scratch of the same size), so both issue the same device operations.
//!
//! ```text
//!   job:  Read     fills: direct reads merged into runs (contiguous slots of one member
//!                  in one zone), then each reconstruction's other columns
//!         Compute  reconstructions (decode coefficients); each chunk = cached blocks over
//!                  its old bytes; parity = Σ A[r][j]·data_j (absent columns of a narrow
//!                  stripe are zeros and drop out)
//!         Write    appends sorted by (member, offset), contiguous slots merged into one
//!                  write (data and parity alike; the op keeps the first one's role)
//!         Flush    every member written
//!         Write    the job's log record (or a checkpoint) on every metadata member
//!         Flush    those members
//!         Reset    the zones of a GC's old segment
//! ```
//!
//! Every transfer is on lane 0: the phases run strictly in order, in the
//! simulator as on the real array.  Each chunk's bytes are computed in
//! place in the write buffer of its column (a column not written, on a
//! member out of the array, gets a slot of its own), so parity reads them
//! from there.

use mosaic_core::cache::KeyMap;
use std::sync::Arc;

use mosaic_core::{Buf, Combine, DevOp, Io, Method, Phase, Program, Ref, Role};
use mosaic_ec::Code;

use crate::addr::Geo;
use crate::engine::{ChunkRead, Job, Src};
use crate::tables::Stripe;
use crate::DvsError;

/// Bytes a program writes that the policy supplies: the bytes themselves
/// (the real array) or only their length (the simulator).
#[derive(Debug, Clone)]
pub enum Payload {
    Bytes(Arc<[u8]>),
    Len(usize),
    /// A cached chunk's marked blocks, one buffer each in block order
    /// ([`Lower::job`] copies each from where it is held).
    Blocks(Vec<Arc<[u8]>>),
    /// The first `n` bytes of the client buffer the program is run with
    /// (`Client::In`: a journal record written from its own buffer).
    Input(usize),
}

impl Payload {
    fn len(&self) -> usize {
        match self {
            Payload::Bytes(b) => b.len(),
            Payload::Len(n) | Payload::Input(n) => *n,
            Payload::Blocks(v) => v.iter().map(|b| b.len()).sum(),
        }
    }
    fn buf(self) -> Buf {
        match self {
            Payload::Bytes(b) => Buf::Bytes(b),
            Payload::Len(n) => Buf::Scratch(n),
            Payload::Input(n) => Buf::Input { off: 0, len: n },
            Payload::Blocks(v) => Buf::Bytes(v.concat().into()),
        }
    }
}

/// A metadata write (log record, checkpoint, journal record): `payload`
/// at `offset` on each of `members`, then a flush of each.
#[derive(Debug, Clone)]
pub struct Meta {
    pub offset: u64,
    pub payload: Payload,
    pub members: Vec<usize>,
}

/// Erasure-code shard of column `c` of a stripe: data columns are shards
/// `0..width`, parity column `width + r` is shard `data + r`.
pub fn shard(geo: &Geo, st: &Stripe, c: usize) -> usize {
    if c < st.width() {
        c
    } else {
        geo.data + c - st.width()
    }
}

/// What the lowering needs of the array: its geometry, its code and which
/// members may be read.
pub struct Lower<'a> {
    pub geo: &'a Geo,
    pub code: &'a Code,
    pub healthy: &'a [bool],
}

/// A bump allocator over one scratch buffer made once its size is known.
#[derive(Default)]
struct Area(usize);

impl Area {
    fn take(&mut self, n: usize) -> usize {
        self.0 += n;
        self.0 - n
    }
}

impl Lower<'_> {
    /// Chunk reads as a program of their own: the bytes `[a, b)` of read
    /// `i` are at the `i`-th returned offset of the one kept buffer.
    pub fn read(&self, reads: &[&ChunkRead]) -> Result<(Program, Vec<usize>), DvsError> {
        let mut p = Program::default();
        let at = self.reads(&mut p, reads)?;
        if !reads.is_empty() {
            let degraded = reads.iter().any(|r| matches!(r.src, Src::Recon { .. }));
            p.methods.push(if degraded { Method::DegradedRead } else { Method::Read });
        }
        p.keep = (0..p.bufs.len() as u32).collect(); // the one buffer, if any read
        Ok((p, at.iter().map(|r| r.off as usize).collect()))
    }

    /// Add the reads of `reads` to `p` (a Read phase, and a Compute phase
    /// for reconstructions) into one new scratch buffer; where each read's
    /// bytes land.
    fn reads(&self, p: &mut Program, reads: &[&ChunkRead]) -> Result<Vec<Ref>, DvsError> {
        self.reads_into(p, reads, &[])
    }

    /// [`Lower::reads`], except that a device read whose parts all have a
    /// place in `homes` (indexed as `reads`), laid out there as in the
    /// run, lands there instead of in the scratch buffer: a destage's
    /// fills go straight into the chunks' homes in its write buffer, with
    /// no copy after.  The device reads are the same either way.
    fn reads_into(&self, p: &mut Program, reads: &[&ChunkRead], homes: &[Option<Ref>]) -> Result<Vec<Ref>, DvsError> {
        if reads.is_empty() {
            return Ok(vec![]);
        }
        let buf = p.bufs.len();
        let mut area = Area::default();
        let mut out = vec![Ref::new(buf, 0); reads.len()];
        let mut ios = Vec::new();
        for run in read_runs(self.geo, reads) {
            let dst = match in_place(&run, homes) {
                Some(h) => h,
                None => Ref::new(buf, area.take(run.len as usize)),
            };
            ios.push(Io::new(DevOp { member: run.member, offset: run.offset, len: run.len, role: Role::Data, col: 0 }, dst));
            for (i, o) in run.parts {
                out[i] = dst.at(o as usize);
            }
        }
        let mut decodes = Vec::new();
        for (i, r) in reads.iter().enumerate() {
            if let Src::Recon { phys, stripe, col } = &r.src {
                let (dst, c) = self.recon(buf, &mut area, &mut ios, (*phys, stripe, *col), r.a, r.b)?;
                out[i] = dst;
                decodes.extend(c);
            }
        }
        p.bufs.push(Buf::Scratch(area.0));
        p.phases.push(Phase::Read(ios));
        if !decodes.is_empty() {
            p.phases.push(Phase::Compute(decodes));
        }
        Ok(out)
    }

    /// The reads of column `col` of a stripe (in-chunk bytes `[a, b)`)
    /// from its other readable columns, and its decode into a new slot.
    fn recon(&self, buf: usize, area: &mut Area, ios: &mut Vec<Io>, (phys, st, col): (u32, &Stripe, usize), a: u64, b: u64) -> Result<(Ref, Option<Combine>), DvsError> {
        let len = b - a;
        let mut have: KeyMap<usize, Ref> = KeyMap::default();
        for (c, &m) in st.members.iter().enumerate() {
            let m = m as usize;
            if c == col || !self.healthy.get(m).copied().unwrap_or(false) {
                continue;
            }
            let at = Ref::new(buf, area.take(len as usize));
            let role = if c < st.width() { Role::Data } else { Role::Code };
            ios.push(Io::new(DevOp { member: m, offset: self.geo.slot_offset(phys, st.idx[c]) + a, len, role, col: c }, at));
            have.insert(shard(self.geo, st, c), at);
        }
        let mut present: Vec<usize> = have.keys().copied().collect();
        present.extend(st.width()..self.geo.data); // absent columns: zeros
        present.sort_unstable();
        let (ids, coefs) = self.code.decode_coefficients(&present, &[shard(self.geo, st, col)]).map_err(|e| DvsError::Other(format!("cannot reconstruct: {e}")))?;
        // Zero shards contribute nothing.
        let terms: Vec<(u8, Ref)> = ids.iter().zip(&coefs).filter(|(_, &c)| c != 0).filter_map(|(id, &c)| have.get(id).map(|&r| (c, r))).collect();
        let dst = Ref::new(buf, area.take(len as usize));
        let combine = (!terms.is_empty()).then_some(Combine { dst, len: len as usize, acc: false, terms });
        Ok((dst, combine))
    }

    /// A job as one program (see the module doc).  `cached(lcn, bm)` gives
    /// the bytes of a chunk the cache holds, `bm` its cached blocks: the
    /// whole chunk, or only the marked blocks packed in block order; `writes_to` the members taking
    /// the job's appends; `meta` the job's log record; `resets` the zones
    /// `(member, zone)` to reset last.
    pub fn job(&self, job: &Job, cached: &mut dyn FnMut(u32, &crate::cache::Bitmap) -> Result<Payload, DvsError>, writes_to: &[bool], meta: Option<Meta>, resets: &[(usize, u64)]) -> Result<Program, DvsError> {
        let mut p = Program { locks: vec![job.lsn as u64], ordered: true, ..Program::default() };
        let out = Appends::lay_out(self.geo, job, writes_to, 0);
        p.bufs.push(Buf::Scratch(out.size));
        let fills: Vec<&ChunkRead> = job.fills.iter().collect();
        // A whole chunk read from its member is read into its home; the
        // cached blocks are copied over it after (`old` then names the
        // home itself, and no old block is copied).
        let homes: Vec<Option<Ref>> = fills.iter().map(|f| if f.a == 0 && f.b == self.geo.chunk { out.home.get(&f.key.1).copied() } else { None }).collect();
        let old: KeyMap<u32, Ref> = job.fills.iter().map(|f| f.key.1).zip(self.reads_into(&mut p, &fills, &homes)?).collect();
        if !fills.is_empty() {
            let degraded = fills.iter().any(|r| matches!(r.src, Src::Recon { .. }));
            p.methods.push(if degraded { Method::DegradedRead } else { Method::Read });
        }
        let mut cs = Vec::new();
        for (lcn, bm) in &job.chunks {
            let home = *out.home.get(lcn).ok_or_else(|| DvsError::Other(format!("chunk {lcn} of SSG {} is in none of the job's stripes", job.lsn)))?;
            if let Some(bm) = bm {
                match cached(*lcn, bm)? {
                    Payload::Blocks(v) => cs.extend(self.held_blocks(&mut p, home, v, bm)?),
                    payload => {
                        let n = payload.len();
                        let src = p.buf(payload.buf());
                        cs.extend(self.cached_blocks(home, Ref::new(src, 0), n, bm)?);
                    }
                }
            }
            if let Some(&o) = old.get(lcn).filter(|&&o| o != home) {
                cs.extend(self.old_blocks(home, o, bm.as_ref()));
            }
        }
        for (s, st) in job.stripes.iter().enumerate() {
            cs.extend(self.parity(st, &out, s)?);
        }
        p.phases.push(Phase::Compute(cs));
        if !out.writes.is_empty() {
            let mut ms: Vec<usize> = out.writes.iter().map(|io| io.op.member).collect();
            ms.dedup();
            p.phases.push(Phase::write(out.writes));
            p.phases.push(Phase::Flush(ms));
            p.methods.push(Method::Fsw);
        }
        if let Some(m) = meta {
            push_meta(&mut p, m);
        }
        let zs = self.geo.cfg.zone_size;
        if !resets.is_empty() {
            p.phases.push(Phase::Reset(resets.iter().map(|&(m, z)| DevOp { member: m, offset: z * zs, len: 0, role: Role::ZoneReset, col: 0 }).collect()));
        }
        Ok(p)
    }

    /// Copies of a cached chunk's bytes into its home: `n` bytes at
    /// `src`, the whole chunk, or else the blocks `bm` marks packed in
    /// block order (see [`Lower::job`]), each run of marked blocks one
    /// copy.
    fn cached_blocks(&self, home: Ref, src: Ref, n: usize, bm: &crate::cache::Bitmap) -> Result<Vec<Combine>, DvsError> {
        let (blk, blocks) = (self.geo.block as usize, self.geo.chunk_blocks());
        if n == blocks * blk {
            return Ok(vec![Combine::copy(home, src, n)]);
        }
        let (mut out, mut k, mut i) = (Vec::new(), 0, 0);
        while i < blocks {
            if !bm.get(i) {
                i += 1;
                continue;
            }
            let j = (i..blocks).find(|&j| !bm.get(j)).unwrap_or(blocks);
            out.push(Combine::copy(home.at(i * blk), src.at(k * blk), (j - i) * blk));
            k += j - i;
            i = j;
        }
        if k * blk != n {
            return Err(DvsError::Other(format!("a cached chunk came with {n} bytes for {k} blocks")));
        }
        Ok(out)
    }

    /// Copies of a cached chunk's marked blocks into its home, each from
    /// its own buffer `v` (in block order; see [`Payload::Blocks`]).
    fn held_blocks(&self, p: &mut Program, home: Ref, v: Vec<Arc<[u8]>>, bm: &crate::cache::Bitmap) -> Result<Vec<Combine>, DvsError> {
        let blk = self.geo.block as usize;
        let marked: Vec<usize> = (0..self.geo.chunk_blocks()).filter(|&i| bm.get(i)).collect();
        if marked.len() != v.len() || v.iter().any(|b| b.len() != blk) {
            return Err(DvsError::Other(format!("a cached chunk came with {} blocks for {} marked", v.len(), marked.len())));
        }
        Ok(marked.into_iter().zip(v).map(|(i, b)| Combine::copy(home.at(i * blk), Ref::new(p.buf(Buf::Bytes(b)), 0), blk)).collect())
    }

    /// Copies of the old bytes of the blocks a cached chunk lacks (`bm`
    /// None: a chunk GC moves, all of them).
    fn old_blocks(&self, home: Ref, old: Ref, bm: Option<&crate::cache::Bitmap>) -> Vec<Combine> {
        let blk = self.geo.block as usize;
        let n = self.geo.chunk_blocks();
        let Some(bm) = bm else { return vec![Combine::copy(home, old, n * blk)] };
        let mut out = Vec::new();
        let mut i = 0;
        while i < n {
            if bm.get(i) {
                i += 1;
                continue;
            }
            let j = (i..n).find(|&j| bm.get(j)).unwrap_or(n);
            out.push(Combine::copy(home.at(i * blk), old.at(i * blk), (j - i) * blk));
            i = j;
        }
        out
    }

    /// The parity columns of stripe `s` that are written.
    fn parity(&self, st: &Stripe, out: &Appends, s: usize) -> Result<Vec<Combine>, DvsError> {
        let mut cs = Vec::new();
        for c in st.width()..st.members.len() {
            let Some(&dst) = out.col.get(&(s, c)) else { continue };
            let r = c - st.width();
            let mut terms = Vec::with_capacity(st.width());
            for (j, lcn) in st.lcns.iter().enumerate() {
                let at = *out.home.get(lcn).ok_or_else(|| DvsError::Other(format!("no bytes for chunk {lcn}")))?;
                let coef = self.code.coefficient(r, j);
                if coef != 0 {
                    terms.push((coef, at));
                }
            }
            cs.push(Combine { dst, len: self.geo.chunk as usize, acc: false, terms });
        }
        Ok(cs)
    }
}

impl Lower<'_> {
    /// Rebuild slots `first..first + cols.len()` of segment `phys` onto
    /// member `m`: each slot reconstructs column `col` of its stripe (None:
    /// a slot in no stripe, written as zeros), then one write.
    pub fn rebuild(&self, lsn: u32, phys: u32, m: usize, first: u32, cols: &[Option<(&Stripe, usize)>]) -> Result<Program, DvsError> {
        let c = self.geo.chunk;
        let reads: Vec<ChunkRead> = cols
            .iter()
            .flatten()
            .map(|&(st, col)| ChunkRead { key: (lsn, st.lcns.get(col).copied().unwrap_or(0)), a: 0, b: c, src: Src::Recon { phys, stripe: st.clone(), col } })
            .collect();
        let mut p = Program::default();
        let at = self.reads(&mut p, &reads.iter().collect::<Vec<_>>())?;
        let out = p.buf(Buf::Scratch(cols.len() * c as usize));
        let dst = cols.iter().enumerate().filter(|(_, x)| x.is_some()).map(|(i, _)| Ref::new(out, i * c as usize));
        p.phases.push(Phase::Compute(dst.zip(at).map(|(d, s)| Combine::copy(d, s, c as usize)).collect()));
        let op = DevOp { member: m, offset: self.geo.slot_offset(phys, first), len: cols.len() as u64 * c, role: Role::Data, col: 0 };
        p.phases.push(Phase::write(vec![Io::new(op, Ref::new(out, 0))]));
        p.methods.push(Method::Rebuild);
        Ok(p)
    }
}

/// Reads of `(member, offset, len)`, each into a buffer of its own, all
/// kept (in this order).
pub fn reads(ops: &[(usize, u64, u64)]) -> Program {
    let mut p = Program::default();
    let mut ios = Vec::with_capacity(ops.len());
    for (i, &(member, offset, len)) in ops.iter().enumerate() {
        p.buf(Buf::Scratch(len as usize));
        ios.push(Io::new(DevOp { member, offset, len, role: Role::Meta, col: 0 }, Ref::new(i, 0)));
        p.keep.push(i as u32);
    }
    p.phases.push(Phase::Read(ios));
    p
}

/// Every column of stripe `st` of segment `phys` (scrub), kept in column
/// order.
pub fn stripe_columns(geo: &Geo, phys: u32, st: &Stripe) -> Program {
    let mut p = reads(&st.members.iter().zip(&st.idx).map(|(&m, &idx)| (m as usize, geo.slot_offset(phys, idx), geo.chunk)).collect::<Vec<_>>());
    if let Some(Phase::Read(ios)) = p.phases.first_mut() {
        for (c, io) in ios.iter_mut().enumerate() {
            io.op.role = if c < st.width() { Role::Data } else { Role::Code };
            io.op.col = c;
        }
    }
    p.methods.push(Method::Scrub);
    p
}

/// Largest zeroing write [`format`] issues.
const ZEROS: u64 = 16 << 20;

/// Put members into a known state: reset the zones `resets` (member,
/// zone's first byte), zero `clear` on each of `members`, write `first`,
/// then `last` (superblocks, so a member half prepared is not taken for
/// one), and flush them.
pub fn format(resets: &[(usize, u64)], members: &[usize], clear: (u64, u64), first: Vec<(usize, u64, Vec<u8>)>, last: Vec<(usize, u64, Vec<u8>)>) -> Program {
    let mut p = Program::default();
    if !resets.is_empty() {
        p.phases.push(Phase::Reset(resets.iter().map(|&(member, offset)| DevOp { member, offset, len: 0, role: Role::ZoneReset, col: 0 }).collect()));
    }
    let (lo, hi) = clear;
    let mut ios = Vec::new();
    let zero = if hi > lo { p.buf(Buf::Scratch((hi - lo).min(ZEROS) as usize)) } else { 0 };
    for &member in members.iter().filter(|_| hi > lo) {
        let mut pos = lo;
        while pos < hi {
            let len = (hi - pos).min(ZEROS);
            ios.push(Io::new(DevOp { member, offset: pos, len, role: Role::Meta, col: 0 }, Ref::new(zero, 0)));
            pos += len;
        }
    }
    for writes in [first, last] {
        for (member, offset, bytes) in writes {
            let len = bytes.len() as u64;
            let b = p.buf(Buf::Bytes(bytes.into()));
            ios.push(Io::new(DevOp { member, offset, len, role: Role::Meta, col: 0 }, Ref::new(b, 0)));
        }
        if !ios.is_empty() {
            p.phases.push(Phase::write(std::mem::take(&mut ios)));
        }
    }
    if !members.is_empty() {
        p.phases.push(Phase::Flush(members.to_vec()));
    }
    p
}

/// Where a job's appends go: the merged writes over one scratch buffer,
/// the position of each written column `(stripe, col)` in it, and the home
/// of each chunk's bytes (its column's position, or a slot of its own
/// when the column is not written).
struct Appends {
    writes: Vec<Io>,
    col: KeyMap<(usize, usize), Ref>,
    home: KeyMap<u32, Ref>,
    size: usize,
}

impl Appends {
    fn lay_out(geo: &Geo, job: &Job, writes_to: &[bool], buf: usize) -> Appends {
        let mut ops: Vec<(DevOp, usize, usize)> = Vec::new();
        for (s, st) in job.stripes.iter().enumerate() {
            for (c, (&m, &idx)) in st.members.iter().zip(&st.idx).enumerate() {
                if writes_to.get(m as usize).copied().unwrap_or(false) {
                    let role = if c < st.width() { Role::Data } else { Role::Code };
                    ops.push((DevOp { member: m as usize, offset: geo.slot_offset(job.phys, idx), len: geo.chunk, role, col: c }, s, c));
                }
            }
        }
        ops.sort_by_key(|o| (o.0.member, o.0.offset));
        let mut area = Area::default();
        let mut a = Appends { writes: Vec::new(), col: KeyMap::default(), home: KeyMap::default(), size: 0 };
        for (op, s, c) in ops {
            let at = Ref::new(buf, area.take(op.len as usize));
            match a.writes.last_mut() {
                Some(l) if l.op.member == op.member && l.op.offset + l.op.len == op.offset => l.op.len += op.len,
                _ => a.writes.push(Io::new(op, at)),
            }
            a.col.insert((s, c), at);
        }
        for (s, st) in job.stripes.iter().enumerate() {
            for (c, lcn) in st.lcns.iter().enumerate() {
                let at = a.col.get(&(s, c)).copied().unwrap_or_else(|| Ref::new(buf, area.take(geo.chunk as usize)));
                a.home.insert(*lcn, at);
            }
        }
        a.size = area.0;
        a
    }
}

/// Add a metadata write and its flush to `p`.
pub fn push_meta(p: &mut Program, m: Meta) {
    if m.members.is_empty() {
        return;
    }
    let len = m.payload.len() as u64;
    let b = p.buf(m.payload.buf());
    let ops = m.members.iter().map(|&member| Io::new(DevOp { member, offset: m.offset, len, role: Role::Meta, col: 0 }, Ref::new(b, 0))).collect();
    p.phases.push(Phase::write(ops));
    p.phases.push(Phase::Flush(m.members));
}

/// A metadata write as a program of its own.  It takes no executor lock:
/// the metadata area is no SSG's, and its byte offset would share a lock
/// stripe with an SSG's destage (the executor's locks are keyed by SSG),
/// making a journal write wait for an unrelated destage.  Its writes are
/// ordered by the array instead (the writer issues journal records; log
/// records follow the destager's queue).
pub fn meta(m: Meta) -> Program {
    let mut p = Program { methods: vec![Method::Direct], ..Program::default() };
    push_meta(&mut p, m);
    p
}

/// One device read serving direct chunk reads: `parts` are (index into
/// the chunk reads, byte offset of its bytes in the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRun {
    pub member: usize,
    pub offset: u64,
    pub len: u64,
    pub parts: Vec<(usize, u64)>,
}

/// The direct reads among `reads` merged into device reads: sorted by
/// (member, offset), contiguous reads of one member within one zone
/// become one run.
pub fn read_runs(geo: &Geo, reads: &[&ChunkRead]) -> Vec<ReadRun> {
    let mut d: Vec<(usize, u64, u64, usize)> = reads
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r.src {
            Src::Direct { member, offset } => Some((member, offset, r.b - r.a, i)),
            Src::Recon { .. } => None,
        })
        .collect();
    d.sort_by_key(|x| (x.0, x.1));
    let mut out: Vec<ReadRun> = Vec::new();
    for (member, offset, len, i) in d {
        if let Some(l) = out.last_mut() {
            if l.member == member && l.offset + l.len == offset && offset % geo.cfg.zone_size != 0 {
                l.parts.push((i, l.len));
                l.len += len;
                continue;
            }
        }
        out.push(ReadRun { member, offset, len, parts: vec![(i, 0)] });
    }
    out
}

/// Where run `run` may be read in place: the home of its first part,
/// when every part has a home (`homes`, indexed as the chunk reads) at
/// the same distance from it as in the run.
fn in_place(run: &ReadRun, homes: &[Option<Ref>]) -> Option<Ref> {
    let &(i0, o0) = run.parts.first()?;
    let first = (*homes.get(i0)?)?;
    let fits = run.parts.iter().all(|&(i, o)| homes.get(i).copied().flatten() == Some(first.at((o - o0) as usize)));
    fits.then_some(first)
}

#[cfg(test)]
mod tests;
