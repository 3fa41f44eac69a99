//! What the server serves: the [`Export`] trait, and [`MemExport`], a RAM
//! export for tests and examples.

use std::io;

use crate::proto::{STATE_HOLE, STATE_ZERO};

/// A run of bytes and its `base:allocation` state (NBD_STATE_* flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub len: u64,
    pub flags: u32,
}

impl Extent {
    /// Allocated bytes (or bytes whose state is not known): flags 0.
    pub fn data(len: u64) -> Extent {
        Extent { len, flags: 0 }
    }
    /// Allocated bytes known to read as zeroes.
    pub fn zero(len: u64) -> Extent {
        Extent { len, flags: STATE_ZERO }
    }
    /// Bytes with nothing behind them: they read as zeroes.
    pub fn hole(len: u64) -> Extent {
        Extent { len, flags: STATE_HOLE | STATE_ZERO }
    }
}
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// A byte range the server exports.  Every method is called from several
/// worker threads at once; requests have already been checked against
/// `size()`, the maximum payload and (unless `unaligned_ok`) `block_size()`.
pub trait Export: Send + Sync {
    /// Bytes exported.
    fn size(&self) -> u64;
    /// Minimum block size advertised (a power of two, 1..=64 KiB).
    fn block_size(&self) -> u64;
    /// Preferred I/O size advertised (a power of two >= `block_size`).
    fn preferred_block(&self) -> u64;
    /// Whether requests not aligned to `block_size` are handled (by
    /// read-modify-write); if false the server answers them with EINVAL.
    fn unaligned_ok(&self) -> bool {
        false
    }
    /// Whether requests finish in microseconds and never wait for one
    /// another (memory; a file in the page cache): then each connection's
    /// reader serves them itself, with no hand-off to a worker thread (a
    /// wake-up and a context switch per request, which cost more than the
    /// request), and sends the replies of a pipelined burst together.  False
    /// for exports whose requests block (an array on drives: member I/O,
    /// journal syncs), which the worker pool serves concurrently; an array
    /// whose members and journal are all in RAM says true.
    fn serve_inline(&self) -> bool {
        false
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> io::Result<()>;
    fn write(&self, off: u64, data: &[u8]) -> io::Result<()>;
    /// Make every completed write durable (all connections' writes: the
    /// server advertises multi-connection consistency).
    fn flush(&self) -> io::Result<()>;
    /// Discard a range; a no-op is a valid implementation.
    fn trim(&self, off: u64, len: u64) -> io::Result<()>;
    /// Write zeroes over a range that may exceed the maximum payload.
    fn write_zeroes(&self, off: u64, len: u64) -> io::Result<()> {
        zero_fill(off, len, (1u64 << 20).max(self.block_size()), |o, z| self.write(o, z))
    }
    /// Whether `write_zeroes` is much faster than writing zeroes (a
    /// request flagged FAST_ZERO and NO_HOLE gets ENOTSUP at once when it
    /// is not).
    fn fast_zero(&self) -> bool {
        false
    }
    /// WRITE_ZEROES without NO_HOLE: the client lets the range become a
    /// hole.  It must read as zeroes afterwards, as durable as a write.
    /// The default writes them ([`Export::write_zeroes`]); an export that
    /// can drop the range instead (a map that unmaps it for good) does.
    fn zero_as_hole(&self, off: u64, len: u64) -> io::Result<()> {
        self.write_zeroes(off, len)
    }
    /// Whether `zero_as_hole` is much faster than writing zeroes (a
    /// request flagged FAST_ZERO without NO_HOLE gets ENOTSUP at once
    /// when it is not).  The default: [`Export::fast_zero`].
    fn fast_zero_as_hole(&self) -> bool {
        self.fast_zero()
    }
    /// NBD_CMD_CACHE: a hint that the range will be read soon; doing
    /// nothing is a valid implementation.
    fn cache(&self, _off: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// The `base:allocation` state of `[off, off+len)`, in order from
    /// `off`: extents may cover less than `len` (the client asks again
    /// for the rest), never more than is asked.  A hole must read as
    /// zeroes: a client copying the export skips it.  The default, every
    /// byte allocated, is always true.
    fn extents(&self, _off: u64, len: u64) -> io::Result<Vec<Extent>> {
        Ok(vec![Extent::data(len)])
    }
}

/// Write zeroes over `[off, off+len)` in pieces of at most `chunk` bytes
/// through `write`, with one zeroed buffer.
pub fn zero_fill(off: u64, len: u64, chunk: u64, mut write: impl FnMut(u64, &[u8]) -> io::Result<()>) -> io::Result<()> {
    let zero = vec![0u8; chunk.min(len) as usize];
    let mut done = 0;
    while done < len {
        let n = chunk.min(len - done);
        write(off + done, &zero[..n as usize])?;
        done += n;
    }
    Ok(())
}

/// An export held in memory.
pub struct MemExport {
    data: RwLock<Vec<u8>>,
    block: u64,
    unaligned: bool,
    inline: bool,
    flushes: AtomicU64,
    writes: AtomicU64,
}

impl MemExport {
    pub fn new(size: usize, block: u64) -> MemExport {
        MemExport { data: RwLock::new(vec![0; size]), block, unaligned: false, inline: false, flushes: AtomicU64::new(0), writes: AtomicU64::new(0) }
    }

    /// Accept unaligned requests.
    pub fn with_unaligned(mut self) -> MemExport {
        self.unaligned = true;
        self
    }

    /// Have the connections' readers serve requests (see
    /// [`Export::serve_inline`]); the default tests the worker pool.
    pub fn with_inline(mut self) -> MemExport {
        self.inline = true;
        self
    }

    /// FLUSH (and FUA) calls served so far.
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// Write calls served so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// A copy of `len` bytes at `off`.
    pub fn snapshot(&self, off: usize, len: usize) -> Vec<u8> {
        self.data.read().unwrap_or_else(|e| e.into_inner())[off..off + len].to_vec()
    }

    fn range(&self, off: u64, len: usize) -> io::Result<std::ops::Range<usize>> {
        let size = self.size();
        match off.checked_add(len as u64) {
            Some(end) if end <= size => Ok(off as usize..end as usize),
            _ => Err(io::Error::from_raw_os_error(22)),
        }
    }
}

impl Export for MemExport {
    fn size(&self) -> u64 {
        self.data.read().unwrap_or_else(|e| e.into_inner()).len() as u64
    }
    fn block_size(&self) -> u64 {
        self.block
    }
    fn preferred_block(&self) -> u64 {
        self.block.max(4096)
    }
    fn unaligned_ok(&self) -> bool {
        self.unaligned
    }
    fn serve_inline(&self) -> bool {
        self.inline
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> io::Result<()> {
        let r = self.range(off, buf.len())?;
        buf.copy_from_slice(&self.data.read().unwrap_or_else(|e| e.into_inner())[r]);
        Ok(())
    }
    fn write(&self, off: u64, data: &[u8]) -> io::Result<()> {
        let r = self.range(off, data.len())?;
        self.data.write().unwrap_or_else(|e| e.into_inner())[r].copy_from_slice(data);
        self.writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn trim(&self, off: u64, len: u64) -> io::Result<()> {
        self.range(off, len as usize).map(|_| ())
    }
    fn write_zeroes(&self, off: u64, len: u64) -> io::Result<()> {
        let r = self.range(off, len as usize)?;
        self.data.write().unwrap_or_else(|e| e.into_inner())[r].fill(0);
        Ok(())
    }
    fn fast_zero(&self) -> bool {
        true
    }
    /// Blocks of zeroes are reported as such (allocated: memory has no holes).
    fn extents(&self, off: u64, len: u64) -> io::Result<Vec<Extent>> {
        let r = self.range(off, len as usize)?;
        let data = self.data.read().unwrap_or_else(|e| e.into_inner());
        let block = self.block.max(1) as usize;
        Ok(data[r]
            .chunks(block)
            .map(|b| if b.iter().all(|&x| x == 0) { Extent::zero(b.len() as u64) } else { Extent::data(b.len() as u64) })
            .collect())
    }
}
