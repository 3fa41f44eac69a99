//! mosaic-ec: the erasure code under every mosaic geometry.
//!
//! # The code
//!
//! A systematic Reed–Solomon code over GF(2^8) — polynomial
//! x^8 + x^4 + x^3 + x^2 + 1 (0x11d), the field of ISA-L and
//! reed-solomon-erasure — with `k` data shards and `m` code shards,
//! 1 <= k, 0 <= m, k + m <= 255.  Shards are byte strings of one length
//! (any length, 0 included); byte `b` of every shard forms one codeword,
//! so the code works column by column and never looks across bytes.
//!
//! The generator is the identity stacked over an m × k matrix A:
//!
//! ```text
//!            k data columns
//!          ┌ 1  0  0  0 ┐  D0      shard 0 ┐
//!          │ 0  1  0  0 │  D1      shard 1 │ data shards are stored
//!          │ 0  0  1  0 │  D2      shard 2 │ as they are (systematic)
//!   [I] =  │ 0  0  0  1 │  D3      shard 3 ┘
//!   [A]    ├────────────┤
//!          │ 1  1  1  1 │  P = D0 + D1 + D2 + D3       shard k     (row 0: plain XOR)
//!          └ f5 8f a6 46┘  Q = f5·D0 + 8f·D1 + …       shard k + 1 (row 1)
//!                                  (rs 4+2, i.e. raid6 on six members)
//! ```
//!
//! A is a *normalised Cauchy matrix*: start from
//! `C[i][j] = 1 / (x_i + y_j)` with `x_i = i` (i in 0..m) and
//! `y_j = m + j` (j in 0..k) — k + m distinct field elements — then scale
//! every column j by `1 / C[0][j]`, so that `A[i][j] = C[i][j] · y_j`
//! and row 0 is all ones.  [`Code::coefficient`] returns `A[row][col]`.
//! The matrix is part of the on-disk format: it never changes.
//!
//! What follows from the construction:
//!
//! * **Row 0 is XOR.**  RAID-4/5 parity (m = 1) and RAID-6's P are the
//!   plain XOR of the data, and rebuilding one lost data shard from P and
//!   the other data is XOR too.  Those run on [`xor_sum`] / [`xor_into`],
//!   with no field arithmetic at all — except that for m >= 2 the `isal`
//!   kernel folds row 0 into its single pass over the data for all m rows
//!   (multiplying by 1), which measured faster than a separate XOR pass
//!   ([`kernel::RegionOps::fuse_xor_row`]).  Same bytes either way.
//! * **MDS.**  Every square submatrix of a Cauchy matrix is nonsingular and
//!   scaling columns keeps it so, hence every k × k submatrix of [I; A] is
//!   invertible: any m lost shards, data or code, can be rebuilt from any k
//!   survivors ([`Code::decode`]).
//! * **Linearity.**  A read-modify-write of data shard j updates every
//!   code shard from the data delta alone:
//!   `P_r' = P_r + A[r][j] · (D_j + D_j')` (+ is XOR) —
//!   [`Code::apply_delta`], [`Code::update`].
//!
//! # Kernels
//!
//! Shard-sized arithmetic runs on one of several *kernels*
//! ([`Kernel`], [`kernel::RegionOps`]), chosen like ZFS's raidz math: the
//! kernels compiled in are timed briefly at first use and the fastest wins
//! ([`kernel_name`]); `MOSAIC_EC_KERNEL=isal|rse` forces one.  The matrix is
//! ours, not the library's, so every kernel writes the same bytes.

mod bench;
pub mod kernel;
mod matrix;
mod xor;

use std::fmt;
use std::sync::OnceLock;

pub use bench::{bench_encode, bench_encode_kernel, EncodeBench};
pub use kernel::Kernel;
pub use xor::{xor_into, xor_sum, xor_sum_baseline};

/// The largest k + m.
pub const MAX_SHARDS: usize = 255;

