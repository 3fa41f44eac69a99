//! mosaic-dev: the devices an array's members live on.
//!
//! A [`Member`] is a fixed-size byte device with positional reads and writes
//! and a flush that makes completed writes durable.  Backends:
//!
//! * [`FileMember`]: a regular file or a block device, positional I/O
//!   (`pread`/`pwrite`), `fdatasync` on flush;
//! * [`MemMember`]: RAM, for tests and benchmarks;
//! * [`FaultyMember`]: wraps another member and fails I/O on command, so
//!   tests can exercise the automatic fail-on-error path;
//! * [`zoned::ZonedFile`]: an emulated host-managed zoned (SMR) drive on a
//!   file, with write pointers enforced and kept durably;
//! * [`zoned_blk::ZonedBlockDevice`]: a real zoned block device through the
//!   kernel's zone ioctls, where one exists.

pub mod nbd;
mod ram_map;
pub mod testing;
pub mod zoned;
pub mod zoned_blk;

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

/// Copy `src` into `dst` (same length) around the CPU cache: whole
/// 64-byte lines with non-temporal stores, then a fence.  For bytes
/// nothing reads back soon.
pub fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_streaming: lengths differ");
    // SAFETY: `dst` is valid for its length of writes, which is the
    // source's, and a `&mut` cannot overlap `src`.
    unsafe { ram_map::copy_parts_streaming(dst.as_mut_ptr(), &[src]) }
}

/// The first error of the new drive a hot replace mirrors onto (either
/// kind of array's twin): from then on it takes nothing more, the old
/// drive having taken each operation, and the copy ends saying why.
/// Every mirrored write asks a flag, not a lock.
#[derive(Debug, Default)]
pub struct FirstError {
    failed: AtomicBool,
    why: parking_lot::Mutex<Option<String>>,
}

impl FirstError {
    /// Whether an operation failed.
    pub fn is_set(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The first error, as "DEVICE: error".
    pub fn get(&self) -> Option<String> {
        self.why.lock().clone()
    }

    /// Run `op` unless an operation failed before; keep its error, named
    /// by `device`.
    pub fn run(&self, device: impl FnOnce() -> String, op: impl FnOnce() -> io::Result<()>) {
        if self.is_set() {
            return;
        }
        if let Err(e) = op() {
            self.why.lock().get_or_insert_with(|| format!("{}: {e}", device()));
            self.failed.store(true, Ordering::Release);
        }
    }
}

/// A member device.
pub trait Member: Send + Sync {
    /// Where it lives, for messages.
    fn describe(&self) -> String;
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Read exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Write all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Write `parts` one after another from `offset`, as one write: a log
    /// append (a journal record, or any metadata write of a program: the
    /// executor sends those here), which nothing reads back before a
    /// replay or an open, or a merged member write whose pieces lie apart in memory
    /// (several stripes' units of one large request).  The default joins
    /// them and writes once; memory (RAM, a mapped file) streams them
    /// into place around the CPU cache, so a record neither reads its
    /// lines first nor pushes out what the array's requests use (a
    /// journal ring touches tens of MiB between checkpoints).
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        match parts {
            [one] => self.write_at(one, offset),
            _ => self.write_at(&parts.concat(), offset),
        }
    }
    /// Make completed writes durable.
    fn flush(&self) -> io::Result<()>;
    /// The first byte at or after `offset` that may read as other than
    /// zero: a sparse file's holes are skipped (`SEEK_DATA`), and the
    /// answer is [`Member::size`] when only holes follow.  For a reader
    /// that looks for records, which are never all zeros (a journal's scan
    /// past its last record).  The default, for devices that cannot tell,
    /// is `offset` itself.
    fn next_data(&self, offset: u64) -> io::Result<u64> {
        Ok(offset)
    }
    /// The `len` bytes at `offset` where the member keeps them in memory
    /// (a mapped file), lent to a caller that reads them in place of a
    /// copy ([`Member::read_at`]): only while nothing writes that range,
    /// which the caller ensures as for any read (a program's own writes,
    /// stripe locks, a zoned drive's append-only zones).  None where a
    /// read would be more than a copy: not in memory, beyond the device,
    /// above a zone's write pointer.  The default lends nothing.
    fn view(&self, _offset: u64, _len: usize) -> Option<&[u8]> {
        None
    }
    /// Write `len` bytes at `offset` made in place: `fill` is given the
    /// member's own memory for them (a mapped file) and writes every byte
    /// of it, under the same rules as [`Member::write_at`] (range, zone
    /// write pointer), all checked before `fill` runs: an error then
    /// means nothing was written; once `fill` has run, the result is
    /// `fill`'s, and the write is done when that is Ok.  None where the
    /// member keeps no such memory (the default): the caller then writes
    /// by copy.
    fn write_in_place(&self, _offset: u64, _len: u64, _fill: &mut dyn FnMut(&mut [u8]) -> io::Result<()>) -> Option<io::Result<()>> {
        None
    }
    /// Write `buf` at `offset` and make that write durable (not
    /// necessarily others): a remote with FUA does it in one request.
    fn write_durable(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_at(buf, offset)?;
        self.flush()
    }
    /// A hint that `len` bytes at `offset` are about to be written: a
    /// member in RAM fetches their lines for writing, so the write does
    /// not stall on lines nothing has read.  Changes no byte and never
    /// fails; a range beyond the device is ignored.  The default does
    /// nothing.
    fn prefetch_write(&self, _offset: u64, _len: usize) {}
    /// Whether operations are so cheap (RAM) that running them inline beats
    /// handing them to other threads.
    fn is_memory(&self) -> bool {
        false
    }
    /// Whether a flush costs next to nothing (RAM, or a file on a RAM file
    /// system), so a phase of flushes runs inline rather than waking I/O
    /// threads.
    fn cheap_flush(&self) -> bool {
        self.is_memory()
    }
    /// Whether its operations cross a network (each waits a round trip).
    fn is_remote(&self) -> bool {
        false
    }
    /// Reset the zone that starts at byte `offset` of a zoned device (its
    /// write pointer back to the zone's start).  Devices without zones
    /// refuse.
    fn reset_zone(&self, offset: u64) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::Unsupported, format!("{}: not a zoned device (zone reset at byte {offset})", self.describe())))
    }
    /// How a remote member's requests have been answering (None for a
    /// local device).
    fn remote_latency(&self) -> Option<nbd::Latency> {
        None
    }
    /// For a member that is an array of its own (a CBRO check drive
    /// array): a line for each of its members out of service, naming it
    /// (and those of arrays nested in it).  An outer array that counts
    /// such a member in service is still degraded: one more failure
    /// inside it and the column is lost.  Empty for a device.
    fn inner_out(&self) -> Vec<String> {
        Vec::new()
    }
}

