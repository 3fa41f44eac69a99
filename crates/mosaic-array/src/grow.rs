//! Grow: add members to a raid0/4/5/6 or rs array and restripe it online,
//! crash-safe and resumable (md's `--grow`, ZFS raidz expansion).
//!
//! The new geometry has the same stripe unit and the same rows (stripes)
//! per member, and D' > D data columns, so logical data moves only to
//! lower or equal rows.  The restripe walks the new geometry's stripes in
//! order; `pos` (in every superblock) says how many are done:
//!
//! ```text
//!   logical  0 ──────────── pos·D'·u ───────────────────── old capacity
//!            │ new layout (rows 0..pos) │ old layout (rows ≥ pos·D'/D) │
//!
//!   one step, clients held off (the gate), copies new stripes pos..pos+b:
//!     read  logical [pos·D'u, (pos+b)·D'u) through the old layout
//!     write new stripes pos..pos+b whole (full-stripe writes, new code)
//!     flush the members, then record pos+b in every superblock
//! ```
//!
//! **Why a crash loses nothing.**  Rewriting rows `pos..pos+b` destroys
//! the old data there: logical units `[pos·D, (pos+b)·D)`, which must
//! already sit durably below `pos` in the new layout, so
//! `(pos+b)·D ≤ pos·D'`, i.e. `b ≤ pos·(D'−D)/D`.  The data a step copies
//! lives in old rows `≥ pos·D'/D ≥ pos+b`, which no earlier step wrote, so
//! redoing a step after a crash reads the same bytes.  Before each step the
//! journal (if any) is checkpointed: its records name rows in the old
//! layout, and a replay must never write them over restriped rows.
//!
//! The first `C = ⌈D/(D'−D)⌉` stripes cannot meet that rule (at `pos = 0`
//! nothing is below).  Their data is first saved on the new members' last
//! rows, which nothing uses until the walk ends there, and its CRC-32C is
//! recorded in the superblocks.  After a crash in the critical section
//! neither layout holds those stripes whole, so the next open restores
//! them from that copy before any client sees them (a read-only open
//! serves their reads from the copy instead).  When it fits in the old
//! members' reserved bytes (between the label and the data), a second
//! copy is spread over them, so one member lost with the crash (a new one
//! included) loses nothing; when it does not fit (large units, wide
//! arrays), the grow is refused without a backup file outside the array
//! (`grow --backup-file`, as mdadm's), which holds that copy instead and
//! is removed when the grow ends.  With no whole copy left those bytes
//! read as an error, never as wrong bytes, and the grow cannot go on.
//!
//! Steps grow geometrically (`b ≈ pos·(D'−D)/D`, capped), so the walk
//! takes few superblock writes.  Past the old capacity the new
//! stripes are written with zeros, so every stripe's code is right when
//! the grow ends and the capacity becomes D'·u·stripes.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use uuid::Uuid;

use mosaic_core::{FixedLayout, Geometry, Level, MemberState};
use mosaic_dev::Member;
use mosaic_exec::Client;

use crate::array::{Array, Shape};
use mosaic_format::label::LABEL_AREA;

use crate::superblock::{Reshape, DATA_OFFSET};
use crate::ArrayError;

/// Most data one step copies.
const STEP_BYTES: u64 = 8 << 20;

/// How a restripe run ends early.
#[derive(Debug, Clone, Default)]
pub struct GrowOptions {
    /// For tests: stop abruptly after copying this many stripes, as a
    /// killed process would.
    pub abort_after_stripes: Option<u64>,
    /// Pause (cleanly, between steps) when this is set: a server stopping.
    pub stop: Option<Arc<std::sync::atomic::AtomicBool>>,
}

/// What a finished grow did.
#[derive(Debug, Clone, Serialize)]
pub struct GrowReport {
    pub members: usize,
    pub capacity: u64,
    /// Stripes restriped by this run (a resumed grow counts its part).
    pub stripes: u64,
    pub bytes_written: u64,
    pub seconds: f64,
    pub resumed: bool,
    /// Paused before the end (asked to stop); the next run resumes.
    pub paused: bool,
}

/// The level of `level` with `added` more data columns.
fn grown_level(level: Level, added: usize) -> Result<Level, ArrayError> {
    match level {
        Level::Raid0 | Level::Raid4 | Level::Raid5 | Level::Raid6 => Ok(level),
        Level::Rs { k, m } => {
            let k = usize::from(k) + added;
            let k = u16::try_from(k).map_err(|_| ArrayError::Usage(format!("rs with {k} data columns is too wide")))?;
            Ok(Level::Rs { k, m })
        }
        other => Err(ArrayError::Usage(format!("a {other} array cannot grow: grow works on raid0, raid4, raid5, raid6 and rs"))),
    }
}