/// A malformed request.  The API returns these rather than panicking.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EcError {
    #[error("k = 0: a code needs at least one data shard")]
    NoData,
    #[error("k + m = {} shards (k = {k}, m = {m}); at most 255 are supported", k + m)]
    TooManyShards { k: usize, m: usize },
    #[error("shard lengths differ: {expected} and {got} bytes")]
    Length { expected: usize, got: usize },
    #[error("expected {expected} {what} shards, got {got}")]
    Count { what: &'static str, expected: usize, got: usize },
    #[error("shard index {index} out of range: the code has {shards} shards")]
    Index { index: usize, shards: usize },
    #[error("data shard index {index} out of range: the code has {k} data shards")]
    DataIndex { index: usize, k: usize },
    #[error("code row {row} out of range: the code has {m} code rows")]
    Row { row: usize, m: usize },
    #[error("shard {0} appears twice")]
    Duplicate(usize),
    #[error("shard {0} is listed both as present and as missing")]
    PresentAndMissing(usize),
    #[error("only {present} shards present, {needed} needed to decode")]
    TooFewShards { present: usize, needed: usize },
    #[error("bad coefficient matrix: {0}")]
    Matrix(String),
    #[error("erasure-code kernel {name:?} is not available in this build (available: {available})")]
    KernelUnavailable { name: String, available: String },
}

/// The one length shared by every slice in `lens` (0 if there are none).
/// [`Code::combine`] on `kernel`, for callers without a code at hand.
pub fn combine_with(kernel: Kernel, coefs: &[u8], inputs: &[&[u8]], out: &mut [u8], acc: bool) -> Result<(), EcError> {
    if coefs.len() != inputs.len() {
        return Err(EcError::Count { what: "coefficient", expected: inputs.len(), got: coefs.len() });
    }
    common_len(std::iter::once(out.len()).chain(inputs.iter().map(|i| i.len())))?;
    if !acc && coefs.iter().all(|&c| c == 1) {
        xor_sum(out, inputs);
        return Ok(());
    }
    let ops = kernel.ops();
    if !acc && inputs.len() > 1 && coefs.iter().all(|&c| c > 1) {
        // One streaming pass over every input for the whole row.
        let tables = ops.tables(inputs.len(), 1, coefs);
        return ops.dot(inputs.len(), coefs, &tables, inputs, &mut [out]);
    }
    // Coefficients of 1 are XORs (no multiply), then the others.
    let mut fresh = !acc;
    for (s, _) in inputs.iter().zip(coefs).filter(|(_, &c)| c == 1) {
        if std::mem::take(&mut fresh) {
            out.copy_from_slice(s);
        } else {
            xor_into(out, s);
        }
    }
    if fresh {
        out.fill(0);
    }
    for (s, &c) in inputs.iter().zip(coefs) {
        if c > 1 {
            ops.mul_acc(c, s, out)?;
        }
    }
    Ok(())
}

pub(crate) fn common_len(mut lens: impl Iterator<Item = usize>) -> Result<usize, EcError> {
    let Some(first) = lens.next() else { return Ok(0) };
    match lens.find(|&l| l != first) {
        Some(got) => Err(EcError::Length { expected: first, got }),
        None => Ok(first),
    }
}

static DEFAULT_KERNEL: OnceLock<Result<Kernel, EcError>> = OnceLock::new();

/// The kernel [`Code::new`] uses: the one `MOSAIC_EC_KERNEL` names, else
/// the fastest compiled in (timed once, about half a millisecond, at first
/// call).
pub fn default_kernel() -> Result<Kernel, EcError> {
    DEFAULT_KERNEL
        .get_or_init(|| match std::env::var("MOSAIC_EC_KERNEL") {
            Ok(name) if !name.is_empty() => {
                Kernel::by_name(&name).ok_or_else(|| EcError::KernelUnavailable { name, available: available_kernels().join(", ") })
            }
            _ => Ok(bench::fastest_kernel()),
        })
        .clone()
}

/// Name of the kernel in use (`"unavailable"` if `MOSAIC_EC_KERNEL` names
/// one that is not compiled in).
pub fn kernel_name() -> &'static str {
    default_kernel().map(Kernel::name).unwrap_or("unavailable")
}

/// Names of the kernels compiled in.
pub fn available_kernels() -> Vec<&'static str> {
    Kernel::available().into_iter().map(Kernel::name).collect()
}

/// A systematic RS(k, m) code: the fixed matrix, a kernel, and the kernel's
/// tables for the full encode.
#[derive(Clone)]
pub struct Code {
    k: usize,
    m: usize,
    /// A, row-major m × k.
    a: Vec<u8>,
    kernel: Kernel,
    /// `kernel`'s tables for all m rows of A.
    tables: Vec<u8>,
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Code").field("k", &self.k).field("m", &self.m).field("kernel", &self.kernel.name()).finish()
    }
}

impl Code {
    /// RS(k, m) on the [`default_kernel`].
    pub fn new(k: usize, m: usize) -> Result<Code, EcError> {
        Code::with_kernel(k, m, default_kernel()?)
    }

