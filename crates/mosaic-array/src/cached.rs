//! A cache volume: the small-write caches of `mosaic_core::cache` (write
//! cache, full or partial parity cache, old-data buffer) in front of a real
//! array, running the very policy the simulator replays.
//!
//! ```text
//!   write(offset, bytes) ── widen to whole pages (read the rest) ──┐
//!        │ write-back (array has a journal): logical record,       │
//!        │   fdatasync, then cache the pages ── ack                 │
//!        ▼                                                         ▼
//!   CachedArray::write_steps ─> steps (victim destages, parity evictions)
//!        │ each step: reads ─> CachedArray::compute (recipe) ─> journal
//!        │   the step's member writes (and a parity-row mark when the
//!        │   row's code stays cached) ─> member writes
//!        ▼
//!   write-through (no journal): every write ends with a full destage, so
//!   the code on the drives is current when it returns
//! ```
//!
//! **Durability.**  With a journal, a write is acknowledged once its bytes
//! are in the journal; what the cache holds lives on in the journal until
//! it is destaged.  The volume keeps the journal ring under half full: past
//! that it destages everything and checkpoints.  Replay at open (see
//! [`crate::journal`]) applies member records, recomputes the code of
//! every row whose parity was cached or that a cached write touches, then
//! applies the cached writes in order: every acknowledged write is back
//! and scrub is clean.
//!
//! **Member failures.**  `fail_member` destages everything first (a
//! planned removal).  A row whose parity is cached has stale code on the
//! drives; under `ppc`/`ppc+data` the paper's partial parity cannot be
//! completed once a member holding an *uncovered* unit of that row is
//! lost, so an unplanned failure there is reported as an error for that
//! row rather than guessed (`fpc` and `none` keep full parity and have no
//! such window).

use parking_lot::Mutex;

use mosaic_core::{CacheConfig, CachedArray, DevOp, Health, Step};

use crate::journal::{LOGICAL, PARITY_ROW};
use crate::{Array, ArrayError};

/// An array behind the small-write caches.
pub struct CacheVolume {
    arr: Array,
    cache: Mutex<CachedArray>,
    write_back: bool,
}

impl CacheVolume {
    /// Put `cfg`'s caches in front of `arr`: write-back when the array has
    /// a journal (which must hold the caches many times over), otherwise
    /// write-through.
    pub fn new(arr: Array, cfg: CacheConfig) -> Result<CacheVolume, ArrayError> {
        let cache = CachedArray::new(arr.layout(), cfg)?.with_bytes()?;
        let write_back = match arr.journal() {
            Some(j) => {
                // Between checkpoints (at half the ring) a write adds its
                // logical record and destages (each at most about twice the
                // write cache in records), and a checkpoint destages all.
                let need = 8 * (cfg.write_cache + cfg.parity_cache) + (4 << 20);
                if j.capacity() < need {
                    return Err(ArrayError::Usage(format!(
                        "journal {} holds {} bytes; a write-back {} cache of {} + {} bytes needs at least {need}",
                        j.describe(),
                        j.capacity(),
                        cfg.policy.name(),
                        cfg.write_cache,
                        cfg.parity_cache
                    )));
                }
                arr.set_auto_checkpoint(false);
                true
            }
            None => false,
        };
        Ok(CacheVolume { arr, cache: Mutex::new(cache), write_back })
    }

    pub fn array(&self) -> &Array {
        &self.arr
    }

    pub fn is_write_back(&self) -> bool {
        self.write_back
    }

    pub fn stats(&self) -> mosaic_core::CacheStats {
        self.cache.lock().cache_stats()
    }

    /// Run steps in order: reads, compute, journal, member writes.
    fn exec(&self, c: &mut CachedArray, steps: Vec<Step>) -> Result<(), ArrayError> {
        for st in steps {
            let res = self.arr.run_reads(&st.sp.reads);
            if self.arr.absorb_errors(&res) {
                return Err(ArrayError::Io("a member failed while the cache was destaging; the array is degraded".into()));
            }
            let reads: Vec<Vec<u8>> = res.into_iter().map(|r| r.expect("errors absorbed above")).collect();
            let bufs = c.compute(&st, &reads)?;
            if let Some(mosaic_core::cache::Recipe::Parity { stripe, keep: true, .. }) = &st.recipe {
                // The row's code on the members goes stale from here on.
                self.arr.journal_marks(&[(PARITY_ROW, *stripe, &[])])?;
            }
            let writes: Vec<(DevOp, &[u8])> = st.sp.writes.iter().copied().zip(bufs.iter().map(|b| b.as_slice())).collect();
            self.arr.journaled_writes(&writes)?;
        }
        Ok(())
    }

