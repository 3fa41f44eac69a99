//! Built-in synthetic workloads, as seeded request streams.

use std::convert::Infallible;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use mosaic_trace::{Op, Request};

/// What a synthetic workload does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Pattern {
    /// Random `size`-byte writes aligned to `size` within the footprint.
    RandWrite,
    /// Random `size`-byte reads.
    RandRead,
    /// Sequential `size`-byte writes, wrapping at the footprint.
    SeqWrite,
    /// Random reads and writes, `read_pct` percent reads.
    Mixed { read_pct: u8 },
    /// Writes of exactly `d` whole stripe units inside one stripe, at a
    /// random stripe and a random first column: the paper's "aligned random
    /// writes of whole units" (u = s/d).
    AlignedUnits { d: u64, unit: u64, k: u64 },
}

/// A synthetic workload.
#[derive(Debug, Clone, Serialize)]
pub struct Synthetic {
    pub pattern: Pattern,
    /// Request size in bytes (ignored by AlignedUnits, which uses d·unit).
    pub size: u64,
    pub count: u64,
    /// Bytes of address space the workload touches.
    pub footprint: u64,
    pub seed: u64,
    /// Arrival interval in ns for open-loop replays (0: all at once).
    pub interval_ns: u64,
}

impl Synthetic {
    /// Parse `randwrite`, `randread`, `seqwrite`, `mixed:70` (70% reads).
    pub fn parse_pattern(s: &str) -> Result<Pattern, String> {
        match s {
            "randwrite" => Ok(Pattern::RandWrite),
            "randread" => Ok(Pattern::RandRead),
            "seqwrite" => Ok(Pattern::SeqWrite),
            _ => {
                if let Some(p) = s.strip_prefix("mixed:") {
                    let pct: u8 = p.parse().map_err(|_| format!("bad read percentage in {s:?}"))?;
                    if pct > 100 {
                        return Err(format!("read percentage {pct} is over 100"));
                    }
                    return Ok(Pattern::Mixed { read_pct: pct });
                }
                Err(format!("unknown synthetic workload {s:?}: expected randwrite, randread, seqwrite or mixed:PCT"))
            }
        }
    }

    /// The request stream.
    pub fn requests(&self) -> impl Iterator<Item = Result<Request, Infallible>> + '_ {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let size = self.size.max(512);
        let slots = (self.footprint / size).max(1);
        (0..self.count).map(move |i| {
            let time_ns = i * self.interval_ns;
            let (op, offset, len) = match self.pattern {
                Pattern::RandWrite => (Op::Write, rng.gen_range(0..slots) * size, size),
                Pattern::RandRead => (Op::Read, rng.gen_range(0..slots) * size, size),
                Pattern::SeqWrite => (Op::Write, (i % slots) * size, size),
                Pattern::Mixed { read_pct } => {
                    let op = if rng.gen_range(0..100) < read_pct as u32 { Op::Read } else { Op::Write };
                    (op, rng.gen_range(0..slots) * size, size)
                }
                Pattern::AlignedUnits { d, unit, k } => {
                    let stripes = (self.footprint / (k * unit)).max(1);
                    let s = rng.gen_range(0..stripes);
                    let col = rng.gen_range(0..=(k - d.min(k)));
                    (Op::Write, s * k * unit + col * unit, d * unit)
                }
            };
            Ok(Request { time_ns, op, offset, len })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_and_in_footprint() {
        let w = Synthetic { pattern: Pattern::RandWrite, size: 4096, count: 1000, footprint: 1 << 20, seed: 7, interval_ns: 0 };
        let a: Vec<_> = w.requests().map(|r| r.unwrap()).collect();
        let b: Vec<_> = w.requests().map(|r| r.unwrap()).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|r| r.offset % 4096 == 0 && r.offset + r.len <= 1 << 20 && r.op == Op::Write));
        let u = Synthetic { pattern: Pattern::AlignedUnits { d: 3, unit: 65536, k: 8 }, ..w };
        for r in u.requests().map(|r| r.unwrap()) {
            assert_eq!(r.len, 3 * 65536);
            let in_stripe = r.offset % (8 * 65536);
            assert!(in_stripe % 65536 == 0 && in_stripe + r.len <= 8 * 65536);
        }
        assert!(Synthetic::parse_pattern("mixed:101").is_err());
        assert_eq!(Synthetic::parse_pattern("mixed:70").unwrap(), Pattern::Mixed { read_pct: 70 });
    }
}
