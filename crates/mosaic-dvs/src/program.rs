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
//!                  in one zone), each run into a buffer of its own; then each
//!                  reconstruction's other columns
//!         Compute  reconstructions (decode coefficients); parity = Σ A[r][j]·data_j
//!                  (absent columns of a narrow stripe are zeros and drop out), piece
//!                  by piece of the data chunks
//!         Write    appends sorted by (member, offset), contiguous slots merged into one
//!                  write (data and parity alike; the op keeps the first one's role),
//!                  gathered from where the bytes are
//!         Flush    every member written
//!         Write    the job's log record (or a checkpoint) on every metadata member
//!         Flush    those members
//!         Reset    the zones of a GC's old segment
//! ```
//!
//! Every transfer is on lane 0: the phases run strictly in order, in the
//! simulator as on the real array.  A chunk's bytes are never put
//! together: the chunk is a list of pieces, each block from the cache
//! when it holds it, else from the chunk's old bytes as the fill read
//! them, else zeros; parity and the appends read the pieces where they
//! lie.  A run's buffer is filled by nothing but its read and only read
//! after, so a mapped member lends its bytes instead of copying them
//! (`mosaic_exec::lendable`): the old chunks go from their zone to the
//! new one in one streamed copy, parity reading them in place.
//!
//! ```text
//!   chunk 7, blocks 1 and 5 cached:   [old 0][blk 1][old 2-4][blk 5][old 6-15]
//!   stripe (chunks 7, 9), parity:     cut where any chunk's pieces change,
//!                                     P[x..y] = Σ A[r][j]·piece_j[x..y]
//!   append on member 2:               Gather[ pieces of 7 | pieces of 9 | ... ]
//! ```

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
        self.reads_into(p, reads, false)
    }

    /// [`Lower::reads`], except that with `own` each device read (of a
    /// direct run, or of a column a reconstruction reads) lands in a
    /// buffer of its own, which nothing else writes: a destage's fills
    /// and a rebuild's columns, which a mapped member lends.  The device
    /// reads are the same either way.
    fn reads_into(&self, p: &mut Program, reads: &[&ChunkRead], own: bool) -> Result<Vec<Ref>, DvsError> {
        if reads.is_empty() {
            return Ok(vec![]);
        }
        // The scratch area (sized at the end): runs when not `own`,
        // reconstructions always.
        let buf = p.buf(Buf::Scratch(0));
        let mut area = Area::default();
        let mut out = vec![Ref::new(buf, 0); reads.len()];
        let mut ios = Vec::new();
        for run in read_runs(self.geo, reads) {
            let dst = if own { Ref::new(p.buf(Buf::Scratch(run.len as usize)), 0) } else { Ref::new(buf, area.take(run.len as usize)) };
            ios.push(Io::new(DevOp { member: run.member, offset: run.offset, len: run.len, role: Role::Data, col: 0 }, dst));
            for (i, o) in run.parts {
                out[i] = dst.at(o as usize);
            }
        }
        let mut decodes = Vec::new();
        for (i, r) in reads.iter().enumerate() {
            if let Src::Recon { phys, stripe, col } = &r.src {
                let (dst, c) = self.recon(buf, &mut area, &mut ios, own.then_some(&mut *p), (*phys, stripe, *col), r.a, r.b)?;
                out[i] = dst;
                decodes.extend(c);
            }
        }
        p.bufs[buf] = Buf::Scratch(area.0);
        p.phases.push(Phase::Read(ios));
        if !decodes.is_empty() {
            p.phases.push(Phase::Compute(decodes));
        }
        Ok(out)
    }

    /// The reads of column `col` of a stripe (in-chunk bytes `[a, b)`)
    /// from its other readable columns, and its decode into a new slot
    /// of `buf`; with `own`, each read into a buffer of its own added to
    /// it (a mapped member lends them), else into `buf` too.
    fn recon(&self, buf: usize, area: &mut Area, ios: &mut Vec<Io>, mut own: Option<&mut Program>, (phys, st, col): (u32, &Stripe, usize), a: u64, b: u64) -> Result<(Ref, Option<Combine>), DvsError> {
        let len = b - a;
        let mut have: KeyMap<usize, Ref> = KeyMap::default();
        for (c, &m) in st.members.iter().enumerate() {
            let m = m as usize;
            if c == col || !self.healthy.get(m).copied().unwrap_or(false) {
                continue;
            }
            let at = match own.as_deref_mut() {
                Some(p) => Ref::new(p.buf(Buf::Scratch(len as usize)), 0),
                None => Ref::new(buf, area.take(len as usize)),
            };
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
        let old: KeyMap<u32, Ref> = job.fills.iter().map(|f| f.key.1).zip(self.reads_into(&mut p, &fills, true)?).collect();
        if !fills.is_empty() {
            let degraded = fills.iter().any(|r| matches!(r.src, Src::Recon { .. }));
            p.methods.push(if degraded { Method::DegradedRead } else { Method::Read });
        }
        let marks: KeyMap<u32, &Option<crate::cache::Bitmap>> = job.chunks.iter().map(|(l, bm)| (*l, bm)).collect();
        let mut zeros = None;
        let mut chunks: KeyMap<u32, Pieces> = KeyMap::default();
        for lcn in job.stripes.iter().flat_map(|st| &st.lcns) {
            if chunks.contains_key(lcn) {
                continue;
            }
            let cache = match marks.get(lcn) {
                Some(Some(bm)) => Some((self.cached_at(&mut p, cached(*lcn, bm)?, bm)?, bm)),
                _ => None,
            };
            let pieces = self.chunk_pieces(&mut p, cache, old.get(lcn).copied(), &mut zeros);
            chunks.insert(*lcn, pieces);
        }
        if let Some(l) = job.chunks.iter().map(|c| c.0).find(|l| !chunks.contains_key(l)) {
            return Err(DvsError::Other(format!("chunk {l} of SSG {} is in none of the job's stripes", job.lsn)));
        }
        let mut cs = Vec::new();
        for (s, st) in job.stripes.iter().enumerate() {
            cs.extend(self.parity(st, &out, s, &chunks));
        }
        p.phases.push(Phase::Compute(cs));
        if !out.writes.is_empty() {
            let writes: Vec<Io> = out.writes.iter().map(|(op, cols)| Io::new(*op, gathered(&mut p, cols, &chunks, self.geo.chunk as usize))).collect();
            let mut ms: Vec<usize> = writes.iter().map(|io| io.op.member).collect();
            ms.dedup();
            p.phases.push(Phase::write(writes));
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

    /// Where a cached chunk's marked blocks are, in block order: `payload`
    /// is the whole chunk, the marked blocks packed, or one buffer a
    /// block ([`Payload::Blocks`]).
    fn cached_at(&self, p: &mut Program, payload: Payload, bm: &crate::cache::Bitmap) -> Result<Vec<Ref>, DvsError> {
        let (blk, blocks) = (self.geo.block as usize, self.geo.chunk_blocks());
        let marked: Vec<usize> = (0..blocks).filter(|&i| bm.get(i)).collect();
        if let Payload::Blocks(v) = payload {
            if marked.len() != v.len() || v.iter().any(|b| b.len() != blk) {
                return Err(DvsError::Other(format!("a cached chunk came with {} blocks for {} marked", v.len(), marked.len())));
            }
            return Ok(v.into_iter().map(|b| Ref::new(p.buf(Buf::Bytes(b)), 0)).collect());
        }
        let n = payload.len();
        let src = p.buf(payload.buf());
        if n == blocks * blk {
            return Ok(marked.iter().map(|&i| Ref::new(src, i * blk)).collect());
        }
        if marked.len() * blk != n {
            return Err(DvsError::Other(format!("a cached chunk came with {n} bytes for {} blocks", marked.len())));
        }
        Ok((0..marked.len()).map(|k| Ref::new(src, k * blk)).collect())
    }

    /// A chunk's pieces: each block from the cache (`cache`: where its
    /// marked blocks are, and which), else from its old bytes `old`, else
    /// zeros (a chunk of them made once, in `zeros`).
    fn chunk_pieces(&self, p: &mut Program, cache: Option<(Vec<Ref>, &crate::cache::Bitmap)>, old: Option<Ref>, zeros: &mut Option<usize>) -> Pieces {
        let (blk, blocks) = (self.geo.block as usize, self.geo.chunk_blocks());
        let mut cached = cache.iter().flat_map(|(at, _)| at.iter().copied());
        let mut pieces = Pieces::new();
        for i in 0..blocks {
            let src = match (&cache, old) {
                (Some((_, bm)), _) if bm.get(i) => cached.next().unwrap_or(Ref::new(0, 0)),
                (_, Some(o)) => o.at(i * blk),
                _ => Ref::new(zero_chunk(p, zeros, blocks * blk), i * blk),
            };
            add_piece(&mut pieces, src, blk);
        }
        pieces
    }

    /// The parity columns of stripe `s` that are written, each cut where
    /// any of the stripe's chunks goes from one piece to the next.
    fn parity(&self, st: &Stripe, out: &Appends, s: usize, chunks: &KeyMap<u32, Pieces>) -> Vec<Combine> {
        let len = self.geo.chunk as usize;
        let mut cs = Vec::new();
        for c in st.width()..st.members.len() {
            let Some(&dst) = out.parity.get(&(s, c)) else { continue };
            let r = c - st.width();
            let cols: Vec<(u8, &Pieces)> = st.lcns.iter().enumerate().filter_map(|(j, lcn)| Some((self.code.coefficient(r, j), chunks.get(lcn)?))).filter(|t| t.0 != 0).collect();
            let mut cuts: Vec<usize> = cols.iter().flat_map(|(_, ps)| ps.iter().scan(0, |at, piece| Some(std::mem::replace(at, *at + piece.1)))).collect();
            cuts.push(len);
            cuts.sort_unstable();
            cuts.dedup();
            let mut x = 0;
            for y in cuts.into_iter().filter(|&y| y > 0) {
                let terms = cols.iter().map(|(coef, ps)| (*coef, piece_at(ps, x))).collect();
                cs.push(Combine { dst: dst.at(x), len: y - x, acc: false, terms });
                x = y;
            }
        }
        cs
    }
}

/// Where a chunk's bytes are, in order: pieces `(at, len)` of a program's
/// buffers.
type Pieces = Vec<(Ref, usize)>;

/// Append `len` bytes at `at` to `pieces`, joined to the last piece when
/// they follow it in its buffer.
fn add_piece(pieces: &mut Pieces, at: Ref, len: usize) {
    match pieces.last_mut() {
        Some(l) if l.0.buf == at.buf && l.0.off as usize + l.1 == at.off as usize => l.1 += len,
        _ => pieces.push((at, len)),
    }
}

/// Where byte `x` of a chunk of `pieces` is.
fn piece_at(pieces: &Pieces, x: usize) -> Ref {
    let mut start = 0;
    for &(at, len) in pieces {
        if x < start + len {
            return at.at(x - start);
        }
        start += len;
    }
    Ref::new(0, 0)
}

/// The bytes of one merged append, columns `cols` one after another
/// ([`written_from`] their pieces).
fn gathered(p: &mut Program, cols: &[Col], chunks: &KeyMap<u32, Pieces>, chunk: usize) -> Ref {
    let mut pieces = Pieces::new();
    for col in cols {
        match *col {
            Col::Data(lcn) => chunks.get(&lcn).into_iter().flatten().for_each(|&(at, len)| add_piece(&mut pieces, at, len)),
            Col::Code(at) => add_piece(&mut pieces, at, chunk),
        }
    }
    written_from(p, pieces)
}

/// The source of one device write of `pieces`: a reference to them when
/// they lie in one piece, else a gather of them.
fn written_from(p: &mut Program, pieces: Pieces) -> Ref {
    match pieces.as_slice() {
        [(at, _)] => *at,
        _ => Ref::new(p.buf(Buf::Gather(pieces)), 0),
    }
}

/// The scratch buffer of `len` zeros a program writes absent bytes from,
/// made at its first use (kept in `zeros`).
fn zero_chunk(p: &mut Program, zeros: &mut Option<usize>, len: usize) -> usize {
    *zeros.get_or_insert_with(|| p.buf(Buf::Scratch(len)))
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
        let mut at = self.reads_into(&mut p, &reads.iter().collect::<Vec<_>>(), true)?.into_iter();
        // The slots written from where each column was decoded (a slot in
        // no stripe from zeros): nothing put together first.
        let mut zeros = None;
        let mut pieces = Pieces::new();
        for col in cols {
            let decoded = if col.is_some() { at.next() } else { None };
            let src = decoded.unwrap_or_else(|| Ref::new(zero_chunk(&mut p, &mut zeros, c as usize), 0));
            add_piece(&mut pieces, src, c as usize);
        }
        let src = written_from(&mut p, pieces);
        let op = DevOp { member: m, offset: self.geo.slot_offset(phys, first), len: cols.len() as u64 * c, role: Role::Data, col: 0 };
        p.phases.push(Phase::write(vec![Io::new(op, src)]));
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

/// Every column of stripe `st` of segment `phys` but those in `skip`
/// (scrub), kept in column order.
pub fn stripe_columns(geo: &Geo, phys: u32, st: &Stripe, skip: &[usize]) -> Program {
    let cols: Vec<usize> = (0..st.members.len()).filter(|c| !skip.contains(c)).collect();
    let mut p = reads(&cols.iter().map(|&c| (st.members[c] as usize, geo.slot_offset(phys, st.idx[c]), geo.chunk)).collect::<Vec<_>>());
    if let Some(Phase::Read(ios)) = p.phases.first_mut() {
        for (&c, io) in cols.iter().zip(ios.iter_mut()) {
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

/// One column of a merged append: a data chunk, or a parity column's
/// bytes in the program's parity buffer.
#[derive(Debug, Clone, Copy)]
enum Col {
    Data(u32),
    Code(Ref),
}

/// A job's appends: each merged member write and its columns in order;
/// where each written parity column is computed (`(stripe, column)` to a
/// slot of buffer `buf`), and that buffer's size.
struct Appends {
    writes: Vec<(DevOp, Vec<Col>)>,
    parity: KeyMap<(usize, usize), Ref>,
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
        let mut a = Appends { writes: Vec::new(), parity: KeyMap::default(), size: 0 };
        for (op, s, c) in ops {
            let st = &job.stripes[s];
            let col = match st.lcns.get(c) {
                Some(&lcn) if c < st.width() => Col::Data(lcn),
                _ => {
                    let at = Ref::new(buf, area.take(op.len as usize));
                    a.parity.insert((s, c), at);
                    Col::Code(at)
                }
            };
            match a.writes.last_mut() {
                Some((l, cols)) if l.member == op.member && l.offset + l.len == op.offset => {
                    l.len += op.len;
                    cols.push(col);
                }
                _ => a.writes.push((op, vec![col])),
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

#[cfg(test)]
mod tests;
