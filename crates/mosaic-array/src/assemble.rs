//! Assembly: which device is which member, and which members may be used.
//!
//! ```text
//!   devices given (-a DIR or a list) ──> superblocks (labels) read
//!     unreadable, no/corrupt superblock ──> reported, not used
//!     mosaic_format::fresh::pick_array: the array = the UUID most carry
//!     member missing: tried by its path hint
//!     mosaic_format::fresh::assemble: authoritative = highest event counter,
//!       unless copies are mixed (fresh::choose: the copy that can serve);
//!       replaced, stale, another copy's, two devices for one slot ──┐
//!       too small for the geometry (this kind's) ───────────────────┴──> Failed, named
//!       a former member left in the directory (Superblock::replaced) ──> passed over
//!   more members out than the code tolerates ──> refused, with every reason
//!     a member being rebuilt is out only from its recorded position: when
//!     the stripes below it are whole, they are served and the rest named
//! ```
//!
//! The freshness rule is the one every kind shares
//! ([`mosaic_format::fresh`]).  Like md, the event counter decides: a member that missed writes is never
//! read and never used for code, whatever its superblock says about itself.
//! A bad device does not make the array unopenable (md assembles degraded):
//! it is reported by name.
//!
//! **Hints.**  Superblocks name the journal, nested arrays and members by
//! path only as hints; UUIDs decide identity.  Paths inside the array's
//! directory are stored relative to it, so a copy of the directory
//! (`cp -a A B`) resolves them inside the copy and never touches the
//! original.  The directory the array was created in is its `home`; when
//! a directory array is opened somewhere else while its home still holds
//! it, the array is a copy, and absolute hints (things outside the
//! directory, which belong to the original) are not followed, except to a
//! device the copy made its own there (a replacement or spare it added:
//! its label, looked at read-only first, carries a member UUID the
//! original's labels never name; [`Place::resolve_own`]).  A copy's own
//! members are recorded by absolute path (its home is the original's).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mosaic_core::MemberState;
use mosaic_dev::{Device, Member};
use mosaic_format::fresh;
use mosaic_format::label::Label;

use crate::nested::ARRAY_PREFIX;
use crate::spec::ArraySpec;
use crate::superblock::{failed_on_record, serves_from, Superblock, DATA_OFFSET};
use crate::ArrayError;

/// A device with a readable superblock.
pub(crate) struct Found {
    pub m: Arc<dyn Member>,
    pub sb: Superblock,
    pub path: String,
}

/// Where an array's path hints resolve.
#[derive(Debug, Clone, Default)]
pub(crate) struct Place {
    /// The array's directory (`-a DIR`) or the directory its listed
    /// members share; relative hints are relative to it.
    pub base: Option<PathBuf>,
    /// Opened from a directory array: absolute hints into the array's
    /// home resolve to the same place under `base` when it exists there.
    pub dir_spec: bool,
    /// The directory the array was created in (its superblock's), once
    /// known; `None` for arrays without one (made from a list of paths):
    /// their absolute hints resolve to the file of that name under `base`.
    pub home: Option<PathBuf>,
    /// This directory array is a copy of the one in this (still existing)
    /// home: absolute hints belong to the original and are not followed,
    /// unless they name a device the copy made its own ([`Place::resolve_own`]).
    pub copy_of: Option<PathBuf>,
    /// With `copy_of`: every device identity the original knows (its
    /// members' UUIDs in every slot, the ones it replaced, its spares and
    /// hot-replace drives), read from its labels.
    original_ids: Vec<uuid::Uuid>,
}

impl Place {
    /// The place of a spec (before superblocks are read).
    pub fn of(spec: &ArraySpec) -> Place {
        match spec {
            ArraySpec::Dir(d) => Place { base: Some(canonical(d)), dir_spec: true, ..Place::default() },
            ArraySpec::Paths(p) => {
                let parents: Vec<PathBuf> = p.iter().map(|x| canonical(x).parent().map(Path::to_path_buf).unwrap_or_default()).collect();
                let shared = parents.first().filter(|f| parents.iter().all(|x| x == *f)).cloned();
                Place { base: shared, ..Place::default() }
            }
        }
    }

    /// Note whether the directory array with superblock `sb` is a copy.
    pub fn detect_copy(&mut self, sb: &Superblock) {
        self.home = sb.home.as_ref().map(PathBuf::from);
        let (Some(base), Some(home), true) = (&self.base, &sb.home, self.dir_spec) else { return };
        let home = PathBuf::from(home);
        if &home == base {
            return;
        }
        let original = original_labels(&home, sb);
        if !original.is_empty() {
            self.original_ids = original.iter().flat_map(identities).collect();
            self.copy_of = Some(home);
        }
    }

