//! Criterion benchmarks of the erasure code: encode (4+1, 8+2, 10+4 at
//! 64 KiB) per kernel, a delta update and a two-erasure decode.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mosaic_ec::{Code, Kernel};

fn bench(c: &mut Criterion) {
    let unit = 64 << 10;
    let mut g = c.benchmark_group("encode");
    for (k, m) in [(4usize, 1usize), (8, 2), (10, 4)] {
        let data: Vec<Vec<u8>> = (0..k).map(|i| vec![i as u8 + 1; unit]).collect();
        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        g.throughput(Throughput::Bytes((k * unit) as u64));
        for kernel in Kernel::available() {
            let code = Code::with_kernel(k, m, kernel).unwrap();
            let mut par: Vec<Vec<u8>> = (0..m).map(|_| vec![0u8; unit]).collect();
            g.bench_function(format!("{k}+{m}/{}", kernel.name()), |b| {
                b.iter(|| {
                    let mut outs: Vec<&mut [u8]> = par.iter_mut().map(|p| p.as_mut_slice()).collect();
                    code.encode(&refs, &mut outs).unwrap();
                })
            });
        }
    }
    g.finish();
    let code = Code::new(8, 2).unwrap();
    let delta = vec![7u8; unit];
    let mut p = vec![vec![0u8; unit]; 2];
    c.bench_function("delta 8+2 64K", |b| {
        b.iter(|| {
            let mut outs: Vec<&mut [u8]> = p.iter_mut().map(|x| x.as_mut_slice()).collect();
            code.apply_delta(3, &delta, &mut outs).unwrap();
        })
    });
    let data: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8; unit]).collect();
    c.bench_function("decode 8+2 two data lost 64K", |b| {
        b.iter(|| {
            let present: Vec<(usize, &[u8])> = (2..10).map(|i| (i, data[i].as_slice())).collect();
            let mut a = vec![0u8; unit];
            let mut bb = vec![0u8; unit];
            code.decode(&present, &mut [(0, &mut a), (1, &mut bb)]).unwrap();
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
