//! The remapped array of the adaptive layout: an inner fixed array
//! (raid0 as in the paper, or raid4/5/6, rs) whose logical units are
//! re-placed on its drives by `mosaic_remap::RemapPolicy`, every program
//! run by the one executor.
//!
//! ```text
//!   DIR/inner/   a complete mosaic array (member files + journal.img)
//!
//!   inner logical space:
//!   0            128 KiB                 data_offset (1 MiB, rounded up to whole
//!   ├ remap label ┼── (reserved) ─────────┼ periods of full stripes) ...
//!     the one label format (mosaic_format::label), kind "remap": array
//!     UUID = the remapped array's, member UUID = the inner array's, policy
//!     blob = RemapBlob (config, geometry, data offset)
//!                                          [ map region | home units | spare units ]
//!   requests ─> Mutex<RemapPolicy>::submit ─> programs on member 0 =
//!               Shifted(ArrayMember(inner), data_offset) ─> the inner array
//!               plans parity (RMW through its journal), degraded reads
//!   a program fails ─> the policy is dropped and recovered from the map
//! ```
//!
//! **Redundancy, rebuild and scrub** are the inner array's: a failed
//! drive of a raid5 inner array is served degraded, `replace` and
//! `rebuild` work on the inner members, `scrub` checks the inner code
//! (which covers the map region, the units and the spare units alike).
//! Movement pauses while the inner array is degraded.
//!
//! **Identity**: the label names the inner array by UUID; an inner
//! array swapped for another (or a copy) is refused.  The inner array's
//! own superblocks and event counters decide its members' freshness.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::nested::ArrayMember;
use mosaic_array::spec::ArraySpec;
use mosaic_array::{Array, RebuildReport, ScrubReport};
use mosaic_core::{DeviceIo, Frontend, Geometry, Health, MemberState, Program};
use mosaic_dev::Member;
use mosaic_exec::{Client, Executor};
use mosaic_format::label::{Label, LabelError};
use mosaic_remap::{RemapConfig, RemapGeometry, RemapLayout, RemapPolicy, RemapStats};

use crate::nest::{read_label, write_label, Data, Shifted};
use crate::tier::{create_inner, InnerSpec, LABEL_SPACE};
use crate::{IoCounters, Result, Volume, VolumeError, VolumeInfo};

/// The label kind of a remapped array's inner array.
pub const KIND: &str = "remap";
/// Subdirectory of the inner array.
pub const INNER_DIR: &str = "inner";

/// The label's policy blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemapBlob {
    pub config: RemapConfig,
    pub geometry: RemapGeometry,
    /// Where the remapped array starts on the inner array (logical bytes).
    pub data_offset: u64,
}

/// Everything `mosaic create --level remap` decides.
#[derive(Debug, Clone)]
pub struct RemapCreate {
    /// The inner array (e.g. raid5:4), its member size.
    pub inner: InnerSpec,
    /// The inner stripe unit.
    pub unit: u64,
    pub block: u64,
    pub force: bool,
    /// The inner array's journal size; None: no journal.
    pub journal_size: Option<u64>,
    /// The policy (its unit: the stripe unit unless smaller).
    pub config: RemapConfig,
}

/// Whether `spec` names a remapped array: a directory with `inner/`.
pub fn is_remap(spec: &str) -> bool {
    !spec.contains(',') && Path::new(spec.trim()).join(INNER_DIR).is_dir()
}

fn err(e: impl std::fmt::Display) -> VolumeError {
    VolumeError::Usage(format!("remap: {e}"))
}

/// Where the remapped array starts on an inner array of `g`, and the
/// geometry the policy gets: whole periods of stripes after the label.
pub fn placement_geometry(g: &Geometry) -> Result<(RemapGeometry, u64)> {
    let period = RemapGeometry::new(g.clone()).period();
    let chunk = period * g.stripe_data_bytes();
    let skip = LABEL_SPACE.div_ceil(chunk) * chunk;
    let stripes = g.stripes.checked_sub(skip / g.stripe_data_bytes()).filter(|&s| s > 0);
    let stripes = stripes.ok_or_else(|| err(format!("the inner array ({} bytes) has no room after its {skip}-byte label area", g.capacity())))?;
    Ok((RemapGeometry::new(Geometry { stripes, ..g.clone() }), skip))
}

