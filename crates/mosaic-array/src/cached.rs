//! A cache volume: the small-write caches of `mosaic_core::cache` (write
//! cache, full or partial parity cache, old-data buffer) in front of a real
//! array, running the very policy the simulator replays.
//!
//! ```text
//!   write(offset, bytes) ── CachedArray::widen: whole pages; the rest of a
//!        │   partly written page from the cache, or read (the policy's fills)
//!        ▼
//!   CachedArray::write_steps ─> cache the pages; steps (victim destages,
//!        │   parity evictions)
//!        │ each step: CachedArray::lower ─> one program: reads ─> code as
//!        │   GF(2^8) combinations ─> journal the member writes (and a
//!        │   resync mark when the row's code stays cached; the first
//!        │   record also carries the write's logical entry, write-back)
//!        │   ─> member writes; then CachedArray::commit stores the code
//!        │   it kept
//!        │ write-back with nothing destaged: the logical entry alone
//!        ▼ ── ack once the record with the logical entry is durable
//!   write-through (no journal): every write ends with a full destage, so
//!   the code on the drives is current when it returns
//! ```
//!
//! **Durability.**  With a journal, a write is acknowledged once its bytes
//! are in the journal; what the cache holds lives on in the journal until
//! it is destaged.  The write's logical entry rides in the first record of
//! the destage it sets off (no record or sync of its own:
//! [`crate::array::Rider`]); a page of the write that this destage writes
//! is logged with its bytes, since a copy must name an earlier record.
//! Two steps in a row on different rows run as one program
//! ([`mosaic_core::Program::run_beside`]), so their writes share a record
//! too (a write that flushes one row's parity to make room and destages
//! a page of another); the device operations are the same.
//! The volume keeps the journal ring under half full: past that it
//! destages everything and checkpoints.  Replay at open (see
//! [`crate::journal`]) applies member records, recomputes the code of
//! every row whose parity was cached or that a cached write touches, then
//! applies the cached writes in order: every acknowledged write is back
//! and scrub is clean.  A destage logs each cached page it writes as a
//! *copy* of the logical record that holds its bytes (the newest one since
//! the checkpoint: each write of a page logs it again), not with the bytes
//! a second time; replay resolves the copy into the same member write
//! ([`crate::journal`]).  The half-full rule counts a copy as the bytes it
//! stands for, and a record of steps run beside each other as the records
//! they would have taken one by one, so checkpoints (and the destages they
//! force) fall where they did before copies and shared records.  Dropping
//! the volume closes it (destages everything); if that fails the journal
//! is left for the next open.
//! A write larger than the write cache bypasses it
//! (journaled member writes); since logical records replay last, the
//! pages of its range that an earlier logical record holds are logged
//! again with its bytes (no destage, no checkpoint: the device operations
//! stay those the policy planned).
//!
//! **One policy, two executors.**  Every device operation here is one the
//! policy planned: the fills of a widened write, the reads of the pages
//! not cached ([`CachedArray::read_steps`]), and the destage steps.  So a
//! trace replayed at queue depth 1 does the same operations, member by
//! member, as the simulator running `CachedArray` in counting mode, whose
//! destage steps lower into the very programs run here, byte buffers
//! aside (`crates/mosaic-cli/tests/cli_replay_cache.rs`,
//! `tests/cache_program.rs`).  Two real-only
//! durability steps are outside that: the checkpoint when the journal
//! passes half full (it destages everything), and write-through (no
//! journal: every write ends with a full destage).
//!
//! **Member failures.**  `fail_member` destages everything first (a
//! planned removal).  A row whose parity is cached has stale code on the
//! drives; under `ppc`/`ppc+data` the paper's partial parity cannot be
//! completed once a member holding an *uncovered* unit of that row is
//! lost, so an unplanned failure there is reported as an error rather
//! than guessed: the volume stops (below), and opening the array again
//! keeps that row's units on the failed member as lost ranges (`fpc` and
//! `none` keep full parity and have no such window while running).  A crash loses the cached code of every policy but
//! `none`: a member missing at the next open loses its data units in the
//! rows the journal marked, which [`crate::lost`] names and keeps as lost
//! ranges (reads of them fail; writing them again clears them).
//!
//! **A destage that fails part-way stops the volume.**  Planning a step
//! takes its pages out of the cache and updates the policy's entries
//! before the members see it, so a member that fails in the middle of a
//! destage (or a journal record that cannot be written, or a plan that
//! fails after the cache changed) leaves the cache not matching the
//! members: a read would return old bytes of an acknowledged write.
//! The volume stops instead, as a DVS array with a failed destage does:
//! every later request, and close, fails with an error that names the
//! way back, and dropping it leaves the journal.  Opening the array again
//! replays the journal without the failed member, as after a crash that
//! took it (`an_unplanned_failure_mid_destage_stops_the_volume_and_loses_nothing`).
//! Write-through (no journal) has nothing to replay: a row whose data a
//! destage wrote before the failure and whose code it had not (a parity
//! cache writes them in separate steps) keeps stale code, the write hole
//! a journal closes, and its units on the failed member cannot be
//! rebuilt; the error says so.

