//! The compute phase between a plan's reads and writes.
//!
//! Pure functions over byte buffers: given a [`StripePlan`], the request's
//! bytes and the bytes its reads returned (in `reads` order), produce the
//! bytes of every write, assemble a read's output, reconstruct rebuilt
//! columns, or verify a stripe.  No I/O happens here.

use mosaic_ec::Code;

use crate::geometry::Geometry;
use crate::plan::{DevOp, Method, Role, StripePlan};
use crate::PlanError;

/// The stripe math for one geometry: the erasure code, if any.
#[derive(Debug)]
pub struct StripeMath {
    pub geo: Geometry,
    code: Option<Code>,
}

/// Bytes for one write op: either a slice of the request or computed bytes.
pub enum WriteBuf<'a> {
    Input(&'a [u8]),
    Owned(Vec<u8>),
}

impl WriteBuf<'_> {
    pub fn bytes(&self) -> &[u8] {
        match self {
            WriteBuf::Input(s) => s,
            WriteBuf::Owned(v) => v,
        }
    }
}

/// Result of verifying one stripe range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrubOutcome {
    /// False when too many columns are missing to verify anything.
    pub verified: bool,
    /// Columns to rewrite: the one wrong column when `located`, otherwise
    /// the code columns (or mirror copies) that disagree with the data.
    pub bad_cols: Vec<usize>,
    /// Correct bytes for each bad column, in `bad_cols` order.
    pub repairs: Vec<Vec<u8>>,
    /// The stripe mismatched and exactly one column (data or code) was
    /// found wrong: rebuilt from the others, it makes the stripe
    /// consistent.  Needs two redundant columns available (m >= 2, not
    /// degraded); with one, a mismatch cannot tell which column is wrong
    /// and repair trusts the data, as md's does.
    pub located: bool,
}

fn op_range(geo: &Geometry, stripe: u64, op: &DevOp) -> (u64, u64) {
    let s = op.offset - geo.offset_of(stripe, op.col);
    (s, s + op.len)
}

impl StripeMath {
    pub fn new(geo: Geometry) -> Result<StripeMath, PlanError> {
        let code = if geo.m > 0 && !geo.is_mirror() {
            Some(Code::new(geo.k, geo.m).map_err(|e| PlanError::Geometry(e.to_string()))?)
        } else {
            None
        };
        Ok(StripeMath { geo, code })
    }

    pub(crate) fn code(&self) -> Result<&Code, PlanError> {
        self.code.as_ref().ok_or_else(|| PlanError::Invalid("geometry has no erasure code".into()))
    }

