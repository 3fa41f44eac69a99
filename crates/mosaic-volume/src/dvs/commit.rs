//! Group commit of a DVS volume's writes.
//!
//! A journalled DVS write is durable once its journal record is written
//! and flushed on the journal's k + 1 members.  Writers that arrive while
//! another holds the array queue here; the first becomes the leader,
//! takes every write waiting, and hands them to
//! [`mosaic_dvs::DvsArray::write_prepared`] as one group: one journal write
//! and one flush per journal member for all of them (the pattern of
//! `mosaic_map::map::BlockMap::commit`).  A writer returns once the group
//! holding its write is durable, or with that group's error.  Alone (queue
//! depth 1) a group holds one write, which is exactly `DvsArray::write`.
//! Each writer prepares its write before it queues, on its own core: it
//! copies a whole block's bytes into a cache block buffer too (which the
//! cache then holds as it is) and takes the bytes' checksum (which the
//! leader joins to the record's header): neither the copy into the cache
//! nor a pass over the bytes for the checksum is on the group's path (the
//! same records, the same cached bytes).
//!
//! ```text
//!   write ──> checksum; a whole block put in a block buffer too
//!         ──> queue (bytes appended to a reused buffer) ──> leading? ── no: lead
//!                                                           └─ yes: poll a moment, yielding
//!                                                                  (one of two writers), then
//!                                                                  park until told
//!   lead: take every write waiting, write_prepared, hand leadership to the
//!         first write waiting since (unpark it as leader) or, if none waits,
//!         give it up; then tell each write of the group its result (unpark)
//! ```
//!
//! Each waiting writer is woken exactly once: as done or as the next
//! leader; a group's completion wakes none of the writers still queued.

use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use mosaic_dvs::{DvsError, Prepared};
use mosaic_format::frame::checksum;

/// The machine's cores, read once.
static CORES: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| std::thread::available_parallelism().map_or(1, |n| n.get()));

/// Whether a waiting writer, one of `writers`, polls before it sleeps
/// (see [`SPIN`]): only one of two, with a core for each.
fn polls(writers: usize, cores: usize) -> bool {
    writers <= 2 && cores > 1
}

/// A waiter's state: still queued, told to lead, or done.
const WAITING: u8 = 0;
const LEAD: u8 = 1;
const DONE: u8 = 2;

/// How long a waiting writer polls before it sleeps, when there are two
/// writers.  With one writer waiting and one leading, polling saves the
/// futex round trip of every group (2 writers: 156k -> 176k writes a
/// second in `bench dvs`).  Each poll yields the core: two writers and
/// the destager are three threads on two cores, and a poller that only
/// spun kept the leader or the destager off the one it shared (yielding:
/// 0.41-0.46 -> 0.46-0.49 of raid5 at 2 writers, ahead in 11 rounds of 11).
/// With more writers, waiters sleep at once: pollers would take the cores
/// the leader and the destager need (4 and 8 writers lost 10 % when every
/// waiter spun, 8 % when the first waiter of each group did, and 8 writers
/// 20 % when every waiter polled yielding).
const SPIN: Duration = Duration::from_micros(15);

/// One parked writer.
struct Waiter {
    thread: Thread,
    state: AtomicU8,
    /// Its group's error, set before `state` becomes DONE.
    error: OnceLock<String>,
}

impl Waiter {
    fn new() -> Arc<Waiter> {
        Arc::new(Waiter { thread: std::thread::current(), state: AtomicU8::new(WAITING), error: OnceLock::new() })
    }

    /// Set the state and wake the writer (never the caller itself).
    fn tell(&self, state: u8) {
        self.state.store(state, Ordering::Release);
        if self.thread.id() != std::thread::current().id() {
            self.thread.unpark();
        }
    }

    /// Park until told something other than WAITING.
    /// First, when `spin`, poll for up to [`SPIN`], yielding the core
    /// between looks: a group takes a few microseconds, less than a sleep
    /// and a wake-up.
    fn park(&self, spin: bool) -> u8 {
        let until = spin.then(|| Instant::now() + SPIN);
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s != WAITING {
                return s;
            }
            if until.is_some_and(|u| Instant::now() < u) {
                // Another thread runnable on this core runs first.
                std::thread::yield_now();
                continue;
            }
            std::thread::park();
        }
    }
}

/// A write waiting: its offset, its bytes' range in the group's buffer,
/// their checksum, the cache block buffer its writer filled with them
/// (when it is one block), its writer.
struct Pending {
    offset: u64,
    at: Range<usize>,
    sum: u32,
    block: Option<Arc<[u8]>>,
    waiter: Arc<Waiter>,
}

