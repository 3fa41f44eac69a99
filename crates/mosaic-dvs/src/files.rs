//! DVS arrays on emulated zoned drive files: naming, create, open,
//! replace.  The CLI (`mosaic create --level dvs --zoned ...`) is a thin
//! layer over these.
//!
//! ```text
//!   -a DIR          members DIR/dvs-0.zoned .. DIR/dvs-{n-1}.zoned (as
//!                   created), hot spares DIR/dvs-spare-ID.zoned (older
//!                   mosaic moved spares there), and every device
//!                   DIR/dvs-paths.json records: a replacement or a spare
//!                   stays where the user put it
//!   -a P0,P1,...    members and spares are those files, in any order
//!                   (labels decide)
//!
//!   dvs-paths.json  { array: UUID, devices: [ { path, home? } ] }
//!                   path: relative to DIR when inside it, else absolute,
//!                   recorded by the directory `home`; at most 1 MiB
//!                   and 4096 devices, no empty path, no `..` in a
//!                   relative one (decode_paths)
//! ```
//!
//! Labels decide identity, as for every kind: a recorded path is only a
//! hint, offered to [`DvsArray::open`] when the file there carries a
//! label of the array.  As with a fixed directory array's superblock
//! hints (mosaic-array's assembly), a copy of the directory (`cp -a D E`)
//! does not follow absolute paths its original recorded while the
//! original still holds the array: those devices are the original's.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use mosaic_dev::nbd::canonical;
use mosaic_dev::zoned::ZonedFile;
use mosaic_format::label::{read_label, Label};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::addr::{DvsConfig, Geo};
use crate::array::{DvsArray, ZonedMember};
use crate::meta::MetaLayout;
use crate::DvsError;

/// Parameters of `create`.
#[derive(Debug, Clone)]
pub struct CreateSpec {
    pub members: usize,
    pub member_size: u64,
    pub chunk: u64,
    pub block: u64,
    pub zone_size: u64,
    pub parity: usize,
    /// Journalled write cache in chunks (0: write-through).
    pub cache_chunks: u64,
}

/// The config for a spec: zones of `zone_size`, the fewest conventional
/// zones that hold the metadata.  With a write cache, the journal is
/// sized to hold the whole cache as one-block records
/// ([`journal_for_cache`]) when that leaves at least half the zones for
/// data; otherwise the journal shares the metadata area with the log (a
/// full journal then destages the cache before it is full).
pub fn config_for(s: &CreateSpec) -> Result<DvsConfig, DvsError> {
    if s.zone_size == 0 || s.member_size % s.zone_size != 0 {
        return Err(DvsError::Geometry(format!("member size {} is not a whole number of {}-byte zones", s.member_size, s.zone_size)));
    }
    let zones = s.member_size / s.zone_size;
    let journal = journal_for_cache(s.cache_chunks, s.chunk, s.block);
    if journal > 0 {
        if let Ok(cfg) = fewest_conventional(s, zones, journal, zones / 2) {
            return Ok(cfg);
        }
    }
    fewest_conventional(s, zones, 0, zones.saturating_sub(1).max(1))
}

/// Journal bytes that hold a cache of `cache_chunks` chunks as records of
/// one block each (the smallest write, the most overhead per block).
pub fn journal_for_cache(cache_chunks: u64, chunk: u64, block: u64) -> u64 {
    let blocks = cache_chunks.saturating_mul(chunk / block.max(1));
    blocks.saturating_mul(crate::meta::journal_record_len(block))
}

/// The first config with fewer than `below` conventional zones whose
/// metadata (and a journal of `journal` bytes) fits.
fn fewest_conventional(s: &CreateSpec, zones: u64, journal: u64, below: u64) -> Result<DvsConfig, DvsError> {
    let mut last = None;
    for conv in 1..below {
        let ring = s.cache_chunks > 0;
        let cfg = DvsConfig { block: s.block, cache_chunks: s.cache_chunks, journal_bytes: journal, journal_ring: ring, ..DvsConfig::new(s.members, s.parity, s.chunk, s.zone_size, zones, conv) };
        match Geo::new(cfg.clone()).and_then(|g| MetaLayout::new(&g).map(|_| ())) {
            Ok(()) => return Ok(cfg),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| DvsError::Geometry(format!("{zones} zones per member are too few for a DVS array"))))
}

