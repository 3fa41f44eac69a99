//! `mosaic eval`: reproducible experiments, one command each.
//!
//! `mosaic eval cbro` — Code Block Request Offloading (Jeremic et al. 2015,
//! Sect. 5): 16 HDD data drives with SSD check drive arrays against HDD
//! RAID-5 and RAID-6 of 16 drives, random single-unit writes of 4 KiB to
//! 1 MiB (unit = request size, so d = 1).  The model predicts CBRO's gain
//! over distributed code blocks as (d+k)/d: 2x over RAID-5, 3x over RAID-6.
//! A CBRO array whose CDA is one HDD shows what happens when the CDA is too
//! slow.

use anyhow::Result;
use clap::{Args, Subcommand};
use serde::Serialize;

use mosaic_core::WritePolicy;
use mosaic_sim::{Mode, Pattern, SimConfig, Simulator, Synthetic};

use crate::cmd_sim::{build_drives, layout_for};
use crate::util::{print_json, table};

#[derive(Subcommand)]
pub enum EvalCmd {
    /// CBRO vs RAID-5/RAID-6 on 16 HDDs, 4 KiB..1 MiB random single-unit writes
    Cbro(CbroArgs),
    /// Small-write caches none/fpc/ppc/ppc+data: Postmark-like, IOzone-like, width sweep, real trace, 4 KiB random writes
    Ppc(crate::eval_ppc::PpcArgs),
    /// DVS-RAID vs HDD, Segment and Sblock RAID-5 on SMR: trace and synthetic workloads, cache and segment sweeps
    Dvs(crate::cmd_dvs::EvalDvsArgs),
    /// ReHypar hybrid SSD+HDD tier: fast-tier space utilisation, IOzone-like and Postmark-like workloads, the real trace; tier vs all-SSD, all-HDD, LRU cache
    Tier(EvalTierArgs),
    /// Adaptive layout analysis on a real trace: train/test split, correlation graph, min-conflict placement from a Zipf-like initial layout, movement and parallel depth vs the static layout, correlator speed-up
    Adapt(EvalAdaptArgs),
}

#[derive(Args)]
pub struct EvalAdaptArgs {
    /// The trace (any format mosaic reads; default
    /// shared/traces/cloudphysics-vscsi-part1.csv, looked for beside the
    /// working directory and the mosaic binary and their parents)
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
    /// Requests read (split 50/50 into train and test)
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: u64,
    /// Remap unit
    #[arg(long, value_parser = crate::util::size, default_value = "4K")]
    pub unit: u64,
    /// Drives of the all-flash array (the paper's has 14)
    #[arg(long, default_value_t = 14, value_parser = crate::util::at_least_one)]
    pub drives: usize,
    /// The arrays evaluated: the all-flash one, the hard-disk one (planned with and without HDD grouping), or both
    #[arg(long, value_parser = ["ssd", "hdd", "both"], default_value = "both")]
    pub array: String,
    /// Drives of the hard-disk array (the paper's has 100; the default, 48, is about the most the remapped raid0's map allows at 4K units, and the HDD part's time barely depends on the count)
    #[arg(long, default_value_t = mosaic_exp::adapt::HDD_DRIVES, value_parser = crate::util::at_least_one)]
    pub hdd_drives: usize,
    /// Only alpha = 0 and 1, threshold 1, threads 1 and 2 (for tests)
    #[arg(long)]
    pub quick: bool,
    /// Instead of the trace: a synthetic one with this many planted cliques
    /// of --drives units each (the right answer known: no conflict, depth 1)
    #[arg(long)]
    pub planted: Option<u64>,
    /// Write adapt-response.svg, adapt-cost-gain.svg and adapt-depth.svg into this directory
    #[arg(long)]
    pub plot: Option<std::path::PathBuf>,
    /// Overwrite plot files that are members or journals of an array
    #[arg(long)]
    pub force: bool,
    /// Every number as JSON
    #[arg(long)]
    pub json: bool,
    /// Seed of the initial layout and the planted trace
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Args)]
pub struct EvalTierArgs {
    /// Write tier-space.svg, tier-iozone.svg, tier-postmark.svg and tier-trace.svg into this directory
    #[arg(long)]
    pub plot: Option<std::path::PathBuf>,
    /// Overwrite plot files that are members or journals of an array
    #[arg(long)]
    pub force: bool,
    /// Every number as JSON
    #[arg(long)]
    pub json: bool,
    /// Small workloads (seconds in a debug build; for tests)
    #[arg(long)]
    pub quick: bool,
    /// The real trace (CloudPhysics format; default shared/traces/cloudphysics-vscsi-part1.csv beside the checkout,
    /// skipped with a note when that is absent)
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
    /// Replay at most this many trace requests (default: 20,000; 2,000 with --quick)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub trace_requests: Option<u64>,
    /// Seed of the synthetic workloads
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Args)]
pub struct CbroArgs {
    /// Writes per configuration and size
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: u64,
    /// Drive model of the 16 data drives (and of the RAID-5/6 baselines)
    #[arg(long, default_value = "hdd:seagate-st91000640ss")]
    pub data_device: String,
    /// Drive model of the check drive arrays
    #[arg(long, default_value = "ssd:samsung-830-128g")]
    pub cda_device: String,
    /// Writes per stripe unit in the stripe-unit figures (Fig. 10, 13)
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub unit_requests: u64,
    /// Which parts: offload (CBRO vs RAID-5/6), units (Fig. 10 and 13), all
    #[arg(long, default_value = "all", value_parser = ["all", "offload", "units"])]
    pub part: String,
    /// Print every row as JSON
    #[arg(long)]
    pub json: bool,
    /// Write an SVG of the offload part's throughput by request size
    #[arg(long)]
    pub plot: Option<std::path::PathBuf>,
    /// Overwrite a plot file that is a member or journal of an array
    #[arg(long)]
    pub force: bool,
}