fn range_check(what: &dyn std::fmt::Display, size: u64, offset: u64, len: usize) -> io::Result<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what}: access at {offset}+{len} beyond device size {size}"),
        )),
    }
}

/// The one lock every kind of array takes on every device it opens: an
/// advisory `flock`, exclusive for a writer and shared for a reader, held
/// as long as the open file.  It fails at once when another process holds
/// it, so two mosaic processes never write one array (or one device) at
/// once.  (flock locks belong to the open file, so one process must lock a
/// device through one handle only.)
pub fn lock_file(file: &File, path: &Path, exclusive: bool) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let op = if exclusive { libc::LOCK_EX } else { libc::LOCK_SH } | libc::LOCK_NB;
    // SAFETY: flock on a file descriptor `file` owns.
    let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::WouldBlock {
        return Err(io::Error::new(io::ErrorKind::WouldBlock, format!("{}: in use by another mosaic process", path.display())));
    }
    Err(io::Error::new(e.kind(), format!("{}: lock: {e}", path.display())))
}

/// The directory of this user's runtime files (the servers' control
/// sockets, the locks of remote members): root's in `/run/mosaic` (as
/// md's in /run/mdadm), so a service and a root shell agree whatever
/// their environment; another user's in `$XDG_RUNTIME_DIR` (or the
/// temporary directory) under `mosaic-UID`.
pub fn runtime_dir() -> std::path::PathBuf {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    if uid == 0 && Path::new("/run").is_dir() {
        return std::path::PathBuf::from("/run/mosaic");
    }
    let base = std::env::var_os("XDG_RUNTIME_DIR").map(std::path::PathBuf::from).filter(|p| p.is_dir()).unwrap_or_else(std::env::temp_dir);
    base.join(format!("mosaic-{uid}"))
}

/// [`lock_file`] on a handle of its own, for devices whose I/O goes
/// through another handle that never locks (emulated zoned files).
#[derive(Debug)]
pub struct DeviceLock {
    _file: File,
}

impl DeviceLock {
    /// Lock the device at `path` (which must exist).
    pub fn acquire(path: &Path, exclusive: bool) -> io::Result<DeviceLock> {
        let file = File::open(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        lock_file(&file, path, exclusive)?;
        Ok(DeviceLock { _file: file })
    }

    /// Whether this lock is on the file `path` names now (the same inode,
    /// whatever it was called when locked).
    pub fn is_of(&self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        matches!((self._file.metadata(), std::fs::metadata(path)), (Ok(a), Ok(b)) if a.dev() == b.dev() && a.ino() == b.ino())
    }
}

/// A member device named by a path (a regular file or a block device) or
/// by an NBD URI (an export of a server elsewhere, [`nbd::NbdMember`]):
/// what arrays open wherever a member path is accepted.
#[derive(Debug)]
pub enum Device {
    File(FileMember),
    Nbd(nbd::NbdMember),
}

impl Device {
    /// Open the file, block device or NBD export `path` names.
    pub fn open(path: &Path) -> io::Result<Device> {
        match path.to_str().filter(|s| nbd::is_uri(s)) {
            Some(uri) => nbd::NbdMember::connect(uri).map(Device::Nbd),
            None => FileMember::open(path).map(Device::File),
        }
    }

