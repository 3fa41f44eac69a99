//! `mosaic model` and `mosaic advise`: the analytical random-write model
//! and the stripe-unit advisor.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;

use mosaic_drives::{DriveModel, ReqKind};
use mosaic_model::DriveTiming;

use crate::cmd_sim::TraceInput;
use crate::util::{human, print_json, short};

#[derive(Args)]
pub struct ModelArgs {
    /// Drive model: a preset (hdd:seagate-st91000640ss, ssd:samsung-830-128g ...)
    /// or file:PATH.toml
    #[arg(long, default_value = "hdd:seagate-st91000640ss")]
    pub device: String,
    /// Number of drives n
    #[arg(long, default_value_t = 9)]
    pub drives: usize,
    /// Code blocks per stripe k
    #[arg(long, default_value_t = 1)]
    pub codes: usize,
    /// Request sizes: MIN:MAX (the powers of two between) or MIN:MAX:STEP,
    /// e.g. 4K:4M
    #[arg(long, default_value = "4K:4M")]
    pub sizes: String,
    /// Also model CBRO with the code columns on check drive arrays of this drive
    #[arg(long)]
    pub cda_device: Option<String>,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct AdviseArgs {
    #[command(flatten)]
    pub input: TraceInput,
    /// Drive model of every member: a preset or file:PATH.toml
    #[arg(long, default_value = "hdd:seagate-st91000640ss")]
    pub device: String,
    /// Number of drives n
    #[arg(long, default_value_t = 9)]
    pub drives: usize,
    /// Code blocks per stripe k
    #[arg(long, default_value_t = 1)]
    pub codes: usize,
    /// Requests in flight together (load must balance among them)
    #[arg(long, default_value_t = 64, value_parser = crate::util::at_least_one)]
    pub queue_depth: usize,
    /// Print the advice and every candidate unit's estimate as JSON
    #[arg(long)]
    pub json: bool,
}

/// A drive model seen through the analytical model's eyes: isolated random
/// request service times.
pub struct ModelTiming(pub Box<dyn DriveModel>);

impl DriveTiming for ModelTiming {
    fn read_ns(&self, bytes: u64) -> f64 {
        self.0.random_service_ns(ReqKind::Read, bytes)
    }
    fn write_ns(&self, bytes: u64) -> f64 {
        self.0.random_service_ns(ReqKind::Write, bytes)
    }
}

pub fn timing(spec: &str) -> Result<ModelTiming> {
    let cfg = mosaic_drives::parse_device_spec(spec).map_err(|e| anyhow!("--device {spec:?}: {e}"))?;
    Ok(ModelTiming(cfg.build(None)))
}

pub fn model(a: ModelArgs) -> Result<i32> {
    let t = timing(&a.device)?;
    let sizes = mosaic_model::parse_size_range(&a.sizes).map_err(|e| anyhow!("--sizes: {e}"))?;
    let rep = mosaic_model::model_report(a.drives, a.codes, &t, &sizes).map_err(|e| anyhow!("{e}"))?;
    let cbro = match &a.cda_device {
        Some(cda) => Some(cbro_rows(&a.device, cda, a.drives, a.codes, &sizes)?),
        None => None,
    };
    if a.json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            #[serde(flatten)]
            model: &'a mosaic_model::ModelReport,
            cbro: Option<Vec<CbroRow>>,
        }
        print_json(&Out { model: &rep, cbro })?;
    } else {
        println!("model: {} drives, {} code blocks per stripe, drive {}", a.drives, a.codes, a.device);
        print!("{rep}");
        if let Some(rows) = cbro {
            println!("\nCBRO: {} data drives + {} CDA(s) of {} (code blocks offloaded; Sect. 5)", a.drives, a.codes, a.cda_device.as_deref().unwrap_or(""));
            println!("{:>10} {:>12} {:>14} {:>9} {:>9}", "size", "S_CBRO,RMW", "gain (d=1)", "CDA fast", "CDA size");
            for r in &rows {
                println!(
                    "{:>10} {:>12.2} {:>14.2} {:>9} {:>9}",
                    short(r.size),
                    r.speedup_rmw,
                    r.gain_d1,
                    if r.check.performance_ok { "ok" } else { "TOO SLOW" },
                    if r.check.capacity_ok { "ok" } else { "TOO SMALL" },
                );
            }
            for r in rows.iter().filter(|r| !r.check.message.is_empty()) {
                println!("warning at {}: {}", short(r.size), r.check.message);
            }
        }
    }
    Ok(0)
}

#[derive(serde::Serialize)]
pub struct CbroRow {
    pub size: u64,
    /// S_CBRO,RMW = n / (α + 1) over one data drive.
    pub speedup_rmw: f64,
    /// (d + k) / d for d = 1: the gain over distributed code blocks.
    pub gain_d1: f64,
    pub check: mosaic_model::CbroCheck,
}

/// CBRO's speedup and the capacity/performance checks per size, with each
/// drive's saturated per-operation time (an SSD serves many at once).
pub fn cbro_rows(data: &str, cda: &str, n: usize, k: usize, sizes: &[u64]) -> Result<Vec<CbroRow>> {
    // Named as the option that gave it.
    let cda_cap = timing(cda).map_err(|e| anyhow!("{}", e.to_string().replacen("--device", "--cda-device", 1)))?.0.capacity();
    let data_cap = timing(data)?.0.capacity();
    sizes
        .iter()
        .map(|&s| {
            let (dr, dw) = (crate::cmd_eval::saturated_op_ns(data, false, s)?, crate::cmd_eval::saturated_op_ns(data, true, s)?);
            let (cr, cw) = (crate::cmd_eval::saturated_op_ns(cda, false, s)?, crate::cmd_eval::saturated_op_ns(cda, true, s)?);
            let dt = mosaic_model::FnTiming { read: move |_b: u64| dr, write: move |_b: u64| dw };
            let ct = mosaic_model::FnTiming { read: move |_b: u64| cr, write: move |_b: u64| cw };
            let alpha = dr / dw;
            Ok(CbroRow {
                size: s,
                speedup_rmw: mosaic_model::cbro_speedup_rmw(n, alpha),
                gain_d1: mosaic_model::cbro_gain(1, k),
                check: mosaic_model::cbro_check(n, s, &dt, &ct, cda_cap, data_cap),
            })
        })
        .collect()
}

