//! Creating a tier: the inner arrays' specs, the checks before anything
//! is made (guard, geometry, policy), each inner array through the one
//! create path for a directory.

use std::path::Path;

use mosaic_array::nested;
use mosaic_array::{Array, CreateOptions, DATA_OFFSET};
use mosaic_core::{Geometry, Level};
use mosaic_tier::policy::{PolicyConfig, TierGeometry, TierPolicy, FAST, SLOW};

use super::{policy_err, FAST_DIR, LABEL_SPACE, SLOW_DIR};
use crate::{human, Result, VolumeError};

/// One inner array to create: a level string as `--level` takes it (nested
/// CBRO check drive arrays included), its member count and member size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InnerSpec {
    pub level: String,
    pub members: usize,
    pub member_size: u64,
}

impl InnerSpec {
    /// Parse `LEVEL:N` (`raid1:2`, `raid5:4`, `raid6:6`, `raid0:3`) or a
    /// level that implies its members (`rs:4+2`, `cbro:4+1`,
    /// `cbro:4+1,cda=raid5:3`).
    pub fn parse(s: &str, member_size: u64) -> Result<InnerSpec> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || {
            VolumeError::Usage(format!(
                "bad inner array {s:?}: expected LEVEL:N (raid1:2, raid5:4, raid6:6), rs:K+M or cbro:N+K[,cda=...]"
            ))
        };
        if let Some((outer, _, _)) = nested::split_cda(&t)? {
            let members = outer.implied_members().ok_or_else(bad)?;
            return Ok(InnerSpec { level: t, members, member_size });
        }
        if let Ok(l) = t.parse::<Level>() {
            if let Some(members) = l.implied_members() {
                return Ok(InnerSpec { level: t, members, member_size });
            }
        }
        let (lvl, n) = t.rsplit_once(':').ok_or_else(bad)?;
        let level: Level = lvl.parse().map_err(|_| bad())?;
        let members: usize = n.parse().map_err(|_| bad())?;
        level.columns(members).map_err(|e| VolumeError::Usage(format!("inner array {s:?}: {e}")))?;
        Ok(InnerSpec { level: lvl.to_string(), members, member_size })
    }

    /// The level as `CreateOptions` takes it (the outer level of a nested one).
    fn level(&self) -> Result<Level> {
        Ok(match nested::split_cda(&self.level)? {
            Some((outer, _, _)) => outer,
            None => self.level.parse().map_err(mosaic_array::ArrayError::from)?,
        })
    }

    /// Capacity and full-stripe data bytes the inner array will have,
    /// when they can be told before creating it (not for nested CDAs).
    fn planned(&self, unit: u64, block: u64) -> Result<Option<(u64, u64)>> {
        if nested::split_cda(&self.level)?.is_some() {
            return Ok(None);
        }
        let Some(data) = self.member_size.checked_sub(DATA_OFFSET).filter(|&d| d >= unit) else {
            return Err(VolumeError::Usage(format!(
                "member size {} is too small: each member needs at least {} bytes (1 MiB header + one stripe unit)",
                self.member_size,
                DATA_OFFSET + unit
            )));
        };
        let g = Geometry::new(self.level()?, self.members, unit, block, data).map_err(mosaic_array::ArrayError::from)?;
        Ok(Some((g.capacity(), g.stripe_data_bytes())))
    }
}

/// Everything `mosaic create --level tier` decides.
#[derive(Debug, Clone)]
pub struct TierCreate {
    pub fast: InnerSpec,
    pub slow: InnerSpec,
    /// Stripe unit of both inner arrays.
    pub unit: u64,
    /// Logical block (the policy's block too).
    pub block: u64,
    /// Overwrite files that belong to another array.
    pub force: bool,
    /// Each inner array's journal file size; None: no journals.
    pub journal_size: Option<u64>,
    pub config: PolicyConfig,
}

/// Where tier data starts on each inner array: after the label space,
/// the slow one on a full stripe boundary.
pub(super) fn data_offsets(slow_stripe: u64) -> [u64; 2] {
    [LABEL_SPACE, LABEL_SPACE.div_ceil(slow_stripe) * slow_stripe]
}

