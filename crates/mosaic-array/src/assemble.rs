//! Assembly: which device is which member, and which members may be used.
//!
//! ```text
//!   devices given (-a DIR or a list) ──> superblocks read
//!     unreadable, no/corrupt superblock, too small ──> reported, not used
//!     the array = the UUID most devices carry; others reported, not used
//!     authoritative superblock = the highest event counter
//!     member missing (tried by its path hint) ─────────┐
//!     replaced since (member UUID differs) ─────────────┤
//!     stale: events + EVENT_MARGIN < the array's ───────┼──> Failed, named
//!     two devices claim one slot: the fresher wins ─────┘    in a warning
//!   more members out than the code tolerates ──> refused, with every reason
//! ```
//!
//! Like md, the event counter decides: a member that missed writes is never
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
//! directory, which belong to the original) are not followed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mosaic_core::MemberState;
use mosaic_dev::{FileMember, Member};

use crate::nested::ARRAY_PREFIX;
use crate::spec::ArraySpec;
use crate::superblock::{Superblock, DATA_OFFSET, EVENT_MARGIN};
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
    /// Opened from a directory array: hints whose file name exists in
    /// `base` resolve there.
    pub dir_spec: bool,
    /// This directory array is a copy of the one in this (still existing)
    /// home: absolute hints belong to the original and are not followed.
    pub copy_of: Option<PathBuf>,
}

impl Place {
    /// The place of a spec (before superblocks are read).
    pub fn of(spec: &ArraySpec) -> Place {
        match spec {
            ArraySpec::Dir(d) => Place { base: Some(canonical(d)), dir_spec: true, copy_of: None },
            ArraySpec::Paths(p) => {
                let parents: Vec<PathBuf> = p.iter().map(|x| canonical(x).parent().map(Path::to_path_buf).unwrap_or_default()).collect();
                let shared = parents.first().filter(|f| parents.iter().all(|x| x == *f)).cloned();
                Place { base: shared, dir_spec: false, copy_of: None }
            }
        }
    }

    /// Note whether the directory array with superblock `sb` is a copy.
    pub fn detect_copy(&mut self, sb: &Superblock) {
        let (Some(base), Some(home), true) = (&self.base, &sb.home, self.dir_spec) else { return };
        let home = PathBuf::from(home);
        if &home != base && holds_array(&home, sb) {
            self.copy_of = Some(home);
        }
    }

    /// The path to open for `hint`, or None when it must not be followed.
    pub fn resolve(&self, hint: &str) -> Option<String> {
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
        if let (true, Some(b), Some(name)) = (self.dir_spec, &self.base, p.file_name()) {
            if b.join(name).exists() {
                return Some(b.join(name).display().to_string());
            }
        }
        if self.copy_of.is_some() {
            return None;
        }
        Some(hint.to_string())
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

/// `path` as stored in a superblock: relative to `home` when inside it.
pub(crate) fn relativize(path: &str, home: Option<&str>) -> String {
    if let Some(rest) = path.strip_prefix(ARRAY_PREFIX) {
        return format!("{ARRAY_PREFIX}{}", relativize(rest, home));
    }
    let Some(home) = home else { return path.to_string() };
    let c = canonical(Path::new(path));
    match c.strip_prefix(home) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.to_string(),
    }
}

/// The canonical form of a path that may not exist yet (its parent's).
pub(crate) fn canonical(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    match (p.parent(), p.file_name()) {
        (Some(dir), Some(name)) if !dir.as_os_str().is_empty() => canonical(dir).join(name),
        _ => std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf()),
    }
}

