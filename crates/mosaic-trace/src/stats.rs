//! Trace statistics (`mosaic trace stats`).
//!
//! Definitions:
//! * **footprint**: distinct 4 KiB blocks touched by any request (a request
//!   covers blocks `offset / 4096 ..= (offset + len - 1) / 4096`), kept as
//!   merged extents, so large sequential traces cost little memory;
//! * **sequential**: a request is sequential if it starts exactly where the
//!   previous request (of either op) ended; the fraction is over all
//!   requests (the first never is);
//! * **inter-arrival**: gaps between consecutive returned requests (after
//!   CloudPhysics spreading and time scaling), from a log-linear histogram
//!   with 128 sub-buckets per power of two: percentiles are within 0.4 %
//!   (exact below 256 ns); the maximum is exact;
//! * **size histogram**: power-of-two buckets `<= 512`, `<= 1K`, ...,
//!   `<= 1M`, and `> 1M`;
//! * **write sizes**: exact write size -> count, for the stripe-unit
//!   advisor, over at most 65,536 distinct sizes (writes of further sizes
//!   are counted in `write_sizes_other`);
//! * **clamped**: requests earlier than the first request, read at time 0
//!   ([`TraceReader::clamped`]); the table prints a warning when there are
//!   any.

use std::collections::BTreeMap;
use std::fmt;

use mosaic_size::human;
use serde::Serialize;

use crate::{Format, Op, TraceError, TraceReader};

const MAX_WRITE_SIZES: usize = 1 << 16;
const BUCKETS: usize = 13;

/// One bucket of the size histogram.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeBucket {
    /// `512`, `1K`, ..., `1M`, `>1M`.
    pub label: String,
    /// Largest size in the bucket (`None`: the open last bucket).
    pub max_bytes: Option<u64>,
    pub reads: u64,
    pub writes: u64,
}

impl SizeBucket {
    pub fn count(&self) -> u64 {
        self.reads + self.writes
    }
}

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
    /// Reads / requests (0 for an empty trace); writes are the rest.
    pub read_share_count: f64,
    pub write_share_count: f64,
    /// Read bytes / all bytes.
    pub read_share_bytes: f64,
    pub write_share_bytes: f64,
    pub size_histogram: Vec<SizeBucket>,
    /// Exact write size (bytes) -> number of writes.
    pub write_sizes: BTreeMap<u64, u64>,
    /// Writes not in `write_sizes` (more distinct sizes than it keeps).
    pub write_sizes_other: u64,
    /// Distinct 4 KiB blocks touched.
    pub footprint_blocks: u64,
    pub footprint_bytes: u64,
    /// Requests that start where the previous request ended, / requests.
    pub sequential_fraction: f64,
    /// Time of the last request (the first is at 0).
    pub duration_s: f64,
    pub interarrival_us_p50: f64,
    pub interarrival_us_p90: f64,
    pub interarrival_us_p99: f64,
    pub interarrival_us_max: f64,
    pub skipped_bad: u64,
    pub skipped_ops: u64,
    pub filtered: u64,
    /// Requests before the first request's time, read at time 0.
    pub clamped: u64,
}

impl TraceStats {
    /// `(size, count)` pairs of writes, ascending by size (what
    /// `mosaic_model::advise` takes).
    pub fn write_size_counts(&self) -> Vec<(u64, u64)> {
        self.write_sizes.iter().map(|(&s, &c)| (s, c)).collect()
    }
}

/// Disjoint, non-adjacent extents `[start, end)` with their total length.
#[derive(Default)]
struct Extents {
    map: BTreeMap<u64, u64>,
    total: u64,
}

impl Extents {
    fn insert(&mut self, mut start: u64, mut end: u64) {
        if start >= end {
            return;
        }
        if let Some((&s, &e)) = self.map.range(..=start).next_back() {
            if e >= end {
                return;
            }
            if e >= start {
                start = s;
                self.total -= e - s;
                self.map.remove(&s);
            }
        }
        while let Some((&s, &e)) = self.map.range(start..=end).next() {
            end = end.max(e);
            self.total -= e - s;
            self.map.remove(&s);
        }
        self.map.insert(start, end);
        self.total += end - start;
    }
}

const SUB_BITS: u32 = 7;
const SUB: usize = 1 << SUB_BITS;

/// Log-linear histogram of u64 values.
struct LogHist {
    counts: Vec<u64>,
    n: u64,
    max: u64,
}

impl LogHist {
    fn new() -> LogHist {
        LogHist { counts: vec![0; (64 - SUB_BITS as usize + 1) * SUB], n: 0, max: 0 }
    }