/// Stripes of the critical section: `⌈D/(D'−D)⌉`.
fn critical(old: &Geometry, new: &Geometry) -> u64 {
    (old.k as u64).div_ceil((new.k - old.k) as u64)
}

/// Rows of each new member that hold the critical section's copy.
fn backup_rows(old: &Geometry, new: &Geometry) -> u64 {
    let units = critical(old, new) * new.k as u64;
    units.div_ceil((new.members - old.members) as u64)
}

/// Logical bytes of the critical section: its stripes' data.
pub(crate) fn critical_bytes(old: &Geometry, new: &Geometry) -> u64 {
    critical(old, new).min(new.stripes) * new.stripe_data_bytes()
}

/// Where the critical section's copy lives: cut in `chunk`-byte pieces,
/// one per new member in order, each at byte `off` of its member (the
/// new members' last rows, which nothing uses until the walk ends there).
struct CopyPlace {
    chunk: usize,
    off: u64,
    len: usize,
}

fn copy_place(old: &Geometry, new: &Geometry) -> CopyPlace {
    let rows = backup_rows(old, new);
    CopyPlace { chunk: (rows * new.unit) as usize, off: DATA_OFFSET + (new.stripes - rows) * new.unit, len: critical_bytes(old, new) as usize }
}

/// The second copy, when it fits: cut in pieces over the old members'
/// reserved bytes between the label and the data, so a member lost with
/// a crash (a new one included) leaves one copy whole.
fn second_copy_place(old: &Geometry, new: &Geometry) -> Option<CopyPlace> {
    let len = critical_bytes(old, new) as usize;
    let chunk = len.div_ceil(old.members).next_multiple_of(4096);
    (LABEL_AREA + chunk as u64 <= DATA_OFFSET).then_some(CopyPlace { chunk, off: LABEL_AREA, len })
}

/// New members `new`, to be members `first..` of `geo`, each large
/// enough, or the first that is not, named.
pub(crate) fn joiners_fit(geo: &Geometry, first: usize, new: &[(Arc<dyn Member>, String)]) -> Result<(), ArrayError> {
    for (i, (m, path)) in new.iter().enumerate() {
        let need = DATA_OFFSET + geo.member_bytes(first + i);
        if m.size() < need {
            return Err(ArrayError::BadMember(format!("{path}: too small to join: {} bytes, the array needs {need}", m.size())));
        }
    }
    Ok(())
}

/// Why a change of members (`what`) waits for a write-intent bitmap to
/// go: it has a slot per member, as mdadm asked before a grow.
pub(crate) fn bitmap_in_the_way(what: &str) -> ArrayError {
    ArrayError::Usage(format!("the array has a write-intent bitmap: remove it first (mosaic bitmap -a ARRAY none), {what}, then add it again (mosaic bitmap -a ARRAY internal)"))
}

impl Array {
    /// Refused while a member is out of service: maintenance that
    /// changes the members or the rows needs every copy and code unit;
    /// `before` names it ("growing").
    pub(crate) fn not_degraded(&self, before: &str) -> Result<(), ArrayError> {
        if self.health().states.iter().any(|s| !matches!(s, MemberState::Active)) {
            return Err(ArrayError::Usage(format!("the array is degraded: rebuild it before {before}")));
        }
        Ok(())
    }

    /// Refused while a hot replace waits paused: maintenance that changes
    /// the members or the rows waits for it.
    pub(crate) fn no_paused_hot_replace(&self) -> Result<(), ArrayError> {
        match self.hot_paused() {
            Some(h) => Err(ArrayError::Usage(format!("a hot replace of member {} is paused: finish it first (mosaic replace --hot {})", h.member, h.member))),
            None => Ok(()),
        }
    }

    /// What a grow onto `new` would refuse before it starts, asked ahead
    /// of a change that comes first (a 2-member mirror made raid5, whose
    /// members keep their size): a bitmap, a drive too small.
    pub fn grow_refusal_ahead(&self, new: &[(Arc<dyn Member>, String)]) -> Result<(), ArrayError> {
        if self.superblock().bitmap.is_some() {
            return Err(bitmap_in_the_way("grow"));
        }
        let g = self.geometry();
        joiners_fit(&g, g.members, new)
    }