    fn destage_all(&self, c: &mut CachedArray) -> Result<(), ArrayError> {
        let h = self.arr.health();
        let steps = c.flush_steps(&h)?;
        self.exec(c, steps)
    }

    /// Read into `buf`: the members' bytes with the cached pages on top.
    fn read_locked(&self, c: &mut CachedArray, offset: u64, buf: &mut [u8]) -> Result<(), ArrayError> {
        let h = self.arr.health();
        let geo = c.geometry().clone();
        let exts = geo.split(offset, buf.len() as u64);
        if h.is_degraded() {
            // Stale code must not feed a reconstruction.
            let cached = c.parity_rows();
            let rows: Vec<u64> = exts.iter().map(|e| e.stripe).filter(|s| cached.binary_search(s).is_ok() && stripe_degraded(&geo, &h, *s)).collect();
            let steps = c.flush_rows(&rows, &h)?;
            self.exec(c, steps)?;
        }
        self.arr.read(offset, buf)?;
        for e in &exts {
            for col in &e.cols {
                if let Some(p) = c.cached_page(e.stripe, col.col) {
                    let at = col.buf_off as usize;
                    buf[at..at + (col.end - col.start) as usize].copy_from_slice(&p[col.start as usize..col.end as usize]);
                }
            }
        }
        Ok(())
    }

    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ArrayError> {
        self.arr.layout().planner.check(offset, buf.len() as u64)?;
        let mut c = self.cache.lock();
        self.read_locked(&mut c, offset, buf)
    }

    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), ArrayError> {
        self.arr.check_writable()?;
        let len = data.len() as u64;
        self.arr.layout().planner.check(offset, len)?;
        self.arr.mark_dirty()?;
        let mut c = self.cache.lock();
        let unit = c.geometry().unit;
        let (lo, hi) = (offset / unit * unit, (offset + len).div_ceil(unit) * unit);
        let page_bytes: std::borrow::Cow<[u8]> = if lo == offset && hi == offset + len {
            data.into()
        } else {
            // Whole pages only: the rest of the first and last page from
            // the cache or the members.
            let mut b = vec![0u8; (hi - lo) as usize];
            self.read_locked(&mut c, lo, &mut b)?;
            b[(offset - lo) as usize..(offset - lo + len) as usize].copy_from_slice(data);
            b.into()
        };
        let pages = (hi - lo) / unit;
        let bypass = pages > c.config().write_cache / unit;
        if self.write_back {
            if bypass || self.arr.journal().is_some_and(|j| j.used() > j.capacity() / 2) {
                // Nothing cached may depend on records a checkpoint drops.
                self.destage_all(&mut c)?;
                self.arr.journal_checkpoint()?;
            }
            if !bypass {
                self.arr.journal_marks(&[(LOGICAL, lo, &page_bytes)])?;
            }
        }
        let h = self.arr.health();
        let steps = c.write_steps(lo, hi - lo, Some(&page_bytes), &h)?;
        self.exec(&mut c, steps)?;
        if !self.write_back {
            self.destage_all(&mut c)?;
        }
        Ok(())
    }

    /// Completed writes durable: in the journal (write-back) or on the
    /// members (write-through); members flushed either way.
    pub fn flush(&self) -> Result<(), ArrayError> {
        self.arr.flush()
    }

    /// Destage everything (parity current on the drives) and flush.
    pub fn sync(&self) -> Result<(), ArrayError> {
        let mut c = self.cache.lock();
        self.destage_all(&mut c)?;
        self.arr.flush()
    }

    /// Planned removal: destage everything, then fail the member.
    pub fn fail_member(&self, idx: usize) -> Result<(), ArrayError> {
        let mut c = self.cache.lock();
        self.destage_all(&mut c)?;
        self.arr.fail_member(idx)
    }

    /// Destage everything and close the array clean.
    pub fn close(&self) -> Result<(), ArrayError> {
        let mut c = self.cache.lock();
        if self.arr.is_writable() {
            self.destage_all(&mut c)?;
            self.arr.journal_checkpoint()?;
        }
        self.arr.close()
    }
}

fn stripe_degraded(geo: &mosaic_core::Geometry, h: &Health, s: u64) -> bool {
    (0..geo.k + geo.m).any(|c| !h.available(geo.member_of(s, c), s))
}