/// The file of a directory array that records the devices (members and
/// hot spares) the directory does not name.
pub const PATHS_FILE: &str = "dvs-paths.json";

/// [`PATHS_FILE`]: the array whose devices it records, and a hint per
/// device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Hints {
    array: Uuid,
    devices: Vec<Hint>,
}

/// Where one device of the array is: `path` relative to the directory
/// when inside it, absolute otherwise; `home`, the directory that
/// recorded an absolute path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Hint {
    path: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    home: Option<PathBuf>,
}

/// The largest [`PATHS_FILE`] read (checked before parsing) or written.
pub const MAX_PATHS_BYTES: usize = 1 << 20;

/// The most devices a [`PATHS_FILE`] records (an array has far fewer).
pub const MAX_PATHS_DEVICES: usize = 4096;

/// A [`PATHS_FILE`] as [`decode_paths`] reads it: the hints that pass
/// its checks, and why each other entry was refused.
#[derive(Debug, Clone, PartialEq)]
pub struct PathHints {
    hints: Hints,
    refused: Vec<String>,
}

impl PathHints {
    /// The array whose devices the file records.
    pub fn array(&self) -> Uuid {
        self.hints.array
    }

    /// The devices kept, in file order: the path as recorded (relative
    /// to the directory, or absolute) and the directory that recorded an
    /// absolute one.
    pub fn devices(&self) -> impl Iterator<Item = (&Path, Option<&Path>)> + '_ {
        self.hints.devices.iter().map(|h| (h.path.as_path(), h.home.as_deref()))
    }

    /// One message per entry refused, naming it.
    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    /// The file's bytes for the devices kept, as [`record_paths`] writes
    /// them; an error when they pass [`MAX_PATHS_BYTES`].
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        encode_hints(&self.hints)
    }
}

/// Decode the bytes of a [`PATHS_FILE`].  The whole file is refused when
/// it is larger than [`MAX_PATHS_BYTES`] (checked before parsing), not
/// UTF-8, not the JSON of an array's device list, or lists more than
/// [`MAX_PATHS_DEVICES`] devices.  One entry is refused (the others are
/// kept, [`PathHints::refused`] names it) when its path is empty, or is
/// relative with a `..` component: a relative path is the directory's
/// own, followed by a copy of the directory too, so one climbing out
/// could take the original's device.  The writer never makes either.
pub fn decode_paths(bytes: &[u8]) -> Result<PathHints, String> {
    check_size(bytes.len())?;
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8 (byte {} is not)", e.valid_up_to()))?;
    let all: Hints = serde_json::from_str(text).map_err(|e| e.to_string())?;
    check_count(all.devices.len())?;
    let (mut devices, mut refused) = (Vec::new(), Vec::new());
    for (i, h) in all.devices.into_iter().enumerate() {
        match check_hint(i, &h) {
            Ok(()) => devices.push(h),
            Err(e) => refused.push(e),
        }
    }
    Ok(PathHints { hints: Hints { array: all.array, devices }, refused })
}

/// The bytes of a [`PATHS_FILE`] for `h`, refused past the limits
/// [`decode_paths`] checks: the writer never makes a file the reader
/// refuses.
fn encode_hints(h: &Hints) -> Result<Vec<u8>, String> {
    check_count(h.devices.len())?;
    for (i, d) in h.devices.iter().enumerate() {
        check_hint(i, d)?;
    }
    let text = serde_json::to_string_pretty(h).map_err(|e| e.to_string())?;
    check_size(text.len())?;
    Ok(text.into_bytes())
}

