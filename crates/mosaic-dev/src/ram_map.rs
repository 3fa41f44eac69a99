//! Member files on a RAM file system, read and written through a mapping.
//!
//! A file on tmpfs is already memory: `pread`/`pwrite` of it are a system
//! call, a page-cache lookup and a copy.  A raid5 small write is five of
//! them (two reads, two writes and the journal record), and under perf
//! those lookups and the system calls around them were more than half of
//! `mosaic serve`'s time.  Mapped, each is one copy.
//!
//! ```text
//!   FileMember on tmpfs ── open: fallocate the whole file ── mmap(MAP_SHARED | MAP_POPULATE)
//!        read_at / write_at ── range check ── memcpy to / from the mapping
//!        flush              ── nothing (tmpfs has nothing to write back)
//! ```
//!
//! Safety of the mapping:
//! - The file is allocated in full before it is mapped, so a store never
//!   meets a hole on a full file system (which would raise SIGBUS, not
//!   return ENOSPC).  When allocation fails the member keeps `pread` and
//!   `pwrite`.
//! - Other processes that read or write the file see the same pages (the
//!   page cache is the mapping), so `examine` of a served array agrees.
//! - The file's size is fixed for the member's life; truncating a member
//!   file under a running array is refused by nothing, and would end the
//!   process with SIGBUS on the next access beyond the new end, as it would
//!   corrupt the array in any case.
//! - Concurrent accesses to one range are as with `pread`/`pwrite`: the
//!   array never writes a range while another request reads or writes it
//!   (stripe locks), and a racing read may see a mix, as the kernel allows.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use memmap2::{MmapOptions, MmapRaw};

/// A file read and written at offsets: through a mapping when it is a
/// regular file on a RAM file system, by system calls otherwise.  Every
/// kind of file-backed drive (a plain member, an emulated zoned drive)
/// does its I/O through one of these.
#[derive(Debug)]
pub(crate) struct FileIo {
    file: File,
    /// On tmpfs or ramfs (looked up once, at open).
    ram_fs: bool,
    map: Option<RamMap>,
}

impl FileIo {
    /// `file` of `size` bytes; `mappable` is false for a block device.
    pub(crate) fn new(file: File, size: u64, mappable: bool) -> FileIo {
        let ram_fs = crate::on_ram_fs(&file);
        let map = if ram_fs && mappable { RamMap::new(&file, size) } else { None };
        FileIo { file, ram_fs, map }
    }

    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// On a RAM file system: a flush has nothing to write back.
    pub(crate) fn ram_fs(&self) -> bool {
        self.ram_fs
    }

    pub(crate) fn is_mapped(&self) -> bool {
        self.map.is_some()
    }

    pub(crate) fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match &self.map {
            Some(m) => m.read(buf, offset),
            None => self.file.read_exact_at(buf, offset),
        }
    }

    pub(crate) fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        match &self.map {
            Some(m) => m.write(buf, offset),
            None => self.file.write_all_at(buf, offset),
        }
    }

    /// `parts` one after another from `offset`: copied in place when
    /// mapped, joined and written once otherwise.
    pub(crate) fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        let Some(m) = &self.map else { return self.file.write_all_at(&parts.concat(), offset) };
        let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
        m.check(offset, len)?;
        let mut at = offset;
        for p in parts {
            m.write(p, at)?;
            at += p.len() as u64;
        }
        Ok(())
    }

    /// fdatasync, except on a RAM file system (nothing to write back).
    pub(crate) fn sync_data(&self) -> io::Result<()> {
        if self.ram_fs {
            return Ok(());
        }
        self.file.sync_data()
    }
}

/// A whole file mapped shared, read and written by copies.
struct RamMap {
    map: MmapRaw,
}

impl std::fmt::Debug for RamMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RamMap({} bytes)", self.map.len())
    }
}

impl RamMap {
    /// Allocate all `size` bytes of `file` (on a RAM file system) and map
    /// them; `None` when either fails (the caller keeps system calls).
    fn new(file: &File, size: u64) -> Option<RamMap> {
        if size == 0 || usize::try_from(size).is_err() || !allocate(file, size) {
            return None;
        }
        // Page tables filled now, not by a fault at each page's first use.
        let map = MmapOptions::new().populate().map_raw(file).ok()?;
        (map.len() as u64 == size).then_some(RamMap { map })
    }

    /// An error unless `offset..offset+len` lies inside the mapping.
    fn check(&self, offset: u64, len: u64) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.map.len() as u64 => Ok(()),
            _ => Err(io::Error::new(io::ErrorKind::InvalidInput, format!("mapped access at {offset}+{len} beyond {} bytes", self.map.len()))),
        }
    }

    /// Copy `buf.len()` bytes at `offset` into `buf`.
    fn read(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check(offset, buf.len() as u64)?;
        // SAFETY: the range lies inside the mapping (checked), which lives
        // as long as `self`; `buf` is a distinct allocation.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr().add(offset as usize), buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// Copy `buf` to `offset`.
    fn write(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check(offset, buf.len() as u64)?;
        // SAFETY: as in `read`; the mapping is writable and shared.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), self.map.as_mut_ptr().add(offset as usize), buf.len()) };
        Ok(())
    }
}

/// Reserve every block of the file's `size` bytes (no holes left).
fn allocate(file: &File, size: u64) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(len) = libc::off_t::try_from(size) else { return false };
    // SAFETY: plain system call on a descriptor `file` owns.
    unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) == 0 }
}
