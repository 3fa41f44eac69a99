//! The bytes of the write cache, kept as sparse as the cache counts them.
//!
//! ```text
//!   chunk written whole ──> Whole(the chunk)        (moved to the destage, no copy)
//!   blocks of a chunk   ──> Blocks([(block, bytes)]) (one block's bytes each, sorted by
//!                                                    block; a destage takes them as they
//!                                                    are, no copy, and writes each from
//!                                                    there beside the old bytes: the chunk
//!                                                    is never put together)
//! ```
//!
//! A block-counted cache of B blocks then holds about B blocks of bytes,
//! not one chunk buffer per chunk touched (a random 4 KiB write into each
//! of B chunks would otherwise hold B whole chunks).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::cache::Bitmap;
use crate::program::Payload;

/// The cached bytes of one chunk.
#[derive(Debug, Clone)]
pub(crate) enum Held {
    Whole(Arc<[u8]>),
    /// Blocks held, sorted by block index (a chunk has few blocks).
    Blocks(Vec<(u32, Arc<[u8]>)>),
}

impl Held {
    /// Bytes `[a, b)` of the chunk (block-aligned) from `data`; a block
    /// buffer written again is written over when nothing else holds it,
    /// a new one comes from `lent` when it can.
    pub(crate) fn put(slot: Option<&mut Held>, chunk: usize, block: usize, a: usize, data: &[u8], lent: &Lent) -> Option<Held> {
        if a == 0 && data.len() == chunk {
            return Some(Held::Whole(Arc::from(data)));
        }
        let mut fresh = None;
        let h = match slot {
            Some(h) => h,
            None => fresh.insert(Held::Blocks(Vec::new())),
        };
        match h {
            Held::Whole(w) => Arc::make_mut(w)[a..a + data.len()].copy_from_slice(data),
            Held::Blocks(m) => {
                for (i, b) in data.chunks(block.max(1)).enumerate() {
                    let k = (a / block.max(1) + i) as u32;
                    match m.binary_search_by_key(&k, |e| e.0) {
                        Ok(j) => match Arc::get_mut(&mut m[j].1).filter(|x| x.len() == b.len()) {
                            Some(x) => x.copy_from_slice(b),
                            None => m[j].1 = lent.block(b),
                        },
                        Err(j) => m.insert(j, (k, lent.block(b))),
                    }
                }
            }
        }
        fresh
    }

    /// Block `a / block` of the chunk (`a` block-aligned) from `owned`, a
    /// block's bytes its writer already put in a buffer
    /// ([`BlockPool::block_for`]): held as it is, no copy; the buffer it
    /// replaces goes back to `lent`.  The same bytes held as
    /// [`Held::put`] holds them.
    pub(crate) fn put_block(slot: Option<&mut Held>, chunk: usize, block: usize, a: usize, owned: Arc<[u8]>, lent: &Lent) -> Option<Held> {
        debug_assert!(block > 0 && a % block == 0 && owned.len() == block);
        if a == 0 && owned.len() == chunk {
            return Some(Held::Whole(owned));
        }
        let mut fresh = None;
        let h = match slot {
            Some(h) => h,
            None => fresh.insert(Held::Blocks(Vec::new())),
        };
        match h {
            Held::Whole(w) => {
                Arc::make_mut(w)[a..a + owned.len()].copy_from_slice(&owned);
                lent.give(owned);
            }
            Held::Blocks(m) => {
                let k = (a / block) as u32;
                match m.binary_search_by_key(&k, |e| e.0) {
                    Ok(j) => lent.give(std::mem::replace(&mut m[j].1, owned)),
                    Err(j) => m.insert(j, (k, owned)),
                }
            }
        }
        fresh
    }

    /// The bytes of block `i`, if held.
    pub(crate) fn block(&self, i: usize, block: usize) -> Option<&[u8]> {
        match self {
            Held::Whole(w) => w.get(i * block..(i + 1) * block),
            Held::Blocks(m) => m.binary_search_by_key(&(i as u32), |e| e.0).ok().map(|j| &m[j].1[..]),
        }
    }