use std::borrow::Cow;
use std::sync::OnceLock;

use parking_lot::Mutex;

use mosaic_core::cache::{KeyMap, Recipe, Widened};
use mosaic_core::{CacheConfig, CachePolicy, CachedArray, Phase, Program, Step};
use mosaic_exec::Client;

use crate::array::{Copied, Logged, Rider};
use crate::journal::Entry;
use crate::{Array, ArrayError};

/// An array behind the small-write caches.
pub struct CacheVolume {
    arr: Array,
    cache: Mutex<CachedArray>,
    write_back: bool,
    /// Pages (logical offset / unit) some logical journal record since the
    /// last checkpoint holds, with the newest such record's sequence
    /// number (write-back only).
    logged: Mutex<KeyMap<u64, u64>>,
    /// Why the volume stopped serving, once a step it planned could not
    /// run ([`CacheVolume::stop_on`]).
    stopped: OnceLock<String>,
}

impl CacheVolume {
    /// Put `cfg`'s caches in front of `arr`: write-back when the array has
    /// a journal (which must hold the caches many times over), otherwise
    /// write-through.
    pub fn new(arr: Array, cfg: CacheConfig) -> Result<CacheVolume, ArrayError> {
        let cache = CachedArray::new(&arr.layout(), cfg)?.with_bytes()?;
        // The cache holds newer code than the drives of the rows it
        // caches: a unit rebuilt from the drives' code would be wrong.
        arr.set_read_correction(false);
        let write_back = match arr.journal() {
            Some(j) => {
                let Some(need) = CacheVolume::journal_needed(&cfg) else {
                    return Err(ArrayError::Usage(format!(
                        "a write-back {} cache of {} + {} bytes needs a journal of 8 x their sum + 4 MiB, more than 2^64 bytes: give caches of at most {} bytes together",
                        cfg.policy.name(),
                        cfg.write_cache,
                        cfg.parity_cache,
                        (u64::MAX - (4 << 20)) / 8
                    )));
                };
                if j.capacity() < need {
                    return Err(ArrayError::Usage(format!(
                        "journal {} holds {} bytes; a write-back {} cache of {} + {} bytes needs at least {need} (8 x the caches + 4 MiB, room for every cached write's record and its destage): \
                         give smaller caches (--cache-size) or a larger journal (create --journal-size, or mosaic replace-journal)",
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
        Ok(CacheVolume { arr, cache: Mutex::new(cache), write_back, logged: Mutex::new(Default::default()), stopped: OnceLock::new() })
    }

    /// Journal bytes a write-back volume with `cfg`'s caches needs:
    /// between checkpoints (at half the ring) a write adds its logical
    /// record and destages (each at most about twice the write cache in
    /// records), and a checkpoint destages all; so 8 x (write cache +
    /// parity cache) + 4 MiB.  `None` when that is past `u64` (caches
    /// given in bytes may be anything up to 16 EiB each).
    pub fn journal_needed(cfg: &CacheConfig) -> Option<u64> {
        cfg.write_cache.checked_add(cfg.parity_cache)?.checked_mul(8)?.checked_add(4 << 20)
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

    /// Why the volume stopped serving, if it has: a destage, a journal
    /// record or the planning of either failed part-way (see the module
    /// docs).
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.get().map(String::as_str)
    }

    /// An error once the volume has stopped: why, and the way back.
    pub fn live(&self) -> Result<(), ArrayError> {
        let Some(why) = self.stopped.get() else { return Ok(()) };
        let journal_failed = self.arr.journal().is_some_and(|j| j.failed().is_some());
        let recover = if journal_failed {
            "the journal holds every acknowledged write, so keep its device: close the array and open it again once the journal device works, which replays it"
        } else if self.write_back {
            "the journal holds every acknowledged write: close the array and open it again, which replays it"
        } else {
            "without a journal, rows it was destaging may be left with stale code (the write hole a journal closes), so their units on the failed member may not be rebuilt: close the array, open it again and scrub it"
        };
        Err(ArrayError::Io(format!("the cache volume has stopped ({why}): what it holds no longer matches the members; {recover}")))
    }

    /// The cache, locked, of a volume that has not stopped.
    fn lock_live(&self) -> Result<parking_lot::MutexGuard<'_, CachedArray>, ArrayError> {
        let c = self.cache.lock();
        self.live()?;
        Ok(c)
    }

    /// `r`; an error stops the volume.  Planning a destage takes the pages
    /// it writes out of the cache and updates the policy's entries before
    /// any member sees it, so a destage, or a journal record, that fails
    /// part-way (an unplanned member failure, a journal device error)
    /// leaves the cache not matching the members, and a later read would
    /// return old bytes of an acknowledged write.  Every request after
    /// fails instead (close does not destage and leaves the journal), until
    /// the array is opened again: opening replays the journal.
    ///
    /// A write-through volume stopping first records what no journal will
    /// replay ([`CacheVolume::lose_stale_rows`]; `rows`: those of the steps
    /// that failed).
    fn stop_on<T>(&self, c: &CachedArray, rows: Vec<u64>, mut r: Result<T, ArrayError>) -> Result<T, ArrayError> {
        if let Err(e) = &r {
            let keeps_code = !self.write_back && c.config().policy != CachePolicy::None;
            if keeps_code && self.stopped.get().is_none() {
                if let Err(e2) = self.lose_stale_rows(c, rows) {
                    r = Err(ArrayError::Io(format!("{e}; recording the units it leaves lost failed too: {e2}")));
                }
            }
        }
        if let Err(e) = &r {
            let _ = self.stopped.set(e.to_string());
        }
        r
    }

    /// Run steps in order, each as the one program it lowers into (the
    /// code it keeps stored once it has run, nothing stored if it fails);
    /// `rider`, a write's logical record, goes in the first journal record
    /// they append.  A step on another row than the one before it runs
    /// beside it ([`Program::run_beside`]): a write that flushes one row's
    /// parity and destages a page of another logs both in one journal
    /// record, with the same device operations.
    fn exec(&self, c: &mut CachedArray, steps: Vec<Step>, rider: Option<&Rider<'_>>) -> Result<(), ArrayError> {
        let rows: Vec<u64> = if self.write_back { Vec::new() } else { steps.iter().map(|s| s.sp.stripe).collect() };
        let ran = self.exec_steps(c, steps, rider);
        self.stop_on(c, rows, ran)
    }

    /// A write-through volume stopping: no journal will replay what it was
    /// doing.  The rows of the steps that failed (their code was to stay
    /// in the cache) and every row whose code only the cache holds (a row
    /// whose flush could not be planned stays one) keep
    /// stale code on the drives, so their data units on failed members
    /// cannot be rebuilt: they are recorded lost (reads of them fail, as
    /// after a crash that takes a member), never rebuilt into wrong bytes.
    /// A write-back volume needs none of this: its journal's replay finds
    /// them ([`crate::lost`]).
    fn lose_stale_rows(&self, c: &CachedArray, mut rows: Vec<u64>) -> Result<(), ArrayError> {
        rows.extend(c.parity_rows());
        rows.sort_unstable();
        rows.dedup();
        let (h, geo) = (self.arr.health(), c.geometry());
        let lost: Vec<_> = rows.into_iter().flat_map(|stripe| crate::lost::units_out(geo, &h, stripe)).collect();
        self.arr.record_lost(&lost)
    }

    /// [`CacheVolume::exec`], without stopping the volume on an error.
    fn exec_steps(&self, c: &mut CachedArray, steps: Vec<Step>, rider: Option<&Rider<'_>>) -> Result<(), ArrayError> {
        const WHAT: &str = "a member failed while the cache was destaging; the array is degraded";
        let mut steps = steps.into_iter().peekable();
        while let Some(st) = steps.next() {
            let mut p = c.lower(&st, true)?;
            let (kept_mine, logged_mine) = (p.keep.len(), written(&p));
            let beside = match steps.peek() {
                // Lowered before `st` commits: a step's program depends on
                // its own row's cached code only.
                Some(next) if other_rows(&st, next) => {
                    let q = c.lower(next, true)?;
                    p.fits_beside(&q).then(|| p.run_beside(q)).and_then(|()| steps.next())
                }
                _ => None,
            };
            let mut copies = self.copies(c, &st);
            copies.extend(beside.iter().flat_map(|b| self.copies(c, b)));
            let all = written(&p);
            let split = [logged_mine, (all.0 - logged_mine.0, all.1 - logged_mine.1)];
            let how = Logged { copies: &copies, rider, steps: if beside.is_some() { &split } else { &[] } };
            let ran = self.arr.run_program_logged(&p, Client::None, how, WHAT);
            // The program's references to the cache's buffers go first, so
            // commit may store the new code over the old and the step's
            // pages be reused.
            drop(p);
            let kept = match ran {
                Ok(kept) => kept,
                Err(e) => {
                    c.abort(&st);
                    beside.iter().for_each(|b| c.abort(b));
                    return Err(e);
                }
            };
            let (a, b) = kept.split_at(kept_mine);
            let done = c.commit(&st, a);
            let done_beside = beside.as_ref().map_or(Ok(()), |s| c.commit(s, b));
            self.arr.give_back(kept);
            done?;
            done_beside?;
            c.recycle(st);
            if let Some(s) = beside {
                c.recycle(s);
            }
        }
        Ok(())
    }

    /// The data pages a destage step writes whose bytes a logical journal
    /// record since the last checkpoint holds (every cached page: it was
    /// logged before it was cached, and each write of it logs it again):
    /// the journal logs their writes as copies of those bytes.
    fn copies(&self, c: &CachedArray, st: &Step) -> Vec<Copied> {
        let Recipe::Parity { stripe, pages, .. } = &st.recipe else { return Vec::new() };
        if !self.write_back || pages.is_empty() {
            return Vec::new();
        }
        let geo = c.geometry();
        let logged = self.logged.lock();
        let first = stripe * geo.k as u64;
        pages
            .iter()
            .filter_map(|&(col, _)| {
                let page = first + col as u64;
                let seq = *logged.get(&page)?;
                Some((geo.member_of(*stripe, col), geo.offset_of(*stripe, col), seq, page * geo.unit))
            })
            .collect()
    }

    /// Destage everything, as [`CachedArray::flush_steps`] plans it, each
    /// row's steps run before the next row is planned
    /// ([`CachedArray::flush_each`]): a checkpoint then holds one row's
    /// steps, not the whole cache's (a vector of hundreds of steps, built
    /// and dropped at every checkpoint).
    fn destage_all(&self, c: &mut CachedArray) -> Result<(), ArrayError> {
        let h = self.arr.health();
        // Planning a row's flush may fail too (its partial parity cannot
        // be completed without a failed member's unit): the cache no
        // longer matches the members, so the volume stops.
        let r = c.flush_each(&h, |c, steps| self.exec(c, steps, None));
        self.stop_on(c, Vec::new(), r)
    }

    /// Read into `buf`: the policy's ranges from the members (the parts
    /// not cached, after flushing stale parity of degraded rows), the
    /// cached pages from the cache.
    fn read_locked(&self, c: &mut CachedArray, offset: u64, buf: &mut [u8]) -> Result<(), ArrayError> {
        let epoch = self.arr.health_epoch();
        let h = self.arr.health();
        let geo = c.geometry().clone();
        let exts = geo.split(offset, buf.len() as u64);
        let planned = c.read_steps(offset, buf.len() as u64, &h).map_err(ArrayError::from);
        let r = self.stop_on(c, Vec::new(), planned)?;
        self.exec(c, r.flush, None)?;
        for (o, l) in r.ranges {
            let at = (o - offset) as usize;
            self.arr.read(o, &mut buf[at..at + l as usize])?;
        }
        // A member that failed during these reads had its units rebuilt by
        // the array from the code on the drives, stale where the cache holds
        // a row's code: read again, planned with the new health, which
        // flushes the cached code of degraded rows first (or stops).
        if self.arr.health_epoch() != epoch {
            return self.read_locked(c, offset, buf);
        }
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
        let mut c = self.lock_live()?;
        self.read_locked(&mut c, offset, buf)
    }

    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), ArrayError> {
        self.arr.check_writable()?;
        let len = data.len() as u64;
        self.arr.layout().planner.check(offset, len)?;
        self.arr.mark_dirty()?;
        let mut c = self.lock_live()?;
        let unit = c.geometry().unit;
        let w = c.widen(offset, len);
        let (lo, hi) = (w.offset, w.offset + w.len);
        let page_bytes = self.page_bytes(&mut c, &w, offset, data)?;
        let bypass = w.len / unit > c.config().write_cache / unit;
        let cached = self.cache_pages(&mut c, lo, hi, &page_bytes, bypass);
        self.stop_on(&c, Vec::new(), cached)?;
        drop(c);
        self.arr.written_whole(offset, len)
    }

    /// Put a widened write's pages `[lo, hi)` in the cache: log them
    /// (write-back), plan and run the steps that make room, and destage
    /// everything (write-through).  From here on the cache changes, so
    /// the caller stops the volume on an error.
    fn cache_pages(&self, c: &mut CachedArray, lo: u64, hi: u64, page_bytes: &[u8], bypass: bool) -> Result<(), ArrayError> {
        let unit = c.geometry().unit;
        let rider = if self.write_back { self.log_write(c, lo, page_bytes, bypass)? } else { None };
        let h = self.arr.health();
        let steps = c.write_steps(lo, hi - lo, Some(page_bytes), &h)?;
        let ran = self.exec(c, steps, rider.as_ref());
        if let Some(r) = &rider {
            self.logged_in(r, unit, ran.is_ok())?;
        }
        ran?;
        if !self.write_back {
            self.destage_all(c)?;
        }
        Ok(())
    }

    /// The whole pages of a write widened by the policy: the rest of a
    /// partly written page from the cache or, as the policy planned, from
    /// the members (its fills); then the write's bytes.  A write of whole
    /// pages is its own bytes (no copy).
    fn page_bytes<'d>(&self, c: &mut CachedArray, w: &Widened, offset: u64, data: &'d [u8]) -> Result<Cow<'d, [u8]>, ArrayError> {
        let lo = w.offset;
        if offset == lo && data.len() as u64 == w.len {
            return Ok(Cow::Borrowed(data));
        }
        let mut b = vec![0u8; w.len as usize];
        {
            let geo = c.geometry().clone();
            for at in [lo, lo + w.len - geo.unit] {
                let e = geo.split(at, geo.unit);
                if let Some(p) = e.first().and_then(|e| e.cols.first().and_then(|col| c.cached_page(e.stripe, col.col))) {
                    let i = (at - lo) as usize;
                    b[i..i + p.len()].copy_from_slice(p);
                }
            }
            for &(o, l) in &w.fills {
                let i = (o - lo) as usize;
                self.read_locked(c, o, &mut b[i..i + l as usize])?;
            }
        }
        let i = (offset - lo) as usize;
        b[i..i + data.len()].copy_from_slice(data);
        Ok(Cow::Owned(b))
    }

    /// Write-back bookkeeping before a write's pages reach the cache: keep
    /// the journal under half full (a checkpoint destages everything first:
    /// nothing cached may depend on a record it drops), and return the
    /// write's logical entry as a [`Rider`] of the records its destage
    /// steps append ([`CacheVolume::logged_in`]).  Until that record is
    /// written its pages count as logged nowhere, so a step that destages
    /// one logs its bytes (a copy must name an earlier record).  A write
    /// that bypasses the cache goes to the members as journaled steps;
    /// replay applies logical records after member records, so the pages
    /// of its range that an earlier logical record holds are logged again
    /// with the new bytes, and replay ends with them.
    fn log_write<'d>(&self, c: &mut CachedArray, lo: u64, pages: &'d [u8], bypass: bool) -> Result<Option<Rider<'d>>, ArrayError> {
        let Some(j) = self.arr.journal() else { return Ok(None) };
        let unit = c.geometry().unit;
        let geo = c.geometry();
        let steps_bytes = if bypass { pages.len() as u64 / geo.k as u64 * (geo.k + geo.m) as u64 + (pages.len() as u64 / unit + 1) * 4096 } else { 0 };
        // By the bytes the records would take had their copies carried
        // them: the checkpoints (and their destages) fall where they did
        // before copies.
        if j.used_expanded() + 2 * steps_bytes > j.capacity() / 2 {
            self.destage_all(c)?;
            self.arr.journal_checkpoint()?;
            self.logged.lock().clear();
        }
        let mut logged = self.logged.lock();
        if bypass {
            return self.relog(&mut logged, unit, lo, pages).map(|_| None);
        }
        for p in lo / unit..(lo + pages.len() as u64) / unit {
            logged.remove(&p);
        }
        Ok(Some(Rider { offset: lo, data: pages, seq: Default::default() }))
    }

