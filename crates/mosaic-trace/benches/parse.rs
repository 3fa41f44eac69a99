//! Parse throughput of a generated one-million-line MSR trace from memory.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mosaic_trace::{from_reader, Format, TraceOptions};

fn bench(c: &mut Criterion) {
    let mut text = String::new();
    for i in 0..1_000_000u64 {
        text.push_str(&format!("{},host,0,{},{},4096,100\n", 128166372003061629 + i * 1000, if i % 3 == 0 { "Read" } else { "Write" }, (i * 7919 % 1_000_000) * 4096));
    }
    let bytes = text.into_bytes();
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(1_000_000));
    g.sample_size(10);
    g.bench_function("msr 1M lines", |b| {
        b.iter(|| {
            let opts = TraceOptions { format: Some(Format::Msr), ..Default::default() };
            let r = from_reader("bench", std::io::Cursor::new(bytes.clone()), &opts).unwrap();
            r.count()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