    /// RS(k, m) on an explicit kernel (tests, benchmarks).
    pub fn with_kernel(k: usize, m: usize, kernel: Kernel) -> Result<Code, EcError> {
        if k == 0 {
            return Err(EcError::NoData);
        }
        if k + m > MAX_SHARDS {
            return Err(EcError::TooManyShards { k, m });
        }
        let a = matrix::code_rows(k, m);
        let tables = kernel.ops().tables(k, m, &a);
        Ok(Code { k, m, a, kernel, tables })
    }

    /// k.
    pub fn data_shards(&self) -> usize {
        self.k
    }

    /// m.
    pub fn code_shards(&self) -> usize {
        self.m
    }

    /// k + m.
    pub fn total_shards(&self) -> usize {
        self.k + self.m
    }

    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// `A[row][col]`: the coefficient of data shard `col` in code row `row`.
    ///
    /// # Panics
    /// If `row >= m` or `col >= k`, like slice indexing.
    pub fn coefficient(&self, row: usize, col: usize) -> u8 {
        assert!(row < self.m && col < self.k, "coefficient({row}, {col}) outside a {} × {} matrix", self.m, self.k);
        self.a[row * self.k + col]
    }

    /// A, row-major m × k.
    pub fn matrix(&self) -> &[u8] {
        &self.a
    }

    /// Rows `r0..` of A with the kernel's tables for them.
    fn rows_from(&self, r0: usize) -> (&[u8], &[u8]) {
        let t = self.kernel.ops().table_row_bytes(self.k);
        (&self.a[r0 * self.k..], &self.tables[r0 * t..])
    }

    /// Row `r` of A with the kernel's tables for it.
    fn row(&self, r: usize) -> (&[u8], &[u8]) {
        let t = self.kernel.ops().table_row_bytes(self.k);
        (&self.a[r * self.k..(r + 1) * self.k], &self.tables[r * t..(r + 1) * t])
    }

    /// Compute the m code shards from the k data shards.
    pub fn encode(&self, data: &[&[u8]], code: &mut [&mut [u8]]) -> Result<(), EcError> {
        if data.len() != self.k {
            return Err(EcError::Count { what: "data", expected: self.k, got: data.len() });
        }
        if code.len() != self.m {
            return Err(EcError::Count { what: "code", expected: self.m, got: code.len() });
        }
        common_len(data.iter().map(|d| d.len()).chain(code.iter().map(|c| c.len())))?;
        let ops = self.kernel.ops();
        match code {
            [] => Ok(()),
            [p] => {
                xor_sum(p, data);
                Ok(())
            }
            _ if ops.fuse_xor_row() => ops.dot(self.k, &self.a, &self.tables, data, code),
            [p, rest @ ..] => {
                xor_sum(p, data);
                let (coefs, tables) = self.rows_from(1);
                ops.dot(self.k, coefs, tables, data, rest)
            }
        }
    }

    /// Read-modify-write update of one code row:
    /// `out ^= A[row][col] · delta`, where `delta` = old XOR new bytes of
    /// data shard `col` and `out` holds (the same range of) code row `row`.
    pub fn apply_delta_row(&self, row: usize, col: usize, delta: &[u8], out: &mut [u8]) -> Result<(), EcError> {
        if row >= self.m {
            return Err(EcError::Row { row, m: self.m });
        }
        if col >= self.k {
            return Err(EcError::DataIndex { index: col, k: self.k });
        }
        common_len([delta.len(), out.len()].into_iter())?;
        if row == 0 {
            xor_into(out, delta);
            Ok(())
        } else {
            let (coefs, tables) = self.row(row);
            self.kernel.ops().mad(self.k, col, coefs, tables, delta, &mut [out])
        }
    }

    /// Read-modify-write update of all m code rows from data shard `col`'s
    /// delta (old XOR new): `code[r] ^= A[r][col] · delta`.
    pub fn apply_delta(&self, col: usize, delta: &[u8], code: &mut [&mut [u8]]) -> Result<(), EcError> {
        if code.len() != self.m {
            return Err(EcError::Count { what: "code", expected: self.m, got: code.len() });
        }
        if col >= self.k {
            return Err(EcError::DataIndex { index: col, k: self.k });
        }
        common_len(std::iter::once(delta.len()).chain(code.iter().map(|c| c.len())))?;
        let ops = self.kernel.ops();
        match code {
            [] => Ok(()),
            [p] => {
                xor_into(p, delta);
                Ok(())
            }
            _ if ops.fuse_xor_row() => ops.mad(self.k, col, &self.a, &self.tables, delta, code),
            [p, rest @ ..] => {
                xor_into(p, delta);
                let (coefs, tables) = self.rows_from(1);
                ops.mad(self.k, col, coefs, tables, delta, rest)
            }
        }
    }

