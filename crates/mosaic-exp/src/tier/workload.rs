//! The two benchmarks of the paper as seeded block workloads with arrival
//! times.
//!
//! **Postmark-like** (§4.2: 1,000–20,000 files of 500 B–10 KB, read:append
//! 5:5).  Postmark runs on a file system; here a small file system is
//! simulated on a block device of `block`-byte blocks:
//!
//! ```text
//!   create   pick size U[min, max] -> blocks = ceil(size/block), allocated
//!            first-fit from the free extents -> one Write per extent
//!   append   add U[1, max - size] bytes (Postmark never grows a file past
//!            max): rewrite the last partial block, then the new blocks,
//!            allocated right after the file if free (goal allocation) ->
//!            one Write when contiguous, else one per piece
//!   read     the whole file: one Read per extent
//!   delete   the file's blocks go back to the free extents (a Delete
//!            event: the space experiment frees them, a block device
//!            sees no I/O, as without discard)
//! ```
//!
//! The initial pool of `files` creates comes first, then `transactions`
//! transactions, each one of read/append (`read_pct` : 100 - `read_pct`)
//! and one of create/delete (5:5), as Postmark does.  A file's data is
//! one write run (its blocks, contiguous where the allocator had room),
//! which is exactly what the tier's coalescer turns into one ReHypar
//! "file".  Metadata (inodes, directories) is left out: ReHypar places
//! file data, and leaving it out keeps the runs the paper's files.
//! Transactions arrive `gap_ns` apart; the two operations of one
//! transaction `gap_ns / 2` apart.  The final deletion of Postmark is left
//! out (it would leave nothing to measure).
//!
//! **IOzone-like** (§4.1: 8 KB records, `-e` so the flush is timed, file
//! sizes 1 MB–256 MB): one file written sequentially in `record`-byte
//! requests that arrive at `rate` bytes/s (what the page cache hands the
//! block layer).  Bandwidth is the file size over the time from the first
//! arrival to the last completion: every write is on a device by then,
//! which is what the flush waits for.

use std::collections::BTreeMap;

use mosaic_trace::{Op, Request};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// Postmark-like parameters.
#[derive(Debug, Clone, Serialize)]
pub struct PostmarkSpec {
    /// Files created before the transactions.
    pub files: usize,
    pub transactions: usize,
    /// File sizes in bytes, uniform in `[min_size, max_size]`.
    pub min_size: u64,
    pub max_size: u64,
    /// Block size of the simulated file system (bytes).
    pub block: u64,
    /// Percentage of read (vs append) operations.
    pub read_pct: u32,
    /// Time between transactions (ns).
    pub gap_ns: u64,
    pub seed: u64,
}

impl Default for PostmarkSpec {
    fn default() -> Self {
        PostmarkSpec { files: 1000, transactions: 100_000, min_size: 500, max_size: 10_000, block: 1024, read_pct: 50, gap_ns: 1_000_000, seed: 1 }
    }
}

/// One file-system event, in blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsEvent {
    Write { time_ns: u64, lba: u64, blocks: u64 },
    Read { time_ns: u64, lba: u64, blocks: u64 },
    /// A deleted file's extents `(lba, blocks)`.
    Delete { time_ns: u64, extents: Vec<(u64, u64)> },
}

impl FsEvent {
    pub fn time_ns(&self) -> u64 {
        match self {
            FsEvent::Write { time_ns, .. } | FsEvent::Read { time_ns, .. } | FsEvent::Delete { time_ns, .. } => *time_ns,
        }
    }
}

/// What a Postmark-like run did, with its events.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PostmarkTrace {
    #[serde(skip)]
    pub events: Vec<FsEvent>,
    /// Sizes (bytes) of every file created.
    #[serde(skip)]
    pub created_sizes: Vec<u64>,
    pub block: u64,
    pub creates: u64,
    pub deletes: u64,
    pub reads: u64,
    pub appends: u64,
    pub transactions: u64,
    /// Files alive at the end.
    pub live_files: u64,
    /// Block requests of the initial pool's creation (they come first).
    pub setup_requests: u64,
}

