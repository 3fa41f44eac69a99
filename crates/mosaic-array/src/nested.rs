//! Nested check drive arrays: a CBRO code column that lives on an array of
//! its own (raid5, raid6, rs:K+M, or another cbro).
//!
//! ```text
//!   cbro:4+1,cda=raid5:3 in DIR:
//!
//!   DIR/member-00.img .. member-03.img   data drives (data units only)
//!   DIR/cda-0/                            the check drive array: a whole
//!       member-00.img .. member-02.img      raid5 2+1 array, with its own
//!       journal.img                         superblocks and journal,
//!                                           that the outer array uses as
//!                                           its member 4 ("array:DIR/cda-0")
//! ```
//!
//! The outer array sees the inner one as a plain [`Member`]: a code unit
//! written to the CDA is a small write on the inner array, which plans it
//! with its own RMW/RCW and keeps its own parity; a member failure inside
//! the CDA is the inner array's business (degraded reads, rebuild), and
//! only a CDA that fails as a whole fails the outer member.  The same
//! composition runs in the simulator (`mosaic_sim::nested`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mosaic_core::{Geometry, Level};
use mosaic_dev::{FileMember, Member};

use crate::array::JOURNAL_FILE;
use crate::spec::ArraySpec;
use crate::superblock::DATA_OFFSET;
use crate::{Array, ArrayError, CreateOptions};

/// Path hint of a member that is an array: `array:DIR`.
pub const ARRAY_PREFIX: &str = "array:";

/// An array used as a member of another.
pub struct ArrayMember {
    arr: Arc<Array>,
    name: String,
}

impl ArrayMember {
    pub fn new(arr: Arc<Array>, name: impl Into<String>) -> ArrayMember {
        ArrayMember { arr, name: name.into() }
    }
    pub fn array(&self) -> &Array {
        &self.arr
    }
}

fn io(e: ArrayError) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl Member for ArrayMember {
    fn describe(&self) -> String {
        format!("{ARRAY_PREFIX}{}", self.name)
    }
    fn size(&self) -> u64 {
        self.arr.capacity()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.arr.read(offset, buf).map_err(io)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.arr.write(offset, buf).map_err(io)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.arr.flush().map_err(io)
    }
    fn inner_out(&self) -> Vec<String> {
        let info = self.arr.info();
        let mut out = Vec::new();
        for m in &info.member_list {
            if !matches!(m.state, mosaic_core::MemberState::Active) || !m.present {
                let state = match m.state {
                    mosaic_core::MemberState::Active => "missing".to_string(),
                    mosaic_core::MemberState::Failed => "failed".to_string(),
                    mosaic_core::MemberState::Rebuilding { done } => format!("rebuilding (at stripe {done})"),
                };
                out.push(format!("{}: member {} {state} ({}); `mosaic replace -a {} --member {} --drive NEW` rebuilds it", self.name, m.index, m.path, self.name, m.index));
            }
            out.extend(m.inner_out.iter().cloned());
        }
        if let Some(why) = &info.journal_failed {
            out.push(format!("{}: its journal failed ({why})", self.name));
        }
        out
    }
}

/// `cbro:N+K,cda=LEVEL[:W]...` with a parity CDA: the outer level (with
/// single-device CDAs), the CDA level string and its member count.  None
/// for every other level (raid0 and single CDAs are native to cbro).
pub fn split_cda(level: &str) -> Result<Option<(Level, String, usize)>, ArrayError> {
    let t = level.trim().to_ascii_lowercase();
    let Some((outer, cda)) = t.split_once(",cda=") else { return Ok(None) };
    if !outer.starts_with("cbro:") || cda == "single" || cda.starts_with("raid0:") {
        return Ok(None);
    }
    let bad = || ArrayError::Usage(format!("bad check drive array {cda:?} in {level:?}: expected cda=single, raid0:W, raid5:W, raid6:W, rs:K+M or cbro:N+K[,cda=...]"));
    let depth = t.matches(",cda=").count();
    if depth > MAX_NESTING {
        return Err(ArrayError::Usage(format!("{level:?} nests check drive arrays {depth} deep; at most {MAX_NESTING}")));
    }
    let outer: Level = outer.parse()?;
    // Each level of nesting is parsed once (twice made the time grow as
    // 2^depth).
    let (inner, inner_level, members) = if let Some(w) = cda.strip_prefix("raid5:").or_else(|| cda.strip_prefix("raid6:")) {
        let w: usize = w.parse().map_err(|_| bad())?;
        (cda[..5].to_string(), cda[..5].parse::<Level>()?, w)
    } else if cda.starts_with("rs:") {
        let l: Level = cda.parse()?;
        (cda.to_string(), l, l.implied_members().ok_or_else(bad)?)
    } else if cda.starts_with("cbro:") {
        let (l, m) = match split_cda(cda)? {
            Some((o, _, _)) => (o, o.implied_members().unwrap_or(0)),
            None => {
                let l: Level = cda.parse()?;
                (l, l.implied_members().ok_or_else(|| ArrayError::Usage(format!("{cda} needs a member count")))?)
            }
        };
        (cda.to_string(), l, m)
    } else {
        return Err(bad());
    };
    inner_level.columns(members)?;
    Ok(Some((outer, inner, members)))
}

/// Check drive arrays nested deeper than this are refused.
pub const MAX_NESTING: usize = 8;

fn inner_level(s: &str) -> Result<Level, ArrayError> {
    Ok(match split_cda(s)? {
        Some((outer, _, _)) => outer,
        None => s.parse()?,
    })
}