    /// Create (or truncate) a file of `size` bytes; an NBD export is not
    /// created but connected to, and refused when smaller than `size`.
    pub fn create(path: &Path, size: u64) -> io::Result<Device> {
        match path.to_str().filter(|s| nbd::is_uri(s)) {
            Some(_) => Self::open(path).and_then(|d| d.at_least(size)),
            None => FileMember::create(path, size).map(Device::File),
        }
    }

    /// The device at `path`, created with `size` bytes when it is a file
    /// that does not exist.
    pub fn open_or_create(path: &Path, size: u64) -> io::Result<Device> {
        if path.exists() || path.to_str().is_some_and(nbd::is_uri) {
            Self::open(path)
        } else {
            Self::create(path, size)
        }
    }

    fn at_least(self, size: u64) -> io::Result<Device> {
        if self.size() < size {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: {} bytes, smaller than the {size} needed", self.describe(), self.size())));
        }
        Ok(self)
    }

    /// Take the array lock ([`lock_file`]) on a file or block device, or
    /// on a remote export's lock file ([`nbd::NbdMember::lock`]: one
    /// writer per array holds for the machine that serves the array, not
    /// across machines).
    pub fn lock(&self, exclusive: bool) -> io::Result<()> {
        match self {
            Device::File(f) => f.lock(exclusive),
            Device::Nbd(n) => n.lock(exclusive),
        }
    }

    /// Whether writes are refused by design: a remote exported read-only.
    pub fn read_only(&self) -> bool {
        matches!(self, Device::Nbd(n) if n.read_only())
    }

    fn inner(&self) -> &dyn Member {
        match self {
            Device::File(f) => f,
            Device::Nbd(n) => n,
        }
    }
}

impl Member for Device {
    fn describe(&self) -> String {
        self.inner().describe()
    }
    fn size(&self) -> u64 {
        self.inner().size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner().read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner().write_at(buf, offset)
    }
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        self.inner().write_parts_at(parts, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.inner().flush()
    }
    fn next_data(&self, offset: u64) -> io::Result<u64> {
        self.inner().next_data(offset)
    }
    fn view(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.inner().view(offset, len)
    }
    fn write_durable(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner().write_durable(buf, offset)
    }
    fn cheap_flush(&self) -> bool {
        self.inner().cheap_flush()
    }
    fn remote_latency(&self) -> Option<nbd::Latency> {
        self.inner().remote_latency()
    }
    fn is_remote(&self) -> bool {
        matches!(self, Device::Nbd(_))
    }
}

/// A regular file or a block device.
#[derive(Debug)]
pub struct FileMember {
    /// Its I/O: mapped on a RAM file system ([`ram_map`]).
    io: ram_map::FileIo,
    path: PathBuf,
    size: u64,
    block_device: bool,
}

impl FileMember {
    /// Open an existing file or block device read-write.
    pub fn open(path: &Path) -> io::Result<FileMember> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let meta = file.metadata()?;
        let block_device = meta.file_type().is_block_device();
        let size = if block_device { file.seek(SeekFrom::End(0))? } else { meta.len() };
        Ok(FileMember::with(file, path, size, block_device, meta.file_type().is_file()))
    }

    /// Create (or truncate) a regular file of `size` bytes and open it.
    pub fn create(path: &Path, size: u64) -> io::Result<FileMember> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        size_file(&file, path, size)?;
        Ok(FileMember::with(file, path, size, false, true))
    }

    /// The member over an opened `file` of `size` bytes: mapped when it is
    /// a `regular` file on a RAM file system.
    fn with(file: File, path: &Path, size: u64, block_device: bool, regular: bool) -> FileMember {
        FileMember { io: ram_map::FileIo::new(file, size, regular), path: path.to_path_buf(), size, block_device }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether reads and writes go through a mapping (see [`ram_map`]).
    pub fn is_mapped(&self) -> bool {
        self.io.is_mapped()
    }

    /// Take the array lock ([`lock_file`]) on this handle, for its life.
    pub fn lock(&self, exclusive: bool) -> io::Result<()> {
        lock_file(self.io.file(), &self.path, exclusive)
    }

    pub fn is_block_device(&self) -> bool {
        self.block_device
    }
}

impl Member for FileMember {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        range_check(&self.path.display(), self.size, offset, buf.len())?;
        self.io.read_exact_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        range_check(&self.path.display(), self.size, offset, buf.len())?;
        self.io.write_all_at(buf, offset)
    }
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        range_check(&self.path.display(), self.size, offset, parts.iter().map(|p| p.len()).sum())?;
        self.io.write_parts_at(parts, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.io.sync_data()
    }
    fn next_data(&self, offset: u64) -> io::Result<u64> {
        if self.block_device || offset >= self.size {
            return Ok(offset);
        }
        match seek(self.io.file(), offset, libc::SEEK_DATA) {
            Ok(d) => Ok(d.clamp(offset, self.size)),
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => Ok(self.size),
            // A file system without holes to report: every byte is data.
            Err(_) => Ok(offset),
        }
    }
    fn view(&self, offset: u64, len: usize) -> Option<&[u8]> {
        range_check(&self.path.display(), self.size, offset, len).ok()?;
        self.io.view(offset, len)
    }
    fn cheap_flush(&self) -> bool {
        self.io.ram_fs()
    }
}