    /// Open `path` as a new member (created with the members' size when
    /// missing) for [`Array::grow_start`].
    pub fn open_new_member(&self, path: &Path) -> Result<Arc<dyn Member>, ArrayError> {
        self.not_a_member(path, None)?;
        let size = DATA_OFFSET + self.geometry().member_data_bytes();
        Ok(Arc::new(crate::array::open_or_create(path, size)?))
    }

    /// Add `new` members and start the restripe ([`Array::grow_continue`]
    /// does it).  The array must be healthy and not growing already.
    pub fn grow_start(&self, new: Vec<(Arc<dyn Member>, String)>) -> Result<(), ArrayError> {
        self.grow_start_with(new, None)
    }

    /// [`Array::grow_start`], saving the critical section's data in the
    /// file `backup_file` too (an absolute path, as mdadm's
    /// `--backup-file`): required when the old members' reserved bytes
    /// cannot hold a second copy, so one member lost in a crash there
    /// never loses those bytes.  The file is removed when the grow ends.
    pub fn grow_start_with(&self, new: Vec<(Arc<dyn Member>, String)>, backup_file: Option<&Path>) -> Result<(), ArrayError> {
        self.check_writable()?;
        let sh = self.shape();
        if sh.reshape.is_some() {
            return Err(ArrayError::Usage("a grow is in progress already: resume it (mosaic grow -a ARRAY)".into()));
        }
        if new.is_empty() {
            return Err(ArrayError::Usage("grow needs at least one new member".into()));
        }
        self.no_paused_hot_replace()?;
        if self.superblock().bitmap.is_some() {
            // As mdadm asked before it learnt to move a bitmap: the grow's
            // saved copy may take the bytes the bitmap lies in.
            return Err(bitmap_in_the_way("grow"));
        }
        let old = self.geometry();
        self.not_degraded("growing")?;
        let level = grown_level(old.level, new.len())?;
        let n = old.members + new.len();
        let geo = Geometry::new(level, n, old.unit, old.block, old.member_data_bytes())?;
        debug_assert_eq!(geo.stripes, old.stripes);
        joiners_fit(&geo, old.members, &new)?;
        let need = critical(&old, &geo) + backup_rows(&old, &geo);
        if geo.stripes < need + 1 {
            return Err(ArrayError::Usage(format!("the array is too small to grow: it has {} stripes, growing by {} needs {}", geo.stripes, new.len(), need + 1)));
        }
        let backup_file = self.grow_backup_file(&old, &geo, backup_file)?;
        let _g = self.gate.write();
        let paths: Vec<String> = new.iter().map(|(_, p)| p.clone()).collect();
        for (m, _) in new {
            self.push_member(m);
        }
        let made = backup_file.clone();
        let reshape = Reshape { from: old, pos: 0, backup_crc: None, backup_file };
        let r = Shape::of(geo.clone(), Some(&reshape), &[]).and_then(|shape| {
            self.set_shape(shape);
            self.write_superblocks(|s| {
                s.geometry = geo.clone();
                s.member_data_size = geo.member_data_bytes();
                for p in paths {
                    s.member_uuids.push(Uuid::new_v4());
                    s.member_paths.push(p);
                    if !s.member_hosts.is_empty() {
                        s.member_hosts.push(String::new());
                    }
                }
                s.reshape = Some(reshape);
                // Stripe numbers of the old shape mean nothing in the new.
                s.resync_from = 0;
            })
        });
        self.resync_done.store(0, std::sync::atomic::Ordering::Release);
        if let (Err(_), Some(f)) = (&r, made) {
            // Holding nothing yet (the copy is written with its CRC): a
            // resume before then writes it anew.
            let _ = std::fs::remove_file(f);
        }
        r
    }