    /// After a write's steps ran: its pages are logged in the record that
    /// carried its logical entry.  When no step appended a record (nothing
    /// destaged, or no journaled write) the entry is logged alone now.  A
    /// failed run that appended none leaves the pages logged nowhere:
    /// the write failed, and a later destage of them logs their bytes.
    fn logged_in(&self, r: &Rider<'_>, unit: u64, ran: bool) -> Result<(), ArrayError> {
        let seq = match r.seq.get() {
            Some(&seq) => seq,
            None if ran => self.arr.journal_entries(&[Entry::Logical { offset: r.offset, data: r.data }])?,
            None => return Ok(()),
        };
        self.logged.lock().extend((r.offset / unit..(r.offset + r.data.len() as u64) / unit).map(|p| (p, seq)));
        Ok(())
    }

    /// Log again, with their new bytes, the runs of a bypassing write's
    /// pages that an earlier logical record holds.
    fn relog(&self, logged: &mut KeyMap<u64, u64>, unit: u64, lo: u64, pages: &[u8]) -> Result<(), ArrayError> {
        let first = lo / unit;
        let n = pages.len() as u64 / unit;
        let mut p = first;
        while p < first + n {
            if !logged.contains_key(&p) {
                p += 1;
                continue;
            }
            let start = p;
            while p < first + n && logged.contains_key(&p) {
                p += 1;
            }
            let (a, b) = (((start - first) * unit) as usize, ((p - first) * unit) as usize);
            let seq = self.arr.journal_entries(&[Entry::Logical { offset: start * unit, data: &pages[a..b] }])?;
            (start..p).for_each(|q| {
                logged.insert(q, seq);
            });
        }
        Ok(())
    }

