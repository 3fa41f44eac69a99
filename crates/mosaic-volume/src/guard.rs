//! What a path carries, and the one check every command makes before it
//! opens a file for writing, so no command overwrites another array's
//! member or journal by accident; and [`erase`], which undoes it on
//! purpose (`mosaic wipe`).
//!
//! Everything is recognised through the one on-disk format
//! ([`mosaic_format`]):
//!
//! ```text
//!   regular file / block device      the first 4 KiB + LABEL_AREA read, nothing written
//!     a label (slot 0 or 1)          kind "fixed": member i of array U
//!                                    kind "dvs":   member i of DVS array U
//!     frame kind JOURNAL_HEADER at 0 the journal of array U (mosaic_array's decoder)
//!     frame kind ZONED_HEADER at 0   an emulated zoned drive file; a label at 4096
//!                                    (its device byte 0): member i of DVS array U
//!     a label or frame that does     damaged (still refused without --force)
//!       not decode
//!     "MOSAICSB" at 0/4096/64 KiB,   an array of an older mosaic format (refused
//!     "MOSAICJL", "MOSAICDV",        without --force, never opened)
//!     "MOSAICZD" at 0
//!   directory                        holds an array when a file directly in it (or in
//!                                    its cda-I, fast, slow or inner subdirectories)
//!                                    carries one of the above
//!   character device, FIFO, socket,  nothing (never read: reading a FIFO would take
//!   missing path, "-"                its bytes or wait for a writer)
//! ```

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use mosaic_format::frame::{self, KIND_JOURNAL_HEADER, KIND_ZONED_HEADER};
use mosaic_format::label::{self, Label, LabelError, LABEL_AREA, SLOT_SIZE};

use crate::{Result, VolumeError};

/// Magics of the formats before the one frame codec: a fixed member's
/// superblock, a journal, a DVS member, an emulated zoned drive.
const OLD_MAGICS: [&[u8; 8]; 4] = [b"MOSAICSB", b"MOSAICJL", b"MOSAICDV", b"MOSAICZD"];
/// Where old fixed-member superblock slots started (both old versions).
const OLD_SLOTS: [usize; 3] = [0, 4096, 64 << 10];
/// The header of an emulated zoned drive file: its device byte 0 (where a
/// DVS member's label lives) is this far into the file.
const ZONED_HEADER: usize = 4096;

/// What a path carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Carries {
    /// Nothing of mosaic's (or not a file that can carry anything).
    Nothing,
    /// A member of a fixed-geometry array.
    Member { array: String, index: usize },
    /// A fixed-geometry array's write-ahead journal.
    Journal { array: String },
    /// A hot spare of a fixed-geometry array.
    Spare { array: String },
    /// The new drive of a fixed-geometry array's paused hot replace of
    /// member `index` (not a member: the copy resumes onto it).
    HotCopy { array: String, index: usize },
    /// A member of a DVS array.
    DvsMember { array: String, index: usize },
    /// An emulated zoned drive file without a DVS superblock (e.g. a
    /// replacement not yet rebuilt).
    ZonedFile,
    /// A mosaic label, journal header or zoned-drive header that does not
    /// decode.
    Damaged,
    /// A member, journal or zoned drive of an older mosaic format.
    OldFormat,
    /// A directory holding (part of) an array: what its file `entry` carries.
    Dir { entry: String, inner: Box<Carries> },
}

impl Carries {
    /// The array's UUID, when the path names one (as `mosaic info` prints it).
    pub fn array(&self) -> Option<&str> {
        match self {
            Carries::Member { array, .. } | Carries::Journal { array } | Carries::DvsMember { array, .. } | Carries::Spare { array } | Carries::HotCopy { array, .. } => Some(array),
            Carries::Dir { inner, .. } => inner.array(),
            _ => None,
        }
    }

    /// The member index, for a member.
    pub fn member(&self) -> Option<usize> {
        match self {
            Carries::Member { index, .. } | Carries::DvsMember { index, .. } => Some(*index),
            _ => None,
        }
    }
}

