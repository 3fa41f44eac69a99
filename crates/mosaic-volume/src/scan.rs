//! Find arrays by what is on the disks: `mosaic examine` (one member's
//! label, as mdadm `--examine`) and `mosaic assemble --scan` (every
//! array whose members or journals lie under some paths, by UUID,
//! wherever their files are).
//!
//! ```text
//!   paths ─ walk (directories recursively, files, block devices, NBD URIs) ─ guard::identify
//!     + the devices each DVS directory records outside itself
//!       (dvs-paths.json, followed as an open follows it)
//!     member label  ─┐  grouped by array UUID; per member its index, path,
//!     journal header ─┘  event counter; the array's label as the one rule
//!                        picks it (mosaic_format::fresh::choose: a copy's
//!                        member that went further does not make the
//!                        array's own stale); each member fresh, stale,
//!                        another copy's, or replaced (a former member)
//!   -> per array: kind, level, members found / expected, missing and stale
//!      indices, journals, and the member list in index order (`-a` spec)
//!
//!   copies (cp -a of an array directory): one UUID, the same members (by
//!   member UUID) found two or more to a directory in two or more
//!   directories -> one array per directory, each its own
//!   (`copy`); devices outside them go with the array's home directory
//!   (the original), else make an array of their own; labels naming no
//!   home (DVS): the original is the directory whose files were born
//!   with the array
//! ```
//!
//! Nothing is written or locked; nothing is assembled for writing: the
//! spec it prints is what `mosaic info/serve -a` take.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use mosaic_format::fresh;
use mosaic_format::label::Label;

use crate::guard::{self, Carries};
use crate::Result;

/// One member as found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FoundMember {
    pub index: usize,
    pub path: String,
    pub member_uuid: String,
    pub events: u64,
    /// Two or more events behind the array (as the one freshness rule
    /// picks it, [`mosaic_format::fresh::choose`]): it missed writes.
    pub stale: bool,
    /// Not used: it carries the writes of another copy of the array (a
    /// session of its own), written apart from the members found with it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub other_copy: bool,
    /// Not used: a former member, replaced since (its member UUID is not
    /// the one the array has in its slot now).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replaced: bool,
}

/// One array as found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FoundArray {
    pub uuid: String,
    /// The label kind (`fixed`, `dvs`).
    pub kind: String,
    /// The level, when the label's policy names one.
    pub level: Option<String>,
    /// Members the array has.
    pub members: usize,
    /// The members found, by index (the newest copy of a duplicated index).
    pub found: Vec<FoundMember>,
    /// Indices with no copy found.
    pub missing: Vec<usize>,
    /// Copies of a member seen more than once (the older ones).
    pub duplicates: Vec<String>,
    /// What following a DVS directory's recorded paths found amiss (a
    /// recorded device of another array, or one a copy leaves to its
    /// original): those devices are not part of the array.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Devices of a slot the array recorded replacing (its former
    /// members, left where they were: after a hot replace, say).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub former: Vec<String>,
    pub journals: Vec<String>,
    /// Hot spares found.
    pub spares: Vec<String>,
    /// New drives of a paused hot replace (the copy resumes onto one at
    /// the array's next writable open).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paused_copies: Vec<String>,
    /// Enough fresh members to open (all, or degraded within the code).
    pub complete: bool,
    /// Set when copies of the array (same UUID) were found in several
    /// directories: which one this is.  Each copy is its own array;
    /// devices elsewhere are listed with the original's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy: Option<CopyPlace>,
    /// Part of another array (a tier's side, a remapped array's inner
    /// array), in words: open that one, not this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part_of: Option<String>,
    /// With `part_of`: the directory to open that array by (the one
    /// holding this array's directory, as a tier holds its sides).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner_dir: Option<String>,
    /// The directory to open it by, when a member list cannot name it (a
    /// member is an array itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_dir: Option<String>,
    /// Why the members found are not one array: members of copies
    /// written apart, none of which can serve it, or two as well as each
    /// other (the one rule's refusal, as an open would say it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
}

