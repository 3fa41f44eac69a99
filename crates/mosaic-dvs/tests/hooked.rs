//! A zoned member that runs a test's hooks before each operation it
//! passes on, so a fault-injecting or counting member states only what it
//! changes.  Reads always go through `read_at` (no mapped view is lent),
//! so a read hook sees every read.

use std::io;
use std::sync::Arc;

use mosaic_dvs::array::ZonedMember;

/// What runs before each operation; an error fails it unissued.
pub(crate) trait Hooks: Send + Sync {
    fn read(&self, _offset: u64, _len: usize) -> io::Result<()> {
        Ok(())
    }
    fn write(&self, _offset: u64, _len: usize) -> io::Result<()> {
        Ok(())
    }
    /// A write of parts (a log append); by default what a write runs.
    fn append(&self, offset: u64, len: usize) -> io::Result<()> {
        self.write(offset, len)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    /// After it is done too: `reset_done`.
    fn reset(&self, _zone: u64) -> io::Result<()> {
        Ok(())
    }
    fn reset_done(&self, _zone: u64) {}
}

pub(crate) struct Hooked<H> {
    pub inner: Arc<dyn ZonedMember>,
    pub hooks: H,
}

impl<H: Hooks> Hooked<H> {
    pub fn new(inner: Arc<dyn ZonedMember>, hooks: H) -> Arc<Hooked<H>> {
        Arc::new(Hooked { inner, hooks })
    }
}

impl<H: Hooks> ZonedMember for Hooked<H> {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.hooks.read(offset, buf.len())?;
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.hooks.write(offset, buf.len())?;
        self.inner.write_at(buf, offset)
    }
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        self.hooks.append(offset, parts.iter().map(|p| p.len()).sum())?;
        self.inner.write_parts_at(parts, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.hooks.flush()?;
        self.inner.flush()
    }
    fn reset_zone(&self, zone: u64) -> io::Result<()> {
        self.hooks.reset(zone)?;
        self.inner.reset_zone(zone)?;
        self.hooks.reset_done(zone);
        Ok(())
    }
    fn write_pointer(&self, zone: u64) -> Option<u64> {
        self.inner.write_pointer(zone)
    }
    fn zone_size(&self) -> u64 {
        self.inner.zone_size()
    }
    fn zone_count(&self) -> u64 {
        self.inner.zone_count()
    }
    fn conventional_zones(&self) -> u64 {
        self.inner.conventional_zones()
    }
}