    /// [`Place::resolve`] for the device of identity `uuid` (a member's
    /// slot, a spare, a hot replace's new drive).  A copy also follows an
    /// absolute hint outside its directory to a device it made its own: a
    /// replacement or spare it added there carries this array's UUID and
    /// a member UUID the copy gave it, which the original never had.  The
    /// label is only looked at (read-only) before the device is opened, so
    /// the original's devices are never opened or locked by the copy.
    pub fn resolve_own(&self, hint: &str, array: uuid::Uuid, uuid: uuid::Uuid) -> Option<String> {
        if let Some(p) = self.resolve(hint) {
            return Some(p);
        }
        let p = Path::new(hint);
        let own = self.copy_of.is_some()
            && p.is_absolute()
            && !self.original_ids.contains(&uuid)
            && read_only_superblock(p).is_some_and(|l| l.array_uuid == array && l.member_uuid == uuid);
        own.then(|| hint.to_string())
    }

    /// The path to open for `hint`, or None when it must not be followed.
    pub fn resolve(&self, hint: &str) -> Option<String> {
        // A remote member's URI is where it is; a copy of the array does
        // not follow it (the export belongs to the original).
        if mosaic_dev::nbd::is_uri(hint) {
            return self.copy_of.is_none().then(|| hint.to_string());
        }
        if let Some(rest) = hint.strip_prefix(ARRAY_PREFIX) {
            return self.resolve(rest).map(|p| format!("{ARRAY_PREFIX}{p}"));
        }
        if hint.is_empty() {
            return None;
        }
        let p = Path::new(hint);
        if p.is_relative() {
            return Some(match &self.base {
                Some(b) => b.join(p).display().to_string(),
                None => hint.to_string(),
            });
        }
        if let Some(local) = self.in_base(p).filter(|l| l.exists()) {
            return Some(local.display().to_string());
        }
        if self.copy_of.is_some() {
            return None;
        }
        Some(hint.to_string())
    }

    /// Where the absolute hint `p` would be under `base`, when it names
    /// something of the array's own directory: a path under its home (the
    /// same path under `base`) or under `base` itself, or, for an array
    /// without a home, a file whose name is in `base`.  A hint outside the
    /// home (an external journal, a member elsewhere) is never redirected
    /// to a file that happens to share its name.
    fn in_base(&self, p: &Path) -> Option<PathBuf> {
        let (true, Some(b)) = (self.dir_spec, &self.base) else { return None };
        if p.starts_with(b) {
            // Already this directory's (a copy stores its own files so).
            return Some(p.to_path_buf());
        }
        match &self.home {
            Some(home) => p.strip_prefix(home).ok().filter(|r| !r.as_os_str().is_empty()).map(|r| b.join(r)),
            None => p.file_name().map(|n| b.join(n)),
        }
    }

    /// Why `hint` was not followed (for messages).
    pub fn refusal(&self, hint: &str) -> String {
        match &self.copy_of {
            Some(home) => format!(
                "{hint} is outside this directory and belongs to the array in {} (this directory is a copy of it, so it is not used)",
                home.display()
            ),
            None => format!("{hint} cannot be used"),
        }
    }
}

/// `path` as stored in a superblock: relative to `home` when inside it,
/// else absolute.  A stored relative hint is read relative to the array's
/// directory, so a path relative to this process's directory (a copy's
/// own member as opened: the copy's home is the original's) is stored
/// absolute, never as it was spelled.
pub(crate) fn relativize(path: &str, home: Option<&str>) -> String {
    if let Some(rest) = path.strip_prefix(ARRAY_PREFIX) {
        return format!("{ARRAY_PREFIX}{}", relativize(rest, home));
    }
    let Some(home) = home else { return path.to_string() };
    let c = canonical(Path::new(path));
    match c.strip_prefix(home) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ if Path::new(path).is_relative() && !mosaic_dev::nbd::is_uri(path) => c.display().to_string(),
        _ => path.to_string(),
    }
}

/// The hint to record for a device the user named by `path` (a
/// replacement, a spare): absolute ([`mosaic_dev::nbd::absolute`]), since
/// relative hints resolve from the array's home at the next open, not
/// from where this process ran.
pub(crate) fn hint_of(path: &Path) -> String {
    mosaic_dev::nbd::absolute(path).display().to_string()
}

