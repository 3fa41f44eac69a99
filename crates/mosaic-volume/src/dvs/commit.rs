//! Group commit of a DVS volume's writes.
//!
//! A journalled DVS write is durable once its journal record is written
//! and flushed on the journal's k + 1 members.  Writers that arrive while
//! another holds the array queue here; the first becomes the leader,
//! takes every write waiting, and hands them to
//! [`mosaic_dvs::DvsArray::write_many`] as one group: one journal write
//! and one flush per journal member for all of them (the pattern of
//! `mosaic_map::map::BlockMap::commit`).  A writer returns once the group
//! holding its write is durable, or with that group's error.  Alone (queue
//! depth 1) a group holds one write, which is exactly `DvsArray::write`.
//!
//! ```text
//!   write ──> queue (ticket t) ──> leader? ── yes: take all waiting, write_many, done = last ticket
//!                                  └─ no: wait until done >= t
//! ```

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};

use mosaic_dvs::DvsError;

/// Writes waiting for a leader (tickets in order).
#[derive(Default)]
struct Queue {
    waiting: Vec<(u64, u64, Vec<u8>)>,
    next_ticket: u64,
    /// Every ticket up to this one is durable (or failed).
    done: u64,
    failed: HashMap<u64, String>,
    leading: bool,
}

/// The group-commit queue of one volume.
pub(crate) struct Commits {
    queue: Mutex<Queue>,
    wake: Condvar,
}

impl Commits {
    pub(crate) fn new() -> Commits {
        Commits { queue: Mutex::new(Queue { next_ticket: 1, ..Queue::default() }), wake: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Make `data` at `offset` durable through `run` (called by whichever
    /// writer leads, with every write waiting then, in arrival order).
    pub(crate) fn write(&self, offset: u64, data: &[u8], run: &dyn Fn(&[(u64, &[u8])]) -> Result<(), DvsError>) -> Result<(), DvsError> {
        let mut q = self.lock();
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.waiting.push((ticket, offset, data.to_vec()));
        loop {
            if q.done >= ticket {
                return q.failed.remove(&ticket).map_or(Ok(()), |e| Err(DvsError::Other(e)));
            }
            if q.leading {
                q = self.wake.wait(q).unwrap_or_else(|e| e.into_inner());
            } else {
                q = self.lead(q, run);
            }
        }
    }

    /// As leader: write every waiting write as one group.
    fn lead<'a>(&'a self, mut q: MutexGuard<'a, Queue>, run: &dyn Fn(&[(u64, &[u8])]) -> Result<(), DvsError>) -> MutexGuard<'a, Queue> {
        q.leading = true;
        let group = std::mem::take(&mut q.waiting);
        drop(q);
        let writes: Vec<(u64, &[u8])> = group.iter().map(|w| (w.1, w.2.as_slice())).collect();
        let r = run(&writes);
        let mut q = self.lock();
        if let Err(e) = r {
            for w in &group {
                q.failed.insert(w.0, e.to_string());
            }
        }
        q.done = group.last().map_or(q.done, |w| w.0);
        q.leading = false;
        self.wake.notify_all();
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Eight writers arrive while the first group is being written: they
    /// all go out together in the second; a group's error reaches every
    /// writer in it.
    #[test]
    fn writers_that_meet_share_one_group_and_its_error() {
        let c = Commits::new();
        let arrived = AtomicUsize::new(0);
        let groups: Mutex<Vec<Vec<u64>>> = Mutex::new(Vec::new());
        let run = |g: &[(u64, &[u8])]| -> Result<(), DvsError> {
            let first = groups.lock().unwrap().is_empty();
            groups.lock().unwrap().push(g.iter().map(|w| w.0).collect());
            if first {
                // Hold the first group until every writer has queued.
                while arrived.load(Ordering::SeqCst) < 8 {
                    std::thread::yield_now();
                }
                std::thread::sleep(Duration::from_millis(200));
                return Ok(());
            }
            if g.iter().any(|w| w.1[0] == 9) {
                return Err(DvsError::Other("power cut".into()));
            }
            Ok(())
        };
        let results: Vec<Result<(), DvsError>> = std::thread::scope(|s| {
            let first = s.spawn(|| {
                arrived.fetch_add(1, Ordering::SeqCst);
                c.write(0, &[1], &run)
            });
            while groups.lock().unwrap().is_empty() {
                std::thread::yield_now();
            }
            let rest: Vec<_> = (1..8u64)
                .map(|i| {
                    let (c, run, arrived) = (&c, &run, &arrived);
                    s.spawn(move || {
                        arrived.fetch_add(1, Ordering::SeqCst);
                        c.write(i * 512, &[if i == 5 { 9 } else { 1 }], run)
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
        c.write(4096, &[1], &|g| {
            assert_eq!(g.len(), 1);
            Ok(())
        })
        .unwrap();
    }
}