    fn index(v: u64) -> usize {
        if v < SUB as u64 {
            return v as usize;
        }
        let shift = 63 - v.leading_zeros() - SUB_BITS;
        ((shift as usize + 1) << SUB_BITS) | ((v >> shift) as usize & (SUB - 1))
    }

    /// Midpoint of bucket `i`.
    fn value(i: usize) -> u64 {
        let block = i >> SUB_BITS;
        let m = (i & (SUB - 1)) as u64;
        if block == 0 {
            return m;
        }
        let shift = block as u32 - 1;
        ((SUB as u64 | m) << shift) + ((1u64 << shift) >> 1)
    }

    fn add(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.n += 1;
        self.max = self.max.max(v);
    }

    /// Nearest-rank percentile, `p` in (0, 1].
    fn percentile(&self, p: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((p * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::value(i).min(self.max);
            }
        }
        self.max
    }
}

fn bucket(len: u64) -> usize {
    (0..BUCKETS - 1).find(|&i| len <= 512u64 << i).unwrap_or(BUCKETS - 1)
}

fn bucket_label(i: usize) -> String {
    if i == BUCKETS - 1 {
        return ">1M".into();
    }
    mosaic_size::short(512u64 << i)
}

/// Read the whole trace and summarise it.  Memory: the footprint extents,
/// the distinct write sizes and a fixed 60 KiB histogram.
pub fn stats(mut r: TraceReader) -> Result<TraceStats, TraceError> {
    let mut hist = [[0u64; 2]; BUCKETS];
    let mut write_sizes = BTreeMap::new();
    let mut write_sizes_other = 0;
    let (mut reads, mut writes, mut rb, mut wb) = (0u64, 0u64, 0u64, 0u64);
    let mut blocks = Extents::default();
    let mut seq = 0u64;
    let mut prev_end: Option<u64> = None;
    let mut prev_t: Option<u64> = None;
    let mut gaps = LogHist::new();
    let mut last_t = 0;
    for req in r.by_ref() {
        let q = req?;
        let end = q.offset.saturating_add(q.len);
        match q.op {
            Op::Read => {
                reads += 1;
                rb = rb.saturating_add(q.len);
                hist[bucket(q.len)][0] += 1;
            }
            Op::Write => {
                writes += 1;
                wb = wb.saturating_add(q.len);
                hist[bucket(q.len)][1] += 1;
                if write_sizes.len() < MAX_WRITE_SIZES || write_sizes.contains_key(&q.len) {
                    *write_sizes.entry(q.len).or_insert(0) += 1;
                } else {
                    write_sizes_other += 1;
                }
            }
        }
        blocks.insert(q.offset / 4096, end.div_ceil(4096));
        if prev_end == Some(q.offset) {
            seq += 1;
        }
        prev_end = Some(end);
        if let Some(p) = prev_t {
            gaps.add(q.time_ns.saturating_sub(p));
        }
        prev_t = Some(q.time_ns);
        last_t = last_t.max(q.time_ns);
    }
    let n = reads + writes;
    // In floating point: two byte totals may add past u64 (a trace's sizes
    // are only bounded by their offsets).
    let share = |a: u64, b: u64| if a == 0 && b == 0 { 0.0 } else { a as f64 / (a as f64 + b as f64) };
    let us = |ns: u64| ns as f64 / 1e3;
    Ok(TraceStats {
        file: r.name().to_string(),
        format: r.format(),
        requests: n,
        reads,
        writes,
        read_bytes: rb,
        write_bytes: wb,
        read_share_count: share(reads, writes),
        write_share_count: share(writes, reads),
        read_share_bytes: share(rb, wb),
        write_share_bytes: share(wb, rb),
        size_histogram: (0..BUCKETS)
            .map(|i| SizeBucket {
                label: bucket_label(i),
                max_bytes: (i < BUCKETS - 1).then(|| 512u64 << i),
                reads: hist[i][0],
                writes: hist[i][1],
            })
            .collect(),
        write_sizes,
        write_sizes_other,
        footprint_blocks: blocks.total,
        footprint_bytes: blocks.total.saturating_mul(4096),
        sequential_fraction: if n == 0 { 0.0 } else { seq as f64 / n as f64 },
        duration_s: last_t as f64 / 1e9,
        interarrival_us_p50: us(gaps.percentile(0.50)),
        interarrival_us_p90: us(gaps.percentile(0.90)),
        interarrival_us_p99: us(gaps.percentile(0.99)),
        interarrival_us_max: us(gaps.max),
        skipped_bad: r.skipped_bad(),
        skipped_ops: r.skipped_ops(),
        filtered: r.filtered(),
        clamped: r.clamped(),
    })
}

