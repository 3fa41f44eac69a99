//! Kernel timing: picks the kernel at start (like ZFS's raidz math) and
//! measures encode throughput against memcpy for `mosaic bench encode`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::{Code, EcError, Kernel};

/// One encode measurement.
#[derive(Debug, Clone, Serialize)]
pub struct EncodeBench {
    pub k: usize,
    pub m: usize,
    pub unit: usize,
    pub kernel: &'static str,
    /// Data bytes encoded per second.
    pub bytes_per_sec: f64,
    /// memcpy of the same data bytes per second, same run.
    pub memcpy_bytes_per_sec: f64,
    /// encode / memcpy.
    pub ratio: f64,
    /// Every available kernel's rate, for comparison.
    pub per_kernel: Vec<(&'static str, f64)>,
}

fn shards(k: usize, m: usize, unit: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let data = (0..k).map(|i| (0..unit).map(|b| (b * 31 + i * 7) as u8).collect()).collect();
    let code = (0..m).map(|_| vec![0u8; unit]).collect();
    (data, code)
}

fn rate(min: Duration, mut f: impl FnMut()) -> f64 {
    f(); // warm up
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < min || n < 3 {
        f();
        n += 1;
    }
    n as f64 / t0.elapsed().as_secs_f64()
}

fn encode_rate(kernel: Kernel, k: usize, m: usize, unit: usize, min: Duration) -> Result<f64, EcError> {
    let code = Code::with_kernel(k, m, kernel)?;
    let (data, mut out) = shards(k, m, unit);
    let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let per_sec = rate(min, || {
        let mut outs: Vec<&mut [u8]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
        code.encode(black_box(&refs), &mut outs).unwrap();
        black_box(&outs);
    });
    Ok(per_sec * (k * unit) as f64)
}

/// The fastest compiled-in kernel on a 4+2, 64 KiB encode (a few ms).
pub fn fastest_kernel() -> Kernel {
    let mut best = (Kernel::Rse, 0.0);
    for k in Kernel::available() {
        if let Ok(r) = encode_rate(k, 4, 2, 64 << 10, Duration::from_millis(3)) {
            if r > best.1 {
                best = (k, r);
            }
        }
    }
    best.0
}

/// Encode throughput of RS(k, m) with `unit`-byte shards against memcpy of
/// the same k·unit bytes, each measured for at least `min`.
pub fn bench_encode(k: usize, m: usize, unit: usize, min: Duration) -> Result<EncodeBench, EcError> {
    let kernel = crate::default_kernel()?;
    let mut per_kernel = Vec::new();
    for kk in Kernel::available() {
        per_kernel.push((kk.name(), encode_rate(kk, k, m, unit, min)?));
    }
    let bytes_per_sec = per_kernel.iter().find(|p| p.0 == kernel.name()).map(|p| p.1).unwrap_or(0.0);
    let (data, _) = shards(k, 0, unit);
    let mut dst: Vec<Vec<u8>> = (0..k).map(|_| vec![0u8; unit]).collect();
    let memcpy = rate(min, || {
        for (d, s) in dst.iter_mut().zip(&data) {
            d.copy_from_slice(black_box(s));
        }
        black_box(&dst);
    }) * (k * unit) as f64;
    Ok(EncodeBench { k, m, unit, kernel: kernel.name(), bytes_per_sec, memcpy_bytes_per_sec: memcpy, ratio: bytes_per_sec / memcpy, per_kernel })
}