/// Create an array in `dir` from a level string that may name nested
/// CDAs; each CDA is created in `dir/cda-I` and sized to hold one data
/// drive's units.  Every array gets a journal file unless `journal_size`
/// is None.
pub fn create_dir(dir: &Path, level: &str, o: &CreateOptions, journal_size: Option<u64>) -> Result<Array, ArrayError> {
    let journal = journal_size.map(|s| (dir.join(JOURNAL_FILE), s));
    let Some((outer, inner, inner_members)) = split_cda(level)? else {
        let mut o = o.clone();
        o.level = level.parse()?;
        return Array::create_journaled(&ArraySpec::Dir(dir.to_path_buf()), &o, journal.as_ref().map(|(p, s)| (p.as_path(), *s)));
    };
    let Level::Cbro { n, k, .. } = outer else { unreachable!("split_cda gives cbro") };
    let (n, k) = (n as usize, k as usize);
    let size = o.member_size.ok_or_else(|| ArrayError::Usage("--member-size is required when creating member files".into()))?;
    if size < DATA_OFFSET + o.unit {
        return Err(ArrayError::Usage(format!("member size {size} is too small: each member needs at least {} bytes", DATA_OFFSET + o.unit)));
    }
    let geo = Geometry::new(outer, n + k, o.unit, o.block, size - DATA_OFFSET)?;
    let need = DATA_OFFSET + geo.member_bytes(n);
    std::fs::create_dir_all(dir).map_err(|e| ArrayError::Usage(format!("{}: {e}", dir.display())))?;
    let mut members: Vec<(Arc<dyn Member>, String)> = Vec::new();
    for i in 0..n {
        let p = ArraySpec::member_file(dir, i);
        if p.exists() && !o.force {
            return Err(ArrayError::Usage(format!("{} already exists; use --force to overwrite it", p.display())));
        }
        refuse_if_in_use(&p)?;
        let m = FileMember::create(&p, size).map_err(|e| ArrayError::Io(e.to_string()))?;
        m.lock(true).map_err(|e| ArrayError::Usage(e.to_string()))?;
        members.push((Arc::new(m), p.display().to_string()));
    }
    // Each CDA: members just large enough that the inner capacity holds
    // `need` bytes (the inner unit is the outer one).
    let il = inner_level(&inner)?;
    let (ik, _) = il.columns(inner_members)?;
    let per = need.div_ceil(ik as u64 * o.unit) * o.unit + DATA_OFFSET;
    let mut cdas = Vec::new();
    for i in 0..k {
        let sub = dir.join(format!("cda-{i}"));
        let io = CreateOptions { level: il, members: Some(inner_members), member_size: Some(per), ..o.clone() };
        let arr = Arc::new(create_dir(&sub, &inner, &io, journal_size)?);
        let name = std::fs::canonicalize(&sub).unwrap_or(sub).display().to_string();
        cdas.push(arr.clone());
        members.push((Arc::new(ArrayMember::new(arr, name.clone())), format!("{ARRAY_PREFIX}{name}")));
    }
    let jdev = match &journal {
        Some((p, s)) => {
            refuse_if_in_use(p)?;
            let f = FileMember::create(p, *s).map_err(|e| ArrayError::Io(e.to_string()))?;
            f.lock(true).map_err(|e| ArrayError::Usage(e.to_string()))?;
            let name = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()).display().to_string();
            Some((Arc::new(f) as Arc<dyn Member>, name))
        }
        None => None,
    };
    let oo = CreateOptions { level: outer, members: Some(n + k), ..o.clone() };
    let arr = Array::create_with_journal(members, &oo, true, jdev)?;
    arr.set_home(dir)?;
    // Each check drive array knows it is one: opened alone it is only read.
    let uuid = arr.superblock().array_uuid;
    for c in &cdas {
        c.set_owner(crate::superblock::Owner { role: "a check drive array of a CBRO array".into(), uuid })?;
    }
    Ok(arr)
}

/// Before overwriting an existing file (`--force`): refuse when another
/// process has it open as part of an array.
fn refuse_if_in_use(p: &Path) -> Result<(), ArrayError> {
    if p.exists() {
        FileMember::open(p).and_then(|m| m.lock(true)).map_err(|e| ArrayError::Usage(e.to_string()))?;
    }
    Ok(())
}

/// Open the array a member hint `array:DIR` names,
/// with what its own open found worth a warning (each prefixed with the
/// nested array's directory), so the user hears of a stale or bad device
/// inside a check drive array too.
pub fn open_hint(hint: &str, writable: bool) -> Option<Result<(Arc<dyn Member>, Vec<String>), ArrayError>> {
    let dir = hint.strip_prefix(ARRAY_PREFIX)?;
    Some(Array::open(&ArraySpec::Dir(PathBuf::from(dir)), writable).map(|a| {
        let warnings = a.open_warnings().iter().map(|w| format!("check drive array {dir}: {w}")).collect();
        (Arc::new(ArrayMember::new(Arc::new(a), dir)) as Arc<dyn Member>, warnings)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cbro:1+1,cda=` nested `depth` times around a single drive.
    fn nested(depth: usize) -> String {
        format!("{}single", "cbro:1+1,cda=".repeat(depth))
    }

    #[test]
    fn nesting_is_parsed_once_a_level_and_capped() {
        let (outer, inner, members) = split_cda(&nested(MAX_NESTING)).unwrap().unwrap();
        assert_eq!((outer.to_string(), members), ("cbro:1+1".to_string(), 2));
        assert_eq!(inner, nested(MAX_NESTING - 1));
        let e = split_cda(&nested(MAX_NESTING + 1)).unwrap_err().to_string();
        assert!(e.contains(&format!("nests check drive arrays {} deep; at most {MAX_NESTING}", MAX_NESTING + 1)), "{e}");
        let e = split_cda(&nested(28)).unwrap_err().to_string();
        assert!(e.contains("28 deep"), "{e}");
    }
}
