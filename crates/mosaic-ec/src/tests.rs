use proptest::prelude::*;

use super::*;

/// xorshift bytes: deterministic, seed-dependent.
fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn encode_all(code: &Code, data: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let len = data.first().map_or(0, |d| d.len());
    let mut out: Vec<Vec<u8>> = (0..code.code_shards()).map(|_| vec![0x5a; len]).collect();
    let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let mut outs: Vec<&mut [u8]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
    code.encode(&refs, &mut outs).unwrap();
    out
}

/// Decode `want` from the shards of `all` not in `lost`; buffers start as
/// garbage so a decode that skips bytes fails.
fn decode_from(code: &Code, all: &[Vec<u8>], lost: &[usize], want: &[usize]) -> Vec<Vec<u8>> {
    let len = all[0].len();
    let present: Vec<(usize, &[u8])> = (0..all.len()).filter(|i| !lost.contains(i)).map(|i| (i, all[i].as_slice())).collect();
    let mut bufs: Vec<Vec<u8>> = want.iter().map(|_| vec![0xa5; len]).collect();
    let mut missing: Vec<(usize, &mut [u8])> = want.iter().copied().zip(bufs.iter_mut().map(|b| b.as_mut_slice())).collect();
    code.decode(&present, &mut missing).unwrap_or_else(|e| panic!("decode lost {lost:?} want {want:?}: {e}"));
    bufs
}

/// Independent GF(2^8) multiply (shift-and-add mod 0x11d), to check the
/// matrix against its definition without the field tables it was built with.
fn slow_mul(mut a: u8, mut b: u8) -> u8 {
    let mut p = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            p ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= 0x1d;
        }
        b >>= 1;
    }
    p
}

fn slow_inv(a: u8) -> u8 {
    (1..=255u8).find(|&b| slow_mul(a, b) == 1).unwrap()
}

#[test]
fn matrix_is_the_normalised_cauchy_matrix() {
    for (k, m) in [(1, 1), (4, 2), (8, 3), (10, 4), (200, 55), (1, 254), (254, 1)] {
        let code = Code::new(k, m).unwrap();
        for i in 0..m {
            for j in 0..k {
                let y = (m + j) as u8;
                let c = slow_inv(i as u8 ^ y);
                let c0 = slow_inv(y);
                assert_eq!(code.coefficient(i, j), slow_mul(c, slow_inv(c0)), "A[{i}][{j}] of {k}+{m}");
            }
        }
    }
}

/// The on-disk format: these bytes must never change.
#[test]
fn matrix_golden_values() {
    let c = Code::new(4, 2).unwrap();
    assert_eq!(c.matrix(), &[1, 1, 1, 1, 0xf5, 0x8f, 0xa6, 0x46]);
    let c = Code::new(6, 3).unwrap();
    assert_eq!(
        c.matrix(),
        &[1, 1, 1, 1, 1, 1, 0x8f, 0xa6, 0x46, 0xbb, 0x7b, 0x9c, 0x03, 0xf5, 0x68, 0x8f, 0x52, 0xa6],
        "{:02x?}",
        c.matrix()
    );
}

#[test]
fn row_zero_is_xor() {
    for (k, m) in [(5, 3), (1, 4), (200, 55)] {
        let code = Code::new(k, m).unwrap();
        assert!((0..k).all(|j| code.coefficient(0, j) == 1));
    }
    for kernel in Kernel::available() {
        for (k, m, len) in [(5, 3, 33), (7, 1, 10), (3, 1, 4097), (1, 1, 5)] {
            let code = Code::with_kernel(k, m, kernel).unwrap();
            let data: Vec<Vec<u8>> = (0..k).map(|i| random(len, i as u64 + 100)).collect();
            let mut x = vec![0u8; len];
            for d in &data {
                for (a, b) in x.iter_mut().zip(d) {
                    *a ^= b;
                }
            }
            assert_eq!(encode_all(&code, &data)[0], x, "{k}+{m} {}", kernel.name());
        }
    }
}