/// Which of several copies of an array a [`FoundArray`] is.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CopyPlace {
    /// The directory its members are in.
    pub dir: String,
    /// The array's home (where it was made), as its labels record it; for
    /// an array whose labels name no home (DVS, or made from a list of
    /// devices), the directory whose member files were made when the
    /// array was (their birth time, where the file system keeps one),
    /// not later by a copy.
    pub original: bool,
}

impl FoundArray {
    /// The member list in index order, then the spares, as `-a` takes it.
    pub fn spec(&self) -> String {
        if let Some(d) = &self.open_dir {
            return d.clone();
        }
        self.found.iter().map(|m| m.path.as_str()).chain(self.spares.iter().map(String::as_str)).collect::<Vec<_>>().join(",")
    }
}

/// Every array with a member or journal under `paths`, by UUID.
pub fn scan(paths: &[PathBuf]) -> Result<Vec<FoundArray>> {
    scan_with_progress(paths, &|_, _| {})
}

/// [`scan`], calling `progress(files looked at so far, files found)`
/// before each file's label is read.
pub fn scan_with_progress(paths: &[PathBuf], progress: &dyn Fn(u64, u64)) -> Result<Vec<FoundArray>> {
    scan_report(paths, progress).map(|(found, _)| found)
}

/// [`scan_with_progress`], and the warnings no array found owns (a DVS
/// directory whose recorded devices could not be followed, and none of
/// whose own files was found); each array's own are in
/// [`FoundArray::warnings`].
pub fn scan_report(paths: &[PathBuf], progress: &dyn Fn(u64, u64)) -> Result<(Vec<FoundArray>, Vec<String>)> {
    let mut files = Vec::new();
    for p in paths {
        walk(p, 0, &mut files)?;
    }
    let notes = follow_recorded(&mut files);
    let mut loose = Vec::new();
    let mut found = identify_all(files, progress, &mut loose)?;
    for (dir, ws) in notes {
        let in_dir = |f: &FoundArray| f.found.iter().any(|m| Path::new(&m.path).parent().map(mosaic_dev::nbd::canonical) == Some(mosaic_dev::nbd::canonical(&dir)));
        match found.iter_mut().find(|f| in_dir(f)) {
            Some(f) => f.warnings.extend(ws),
            None => loose.extend(ws),
        }
    }
    Ok((found, loose))
}

/// The arrays the labels of `files` make up.
fn identify_all(files: Vec<PathBuf>, progress: &dyn Fn(u64, u64), unreachable: &mut Vec<String>) -> Result<Vec<FoundArray>> {
    let total = files.len() as u64;
    let mut arrays: BTreeMap<String, Builder> = BTreeMap::new();
    for (i, f) in files.into_iter().enumerate() {
        progress(i as u64, total);
        let what = match guard::identify(&f) {
            // A remote member that does not answer is missing from here,
            // as a local file that is not there: said, not fatal.
            Err(e) if is_remote(&f) => {
                unreachable.push(format!("{e}; its label could not be read"));
                continue;
            }
            r => r?,
        };
        match what {
            Carries::Member { .. } | Carries::DvsMember { .. } => {
                if let Some(l) = guard::member_label(&f)? {
                    arrays.entry(l.array_uuid.to_string()).or_default().member(&f, l);
                }
            }
            Carries::Journal { array } => arrays.entry(array).or_default().journals.push(f.display().to_string()),
            Carries::Spare { array } => arrays.entry(array).or_default().spares.push(f.display().to_string()),
            Carries::HotCopy { array, .. } => arrays.entry(array).or_default().paused.push(f.display().to_string()),
            _ => {}
        }
    }
    Ok(arrays.into_iter().flat_map(|(uuid, b)| b.split(uuid)).collect())
}

fn is_remote(p: &Path) -> bool {
    p.to_str().is_some_and(mosaic_dev::nbd::is_uri)
}

