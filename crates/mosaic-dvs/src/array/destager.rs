//! The destager: one background thread of an array that runs its destage
//! and GC programs, so a journalled write returns once its record is
//! durable instead of waiting for the SSG rewrite it triggered.
//!
//! ```text
//!   writer (holds &mut DvsArray)                  destager thread
//!   ────────────────────────────                  ───────────────
//!   journal record written + flushed ──┐  (beside the programs: the
//!   cache_write ──> engine job         │   journal area is no job's)
//!     plan: engine state, log record,  │
//!           lowering into program n    │
//!     start(n) ──> queue [.., n-1, n] ──────────> run the oldest program:
//!   return (write acknowledged)                   fills, appends, flush,
//!   next writes: journal + cache only             its log record, resets
//!   ring retirement: its log record ──> queue [.., n, r]   (ticket r)
//!   a record into a segment r frees ── wait_for(r): r and those before it
//!   read / log / checkpoint / whole-journal reset /
//!   labels / rebuild / scrub / flush ── wait() until the queue is empty
//! ```
//!
//! Programs run one at a time in the order they were planned, so zone
//! write pointers advance as they would inline; a job is planned from
//! the engine's tables, never the drives', so it may be planned while
//! those before it run (a degraded array, whose zone resets depend on
//! write pointers, waits first).  Every other program of the array
//! waits for the queue to empty ([`Destager::wait`]), so a read never
//! sees a home not yet written, and log records stay in sequence.  A
//! ring journal's retirement is itself a program on the queue (its log
//! record, planned after the destages that killed its records, runs
//! after them): the writer waits for it ([`Destager::wait_for`] its
//! ticket) only before writing a record into a segment it frees.  A program that fails leaves its error here and
//! drops the programs queued behind it (they were planned on top of
//! it): every later request sees the error (the array is poisoned).
//! Except a fill read a member cannot do (a bad sector): the job is
//! lowered again with that fill decoded from its stripe and run in its
//! place (`correct::Relower`), the member's read noted for the array to
//! count ([`Destager::take_read_errors`]).

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use mosaic_core::Program;
use mosaic_ec::Code;
use mosaic_exec::{Client, ExecError, Executor};

use super::correct::Relower;
use crate::addr::Geo;
use crate::engine::JobKind;
use crate::tables::Stripe;
use crate::DvsError;

/// Fill reads the destager decoded: the member of each failed read, and
/// each decoded fill's old stripe (SSG, segment, row, the member that
/// could not read it), whose other chunks still lean on that column.
#[derive(Default)]
pub(super) struct Decoded {
    pub members: Vec<usize>,
    pub stripes: Vec<(u32, u32, Stripe, usize)>,
}

/// A queued program: its job's kind (None: a log record), and what it was
/// lowered from, to lower it again when a fill read fails.
type Queued = (Program, Option<JobKind>, Option<Box<Relower>>);

/// Programs handed over and not yet started, at most (a writer that
/// plans faster than the members take them waits for room).
const QUEUED: usize = 3;

/// What the thread and the array share.
#[derive(Default)]
struct State {
    /// Programs handed over and not yet taken by the thread, in order,
    /// with the kind of their job (None: a log record, e.g. a journal
    /// retirement).
    queue: VecDeque<Queued>,
    /// Programs handed over, and programs completed (each program's
    /// ticket is the count handed over once it was).
    handed: u64,
    done: u64,
    /// The thread is running a program.
    busy: bool,
    /// The first program that failed: its job kind, its error, and what
    /// would mend the array (sticky).
    failed: Option<(Option<JobKind>, String, Option<super::failing::Cause>)>,
    /// The error not yet returned by `wait`.
    error: Option<DvsError>,
    quit: bool,
    /// The thread waits on `work`; this many callers wait on `done`
    /// (each is only notified when someone waits: a notify is a syscall).
    idle: bool,
    waiting: usize,
    /// Whether the thread runs ahead of the writers ([`ahead_of_writers`];
    /// None until it has started).
    ahead: Option<bool>,
    /// What fill reads failed and were decoded from the others, for the
    /// array to count and to finish.
    read_errors: Decoded,
}

