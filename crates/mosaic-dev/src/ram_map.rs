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
    /// `file` of `size` bytes; `regular` is false for a block device,
    /// which is never mapped and always flushed (its node may live on
    /// devtmpfs, which reports itself as tmpfs: the device is no RAM).
    pub(crate) fn new(file: File, size: u64, regular: bool) -> FileIo {
        let ram_fs = regular && crate::on_ram_fs(&file);
        let map = if ram_fs { RamMap::new(&file, size) } else { None };
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

    /// The mapping's bytes at `offset` (see [`crate::Member::view`]);
    /// None when not mapped or out of range.
    pub(crate) fn view(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.map.as_ref()?.view(offset, len)
    }

    pub(crate) fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        match &self.map {
            Some(m) => m.write(buf, offset),
            None => self.file.write_all_at(buf, offset),
        }
    }

    /// `len` bytes at `offset` made by `fill` in the mapping itself
    /// ([`crate::Member::write_in_place`]); None when not mapped.  A store
    /// fence after it orders its (streamed) stores before whatever the
    /// caller does next.
    pub(crate) fn write_in_place(&self, offset: u64, len: u64, fill: &mut dyn FnMut(&mut [u8]) -> io::Result<()>) -> Option<io::Result<()>> {
        let m = self.map.as_ref()?;
        if let Err(e) = m.check(offset, len) {
            return Some(Err(e));
        }
        // SAFETY: the range lies inside the mapping (checked), which is
        // writable and shared and lives as long as `self`; the caller
        // owns the range while it writes it, as for any write.
        let dst = unsafe { std::slice::from_raw_parts_mut(m.map.as_mut_ptr().add(offset as usize), len as usize) };
        let r = fill(dst);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a fence has no operands.
        unsafe {
            std::arch::x86_64::_mm_sfence()
        };
        Some(r)
    }

    /// `parts` one after another from `offset`, a log append (see
    /// [`crate::Member::write_parts_at`]): streamed into place around the
    /// CPU cache when mapped, joined and written once otherwise.
    pub(crate) fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        let Some(m) = &self.map else {
            return match parts {
                [one] => self.file.write_all_at(one, offset),
                _ => self.file.write_all_at(&parts.concat(), offset),
            };
        };
        let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
        m.check(offset, len)?;
        // SAFETY: the range lies inside the mapping (checked), which is
        // writable and shared and lives as long as `self`; the parts are
        // the caller's own buffers, not the mapping.
        unsafe { copy_parts_streaming(m.map.as_mut_ptr().add(offset as usize), parts) };
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

    /// The `len` bytes at `offset`, in place.
    fn view(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.check(offset, len as u64).ok()?;
        // SAFETY: the range lies inside the mapping (checked), which lives
        // as long as `self`.  Its bytes may change under the slice only if
        // someone writes the range while it is lent, which the lender's
        // callers rule out ([`crate::Member::view`]), as they do for a
        // copying read racing a write.
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(offset as usize), len) })
    }

    /// Copy `buf` to `offset`.  Large writes (a full stripe's units, a
    /// journal record) go around the CPU cache: nothing reads them back
    /// soon, and the cache lines need not be fetched first.
    fn write(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check(offset, buf.len() as u64)?;
        // SAFETY: as in `read`; the mapping is writable and shared.
        unsafe {
            let dst = self.map.as_mut_ptr().add(offset as usize);
            if buf.len() >= STREAM_MIN {
                copy_parts_streaming(dst, &[buf]);
            } else {
                std::ptr::copy_nonoverlapping(buf.as_ptr(), dst, buf.len());
            }
        }
        Ok(())
    }
}

/// Writes of at least this many bytes use non-temporal stores.
const STREAM_MIN: usize = 32 << 10;

/// Copy the concatenation of `parts` to `dst` with non-temporal
/// (streaming) stores, then fence, so the copy neither reads the
/// destination's lines into the cache nor evicts what the cache holds.
/// Every whole 64-byte line of the destination is streamed (gathered
/// across the parts' boundaries); a partial first or last line gets plain
/// stores.  The fence makes the bytes visible to the next thread that
/// takes whatever lock the caller holds.
///
/// # Safety
/// `dst` must be valid for the parts' total length of writes and overlap
/// none of them.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn copy_parts_streaming(dst: *mut u8, parts: &[&[u8]]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let head = dst.align_offset(64).min(total);
    let end = head + (total - head) / 64 * 64;
    let mut g = Gather { parts, pi: 0, po: 0 };
    g.take(dst, head);
    let mut line = [0u8; 64];
    let mut i = head;
    while i < end {
        let src = g.line(&mut line);
        for k in (0..64).step_by(16) {
            _mm_stream_si128(dst.add(i + k) as *mut __m128i, _mm_loadu_si128(src.add(k) as *const __m128i));
        }
        i += 64;
    }
    g.take(dst.add(i), total - i);
    _mm_sfence();
}

/// Elsewhere: plain copies.
///
/// # Safety
/// As for the x86_64 version.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn copy_parts_streaming(dst: *mut u8, parts: &[&[u8]]) {
    let mut at = 0;
    for p in parts {
        std::ptr::copy_nonoverlapping(p.as_ptr(), dst.add(at), p.len());
        at += p.len();
    }
}

