//! Region kernels: the GF(2^8) arithmetic over whole shards.
//!
//! Like ZFS's `raidz_impl_ops_t`, each backend implements one small set of
//! operations ([`RegionOps`]) and [`Kernel`] names the backends compiled
//! in.  The matrix is always ours (see the crate docs): a kernel only
//! multiplies, so every kernel yields the same bytes.
//!
//! * `rse` — reed-solomon-erasure's `galois_8::mul_slice` /
//!   `mul_slice_xor` (split-nibble tables, with the crate's C SIMD loop under
//!   its `simd-accel` feature).  One pass per (output row, input); we walk
//!   the shards in [`RSE_BLOCK`]-byte column blocks so the inputs of a block
//!   stay in cache while every output row is computed.
//! * `isal` — Intel ISA-L's `ec_encode_data` / `ec_encode_data_update`
//!   (hand-written SSE/AVX2/AVX-512, dispatched at run time by the
//!   library), through the thin binding below.  Compiled in when the build
//!   script finds libisal (`cfg(mosaic_isal)`).  Its per-coefficient
//!   32-byte tables come from `ec_init_tables`; [`Code`](crate::Code)
//!   builds them once for the full encode.

use reed_solomon_erasure::galois_8;

use crate::EcError;

/// Column block for the `rse` dot product.
pub const RSE_BLOCK: usize = 16 << 10;

/// One implementation of the region arithmetic.
///
/// Matrices are row-major `rows × k` byte slices.  `tables` is whatever
/// [`RegionOps::tables`] returned for the same matrix (kernels that need
/// none return an empty vector); a row range `r0..r1` of a prepared matrix
/// is `coefs[r0 * k..r1 * k]` with `tables[r0 * t..r1 * t]`, where
/// `t = table_row_bytes(k)`.
///
/// Every operation checks its shapes (slice counts, equal lengths, table
/// size) and returns [`EcError`] rather than touching memory it was not
/// given.
pub trait RegionOps: Sync {
    /// Short name (`rse`, `isal`), as used by `MOSAIC_EC_KERNEL`.
    fn name(&self) -> &'static str;
    /// Bytes of precomputed table per matrix row of `k` coefficients.
    fn table_row_bytes(&self, k: usize) -> usize;
    /// Precompute tables for a `rows × k` matrix.
    fn tables(&self, k: usize, rows: usize, coefs: &[u8]) -> Vec<u8>;
    /// Dot product: `outputs[r] = Σ_j coefs[r][j] · inputs[j]`, with
    /// `inputs.len() == k` and `outputs.len()` rows.
    fn dot(&self, k: usize, coefs: &[u8], tables: &[u8], inputs: &[&[u8]], outputs: &mut [&mut [u8]]) -> Result<(), EcError>;
    /// Multiply-accumulate of one input into every row:
    /// `outputs[r] ^= coefs[r][col] · src`.
    fn mad(&self, k: usize, col: usize, coefs: &[u8], tables: &[u8], src: &[u8], outputs: &mut [&mut [u8]]) -> Result<(), EcError>;
    /// `dst ^= c · src`.
    fn mul_acc(&self, c: u8, src: &[u8], dst: &mut [u8]) -> Result<(), EcError>;
    /// When m >= 2, let [`dot`](RegionOps::dot) / [`mad`](RegionOps::mad)
    /// compute code row 0 (all ones) along with the other rows instead of
    /// running a separate XOR pass.  Worth it for kernels whose multi-row
    /// loops stream each input once for all rows (ISA-L): the extra row
    /// costs less than a second pass over the data.  Same bytes either way.
    fn fuse_xor_row(&self) -> bool {
        false
    }
}

/// A kernel compiled into this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// reed-solomon-erasure's `galois_8` region operations.
    Rse,
    /// Intel ISA-L.
    #[cfg(mosaic_isal)]
    Isal,
}

