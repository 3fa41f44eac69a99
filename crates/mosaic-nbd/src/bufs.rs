//! Payload buffers reused from request to request.  A new buffer costs a
//! zero fill (the payload is read into initialised memory) and, for large
//! ones, fresh pages faulted in; perf put the zero fill alone at 11 % of
//! the server's time under 1 MiB writes.  A buffer that served a request
//! comes back here with its length (its bytes stay initialised), so the
//! next request of that size or smaller, down to half of it, takes it as
//! it is.  The pool counts what buffers hold (their capacity), not the
//! length they were last cut to: a 32 MiB buffer lent to a 16 KiB request
//! would otherwise be kept as 16 KiB, and 64 of them hold 2 GiB.

use std::sync::Mutex;

/// Buffers kept at most, and their bytes together.
const KEEP: usize = 64;
const KEEP_BYTES: usize = 64 << 20;
/// Smaller buffers are not worth keeping: the allocator serves them from
/// its own free lists.
const MIN_KEPT: usize = 16 << 10;

#[derive(Default)]
pub(crate) struct Bufs {
    free: Mutex<(Vec<Vec<u8>>, usize)>,
}

impl Bufs {
    /// A buffer of exactly `len` initialised bytes (contents unspecified),
    /// or None when none kept fits (at least `len`, at most twice it).
    pub(crate) fn take(&self, len: usize) -> Option<Vec<u8>> {
        if len < MIN_KEPT {
            return None;
        }
        let mut g = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let i = g.0.iter().position(|b| b.len() >= len && b.capacity() <= 2 * len)?;
        let mut b = g.0.swap_remove(i);
        g.1 -= b.capacity();
        drop(g);
        b.truncate(len);
        Some(b)
    }

    /// A buffer of `len` bytes: a kept one, else a new zeroed one.
    pub(crate) fn take_or_new(&self, len: usize) -> Vec<u8> {
        self.take(len).unwrap_or_else(|| vec![0u8; len])
    }

    /// Keep `b` for a later request, if there is room.
    pub(crate) fn give(&self, b: Vec<u8>) {
        if b.len() < MIN_KEPT {
            return;
        }
        let mut g = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if g.0.len() < KEEP && g.1 + b.capacity() <= KEEP_BYTES {
            g.1 += b.capacity();
            g.0.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_serves_a_request_of_its_size_or_smaller() {
        let p = Bufs::default();
        assert!(p.take(1 << 20).is_none());
        let mut b = p.take_or_new(1 << 20);
        b[5] = 7;
        let ptr = b.as_ptr();
        p.give(b);
        // Not for a request under half its size.
        assert!(p.take(64 << 10).is_none());
        let b = p.take(600 << 10).expect("the kept buffer");
        assert_eq!((b.len(), b.as_ptr(), b[5]), (600 << 10, ptr, 7));
        p.give(b);
        // Its length is now 600 KiB: a larger request needs a new buffer;
        // the pool counts its whole 1 MiB.
        assert!(p.take(700 << 10).is_none());
        assert_eq!(p.free.lock().unwrap().1, 1 << 20);
        // Small buffers are not kept; the pool is bounded.
        p.give(vec![0; 4096]);
        assert!(p.take(4096).is_none());
        for _ in 0..KEEP + 8 {
            p.give(vec![0; MIN_KEPT]);
        }
        assert!(p.free.lock().unwrap().0.len() <= KEEP);
    }
}
