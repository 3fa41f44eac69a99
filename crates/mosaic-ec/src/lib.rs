//! mosaic-ec: the erasure code under every mosaic geometry.
//!
//! A systematic Reed–Solomon code over GF(2^8) (polynomial 0x11d, the field
//! of ISA-L and reed-solomon-erasure) with `k` data shards and `m` code
//! shards.  The generator is the identity over a *normalised Cauchy* matrix:
//!
//! ```text
//!         ┌ 1 0 0 0 ┐   data shards pass through
//!         │ 0 1 0 0 │
//!   G  =  │ 0 0 1 0 │
//!         │ 0 0 0 1 │
//!         ├─────────┤
//!         │ 1 1 1 1 │ ← code row 0: all ones, plain XOR (RAID-4/5 parity, RAID-6 P)
//!         │ a a a a │ ← code rows 1..m: A[i][j] = C[i][j] / C[0][j],
//!         └ a a a a ┘                    C[i][j] = 1 / (x_i + y_j), x_i = i, y_j = m + j
//! ```
//!
//! Every square submatrix of a Cauchy matrix is nonsingular, and scaling
//! columns keeps it so, so any `m` lost shards can be rebuilt (MDS) for any
//! k + m <= 256 (x and y need k + m distinct field elements).
//!
//! Because the code is linear, a read-modify-write updates code shards from
//! the data delta alone:  `P_r' = P_r + A[r][j] · (D_j + D_j')`  (+ is XOR).
//!
//! The region arithmetic runs on one of several *kernels*, chosen like
//! ZFS's raidz math: each available kernel is timed once at first use and
//! the fastest wins ([`kernel_name`]).  `MOSAIC_EC_KERNEL=isal|rse` forces
//! one.  Every kernel yields identical bytes (the matrix is ours, not the
//! library's), so the on-disk format does not depend on the choice.

mod bench;
mod kernel;
mod matrix;

use std::sync::OnceLock;

pub use bench::{bench_encode, EncodeBench};
pub use kernel::Kernel;

/// Errors for malformed requests.  Never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EcError {
    #[error("a code needs at least one data shard (k = 0)")]
    NoData,
    #[error("k + m = {0} shards; at most 255 are supported")]
    TooManyShards(usize),
    #[error("shard lengths differ: {0}")]
    Length(String),
    #[error("wrong number of shards: {0}")]
    Count(String),
    #[error("bad shard index {0}")]
    Index(usize),
    #[error("only {present} shards present, {needed} needed to decode")]
    TooFewShards { present: usize, needed: usize },
    #[error("kernel {0:?} is not available in this build")]
    KernelUnavailable(String),
}

/// A systematic RS(k, m) code with a fixed matrix and a kernel.
#[derive(Debug, Clone)]
pub struct Code {
    k: usize,
    m: usize,
    /// Code rows, row-major m × k.
    a: Vec<u8>,
    kernel: Kernel,
    /// Kernel-specific precomputed tables for the full encode.
    tables: Vec<u8>,
}

static CHOSEN: OnceLock<Result<Kernel, String>> = OnceLock::new();

/// The kernel new codes use: forced by `MOSAIC_EC_KERNEL`, else the fastest.
pub fn default_kernel() -> Result<Kernel, EcError> {
    CHOSEN
        .get_or_init(|| match std::env::var("MOSAIC_EC_KERNEL") {
            Ok(name) => Kernel::by_name(&name).ok_or(name),
            Err(_) => Ok(bench::fastest_kernel()),
        })
        .clone()
        .map_err(EcError::KernelUnavailable)
}

/// Name of the kernel in use.
pub fn kernel_name() -> &'static str {
    default_kernel().map(|k| k.name()).unwrap_or("unavailable")
}

/// Names of the kernels compiled in.
pub fn available_kernels() -> Vec<&'static str> {
    Kernel::available().iter().map(|k| k.name()).collect()
}

