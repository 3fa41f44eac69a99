use proptest::prelude::*;

use super::*;

fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn encode_all(code: &Code, data: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let len = data.first().map_or(0, |d| d.len());
    let mut out: Vec<Vec<u8>> = (0..code.code_shards()).map(|_| vec![0u8; len]).collect();
    let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let mut outs: Vec<&mut [u8]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
    code.encode(&refs, &mut outs).unwrap();
    out
}

fn check_all_patterns(k: usize, m: usize, kernel: Kernel) {
    let code = Code::with_kernel(k, m, kernel).unwrap();
    let data: Vec<Vec<u8>> = (0..k).map(|i| random(97, i as u64 + 1)).collect();
    let parity = encode_all(&code, &data);
    let all: Vec<Vec<u8>> = data.iter().chain(parity.iter()).cloned().collect();
    let n = k + m;
    for mask in 0u32..(1 << n) {
        let lost = mask.count_ones() as usize;
        if lost == 0 || lost > m {
            continue;
        }
        let present: Vec<(usize, &[u8])> = (0..n).filter(|i| mask & (1 << i) == 0).map(|i| (i, all[i].as_slice())).collect();
        let mut bufs: Vec<(usize, Vec<u8>)> = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| (i, vec![0u8; 97])).collect();
        let mut missing: Vec<(usize, &mut [u8])> = bufs.iter_mut().map(|(i, b)| (*i, b.as_mut_slice())).collect();
        code.decode(&present, &mut missing).unwrap();
        for (i, b) in &bufs {
            assert_eq!(b, &all[*i], "k={k} m={m} mask={mask:b} shard {i} ({})", kernel.name());
        }
    }
}

#[test]
fn every_erasure_pattern_decodes() {
    for kernel in Kernel::available() {
        for (k, m) in [(4, 1), (4, 2), (6, 3), (8, 2), (1, 3), (3, 0)] {
            check_all_patterns(k, m, kernel);
        }
    }
}

#[test]
fn decode_a_subset_of_the_lost_shards() {
    // Two data shards lost, only one asked for: the decoder must not take
    // the XOR shortcut with Q among its inputs.
    for kernel in Kernel::available() {
        let code = Code::with_kernel(4, 2, kernel).unwrap();
        let data: Vec<Vec<u8>> = (0..4).map(|i| random(50, i + 40)).collect();
        let parity = encode_all(&code, &data);
        let present: Vec<(usize, &[u8])> = vec![(0, &data[0]), (3, &data[3]), (4, &parity[0]), (5, &parity[1])];
        for want in [1usize, 2] {
            let mut out = vec![0u8; 50];
            code.decode(&present, &mut [(want, &mut out)]).unwrap();
            assert_eq!(out, data[want], "{}", kernel.name());
        }
    }
}

#[test]
fn wide_codes_decode_random_patterns() {
    for (k, m) in [(10usize, 4usize), (200, 55)] {
        let code = Code::new(k, m).unwrap();
        let data: Vec<Vec<u8>> = (0..k).map(|i| random(64, i as u64 + 11)).collect();
        let parity = encode_all(&code, &data);
        let all: Vec<Vec<u8>> = data.iter().chain(parity.iter()).cloned().collect();
        for round in 0..20u64 {
            let mut idx: Vec<usize> = (0..k + m).collect();
            // Deterministic shuffle; lose the first m.
            for i in (1..idx.len()).rev() {
                let j = (random(1, round * 1000 + i as u64)[0] as usize * 7919 + i) % (i + 1);
                idx.swap(i, j);
            }
            let lost = &idx[..m];
            let present: Vec<(usize, &[u8])> = idx[m..].iter().map(|&i| (i, all[i].as_slice())).collect();
            let mut bufs: Vec<(usize, Vec<u8>)> = lost.iter().map(|&i| (i, vec![0u8; 64])).collect();
            let mut missing: Vec<(usize, &mut [u8])> = bufs.iter_mut().map(|(i, b)| (*i, b.as_mut_slice())).collect();
            code.decode(&present, &mut missing).unwrap();
            for (i, b) in &bufs {
                assert_eq!(b, &all[*i], "rs {k}+{m} shard {i}");
            }
        }
    }
}

