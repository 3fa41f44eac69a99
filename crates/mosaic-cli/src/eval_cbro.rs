//! `mosaic eval cbro`, stripe-unit part: device-aware striping (Jeremic et
//! al. 2015, Sect. 6.3), Fig. 10 (HDD arrays) and Fig. 13 (SSD arrays),
//! replayed in virtual time beside what the paper measured.
//!
//! ```text
//!   Fig. 10: raid5 / raid6 of n = 10 Seagate ST91000640SS, u = 4 KiB … 4 MiB
//!            writes of uniform size in the RMW range (raid5 ≤ 930 KiB,
//!            raid6 ≤ 377 KiB) or the FSW range (949–1280 / 378–512 KiB)
//!            paper: u = 4096 KiB best in all four
//!   Fig. 13: raid5 n = 9 / raid6 n = 10 Samsung 830 128 GB (steady state,
//!            27 % OP), u = 4 … 128 KiB, writes of 512 B … 512 KiB ("mixed")
//!            or 512 B … 8 KiB ("sub-page")
//!            paper: mixed: 8 KiB best, 128 KiB worst;
//!                   sub-page: 4 KiB ≈ 10 % above the rest (raid6: 4 and 8 KiB)
//! ```
//!
//! Every write starts at a random sector and has a random size (uniform in
//! sectors), as the paper's benchmark; closed loop at queue depth 32, the
//! paper's fio depth.  The paper gives its Fig. 10 and 13 as bars without
//! printed values, so what it reports is which unit is best and worst, and
//! (Fig. 13, sub-page) by how much: those are the quantities compared.

use anyhow::Result;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use mosaic_core::{Layout, WritePolicy};
use mosaic_sim::{Mode, SimConfig, Simulator};
use mosaic_trace::{Op, Request};

use crate::util::table;

const HDD: &str = "hdd:seagate-st91000640ss";
/// The paper's preconditioned SSD-L with 27 % over-provisioning.
const SSD: &str = "ssd:samsung-830-128g,steady_state=true,over_provisioning=0.27,subpage_read=true";
const KIB: u64 = 1024;

/// One bar group of a figure: an array, a workload, the units tried.
struct Case {
    fig: &'static str,
    level: &'static str,
    n: usize,
    device: &'static str,
    workload: &'static str,
    /// Request sizes, bytes, inclusive (multiples of 512).
    sizes: (u64, u64),
    units_kib: &'static [u64],
    /// What the paper measured.
    paper: Paper,
}

#[derive(Clone, Copy)]
struct Paper {
    best_kib: &'static [u64],
    worst_kib: &'static [u64],
    /// The 4 KiB unit over the mean of the others (sub-page case).
    ratio_4k: Option<f64>,
}

const FIG10_UNITS: &[u64] = &[4, 16, 64, 256, 1024, 4096];
const FIG13_UNITS: &[u64] = &[4, 8, 16, 32, 64, 128];
const FIG10_PAPER: Paper = Paper { best_kib: &[4096], worst_kib: &[], ratio_4k: None };
const MIXED_PAPER: Paper = Paper { best_kib: &[8], worst_kib: &[128], ratio_4k: None };

