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
        let Some(path) = place.resolve_own(&s.path, sb.array_uuid, s.uuid) else { continue };
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

    /// Whether the device at `path` could be added as a hot spare, checked
    /// without writing: not a working member, not a spare already, and,
    /// when it exists, as large as a member.  [`Array::add_spare`] checks
    /// the same, so a command adding several spares checks them all first.
    pub fn check_spare(&self, path: &Path) -> Result<(), ArrayError> {
        self.spare_path_free(path)?;
        if path.exists() || path.to_str().is_some_and(mosaic_dev::nbd::is_uri) {
            let m = Device::open(path).map_err(|e| ArrayError::BadMember(e.to_string()))?;
            self.fits_as_spare(m.size(), &path.display().to_string())?;
        }
        Ok(())
    }

    /// The checks of a spare by its path alone: the array takes writes,
    /// and `path` is neither a working member nor a spare already.
    fn spare_path_free(&self, path: &Path) -> Result<(), ArrayError> {
        self.check_writable()?;
        self.not_a_member(path, None)?;
        if let Some(s) = self.spares.lock().iter().find(|(_, s)| names_same(&s.path, path)) {
            return Err(ArrayError::Usage(format!("{} is a hot spare of this array already", s.1.path)));
        }
        Ok(())
    }

    /// A spare of `size` bytes at `path` holds a member's bytes.
    fn fits_as_spare(&self, size: u64, path: &str) -> Result<(), ArrayError> {
        if size < self.spare_size() {
            return Err(ArrayError::BadMember(format!("{path}: too small for a spare: {size} bytes, the array needs {}", self.spare_size())));
        }
        Ok(())
    }

    /// Add the device at `path` (created with the members' size when
    /// missing) as a hot spare, its path recorded as [`hint_of`] says.
    pub fn add_spare(&self, path: &Path) -> Result<(), ArrayError> {
        // The size is checked on the device opened here (add_spare_with):
        // opening it twice would connect to a remote export twice.
        self.spare_path_free(path)?;
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
        self.fits_as_spare(m.size(), path)?;
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

    /// Remove the hot spare at `path` (the path the array lists, or the
    /// same file by another name): the members' superblocks stop listing
    /// it, then its label is erased, so the device is free for any array
    /// again without `--force`.  The path it was listed under.
    pub fn remove_spare(&self, path: &Path) -> Result<String, ArrayError> {
        self.check_writable()?;
        let (m, spare) = {
            let mut s = self.spares.lock();
            let at = s.iter().position(|(_, sp)| names_same(&sp.path, path));
            let at = at.ok_or_else(|| ArrayError::Usage(not_a_spare(path, s.iter().map(|(_, sp)| sp.path.clone()))))?;
            s.remove(at)
        };
        // Listed nowhere first: a crash before the erase leaves a label
        // naming a spare the array no longer lists, which open ignores.
        if let Err(e) = self.write_superblocks(|s| s.spares.retain(|x| x.uuid != spare.uuid)) {
            self.spares.lock().push((m, spare));
            return Err(e);
        }
        let erased = mosaic_format::label::erase(&mut |b, off| m.write_at(b, off)).and_then(|_| m.flush());
        erased.map_err(|e| ArrayError::Io(format!("{}: the array no longer lists this spare, but erasing its label failed: {e}", spare.path)))?;
        Ok(spare.path)
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

/// Why `given` cannot be removed: it is none of the `listed` spares.
pub fn not_a_spare(given: &Path, listed: impl IntoIterator<Item = String>) -> String {
    let listed: Vec<String> = listed.into_iter().collect();
    let listed = if listed.is_empty() { "none".to_string() } else { listed.join(", ") };
    format!("{} is not a hot spare of this array (its spares: {listed})", given.display())
}

/// Whether `listed` (a spare's recorded path) and `given` name one file:
/// the same text, or the same file once both are resolved.
pub fn names_same(listed: &str, given: &Path) -> bool {
    let l = Path::new(listed);
    l == given || matches!((l.canonicalize(), given.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CreateOptions;
    use mosaic_core::Level;
    use mosaic_dev::MemMember;

    fn dev(name: &str) -> Arc<MemMember> {
        Arc::new(MemMember::new(name.to_string(), DATA_OFFSET + 4096 * 64))
    }

    fn all(ms: &[Arc<MemMember>]) -> Vec<Arc<dyn Member>> {
        ms.iter().map(|m| m.clone() as Arc<dyn Member>).collect()
    }

    #[test]
    fn a_removed_spare_is_listed_nowhere_its_label_is_erased_and_a_failure_takes_the_next() {
        let ms: Vec<Arc<MemMember>> = (0..4).map(|i| dev(&format!("m{i}"))).collect();
        let o = CreateOptions { level: Level::Raid5, members: Some(4), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
        let arr = Array::create_on(ms.iter().map(|m| (m.clone() as Arc<dyn Member>, m.describe())).collect(), &o, true).unwrap();
        let (s0, s1) = (dev("s0"), dev("s1"));
        arr.add_spare_with(s0.clone(), "mem:s0").unwrap();
        arr.add_spare_with(s1.clone(), "mem:s1").unwrap();
        let e = arr.remove_spare(Path::new("mem:m1")).unwrap_err().to_string();
        assert!(e.contains("not a hot spare") && e.contains("mem:s0, mem:s1"), "{e}");
        let events = arr.superblock().events;
        assert_eq!(arr.remove_spare(Path::new("mem:s0")).unwrap(), "mem:s0");
        assert_eq!(arr.spare_paths(), vec!["mem:s1".to_string()]);
        assert!(arr.superblock().events > events, "the members' superblocks were rewritten");
        assert!(Superblock::read_from(s0.as_ref()).is_err(), "s0's label is erased");
        let mut read = |b: &mut [u8], off: u64| s0.read_at(b, off);
        assert_eq!(mosaic_format::label::read_label(s0.size(), &mut read).unwrap(), Err(mosaic_format::label::LabelError::None));
        arr.close().unwrap();
        drop(arr);
        // Given again at open, s0 is no spare; s1 is, and takes a failure.
        let mut devs = all(&ms);
        devs.extend([s0.clone() as Arc<dyn Member>, s1.clone()]);
        let arr = Array::open_members(devs, true).unwrap();
        assert_eq!(arr.superblock().spares.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(), vec!["mem:s1"]);
        arr.fail_member(2).unwrap();
        assert_eq!(arr.take_spare().unwrap(), Some(2));
        assert!(arr.spare_paths().is_empty());
        assert_eq!(arr.take_spare().unwrap(), None);
    }

    #[test]
    fn a_spare_added_twice_or_one_whose_label_cannot_be_erased_says_so() {
        let t = tempfile::tempdir().unwrap();
        let ms: Vec<Arc<MemMember>> = (0..3).map(|i| dev(&format!("m{i}"))).collect();
        let o = CreateOptions { level: Level::Raid5, members: Some(3), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
        let arr = Array::create_on(ms.iter().map(|m| (m.clone() as Arc<dyn Member>, m.describe())).collect(), &o, true).unwrap();
        let f = t.path().join("s.img");
        arr.add_spare(&f).unwrap();
        let e = arr.add_spare(&t.path().join(".").join("s.img")).unwrap_err().to_string();
        assert!(e.contains("is a hot spare of this array already"), "{e}");
        // A spare whose device fails: the array no longer lists it, and the error says the label stays.
        let bad = Arc::new(mosaic_dev::FaultyMember::new(dev("bad")));
        arr.add_spare_with(bad.clone(), "mem:bad").unwrap();
        bad.break_now();
        let e = arr.remove_spare(Path::new("mem:bad")).unwrap_err().to_string();
        assert!(e.contains("mem:bad: the array no longer lists this spare, but erasing its label failed"), "{e}");
        assert_eq!(arr.spare_paths(), vec![f.display().to_string()]);
    }

    #[test]
    fn names_same_matches_text_or_the_same_file() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("s.img");
        std::fs::write(&f, b"x").unwrap();
        assert!(names_same(f.to_str().unwrap(), &t.path().join(".").join("s.img")));
        assert!(names_same("nbd://h/e", Path::new("nbd://h/e")));
        assert!(!names_same(f.to_str().unwrap(), &t.path().join("t.img")));
    }
}