    /// Read-modify-write convenience: data shard `col` changes from `old`
    /// to `new`; update the m code shards to match.  Allocation-free (the
    /// delta goes through a small stack buffer).
    pub fn update(&self, col: usize, old: &[u8], new: &[u8], code: &mut [&mut [u8]]) -> Result<(), EcError> {
        if code.len() != self.m {
            return Err(EcError::Count { what: "code", expected: self.m, got: code.len() });
        }
        if col >= self.k {
            return Err(EcError::DataIndex { index: col, k: self.k });
        }
        let len = common_len([old.len(), new.len()].into_iter().chain(code.iter().map(|c| c.len())))?;
        const BLOCK: usize = 4096;
        let mut buf = [0u8; BLOCK];
        for start in (0..len).step_by(BLOCK) {
            let end = (start + BLOCK).min(len);
            let delta = &mut buf[..end - start];
            delta.copy_from_slice(&old[start..end]);
            xor_into(delta, &new[start..end]);
            for (r, out) in code.iter_mut().enumerate() {
                self.apply_delta_row(r, col, delta, &mut out[start..end])?;
            }
        }
        Ok(())
    }

    /// The coefficients that rebuild shards `want` from shards `present`
    /// (indices 0..k data, k..k+m code): the k shards used as inputs, and
    /// for each wanted shard a row of k coefficients over them, so that
    /// `want[w] = Σ_p rows[w·k + p] · shard[ids[p]]`.  This is the decode
    /// as data: a plan carries the rows and the executor runs
    /// [`Code::combine`] on them.
    ///
    /// The inputs are every present data shard, then the lowest-numbered
    /// present code shards (P first).  One lost data shard with P present
    /// is therefore a plain XOR; otherwise the lost data shards' e × e
    /// block of A is inverted (e <= m).
    pub fn decode_coefficients(&self, present: &[usize], want: &[usize]) -> Result<(Vec<usize>, Vec<u8>), EcError> {
        let (k, m, n) = (self.k, self.m, self.k + self.m);
        let mut have = vec![false; n];
        for &i in present {
            if i >= n {
                return Err(EcError::Index { index: i, shards: n });
            }
            if std::mem::replace(&mut have[i], true) {
                return Err(EcError::Duplicate(i));
            }
        }
        for &i in want {
            if i >= n {
                return Err(EcError::Index { index: i, shards: n });
            }
            if have[i] {
                return Err(EcError::PresentAndMissing(i));
            }
        }
        if present.len() < k {
            return Err(EcError::TooFewShards { present: present.len(), needed: k });
        }

        // The k inputs: present data shards in order, then the first e
        // present code rows, e = number of lost data shards.
        let lost: Vec<usize> = (0..k).filter(|&j| !have[j]).collect();
        let e = lost.len();
        let rows: Vec<usize> = (0..m).filter(|&r| have[k + r]).take(e).collect();
        let ids: Vec<usize> = (0..k).filter(|&j| have[j]).chain(rows.iter().map(|&r| k + r)).collect();
        debug_assert_eq!(ids.len(), k);

        // Lost data over the inputs.  With R the code rows used and D the
        // lost columns, the code rows give  A[R][D]·d_D = c_R + A[R][¬D]·d_¬D,
        // so  d_D = S⁻¹·(c_R + A[R][¬D]·d_¬D)  with S = A[R][D] (e × e,
        // invertible because A is Cauchy).
        let a = |r: usize, j: usize| self.a[r * k + j];
        let mut lost_coefs = vec![0u8; e * k];
        if e > 0 {
            let mut s = vec![0u8; e * e];
            for (x, &r) in rows.iter().enumerate() {
                for (y, &j) in lost.iter().enumerate() {
                    s[x * e + y] = a(r, j);
                }
            }
            let s_inv = matrix::invert(&s, e).ok_or_else(|| EcError::Matrix("singular decode submatrix".into()))?;
            for (y, out) in lost_coefs.chunks_exact_mut(k).enumerate() {
                let s_row = &s_inv[y * e..(y + 1) * e];
                for (p, &id) in ids.iter().enumerate() {
                    out[p] = if id < k {
                        rows.iter().zip(s_row).fold(0, |acc, (&r, &si)| acc ^ matrix::mul(si, a(r, id)))
                    } else {
                        s_row[rows.iter().position(|&r| r == id - k).unwrap_or_default()]
                    };
                }
            }
        }

        // Every wanted shard over the inputs: lost data from above; code
        // row t is A[t]·d, with the lost data substituted.
        let mut coefs = vec![0u8; want.len() * k];
        for (&idx, out) in want.iter().zip(coefs.chunks_exact_mut(k)) {
            if idx < k {
                let y = lost.iter().position(|&j| j == idx).unwrap_or_default();
                out.copy_from_slice(&lost_coefs[y * k..(y + 1) * k]);
            } else {
                let t = idx - k;
                for (p, &id) in ids.iter().enumerate() {
                    let direct = if id < k { a(t, id) } else { 0 };
                    out[p] = lost.iter().enumerate().fold(direct, |acc, (y, &j)| acc ^ matrix::mul(a(t, j), lost_coefs[y * k + p]));
                }
            }
        }
        Ok((ids, coefs))
    }