/// `dst ^= src` over equal-length slices (vectorised by the compiler).
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (d, s) = (&mut dst[..n], &src[..n]);
    let mut dc = d.chunks_exact_mut(32);
    let mut sc = s.chunks_exact(32);
    for (a, b) in (&mut dc).zip(&mut sc) {
        for i in 0..32 {
            a[i] ^= b[i];
        }
    }
    for (a, b) in dc.into_remainder().iter_mut().zip(sc.remainder()) {
        *a ^= b;
    }
}

impl Code {
    /// RS(k, m) with the default kernel.
    pub fn new(k: usize, m: usize) -> Result<Code, EcError> {
        Code::with_kernel(k, m, default_kernel()?)
    }

    /// RS(k, m) with an explicit kernel (tests, benchmarks).
    pub fn with_kernel(k: usize, m: usize, kernel: Kernel) -> Result<Code, EcError> {
        if k == 0 {
            return Err(EcError::NoData);
        }
        if k + m > 255 {
            return Err(EcError::TooManyShards(k + m));
        }
        let a = matrix::code_rows(k, m);
        let tables = kernel.prepare(k, m, &a);
        Ok(Code { k, m, a, kernel, tables })
    }

    pub fn data_shards(&self) -> usize {
        self.k
    }
    pub fn code_shards(&self) -> usize {
        self.m
    }
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Coefficient of data shard `col` in code row `row`.
    pub fn coefficient(&self, row: usize, col: usize) -> u8 {
        self.a[row * self.k + col]
    }