    /// The backup file a grow from `old` to `new` records: `given`, made
    /// now at the critical section's size, not a member; refused when the
    /// old members' reserved bytes hold no second copy and none is given.
    fn grow_backup_file(&self, old: &Geometry, new: &Geometry, given: Option<&Path>) -> Result<Option<String>, ArrayError> {
        let Some(path) = given else {
            if second_copy_place(old, new).is_some() {
                return Ok(None);
            }
            return Err(ArrayError::Usage(format!(
                "growing from {} to {} members rewrites the first {} bytes in place, and a second copy of them needs {} bytes a member, more than the {} each member reserves: a member lost in a crash then would lose them. Give --backup-file FILE on another device (as mdadm's), or add more members at once",
                old.members,
                new.members,
                critical_bytes(old, new),
                critical_bytes(old, new).div_ceil(old.members as u64),
                DATA_OFFSET - LABEL_AREA
            )));
        };
        if !path.is_absolute() {
            return Err(ArrayError::Usage(format!("the backup file {} must be an absolute path (a resume finds it there)", path.display())));
        }
        if path.exists() {
            return Err(ArrayError::Usage(format!("the backup file {} exists already: give a new path (it is made, used and removed by the grow)", path.display())));
        }
        self.not_a_member(path, None)?;
        mosaic_dev::FileMember::create(path, critical_bytes(old, new)).map_err(|e| ArrayError::Io(format!("the grow's backup file: {e}")))?;
        Ok(Some(path.display().to_string()))
    }

    /// The backup file the superblocks name for the grow in progress.
    fn grow_backup_path(&self) -> Option<String> {
        self.superblock().reshape.and_then(|r| r.backup_file)
    }

    /// The grow in progress: stripes done and the total.
    pub fn grow_pending(&self) -> Option<(u64, u64)> {
        let sh = self.shape();
        sh.reshape.as_ref().map(|(_, pos)| (*pos, sh.layout.planner.geo.stripes))
    }