    /// Completed writes durable: in the journal (write-back) or on the
    /// members (write-through); members flushed either way.
    pub fn flush(&self) -> Result<(), ArrayError> {
        self.live()?;
        self.arr.flush()
    }

    /// Destage everything (parity current on the drives) and flush.
    pub fn sync(&self) -> Result<(), ArrayError> {
        self.destage()?;
        self.arr.flush()
    }

    /// Destage every cached row and parity entry (the very steps of
    /// [`CachedArray::flush_steps`], which a simulated replay's final
    /// destage runs), without the flush.
    pub fn destage(&self) -> Result<(), ArrayError> {
        let mut c = self.lock_live()?;
        self.destage_all(&mut c)
    }

    /// Run `f` on the array with the cache destaged and the journal
    /// emptied, the cache held meanwhile (no write enters): a member's
    /// replacement, whose slot records from before its failure may name
    /// (replayed after a crash, they would write their old bytes over what
    /// the rebuild put on the new device).
    pub fn quiesced<T>(&self, f: impl FnOnce(&Array) -> T) -> Result<T, ArrayError> {
        let mut c = self.lock_live()?;
        self.destage_all(&mut c)?;
        self.stop_on(&c, Vec::new(), self.arr.journal_checkpoint())?;
        self.logged.lock().clear();
        Ok(f(&self.arr))
    }

