//! The stripe math: the erasure code of a geometry, whose coefficients
//! the lowering ([`crate::lower`]) spells out in programs, and scrub's
//! verdict on the bytes a scrub program read: recompute the code, compare,
//! and locate a single wrong column.  No I/O happens here.

use mosaic_ec::Code;

use crate::geometry::Geometry;
use crate::plan::{DevOp, StripePlan};
use crate::PlanError;

/// The stripe math for one geometry: the erasure code, if any.
#[derive(Debug)]
pub struct StripeMath {
    pub geo: Geometry,
    code: Option<Code>,
}

/// Result of verifying one stripe range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrubOutcome {
    /// False when too many columns are missing to verify anything.
    pub verified: bool,
    /// Columns to rewrite: the one wrong column when `located`, otherwise
    /// the code columns (or mirror copies) that disagree with the data.
    pub bad_cols: Vec<usize>,
    /// Correct bytes for each bad column, in `bad_cols` order; empty when
    /// no repair is safe: a mismatch not located in a stripe missing a
    /// data column, whose decoded bytes came from a code column that may
    /// be the wrong one (rewriting the others from them would make wrong
    /// bytes look right, and destroy what a scrub of the whole stripe,
    /// after the rebuild, could locate).
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

    /// Column `col` over `[a, b)` from the reads that cover it.
    fn image(&self, sp: &StripePlan, reads: &[Vec<u8>], col: usize, a: u64, b: u64) -> Vec<u8> {
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

    fn encode_slices<D: AsRef<[u8]>>(&self, data: &[D]) -> Result<Vec<Vec<u8>>, PlanError> {
        let len = data.first().map_or(0, |d| d.as_ref().len());
        let mut code: Vec<Vec<u8>> = (0..self.geo.m).map(|_| vec![0u8; len]).collect();
        let refs: Vec<&[u8]> = data.iter().map(|v| v.as_ref()).collect();
        let mut outs: Vec<&mut [u8]> = code.iter_mut().map(|v| v.as_mut_slice()).collect();
        self.code()?.encode(&refs, &mut outs).map_err(|e| PlanError::Invalid(e.to_string()))?;
        Ok(code)
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
            // The copy a strict majority holds is right (three copies or
            // more locate the wrong ones); without one, the first available
            // copy is the reference, as md's repair takes it.
            let Some(first) = reads.first() else {
                return Ok(ScrubOutcome { verified: false, bad_cols: bad, repairs, located: false });
            };
            let majority = reads.iter().find(|r| 2 * reads.iter().filter(|o| o == r).count() > reads.len());
            let reference = majority.unwrap_or(first);
            for (op, buf) in sp.reads.iter().zip(reads) {
                if buf != reference {
                    bad.push(op.col);
                    repairs.push(reference.clone());
                }
            }
            let located = majority.is_some() && !bad.is_empty() && reads.len() > 2;
            return Ok(ScrubOutcome { verified: sp.reads.len() > 1, bad_cols: bad, repairs, located });
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
                None => self.image(sp, reads, j, a, b),
            })
            .collect();
        let code = self.encode_slices(&data)?;
        for &c in &code_avail {
            let have = self.read_slice(sp, reads, c, a, b).unwrap();
            if have != code[c - g.k].as_slice() {
                bad.push(c);
                repairs.push(code[c - g.k].clone());
            }
        }
        if !bad.is_empty() && avail.len() >= g.k + 2 {
            let cols: Vec<(usize, Vec<u8>)> = avail.iter().map(|&c| (c, self.image(sp, reads, c, a, b))).collect();
            if let Some((c, fix)) = self.locate(&cols)? {
                return Ok(ScrubOutcome { verified: true, bad_cols: vec![c], repairs: vec![fix], located: true });
            }
        }
        if !missing_data.is_empty() {
            repairs.clear();
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
