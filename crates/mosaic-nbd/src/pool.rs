//! A fixed pool of worker threads that serve requests of every connection.
//!
//! One queue under one mutex.  A job only costs a wake-up (a futex system
//! call and a context switch) when a worker sleeps and no other is already
//! being woken for the jobs queued: a busy pool takes its next job without
//! one.  (A channel behind a `Mutex<Receiver>` woke a sleeper on every send
//! and every unlock: a fifth of the server's time under 4 KiB writes.)

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Workers asleep on the condvar.
    idle: usize,
    /// Wake-ups sent that no worker has taken yet.
    waking: usize,
    closed: bool,
}

#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<State>,
    cv: Condvar,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue a job; wake a sleeping worker only if the jobs queued
    /// outnumber the wake-ups already on their way.
    pub(crate) fn submit(&self, job: Job) {
        let mut s = self.lock();
        s.jobs.push_back(job);
        let wake = s.idle > s.waking && s.jobs.len() > s.waking;
        if wake {
            s.waking += 1;
        }
        drop(s);
        if wake {
            self.cv.notify_one();
        }
    }

    /// The next job, sleeping while there is none; None once closed and empty.
    fn next(&self) -> Option<Job> {
        let mut s = self.lock();
        loop {
            if let Some(j) = s.jobs.pop_front() {
                return Some(j);
            }
            if s.closed {
                return None;
            }
            s.idle += 1;
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
            s.idle -= 1;
            // A spurious wake-up finds `waking` at 0 and leaves it there.
            s.waking = s.waking.saturating_sub(1);
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.cv.notify_all();
    }
}

pub struct Pool {
    queue: Arc<Queue>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    pub fn new(n: usize) -> Pool {
        let queue = Arc::new(Queue::default());
        let threads = (0..n.max(1))
            .map(|i| {
                let q = queue.clone();
                std::thread::Builder::new()
                    .name(format!("nbd-worker-{i}"))
                    .spawn(move || {
                        while let Some(job) = q.next() {
                            job();
                        }
                    })
                    .expect("spawn worker thread")
            })
            .collect();
        Pool { queue, threads }
    }

    /// The queue jobs are submitted to.
    pub(crate) fn queue(&self) -> Arc<Queue> {
        self.queue.clone()
    }
}

impl Drop for Pool {
    /// Workers finish the jobs queued, then exit.
    fn drop(&mut self) {
        self.queue.close();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
