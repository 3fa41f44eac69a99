//! What a path carries, and the one check every command makes before it
//! opens a file for writing, so no command overwrites another array's
//! member or journal by accident.
//!
//! ```text
//!   regular file / block device      the first two superblock slots read, nothing written
//!     "MOSAICSB" at a slot start     member i of fixed array U (the newest valid slot;
//!                                    slot 1 at SLOT_SIZE, or at 4096 in format 1)
//!     "MOSAICJL" at 0                the journal of array U
//!     "MOSAICDV" at 0                member i of DVS array U (a zoned block device)
//!     "MOSAICZD" at 0                an emulated zoned drive file; with "MOSAICDV"
//!                                    at 4096 (its device byte 0): member i of DVS array U
//!   directory                        holds an array when a file directly in it (or in
//!                                    its cda-I subdirectories) carries one of the above
//!   character device, FIFO, socket,  nothing (never read: reading a FIFO would take
//!   missing path, "-"                its bytes or wait for a writer)
//! ```

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use mosaic_array::superblock::{Superblock, SLOT_SIZE};

use crate::{Result, VolumeError};

const FIXED_MAGIC: &[u8; 8] = b"MOSAICSB";
const JOURNAL_MAGIC: &[u8; 8] = b"MOSAICJL";
const DVS_MAGIC: &[u8; 8] = b"MOSAICDV";
const ZONED_MAGIC: &[u8; 8] = b"MOSAICZD";
/// The zone header of an emulated zoned drive file: its device byte 0
/// (where a DVS superblock lives) is this far into the file.
const ZONED_HEADER: usize = 4096;
/// Where format 1 (4 KiB slots) put superblock slot 1.
const V1_SLOT1: usize = 4096;
/// Where the journal header keeps its array's UUID.
const JOURNAL_UUID: std::ops::Range<usize> = 12..28;

/// What a path carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Carries {
    /// Nothing of mosaic's (or not a file that can carry anything).
    Nothing,
    /// A member of a fixed-geometry array.
    Member { array: String, index: usize },
    /// A fixed-geometry array's write-ahead journal.
    Journal { array: String },
    /// A member of a DVS array.
    DvsMember { array: String, index: usize },
    /// An emulated zoned drive file without a DVS superblock (e.g. a
    /// replacement not yet rebuilt).
    ZonedFile,
    /// A mosaic superblock that does not decode.
    Damaged,
    /// A directory holding (part of) an array: what its file `entry` carries.
    Dir { entry: String, inner: Box<Carries> },
}

impl Carries {
    /// The array's UUID, when the path names one (as `mosaic info` prints it).
    pub fn array(&self) -> Option<&str> {
        match self {
            Carries::Member { array, .. } | Carries::Journal { array } | Carries::DvsMember { array, .. } => Some(array),
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
            Carries::ZonedFile => write!(f, "an emulated zoned drive (a DVS member file)"),
            Carries::Damaged => write!(f, "a member of an array with a damaged mosaic superblock"),
            Carries::Dir { entry, inner } => write!(f, "a directory holding an array ({entry} is {inner})"),
        }
    }
}

