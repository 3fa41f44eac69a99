//! Criterion benchmarks of the erasure code at 64 KiB shards, every kernel:
//! full encode (4+1, 8+2, 10+4), a one-shard delta update (8+2) and the
//! rebuild of two lost data shards (8+2); and the XOR parity of four
//! sources (`xor_sum`, the copy the CPU runs, against its baseline copy)
//! at 4 KiB (in L1), 64 KiB (L2) and 4 MiB (memory).
//!
//! `cargo bench -p mosaic-ec` (add `-- --quick` for a short run).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mosaic_ec::{Code, Kernel};

const UNIT: usize = 64 << 10;

fn shards(k: usize) -> Vec<Vec<u8>> {
    (0..k).map(|i| (0..UNIT).map(|b| ((b * 31) ^ (b >> 8) ^ (i * 7)) as u8).collect()).collect()
}

fn encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode");
    for (k, m) in [(4usize, 1usize), (8, 2), (10, 4)] {
        let data = shards(k);
        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        g.throughput(Throughput::Bytes((k * UNIT) as u64));
        for kernel in Kernel::available() {
            let code = Code::with_kernel(k, m, kernel).unwrap();
            let mut par = vec![vec![0u8; UNIT]; m];
            let mut outs: Vec<&mut [u8]> = par.iter_mut().map(|p| p.as_mut_slice()).collect();
            g.bench_function(format!("{k}+{m}/{}", kernel.name()), |b| {
                b.iter(|| code.encode(black_box(&refs), black_box(&mut outs)).unwrap())
            });
        }
    }
    g.finish();
}

fn delta(c: &mut Criterion) {
    let mut g = c.benchmark_group("delta");
    g.throughput(Throughput::Bytes(UNIT as u64));
    let delta = shards(1).remove(0);
    for kernel in Kernel::available() {
        let code = Code::with_kernel(8, 2, kernel).unwrap();
        let mut par = vec![vec![0u8; UNIT]; 2];
        let mut outs: Vec<&mut [u8]> = par.iter_mut().map(|p| p.as_mut_slice()).collect();
        g.bench_function(format!("8+2/{}", kernel.name()), |b| {
            b.iter(|| code.apply_delta(3, black_box(&delta), black_box(&mut outs)).unwrap())
        });
    }
    g.finish();
}

fn decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode-2-data");
    g.throughput(Throughput::Bytes((8 * UNIT) as u64));
    let data = shards(8);
    for kernel in Kernel::available() {
        let code = Code::with_kernel(8, 2, kernel).unwrap();
        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let mut par = vec![vec![0u8; UNIT]; 2];
        code.encode(&refs, &mut par.iter_mut().map(|p| p.as_mut_slice()).collect::<Vec<_>>()).unwrap();
        let present: Vec<(usize, &[u8])> = (2..8).map(|i| (i, refs[i])).chain([(8, par[0].as_slice()), (9, par[1].as_slice())]).collect();
        let (mut a, mut bb) = (vec![0u8; UNIT], vec![0u8; UNIT]);
        let mut missing: Vec<(usize, &mut [u8])> = vec![(0, a.as_mut_slice()), (1, bb.as_mut_slice())];
        g.bench_function(format!("8+2/{}", kernel.name()), |b| {
            b.iter(|| code.decode(black_box(&present), black_box(&mut missing)).unwrap())
        });
    }
    g.finish();
}

fn xor(c: &mut Criterion) {
    let mut g = c.benchmark_group("xor-4");
    for len in [4usize << 10, 64 << 10, 4 << 20] {
        let data: Vec<Vec<u8>> = (0..4).map(|i| (0..len).map(|b| ((b * 31) ^ (b >> 8) ^ (i * 7)) as u8).collect()).collect();
        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let mut out = vec![0u8; len];
        g.throughput(Throughput::Bytes((4 * len) as u64));
        g.bench_function(format!("{}K/dispatched", len >> 10), |b| b.iter(|| mosaic_ec::xor_sum(black_box(&mut out), black_box(&refs))));
        g.bench_function(format!("{}K/baseline", len >> 10), |b| b.iter(|| mosaic_ec::xor_sum_baseline(black_box(&mut out), black_box(&refs))));
    }
    g.finish();
}

criterion_group!(benches, encode, delta, decode, xor);
criterion_main!(benches);