fn cases() -> Vec<Case> {
    let c = |fig, level, n, device, workload, sizes, units_kib, paper| Case { fig, level, n, device, workload, sizes, units_kib, paper };
    vec![
        c("10", "raid5", 10, HDD, "512B-930K (RMW)", (512, 930 * KIB), FIG10_UNITS, FIG10_PAPER),
        c("10", "raid5", 10, HDD, "949K-1280K (FSW)", (949 * KIB, 1280 * KIB), FIG10_UNITS, FIG10_PAPER),
        c("10", "raid6", 10, HDD, "512B-377K (RMW)", (512, 377 * KIB), FIG10_UNITS, FIG10_PAPER),
        c("10", "raid6", 10, HDD, "378K-512K (FSW)", (378 * KIB, 512 * KIB), FIG10_UNITS, FIG10_PAPER),
        c("13", "raid5", 9, SSD, "512B-512K mixed", (512, 512 * KIB), FIG13_UNITS, MIXED_PAPER),
        c("13", "raid6", 10, SSD, "512B-512K mixed", (512, 512 * KIB), FIG13_UNITS, MIXED_PAPER),
        // "nearly equally high for all stripe unit sizes except of 4 KiB
        // (which is about 10% higher)"
        c("13", "raid5", 9, SSD, "512B-8K sub-page", (512, 8 * KIB), FIG13_UNITS, Paper { best_kib: &[4], worst_kib: &[], ratio_4k: Some(1.10) }),
        // "the highest … using a stripe unit size of 4 KiB and 8 KiB"
        c("13", "raid6", 10, SSD, "512B-8K sub-page", (512, 8 * KIB), FIG13_UNITS, Paper { best_kib: &[4, 8], worst_kib: &[], ratio_4k: Some(1.10) }),
    ]
}

/// One bar group, measured.
#[derive(Debug, Clone, Serialize)]
pub struct UnitCase {
    pub figure: &'static str,
    pub array: String,
    pub device: &'static str,
    pub workload: &'static str,
    /// (unit bytes, MiB/s, device operations per write).
    pub units: Vec<UnitPoint>,
    pub mosaic_best: u64,
    pub mosaic_worst: u64,
    pub paper_best: Vec<u64>,
    pub paper_worst: Vec<u64>,
    /// Throughput at 4 KiB over the mean of the other units.
    pub mosaic_ratio_4k: f64,
    pub paper_ratio_4k: Option<f64>,
    /// Mosaic's best unit is one the paper found best, and its worst one
    /// the paper found worst (where the paper names one).
    pub agrees: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct UnitPoint {
    pub unit: u64,
    pub mib_per_s: f64,
    pub device_ops_per_write: f64,
    pub rmw: u64,
    pub rcw: u64,
    pub fsw: u64,
}

/// Random writes: a random sector start, a size uniform in sectors.
fn writes(sizes: (u64, u64), capacity: u64, count: u64, seed: u64) -> Vec<Request> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (lo, hi) = (sizes.0 / 512, sizes.1 / 512);
    (0..count)
        .map(|_| {
            let len = rng.gen_range(lo..=hi) * 512;
            let offset = rng.gen_range(0..=(capacity - len) / 512) * 512;
            Request { time_ns: 0, op: Op::Write, offset, len }
        })
        .collect()
}

fn run_unit(c: &Case, unit: u64, count: u64) -> Result<UnitPoint> {
    let (layout, drives) = crate::cmd_sim::sim_array(c.level, c.n, &[c.device.to_string()], unit, 512, WritePolicy::Auto)?;
    let reqs = writes(c.sizes, layout.capacity(), count, 13);
    let sim = Simulator::new(&layout, drives, SimConfig { mode: Mode::Closed { queue_depth: 32 }, ..Default::default() })?;
    let r = sim.run(reqs.into_iter().map(Ok::<_, std::convert::Infallible>))?;
    let ops = (r.device_reads + r.device_writes) as f64 / r.writes.max(1) as f64;
    Ok(UnitPoint { unit, mib_per_s: r.mib_per_s, device_ops_per_write: ops, rmw: r.ops.stripes_rmw, rcw: r.ops.stripes_rcw, fsw: r.ops.stripes_fsw })
}

