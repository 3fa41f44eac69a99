//! An emulated host-managed zoned (SMR) drive on a regular file.
//!
//! ```text
//!   file:  [ header 4 KiB | zone 0 | zone 1 | ... | zone n-1 ]
//!   zones: 0 .. c-1 conventional (random writes), c .. n-1 sequential-write-required
//!
//!   header: a mosaic_format frame of kind KIND_ZONED_HEADER at file byte 0,
//!           padded with zeros to the 4 KiB header block:
//!     "MOSF" | ver | kind 0x0400 | seq 0 | len | crc32c
//!     | zone_size u64 | zones u64 | conventional u64
//!     | per zone: write pointer u64, condition u8
//!
//!   device byte 0 = file byte 4096 (the guard and DVS labels rely on it)
//! ```
//!
//! The header block holds at most [`MAX_ZONES`] zones (449: 24 bytes of
//! frame header, 24 of geometry and 9 per zone in 4096 bytes); `create`
//! refuses more with a clear error.
//!
//! As on a real host-managed drive, a write to a sequential zone must start
//! exactly at the zone's write pointer and stay inside the zone, or it fails
//! and changes nothing.  Reads below the write pointer return data; above
//! it, zeros.  Write pointers live in memory and are made durable by
//! `flush` and by every zone-management command (reset, open, close,
//! finish), so after a crash a reopened drive has every flushed write and
//! its pointer — exactly what a host may rely on.
//!
//! A sequential zone's write is checked and the zone marked busy under
//! the drive's lock, its bytes copied without it, and the pointer moved
//! after: a flush, a read or a write to another zone never waits behind a
//! MiB copy.  Until then the zone reads as before the write, and a second
//! write or a zone command on it is refused.
//!
//! [`decode_header`] checks every field of the header (counts, sizes,
//! pointers, with checked arithmetic) before use: a damaged file is a clear
//! error, never a panic (`tests/nopanic.rs`, fuzz target `zoned_header`).

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use mosaic_format::frame::{self, FrameError, KIND_ZONED_HEADER};
use parking_lot::Mutex;

use crate::Member;

/// Bytes of the header block at the start of the file (device byte 0 is
/// file byte `HEADER`).
pub const HEADER: u64 = 4096;
/// Bytes of the header payload before the per-zone rows.
const GEOMETRY: usize = 24;
/// Bytes per zone in the header payload (write pointer, condition).
const ROW: usize = 9;
/// The most zones a header block holds.
pub const MAX_ZONES: u64 = ((HEADER as usize - frame::HEADER_LEN - GEOMETRY) / ROW) as u64;

/// Condition of a zone (ZBC terms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneCond {
    Conventional,
    Empty,
    ImplicitOpen,
    ExplicitOpen,
    Closed,
    Full,
    /// Read-only or offline (real devices only).
    Offline,
}

impl ZoneCond {
    fn code(self) -> u8 {
        self as u8
    }
    fn from_code(c: u8) -> Option<ZoneCond> {
        use ZoneCond::*;
        [Conventional, Empty, ImplicitOpen, ExplicitOpen, Closed, Full, Offline].get(c as usize).copied()
    }
}

/// One row of a zone report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone {
    pub index: u64,
    /// Byte offset of the zone on the device.
    pub start: u64,
    pub len: u64,
    /// Write pointer (byte offset on the device); `start + len` when full.
    pub wp: u64,
    pub cond: ZoneCond,
}

#[derive(Debug)]
struct State {
    wps: Vec<u64>,
    conds: Vec<ZoneCond>,
    /// A write moved a write pointer since the zone table was last
    /// written: the next flush writes it.
    moved: bool,
    /// Zones with a write in flight: its bytes are copied without the
    /// lock (a destage's zone write is MiBs, and a journal's flush, a
    /// read or another zone's write must not wait for it); the write
    /// pointer moves once they are in place.
    busy: Vec<bool>,
}

impl State {
    /// Zones at these pointers and conditions, the table as written, no
    /// write in flight.
    fn new(wps: Vec<u64>, conds: Vec<ZoneCond>) -> State {
        State { busy: vec![false; wps.len()], wps, conds, moved: false }
    }
}

/// A zoned drive emulated on a file.
#[derive(Debug)]
pub struct ZonedFile {
    /// Its I/O: mapped on a RAM file system ([`crate::ram_map`]).
    io: crate::ram_map::FileIo,
    path: PathBuf,
    zone_size: u64,
    zones: u64,
    conventional: u64,
    state: Mutex<State>,
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {msg}", path.display()))
}