pub(crate) use mosaic_dev::nbd::canonical;

/// The labels of the array of `sb` that directory `home` holds (read
/// only: the original's files are only looked at, and may be read-only).
fn original_labels(home: &Path, sb: &Superblock) -> Vec<Superblock> {
    let Ok(paths) = ArraySpec::Dir(home.to_path_buf()).member_paths() else { return Vec::new() };
    paths.iter().filter_map(|p| read_only_superblock(p)).filter(|o| o.array_uuid == sb.array_uuid).collect()
}

/// Every device identity a label knows of.
fn identities(l: &Superblock) -> Vec<uuid::Uuid> {
    let mut ids = vec![l.member_uuid];
    ids.extend(&l.member_uuids);
    ids.extend(&l.replaced);
    ids.extend(l.spares.iter().map(|s| s.uuid));
    ids.extend(l.hot.iter().map(|h| h.uuid));
    ids
}

/// The superblock of the file or block device at `p`, opened read-only.
fn read_only_superblock(p: &Path) -> Option<Superblock> {
    use std::io::{Seek, SeekFrom};
    use std::os::unix::fs::FileExt;
    let mut f = std::fs::File::open(p).ok()?;
    let size = f.seek(SeekFrom::End(0)).ok()?;
    let label = mosaic_format::label::read_label(size, &mut |buf, off| f.read_exact_at(buf, off)).ok()?.ok()?;
    Superblock::from_label(label).ok()
}

/// The result of assembly.
pub(crate) struct Assembly {
    /// The authoritative superblock, member states updated (missing and
    /// stale members failed), member paths as opened.
    pub sb: Superblock,
    pub slots: Vec<Option<Arc<dyn Member>>>,
    /// What a user must hear: every device not used, and why.
    pub warnings: Vec<String>,
    /// Member states differ from what the superblocks recorded.
    pub states_changed: bool,
}

/// `f` as the freshness rule sees it: its label, named by its path.
fn to_fresh(f: Found) -> Result<fresh::Found<Found>, ArrayError> {
    Ok(fresh::Found { label: f.sb.to_label()?, name: f.path.clone(), dev: f })
}

fn to_fresh_all(found: Vec<Found>) -> Result<Vec<fresh::Found<Found>>, ArrayError> {
    found.into_iter().map(to_fresh).collect()
}

/// Try the path hints of members no given device supplied.
fn follow_hints(found: &mut Vec<Found>, auth: &Superblock, place: &Place, writable: bool, warnings: &mut Vec<String>) {
    for (i, hint) in auth.member_paths.iter().enumerate() {
        let have = found.iter().any(|f| f.sb.member_index == i && f.sb.member_uuid == auth.member_uuids[i]);
        if have || hint.is_empty() {
            continue;
        }
        let Some(path) = place.resolve_own(hint, auth.array_uuid, auth.member_uuids[i]) else {
            warnings.push(format!("member {i}: {}", place.refusal(hint)));
            continue;
        };
        if found.iter().any(|f| canonical(Path::new(&f.path)) == canonical(Path::new(&path))) {
            continue;
        }
        if let Some(nested) = crate::nested::open_hint(&path, writable) {
            // A check drive array that is an array of its own; if it
            // cannot be assembled the member counts as missing.
            match nested {
                Ok((m, inner)) => {
                    warnings.extend(inner);
                    match Superblock::read_from(m.as_ref()) {
                        Ok(sb) => found.push(Found { m, sb, path }),
                        Err(e) => warnings.push(format!("member {i}: {e}")),
                    }
                }
                Err(e) => warnings.push(format!("member {i} ({path}): {e}")),
            }
            continue;
        }
        let Ok(m) = Device::open(Path::new(&path)) else { continue };
        if m.lock(writable).is_err() {
            continue; // held elsewhere (or already open here under another name)
        }
        if let Ok(sb) = Superblock::read_from(&m) {
            if sb.array_uuid == auth.array_uuid {
                found.push(Found { m: Arc::new(m), sb, path });
            }
        }
    }
}

/// The fixed kind's own reason `f` cannot fill its slot: a member too
/// small for the geometry of `auth` (the freshness rule does the rest).
fn too_small(f: &Found, auth: &Superblock) -> Option<String> {
    let i = f.sb.member_index;
    let need = DATA_OFFSET + auth.geometry.member_bytes(i);
    (f.m.size() < need).then(|| format!("{}: member {i} is too small: {} bytes, the array needs {need} (truncated?); not used", f.path, f.m.size()))
}

