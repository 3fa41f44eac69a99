//! `mosaic replay --layout remap:LEVEL`: the remapped array's policy on
//! drive models, on the same geometry `create --level remap --inner
//! LEVEL:N --member-size S` gives a real one.
//!
//! ```text
//!   RemapPolicy (the same policy a real remapped array runs)
//!      member 0 ──> Shifted(ArrayDrive(inner layout over --drives models), label area)
//! ```
//!
//! The simulator has one member, as the real array's executor does, so a
//! replay here and one on a real remapped array (`replay --on`) count the
//! same operations on it; the inner drives' own counts follow from the
//! inner layout's plans, as for any fixed array.

use anyhow::{anyhow, bail, Result};

use mosaic_array::DATA_OFFSET;
use mosaic_core::{FixedLayout, Frontend, WritePolicy};
use mosaic_drives::{DriveError, DriveModel, DriveRequest, Nanos, ReqKind};
use mosaic_remap::{RemapConfig, RemapPolicy};
use mosaic_sim::nested::ArrayDrive;

use crate::cmd_sim::{build_drives, layout_for, ReplayArgs};

/// The inner array as one drive, from `base` on (the label area).
struct Shifted {
    inner: ArrayDrive,
    base: u64,
}

impl DriveModel for Shifted {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn capacity(&self) -> u64 {
        self.inner.capacity().saturating_sub(self.base)
    }
    fn queue_depth(&self) -> usize {
        self.inner.queue_depth()
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        self.inner.submit(now, &DriveRequest { offset: req.offset + self.base, ..*req })
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        self.inner.random_service_ns(kind, len)
    }
}

/// The remap policy over its inner array of drive models.
pub fn frontend(a: &ReplayArgs, level: &str, policy: WritePolicy) -> Result<(Box<dyn Frontend>, Vec<Box<dyn DriveModel>>)> {
    let drives = build_drives(&a.device, a.drives)?;
    let model = drives.iter().map(|d| d.capacity()).min().unwrap_or(0);
    let cap = match a.member_size {
        Some(s) if s < DATA_OFFSET + a.stripe_unit => bail!("a member of {s} bytes is too small: it needs at least {}", DATA_OFFSET + a.stripe_unit),
        Some(s) => (s - DATA_OFFSET).min(model),
        None => model,
    };
    let layout: FixedLayout = layout_for(level, a.drives, a.stripe_unit, a.block_size, cap, policy)?;
    let (geo, base) = mosaic_volume::remap::placement_geometry(layout.geometry())?;
    let mut cfg = RemapConfig { unit: a.remap_unit.unwrap_or(a.stripe_unit), block: a.block_size, ..RemapConfig::default() };
    if let Some(s) = a.remap_spare {
        cfg.spare_share = s;
    }
    let (pol, _format) = RemapPolicy::format(cfg, geo).map_err(|e| anyhow!("remap: {e}"))?;
    let inner = ArrayDrive::new(layout, drives).map_err(|e| anyhow!(e))?;
    Ok((Box::new(pol), vec![Box::new(Shifted { inner, base })]))
}