    /// What a destage takes of the chunk ([`crate::program::Lower::job`]'s
    /// `cached`): a chunk held whole as it is; else the blocks `bm`
    /// marks, in block order, each block's own bytes (a block not held
    /// as zeros): no copy, the chunk is never put together.
    pub(crate) fn into_payload(self, bm: &Bitmap, chunk: usize, block: usize) -> Payload {
        let m = match self {
            Held::Whole(w) => return Payload::Bytes(w),
            Held::Blocks(m) => m,
        };
        let blocks = chunk / block.max(1);
        let mut zero: Option<Arc<[u8]>> = None;
        let mut held = m.into_iter().peekable();
        let mut out = Vec::with_capacity(bm.ones());
        for i in (0..blocks).filter(|&i| bm.get(i)) {
            while held.next_if(|e| (e.0 as usize) < i).is_some() {}
            match held.next_if(|e| e.0 as usize == i) {
                Some((_, b)) if b.len() == block => out.push(b),
                _ => out.push(zero.get_or_insert_with(|| Arc::from(vec![0u8; block])).clone()),
            }
        }
        Payload::Blocks(out)
    }

    /// The chunk, the blocks not held as zeros.
    #[cfg(test)]
    pub(crate) fn into_chunk(self, chunk: usize, block: usize) -> Arc<[u8]> {
        match self {
            Held::Whole(w) => w,
            Held::Blocks(m) => {
                let mut v = vec![0u8; chunk];
                for (i, b) in m {
                    let at = i as usize * block;
                    if let Some(dst) = v.get_mut(at..at + b.len()) {
                        dst.copy_from_slice(&b);
                    }
                }
                v.into()
            }
        }
    }
}

/// Block buffers lent to destage programs (in the order they were
/// handed over), taken back for new cached blocks once the destage that
/// held them has dropped them: the destager runs programs in order, so
/// the oldest is the first free.  A new block then reuses memory a
/// destage just read, not a fresh allocation (cold memory, and a page
/// fault when the allocator has given pages back).  Shared with the
/// array's writers ([`BlockPool`]), who fill a block before they queue.
#[derive(Debug, Default, Clone)]
pub(crate) struct Lent(Arc<Mutex<VecDeque<Arc<[u8]>>>>);

impl Lent {
    /// Buffers kept at most (older ones are let go).
    const MAX: usize = 4096;

    fn lock(&self) -> MutexGuard<'_, VecDeque<Arc<[u8]>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The blocks of a destage's payload, lent to it: each buffer once
    /// (blocks marked but not held share one zero buffer, which would
    /// otherwise never be free while its other clones wait here).
    pub(crate) fn lend(&self, p: &Payload) {
        if let Payload::Blocks(v) = p {
            let mut q = self.lock();
            for (i, b) in v.iter().enumerate() {
                if !v[..i].iter().any(|x| Arc::ptr_eq(x, b)) {
                    q.push_back(b.clone());
                }
            }
            while q.len() > Lent::MAX {
                q.pop_front();
            }
        }
    }

    /// A buffer no longer held, for reuse once nothing else holds it.
    pub(crate) fn give(&self, b: Arc<[u8]>) {
        let mut q = self.lock();
        q.push_back(b);
        if q.len() > Lent::MAX {
            q.pop_front();
        }
    }

    /// The oldest lent buffer of `len` bytes if its destage is done with
    /// it (taken out of the pool).
    fn free(&self, len: usize) -> Option<Arc<[u8]>> {
        let mut q = self.lock();
        let mut x = q.pop_front()?;
        if Arc::get_mut(&mut x).is_some_and(|x| x.len() == len) {
            return Some(x);
        }
        if Arc::strong_count(&x) > 1 {
            q.push_front(x); // its destage has not run yet
        }
        None
    }

    /// A buffer holding `b`: the oldest lent one if its destage is done
    /// with it (and it is `b`'s size), else a new one.
    pub(crate) fn block(&self, b: &[u8]) -> Arc<[u8]> {
        if let Some(mut x) = self.free(b.len()) {
            if let Some(dst) = Arc::get_mut(&mut x) {
                // Around the CPU cache: the buffer was last touched by a
                // destage (often on the other core), and this block is
                // read again only by its own destage, thousands of writes
                // later.
                mosaic_dev::copy_streaming(dst, b);
                return x;
            }
        }
        Arc::from(b)
    }
}