/// Payload bytes of the header of `zones` zones: geometry, then 9 bytes
/// per zone; `None` when the frame does not fit the header block.
fn payload_len(zones: u64) -> Option<usize> {
    let len = zones.checked_mul(ROW as u64)?.checked_add(GEOMETRY as u64)?;
    let len = usize::try_from(len).ok()?;
    (frame::HEADER_LEN + len <= HEADER as usize).then_some(len)
}

/// What a zone header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneHeader {
    pub zone_size: u64,
    pub zones: u64,
    pub conventional: u64,
    /// Per zone: write pointer (device byte offset) and condition.
    pub write_pointers: Vec<u64>,
    pub conditions: Vec<ZoneCond>,
}

impl ZoneHeader {
    /// Bytes the file needs for the header block and every zone.
    pub fn file_len(&self) -> Option<u64> {
        self.zone_size.checked_mul(self.zones)?.checked_add(HEADER)
    }
}

/// Decode the header block of an emulated zoned drive, checking every
/// field before use (what [`ZonedFile::open`] reads; public for fuzzing).
pub fn decode_header(h: &[u8]) -> Result<ZoneHeader, String> {
    let f = match frame::decode(h) {
        Ok(Some(f)) if f.kind == KIND_ZONED_HEADER => f,
        Ok(_) | Err(FrameError::BadMagic) => return Err("not an emulated zoned drive (no zone header)".into()),
        Err(FrameError::Truncated { have, .. }) => return Err(format!("zone header truncated ({have} bytes)")),
        Err(FrameError::BadCrc) => return Err("corrupt zone header (checksum mismatch)".into()),
        Err(e) => return Err(format!("corrupt zone header ({e})")),
    };
    let p = &f.payload;
    let u64_at = |o: usize| p.get(o..o + 8).map(|b| u64::from_le_bytes(std::array::from_fn(|i| b[i])));
    let (Some(zone_size), Some(zones), Some(conventional)) = (u64_at(0), u64_at(8), u64_at(16)) else {
        return Err(format!("corrupt zone header (a payload of {} bytes)", p.len()));
    };
    if zone_size == 0 || zones == 0 || conventional > zones || payload_len(zones) != Some(p.len()) {
        return Err("corrupt zone header (impossible geometry)".into());
    }
    let mut hd = ZoneHeader { zone_size, zones, conventional, write_pointers: Vec::new(), conditions: Vec::new() };
    if hd.file_len().is_none() {
        return Err(format!("corrupt zone header ({zones} zones of {zone_size} bytes overflow)"));
    }
    for z in 0..zones {
        // Inside the payload: its length is 24 + 9 * zones bytes.
        let o = GEOMETRY + z as usize * ROW;
        let (Some(wp), Some(&code)) = (u64_at(o), p.get(o + 8)) else { return Err("corrupt zone header (impossible geometry)".into()) };
        let cond = ZoneCond::from_code(code).ok_or_else(|| format!("zone {z}: bad condition code"))?;
        // `file_len` did not overflow, so neither do the zone bounds.
        let start = z * zone_size;
        if wp < start || wp > start + zone_size || z < conventional && cond != ZoneCond::Conventional {
            return Err(format!("zone {z}: corrupt write pointer or condition"));
        }
        hd.write_pointers.push(wp);
        hd.conditions.push(cond);
    }
    Ok(hd)
}