impl fmt::Display for Carries {
    /// What follows "PATH is ..." in a message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Carries::Nothing => write!(f, "nothing of mosaic's"),
            Carries::Member { array, index } => write!(f, "member {index} of array {array}"),
            Carries::Journal { array } => write!(f, "the journal of array {array}"),
            Carries::DvsMember { array, index } => write!(f, "member {index} of DVS array {array}"),
            Carries::Spare { array } => write!(f, "a hot spare of array {array}"),
            Carries::HotCopy { array, index } => write!(f, "the new drive of a paused hot replace of member {index} of array {array}"),
            Carries::ZonedFile => write!(f, "an emulated zoned drive (a DVS member file)"),
            Carries::Damaged => write!(f, "a member of an array with a damaged mosaic superblock"),
            Carries::OldFormat => write!(f, "an array of an older mosaic format"),
            Carries::Dir { entry, inner } => write!(f, "a directory holding an array ({entry} is {inner})"),
        }
    }
}

/// Whether `path` names standard output or input rather than a file.
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// What `path` carries.  Reads at most a zone header and two label slots
/// of a regular file or block device and never writes; a path that does
/// not exist carries nothing.
pub fn identify(path: &Path) -> Result<Carries> {
    if is_stdio(path) {
        return Ok(Carries::Nothing);
    }
    if path.to_str().is_some_and(mosaic_dev::nbd::is_uri) {
        return Ok(identify_bytes(&read_head(path)?));
    }
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Carries::Nothing),
        Err(e) => return Err(io_err(path, e)),
    };
    let ft = meta.file_type();
    if ft.is_dir() {
        return identify_dir(path);
    }
    if !(ft.is_file() || ft.is_block_device()) {
        return Ok(Carries::Nothing);
    }
    let head = read_head(path)?;
    Ok(identify_bytes(&head))
}

/// What the first bytes of a file say it is.
pub fn identify_bytes(head: &[u8]) -> Carries {
    if label::has_label(head) {
        return member(head);
    }
    match frame::peek_kind(head) {
        Some(KIND_JOURNAL_HEADER) => journal(head),
        Some(KIND_ZONED_HEADER) => zoned(head),
        Some(_) => Carries::Damaged,
        None if old_format(head) => Carries::OldFormat,
        None => Carries::Nothing,
    }
}

/// Whether `head` carries a magic of an older mosaic format.
fn old_format(head: &[u8]) -> bool {
    let at = |off: usize, magic: &[u8; 8]| head.get(off..off + 8) == Some(&magic[..]);
    OLD_SLOTS.iter().any(|&o| at(o, OLD_MAGICS[0])) || OLD_MAGICS.iter().any(|m| at(0, m))
}

/// The member whose label `dev` (a device's first bytes) carries.
fn member(dev: &[u8]) -> Carries {
    match decode_label(dev) {
        Some(l) => labelled(&l),
        None => Carries::Damaged,
    }
}

/// The newer valid label slot of `dev` (a device's first bytes).
fn decode_label(dev: &[u8]) -> Option<Label> {
    let read = label::read_label(dev.len() as u64, &mut |buf, off| {
        let src = usize::try_from(off).ok().and_then(|o| dev.get(o..o.checked_add(buf.len())?));
        let src = src.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    });
    match read {
        Ok(Ok(l)) => Some(l),
        Ok(Err(LabelError::None | LabelError::Corrupt(_))) | Err(_) => None,
    }
}

/// The member label a regular file or block device carries (a DVS
/// member's behind its zoned-drive header), for `mosaic examine` and
/// `assemble --scan`; None for anything else.
pub fn member_label(path: &Path) -> Result<Option<Label>> {
    let head = read_head(path)?;
    let dev = match frame::peek_kind(&head) {
        Some(KIND_ZONED_HEADER) => head.get(ZONED_HEADER..).unwrap_or_default(),
        _ => &head[..],
    };
    Ok(if label::has_label(dev) { decode_label(dev) } else { None })
}

/// What a valid label says its device is.
fn labelled(l: &Label) -> Carries {
    let (array, index) = (l.array_uuid.to_string(), l.member_index);
    // Fixed arrays' spares and DVS arrays' name their role alike.
    match l.policy.get("role").and_then(|r| r.as_str()) {
        Some("spare") => return Carries::Spare { array },
        Some("replacement") => return Carries::HotCopy { array, index },
        _ => {}
    }
    match l.kind.as_str() {
        "dvs" => Carries::DvsMember { array, index },
        _ => Carries::Member { array, index },
    }
}

/// A journal header at byte 0, decoded by the journal's own decoder.
fn journal(head: &[u8]) -> Carries {
    match mosaic_array::journal::decode_header(head) {
        Ok(h) => Carries::Journal { array: h.array.to_string() },
        Err(_) => Carries::Damaged,
    }
}

