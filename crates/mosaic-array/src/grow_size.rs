//! Grow in size: use more of every member (md's `--grow --size`, ZFS's
//! `autoexpand`), once each member's drive was replaced by a larger one
//! (or the array was made with `--member-size` below its drives' size).
//!
//! ```text
//!   member i:  | label, reserved | rows 0..S (data, code) | rows S..S' (new) | unused |
//!              0            DATA_OFFSET           +S·u               +S'·u
//! ```
//!
//! Where a stripe's units lie depends on its row alone, never on how many
//! rows there are, so growing the rows from S to S' moves nothing: rows
//! S..S' are new stripes after the old capacity.  They are written whole
//! with zeros first (full-stripe writes through the new layout: the code
//! of zeros is zeros, for XOR and Reed–Solomon alike, and a mirror's
//! copies are zeros), the members flushed, and only then do the
//! superblocks record the new size.  A crash before that record leaves
//! the old size, the zeros in bytes nothing uses (the same command writes
//! them again); after it, the new size with every new stripe's code right.

use std::time::Instant;

use serde::Serialize;

use mosaic_core::{FixedLayout, Geometry, Level};
use mosaic_exec::Client;

use crate::array::{Array, Shape};
use crate::superblock::DATA_OFFSET;
use crate::ArrayError;

/// Most logical bytes one zeroing step writes.
const STEP_BYTES: u64 = 8 << 20;

/// What a finished size grow did.
#[derive(Debug, Clone, Serialize)]
pub struct GrowSizeReport {
    /// Bytes of each member used for stripes, before and after.
    pub member_data_size_before: u64,
    pub member_data_size: u64,
    pub capacity_before: u64,
    pub capacity: u64,
    /// New stripes written with zeros.
    pub stripes_added: u64,
    /// Bytes written to the members (data and code units of the new stripes).
    pub bytes_written: u64,
    pub seconds: f64,
}

impl Array {
    /// Take `size` bytes of each member for stripes (`None`: as many as
    /// the smallest member holds), writing the new stripes with zeros
    /// first; `progress(done, total)` in new stripes.  Refused while the
    /// array is degraded, growing in members, or holds a paused hot
    /// replace or a write-intent bitmap (as mdadm asked before it learnt
    /// to move one), for an array inside another, for CBRO, and for a
    /// size no larger than now or larger than a member or a hot spare
    /// holds.
    pub fn grow_size(&self, size: Option<u64>, progress: &dyn Fn(u64, u64)) -> Result<GrowSizeReport, ArrayError> {
        let t0 = Instant::now();
        self.check_writable()?;
        let old = self.geometry();
        let new = self.grown_geometry(&old, size)?;
        let layout = FixedLayout::new(new.clone())?;
        let (first, total) = (old.stripes, new.stripes - old.stripes);
        let per = new.stripe_data_bytes();
        let step = (STEP_BYTES / per).max(1);
        let mut zeros = Vec::new();
        let mut done = 0;
        while done < total {
            let n = step.min(total - done);
            zeros.resize((n * per) as usize, 0);
            self.submit_on(&layout, (first + done) * per, Client::In(&zeros), n * per, true)?;
            done += n;
            progress(done, total);
        }
        self.flush()?;
        {
            let _g = self.gate.write();
            self.set_shape(Shape::of(new.clone(), None, &self.superblock().write_mostly)?);
            self.write_superblocks(|s| {
                s.geometry = new.clone();
                s.member_data_size = new.member_data_bytes();
            })?;
        }
        Ok(GrowSizeReport {
            member_data_size_before: old.member_data_bytes(),
            member_data_size: new.member_data_bytes(),
            capacity_before: old.capacity(),
            capacity: new.capacity(),
            stripes_added: total,
            bytes_written: total * new.unit * new.members as u64,
            seconds: t0.elapsed().as_secs_f64(),
        })
    }

    /// The geometry of `old` grown to `size` bytes a member (`None`: the
    /// smallest member's), or why it cannot grow.
    fn grown_geometry(&self, old: &Geometry, size: Option<u64>) -> Result<Geometry, ArrayError> {
        let sb = self.superblock();
        if let Some(o) = &sb.owner {
            return Err(ArrayError::Usage(format!("this array is {} {}, whose layout fixes its size: it cannot grow by itself", o.role, o.uuid)));
        }
        if matches!(old.level, Level::Cbro { .. }) {
            return Err(ArrayError::Usage("a cbro array cannot grow in size: grow --size works on raid0, raid1, raid4, raid5, raid6 and rs arrays".into()));
        }
        if sb.reshape.is_some() {
            return Err(ArrayError::Usage("a grow is in progress: resume it first (mosaic grow -a ARRAY)".into()));
        }
        self.no_paused_hot_replace()?;
        if sb.bitmap.is_some() {
            return Err(ArrayError::Usage("the array has a write-intent bitmap, sized for its capacity: remove it first (mosaic bitmap -a ARRAY none), grow, then add it again (mosaic bitmap -a ARRAY internal)".into()));
        }
        self.not_degraded("growing")?;
        let members: Vec<(u64, String)> = (0..old.members)
            .map(|i| self.member(i).map(|m| (m.size(), m.describe())).ok_or_else(|| ArrayError::Io(format!("member {i} is missing"))))
            .collect::<Result<_, _>>()?;
        let (room, smallest) = members.iter().min_by_key(|m| m.0).map(|(s, d)| (s.saturating_sub(DATA_OFFSET), d.clone())).unwrap_or_default();
        let want = size.unwrap_or(room);
        if want > room {
            return Err(ArrayError::BadMember(format!(
                "{smallest}: too small for {want} bytes a member: it holds {room} after the array's {DATA_OFFSET}-byte header (replace it with a larger drive first)"
            )));
        }
        let new = Geometry::new(old.level, old.members, old.unit, old.block, want)?;
        if new.stripes <= old.stripes {
            let now = old.member_data_bytes();
            return Err(ArrayError::Usage(match size {
                None => format!("nothing to grow: each member gives {now} bytes already, all its smallest drive ({smallest}) holds in whole {}-byte units", old.unit),
                Some(_) => format!("--size {want}: each member gives {now} bytes already; a size grow takes more (shrinking is not supported)"),
            }));
        }
        let need = DATA_OFFSET + new.member_data_bytes();
        if let Some((m, s)) = self.spares.lock().iter().find(|(m, _)| m.size() < need) {
            return Err(ArrayError::BadMember(format!("hot spare {}: too small for the grown members: {} bytes, they need {need} (remove it first: mosaic remove -a ARRAY --spare {})", s.path, m.size(), s.path)));
        }
        Ok(new)
    }
}