struct Shared {
    state: Mutex<State>,
    /// Work queued or quit: wakes the thread only.
    work: Condvar,
    /// A program taken (room in the queue) or completed: wakes callers only.
    done: Condvar,
    exec: Arc<Executor>,
    /// The array's geometry and code, to lower a job again.
    lower: Option<(Geo, Code)>,
    /// `read_errors` is not empty (read without the lock, on every write:
    /// on a line of its own, which only a decoded fill writes).
    errors: OwnLine,
}

/// An `AtomicBool` alone on its cache line.
#[repr(align(64))]
#[derive(Default)]
struct OwnLine(AtomicBool);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `p`; when a fill read fails and `again` can lower its job
    /// without that member, run that instead (and so on while members
    /// fail reads), noting each failed read's member.
    fn run(&self, p: &Program, mut again: Option<Box<Relower>>) -> Result<(), DvsError> {
        let mut retry: Option<Program> = None;
        loop {
            let r = self.exec.run(retry.as_ref().unwrap_or(p), Client::None, None);
            let Err(ExecError::Device(failures)) = &r else { return r.map(drop).map_err(super::exec_error) };
            let next = match (again.as_deref_mut(), &self.lower) {
                (Some(a), Some((geo, code))) => a.again(failures, geo, code),
                _ => None,
            };
            let Some((next, stripes)) = next else { return r.map(drop).map_err(super::exec_error) };
            let mut s = self.lock();
            s.read_errors.members.extend(failures.iter().map(|f| f.member));
            s.read_errors.stripes.extend(stripes);
            drop(s);
            self.errors.0.store(true, Ordering::Release);
            retry = Some(next);
        }
    }

    /// As a caller: wait on `done` (counted, so the thread knows to notify).
    fn wait_done<'a>(&'a self, mut s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        s.waiting += 1;
        let mut s = self.done.wait(s).unwrap_or_else(|e| e.into_inner());
        s.waiting -= 1;
        s
    }

    /// As the thread: wait on `work`.
    fn wait_work<'a>(&'a self, mut s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        s.idle = true;
        let mut s = self.work.wait(s).unwrap_or_else(|e| e.into_inner());
        s.idle = false;
        s
    }

    /// As the thread: wake the callers waiting, if any (after `s` is dropped).
    fn notify_done(&self, s: MutexGuard<'_, State>) {
        let any = s.waiting > 0;
        drop(s);
        if any {
            self.done.notify_all();
        }
    }
}

/// The background runner of one array's destage and GC programs.
pub(super) struct Destager {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Destager {
    #[cfg(test)]
    pub(super) fn new(exec: Arc<Executor>) -> Destager {
        Destager::with_lower(exec, None)
    }

    /// The destager of an array of geometry `geo` and code `code`: a job
    /// handed over with its [`Relower`] is lowered again when a fill read
    /// fails.
    pub(super) fn for_array(exec: Arc<Executor>, geo: Geo, code: Code) -> Destager {
        Destager::with_lower(exec, Some((geo, code)))
    }

    fn with_lower(exec: Arc<Executor>, lower: Option<(Geo, Code)>) -> Destager {
        let shared = Shared { state: Mutex::new(State::default()), work: Condvar::new(), done: Condvar::new(), exec, lower, errors: OwnLine::default() };
        Destager { shared: Arc::new(shared), thread: None }
    }

    /// The fill reads decoded since last asked (a relaxed load when there
    /// are none).
    pub(super) fn take_read_errors(&self) -> Decoded {
        // A plain load first: no store to the line the thread uses, per write.
        if !self.shared.errors.0.load(Ordering::Relaxed) || !self.shared.errors.0.swap(false, Ordering::Acquire) {
            return Decoded::default();
        }
        std::mem::take(&mut self.shared.lock().read_errors)
    }

    /// Hand program `p` (of a job of `kind`; None: a log record) to the
    /// thread, to run after those handed over before it (once there is
    /// room in the queue): its ticket ([`Destager::wait_for`]).  Without
    /// a thread (it could not be started) it runs here.
    pub(super) fn start(&mut self, p: Program, kind: Option<JobKind>) -> Result<u64, DvsError> {
        self.start_job(p, kind, None)
    }