/// The policy's geometry from the inner arrays' capacities and the slow
/// stripe, with the refusals a user should hear in plain words; and where
/// tier data starts on each.  `mosaic replay --layout tier` sizes its
/// simulated tier with it too, so both plan on the same geometry.
pub fn geometry(fast_cap: u64, slow_cap: u64, slow_stripe: u64) -> Result<(TierGeometry, [u64; 2])> {
    let off = data_offsets(slow_stripe);
    let room = |cap: u64, off: u64, side: &str| {
        cap.checked_sub(off).filter(|&b| b > 0).ok_or_else(|| {
            VolumeError::Usage(format!("the {side} tier ({} bytes) has no room after its {off}-byte label area", cap))
        })
    };
    let fast_bytes = room(fast_cap, off[FAST], "fast")?;
    let slow_bytes = room(slow_cap, off[SLOW], "slow")?;
    if fast_cap > slow_cap {
        return Err(VolumeError::Usage(format!(
            "the fast tier ({}) is larger than the slow tier ({}): a tier's capacity is the slow tier's, so the fast one must be the smaller (swap --fast and --slow, or shrink --fast-size)",
            human(fast_cap),
            human(slow_cap)
        )));
    }
    if slow_bytes < slow_stripe {
        return Err(VolumeError::Usage(format!(
            "the slow tier holds no full stripe ({} bytes of data each) after its label area: demotion writes whole stripes; give a larger --slow-size",
            slow_stripe
        )));
    }
    Ok((TierGeometry { fast_bytes, slow_bytes, slow_stripe }, off))
}

/// The checks before anything is created: no other array's files are
/// overwritten without `force`, and the geometry is valid when it can be
/// told in advance.
pub(super) fn precheck(dir: &Path, c: &TierCreate, cfg: &PolicyConfig) -> Result<()> {
    if !c.force {
        for p in [dir.to_path_buf(), dir.join(FAST_DIR), dir.join(SLOW_DIR)] {
            crate::guard::check_output(&p, false)?;
        }
    }
    if let (Some(f), Some(s)) = (c.fast.planned(c.unit, c.block)?, c.slow.planned(c.unit, c.block)?) {
        let (geo, _) = geometry(f.0, s.0, s.1)?;
        TierPolicy::format(cfg.clone(), geo).map_err(policy_err)?;
    }
    Ok(())
}

/// Create one inner array in `dir` through the one create path for a
/// directory (journal, guard against existing member files, geometry).
pub(crate) fn create_inner(dir: &Path, s: &InnerSpec, unit: u64, block: u64, force: bool, journal_size: Option<u64>) -> Result<Array> {
    let o = CreateOptions { level: s.level()?, members: Some(s.members), member_size: Some(s.member_size), unit, block, force, assume_clean: false };
    Ok(nested::create_dir(dir, &s.level, &o, journal_size)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_tier::policy::SLOW;

    #[test]
    fn specs_parse_and_bad_ones_are_named() {
        assert_eq!(InnerSpec::parse("raid6:6", 1).unwrap(), InnerSpec { level: "raid6".into(), members: 6, member_size: 1 });
        assert_eq!(InnerSpec::parse("RAID1:2", 1).unwrap().members, 2);
        assert_eq!(InnerSpec::parse("rs:4+2", 1).unwrap().members, 6);
        let n = InnerSpec::parse("cbro:4+1,cda=raid5:3", 1).unwrap();
        assert_eq!((n.level.as_str(), n.members), ("cbro:4+1,cda=raid5:3", 5));
        for bad in ["raid6", "raid6:x", "raid9:3", ""] {
            let e = InnerSpec::parse(bad, 1).unwrap_err().to_string();
            assert!(e.contains("bad inner array") || e.contains("level"), "{bad}: {e}");
        }
        let e = InnerSpec::parse("raid6:2", 1).unwrap_err().to_string();
        assert!(e.contains("raid6:2"), "{e}");
    }

    #[test]
    fn the_slow_data_offset_is_a_whole_number_of_stripes() {
        assert_eq!(data_offsets(256 << 10), [1 << 20, 1 << 20]);
        assert_eq!(data_offsets(192 << 10), [1 << 20, 6 * (192 << 10)]);
        let (g, off) = geometry(64 << 20, 256 << 20, 192 << 10).unwrap();
        assert_eq!(off[SLOW] % (192 << 10), 0);
        assert_eq!((g.fast_bytes, g.slow_bytes), ((64 << 20) - (1 << 20), (256 << 20) - off[SLOW]));
    }

    #[test]
    fn a_fast_tier_larger_than_the_slow_one_or_a_slow_tier_without_a_stripe_is_refused() {
        let e = geometry(512 << 20, 256 << 20, 256 << 10).unwrap_err().to_string();
        assert!(e.contains("larger than the slow tier"), "{e}");
        let e = geometry((1 << 20) + (4 << 10), (1 << 20) + (64 << 10), 256 << 10).unwrap_err().to_string();
        assert!(e.contains("no full stripe"), "{e}");
        let e = geometry(1 << 20, 8 << 20, 256 << 10).unwrap_err().to_string();
        assert!(e.contains("no room"), "{e}");
    }
}
