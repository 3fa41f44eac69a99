//! `mosaic model` and `mosaic advise`: the analytical random-write model
//! and the stripe-unit advisor.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;

use mosaic_drives::{DriveModel, ReqKind};
use mosaic_model::DriveTiming;

use crate::cmd_sim::TraceInput;
use crate::util::{human, print_json};

#[derive(Args)]
pub struct ModelArgs {
    /// Drive model preset or file:PATH.toml
    #[arg(long, default_value = "hdd:seagate-st91000640ss")]
    pub device: String,
    /// Number of drives n
    #[arg(long, default_value_t = 9)]
    pub drives: usize,
    /// Code blocks per stripe k
    #[arg(long, default_value_t = 1)]
    pub codes: usize,
    /// Request sizes: MIN:MAX (powers of two)
    #[arg(long, default_value = "4K:4M")]
    pub sizes: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct AdviseArgs {
    #[command(flatten)]
    pub input: TraceInput,
    #[arg(long, default_value = "hdd:seagate-st91000640ss")]
    pub device: String,
    #[arg(long, default_value_t = 9)]
    pub drives: usize,
    #[arg(long, default_value_t = 1)]
    pub codes: usize,
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
    if a.json {
        print_json(&rep)?;
    } else {
        println!("model: {} drives, {} code blocks per stripe, drive {}", a.drives, a.codes, a.device);
        print!("{rep}");
    }
    Ok(0)
}

pub fn advise(a: AdviseArgs) -> Result<i32> {
    let path: PathBuf = a.input.trace.clone().ok_or_else(|| anyhow!("give --trace FILE"))?;
    let r = a.input.open(&path)?;
    let stats = mosaic_trace::stats(r)?;
    let sizes: Vec<(u64, u64)> = stats.write_sizes.iter().map(|(s, c)| (*s, *c)).collect();
    if sizes.is_empty() {
        anyhow::bail!("{}: the trace has no writes to advise on", path.display());
    }
    let t = timing(&a.device)?;
    let adv = mosaic_model::advise(&sizes, a.drives, a.codes, &t, &mosaic_model::default_candidates(4096)).map_err(|e| anyhow!("{e}"))?;
    if a.json {
        print_json(&adv)?;
    } else {
        println!(
            "advice for {} ({} writes) on {} x {}, k = {}: stripe unit {}",
            path.display(),
            stats.writes,
            a.drives,
            a.device,
            a.codes,
            human(adv.best_unit)
        );
        print!("{adv}");
    }
    Ok(0)
}