    /// [`Destager::start`] with what the job's program was lowered from.
    pub(super) fn start_job(&mut self, p: Program, kind: Option<JobKind>, again: Option<Box<Relower>>) -> Result<u64, DvsError> {
        if self.thread.is_none() {
            let shared = self.shared.clone();
            let t = std::thread::Builder::new().name("mosaic-destage".into()).spawn(move || serve(&shared));
            self.thread = t.ok();
        }
        if let Some(f) = self.failed() {
            return Err(DvsError::Other(f));
        }
        if self.thread.is_none() {
            let r = self.shared.run(&p, again);
            self.finish(kind, r)?;
            let mut s = self.shared.lock();
            s.handed += 1;
            s.done = s.handed;
            return Ok(s.handed);
        }
        let mut s = self.shared.lock();
        while s.queue.len() >= QUEUED && s.failed.is_none() {
            s = self.shared.wait_done(s);
        }
        if let Some(f) = &s.failed {
            return Err(super::failing::again(&f.1, &f.2));
        }
        s.queue.push_back((p, kind, again));
        s.handed += 1;
        let ticket = s.handed;
        let idle = s.idle;
        drop(s);
        if idle {
            self.shared.work.notify_one();
        }
        Ok(ticket)
    }

    /// Record the outcome of a program of `kind`; its error if it failed.
    fn finish(&self, kind: Option<JobKind>, r: Result<(), DvsError>) -> Result<(), DvsError> {
        if let Err(e) = &r {
            self.shared.lock().failed.get_or_insert_with(|| (kind, e.to_string(), super::failing::cause(e)));
        }
        r
    }

    /// Wait until no program is in flight: the error of one that failed
    /// (itself the first time, its message after).
    pub(super) fn wait(&self) -> Result<(), DvsError> {
        let mut s = self.shared.lock();
        while !s.queue.is_empty() || s.busy {
            s = self.shared.wait_done(s);
        }
        match (s.error.take(), &s.failed) {
            (Some(e), _) => Err(e),
            (None, Some(f)) => Err(super::failing::again(&f.1, &f.2)),
            (None, None) => Ok(()),
        }
    }

    /// Wait until the program of `ticket` (and so every one before it)
    /// has completed, not for those handed over after it: the error of
    /// one that failed, as [`Destager::wait`] gives it.
    pub(super) fn wait_for(&self, ticket: u64) -> Result<(), DvsError> {
        let mut s = self.shared.lock();
        while s.done < ticket && s.failed.is_none() {
            s = self.shared.wait_done(s);
        }
        match (s.error.take(), &s.failed) {
            (Some(e), _) => Err(e),
            (None, Some(f)) => Err(super::failing::again(&f.1, &f.2)),
            (None, None) => Ok(()),
        }
    }

    /// Whether the thread runs ahead of the threads that started it
    /// (nice [`NICE`] below theirs); None before it has started.
    #[cfg(test)]
    fn ahead(&self) -> Option<bool> {
        self.shared.lock().ahead
    }

    /// The error of a program that failed, without waiting.
    pub(super) fn failed(&self) -> Option<String> {
        self.shared.lock().failed.as_ref().map(|f| f.1.clone())
    }

    /// What would mend the array after the program that failed (None:
    /// none failed, or nothing can).
    pub(super) fn failed_cause(&self) -> Option<super::failing::Cause> {
        self.shared.lock().failed.as_ref().and_then(|f| f.2.clone())
    }