pub fn run(cmd: EvalCmd) -> Result<i32> {
    match cmd {
        EvalCmd::Cbro(a) => cbro(a),
        EvalCmd::Ppc(a) => crate::eval_ppc::run(a),
        EvalCmd::Dvs(a) => crate::cmd_dvs::eval_dvs(a),
        EvalCmd::Tier(a) => eval_tier(a),
        EvalCmd::Adapt(a) => eval_adapt(a),
    }
}

/// `mosaic eval adapt`: the adaptive layout's analysis, paper beside mosaic.
fn eval_adapt(a: EvalAdaptArgs) -> Result<i32> {
    use mosaic_exp::adapt;
    if let Some(dir) = &a.plot {
        crate::util::check_output_dir(dir, &mosaic_exp::adapt_plot::PLOTS, a.force)?;
    }
    let arrays = match a.array.as_str() {
        "ssd" => vec![adapt::Array::Ssd],
        "hdd" => vec![adapt::Array::Hdd],
        _ => vec![adapt::Array::Ssd, adapt::Array::Hdd],
    };
    let mut cfg = adapt::AdaptEvalConfig { requests: a.requests, unit: a.unit, drives: a.drives, hdd_drives: a.hdd_drives, arrays, seed: a.seed, ..Default::default() };
    if a.quick {
        cfg.alphas = vec![0.0, 1.0];
        cfg.thresholds = vec![1];
        cfg.threads = vec![1, 2];
    }
    let (pb, tick) = crate::util::step_ticks("eval");
    let r = match a.planted {
        Some(g) => adapt::run_requests_with(format!("a planted trace ({g} cliques of {} units, 20 rounds)", a.drives), &adapt::planted(&cfg, g, 20, a.seed), &cfg, &tick)?,
        None => adapt::run_with(&crate::util::required_trace(a.trace.as_deref(), "--planted N for a synthetic trace")?, &cfg, &tick)?,
    };
    pb.finish_and_clear();
    let written = match &a.plot {
        Some(d) => mosaic_exp::adapt_plot::write_plots(d, &r).map_err(anyhow::Error::msg)?,
        None => Vec::new(),
    };
    if a.json {
        print_json(&r)?;
    } else {
        print!("{}", r.text());
    }
    crate::util::say_written(&written, a.json);
    Ok(0)
}

/// `mosaic eval tier`: the ReHypar experiments, paper beside mosaic.
fn eval_tier(a: EvalTierArgs) -> Result<i32> {
    use mosaic_exp::tier;
    if let Some(dir) = &a.plot {
        crate::util::check_output_dir(dir, &tier::Results::PLOTS, a.force)?;
    }
    let mut cfg = if a.quick { tier::TierEvalConfig::quick() } else { tier::TierEvalConfig::default() };
    cfg.seed = a.seed;
    if let Some(n) = a.trace_requests {
        cfg.trace_first = n;
    }
    let trace = crate::util::eval_trace(a.trace.as_deref(), "the trace experiment is skipped")?;
    let (pb, tick) = crate::util::step_ticks("eval");
    let r = tier::run_all_with(trace.as_deref(), &cfg, &tick)?;
    pb.finish_and_clear();
    let written = match &a.plot {
        Some(d) => r.plot(d)?,
        None => Vec::new(),
    };
    if a.json {
        print_json(&r)?;
    } else {
        print!("{}", r.table());
    }
    crate::util::say_written(&written, a.json);
    Ok(0)
}

