//! Small-matrix arithmetic over GF(2^8), with reed-solomon-erasure's field
//! tables (`galois_8::mul` / `div`).

use reed_solomon_erasure::galois_8;

pub fn mul(a: u8, b: u8) -> u8 {
    galois_8::mul(a, b)
}

fn inv(a: u8) -> u8 {
    galois_8::div(1, a)
}

/// The m × k code rows: a Cauchy matrix with columns scaled so row 0 is
/// all ones.
pub fn code_rows(k: usize, m: usize) -> Vec<u8> {
    let mut a = vec![0u8; m * k];
    if m == 0 {
        return a;
    }
    for j in 0..k {
        let y = (m + j) as u8;
        // C[0][j] = 1 / (0 + y); scaling by its inverse makes row 0 ones.
        let c0 = inv(y);
        for i in 0..m {
            let c = inv(i as u8 ^ y);
            a[i * k + j] = galois_8::div(c, c0);
        }
    }
    a
}

/// Invert an n × n matrix (row-major); None if singular.
pub fn invert(m: &[u8], n: usize) -> Option<Vec<u8>> {
    let w = 2 * n;
    let mut aug = vec![0u8; n * w];
    for r in 0..n {
        aug[r * w..r * w + n].copy_from_slice(&m[r * n..(r + 1) * n]);
        aug[r * w + n + r] = 1;
    }
    for col in 0..n {
        let pivot = (col..n).find(|&r| aug[r * w + col] != 0)?;
        if pivot != col {
            for c in 0..w {
                aug.swap(pivot * w + c, col * w + c);
            }
        }
        let p = inv(aug[col * w + col]);
        for c in 0..w {
            aug[col * w + c] = mul(aug[col * w + c], p);
        }
        for r in 0..n {
            if r != col {
                let f = aug[r * w + col];
                if f != 0 {
                    for c in 0..w {
                        let v = mul(f, aug[col * w + c]);
                        aug[r * w + c] ^= v;
                    }
                }
            }
        }
    }
    let mut out = vec![0u8; n * n];
    for r in 0..n {
        out[r * n..(r + 1) * n].copy_from_slice(&aug[r * w + n..(r + 1) * w]);
    }
    Some(out)
}