/// A remapped array behind the volume interface.
pub struct RemapVolume {
    dir: PathBuf,
    inner: Arc<Array>,
    exec: Executor,
    /// None only after a failed program whose map could not be read back.
    policy: Mutex<Option<RemapPolicy>>,
    blob: RemapBlob,
    uuid: Uuid,
    created: u64,
    events: u64,
    writable: bool,
    closed: AtomicBool,
    start: Instant,
    idle: crate::IdleClock,
    warnings: Vec<String>,
    /// Logical bytes (fixed by the layout).
    capacity: u64,
}

impl RemapVolume {
    /// Create a remapped array in `dir` (`dir/inner`) and open it for
    /// writing.  Refuses another array's files without `force`.
    pub fn create(dir: &Path, c: &RemapCreate) -> Result<RemapVolume> {
        if !c.force {
            for p in [dir.to_path_buf(), dir.join(INNER_DIR)] {
                crate::guard::check_output(&p, false)?;
            }
        }
        let inner = create_inner(&dir.join(INNER_DIR), &c.inner, c.unit, c.block, c.force, c.journal_size)?;
        let (geo, data_offset) = placement_geometry(&inner.geometry())?;
        let cfg = RemapConfig { block: c.block, ..c.config.clone() };
        let (policy, format) = RemapPolicy::format(cfg.clone(), geo.clone()).map_err(err)?;
        let blob = RemapBlob { config: cfg, geometry: geo, data_offset };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let uuid = Uuid::new_v4();
        // The inner array knows it is one: opened alone it is only read.
        inner.set_owner(mosaic_array::superblock::Owner { role: "the inner array of a remapped array".into(), uuid })?;
        let mut vol = RemapVolume::assemble(dir, inner, uuid, now, 0, blob, policy, true, Vec::new());
        // The empty map first, then the label: a labelled array has a map.
        vol.exec.run(&format, Client::None, None).map_err(err)?;
        vol.inner.flush()?;
        write_label(&vol.inner, &vol.label(1)?)?;
        vol.events = 1;
        Ok(vol)
    }

    /// Open the remapped array in `dir`: the inner array, its label (this
    /// array's, naming this inner array), the map.  A writable open bumps
    /// the label's event counter.
    pub fn open(dir: &Path, writable: bool) -> Result<RemapVolume> {
        if std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            return Err(VolumeError::Usage(format!("no array at {}: no such file or directory", dir.display())));
        }
        let idir = dir.join(INNER_DIR);
        let inner = Array::open(&ArraySpec::Dir(idir.clone()), writable).map_err(|e| VolumeError::Usage(format!("its inner array: {e}")))?;
        let label = label_of(&idir, &inner)?;
        let blob: RemapBlob = label.policy().map_err(|e| err(format!("array {}: {e}", label.array_uuid)))?;
        let (geo, off) = placement_geometry(&inner.geometry())?;
        if geo != blob.geometry || off != blob.data_offset {
            return Err(err(format!("the label of {} describes another inner geometry than the array there has", idir.display())));
        }
        let policy = load_policy(&inner, &blob)?;
        let warnings = Volume::warnings(&inner);
        let mut vol = RemapVolume::assemble(dir, inner, label.array_uuid, label.created, label.events, blob, policy, writable, warnings);
        if writable {
            write_label(&vol.inner, &vol.label(label.events + 1)?)?;
            vol.events = label.events + 1;
        }
        Ok(vol)
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(dir: &Path, inner: Array, uuid: Uuid, created: u64, events: u64, blob: RemapBlob, policy: RemapPolicy, writable: bool, warnings: Vec<String>) -> RemapVolume {
        let inner = Arc::new(inner);
        let name = dir.join(INNER_DIR);
        let name = std::fs::canonicalize(&name).unwrap_or(name).display().to_string();
        let m = Shifted { inner: ArrayMember::new(inner.clone(), name), base: blob.data_offset };
        let exec = Executor::new(vec![Some(Arc::new(m) as Arc<dyn Member>)], 0);
        let idle = crate::IdleClock::new(Duration::from_nanos(policy.idle_after_ns().unwrap_or(100_000_000)));
        let capacity = policy.capacity();
        RemapVolume {
            dir: dir.to_path_buf(),
            inner,
            exec,
            policy: Mutex::new(Some(policy)),
            blob,
            uuid,
            created,
            events,
            writable,
            closed: AtomicBool::new(false),
            start: Instant::now(),
            idle,
            warnings,
            capacity,
        }
    }