/// The block buffers of a cached array's write cache, as its writers see
/// them ([`crate::DvsArray::block_pool`]): a writer of one whole block
/// puts its bytes in one before it queues, on its own core, and the
/// cache holds that buffer as it is ([`Held::put_block`]) instead of
/// copying the bytes on the group's path.
#[derive(Debug, Clone)]
pub struct BlockPool {
    lent: Lent,
    block: usize,
}

impl BlockPool {
    pub(crate) fn new(lent: Lent, block: usize) -> BlockPool {
        BlockPool { lent, block }
    }

    /// `data` at logical byte `offset` in a cache block buffer, when it is
    /// exactly one block; `None` otherwise (the write goes as bytes only).
    /// Written around the CPU cache, as [`Lent::block`] writes it: the
    /// block is read next by its destage, thousands of writes later (the
    /// journal record is made from the writer's other copy).
    #[allow(clippy::manual_is_multiple_of)] // rust-version 1.80
    pub fn block_for(&self, offset: u64, data: &[u8]) -> Option<Arc<[u8]>> {
        if self.block == 0 || data.len() != self.block || offset % self.block as u64 != 0 {
            return None;
        }
        Some(self.lent.block(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_stay_sparse_until_the_chunk_is_put_together() {
        let mut h = Held::put(None, 16, 4, 4, &[1, 1, 1, 1], &Lent::default()).unwrap();
        assert!(Held::put(Some(&mut h), 16, 4, 12, &[2, 2, 2, 2], &Lent::default()).is_none());
        assert!(matches!(&h, Held::Blocks(m) if m.len() == 2));
        assert_eq!(h.block(3, 4), Some(&[2u8, 2, 2, 2][..]));
        assert_eq!(h.block(0, 4), None);
        assert_eq!(&h.into_chunk(16, 4)[..], &[0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2, 2]);
        let mut w = Held::put(None, 8, 4, 0, &[5; 8], &Lent::default()).unwrap();
        Held::put(Some(&mut w), 8, 4, 4, &[6; 4], &Lent::default());
        assert_eq!(&w.into_chunk(8, 4)[..], &[5, 5, 5, 5, 6, 6, 6, 6]);
    }

    #[test]
    fn a_destage_takes_only_the_marked_blocks_packed() {
        let mut h = Held::put(None, 16, 4, 4, &[1, 1, 1, 1], &Lent::default()).unwrap();
        Held::put(Some(&mut h), 16, 4, 12, &[2, 2, 2, 2], &Lent::default());
        let mut bm = Bitmap::new(4);
        bm.set(1, 2);
        bm.set(3, 4);
        assert_eq!(packed(h.clone().into_payload(&bm, 16, 4)), vec![1, 1, 1, 1, 2, 2, 2, 2]);
        bm.set(0, 1); // marked but not held: zeros
        assert_eq!(packed(h.clone().into_payload(&bm, 16, 4)), vec![0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
        let Held::Blocks(m) = &h else { panic!("blocks") };
        let Payload::Blocks(v) = h.clone().into_payload(&bm, 16, 4) else { panic!("blocks") };
        assert!(Arc::ptr_eq(&v[1], &m[0].1) && Arc::ptr_eq(&v[2], &m[1].1)); // the held bytes, not copies
        let w = Held::put(None, 8, 4, 0, &[5; 8], &Lent::default()).unwrap();
        assert_eq!(packed(w.into_payload(&bm, 8, 4)), vec![5; 8]); // whole: as it is
    }

    /// A lent block is reused only once its destage let it go: while the
    /// payload holds it a new block gets new memory (the payload's bytes
    /// stay as they were), after it the same buffer with the new bytes.
    /// A block written again is written over in place.
    #[test]
    fn lent_blocks_come_back_only_once_their_destage_is_done() {
        let lent = Lent::default();
        let addr = |a: &Arc<[u8]>| Arc::as_ptr(a) as *const u8;
        let mut h = Held::put(None, 16, 4, 4, &[1; 4], &lent).unwrap();
        let Held::Blocks(m) = &h else { panic!("blocks") };
        let first = addr(&m[0].1);
        Held::put(Some(&mut h), 16, 4, 4, &[3; 4], &lent);
        let Held::Blocks(m) = &h else { panic!("blocks") };
        assert_eq!((addr(&m[0].1), &m[0].1[..]), (first, &[3u8; 4][..]), "written again in place");
        let mut bm = Bitmap::new(4);
        bm.set(1, 2);
        let payload = h.into_payload(&bm, 16, 4);
        lent.lend(&payload);
        let busy = lent.block(&[7; 4]);
        assert_ne!(addr(&busy), first, "still held by the destage: a new buffer");
        assert_eq!(packed(payload), vec![3; 4], "the destage's bytes are untouched");
        let again = lent.block(&[9; 4]);
        assert_eq!((addr(&again), &again[..]), (first, &[9u8; 4][..]), "the lent buffer, reused");
        let fresh = lent.block(&[8; 4]);
        assert_ne!(addr(&fresh), first, "nothing left to reuse");
        // Blocks marked but not held share one zero buffer: lent once, it
        // comes back once the destage is done.
        let mut bm = Bitmap::new(4);
        bm.set(0, 4);
        let h = Held::put(None, 16, 4, 4, &[1; 4], &lent).unwrap();
        let payload = h.into_payload(&bm, 16, 4);
        let Payload::Blocks(v) = &payload else { panic!("blocks") };
        assert!(Arc::ptr_eq(&v[0], &v[2]) && Arc::ptr_eq(&v[0], &v[3]), "one zero buffer");
        let zero = addr(&v[0]);
        lent.lend(&payload);
        drop(payload);
        let a = lent.block(&[5; 4]);
        let b = lent.block(&[6; 4]);
        assert_eq!([addr(&a), addr(&b)].iter().filter(|&&x| x == zero).count(), 1, "the zero buffer, reused once");
    }

    /// A writer's block buffer is held as it is (no copy) and holds what
    /// `put` would; the buffer it replaces goes back to the pool and is
    /// reused once nothing holds it; a chunk held whole takes a copy.
    #[test]
    fn a_prepared_block_is_held_as_it_is_and_what_it_replaces_is_reused() {
        let lent = Lent::default();
        let pool = BlockPool::new(lent.clone(), 4);
        let addr = |a: &Arc<[u8]>| Arc::as_ptr(a) as *const u8;
        let one = pool.block_for(4, &[1; 4]).unwrap();
        let first = addr(&one);
        let mut h = Held::put_block(None, 16, 4, 4, one, &lent).unwrap();
        let Held::Blocks(m) = &h else { panic!("blocks") };
        assert_eq!(addr(&m[0].1), first, "held as it is");
        let mut by_put = Held::put(None, 16, 4, 4, &[1; 4], &lent).unwrap();
        Held::put(Some(&mut by_put), 16, 4, 12, &[2; 4], &lent);
        Held::put_block(Some(&mut h), 16, 4, 12, pool.block_for(12, &[2; 4]).unwrap(), &lent);
        assert_eq!(h.clone().into_chunk(16, 4), by_put.into_chunk(16, 4));
        // Block 1 written again: the old buffer goes back, and is the
        // next one a writer gets.
        Held::put_block(Some(&mut h), 16, 4, 4, pool.block_for(4, &[3; 4]).unwrap(), &lent);
        assert_eq!(h.block(1, 4), Some(&[3u8; 4][..]));
        let again = pool.block_for(8, &[4; 4]).unwrap();
        assert_eq!((addr(&again), &again[..]), (first, &[4u8; 4][..]), "the replaced buffer, reused");
        // Whole: copied in; the writer's buffer goes back to the pool.
        let mut w = Held::put(None, 8, 4, 0, &[5; 8], &lent).unwrap();
        let six = pool.block_for(4, &[6; 4]).unwrap();
        let six_at = addr(&six);
        assert!(Held::put_block(Some(&mut w), 8, 4, 4, six, &lent).is_none());
        assert_eq!(&w.into_chunk(8, 4)[..], &[5, 5, 5, 5, 6, 6, 6, 6]);
        while let Some(b) = lent.free(4) {
            if addr(&b) == six_at {
                return;
            }
        }
        panic!("the copied block's buffer went back to the pool");
    }

    fn packed(p: Payload) -> Vec<u8> {
        match p {
            Payload::Bytes(b) => b.to_vec(),
            Payload::Blocks(v) => v.concat(),
            _ => vec![],
        }
    }
}