    /// Restripe until done, resuming where the superblocks say;
    /// `progress(done, total)` in stripes after each step.
    pub fn grow_continue(&self, progress: &dyn Fn(u64, u64), opts: GrowOptions) -> Result<GrowReport, ArrayError> {
        self.check_writable()?;
        let t0 = Instant::now();
        let Some((start, total)) = self.grow_pending() else {
            return Err(ArrayError::Usage("no grow is in progress (mosaic grow -a ARRAY --add DRIVE starts one)".into()));
        };
        let mut written = 0u64;
        let mut paused = false;
        loop {
            if opts.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed)) {
                paused = true;
                break;
            }
            let sh = self.shape();
            let Some((old, pos)) = sh.reshape.clone() else { break };
            if pos >= total {
                let _g = self.gate.write();
                let geo = sh.layout.planner.geo.clone();
                let backup_file = self.grow_backup_path();
                self.set_shape(Shape::of(geo, None, &[])?);
                self.write_superblocks(|s| s.reshape = None)?;
                if let Some(f) = backup_file {
                    // No superblock names it any more.
                    let _ = std::fs::remove_file(f);
                }
                break;
            }
            if let Some(stop) = opts.abort_after_stripes {
                if pos - start >= stop {
                    std::process::abort(); // a kill, for tests: no cleanup
                }
            }
            written += self.grow_step(&sh.layout, &old, pos)?;
            if let Some((done, _)) = self.grow_pending() {
                progress(done, total);
            }
        }
        if !paused {
            progress(total, total);
        }
        let done = self.grow_pending().map_or(total, |(d, _)| d);
        Ok(GrowReport {
            members: self.geometry().members,
            capacity: self.capacity(),
            stripes: done - start,
            bytes_written: written,
            seconds: t0.elapsed().as_secs_f64(),
            resumed: start > 0,
            paused,
        })
    }

    /// One step from `pos`, clients held off; bytes written.
    fn grow_step(&self, new: &Arc<FixedLayout>, old: &Arc<FixedLayout>, pos: u64) -> Result<u64, ArrayError> {
        let (ng, og) = (&new.planner.geo, &old.planner.geo);
        let _g = self.gate.write();
        // Journal records name old rows: none may replay over new ones.
        self.journal_checkpoint()?;
        let c = critical(og, ng).min(ng.stripes);
        let (end, backup) = if pos == 0 {
            (c, true)
        } else {
            let safe = pos * (ng.k - og.k) as u64 / og.k as u64;
            let cap = (STEP_BYTES / ng.stripe_data_bytes()).max(1);
            (pos + safe.min(cap).min(ng.stripes - pos).max(1), false)
        };
        assert!(backup || (end * og.k as u64) <= pos * ng.k as u64, "a grow step would overwrite data not yet restriped");
        let data = if backup { self.grow_backup(ng, og, old)? } else { self.grow_read(old, pos, end)? };
        let at = pos * ng.stripe_data_bytes();
        self.submit_on(new, at, Client::In(&data), data.len() as u64, true)?;
        self.flush()?;
        // The backup file stays named until the grow ends, which removes it.
        let backup_file = self.grow_backup_path();
        let reshape = Reshape { from: og.clone(), pos: end, backup_crc: None, backup_file };
        self.set_shape(Shape::of(ng.clone(), Some(&reshape), &[])?);
        self.write_superblocks(|s| s.reshape = Some(reshape))?;
        Ok(data.len() as u64 / ng.k as u64 * (ng.k + ng.m) as u64)
    }

    /// The logical data of new stripes `from..to`, read through the old
    /// layout (zeros past the old capacity).
    fn grow_read(&self, old: &FixedLayout, from: u64, to: u64) -> Result<Vec<u8>, ArrayError> {
        let per = self.geometry().stripe_data_bytes();
        let (a, b) = (from * per, to * per);
        let mut buf = vec![0u8; (b - a) as usize];
        let cap = old.planner.geo.capacity();
        if a < cap {
            let n = (b.min(cap) - a) as usize;
            self.submit_on(old, a, Client::Out(&mut buf[..n]), n as u64, false)?;
        }
        Ok(buf)
    }

    /// The critical section's data: saved on the new members' last rows
    /// first (or, after a crash in here, restored from there).
    fn grow_backup(&self, ng: &Geometry, og: &Geometry, old: &FixedLayout) -> Result<Vec<u8>, ArrayError> {
        if let Some(crc) = self.superblock().reshape.and_then(|r| r.backup_crc) {
            return self.saved_copy(og, ng, crc);
        }
        let data = self.grow_read(old, 0, critical(og, ng).min(ng.stripes))?;
        let io = |e: std::io::Error| ArrayError::Io(format!("grow: the first stripes' copy: {e}"));
        let new_members: Vec<_> = self.new_members(og, ng)?.into_iter().map(Some).collect();
        write_copy(&new_members, &copy_place(og, ng), &data).map_err(io)?;
        if let Some(place) = second_copy_place(og, ng) {
            // Best effort: the first copy is the one the grow needs; this
            // one covers the loss of a new member later (a piece that did
            // not reach its member fails the copy's CRC when read).
            let old_members: Vec<_> = (0..og.members).map(|i| self.member(i)).collect();
            let _ = write_copy(&old_members, &place, &data);
        }
        if let Some(f) = self.grow_backup_path() {
            // Where the second copy does not fit: written before the CRC
            // is recorded, so a crash before then redoes the section.
            write_file_copy(Path::new(&f), &data).map_err(|e| ArrayError::Io(format!("grow: the backup file {f}: {e}")))?;
        }
        let crc = crc32c::crc32c(&data);
        self.write_superblocks(|s| {
            if let Some(r) = s.reshape.as_mut() {
                r.backup_crc = Some(crc);
            }
        })?;
        Ok(data)
    }

    /// The new members, in order (each holds a piece of the copy).
    fn new_members(&self, og: &Geometry, ng: &Geometry) -> Result<Vec<Arc<dyn Member>>, ArrayError> {
        (og.members..ng.members)
            .map(|i| self.member(i).ok_or_else(|| ArrayError::Io(format!("member {i} (new) is missing: its copy of the first stripes is needed"))))
            .collect()
    }

    /// The old members, in order (each holds a piece of the second copy).
    fn old_members(&self, og: &Geometry) -> Result<Vec<Arc<dyn Member>>, ArrayError> {
        (0..og.members).map(|i| self.member(i).ok_or_else(|| ArrayError::Io(format!("member {i} is missing: its piece of the second copy is needed")))).collect()
    }

    /// The critical section's saved copy, read back and checked against
    /// the CRC-32C the superblocks recorded: the new members' copy, or
    /// else the old members' second copy.
    fn saved_copy(&self, og: &Geometry, ng: &Geometry, crc: u32) -> Result<Vec<u8>, ArrayError> {
        let mut errs = Vec::new();
        let first = self.new_members(og, ng).and_then(|ms| read_copy(&ms, &copy_place(og, ng), crc));
        match first {
            Ok(d) => return Ok(d),
            Err(e) => errs.push(e.to_string()),
        }
        if let Some(place) = second_copy_place(og, ng) {
            match self.old_members(og).and_then(|ms| read_copy(&ms, &place, crc)) {
                Ok(d) => return Ok(d),
                Err(e) => errs.push(e.to_string()),
            }
        }
        if let Some(f) = self.grow_backup_path() {
            match read_file_copy(Path::new(&f), critical_bytes(og, ng), crc) {
                Ok(d) => return Ok(d),
                Err(e) => errs.push(e.to_string()),
            }
        }
        Err(ArrayError::Io(match errs.len() {
            1 => errs.remove(0),
            _ => format!("grow: no copy of the first stripes can be read: {}", errs.join("; and ")),
        }))
    }

    /// At open, after the journal's replay: a grow cut off in its critical
    /// section (the first stripes part rewritten, their copy saved) is
    /// finished before any client reads or writes those stripes, since
    /// neither layout holds them whole.  Read-only, or when the finish
    /// fails, the copy serves their reads instead, and writes there are
    /// refused until the grow goes on.  What happened, for the open's
    /// warnings.
    pub(crate) fn settle_critical_section(&self) -> Option<String> {
        let sh = self.shape();
        let Some((old, 0)) = sh.reshape.clone() else { return None };
        let crc = self.superblock().reshape.and_then(|r| r.backup_crc)?;
        let (og, ng) = (old.planner.geo.clone(), sh.layout.planner.geo.clone());
        let what = format!("a grow from {} to {} members was cut off in its critical section", og.members, ng.members);
        let mut why = None;
        if self.is_writable() {
            match self.grow_step(&sh.layout, &old, 0) {
                Ok(_) => return Some(format!("{what}: its first {} bytes were restored from their saved copy", critical_bytes(&og, &ng))),
                Err(e) => why = Some(e.to_string()),
            }
        }
        let copy = self.saved_copy(&og, &ng, crc).map_err(|e| e.to_string());
        let serves = match (&copy, why) {
            (Ok(_), None) => "its saved copy serves reads of them until a writable open finishes it".to_string(),
            (Ok(_), Some(w)) => format!("finishing it failed ({w}); its saved copy serves reads of them, and writes there are refused"),
            (Err(e), _) => format!("they cannot be read: {e}"),
        };
        let shape = Shape { layout: sh.layout.clone(), reshape: sh.reshape.clone(), copy: Some(Arc::new(copy)) };
        self.set_shape(shape);
        Some(format!("{what}: neither layout holds its first {} bytes whole; {serves}", critical_bytes(&og, &ng)))
    }
}

