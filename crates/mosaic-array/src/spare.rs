//! Hot spares: devices an array holds in reserve, each with a label of
//! role `spare` naming the array, listed in every member's superblock.
//! When a member fails, [`Array::take_spare`] puts the first spare in its
//! place (state rebuilding, as `replace` does); the server then rebuilds
//! it online.  A spare holds no data, so it can never be stale.

use std::path::Path;
use std::sync::Arc;

use uuid::Uuid;

use mosaic_core::MemberState;
use mosaic_dev::{Device, Member};

use crate::array::Array;
use crate::assemble::{hint_of, Found, Place};
use crate::superblock::{MemberRole, Spare, Superblock, DATA_OFFSET};
use crate::ArrayError;

/// The spares of `sb` among `found`, else where their path hints say, in
/// the superblock's order; spares not found are dropped from it.
pub(crate) fn attach(sb: &mut Superblock, found: Vec<Found>, place: &Place, writable: bool) -> Vec<(Arc<dyn Member>, Spare)> {
    let mut out = Vec::new();
    for s in &sb.spares {
        let mine = |f: &Found| f.sb.array_uuid == sb.array_uuid && f.sb.member_uuid == s.uuid;
        if let Some(f) = found.iter().find(|f| mine(f)) {
            out.push((f.m.clone(), Spare { uuid: s.uuid, path: f.path.clone() }));
            continue;
        }
        let Some(path) = place.resolve(&s.path) else { continue };
        let Ok(m) = Device::open(Path::new(&path)) else { continue };
        if m.lock(writable).is_err() {
            continue;
        }
        if Superblock::read_from(&m).is_ok_and(|l| l.role == MemberRole::Spare && l.array_uuid == sb.array_uuid && l.member_uuid == s.uuid) {
            out.push((Arc::new(m), Spare { uuid: s.uuid, path }));
        }
    }
    sb.spares = out.iter().map(|(_, s)| s.clone()).collect();
    out
}

impl Array {
    /// Bytes a spare needs: the largest member's.
    fn spare_size(&self) -> u64 {
        let g = self.geometry();
        DATA_OFFSET + (0..g.members).map(|i| g.member_bytes(i)).max().unwrap_or(0)
    }

    /// Add the device at `path` (created with the members' size when
    /// missing) as a hot spare, its path recorded as [`hint_of`] says.
    pub fn add_spare(&self, path: &Path) -> Result<(), ArrayError> {
        self.check_writable()?;
        let created = !path.exists();
        let r = crate::array::open_or_create(path, self.spare_size()).and_then(|m| self.add_spare_with(Arc::new(m), &hint_of(path)));
        if r.is_err() && created {
            let _ = std::fs::remove_file(path);
        }
        r
    }

    /// [`Array::add_spare`] with an open device.
    pub fn add_spare_with(&self, m: Arc<dyn Member>, path: &str) -> Result<(), ArrayError> {
        self.check_writable()?;
        if m.size() < self.spare_size() {
            return Err(ArrayError::BadMember(format!("{path}: too small for a spare: {} bytes, the array needs {}", m.size(), self.spare_size())));
        }
        let spare = Spare { uuid: Uuid::new_v4(), path: path.to_string() };
        let mut label = self.superblock();
        label.role = MemberRole::Spare;
        label.member_index = 0;
        label.member_uuid = spare.uuid;
        label.spares.push(spare.clone());
        // Both slots, so the label outlives any later write of one.
        for ev in [label.events, label.events + 1] {
            Superblock { events: ev, ..label.clone() }.write_to(m.as_ref())?;
        }
        self.write_superblocks(|s| s.spares.push(spare.clone()))?;
        self.spares.lock().push((m, spare));
        Ok(())
    }

    /// Paths of the spares present.
    pub fn spare_paths(&self) -> Vec<String> {
        self.spares.lock().iter().map(|(_, s)| s.path.clone()).collect()
    }

    /// Put the first spare in place of the first failed member (which is
    /// then rebuilding; [`Array::rebuild`] follows).  None when no member
    /// is failed or no spare is left.
    pub fn take_spare(&self) -> Result<Option<usize>, ArrayError> {
        if !self.is_writable() || self.grow_pending().is_some() {
            return Ok(None);
        }
        let Some(idx) = self.health().states.iter().position(|s| matches!(s, MemberState::Failed)) else { return Ok(None) };
        let Some((m, spare)) = ({
            let mut s = self.spares.lock();
            (!s.is_empty()).then(|| s.remove(0))
        }) else {
            return Ok(None);
        };
        self.replace_with(idx, m, &spare.path)?;
        self.write_superblocks(|s| s.spares.retain(|x| x.uuid != spare.uuid))?;
        Ok(Some(idx))
    }
}