/// One configuration at one size.
#[derive(Serialize, Clone)]
pub struct Point {
    pub config: String,
    pub size: u64,
    pub iops: f64,
    pub mib_per_s: f64,
}

#[derive(Serialize)]
struct CbroRow {
    size: u64,
    raid5_iops: f64,
    raid6_iops: f64,
    cbro1_iops: f64,
    cbro2_iops: f64,
    cbro1_hdd_cda_iops: f64,
    cbro1_raid5_cda_iops: f64,
    gain_over_raid5: f64,
    gain_over_raid6: f64,
    model_gain_over_raid5: f64,
    model_gain_over_raid6: f64,
    hdd_cda_gain_over_raid5: f64,
    /// The model's check that one SSD CDA keeps up with 16 data drives.
    cda_keeps_up: bool,
    cda_check: String,
}

/// Nanoseconds per random `size`-byte read or write of one drive when its
/// queue is kept full (1 / saturated IOPS).
pub fn saturated_op_ns(device: &str, write: bool, size: u64) -> Result<f64> {
    let drives = build_drives(&[device.to_string()], 1)?;
    let qd = drives[0].queue_depth().clamp(1, 256);
    let cap = drives[0].capacity();
    let layout = layout_for("raid0", 1, size, 512, cap, WritePolicy::Auto)?;
    let sim = Simulator::new(&layout, drives, SimConfig { mode: Mode::Closed { queue_depth: qd }, ..Default::default() })?;
    let pattern = if write { Pattern::RandWrite } else { Pattern::RandRead };
    let w = Synthetic { pattern, size, count: 4000, footprint: (64u64 << 30).min(cap), seed: 5, interval_ns: 0 };
    let r = sim.run(w.requests())?;
    Ok(1e9 / r.iops)
}

/// Saturated random single-unit write throughput (IOPS) of `level` over
/// `devices` with unit = `size`.
fn saturated_iops(level: &str, devices: &[String], size: u64, requests: u64) -> Result<f64> {
    let (layout, drives) = crate::cmd_sim::sim_array(level, 16, devices, size, 512, WritePolicy::Auto)?;
    let k = layout.geometry().k as u64;
    let sim = Simulator::new(&layout, drives, SimConfig { mode: Mode::Closed { queue_depth: 512 }, ..Default::default() })?;
    let w = Synthetic { pattern: Pattern::AlignedUnits { d: 1, unit: size, k }, size, count: requests, footprint: 64 << 30, seed: 11, interval_ns: 0 };
    let r = sim.run(w.requests())?;
    Ok(r.iops)
}

fn cbro(a: CbroArgs) -> Result<i32> {
    if let Some(p) = &a.plot {
        crate::util::check_output(p, a.force)?;
    }
    let offload = matches!(a.part.as_str(), "all" | "offload");
    let units = matches!(a.part.as_str(), "all" | "units");
    if a.plot.is_some() && !offload {
        anyhow::bail!("--plot draws the offload part (throughput by request size); it has nothing to draw with --part {}", a.part);
    }
    let rows = if offload { cbro_offload(&a)? } else { vec![] };
    let pb = crate::util::steps(if units { crate::eval_cbro::runs() } else { 0 }, "eval");
    let unit_cases = if units { crate::eval_cbro::stripe_units(a.unit_requests, &|| pb.inc(1))? } else { vec![] };
    pb.finish_and_clear();
    let written: Vec<&std::path::PathBuf> = a.plot.iter().collect();
    if a.json {
        print_json(&serde_json::json!({ "offload": rows, "stripe_units": unit_cases }))?;
        crate::util::say_written(&written, true);
        return Ok(0);
    }
    if offload {
        print_offload(&a, &rows);
    }
    crate::eval_cbro::print(&unit_cases);
    crate::util::say_written(&written, false);
    Ok(0)
}