    fn check_len<'a>(shards: impl Iterator<Item = usize>) -> Result<usize, EcError> {
        let mut len = None;
        for l in shards {
            match len {
                None => len = Some(l),
                Some(x) if x != l => return Err(EcError::Length(format!("{x} and {l} bytes"))),
                _ => {}
            }
        }
        Ok(len.unwrap_or(0))
    }

    /// Compute all code shards from the data shards.
    pub fn encode(&self, data: &[&[u8]], code: &mut [&mut [u8]]) -> Result<(), EcError> {
        if data.len() != self.k || code.len() != self.m {
            return Err(EcError::Count(format!("expected {} data and {} code shards, got {} and {}", self.k, self.m, data.len(), code.len())));
        }
        Self::check_len(data.iter().map(|d| d.len()).chain(code.iter().map(|c| c.len())))?;
        if self.m == 0 {
            return Ok(());
        }
        if self.m == 1 || !self.kernel.multi_row() {
            // Row 0 is XOR.
            let p = &mut *code[0];
            p.copy_from_slice(data[0]);
            for d in &data[1..] {
                xor_into(p, d);
            }
            if self.m > 1 {
                self.kernel.encode_rows(self.k, &self.a[self.k..], &self.tables, 1, data, &mut code[1..]);
            }
        } else {
            // Kernels with a multi-row dot product do every row in one pass
            // over the data (row 0's coefficients are all ones).
            self.kernel.encode_rows(self.k, &self.a, &self.tables, 0, data, code);
        }
        Ok(())
    }

    /// RMW update of one code row: `out ^= A[row][col] · delta`, where
    /// delta = old data XOR new data of shard `col`.
    pub fn apply_delta_row(&self, row: usize, col: usize, delta: &[u8], out: &mut [u8]) -> Result<(), EcError> {
        if row >= self.m {
            return Err(EcError::Index(self.k + row));
        }
        if col >= self.k {
            return Err(EcError::Index(col));
        }
        Self::check_len([delta.len(), out.len()].into_iter())?;
        let c = self.coefficient(row, col);
        if c == 1 {
            xor_into(out, delta);
        } else {
            self.kernel.mul_acc(c, delta, out);
        }
        Ok(())
    }

    /// RMW update of every code row from one shard's delta.
    pub fn apply_delta(&self, col: usize, delta: &[u8], code: &mut [&mut [u8]]) -> Result<(), EcError> {
        if code.len() != self.m {
            return Err(EcError::Count(format!("expected {} code shards, got {}", self.m, code.len())));
        }
        for (r, out) in code.iter_mut().enumerate() {
            self.apply_delta_row(r, col, delta, out)?;
        }
        Ok(())
    }

    /// RMW convenience: update code shards for shard `col` changing from
    /// `old` to `new`.
    pub fn update(&self, col: usize, old: &[u8], new: &[u8], code: &mut [&mut [u8]]) -> Result<(), EcError> {
        Self::check_len([old.len(), new.len()].into_iter())?;
        let mut delta = old.to_vec();
        xor_into(&mut delta, new);
        self.apply_delta(col, &delta, code)
    }

    /// Reconstruct `missing` shards (index 0..k data, k..k+m code) from at
    /// least k `present` ones.
    pub fn decode(&self, present: &[(usize, &[u8])], missing: &mut [(usize, &mut [u8])]) -> Result<(), EcError> {
        let n = self.k + self.m;
        let mut seen = vec![false; n];
        for &(i, _) in present {
            if i >= n || seen[i] {
                return Err(EcError::Index(i));
            }
            seen[i] = true;
        }
        for (i, _) in missing.iter() {
            if *i >= n {
                return Err(EcError::Index(*i));
            }
        }
        Self::check_len(present.iter().map(|p| p.1.len()).chain(missing.iter().map(|m| m.1.len())))?;
        if missing.is_empty() {
            return Ok(());
        }
        if present.len() < self.k {
            return Err(EcError::TooFewShards { present: present.len(), needed: self.k });
        }
        // Use k present shards, data first.
        let mut chosen: Vec<(usize, &[u8])> = present.iter().filter(|p| p.0 < self.k).copied().collect();
        chosen.extend(present.iter().filter(|p| p.0 >= self.k).copied());
        chosen.truncate(self.k);

        // XOR fast path: one data shard wanted, and the chosen shards are
        // exactly the other k-1 data shards plus code row 0.
        let others_are_data = chosen.iter().filter(|c| c.0 < self.k).count() == self.k - 1;
        if missing.len() == 1 && missing[0].0 < self.k && others_are_data && chosen.iter().any(|c| c.0 == self.k) {
            let (_, out) = &mut missing[0];
            out.fill(0);
            for (_, s) in &chosen {
                xor_into(out, s);
            }
            return Ok(());
        }

        // Rows of G for the chosen shards, inverted: data = inv × chosen.
        let mut b = vec![0u8; self.k * self.k];
        for (r, &(i, _)) in chosen.iter().enumerate() {
            if i < self.k {
                b[r * self.k + i] = 1;
            } else {
                b[r * self.k..(r + 1) * self.k].copy_from_slice(&self.a[(i - self.k) * self.k..(i - self.k + 1) * self.k]);
            }
        }
        let inv = matrix::invert(&b, self.k).ok_or_else(|| EcError::Count("singular decode matrix".into()))?;
        // Coefficients of each missing shard over the chosen ones.
        let mut coefs = vec![0u8; missing.len() * self.k];
        for (mi, (idx, _)) in missing.iter().enumerate() {
            let row = &mut coefs[mi * self.k..(mi + 1) * self.k];
            if *idx < self.k {
                row.copy_from_slice(&inv[idx * self.k..(idx + 1) * self.k]);
            } else {
                let a = &self.a[(idx - self.k) * self.k..(idx - self.k + 1) * self.k];
                for (c, out) in row.iter_mut().enumerate() {
                    let mut acc = 0u8;
                    for j in 0..self.k {
                        acc ^= matrix::mul(a[j], inv[j * self.k + c]);
                    }
                    *out = acc;
                }
            }
        }
        let inputs: Vec<&[u8]> = chosen.iter().map(|c| c.1).collect();
        let tables = self.kernel.prepare(self.k, missing.len(), &coefs);
        let mut outs: Vec<&mut [u8]> = missing.iter_mut().map(|m| &mut *m.1).collect();
        self.kernel.encode_rows(self.k, &coefs, &tables, 0, &inputs, &mut outs);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