/// An emulated zoned drive file: a DVS member when its device (from file
/// byte [`ZONED_HEADER`]) carries a label.
fn zoned(head: &[u8]) -> Carries {
    if !matches!(frame::decode(head), Ok(Some(_))) {
        return Carries::Damaged;
    }
    match head.get(ZONED_HEADER..) {
        Some(dev) if label::has_label(dev) => member(dev),
        _ => Carries::ZonedFile,
    }
}

/// A directory holds an array when one of its files (or a file in one of
/// its `cda-I` check drive array directories) carries something.  Its own
/// files are looked at before its nested arrays' directories, so a CBRO
/// array is named by its own UUID (as a list of its members names it),
/// and a tier or remapped array, which has no files of its own, by its
/// first inner array's.
fn identify_dir(dir: &Path) -> Result<Carries> {
    let rd = std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    let mut names: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    names.sort_by_key(|p| (p.is_dir(), p.clone()));
    for p in names {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let Ok(meta) = std::fs::metadata(&p) else { continue };
        // Nested arrays: CBRO check drive arrays, a tier's two arrays and a
        // remapped array's inner one.
        let nested = name.starts_with("cda-") || name == crate::tier::FAST_DIR || name == crate::tier::SLOW_DIR || name == crate::remap::INNER_DIR;
        let inner = if meta.is_dir() && nested {
            identify_dir(&p)?
        } else if meta.is_file() {
            identify_bytes(&read_head(&p)?)
        } else {
            Carries::Nothing
        };
        if inner != Carries::Nothing {
            let inner = match inner {
                Carries::Dir { inner, .. } => inner,
                other => Box::new(other),
            };
            return Ok(Carries::Dir { entry: p.display().to_string(), inner });
        }
    }
    Ok(Carries::Nothing)
}

/// The first bytes of a file that can say what it is: a zone header and
/// the two label slots after it (fewer when the file is shorter).
fn read_head(path: &Path) -> Result<Vec<u8>> {
    if path.to_str().is_some_and(mosaic_dev::nbd::is_uri) {
        return remote_head(path);
    }
    let f = File::open(path).map_err(|e| io_err(path, e))?;
    let len = ZONED_HEADER as u64 + LABEL_AREA;
    let mut head = Vec::with_capacity(len as usize);
    f.take(len).read_to_end(&mut head).map_err(|e| io_err(path, e))?;
    Ok(head)
}

/// The first bytes of a remote member (an NBD export), read over NBD.
fn remote_head(path: &Path) -> Result<Vec<u8>> {
    use mosaic_dev::Member;
    let d = mosaic_dev::Device::open(path).map_err(VolumeError::Device)?;
    let mut head = vec![0u8; (ZONED_HEADER as u64 + LABEL_AREA).min(d.size()) as usize];
    d.read_at(&mut head, 0).map_err(VolumeError::Device)?;
    Ok(head)
}

fn io_err(path: &Path, source: std::io::Error) -> VolumeError {
    VolumeError::Io { what: path.display().to_string(), err: source }
}

/// The check before opening `path` for writing: refused when it carries
/// a mosaic superblock or journal (or is a directory holding an array),
/// unless `force`.  Plain files, missing paths, `-`, pipes and character
/// devices (`/dev/stdout`) pass, and so does an emulated zoned drive
/// file with no label: no array's (a DVS member or spare has its label
/// from the moment it joins; a removed spare's is erased).
pub fn check_output(path: &Path, force: bool) -> Result<()> {
    let what = identify(path)?;
    if matches!(what, Carries::Nothing | Carries::ZonedFile) || force {
        return Ok(());
    }
    Err(refusal(path, &what))
}