    /// A linear combination over GF(2^8): `out = Σ coefs[i] · inputs[i]`,
    /// or `out ^= Σ …` when `acc`.  Coefficients of 0 and 1 are skipped
    /// and XORed; the rest run on the kernel.  This is what a plan's
    /// computation step is (code = base + Σ coefficient × term).
    pub fn combine(&self, coefs: &[u8], inputs: &[&[u8]], out: &mut [u8], acc: bool) -> Result<(), EcError> {
        combine_with(self.kernel, coefs, inputs, out, acc)
    }

    /// Rebuild the `missing` shards (indices 0..k are data, k..k+m code)
    /// from at least k `present` ones.
    ///
    /// Exactly k present shards are read: every present data shard, then
    /// the lowest-numbered present code shards (P first).  One lost data
    /// shard with P present is therefore a plain XOR; otherwise the lost
    /// data shards' e × e block of A is inverted (e <= m) and each wanted
    /// shard is a dot product of the k inputs, run on the kernel.
    pub fn decode(&self, present: &[(usize, &[u8])], missing: &mut [(usize, &mut [u8])]) -> Result<(), EcError> {
        let (k, n) = (self.k, self.k + self.m);
        let mut shard: Vec<Option<&[u8]>> = vec![None; n];
        for &(i, s) in present {
            if i >= n {
                return Err(EcError::Index { index: i, shards: n });
            }
            if shard[i].replace(s).is_some() {
                return Err(EcError::Duplicate(i));
            }
        }
        let mut wanted = vec![false; n];
        for &(i, _) in missing.iter() {
            if i >= n {
                return Err(EcError::Index { index: i, shards: n });
            }
            if shard[i].is_some() {
                return Err(EcError::PresentAndMissing(i));
            }
            if std::mem::replace(&mut wanted[i], true) {
                return Err(EcError::Duplicate(i));
            }
        }
        common_len(present.iter().map(|p| p.1.len()).chain(missing.iter().map(|m| m.1.len())))?;
        if missing.is_empty() {
            return Ok(());
        }
        let present_ids: Vec<usize> = present.iter().map(|p| p.0).collect();
        let want: Vec<usize> = missing.iter().map(|m| m.0).collect();
        let (ids, coefs) = self.decode_coefficients(&present_ids, &want)?;
        let inputs: Vec<&[u8]> = ids.iter().map(|&i| shard[i].unwrap_or_default()).collect();

        // Rows of 0s and 1s are XORs of a subset of the inputs (the single
        // erasure with P present, or P itself); the rest is one kernel dot.
        let mut dot_coefs = Vec::new();
        let mut dot_outs: Vec<&mut [u8]> = Vec::new();
        for ((_, out), row) in missing.iter_mut().zip(coefs.chunks_exact(k)) {
            if row.iter().all(|&c| c <= 1) {
                let srcs: Vec<&[u8]> = inputs.iter().zip(row).filter(|(_, &c)| c == 1).map(|(s, _)| *s).collect();
                xor_sum(out, &srcs);
            } else {
                dot_coefs.extend_from_slice(row);
                dot_outs.push(out);
            }
        }
        if !dot_outs.is_empty() {
            let ops = self.kernel.ops();
            let tables = ops.tables(k, dot_outs.len(), &dot_coefs);
            ops.dot(k, &dot_coefs, &tables, &inputs, &mut dot_outs)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
