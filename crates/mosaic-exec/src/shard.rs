//! Per-thread shards of what every program touches (the operation
//! counters, the small scratch buffers, an array's gate).  Threads
//! running programs at once each take their own shard, so neither waits
//! for the other's lock nor pulls the other's cache line over: with one
//! lock each, two writers of a RAM raid5 spent about 8 % of their time
//! on the counters' and the pool's lines (perf, `mosaic bench array
//! --threads 2`).
//!
//! ```text
//!   thread 0 ──> shard 0 ─┐
//!   thread 1 ──> shard 1 ─┼─ counters(): the shards summed
//!   ...                   │
//!   thread 16 ─> shard 0 ─┘
//! ```
//!
//! A thread takes the lowest number no living thread holds, and gives it
//! back when it ends, so threads alive together share a shard only when
//! more than [`SHARDS`] of them are (numbering threads as they come, a
//! benchmark's writer threads met its destager in one shard).

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Shards of each sharded value.
pub(crate) const SHARDS: usize = 16;

/// A value alone on its cache lines (two: the hardware fetches lines in
/// adjacent pairs).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Padded<T>(pub T);

/// Numbers of living threads (those that asked for a shard).
#[derive(Default)]
pub(crate) struct Numbers {
    /// Every number below this was taken once.
    next: usize,
    /// Numbers given back, lowest first out.
    free: std::collections::BinaryHeap<std::cmp::Reverse<usize>>,
}

static NUMBERS: Mutex<Numbers> = Mutex::new(Numbers { next: 0, free: std::collections::BinaryHeap::new() });

/// A thread's number, given back when the thread ends.
struct Number(usize);

impl Numbers {
    /// The lowest number not held.
    pub(crate) fn take(&mut self) -> usize {
        match self.free.pop() {
            Some(std::cmp::Reverse(i)) => i,
            None => {
                self.next += 1;
                self.next - 1
            }
        }
    }

    pub(crate) fn give_back(&mut self, i: usize) {
        self.free.push(std::cmp::Reverse(i));
    }
}

impl Number {
    fn take() -> Number {
        Number(NUMBERS.lock().take())
    }
}

impl Drop for Number {
    fn drop(&mut self) {
        NUMBERS.lock().give_back(self.0);
    }
}

/// This thread's number (distinct from every other living thread's).
pub(crate) fn number() -> Option<usize> {
    thread_local!(static NUMBER: Number = Number::take());
    NUMBER.try_with(|n| n.0).ok()
}

/// This thread's shard.
pub(crate) fn mine() -> usize {
    // Shard 0 for a thread past its thread-locals' end.
    number().map_or(0, |n| n % SHARDS)
}

/// `SHARDS` values made by `f`.
pub(crate) fn each<T>(f: impl Fn() -> T) -> Box<[Padded<T>]> {
    (0..SHARDS).map(|_| Padded(f())).collect()
}

/// A reader-writer lock over nothing, for state every request reads and
/// a rare operation changes (an array's grow step holds clients off):
/// a reader takes its thread's shard only, so readers on different cores
/// write no common line; a writer takes every shard, in order.
pub struct Gate {
    shards: Box<[Padded<RwLock<()>>]>,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate { shards: each(|| RwLock::new(())) }
    }
}

impl Gate {
    /// Shared: no writer holds the gate until this is dropped.
    pub fn read(&self) -> RwLockReadGuard<'_, ()> {
        self.shards[mine()].0.read()
    }

    /// Exclusive: no reader holds the gate until this is dropped.
    pub fn write(&self) -> GateWrite<'_> {
        GateWrite { _shards: self.shards.iter().map(|s| s.0.write()).collect() }
    }
}

/// [`Gate::write`]'s hold on every shard.
pub struct GateWrite<'a> {
    _shards: Vec<RwLockWriteGuard<'a, ()>>,
}
