//! SBC vs MBC at 1, 2, 4 and 8 threads (elements = transactions), on the
//! transactions of the CloudPhysics trace (64 KiB units, 1 ms window, cap
//! 64; skipped when the trace is missing) and on a seeded synthetic set.
//! `cargo bench -p mosaic-adapt --bench correlate`.
//!
//! The trace's transactions are mostly one or two units (few pairs), so
//! its time is dominated by the sequential conversion to `Graph`; the
//! synthetic set (1–64 units each, ~11.6 M pairs) is where pair counting,
//! the part MBC parallelises, dominates.
//!
//! The development machine has 2 cores: expect MBC to stop gaining past 2
//! threads (4 and 8 measure contention and oversubscription only).

use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mosaic_adapt::correlate::{mbc, sequential};
use mosaic_adapt::txn::{transactions, Txn, TxnConfig};
use mosaic_trace::{Request, TraceOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The whole trace's transactions, or `None` if the file is missing or bad.
fn trace_txns() -> Option<Vec<Txn>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/cloudphysics-vscsi-part1.csv");
    let reqs: Vec<Request> = mosaic_trace::open(&path, &TraceOptions::default()).ok()?.collect::<Result<_, _>>().ok()?;
    transactions(TxnConfig::new(64 << 10, 1_000_000, 64), reqs).ok().map(|(t, _)| t)
}

/// 20,000 transactions of 1–64 units, clustered so pairs repeat.
fn synthetic_txns() -> Vec<Txn> {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    (0..20_000)
        .map(|_| {
            let base = rng.gen_range(0..5_000u64);
            let mut t: Txn = (0..rng.gen_range(1..=64)).map(|_| base + rng.gen_range(0..256)).collect();
            t.sort_unstable();
            t.dedup();
            t
        })
        .collect()
}

fn bench_set(c: &mut Criterion, source: &str, txns: &[Txn]) {
    let mut g = c.benchmark_group(format!("correlate/{source}"));
    g.throughput(Throughput::Elements(txns.len() as u64));
    g.sample_size(10);
    g.bench_function("sbc", |b| b.iter(|| sequential(txns)));
    for threads in [1, 2, 4, 8] {
        g.bench_with_input(BenchmarkId::new("mbc", threads), &threads, |b, &t| b.iter(|| mbc(txns, t)));
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    match trace_txns() {
        Some(t) => bench_set(c, "cloudphysics", &t),
        None => eprintln!("cloudphysics trace missing: synthetic set only"),
    }
    bench_set(c, "synthetic", &synthetic_txns());
}

criterion_group!(benches, bench);
criterion_main!(benches);
