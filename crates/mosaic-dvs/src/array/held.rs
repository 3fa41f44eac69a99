//! The bytes of the write cache, kept as sparse as the cache counts them.
//!
//! ```text
//!   chunk written whole ──> Whole(the chunk)        (moved to the destage, no copy)
//!   blocks of a chunk   ──> Blocks(block -> bytes)  (one block's bytes each; a destage
//!                                                    takes them packed and copies each
//!                                                    run of them over the old bytes in
//!                                                    its write buffer: the chunk is never
//!                                                    put together on its own)
//! ```
//!
//! A block-counted cache of B blocks then holds about B blocks of bytes,
//! not one chunk buffer per chunk touched (a random 4 KiB write into each
//! of B chunks would otherwise hold B whole chunks).

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::Bitmap;

/// The cached bytes of one chunk.
#[derive(Debug, Clone)]
pub(crate) enum Held {
    Whole(Arc<[u8]>),
    Blocks(HashMap<u32, Box<[u8]>>),
}

impl Held {
    /// Bytes `[a, b)` of the chunk (block-aligned) from `data`.
    pub(crate) fn put(slot: Option<&mut Held>, chunk: usize, block: usize, a: usize, data: &[u8]) -> Option<Held> {
        if a == 0 && data.len() == chunk {
            return Some(Held::Whole(Arc::from(data)));
        }
        let mut fresh = None;
        let h = match slot {
            Some(h) => h,
            None => fresh.insert(Held::Blocks(HashMap::new())),
        };
        match h {
            Held::Whole(w) => Arc::make_mut(w)[a..a + data.len()].copy_from_slice(data),
            Held::Blocks(m) => {
                for (i, b) in data.chunks(block.max(1)).enumerate() {
                    m.insert((a / block.max(1) + i) as u32, b.into());
                }
            }
        }
        fresh
    }

    /// The bytes of block `i`, if held.
    pub(crate) fn block(&self, i: usize, block: usize) -> Option<&[u8]> {
        match self {
            Held::Whole(w) => w.get(i * block..(i + 1) * block),
            Held::Blocks(m) => m.get(&(i as u32)).map(|b| &b[..]),
        }
    }

    /// What a destage takes of the chunk ([`crate::program::Lower::job`]'s
    /// `cached`): a chunk held whole as it is (no copy); else only the
    /// blocks `bm` marks, packed in block order (a block not held as
    /// zeros), so the chunk is never put together in a buffer of its own.
    pub(crate) fn into_packed(self, bm: &Bitmap, chunk: usize, block: usize) -> Arc<[u8]> {
        let m = match self {
            Held::Whole(w) => return w,
            Held::Blocks(m) => m,
        };
        let blocks = chunk / block.max(1);
        let mut v = Vec::with_capacity(bm.ones() * block);
        for i in (0..blocks).filter(|&i| bm.get(i)) {
            let end = v.len() + block;
            if let Some(b) = m.get(&(i as u32)) {
                v.extend_from_slice(&b[..b.len().min(block)]);
            }
            v.resize(end, 0);
        }
        v.into()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_stay_sparse_until_the_chunk_is_put_together() {
        let mut h = Held::put(None, 16, 4, 4, &[1, 1, 1, 1]).unwrap();
        assert!(Held::put(Some(&mut h), 16, 4, 12, &[2, 2, 2, 2]).is_none());
        assert!(matches!(&h, Held::Blocks(m) if m.len() == 2));
        assert_eq!(h.block(3, 4), Some(&[2u8, 2, 2, 2][..]));
        assert_eq!(h.block(0, 4), None);
        assert_eq!(&h.into_chunk(16, 4)[..], &[0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2, 2]);
        let mut w = Held::put(None, 8, 4, 0, &[5; 8]).unwrap();
        Held::put(Some(&mut w), 8, 4, 4, &[6; 4]);
        assert_eq!(&w.into_chunk(8, 4)[..], &[5, 5, 5, 5, 6, 6, 6, 6]);
    }

    #[test]
    fn a_destage_takes_only_the_marked_blocks_packed() {
        let mut h = Held::put(None, 16, 4, 4, &[1, 1, 1, 1]).unwrap();
        Held::put(Some(&mut h), 16, 4, 12, &[2, 2, 2, 2]);
        let mut bm = Bitmap::new(4);
        bm.set(1, 2);
        bm.set(3, 4);
        assert_eq!(&h.clone().into_packed(&bm, 16, 4)[..], &[1, 1, 1, 1, 2, 2, 2, 2]);
        bm.set(0, 1); // marked but not held: zeros
        assert_eq!(&h.into_packed(&bm, 16, 4)[..], &[0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
        let w = Held::put(None, 8, 4, 0, &[5; 8]).unwrap();
        assert_eq!(&w.into_packed(&bm, 8, 4)[..], &[5; 8]); // whole: as it is
    }
}