pub fn advise(a: AdviseArgs) -> Result<i32> {
    let path: PathBuf = a.input.trace.clone().ok_or_else(|| anyhow!("give --trace FILE"))?;
    let mut reader = a.input.open(&path)?;
    // As replay: a request longer than the simulator plans as one (a
    // damaged size) is refused, naming its line; --skip-bad skips and counts it.
    reader.set_max_len(mosaic_sim::engine::MAX_REQUEST);
    let writes: Vec<mosaic_trace::Request> = reader.by_ref().filter(|r| r.as_ref().map_or(true, |r| r.op == mosaic_trace::Op::Write)).collect::<Result<_, _>>()?;
    crate::cmd_sim::TraceInput::warn_skipped(&path, &reader);
    if writes.is_empty() {
        anyhow::bail!("{}: the trace has no writes to advise on", path.display());
    }
    let level: mosaic_core::Level = match a.codes {
        0 => mosaic_core::Level::Raid0,
        1 => mosaic_core::Level::Raid5,
        2 => mosaic_core::Level::Raid6,
        k => mosaic_core::Level::Rs { k: (a.drives.saturating_sub(k)) as u16, m: k as u16 },
    };
    let cfg = mosaic_drives::parse_device_spec(&a.device).map_err(|e| anyhow!("--device {:?}: {e}", a.device))?;
    let drive = cfg.build(None);
    let cands = mosaic_model::default_candidates(4096);
    // Size-only analytical model, and the placement-aware estimate that
    // runs every write through the planner (the recommendation).
    let mut sizes = std::collections::BTreeMap::new();
    for w in &writes {
        *sizes.entry(w.len).or_insert(0u64) += 1;
    }
    let sizes: Vec<(u64, u64)> = sizes.into_iter().collect();
    let model = mosaic_model::advise(&sizes, a.drives, a.codes, &ModelTiming(cfg.build(None)), &cands).map_err(|e| anyhow!("{e}"))?;
    let est = mosaic_sim::advise::estimate_units(level, a.drives, 512, drive.as_ref(), &writes, &cands, a.queue_depth)?;
    let best = mosaic_sim::advise::best_unit(&est).ok_or_else(|| anyhow!("no candidate units"))?;
    // SSD rule (Sect. 4.2): page-aligned workloads want unit = flash page.
    let ssd_rule = match &cfg {
        mosaic_drives::DriveConfig::Ssd { params, .. } => {
            let page = params.page;
            let aligned = writes.iter().filter(|w| w.offset % page == 0 && w.len % page == 0).count() as f64 / writes.len() as f64;
            Some((page, aligned, mosaic_model::ssd_unit_rule(page, aligned)))
        }
        _ => None,
    };
    #[derive(serde::Serialize)]
    struct Out<'a> {
        trace: String,
        writes: usize,
        level: String,
        drives: usize,
        best_unit: u64,
        placement_aware: &'a [mosaic_sim::advise::UnitEstimate],
        size_only_model: &'a mosaic_model::Advice,
        /// (flash page, fraction of page-aligned writes, unit by the page rule)
        ssd_page_rule: Option<(u64, f64, Option<u64>)>,
    }
    if a.json {
        return print_json(&Out { trace: path.display().to_string(), writes: writes.len(), level: level.to_string(), drives: a.drives, best_unit: best, placement_aware: &est, size_only_model: &model, ssd_page_rule: ssd_rule }).map(|_| 0);
    }
    println!("advice for {} ({} writes) on {} {} x {}: stripe unit {}", path.display(), writes.len(), level, a.drives, a.device, human(best));
    let mut rows = vec![vec!["unit".into(), "estimate MiB/s".into(), "busiest/mean drive".into(), "rmw/rcw/fsw".into(), "size-only model MiB/s".into()]];
    for (e, m) in est.iter().zip(&model.per_candidate) {
        rows.push(vec![
            format!("{}{}", human(e.unit), if e.unit == best { " *" } else { "" }),
            format!("{:.2}", e.throughput_bytes_per_s / 1048576.0),
            format!("{:.2}", if e.mean_drive_s > 0.0 { e.busiest_drive_s / e.mean_drive_s } else { 0.0 }),
            format!("{}/{}/{}", e.rmw_stripes, e.rcw_stripes, e.fsw_stripes),
            format!("{:.2}", m.throughput_bytes_per_s / 1048576.0),
        ]);
    }
    print!("{}", crate::util::table(&rows));
    println!("(the estimate runs each write through the planner and takes the busiest drive as the bottleneck; the size-only model assumes evenly spread load)");
    if let Some((page, aligned, rule)) = ssd_rule {
        match rule {
            Some(u) => println!("SSD rule: {:.0}% of writes are page-aligned, so a stripe unit of one flash page ({}) avoids sub-page writes", aligned * 100.0, human(u)),
            None => println!("SSD rule: only {:.0}% of writes are aligned to the {} flash page; the page rule does not apply", aligned * 100.0, human(page)),
        }
    }
    Ok(0)
}