/// The superblock of a label of this kind (None for another kind's).
fn sb_of(l: &Label) -> Option<Superblock> {
    Superblock::from_label(l.clone()).ok()
}

/// Whether `f`, found by listing the array's directory (`dir_spec`),
/// is a former member the array of `auth` recorded replacing
/// ([`Superblock::replaced`]): passed over without a warning, as md and
/// ZFS pass over a replaced disk.  One the user named is still named.
fn retired(f: &fresh::Found<Found>, auth: &Label, dir_spec: bool) -> bool {
    let l = &f.label;
    dir_spec && auth.member_uuids.get(l.member_index).is_some_and(|u| *u != l.member_uuid) && sb_of(auth).is_some_and(|sb| sb.replaced.contains(&l.member_uuid))
}

/// A grow whose new members did not all get their superblock (a crash
/// while it started) moved no data yet: it is undone, and the array is
/// what it was before.
fn roll_back_unstarted_grow(sb: &mut Superblock, slots: &mut Vec<Option<Arc<dyn Member>>>, warnings: &mut Vec<String>) {
    let Some(r) = &sb.reshape else { return };
    let old = r.from.members;
    if r.pos > 0 || r.backup_crc.is_some() || slots[old..].iter().all(Option::is_some) {
        return;
    }
    warnings.push(format!("a grow from {old} to {} members was rolled back: it had moved no data, and new members {:?} carry no superblock", sb.geometry.members, (old..slots.len()).filter(|&i| slots[i].is_none()).collect::<Vec<_>>()));
    sb.geometry = r.from.clone();
    sb.member_data_size = sb.geometry.member_data_bytes();
    sb.reshape = None;
    slots.truncate(old);
    sb.member_states.truncate(old);
    sb.member_uuids.truncate(old);
    sb.member_paths.truncate(old);
    if !sb.member_hosts.is_empty() {
        sb.member_hosts.truncate(old);
    }
}

/// The superblock the one rule makes the array's among `found` (of the
/// array most of them belong to: [`fresh::choose`]), so its journal and
/// home are the ones used, not those of another copy's member that went
/// further; the freshest when the rule refuses (assembly says why).
pub(crate) fn chosen(found: &[Found]) -> Option<Superblock> {
    let labels: Vec<fresh::Found<&Found>> = found.iter().filter_map(|f| Some(fresh::Found { label: f.sb.to_label().ok()?, name: f.path.clone(), dev: f })).collect();
    let ours = fresh::pick_array(labels, &mut Vec::new()).ok()?;
    let own = |f: &fresh::Found<&Found>, auth: &Label| sb_of(auth).and_then(|sb| too_small(f.dev, &sb));
    let kind = fresh::Kind { failed: &failed_on_record, own: &own, serves: &serves_from, retired: &|_, _| false };
    match fresh::choose(&ours, &kind) {
        Ok(Some(i)) => Some(ours[i].dev.sb.clone()),
        _ => freshest(found),
    }
}

/// The freshest superblock among `found` (the one [`fresh::choose`]
/// starts from).
fn freshest(found: &[Found]) -> Option<Superblock> {
    let keys: Vec<(u64, uuid::Uuid)> = found.iter().map(|f| (f.sb.events, f.sb.session)).collect();
    fresh::pick_authoritative(&keys).map(|i| found[i].sb.clone())
}

