//! `mosaic trace stats`.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::Serialize;

use crate::{Format, Op, TraceError, TraceReader};

/// Summary statistics of a trace.
#[derive(Debug, Clone, Serialize)]
pub struct TraceStats {
    pub file: String,
    pub format: Format,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_share_count: f64,
    pub read_share_bytes: f64,
    /// Request counts by size bucket (label: upper bound, e.g. "4K" = (2K, 4K]).
    pub size_histogram: Vec<(String, u64)>,
    /// Exact write sizes and their counts (for the stripe-unit advisor).
    pub write_sizes: BTreeMap<u64, u64>,
    /// Distinct 4 KiB blocks touched.
    pub footprint_blocks: u64,
    pub footprint_bytes: u64,
    /// Requests starting where the previous request (of any op) ended.
    pub sequential_fraction: f64,
    pub duration_s: f64,
    pub interarrival_us_p50: f64,
    pub interarrival_us_p90: f64,
    pub interarrival_us_p99: f64,
    pub interarrival_us_max: f64,
    pub skipped_bad: u64,
    pub skipped_ops: u64,
    pub filtered: u64,
}

fn bucket_label(i: usize) -> String {
    let b = 512u64 << i;
    if b >= 1 << 20 {
        format!("{}M", b >> 20)
    } else if b >= 1024 {
        format!("{}K", b >> 10)
    } else {
        format!("{b}")
    }
}

/// Read the whole trace and summarise it.
pub fn stats(mut r: TraceReader) -> Result<TraceStats, TraceError> {
    let mut buckets = [0u64; 13]; // <=512 .. <=1M, then >1M
    let mut write_sizes = BTreeMap::new();
    let (mut reads, mut writes, mut rb, mut wb) = (0u64, 0u64, 0u64, 0u64);
    let mut blocks: HashSet<u64> = HashSet::new();
    let mut seq = 0u64;
    let mut prev_end: Option<u64> = None;
    let mut prev_t: Option<u64> = None;
    let mut gaps: Vec<u64> = Vec::new();
    let mut last_t = 0;
    for req in r.by_ref() {
        let q = req?;
        match q.op {
            Op::Read => {
                reads += 1;
                rb += q.len
            }
            Op::Write => {
                writes += 1;
                wb += q.len;
                *write_sizes.entry(q.len).or_insert(0) += 1;
            }
        }
        let mut i = 0;
        while i < 12 && q.len > 512u64 << i {
            i += 1;
        }
        if q.len > 1 << 20 {
            i = 12;
        }
        buckets[i] += 1;
        if q.len > 0 {
            for b in q.offset / 4096..=(q.offset + q.len - 1) / 4096 {
                blocks.insert(b);
            }
        }
        if prev_end == Some(q.offset) {
            seq += 1;
        }
        prev_end = Some(q.offset + q.len);
        if let Some(p) = prev_t {
            gaps.push(q.time_ns.saturating_sub(p));
        }
        prev_t = Some(q.time_ns);
        last_t = last_t.max(q.time_ns);
    }
    gaps.sort_unstable();
    let pct = |p: f64| if gaps.is_empty() { 0.0 } else { gaps[((gaps.len() - 1) as f64 * p).round() as usize] as f64 / 1e3 };
    let n = reads + writes;
    let share = |a: u64, b: u64| if a + b == 0 { 0.0 } else { a as f64 / (a + b) as f64 };
    let mut hist: Vec<(String, u64)> = (0..12).map(|i| (bucket_label(i), buckets[i])).collect();
    hist.push((">1M".into(), buckets[12]));
    Ok(TraceStats {
        file: r.name().to_string(),
        format: r.format(),
        requests: n,
        reads,
        writes,
        read_bytes: rb,
        write_bytes: wb,
        read_share_count: share(reads, writes),
        read_share_bytes: share(rb, wb),
        size_histogram: hist,
        write_sizes,
        footprint_blocks: blocks.len() as u64,
        footprint_bytes: blocks.len() as u64 * 4096,
        sequential_fraction: if n == 0 { 0.0 } else { seq as f64 / n as f64 },
        duration_s: last_t as f64 / 1e9,
        interarrival_us_p50: pct(0.5),
        interarrival_us_p90: pct(0.9),
        interarrival_us_p99: pct(0.99),
        interarrival_us_max: gaps.last().map_or(0.0, |&g| g as f64 / 1e3),
        skipped_bad: r.skipped_bad(),
        skipped_ops: r.skipped_ops(),
        filtered: r.filtered(),
    })
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / 1048576.0)
}

impl fmt::Display for TraceStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "trace       {} ({})", self.file, self.format)?;
        writeln!(f, "requests    {} over {:.1} s", self.requests, self.duration_s)?;
        writeln!(f, "reads       {} ({:.1}% of requests), {} ({:.1}% of bytes)", self.reads, self.read_share_count * 100.0, mib(self.read_bytes), self.read_share_bytes * 100.0)?;
        writeln!(f, "writes      {} ({:.1}%), {}", self.writes, (1.0 - self.read_share_count) * 100.0, mib(self.write_bytes))?;
        writeln!(f, "footprint   {} distinct 4 KiB blocks ({})", self.footprint_blocks, mib(self.footprint_bytes))?;
        writeln!(f, "sequential  {:.1}% of requests start where the previous ended", self.sequential_fraction * 100.0)?;
        writeln!(
            f,
            "inter-arrival  p50 {:.1} us, p90 {:.1} us, p99 {:.1} us, max {:.1} us",
            self.interarrival_us_p50, self.interarrival_us_p90, self.interarrival_us_p99, self.interarrival_us_max
        )?;
        if self.skipped_bad + self.skipped_ops + self.filtered > 0 {
            writeln!(f, "skipped     {} malformed lines, {} other ops, {} filtered by device", self.skipped_bad, self.skipped_ops, self.filtered)?;
        }
        writeln!(f, "size histogram (requests with size <= bucket):")?;
        let max = self.size_histogram.iter().map(|b| b.1).max().unwrap_or(1).max(1);
        for (label, c) in &self.size_histogram {
            if *c > 0 {
                writeln!(f, "  {:>5} {:>9} {}", label, c, "#".repeat((c * 40 / max) as usize))?;
            }
        }
        Ok(())
    }
}
