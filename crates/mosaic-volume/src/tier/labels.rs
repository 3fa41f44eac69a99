//! The tier labels: one label (`mosaic_format::label`, kind "tier") in
//! the first bytes of each inner array, and the checks that the two
//! belong together, to the arrays under them, and are fresh.

use std::path::{Path, PathBuf};

use uuid::Uuid;

use mosaic_array::Array;
use mosaic_format::fresh::{self, Found};
use mosaic_format::label::{Label, LabelError};
use mosaic_tier::policy::{FAST, SLOW};

use super::{KIND, SIDES};
use crate::{Result, VolumeError};

/// The label of `dir` (an inner array's directory) or why it has none.
pub(super) fn label_of(dir: &Path, arr: &Array) -> Result<Label> {
    let name = dir.display();
    let l = match crate::nest::read_label(arr)? {
        Ok(l) => l,
        Err(LabelError::None) => {
            return Err(VolumeError::Usage(format!(
                "{name} holds array {} ({}) but no tier label: it is not part of a tier array",
                arr.info().uuid,
                arr.geometry().level
            )))
        }
        Err(LabelError::Corrupt(why)) => return Err(VolumeError::Usage(format!("{name}: the tier label is damaged: {why}"))),
    };
    if l.kind != KIND || l.members != 2 {
        return Err(VolumeError::Usage(format!("{name}: its label is of kind {:?} with {} members, not a tier's", l.kind, l.members)));
    }
    Ok(l)
}

/// Check the two labels belong together and to the arrays under them,
/// through the one freshness rule; the authoritative label.
pub(super) fn check_labels(dirs: &[PathBuf; 2], uuids: [Uuid; 2], labels: [Label; 2]) -> Result<Label> {
    for (side, l) in labels.iter().enumerate() {
        if l.member_index != side {
            return Err(VolumeError::Usage(format!(
                "{} holds the {} array of tier {}, not a {} one: the inner arrays were swapped",
                dirs[side].display(),
                SIDES[l.member_index.min(1)],
                l.array_uuid,
                SIDES[side]
            )));
        }
    }
    if labels[FAST].array_uuid != labels[SLOW].array_uuid {
        return Err(VolumeError::Usage(format!(
            "{} belongs to tier {}, not to tier {} of {}: an inner array was swapped for another tier's; put the right one back",
            dirs[SLOW].display(),
            labels[SLOW].array_uuid,
            labels[FAST].array_uuid,
            dirs[FAST].display()
        )));
    }
    let found: Vec<Found<usize>> = labels
        .into_iter()
        .enumerate()
        .map(|(side, label)| Found { label, name: dirs[side].display().to_string(), dev: side })
        .collect();
    let own = |f: &Found<usize>, _: &Label| {
        (f.label.member_uuid != uuids[f.dev]).then(|| {
            format!("{}: its tier label names inner array {} but the array there is {}", f.name, f.label.member_uuid, uuids[f.dev])
        })
    };
    // A tier needs both its sides.
    let both = |_: &Label, filled: &[bool]| filled.iter().all(|x| *x);
    let kind = fresh::Kind { failed: &|_, _| false, own: &own, serves: &both, retired: &|_, _| false };
    let a = fresh::assemble(found, Vec::new(), &kind).map_err(VolumeError::Usage)?;
    if a.slots.iter().any(Option::is_none) {
        return Err(VolumeError::Usage(format!("tier {} cannot be opened: {}", a.auth.array_uuid, a.warnings.join("; "))));
    }
    Ok(a.auth)
}