impl Kernel {
    /// The backend's operations.
    pub fn ops(self) -> &'static dyn RegionOps {
        match self {
            Kernel::Rse => &Rse,
            #[cfg(mosaic_isal)]
            Kernel::Isal => &isal::Isal,
        }
    }

    pub fn name(self) -> &'static str {
        self.ops().name()
    }

    /// The kernel called `name`, if it is compiled in.
    pub fn by_name(name: &str) -> Option<Kernel> {
        Kernel::available().into_iter().find(|k| k.name() == name)
    }

    /// Every kernel compiled in, fastest-expected first.
    pub fn available() -> Vec<Kernel> {
        vec![
            #[cfg(mosaic_isal)]
            Kernel::Isal,
            Kernel::Rse,
        ]
    }
}

/// Shape checks shared by the kernels: `coefs` is `rows × k`, `tables`
/// covers it, the inputs and outputs all have one length.  Returns it.
fn check(
    k: usize,
    rows: usize,
    coefs: &[u8],
    tables: &[u8],
    table_row: usize,
    lens: impl Iterator<Item = usize>,
) -> Result<usize, EcError> {
    if coefs.len() != rows * k {
        return Err(EcError::Matrix(format!("{} coefficients for a {rows} × {k} matrix", coefs.len())));
    }
    if tables.len() < rows * table_row {
        return Err(EcError::Matrix(format!("{} table bytes for {rows} rows, need {}", tables.len(), rows * table_row)));
    }
    crate::common_len(lens)
}

/// reed-solomon-erasure's region operations.
struct Rse;

impl RegionOps for Rse {
    fn name(&self) -> &'static str {
        "rse"
    }

    fn table_row_bytes(&self, _k: usize) -> usize {
        0
    }

    fn tables(&self, _k: usize, _rows: usize, _coefs: &[u8]) -> Vec<u8> {
        Vec::new()
    }

    fn dot(&self, k: usize, coefs: &[u8], tables: &[u8], inputs: &[&[u8]], outputs: &mut [&mut [u8]]) -> Result<(), EcError> {
        if inputs.len() != k || k == 0 {
            return Err(EcError::Count { what: "input", expected: k, got: inputs.len() });
        }
        let len = check(k, outputs.len(), coefs, tables, 0, inputs.iter().map(|i| i.len()).chain(outputs.iter().map(|o| o.len())))?;
        // galois_8's SIMD path indexes element 0: never call it on empty slices.
        for start in (0..len).step_by(RSE_BLOCK) {
            let end = (start + RSE_BLOCK).min(len);
            for (row, out) in coefs.chunks_exact(k).zip(outputs.iter_mut()) {
                let out = &mut out[start..end];
                mul_rse(row[0], &inputs[0][start..end], out);
                for (&c, input) in row[1..].iter().zip(&inputs[1..]) {
                    mul_acc_rse(c, &input[start..end], out);
                }
            }
        }
        Ok(())
    }

    fn mad(&self, k: usize, col: usize, coefs: &[u8], tables: &[u8], src: &[u8], outputs: &mut [&mut [u8]]) -> Result<(), EcError> {
        if col >= k {
            return Err(EcError::Index { index: col, shards: k });
        }
        let len = check(k, outputs.len(), coefs, tables, 0, std::iter::once(src.len()).chain(outputs.iter().map(|o| o.len())))?;
        if len > 0 {
            for (row, out) in coefs.chunks_exact(k).zip(outputs.iter_mut()) {
                mul_acc_rse(row[col], src, out);
            }
        }
        Ok(())
    }

    fn mul_acc(&self, c: u8, src: &[u8], dst: &mut [u8]) -> Result<(), EcError> {
        crate::common_len([src.len(), dst.len()].into_iter())?;
        mul_acc_rse(c, src, dst);
        Ok(())
    }
}