    /// Bytes of column `col` over `[a, b)` from one read op covering it.
    fn read_slice<'r>(&self, sp: &StripePlan, reads: &'r [Vec<u8>], col: usize, a: u64, b: u64) -> Option<&'r [u8]> {
        sp.reads.iter().zip(reads).find_map(|(op, buf)| {
            let (s, e) = op_range(&self.geo, sp.stripe, op);
            (op.col == col && s <= a && b <= e).then(|| &buf[(a - s) as usize..(b - s) as usize])
        })
    }

    /// New bytes of column `col` over `[a, b)` from the request.
    fn new_slice<'i>(&self, sp: &StripePlan, input: &'i [u8], col: usize, a: u64, b: u64) -> Option<&'i [u8]> {
        sp.touched.iter().find_map(|c| {
            (c.col == col && c.start <= a && b <= c.end).then(|| {
                let o = (c.buf_off + a - c.start) as usize;
                &input[o..o + (b - a) as usize]
            })
        })
    }

    /// Column image over `[a, b)`: old bytes from reads, then (if `input` is
    /// given) new bytes from the request on top.
    fn image(&self, sp: &StripePlan, reads: &[Vec<u8>], input: Option<&[u8]>, col: usize, a: u64, b: u64) -> Vec<u8> {
        let mut img = vec![0u8; (b - a) as usize];
        for (op, buf) in sp.reads.iter().zip(reads) {
            if op.col != col {
                continue;
            }
            let (s, e) = op_range(&self.geo, sp.stripe, op);
            let (x, y) = (s.max(a), e.min(b));
            if x < y {
                img[(x - a) as usize..(y - a) as usize].copy_from_slice(&buf[(x - s) as usize..(y - s) as usize]);
            }
        }
        if let Some(input) = input {
            for c in sp.touched.iter().filter(|c| c.col == col) {
                let (x, y) = (c.start.max(a), c.end.min(b));
                if x < y {
                    let o = (c.buf_off + x - c.start) as usize;
                    img[(x - a) as usize..(y - a) as usize].copy_from_slice(&input[o..o + (y - x) as usize]);
                }
            }
        }
        img
    }

    /// Decode `want` columns over `[a, b)` from the read ops that cover that
    /// range exactly.
    fn decode_span(&self, sp: &StripePlan, reads: &[Vec<u8>], want: &[usize], a: u64, b: u64) -> Result<Vec<Vec<u8>>, PlanError> {
        let code = self.code()?;
        let mut present: Vec<(usize, &[u8])> = Vec::new();
        for (op, buf) in sp.reads.iter().zip(reads) {
            let (s, e) = op_range(&self.geo, sp.stripe, op);
            if s <= a && b <= e && !present.iter().any(|p| p.0 == op.col) {
                present.push((op.col, &buf[(a - s) as usize..(b - s) as usize]));
            }
        }
        let mut out: Vec<Vec<u8>> = want.iter().map(|_| vec![0u8; (b - a) as usize]).collect();
        {
            let mut missing: Vec<(usize, &mut [u8])> = want.iter().copied().zip(out.iter_mut().map(|v| v.as_mut_slice())).collect();
            code.decode(&present, &mut missing).map_err(|e| PlanError::Invalid(format!("decode failed: {e}")))?;
        }
        Ok(out)
    }

    /// Bytes of every write of `sp`, in `sp.writes` order.
    pub fn compute_writes<'i>(&self, sp: &StripePlan, input: &'i [u8], reads: &[Vec<u8>]) -> Result<Vec<WriteBuf<'i>>, PlanError> {
        let g = &self.geo;
        let mut out = Vec::with_capacity(sp.writes.len());
        // Degraded writes and RCW/FSW need full data images; compute the
        // code columns over the span once.
        let mut code_img: Option<(u64, Vec<Vec<u8>>)> = None;
        if sp.method == Method::DegradedWrite {
            let (a, b) = sp.span;
            let mut data: Vec<Vec<u8>> = Vec::with_capacity(g.k);
            let decoded = if sp.missing.is_empty() { vec![] } else { self.decode_span(sp, reads, &sp.missing, a, b)? };
            for j in 0..g.k {
                let mut img = match sp.missing.iter().position(|&c| c == j) {
                    Some(i) => decoded[i].clone(),
                    None => self.image(sp, reads, None, j, a, b),
                };
                for c in sp.touched.iter().filter(|c| c.col == j) {
                    let (x, y) = (c.start.max(a), c.end.min(b));
                    let o = (c.buf_off + x - c.start) as usize;
                    img[(x - a) as usize..(y - a) as usize].copy_from_slice(&input[o..o + (y - x) as usize]);
                }
                data.push(img);
            }
            code_img = Some((a, self.encode_images(&data)?));
        }
        let mut range_cache: Vec<((u64, u64), Vec<Vec<u8>>)> = Vec::new();
        for op in &sp.writes {
            let (a, b) = op_range(g, sp.stripe, op);
            if op.role == Role::Data || sp.method == Method::Mirror {
                let col = if g.is_mirror() { 0 } else { op.col };
                let s = self
                    .new_slice(sp, input, col, a, b)
                    .ok_or_else(|| PlanError::Invalid(format!("no request bytes for column {col} [{a},{b})")))?;
                out.push(WriteBuf::Input(s));
                continue;
            }
            let row = op.col - g.k;
            let buf = match sp.method {
                Method::DegradedWrite => {
                    let (base, imgs) = code_img.as_ref().unwrap();
                    imgs[row][(a - base) as usize..(b - base) as usize].to_vec()
                }
                Method::Fsw | Method::Rcw => {
                    // Every code column is written over the same ranges:
                    // encode each range once.
                    let i = match range_cache.iter().position(|r| r.0 == (a, b)) {
                        Some(i) => i,
                        None => {
                            // Each column straight from the request or a read
                            // when one covers the range; assembled otherwise.
                            let data: Vec<std::borrow::Cow<[u8]>> = (0..g.k)
                                .map(|j| match self.new_slice(sp, input, j, a, b).or_else(|| self.read_slice(sp, reads, j, a, b)) {
                                    Some(s) => std::borrow::Cow::Borrowed(s),
                                    None => std::borrow::Cow::Owned(self.image(sp, reads, Some(input), j, a, b)),
                                })
                                .collect();
                            range_cache.push(((a, b), self.encode_slices(&data)?));
                            range_cache.len() - 1
                        }
                    };
                    std::mem::take(&mut range_cache[i].1[row])
                }
                Method::Rmw => {
                    let mut p = self
                        .read_slice(sp, reads, op.col, a, b)
                        .ok_or_else(|| PlanError::Invalid("rmw without old code".into()))?
                        .to_vec();
                    for t in &sp.touched {
                        let (x, y) = (t.start.max(a), t.end.min(b));
                        if x >= y {
                            continue;
                        }
                        let old = self.read_slice(sp, reads, t.col, x, y).ok_or_else(|| PlanError::Invalid("rmw without old data".into()))?;
                        let new = self.new_slice(sp, input, t.col, x, y).unwrap();
                        let mut delta = old.to_vec();
                        mosaic_ec::xor_into(&mut delta, new);
                        self.code()?
                            .apply_delta_row(row, t.col, &delta, &mut p[(x - a) as usize..(y - a) as usize])
                            .map_err(|e| PlanError::Invalid(e.to_string()))?;
                    }
                    p
                }
                m => return Err(PlanError::Invalid(format!("method {} writes no code", m.name()))),
            };
            out.push(WriteBuf::Owned(buf));
        }
        Ok(out)
    }

    fn encode_images(&self, data: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, PlanError> {
        self.encode_slices(data)
    }

    fn encode_slices<D: AsRef<[u8]>>(&self, data: &[D]) -> Result<Vec<Vec<u8>>, PlanError> {
        let len = data.first().map_or(0, |d| d.as_ref().len());
        let mut code: Vec<Vec<u8>> = (0..self.geo.m).map(|_| vec![0u8; len]).collect();
        let refs: Vec<&[u8]> = data.iter().map(|v| v.as_ref()).collect();
        let mut outs: Vec<&mut [u8]> = code.iter_mut().map(|v| v.as_mut_slice()).collect();
        self.code()?.encode(&refs, &mut outs).map_err(|e| PlanError::Invalid(e.to_string()))?;
        Ok(code)
    }

    /// Fill `out` (the request buffer) from a read plan's results.
    pub fn assemble_read(&self, sp: &StripePlan, reads: &[Vec<u8>], out: &mut [u8]) -> Result<(), PlanError> {
        let g = &self.geo;
        if g.is_mirror() {
            for (c, buf) in sp.touched.iter().zip(reads) {
                out[c.buf_off as usize..(c.buf_off + c.len()) as usize].copy_from_slice(buf);
            }
            return Ok(());
        }
        let decoded = if sp.missing.is_empty() {
            vec![]
        } else {
            self.decode_span(sp, reads, &sp.missing, sp.span.0, sp.span.1)?
        };
        for c in &sp.touched {
            let dst = &mut out[c.buf_off as usize..(c.buf_off + c.len()) as usize];
            if let Some(i) = sp.missing.iter().position(|&m| m == c.col) {
                let o = (c.start - sp.span.0) as usize;
                dst.copy_from_slice(&decoded[i][o..o + c.len() as usize]);
            } else {
                let s = self
                    .read_slice(sp, reads, c.col, c.start, c.end)
                    .ok_or_else(|| PlanError::Invalid(format!("no read for column {}", c.col)))?;
                dst.copy_from_slice(s);
            }
        }
        Ok(())
    }

    /// Bytes for a rebuild plan's writes.
    pub fn compute_rebuild(&self, sp: &StripePlan, reads: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, PlanError> {
        if self.geo.is_mirror() {
            let src = reads.first().ok_or_else(|| PlanError::Invalid("no surviving copy".into()))?;
            return Ok(sp.writes.iter().map(|_| src.clone()).collect());
        }
        let want: Vec<usize> = sp.writes.iter().map(|o| o.col).collect();
        self.decode_span(sp, reads, &want, sp.span.0, sp.span.1)
    }

    /// Verify a scrub plan's reads: recompute code (or compare copies).
    pub fn scrub_check(&self, sp: &StripePlan, reads: &[Vec<u8>]) -> Result<ScrubOutcome, PlanError> {
        let g = &self.geo;
        let (a, b) = sp.span;
        let avail: Vec<usize> = sp.reads.iter().map(|o| o.col).collect();
        let mut bad = Vec::new();
        let mut repairs = Vec::new();
        if g.m == 0 {
            return Ok(ScrubOutcome { verified: false, bad_cols: bad, repairs, located: false });
        }
        if g.is_mirror() {
            // The first available copy is the reference.
            let Some(first) = reads.first() else {
                return Ok(ScrubOutcome { verified: false, bad_cols: bad, repairs, located: false });
            };
            for (op, buf) in sp.reads.iter().zip(reads).skip(1) {
                if buf != first {
                    bad.push(op.col);
                    repairs.push(first.clone());
                }
            }
            return Ok(ScrubOutcome { verified: sp.reads.len() > 1, bad_cols: bad, repairs, located: false });
        }
        // Need every data column (decoded if missing) and at least one code
        // column to compare against.
        let code_avail: Vec<usize> = avail.iter().copied().filter(|&c| c >= g.k).collect();
        if code_avail.is_empty() || avail.len() <= g.k {
            return Ok(ScrubOutcome { verified: false, bad_cols: bad, repairs, located: false });
        }
        let missing_data: Vec<usize> = (0..g.k).filter(|c| !avail.contains(c)).collect();
        let decoded = if missing_data.is_empty() { vec![] } else { self.decode_span(sp, reads, &missing_data, a, b)? };
        let data: Vec<Vec<u8>> = (0..g.k)
            .map(|j| match missing_data.iter().position(|&c| c == j) {
                Some(i) => decoded[i].clone(),
                None => self.image(sp, reads, None, j, a, b),
            })
            .collect();
        let code = self.encode_images(&data)?;
        for &c in &code_avail {
            let have = self.read_slice(sp, reads, c, a, b).unwrap();
            if have != code[c - g.k].as_slice() {
                bad.push(c);
                repairs.push(code[c - g.k].clone());
            }
        }
        if !bad.is_empty() && avail.len() >= g.k + 2 {
            let cols: Vec<(usize, Vec<u8>)> = avail.iter().map(|&c| (c, self.image(sp, reads, None, c, a, b))).collect();
            if let Some((c, fix)) = self.locate(&cols)? {
                return Ok(ScrubOutcome { verified: true, bad_cols: vec![c], repairs: vec![fix], located: true });
            }
        }
        Ok(ScrubOutcome { verified: true, bad_cols: bad, repairs, located: false })
    }

    /// The one column of `cols` (column, bytes; at least k + 2 of them)
    /// whose bytes, rebuilt from the others, make every other column
    /// consistent, with those bytes; None when no single column, or more
    /// than one, explains the mismatch.
    fn locate(&self, cols: &[(usize, Vec<u8>)]) -> Result<Option<(usize, Vec<u8>)>, PlanError> {
        let mut found = None;
        for (c, _) in cols {
            let others: Vec<&(usize, Vec<u8>)> = cols.iter().filter(|x| x.0 != *c).collect();
            let Some(fix) = self.consistent_without(*c, &others)? else { continue };
            if found.replace((*c, fix)).is_some() {
                return Ok(None);
            }
        }
        Ok(found)
    }

    /// Decode the data from `others` (which leave out column `c`); if every
    /// column of `others` agrees with it, the bytes column `c` should hold.
    fn consistent_without(&self, c: usize, others: &[&(usize, Vec<u8>)]) -> Result<Option<Vec<u8>>, PlanError> {
        let k = self.geo.k;
        let len = others.first().map_or(0, |x| x.1.len());
        let present: Vec<(usize, &[u8])> = others.iter().map(|x| (x.0, x.1.as_slice())).collect();
        let missing_cols: Vec<usize> = (0..k).filter(|j| !others.iter().any(|x| x.0 == *j)).collect();
        let mut decoded: Vec<Vec<u8>> = missing_cols.iter().map(|_| vec![0u8; len]).collect();
        if !missing_cols.is_empty() {
            let mut missing: Vec<(usize, &mut [u8])> = missing_cols.iter().copied().zip(decoded.iter_mut().map(|v| v.as_mut_slice())).collect();
            self.code()?.decode(&present, &mut missing).map_err(|e| PlanError::Invalid(format!("decode failed: {e}")))?;
        }
        let data: Vec<&[u8]> = (0..k)
            .map(|j| match missing_cols.iter().position(|&x| x == j) {
                Some(i) => decoded[i].as_slice(),
                None => present.iter().find(|p| p.0 == j).map(|p| p.1).unwrap_or(&[]),
            })
            .collect();
        let code = self.encode_slices(&data)?;
        let agrees = others.iter().all(|(col, bytes)| if *col < k { data[*col] == bytes.as_slice() } else { code[*col - k] == *bytes });
        if !agrees {
            return Ok(None);
        }
        Ok(Some(if c < k { data[c].to_vec() } else { code[c - k].clone() }))
    }
}
