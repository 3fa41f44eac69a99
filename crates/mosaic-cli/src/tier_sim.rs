//! `mosaic replay --layout tier`: the hybrid tier's policy on drive models.
//!
//! ```text
//!   TierPolicy (the same policy a real tier array runs)
//!      member 0 ──> ArrayDrive(fast layout, e.g. raid1 over 2 SSD models)
//!      member 1 ──> ArrayDrive(slow layout, e.g. raid6 over 6 HDD models)
//! ```
//!
//! Members are numbered fast ones first (`--device 0-1=ssd:... --device
//! 2-7=hdd:...`).  `--fast-size`/`--slow-size` bound the bytes used of each
//! drive exactly as `create --fast-size/--slow-size` size the member files,
//! so a replay here and one on a real tier (`replay --on`) plan on the same
//! geometry and do the same operations on the two arrays.

use anyhow::{anyhow, bail, Result};

use mosaic_array::DATA_OFFSET;
use mosaic_core::{FixedLayout, Frontend, Layout, WritePolicy};
use mosaic_volume::InnerSpec;
use mosaic_drives::DriveModel;
use mosaic_sim::nested::ArrayDrive;
use mosaic_tier::policy::{PolicyConfig, TierPolicy};

use crate::cmd_sim::{build_drives, device_specs, layout_for, TierArgs};
use crate::util::{human, size};

/// `--tier-extents 64K,256K`: the fast tier's data sections, equal shares.
pub fn sections(list: &str) -> Result<Vec<(u64, f64)>> {
    let sizes: Vec<u64> = list.split(',').map(|x| size(x.trim()).map_err(|e| anyhow!("--tier-extents {x:?}: {e}"))).collect::<Result<_>>()?;
    if sizes.is_empty() {
        bail!("--tier-extents needs at least one size");
    }
    Ok(sizes.iter().map(|&s| (s, 1.0 / sizes.len() as f64)).collect())
}

/// The policy configuration the replay's tier options describe.
fn policy_config(t: &TierArgs) -> Result<PolicyConfig> {
    let cfg = PolicyConfig { sections: sections(&t.tier_extents)?, threshold_v: t.tier_v, fixed_extents: t.tier_fixed_extents, request_clock_ns: t.tier_request_clock, ..PolicyConfig::default() };
    cfg.validate().map_err(|e| anyhow!("tier configuration: {e}"))?;
    Ok(cfg)
}

/// One tier's layout and drive models: `n` drives of `specs`, each used
/// up to `member_size` bytes (less the label area every member keeps).
fn side(level: &str, specs: &[String], member_size: Option<u64>, unit: u64, block: u64, policy: WritePolicy) -> Result<ArrayDrive> {
    let drives: Vec<Box<dyn DriveModel>> = build_drives(specs, specs.len())?;
    let model = drives.iter().map(|d| d.capacity()).min().unwrap_or(0);
    let cap = match member_size {
        Some(s) if s < DATA_OFFSET + unit => bail!("{level}: a member of {s} bytes is too small: it needs at least {}", DATA_OFFSET + unit),
        Some(s) => (s - DATA_OFFSET).min(model),
        None => model,
    };
    let layout: FixedLayout = layout_for(level, specs.len(), unit, block, cap, policy)?;
    ArrayDrive::new(layout, drives).map_err(|e| anyhow!(e))
}

/// Memory the tier's in-memory map takes per block it addresses
/// (measured: 1.5 GB for the 915 million blocks of the default drives).
const MAP_BYTES_PER_BLOCK: u64 = 2;
/// Most memory a modelled tier's map may take.
const MAP_BUDGET: u64 = 4 << 30;

/// Refuse, before anything is allocated, a tier whose map would not fit
/// the budget: the map holds every block of the drives' capacity (the
/// real tier's), whatever the trace touches.
fn check_memory(cfg: &PolicyConfig, geo: &mosaic_tier::policy::TierGeometry) -> Result<()> {
    let lay = mosaic_tier::policy::TierLayout::new(cfg, geo).map_err(|e| anyhow!("tier: {e}"))?;
    let need = (lay.capacity_blocks + lay.fast_blocks).saturating_mul(MAP_BYTES_PER_BLOCK);
    if need > MAP_BUDGET {
        bail!(
            "a tier over these drives addresses {} blocks of {} bytes, and its map would take about {} of memory (at most {} here): \
             give --slow-size and --fast-size (the bytes of each drive the tier uses) to model a smaller tier",
            lay.capacity_blocks + lay.fast_blocks,
            lay.block,
            human(need),
            human(MAP_BUDGET)
        );
    }
    Ok(())
}

/// The tier policy over its two arrays of drive models.
pub fn frontend(t: &TierArgs, devices: &[String], unit: u64, block: u64, policy: WritePolicy) -> Result<(Box<dyn Frontend>, Vec<Box<dyn DriveModel>>)> {
    let (fs, ss) = (InnerSpec::parse(&t.fast, 0)?, InnerSpec::parse(&t.slow, 0)?);
    let specs = device_specs(devices, fs.members + ss.members)?;
    let fast = side(&fs.level, &specs[..fs.members], t.fast_size, unit, block, policy)?;
    let slow = side(&ss.level, &specs[fs.members..], t.slow_size, unit, block, policy)?;
    let cfg = policy_config(t)?;
    let (geo, _) = mosaic_volume::tier_geometry(fast.layout().capacity(), slow.layout().capacity(), slow.layout().geometry().stripe_data_bytes())?;
    check_memory(&cfg, &geo)?;
    let (pol, _format) = TierPolicy::format(cfg, geo).map_err(|e| anyhow!("tier: {e}"))?;
    Ok((Box::new(pol), vec![Box::new(fast), Box::new(slow)]))
}