impl PostmarkTrace {
    /// The block requests (reads and writes; deletes carry no I/O).
    pub fn requests(&self) -> Vec<Request> {
        let b = self.block;
        self.events
            .iter()
            .filter_map(|e| match *e {
                FsEvent::Write { time_ns, lba, blocks } => Some(Request { time_ns, op: Op::Write, offset: lba * b, len: blocks * b }),
                FsEvent::Read { time_ns, lba, blocks } => Some(Request { time_ns, op: Op::Read, offset: lba * b, len: blocks * b }),
                FsEvent::Delete { .. } => None,
            })
            .collect()
    }

    /// Highest block touched + 1.
    pub fn footprint_blocks(&self) -> u64 {
        self.events
            .iter()
            .map(|e| match e {
                FsEvent::Write { lba, blocks, .. } | FsEvent::Read { lba, blocks, .. } => lba + blocks,
                FsEvent::Delete { extents, .. } => extents.iter().map(|(l, n)| l + n).max().unwrap_or(0),
            })
            .max()
            .unwrap_or(0)
    }
}

/// The simulated file system's block allocator: free extents, first fit,
/// with a goal for appends.
#[derive(Debug, Clone)]
struct FreeExtents {
    /// start -> length; the last one is unbounded in practice.
    free: BTreeMap<u64, u64>,
}

impl FreeExtents {
    fn new() -> Self {
        FreeExtents { free: BTreeMap::from([(0, u64::MAX / 4)]) }
    }

    /// `n` blocks starting exactly at `goal`, if that many are free there.
    fn take_at(&mut self, goal: u64, n: u64) -> Option<(u64, u64)> {
        let (&s, &len) = self.free.range(..=goal).next_back()?;
        if s + len < goal + n {
            return None;
        }
        self.free.remove(&s);
        if goal > s {
            self.free.insert(s, goal - s);
        }
        if s + len > goal + n {
            self.free.insert(goal + n, s + len - goal - n);
        }
        Some((goal, n))
    }

    /// `n` blocks, first fit; pieces of the lowest extents when no extent holds all.
    fn take(&mut self, n: u64) -> Vec<(u64, u64)> {
        if let Some((&s, _)) = self.free.iter().find(|(_, &l)| l >= n) {
            return vec![self.take_at(s, n).expect("fits")];
        }
        let mut out = Vec::new();
        let mut left = n;
        while left > 0 {
            let (&s, &l) = self.free.iter().next().expect("the top extent is unbounded");
            let k = l.min(left);
            out.push(self.take_at(s, k).expect("fits"));
            left -= k;
        }
        out
    }

    fn give(&mut self, start: u64, n: u64) {
        let (mut s, mut l) = (start, n);
        if let Some((&ps, &pl)) = self.free.range(..s).next_back() {
            if ps + pl == s {
                self.free.remove(&ps);
                s = ps;
                l += pl;
            }
        }
        if let Some(nl) = self.free.remove(&(s + l)) {
            l += nl;
        }
        self.free.insert(s, l);
    }
}

struct File {
    size: u64,
    extents: Vec<(u64, u64)>,
}

impl File {
    fn last_block(&self) -> u64 {
        let (s, l) = *self.extents.last().expect("a file has a block");
        s + l - 1
    }
}

/// Generator state.
struct Gen<'a> {
    spec: &'a PostmarkSpec,
    rng: ChaCha8Rng,
    fs: FreeExtents,
    files: Vec<File>,
    out: PostmarkTrace,
}

