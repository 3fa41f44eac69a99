//! Find arrays by what is on the disks: `mosaic examine` (one member's
//! label, as mdadm `--examine`) and `mosaic assemble --scan` (every
//! array whose members or journals lie under some paths, by UUID,
//! wherever their files are).
//!
//! ```text
//!   paths ─ walk (directories recursively, files and block devices) ─ guard::identify
//!     member label  ─┐  grouped by array UUID; per member its index, path,
//!     journal header ─┘  event counter; fresh = within one event of the
//!                        newest (the one rule, mosaic_format::fresh)
//!   -> per array: kind, level, members found / expected, missing and stale
//!      indices, journals, and the member list in index order (`-a` spec)
//! ```
//!
//! Nothing is written or locked; nothing is assembled for writing: the
//! spec it prints is what `mosaic info/serve -a` take.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::guard::{self, Carries};
use crate::Result;

/// One member as found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FoundMember {
    pub index: usize,
    pub path: String,
    pub member_uuid: String,
    pub events: u64,
    /// Two or more events behind the newest copy: it missed writes.
    pub stale: bool,
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
    pub journals: Vec<String>,
    /// Hot spares found.
    pub spares: Vec<String>,
    /// Enough fresh members to open (all, or degraded within the code).
    pub complete: bool,
}

impl FoundArray {
    /// The member list in index order, then the spares, as `-a` takes it.
    pub fn spec(&self) -> String {
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
    let mut files = Vec::new();
    for p in paths {
        walk(p, 0, &mut files)?;
    }
    let total = files.len() as u64;
    let mut arrays: BTreeMap<String, Builder> = BTreeMap::new();
    for (i, f) in files.into_iter().enumerate() {
        progress(i as u64, total);
        match guard::identify(&f)? {
            Carries::Member { .. } | Carries::DvsMember { .. } => {
                if let Some(l) = guard::member_label(&f)? {
                    arrays.entry(l.array_uuid.to_string()).or_default().member(&f, l);
                }
            }
            Carries::Journal { array } => arrays.entry(array).or_default().journals.push(f.display().to_string()),
            Carries::Spare { array } => arrays.entry(array).or_default().spares.push(f.display().to_string()),
            _ => {}
        }
    }
    Ok(arrays.into_iter().filter_map(|(uuid, b)| b.finish(uuid)).collect())
}

/// Files and block devices under `p` (directories to a depth of 8; symbolic
/// links to directories are not followed, so no loop).
fn walk(p: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<()> {
    let meta = std::fs::symlink_metadata(p).map_err(|e| crate::VolumeError::Io { what: p.display().to_string(), source: e })?;
    if meta.is_dir() {
        if depth >= 8 {
            return Ok(());
        }
        let rd = std::fs::read_dir(p).map_err(|e| crate::VolumeError::Io { what: p.display().to_string(), source: e })?;
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

#[derive(Default)]
struct Builder {
    kind: String,
    level: Option<String>,
    members: usize,
    m: usize,
    by_index: BTreeMap<usize, Vec<FoundMember>>,
    journals: Vec<String>,
    spares: Vec<String>,
}

impl Builder {
    fn member(&mut self, path: &Path, l: mosaic_format::label::Label) {
        self.kind = l.kind.clone();
        self.members = self.members.max(l.members);
        if self.level.is_none() {
            self.level = l.policy.pointer("/geometry/level").map(level_name);
            self.m = l.policy.pointer("/geometry/m").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
        }
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string();
        let fm = FoundMember { index: l.member_index, path, member_uuid: l.member_uuid.to_string(), events: l.events, stale: false };
        self.by_index.entry(l.member_index).or_default().push(fm);
    }

    fn finish(self, uuid: String) -> Option<FoundArray> {
        if self.by_index.is_empty() {
            // Only a journal: no member names the array's shape.
            return Some(FoundArray { uuid, kind: "fixed".into(), level: None, members: 0, found: vec![], missing: vec![], duplicates: vec![], journals: self.journals, spares: self.spares, complete: false });
        }
        let newest = self.by_index.values().flatten().map(|m| m.events).max().unwrap_or(0);
        let (mut found, mut duplicates) = (Vec::new(), Vec::new());
        for (_, mut copies) in self.by_index {
            copies.sort_by_key(|m| std::cmp::Reverse(m.events));
            let mut best = copies.remove(0);
            best.stale = best.events + 1 < newest;
            duplicates.extend(copies.into_iter().map(|m| m.path));
            found.push(best);
        }
        let missing: Vec<usize> = (0..self.members).filter(|i| !found.iter().any(|m| m.index == *i)).collect();
        let out = missing.len() + found.iter().filter(|m| m.stale).count();
        let complete = out <= self.m;
        Some(FoundArray { uuid, kind: self.kind, level: self.level, members: self.members, found, missing, duplicates, journals: self.journals, spares: self.spares, complete })
    }
}

/// A level as the label's JSON holds it (`"Raid5"`, `{"Rs":{"k":4,"m":2}}`).
fn level_name(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.to_ascii_lowercase(),
        other => other.to_string(),
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
}
