//! File-system-shaped block workloads for the small-write experiments:
//! a Postmark-like small-file churn and an IOzone-like sequential rewrite.
//!
//! The `postmark` program itself runs against a mounted file system and
//! leaves no block trace; these generators produce the block requests such
//! a run issues on a simple file system, seeded and documented:
//!
//! ```text
//!   [ metadata: inode/directory blocks ][ data blocks: bump allocator + free list ]
//! ```
//!
//! **Postmark-like** (Katcher's defaults, scaled): `files` files of 500 B
//! to 10 KB (uniform) are created, then `transactions` transactions each do
//! one of read/append (5:5) and one of create/delete (5:5) on a random
//! file, as Postmark does.  A create writes the file's blocks and its inode
//! block; an append rewrites the file's last block and writes the new
//! ones, then its inode block; a read reads the whole file; a delete writes
//! the inode block (its data blocks go back to the free list, first reused
//! first).  Blocks are `block` bytes; a file's blocks are allocated
//! together where the allocator has a run, so small files are contiguous.
//!
//! **IOzone-like**: a `file_size` file written sequentially in `record`-
//! byte requests, then rewritten `rewrites` times in the same order (the
//! paper's sequential-write, many-rewrites input).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_trace::{Op, Request};

/// Postmark-like parameters.
#[derive(Debug, Clone)]
pub struct Postmark {
    pub files: usize,
    pub transactions: usize,
    pub min_size: u64,
    pub max_size: u64,
    pub block: u64,
    /// Inode/directory blocks at the start of the space.
    pub meta_blocks: u64,
    pub seed: u64,
}

impl Default for Postmark {
    fn default() -> Self {
        Postmark { files: 500, transactions: 2000, min_size: 500, max_size: 10_000, block: 4096, meta_blocks: 64, seed: 1 }
    }
}

struct File {
    size: u64,
    blocks: Vec<u64>,
    inode: u64,
}

struct Alloc {
    next: u64,
    free: std::collections::BTreeSet<u64>,
}

impl Alloc {
    fn take(&mut self, n: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match self.free.pop_first() {
                Some(b) => out.push(b),
                None => {
                    out.push(self.next);
                    self.next += 1;
                }
            }
        }
        out
    }
}

impl Postmark {
    /// The block requests, in order (time stamps 0: replay closed loop).
    pub fn requests(&self) -> Vec<Request> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let b = self.block;
        let mut out = Vec::new();
        let mut alloc = Alloc { next: self.meta_blocks, free: Default::default() };
        let mut files: Vec<File> = Vec::new();
        let mut next_inode = 0u64;
        let push = |out: &mut Vec<Request>, op: Op, block: u64, n: u64| {
            out.push(Request { time_ns: 0, op, offset: block * b, len: n * b });
        };
        // Runs of consecutive blocks become one request each.
        let io = |out: &mut Vec<Request>, op: Op, blocks: &[u64]| {
            let mut i = 0;
            while i < blocks.len() {
                let mut j = i + 1;
                while j < blocks.len() && blocks[j] == blocks[j - 1] + 1 {
                    j += 1;
                }
                push(out, op, blocks[i], (j - i) as u64);
                i = j;
            }
        };
        let mut create = |rng: &mut ChaCha8Rng, out: &mut Vec<Request>, files: &mut Vec<File>, alloc: &mut Alloc| {
            let size = rng.gen_range(self.min_size..=self.max_size);
            let blocks = alloc.take(size.div_ceil(b) as usize);
            io(out, Op::Write, &blocks);
            let inode = next_inode % self.meta_blocks;
            next_inode += 1;
            push(out, Op::Write, inode, 1);
            files.push(File { size, blocks, inode });
        };
        for _ in 0..self.files {
            create(&mut rng, &mut out, &mut files, &mut alloc);
        }
        for _ in 0..self.transactions {
            if !files.is_empty() {
                let i = rng.gen_range(0..files.len());
                if rng.gen_bool(0.5) {
                    io(&mut out, Op::Read, &files[i].blocks);
                } else {
                    // Append up to max_size - min_size bytes.
                    let add = rng.gen_range(1..=(self.max_size - self.min_size).max(1));
                    let f = &mut files[i];
                    let old_blocks = f.blocks.len() as u64;
                    f.size += add;
                    let need = f.size.div_ceil(b) - old_blocks;
                    let mut touched = vec![*f.blocks.last().expect("files have a block")];
                    let new = alloc.take(need as usize);
                    touched.extend(&new);
                    f.blocks.extend(new);
                    io(&mut out, Op::Write, &touched);
                    push(&mut out, Op::Write, f.inode, 1);
                }
            }
            if rng.gen_bool(0.5) || files.is_empty() {
                create(&mut rng, &mut out, &mut files, &mut alloc);
            } else {
                let i = rng.gen_range(0..files.len());
                let f = files.swap_remove(i);
                push(&mut out, Op::Write, f.inode, 1);
                alloc.free.extend(f.blocks);
            }
        }
        out
    }
}

/// IOzone-like sequential write and rewrites.
pub fn iozone(file_size: u64, record: u64, rewrites: usize) -> Vec<Request> {
    let records = file_size / record.max(1);
    (0..=rewrites)
        .flat_map(|_| (0..records).map(move |r| Request { time_ns: 0, op: Op::Write, offset: r * record, len: record }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postmark_is_seeded_small_and_mixed() {
        let p = Postmark { files: 50, transactions: 200, ..Default::default() };
        let a = p.requests();
        assert_eq!(a, p.requests());
        let writes = a.iter().filter(|r| r.op == Op::Write).count();
        let reads = a.len() - writes;
        assert!(reads > 50 && writes > 200, "reads {reads} writes {writes}");
        // 500 B .. 10 KB files in 4 KiB blocks: no request over 3 blocks
        // except appends, which add at most 10 KB (+ the last block).
        assert!(a.iter().all(|r| r.len % 4096 == 0 && r.len <= 5 * 4096));
        // Inode blocks are rewritten: the metadata area sees repeats.
        let meta = a.iter().filter(|r| r.offset < 64 * 4096 && r.op == Op::Write).count();
        assert!(meta > 64);
    }

    #[test]
    fn iozone_rewrites_in_order() {
        let v = iozone(1 << 20, 64 << 10, 2);
        assert_eq!(v.len(), 48);
        assert_eq!(v[16].offset, 0);
        assert_eq!(v[17].offset, 64 << 10);
    }
}