impl ZonedFile {
    /// A write of `len` bytes at `offset` done by `write` (given the
    /// file offset): range and zone rules checked first, the write
    /// pointer of a sequential zone moved after.
    fn write_with(&self, offset: u64, len: u64, write: impl FnOnce(u64) -> io::Result<()>) -> io::Result<()> {
        if offset.checked_add(len).is_none_or(|e| e > self.size()) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: write at {offset}+{len} beyond the drive", self.path.display())));
        }
        let z = offset / self.zone_size;
        if z < self.conventional {
            if offset + len > (z + 1) * self.zone_size && offset + len > self.conventional * self.zone_size {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: write at {offset}+{len} runs from conventional into sequential zones", self.path.display())));
            }
            return write(HEADER + offset);
        }
        self.begin_write(z, offset, len)?;
        let r = write(HEADER + offset);
        self.end_write(z, offset, len, r.is_ok());
        r
    }

    /// Create a zoned drive of `zones` zones of `zone_size` bytes, the
    /// first `conventional` of them conventional.
    pub fn create(path: &Path, zone_size: u64, zones: u64, conventional: u64) -> io::Result<ZonedFile> {
        if zone_size == 0 || zone_size % 4096 != 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("zone size {zone_size} must be a positive multiple of 4096")));
        }
        if zones == 0 || conventional > zones {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{conventional} conventional zones of {zones}")));
        }
        if payload_len(zones).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{zones} zones do not fit the {HEADER}-byte zone header: an emulated zoned drive has at most {MAX_ZONES} zones (use larger zones)"),
            ));
        }
        let Some(len) = zone_size.checked_mul(zones).and_then(|b| b.checked_add(HEADER)) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{zones} zones of {zone_size} bytes are too large")));
        };
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        crate::size_file(&file, path, len)?;
        let io = crate::ram_map::FileIo::new(file, len, true);
        let conds = (0..zones).map(|z| if z < conventional { ZoneCond::Conventional } else { ZoneCond::Empty }).collect();
        let wps = (0..zones).map(|z| z * zone_size).collect();
        let d = ZonedFile { io, path: path.to_path_buf(), zone_size, zones, conventional, state: Mutex::new(State::new(wps, conds)) };
        d.persist(&mut d.state.lock())?;
        Ok(d)
    }

    /// Open an existing zoned drive file.
    pub fn open(path: &Path) -> io::Result<ZonedFile> {
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let mut h = vec![0u8; HEADER as usize];
        file.read_exact_at(&mut h, 0).map_err(|e| bad(path, format!("reading zone header: {e}")))?;
        let hd = decode_header(&h).map_err(|e| bad(path, e))?;
        let (zone_size, zones, conventional) = (hd.zone_size, hd.zones, hd.conventional);
        let size = file.metadata()?.len();
        if hd.file_len().is_none_or(|need| size < need) {
            return Err(bad(path, format!("file of {size} bytes is shorter than its {zones} zones of {zone_size} bytes")));
        }
        let (wps, conds) = (hd.write_pointers, hd.conditions);
        let io = crate::ram_map::FileIo::new(file, size, true);
        Ok(ZonedFile { io, path: path.to_path_buf(), zone_size, zones, conventional, state: Mutex::new(State::new(wps, conds)) })
    }

    pub fn zone_size(&self) -> u64 {
        self.zone_size
    }

    pub fn zone_count(&self) -> u64 {
        self.zones
    }

    /// All zones with their write pointers and conditions.
    pub fn report_zones(&self) -> Vec<Zone> {
        let st = self.state.lock();
        (0..self.zones)
            .map(|z| Zone { index: z, start: z * self.zone_size, len: self.zone_size, wp: st.wps[z as usize], cond: st.conds[z as usize] })
            .collect()
    }

    fn seq_zone(&self, zone: u64, what: &str) -> io::Result<usize> {
        if zone >= self.zones {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: no zone {zone} (the drive has {})", self.path.display(), self.zones)));
        }
        if zone < self.conventional {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: zone {zone} is conventional: {what} is not allowed", self.path.display())));
        }
        Ok(zone as usize)
    }

    /// Rewind a zone's write pointer (its data is gone).
    pub fn reset_zone(&self, zone: u64) -> io::Result<()> {
        let (z, mut st) = self.idle_zone(zone, "reset")?;
        st.wps[z] = zone * self.zone_size;
        st.conds[z] = ZoneCond::Empty;
        self.persist(&mut st)
    }

    /// Open a zone explicitly.
    pub fn open_zone(&self, zone: u64) -> io::Result<()> {
        let (z, mut st) = self.idle_zone(zone, "open")?;
        if st.conds[z] == ZoneCond::Full {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: zone {zone} is full", self.path.display())));
        }
        st.conds[z] = ZoneCond::ExplicitOpen;
        self.persist(&mut st)
    }

    /// Close an open zone (empty zones become empty again).
    pub fn close_zone(&self, zone: u64) -> io::Result<()> {
        let (z, mut st) = self.idle_zone(zone, "close")?;
        st.conds[z] = match st.conds[z] {
            ZoneCond::Full => ZoneCond::Full,
            _ if st.wps[z] == zone * self.zone_size => ZoneCond::Empty,
            _ => ZoneCond::Closed,
        };
        self.persist(&mut st)
    }

    /// Move a zone's write pointer to its end.
    pub fn finish_zone(&self, zone: u64) -> io::Result<()> {
        let (z, mut st) = self.idle_zone(zone, "finish")?;
        st.wps[z] = (zone + 1) * self.zone_size;
        st.conds[z] = ZoneCond::Full;
        self.persist(&mut st)
    }

    pub fn write_pointer(&self, zone: u64) -> Option<u64> {
        (zone >= self.conventional && zone < self.zones).then(|| self.state.lock().wps[zone as usize])
    }

    /// Check a write of `len` bytes at `offset` into sequential zone `z`
    /// against its write pointer and mark the zone busy: the bytes are
    /// then copied without the lock ([`ZonedFile::end_write`] after).
    fn begin_write(&self, z: u64, offset: u64, len: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        let (wp, zend) = (st.wps[z as usize], (z + 1) * self.zone_size);
        let refuse = |msg: String| Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: zone {z}{msg}", self.path.display())));
        if st.busy[z as usize] {
            return refuse(format!(": write at {offset}+{len} while another write to the zone is in flight"));
        }
        if wp == zend {
            return refuse(" is full".into());
        }
        if offset != wp {
            return refuse(format!(": write at {offset} is not at the write pointer {wp}"));
        }
        if offset + len > zend {
            return refuse(format!(": write at {offset}+{len} crosses the zone end {zend}"));
        }
        st.busy[z as usize] = true;
        Ok(())
    }

    /// The write [`ZonedFile::begin_write`] let in is over: when its bytes
    /// are in place (`done`), the write pointer moves past them.
    fn end_write(&self, z: u64, offset: u64, len: u64, done: bool) {
        let mut st = self.state.lock();
        let z = z as usize;
        st.busy[z] = false;
        if !done {
            return;
        }
        debug_assert_eq!(st.wps[z], offset, "nothing moves a busy zone's write pointer");
        let zend = (z as u64 + 1) * self.zone_size;
        st.wps[z] = offset + len;
        st.moved = true;
        st.conds[z] = if offset + len == zend {
            ZoneCond::Full
        } else if st.conds[z] == ZoneCond::ExplicitOpen {
            ZoneCond::ExplicitOpen
        } else {
            ZoneCond::ImplicitOpen
        };
    }

    /// The zone's state under the lock, unless a write to it is in flight
    /// (a zone command then is refused, as a drive's would be mid-write).
    fn idle_zone(&self, zone: u64, what: &str) -> io::Result<(usize, parking_lot::MutexGuard<'_, State>)> {
        let z = self.seq_zone(zone, what)?;
        let st = self.state.lock();
        if st.busy[z] {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: zone {zone}: {what} while a write to it is in flight", self.path.display())));
        }
        Ok((z, st))
    }

    /// Write the zone table and make it durable.
    fn persist(&self, st: &mut State) -> io::Result<()> {
        let mut p = Vec::with_capacity(GEOMETRY + ROW * st.wps.len());
        p.extend_from_slice(&self.zone_size.to_le_bytes());
        p.extend_from_slice(&self.zones.to_le_bytes());
        p.extend_from_slice(&self.conventional.to_le_bytes());
        for (wp, c) in st.wps.iter().zip(&st.conds) {
            p.extend_from_slice(&wp.to_le_bytes());
            p.push(c.code());
        }
        let mut h = frame::encode(KIND_ZONED_HEADER, 0, &p);
        h.resize(HEADER as usize, 0);
        self.io.write_all_at(&h, 0)?;
        self.io.sync_data()?;
        st.moved = false;
        Ok(())
    }
}