/// Ask the CPU to fetch the lines of `bytes` for writing (x86-64's
/// `prefetchw`), so a write soon after finds them owned instead of
/// waiting on each line's fetch.  A hint: it never faults and changes no
/// byte; elsewhere it does nothing.
pub(crate) fn prefetch_for_write(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
        // SAFETY: a prefetch reads and writes nothing architecturally;
        // the address is inside `bytes` anyway.
        unsafe { _mm_prefetch::<{ _MM_HINT_ET0 }>(line.as_ptr() as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// The bytes of a list of slices, read in order.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Gather<'a> {
    parts: &'a [&'a [u8]],
    /// The part, and the offset in it, of the next byte.
    pi: usize,
    po: usize,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
impl Gather<'_> {
    /// Copy the next `n` bytes to `out`.
    ///
    /// # Safety
    /// `out` valid for `n` bytes of writes; at least `n` bytes left.
    unsafe fn take(&mut self, out: *mut u8, mut n: usize) {
        let mut o = 0;
        while n > 0 {
            self.skip_done();
            let p = self.parts[self.pi];
            let c = (p.len() - self.po).min(n);
            std::ptr::copy_nonoverlapping(p.as_ptr().add(self.po), out.add(o), c);
            (o, n, self.po) = (o + c, n - c, self.po + c);
        }
    }

    /// Step over parts read to their end (and empty ones).
    fn skip_done(&mut self) {
        while self.pi < self.parts.len() && self.po == self.parts[self.pi].len() {
            (self.pi, self.po) = (self.pi + 1, 0);
        }
    }

    /// The next 64 bytes: where they lie when one part holds them all,
    /// else gathered into `line`.
    ///
    /// # Safety
    /// At least 64 bytes left.
    unsafe fn line(&mut self, line: &mut [u8; 64]) -> *const u8 {
        self.skip_done();
        let p = self.parts[self.pi];
        if p.len() - self.po >= 64 {
            let s = p.as_ptr().add(self.po);
            self.po += 64;
            return s;
        }
        self.take(line.as_mut_ptr(), 64);
        line.as_ptr()
    }
}

/// Reserve every block of the file's `size` bytes (no holes left).  A
/// file with no hole before `size` (`SEEK_HOLE` finds the first at the
/// end) is left as it is: `fallocate` over allocated pages still walks
/// them, 144 MiB of a small array's members and journal at every open.
fn allocate(file: &File, size: u64) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(len) = libc::off_t::try_from(size) else { return false };
    if crate::seek(file, 0, libc::SEEK_HOLE).is_ok_and(|hole| hole >= size) {
        return true;
    }
    // SAFETY: plain system call on a descriptor `file` owns.
    unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streaming copies land every byte, whatever the alignment and length
    /// (a head before the first 64-byte boundary, whole lines, a tail) and
    /// however the bytes are split into parts (a line gathered across
    /// parts, empty parts), and touch nothing around them.
    #[test]
    fn streaming_copies_are_exact_at_any_alignment_and_split() {
        let src: Vec<u8> = (0..200_000u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
        for off in [0usize, 1, 7, 15, 16, 33, 64] {
            for len in [0usize, 1, 15, 63, 64, 65, 200, STREAM_MIN + 5, 150_001] {
                for cuts in [vec![], vec![0], vec![len / 2], vec![1, 1, 40.min(len)], vec![len / 3, len / 3 + 17, len]] {
                    let cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(len)).collect();
                    let mut bounds = vec![0];
                    for &c in &cuts {
                        if c >= bounds[bounds.len() - 1] {
                            bounds.push(c);
                        }
                    }
                    bounds.push(len);
                    let parts: Vec<&[u8]> = bounds.windows(2).map(|w| &src[w[0]..w[1].max(w[0])]).collect();
                    let mut dst = vec![0xeeu8; 200_200];
                    // SAFETY: off + len <= 200_200 and the buffers are distinct.
                    unsafe { copy_parts_streaming(dst.as_mut_ptr().add(off), &parts) };
                    assert_eq!(&dst[off..off + len], &src[..len], "offset {off} length {len} cuts {cuts:?}");
                    assert!(dst[..off].iter().chain(&dst[off + len..]).all(|&b| b == 0xee), "offset {off} length {len}: bytes around it");
                }
            }
        }
    }

    /// A large write through a mapped file (streamed) reads back through
    /// the mapping and through the file.
    #[test]
    fn large_mapped_writes_read_back_both_ways() {
        let dir = tempfile::tempdir_in("/dev/shm").expect("a RAM file system at /dev/shm");
        let p = dir.path().join("f");
        let f = File::options().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
        f.set_len(1 << 20).unwrap();
        let io = FileIo::new(f, 1 << 20, true);
        assert!(io.is_mapped());
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        io.write_parts_at(&[&data[..100_000], &data[100_000..]], 4096 + 3).unwrap();
        let mut back = vec![0u8; data.len()];
        io.read_exact_at(&mut back, 4096 + 3).unwrap();
        assert!(back == data);
        std::fs::File::open(&p).unwrap().read_exact_at(&mut back, 4096 + 3).unwrap();
        assert!(back == data, "the file's pages hold it");
        let e = io.write_all_at(&data, (1 << 20) - 10).unwrap_err().to_string();
        assert!(e.contains("beyond 1048576 bytes"), "past the end: an error, not a fault: {e}");
    }
}