/// CBRO against RAID-5/6 (Sect. 6.4): saturated single-unit writes.
fn cbro_offload(a: &CbroArgs) -> Result<Vec<CbroRow>> {
    let hdd = a.data_device.clone();
    let ssd = a.cda_device.clone();
    let mut rows = Vec::new();
    let mut points = Vec::new();
    const SIZES_KIB: [u64; 6] = [4, 8, 16, 64, 256, 1024];
    // A bar over the runs: six configurations at each size.
    let pb = crate::util::steps(6 * SIZES_KIB.len() as u64, "eval");
    let iops = |level: &str, devices: &[String], size: u64| {
        let r = saturated_iops(level, devices, size, a.requests);
        pb.inc(1);
        r
    };
    for kib in SIZES_KIB {
        let s = kib << 10;
        let r5 = iops("raid5", std::slice::from_ref(&hdd), s)?;
        let r6 = iops("raid6", std::slice::from_ref(&hdd), s)?;
        let c1 = iops("cbro:16+1", &[hdd.clone(), format!("16={ssd}")], s)?;
        let c2 = iops("cbro:16+2", &[hdd.clone(), format!("16-17={ssd}")], s)?;
        let c1h = iops("cbro:16+1", std::slice::from_ref(&hdd), s)?;
        // The CDA itself a raid5 of 4 SSDs (a nested plan per code unit).
        let c1r = iops("cbro:16+1,cda=raid5:4", &[hdd.clone(), format!("16={ssd}")], s)?;
        // The model's performance check for one SSD CDA (saturated rates).
        let check = crate::cmd_model::cbro_rows(&hdd, &ssd, 16, 1, &[s])?.remove(0).check;
        for (name, v) in [("raid5 x16 HDD", r5), ("raid6 x16 HDD", r6), ("cbro:16+1 SSD CDA", c1), ("cbro:16+2 SSD CDAs", c2), ("cbro:16+1 HDD CDA", c1h), ("cbro:16+1 raid5:4 SSD CDA", c1r)] {
            points.push(Point { config: name.into(), size: s, iops: v, mib_per_s: v * s as f64 / 1048576.0 });
        }
        rows.push(CbroRow {
            size: s,
            raid5_iops: r5,
            raid6_iops: r6,
            cbro1_iops: c1,
            cbro2_iops: c2,
            cbro1_hdd_cda_iops: c1h,
            cbro1_raid5_cda_iops: c1r,
            gain_over_raid5: c1 / r5,
            gain_over_raid6: c2 / r6,
            model_gain_over_raid5: mosaic_model::cbro_gain(1, 1),
            model_gain_over_raid6: mosaic_model::cbro_gain(1, 2),
            hdd_cda_gain_over_raid5: c1h / r5,
            cda_keeps_up: check.performance_ok,
            cda_check: check.message.clone(),
        });
    }
    pb.finish_and_clear();
    if let Some(p) = &a.plot {
        plot_points(p, "CBRO: random single-unit writes, 16 data drives", &points).map_err(anyhow::Error::msg)?;
    }
    Ok(rows)
}

fn print_offload(a: &CbroArgs, rows: &[CbroRow]) {
    let mut t = vec![vec![
        "size".into(),
        "raid5 IOPS".into(),
        "raid6 IOPS".into(),
        "cbro16+1 IOPS".into(),
        "cbro16+2 IOPS".into(),
        "vs raid5 (model 2.00)".into(),
        "vs raid6 (model 3.00)".into(),
        "HDD-CDA vs raid5".into(),
        "raid5:4-CDA vs raid5".into(),
        "SSD CDA keeps up".into(),
    ]];
    for r in rows {
        t.push(vec![
            crate::util::short(r.size),
            format!("{:.0}", r.raid5_iops),
            format!("{:.0}", r.raid6_iops),
            format!("{:.0}", r.cbro1_iops),
            format!("{:.0}", r.cbro2_iops),
            format!("{:.2}", r.gain_over_raid5),
            format!("{:.2}", r.gain_over_raid6),
            format!("{:.2}", r.hdd_cda_gain_over_raid5),
            format!("{:.2}", r.cbro1_raid5_cda_iops / r.raid5_iops),
            if r.cda_keeps_up { "yes".into() } else { "no".into() },
        ]);
    }
    println!("CBRO on {} data drives, CDA {} (Jeremic et al. 2015, Sect. 5); closed loop, queue depth 512, {} writes each", a.data_device, a.cda_device, a.requests);
    print!("{}", table(&t));
    for r in rows.iter().filter(|r| !r.cda_keeps_up) {
        println!("warning at {}: {}", crate::util::short(r.size), r.cda_check);
    }
}

/// Throughput (MiB/s) by request size, one line per configuration.
pub fn plot_points(path: &std::path::Path, title: &str, points: &[Point]) -> Result<(), String> {
    use mosaic_sim::plot::{Axis, Figure, Panel, Plot, Series};
    let mut names: Vec<&str> = Vec::new();
    for p in points {
        if !names.contains(&p.config.as_str()) {
            names.push(&p.config);
        }
    }
    let mut sizes: Vec<f64> = points.iter().map(|p| p.size as f64 / 1024.0).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    let series = names.iter().enumerate().map(|(i, n)| Series::line(i, *n, points.iter().filter(|p| p.config == *n).map(|p| (p.size as f64 / 1024.0, p.mib_per_s)))).collect();
    let x = Axis::log("request size = stripe unit (KiB)").ticks(sizes);
    let panel = Panel { title: String::new(), y: Axis::linear("random write throughput (MiB/s)").from_zero(), plot: Plot::Lines { x, series } };
    Figure::new(title, vec![panel], 1, (900, 560)).write(path)
}