/// Files and block devices under `p` (directories to a depth of 8; symbolic
/// links to directories are not followed, so no loop), and `p` itself
/// when it is an NBD URI (a remote member, looked at by its label).
fn walk(p: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<()> {
    if is_remote(p) {
        out.push(p.to_path_buf());
        return Ok(());
    }
    let meta = std::fs::symlink_metadata(p).map_err(|e| crate::VolumeError::Io { what: p.display().to_string(), err: e })?;
    if meta.is_dir() {
        if depth >= 8 {
            return Ok(());
        }
        let rd = std::fs::read_dir(p).map_err(|e| crate::VolumeError::Io { what: p.display().to_string(), err: e })?;
        let mut names: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        names.sort();
        for n in names {
            walk(&n, depth + 1, out)?;
        }
    } else {
        out.push(p.to_path_buf());
    }
    Ok(())
}

/// Add to `files` the devices each DVS directory among them records
/// outside itself (its [`mosaic_dvs::files::PATHS_FILE`]), at their real
/// paths, by the rules an open follows them by
/// ([`mosaic_dvs::files::dir_devices`]: only files whose label is of the
/// recorded array; a copy of a directory does not take its original's).
/// A file already found is not added twice.  Read only.  Returns each
/// directory's warnings (devices recorded but not taken, and why).
fn follow_recorded(files: &mut Vec<PathBuf>) -> Vec<(PathBuf, Vec<String>)> {
    let canon = mosaic_dev::nbd::canonical;
    let dirs: BTreeSet<PathBuf> = files.iter().filter(|f| f.file_name().is_some_and(|n| n == mosaic_dvs::files::PATHS_FILE)).filter_map(|f| f.parent().map(Path::to_path_buf)).collect();
    let mut seen: BTreeSet<PathBuf> = files.iter().map(|f| canon(f)).collect();
    let mut notes = Vec::new();
    for dir in dirs {
        // A directory whose record cannot be followed is scanned as it is.
        let Ok(found) = mosaic_dvs::files::dir_devices(&dir) else { continue };
        for p in found.paths {
            if seen.insert(canon(&p)) {
                files.push(p);
            }
        }
        if !found.warnings.is_empty() {
            notes.push((dir, found.warnings));
        }
    }
    notes
}

#[derive(Default, Clone)]
struct Builder {
    kind: String,
    level: Option<String>,
    members: usize,
    m: usize,
    by_index: BTreeMap<usize, Vec<FoundMember>>,
    journals: Vec<String>,
    spares: Vec<String>,
    /// New drives of paused hot replaces.
    paused: Vec<String>,
    /// The directory the array was made in, as its labels record it.
    home: Option<String>,
    /// The array this one is part of, in words (its labels' `owner`).
    owner: Option<String>,
    /// Members that are arrays themselves (a CBRO array's check drive
    /// arrays): index -> their directory, as the labels name them.
    nested: BTreeMap<usize, String>,
    /// Each slot's member identity, as the labels name them.
    uuids: Vec<String>,
    /// Each member's label, by its path.
    labels: BTreeMap<String, mosaic_format::label::Label>,
    /// When the array was created (its labels' `created`).
    created: u64,
}

/// The directory a found device lies in.
fn dir_of(path: &str) -> String {
    Path::new(path).parent().map(|p| p.display().to_string()).unwrap_or_default()
}

impl Builder {
    /// One array, or one per directory holding a copy of it (see the
    /// module's picture).
    fn split(self, uuid: String) -> Vec<FoundArray> {
        // A copy carries the very members (their UUIDs; a replaced
        // member's old device carries another UUID for its index), two or
        // more in one directory (one old copy of one member is not a copy
        // of the array).
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.by_index.values().flatten() {
            *seen.entry(m.member_uuid.as_str()).or_default() += 1;
        }
        let mut per_dir: BTreeMap<String, usize> = BTreeMap::new();
        for m in self.by_index.values().flatten().filter(|m| seen[m.member_uuid.as_str()] > 1) {
            *per_dir.entry(dir_of(&m.path)).or_default() += 1;
        }
        let dirs: BTreeSet<String> = per_dir.into_iter().filter(|d| d.1 >= 2).map(|d| d.0).collect();
        if dirs.len() < 2 {
            return self.finish(uuid, None).into_iter().collect();
        }
        let home = self.home.as_deref().map(|h| std::fs::canonicalize(h).map_or_else(|_| h.to_string(), |c| c.display().to_string()));
        let original = match &home {
            Some(h) => dirs.iter().find(|d| d == &h).cloned(),
            None => self.born_with_the_array(&dirs),
        };
        // Each device goes with its directory's copy; one elsewhere with
        // the original's, if the original is among them.
        let place = |p: &str| -> Option<String> {
            let d = dir_of(p);
            if dirs.contains(&d) {
                Some(d)
            } else {
                original.clone()
            }
        };
        let mut out: Vec<FoundArray> = dirs.iter().filter_map(|d| self.only(|p| place(p).as_ref() == Some(d)).finish(uuid.clone(), Some(CopyPlace { dir: d.clone(), original: original.as_ref() == Some(d) }))).collect();
        let rest = self.only(|p| place(p).is_none());
        if !rest.by_index.is_empty() || !rest.journals.is_empty() || !rest.spares.is_empty() || !rest.paused.is_empty() {
            out.extend(rest.finish(uuid, None));
        }
        out
    }

    /// Of the directories holding copies of an array whose labels name no
    /// home, the one whose member files were made with the array: the
    /// earliest born, if born by the time the labels say the array was
    /// created (files are made before their labels; a copy's later).
    /// None where the file system keeps no birth time.
    fn born_with_the_array(&self, dirs: &BTreeSet<String>) -> Option<String> {
        const SLACK: std::time::Duration = std::time::Duration::from_secs(2);
        let born = |p: &str| std::fs::metadata(p).and_then(|m| m.created()).ok();
        let first = |d: &String| self.by_index.values().flatten().filter(|m| &dir_of(&m.path) == d).filter_map(|m| born(&m.path)).min();
        let (dir, at) = dirs.iter().filter_map(|d| Some((d.clone(), first(d)?))).min_by_key(|x| x.1)?;
        let created = std::time::UNIX_EPOCH + std::time::Duration::from_secs(self.created);
        (at <= created + SLACK).then_some(dir)
    }

    /// The devices `keep` takes.
    fn only(&self, keep: impl Fn(&str) -> bool) -> Builder {
        let mut b = Builder { by_index: BTreeMap::new(), journals: Vec::new(), spares: Vec::new(), paused: Vec::new(), ..self.clone() };
        for (i, copies) in &self.by_index {
            let kept: Vec<FoundMember> = copies.iter().filter(|m| keep(&m.path)).cloned().collect();
            if !kept.is_empty() {
                b.by_index.insert(*i, kept);
            }
        }
        b.journals = self.journals.iter().filter(|j| keep(j)).cloned().collect();
        b.spares = self.spares.iter().filter(|s| keep(s)).cloned().collect();
        b.paused = self.paused.iter().filter(|s| keep(s)).cloned().collect();
        b
    }

    fn member(&mut self, path: &Path, l: mosaic_format::label::Label) {
        self.kind = l.kind.clone();
        self.members = self.members.max(l.members);
        if self.home.is_none() {
            self.home = l.policy.pointer("/home").and_then(|h| h.as_str()).map(str::to_string);
        }
        if self.uuids.is_empty() {
            self.uuids = l.member_uuids.iter().map(|u| u.to_string()).collect();
            self.created = l.created;
        }
        for (i, hint) in l.policy.pointer("/member_paths").and_then(|p| p.as_array()).into_iter().flatten().enumerate() {
            if let Some(dir) = hint.as_str().and_then(|h| h.strip_prefix(mosaic_array::nested::ARRAY_PREFIX)) {
                self.nested.entry(i).or_insert_with(|| dir.to_string());
            }
        }
        if self.owner.is_none() {
            let owner = l.policy.get("owner").and_then(|o| serde_json::from_value::<mosaic_array::superblock::Owner>(o.clone()).ok());
            self.owner = owner.map(|o| format!("{} {}", o.role, o.uuid));
        }
        if self.level.is_none() {
            self.level = l.policy.pointer("/geometry/level").map(level_name);
            self.m = l.policy.pointer("/geometry/m").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
        }
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string();
        let fm = FoundMember { index: l.member_index, path: path.clone(), member_uuid: l.member_uuid.to_string(), events: l.events, stale: false, other_copy: false, replaced: false };
        self.by_index.entry(l.member_index).or_default().push(fm);
        self.labels.insert(path, l);
    }

    fn finish(mut self, uuid: String, copy: Option<CopyPlace>) -> Option<FoundArray> {
        if self.by_index.is_empty() {
            // Only a journal: no member names the array's shape.
            return Some(FoundArray { uuid, kind: "fixed".into(), level: None, members: 0, found: vec![], missing: vec![], duplicates: vec![], former: vec![], warnings: vec![], journals: self.journals, spares: self.spares, paused_copies: self.paused, complete: false, copy, part_of: self.owner, owner_dir: None, open_dir: None, conflict: None });
        }
        let newest = self.by_index.values().flatten().map(|m| m.events).max().unwrap_or(0);
        let (auth, conflict) = self.authoritative();
        let (mut found, mut duplicates, mut former) = (Vec::new(), Vec::new(), Vec::new());
        let mut filled = vec![false; self.members];
        for (_, mut copies) in std::mem::take(&mut self.by_index) {
            copies.sort_by_key(|m| std::cmp::Reverse(m.events));
            let usable: Vec<bool> = copies.iter_mut().map(|m| self.classify(m, auth.as_ref())).collect();
            let mut best = copies.remove(usable.iter().position(|u| *u).unwrap_or(0));
            if usable.contains(&true) && best.index < filled.len() {
                filled[best.index] = true;
            }
            best.stale |= auth.is_none() && best.events + 1 < newest;
            for m in copies {
                if m.replaced { &mut former } else { &mut duplicates }.push(m.path);
            }
            found.push(best);
        }
        // Where this array's files are (the directory holding most of its
        // members found): relative hints resolve there, as an open of that
        // directory resolves them (in a copy, not in the home its labels
        // name, the original's).
        let mut dirs: BTreeMap<String, usize> = BTreeMap::new();
        for m in &found {
            *dirs.entry(dir_of(&m.path)).or_default() += 1;
        }
        let most = dirs.values().copied().max().unwrap_or(0);
        let home = self.home.as_ref().filter(|h| dirs.get(*h) == Some(&most));
        let base = home.cloned().or_else(|| dirs.iter().find(|d| *d.1 == most).map(|d| d.0.clone())).or_else(|| self.home.clone());
        // A member that is an array (its directory there) is found with it:
        // its own members are scanned as an array of their own.
        let dir_of_hint = |d: &str| match (Path::new(d).is_absolute(), &base) {
            (false, Some(b)) => Path::new(b).join(d),
            _ => PathBuf::from(d),
        };
        let nested: Vec<usize> = (0..self.members).filter(|i| !found.iter().any(|m| m.index == *i) && self.nested.get(i).is_some_and(|d| dir_of_hint(d).is_dir())).collect();
        for &i in &nested {
            let path = format!("{}{}", mosaic_array::nested::ARRAY_PREFIX, dir_of_hint(&self.nested[&i]).display());
            found.push(FoundMember { index: i, path, member_uuid: self.uuids.get(i).cloned().unwrap_or_default(), events: newest, stale: false, other_copy: false, replaced: false });
            filled[i] = true;
        }
        found.sort_by_key(|m| m.index);
        // Such an array opens by its directory (member lists hold files).
        let open_dir = if nested.is_empty() { None } else { base.clone().filter(|h| Path::new(h).is_dir()) };
        let owner_dir = self.owner.as_ref().and(base.as_deref()).and_then(|b| Path::new(b).parent()).map(|p| p.display().to_string());
        let missing: Vec<usize> = (0..self.members).filter(|i| !found.iter().any(|m| m.index == *i)).collect();
        let complete = match &auth {
            Some(a) => conflict.is_none() && serves(a, &filled),
            None => missing.len() + found.iter().filter(|m| m.stale).count() <= self.m,
        };
        Some(FoundArray { uuid, kind: self.kind, level: self.level, members: self.members, found, missing, duplicates, former, warnings: vec![], journals: self.journals, spares: self.spares, paused_copies: self.paused, complete, copy, part_of: self.owner, owner_dir, open_dir, conflict })
    }

    /// The label the one freshness rule makes the array's among the
    /// members found ([`fresh::choose`], as an open picks), and its
    /// refusal when copies written apart are mixed (then the freshest
    /// label, to describe the members by).
    fn authoritative(&self) -> (Option<Label>, Option<String>) {
        let labelled: Vec<fresh::Found<()>> =
            self.by_index.values().flatten().filter_map(|m| Some(fresh::Found { label: self.labels.get(&m.path)?.clone(), name: m.path.clone(), dev: () })).collect();
        let kind = fresh::Kind { failed: &failed, own: &|_, _| None, serves: &serves, retired: &|_, _| false };
        match fresh::choose(&labelled, &kind) {
            Ok(i) => (i.map(|i| labelled[i].label.clone()), None),
            Err(why) => {
                let keys: Vec<(u64, uuid::Uuid)> = labelled.iter().map(|f| (f.label.events, f.label.session)).collect();
                (fresh::pick_authoritative(&keys).map(|i| labelled[i].label.clone()), Some(why))
            }
        }
    }

    /// Mark the member `m` as the array of `auth` sees it (stale, another
    /// copy's, replaced); whether it serves as its member.
    fn classify(&self, m: &mut FoundMember, auth: Option<&Label>) -> bool {
        let (Some(auth), Some(l)) = (auth, self.labels.get(&m.path)) else { return false };
        let i = m.index;
        m.stale = fresh::is_stale(l.events, auth.events);
        m.replaced = auth.member_uuids.get(i).is_some_and(|u| *u != l.member_uuid);
        m.other_copy = !m.stale && !m.replaced && !fresh::same_session(l, auth);
        fresh::verdict(&m.path, l, auth).is_none() && !failed(auth, i)
    }
}

/// Member `i` is failed on the record of `l` (the kind's own rule).
fn failed(l: &Label, i: usize) -> bool {
    match l.kind.as_str() {
        mosaic_dvs::meta::LABEL_KIND => mosaic_dvs::array::failed_on_record(l, i),
        _ => mosaic_array::superblock::failed_on_record(l, i),
    }
}

/// Whether the array of `l` can be served from the slots `filled` (the
/// kind's own rule).
fn serves(l: &Label, filled: &[bool]) -> bool {
    match l.kind.as_str() {
        mosaic_dvs::meta::LABEL_KIND => mosaic_dvs::array::serves(l, filled),
        _ => mosaic_array::superblock::serves_from(l, filled),
    }
}

/// A level as the label's JSON holds it (`"Raid5"`, `{"Rs":{"k":4,"m":2}}`).
fn level_name(v: &serde_json::Value) -> String {
    match serde_json::from_value::<mosaic_core::Level>(v.clone()) {
        Ok(l) => l.to_string(),
        Err(_) => match v {
            serde_json::Value::String(s) => s.to_ascii_lowercase(),
            other => other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_under_an_empty_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("plain.bin"), vec![0u8; 8192]).unwrap();
        assert!(scan(&[d.path().to_path_buf()]).unwrap().is_empty());
        assert!(scan(&[d.path().join("missing")]).is_err(), "a path that does not exist is an error");
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }

    /// A DVS array's labels name no home: of a directory and its copy, the
    /// original is the one whose files were born with the array.
    #[test]
    fn the_original_of_a_dvs_directory_is_the_one_born_with_it() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        let s = mosaic_dvs::files::CreateSpec { members: 4, member_size: 16 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 0 };
        drop(mosaic_dvs::files::create_in_dir(&a, &s, false).unwrap());
        copy_dir(&a, &b);
        if std::fs::metadata(a.join("dvs-0.zoned")).and_then(|m| m.created()).is_err() {
            return; // no birth times on this file system: nothing to tell them apart by
        }
        let found = scan(&[a.clone(), b.clone()]).unwrap();
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
        let places: Vec<(String, bool)> = found.iter().map(|f| f.copy.as_ref().map(|c| (c.dir.clone(), c.original)).unwrap()).collect();
        assert_eq!(places, [(canon(&a), true), (canon(&b), false)], "{found:?}");
    }

    /// A DVS directory whose member 2 was replaced by a file in another
    /// directory (its path recorded in the directory): scanned by its
    /// directory alone, the array is complete, member 2 found at the
    /// outside file; a copy of the directory does not claim that file.
    #[test]
    fn a_dvs_directory_s_recorded_outside_member_is_found_by_its_scan() {
        use mosaic_dvs::files;
        let t = tempfile::tempdir().unwrap();
        let (dir, other) = (t.path().join("d"), t.path().join("other"));
        std::fs::create_dir(&other).unwrap();
        let s = files::CreateSpec { members: 4, member_size: 8 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 0 };
        let mut a = files::create_in_dir(&dir, &s, false).unwrap();
        a.write(0, &vec![9u8; 64 << 12]).unwrap();
        a.fail(2).unwrap();
        let new2 = other.join("new2.zoned");
        files::replace_with_file(&mut a, 2, &new2).unwrap();
        a.rebuild(&|_, _| {}, None).unwrap();
        let mut paths: Vec<PathBuf> = [0, 1, 3].iter().map(|i| dir.join(format!("dvs-{i}.zoned"))).collect();
        paths.push(new2.clone());
        files::record_paths(&dir, a.info().uuid, &paths).unwrap();
        drop(a);
        std::fs::rename(dir.join("dvs-2.zoned"), dir.join("dvs-2.zoned.replaced")).unwrap();
        copy_dir(&dir, &t.path().join("copy"));

        let found = scan(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
        assert_eq!(f.found.iter().find(|m| m.index == 2).map(|m| (m.path.clone(), m.replaced)), Some((canon(&new2), false)), "{f:?}");
        assert!(f.complete && f.missing.is_empty() && f.found.iter().all(|m| !m.stale), "{f:?}");
        assert_eq!(f.former, [canon(&dir.join("dvs-2.zoned.replaced"))], "the former member 2, replaced");
        assert!(f.warnings.is_empty(), "{f:?}");

        let (found, loose) = scan_report(&[t.path().join("copy")], &|_, _| {}).unwrap();
        assert!(found.iter().flat_map(|f| &f.found).all(|m| m.path != canon(&new2)), "the copy does not claim its original's device: {found:?}");
        // The copy's scan says why the recorded device is not its own.
        assert!(loose.is_empty(), "{loose:?}");
        let w: Vec<&String> = found.iter().flat_map(|f| &f.warnings).collect();
        assert!(w.len() == 1 && w[0].contains("new2.zoned is outside this directory and belongs to the array in"), "{found:?}");
    }

    /// `cp -a P Q`, Q written further, one of Q's members put in P: the
    /// scan lists P's own members as fresh, the intruder as another copy's,
    /// and P as complete (as an open assembles it).
    #[test]
    fn a_copys_member_that_went_further_is_marked_not_the_arrays_own() {
        use mosaic_array::spec::ArraySpec;
        use mosaic_array::{Array, CreateOptions, DATA_OFFSET};
        let d = tempfile::tempdir().unwrap();
        let (p, q) = (d.path().join("p"), d.path().join("q"));
        let o = CreateOptions { level: mosaic_core::Level::Raid5, members: Some(4), member_size: Some(DATA_OFFSET + (1 << 20)), unit: 4096, block: 4096, force: false, assume_clean: true };
        Array::create(&ArraySpec::Dir(p.clone()), &o).unwrap().close().unwrap();
        copy_dir(&p, &q);
        for _ in 0..2 {
            let arr = Array::open(&ArraySpec::Dir(q.clone()), true).unwrap();
            arr.write(0, &[7u8; 4096]).unwrap();
            arr.close().unwrap();
        }
        std::fs::copy(q.join("member-02.img"), p.join("member-02.img")).unwrap();
        let found = scan(&[p.clone()]).unwrap();
        let f = &found[0];
        let marks: Vec<(bool, bool)> = f.found.iter().map(|m| (m.stale, m.other_copy)).collect();
        assert_eq!(marks, [(false, false), (false, false), (false, true), (false, false)], "{f:?}");
        assert!(f.complete && f.conflict.is_none(), "{f:?}");
    }
}