    fn label(&self, events: u64) -> Result<Label> {
        let inner = self.inner.info().uuid;
        Ok(Label {
            kind: KIND.into(),
            array_uuid: self.uuid,
            member_uuid: inner,
            member_index: 0,
            members: 1,
            events,
            member_uuids: vec![inner],
            created: self.created,
            policy: serde_json::to_value(&self.blob).map_err(err)?,
            session: Uuid::nil(),
            prev_session: Uuid::nil(),
        })
    }

    /// The array's UUID.
    pub fn uuid(&self) -> Uuid {
        self.uuid
    }

    /// The inner array.
    pub fn inner(&self) -> &Array {
        &self.inner
    }

    /// Look at the policy (None when the map could not be read back).
    pub fn with_policy<R>(&self, f: impl FnOnce(&RemapPolicy) -> R) -> Option<R> {
        self.lock().as_ref().map(f)
    }

    /// The configuration and geometry the array was created with.
    pub fn blob(&self) -> &RemapBlob {
        &self.blob
    }

    /// The policy's layout (None when the map could not be read back).
    pub fn layout(&self) -> Option<RemapLayout> {
        self.lock().as_ref().map(|p| p.layout().clone())
    }

    /// The policy's counters (None when the map could not be read back).
    pub fn stats(&self) -> Option<RemapStats> {
        self.lock().as_ref().map(RemapPolicy::stats)
    }

    /// Units each drive holds now, by drive (inner member) index; 0 for
    /// drives that hold no data.
    pub fn drive_fill(&self) -> Vec<u64> {
        let g = self.lock();
        let mut out = vec![0; self.inner.geometry().members];
        if let Some(p) = g.as_ref() {
            for (c, n) in p.column_fill().into_iter().enumerate() {
                out[p.layout().columns[c]] = n;
            }
        }
        out
    }

    /// The drive (inner member) unit `l` is on now.
    pub fn drive_of(&self, l: u64) -> Option<usize> {
        let g = self.lock();
        let p = g.as_ref()?;
        p.placement(l).map(|(c, _)| p.layout().columns[c])
    }

    /// Queue moves (unit, drive), best first; replaces any earlier queue.
    /// The number queued (units already on their drive are left out).
    pub fn set_target(&self, moves: &[(u64, usize)]) -> Result<usize> {
        self.check_writable("moving units")?;
        let mut g = self.lock();
        let p = g.as_mut().ok_or_else(map_lost)?;
        let lay = p.layout();
        let t = moves
            .iter()
            .map(|&(l, d)| lay.column_of_drive(d).map(|c| (l, c)).ok_or_else(|| err(format!("unit {l}: drive {d} holds no data of this array"))))
            .collect::<Result<Vec<_>>>()?;
        p.set_target(t).map_err(err)
    }

    /// Set the migration budget in bytes per second (0: unlimited), for
    /// this open only.
    pub fn set_rate(&self, bytes_per_s: u64) {
        if let Some(p) = self.lock().as_mut() {
            p.set_budget(bytes_per_s);
        }
    }

    /// One batch of queued moves now, whatever the idle clock: the bytes
    /// moved (0: nothing could go: none queued, paused while degraded,
    /// out of budget, or blocked).
    pub fn step(&self) -> Result<u64> {
        self.check_writable("moving units")?;
        let mut g = self.lock();
        self.step_locked(&mut g)
    }

    fn step_locked(&self, g: &mut Option<RemapPolicy>) -> Result<u64> {
        let pol = g.as_mut().ok_or_else(map_lost)?;
        self.sync_health(pol);
        let before = RemapPolicy::stats(pol).bytes_moved;
        let ps = pol.idle(self.now_ns(), &self.health()).map_err(err)?;
        let moved = RemapPolicy::stats(pol).bytes_moved - before;
        for p in &ps {
            self.run(g, p, Client::None)?;
        }
        Ok(moved)
    }