/// A [`PATHS_FILE`] of `len` bytes is within [`MAX_PATHS_BYTES`].
fn check_size(len: usize) -> Result<(), String> {
    match len > MAX_PATHS_BYTES {
        true => Err(format!("{len} bytes, more than the {MAX_PATHS_BYTES} a list of device paths may have")),
        false => Ok(()),
    }
}

/// A [`PATHS_FILE`] of `n` devices is within [`MAX_PATHS_DEVICES`].
fn check_count(n: usize) -> Result<(), String> {
    match n > MAX_PATHS_DEVICES {
        true => Err(format!("{n} devices, more than the {MAX_PATHS_DEVICES} a list of device paths may have")),
        false => Ok(()),
    }
}

/// Why the hint of device `i` (in file order) is refused, if it is: an
/// empty path, or a relative one with a `..` component.
fn check_hint(i: usize, h: &Hint) -> Result<(), String> {
    if h.path.as_os_str().is_empty() {
        return Err(format!("device {i} has an empty path; not used"));
    }
    if h.path.is_relative() && h.path.components().any(|c| c == Component::ParentDir) {
        return Err(format!("device {i}: {} climbs out of the directory (`..`); not used", h.path.display()));
    }
    Ok(())
}

/// The devices to offer [`DvsArray::open`] for a spec, and what was
/// found of the recorded paths that are not offered.
#[derive(Debug, Clone, Default)]
pub struct Devices {
    pub paths: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

/// Member paths of an array spec (see [`devices`]).
pub fn member_paths(spec: &str) -> Result<Vec<PathBuf>, DvsError> {
    Ok(devices(spec)?.paths)
}

/// The devices of an array spec: a comma list as given; a directory's
/// own files (members first, then spares) and the devices its
/// [`PATHS_FILE`] records.
pub fn devices(spec: &str) -> Result<Devices, DvsError> {
    if spec.contains(',') {
        let paths = spec.split(',').map(|s| PathBuf::from(s.trim())).filter(|p| !p.as_os_str().is_empty()).collect();
        return Ok(Devices { paths, warnings: Vec::new() });
    }
    dir_devices(Path::new(spec))
}

/// The devices of directory `dir` (whatever its name holds, a comma
/// too): its own files (members first, then spares) and the devices its
/// [`PATHS_FILE`] records (see the module's picture).
pub fn dir_devices(dir: &Path) -> Result<Devices, DvsError> {
    let named = named_files(dir)?;
    let mut found = Devices::default();
    let recorded = read_hints(dir, &mut found.warnings).map(|h| follow(dir, &h, &named, &mut found.warnings)).unwrap_or_default();
    if named.iter().all(|x| x.0 == usize::MAX) && recorded.is_empty() {
        return Err(DvsError::Other(format!("{}: no DVS member files (dvs-N.zoned)", dir.display())));
    }
    found.paths = named.into_iter().map(|x| x.1).chain(recorded).collect();
    Ok(found)
}

/// The files directory `dir` names as DVS devices, each with its member
/// index (`usize::MAX` for a spare), members first.
fn named_files(dir: &Path) -> Result<Vec<(usize, PathBuf)>, DvsError> {
    let mut v: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| DvsError::Io(std::io::Error::new(e.kind(), format!("{}: {e}", dir.display()))))?
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((slot_of(&e.file_name().to_string_lossy())?, e.path())))
        .collect();
    v.sort();
    Ok(v)
}

/// The member index a directory's file name gives (`dvs-N.zoned`), or
/// `usize::MAX` for a spare's (`dvs-spare-ID.zoned`).
fn slot_of(name: &str) -> Option<usize> {
    let stem = name.strip_prefix("dvs-")?.strip_suffix(".zoned")?;
    // Spares after the members.
    if stem.starts_with("spare-") {
        Some(usize::MAX)
    } else {
        stem.parse().ok()
    }
}

