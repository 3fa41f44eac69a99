//! Scalar and small-matrix arithmetic over GF(2^8) (polynomial 0x11d), on
//! reed-solomon-erasure's field tables (`galois_8::mul` / `div`).
//!
//! Nothing here touches shard bytes: these routines build the m × k code
//! matrix once per [`Code`](crate::Code) and the few coefficient rows a
//! decode needs.  Region arithmetic lives in [`crate::kernel`].

use reed_solomon_erasure::galois_8;

/// `a · b` in GF(2^8).
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    galois_8::mul(a, b)
}

/// `1 / a` in GF(2^8); `a` must be nonzero.
#[inline]
pub fn inv(a: u8) -> u8 {
    debug_assert_ne!(a, 0);
    galois_8::div(1, a)
}

/// The m × k code rows, row-major: a Cauchy matrix
/// `C[i][j] = 1 / (x_i + y_j)`, `x_i = i`, `y_j = m + j`, with every column
/// scaled by `1 / C[0][j]` so that row 0 is all ones.
///
/// Needs `k + m <= 256` (x and y must be k + m distinct field elements);
/// [`Code`](crate::Code) caps it at 255.
pub fn code_rows(k: usize, m: usize) -> Vec<u8> {
    debug_assert!(k + m <= 256);
    let mut a = vec![0u8; m * k];
    for j in 0..k {
        let y = (m + j) as u8;
        // C[0][j] = 1 / (0 + y_j), so dividing by it is multiplying by y_j.
        for i in 0..m {
            let c = inv(i as u8 ^ y);
            a[i * k + j] = mul(c, y);
        }
    }
    a
}

/// Invert an n × n row-major matrix by Gauss–Jordan elimination; `None` if
/// it is singular.
pub fn invert(m: &[u8], n: usize) -> Option<Vec<u8>> {
    debug_assert_eq!(m.len(), n * n);
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
        for r in (0..n).filter(|&r| r != col) {
            let f = aug[r * w + col];
            if f != 0 {
                for c in 0..w {
                    let v = mul(f, aug[col * w + c]);
                    aug[r * w + c] ^= v;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_round_trips() {
        let a = code_rows(3, 3); // square 3 × 3 Cauchy block
        let b = invert(&a, 3).unwrap();
        for r in 0..3 {
            for c in 0..3 {
                let mut acc = 0;
                for t in 0..3 {
                    acc ^= mul(a[r * 3 + t], b[t * 3 + c]);
                }
                assert_eq!(acc, u8::from(r == c), "({r},{c})");
            }
        }
        assert!(invert(&[1, 1, 1, 1], 2).is_none());
    }

    /// Every square submatrix of A is nonsingular (the MDS property), for
    /// every row/column subset of an 8 × 4 code and random ones of 200 + 55.
    #[test]
    fn every_square_submatrix_is_invertible() {
        fn check(a: &[u8], k: usize, rows: &[usize], cols: &[usize]) {
            let e = rows.len();
            let mut s = vec![0u8; e * e];
            for (r, &i) in rows.iter().enumerate() {
                for (c, &j) in cols.iter().enumerate() {
                    s[r * e + c] = a[i * k + j];
                }
            }
            assert!(invert(&s, e).is_some(), "singular: rows {rows:?} cols {cols:?}");
        }
        fn subsets(n: usize) -> impl Iterator<Item = Vec<usize>> {
            (1u32..1 << n).map(move |mask| (0..n).filter(|i| mask & (1 << i) != 0).collect())
        }
        let (k, m) = (8, 4);
        let a = code_rows(k, m);
        let mut checked = 0;
        for rows in subsets(m) {
            for cols in subsets(k).filter(|c| c.len() == rows.len()) {
                check(&a, k, &rows, &cols);
                checked += 1;
            }
        }
        assert_eq!(checked, 4 * 8 + 6 * 28 + 4 * 56 + 70);

        let (k, m) = (200, 55);
        let a = code_rows(k, m);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        for _ in 0..40 {
            let e = 1 + next(m);
            let mut rows: Vec<usize> = (0..m).collect();
            let mut cols: Vec<usize> = (0..k).collect();
            for i in 0..e {
                let r = i + next(m - i);
                rows.swap(i, r);
                let c = i + next(k - i);
                cols.swap(i, c);
            }
            check(&a, k, &rows[..e], &cols[..e]);
        }
    }
}
