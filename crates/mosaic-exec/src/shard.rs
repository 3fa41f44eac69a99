//! Per-thread shards of what every program touches (the operation
//! counters, the small scratch buffers).  Threads running programs at
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
