//! DVS-RAID commands: creating arrays on emulated zoned drives (`--level
//! dvs --zoned`), DVS and the SMR baselines in `mosaic replay`, and
//! `mosaic eval dvs`.  The work is in `mosaic-dvs`; these are thin
//! wrappers.  Every other array command reaches DVS arrays through
//! `mosaic_volume` (`DvsVolume`), like any other kind.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use mosaic_core::Frontend;
use mosaic_drives::DriveModel;
use mosaic_dvs::{baseline, files};
use mosaic_exp::dvs as exp;

use crate::util::{human, print_json};

/// Default zone (segment) size of created DVS members.
pub const DEFAULT_ZONE: u64 = 16 << 20;

/// The parity chunks of a DVS level: `dvs` (or `dvs:1`) one, `dvs:2` two.
pub fn dvs_parity(level: &str) -> Option<usize> {
    match level {
        "dvs" | "dvs:1" => Some(1),
        "dvs:2" => Some(2),
        _ => None,
    }
}

/// `mosaic create -a DIR --level dvs[:K] --members N --member-size S --zoned --stripe-unit U [--spare DRIVE]...`.
/// The level is `dvs` (one parity chunk) or `dvs:2` (Reed-Solomon P+Q);
/// the zone size defaults to [`DEFAULT_ZONE`]; `--dvs-cache` (bytes) gives
/// the array a journalled SSG write cache (none: write-through).
pub fn create_dvs(c: &crate::cmd_array::CreateArgs) -> Result<i32> {
    let (array, level, stripe_unit, json) = (c.array.as_str(), c.level.as_str(), c.stripe_unit, c.json);
    let Some(parity) = dvs_parity(level) else { bail!("unknown DVS level {level:?}: expected dvs or dvs:2") };
    if array.contains(',') {
        bail!("--level dvs creates its members as zoned files in a directory: give -a DIR");
    }
    let members = c.members.ok_or_else(|| anyhow!("--level dvs needs --members"))?;
    let member_size = c.member_size.ok_or_else(|| anyhow!("--level dvs needs --member-size"))?;
    for sp in &c.spare {
        crate::util::check_output(sp, c.force)?;
    }
    // Zoned spares are sized by their zones, which the volume checks.
    crate::cmd_array::check_create_spares(&c.spare, &mosaic_array::spec::ArraySpec::Dir(array.into()), None, None)?;
    let zone_size = c.zone_size.unwrap_or(DEFAULT_ZONE.min(member_size / 4).max(4096));
    let spec = files::CreateSpec { members, member_size, chunk: stripe_unit, block: c.block_size, zone_size, parity, cache_chunks: c.dvs_cache.unwrap_or(0) / stripe_unit.max(1) };
    let mut a = files::create_in_dir(Path::new(array), &spec, c.force).with_context(|| format!("creating a DVS array in {array}"))?;
    if !c.spare.is_empty() {
        // Spares through the volume, which records where they are.
        drop(a);
        let vol = mosaic_volume::open(array, true)?;
        for sp in &c.spare {
            vol.add_spare(sp).with_context(|| format!("adding {} as a hot spare", sp.display()))?;
        }
        vol.close()?;
        drop(vol);
        a = files::open_spec(array)?;
    }
    let info = a.info();
    if json {
        print_json(&info)?;
    } else {
        let c = &info.config;
        println!(
            "created dvs array {}: {} zoned members ({} zones of {}, {} conventional), {}+{} chunks of {}, {} SSGs, capacity {}",
            info.uuid,
            c.members,
            c.zones,
            human(c.zone_size),
            c.conventional,
            c.members - c.parity,
            c.parity,
            human(c.chunk),
            info.ssgs,
            human(info.capacity)
        );
        for sp in &info.spares {
            println!("hot spare {}", sp.describe);
        }
    }
    Ok(0)
}

// ------------------------------------------------------------------ replay

/// Layout names `mosaic replay` runs through [`replay_frontend`].
pub fn is_dvs_scheme(name: &str) -> bool {
    baseline::is_zoned_scheme(name)
}

/// The front end of `dvs`, `dvs2`, `segment-raid5` or `sblock-raid5` on
/// `drives` (host-managed zoned models, e.g. `smr:default`), with a write
/// and a read cache of `cache_chunks` chunks each (0: none).
pub fn replay_frontend(name: &str, drives: &[Box<dyn DriveModel>], stripe_unit: u64, block_size: u64, cache_chunks: usize) -> Result<Box<dyn Frontend + Send>> {
    let spec = baseline::SchemeSpec { chunk: stripe_unit, block: block_size, cache_chunks, parity: 1 };
    Ok(baseline::build_frontend(name, drives, &spec)?)
}

/// For fixed layouts (raid5 ...) compared against DVS on zoned drives:
/// conventional drives with the same timing, since a fixed layout
/// overwrites in place, which a host-managed zoned drive refuses.
pub fn drives_for_fixed_layout(drives: Vec<Box<dyn DriveModel>>) -> Vec<Box<dyn DriveModel>> {
    if drives.iter().any(|d| d.zone_size().is_some()) {
        baseline::conventional_twin(&drives)
    } else {
        drives
    }
}

// -------------------------------------------------------------------- eval

#[derive(Args)]
pub struct EvalDvsArgs {
    /// Write dvs-overall.svg, dvs-cache.svg and dvs-band.svg into this directory
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Overwrite plot files that are members or journals of an array
    #[arg(long)]
    pub force: bool,
    /// Print every result as JSON
    #[arg(long)]
    pub json: bool,
    /// The real trace (CloudPhysics format; default shared/traces/cloudphysics-vscsi-part1.csv beside the checkout
    /// when present); the synthetic workloads run without it
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Requests per synthetic workload
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,
    /// Multiply trace timestamps by this (4 = replay the hour over four hours)
    #[arg(long, default_value_t = 4.0)]
    pub trace_time_scale: f64,
    /// Seed of the synthetic workloads
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A short run (3,000 synthetic requests, the trace's first 8,000,
    /// three cache sizes, two bands) for tests and quick looks
    #[arg(long)]
    pub quick: bool,
}

/// `mosaic eval dvs`: every scheme on the trace and the synthetic
/// workloads, the cache-size sweep and the band-size sweep.
pub fn eval_dvs(a: EvalDvsArgs) -> Result<i32> {
    if let Some(dir) = &a.plot {
        crate::util::check_output_dir(dir, &exp::Results::PLOTS, a.force)?;
    }
    let base = if a.quick { exp::ExpConfig::quick() } else { exp::ExpConfig { synthetic_count: a.count, ..Default::default() } };
    let cfg = exp::ExpConfig { seed: a.seed, trace_time_scale: a.trace_time_scale, ..base };
    let trace = crate::util::eval_trace(a.trace.as_deref(), "running the synthetic workloads only")?;
    let (pb, tick) = crate::util::step_ticks("eval");
    let r = exp::run_all_with(trace.as_deref(), &cfg, &tick)?;
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
