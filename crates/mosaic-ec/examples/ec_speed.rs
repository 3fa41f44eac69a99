//! Prints the throughput table of the crate README:
//!
//! ```sh
//! cargo run --release -p mosaic-ec --example ec_speed [rounds]
//! ```
//!
//! Each cell is the best of `rounds` (default 10) interleaved 50 ms runs,
//! so background load on a small machine hits every kernel alike.
//! MB/s = 10^6 data bytes per second (k · 64 KiB per encode).

use std::hint::black_box;
use std::time::{Duration, Instant};

use mosaic_ec::{bench_encode_kernel, kernel_name, Code, EcError, Kernel};

const UNIT: usize = 64 << 10;

/// Bytes per second of `f`, which processes `bytes` per call, over `min`.
fn rate(bytes: usize, min: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let t0 = Instant::now();
    let mut n = 0;
    while n < 3 || t0.elapsed() < min {
        f();
        n += 1;
    }
    (n * bytes) as f64 / t0.elapsed().as_secs_f64()
}

fn data(k: usize) -> Vec<Vec<u8>> {
    (0..k).map(|i| (0..UNIT).map(|b| ((b * 31) ^ (b >> 8) ^ (i * 7)) as u8).collect()).collect()
}

/// Delta update of one data shard into all m code shards: delta bytes/s.
fn delta_rate(kernel: Kernel, k: usize, m: usize, min: Duration) -> Result<f64, EcError> {
    let code = Code::with_kernel(k, m, kernel)?;
    let delta = data(1).remove(0);
    let mut par = vec![vec![0u8; UNIT]; m];
    let mut outs: Vec<&mut [u8]> = par.iter_mut().map(|p| p.as_mut_slice()).collect();
    Ok(rate(UNIT, min, || code.apply_delta(k / 2, black_box(&delta), black_box(&mut outs)).unwrap()))
}

/// Rebuild of two lost data shards (m >= 2) or one (m = 1): data bytes/s
/// (k · unit per decode, like encode).
fn decode_rate(kernel: Kernel, k: usize, m: usize, min: Duration) -> Result<f64, EcError> {
    let code = Code::with_kernel(k, m, kernel)?;
    let d = data(k);
    let refs: Vec<&[u8]> = d.iter().map(|v| v.as_slice()).collect();
    let mut par = vec![vec![0u8; UNIT]; m];
    code.encode(&refs, &mut par.iter_mut().map(|p| p.as_mut_slice()).collect::<Vec<_>>())?;
    let lost = m.min(2);
    let present: Vec<(usize, &[u8])> = (lost..k).map(|i| (i, refs[i])).chain(par.iter().enumerate().map(|(r, p)| (k + r, p.as_slice()))).collect();
    let mut bufs = vec![vec![0u8; UNIT]; lost];
    let mut missing: Vec<(usize, &mut [u8])> = bufs.iter_mut().enumerate().map(|(i, b)| (i, b.as_mut_slice())).collect();
    Ok(rate(k * UNIT, min, || code.decode(black_box(&present), black_box(&mut missing)).unwrap()))
}

fn main() -> Result<(), EcError> {
    let rounds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let min = Duration::from_millis(50);
    let kernels = Kernel::available();
    println!("kernel chosen at start: {}   (64 KiB shards, MB/s = 1e6 B/s)", kernel_name());
    println!("{:<6} {:<6} {:>12} {:>12} {:>7} {:>12} {:>12}", "code", "kernel", "encode MB/s", "memcpy MB/s", "ratio", "delta MB/s", "decode MB/s");
    for (k, m) in [(4, 1), (8, 2), (10, 4)] {
        let mut best = vec![(0.0f64, 0.0f64, 0.0f64, 0.0f64); kernels.len()];
        for _ in 0..rounds {
            for (b, &kernel) in best.iter_mut().zip(&kernels) {
                let e = bench_encode_kernel(kernel, k, m, UNIT, min)?;
                b.0 = b.0.max(e.bytes_per_sec);
                b.1 = b.1.max(e.memcpy_bytes_per_sec);
                b.2 = b.2.max(delta_rate(kernel, k, m, min)?);
                b.3 = b.3.max(decode_rate(kernel, k, m, min)?);
            }
        }
        for (&(enc, cpy, delta, dec), kernel) in best.iter().zip(&kernels) {
            println!(
                "{:<6} {:<6} {:>12.0} {:>12.0} {:>7.3} {:>12.0} {:>12.0}",
                format!("{k}+{m}"),
                kernel.name(),
                enc / 1e6,
                cpy / 1e6,
                enc / cpy,
                delta / 1e6,
                dec / 1e6
            );
        }
    }
    Ok(())
}