/// Whether `path` is a file directory `dir` names as a DVS device (its
/// open finds it without a recorded path).
pub fn named_by_dir(dir: &Path, path: &Path) -> bool {
    let named = path.file_name().is_some_and(|n| slot_of(&n.to_string_lossy()).is_some());
    named && path.parent().map(canonical) == Some(canonical(dir))
}

/// The hints `dir` records; None without a [`PATHS_FILE`] (an unreadable
/// or refused one is named in `warnings`, as is each entry
/// [`decode_paths`] refuses).  At most one byte past
/// [`MAX_PATHS_BYTES`] is read.
fn read_hints(dir: &Path, warnings: &mut Vec<String>) -> Option<Hints> {
    use std::io::Read;
    let p = dir.join(PATHS_FILE);
    let mut bytes = Vec::new();
    match std::fs::File::open(&p).and_then(|f| f.take(MAX_PATHS_BYTES as u64 + 1).read_to_end(&mut bytes)) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            warnings.push(format!("{}: {e}; the members and spares it records are not looked for", p.display()));
            return None;
        }
    }
    match decode_paths(&bytes) {
        Ok(h) => {
            warnings.extend(h.refused.iter().map(|r| format!("{}: {r}", p.display())));
            Some(h.hints)
        }
        Err(e) => {
            warnings.push(format!("{}: not a list of DVS device paths ({e}); the members and spares it records are not looked for", p.display()));
            None
        }
    }
}

/// The recorded devices to offer: each path the directory does not name
/// already, whose file carries a label of the recorded array.  Absolute
/// paths recorded by another directory that still holds the array (the
/// original of this copy) are not followed.
fn follow(dir: &Path, h: &Hints, named: &[(usize, PathBuf)], warnings: &mut Vec<String>) -> Vec<PathBuf> {
    let here = canonical(dir);
    let mut out: Vec<PathBuf> = Vec::new();
    for hint in &h.devices {
        let path = if hint.path.is_relative() { dir.join(&hint.path) } else { hint.path.clone() };
        if let Some(home) = hint.home.as_deref().filter(|home| canonical(home) != here && holds_array(home, h.array)) {
            warnings.push(format!(
                "{} is outside this directory and belongs to the array in {} (this directory is a copy of it, so it is not used)",
                path.display(),
                home.display()
            ));
            continue;
        }
        let c = canonical(&path);
        if named.iter().map(|x| &x.1).chain(&out).any(|p| canonical(p) == c) {
            continue;
        }
        match label_of(&path) {
            Ok(l) if l.array_uuid == h.array => out.push(path),
            Ok(l) => warnings.push(format!("{}: recorded in {PATHS_FILE} as a device of array {}, but its label is of array {}; not used", path.display(), h.array, l.array_uuid)),
            Err(e) => warnings.push(format!("{}: recorded in {PATHS_FILE} as a device of this array: {e}; not used", path.display())),
        }
    }
    out
}

/// Whether directory `home` still holds a device of array `array` (read
/// only: a copy's original is only looked at).
fn holds_array(home: &Path, array: Uuid) -> bool {
    let Ok(named) = named_files(home) else { return false };
    named.iter().any(|(_, p)| label_of(p).is_ok_and(|l| l.array_uuid == array))
}

/// The DVS label of the zoned file at `p`, read without opening it for
/// writing.
fn label_of(p: &Path) -> Result<Label, String> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(p).map_err(|e| e.to_string())?;
    let size = f.metadata().map_err(|e| e.to_string())?.len().saturating_sub(mosaic_dev::zoned::HEADER);
    let mut read = |buf: &mut [u8], off: u64| f.read_exact_at(buf, off + mosaic_dev::zoned::HEADER);
    match read_label(size, &mut read) {
        Ok(Ok(l)) if l.kind == crate::meta::LABEL_KIND => Ok(l),
        Ok(Ok(l)) => Err(format!("a member of a {} array, not of a DVS array", l.kind)),
        Ok(Err(e)) => Err(format!("no DVS label ({e})")),
        Err(e) => Err(format!("cannot read its label: {e}")),
    }
}

