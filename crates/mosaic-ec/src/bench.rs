//! Kernel timing: picks the kernel at first use (like ZFS's raidz math
//! benchmark at module load) and measures encode throughput against memcpy
//! for `mosaic bench encode`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::{Code, EcError, Kernel};

/// One encode measurement of RS(k, m) with `unit`-byte shards.
#[derive(Debug, Clone, Serialize)]
pub struct EncodeBench {
    pub k: usize,
    pub m: usize,
    /// Shard size in bytes.
    pub unit: usize,
    /// Kernel measured in `bytes_per_sec`.
    pub kernel: &'static str,
    /// Data bytes encoded per second (k · unit per encode).
    pub bytes_per_sec: f64,
    /// memcpy of the same k · unit data bytes per second, same run.
    pub memcpy_bytes_per_sec: f64,
    /// `bytes_per_sec / memcpy_bytes_per_sec`.
    pub ratio: f64,
    /// Every available kernel's encode rate (bytes/s), for comparison
    /// (just `kernel` for [`bench_encode_kernel`]).
    pub per_kernel: Vec<(&'static str, f64)>,
}

/// Deterministic, not-too-regular shard contents.
fn shards(k: usize, m: usize, unit: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let data = (0..k).map(|i| (0..unit).map(|b| ((b * 31) ^ (b >> 8) ^ (i * 7)) as u8).collect()).collect();
    let code = (0..m).map(|_| vec![0u8; unit]).collect();
    (data, code)
}

/// Calls of `f` per second over at least `min` (and 3 calls), after one
/// warm-up call.
fn rate(min: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let t0 = Instant::now();
    let mut n = 0u64;
    while n < 3 || t0.elapsed() < min {
        f();
        n += 1;
    }
    n as f64 / t0.elapsed().as_secs_f64()
}

fn encode_rate(kernel: Kernel, k: usize, m: usize, unit: usize, min: Duration) -> Result<f64, EcError> {
    let code = Code::with_kernel(k, m, kernel)?;
    let (data, mut out) = shards(k, m, unit);
    let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let mut outs: Vec<&mut [u8]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
    let mut result = Ok(());
    let per_sec = rate(min, || {
        if let Err(e) = code.encode(black_box(&refs), black_box(&mut outs)) {
            result = Err(e);
        }
    });
    result.map(|()| per_sec * (k * unit) as f64)
}

fn memcpy_rate(k: usize, unit: usize, min: Duration) -> f64 {
    let (data, _) = shards(k, 0, unit);
    let mut dst: Vec<Vec<u8>> = (0..k).map(|_| vec![0u8; unit]).collect();
    rate(min, || {
        for (d, s) in dst.iter_mut().zip(&data) {
            d.copy_from_slice(black_box(s));
        }
        black_box(&mut dst);
    }) * (k * unit) as f64
}

/// Rounds of [`fastest_kernel`]'s timing, and encodes a round.
const ROUNDS: usize = 5;
const ENCODES: u32 = 4;

/// The fastest compiled-in kernel on a 4+2, 64 KiB encode: the same data
/// and tables for every kernel, [`ROUNDS`] interleaved rounds of
/// [`ENCODES`] encodes each (so a burst of background load hits every
/// kernel alike), the best round counts, a margin decides ([`pick`]).
/// About half a millisecond, once per process: a process started for one
/// request (`nbdinfo -- [ mosaic serve ]`) pays it at every start.
pub(crate) fn fastest_kernel() -> Kernel {
    let kernels = Kernel::available();
    let codes: Vec<Code> = kernels.iter().filter_map(|&k| Code::with_kernel(4, 2, k).ok()).collect();
    let (data, mut out) = shards(4, 2, 64 << 10);
    let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let mut outs: Vec<&mut [u8]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
    let mut best = vec![Duration::MAX; codes.len()];
    for round in 0..ROUNDS {
        for (b, code) in best.iter_mut().zip(&codes) {
            let mut encode = || code.encode(black_box(&refs), black_box(&mut outs)).is_ok();
            if round == 0 && !encode() {
                continue; // a kernel that fails (it does not here) is never chosen
            }
            let t0 = Instant::now();
            if (0..ENCODES).all(|_| encode()) {
                *b = (*b).min(t0.elapsed());
            }
        }
    }
    let timed: Vec<(Kernel, Duration)> = codes.iter().zip(best).filter(|(_, t)| *t < Duration::MAX).map(|(c, t)| (c.kernel, t)).collect();
    pick(&timed).unwrap_or(Kernel::Rse)
}

/// How much faster (in per cent) a kernel must be to displace one listed
/// before it: the kernels here are within a few per cent of each other on
/// some machines, and a race that short would otherwise pick one or the
/// other from one process to the next.
const MARGIN_PCT: u32 = 10;

/// The kernel of `timed` (in the order of [`Kernel::available`]) to use:
/// the first, unless a later one is more than [`MARGIN_PCT`] faster than
/// the one chosen so far.
fn pick(timed: &[(Kernel, Duration)]) -> Option<Kernel> {
    let (mut chosen, mut t) = *timed.first()?;
    for &(k, tk) in &timed[1..] {
        if tk * (100 + MARGIN_PCT) < t * 100 {
            (chosen, t) = (k, tk);
        }
    }
    Some(chosen)
}

/// Encode throughput of RS(k, m) with `unit`-byte shards on the
/// [default kernel](crate::default_kernel), against memcpy of the same
/// k · unit bytes, each timed for at least `min`; `per_kernel` has every
/// available kernel's rate.
pub fn bench_encode(k: usize, m: usize, unit: usize, min: Duration) -> Result<EncodeBench, EcError> {
    let kernel = crate::default_kernel()?;
    let mut per_kernel = Vec::new();
    for kk in Kernel::available() {
        per_kernel.push((kk.name(), encode_rate(kk, k, m, unit, min)?));
    }
    let bytes_per_sec = per_kernel.iter().find(|p| p.0 == kernel.name()).map_or(0.0, |p| p.1);
    let memcpy = memcpy_rate(k, unit, min);
    Ok(EncodeBench { k, m, unit, kernel: kernel.name(), bytes_per_sec, memcpy_bytes_per_sec: memcpy, ratio: bytes_per_sec / memcpy, per_kernel })
}

/// [`bench_encode`] for one given kernel.
pub fn bench_encode_kernel(kernel: Kernel, k: usize, m: usize, unit: usize, min: Duration) -> Result<EncodeBench, EcError> {
    let bytes_per_sec = encode_rate(kernel, k, m, unit, min)?;
    let memcpy = memcpy_rate(k, unit, min);
    Ok(EncodeBench {
        k,
        m,
        unit,
        kernel: kernel.name(),
        bytes_per_sec,
        memcpy_bytes_per_sec: memcpy,
        ratio: bytes_per_sec / memcpy,
        per_kernel: vec![(kernel.name(), bytes_per_sec)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_displaces_an_earlier_one_only_by_the_margin() {
        let ms = Duration::from_micros;
        assert_eq!(pick(&[]), None);
        assert_eq!(pick(&[(Kernel::Rse, ms(100))]), Some(Kernel::Rse));
        let ks = Kernel::available();
        if let [a, b, ..] = ks[..] {
            assert_eq!(pick(&[(a, ms(100)), (b, ms(100))]), Some(a), "a tie keeps the first");
            assert_eq!(pick(&[(a, ms(100)), (b, ms(92))]), Some(a), "8 % is inside the margin");
            assert_eq!(pick(&[(a, ms(100)), (b, ms(85))]), Some(b), "15 % is not");
            assert_eq!(pick(&[(a, ms(90)), (b, ms(100))]), Some(a));
        }
    }
}
