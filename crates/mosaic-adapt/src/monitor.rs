//! Live workload monitoring (the paper's §3.1 without the trace file): a
//! bounded ring of the most recent block requests, pushed by every thread
//! that serves one and read by a periodic job that turns them into
//! transactions ([`crate::txn`]).
//!
//! ```text
//!   pushers (any thread)                    slots: capacity, a power of two
//!   seq = head.fetch_add(1) ──▶ slot[seq & mask]
//!                                 ┌───────┬───────┬───────┬───────┬─────
//!   head (own cache line) ───────▶│ stamp │ stamp │ stamp │ stamp │ ...
//!                                 │ time  │ time  │ time  │ time  │
//!                                 │offset │offset │offset │offset │
//!                                 │len|op │len|op │len|op │len|op │
//!                                 └───────┴───────┴───────┴───────┴─────
//!   stamp = (seq + 1) << 1 | busy      0 = never written
//!
//!   push:  claim   stamp: done(older) ──CAS──▶ busy(seq)   (else: dropped)
//!          write   time, offset, len|op      (relaxed, after a release fence)
//!          publish stamp = done(seq)         (release)
//!   read:  stamp == done(seq)? load the fields, acquire fence,
//!          stamp still done(seq)? then the slot is whole, else torn (skipped)
//! ```
//!
//! One `fetch_add` and four stores per push: no lock, no allocation.  A
//! slot is a seqlock with a single writer at a time: the claiming CAS
//! refuses a slot that is busy or already holds a newer sequence number,
//! so two pushers a whole ring apart never write the same slot at once
//! (that push is dropped instead; only a ring lapped during one push does
//! it).  Stamps only grow, so a reader that sees the same stamp before and
//! after its loads read one push's fields.
//!
//! Consumers read by sequence number: [`Ring::take_since`] returns every
//! whole request from a cursor up to the current head, the next cursor,
//! and how many of the requests in between it could not return (`lost`):
//! overwritten by newer ones, dropped as above, or still being written at
//! that moment.  Sequence numbers are arrival order (the order pushers
//! took them); time stamps are the pushers' own, so two threads' requests
//! can be a clock read apart out of order, which [`crate::txn`] tolerates.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use mosaic_trace::{Op, Request};

/// Most slots a ring may have (2^28: 8 GiB of 32-byte slots).
pub const MAX_CAPACITY: u64 = 1 << 28;

/// Errors from [`Ring::new`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MonitorError {
    #[error("monitor ring capacity {0} is outside 1..={MAX_CAPACITY} requests")]
    Capacity(u64),
    #[error("cannot allocate a monitor ring of {0} requests")]
    Alloc(u64),
}

/// The stamp's "being written" bit.
const BUSY: u64 = 1;

/// The stamp of a slot holding the whole request `seq`.
fn done(seq: u64) -> u64 {
    (seq + 1) << 1
}

/// One request: its stamp and three fields.  32 bytes, aligned so that no
/// slot straddles two cache lines.
#[derive(Default)]
#[repr(C, align(32))]
struct Slot {
    stamp: AtomicU64,
    time_ns: AtomicU64,
    offset: AtomicU64,
    /// `len << 1 | 1` for a write, `len << 1` for a read.
    len_op: AtomicU64,
}

/// The push counter on a cache line of its own, so pushes do not keep
/// evicting the slots pointer every pusher reads.
#[derive(Default)]
#[repr(align(128))]
struct Head(AtomicU64);

/// What [`Ring::take_since`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Taken {
    /// The whole requests after the cursor, in arrival order.
    pub requests: Vec<Request>,
    /// The cursor for the next call: every request pushed so far.
    pub next: u64,
    /// Requests between the cursor and `next` not returned: overwritten,
    /// dropped, or still being written.
    pub lost: u64,
}

/// A bounded ring of recent requests; see the module docs.
pub struct Ring {
    head: Head,
    mask: u64,
    slots: Box<[Slot]>,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").field("capacity", &self.capacity()).field("pushed", &self.pushed()).finish()
    }
}