/// Every pattern of up to m lost shards rebuilds the original bytes, both
/// all at once and one lost shard at a time.
fn check_all_patterns(k: usize, m: usize, kernel: Kernel, len: usize) -> usize {
    let code = Code::with_kernel(k, m, kernel).unwrap();
    let data: Vec<Vec<u8>> = (0..k).map(|i| random(len, i as u64 + 1)).collect();
    let parity = encode_all(&code, &data);
    let all: Vec<Vec<u8>> = data.into_iter().chain(parity).collect();
    let n = k + m;
    let mut patterns = 0;
    for mask in 1u32..(1 << n) {
        if mask.count_ones() as usize > m {
            continue;
        }
        let lost: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        for (i, got) in lost.iter().zip(decode_from(&code, &all, &lost, &lost)) {
            assert_eq!(got, all[*i], "{k}+{m} lost {lost:?}: shard {i} ({})", kernel.name());
        }
        for &i in &lost {
            assert_eq!(decode_from(&code, &all, &lost, &[i])[0], all[i], "{k}+{m} lost {lost:?}: only {i} ({})", kernel.name());
        }
        patterns += 1;
    }
    patterns
}

#[test]
fn every_erasure_pattern_decodes() {
    for kernel in Kernel::available() {
        let mut total = 0;
        for (k, m) in [(4, 1), (4, 2), (6, 3), (8, 2), (1, 3), (2, 4)] {
            total += check_all_patterns(k, m, kernel, 97);
        }
        // 5 + 21 + 129 + 55 + 14 + 56 patterns.
        assert_eq!(total, 280);
        check_all_patterns(4, 2, kernel, 0);
        check_all_patterns(3, 2, kernel, 1);
        check_all_patterns(4, 2, kernel, 70_001);
    }
}

#[test]
fn wide_codes_decode_random_patterns() {
    for kernel in Kernel::available() {
        for (k, m, rounds) in [(10usize, 4usize, 40u64), (200, 55, 8)] {
            let code = Code::with_kernel(k, m, kernel).unwrap();
            let data: Vec<Vec<u8>> = (0..k).map(|i| random(67, i as u64 + 11)).collect();
            let parity = encode_all(&code, &data);
            let all: Vec<Vec<u8>> = data.into_iter().chain(parity).collect();
            for round in 0..rounds {
                // Deterministic shuffle; lose the first `lose` (1..=m).
                let mut idx: Vec<usize> = (0..k + m).collect();
                let r = random(idx.len() + 1, round * 7 + k as u64);
                for i in (1..idx.len()).rev() {
                    idx.swap(i, (r[i] as usize * 251 + i * 13) % (i + 1));
                }
                let lose = 1 + (r[0] as usize) % m;
                let lost = &idx[..lose];
                for (i, got) in lost.iter().zip(decode_from(&code, &all, lost, lost)) {
                    assert_eq!(got, all[*i], "rs {k}+{m} lost {lost:?}: shard {i} ({})", kernel.name());
                }
            }
            // Every code shard lost at once, and m data shards at once.
            let lost: Vec<usize> = (k..k + m).collect();
            assert_eq!(decode_from(&code, &all, &lost, &lost), all[k..].to_vec());
            let lost: Vec<usize> = (0..m).collect();
            assert_eq!(decode_from(&code, &all, &lost, &lost), all[..m].to_vec());
        }
    }
}

/// Decode reads exactly k shards, data first, then P, Q, …: a corrupt
/// code shard that is not needed cannot leak into the result.
#[test]
fn decode_uses_data_then_lowest_code_rows() {
    for kernel in Kernel::available() {
        let code = Code::with_kernel(4, 3, kernel).unwrap();
        let data: Vec<Vec<u8>> = (0..4).map(|i| random(50, i + 40)).collect();
        let parity = encode_all(&code, &data);
        let junk = random(50, 999);
        // D1 lost: D0 D2 D3 + P suffice; Q and R are junk and listed first.
        let present: Vec<(usize, &[u8])> = vec![(6, &junk), (5, &junk), (0, &data[0]), (4, &parity[0]), (2, &data[2]), (3, &data[3])];
        let mut out = vec![0u8; 50];
        code.decode(&present, &mut [(1, &mut out)]).unwrap();
        assert_eq!(out, data[1], "{}", kernel.name());
        // D1 and D2 lost: P and Q used, R (junk) not.
        let present: Vec<(usize, &[u8])> = vec![(6, &junk), (0, &data[0]), (3, &data[3]), (5, &parity[1]), (4, &parity[0])];
        let (mut a, mut b) = (vec![0u8; 50], vec![0u8; 50]);
        code.decode(&present, &mut [(2, &mut b), (1, &mut a)]).unwrap();
        assert_eq!((a, b), (data[1].clone(), data[2].clone()), "{}", kernel.name());
    }
}