/// `lseek(2)` of `file` to `offset` with `whence` (`SEEK_DATA`,
/// `SEEK_HOLE`, ...): where it lands.  Members read and write by position
/// or through a mapping, so the file offset it moves is never used.
pub(crate) fn seek(file: &File, offset: u64, whence: libc::c_int) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    let at = libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: lseek on a descriptor `file` owns.
    let r = unsafe { libc::lseek(file.as_raw_fd(), at, whence) };
    u64::try_from(r).map_err(|_| io::Error::last_os_error())
}

/// Give the new file at `path` its length of `size` bytes, or say which
/// file could not take it and why: the file system's limit (`EFBIG`), or
/// the kernel's, since a file offset is signed and ends below 8 EiB.
pub(crate) fn size_file(file: &File, path: &Path, size: u64) -> io::Result<()> {
    if i64::try_from(size).is_err() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {size} bytes is larger than any file can be (at most 2^63 - 1 bytes)", path.display()),
        ));
    }
    file.set_len(size).map_err(|e| io::Error::new(e.kind(), format!("{}: cannot make it {size} bytes long: {e}", path.display())))
}

/// Whether `file` lives on tmpfs or ramfs, where fdatasync has nothing to
/// write back.
pub fn on_ram_fs(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    const TMPFS: i64 = 0x0102_1994;
    const RAMFS: i64 = 0x8584_58f6;
    // SAFETY: fstatfs writes one statfs into the zeroed struct we own; the
    // descriptor belongs to `file`, which outlives the call.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } == 0;
    ok && matches!(st.f_type as i64, TMPFS | RAMFS)
}

/// A member in RAM.  Its bytes are read and written in place without a
/// lock, as a member file mapped on tmpfs is ([`ram_map`]): the array
/// never runs two operations on one range when either writes it (stripe
/// locks), so the operations on a member meet only on disjoint bytes.
/// (With one lock over the buffer, two writers of a RAM raid5 waited for
/// each other at every member, and the lock word's line went back and
/// forth between their cores on every operation.)
pub struct MemMember {
    name: String,
    /// The bytes (a leaked box, read with one load per operation).
    /// Replaced whole only by [`MemMember::restore`] (tests), which keeps
    /// the ones it replaces in `retired` until the member is dropped: an
    /// operation may still be copying into them.
    data: AtomicPtr<MemBytes>,
    retired: parking_lot::Mutex<Vec<Box<MemBytes>>>,
}

impl Drop for MemMember {
    fn drop(&mut self) {
        // SAFETY: `data` came from `Box::into_raw` and nothing else
        // holds it once the member is dropped.
        drop(unsafe { Box::from_raw(*self.data.get_mut()) });
    }
}

/// A RAM member's bytes, written through shared references.
struct MemBytes(Box<[std::cell::UnsafeCell<u8>]>);

// SAFETY: every access is a copy to or from a range checked to lie inside
// the buffer, and callers never touch one range from two threads when
// either writes it (the contract above, as for a mapped file).
unsafe impl Sync for MemBytes {}

impl MemBytes {
    fn new(bytes: Vec<u8>) -> MemBytes {
        let b = bytes.into_boxed_slice();
        // SAFETY: `UnsafeCell<u8>` has the layout of `u8`.
        MemBytes(unsafe { Box::from_raw(Box::into_raw(b) as *mut [std::cell::UnsafeCell<u8>]) })
    }

    fn len(&self) -> u64 {
        self.0.len() as u64
    }

    /// The first of `len` bytes at `offset`, checked to lie inside.
    fn at(&self, name: &str, offset: u64, len: usize) -> io::Result<*mut u8> {
        range_check(&name, self.len(), offset, len)?;
        // SAFETY: `offset` is inside the buffer (checked).
        Ok(unsafe { std::cell::UnsafeCell::raw_get(self.0.as_ptr()).add(offset as usize) })
    }
}

impl MemMember {
    pub fn new(name: impl Into<String>, size: u64) -> MemMember {
        let data = AtomicPtr::new(Box::into_raw(Box::new(MemBytes::new(vec![0u8; size as usize]))));
        MemMember { name: name.into(), data, retired: Default::default() }
    }

    /// The bytes now.
    fn bytes(&self) -> &MemBytes {
        // SAFETY: `data` always points at a live box: replaced ones are
        // kept in `retired` until the member drops.
        unsafe { &*self.data.load(Ordering::Acquire) }
    }