/// Erase what the file or block device `path` carries of mosaic's, as
/// `mdadm --zero-superblock` does: a label (both slots), a journal's
/// header, an older format's magics, or the label inside an emulated
/// zoned drive file (whose zone header stays: it is still a zoned drive).
/// Zeroed 4 KiB blocks over exactly those places, then a sync; the
/// device is held under the array lock meanwhile, so a device in use is
/// refused.  Refused without `force` when it carries anything (the array
/// it belongs to loses it).  What it carried; None when there was nothing
/// to erase ([`to_erase`]).
pub fn erase(path: &Path, force: bool) -> Result<Option<Carries>> {
    let Some(what) = to_erase(path)? else { return Ok(None) };
    if !force {
        return Err(VolumeError::Usage(format!("{} is {what}; use --force to erase it", path.display())));
    }
    let _lock = mosaic_dev::DeviceLock::acquire(path, true).map_err(|e| VolumeError::Usage(e.to_string()))?;
    let f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| io_err(path, e))?;
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0).max(block_size(path));
    // A zoned file's device starts after its header; anything else at 0.
    // (The old formats' slots, 0, 4 KiB and 64 KiB, cover the label
    // slots and the journal header too.)
    let places: Vec<u64> = match what {
        Carries::DvsMember { .. } | Carries::Spare { .. } | Carries::HotCopy { .. } if zoned_file(path) => vec![ZONED_HEADER as u64, ZONED_HEADER as u64 + SLOT_SIZE],
        _ => OLD_SLOTS.iter().map(|&o| o as u64).collect(),
    };
    debug_assert!(places.contains(&SLOT_SIZE) || places.contains(&(ZONED_HEADER as u64 + SLOT_SIZE)));
    let zero = [0u8; 4096];
    for at in places {
        let n = zero.len().min(size.saturating_sub(at) as usize);
        std::os::unix::fs::FileExt::write_all_at(&f, &zero[..n], at).map_err(|e| io_err(path, e))?;
    }
    f.sync_all().map_err(|e| io_err(path, e))?;
    Ok(Some(what))
}

/// What [`erase`] would erase at `path`, nothing written: None for
/// nothing of mosaic's, a zoned drive file with no label, or what is not
/// a file or block device; an error for a directory or an NBD URI.
pub fn to_erase(path: &Path) -> Result<Option<Carries>> {
    if path.to_str().is_some_and(mosaic_dev::nbd::is_uri) {
        return Err(VolumeError::Usage(format!("{}: wipe erases local files and block devices", path.display())));
    }
    let what = identify(path)?;
    if matches!(what, Carries::Dir { .. }) {
        return Err(VolumeError::Usage(format!("{} is {what}: wipe takes devices, not a directory", path.display())));
    }
    if matches!(what, Carries::Nothing | Carries::ZonedFile) || !(path.is_file() || is_block(path)) {
        return Ok(None);
    }
    Ok(Some(what))
}

/// Whether `path` starts with an emulated zoned drive's header.
fn zoned_file(path: &Path) -> bool {
    read_head(path).is_ok_and(|h| frame::peek_kind(&h) == Some(KIND_ZONED_HEADER))
}