/// Write `data` as the copy at `place` over `members` (a missing one's
/// piece skipped), durably.
fn write_copy(members: &[Option<Arc<dyn Member>>], place: &CopyPlace, data: &[u8]) -> std::io::Result<()> {
    let mut padded = data.to_vec();
    padded.resize(place.chunk * members.len(), 0);
    for (m, part) in members.iter().zip(padded.chunks(place.chunk)) {
        let Some(m) = m else { continue };
        m.write_at(part, place.off)?;
        m.flush()?;
    }
    Ok(())
}

/// Write `data` as the copy in the backup file at `path`, durably.
fn write_file_copy(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(path)?;
    f.write_all_at(data, 0)?;
    f.sync_all()
}

/// The copy of `len` bytes in the backup file at `path`, if its CRC-32C
/// is `crc`.
fn read_file_copy(path: &Path, len: u64, crc: u32) -> Result<Vec<u8>, ArrayError> {
    use std::os::unix::fs::FileExt;
    let io = |e: std::io::Error| ArrayError::Io(format!("grow: the backup file {}: {e}", path.display()));
    let mut buf = vec![0u8; len as usize];
    std::fs::File::open(path).and_then(|f| f.read_exact_at(&mut buf, 0)).map_err(io)?;
    if crc32c::crc32c(&buf) != crc {
        return Err(ArrayError::Io(format!("grow: the backup file {} is damaged (CRC mismatch)", path.display())));
    }
    Ok(buf)
}

/// The copy at `place` over `members`, if its CRC-32C is `crc`.
fn read_copy(members: &[Arc<dyn Member>], place: &CopyPlace, crc: u32) -> Result<Vec<u8>, ArrayError> {
    let mut buf = vec![0u8; place.chunk * members.len()];
    for (m, part) in members.iter().zip(buf.chunks_mut(place.chunk)) {
        m.read_at(part, place.off).map_err(|e| ArrayError::Io(format!("grow: the first stripes' copy: {e}")))?;
    }
    buf.truncate(place.len);
    if crc32c::crc32c(&buf) != crc {
        return Err(ArrayError::Io("grow: the saved copy of the first stripes is damaged (CRC mismatch)".into()));
    }
    Ok(buf)
}