    /// A copy of the contents (tests compare members byte for byte).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.bytes().len() as usize];
        self.read_at(&mut out, 0).expect("the whole member is inside it");
        out
    }

    /// Put back contents taken by [`MemMember::snapshot`] (tests swap a
    /// member for an old copy of itself), with nothing else running on
    /// the member.  Bytes of another length replace the buffer.
    pub fn restore(&self, bytes: Vec<u8>) {
        if bytes.len() as u64 == self.bytes().len() {
            self.write_at(&bytes, 0).expect("the whole member is inside it");
            return;
        }
        let new = Box::into_raw(Box::new(MemBytes::new(bytes)));
        let old = self.data.swap(new, Ordering::AcqRel);
        // SAFETY: `old` came from `Box::into_raw`; it is kept, not freed.
        self.retired.lock().push(unsafe { Box::from_raw(old) });
    }

    /// Flip bits directly, bypassing the array (tests inject corruption).
    pub fn corrupt(&self, offset: u64, len: usize) {
        let mut b = vec![0u8; len];
        self.read_at(&mut b, offset).expect("corrupt: a range inside the member");
        b.iter_mut().for_each(|x| *x ^= 0xa5);
        self.write_at(&b, offset).expect("corrupt: a range inside the member");
    }
}

impl Member for MemMember {
    fn describe(&self) -> String {
        format!("mem:{}", self.name)
    }
    fn size(&self) -> u64 {
        self.bytes().len()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let d = self.bytes();
        let src = d.at(&self.name, offset, buf.len())?;
        // SAFETY: `src` starts `buf.len()` bytes inside the buffer, which
        // lives as long as the member; `buf` is the caller's.
        unsafe { std::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let d = self.bytes();
        let dst = d.at(&self.name, offset, buf.len())?;
        // SAFETY: as in `read_at`, the other way.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), dst, buf.len()) };
        Ok(())
    }
    /// Streamed in place, as one write (no joined copy first).
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        let d = self.bytes();
        let dst = d.at(&self.name, offset, parts.iter().map(|p| p.len()).sum())?;
        // SAFETY: `dst` starts the parts' total length inside the buffer,
        // and the parts are the caller's buffers, not this member's.
        unsafe { ram_map::copy_parts_streaming(dst, parts) };
        Ok(())
    }
    fn write_in_place(&self, offset: u64, len: u64, fill: &mut dyn FnMut(&mut [u8]) -> io::Result<()>) -> Option<io::Result<()>> {
        let d = self.bytes();
        // A length past the address space is past the buffer too: the
        // range check refuses it as it refuses any write beyond the end.
        let n = usize::try_from(len).unwrap_or(usize::MAX);
        let dst = match d.at(&self.name, offset, n) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        // SAFETY: `dst` starts `n` bytes inside the buffer, which the
        // caller writes as it would by copy (the stripe locks keep other
        // operations off the range, as for `write_at`).
        Some(fill(unsafe { std::slice::from_raw_parts_mut(dst, n) }))
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    /// Lent in place, as a mapped file's: the program that reads it holds
    /// the stripe locks that keep writes off the range.
    fn view(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let p = self.bytes().at(&self.name, offset, len).ok()?;
        // SAFETY: the range is inside the buffer, which lives as long as
        // the member (one [`MemMember::restore`] replaces stays in
        // `retired` until the member drops); nothing writes the range
        // while it is lent ([`Member::view`]'s rule, as for a read racing
        // a write).
        Some(unsafe { std::slice::from_raw_parts(p, len) })
    }
    fn prefetch_write(&self, offset: u64, len: usize) {
        let d = self.bytes();
        if let Ok(p) = d.at(&self.name, offset, len) {
            // SAFETY: the range is inside the buffer, and the caller is
            // the one about to write it (nobody else touches it).
            ram_map::prefetch_for_write(unsafe { std::slice::from_raw_parts(p, len) });
        }
    }
    fn is_memory(&self) -> bool {
        true
    }
}

/// Wraps a member and fails its I/O on command: all of it (a dead
/// drive), or reads of bad ranges (a drive's unreadable sectors).
pub struct FaultyMember {
    inner: Arc<dyn Member>,
    broken: AtomicBool,
    /// Fail once this many more operations have succeeded (u64::MAX: never).
    fail_after: AtomicU64,
    /// Unreadable ranges (start, end, whether writes fail there too).
    bad: parking_lot::Mutex<Vec<(u64, u64, bool)>>,
}

impl FaultyMember {
    pub fn new(inner: Arc<dyn Member>) -> FaultyMember {
        FaultyMember { inner, broken: AtomicBool::new(false), fail_after: AtomicU64::new(u64::MAX), bad: parking_lot::Mutex::new(Vec::new()) }
    }
    /// Reads touching `len` bytes at `offset` fail (EIO) until a write
    /// covers them: a drive's pending sectors, which it remaps when they
    /// are written.  With `sticky`, writes there fail too (a sector the
    /// drive cannot remap).
    pub fn bad_range(&self, offset: u64, len: u64, sticky: bool) {
        self.bad.lock().push((offset, offset + len, sticky));
    }
    /// The bad ranges left (start, end).
    pub fn bad_ranges(&self) -> Vec<(u64, u64)> {
        self.bad.lock().iter().map(|&(a, b, _)| (a, b)).collect()
    }
    /// What a disk's unreadable sector gives: EIO's kind, with where.
    fn medium_error(&self, offset: u64) -> io::Error {
        io::Error::new(io::Error::from_raw_os_error(libc::EIO).kind(), format!("{}: injected medium error at byte {offset}", self.inner.describe()))
    }
    /// A read of `len` bytes at `offset` touches a bad range.
    fn check_read(&self, offset: u64, len: u64) -> io::Result<()> {
        match self.bad.lock().iter().find(|&&(a, b, _)| a < offset + len && offset < b) {
            Some(&(a, _, _)) => Err(self.medium_error(a.max(offset))),
            None => Ok(()),
        }
    }
    /// A write of `len` bytes at `offset`: refused on a sticky bad range,
    /// else the bad ranges' parts it covers are readable again.
    fn check_write(&self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset + len;
        let mut bad = self.bad.lock();
        if let Some(&(a, _, _)) = bad.iter().find(|&&(a, b, sticky)| sticky && a < end && offset < b) {
            return Err(self.medium_error(a.max(offset)));
        }
        *bad = bad
            .iter()
            .flat_map(|&(a, b, s)| if a < end && offset < b { vec![(a, offset, s), (end, b, s)] } else { vec![(a, b, s)] })
            .filter(|&(a, b, _)| a < b)
            .collect();
        Ok(())
    }
    /// Fail every operation from now on.
    pub fn break_now(&self) {
        self.broken.store(true, Ordering::SeqCst);
    }
    /// Fail every operation after `n` more succeed.
    pub fn break_after(&self, n: u64) {
        self.fail_after.store(n, Ordering::SeqCst);
    }
    fn check(&self) -> io::Result<()> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(io::Error::other(format!("{}: injected I/O error", self.inner.describe())));
        }
        let left = self.fail_after.load(Ordering::SeqCst);
        if left != u64::MAX {
            if left == 0 {
                self.broken.store(true, Ordering::SeqCst);
                return Err(io::Error::other(format!("{}: injected I/O error", self.inner.describe())));
            }
            self.fail_after.store(left - 1, Ordering::SeqCst);
        }
        Ok(())
    }
}