    fn lock(&self) -> MutexGuard<'_, Option<RemapPolicy>> {
        self.policy.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos().min(u64::MAX as u128) as u64
    }

    /// Member 0 (the inner array) as the policy sees it: failed once the
    /// inner array lost more members than its code tolerates.
    fn health(&self) -> Health {
        let st = if self.inner.columns_out() > self.inner.geometry().m { MemberState::Failed } else { MemberState::Active };
        Health { states: vec![st] }
    }

    fn sync_health(&self, p: &mut RemapPolicy) {
        p.set_degraded(self.degraded());
    }

    /// Whether a member of the inner array is out (movement pauses then).
    pub fn degraded(&self) -> bool {
        self.inner.health().states.iter().any(|s| !matches!(s, MemberState::Active))
    }

    fn refresh_health(&self) {
        if let Some(p) = self.lock().as_mut() {
            self.sync_health(p);
        }
    }

    /// Run one program; when a writing one fails, drop the policy and
    /// recover it from the map.
    fn run(&self, slot: &mut Option<RemapPolicy>, p: &Program, client: Client<'_>) -> Result<()> {
        let Err(e) = self.exec.run(p, client, None) else { return Ok(()) };
        if p.io().all(|(dir, _)| dir == mosaic_core::Dir::Read) {
            return Err(err(format!("read failed: {e}")));
        }
        *slot = None;
        match load_policy(&self.inner, &self.blob) {
            Ok(mut pol) => {
                self.sync_health(&mut pol);
                *slot = Some(pol);
                Err(err(format!("program failed: {e} (the map was read back)")))
            }
            Err(e2) => Err(err(format!("program failed: {e}; the map could not be read back either ({e2}): reopen the array"))),
        }
    }

    fn request(&self, write: bool, off: u64, mut data: Data<'_>) -> Result<()> {
        if write {
            self.check_writable("writing")?;
        }
        self.idle.touch();
        let mut g = self.lock();
        let pol = g.as_mut().ok_or_else(map_lost)?;
        let staged = pol.submit(write, off, data.len(), self.now_ns(), &self.health()).map_err(err)?;
        let r = staged.fg.iter().try_for_each(|p| self.run(&mut g, p, data.client()));
        drop(g);
        self.idle.touch();
        r
    }

    fn check_writable(&self, what: &str) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(VolumeError::Usage(format!("{what} needs the array open for writing")))
        }
    }
}

impl Drop for RemapVolume {
    fn drop(&mut self) {
        if self.writable && !self.closed.load(Ordering::Relaxed) {
            let _ = self.inner.flush();
        }
    }
}

fn map_lost() -> VolumeError {
    err("the map could not be read back after a failed program: reopen the array")
}

/// The remap label of the inner array in `dir`, or why it has none.
fn label_of(dir: &Path, arr: &Array) -> Result<Label> {
    let name = dir.display();
    let l = match read_label(arr)? {
        Ok(l) => l,
        Err(LabelError::None) => return Err(err(format!("{name} holds array {} but no remap label: it is not part of a remapped array", arr.info().uuid))),
        Err(LabelError::Corrupt(why)) => return Err(err(format!("{name}: the remap label is damaged: {why}"))),
    };
    if l.kind != KIND || l.members != 1 {
        return Err(err(format!("{name}: its label is of kind {:?} with {} members, not a remapped array's", l.kind, l.members)));
    }
    if l.member_uuid != arr.info().uuid {
        return Err(err(format!("{name}: the label names inner array {} but the array there is {}: a copy or another array", l.member_uuid, arr.info().uuid)));
    }
    Ok(l)
}

/// Read the map region and recover the policy from it.
fn load_policy(inner: &Array, blob: &RemapBlob) -> Result<RemapPolicy> {
    let n = RemapPolicy::map_bytes(&blob.config, &blob.geometry);
    let end = blob.data_offset.checked_add(n).filter(|&e| n > 0 && e <= inner.capacity());
    if end.is_none() {
        return Err(err("the configuration and geometry give no map region that fits the inner array"));
    }
    let mut meta = vec![0u8; n as usize];
    inner.read(blob.data_offset, &mut meta)?;
    RemapPolicy::recover(blob.config.clone(), blob.geometry.clone(), &meta).map_err(err)
}