#[test]
fn zero_length_shards() {
    for kernel in Kernel::available() {
        let code = Code::with_kernel(3, 2, kernel).unwrap();
        let e: &[u8] = &[];
        let (mut p, mut q) = (vec![], vec![]);
        code.encode(&[e, e, e], &mut [&mut p, &mut q]).unwrap();
        code.apply_delta(1, e, &mut [&mut p, &mut q]).unwrap();
        code.update(1, e, e, &mut [&mut p, &mut q]).unwrap();
        code.decode(&[(0, e), (3, e), (4, e)], &mut [(1, &mut p), (2, &mut q)]).unwrap();
    }
}

/// Every write path, same result as re-encoding, across the 4 KiB blocks
/// `update` works in.
#[test]
fn large_updates_match_reencode() {
    for kernel in Kernel::available() {
        let code = Code::with_kernel(5, 3, kernel).unwrap();
        let len = 3 * 4096 + 77;
        let mut data: Vec<Vec<u8>> = (0..5).map(|i| random(len, i)).collect();
        let mut parity = encode_all(&code, &data);
        for (step, col) in [(0u64, 2usize), (1, 0), (2, 4)] {
            let new = random(len, 50 + step);
            let mut outs: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
            match step {
                0 => code.update(col, &data[col], &new, &mut outs).unwrap(),
                1 => {
                    let delta: Vec<u8> = data[col].iter().zip(&new).map(|(a, b)| a ^ b).collect();
                    code.apply_delta(col, &delta, &mut outs).unwrap();
                }
                _ => {
                    let delta: Vec<u8> = data[col].iter().zip(&new).map(|(a, b)| a ^ b).collect();
                    for (r, out) in outs.iter_mut().enumerate() {
                        code.apply_delta_row(r, col, &delta, out).unwrap();
                    }
                }
            }
            data[col] = new;
            assert_eq!(parity, encode_all(&code, &data), "step {step} ({})", kernel.name());
        }
    }
}

/// isal and rse write identical bytes for encode, delta updates, decode and
/// the raw kernel operations.
#[cfg(mosaic_isal)]
#[test]
fn isal_and_rse_agree() {
    let (isal, rse) = (Kernel::Isal, Kernel::Rse);
    for (k, m) in [(4, 1), (4, 2), (8, 3), (10, 4), (17, 6), (20, 9), (200, 55)] {
        for len in [1usize, 15, 31, 32, 33, 63, 64, 65, 127, 1000, 4099] {
            if k == 200 && len > 100 {
                continue;
            }
            let data: Vec<Vec<u8>> = (0..k).map(|i| random(len, (i * 31 + len) as u64)).collect();
            let (ci, cr) = (Code::with_kernel(k, m, isal).unwrap(), Code::with_kernel(k, m, rse).unwrap());
            let (pi, pr) = (encode_all(&ci, &data), encode_all(&cr, &data));
            assert_eq!(pi, pr, "encode {k}+{m} len {len}");

            let delta = random(len, 7 + len as u64);
            let (mut ui, mut ur) = (pi.clone(), pr.clone());
            ci.apply_delta(k - 1, &delta, &mut ui.iter_mut().map(|p| p.as_mut_slice()).collect::<Vec<_>>()).unwrap();
            cr.apply_delta(k - 1, &delta, &mut ur.iter_mut().map(|p| p.as_mut_slice()).collect::<Vec<_>>()).unwrap();
            assert_eq!(ui, ur, "apply_delta {k}+{m} len {len}");

            let all: Vec<Vec<u8>> = data.iter().cloned().chain(pi).collect();
            let step = (k + m) / m;
            let lost: Vec<usize> = (0..m).map(|i| (len + i * step) % (k + m)).collect();
            assert_eq!(decode_from(&ci, &all, &lost, &lost), decode_from(&cr, &all, &lost, &lost), "decode {k}+{m} len {len}");

            for c in [0u8, 1, 2, 0x53, 0xff] {
                let (mut di, mut dr) = (delta.clone(), delta.clone());
                isal.ops().mul_acc(c, &data[0], &mut di).unwrap();
                rse.ops().mul_acc(c, &data[0], &mut dr).unwrap();
                assert_eq!(di, dr, "mul_acc {c:#x} len {len}");
            }
        }
    }
}