/// Whether `path` names standard output or input rather than a file.
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// What `path` carries.  Reads at most two superblock slots of a regular file or block
/// device and never writes; a path that does not exist carries nothing.
pub fn identify(path: &Path) -> Result<Carries> {
    if is_stdio(path) {
        return Ok(Carries::Nothing);
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
    let at = |off: usize, magic: &[u8; 8]| head.get(off..off + 8) == Some(&magic[..]);
    if slot_starts().any(|off| at(off, FIXED_MAGIC)) {
        return fixed_member(head);
    }
    if at(0, JOURNAL_MAGIC) {
        return match head.get(JOURNAL_UUID) {
            Some(b) => Carries::Journal { array: uuid_text(b) },
            None => Carries::Damaged,
        };
    }
    if at(0, DVS_MAGIC) {
        return dvs_member(head);
    }
    if at(0, ZONED_MAGIC) {
        return match head.get(ZONED_HEADER..) {
            Some(dev) if dev.starts_with(DVS_MAGIC) => dvs_member(dev),
            _ => Carries::ZonedFile,
        };
    }
    Carries::Nothing
}

/// Where superblock slots may start (both formats).
fn slot_starts() -> impl Iterator<Item = usize> {
    [0, V1_SLOT1, SLOT_SIZE as usize].into_iter()
}

/// The newest valid superblock slot of a fixed-array member.
fn fixed_member(head: &[u8]) -> Carries {
    let best = slot_starts()
        .filter_map(|off| head.get(off..))
        .filter_map(|b| Superblock::decode(&b[..b.len().min(SLOT_SIZE as usize)]).ok())
        .max_by_key(|sb| sb.events);
    match best {
        Some(sb) => Carries::Member { array: sb.array_uuid.to_string(), index: sb.member_index },
        None => Carries::Damaged,
    }
}

/// A DVS superblock at the start of `dev` (the member's device byte 0).
fn dvs_member(dev: &[u8]) -> Carries {
    match mosaic_dvs::meta::Superblock::decode(dev) {
        Ok(sb) => Carries::DvsMember { array: format!("{:016x}", sb.uuid), index: sb.member },
        Err(_) => Carries::Damaged,
    }
}

/// A directory holds an array when one of its files (or a file in one of
/// its `cda-I` check drive array directories) carries something.
fn identify_dir(dir: &Path) -> Result<Carries> {
    let rd = std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    let mut names: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    names.sort();
    for p in names {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let Ok(meta) = std::fs::metadata(&p) else { continue };
        let inner = if meta.is_dir() && name.starts_with("cda-") {
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

/// The first bytes of a file that can say what it is: both superblock
/// slots, or a zone header and the DVS superblock after it (fewer when
/// the file is shorter).
fn read_head(path: &Path) -> Result<Vec<u8>> {
    let f = File::open(path).map_err(|e| io_err(path, e))?;
    let len = (2 * SLOT_SIZE).max(2 * ZONED_HEADER as u64);
    let mut head = Vec::with_capacity(len as usize);
    f.take(len).read_to_end(&mut head).map_err(|e| io_err(path, e))?;
    Ok(head)
}

/// A UUID stored as 16 bytes, as `mosaic info` prints it.
fn uuid_text(b: &[u8]) -> String {
    uuid::Uuid::from_slice(b).map(|u| u.to_string()).unwrap_or_else(|_| "(unreadable)".into())
}

fn io_err(path: &Path, source: std::io::Error) -> VolumeError {
    VolumeError::Io { what: path.display().to_string(), source }
}

/// The check before opening `path` for writing: refused when it carries
/// a mosaic superblock or journal (or is a directory holding an array),
/// unless `force`.  Plain files, missing paths, `-`, pipes and character
/// devices (`/dev/stdout`) pass.
pub fn check_output(path: &Path, force: bool) -> Result<()> {
    let what = identify(path)?;
    if what == Carries::Nothing || force {
        return Ok(());
    }
    Err(refusal(path, &what))
}

/// "PATH is member 2 of array U; use --force to overwrite it".
pub fn refusal(path: &Path, what: &Carries) -> VolumeError {
    VolumeError::Usage(format!("{} is {what}; use --force to overwrite it", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text_is_hyphenated() {
        let b: Vec<u8> = (0..16).collect();
        assert_eq!(uuid_text(&b), "00010203-0405-0607-0809-0a0b0c0d0e0f");
    }

    #[test]
    fn plain_bytes_carry_nothing_and_bad_magic_is_damaged() {
        assert_eq!(identify_bytes(&[0u8; 8192]), Carries::Nothing);
        assert_eq!(identify_bytes(b"short"), Carries::Nothing);
        let mut b = vec![0u8; 8192];
        b[..8].copy_from_slice(FIXED_MAGIC);
        assert_eq!(identify_bytes(&b), Carries::Damaged);
        let mut z = vec![0u8; 8192];
        z[..8].copy_from_slice(ZONED_MAGIC);
        assert_eq!(identify_bytes(&z), Carries::ZonedFile);
        assert_eq!(identify_bytes(&z[..100]), Carries::ZonedFile);
    }
}