/// Whether directory `home` holds a member of the array of `sb`.
fn holds_array(home: &Path, sb: &Superblock) -> bool {
    let Ok(paths) = ArraySpec::Dir(home.to_path_buf()).member_paths() else { return false };
    paths.iter().any(|p| {
        FileMember::open(p).ok().and_then(|m| Superblock::read_from(&m).ok()).is_some_and(|o| o.array_uuid == sb.array_uuid)
    })
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

/// Keep the devices of the array most of them belong to; the others are
/// reported.
fn pick_array(found: Vec<Found>, warnings: &mut Vec<String>) -> Result<Vec<Found>, ArrayError> {
    let mut groups: Vec<(uuid::Uuid, usize)> = Vec::new();
    for f in &found {
        match groups.iter_mut().find(|g| g.0 == f.sb.array_uuid) {
            Some(g) => g.1 += 1,
            None => groups.push((f.sb.array_uuid, 1)),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.1));
    if groups.len() > 1 && groups[0].1 == groups[1].1 {
        let names = |u: uuid::Uuid| found.iter().filter(|f| f.sb.array_uuid == u).map(|f| f.path.clone()).collect::<Vec<_>>().join(", ");
        return Err(ArrayError::Usage(format!(
            "members from two arrays, as many of each: {} belong to {} but {} belong to {}",
            names(groups[0].0),
            groups[0].0,
            names(groups[1].0),
            groups[1].0
        )));
    }
    let Some(&(uuid, _)) = groups.first() else { return Ok(found) };
    let (ours, theirs): (Vec<Found>, Vec<Found>) = found.into_iter().partition(|f| f.sb.array_uuid == uuid);
    for f in theirs {
        warnings.push(format!("{}: belongs to another array ({}, member {}); not used", f.path, f.sb.array_uuid, f.sb.member_index));
    }
    Ok(ours)
}

/// Try the path hints of members no given device supplied.
fn follow_hints(found: &mut Vec<Found>, auth: &Superblock, place: &Place, writable: bool, warnings: &mut Vec<String>) {
    for (i, hint) in auth.member_paths.iter().enumerate() {
        let have = found.iter().any(|f| f.sb.member_index == i && f.sb.member_uuid == auth.member_uuids[i]);
        if have || hint.is_empty() {
            continue;
        }
        let Some(path) = place.resolve(hint) else {
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
        let Ok(m) = FileMember::open(Path::new(&path)) else { continue };
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

/// Why `f` cannot fill its slot, if it cannot.
fn unusable(f: &Found, auth: &Superblock) -> Option<String> {
    let n = auth.geometry.members;
    let i = f.sb.member_index;
    if i >= n {
        return Some(format!("{}: member index {i} out of range for {n} members; not used", f.path));
    }
    if f.sb.member_uuid != auth.member_uuids[i] {
        return Some(format!("{}: was member {i} before that member was replaced; not used", f.path));
    }
    let need = DATA_OFFSET + auth.geometry.member_bytes(i);
    if f.m.size() < need {
        return Some(format!("{}: member {i} is too small: {} bytes, the array needs {need} (truncated?); not used", f.path, f.m.size()));
    }
    if f.sb.events + EVENT_MARGIN < auth.events {
        return Some(format!(
            "{}: member {i} is stale (event counter {}, the array is at {}): it missed writes, so it is failed and never read; \
             `mosaic replace --member {i} --drive PATH` rebuilds it",
            f.path, f.sb.events, auth.events
        ));
    }
    None
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
    let mut found = pick_array(found, &mut warnings)?;
    let Some(auth) = found.iter().max_by_key(|f| f.sb.events).map(|f| f.sb.clone()) else {
        let why = if warnings.is_empty() { String::new() } else { format!(": {}", warnings.join("; ")) };
        return Err(ArrayError::BadMember(format!("no member of any array found{why}")));
    };
    let n = auth.geometry.members;
    if use_hints {
        follow_hints(&mut found, &auth, place, writable, &mut warnings);
    }
    // The freshest device first, so it wins a slot two devices claim.
    found.sort_by_key(|f| std::cmp::Reverse(f.sb.events));
    let mut slots: Vec<Option<Arc<dyn Member>>> = vec![None; n];
    let mut slot_events = vec![0u64; n];
    let mut sb = auth.clone();
    // In memory, hints are paths as this open resolves them.
    for p in sb.member_paths.iter_mut().chain(sb.journal.iter_mut()) {
        if let Some(r) = place.resolve(p) {
            *p = r;
        }
    }
    for f in found {
        if auth.member_states.get(f.sb.member_index).is_some_and(|s| matches!(s, MemberState::Failed)) {
            continue; // failed on record: its device is not opened until replaced
        }
        if let Some(why) = unusable(&f, &auth) {
            warnings.push(why);
            continue;
        }
        let i = f.sb.member_index;
        if slots[i].is_some() {
            if slot_events[i] == f.sb.events {
                return Err(ArrayError::Usage(format!(
                    "two devices claim member {i} of array {}: {} and {} (same event counter {}); give only one",
                    auth.array_uuid, sb.member_paths[i], f.path, f.sb.events
                )));
            }
            warnings.push(format!("{}: an older copy of member {i} (event counter {}, {} is at {}); not used", f.path, f.sb.events, sb.member_paths[i], slot_events[i]));
            continue;
        }
        slot_events[i] = f.sb.events;
        sb.member_paths[i] = f.path;
        slots[i] = Some(f.m);
    }
    for (i, slot) in slots.iter().enumerate() {
        if slot.is_none() {
            sb.member_states[i] = MemberState::Failed;
        }
    }
    let out: Vec<usize> = (0..n).filter(|&i| !matches!(sb.member_states[i], MemberState::Active)).collect();
    let tolerable = sb.geometry.m;
    if out.len() > tolerable {
        let why = if warnings.is_empty() { String::new() } else { format!(" ({})", warnings.join("; ")) };
        return Err(ArrayError::Usage(format!(
            "cannot assemble array {}: members {out:?} are missing or failed, more than the {tolerable} {} tolerates{why}",
            sb.array_uuid, sb.geometry.level
        )));
    }
    let states_changed = sb.member_states != auth.member_states;
    Ok(Assembly { sb, slots, warnings, states_changed })
}