#[test]
fn row_zero_is_xor() {
    let code = Code::new(5, 3).unwrap();
    for j in 0..5 {
        assert_eq!(code.coefficient(0, j), 1);
    }
    let data: Vec<Vec<u8>> = (0..5).map(|i| random(33, i)).collect();
    let p = encode_all(&code, &data);
    let mut x = vec![0u8; 33];
    for d in &data {
        xor_into(&mut x, d);
    }
    assert_eq!(p[0], x);
    let c1 = Code::new(7, 1).unwrap();
    let d7: Vec<Vec<u8>> = (0..7).map(|i| random(10, i + 100)).collect();
    let mut x = vec![0u8; 10];
    for d in &d7 {
        xor_into(&mut x, d);
    }
    assert_eq!(encode_all(&c1, &d7)[0], x);
}

#[test]
fn kernels_agree() {
    let ks = Kernel::available();
    for (k, m) in [(4, 2), (8, 3), (10, 4)] {
        let data: Vec<Vec<u8>> = (0..k).map(|i| random(1000, i as u64 + 5)).collect();
        let outs: Vec<Vec<Vec<u8>>> = ks.iter().map(|&kk| encode_all(&Code::with_kernel(k, m, kk).unwrap(), &data)).collect();
        for o in &outs[1..] {
            assert_eq!(o, &outs[0], "kernels disagree for {k}+{m}");
        }
        let mut accs: Vec<Vec<u8>> = Vec::new();
        for &kk in &ks {
            let mut dst = random(1000, 99);
            kk.mul_acc(0x53, &data[0], &mut dst);
            accs.push(dst);
        }
        for a in &accs[1..] {
            assert_eq!(a, &accs[0]);
        }
    }
}

#[test]
fn bad_shapes_are_errors() {
    assert_eq!(Code::new(0, 2).unwrap_err(), EcError::NoData);
    assert!(Code::new(200, 56).unwrap_err().to_string().contains("at most 255"));
    let c = Code::new(3, 2).unwrap();
    let a = vec![0u8; 8];
    let b = vec![0u8; 9];
    let mut p1 = vec![0u8; 8];
    let mut p2 = vec![0u8; 8];
    let e = c.encode(&[&a, &b, &a], &mut [&mut p1, &mut p2]).unwrap_err();
    assert!(e.to_string().contains("lengths differ"), "{e}");
    let e = c.encode(&[&a, &a], &mut [&mut p1, &mut p2]).unwrap_err();
    assert!(matches!(e, EcError::Count(_)));
    let mut out = vec![0u8; 8];
    let e = c.decode(&[(0, &a), (1, &a)], &mut [(2, &mut out)]).unwrap_err();
    assert_eq!(e, EcError::TooFewShards { present: 2, needed: 3 });
    let e = c.decode(&[(0, &a), (0, &a), (1, &a)], &mut [(2, &mut out)]).unwrap_err();
    assert_eq!(e, EcError::Index(0));
    let e = c.decode(&[(0, &a), (1, &a), (9, &a)], &mut [(2, &mut out)]).unwrap_err();
    assert_eq!(e, EcError::Index(9));
    assert!(c.apply_delta_row(2, 0, &a, &mut out).is_err());
    assert!(c.apply_delta_row(0, 3, &a, &mut out).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// RMW delta updates equal a full re-encode of the new data.
    #[test]
    fn delta_update_matches_reencode(k in 1usize..=12, m in 0usize..=4, len in 0usize..300, seed in any::<u64>(), writes in prop::collection::vec((0usize..12, any::<u64>()), 1..6)) {
        for kernel in Kernel::available() {
            let code = Code::with_kernel(k, m, kernel).unwrap();
            let mut data: Vec<Vec<u8>> = (0..k).map(|i| random(len, seed ^ i as u64)).collect();
            let mut parity = encode_all(&code, &data);
            for &(col, s) in &writes {
                let col = col % k;
                let new = random(len, s);
                let mut outs: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
                code.update(col, &data[col], &new, &mut outs).unwrap();
                data[col] = new;
            }
            prop_assert_eq!(&parity, &encode_all(&code, &data));
        }
    }
}
