//! Real zoned block devices (host-managed SMR, ZNS through the block
//! layer), through the kernel's zone ioctls (`linux/blkzoned.h`).
//!
//! [`ZonedBlockDevice::probe`] answers `None` for anything that is not a
//! zoned block device, so callers (and tests) skip cleanly where no such
//! device exists.  The kernel itself enforces write pointers: a write off
//! the pointer fails with an I/O error, which mosaic reports as it is.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};

use crate::zoned::{Zone, ZoneCond};
use crate::Member;

// _IOC(dir, 0x12, nr, size): dir 1 = write, 2 = read, 3 = both.
const BLKREPORTZONE: libc::c_ulong = 0xC010_1282;
const BLKRESETZONE: libc::c_ulong = 0x4010_1283;
const BLKGETZONESZ: libc::c_ulong = 0x8004_1284;
const BLKGETNRZONES: libc::c_ulong = 0x8004_1285;
const BLKOPENZONE: libc::c_ulong = 0x4010_1286;
const BLKCLOSEZONE: libc::c_ulong = 0x4010_1287;
const BLKFINISHZONE: libc::c_ulong = 0x4010_1288;

/// `struct blk_zone` (64 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct BlkZone {
    start: u64,
    len: u64,
    wp: u64,
    ztype: u8,
    cond: u8,
    non_seq: u8,
    reset: u8,
    resv: [u8; 4],
    capacity: u64,
    reserved: [u8; 24],
}

/// `struct blk_zone_report` header, followed by the zones.
#[repr(C)]
struct BlkZoneReport {
    sector: u64,
    nr_zones: u32,
    flags: u32,
}

/// `struct blk_zone_range`.
#[repr(C)]
struct BlkZoneRange {
    sector: u64,
    nr_sectors: u64,
}

const BATCH: usize = 128;

#[repr(C)]
struct ReportBuf {
    head: BlkZoneReport,
    zones: [BlkZone; BATCH],
}

/// A zoned block device.
#[derive(Debug)]
pub struct ZonedBlockDevice {
    file: File,
    path: PathBuf,
    zone_sectors: u64,
    zones: u64,
}

