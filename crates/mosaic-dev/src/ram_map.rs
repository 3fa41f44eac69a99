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

use memmap2::{MmapOptions, MmapRaw};

/// A whole file mapped shared, read and written by copies.
pub(crate) struct RamMap {
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
    pub(crate) fn new(file: &File, size: u64) -> Option<RamMap> {
        if size == 0 || usize::try_from(size).is_err() || !allocate(file, size) {
            return None;
        }
        // Page tables filled now, not by a fault at each page's first use.
        let map = MmapOptions::new().populate().map_raw(file).ok()?;
        (map.len() as u64 == size).then_some(RamMap { map })
    }

    /// Copy `buf.len()` bytes at `offset` into `buf`; the caller checked
    /// the range.
    pub(crate) fn read(&self, buf: &mut [u8], offset: u64) {
        assert!(offset as usize + buf.len() <= self.map.len(), "range checked by the caller");
        // SAFETY: the range lies inside the mapping (asserted), which lives
        // as long as `self`; `buf` is a distinct allocation.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr().add(offset as usize), buf.as_mut_ptr(), buf.len()) }
    }

    /// Copy `buf` to `offset`; the caller checked the range.
    pub(crate) fn write(&self, buf: &[u8], offset: u64) {
        assert!(offset as usize + buf.len() <= self.map.len(), "range checked by the caller");
        // SAFETY: as in `read`; the mapping is writable and shared.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), self.map.as_mut_ptr().add(offset as usize), buf.len()) }
    }
}

/// Reserve every block of the file's `size` bytes (no holes left).
fn allocate(file: &File, size: u64) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(len) = libc::off_t::try_from(size) else { return false };
    // SAFETY: plain system call on a descriptor `file` owns.
    unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) == 0 }
}
