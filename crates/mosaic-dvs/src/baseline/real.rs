//! Segment RAID-5 and Sblock RAID-5 on real zoned members: the schemes'
//! programs with bytes, run by the one executor (`mosaic_exec`), for real
//! measurement beside the simulator.
//!
//! ```text
//!   write(offset, data) ─> CachedFrontend::programs (write-through)
//!        ─> [Read ─ Compute ─ Write/Reset …] ─> Executor::run on the members
//!   members: emulated host-managed zoned files (mosaic_dev::zoned), or any
//!            ZonedMember; every sequential zone is reset at creation
//! ```
//!
//! No superblock, no journal, no recovery: the write pointers and page maps
//! live in memory (see the [`super`] module doc), so a runner starts on
//! empty zones and its contents last as long as it does.  The front end is
//! write-through (cache size 0); the counting-only write cache of the
//! simulator keeps no bytes.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use mosaic_core::{DeviceIo, Health, OpCounts};
use mosaic_dev::zoned::ZonedFile;
use mosaic_dev::Member;
use mosaic_exec::{Client, ExecError, Executor};

use super::{Backend, CachedFrontend, SblockRaid5, SegmentRaid5};
use crate::array::ZonedMember;
use crate::DvsError;

/// A zoned member as an executor member (zones named by their first
/// byte), counting the zone resets that completed.
struct Counted {
    dev: Arc<dyn ZonedMember>,
    resets: AtomicU64,
}

impl Member for Counted {
    fn describe(&self) -> String {
        self.dev.describe()
    }
    fn size(&self) -> u64 {
        self.dev.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.dev.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.dev.write_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.dev.flush()
    }
    fn cheap_flush(&self) -> bool {
        self.dev.cheap_flush()
    }
    fn reset_zone(&self, offset: u64) -> io::Result<()> {
        let z = self.dev.zone_size();
        if z == 0 || offset % z != 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("zone reset at byte {offset}: not a zone start (zones of {z} bytes)")));
        }
        self.dev.reset_zone(offset / z)?;
        self.resets.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// A baseline scheme on real zoned members.
pub struct RealBaseline {
    fe: CachedFrontend,
    exec: Executor,
    members: Vec<Arc<Counted>>,
    health: Health,
}

/// The members' common zone geometry: (zone size, zones, conventional).
fn geometry(members: &[Arc<dyn ZonedMember>]) -> Result<(u64, u64, u64), DvsError> {
    let first = members.first().ok_or_else(|| DvsError::Geometry("no members".into()))?;
    let g = (first.zone_size(), first.zone_count(), first.conventional_zones());
    if let Some(d) = members.iter().find(|d| (d.zone_size(), d.zone_count(), d.conventional_zones()) != g) {
        return Err(DvsError::Geometry(format!("{} has another zone geometry than {}: the baselines need identical zoned drives", d.describe(), first.describe())));
    }
    Ok(g)
}

/// Reset every sequential zone of `d` that holds data.
fn empty(d: &dyn ZonedMember) -> Result<(), DvsError> {
    for z in d.conventional_zones()..d.zone_count() {
        if d.write_pointer(z).is_some_and(|wp| wp != z * d.zone_size()) {
            d.reset_zone(z)?;
        }
    }
    Ok(())
}

/// An executor error as the array's error.
fn exec_err(e: ExecError) -> DvsError {
    match e {
        ExecError::Device(f) => {
            let kind = f.first().map_or(io::ErrorKind::Other, |x| x.error.kind());
            DvsError::Io(io::Error::new(kind, ExecError::Device(f).to_string()))
        }
        other => DvsError::Other(other.to_string()),
    }
}

impl RealBaseline {
    /// `scheme` (`segment-raid5` or `sblock-raid5`) on `members`, with
    /// stripe unit `chunk` and logical block `block`, write-through.  Every
    /// sequential zone is reset first (the scheme's maps start empty).
    pub fn create(scheme: &str, members: Vec<Arc<dyn ZonedMember>>, chunk: u64, block: u64) -> Result<RealBaseline, DvsError> {
        let (zone, zones, conv) = geometry(&members)?;
        let n = members.len();
        let b: Box<dyn Backend> = match scheme {
            "segment-raid5" => {
                let s = SegmentRaid5::new(n, chunk, block, zone, zones, conv)?;
                s.check_bytes()?;
                Box::new(s)
            }
            "sblock-raid5" => {
                let s = SblockRaid5::new(n, chunk, block, zone, zones, conv)?;
                s.check_bytes()?;
                Box::new(s)
            }
            other => return Err(DvsError::Geometry(format!("unknown baseline {other:?}: expected segment-raid5 or sblock-raid5"))),
        };
        for d in &members {
            empty(d.as_ref())?;
        }
        let counted: Vec<Arc<Counted>> = members.into_iter().map(|dev| Arc::new(Counted { dev, resets: AtomicU64::new(0) })).collect();
        let exec = Executor::new(counted.iter().map(|c| Some(c.clone() as Arc<dyn Member>)).collect(), 0);
        Ok(RealBaseline { fe: CachedFrontend::new(b, chunk, 0), exec, members: counted, health: Health::all_active(n) })
    }

    /// `scheme` on the emulated zoned drives at `paths` (see [`RealBaseline::create`]).
    pub fn open_files(scheme: &str, paths: &[&Path], chunk: u64, block: u64) -> Result<RealBaseline, DvsError> {
        let devs = paths.iter().map(|p| Ok(Arc::new(ZonedFile::open(p)?) as Arc<dyn ZonedMember>)).collect::<Result<Vec<_>, DvsError>>()?;
        RealBaseline::create(scheme, devs, chunk, block)
    }

    pub fn describe(&self) -> String {
        use mosaic_core::Frontend;
        self.fe.describe()
    }
    pub fn capacity(&self) -> u64 {
        self.fe.b.capacity()
    }
    pub fn block_size(&self) -> u64 {
        self.fe.b.block_size()
    }

    /// Write `data` at `offset` (block-aligned).
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), DvsError> {
        for p in self.fe.programs(true, offset, data.len() as u64, &self.health)? {
            self.exec.run(&p, Client::In(data), None).map_err(exec_err)?;
        }
        Ok(())
    }

    /// Read `buf.len()` bytes at `offset` (block-aligned).
    pub fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), DvsError> {
        for p in self.fe.programs(false, offset, buf.len() as u64, &self.health)? {
            self.exec.run(&p, Client::Out(&mut *buf), None).map_err(exec_err)?;
        }
        Ok(())
    }

    /// Make completed writes (and the emulated drives' write pointers)
    /// durable.  Not part of any request's program, so not counted: the
    /// simulator's twin issues no flushes either.
    pub fn flush(&self) -> Result<(), DvsError> {
        for m in &self.members {
            m.dev.flush()?;
        }
        Ok(())
    }

    /// Reads and writes each member completed since creation (or
    /// [`RealBaseline::reset_io`]).
    pub fn member_io(&self) -> Vec<DeviceIo> {
        self.exec.counters().members
    }

    /// Zone resets each member completed.
    pub fn zone_resets(&self) -> Vec<u64> {
        self.members.iter().map(|m| m.resets.load(Ordering::Relaxed)).collect()
    }

    /// Operations by role, zone resets and stripes by method, as the
    /// simulator's report counts them.
    pub fn ops(&self) -> OpCounts {
        self.exec.counters().ops
    }

    /// Start the counters over.
    pub fn reset_io(&self) {
        self.exec.reset_counters();
        for m in &self.members {
            m.resets.store(0, Ordering::Relaxed);
        }
    }
}