/// Record in `dir`'s [`PATHS_FILE`] where the devices of array `array`
/// the directory does not name are: `devices` are the paths of all its
/// members and hot spares now (others' hints go).  Paths inside `dir`
/// are kept relative to it (a copy of the directory finds its own), the
/// rest absolute.  The file is replaced whole, atomically; it is
/// removed when the directory names every device.
pub fn record_paths(dir: &Path, array: Uuid, devices: &[PathBuf]) -> Result<(), DvsError> {
    let here = canonical(dir);
    let mut hints: Vec<Hint> = Vec::new();
    for d in devices.iter().filter(|d| !named_by_dir(dir, d)) {
        let c = canonical(d);
        let hint = match c.strip_prefix(&here) {
            Ok(rel) => Hint { path: rel.to_path_buf(), home: None },
            Err(_) => Hint { path: mosaic_dev::nbd::absolute(d), home: Some(here.clone()) },
        };
        if !hints.contains(&hint) {
            hints.push(hint);
        }
    }
    let file = dir.join(PATHS_FILE);
    let io = |what: &str, e: std::io::Error| DvsError::Io(std::io::Error::new(e.kind(), format!("{what} {}: {e}", file.display())));
    if hints.is_empty() {
        return match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("removing", e)),
            _ => Ok(()),
        };
    }
    let text = encode_hints(&Hints { array, devices: hints }).map_err(|e| DvsError::Other(format!("{}: {e}", file.display())))?;
    let tmp = dir.join(format!(".{PATHS_FILE}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, &text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &file)?;
        std::fs::File::open(dir)?.sync_all()
    };
    write().map_err(|e| io("writing", e))
}

/// Whether `spec` names DVS members (its first member carries a DVS label).
pub fn is_dvs(spec: &str) -> bool {
    let Ok(paths) = member_paths(spec) else { return false };
    paths.first().is_some_and(|p| label_of(p).is_ok())
}

