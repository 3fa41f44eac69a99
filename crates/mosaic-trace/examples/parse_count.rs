//! Instructions and time per MSR line, as `mosaic bench replay` reads them:
//! `parse_count [lines] [repeats]` writes a trace of 4 KiB random writes
//! (host `bench`) to a temporary file and counts its requests.
//!
//! ```text
//! cargo build --release -p mosaic-trace --example parse_count
//! valgrind --tool=callgrind --callgrind-out-file=cg.out \
//!     --toggle-collect='*count_requests*' target/release/examples/parse_count
//! callgrind_annotate --auto=no cg.out | head -30    # divide by the lines
//! ```

use std::time::Instant;

use mosaic_trace::{open, Op, Request, TraceOptions, TraceWriter};

/// The requests of the trace at `path`, as the replay benchmark counts them.
#[inline(never)]
fn count_requests(path: &std::path::Path) -> u64 {
    let mut r = open(path, &TraceOptions::default()).expect("open");
    r.try_fold(0u64, |n, r| r.map(|_| n + 1)).expect("parse")
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().expect("a number"));
    let lines = args.next().unwrap_or(100_000);
    let repeats = args.next().unwrap_or(1);
    let dir = std::env::temp_dir().join(format!("parse_count-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("randwrite.csv");
    {
        let mut w = TraceWriter::new(std::io::BufWriter::new(std::fs::File::create(&path)?), "bench");
        let mut x: u64 = 3;
        for i in 0..lines {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let r = Request { time_ns: i * 1_000, op: Op::Write, offset: (x >> 11) % ((100u64 << 30) / 4096) * 4096, len: 4096 };
            w.write(&r, 0)?;
        }
        w.flush()?;
    }
    let mut best = f64::MAX;
    for _ in 0..repeats {
        let t = Instant::now();
        let n = count_requests(&path);
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!(n, lines);
    }
    println!("{lines} lines: best {:.1} ns/line, {:.2} M lines/s", best * 1e9 / lines as f64, lines as f64 / best / 1e6);
    std::fs::remove_dir_all(&dir)
}
