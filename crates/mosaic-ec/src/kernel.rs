//! Region kernels: `outputs[r] = Σ_j coefs[r][j] · inputs[j]` over GF(2^8).
//!
//! * `rse`: reed-solomon-erasure's table-driven `galois_8::mul_slice` /
//!   `mul_slice_xor` (pure Rust, SIMD where its build enables it);
//! * `isal`: Intel ISA-L's `ec_encode_data` (hand-written SIMD), through a
//!   thin binding, when the build found libisal.

use reed_solomon_erasure::galois_8;

/// A region-arithmetic backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    Rse,
    #[cfg(mosaic_isal)]
    Isal,
}

#[cfg(mosaic_isal)]
mod isal {
    use std::os::raw::c_int;
    #[link(name = "isal")]
    extern "C" {
        pub fn ec_init_tables(k: c_int, rows: c_int, a: *const u8, gftbls: *mut u8);
        pub fn ec_encode_data(len: c_int, k: c_int, rows: c_int, gftbls: *const u8, data: *const *const u8, coding: *const *mut u8);
        pub fn ec_encode_data_update(len: c_int, k: c_int, rows: c_int, vec_i: c_int, gftbls: *const u8, data: *const u8, coding: *const *mut u8);
    }
}

impl Kernel {
    pub fn name(&self) -> &'static str {
        match self {
            Kernel::Rse => "rse",
            #[cfg(mosaic_isal)]
            Kernel::Isal => "isal",
        }
    }

    pub fn by_name(s: &str) -> Option<Kernel> {
        Kernel::available().into_iter().find(|k| k.name() == s)
    }

    pub fn available() -> Vec<Kernel> {
        vec![
            #[cfg(mosaic_isal)]
            Kernel::Isal,
            Kernel::Rse,
        ]
    }

    /// Whether one call computes several output rows in a single pass over
    /// the inputs (then even the XOR row goes through the kernel).
    pub fn multi_row(&self) -> bool {
        match self {
            Kernel::Rse => false,
            #[cfg(mosaic_isal)]
            Kernel::Isal => true,
        }
    }

    /// Precompute tables for a `rows × k` coefficient matrix.
    pub fn prepare(&self, k: usize, rows: usize, coefs: &[u8]) -> Vec<u8> {
        match self {
            Kernel::Rse => Vec::new(),
            #[cfg(mosaic_isal)]
            Kernel::Isal => {
                let mut t = vec![0u8; 32 * k * rows];
                if rows > 0 {
                    // SAFETY: `coefs` holds rows × k bytes and `t` 32 × k × rows,
                    // the sizes ec_init_tables reads and writes.
                    unsafe { isal::ec_init_tables(k as i32, rows as i32, coefs.as_ptr(), t.as_mut_ptr()) };
                }
                t
            }
        }
    }

    /// `outputs[r] = Σ_j coefs[r][j] · inputs[j]`; `tables` came from
    /// [`Kernel::prepare`] for a matrix whose row `first_row` is `coefs`'
    /// row 0.
    pub fn encode_rows(&self, k: usize, coefs: &[u8], tables: &[u8], first_row: usize, inputs: &[&[u8]], outputs: &mut [&mut [u8]]) {
        let len = inputs.first().map_or(0, |i| i.len());
        if len == 0 || outputs.is_empty() {
            return;
        }
        match self {
            Kernel::Rse => {
                for (r, out) in outputs.iter_mut().enumerate() {
                    let row = &coefs[r * k..(r + 1) * k];
                    galois_8::mul_slice(row[0], inputs[0], out);
                    for j in 1..k {
                        galois_8::mul_slice_xor(row[j], inputs[j], out);
                    }
                }
            }
            #[cfg(mosaic_isal)]
            Kernel::Isal => {
                let ins: Vec<*const u8> = inputs.iter().map(|i| i.as_ptr()).collect();
                let outs: Vec<*mut u8> = outputs.iter_mut().map(|o| o.as_mut_ptr()).collect();
                let t = &tables[first_row * k * 32..];
                // SAFETY: k inputs and outputs.len() outputs of `len` bytes each
                // (equal lengths checked by the callers); tables sized by prepare.
                unsafe { isal::ec_encode_data(len as i32, k as i32, outs.len() as i32, t.as_ptr(), ins.as_ptr(), outs.as_ptr()) };
            }
        }
        let _ = (tables, first_row);
    }

    /// `dst ^= c · src`.
    pub fn mul_acc(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        if src.is_empty() {
            return;
        }
        match self {
            Kernel::Rse => galois_8::mul_slice_xor(c, src, dst),
            #[cfg(mosaic_isal)]
            Kernel::Isal => {
                let t = self.prepare(1, 1, &[c]);
                let outs = [dst.as_mut_ptr()];
                // SAFETY: one source and one destination of src.len() bytes.
                unsafe { isal::ec_encode_data_update(src.len() as i32, 1, 1, 0, t.as_ptr(), src.as_ptr(), outs.as_ptr()) };
            }
        }
    }
}