impl Volume for RemapVolume {
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn block_size(&self) -> u64 {
        self.blob.config.block
    }
    fn preferred_block(&self) -> u64 {
        self.blob.config.unit.min(64 << 10)
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.request(false, off, Data::Out(buf))
    }
    fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        self.request(true, off, Data::In(data))
    }
    fn flush(&self) -> Result<()> {
        Ok(self.inner.flush()?)
    }
    fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::Relaxed);
        Ok(self.inner.close()?)
    }
    fn info(&self) -> VolumeInfo {
        let mut i = Volume::info(self.inner.as_ref());
        let (stats, lay) = {
            let g = self.lock();
            (g.as_ref().map(RemapPolicy::stats), g.as_ref().map(|p| p.layout().clone()))
        };
        let mut summary = vec![
            ("Remapped".to_string(), format!("{} over the inner {} array in {}", self.uuid, i.level, self.dir.join(INNER_DIR).display())),
            ("Remap unit".to_string(), crate::human(self.blob.config.unit)),
        ];
        if let Some(s) = &stats {
            summary.push(("Units moved".into(), format!("{} of {} off their home ({} queued)", s.moved_units, s.units, s.pending_moves)));
        }
        summary.append(&mut i.summary);
        let inner_io = Volume::io_counters(self.inner.as_ref());
        i.detail = serde_json::json!({ "remap": { "uuid": self.uuid, "events": self.events, "config": self.blob.config, "data_offset": self.blob.data_offset, "layout": lay }, "stats": stats, "inner": i.detail, "inner_io": inner_io });
        VolumeInfo { kind: KIND.into(), level: "remap".into(), uuid: self.uuid.to_string(), capacity: Volume::capacity(self), block_size: self.blob.config.block, summary, ..i }
    }
    /// What the executor ran on its one member, the inner array (what a
    /// replay compares with the simulator, as for the tier); `info`
    /// details the inner drives' own counters.
    fn io_counters(&self) -> IoCounters {
        let c = self.exec.counters();
        let members: Vec<DeviceIo> = c.members.clone();
        IoCounters { device_reads: members.iter().map(|m| m.reads).sum(), device_writes: members.iter().map(|m| m.writes).sum(), ops: Some(c.ops), members }
    }
    fn reset_counters(&self) {
        self.exec.reset_counters();
        Volume::reset_counters(self.inner.as_ref());
    }
    fn auto_failed(&self) -> Vec<(usize, String)> {
        self.inner.auto_failed()
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
    fn fail_member(&self, idx: usize) -> Result<()> {
        let r = Volume::fail_member(self.inner.as_ref(), idx);
        self.refresh_health();
        r
    }
    fn replace(&self, idx: usize, drive: &Path) -> Result<()> {
        self.check_writable("replace")?;
        let r = Volume::replace(self.inner.as_ref(), idx, drive);
        self.refresh_health();
        r
    }
    fn hot_paused(&self) -> Option<(usize, String)> {
        Volume::hot_paused(self.inner.as_ref())
    }
    fn replace_hot(&self, idx: usize, drive: Option<&Path>, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<mosaic_core::HotReport> {
        self.check_writable("replace")?;
        let r = Volume::replace_hot(self.inner.as_ref(), idx, drive, progress, opts);
        self.refresh_health();
        r
    }
    fn rebuild(&self, progress: &dyn Fn(u64, u64), opts: RebuildOptions) -> Result<RebuildReport> {
        self.check_writable("rebuild")?;
        let r = Volume::rebuild(self.inner.as_ref(), progress, opts);
        self.refresh_health();
        r
    }
    fn needs_resync(&self) -> bool {
        self.writable && self.inner.needs_resync()
    }
    fn resync(&self, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport> {
        Volume::resync(self.inner.as_ref(), progress)
    }
    fn interrupt_scrub(&self) {
        self.inner.interrupt_scrub()
    }
    fn readdable(&self, idx: usize, drive: &Path) -> bool {
        self.inner.readdable(idx, drive)
    }
    fn scrub(&self, repair: bool, progress: &dyn Fn(u64, u64)) -> Result<ScrubReport> {
        Volume::scrub(self.inner.as_ref(), repair, progress)
    }
    fn check_spare(&self, drive: &Path) -> Result<()> {
        self.check_writable("add a spare")?;
        Volume::check_spare(self.inner.as_ref(), drive)
    }
    /// Spares are the inner array's: they stand in for its drives.
    fn add_spare(&self, drive: &Path) -> Result<()> {
        self.check_writable("add a spare")?;
        Volume::add_spare(self.inner.as_ref(), drive)
    }
    fn remove_spare(&self, drive: &Path) -> Result<PathBuf> {
        self.check_writable("remove a spare")?;
        Volume::remove_spare(self.inner.as_ref(), drive)
    }
    fn take_spare(&self) -> Result<Option<usize>> {
        let r = Volume::take_spare(self.inner.as_ref());
        self.refresh_health();
        r
    }
    /// One batch of queued moves once no request came for the idle time.
    fn idle_work(&self) -> Result<bool> {
        if !self.writable || !self.idle.due() {
            return Ok(false);
        }
        let mut g = match self.policy.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => return Ok(false),
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
        };
        Ok(self.step_locked(&mut g)? > 0)
    }
    fn set_idle_after(&self, after: Duration) {
        self.idle.set(after);
    }
    fn as_remap(&self) -> Option<&RemapVolume> {
        Some(self)
    }
}
