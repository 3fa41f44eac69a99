//! Shared by the crash tests: run writes until a power cut, then judge
//! what a reopened array returns.

#![allow(dead_code)]

use std::sync::atomic::{AtomicI64, Ordering};

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// What a crashed run left: the bytes every acknowledged write promised,
/// and the write in flight (offset, new bytes) if the cut hit one.
pub struct Outcome {
    pub acked: Vec<u8>,
    pub inflight: Option<(u64, Vec<u8>)>,
}

/// Random writes of 1..=`max_blocks` 4 KiB blocks through `write` until the
/// shared device-write `budget` runs out (at most `ops` writes); then the
/// power is off for good.
pub fn write_until_cut(budget: &AtomicI64, cap: u64, rng: &mut ChaCha8Rng, ops: usize, max_blocks: u64, mut write: impl FnMut(u64, &[u8])) -> Outcome {
    let mut acked = vec![0u8; cap as usize];
    let mut inflight = None;
    for _ in 0..ops {
        let len = rng.gen_range(1..=max_blocks) * 4096;
        let off = rng.gen_range(0..=(cap - len) / 4096) * 4096;
        let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        write(off, &data);
        if budget.load(Ordering::SeqCst) > 0 {
            acked[off as usize..(off + len) as usize].copy_from_slice(&data);
        } else {
            inflight = Some((off, data));
            break;
        }
    }
    budget.store(i64::MIN / 2, Ordering::SeqCst);
    Outcome { acked, inflight }
}

/// The bytes equal the acknowledged ones, with the in-flight write either
/// wholly applied or not at all.
pub fn check(got: &[u8], o: &Outcome, what: &str) {
    if got == o.acked.as_slice() {
        return;
    }
    let (off, data) = o.inflight.as_ref().unwrap_or_else(|| panic!("{what}: bytes differ and no write was in flight"));
    let mut with = o.acked.clone();
    with[*off as usize..*off as usize + data.len()].copy_from_slice(data);
    assert!(got == with.as_slice(), "{what}: neither the acknowledged state nor it plus the in-flight write");
}

/// The stripe unit of the maintenance tests' arrays.
pub const U: u64 = 4096;

/// A RAM member of `stripes` units past the superblock area.
pub fn mem(name: &str, stripes: u64) -> std::sync::Arc<mosaic_dev::MemMember> {
    std::sync::Arc::new(mosaic_dev::MemMember::new(name, mosaic_array::DATA_OFFSET + U * stripes))
}

/// Options for `n` members of `level`, unit and block [`U`], clean.
pub fn opts(level: mosaic_core::Level, n: usize) -> mosaic_array::CreateOptions {
    mosaic_array::CreateOptions { level, members: Some(n), member_size: None, unit: U, block: 4096, force: true, assume_clean: true }
}

/// Members with their descriptions as path hints.
pub fn named(ms: &[std::sync::Arc<dyn mosaic_dev::Member>]) -> Vec<(std::sync::Arc<dyn mosaic_dev::Member>, String)> {
    ms.iter().map(|m| (m.clone(), m.describe())).collect()
}

/// `len` bytes that differ by `seed` and from block to block.
pub fn pattern(len: u64, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8).collect()
}

/// Everything `arr` holds, read in one request.
pub fn read_all(arr: &mosaic_array::Array) -> Vec<u8> {
    let mut buf = vec![0u8; arr.capacity() as usize];
    arr.read(0, &mut buf).unwrap();
    buf
}

/// `len` seeded random bytes.
pub fn random(seed: u64, len: u64) -> Vec<u8> {
    use rand::{Rng, SeedableRng};
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..len).map(|_| rng.gen()).collect()
}