impl Pending {
    /// The write as the leader hands it on; `bytes` is the group's buffer.
    fn prepared<'b>(&'b self, bytes: &'b [u8]) -> Prepared<'b> {
        Prepared { offset: self.offset, data: &bytes[self.at.clone()], sum: Some(self.sum), block: self.block.clone() }
    }
}

/// Writes waiting for a leader, in arrival order, and their bytes; the
/// byte buffer of the last group, kept to be reused (no allocation per
/// write: a writer's bytes are copied once, into `bytes`).
#[derive(Default)]
struct Queue {
    waiting: Vec<Pending>,
    bytes: Vec<u8>,
    spare: Vec<u8>,
    leading: bool,
}

/// The group-commit queue of one volume.
pub(crate) struct Commits {
    queue: Mutex<Queue>,
    /// Writers inside [`Commits::write`].
    writers: AtomicUsize,
}

/// What a leader writes a group through.
type Run<'r> = &'r dyn Fn(&[Prepared<'_>]) -> Result<(), DvsError>;

/// What puts a write's bytes in a cache block buffer, when it can.
type Block<'r> = &'r dyn Fn(u64, &[u8]) -> Option<Arc<[u8]>>;

impl Commits {
    pub(crate) fn new() -> Commits {
        Commits { queue: Mutex::new(Queue::default()), writers: AtomicUsize::new(0) }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Make `data` at `offset` durable through `run` (called by whichever
    /// writer leads, with every write waiting then, in arrival order);
    /// `block` puts the bytes in a cache block buffer first, when it can.
    pub(crate) fn write(&self, offset: u64, data: &[u8], block: Block<'_>, run: Run<'_>) -> Result<(), DvsError> {
        let writers = self.writers.fetch_add(1, Ordering::Relaxed) + 1;
        let r = self.write_counted(offset, data, block, run, writers);
        self.writers.fetch_sub(1, Ordering::Relaxed);
        r
    }

    /// [`Commits::write`], one of `writers` writers.
    fn write_counted(&self, offset: u64, data: &[u8], block: Block<'_>, run: Run<'_>, writers: usize) -> Result<(), DvsError> {
        let me = Waiter::new();
        let block = block(offset, data);
        let sum = checksum(data);
        let mut q = self.lock();
        let start = q.bytes.len();
        q.bytes.extend_from_slice(data);
        let at = start..q.bytes.len();
        q.waiting.push(Pending { offset, at, sum, block, waiter: me.clone() });
        let lead = !q.leading;
        q.leading = true;
        // Poll only as one of two writers (the other leads), on a machine
        // with a core for the leader besides this one.
        let spin = polls(writers, *CORES);
        drop(q);
        if lead || me.park(spin) == LEAD {
            self.lead(run);
        }
        match me.error.get() {
            Some(e) => Err(DvsError::Other(e.clone())),
            None => Ok(()),
        }
    }

    /// As leader: write every waiting write as one group, pass leadership
    /// on, and tell each writer of the group its result.
    fn lead(&self, run: Run<'_>) {
        let (group, bytes) = self.take();
        let writes: Vec<Prepared<'_>> = group.iter().map(|w| w.prepared(&bytes)).collect();
        let r = catch_unwind(AssertUnwindSafe(|| run(&writes)));
        let r = r.unwrap_or_else(|_| Err(DvsError::Other("the group's leader panicked".into())));
        drop(writes);
        let error = r.err().map(|e| e.to_string());
        let group = self.pass_on(group, bytes);
        for w in group {
            if let Some(e) = &error {
                let _ = w.waiter.error.set(e.clone());
            }
            w.waiter.tell(DONE);
        }
    }

    /// The writes waiting, and their bytes (the queue starts on the spare).
    fn take(&self) -> (Vec<Pending>, Vec<u8>) {
        let mut q = self.lock();
        let spare = std::mem::take(&mut q.spare);
        let bytes = std::mem::replace(&mut q.bytes, spare);
        (std::mem::take(&mut q.waiting), bytes)
    }

    /// Keep a done group's bytes as the spare; hand leadership to the first
    /// write waiting (before the group's writers are woken: the next group
    /// starts at once), or give it up if none is.
    fn pass_on(&self, group: Vec<Pending>, mut bytes: Vec<u8>) -> Vec<Pending> {
        bytes.clear();
        let mut q = self.lock();
        q.spare = bytes;
        let next = q.waiting.first().map(|w| w.waiter.clone());
        q.leading = next.is_some();
        drop(q);
        if let Some(w) = next {
            w.tell(LEAD);
        }
        group
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// No write put in a block buffer.
    const NONE: Block<'static> = &|_, _| None;

    /// Eight writers arrive while the first group is being written: they
    /// all go out together in the second; a group's error reaches every
    /// writer in it.
    #[test]
    fn writers_that_meet_share_one_group_and_its_error() {
        let c = Commits::new();
        let arrived = AtomicUsize::new(0);
        let groups: Mutex<Vec<Vec<u64>>> = Mutex::new(Vec::new());
        let run = |g: &[Prepared<'_>]| -> Result<(), DvsError> {
            let first = groups.lock().unwrap().is_empty();
            groups.lock().unwrap().push(g.iter().map(|w| w.offset).collect());
            if first {
                // Hold the first group until every writer has queued.
                while arrived.load(Ordering::SeqCst) < 8 {
                    std::thread::yield_now();
                }
                std::thread::sleep(Duration::from_millis(200));
                return Ok(());
            }
            if g.iter().any(|w| w.data[0] == 9) {
                return Err(DvsError::Other("power cut".into()));
            }
            Ok(())
        };
        let results: Vec<Result<(), DvsError>> = std::thread::scope(|s| {
            let first = s.spawn(|| {
                arrived.fetch_add(1, Ordering::SeqCst);
                c.write(0, &[1], NONE, &run)
            });
            while groups.lock().unwrap().is_empty() {
                std::thread::yield_now();
            }
            let rest: Vec<_> = (1..8u64)
                .map(|i| {
                    let (c, run, arrived) = (&c, &run, &arrived);
                    s.spawn(move || {
                        arrived.fetch_add(1, Ordering::SeqCst);
                        c.write(i * 512, &[if i == 5 { 9 } else { 1 }], NONE, run)
                    })
                })
                .collect();
            std::iter::once(first).chain(rest).map(|h| h.join().unwrap()).collect()
        });
        let g = groups.into_inner().unwrap();
        assert_eq!(g.len(), 2, "{g:?}");
        assert_eq!(g[0], vec![0]);
        let mut second = g[1].clone();
        second.sort_unstable();
        assert_eq!(second, (1..8u64).map(|i| i * 512).collect::<Vec<_>>());
        assert!(results[0].is_ok());
        for r in &results[1..] {
            assert!(r.as_ref().unwrap_err().to_string().contains("power cut"));
        }
        // Alone, a writer is its own group.
        c.write(4096, &[1], NONE, &|g| {
            assert_eq!(g.len(), 1);
            Ok(())
        })
        .unwrap();
    }

    /// Groups held at will: group n (from 1) runs once `open >= n`.
    struct Gate {
        open: Mutex<usize>,
        wake: std::sync::Condvar,
        groups: Mutex<Vec<Vec<(u64, Vec<u8>)>>>,
    }

    impl Gate {
        fn run(&self, g: &[Prepared<'_>]) -> Result<(), DvsError> {
            let n = {
                let mut groups = self.groups.lock().unwrap();
                groups.push(g.iter().map(|w| (w.offset, w.data.to_vec())).collect());
                groups.len()
            };
            let mut open = self.open.lock().unwrap();
            while *open < n {
                open = self.wake.wait(open).unwrap();
            }
            if n == 2 {
                return Err(DvsError::Other("group two failed".into()));
            }
            Ok(())
        }
        fn open(&self, n: usize) {
            *self.open.lock().unwrap() = n;
            self.wake.notify_all();
        }
        fn started(&self, n: usize) {
            while self.groups.lock().unwrap().len() < n {
                std::thread::yield_now();
            }
        }
    }

    fn queued(c: &Commits, n: usize) {
        while c.lock().waiting.len() < n {
            std::thread::yield_now();
        }
    }

    /// Three groups in turn: each writer gets exactly its own bytes to the
    /// leader, returns only once its group is done (none while it is held,
    /// every one after), and only the writers of the failing group see its
    /// error; leadership passes to the first write waiting, then is given up.
    #[test]
    fn a_writer_returns_with_its_group_and_only_its_groups_error() {
        let c = Commits::new();
        let gate = Gate { open: Mutex::new(0), wake: std::sync::Condvar::new(), groups: Mutex::new(Vec::new()) };
        let returned: Vec<AtomicUsize> = (0..6).map(|_| AtomicUsize::new(0)).collect();
        let data = |i: u64| vec![i as u8 + 1; 512 * (i as usize + 1)];
        let results: Vec<Result<(), DvsError>> = std::thread::scope(|s| {
            let spawn = |i: u64| {
                let (c, gate, returned) = (&c, &gate, &returned);
                s.spawn(move || {
                    let r = c.write(i * 4096, &data(i), NONE, &|g| gate.run(g));
                    returned[i as usize].store(1, Ordering::SeqCst);
                    r
                })
            };
            let mut hs = vec![spawn(0)];
            gate.started(1);
            hs.extend((1..4).map(|i| {
                let h = spawn(i);
                queued(&c, i as usize);
                h
            }));
            assert!(returned.iter().all(|r| r.load(Ordering::SeqCst) == 0));
            gate.open(1);
            gate.started(2);
            hs.extend((4..6).map(|i| {
                let h = spawn(i);
                queued(&c, i as usize - 3);
                h
            }));
            while returned[0].load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            assert!(returned[1..].iter().all(|r| r.load(Ordering::SeqCst) == 0), "group two is held");
            gate.open(3);
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let groups = gate.groups.into_inner().unwrap();
        let expect = |ids: &[u64]| ids.iter().map(|&i| (i * 4096, data(i))).collect::<Vec<_>>();
        assert_eq!(groups, vec![expect(&[0]), expect(&[1, 2, 3]), expect(&[4, 5])]);
        let failed: Vec<bool> = results.iter().map(|r| r.is_err()).collect();
        assert_eq!(failed, vec![false, true, true, true, false, false]);
        assert!(results[2].as_ref().unwrap_err().to_string().contains("group two failed"));
        let q = c.lock();
        assert!(!q.leading && q.waiting.is_empty() && q.bytes.is_empty());
    }

    /// Two writers: the waiting one polls (for [`SPIN`]), then sleeps,
    /// and is woken to lead either way; more writers sleep at once.
    /// Every write goes out in exactly one group, and the count of
    /// writers inside comes back to zero.
    #[test]
    fn a_lone_waiter_polls_then_sleeps_and_is_woken_either_way() {
        assert!(polls(2, 2) && polls(1, 2));
        assert!(!polls(3, 2) && !polls(8, 64) && !polls(2, 1));
        // Held far past the poll: the waiter sleeps, and leads next.
        let c = Commits::new();
        let gate = Gate { open: Mutex::new(0), wake: std::sync::Condvar::new(), groups: Mutex::new(Vec::new()) };
        let results: Vec<Result<(), DvsError>> = std::thread::scope(|s| {
            let a = s.spawn(|| c.write(0, &[1], NONE, &|g| gate.run(g)));
            gate.started(1);
            let b = s.spawn(|| c.write(512, &[2], NONE, &|g| gate.run(g)));
            queued(&c, 1);
            std::thread::sleep(SPIN * 100);
            gate.open(3);
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        assert_eq!(gate.groups.into_inner().unwrap(), vec![vec![(0, vec![1])], vec![(512, vec![2])]]);
        assert!(results[0].is_ok() && results[1].is_err(), "{results:?}");
        // Groups shorter than the poll, many times over.
        let written = AtomicUsize::new(0);
        let run = |g: &[Prepared<'_>]| -> Result<(), DvsError> {
            written.fetch_add(g.len(), Ordering::SeqCst);
            Ok(())
        };
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (c, run) = (&c, &run);
                s.spawn(move || (0..2000u64).for_each(|i| c.write(t * 1_000_000 + i * 512, &[1], NONE, run).unwrap()));
            }
        });
        assert_eq!(written.load(Ordering::SeqCst), 4000);
        assert_eq!(c.writers.load(Ordering::SeqCst), 0);
        let q = c.lock();
        assert!(!q.leading && q.waiting.is_empty());
    }

    /// A write its writer put in a block buffer reaches the leader with
    /// that buffer and its bytes; one it did not, with its bytes alone;
    /// both with their checksums.
    #[test]
    fn a_writers_block_buffer_reaches_the_leader_with_its_bytes() {
        let c = Commits::new();
        let filled: Block<'_> = &|o, d| (o == 4096).then(|| Arc::from(d));
        for (offset, fill) in [(4096u64, true), (8192, false)] {
            c.write(offset, &[offset as u8 + 3; 16], filled, &|g| {
                let w = &g[0];
                assert_eq!((g.len(), w.offset, w.data, w.sum), (1, offset, &[offset as u8 + 3; 16][..], Some(checksum(&[offset as u8 + 3; 16]))));
                assert_eq!(w.block.as_deref(), fill.then_some(w.data));
                Ok(())
            })
            .unwrap();
        }
    }

    /// A leader that panics fails its group instead of leaving its
    /// followers parked, and the queue is led again after it.
    #[test]
    fn a_panicking_leader_fails_its_group_and_passes_on() {
        let c = Commits::new();
        let e = c.write(0, &[1], NONE, &|_| panic!("a bug below")).unwrap_err().to_string();
        assert!(e.contains("panicked"), "{e}");
        c.write(0, &[1], NONE, &|g| {
            assert_eq!((g.len(), g[0].offset, g[0].data, g[0].sum, g[0].block.is_none()), (1, 0, &[1u8][..], Some(checksum(&[1])), true));
            Ok(())
        })
        .unwrap();
    }
}