/// Assemble from the devices found; `rejected` are messages about devices
/// given that carried no usable superblock.
pub(crate) fn assemble(
    found: Vec<Found>,
    rejected: Vec<String>,
    place: &Place,
    writable: bool,
    use_hints: bool,
) -> Result<Assembly, ArrayError> {
    let mut warnings = rejected;
    let ours = fresh::pick_array(to_fresh_all(found)?, &mut warnings).map_err(ArrayError::Usage)?;
    let mut found: Vec<Found> = ours.into_iter().map(|f| f.dev).collect();
    let Some(first) = chosen(&found) else {
        let why = if warnings.is_empty() { String::new() } else { format!(": {}", warnings.join("; ")) };
        return Err(ArrayError::BadMember(format!("no member of any array found{why}")));
    };
    if use_hints {
        follow_hints(&mut found, &first, place, writable, &mut warnings);
    }
    // Identities on the devices found, stale ones included.
    let seen: Vec<uuid::Uuid> = found.iter().map(|f| f.sb.member_uuid).collect();
    let own = |f: &fresh::Found<Found>, auth: &Label| sb_of(auth).and_then(|sb| too_small(&f.dev, &sb));
    let retired = |f: &fresh::Found<Found>, auth: &Label| retired(f, auth, place.dir_spec);
    let kind = fresh::Kind { failed: &failed_on_record, own: &own, serves: &serves_from, retired: &retired };
    let a = fresh::assemble(to_fresh_all(found)?, warnings, &kind).map_err(ArrayError::Usage)?;
    let auth = Superblock::from_label(a.auth.clone()).map_err(ArrayError::Format)?;
    let mut sb = auth.clone();
    // In memory, hints are paths as this open resolves them.
    for p in sb.member_paths.iter_mut().chain(sb.journal.iter_mut()) {
        if let Some(r) = place.resolve(p) {
            *p = r;
        }
    }
    let mut slots: Vec<Option<Arc<dyn Member>>> = Vec::with_capacity(a.slots.len());
    for (i, slot) in a.slots.into_iter().enumerate() {
        match slot {
            Some((path, f)) => {
                sb.member_paths[i] = path;
                slots.push(Some(f.m));
            }
            None => {
                // Active at the last update and absent altogether (not
                // stale): its device carries that update's session, which
                // a re-add checks (`Superblock::left`).
                if sb.bitmap.is_some() && matches!(sb.member_states[i], MemberState::Active) && !seen.contains(&sb.member_uuids[i]) && !auth.session.is_nil() {
                    sb.left.resize(sb.member_uuids.len(), uuid::Uuid::nil());
                    sb.left[i] = auth.session;
                }
                sb.member_states[i] = MemberState::Failed;
                slots.push(None);
            }
        }
    }
    let mut warnings = a.warnings;
    roll_back_unstarted_grow(&mut sb, &mut slots, &mut warnings);
    let n = sb.geometry.members;
    if !sb.left.is_empty() {
        sb.left.resize(n, uuid::Uuid::nil());
    }
    let out: Vec<usize> = (0..n).filter(|&i| !matches!(sb.member_states[i], MemberState::Active)).collect();
    let tolerable = sb.geometry.m;
    let columns = sb.geometry.columns_out(&out);
    // A member being rebuilt is out only from its recorded position on: the
    // stripes below it may still be whole, as the live array reads them
    // (a second failure during a rebuild).  Those are kept; the rest are
    // named.  (A grow never runs on a degraded array.)
    let whole = if sb.reshape.is_none() { sb.geometry.whole_stripes(&sb.member_states) } else { 0 };
    if columns > tolerable && whole > 0 {
        warnings.push(partly_whole(&sb, whole));
    } else if columns > tolerable {
        let why = if warnings.is_empty() { String::new() } else { format!(" ({})", warnings.join("; ")) };
        let lost = if columns == out.len() { String::new() } else { format!(" ({columns} columns of a stripe)") };
        return Err(ArrayError::Usage(format!(
            "cannot assemble array {}: members {out:?} are missing or failed{lost}, more than the {tolerable} {} tolerates{why}",
            sb.array_uuid, sb.geometry.level
        )));
    }
    let states_changed = sb.member_states != auth.member_states || sb.geometry != auth.geometry;
    Ok(Assembly { sb, slots, warnings, states_changed })
}

/// The open warning of an array whose stripes from `whole` on have more
/// columns out than its code tolerates, while the stripes below are whole
/// (members being rebuilt hold valid units below their recorded position):
/// which stripes and bytes cannot be read, and why.
fn partly_whole(sb: &Superblock, whole: u64) -> String {
    let g = &sb.geometry;
    let sd = g.stripe_data_bytes();
    let at = (whole * sd).min(g.capacity());
    let mut out = Vec::new();
    for (i, s) in sb.member_states.iter().enumerate() {
        match s {
            MemberState::Failed => out.push(format!("member {i} is failed or missing")),
            MemberState::Rebuilding { done } if *done <= whole => out.push(format!("member {i} is rebuilt only below stripe {done}")),
            _ => {}
        }
    }
    format!(
        "stripes {whole}..{} (bytes {at}..{}) cannot be read or written: more columns of them are out than the {} {} tolerates ({}); \
         reads and writes there fail, stripes 0..{whole} (bytes 0..{at}) are whole and served",
        g.stripes,
        g.capacity(),
        g.m,
        g.level,
        out.join(", ")
    )
}