#[test]
fn kernel_registry() {
    let names = available_kernels();
    assert!(names.contains(&"rse"));
    assert_eq!(cfg!(mosaic_isal), names.contains(&"isal"));
    assert!(names.contains(&kernel_name()), "{} not in {names:?}", kernel_name());
    assert_eq!(Kernel::by_name("rse"), Some(Kernel::Rse));
    assert_eq!(Kernel::by_name("avx9000"), None);
    assert_eq!(Code::new(4, 2).unwrap().kernel().name(), kernel_name());
}

#[test]
fn bench_helpers_measure() {
    let b = bench_encode(4, 1, 4096, std::time::Duration::from_millis(1)).unwrap();
    assert_eq!((b.k, b.m, b.unit, b.kernel), (4, 1, 4096, kernel_name()));
    assert!(b.bytes_per_sec > 0.0 && b.memcpy_bytes_per_sec > 0.0 && b.ratio > 0.0);
    assert_eq!(b.per_kernel.len(), available_kernels().len());
    let b = bench_encode_kernel(Kernel::Rse, 3, 2, 1000, std::time::Duration::from_millis(1)).unwrap();
    assert_eq!(b.kernel, "rse");
    assert!(bench_encode(0, 1, 10, std::time::Duration::ZERO).is_err());
}

#[test]
fn bad_shapes_are_errors() {
    assert_eq!(Code::new(0, 2).unwrap_err(), EcError::NoData);
    assert_eq!(Code::new(0, 2).unwrap_err().to_string(), "k = 0: a code needs at least one data shard");
    let e = Code::new(200, 56).unwrap_err();
    assert_eq!(e.to_string(), "k + m = 256 shards (k = 200, m = 56); at most 255 are supported");
    assert!(Code::new(255, 0).is_ok() && Code::new(1, 254).is_ok());

    let c = Code::new(3, 2).unwrap();
    let a = vec![0u8; 8];
    let b = vec![0u8; 9];
    let (mut p1, mut p2, mut p9) = (vec![0u8; 8], vec![0u8; 8], vec![0u8; 9]);
    let e = c.encode(&[&a, &b, &a], &mut [&mut p1, &mut p2]).unwrap_err();
    assert_eq!(e.to_string(), "shard lengths differ: 8 and 9 bytes");
    let e = c.encode(&[&a, &a, &a], &mut [&mut p1, &mut p9]).unwrap_err();
    assert_eq!(e, EcError::Length { expected: 8, got: 9 });
    let e = c.encode(&[&a, &a], &mut [&mut p1, &mut p2]).unwrap_err();
    assert_eq!(e.to_string(), "expected 3 data shards, got 2");
    let e = c.encode(&[&a, &a, &a], &mut [&mut p1]).unwrap_err();
    assert_eq!(e.to_string(), "expected 2 code shards, got 1");

    let mut out = vec![0u8; 8];
    let e = c.decode(&[(0, &a), (1, &a)], &mut [(2, &mut out)]).unwrap_err();
    assert_eq!(e.to_string(), "only 2 shards present, 3 needed to decode");
    let e = c.decode(&[(0, &a), (0, &a), (1, &a)], &mut [(2, &mut out)]).unwrap_err();
    assert_eq!(e.to_string(), "shard 0 appears twice");
    let e = c.decode(&[(0, &a), (1, &a), (9, &a)], &mut [(2, &mut out)]).unwrap_err();
    assert_eq!(e.to_string(), "shard index 9 out of range: the code has 5 shards");
    let e = c.decode(&[(0, &a), (1, &a), (3, &a)], &mut [(5, &mut out)]).unwrap_err();
    assert_eq!(e, EcError::Index { index: 5, shards: 5 });
    let e = c.decode(&[(0, &a), (1, &a), (3, &a)], &mut [(1, &mut out)]).unwrap_err();
    assert_eq!(e.to_string(), "shard 1 is listed both as present and as missing");
    let mut out2 = vec![0u8; 8];
    let e = c.decode(&[(0, &a), (1, &a), (3, &a)], &mut [(2, &mut out), (2, &mut out2)]).unwrap_err();
    assert_eq!(e, EcError::Duplicate(2));
    let e = c.decode(&[(0, &a), (1, &b), (3, &a)], &mut [(2, &mut out)]).unwrap_err();
    assert!(matches!(e, EcError::Length { .. }), "{e}");
    let mut short = vec![0u8; 7];
    let e = c.decode(&[(0, &a), (1, &a), (3, &a)], &mut [(2, &mut short)]).unwrap_err();
    assert!(matches!(e, EcError::Length { .. }), "{e}");

    let e = c.apply_delta_row(2, 0, &a, &mut out).unwrap_err();
    assert_eq!(e.to_string(), "code row 2 out of range: the code has 2 code rows");
    let e = c.apply_delta_row(0, 3, &a, &mut out).unwrap_err();
    assert_eq!(e.to_string(), "data shard index 3 out of range: the code has 3 data shards");
    assert!(matches!(c.apply_delta_row(1, 0, &b, &mut out), Err(EcError::Length { .. })));
    assert!(matches!(c.apply_delta(0, &a, &mut [&mut p1]), Err(EcError::Count { .. })));
    assert!(matches!(c.apply_delta(0, &b, &mut [&mut p1, &mut p2]), Err(EcError::Length { .. })));
    assert!(matches!(c.update(0, &a, &b, &mut [&mut p1, &mut p2]), Err(EcError::Length { .. })));
    assert!(matches!(c.update(7, &a, &a, &mut [&mut p1, &mut p2]), Err(EcError::DataIndex { .. })));

    // The raw kernel operations check their shapes too.
    for kernel in Kernel::available() {
        let ops = kernel.ops();
        let t = ops.tables(2, 1, &[3, 4]);
        assert!(ops.dot(2, &[3, 4], &t, &[&a], &mut [&mut out]).is_err());
        assert!(ops.dot(2, &[3], &t, &[&a, &a], &mut [&mut out]).is_err());
        assert!(ops.dot(2, &[3, 4], &t, &[&a, &b], &mut [&mut out]).is_err());
        assert!(ops.mad(2, 2, &[3, 4], &t, &a, &mut [&mut out]).is_err());
        assert!(ops.mul_acc(3, &b, &mut out).is_err());
        assert!(ops.dot(2, &[3, 4], &t, &[&a, &a], &mut [&mut out]).is_ok());
    }
}