fn ioctl_u32(file: &File, req: libc::c_ulong) -> io::Result<u32> {
    let mut v: u32 = 0;
    // SAFETY: the request writes one u32 through the pointer.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), req as _, &mut v as *mut u32) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

impl ZonedBlockDevice {
    /// Open `path` if it is a zoned block device; `Ok(None)` if it is not.
    pub fn probe(path: &Path) -> io::Result<Option<ZonedBlockDevice>> {
        let meta = std::fs::metadata(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        if !meta.file_type().is_block_device() {
            return Ok(None);
        }
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let zone_sectors = match ioctl_u32(&file, BLKGETZONESZ) {
            Ok(0) | Err(_) => return Ok(None),
            Ok(z) => z as u64,
        };
        let zones = ioctl_u32(&file, BLKGETNRZONES)? as u64;
        Ok(Some(ZonedBlockDevice { file, path: path.to_path_buf(), zone_sectors, zones }))
    }

    pub fn zone_size(&self) -> u64 {
        self.zone_sectors * 512
    }

    pub fn zone_count(&self) -> u64 {
        self.zones
    }

    /// Every zone, from the kernel's zone report.
    pub fn report_zones(&self) -> io::Result<Vec<Zone>> {
        let mut out = Vec::with_capacity(self.zones as usize);
        let mut sector = 0u64;
        while (out.len() as u64) < self.zones {
            let mut buf = ReportBuf { head: BlkZoneReport { sector, nr_zones: BATCH as u32, flags: 0 }, zones: [BlkZone::default(); BATCH] };
            // SAFETY: the buffer holds the header and BATCH zone slots, as nr_zones says.
            let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), BLKREPORTZONE as _, &mut buf as *mut ReportBuf) };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            let n = (buf.head.nr_zones as usize).min(BATCH);
            if n == 0 {
                break;
            }
            for z in &buf.zones[..n] {
                let cond = match z.cond {
                    0x0 => ZoneCond::Conventional,
                    0x1 => ZoneCond::Empty,
                    0x2 => ZoneCond::ImplicitOpen,
                    0x3 => ZoneCond::ExplicitOpen,
                    0x4 => ZoneCond::Closed,
                    0xE => ZoneCond::Full,
                    _ => ZoneCond::Offline,
                };
                out.push(Zone { index: z.start / self.zone_sectors, start: z.start * 512, len: z.len * 512, wp: z.wp * 512, cond });
                sector = z.start + z.len;
            }
        }
        Ok(out)
    }

    fn range_ioctl(&self, req: libc::c_ulong, zone: u64, what: &str) -> io::Result<()> {
        if zone >= self.zones {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: no zone {zone} (the device has {})", self.path.display(), self.zones)));
        }
        let r = BlkZoneRange { sector: zone * self.zone_sectors, nr_sectors: self.zone_sectors };
        // SAFETY: the request reads one blk_zone_range.
        let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), req as _, &r as *const BlkZoneRange) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("{}: {what} zone {zone}: {e}", self.path.display())));
        }
        Ok(())
    }

    pub fn reset_zone(&self, zone: u64) -> io::Result<()> {
        self.range_ioctl(BLKRESETZONE, zone, "reset")
    }
    pub fn open_zone(&self, zone: u64) -> io::Result<()> {
        self.range_ioctl(BLKOPENZONE, zone, "open")
    }
    pub fn close_zone(&self, zone: u64) -> io::Result<()> {
        self.range_ioctl(BLKCLOSEZONE, zone, "close")
    }
    pub fn finish_zone(&self, zone: u64) -> io::Result<()> {
        self.range_ioctl(BLKFINISHZONE, zone, "finish")
    }
}

impl Member for ZonedBlockDevice {
    fn describe(&self) -> String {
        format!("{} (zoned block device)", self.path.display())
    }
    fn size(&self) -> u64 {
        self.zone_size() * self.zones
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_match_the_kernel_abi() {
        assert_eq!(std::mem::size_of::<BlkZone>(), 64);
        assert_eq!(std::mem::size_of::<BlkZoneReport>(), 16);
        assert_eq!(std::mem::size_of::<BlkZoneRange>(), 16);
    }

    #[test]
    fn non_zoned_things_are_skipped_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plain");
        std::fs::write(&p, [0u8; 4096]).unwrap();
        assert!(ZonedBlockDevice::probe(&p).unwrap().is_none());
        assert!(ZonedBlockDevice::probe(Path::new("/dev/null")).unwrap().is_none());
        assert!(ZonedBlockDevice::probe(&dir.path().join("missing")).unwrap_err().to_string().contains("missing"));
    }

    /// Runs against a real zoned device only when one is named (it resets
    /// the device's last zone): MOSAIC_TEST_ZONED_DEV=/dev/...
    #[test]
    fn real_zoned_device_when_present() {
        let Ok(dev) = std::env::var("MOSAIC_TEST_ZONED_DEV") else {
            eprintln!("skipping: set MOSAIC_TEST_ZONED_DEV to a zoned block device to run this");
            return;
        };
        let d = ZonedBlockDevice::probe(Path::new(&dev)).unwrap().expect("not a zoned block device");
        let zones = d.report_zones().unwrap();
        assert_eq!(zones.len() as u64, d.zone_count());
        let last = d.zone_count() - 1;
        d.reset_zone(last).unwrap();
        let start = last * d.zone_size();
        d.write_at(&[0x5a; 4096], start).unwrap();
        assert_eq!(d.report_zones().unwrap()[last as usize].wp, start + 4096);
        assert!(d.write_at(&[0x5a; 4096], start).is_err(), "the kernel refuses writes off the pointer");
        d.reset_zone(last).unwrap();
    }
}