impl Member for ZonedFile {
    fn describe(&self) -> String {
        format!("{} (zoned)", self.path.display())
    }
    fn size(&self) -> u64 {
        self.zone_size * self.zones
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64).filter(|&e| e <= self.size());
        if end.is_none() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: read at {offset}+{} beyond the drive", self.path.display(), buf.len())));
        }
        self.io.read_exact_at(buf, HEADER + offset)?;
        // Above a sequential zone's write pointer a drive returns zeros.
        let st = self.state.lock();
        let mut pos = offset;
        while pos < offset + buf.len() as u64 {
            let z = pos / self.zone_size;
            let zend = ((z + 1) * self.zone_size).min(offset + buf.len() as u64);
            if z >= self.conventional {
                let wp = st.wps[z as usize].max(pos);
                if wp < zend {
                    buf[(wp - offset) as usize..(zend - offset) as usize].fill(0);
                }
            }
            pos = zend;
        }
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_with(offset, buf.len() as u64, |at| self.io.write_all_at(buf, at))
    }
    /// Lent only below every write pointer the range crosses (above one
    /// a read returns zeros, which the mapping need not hold).
    fn view(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let end = offset.checked_add(len as u64).filter(|&e| e <= self.size())?;
        let st = self.state.lock();
        let (first, last) = (offset / self.zone_size, end.saturating_sub(1) / self.zone_size);
        let written = (first.max(self.conventional)..=last).all(|z| st.wps[z as usize] >= end.min((z + 1) * self.zone_size));
        drop(st);
        if !written {
            return None;
        }
        self.io.view(HEADER + offset, len)
    }
    /// Streamed into place when mapped, as [`FileIo::write_parts_at`]
    /// does it, under the same zone rules as `write_at`.
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        let len = parts.iter().map(|p| p.len() as u64).sum();
        self.write_with(offset, len, |at| self.io.write_parts_at(parts, at))
    }
    /// Made in the mapping when mapped, under the same zone rules as
    /// `write_at`.
    fn write_in_place(&self, offset: u64, len: u64, fill: &mut dyn FnMut(&mut [u8]) -> io::Result<()>) -> Option<io::Result<()>> {
        if !self.io.is_mapped() {
            return None;
        }
        Some(self.write_with(offset, len, |at| self.io.write_in_place(at, len, fill).unwrap_or_else(|| Err(io::Error::other("not mapped")))))
    }
    /// The data, then the zone table if a write pointer moved since it
    /// was last written (a flush after writes to conventional zones only,
    /// such as a journal's, has no table to write).
    fn flush(&self) -> io::Result<()> {
        self.io.sync_data()?;
        let mut st = self.state.lock();
        if st.moved {
            self.persist(&mut st)?;
        }
        Ok(())
    }
    fn cheap_flush(&self) -> bool {
        self.io.ram_fs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZS: u64 = 64 << 10;

    /// On disk and on the RAM file system (mapped): the same rules.
    #[test]
    fn write_pointer_rules_and_zone_commands() {
        let shm = tempfile::tempdir_in("/dev/shm").expect("a RAM file system at /dev/shm");
        for dir in [tempfile::tempdir().unwrap(), shm] {
            write_pointer_rules_and_zone_commands_in(&dir);
        }
    }

    fn write_pointer_rules_and_zone_commands_in(dir: &tempfile::TempDir) {
        let d = ZonedFile::create(&dir.path().join("z"), ZS, 8, 2).unwrap();
        assert_eq!(d.size(), 8 * ZS);
        assert_eq!(d.io.is_mapped(), dir.path().starts_with("/dev/shm"));
        // Conventional zones take random writes.
        d.write_at(&[1u8; 4096], 8192).unwrap();
        d.write_at(&[2u8; 4096], 0).unwrap();
        // Sequential zone 3: only at the write pointer.
        let z3 = 3 * ZS;
        d.write_at(&[3u8; 4096], z3).unwrap();
        assert_eq!(d.write_pointer(3), Some(z3 + 4096));
        let e = d.write_at(&[3u8; 4096], z3).unwrap_err();
        assert!(e.to_string().contains("not at the write pointer"), "{e}");
        let e = d.write_at(&[3u8; 4096], z3 + 8192).unwrap_err();
        assert!(e.to_string().contains("not at the write pointer"), "{e}");
        let e = d.write_at(&vec![3u8; ZS as usize], z3 + 4096).unwrap_err();
        assert!(e.to_string().contains("crosses the zone end"), "{e}");
        assert_eq!(d.write_pointer(3), Some(z3 + 4096), "a refused write changes nothing");
        // Reads: data below the pointer, zeros above.
        let mut b = vec![9u8; 8192];
        d.read_at(&mut b, z3).unwrap();
        assert!(b[..4096].iter().all(|&x| x == 3) && b[4096..].iter().all(|&x| x == 0));
        // Zone commands.
        assert!(d.reset_zone(0).unwrap_err().to_string().contains("conventional"));
        d.open_zone(4).unwrap();
        assert_eq!(d.report_zones()[4].cond, ZoneCond::ExplicitOpen);
        d.close_zone(4).unwrap();
        assert_eq!(d.report_zones()[4].cond, ZoneCond::Empty);
        d.finish_zone(5).unwrap();
        assert!(d.write_at(&[0u8; 512], 5 * ZS).unwrap_err().to_string().contains("full"));
        d.reset_zone(3).unwrap();
        assert_eq!(d.write_pointer(3), Some(z3));
        d.write_at(&[7u8; 4096], z3).unwrap();
        let r = d.report_zones();
        assert_eq!(r[0].cond, ZoneCond::Conventional);
        assert_eq!(r[3].cond, ZoneCond::ImplicitOpen);
        assert_eq!(r[5].cond, ZoneCond::Full);
        assert!(d.reset_zone(99).is_err());
    }

    /// A write made in place keeps the zone rules of `write_at`: only
    /// when mapped (else None, and the caller copies); off the write
    /// pointer it is refused before its memory is given; a fill that
    /// fails leaves the pointer where it was; one that succeeds moves it,
    /// and a read finds the bytes.
    #[test]
    fn writes_in_place_keep_the_zone_rules() {
        let disk = tempfile::tempdir().unwrap();
        let d = ZonedFile::create(&disk.path().join("z"), ZS, 8, 2).unwrap();
        assert_eq!(Member::write_in_place(&d, 3 * ZS, 4096, &mut |_| Ok(())).is_some(), d.io.is_mapped());
        let shm = tempfile::tempdir_in("/dev/shm").expect("a RAM file system at /dev/shm");
        let d = ZonedFile::create(&shm.path().join("z"), ZS, 8, 2).unwrap();
        let z3 = 3 * ZS;
        let mut given = 0;
        let e = Member::write_in_place(&d, z3 + 4096, 4096, &mut |_| {
            given += 1;
            Ok(())
        })
        .unwrap()
        .unwrap_err();
        assert!(e.to_string().contains("not at the write pointer"), "{e}");
        assert_eq!(given, 0);
        let e = Member::write_in_place(&d, z3, 4096, &mut |_| Err(io::Error::other("a source failed"))).unwrap().unwrap_err();
        assert!(e.to_string().contains("a source failed"));
        assert_eq!(d.write_pointer(3), Some(z3), "a failed fill moves nothing");
        Member::write_in_place(&d, z3, 8192, &mut |m| {
            assert_eq!(m.len(), 8192);
            m.fill(5);
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(d.write_pointer(3), Some(z3 + 8192));
        let mut b = vec![0u8; 8192];
        d.read_at(&mut b, z3).unwrap();
        assert!(b.iter().all(|&x| x == 5));
        assert!(Member::write_in_place(&d, z3 + 8192, ZS, &mut |_| Ok(())).unwrap().unwrap_err().to_string().contains("crosses the zone end"));
    }

    /// A log append (`write_parts_at`, streamed when mapped) keeps the
    /// zone rules of `write_at`: its parts land back to back, a
    /// sequential zone's pointer moves by their total, and a refused
    /// append writes nothing.  On disk and on the RAM file system.
    #[test]
    fn appends_in_parts_keep_the_zone_rules() {
        let shm = tempfile::tempdir_in("/dev/shm").expect("a RAM file system at /dev/shm");
        for dir in [tempfile::tempdir().unwrap(), shm] {
            let d = ZonedFile::create(&dir.path().join("z"), ZS, 8, 2).unwrap();
            let (a, b, c) = (vec![1u8; 100], vec![2u8; 4000], vec![3u8; 5000]);
            let parts: [&[u8]; 3] = [&a, &b, &c];
            let joined = [&a[..], &b, &c].concat();
            // Conventional zone 1, at any offset.
            d.write_parts_at(&parts, ZS + 36).unwrap();
            // Sequential zone 3, at its pointer, twice.
            let z3 = 3 * ZS;
            d.write_parts_at(&parts, z3).unwrap();
            d.write_parts_at(&[&c[..]], z3 + joined.len() as u64).unwrap();
            assert_eq!(d.write_pointer(3), Some(z3 + joined.len() as u64 + 5000));
            for (at, want) in [(ZS + 36, &joined), (z3, &joined)] {
                let mut got = vec![0u8; want.len()];
                d.read_at(&mut got, at).unwrap();
                assert_eq!(&got, want);
            }
            let e = d.write_parts_at(&parts, z3).unwrap_err();
            assert!(e.to_string().contains("not at the write pointer"), "{e}");
            let e = d.write_parts_at(&[&vec![0u8; ZS as usize][..]], 2 * ZS - 512).unwrap_err();
            assert!(e.to_string().contains("runs from conventional into sequential"), "{e}");
            let e = d.write_parts_at(&parts, 8 * ZS - 100).unwrap_err();
            assert!(e.to_string().contains("beyond the drive"), "{e}");
            assert_eq!(d.write_pointer(3), Some(z3 + joined.len() as u64 + 5000), "refused appends change nothing");
        }
    }

    /// A mapped zoned drive lends the bytes a read would copy, and only
    /// those: below every write pointer the range crosses, inside the
    /// drive; a drive on disk lends nothing.
    #[test]
    fn a_mapped_drive_lends_only_written_bytes() {
        let shm = tempfile::tempdir_in("/dev/shm").expect("a RAM file system at /dev/shm");
        let d = ZonedFile::create(&shm.path().join("z"), ZS, 4, 1).unwrap();
        d.write_at(&[3u8; 4096], 100).unwrap();
        d.write_at(&[7u8; 8192], ZS).unwrap();
        d.write_at(&vec![9u8; ZS as usize], 2 * ZS).unwrap();
        let mut copy = vec![0u8; 8192];
        for (at, len) in [(100, 4096), (0, ZS as usize), (ZS, 8192), (ZS + 4096, 4096), (2 * ZS, ZS as usize), (ZS + 8192 - 512, 512)] {
            let v = d.view(at, len).unwrap_or_else(|| panic!("{at}+{len} is written"));
            copy.resize(len, 0);
            d.read_at(&mut copy, at).unwrap();
            assert_eq!(v, &copy[..], "{at}+{len}");
        }
        // Above zone 1's pointer, across it, across into zone 3 (empty),
        // beyond the drive: no lending (a read returns zeros or fails).
        for (at, len) in [(ZS + 8192, 512), (ZS + 4096, 8192), (ZS, ZS as usize + 512), (3 * ZS - 512, 1024), (4 * ZS - 512, 1024), (u64::MAX - 10, 20)] {
            assert!(d.view(at, len).is_none(), "{at}+{len}");
        }
        let disk = tempfile::tempdir().unwrap();
        let d = ZonedFile::create(&disk.path().join("z"), ZS, 4, 1).unwrap();
        d.write_at(&[3u8; 4096], 0).unwrap();
        assert!(d.view(0, 4096).is_none());
    }

    /// On disk and on the RAM file system (mapped): the same rules.
    #[test]
    fn write_pointers_survive_reopen_after_flush() {
        let shm = tempfile::tempdir_in("/dev/shm").expect("a RAM file system at /dev/shm");
        for dir in [tempfile::tempdir().unwrap(), shm] {
            write_pointers_survive_reopen_after_flush_in(&dir);
        }
    }

    fn write_pointers_survive_reopen_after_flush_in(dir: &tempfile::TempDir) {
        let p = dir.path().join("z");
        {
            let d = ZonedFile::create(&p, ZS, 4, 1).unwrap();
            d.write_at(&[5u8; 8192], ZS).unwrap();
            d.flush().unwrap();
            // Not flushed: its pointer advance is not durable.
            d.write_at(&[6u8; 4096], ZS + 8192).unwrap();
        }
        let d = ZonedFile::open(&p).unwrap();
        assert_eq!(d.write_pointer(1), Some(ZS + 8192));
        let mut b = vec![0u8; 8192];
        d.read_at(&mut b, ZS).unwrap();
        assert!(b.iter().all(|&x| x == 5));
        d.write_at(&[8u8; 4096], ZS + 8192).unwrap();
    }

    /// A flush writes the zone table only when a write pointer moved
    /// since it was last written: after writes to conventional zones alone
    /// (a journal's) the table on disk is left as it is (here, damaged on
    /// purpose, to see it untouched); after a sequential write it is
    /// written again.
    #[test]
    fn flush_writes_the_zone_table_only_when_a_pointer_moved() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("z");
        let d = ZonedFile::create(&p, ZS, 4, 1).unwrap();
        d.write_at(&[5u8; 8192], ZS).unwrap();
        d.flush().unwrap();
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(&[0xff], 40).unwrap();
        let damaged = std::fs::read(&p).unwrap()[..HEADER as usize].to_vec();
        d.write_at(&[1u8; 4096], 0).unwrap();
        d.flush().unwrap();
        assert_eq!(std::fs::read(&p).unwrap()[..HEADER as usize], damaged[..], "no pointer moved: the table was not rewritten");
        d.write_at(&[6u8; 4096], ZS + 8192).unwrap();
        d.flush().unwrap();
        drop(d);
        let d = ZonedFile::open(&p).unwrap();
        assert_eq!(d.write_pointer(1), Some(ZS + 12288));
        let mut b = [0u8; 4096];
        d.read_at(&mut b, 0).unwrap();
        assert_eq!(b, [1u8; 4096]);
    }

    /// While a write's bytes are copied (between `begin_write` and
    /// `end_write`) the drive is not locked: a flush completes and writes
    /// a table without the write, the zone reads as before it, another
    /// zone takes writes; a second write or a zone command on the busy
    /// zone is refused.  Only when it ends does the pointer move; a
    /// failed write leaves the zone as it was.
    #[test]
    fn a_write_in_flight_holds_its_zone_not_the_drive() {
        let shm = tempfile::tempdir_in("/dev/shm").expect("a RAM file system at /dev/shm");
        let p = shm.path().join("z");
        let d = ZonedFile::create(&p, ZS, 4, 1).unwrap();
        d.begin_write(1, ZS, 8192).unwrap();
        d.io.write_all_at(&[7u8; 8192], HEADER + ZS).unwrap(); // the copy, in flight
        d.write_at(&[2u8; 4096], 0).unwrap();
        d.write_at(&[3u8; 4096], 2 * ZS).unwrap();
        d.flush().unwrap();
        let table = decode_header(&std::fs::read(&p).unwrap()[..HEADER as usize]).unwrap();
        assert_eq!(table.write_pointers[1..3], [ZS, 2 * ZS + 4096], "the flushed table: zone 2's write, not zone 1's");
        assert_eq!(d.write_pointer(1), Some(ZS), "not moved before the write ends");
        let mut b = [9u8; 4096];
        d.read_at(&mut b, ZS).unwrap();
        assert_eq!(b, [0u8; 4096], "above the pointer: zeros");
        for e in [d.write_at(&[1u8; 4096], ZS).unwrap_err(), d.reset_zone(1).unwrap_err(), d.finish_zone(1).unwrap_err(), d.open_zone(1).unwrap_err(), d.close_zone(1).unwrap_err()] {
            assert!(e.to_string().contains("in flight"), "{e}");
        }
        d.end_write(1, ZS, 8192, true);
        assert_eq!(d.write_pointer(1), Some(ZS + 8192));
        d.read_at(&mut b, ZS).unwrap();
        assert_eq!(b, [7u8; 4096]);
        d.begin_write(1, ZS + 8192, 4096).unwrap();
        d.end_write(1, ZS + 8192, 4096, false);
        assert_eq!(d.write_pointer(1), Some(ZS + 8192), "a failed write moves nothing");
        d.write_at(&[4u8; 4096], ZS + 8192).unwrap();
        d.flush().unwrap();
        drop(d);
        let d = ZonedFile::open(&p).unwrap();
        assert_eq!((d.write_pointer(1), d.write_pointer(2)), (Some(ZS + 12288), Some(2 * ZS + 4096)));
    }

    #[test]
    fn corrupt_or_foreign_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("z");
        std::fs::write(&p, vec![0u8; 8192]).unwrap();
        assert!(ZonedFile::open(&p).unwrap_err().to_string().contains("not an emulated zoned drive"));
        ZonedFile::create(&p, ZS, 4, 1).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[40] ^= 1; // inside the frame's payload
        std::fs::write(&p, &bytes).unwrap();
        assert!(ZonedFile::open(&p).unwrap_err().to_string().contains("checksum"));
        assert!(ZonedFile::create(&p, 1000, 4, 1).is_err());
        assert!(ZonedFile::create(&p, ZS, 4, 5).is_err());
        ZonedFile::create(&p, 4096, MAX_ZONES, 1).unwrap();
        let e = ZonedFile::create(&p, 4096, MAX_ZONES + 1, 1).unwrap_err().to_string();
        assert!(e.contains("at most 449 zones"), "{e}");
    }
}
