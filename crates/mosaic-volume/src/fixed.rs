//! Fixed-geometry arrays as volumes: [`mosaic_array::Array`] itself (kind
//! `fixed`) and an array behind the small-write caches ([`CachedVolume`],
//! kind `cached`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::{Array, CacheVolume, RebuildReport, ScrubReport, DATA_OFFSET};
use mosaic_core::{CacheConfig, DeviceIo, HotReport, MemberState};
use mosaic_dev::Member;

use crate::{human, IoCounters, Result, Volume, VolumeError, VolumeInfo, VolumeMember};

/// Why a fixed array's bytes are lost, for `mosaic info`.
const FIXED_LOST: &str = "a member failed while a cache held their code (in a crash, or as a write-through cache volume stopped), or a member could not read them while another was out of their stripe";

/// The common info of a fixed array, with its `ArrayInfo` as the detail.
fn array_info(arr: &Array, kind: &str) -> VolumeInfo {
    let i = arr.info();
    let summary = vec![
        ("array".to_string(), i.uuid.to_string()),
        ("level".into(), format!("{} ({} data + {} code columns)", i.level, i.data_columns, i.code_columns)),
        ("unit".into(), format!("{} ({} bytes), block {} bytes", human(i.stripe_unit), i.stripe_unit, i.block_size)),
        ("capacity".into(), format!("{} ({} bytes), {} stripes", human(i.capacity), i.capacity, i.stripes)),
        ("member".into(), format!("{} data bytes from offset {}", human(i.member_data_size), i.data_offset)),
        ("journal".into(), i.journal.clone().unwrap_or_else(|| "none (write hole open)".into())),
        ("bitmap".into(), match &i.bitmap {
            Some(b) => format!("internal, {} a bit, {} of {} regions dirty", human(b.chunk_bytes), b.dirty_regions, b.regions),
            None => "none".into(),
        }),
        ("spares".into(), if i.spares.is_empty() { "none".into() } else { i.spares.join(", ") }),
        ("state".into(), format!("{:?}{}{}, events {}", i.state, resync_state(&i), if i.degraded { ", degraded" } else { "" }, i.events)),
    ];
    let mut summary = summary;
    if let Some(g) = &i.grow {
        summary.push(("grow".into(), format!("from {} members: {} of {} stripes restriped (resume: mosaic grow -a ARRAY)", g.from_members, g.done_stripes, g.total_stripes)));
    }
    summary.extend(crate::lost_line(&i.lost, FIXED_LOST));
    // A check drive array running degraded leaves the array one failure
    // from losing that column.
    summary.extend(i.member_list.iter().flat_map(|m| m.inner_out.iter().map(|l| ("degraded".to_string(), l.clone()))));
    if let Some(r) = &i.last_scrub {
        summary.push(("last scrub".into(), r.line(mosaic_array::now_secs())));
    }
    VolumeInfo {
        kind: kind.into(),
        level: i.level.clone(),
        uuid: i.uuid.to_string(),
        capacity: i.capacity,
        block_size: i.block_size,
        stripe_unit: i.stripe_unit,
        regions: i.stripes,
        members: i
            .member_list
            .iter()
            .map(|m| VolumeMember {
                index: m.index,
                state: m.state,
                present: m.present,
                path: m.path.clone(),
                uuid: Some(m.uuid.to_string()),
                errors: crate::MemberErrors { read: m.read_errors, write: m.write_errors, checksum: m.checksum_errors, corrected: m.corrected_reads },
                host: m.host.clone(),
                remote: m.remote,
                readd: m.readd,
                replacing: m.replacing.clone(),
                write_mostly: m.write_mostly,
                inner_out: m.inner_out.clone(),
            })
            .collect(),
        degraded: i.degraded,
        journal: i.journal.clone(),
        summary,
        detail: serde_json::to_value(&i).unwrap_or(serde_json::Value::Null),
    }
}

fn counters(arr: &Array) -> IoCounters {
    let (ops, per) = arr.counters();
    let members = per.iter().map(|c| DeviceIo { reads: c.reads, writes: c.writes, read_bytes: c.read_bytes, write_bytes: c.write_bytes }).collect();
    IoCounters { device_reads: ops.device_reads(), device_writes: ops.device_writes(), ops: Some(ops), members }
}