impl Gen<'_> {
    fn blocks(&self, size: u64) -> u64 {
        size.div_ceil(self.spec.block)
    }

    fn create(&mut self, t: u64) {
        let size = self.rng.gen_range(self.spec.min_size..=self.spec.max_size);
        let extents = self.fs.take(self.blocks(size));
        for &(lba, blocks) in &extents {
            self.out.events.push(FsEvent::Write { time_ns: t, lba, blocks });
        }
        self.out.created_sizes.push(size);
        self.out.creates += 1;
        self.files.push(File { size, extents });
    }

    fn delete(&mut self, t: u64) {
        let i = self.rng.gen_range(0..self.files.len());
        let f = self.files.swap_remove(i);
        for &(s, n) in &f.extents {
            self.fs.give(s, n);
        }
        self.out.events.push(FsEvent::Delete { time_ns: t, extents: f.extents });
        self.out.deletes += 1;
    }

    fn read(&mut self, i: usize, t: u64) {
        for &(lba, blocks) in &self.files[i].extents {
            self.out.events.push(FsEvent::Read { time_ns: t, lba, blocks });
        }
        self.out.reads += 1;
    }

    fn append(&mut self, i: usize, t: u64) {
        self.out.appends += 1;
        let (max, b) = (self.spec.max_size, self.spec.block);
        if self.files[i].size >= max {
            return;
        }
        let add = self.rng.gen_range(1..=max - self.files[i].size);
        let f = &self.files[i];
        let (old_blocks, new_size) = (self.blocks(f.size), f.size + add);
        let need = self.blocks(new_size) - old_blocks;
        let last = f.last_block();
        // The last block is rewritten when it was partly filled.
        let rewrite = f.size % b != 0;
        let mut pieces = if need == 0 { vec![] } else { self.fs.take_at(last + 1, need).map(|p| vec![p]).unwrap_or_else(|| self.fs.take(need)) };
        let mut writes = pieces.clone();
        match (rewrite, writes.first_mut()) {
            (true, Some(p)) if p.0 == last + 1 => *p = (last, p.1 + 1),
            (true, _) => writes.insert(0, (last, 1)),
            _ => {}
        }
        for (lba, blocks) in writes {
            self.out.events.push(FsEvent::Write { time_ns: t, lba, blocks });
        }
        let f = &mut self.files[i];
        f.size = new_size;
        for p in pieces.drain(..) {
            match f.extents.last_mut() {
                Some(e) if e.0 + e.1 == p.0 => e.1 += p.1,
                _ => f.extents.push(p),
            }
        }
    }

    fn transaction(&mut self, t: u64) {
        if !self.files.is_empty() {
            let i = self.rng.gen_range(0..self.files.len());
            if self.rng.gen_range(0..100) < self.spec.read_pct {
                self.read(i, t);
            } else {
                self.append(i, t);
            }
        }
        let t2 = t + self.spec.gap_ns / 2;
        if self.files.is_empty() || self.rng.gen_bool(0.5) {
            self.create(t2);
        } else {
            self.delete(t2);
        }
        self.out.transactions += 1;
    }
}

/// Generate a Postmark-like run.
pub fn postmark(spec: &PostmarkSpec) -> PostmarkTrace {
    let mut g = Gen {
        spec,
        rng: ChaCha8Rng::seed_from_u64(spec.seed),
        fs: FreeExtents::new(),
        files: Vec::new(),
        out: PostmarkTrace { block: spec.block, ..Default::default() },
    };
    let mut t = 0;
    for _ in 0..spec.files {
        g.create(t);
        t += spec.gap_ns;
    }
    g.out.setup_requests = g.out.events.len() as u64;
    for _ in 0..spec.transactions {
        g.transaction(t);
        t += spec.gap_ns;
    }
    g.out.live_files = g.files.len() as u64;
    g.out
}

/// IOzone-like parameters.
#[derive(Debug, Clone, Serialize)]
pub struct IozoneSpec {
    pub file_size: u64,
    /// Record (request) size, bytes.
    pub record: u64,
    /// Bytes per second the writer hands the block layer.
    pub rate: u64,
}

impl Default for IozoneSpec {
    fn default() -> Self {
        IozoneSpec { file_size: 256 << 20, record: 8 << 10, rate: 1 << 30 }
    }
}

/// The IOzone-like write stream: sequential records from offset 0.
pub fn iozone(spec: &IozoneSpec) -> Vec<Request> {
    let rec = spec.record.max(1);
    let gap = (rec as u128 * 1_000_000_000 / spec.rate.max(1) as u128) as u64;
    (0..spec.file_size / rec).map(|i| Request { time_ns: i * gap, op: Op::Write, offset: i * rec, len: rec }).collect()
}