/// One RMW step of the property test.
#[derive(Debug, Clone)]
enum Write {
    Update(usize, u64),
    Delta(usize, u64),
    DeltaRows(usize, u64),
}

fn write_strategy() -> impl Strategy<Value = Write> {
    prop_oneof![
        (0usize..12, any::<u64>()).prop_map(|(c, s)| Write::Update(c, s)),
        (0usize..12, any::<u64>()).prop_map(|(c, s)| Write::Delta(c, s)),
        (0usize..12, any::<u64>()).prop_map(|(c, s)| Write::DeltaRows(c, s)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// RMW parity-delta updates (update, apply_delta, apply_delta_row) on
    /// random data shards equal a full re-encode of the new data.
    #[test]
    fn delta_update_matches_reencode(
        k in 1usize..=12,
        m in 0usize..=4,
        len in 0usize..300,
        seed in any::<u64>(),
        writes in prop::collection::vec(write_strategy(), 1..6),
    ) {
        for kernel in Kernel::available() {
            let code = Code::with_kernel(k, m, kernel).unwrap();
            let mut data: Vec<Vec<u8>> = (0..k).map(|i| random(len, seed ^ i as u64)).collect();
            let mut parity = encode_all(&code, &data);
            for w in &writes {
                let (Write::Update(col, s) | Write::Delta(col, s) | Write::DeltaRows(col, s)) = *w;
                let col = col % k;
                let new = random(len, s);
                let delta: Vec<u8> = data[col].iter().zip(&new).map(|(a, b)| a ^ b).collect();
                let mut outs: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
                match w {
                    Write::Update(..) => code.update(col, &data[col], &new, &mut outs).unwrap(),
                    Write::Delta(..) => code.apply_delta(col, &delta, &mut outs).unwrap(),
                    Write::DeltaRows(..) => {
                        for (r, out) in outs.iter_mut().enumerate() {
                            code.apply_delta_row(r, col, &delta, out).unwrap();
                        }
                    }
                }
                data[col] = new;
            }
            prop_assert_eq!(&parity, &encode_all(&code, &data), "{}", kernel.name());
        }
    }
}