/// `dst = c · src` on galois_8, with the trivial coefficients short-cut.
fn mul_rse(c: u8, src: &[u8], dst: &mut [u8]) {
    match c {
        _ if src.is_empty() => {}
        0 => dst.fill(0),
        1 => dst.copy_from_slice(src),
        _ => galois_8::mul_slice(c, src, dst),
    }
}

/// `dst ^= c · src` on galois_8, with the trivial coefficients short-cut.
fn mul_acc_rse(c: u8, src: &[u8], dst: &mut [u8]) {
    match c {
        _ if src.is_empty() => {}
        0 => {}
        1 => crate::xor_into(dst, src),
        _ => galois_8::mul_slice_xor(c, src, dst),
    }
}

#[cfg(mosaic_isal)]
mod isal {
    //! The thin ISA-L binding: the four functions of `isa-l/erasure_code.h`
    //! we call, and safe wrappers that check every length first.

    use std::os::raw::{c_int, c_uchar};

    use super::{check, RegionOps};
    use crate::EcError;

    #[link(name = "isal")]
    extern "C" {
        fn ec_init_tables(k: c_int, rows: c_int, a: *mut c_uchar, gftbls: *mut c_uchar);
        fn ec_encode_data(len: c_int, k: c_int, rows: c_int, gftbls: *mut c_uchar, data: *mut *mut c_uchar, coding: *mut *mut c_uchar);
        fn ec_encode_data_update(
            len: c_int,
            k: c_int,
            rows: c_int,
            vec_i: c_int,
            gftbls: *mut c_uchar,
            data: *mut c_uchar,
            coding: *mut *mut c_uchar,
        );
    }

    /// ISA-L's AVX-512 routines return with the upper halves of the vector
    /// registers dirty (no `vzeroupper`).  Until something clears them,
    /// every legacy-SSE instruction the rest of the process runs — all of
    /// our Rust code on the baseline x86-64 target, [`xor_sum`] included —
    /// pays a false dependency: measured here, XOR parity drops from ~80 to
    /// ~39 GB/s after the first ISA-L call and stays there.  So every call
    /// below is followed by `vzeroupper`.
    ///
    /// [`xor_sum`]: crate::xor_sum
    #[inline]
    fn clean_upper_state() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU has AVX, which is all `vzeroupper` needs.
            unsafe { zeroupper() }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    unsafe fn zeroupper() {
        std::arch::x86_64::_mm256_zeroupper();
    }

    /// ISA-L takes `int` lengths; longer shards go through in pieces.
    const MAX_CALL: usize = 1 << 30;
    /// ISA-L's expanded table per coefficient.
    const TABLE: usize = 32;
    /// At most this many shards take part in one call (k + m <= 255).
    const MAX_VECS: usize = 255;

    pub struct Isal;

    impl RegionOps for Isal {
        fn name(&self) -> &'static str {
            "isal"
        }

        fn table_row_bytes(&self, k: usize) -> usize {
            TABLE * k
        }

        fn fuse_xor_row(&self) -> bool {
            true
        }

        fn tables(&self, k: usize, rows: usize, coefs: &[u8]) -> Vec<u8> {
            let mut t = vec![0u8; TABLE * k * rows];
            if rows > 0 && k > 0 && coefs.len() == rows * k && k <= MAX_VECS && rows <= MAX_VECS {
                // ec_init_tables takes a non-const pointer but only reads it.
                let mut a = coefs.to_vec();
                // SAFETY: `a` holds rows × k coefficients and `t` the
                // 32 × k × rows bytes ec_init_tables writes.
                unsafe { ec_init_tables(k as c_int, rows as c_int, a.as_mut_ptr(), t.as_mut_ptr()) };
                clean_upper_state();
            }
            t
        }