impl Member for FaultyMember {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check()?;
        self.check_read(offset, buf.len() as u64)?;
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check()?;
        self.check_write(offset, buf.len() as u64)?;
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.check()?;
        self.inner.flush()
    }
    fn is_memory(&self) -> bool {
        self.inner.is_memory()
    }
    fn cheap_flush(&self) -> bool {
        self.inner.cheap_flush()
    }
    fn reset_zone(&self, offset: u64) -> io::Result<()> {
        self.check()?;
        self.inner.reset_zone(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// A RAM member has no lock: threads writing disjoint ranges at once
    /// each find their own bytes; the parts of a streamed write land in
    /// order; out-of-range operations are errors; `restore` swaps in a
    /// copy, and `corrupt` flips exactly its range.
    #[test]
    fn a_ram_member_takes_disjoint_writes_from_many_threads_at_once() {
        const T: u64 = 8;
        const SPAN: u64 = 64 << 10;
        let m = MemMember::new("m", T * SPAN);
        std::thread::scope(|s| {
            for t in 0..T {
                let m = &m;
                s.spawn(move || {
                    for round in 0..50u64 {
                        let v = vec![(t * 50 + round) as u8; 4096];
                        for at in (t * SPAN..(t + 1) * SPAN).step_by(4096) {
                            m.write_at(&v, at).unwrap();
                        }
                        let mut back = vec![0u8; SPAN as usize];
                        m.read_at(&mut back, t * SPAN).unwrap();
                        assert!(back.iter().all(|&b| b == (t * 50 + round) as u8), "thread {t} round {round}");
                    }
                });
            }
        });
        let all = m.snapshot();
        for t in 0..T {
            assert!(all[(t * SPAN) as usize..((t + 1) * SPAN) as usize].iter().all(|&b| b == (t * 50 + 49) as u8));
        }
        m.write_parts_at(&[&[1, 2, 3], &[], &[4, 5]], 7).unwrap();
        let mut b = [0u8; 7];
        m.read_at(&mut b, 6).unwrap();
        assert_eq!(b, [49, 1, 2, 3, 4, 5, 49]);
        assert!(m.write_at(&[0; 2], T * SPAN - 1).is_err());
        assert!(m.read_at(&mut [0; 1], T * SPAN).is_err());
        assert!(m.write_parts_at(&[&[0; 4]], u64::MAX - 1).is_err());
        m.corrupt(8, 2);
        m.read_at(&mut b, 6).unwrap();
        assert_eq!(b, [49, 1, 2 ^ 0xa5, 3 ^ 0xa5, 4, 5, 49]);
        m.restore(all.clone());
        assert_eq!(m.snapshot(), all);
        m.restore(vec![7u8; 4096]);
        assert_eq!(m.size(), 4096);
        m.read_at(&mut b, 0).unwrap();
        assert_eq!(b, [7; 7]);
    }

    /// A member too large for any file is refused by name, before the
    /// kernel's bare "out of range integral type conversion"; one too
    /// large for this file system names the file too.
    #[test]
    fn a_member_file_too_large_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m0");
        let err = FileMember::create(&path, 8 << 60).err().expect("8 EiB is past a file offset");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let msg = err.to_string();
        assert!(msg.contains("m0") && msg.contains("larger than any file can be"), "{msg}");
        match FileMember::create(&path, 1 << 60) {
            Ok(m) => assert_eq!(m.size(), 1 << 60),
            Err(e) => assert!(e.to_string().contains("m0: cannot make it 1152921504606846976 bytes long"), "{e}"),
        }
    }

    /// A RAM member lends exactly the bytes a read would copy, and
    /// nothing beyond its end (nor past the address space).
    #[test]
    fn a_ram_member_lends_the_bytes_a_read_copies_and_nothing_beyond_it() {
        let m = MemMember::new("m", 3 * 4096);
        let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        m.write_at(&bytes, 4096).unwrap();
        assert_eq!(m.view(4096, 4096), Some(&bytes[..]));
        assert_eq!(m.view(4096 + 100, 10), Some(&bytes[100..110]));
        for (off, len) in [(2 * 4096, 4097), (3 * 4096, 1), (u64::MAX, 2), (u64::MAX - 1, usize::MAX)] {
            assert_eq!(m.view(off, len), None, "{off} + {len}");
        }
    }

    /// A prefetch hint changes no byte, and one beyond the device (or
    /// past the end of the address space) is ignored, not a panic.
    #[test]
    fn a_ram_members_prefetch_hint_changes_nothing_and_ignores_bad_ranges() {
        let m = MemMember::new("m", 3 * 4096);
        m.write_at(&[7u8; 4096], 4096).unwrap();
        let before = m.snapshot();
        for (off, len) in [(4096, 4096), (0, 3 * 4096), (2 * 4096, 4097), (3 * 4096, 1), (u64::MAX, 2), (u64::MAX - 1, usize::MAX), (5, 0)] {
            m.prefetch_write(off, len);
        }
        assert_eq!(m.snapshot(), before);
    }

    /// A write in place gives exactly its range of the buffer and keeps
    /// what `fill` puts there; one past the end (or past the address
    /// space) is refused by the member's range check, by name, before
    /// `fill` runs, and changes nothing.
    #[test]
    fn a_ram_member_writes_in_place_within_its_range_only() {
        let m = MemMember::new("m", 3 * 4096);
        let r = m.write_in_place(4096, 4096, &mut |b| {
            assert_eq!(b.len(), 4096);
            b.fill(9);
            Ok(())
        });
        assert!(matches!(r, Some(Ok(()))));
        let mut got = vec![0u8; 4096];
        m.read_at(&mut got, 4096).unwrap();
        assert_eq!(got, [9u8; 4096]);
        let before = m.snapshot();
        for (off, len) in [(2 * 4096, 4097), (3 * 4096, 1), (u64::MAX, 2), (0, u64::MAX)] {
            let mut called = false;
            let e = m
                .write_in_place(off, len, &mut |_| {
                    called = true;
                    Ok(())
                })
                .expect("a RAM member writes in place")
                .unwrap_err();
            assert!(e.to_string().starts_with(&format!("m: access at {off}+")) && e.to_string().contains("beyond device size 12288"), "{e}");
            assert!(!called);
        }
        assert_eq!(m.snapshot(), before);
    }

    #[test]
    fn file_member_round_trip_and_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m0");
        let m = FileMember::create(&p, 8192).unwrap();
        m.write_at(b"hello", 4000).unwrap();
        m.flush().unwrap();
        let m2 = FileMember::open(&p).unwrap();
        assert_eq!(m2.size(), 8192);
        let mut b = [0u8; 5];
        m2.read_at(&mut b, 4000).unwrap();
        assert_eq!(&b, b"hello");
        let e = m2.write_at(&[0u8; 10], 8190).unwrap_err();
        assert!(e.to_string().contains("beyond device size"), "{e}");
        assert!(FileMember::open(&dir.path().join("nope")).unwrap_err().to_string().contains("nope"));
    }

    /// The same checks on a file on the RAM file system (mapped) and on
    /// disk (system calls): bytes, bounds, parts written as one, and the
    /// page cache shared with other handles both ways.
    #[test]
    fn mapped_and_unmapped_files_read_and_write_alike() {
        let shm = tempfile::tempdir_in("/dev/shm").expect("a RAM file system at /dev/shm");
        let disk = tempfile::tempdir().unwrap();
        for (dir, mapped) in [(shm.path(), true), (disk.path(), on_ram_fs(&File::open(disk.path()).unwrap()))] {
            let p = dir.join("m0");
            let m = FileMember::create(&p, 16 << 12).unwrap();
            assert_eq!((m.is_mapped(), m.cheap_flush()), (mapped, mapped), "{}", p.display());
            m.write_parts_at(&[b"ab", b"", b"cde", &[9u8; 5000]], 4090).unwrap();
            m.flush().unwrap();
            let mut b = [0u8; 10];
            m.read_at(&mut b, 4090).unwrap();
            assert_eq!(&b, b"abcde\x09\x09\x09\x09\x09");
            // Another handle (another process would be the same) sees the
            // writes, and this one sees its writes.
            let other = File::options().read(true).write(true).open(&p).unwrap();
            let mut c = [0u8; 5];
            other.read_exact_at(&mut c, 4090).unwrap();
            assert_eq!(&c, b"abcde");
            other.write_all_at(b"XY", 0).unwrap();
            m.read_at(&mut c[..2], 0).unwrap();
            assert_eq!(&c[..2], b"XY");
            for e in [m.write_parts_at(&[&[0u8; 4], &[0u8; 4]], (16 << 12) - 6).unwrap_err(), m.read_at(&mut b, (16 << 12) - 2).unwrap_err()] {
                assert!(e.to_string().contains("beyond device size"), "{e}");
            }
            // The whole file is allocated when mapped: no holes to fault on.
            let blocks = std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&p).unwrap());
            assert_eq!(blocks * 512 >= 16 << 12, mapped, "{}: {blocks} blocks", p.display());
            if mapped {
                // A hole made while it was closed is filled at the next
                // open (an open of a whole file skips the fallocate).
                drop(m);
                let f = File::options().write(true).open(&p).unwrap();
                // SAFETY: plain system call on a descriptor `f` owns.
                let rc = unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&f), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, 8192, 8192) };
                assert_eq!(rc, 0);
                let blocks = || std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&p).unwrap());
                assert!(blocks() * 512 < 16 << 12);
                let m = FileMember::open(&p).unwrap();
                assert!(m.is_mapped() && blocks() * 512 >= 16 << 12, "{} blocks", blocks());
                m.read_at(&mut c[..2], 0).unwrap();
                assert_eq!(&c[..2], b"XY");
            }
        }
    }

    /// A device node lives on devtmpfs, which calls itself tmpfs: it is
    /// still a device, flushed with fdatasync and never mapped.
    #[test]
    fn device_nodes_are_not_ram() {
        let m = FileMember::open(Path::new("/dev/zero")).unwrap();
        assert!(!m.is_mapped() && !m.cheap_flush());
    }

    #[test]
    fn exclusive_lock_keeps_a_second_writer_out() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m0");
        let a = FileMember::create(&p, 4096).unwrap();
        a.lock(true).unwrap();
        let b = FileMember::open(&p).unwrap();
        let e = b.lock(true).unwrap_err();
        assert!(e.to_string().contains("in use by another mosaic process"), "{e}");
        assert!(b.lock(false).is_err());
        drop(a);
        b.lock(false).unwrap();
    }

    /// A RAM member writes parts in place, one after another, as one
    /// write: all or nothing at its bounds.
    #[test]
    fn mem_member_writes_parts_in_place() {
        let m = MemMember::new("m", 8192);
        m.write_parts_at(&[b"ab", b"", b"cde", &[9u8; 5000]], 100).unwrap();
        let mut b = [0u8; 10];
        m.read_at(&mut b, 100).unwrap();
        assert_eq!(&b, b"abcde\x09\x09\x09\x09\x09");
        let e = m.write_parts_at(&[&[1u8; 4], &[1u8; 4]], 8192 - 6).unwrap_err();
        assert!(e.to_string().contains("beyond device size"), "{e}");
        assert_eq!(m.snapshot()[8192 - 6..], [0u8; 6], "nothing written past a refused write");
    }

    #[test]
    fn faulty_member_fails_on_command() {
        let f = FaultyMember::new(Arc::new(MemMember::new("x", 4096)));
        f.write_at(&[1, 2, 3], 0).unwrap();
        f.break_after(1);
        let mut b = [0u8; 3];
        f.read_at(&mut b, 0).unwrap();
        assert_eq!(b, [1, 2, 3]);
        assert!(f.read_at(&mut b, 0).is_err());
        assert!(f.write_at(&b, 0).is_err());
    }
}

/// A power cut for tests: members sharing one budget of device writes stop
/// persisting once it is spent, silently, as a drive's volatile cache
/// loses what it held.  Reads still see what reached the inner member.
pub struct PowerCut {
    inner: Arc<dyn Member>,
    budget: Arc<std::sync::atomic::AtomicI64>,
}

impl PowerCut {
    pub fn new(inner: Arc<dyn Member>, budget: Arc<std::sync::atomic::AtomicI64>) -> PowerCut {
        PowerCut { inner, budget }
    }
}

impl Member for PowerCut {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.budget.fetch_sub(1, Ordering::SeqCst) > 0 {
            self.inner.write_at(buf, offset)
        } else {
            Ok(())
        }
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn is_memory(&self) -> bool {
        self.inner.is_memory()
    }
}