/// What assembly found (devices not used, stale members), then an
/// unclean shutdown.
fn warnings(arr: &Array) -> Vec<String> {
    let mut w = arr.open_warnings().to_vec();
    if let Some(cause) = arr.journal().and_then(|j| j.failed()) {
        w.push(format!(
            "the write-ahead journal failed ({cause}): writes are refused, reads still work; close the array and open it again once the journal device works (the open replays the journal)"
        ));
    }
    if arr.opened_dirty() {
        w.push(if arr.superblock().journal.is_some() {
            "the array was not shut down cleanly; its journal is replayed when it is next opened for writing (until then, reads may show old bytes of writes it holds)".into()
        } else if let out @ [_, ..] = &arr.unsynced_degraded()[..] {
            format!("the array was not shut down cleanly and is degraded (member(s) {out:?} not in service), without a journal: their blocks, read from code, may be wrong where the crash cut writes off (the write hole); copy what you need, then replace the member(s) and run `mosaic scrub --repair` (writable opens need --start-dirty-degraded)")
        } else {
            "the array was not shut down cleanly; code units may disagree with data until `mosaic scrub --repair` (a server runs it by itself); it stays marked unclean until then".into()
        });
    }
    w
}

/// Member `idx` of `arr` may be replaced (it exists, and the array takes
/// writes): the array's geometry.
fn replaceable(arr: &Array, idx: usize) -> Result<mosaic_core::Geometry> {
    let geo = arr.geometry();
    if idx >= geo.members {
        return Err(VolumeError::Usage(format!("no member {idx}: the array has members 0..{}", geo.members - 1)));
    }
    if !arr.is_writable() {
        return Err(VolumeError::Usage("replace needs the array open for writing".into()));
    }
    Ok(geo)
}

/// A missing file at `drive` created at member `idx`'s size (a remote
/// export, an NBD URI, is not): whether it was, so a refused replace
/// removes it again.
fn create_missing(geo: &mosaic_core::Geometry, idx: usize, drive: &Path) -> Result<bool> {
    let created = !drive.exists() && !drive.to_str().is_some_and(mosaic_dev::nbd::is_uri);
    if created {
        let size = DATA_OFFSET + geo.member_bytes(idx);
        mosaic_dev::FileMember::create(drive, size).map_err(|e| VolumeError::Io { what: format!("creating a new member {idx}"), err: e })?;
    }
    Ok(created)
}

/// Open `drives` as new members of `arr` (a missing file created at the
/// members' size) and hand them to `join`; the files made here are
/// removed again when opening or joining fails.
fn with_new_members<T>(arr: &Array, drives: &[std::path::PathBuf], join: impl FnOnce(Vec<(Arc<dyn Member>, String)>) -> std::result::Result<T, mosaic_array::ArrayError>) -> Result<T> {
    let mut new = Vec::new();
    let mut created = Vec::new();
    for d in drives {
        if !d.exists() {
            created.push(d.clone());
        }
        match arr.open_new_member(d) {
            Ok(m) => new.push((m, d.display().to_string())),
            Err(e) => {
                created.iter().for_each(|c| drop(std::fs::remove_file(c)));
                return Err(e.into());
            }
        }
    }
    let r = join(new);
    if r.is_err() {
        created.iter().for_each(|c| drop(std::fs::remove_file(c)));
    }
    Ok(r?)
}

/// Replace failed member `idx` with `drive`, creating a file of the
/// member's size when it does not exist (and removing it again when the
/// replace is refused).
fn replace(arr: &Array, idx: usize, drive: &Path) -> Result<()> {
    let geo = replaceable(arr, idx)?;
    let state = arr.health().states[idx];
    if !matches!(state, MemberState::Failed) {
        return Err(VolumeError::Usage(format!(
            "member {idx} is {}; only a failed member can be replaced (mosaic fail first), or a working one with replace --hot",
            if matches!(state, MemberState::Active) { "active" } else { "already being rebuilt" }
        )));
    }
    let created = create_missing(&geo, idx, drive)?;
    let r = arr.replace(idx, drive);
    if r.is_err() && created {
        let _ = std::fs::remove_file(drive);
    }
    Ok(r?)
}