    /// The kind of the job whose program failed, if one did.
    pub(super) fn failed_kind(&self) -> Option<JobKind> {
        self.shared.lock().failed.as_ref().and_then(|f| f.0)
    }
}

impl Drop for Destager {
    /// The program in flight completes (a dropped array leaves nothing
    /// writing to its members); the thread ends.
    fn drop(&mut self) {
        self.shared.lock().quit = true;
        self.shared.work.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The destager's nice value: a little ahead of the threads writing to
/// the array (see [`ahead_of_writers`]).
const NICE: i32 = -5;

/// Put the calling thread (the destager) ahead of the request threads:
/// nice [`NICE`], as the kernel's writeback and ZFS's sync threads run
/// ahead of the processes whose writes they carry.  The destager is the
/// write cache's only way out: once it falls behind, every writer waits
/// for it anyway (for room in its queue, for a ring retirement), so a
/// core it shares with writers is best spent on it.  With two writers
/// and the destager on two cores (three threads), the scheduler's fair
/// shares left it 78 % of a core and DVS + cache at 0.43-0.45 of raid5;
/// at nice -5, 0.50-0.51 (`docs/PERFORMANCE.md`, eleventh visit).
/// Relative to the thread that started it (a process run under `nice`
/// keeps its place among others).  A process without the right to raise
/// a priority (CAP_SYS_NICE, or an RLIMIT_NICE that allows it) keeps its
/// own (whether it took is kept for the tests).  Threads the destager
/// starts (an I/O pool it is the first to need) inherit its nice.
fn ahead_of_writers() -> bool {
    // SAFETY: plain system calls on the calling thread's id; errno is
    // the calling thread's own.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        if now == -1 && *libc::__errno_location() != 0 {
            return false;
        }
        libc::setpriority(libc::PRIO_PROCESS, tid, (now + NICE).max(-20)) == 0
    }
}

/// The thread: run each program handed over, in order, until told to
/// quit.  After a failure the programs queued behind it are dropped:
/// they were planned on top of it.
fn serve(shared: &Shared) {
    let ahead = ahead_of_writers();
    shared.lock().ahead = Some(ahead);
    loop {
        let mut s = shared.lock();
        while s.queue.is_empty() && !s.quit {
            s = shared.wait_work(s);
        }
        let Some((p, kind, again)) = s.queue.pop_front() else { return };
        s.busy = true;
        // Room made: only a caller waiting for room cares.
        if s.queue.len() + 1 >= QUEUED {
            shared.notify_done(s);
        } else {
            drop(s);
        }
        let r = catch_unwind(AssertUnwindSafe(|| shared.run(&p, again))).unwrap_or_else(|_| Err(DvsError::Other("the destage thread stopped".into())));
        drop(p);
        let mut s = shared.lock();
        s.busy = false;
        if r.is_ok() {
            s.done += 1;
        }
        if let Err(e) = r {
            s.failed.get_or_insert_with(|| (kind, e.to_string(), super::failing::cause(&e)));
            s.error.get_or_insert(e);
            s.queue.clear();
        }
        shared.notify_done(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_core::{Buf, DevOp, Io, Phase, Ref, Role};
    use mosaic_dev::Member;
    use std::io;

    /// A member whose writes panic (a bug below the executor).
    struct Panics;

    impl Member for Panics {
        fn describe(&self) -> String {
            "panics".into()
        }
        fn size(&self) -> u64 {
            1 << 20
        }
        fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<()> {
            Ok(())
        }
        fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
            panic!("a member write panicked")
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A member whose writes at or past `held` wait until it is opened.
    struct Held {
        held: u64,
        open: Mutex<bool>,
        wake: Condvar,
    }

    impl Member for Held {
        fn describe(&self) -> String {
            "held".into()
        }
        fn size(&self) -> u64 {
            1 << 20
        }
        fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<()> {
            Ok(())
        }
        fn write_at(&self, _: &[u8], offset: u64) -> io::Result<()> {
            let mut open = self.open.lock().unwrap();
            while offset >= self.held && !*open {
                open = self.wake.wait(open).unwrap();
            }
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    /// `wait_for` returns once its program is done, while a program
    /// handed over after it is still held; `wait` waits for that one too.
    #[test]
    fn a_ticket_is_waited_for_without_the_programs_after_it() {
        let m = Arc::new(Held { held: 8192, open: Mutex::new(false), wake: Condvar::new() });
        let exec = Arc::new(Executor::new(vec![Some(m.clone() as Arc<dyn Member>)], 0));
        let mut d = Destager::new(exec);
        let first = d.start(write_at(0), None).unwrap();
        let second = d.start(write_at(8192), Some(JobKind::Destage)).unwrap();
        assert_eq!((first, second), (1, 2));
        d.wait_for(first).unwrap();
        assert!(d.shared.lock().done < second, "the second program is still held");
        *m.open.lock().unwrap() = true;
        m.wake.notify_all();
        d.wait().unwrap();
        d.wait_for(second).unwrap();
        assert_eq!(d.shared.lock().done, 2);
    }

    /// A caller that finds the queue full waits, counted, on completions
    /// (the thread sleeps on its own condition): it gets its room and its
    /// ticket once the held program completes, and the thread then runs
    /// every program handed over.
    #[test]
    fn a_full_queue_waits_for_room_and_the_thread_for_work() {
        let m = Arc::new(Held { held: 0, open: Mutex::new(false), wake: Condvar::new() });
        let exec = Arc::new(Executor::new(vec![Some(m.clone() as Arc<dyn Member>)], 0));
        let mut d = Destager::new(exec);
        let shared = d.shared.clone();
        d.start(one_write(), None).unwrap();
        while !shared.lock().busy {
            std::thread::yield_now();
        }
        for _ in 0..QUEUED {
            d.start(one_write(), None).unwrap();
        }
        let last = std::thread::scope(|s| {
            let h = s.spawn(|| d.start(one_write(), None));
            while shared.lock().waiting == 0 {
                std::thread::yield_now();
            }
            let st = shared.lock();
            assert_eq!((st.handed, st.done, st.queue.len()), (QUEUED as u64 + 1, 0, QUEUED));
            drop(st);
            *m.open.lock().unwrap() = true;
            m.wake.notify_all();
            h.join().unwrap()
        });
        assert_eq!(last.unwrap(), QUEUED as u64 + 2);
        d.wait().unwrap();
        let st = shared.lock();
        assert_eq!((st.done, st.waiting), (QUEUED as u64 + 2, 0));
        drop(st);
        while !shared.lock().idle {
            std::thread::yield_now();
        }
    }

    /// A member that notes the nice value of the thread writing to it.
    struct Nice(Mutex<Vec<i32>>);

    impl Member for Nice {
        fn describe(&self) -> String {
            "nice".into()
        }
        fn size(&self) -> u64 {
            1 << 20
        }
        fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<()> {
            Ok(())
        }
        fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
            self.0.lock().unwrap().push(nice_of_this_thread());
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    fn nice_of_this_thread() -> i32 {
        // SAFETY: a plain system call on the calling thread's id.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    /// The destager's programs run [`NICE`] below the nice of the thread
    /// that started it, when the process may raise a priority (always
    /// as root, as in CI); otherwise at that thread's own.
    #[test]
    fn the_destager_runs_ahead_of_the_writers_when_allowed() {
        let m = Arc::new(Nice(Mutex::new(Vec::new())));
        let exec = Arc::new(Executor::new(vec![Some(m.clone() as Arc<dyn Member>)], 0));
        let writer = std::thread::spawn(move || {
            let mut d = Destager::new(exec);
            assert_eq!(d.ahead(), None);
            d.start(one_write(), None).unwrap();
            d.wait().unwrap();
            (nice_of_this_thread(), d.ahead())
        });
        let (mine, ahead) = writer.join().unwrap();
        let ahead = ahead.expect("the thread has started");
        // SAFETY: a plain system call.
        if unsafe { libc::geteuid() } == 0 {
            assert!(ahead, "root may raise a priority");
        }
        let want = if ahead { (mine + NICE).max(-20) } else { mine };
        assert_eq!(*m.0.lock().unwrap(), vec![want]);
    }

    fn one_write() -> Program {
        write_at(0)
    }

    fn write_at(offset: u64) -> Program {
        let mut p = Program::default();
        let b = p.buf(Buf::Scratch(4096));
        let op = DevOp { member: 0, offset, len: 4096, role: Role::Data, col: 0 };
        p.phases.push(Phase::write(vec![Io::new(op, Ref::new(b, 0))]));
        p
    }

    /// A program that panics on the thread is an error, not a hang or a
    /// lost thread: `wait` returns it once, then its message, and no
    /// program is taken after it.
    #[test]
    fn a_panicking_program_is_an_error_that_sticks() {
        let exec = Arc::new(Executor::new(vec![Some(Arc::new(Panics) as Arc<dyn Member>)], 0));
        let mut d = Destager::new(exec);
        d.start(one_write(), Some(JobKind::Destage)).unwrap();
        let e = d.wait().unwrap_err().to_string();
        assert!(e.contains("the destage thread stopped"), "{e}");
        assert!(d.wait().unwrap_err().to_string().contains("the destage thread stopped"));
        assert_eq!(d.failed_kind(), Some(JobKind::Destage));
        let e = d.start(one_write(), Some(JobKind::BgGc)).unwrap_err().to_string();
        assert!(e.contains("the destage thread stopped"), "{e}");
    }
}