/// Create member files `DIR/dvs-i.zoned` and an array on them.
pub fn create_in_dir(dir: &Path, s: &CreateSpec, force: bool) -> Result<DvsArray, DvsError> {
    let cfg = config_for(s)?;
    std::fs::create_dir_all(dir)?;
    let mut devs: Vec<Arc<dyn ZonedMember>> = Vec::new();
    // Held while the files are made: an array in use is never overwritten.
    let mut held = Vec::new();
    for i in 0..s.members {
        let p = dir.join(format!("dvs-{i}.zoned"));
        if p.exists() && !force {
            return Err(DvsError::Other(format!("{} exists; use --force to overwrite it", p.display())));
        }
        if p.exists() {
            held.push(mosaic_dev::DeviceLock::acquire(&p, true).map_err(|e| DvsError::Other(e.to_string()))?);
        }
        devs.push(Arc::new(ZonedFile::create(&p, cfg.zone_size, cfg.zones, cfg.conventional)?));
    }
    // Paths an earlier array recorded here are not this one's.
    match std::fs::remove_file(dir.join(PATHS_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    DvsArray::create(devs, cfg)
}

/// Open the array of a spec; member files that cannot be opened count as missing.
pub fn open_spec(spec: &str) -> Result<DvsArray, DvsError> {
    let mut devs: Vec<Arc<dyn ZonedMember>> = Vec::new();
    for p in member_paths(spec)? {
        if let Ok(z) = ZonedFile::open(&p) {
            devs.push(Arc::new(z));
        }
    }
    DvsArray::open(devs)
}

/// The zoned file at `path`, created with the geometry of `a` when it does
/// not exist.
pub fn open_or_create(a: &DvsArray, path: &Path) -> Result<ZonedFile, DvsError> {
    let c = &a.geo().cfg;
    Ok(if path.exists() { ZonedFile::open(path)? } else { ZonedFile::create(path, c.zone_size, c.zones, c.conventional)? })
}

/// Replace member `m` with the zoned file at `path` (created with the
/// array's zone geometry if it does not exist); [`DvsArray::rebuild`]
/// fills it.
pub fn replace_with_file(a: &mut DvsArray, m: usize, path: &Path) -> Result<(), DvsError> {
    let z = open_or_create(a, path)?;
    a.replace(m, Arc::new(z))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_open_write_read_replace_through_files() {
        let dir = tempfile::tempdir().unwrap();
        let s = CreateSpec { members: 5, member_size: 16 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 8 };
        let mut a = create_in_dir(dir.path(), &s, false).unwrap();
        let spec = dir.path().to_str().unwrap();
        assert!(is_dvs(spec));
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let data = &data[..(data.len() / 4096 * 4096)];
        a.write(8192, data).unwrap();
        drop(a);
        assert!(create_in_dir(dir.path(), &s, false).err().unwrap().to_string().contains("--force"));
        let mut b = open_spec(spec).unwrap();
        let mut got = vec![0u8; data.len()];
        b.read(8192, &mut got).unwrap();
        assert_eq!(got, data);
        b.fail(2).unwrap();
        replace_with_file(&mut b, 2, &dir.path().join("new.zoned")).unwrap();
        b.rebuild(&|_, _| {}, None).unwrap();
        assert_eq!(b.scrub().unwrap(), 0);
        assert!(config_for(&CreateSpec { member_size: 1000, ..s.clone() }).is_err());
        assert!(!is_dvs("/nonexistent"));
    }

    /// Copy the files of directory `from` into a new directory `to`.
    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }

    /// A member replaced by a file outside the directory stays there: the
    /// directory records its path, the next open offers it (its label is
    /// the array's), a copy of the directory does not while the original
    /// holds the array, and a moved directory does.  A recorded path
    /// whose file is another array's is not offered, and a directory that
    /// names every device keeps no record.
    #[test]
    fn devices_outside_the_directory_are_found_by_their_recorded_paths() {
        let t = tempfile::tempdir().unwrap();
        let (dir, other) = (t.path().join("d"), t.path().join("other"));
        std::fs::create_dir(&other).unwrap();
        let s = CreateSpec { members: 4, member_size: 8 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 0 };
        let mut a = create_in_dir(&dir, &s, false).unwrap();
        let data: Vec<u8> = (0..(64u32 << 12)).map(|i| (i * 13 % 251) as u8).collect();
        a.write(0, &data).unwrap();
        a.fail(2).unwrap();
        let new2 = other.join("new2.zoned");
        replace_with_file(&mut a, 2, &new2).unwrap();
        a.rebuild(&|_, _| {}, None).unwrap();
        let uuid = a.info().uuid;
        let mut paths: Vec<PathBuf> = (0..4).filter(|&i| i != 2).map(|i| dir.join(format!("dvs-{i}.zoned"))).collect();
        paths.push(new2.clone());
        record_paths(&dir, uuid, &paths).unwrap();
        drop(a);
        std::fs::rename(dir.join("dvs-2.zoned"), dir.join("dvs-2.zoned.replaced")).unwrap();
        let h: Hints = serde_json::from_str(&std::fs::read_to_string(dir.join(PATHS_FILE)).unwrap()).unwrap();
        let home = dir.canonicalize().unwrap();
        assert_eq!(h, Hints { array: uuid, devices: vec![Hint { path: new2.clone(), home: Some(home) }] }, "only the device the directory does not name");
        let spec = dir.to_str().unwrap();
        let found = devices(spec).unwrap();
        assert!(found.paths.contains(&new2) && found.warnings.is_empty(), "{found:?}");
        let read_back = |spec: &str| {
            let mut b = open_spec(spec).unwrap();
            let mut got = vec![0u8; data.len()];
            b.read(0, &mut got).unwrap();
            assert!(got == data, "{spec}: the bytes differ");
            b.info().member_list.iter().filter(|m| !m.present).map(|m| m.index).collect::<Vec<_>>()
        };
        assert_eq!(read_back(spec), Vec::<usize>::new(), "whole again, from the recorded path");

        // A copy: the original's device outside is not taken.
        let copy = t.path().join("copy");
        copy_dir(&dir, &copy);
        let found = devices(copy.to_str().unwrap()).unwrap();
        assert!(!found.paths.contains(&new2), "{found:?}");
        assert!(found.warnings.len() == 1 && found.warnings[0].contains("this directory is a copy of it"), "{:?}", found.warnings);
        // The original moved away: the directory is the array now.
        std::fs::rename(&dir, t.path().join("gone")).unwrap();
        std::fs::create_dir(&dir).unwrap();
        let found = devices(copy.to_str().unwrap()).unwrap();
        assert!(found.paths.contains(&new2) && found.warnings.is_empty(), "{found:?}");
        assert_eq!(read_back(copy.to_str().unwrap()), Vec::<usize>::new());

        // A recorded path whose file is now another array's.
        let stranger = t.path().join("stranger");
        drop(create_in_dir(&stranger, &CreateSpec { members: 4, ..s.clone() }, false).unwrap());
        std::fs::rename(&new2, other.join("kept.zoned")).unwrap();
        std::fs::rename(stranger.join("dvs-0.zoned"), &new2).unwrap();
        let found = devices(copy.to_str().unwrap()).unwrap();
        assert!(!found.paths.contains(&new2) && found.warnings[0].contains("its label is of array"), "{found:?}");

        // Every device named by the directory: no record kept.
        let named: Vec<PathBuf> = (0..4).map(|i| copy.join(format!("dvs-{i}.zoned"))).collect();
        record_paths(&copy, uuid, &named).unwrap();
        assert!(!copy.join(PATHS_FILE).exists());
        // A new array in a directory drops what an old one recorded there.
        record_paths(&copy, uuid, &[new2.clone()]).unwrap();
        drop(create_in_dir(&copy, &s, true).unwrap());
        assert!(!copy.join(PATHS_FILE).exists());
    }

    /// A paths file of `devices` entries `{"path": "d/N.zoned"}`, padded
    /// with spaces to at least `pad_to` bytes.
    fn paths_json(devices: usize, pad_to: usize) -> Vec<u8> {
        let list: Vec<String> = (0..devices).map(|i| format!(r#"{{"path":"d/{i}.zoned"}}"#)).collect();
        let mut b = format!(r#"{{"array":"{}","devices":[{}]}}"#, Uuid::new_v4(), list.join(",")).into_bytes();
        if b.len() < pad_to {
            b.resize(pad_to, b' ');
        }
        b
    }

    /// A paths file larger than the limit is refused before it is parsed,
    /// and only one byte past the limit is read of it.
    #[test]
    fn paths_file_over_the_byte_limit_is_refused() {
        let ok = paths_json(2, MAX_PATHS_BYTES);
        assert_eq!(decode_paths(&ok).unwrap().devices().count(), 2);
        let big = paths_json(2, MAX_PATHS_BYTES + 1);
        assert_eq!(decode_paths(&big).unwrap_err(), format!("{} bytes, more than the 1048576 a list of device paths may have", MAX_PATHS_BYTES + 1));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(PATHS_FILE), paths_json(2, 3 << 20)).unwrap();
        let mut warnings = Vec::new();
        assert!(read_hints(dir.path(), &mut warnings).is_none());
        assert!(warnings.len() == 1 && warnings[0].contains("(1048577 bytes, more than the 1048576"), "{warnings:?}");
    }

    /// A paths file of more devices than the limit is refused whole.
    #[test]
    fn paths_file_of_too_many_devices_is_refused() {
        assert_eq!(decode_paths(&paths_json(MAX_PATHS_DEVICES, 0)).unwrap().devices().count(), MAX_PATHS_DEVICES);
        let e = decode_paths(&paths_json(MAX_PATHS_DEVICES + 1, 0)).unwrap_err();
        assert_eq!(e, "4097 devices, more than the 4096 a list of device paths may have");
        let many: Vec<PathBuf> = (0..=MAX_PATHS_DEVICES).map(|i| PathBuf::from(format!("/elsewhere/{i}.zoned"))).collect();
        let dir = tempfile::tempdir().unwrap();
        let e = record_paths(dir.path(), Uuid::new_v4(), &many).unwrap_err().to_string();
        assert!(e.contains("4097 devices") && !dir.path().join(PATHS_FILE).exists(), "the writer keeps the limit too: {e}");
    }

    /// A paths file that is not UTF-8 is a warning naming it, not a panic
    /// or a silent skip.
    #[test]
    fn paths_file_not_utf8_is_a_warning() {
        let mut b = paths_json(1, 0);
        let at = b.iter().position(|&c| c == b'd').unwrap();
        b[at] = 0xff;
        assert_eq!(decode_paths(&b).unwrap_err(), format!("not UTF-8 (byte {at} is not)"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(PATHS_FILE), &b).unwrap();
        let e = devices(dir.path().to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("no DVS member files"), "{e}");
        let mut warnings = Vec::new();
        assert!(read_hints(dir.path(), &mut warnings).is_none());
        let want = format!("{}: not a list of DVS device paths (not UTF-8 (byte {at} is not)); the members and spares it records are not looked for", dir.path().join(PATHS_FILE).display());
        assert_eq!(warnings, [want]);
    }

    /// Recorded entries with an empty path or a relative path climbing out
    /// of the directory are refused with a warning naming them (here the
    /// `..` one leads to a real device of the array, which a directory
    /// must not take through a relative path); the other entries are
    /// followed.
    #[test]
    fn recorded_paths_climbing_out_or_empty_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("d");
        let s = CreateSpec { members: 4, member_size: 8 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 0 };
        let uuid = create_in_dir(&dir, &s, false).unwrap().info().uuid;
        std::fs::rename(dir.join("dvs-3.zoned"), t.path().join("out.zoned")).unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::rename(dir.join("dvs-2.zoned"), dir.join("sub/in.zoned")).unwrap();
        let json = format!(r#"{{"array":"{uuid}","devices":[{{"path":"../out.zoned"}},{{"path":""}},{{"path":"sub/in.zoned"}}]}}"#);
        std::fs::write(dir.join(PATHS_FILE), &json).unwrap();
        let h = decode_paths(json.as_bytes()).unwrap();
        assert_eq!(h.devices().collect::<Vec<_>>(), [(Path::new("sub/in.zoned"), None)]);
        assert_eq!(h.refused(), ["device 0: ../out.zoned climbs out of the directory (`..`); not used", "device 1 has an empty path; not used"]);
        let found = devices(dir.to_str().unwrap()).unwrap();
        assert_eq!(found.paths.last(), Some(&dir.join("sub/in.zoned")), "{found:?}");
        assert!(!found.paths.iter().any(|p| p.ends_with("out.zoned")), "{found:?}");
        let file = dir.join(PATHS_FILE);
        let want = [format!("{}: device 0: ../out.zoned climbs out of the directory (`..`); not used", file.display()), format!("{}: device 1 has an empty path; not used", file.display())];
        assert_eq!(found.warnings, want);
        // The same path, absolute, is the user's choice.
        let abs = t.path().join("out.zoned");
        std::fs::write(dir.join(PATHS_FILE), format!(r#"{{"array":"{uuid}","devices":[{{"path":"{}"}}]}}"#, abs.display())).unwrap();
        let found = devices(dir.to_str().unwrap()).unwrap();
        assert!(found.paths.contains(&abs) && found.warnings.is_empty(), "{found:?}");
    }
}