/// [`Volume::replace_hot`] of a fixed array (`plain`: the volume's own
/// replace by the drive, for when the old drive fails during the copy;
/// `spare`: its [`Volume::take_spare`], for the same onto a spare).
fn replace_hot(arr: &Array, idx: usize, drive: Option<&Path>, progress: &dyn Fn(u64, u64), opts: RebuildOptions, plain: impl FnOnce(&Path) -> Result<()>, spare: impl FnOnce() -> Result<Option<usize>>) -> Result<HotReport> {
    let geo = replaceable(arr, idx)?;
    let Some(drive) = drive else {
        let r = arr.replace_hot_from_spare(idx, progress, opts)?;
        if r.rebuild_needed && spare()? != Some(idx) {
            return Err(VolumeError::Usage(format!("member {idx}'s old drive failed during the hot replace, and no hot spare took its place")));
        }
        return Ok(r);
    };
    let created = create_missing(&geo, idx, drive)?;
    let r = arr.replace_hot(idx, drive, progress, opts);
    if created && r.as_ref().map_or(true, |r| r.stopped && r.paused_at.is_none()) {
        let _ = std::fs::remove_file(drive);
    }
    let r = r?;
    if r.rebuild_needed {
        plain(drive)?;
    }
    Ok(r)
}

impl Volume for Array {
    fn capacity(&self) -> u64 {
        Array::capacity(self)
    }
    fn block_size(&self) -> u64 {
        self.geometry().block
    }
    fn preferred_block(&self) -> u64 {
        // A full stripe's data: writes of it need no reads.
        self.geometry().unit * self.geometry().k as u64
    }
    fn in_memory(&self) -> bool {
        Array::in_memory(self)
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        Ok(Array::read(self, off, buf)?)
    }
    fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        Ok(Array::write(self, off, data)?)
    }
    fn flush(&self) -> Result<()> {
        Ok(Array::flush(self)?)
    }
    fn close(&self) -> Result<()> {
        Ok(Array::close(self)?)
    }
    fn info(&self) -> VolumeInfo {
        array_info(self, "fixed")
    }
    fn io_counters(&self) -> IoCounters {
        counters(self)
    }
    fn reset_counters(&self) {
        Array::reset_counters(self)
    }
    fn auto_failed(&self) -> Vec<(usize, String)> {
        Array::auto_failed(self)
    }
    fn warnings(&self) -> Vec<String> {
        warnings(self)
    }
    fn fail_member(&self, idx: usize) -> Result<()> {
        Ok(Array::fail_member(self, idx)?)
    }
    fn replace(&self, idx: usize, drive: &Path) -> Result<()> {
        replace(self, idx, drive)
    }
    fn replace_hot(&self, idx: usize, drive: Option<&Path>, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport> {
        replace_hot(self, idx, drive, progress, opts, |d| replace(self, idx, d), || Volume::take_spare(self))
    }
    fn set_member_host(&self, idx: usize, host: &str) -> Result<()> {
        Ok(Array::set_member_host(self, idx, host)?)
    }
    fn rebuild(&self, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<RebuildReport> {
        Ok(Array::rebuild(self, progress, opts)?)
    }
    fn scrub(&self, repair: bool, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport> {
        Ok(Array::scrub(self, repair, progress)?)
    }
    fn grow_start(&self, drives: &[std::path::PathBuf], backup_file: Option<&Path>) -> Result<()> {
        with_new_members(self, drives, |new| Array::grow_start_with(self, new, backup_file))
    }
    fn takeover(&self, level: mosaic_core::Level, drives: &[std::path::PathBuf], keep: Option<usize>) -> Result<mosaic_array::takeover::TakeoverReport> {
        let g = self.geometry();
        let keep = keep.or((g.level == mosaic_core::Level::Raid4 && level == mosaic_core::Level::Raid0).then(|| g.members - 1));
        match keep {
            Some(k) if k < g.members && !drives.is_empty() => Err(VolumeError::Usage("a level change adds members or drops them, not both".into())),
            Some(k) if k < g.members => Ok(Array::takeover_dropping(self, level, k)?),
            // mdadm --grow --level=5 --raid-devices=3: the mirror becomes
            // raid5, then the grow onto the new drives starts (the caller
            // runs it: `grow_pending`).
            _ if g.level == mosaic_core::Level::Raid1 && level == mosaic_core::Level::Raid5 && !drives.is_empty() => with_new_members(self, drives, |new| {
                // What the grow would refuse, asked before the level changes.
                self.grow_refusal_ahead(&new)?;
                let rep = Array::takeover(self, level, Vec::new())?;
                Array::grow_start_with(self, new, None).map_err(|e| mosaic_array::ArrayError::Usage(format!("the array is raid5 now (2 members, no data moved), but the grow onto the new drives did not start: {e}")))?;
                Ok(rep)
            }),
            _ => with_new_members(self, drives, |new| Array::takeover(self, level, new)),
        }
    }
    fn grow_pending(&self) -> Option<(u64, u64)> {
        Array::grow_pending(self)
    }
    fn hot_paused(&self) -> Option<(usize, String)> {
        Array::hot_paused(self).map(|h| (h.member, h.path))
    }
    fn needs_resync(&self) -> bool {
        Array::needs_resync(self)
    }
    fn resync(&self, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport> {
        Ok(Array::resync(self, progress)?)
    }
    fn interrupt_scrub(&self) {
        Array::interrupt_scrub(self)
    }
    fn readdable(&self, idx: usize, drive: &Path) -> bool {
        Array::readdable(self, idx, drive)
    }
    fn grow_continue(&self, progress: &dyn Fn(u64, u64), opts: crate::GrowOptions) -> Result<crate::GrowReport> {
        Ok(Array::grow_continue(self, progress, opts)?)
    }
    fn grow_size(&self, size: Option<u64>, progress: &dyn Fn(u64, u64)) -> Result<crate::GrowSizeReport> {
        Ok(Array::grow_size(self, size, progress)?)
    }
    fn set_write_mostly(&self, members: &[usize]) -> Result<()> {
        Ok(Array::set_write_mostly(self, members)?)
    }
    fn check_spare(&self, drive: &Path) -> Result<()> {
        Ok(Array::check_spare(self, drive)?)
    }
    fn add_spare(&self, drive: &Path) -> Result<()> {
        Ok(Array::add_spare(self, drive)?)
    }
    fn remove_spare(&self, drive: &Path) -> Result<PathBuf> {
        Array::remove_spare(self, drive)?;
        Ok(drive.to_path_buf())
    }
    fn take_spare(&self) -> Result<Option<usize>> {
        Ok(Array::take_spare(self)?)
    }
}

/// An array behind the small-write caches of `mosaic_core::cache`.
///
/// Replace, rebuild and scrub destage the caches first (cached partial
/// parity leaves stale code on the members); they are meant for a
/// volume no one else is writing.
pub struct CachedVolume {
    cv: CacheVolume,
    cfg: CacheConfig,
}

impl CachedVolume {
    pub fn new(cv: CacheVolume, cfg: CacheConfig) -> CachedVolume {
        CachedVolume { cv, cfg }
    }

    pub fn inner(&self) -> &CacheVolume {
        &self.cv
    }

    fn sync(&self) -> Result<()> {
        if self.cv.array().is_writable() {
            self.cv.sync()?;
        }
        Ok(())
    }
}

impl Volume for CachedVolume {
    fn capacity(&self) -> u64 {
        self.cv.array().capacity()
    }
    fn block_size(&self) -> u64 {
        Volume::block_size(self.cv.array())
    }
    fn preferred_block(&self) -> u64 {
        Volume::preferred_block(self.cv.array())
    }
    fn in_memory(&self) -> bool {
        self.cv.array().in_memory()
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        Ok(self.cv.read(off, buf)?)
    }
    fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        Ok(self.cv.write(off, data)?)
    }
    fn flush(&self) -> Result<()> {
        Ok(self.cv.flush()?)
    }
    fn destage(&self) -> Result<()> {
        Ok(self.cv.destage()?)
    }
    fn close(&self) -> Result<()> {
        Ok(self.cv.close()?)
    }
    fn info(&self) -> VolumeInfo {
        let mut i = array_info(self.cv.array(), "cached");
        let wb = self.cv.is_write_back();
        i.summary.push((
            "cache".into(),
            format!(
                "{}, {} write cache, {} parity cache, {} old-data buffer, {}",
                self.cfg.policy.name(),
                human(self.cfg.write_cache),
                human(self.cfg.parity_cache),
                human(self.cfg.old_data),
                if wb { "write-back through the journal" } else { "write-through (no journal)" }
            ),
        ));
        if let serde_json::Value::Object(m) = &mut i.detail {
            let cache = serde_json::json!({ "config": self.cfg, "write_back": wb, "stats": self.cv.stats(), "stopped": self.cv.stopped() });
            m.insert("cache".into(), cache);
        }
        i
    }
    fn io_counters(&self) -> IoCounters {
        counters(self.cv.array())
    }
    fn reset_counters(&self) {
        self.cv.array().reset_counters()
    }
    fn auto_failed(&self) -> Vec<(usize, String)> {
        self.cv.array().auto_failed()
    }
    fn warnings(&self) -> Vec<String> {
        let mut w = warnings(self.cv.array());
        // A stopped cache volume fails every request: say why, and how back.
        w.extend(self.cv.live().err().map(|e| e.to_string()));
        w
    }
    fn fail_member(&self, idx: usize) -> Result<()> {
        Ok(self.cv.fail_member(idx)?)
    }
    fn replace(&self, idx: usize, drive: &Path) -> Result<()> {
        self.cv.quiesced(|arr| replace(arr, idx, drive))?
    }
    /// The copy runs beside the cache: its programs take the stripe locks
    /// the copy takes, and reach the new drive through the old one's slot.
    fn replace_hot(&self, idx: usize, drive: Option<&Path>, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<HotReport> {
        self.cv.live()?;
        replace_hot(self.cv.array(), idx, drive, progress, opts, |d| self.replace(idx, d), || self.take_spare())
    }
    fn set_member_host(&self, idx: usize, host: &str) -> Result<()> {
        Ok(self.cv.array().set_member_host(idx, host)?)
    }
    fn hot_paused(&self) -> Option<(usize, String)> {
        self.cv.array().hot_paused().map(|h| (h.member, h.path))
    }
    fn rebuild(&self, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<RebuildReport> {
        self.sync()?;
        Ok(self.cv.array().rebuild(progress, opts)?)
    }
    fn scrub(&self, repair: bool, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport> {
        self.sync()?;
        Ok(self.cv.array().scrub(repair, progress)?)
    }
    fn needs_resync(&self) -> bool {
        self.cv.array().needs_resync()
    }
    fn resync(&self, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport> {
        self.sync()?;
        Ok(self.cv.array().resync(progress)?)
    }
    fn interrupt_scrub(&self) {
        self.cv.array().interrupt_scrub()
    }
    fn readdable(&self, idx: usize, drive: &Path) -> bool {
        self.cv.array().readdable(idx, drive)
    }
    fn check_spare(&self, drive: &Path) -> Result<()> {
        Ok(self.cv.array().check_spare(drive)?)
    }
    fn add_spare(&self, drive: &Path) -> Result<()> {
        Ok(self.cv.array().add_spare(drive)?)
    }
    fn remove_spare(&self, drive: &Path) -> Result<PathBuf> {
        self.cv.array().remove_spare(drive)?;
        Ok(drive.to_path_buf())
    }
    /// As `replace`: the caches are destaged first.
    fn take_spare(&self) -> Result<Option<usize>> {
        let a = self.cv.array();
        if a.spare_paths().is_empty() || !a.health().states.iter().any(|s| matches!(s, MemberState::Failed)) {
            return Ok(None);
        }
        // As `replace`: records from before the failure may name the slot
        // the spare takes, so the journal is emptied first, no write
        // entering in between.
        Ok(self.cv.quiesced(|a| a.take_spare())??)
    }
}

#[cfg(test)]
mod tests {
    use mosaic_array::LostRange;
    use super::*;

    /// A write-back cache volume's unplanned member failure, then a hot
    /// spare takes its place: the journal is empty first (records from
    /// before the failure name the slot; replayed after a crash, they
    /// would write old bytes over the rebuilt ones).
    #[test]
    fn a_spare_takes_a_cached_volumes_member_with_the_journal_emptied() {
        use mosaic_array::CreateOptions;
        use mosaic_core::{CachePolicy, Level};
        use mosaic_dev::{MemMember, Member};
        use std::sync::Arc;
        let size = DATA_OFFSET + (64 << 12);
        let ms: Vec<(Arc<dyn Member>, String)> = (0..4).map(|i| (Arc::new(MemMember::new(format!("m{i}"), size)) as Arc<dyn Member>, format!("m{i}"))).collect();
        let j: Arc<dyn Member> = Arc::new(MemMember::new("j", 8 << 20));
        let o = CreateOptions { level: Level::Raid5, members: Some(4), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
        let arr = Array::create_with_journal(ms, &o, true, Some((j, "j".to_string()))).unwrap();
        arr.add_spare_with(Arc::new(MemMember::new("spare", size)), "spare").unwrap();
        let v = CachedVolume::new(CacheVolume::new(arr, CacheConfig::uniform(CachePolicy::PpcData, 64 << 10)).unwrap(), CacheConfig::uniform(CachePolicy::PpcData, 64 << 10));
        for i in 0..16u64 {
            Volume::write(&v, i * 4096, &[i as u8 + 1; 4096]).unwrap();
        }
        v.inner().array().fail_member(2).unwrap();
        let jr = v.inner().array().journal().unwrap();
        assert!(jr.pending() > 0, "the cached writes' records are in the journal");
        assert_eq!(Volume::take_spare(&v).unwrap(), Some(2));
        assert_eq!(jr.pending(), 0, "the journal was emptied before the spare took the slot");
        assert!(matches!(v.inner().array().health().states[2], MemberState::Rebuilding { .. }));
        let mut b = vec![0u8; 4096];
        Volume::read(&v, 5 * 4096, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 6));
    }

    /// A level change adds members or drops them, never both; a cache
    /// volume changes no level.
    #[test]
    fn a_level_change_adding_and_dropping_members_is_refused() {
        use mosaic_array::CreateOptions;
        use mosaic_core::{CachePolicy, Level};
        use mosaic_dev::{MemMember, Member};
        use std::sync::Arc;
        let size = DATA_OFFSET + (64 << 12);
        let ms: Vec<(Arc<dyn Member>, String)> = (0..3).map(|i| (Arc::new(MemMember::new(format!("m{i}"), size)) as Arc<dyn Member>, format!("m{i}"))).collect();
        let o = CreateOptions { level: Level::Raid1, members: Some(3), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
        let arr = Array::create_on(ms, &o, true).unwrap();
        let e = Volume::takeover(&arr, Level::Raid1, &[PathBuf::from("/nonexistent/x.img")], Some(2)).unwrap_err().to_string();
        assert!(e.contains("adds members or drops them, not both"), "{e}");
        assert_eq!(arr.geometry().members, 3, "nothing changed");
        let ms: Vec<(Arc<dyn Member>, String)> = (0..3).map(|i| (Arc::new(MemMember::new(format!("c{i}"), size)) as Arc<dyn Member>, format!("c{i}"))).collect();
        let arr = Array::create_on(ms, &CreateOptions { level: Level::Raid5, ..o }, true).unwrap();
        let cfg = CacheConfig::uniform(CachePolicy::PpcData, 64 << 10);
        let v = CachedVolume::new(CacheVolume::new(arr, cfg.clone()).unwrap(), cfg);
        let e = Volume::takeover(&v, Level::Raid4, &[], None).unwrap_err().to_string();
        assert!(e.contains("a cached array cannot change its level"), "{e}");
    }

    /// A hot replace under a write-back cache: the cache's destages during
    /// the copy reach the new drive (through the slot the copy lent), and
    /// after a clean close the array opens with it, the old drive passed
    /// over by identity.
    #[test]
    fn a_cached_volume_s_member_is_hot_replaced_under_its_cache() {
        use mosaic_array::CreateOptions;
        use mosaic_core::{CachePolicy, Level};
        use mosaic_dev::{MemMember, Member};
        use std::sync::Arc;
        let size = DATA_OFFSET + (64 << 12);
        let ms: Vec<Arc<dyn Member>> = (0..4).map(|i| Arc::new(MemMember::new(format!("m{i}"), size)) as Arc<dyn Member>).collect();
        let j: Arc<dyn Member> = Arc::new(MemMember::new("j", 8 << 20));
        let o = CreateOptions { level: Level::Raid5, members: Some(4), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
        let arr = Array::create_with_journal(ms.iter().map(|m| (m.clone(), m.describe())).collect(), &o, true, Some((j.clone(), "j".to_string()))).unwrap();
        let cfg = CacheConfig::uniform(CachePolicy::PpcData, 64 << 10);
        let v = CachedVolume::new(CacheVolume::new(arr, cfg).unwrap(), cfg);
        let cap = Volume::capacity(&v);
        let want = std::cell::RefCell::new(vec![0u8; cap as usize]);
        let put = |page: u64, b: u8| {
            Volume::write(&v, page * 4096, &[b; 4096]).unwrap();
            want.borrow_mut()[(page * 4096) as usize..((page + 1) * 4096) as usize].fill(b);
        };
        for p in 0..16 {
            put(p * 5, p as u8 + 1);
        }
        // During the copy, pages of the stripes it passed (3 a stripe):
        // more than the cache holds, so its destages run meanwhile.
        let during = |at: u64, _| {
            put((at - 1) * 3, at as u8);
            put((at - 1) * 3 + 2, at as u8 ^ 0x55);
        };
        let y: Arc<dyn Member> = Arc::new(MemMember::new("y", size));
        let r = v.inner().array().replace_hot_with(2, y.clone(), "y", &during, RebuildOptions::default()).unwrap();
        assert!(!r.stopped && !r.rebuild_needed);
        for p in 0..16 {
            put(p * 3 + 1, p as u8 + 100);
        }
        let want = want.into_inner();
        // Closed clean (the journal empty, nothing to replay): what the
        // new drive holds is what the copy and the mirrored writes left.
        Volume::close(&v).unwrap();
        drop(v);
        let mut devs = ms.clone();
        devs.push(y.clone());
        let arr = Array::open_members_with_journal(devs, true, Some(j)).unwrap();
        assert_eq!(arr.superblock().member_uuids[2], mosaic_array::Superblock::read_from(y.as_ref()).unwrap().member_uuid, "slot 2 is the new drive");
        arr.fail_member(0).unwrap(); // member 2's columns must come from the new drive
        let mut got = vec![0u8; cap as usize];
        arr.read(0, &mut got).unwrap();
        assert!(got == want, "wrong bytes after the hot replace under the cache");
    }

    /// The old drive failing during a hot replace, through the volume: the
    /// new drive (named, or the first spare) goes in by a plain replace and
    /// the rebuild fills it; every byte reads back with another member out.
    #[test]
    fn the_old_drive_failing_puts_the_new_one_in_by_a_plain_replace() {
        use mosaic_array::CreateOptions;
        use mosaic_core::Level;
        use mosaic_dev::{FaultyMember, MemMember, Member};
        use std::sync::Arc;
        let t = tempfile::tempdir().unwrap();
        let size = DATA_OFFSET + (64 << 12);
        for spare in [false, true] {
            let old = Arc::new(FaultyMember::new(Arc::new(MemMember::new("m1", size))));
            let ms: Vec<Arc<dyn Member>> = vec![Arc::new(MemMember::new("m0", size)), old.clone(), Arc::new(MemMember::new("m2", size)), Arc::new(MemMember::new("m3", size))];
            let o = CreateOptions { level: Level::Raid5, members: Some(4), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
            let arr = Array::create_on(ms.iter().map(|m| (m.clone(), m.describe())).collect(), &o, true).unwrap();
            let data: Vec<u8> = (0..Volume::capacity(&arr)).map(|i| (i * 7 / 4096) as u8).collect();
            Volume::write(&arr, 0, &data).unwrap();
            let new = t.path().join(format!("new-{spare}.img"));
            if spare {
                arr.add_spare_with(Arc::new(MemMember::new("s", size)), "mem:s").unwrap();
            }
            let drive = (!spare).then_some(new.as_path());
            let r = Volume::replace_hot(&arr, 1, drive, &|at, _| if at == 20 { old.break_now() }, RebuildOptions::default()).unwrap();
            assert!(r.rebuild_needed, "spare {spare}");
            assert!(matches!(arr.health().states[1], MemberState::Rebuilding { done: 0 }), "spare {spare}");
            let now = arr.superblock().member_paths[1].clone();
            assert_eq!(now, if spare { "mem:s".to_string() } else { new.display().to_string() });
            assert!(arr.spare_paths().is_empty(), "spare {spare}: the spare took the slot");
            Volume::rebuild(&arr, &|_, _| {}, RebuildOptions::default()).unwrap();
            arr.fail_member(0).unwrap();
            let mut got = vec![0u8; data.len()];
            Volume::read(&arr, 0, &mut got).unwrap();
            assert!(got == data, "spare {spare}: wrong bytes");
        }
    }

    /// The old drive failing during a hot replace onto the first spare
    /// while another member is already failed: the spare, given back,
    /// goes to the first failed slot (md's order), not the one being
    /// replaced, and the hot replace says so; raid6 keeps every byte, and
    /// the spare's slot rebuilds.
    #[test]
    fn a_spare_taken_by_an_earlier_failure_is_said() {
        use mosaic_array::CreateOptions;
        use mosaic_core::Level;
        use mosaic_dev::{FaultyMember, MemMember, Member};
        use std::sync::Arc;
        let size = DATA_OFFSET + (64 << 12);
        let old = Arc::new(FaultyMember::new(Arc::new(MemMember::new("m2", size))));
        let ms: Vec<Arc<dyn Member>> = vec![Arc::new(MemMember::new("m0", size)), Arc::new(MemMember::new("m1", size)), old.clone(), Arc::new(MemMember::new("m3", size)), Arc::new(MemMember::new("m4", size))];
        let o = CreateOptions { level: Level::Raid6, members: Some(5), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
        let arr = Array::create_on(ms.iter().map(|m| (m.clone(), m.describe())).collect(), &o, true).unwrap();
        let data: Vec<u8> = (0..Volume::capacity(&arr)).map(|i| (i * 5 / 4096) as u8).collect();
        Volume::write(&arr, 0, &data).unwrap();
        arr.fail_member(0).unwrap();
        arr.add_spare_with(Arc::new(MemMember::new("s", size)), "mem:s").unwrap();
        let e = Volume::replace_hot(&arr, 2, None, &|at, _| if at == 20 { old.break_now() }, RebuildOptions::default()).unwrap_err().to_string();
        assert!(e.contains("member 2's old drive failed during the hot replace, and no hot spare took its place"), "{e}");
        assert_eq!(arr.superblock().member_paths[0], "mem:s");
        assert!(matches!(arr.health().states[0], MemberState::Rebuilding { .. }));
        assert_eq!(arr.health().states[2], MemberState::Failed);
        assert!(arr.spare_paths().is_empty());
        let mut got = vec![0u8; data.len()];
        Volume::read(&arr, 0, &mut got).unwrap();
        assert!(got == data, "wrong bytes with two members out");
        Volume::rebuild(&arr, &|_, _| {}, RebuildOptions::default()).unwrap();
        assert_eq!(arr.health().states[0], MemberState::Active);
        arr.fail_member(1).unwrap();
        Volume::read(&arr, 0, &mut got).unwrap();
        assert!(got == data, "wrong bytes after the spare's rebuild");
    }

    /// `mosaic info`'s lost line: absent when nothing is lost; else the
    /// total and the ranges, the first eight listed and the count after.
    #[test]
    fn info_names_lost_ranges() {
        assert_eq!(crate::lost_line(&[], FIXED_LOST), None);
        let two = [LostRange { offset: 4096, len: 4096 }, LostRange { offset: 65536, len: 8192 }];
        let (key, line) = crate::lost_line(&two, FIXED_LOST).unwrap();
        assert_eq!(key, "lost");
        assert!(line.starts_with(&format!("{} in bytes 4096..8192, 65536..73728: a member failed while a cache held their code", human(12288))), "{line}");
        assert!(line.ends_with("reads fail until they are written again"), "{line}");
        let many: Vec<LostRange> = (0..10).map(|i| LostRange { offset: i * 8192, len: 4096 }).collect();
        let (_, line) = crate::lost_line(&many, FIXED_LOST).unwrap();
        assert!(line.contains("57344..61440, ... 10 ranges in all:"), "{line}");
        assert!(!line.contains("65536..69632"), "{line}");
    }
}

/// The state line's word on a resync: needed, and from where.
fn resync_state(i: &mosaic_array::ArrayInfo) -> String {
    match (i.resync_needed, i.resync_from) {
        (false, _) => String::new(),
        (true, 0) => " (resync needed)".into(),
        (true, from) => format!(" (resync needed from stripe {from} of {}: a resync verified those before)", i.stripes),
    }
}