/// Whether `path` is a block device.
pub fn is_block(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

/// A block device's size (its metadata says 0).
fn block_size(path: &Path) -> u64 {
    use std::io::{Seek, SeekFrom};
    if !is_block(path) {
        return 0;
    }
    File::open(path).and_then(|mut f| f.seek(SeekFrom::End(0))).unwrap_or(0)
}

/// "PATH is member 2 of array U; use --force to overwrite it".
pub fn refusal(path: &Path, what: &Carries) -> VolumeError {
    VolumeError::Usage(format!("{} is {what}; use --force to overwrite it", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_format::label::SLOT_SIZE;
    use uuid::Uuid;

    fn label(kind: &str, index: usize, events: u64) -> Label {
        Label {
            kind: kind.into(),
            array_uuid: Uuid::from_u128(0x1234),
            member_uuid: Uuid::from_u128(index as u128),
            member_index: index,
            members: 3,
            events,
            member_uuids: (0..3).map(Uuid::from_u128).collect(),
            created: 0,
            policy: serde_json::Value::Null,
            session: Uuid::nil(),
            prev_session: Uuid::nil(),
        }
    }

    /// A device image of `len` bytes with `l` in its slot.
    fn labelled_dev(l: &Label, len: usize) -> Vec<u8> {
        let mut d = vec![0u8; len];
        let b = l.encode().unwrap();
        let at = (l.slot() * SLOT_SIZE) as usize;
        d[at..at + b.len()].copy_from_slice(&b);
        d
    }

    const U: &str = "00000000-0000-0000-0000-000000001234";

    #[test]
    fn plain_bytes_carry_nothing() {
        assert_eq!(identify_bytes(&[0u8; 8192]), Carries::Nothing);
        assert_eq!(identify_bytes(b"short"), Carries::Nothing);
        assert_eq!(identify_bytes(b"MOSF"), Carries::Nothing, "too short for a frame kind");
    }

    #[test]
    fn labels_name_fixed_and_dvs_members_and_a_torn_slot_is_survived() {
        let d = labelled_dev(&label("fixed", 2, 4), LABEL_AREA as usize);
        assert_eq!(identify_bytes(&d), Carries::Member { array: U.into(), index: 2 });
        let mut d = labelled_dev(&label("dvs", 1, 5), LABEL_AREA as usize);
        let older = label("dvs", 1, 4).encode().unwrap();
        d[..older.len()].copy_from_slice(&older);
        assert_eq!(identify_bytes(&d), Carries::DvsMember { array: U.into(), index: 1 });
        d[SLOT_SIZE as usize + 100] ^= 1;
        assert_eq!(identify_bytes(&d), Carries::DvsMember { array: U.into(), index: 1 }, "slot 1 torn, slot 0 read");
        d[100] ^= 1;
        assert_eq!(identify_bytes(&d), Carries::Damaged, "both slots damaged");
        let d = labelled_dev(&label("fixed", 0, 2), 8192);
        assert_eq!(identify_bytes(&d), Carries::Damaged, "a label in a file too short to hold it");
    }

    #[test]
    fn journals_and_zoned_drives_are_frames_at_byte_0() {
        let id = Uuid::from_u128(0x1234);
        let mut j = mosaic_array::journal::encode_header(id, 1 << 20, 1, Uuid::nil());
        assert_eq!(identify_bytes(&j), Carries::Journal { array: U.into() });
        j[30] ^= 1;
        assert_eq!(identify_bytes(&j), Carries::Damaged);
        let mut z = frame::encode(KIND_ZONED_HEADER, 0, b"zones");
        z.resize(ZONED_HEADER, 0);
        assert_eq!(identify_bytes(&z), Carries::ZonedFile);
        let dir = tempfile::tempdir().unwrap();
        let blank = dir.path().join("blank.zoned");
        std::fs::write(&blank, &z).unwrap();
        assert!(check_output(&blank, false).is_ok(), "a zoned file with no label is no array's");
        let mut with = z.clone();
        with.extend(labelled_dev(&label("dvs", 2, 6), LABEL_AREA as usize));
        assert_eq!(identify_bytes(&with), Carries::DvsMember { array: U.into(), index: 2 });
        std::fs::write(&blank, &with).unwrap();
        assert!(check_output(&blank, false).unwrap_err().to_string().contains("member 2 of DVS array"));
        z[26] ^= 1;
        assert_eq!(identify_bytes(&z), Carries::Damaged);
        assert_eq!(identify_bytes(&frame::encode(0x7777, 0, b"?")), Carries::Damaged, "a frame of a kind nobody knows");
    }

    #[test]
    fn erase_needs_force_for_a_label_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("m.img");
        std::fs::write(&f, labelled_dev(&label("fixed", 1, 3), 4 * SLOT_SIZE as usize)).unwrap();
        let e = erase(&f, false).unwrap_err().to_string();
        assert!(e.contains("is member 1 of array") && e.contains("use --force to erase it"), "{e}");
        assert_eq!(identify(&f).unwrap(), Carries::Member { array: U.into(), index: 1 }, "nothing written");
        assert_eq!(erase(&f, true).unwrap(), Some(Carries::Member { array: U.into(), index: 1 }));
        assert_eq!((identify(&f).unwrap(), erase(&f, false).unwrap()), (Carries::Nothing, None));
        assert!(to_erase(dir.path()).is_ok_and(|w| w.is_none()), "an empty directory holds nothing");
        let e = to_erase(Path::new("nbd://127.0.0.1:1/x")).unwrap_err().to_string();
        assert!(e.contains("wipe erases local files and block devices"), "{e}");
    }

    #[test]
    fn old_formats_are_recognised_not_opened() {
        for (at, magic) in [(0, b"MOSAICSB"), (4096, b"MOSAICSB"), (65536, b"MOSAICSB"), (0, b"MOSAICJL"), (0, b"MOSAICDV"), (0, b"MOSAICZD")] {
            let mut b = vec![0u8; 70000];
            b[at..at + 8].copy_from_slice(magic);
            assert_eq!(identify_bytes(&b), Carries::OldFormat, "{} at {at}", String::from_utf8_lossy(magic));
        }
        assert_eq!(Carries::OldFormat.to_string(), "an array of an older mosaic format");
    }
}
