//! Per-thread shards of what every program touches (the operation
//! counters, the small scratch buffers, an array's gate).  Threads running programs at
//! once each take their own shard, so neither waits for the other's lock
//! nor pulls the other's cache line over: with one lock each, two
//! writers of a RAM raid5 spent about 8 % of their time on those lines
//! (perf, `mosaic bench array --threads 2`).
//!
//! ```text
//!   thread 0 ──> shard 0 ─┐
//!   thread 1 ──> shard 1 ─┼─ counters(): the shards summed
//!   ...                   │
//!   thread 8 ──> shard 0 ─┘  (threads numbered as they first come, mod SHARDS)
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Shards of each sharded value.
pub(crate) const SHARDS: usize = 8;

/// A value alone on its cache lines (two: the hardware fetches lines in
/// adjacent pairs).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Padded<T>(pub T);

/// This thread's shard.
pub(crate) fn mine() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local!(static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS);
    SHARD.with(|s| *s)
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