    /// Planned removal: destage everything, then fail the member.
    pub fn fail_member(&self, idx: usize) -> Result<(), ArrayError> {
        let mut c = self.lock_live()?;
        self.destage_all(&mut c)?;
        self.arr.fail_member(idx)
    }

    /// Destage everything and close the array clean.  A stopped volume
    /// refuses, and dropping it leaves the journal for the next open.
    pub fn close(&self) -> Result<(), ArrayError> {
        let mut c = self.lock_live()?;
        if self.arr.is_writable() {
            self.destage_all(&mut c)?;
            self.stop_on(&c, Vec::new(), self.arr.journal_checkpoint())?;
            self.logged.lock().clear();
        }
        self.arr.close()
    }
}

/// The write operations and marks of `p`'s journaled phases.
fn written(p: &Program) -> (usize, usize) {
    p.phases.iter().fold((0, 0), |(w, m), ph| match ph {
        Phase::Write { ops, journal: true, marks } => (w + ops.len(), m + marks.len()),
        _ => (w, m),
    })
}

/// Whether `a` and `b` are parity steps of different rows: `b` may be
/// lowered before `a` has run, and run beside it.
fn other_rows(a: &Step, b: &Step) -> bool {
    matches!((&a.recipe, &b.recipe), (Recipe::Parity { stripe: x, .. }, Recipe::Parity { stripe: y, .. }) if x != y)
}