impl fmt::Display for TraceStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |x: f64| x * 100.0;
        writeln!(f, "trace          {} ({})", self.file, self.format)?;
        writeln!(f, "requests       {} over {:.3} s", self.requests, self.duration_s)?;
        writeln!(
            f,
            "reads          {:>10} ({:5.1}% of requests)  {:>11} ({:5.1}% of bytes)",
            self.reads,
            pct(self.read_share_count),
            human(self.read_bytes),
            pct(self.read_share_bytes)
        )?;
        writeln!(
            f,
            "writes         {:>10} ({:5.1}% of requests)  {:>11} ({:5.1}% of bytes)",
            self.writes,
            pct(self.write_share_count),
            human(self.write_bytes),
            pct(self.write_share_bytes)
        )?;
        writeln!(f, "footprint      {} distinct 4 KiB blocks ({})", self.footprint_blocks, human(self.footprint_bytes))?;
        writeln!(f, "sequential     {:.1}% of requests start where the previous one ended", pct(self.sequential_fraction))?;
        writeln!(
            f,
            "inter-arrival  p50 {:.1} us, p90 {:.1} us, p99 {:.1} us, max {:.1} us",
            self.interarrival_us_p50, self.interarrival_us_p90, self.interarrival_us_p99, self.interarrival_us_max
        )?;
        if self.skipped_bad + self.skipped_ops + self.filtered > 0 {
            writeln!(f, "skipped        {} malformed lines, {} other ops, {} filtered by device", self.skipped_bad, self.skipped_ops, self.filtered)?;
        }
        if self.clamped > 0 {
            writeln!(f, "warning        {} requests earlier than the first request (timestamps out of order) read at time 0", self.clamped)?;
        }
        writeln!(f, "request sizes  {:>6} {:>10} {:>10}", "<=", "reads", "writes")?;
        let max = self.size_histogram.iter().map(SizeBucket::count).max().unwrap_or(0).max(1);
        for b in self.size_histogram.iter().filter(|b| b.count() > 0) {
            writeln!(f, "               {:>6} {:>10} {:>10} {}", b.label, b.reads, b.writes, "#".repeat((b.count() * 30).div_ceil(max) as usize))?;
        }
        if !self.write_sizes.is_empty() {
            let mut top: Vec<(u64, u64)> = self.write_size_counts();
            top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let list: Vec<String> = top.iter().take(5).map(|(s, c)| format!("{} x{}", human(*s), c)).collect();
            writeln!(f, "top write sizes {} ({} distinct)", list.join(", "), self.write_sizes.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_merge() {
        let mut e = Extents::default();
        e.insert(10, 20);
        e.insert(30, 40);
        assert_eq!(e.total, 20);
        e.insert(15, 35);
        assert_eq!((e.total, e.map.len()), (30, 1));
        e.insert(40, 41);
        assert_eq!((e.total, e.map.len()), (31, 1));
        e.insert(0, 5);
        e.insert(12, 13);
        assert_eq!((e.total, e.map.len()), (36, 2));
        e.insert(0, u64::MAX);
        assert_eq!((e.total, e.map.len()), (u64::MAX, 1));
    }

    #[test]
    fn extents_match_a_set() {
        let mut e = Extents::default();
        let mut set = std::collections::HashSet::new();
        let mut x = 12345u64;
        for _ in 0..2000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let s = (x >> 33) % 500;
            let l = (x >> 20) % 9;
            e.insert(s, s + l);
            set.extend(s..s + l);
        }
        assert_eq!(e.total, set.len() as u64);
    }

    #[test]
    fn histogram_percentiles() {
        let mut h = LogHist::new();
        for v in 1..=1000u64 {
            h.add(v * 1000);
        }
        for (p, want) in [(0.5, 500_000.0), (0.9, 900_000.0), (0.99, 990_000.0)] {
            let got = h.percentile(p) as f64;
            assert!((got - want).abs() / want < 0.005, "p{p}: {got}");
        }
        assert_eq!(h.percentile(1.0), 1_000_000);
        for v in [0, 1, 127, 128, 255, 256, 1 << 40, u64::MAX] {
            let i = LogHist::index(v);
            assert!(i < h.counts.len());
            let mid = LogHist::value(i) as f64;
            assert!((mid - v as f64).abs() <= v as f64 / 256.0 + 0.5, "{v} -> {mid}");
        }
    }

    #[test]
    fn buckets() {
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(512), 0);
        assert_eq!(bucket(513), 1);
        assert_eq!(bucket(4096), 3);
        assert_eq!(bucket(1 << 20), 11);
        assert_eq!(bucket((1 << 20) + 1), 12);
        assert_eq!(bucket_label(3), "4K");
        assert_eq!(bucket_label(11), "1M");
        assert_eq!(bucket_label(12), ">1M");
    }
}
