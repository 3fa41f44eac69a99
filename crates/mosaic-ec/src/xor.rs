//! Plain XOR: code row 0, the whole of RAID-4/5, RAID-6's P, and the
//! single-erasure rebuild.  Written over fixed blocks of bytes so LLVM
//! emits straight vector loads/xors/stores; the same code is compiled
//! twice, for the baseline x86-64 target (SSE2, 64-byte blocks) and for
//! AVX2 (128-byte blocks), and the AVX2 copy runs where the CPU has it
//! (checked at the first call, then a cached flag): a DVS destage XORs
//! megabytes of old chunks it has not touched before.

/// Bytes per unrolled step: four vector registers.
const SSE2_BLOCK: usize = 64;
#[cfg(target_arch = "x86_64")]
const AVX2_BLOCK: usize = 128;

#[inline(always)]
fn load(b: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap())
}

/// Whether the AVX2 copies may run (the CPU has AVX2).
#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// `dst ^= src`.
///
/// Both slices should have the same length; only the common prefix
/// (`min(dst.len(), src.len())` bytes) is touched.
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { xor_into_avx2(dst, src) };
    }
    xor_into_blocks::<SSE2_BLOCK>(dst, src)
}

/// [`xor_into`] with AVX2.  Safety: only where the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn xor_into_avx2(dst: &mut [u8], src: &[u8]) {
    xor_into_blocks::<AVX2_BLOCK>(dst, src)
}

#[inline(always)]
fn xor_into_blocks<const B: usize>(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    let mut d = dst.chunks_exact_mut(B);
    let mut s = src.chunks_exact(B);
    for (d, s) in (&mut d).zip(&mut s) {
        for i in 0..B / 8 {
            let v = load(d, i) ^ load(s, i);
            d[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
        }
    }
    for (d, s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d ^= s;
    }
}

/// `dst = srcs[0] ^ srcs[1] ^ …` — the XOR parity of `srcs` — in one
/// pass: each block of the output is accumulated in registers across all
/// sources and stored once (ISA-L's `xor_gen` loop), about 1.5× faster
/// than XOR-ing the sources into `dst` one by one.
///
/// `dst` is zeroed when `srcs` is empty.  All slices should have one
/// length; only the bytes they all share are written.
pub fn xor_sum(dst: &mut [u8], srcs: &[&[u8]]) {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { xor_sum_avx2(dst, srcs) };
    }
    xor_sum_blocks::<SSE2_BLOCK>(dst, srcs)
}

/// [`xor_sum`]'s baseline copy (SSE2 on x86-64) whatever the CPU has:
/// the reference the dispatched one is measured against
/// (`benches/encode.rs`).
pub fn xor_sum_baseline(dst: &mut [u8], srcs: &[&[u8]]) {
    xor_sum_blocks::<SSE2_BLOCK>(dst, srcs)
}

/// [`xor_sum`] with AVX2.  Safety: only where the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn xor_sum_avx2(dst: &mut [u8], srcs: &[&[u8]]) {
    xor_sum_blocks::<AVX2_BLOCK>(dst, srcs)
}

#[inline(always)]
fn xor_sum_blocks<const B: usize>(dst: &mut [u8], srcs: &[&[u8]]) {
    let len = srcs.iter().map(|s| s.len()).fold(dst.len(), usize::min);
    let dst = &mut dst[..len];
    let Some((first, rest)) = srcs.split_first() else {
        dst.fill(0);
        return;
    };
    let mut blocks = dst.chunks_exact_mut(B);
    for (bi, d) in (&mut blocks).enumerate() {
        let at = bi * B;
        let mut acc: [u8; B] = first[at..at + B].try_into().unwrap();
        for s in rest {
            let s: &[u8; B] = s[at..at + B].try_into().unwrap();
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

    /// Every copy (the baseline one, and the AVX2 one where the CPU has
    /// it) gives the bytewise XOR, at lengths around both block sizes.
    #[test]
    fn xor_matches_bytewise() {
        type Sum = fn(&mut [u8], &[&[u8]]);
        type Into = fn(&mut [u8], &[u8]);
        let mut copies: Vec<(&str, Sum, Into)> = vec![("dispatched", xor_sum, xor_into), ("sse2", xor_sum_baseline, xor_into_blocks::<SSE2_BLOCK>)];
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU has AVX2 (checked just above).
            copies.push(("avx2", |d, s| unsafe { xor_sum_avx2(d, s) }, |d, s| unsafe { xor_into_avx2(d, s) }));
        }
        for (name, sum, into) in copies {
            for len in [0usize, 1, 7, 63, 64, 65, 127, 128, 129, 200, 4095, 4096, 4097, 10_000] {
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
                    sum(&mut got, &refs);
                    assert_eq!(got, want, "{name}: len {len} n {n}");
                    let mut acc = vec![0u8; len];
                    for s in &refs {
                        into(&mut acc, s);
                    }
                    assert_eq!(acc, want, "{name}: len {len} n {n}");
                }
            }
        }
    }
}
