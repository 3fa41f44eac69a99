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
//!   read / log / checkpoint / retire /
//!   labels / rebuild / scrub / flush ── wait() until the queue is empty
//! ```
//!
//! Programs run one at a time in the order they were planned, so zone
//! write pointers advance as they would inline; a job is planned from
//! the engine's tables, never the drives', so it may be planned while
//! those before it run (a degraded array, whose zone resets depend on
//! write pointers, waits first).  Every other program of the array
//! waits for the queue to empty ([`Destager::wait`]), so a read never
//! sees a home not yet written, and log records stay in sequence: a
//! journal retirement is logged after the destages that killed its
//! records are durable.  A program that fails leaves its error here and
//! drops the programs queued behind it (they were planned on top of
//! it): every later request sees the error (the array is poisoned).

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use mosaic_core::Program;
use mosaic_exec::Executor;

use crate::engine::JobKind;
use crate::DvsError;

/// Programs handed over and not yet started, at most (a writer that
/// plans faster than the members take them waits for room).
const QUEUED: usize = 3;

/// What the thread and the array share.
#[derive(Default)]
struct State {
    /// Programs handed over and not yet taken by the thread, in order,
    /// with the kind of their job.
    queue: VecDeque<(Program, JobKind)>,
    /// The thread is running a program.
    busy: bool,
    /// The first program that failed: its job kind and error (sticky).
    failed: Option<(JobKind, String)>,
    /// The error not yet returned by `wait`.
    error: Option<DvsError>,
    quit: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    exec: Arc<Executor>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run(&self, p: &Program) -> Result<(), DvsError> {
        super::run_on(&self.exec, p).map(drop)
    }
}

/// The background runner of one array's destage and GC programs.
pub(super) struct Destager {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Destager {
    pub(super) fn new(exec: Arc<Executor>) -> Destager {
        Destager { shared: Arc::new(Shared { state: Mutex::new(State::default()), wake: Condvar::new(), exec }), thread: None }
    }

    /// Hand program `p` (of a job of `kind`) to the thread, to run after
    /// those handed over before it (once there is room in the queue).
    /// Without a thread (it could not be started) it runs here.
    pub(super) fn start(&mut self, p: Program, kind: JobKind) -> Result<(), DvsError> {
        if self.thread.is_none() {
            let shared = self.shared.clone();
            let t = std::thread::Builder::new().name("mosaic-destage".into()).spawn(move || serve(&shared));
            self.thread = t.ok();
        }
        if let Some(f) = self.failed() {
            return Err(DvsError::Other(f));
        }
        if self.thread.is_none() {
            let r = self.shared.run(&p);
            return self.finish(kind, r);
        }
        let mut s = self.shared.lock();
        while s.queue.len() >= QUEUED && s.failed.is_none() {
            s = self.shared.wake.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if let Some(f) = &s.failed {
            return Err(DvsError::Other(f.1.clone()));
        }
        s.queue.push_back((p, kind));
        drop(s);
        self.shared.wake.notify_all();
        Ok(())
    }

    /// Record the outcome of a program of `kind`; its error if it failed.
    fn finish(&self, kind: JobKind, r: Result<(), DvsError>) -> Result<(), DvsError> {
        if let Err(e) = &r {
            self.shared.lock().failed.get_or_insert((kind, e.to_string()));
        }
        r
    }

    /// Wait until no program is in flight: the error of one that failed
    /// (itself the first time, its message after).
    pub(super) fn wait(&self) -> Result<(), DvsError> {
        let mut s = self.shared.lock();
        while !s.queue.is_empty() || s.busy {
            s = self.shared.wake.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        match (s.error.take(), &s.failed) {
            (Some(e), _) => Err(e),
            (None, Some(f)) => Err(DvsError::Other(f.1.clone())),
            (None, None) => Ok(()),
        }
    }

    /// The error of a program that failed, without waiting.
    pub(super) fn failed(&self) -> Option<String> {
        self.shared.lock().failed.as_ref().map(|f| f.1.clone())
    }

    /// The kind of the job whose program failed, if one did.
    pub(super) fn failed_kind(&self) -> Option<JobKind> {
        self.shared.lock().failed.as_ref().map(|f| f.0)
    }
}

impl Drop for Destager {
    /// The program in flight completes (a dropped array leaves nothing
    /// writing to its members); the thread ends.
    fn drop(&mut self) {
        self.shared.lock().quit = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: run each program handed over, in order, until told to
/// quit.  After a failure the programs queued behind it are dropped:
/// they were planned on top of it.
fn serve(shared: &Shared) {
    loop {
        let mut s = shared.lock();
        while s.queue.is_empty() && !s.quit {
            s = shared.wake.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        let Some((p, kind)) = s.queue.pop_front() else { return };
        shared.wake.notify_all();
        s.busy = true;
        drop(s);
        let r = catch_unwind(AssertUnwindSafe(|| shared.run(&p))).unwrap_or_else(|_| Err(DvsError::Other("the destage thread stopped".into())));
        drop(p);
        let mut s = shared.lock();
        s.busy = false;
        if let Err(e) = r {
            s.failed.get_or_insert((kind, e.to_string()));
            s.error.get_or_insert(e);
            s.queue.clear();
        }
        drop(s);
        shared.wake.notify_all();
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

    fn one_write() -> Program {
        let mut p = Program::default();
        let b = p.buf(Buf::Scratch(4096));
        let op = DevOp { member: 0, offset: 0, len: 4096, role: Role::Data, col: 0 };
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
        d.start(one_write(), JobKind::Destage).unwrap();
        let e = d.wait().unwrap_err().to_string();
        assert!(e.contains("the destage thread stopped"), "{e}");
        assert!(d.wait().unwrap_err().to_string().contains("the destage thread stopped"));
        assert_eq!(d.failed_kind(), Some(JobKind::Destage));
        let e = d.start(one_write(), JobKind::BgGc).unwrap_err().to_string();
        assert!(e.contains("the destage thread stopped"), "{e}");
    }
}
