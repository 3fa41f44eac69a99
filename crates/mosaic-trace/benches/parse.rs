//! Parse throughput from memory: generated one-million-line MSR, SPC and
//! blkparse traces (elements = lines).  `cargo bench -p mosaic-trace`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mosaic_trace::{from_reader, Format, TraceOptions};

const LINES: u64 = 1_000_000;

fn msr() -> String {
    let mut t = String::new();
    for i in 0..LINES {
        let op = if i % 3 == 0 { "Read" } else { "Write" };
        t.push_str(&format!("{},wdev,0,{op},{},4096,1125\n", 128166372003061629 + i * 1000, (i * 7919 % 1_000_000) * 4096));
    }
    t
}

fn spc() -> String {
    let mut t = String::new();
    for i in 0..LINES {
        let op = if i % 3 == 0 { 'r' } else { 'w' };
        t.push_str(&format!("{},{},4096,{op},{}.{:06}\n", i % 2, i * 7919 % 20_000_000, i / 1000, i % 1000 * 1000));
    }
    t
}

fn blkparse() -> String {
    let mut t = String::new();
    for i in 0..LINES {
        let act = if i % 2 == 0 { 'Q' } else { 'D' };
        t.push_str(&format!("  8,0    {}   {:>6}   {}.{:09}  1234  {act}  WS {} + 8 [kworker/3:1]\n", i % 4, i, i / 100_000, i % 100_000 * 10_000, i * 8));
    }
    t
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(LINES));
    g.sample_size(10);
    for (name, format, text) in [("msr", Format::Msr, msr()), ("spc", Format::Spc, spc()), ("blkparse", Format::Blkparse, blkparse())] {
        let bytes: &'static [u8] = Box::leak(text.into_bytes().into_boxed_slice());
        for (label, fmt) in [("named", Some(format)), ("detected", None)] {
            if label == "detected" && name != "msr" {
                continue;
            }
            g.bench_function(format!("{name} 1M lines ({label})"), |b| {
                b.iter(|| {
                    let opts = TraceOptions { format: fmt, ..Default::default() };
                    let r = from_reader(name, std::io::Cursor::new(bytes), &opts).unwrap();
                    r.count()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