/// `n` empty slots, from zeroed memory: the allocator hands fresh pages
/// over as they are, so a large ring costs nothing until pushes reach it
/// (building the default 32 MiB slot by slot took a serve's start longer
/// than opening its array).
fn zeroed_slots(n: u64) -> Result<Box<[Slot]>, MonitorError> {
    let len = usize::try_from(n).map_err(|_| MonitorError::Alloc(n))?;
    let layout = std::alloc::Layout::array::<Slot>(len).map_err(|_| MonitorError::Alloc(n))?;
    // SAFETY: `layout` is not empty (`n` >= 1 and a slot is 32 bytes).
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Slot>();
    if p.is_null() {
        return Err(MonitorError::Alloc(n));
    }
    // SAFETY: `p` comes from the global allocator with the layout of `len`
    // slots, which `Box<[Slot]>` frees with; all-zero bytes are a valid
    // slot (four `AtomicU64`s at 0, the empty slot `Slot::default` makes).
    Ok(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) })
}

impl Ring {
    /// A ring holding the newest `capacity` requests, rounded up to a
    /// power of two (32 bytes each); 0 or more than [`MAX_CAPACITY`] is an
    /// error, and so is memory the allocator refuses.
    pub fn new(capacity: u64) -> Result<Ring, MonitorError> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return Err(MonitorError::Capacity(capacity));
        }
        let n = capacity.next_power_of_two();
        Ok(Ring { head: Head::default(), mask: n - 1, slots: zeroed_slots(n)? })
    }

    /// Slots in the ring (the capacity asked for, rounded up).
    pub fn capacity(&self) -> u64 {
        self.mask + 1
    }

    /// Requests pushed so far (the next sequence number).
    pub fn pushed(&self) -> u64 {
        self.head.0.load(Ordering::Acquire)
    }

    /// Record one request.  A request that names no bytes, is 2^63 bytes
    /// or longer, or runs past the end of the address space is not a
    /// [`Request`] and is ignored (false).
    pub fn push(&self, op: Op, offset: u64, len: u64, time_ns: u64) -> bool {
        if len == 0 || len >= 1 << 63 || offset.checked_add(len).is_none() {
            return false;
        }
        let seq = self.head.0.fetch_add(1, Ordering::Relaxed);
        let slot = &self.slots[(seq & self.mask) as usize];
        let old = slot.stamp.load(Ordering::Relaxed);
        if old & BUSY != 0 || old >= done(seq) {
            return true; // lapped during a push: dropped, counted as lost
        }
        if slot.stamp.compare_exchange(old, done(seq) | BUSY, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            return true;
        }
        // The busy stamp is visible before any field changes.
        fence(Ordering::Release);
        slot.time_ns.store(time_ns, Ordering::Relaxed);
        slot.offset.store(offset, Ordering::Relaxed);
        slot.len_op.store(len << 1 | u64::from(op == Op::Write), Ordering::Relaxed);
        slot.stamp.store(done(seq), Ordering::Release);
        true
    }

    /// Request `seq` if its slot holds it whole.
    fn read(&self, seq: u64) -> Option<Request> {
        let slot = &self.slots[(seq & self.mask) as usize];
        if slot.stamp.load(Ordering::Acquire) != done(seq) {
            return None;
        }
        let time_ns = slot.time_ns.load(Ordering::Relaxed);
        let offset = slot.offset.load(Ordering::Relaxed);
        let len_op = slot.len_op.load(Ordering::Relaxed);
        // The fields are loaded before the stamp is checked again.
        fence(Ordering::Acquire);
        if slot.stamp.load(Ordering::Relaxed) != done(seq) {
            return None;
        }
        let op = if len_op & 1 == 1 { Op::Write } else { Op::Read };
        Some(Request { time_ns, op, offset, len: len_op >> 1 })
    }

    /// The requests pushed since sequence number `cursor` (0: since the
    /// start; [`Taken::next`] of the previous call: only what is new), at
    /// most the newest [`capacity`](Ring::capacity).  A cursor past the
    /// head finds nothing.
    pub fn take_since(&self, cursor: u64) -> Taken {
        let next = self.pushed();
        let cursor = cursor.min(next);
        let first = cursor.max(next.saturating_sub(self.capacity()));
        let requests: Vec<Request> = (first..next).filter_map(|s| self.read(s)).collect();
        Taken { lost: next - cursor - requests.len() as u64, requests, next }
    }

    /// The newest requests (at most [`capacity`](Ring::capacity)), in
    /// arrival order.
    pub fn snapshot(&self) -> Vec<Request> {
        self.take_since(0).requests
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::{transactions, TxnConfig};
    use proptest::prelude::*;
    use std::sync::atomic::AtomicBool;

    /// Request `i` of pusher `t`: every field derived from (t, i), so a
    /// torn slot (fields of two pushes) is recognisable.
    fn req(t: u64, i: u64) -> Request {
        let op = [Op::Write, Op::Read, Op::Read][(i % 3) as usize];
        Request { time_ns: t << 40 | i, op, offset: (t << 40 | i) * 4096, len: 512 * (1 + (t + i) % 16) }
    }

    /// The (t, i) a request of [`req`] was made from, if it is whole.
    fn origin(r: &Request) -> Option<(u64, u64)> {
        let (t, i) = (r.time_ns >> 40, r.time_ns & ((1 << 40) - 1));
        (req(t, i) == *r).then_some((t, i))
    }

    fn push(ring: &Ring, r: &Request) {
        assert!(ring.push(r.op, r.offset, r.len, r.time_ns));
    }

    #[test]
    fn capacity_is_a_power_of_two_and_zero_is_refused() {
        assert_eq!(Ring::new(0).unwrap_err(), MonitorError::Capacity(0));
        assert_eq!(Ring::new(MAX_CAPACITY + 1).unwrap_err(), MonitorError::Capacity(MAX_CAPACITY + 1));
        assert_eq!(Ring::new(1).unwrap().capacity(), 1);
        assert_eq!(Ring::new(1000).unwrap().capacity(), 1024);
        assert_eq!(Ring::new(1024).unwrap().capacity(), 1024);
    }

    #[test]
    fn a_ring_in_memory_used_before_starts_empty() {
        for n in [1u64, 1000, 1 << 20] {
            // Memory the allocator may hand back: every byte set.
            drop(std::hint::black_box(vec![0xffu8; n as usize * 32]));
            let ring = Ring::new(n).unwrap();
            assert_eq!(ring.take_since(0), Taken { requests: vec![], next: 0, lost: 0 });
            assert!(ring.slots.iter().all(|s| s.stamp.load(Ordering::Relaxed) == 0 && s.len_op.load(Ordering::Relaxed) == 0));
            push(&ring, &req(3, 1));
            assert_eq!(ring.snapshot(), vec![req(3, 1)]);
        }
    }

    #[test]
    fn requests_that_name_no_bytes_are_ignored() {
        let ring = Ring::new(4).unwrap();
        assert!(!ring.push(Op::Read, 0, 0, 1));
        assert!(!ring.push(Op::Read, u64::MAX, 2, 1));
        assert!(!ring.push(Op::Write, 0, 1 << 63, 1));
        assert!(ring.push(Op::Write, u64::MAX - 1, 1, 1));
        assert_eq!(ring.pushed(), 1);
        assert_eq!(ring.snapshot(), vec![Request { time_ns: 1, op: Op::Write, offset: u64::MAX - 1, len: 1 }]);
    }

    #[test]
    fn snapshot_keeps_arrival_order_and_the_newest_capacity() {
        let ring = Ring::new(8).unwrap();
        assert!(ring.snapshot().is_empty());
        let all: Vec<Request> = (0..20).map(|i| req(1, i)).collect();
        for (i, r) in all.iter().enumerate() {
            push(&ring, r);
            let snap = ring.snapshot();
            assert_eq!(snap, &all[(i + 1).saturating_sub(8)..=i]);
        }
    }

    #[test]
    fn take_since_returns_only_what_is_new_and_counts_overwrites() {
        let ring = Ring::new(4).unwrap();
        let all: Vec<Request> = (0..13).map(|i| req(2, i)).collect();
        all[..10].iter().for_each(|r| push(&ring, r));
        let t = ring.take_since(0);
        assert_eq!((t.requests.as_slice(), t.next, t.lost), (&all[6..10], 10, 6));
        all[10..].iter().for_each(|r| push(&ring, r));
        let t = ring.take_since(t.next);
        assert_eq!((t.requests.as_slice(), t.next, t.lost), (&all[10..13], 13, 0));
        assert_eq!(ring.take_since(13), Taken { requests: vec![], next: 13, lost: 0 });
        assert_eq!(ring.take_since(99), Taken { requests: vec![], next: 13, lost: 0 });
    }

    #[test]
    fn concurrent_pushers_lose_nothing_in_a_ring_big_enough() {
        let (threads, each) = (4u64, 20_000u64);
        let ring = Ring::new(threads * each).unwrap();
        std::thread::scope(|s| {
            for t in 0..threads {
                let ring = &ring;
                s.spawn(move || (0..each).for_each(|i| push(ring, &req(t, i))));
            }
        });
        let taken = ring.take_since(0);
        assert_eq!((taken.requests.len() as u64, taken.lost, taken.next), (threads * each, 0, threads * each));
        // Each pusher's requests arrive in the order it pushed them.
        let mut next = vec![0; threads as usize];
        for r in &taken.requests {
            let (t, i) = origin(r).expect("a whole request");
            assert_eq!(i, next[t as usize]);
            next[t as usize] += 1;
        }
    }

    /// The requests of one read, if every one is whole and there are at
    /// most `capacity`.
    fn whole(reqs: &[Request], capacity: usize) -> Option<u64> {
        (reqs.len() <= capacity && reqs.iter().all(|r| origin(r).is_some())).then_some(reqs.len() as u64)
    }

    /// Read a ring while pushers lap it until they have pushed `pushes`:
    /// (requests taken, lost, reads that were not whole, next cursor).
    fn read_while_pushed(ring: &Ring, pushes: u64) -> (u64, u64, u64, u64) {
        let (mut taken, mut lost, mut bad, mut cursor) = (0, 0, 0, 0);
        while ring.pushed() < pushes {
            bad += u64::from(whole(&ring.snapshot(), 16).is_none());
            let t = ring.take_since(cursor);
            match whole(&t.requests, 16) {
                Some(n) => (taken, lost, cursor) = (taken + n, lost + t.lost, t.next),
                None => bad += 1,
            }
        }
        (taken, lost, bad, cursor)
    }

    /// A small ring lapped over and over by pushers while it is read: every
    /// request returned is whole, no read returns more than the capacity,
    /// and taken plus lost is everything pushed.  (Checked after the
    /// pushers stop: a panic inside the scope would wait for them forever.)
    #[test]
    fn torn_slots_are_never_returned() {
        let ring = Ring::new(16).unwrap();
        let stop = AtomicBool::new(false);
        let ((taken, lost, bad, cursor), pushed) = std::thread::scope(|s| {
            let pushers: Vec<_> = (0..3u64)
                .map(|t| {
                    let (ring, stop) = (&ring, &stop);
                    s.spawn(move || (0..).take_while(|_| !stop.load(Ordering::Relaxed)).map(|i| push(ring, &req(t, i))).count() as u64)
                })
                .collect();
            let read = read_while_pushed(&ring, 3_000_000);
            stop.store(true, Ordering::Relaxed);
            (read, pushers.into_iter().map(|p| p.join().unwrap_or(0)).sum::<u64>())
        });
        assert_eq!(bad, 0, "reads with a torn request or more than the capacity");
        let t = ring.take_since(cursor);
        assert_eq!(taken + whole(&t.requests, 16).unwrap() + lost + t.lost, pushed);
    }

    fn requests() -> impl Strategy<Value = Vec<Request>> {
        let one = (0u64..2_000_000, any::<bool>(), 0u64..1 << 30, 1u64..1 << 20);
        prop::collection::vec(one, 0..200).prop_map(|v| {
            let mut t = 0;
            v.into_iter()
                .map(|(gap, w, offset, len)| {
                    t += gap;
                    Request { time_ns: t, op: if w { Op::Write } else { Op::Read }, offset, len }
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn transactions_over_a_snapshot_equal_those_over_the_requests(reqs in requests(), window in 0u64..3_000_000) {
            let ring = Ring::new(256).unwrap();
            reqs.iter().for_each(|r| push(&ring, r));
            let snap = ring.snapshot();
            prop_assert_eq!(&snap, &reqs);
            let cfg = TxnConfig::new(64 << 10, window, 16);
            prop_assert_eq!(transactions(cfg, snap).unwrap(), transactions(cfg, reqs).unwrap());
        }
    }
}