fn measure(c: &Case, count: u64, tick: &dyn Fn()) -> Result<UnitCase> {
    let mut units = Vec::with_capacity(c.units_kib.len());
    for &u in c.units_kib {
        units.push(run_unit(c, u * KIB, count)?);
        tick();
    }
    let by = |a: &&UnitPoint, b: &&UnitPoint| a.mib_per_s.total_cmp(&b.mib_per_s);
    let best = units.iter().max_by(by).map_or(0, |p| p.unit);
    let worst = units.iter().min_by(by).map_or(0, |p| p.unit);
    let four = units.iter().find(|p| p.unit == 4 * KIB).map_or(0.0, |p| p.mib_per_s);
    let others: Vec<f64> = units.iter().filter(|p| p.unit != 4 * KIB).map(|p| p.mib_per_s).collect();
    let ratio = four / (others.iter().sum::<f64>() / others.len().max(1) as f64);
    let paper_best: Vec<u64> = c.paper.best_kib.iter().map(|k| k * KIB).collect();
    let paper_worst: Vec<u64> = c.paper.worst_kib.iter().map(|k| k * KIB).collect();
    let agrees = paper_best.contains(&best) && (paper_worst.is_empty() || paper_worst.contains(&worst));
    Ok(UnitCase {
        figure: c.fig,
        array: format!("{} n={}", c.level, c.n),
        device: c.device,
        workload: c.workload,
        units,
        mosaic_best: best,
        mosaic_worst: worst,
        paper_best,
        paper_worst,
        mosaic_ratio_4k: ratio,
        paper_ratio_4k: c.paper.ratio_4k,
        agrees,
    })
}

/// How many runs [`stripe_units`] makes (for a progress bar).
pub fn runs() -> u64 {
    cases().iter().map(|c| c.units_kib.len() as u64).sum()
}

/// Every bar group of Fig. 10 and 13, `count` writes per unit.
pub fn stripe_units(count: u64, tick: &dyn Fn()) -> Result<Vec<UnitCase>> {
    cases().iter().map(|c| measure(c, count, tick)).collect()
}

fn units_list(us: &[u64]) -> String {
    if us.is_empty() {
        return "-".into();
    }
    us.iter().map(|&u| crate::util::short(u)).collect::<Vec<_>>().join(",")
}

/// The human tables: one per figure, MiB/s per unit, then best and worst
/// units and the 4 KiB ratio, paper beside mosaic.
pub fn print(cases: &[UnitCase]) {
    for fig in ["10", "13"] {
        let rows: Vec<&UnitCase> = cases.iter().filter(|c| c.figure == fig).collect();
        let Some(first) = rows.first() else { continue };
        let what = if fig == "10" { "HDD arrays" } else { "SSD arrays (steady state, 27% OP)" };
        println!("\nFig. {fig}: random-write MiB/s by stripe unit u, {what}; queue depth 32");
        println!("(the paper's bars carry no values: it reports the best and worst unit)");
        let mut head: Vec<String> = vec!["array".into(), "writes".into()];
        head.extend(first.units.iter().map(|p| crate::util::short(p.unit)));
        head.extend(["best paper/mosaic".into(), "worst p/m".into()]);
        let mut t = vec![head];
        for c in &rows {
            let mut r = vec![c.array.clone(), c.workload.into()];
            r.extend(c.units.iter().map(|p| format!("{:.1}", p.mib_per_s)));
            let short = crate::util::short;
            r.push(format!("{}/{}", units_list(&c.paper_best), short(c.mosaic_best)));
            r.push(format!("{}/{}", units_list(&c.paper_worst), short(c.mosaic_worst)));
            t.push(r);
        }
        print!("{}", table(&t));
        for c in rows.iter().filter(|c| c.paper_ratio_4k.is_some()) {
            println!("  {} {}: u=4K over the other units' mean: paper ~{:.2}, mosaic {:.2}", c.array, c.workload, c.paper_ratio_4k.unwrap_or(0.0), c.mosaic_ratio_4k);
        }
    }
    let agree = cases.iter().filter(|c| c.agrees).count();
    println!("best (and worst, where the paper names it) unit as in the paper: {agree} of {} bar groups", cases.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_sector_aligned_within_the_size_range_and_capacity() {
        let w = writes((512, 8192), 1 << 20, 2000, 1);
        assert!(w.iter().all(|r| r.offset % 512 == 0 && (512..=8192).contains(&r.len) && r.len % 512 == 0 && r.offset + r.len <= 1 << 20));
        // Uniform in sectors: both ends occur.
        assert!(w.iter().any(|r| r.len == 512) && w.iter().any(|r| r.len == 8192));
    }
}