        fn dot(&self, k: usize, coefs: &[u8], tables: &[u8], inputs: &[&[u8]], outputs: &mut [&mut [u8]]) -> Result<(), EcError> {
            let rows = outputs.len();
            if inputs.len() != k || k == 0 || k > MAX_VECS {
                return Err(EcError::Count { what: "input", expected: k, got: inputs.len() });
            }
            if rows > MAX_VECS {
                return Err(EcError::Count { what: "output", expected: MAX_VECS, got: rows });
            }
            let len = check(k, rows, coefs, tables, TABLE * k, inputs.iter().map(|i| i.len()).chain(outputs.iter().map(|o| o.len())))?;
            if len == 0 || rows == 0 {
                return Ok(());
            }
            let mut ins = [std::ptr::null_mut::<c_uchar>(); MAX_VECS];
            let mut outs = [std::ptr::null_mut::<c_uchar>(); MAX_VECS];
            for start in (0..len).step_by(MAX_CALL) {
                let n = (len - start).min(MAX_CALL);
                for (p, s) in ins.iter_mut().zip(inputs) {
                    // ISA-L's prototype is not const-correct; it only reads inputs.
                    *p = s[start..].as_ptr() as *mut c_uchar;
                }
                for (p, o) in outs.iter_mut().zip(outputs.iter_mut()) {
                    *p = o[start..].as_mut_ptr();
                }
                // SAFETY: k input and `rows` output pointers, each valid for
                // `n` bytes (all slices are `len` long, checked above);
                // `tables` holds the 32 × k × rows bytes ISA-L reads; no
                // output aliases an input (`&mut` vs `&`).
                unsafe {
                    ec_encode_data(
                        n as c_int,
                        k as c_int,
                        rows as c_int,
                        tables.as_ptr() as *mut c_uchar,
                        ins.as_mut_ptr(),
                        outs.as_mut_ptr(),
                    )
                };
            }
            clean_upper_state();
            Ok(())
        }

        fn mad(&self, k: usize, col: usize, coefs: &[u8], tables: &[u8], src: &[u8], outputs: &mut [&mut [u8]]) -> Result<(), EcError> {
            let rows = outputs.len();
            if col >= k || k > MAX_VECS {
                return Err(EcError::Index { index: col, shards: k });
            }
            if rows > MAX_VECS {
                return Err(EcError::Count { what: "output", expected: MAX_VECS, got: rows });
            }
            let len = check(k, rows, coefs, tables, TABLE * k, std::iter::once(src.len()).chain(outputs.iter().map(|o| o.len())))?;
            if len == 0 || rows == 0 {
                return Ok(());
            }
            let mut outs = [std::ptr::null_mut::<c_uchar>(); MAX_VECS];
            for start in (0..len).step_by(MAX_CALL) {
                let n = (len - start).min(MAX_CALL);
                for (p, o) in outs.iter_mut().zip(outputs.iter_mut()) {
                    *p = o[start..].as_mut_ptr();
                }
                // SAFETY: one source and `rows` destinations valid for `n`
                // bytes; tables cover rows × k coefficients (checked), of
                // which ISA-L reads column `col < k` of each row.
                unsafe {
                    ec_encode_data_update(
                        n as c_int,
                        k as c_int,
                        rows as c_int,
                        col as c_int,
                        tables.as_ptr() as *mut c_uchar,
                        src[start..].as_ptr() as *mut c_uchar,
                        outs.as_mut_ptr(),
                    )
                };
            }
            clean_upper_state();
            Ok(())
        }

        fn mul_acc(&self, c: u8, src: &[u8], dst: &mut [u8]) -> Result<(), EcError> {
            crate::common_len([src.len(), dst.len()].into_iter())?;
            match c {
                0 => Ok(()),
                1 => {
                    crate::xor_into(dst, src);
                    Ok(())
                }
                _ => {
                    let mut t = [0u8; TABLE];
                    let mut a = [c];
                    // SAFETY: one coefficient in, 32 table bytes out.
                    unsafe { ec_init_tables(1, 1, a.as_mut_ptr(), t.as_mut_ptr()) };
                    clean_upper_state();
                    self.mad(1, 0, &[c], &t, src, &mut [dst])
                }
            }
        }
    }
}