impl Drop for CacheVolume {
    /// Close: destage everything first.  If that fails, leave the journal
    /// as it is for the next open to replay (the array's own close would
    /// empty it, losing what the cache held).
    fn drop(&mut self) {
        if self.close().is_err() {
            self.arr.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CreateOptions;
    use mosaic_core::Level;
    use mosaic_dev::{MemMember, Member};
    use std::sync::Arc;

    /// raid5 4+1 on small RAM members, with a 16 MiB RAM journal or none.
    fn raid5(journal: bool) -> Array {
        let size = crate::DATA_OFFSET + (256 << 10);
        let mems = (0..5).map(|i| (Arc::new(MemMember::new(format!("m{i}"), size)) as Arc<dyn Member>, format!("mem{i}"))).collect();
        let o = CreateOptions { level: Level::Raid5, members: Some(5), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
        let j = journal.then(|| (Arc::new(MemMember::new("journal", 16 << 20)) as Arc<dyn Member>, "mem-journal".to_string()));
        Array::create_with_journal(mems, &o, true, j).unwrap()
    }

    /// Caches of an exabyte and more: the journal they would need, 8 x
    /// (write cache + parity cache) + 4 MiB, is past 2^64 bytes.  It
    /// overflowed (a panic with overflow checks, else a wrap to a few MiB
    /// that a 16 MiB journal passed, taking a 1 EiB write-back cache); now
    /// it is a usage error that says so and names the limit.  Without a
    /// journal nothing is sized from them: the write-through volume works.
    #[test]
    fn cached_huge_cache_sizes_are_refused_for_write_back_not_overflowed() {
        assert_eq!(CacheVolume::journal_needed(&CacheConfig::uniform(CachePolicy::Ppc, 1 << 20)), Some(20 << 20));
        for bytes in [1 << 60, u64::MAX / 2, u64::MAX] {
            assert_eq!(CacheVolume::journal_needed(&CacheConfig::uniform(CachePolicy::PpcData, bytes)), None, "{bytes}");
            let e = CacheVolume::new(raid5(true), CacheConfig::uniform(CachePolicy::PpcData, bytes)).err().expect("refused");
            assert!(matches!(e, ArrayError::Usage(_)), "{e:?}");
            let e = e.to_string();
            assert!(e.contains(&format!("ppc+data cache of {bytes} + {bytes} bytes")) && e.contains("more than 2^64 bytes") && e.contains("at most 2305843009213169663 bytes"), "{e}");
        }
        let v = CacheVolume::new(raid5(false), CacheConfig::uniform(CachePolicy::PpcData, u64::MAX)).unwrap();
        v.write(8192, &[7u8; 4096]).unwrap();
        let mut b = vec![0u8; 4096];
        v.read(8192, &mut b).unwrap();
        assert_eq!(b, vec![7u8; 4096]);
    }
}
