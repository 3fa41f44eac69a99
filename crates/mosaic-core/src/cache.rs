//! The small-write caches: write cache, parity cache (full or partial) and
//! old-data buffer, after Chung & Hsu, "Partial Parity Cache and Data Cache
//! Management Method to Improve the Performance of an SSD-Based RAID"
//! (IEEE TVLSI 2014).
//!
//! ```text
//!            host writes                         host reads
//!                 │                                  │ hit: no device op
//!                 ▼                                  ▼
//!   ┌──────────────────────────┐  victim row   ┌────────────────────────┐
//!   │ write cache (pages)      │──────────────▶│ parity planning per     │
//!   │ victim: most pages,      │               │ policy:                 │
//!   │  then (ppc+data, not hot)│               │  none  RMW | RCW | FSW  │
//!   │  parity cached, then LRU │               │  fpc   full parity kept │
//!   └──────────────────────────┘               │  ppc   partial parity   │
//!                                              └───┬──────────┬─────────┘
//!        data pages written to the drives at once ◀┘          │ parity kept
//!   ┌──────────────────────────┐                   ┌──────────▼─────────┐
//!   │ data buffer (ppc+data):  │ latest value of   │ parity cache (LRU)  │
//!   │ per entry, its covered   │ covered pages ───▶│ full: written as is │
//!   │ pages; clean pages (LRU) │ no read to update │ partial: method 1   │
//!   └──────────────────────────┘ values for evict  │ or 2, fewer reads   │
//!                                                  └─────────────────────┘
//! ```
//!
//! **Granularity.**  A *page* is one stripe unit of one column (the paper's
//! one SSD page per unit); a *row* is one stripe.  Every parity decision is
//! made per stripe.  A write that covers part of a unit is widened to
//! whole pages: the rest of each partly covered page comes from the cache
//! or, when the page is not cached, from one read of the missing part (a
//! *fill*, foreground, [`CachedArray::widen`]).  Both modes widen alike,
//! so the simulator counts the very reads the real array does.
//!
//! **Reads** read from the drives only the parts of a request whose pages
//! are not cached ([`CachedArray::read_steps`]); a request entirely in the
//! cache reads nothing.
//!
//! **Policies** (`--cache NAME`):
//!
//! * `none`: plain RAID-5/6 behind the write cache: a victim row is written
//!   with whichever of RMW (read old data and old code), RCW (read the
//!   untouched data) or FSW (read nothing) needs the fewest reads (the
//!   layout's write policy can force RMW or RCW; the paper's RAID-5 always
//!   reads the rest of the stripe, i.e. RCW), and its code is written at
//!   once.
//! * `fpc`: full-parity cache.  The victim's new full parity is computed
//!   like `none` (but with the old code taken from the cache when it is
//!   there, so an RMW reads only old data) and kept in the parity cache;
//!   code is written only when an entry is evicted (LRU), with no read since
//!   it is full.
//! * `ppc`: partial-parity cache.  A row's partial parity is the code of the
//!   pages written since its parity was last written (the *covered* pages;
//!   XOR for one code column, the coded sum for RS).  Its eviction writes
//!   the full parity by the cheaper of the paper's two methods (Sect.
//!   IV-E): method 2 reads the pages it does not cover; method 1 reads the
//!   old code and needs the covered pages' *old* values, the ones that
//!   match that code, which the write-through of each victim overwrites on
//!   the drives.  So the choice is made when the entry starts, while the
//!   old values are still there: a victim row of `w` pages with no entry
//!   keeps its *change* (old + new values: `w` reads now, then the `m` old
//!   code units at eviction) when `w + m` is less than the pages method 2
//!   would read, else its partial parity (nothing read now).  Later
//!   victims of the row fold in, reading the old value of each page whose
//!   value or change the entry holds already, and, for a change, of each
//!   new page; when reading the row's other pages costs no more, the code
//!   is recomputed from the whole row (an RCW whose code is kept: the
//!   entry then covers every page and its eviction reads nothing).  A
//!   row covered entirely needs no read.
//! * `ppc+data`: the paper's proposal: `ppc` plus its data buffer.  Per
//!   parity entry (the paper's Fig. 3) it holds the latest value of every
//!   covered page, so folding a rewritten page in reads nothing (its Fig.
//!   16b).  When the entry's parity is written, those values match the
//!   code on the drives: the buffer keeps them as *clean* pages (LRU,
//!   `old_data` bytes); a later eviction of the row takes them instead of
//!   reading (method 2) or as the old values of method 1 for a partial
//!   parity ([`CachedArray::parity_flush`]).  Its victim rule (among the
//!   rows with the most pages, prefer one whose parity is cached) applies
//!   except to hot rows ([`CachedArray::victim`]).  An entry that holds
//!   no change is the code of exactly those buffered values, so its code
//!   is neither computed nor kept: a fold only updates the buffer, the
//!   flush sums it ([`Keep::Buffered`]).  Same device operations, fewer
//!   bytes touched a write.
//!
//! **Replacement**, per structure: the write cache evicts the row with the
//! most cached pages (ties: under ppc+data a row with a cached parity
//! unless hot, then the least recently written); the parity cache
//! evicts its least recently used row (its data-buffer pages go with it);
//! the clean pages their least recently used page.  Capacities are bytes:
//! the write cache and the clean pages (`old_data`) hold `unit`-byte
//! pages, a parity-cache entry costs `m * unit` bytes, plus (ppc+data) up
//! to `k` pages of data buffer.
//!
//! **Counting.**  Every device operation the policy causes is in the plans
//! it returns; [`CacheStats`] splits the reads and writes done for parity
//! generation (old data, old code, uncovered pages, code writes) from the
//! data writes, as the paper's figures do.
//!
//! **Programs.**  The policy plans [`Step`]s: a stripe plan and a
//! [`Recipe`] saying how its code is computed (code = base + Σ A[row][col]
//! · term over GF(2^8)).  [`CachedArray::lower`] turns each step into one
//! [`Program`]: reads, the code as [`Combine`]s, journaled writes.  In
//! counting mode the simulator runs those programs ([`Frontend`]); in byte
//! mode ([`CachedArray::with_bytes`]) the real volume runs them, the cache
//! supplying its pages as shared [`Buf::Page`]s, and stores the code a
//! step keeps ([`CachedArray::commit`]).  Both modes lower a step into the
//! same program, byte buffers aside.
//!
//! A write whose pages cannot all fit the write cache bypasses it (its
//! cached pages are dropped) and is planned directly.

use std::collections::HashMap;

use serde::Serialize;

use crate::frontend::{Frontend, Staged};
use crate::geometry::Geometry;
use crate::health::Health;
use crate::layout::{FixedLayout, Layout};
use crate::plan::{DevOp, Method, Plan, Role, StripePlan};
use crate::planner::WritePolicy;
use crate::program::{Buf, Combine, Io, Mark, Page, Phase, Program, Ref};
use crate::PlanError;

mod order;
use order::{Handle, StampOrder, NIL};

/// Which parity cache runs behind the write cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum CachePolicy {
    None,
    Fpc,
    Ppc,
    PpcData,
}

impl CachePolicy {
    pub const ALL: [CachePolicy; 4] = [CachePolicy::None, CachePolicy::Fpc, CachePolicy::Ppc, CachePolicy::PpcData];

    pub fn parse(s: &str) -> Result<CachePolicy, PlanError> {
        match s {
            "none" => Ok(CachePolicy::None),
            "fpc" => Ok(CachePolicy::Fpc),
            "ppc" => Ok(CachePolicy::Ppc),
            "ppc+data" => Ok(CachePolicy::PpcData),
            _ => Err(PlanError::Invalid(format!("unknown cache policy {s:?}: expected none, fpc, ppc or ppc+data"))),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            CachePolicy::None => "none",
            CachePolicy::Fpc => "fpc",
            CachePolicy::Ppc => "ppc",
            CachePolicy::PpcData => "ppc+data",
        }
    }
}

/// Sizes of the three structures, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CacheConfig {
    pub policy: CachePolicy,
    pub write_cache: u64,
    pub parity_cache: u64,
    pub old_data: u64,
}

impl CacheConfig {
    /// The paper's setting: all three structures the same size.
    pub fn uniform(policy: CachePolicy, bytes: u64) -> CacheConfig {
        CacheConfig { policy, write_cache: bytes, parity_cache: bytes, old_data: bytes }
    }
}

/// What the policy did, for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    pub writes: u64,
    pub write_hits: u64,
    pub read_hits: u64,
    pub bypasses: u64,
    pub victims: u64,
    /// Device reads done to generate or update parity (old data, old code,
    /// uncovered pages); fills are counted apart.
    pub parity_reads: u64,
    /// Code units written.
    pub parity_writes: u64,
    /// Data units written by destaging.
    pub data_writes: u64,
    pub parity_evictions: u64,
    /// Parity evictions that read the old code and took the covered
    /// pages' values from the data buffer (the paper's method 1) ...
    pub method1: u64,
    /// ... and that completed the partial parity with the uncovered pages
    /// (method 2; a full parity is written as is and counts as neither).
    pub method2: u64,
    /// Partial-parity updates (ppc+data) whose old values came from the
    /// entry's data buffer: every one, so they read nothing.
    pub old_data_hits: u64,
    /// Uncovered pages a method-2 eviction took from the data buffer
    /// instead of reading them.
    pub clean_hits: u64,
    pub merges: u64,
    /// Partly written pages not in the cache, read to widen a write to
    /// whole pages (one read of the missing part each).
    pub fills: u64,
}

/// A small set of columns (k <= 255).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct ColSet([u64; 4]);

impl ColSet {
    pub fn insert(&mut self, c: usize) -> bool {
        let (w, b) = (c / 64, 1u64 << (c % 64));
        let fresh = self.0[w] & b == 0;
        self.0[w] |= b;
        fresh
    }
    pub fn contains(&self, c: usize) -> bool {
        self.0[c / 64] & (1u64 << (c % 64)) != 0
    }
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The columns in increasing order (walks the set bits only).
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| Bits(bits).map(move |b| w * 64 + b))
    }
}

/// The set bits of a word, lowest first.
struct Bits(u64);

impl Iterator for Bits {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let b = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(b)
    }
}

/// A hasher for the cache's small integer keys (rows, pages): one
/// multiply per word instead of SipHash.  The maps are never iterated in
/// an order that matters (`parity_rows` sorts), so the policy's decisions
/// do not depend on it.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

type Map<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<KeyHasher>>;

/// A hash map over small integer keys with [`KeyHasher`] (for the cache
/// volume's own page maps).
pub type KeyMap<K, V> = Map<K, V>;

/// A cached row of the write cache (whole pages only).
#[derive(Debug, Clone)]
struct Row {
    pages: ColSet,
    last: u64,
    /// Its entry in the victim order and in the order of rows whose
    /// parity is cached ([`NIL`]: not listed).
    victim: Handle,
    with_parity: Handle,
}

impl Default for Row {
    fn default() -> Row {
        Row { pages: ColSet::default(), last: 0, victim: NIL, with_parity: NIL }
    }
}

/// The hot-row window of ppc+data's victim rule ([`CachedArray::victim`]):
/// a row written within the last quarter write cache's worth of writes
/// is not taken for having a cached parity.  Measured (device operations
/// of ppc+data, final destage included; NOTES-README "victim rule"): no
/// rule / the paper's / window 1/8, 1/4, 1/2 of the write cache: recorded
/// ext2 Postmark 113,668 / 119,145 / 116,107, 112,273, 111,506; 4 KiB
/// random writes 184,140 / 140,779 / 145,134, 149,706, 158,287.
fn rule_window(wc_pages: u64) -> u64 {
    wc_pages / 4
}

/// Victim order: most pages first (the bucket), then least recently
/// written, then the lowest row (ppc+data departs from it by its rule,
/// [`CachedArray::victim`]); the same order as a `BTreeSet` of
/// `(Reverse(pages), last, row)`, ties included.
type VictimOrder = StampOrder<u64>;

/// A parity-cache entry: full parity (fpc) or partial parity (ppc).
#[derive(Debug, Clone, Copy)]
struct ParityEntry {
    covered: ColSet,
    /// The entry in the parity cache's LRU order (stamped when last used).
    lru: Handle,
    /// The entry holds the covered pages' change (old + new values), not
    /// their values: its eviction adds the old code (method 1).
    delta: bool,
}

/// Where one term of a parity computation comes from.  A term of column
/// `c` that names no bytes of its own takes page `c`'s new bytes from the
/// step's `pages`.
#[derive(Debug, Clone)]
pub enum Src {
    /// The page's new bytes (it joins a code sum).
    Page,
    /// The bytes of read `i` of the step's plan.
    Read(usize),
    /// Read `i` plus the page's new bytes (old data out, new data in).
    ReadXor(usize),
    /// These old bytes plus the page's new bytes (old-data buffer hit).
    Xor(Buf),
    /// These bytes alone (a page value the data buffer holds).
    Held(Buf),
}

/// The code a step starts from.
#[derive(Debug, Clone)]
pub enum Base {
    Zero,
    /// The step's reads at these indices, in code-column order.
    Reads(Vec<usize>),
    /// The code bytes the parity cache holds for `stripe` when the step
    /// runs (steps are lowered and run in the order they were planned);
    /// `take` drops them once the step has run.
    Stored { stripe: u64, take: bool },
    /// Method 1: the stored code (dropped once run) plus the old code the
    /// step's reads at these indices hold, in code-column order.
    StoredAndReads { stripe: u64, reads: Vec<usize> },
    /// Nothing, and the stored code is dropped once the step has run.
    ZeroTake { stripe: u64 },
}

impl Base {
    /// Whether the step drops the row's stored code once it has run.
    fn takes(&self) -> bool {
        matches!(self, Base::Stored { take: true, .. } | Base::StoredAndReads { .. } | Base::ZeroTake { .. })
    }
}

/// How a step computes the bytes of its writes.  Byte buffers are
/// [`Buf::Page`]s in byte mode (shared with the cache, never copied; a
/// bypassing write's bytes are one [`Buf::Bytes`]) and
/// [`Buf::Scratch`] of the same length in counting mode, so both modes
/// lower a step into the same program ([`CachedArray::lower`]).
#[derive(Debug, Clone)]
pub enum Recipe {
    /// Code = base + sum of A[row][c] * term over `terms` (c, term).
    Parity {
        stripe: u64,
        base: Base,
        terms: Vec<(usize, Src)>,
        /// Whether the row's code stays in the parity cache (its code on
        /// the drives is then stale until the entry is flushed), and how.
        keep: Keep,
        /// New bytes of the data pages this step writes.
        pages: Vec<(usize, Buf)>,
    },
    /// A write plan of the layout's own planner whose new bytes are `input`.
    Direct { input: Buf },
    /// A read plan of the layout's own planner (the fill of a partly
    /// written page, counting mode; the real volume reads its fills).
    Read,
}

/// What stays in the parity cache of a [`Recipe::Parity`] step's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Nothing: the code is written to the drives (or is not needed).
    No,
    /// The code computed, as the row's stored code bytes.
    Code,
    /// The row's code is the sum of its data buffer's values (ppc+data,
    /// an entry holding no change): nothing is computed or stored now;
    /// the flush sums them ([`CachedArray::parity_flush`]).
    Buffered,
}

impl Keep {
    /// Whether the row's code on the drives goes stale (the step's
    /// program logs [`Mark::Resync`] for the row).
    pub fn stale(self) -> bool {
        self != Keep::No
    }
}

/// A write widened to whole pages ([`CachedArray::widen`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Widened {
    /// The page-aligned range the cache takes.
    pub offset: u64,
    pub len: u64,
    /// Logical ranges (offset, length) to read before: the missing parts
    /// of partly written pages the cache does not hold.
    pub fills: Vec<(u64, u64)>,
}

/// What a read takes from the drives ([`CachedArray::read_steps`]).
#[derive(Debug, Clone)]
pub struct ReadSteps {
    /// Logical ranges (offset, length) not in the cache, in order.
    pub ranges: Vec<(u64, u64)>,
    /// Parity flushes to run before the reads (degraded rows only).
    pub flush: Vec<Step>,
}

/// One stripe plan of the policy, with the recipe of its bytes.
#[derive(Debug, Clone)]
pub struct Step {
    pub sp: StripePlan,
    pub recipe: Recipe,
}

/// Bytes the structures hold when the policy runs on real data.
#[derive(Default)]
struct Bytes {
    pages: Map<(u64, usize), Page>,
    /// A row's `m` code units, one after the other.
    parity: Map<u64, Page>,
    /// The data buffer of each parity entry (ppc+data): the latest value
    /// of every page its partial parity covers.
    old: Map<(u64, usize), Page>,
    /// The data buffer's clean pages (ppc+data).
    clean: Map<(u64, usize), Page>,
    /// Buffers no structure holds any more, reused for new ones (no
    /// allocation per write), by length: a page's and a row's code (one
    /// length when `m` is 1, two otherwise); the most recently freed,
    /// warmest, last.
    spare: Vec<(usize, Vec<Page>)>,
    /// How many `spare` keeps at most: as many as the structures hold when
    /// full ([`CachedArray::buffers_held`]), so the buffers a checkpoint
    /// lets go are the ones the cache refills with, never freed and
    /// allocated again.  (With a cap of 64, the allocator gave the freed
    /// pages back to the system and took them again, zeroed, at every
    /// checkpoint: about 4 % of ppc+data's CPU time in `bench cache`.)
    spare_max: usize,
    /// Buffers allocated so far (not taken from `spare`).
    allocated: u64,
}

impl Bytes {
    /// The spare buffers of `len` bytes.
    fn spare_of(&mut self, len: usize) -> Option<&mut Vec<Page>> {
        self.spare.iter_mut().find(|(l, _)| *l == len).map(|(_, v)| v)
    }

    /// A buffer holding a copy of `src`: the last spare one of its
    /// length, else a new one.
    fn page_of(&mut self, src: &[u8]) -> Page {
        if let Some(mut a) = self.spare_of(src.len()).and_then(Vec::pop) {
            if let Some(dst) = a.get_mut() {
                dst.copy_from_slice(src);
                return a;
            }
        }
        self.allocated += 1;
        Page::copy_of(src)
    }

    /// Keep `a` for reuse if nothing else holds it.  Its counts are read,
    /// not locked ([`Page::is_unique`], not [`Page::get_mut`]'s
    /// compare-and-swap), and they live apart from the page, which is
    /// usually cold (a clean page the LRU let go): a locked operation on a
    /// line not in the CPU cache stalls everything after it.  One holder
    /// and no weak reference stay so: nothing clones a spare buffer
    /// ([`Bytes::page_of`] then takes it by `get_mut`, which orders the
    /// write after every other holder's drop).
    fn recycle(&mut self, a: Page) {
        let spares: usize = self.spare.iter().map(|(_, v)| v.len()).sum();
        if spares < self.spare_max && a.is_unique() {
            let len = a.len();
            match self.spare_of(len) {
                Some(v) => v.push(a),
                None => self.spare.push((len, vec![a])),
            }
        }
    }

    /// Store a copy of `src` as page `key`, over its old bytes when
    /// nothing else holds them.
    fn put_page(&mut self, key: (u64, usize), src: &[u8]) {
        if let Some(dst) = self.pages.get_mut(&key).and_then(Page::get_mut).filter(|d| d.len() == src.len()) {
            dst.copy_from_slice(src);
            return;
        }
        let a = self.page_of(src);
        if let Some(old) = self.pages.insert(key, a) {
            self.recycle(old);
        }
    }
}

/// The write cache, parity cache and old-data buffer in front of a
/// parity layout.  Every step it plans lowers into one [`Program`]
/// ([`CachedArray::lower`]); counting mode hands those to the simulator
/// ([`Frontend`]); with [`CachedArray::with_bytes`] it also keeps the
/// bytes, the real array runs the programs and the cache stores the code
/// they keep ([`CachedArray::commit`]).
pub struct CachedArray {
    layout: FixedLayout,
    cfg: CacheConfig,
    geo: Geometry,
    rows: Map<u64, Row>,
    victims: VictimOrder,
    /// The cached rows whose parity is cached (ppc+data), in victim order.
    with_parity: VictimOrder,
    cached_pages: u64,
    parity: Map<u64, ParityEntry>,
    /// Parity entries by last use (one bucket; ties go by row).
    parity_lru: StampOrder<u64>,
    /// Clean pages of the data buffer (ppc+data): page key -> its entry in
    /// `clean_lru` (stamped when last used, ties by page key).  Their
    /// values match the code on the drives ([`CachedArray::clean_put`]).
    clean: Map<(u64, usize), Handle>,
    clean_lru: StampOrder<(u64, usize)>,
    clock: u64,
    stats: CacheStats,
    bytes: Option<Bytes>,
    /// Whether the replay's closing flush destages everything
    /// ([`CachedArray::destage_at_end`]).
    destage_at_end: bool,
}

impl CachedArray {
    pub fn new(layout: &FixedLayout, cfg: CacheConfig) -> Result<CachedArray, PlanError> {
        let geo = layout.geometry().clone();
        if geo.m == 0 || geo.is_mirror() {
            return Err(PlanError::Invalid(format!(
                "the {} cache needs a parity layout (raid4/5/6, rs:K+M or cbro), not {}",
                cfg.policy.name(),
                geo.level
            )));
        }
        if cfg.write_cache < geo.unit {
            return Err(PlanError::Invalid(format!(
                "write cache of {} bytes holds no {}-byte page",
                cfg.write_cache, geo.unit
            )));
        }
        let entry = geo.m as u64 * geo.unit;
        if cfg.policy != CachePolicy::None && cfg.parity_cache < entry {
            return Err(PlanError::Invalid(format!(
                "parity cache of {} bytes holds no entry ({} code units of {} bytes)",
                cfg.parity_cache, geo.m, geo.unit
            )));
        }
        Ok(CachedArray {
            layout: FixedLayout::new(geo.clone())?.with_policy(layout.planner.policy),
            cfg,
            geo,
            rows: Map::default(),
            victims: VictimOrder::default(),
            with_parity: VictimOrder::default(),
            cached_pages: 0,
            parity: Map::default(),
            parity_lru: StampOrder::default(),
            clean: Map::default(),
            clean_lru: StampOrder::default(),
            clock: 0,
            stats: CacheStats::default(),
            bytes: None,
            destage_at_end: false,
        })
    }

    /// Make the closing flush of a simulated replay destage every cached
    /// row and parity entry, so the run counts all the work the policy
    /// defers (`mosaic replay --cache`; a real replay's volume destages
    /// the same steps before its flush).
    pub fn destage_at_end(mut self, on: bool) -> CachedArray {
        self.destage_at_end = on;
        self
    }

    /// Keep the bytes of every structure (the real array's mode): writes
    /// must then cover whole pages (stripe units).
    pub fn with_bytes(mut self) -> Result<CachedArray, PlanError> {
        self.layout.math.code()?;
        self.bytes = Some(Bytes { spare_max: self.buffers_held(), ..Bytes::default() });
        Ok(self)
    }

    /// Byte buffers the structures hold when full: the write cache's
    /// pages; per parity entry (fpc, ppc, ppc+data) its code; under
    /// ppc+data also the clean pages and up to `k` data-buffer pages an
    /// entry.
    pub fn buffers_held(&self) -> usize {
        let (entries, data) = match self.cfg.policy {
            CachePolicy::None => (0, false),
            CachePolicy::Fpc | CachePolicy::Ppc => (self.pc_entries(), false),
            CachePolicy::PpcData => (self.pc_entries(), true),
        };
        let data_pages = if data { self.od_pages() + entries * self.geo.k } else { 0 };
        self.wc_pages() as usize + entries + data_pages
    }

    pub fn config(&self) -> CacheConfig {
        self.cfg
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.stats
    }

    /// Byte buffers allocated so far (byte mode): the cache reuses the ones
    /// its structures let go, so this stays near
    /// [`CachedArray::buffers_held`] however long it runs.
    pub fn buffers_allocated(&self) -> u64 {
        self.bytes.as_ref().map_or(0, |b| b.allocated)
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Bytes of a cached page (byte mode): newer than the drives' copy.
    pub fn cached_page(&self, stripe: u64, col: usize) -> Option<&[u8]> {
        self.bytes.as_ref()?.pages.get(&(stripe, col)).map(|v| &v[..])
    }

    /// Rows whose code on the drives is stale (their parity is cached).
    pub fn parity_rows(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.parity.keys().copied().collect();
        v.sort_unstable();
        v
    }

    fn wc_pages(&self) -> u64 {
        self.cfg.write_cache / self.geo.unit
    }
    fn pc_entries(&self) -> usize {
        (self.cfg.parity_cache / (self.geo.m as u64 * self.geo.unit)) as usize
    }
    fn od_pages(&self) -> usize {
        (self.cfg.old_data / self.geo.unit) as usize
    }

    fn op(&self, stripe: u64, col: usize, role: Role) -> DevOp {
        let g = &self.geo;
        DevOp { member: g.member_of(stripe, col), offset: g.offset_of(stripe, col), len: g.unit, role, col }
    }

    fn stripe_plan(stripe: u64, method: Method) -> StripePlan {
        StripePlan { stripe, method, touched: vec![], reads: vec![], writes: vec![], span: (0, 0), missing: vec![] }
    }

    /// Whether the write cache holds page `col` of `stripe`.
    fn is_cached(&self, stripe: u64, col: usize) -> bool {
        self.rows.get(&stripe).is_some_and(|r| r.pages.contains(col))
    }

    /// Widen a write to whole pages: the page-aligned range and the fills,
    /// the logical ranges to read first (the missing part of each partly
    /// written page the cache does not hold; a cached page gives its
    /// bytes).  Both modes call this once per write (a request the layout
    /// accepts), before [`CachedArray::write_steps`] of the widened range.
    pub fn widen(&mut self, offset: u64, len: u64) -> Widened {
        let unit = self.geo.unit;
        let end = offset.saturating_add(len);
        let (lo, hi) = (offset / unit * unit, end.div_ceil(unit).saturating_mul(unit));
        let cached = |at: u64| {
            let e = self.geo.split(at, 1);
            e.first().and_then(|e| e.cols.first().map(|c| self.is_cached(e.stripe, c.col))).unwrap_or(false)
        };
        let mut fills = Vec::new();
        let head = offset != lo;
        let tail = end != hi;
        if head && tail && hi - lo == unit {
            // One page, written in its middle: read it whole (one op).
            if !cached(lo) {
                fills.push((lo, unit));
            }
        } else {
            if head && !cached(lo) {
                fills.push((lo, offset - lo));
            }
            if tail && !cached(hi - unit) {
                fills.push((end, hi - end));
            }
        }
        self.stats.fills += fills.len() as u64;
        Widened { offset: lo, len: hi - lo, fills }
    }

    /// Cache the pages of a write; returns the steps the write must wait
    /// for (victims destaged to make room, or the write itself when it
    /// bypasses the cache).  Byte mode: the caller widened the write
    /// ([`CachedArray::widen`]) and `data` holds whole pages.  Counting
    /// mode widens here: the fills' read plans come first.
    pub fn write_steps(&mut self, offset: u64, len: u64, data: Option<&[u8]>, h: &Health) -> Result<Vec<Step>, PlanError> {
        self.layout.planner.check(offset, len)?;
        if self.bytes.is_some() {
            if !data.is_some_and(|d| d.len() as u64 == len) {
                return Err(PlanError::Invalid("the byte-mode cache needs the write's bytes".into()));
            }
            if offset % self.geo.unit != 0 || len % self.geo.unit != 0 {
                return Err(PlanError::Invalid(format!("byte-mode cache writes must cover whole {}-byte pages", self.geo.unit)));
            }
        }
        let mut fg = Vec::new();
        let (offset, len) = if self.bytes.is_none() {
            let w = self.widen(offset, len);
            for &(o, l) in &w.fills {
                let r = self.read_steps(o, l, h)?;
                fg.extend(r.flush);
                fg.extend(self.layout.plan_read(o, l, h)?.stripes.into_iter().map(|sp| Step { sp, recipe: Recipe::Read }));
            }
            (w.offset, w.len)
        } else {
            (offset, len)
        };
        self.stats.writes += 1;
        self.clock += 1;
        let exts = self.geo.split(offset, len);
        let pages: u64 = exts.iter().map(|e| e.cols.len() as u64).sum();
        if pages > self.wc_pages() {
            // Larger than the whole cache: drop what it caches of the range
            // and write it directly (rows with a cached parity first).
            self.stats.bypasses += 1;
            let mut steps = fg;
            for e in &exts {
                self.drop_pages(e.stripe, e.cols.iter().map(|c| c.col));
                steps.extend(self.parity_flush(e.stripe, h)?);
                // Written with their code below: the clean values go stale.
                e.cols.iter().for_each(|c| self.clean_drop(e.stripe, c.col));
            }
            let p = self.layout.plan_write(offset, len, h)?;
            // One input for the whole request, shared by its stripes.
            let input = match data.filter(|_| self.bytes.is_some()) {
                Some(d) => Buf::Bytes(d.into()),
                None => Buf::Scratch(len as usize),
            };
            for sp in p.stripes {
                self.count(&sp);
                steps.push(Step { sp, recipe: Recipe::Direct { input: input.clone() } });
            }
            return Ok(steps);
        }
        let mut hit = true;
        for e in &exts {
            for c in &e.cols {
                let present = self.rows.get(&e.stripe).is_some_and(|r| r.pages.contains(c.col));
                if !present {
                    hit = false;
                    while self.cached_pages >= self.wc_pages() {
                        fg.extend(self.evict_victim(h)?);
                    }
                }
                let clock = self.clock;
                self.unlist(e.stripe);
                let row = self.rows.entry(e.stripe).or_default();
                if row.pages.insert(c.col) {
                    self.cached_pages += 1;
                }
                row.last = clock;
                self.list(e.stripe);
                if let (Some(b), Some(d)) = (self.bytes.as_mut(), data) {
                    let at = c.buf_off as usize;
                    b.put_page((e.stripe, c.col), &d[at..at + (c.end - c.start) as usize]);
                }
            }
        }
        if hit {
            self.stats.write_hits += 1;
        }
        Ok(fg)
    }

    fn drop_pages(&mut self, stripe: u64, cols: impl Iterator<Item = usize>) {
        if !self.rows.contains_key(&stripe) {
            return;
        }
        self.unlist(stripe);
        let Some(row) = self.rows.get_mut(&stripe) else { return };
        for c in cols {
            if row.pages.contains(c) {
                row.pages.0[c / 64] &= !(1u64 << (c % 64));
                self.cached_pages -= 1;
                if let Some(b) = self.bytes.as_mut() {
                    if let Some(old) = b.pages.remove(&(stripe, c)) {
                        b.recycle(old);
                    }
                }
            }
        }
        if row.pages.is_empty() {
            self.rows.remove(&stripe);
        } else {
            self.list(stripe);
        }
    }

    /// Take a cached row out of the victim orders (before its key changes).
    fn unlist(&mut self, stripe: u64) {
        if let Some(r) = self.rows.get_mut(&stripe) {
            if r.victim != NIL {
                self.victims.remove(std::mem::replace(&mut r.victim, NIL));
            }
            if r.with_parity != NIL {
                self.with_parity.remove(std::mem::replace(&mut r.with_parity, NIL));
            }
        }
    }

    /// Put a cached row into the victim orders: every row in `victims`,
    /// those whose parity is cached also in `with_parity` (ppc+data).
    fn list(&mut self, stripe: u64) {
        let parity = self.cfg.policy == CachePolicy::PpcData && self.parity.contains_key(&stripe);
        if let Some(r) = self.rows.get_mut(&stripe) {
            let pages = r.pages.len();
            r.victim = self.victims.insert(pages, r.last, stripe);
            if parity {
                r.with_parity = self.with_parity.insert(pages, r.last, stripe);
            }
        }
    }

    /// The row's parity entry came or went: only its `with_parity` entry
    /// changes (its victim entry keeps its place).
    fn relist_parity(&mut self, stripe: u64) {
        let parity = self.cfg.policy == CachePolicy::PpcData && self.parity.contains_key(&stripe);
        if let Some(r) = self.rows.get_mut(&stripe) {
            if r.with_parity != NIL {
                self.with_parity.remove(std::mem::replace(&mut r.with_parity, NIL));
            }
            if parity {
                r.with_parity = self.with_parity.insert(r.pages.len(), r.last, stripe);
            }
        }
    }

    /// The write cache's victim: the row with the most pages, least
    /// recently written first.  ppc+data takes instead, among the rows
    /// with as many pages, the least recently written one whose partial
    /// parity is cached (it merges instead of taking a new entry, the
    /// paper's rule), unless that row is hot ([`rule_window`]): the
    /// paper's rule without that exception evicts hot rows again and again
    /// (on the recorded ext2 Postmark trace, write-cache hits 37,427 with no
    /// rule, 26,794 with the paper's, 34,376 with the window).
    fn victim(&self) -> Option<u64> {
        let (pages, _, lru) = self.victims.first()?;
        let cold = |last: u64| self.clock.saturating_sub(last) >= rule_window(self.wc_pages());
        match self.with_parity.first() {
            Some((p, last, row)) if p == pages && cold(last) => Some(row),
            _ => Some(lru),
        }
    }

    /// Destage the write cache's victim row.
    fn evict_victim(&mut self, h: &Health) -> Result<Vec<Step>, PlanError> {
        let Some(stripe) = self.victim() else {
            return Err(PlanError::Invalid("write cache full but holds no row".into()));
        };
        self.unlist(stripe);
        let row = self.rows.remove(&stripe).expect("victim row cached");
        self.cached_pages -= row.pages.len() as u64;
        self.stats.victims += 1;
        self.destage(stripe, &row, h)
    }

    /// The new bytes of the row's pages, taken out of the cache (byte
    /// mode; scratch of a page's length in counting mode).
    fn take_pages(&mut self, stripe: u64, row: &Row) -> Result<Vec<(usize, Buf)>, PlanError> {
        let unit = self.geo.unit as usize;
        let missing = |c: usize| PlanError::Invalid(format!("stripe {stripe}: page {c} is cached without its bytes"));
        row.pages
            .iter()
            .map(|c| match self.bytes.as_mut() {
                Some(b) => b.pages.remove(&(stripe, c)).map(|v| (c, Buf::Page(v))).ok_or_else(|| missing(c)),
                None => Ok((c, Buf::Scratch(unit))),
            })
            .collect()
    }

    /// The entry's data-buffer bytes of a covered page, its latest value
    /// (byte mode; scratch of a page's length in counting mode).
    fn old_bytes(&self, stripe: u64, col: usize) -> Result<Buf, PlanError> {
        match &self.bytes {
            Some(b) => b.old.get(&(stripe, col)).map(|v| Buf::Page(v.clone())).ok_or_else(|| PlanError::Invalid(format!("stripe {stripe}: page {col} is buffered without its bytes"))),
            None => Ok(Buf::Scratch(self.geo.unit as usize)),
        }
    }

    /// Plan the destage of `row` of `stripe` under the policy.
    fn destage(&mut self, stripe: u64, row: &Row, h: &Health) -> Result<Vec<Step>, PlanError> {
        if self.has_failure(stripe, h) {
            return self.destage_degraded(stripe, row, h);
        }
        let g = self.geo.clone();
        let (k, m) = (g.k, g.m);
        let w = row.pages.len();
        let pages = self.take_pages(stripe, row)?;
        let mut sp = Self::stripe_plan(stripe, Method::Rmw);
        let mut terms: Vec<(usize, Src)> = Vec::new();
        let mut base = Base::Zero;
        let mut after = Vec::new();
        let parity_cached = self.parity.contains_key(&stripe);
        let keep;
        match self.cfg.policy {
            CachePolicy::None | CachePolicy::Fpc => {
                let full_cached = self.cfg.policy == CachePolicy::Fpc && parity_cached;
                // RMW reads old data (and old code unless cached); RCW the untouched data.
                let rmw = w + if full_cached { 0 } else { m };
                let rcw = k - w;
                // The planner's policy decides, as for uncached writes
                // (ForceRcw is the paper's RAID-5: read the rest of the stripe).
                let use_rcw = match self.layout.planner.policy {
                    WritePolicy::Auto => rcw < rmw,
                    WritePolicy::ForceRcw => true,
                    WritePolicy::ForceRmw => false,
                };
                if w == k {
                    sp.method = Method::Fsw;
                    terms.extend(row.pages.iter().map(|c| (c, Src::Page)));
                } else if use_rcw {
                    sp.method = Method::Rcw;
                    terms.extend(row.pages.iter().map(|c| (c, Src::Page)));
                    for c in (0..k).filter(|&c| !row.pages.contains(c)) {
                        terms.push((c, Src::Read(sp.reads.len())));
                        sp.reads.push(self.op(stripe, c, Role::Data));
                    }
                } else {
                    sp.method = Method::Rmw;
                    for c in row.pages.iter() {
                        terms.push((c, Src::ReadXor(sp.reads.len())));
                        sp.reads.push(self.op(stripe, c, Role::Data));
                    }
                    if full_cached {
                        base = Base::Stored { stripe, take: false };
                    } else {
                        let first = sp.reads.len();
                        for c in k..k + m {
                            sp.reads.push(self.op(stripe, c, Role::Code));
                        }
                        base = Base::Reads((first..first + m).collect());
                    }
                }
                for c in row.pages.iter() {
                    sp.writes.push(self.op(stripe, c, Role::Data));
                }
                keep = if self.cfg.policy == CachePolicy::Fpc { Keep::Code } else { Keep::No };
                if keep == Keep::Code {
                    // fpc: the new full parity stays in the cache.
                    let mut all = ColSet::default();
                    (0..k).for_each(|c| {
                        all.insert(c);
                    });
                    after = self.parity_put(stripe, all, false, h)?;
                } else {
                    for c in k..k + m {
                        sp.writes.push(self.op(stripe, c, Role::Code));
                    }
                }
            }
            CachePolicy::Ppc | CachePolicy::PpcData => {
                let entry = self.parity.get(&stripe).copied();
                let mut covered = entry.map(|e| e.covered).unwrap_or_default();
                let buffered = self.cfg.policy == CachePolicy::PpcData;
                // A full row's partial parity is its full parity (the
                // paper): computed from the pages alone, nothing read, no
                // merge with what was cached.
                let full_row = w == k;
                // A new entry holds the pages' change (read their old
                // values now, before the write-through overwrites them)
                // when that and the old code at eviction (method 1) read
                // less than the pages it would not cover (method 2); else
                // their partial parity, reading nothing now.
                let method2 = (0..k).filter(|&c| !row.pages.contains(c) && !self.is_clean(stripe, c)).count();
                let mut delta = match entry {
                    Some(e) => e.delta,
                    None => !full_row && w + m < method2,
                };
                // Folding the pages in reads the old value of each page
                // whose value or change is held already (unless the data
                // buffer has it) and, for a change, of each new page; when
                // reading the row's other pages costs no more, the code is
                // recomputed from the whole row (an RCW whose code is
                // kept): the entry then covers every page, its eviction
                // reads nothing.
                let fold_reads = row.pages.iter().filter(|&c| if covered.contains(c) { !buffered } else { delta }).count();
                // (ppc+data's buffer has no values of the pages a whole
                // row's recompute reads: it converts a change instead.)
                let whole = !buffered && parity_cached && !full_row && k - w <= fold_reads;
                // ppc+data turns a change into the partial parity of the
                // buffered values plus the new pages, reading nothing, when
                // its eviction's method 2 then reads no more than keeping
                // the change would (the new pages' old values and the old code).
                let convert = buffered && delta && parity_cached && !full_row && {
                    let after = (0..k).filter(|&c| !covered.contains(c) && !row.pages.contains(c) && !self.is_clean(stripe, c)).count();
                    after <= fold_reads + m
                };
                if parity_cached && !full_row {
                    self.stats.merges += 1;
                }
                if whole || full_row || convert {
                    delta = false;
                }
                // ppc+data's entry without a change is the sum of its
                // data buffer's values, which the buffer keeps anyway:
                // nothing is computed or stored until it is flushed
                // (the change entry it replaces, if any, drops its code).
                // A converted change is such an entry.
                let summed = buffered && !delta;
                base = if summed {
                    if entry.is_some_and(|e| e.delta) { Base::ZeroTake { stripe } } else { Base::Zero }
                } else if parity_cached && !full_row && !whole {
                    Base::Stored { stripe, take: false }
                } else {
                    Base::Zero
                };
                if whole {
                    for c in (0..k).filter(|&c| !row.pages.contains(c)) {
                        terms.push((c, Src::Read(sp.reads.len())));
                        sp.reads.push(self.op(stripe, c, Role::Data));
                        covered.insert(c);
                    }
                }
                for c in row.pages.iter() {
                    let held = covered.contains(c) && !full_row && !whole && !convert;
                    if held && buffered {
                        // The entry's data buffer has the page's latest
                        // value (the paper's Fig. 3 and 16b: an update
                        // reads nothing).
                        self.stats.old_data_hits += 1;
                        if !summed {
                            terms.push((c, Src::Xor(self.old_bytes(stripe, c)?)));
                        }
                    } else if held || delta {
                        // Take the page's old value out (read it).
                        terms.push((c, Src::ReadXor(sp.reads.len())));
                        sp.reads.push(self.op(stripe, c, Role::Data));
                    } else if !summed {
                        terms.push((c, Src::Page));
                    }
                    covered.insert(c);
                }
                sp.method = if covered.len() == k { Method::Fsw } else { Method::Rmw };
                for (c, b) in &pages {
                    sp.writes.push(self.op(stripe, *c, Role::Data));
                    if let (CachePolicy::PpcData, Some(bytes), Buf::Page(v)) = (self.cfg.policy, self.bytes.as_mut(), b) {
                        if let Some(old) = bytes.old.insert((stripe, *c), v.clone()) {
                            bytes.recycle(old);
                        }
                    }
                }
                keep = if summed { Keep::Buffered } else { Keep::Code };
                after = self.parity_put(stripe, covered, delta, h)?;
            }
        }
        self.count(&sp);
        let recipe = Recipe::Parity { stripe, base, terms, keep, pages };
        // The entry the row evicted from the parity cache goes first: the
        // row's own parity takes its place once computed.
        let mut steps = after;
        steps.push(Step { sp, recipe });
        Ok(steps)
    }

    fn has_failure(&self, stripe: u64, h: &Health) -> bool {
        (0..self.geo.k + self.geo.m).any(|c| !h.available(self.geo.member_of(stripe, c), stripe))
    }

    /// A row of a degraded stripe: flush its parity entry and let the
    /// planner's degraded write handle the pages.
    fn destage_degraded(&mut self, stripe: u64, row: &Row, h: &Health) -> Result<Vec<Step>, PlanError> {
        let mut steps = self.parity_flush(stripe, h)?;
        for (c, input) in self.take_pages(stripe, row)? {
            self.clean_drop(stripe, c);
            let off = stripe * self.geo.stripe_data_bytes() + c as u64 * self.geo.unit;
            let p = self.layout.plan_write(off, self.geo.unit, h)?;
            for sp in p.stripes {
                self.count(&sp);
                steps.push(Step { sp, recipe: Recipe::Direct { input: input.clone() } });
            }
        }
        Ok(steps)
    }

    fn count(&mut self, sp: &StripePlan) {
        self.stats.parity_reads += sp.reads.len() as u64;
        for op in &sp.writes {
            match op.role {
                Role::Code => self.stats.parity_writes += 1,
                _ => self.stats.data_writes += 1,
            }
        }
    }

    /// Keep `covered` as the row's parity entry, evicting LRU entries to
    /// make room; returns the eviction steps.
    fn parity_put(&mut self, stripe: u64, covered: ColSet, delta: bool, h: &Health) -> Result<Vec<Step>, PlanError> {
        let mut steps = Vec::new();
        let clock = self.clock;
        match self.parity.get(&stripe) {
            Some(e) => {
                self.parity_lru.remove(e.lru);
            }
            None => {
                while self.parity.len() >= self.pc_entries() {
                    let Some((_, _, victim)) = self.parity_lru.first() else { break };
                    steps.extend(self.parity_flush(victim, h)?);
                }
            }
        }
        let lru = self.parity_lru.insert(0, clock, stripe);
        self.parity.insert(stripe, ParityEntry { covered, lru, delta });
        self.relist_parity(stripe);
        Ok(steps)
    }

    /// Write a row's cached parity to the drives and drop the entry, by
    /// whichever of the paper's two methods reads less (its Sect. IV-E):
    ///
    /// * method 2: the partial parity plus the pages it does not cover,
    ///   read unless the data buffer holds them clean (matching the code
    ///   on the drives);
    /// * method 1: the old code read from the drives plus the change of
    ///   the covered pages: the entry holds it (a change entry), or the
    ///   data buffer holds every covered page's clean value, then
    ///   new = old + PP + sum A[r][c] * clean_c over covered c.
    fn parity_flush(&mut self, stripe: u64, h: &Health) -> Result<Vec<Step>, PlanError> {
        let Some(e) = self.parity.get(&stripe).copied() else { return Ok(vec![]) };
        // Planned before the entry goes: a flush that cannot be planned
        // (a failed member holds a unit its code needs) leaves the row
        // among the ones whose code only the cache holds (`parity_rows`).
        let steps = self.plan_parity_flush(stripe, e, h)?;
        self.parity.remove(&stripe);
        self.relist_parity(stripe);
        self.parity_lru.remove(e.lru);
        self.stats.parity_evictions += 1;
        Ok(steps)
    }

    /// The steps that write row `stripe`'s code from its entry `e`.
    fn plan_parity_flush(&mut self, stripe: u64, e: ParityEntry, h: &Health) -> Result<Vec<Step>, PlanError> {
        let (k, m) = (self.geo.k, self.geo.m);
        let geo = self.geo.clone();
        let up = |c: usize| h.available(geo.member_of(stripe, c), stripe);
        let uncovered: Vec<usize> = (0..k).filter(|&c| !e.covered.contains(c)).collect();
        let method2_reads = uncovered.iter().filter(|&&c| !self.is_clean(stripe, c)).count();
        let codes_up = (k..k + m).all(&up);
        if e.delta && !codes_up {
            return self.delta_rebuild(stripe, e, h);
        }
        let method1 = e.delta || (!uncovered.is_empty() && m < method2_reads && e.covered.iter().all(|c| self.is_clean(stripe, c)) && codes_up);
        let mut sp = Self::stripe_plan(stripe, if uncovered.is_empty() && !e.delta { Method::Fsw } else if method1 { Method::Rmw } else { Method::Rcw });
        let mut terms = Vec::new();
        // A ppc+data entry without a change stores no code: its partial
        // parity is summed from the data buffer's values of its pages.
        let summed = self.cfg.policy == CachePolicy::PpcData && !e.delta;
        if summed {
            for c in e.covered.iter() {
                terms.push((c, Src::Held(self.old_bytes(stripe, c)?)));
            }
        }
        let base = if method1 {
            self.stats.method1 += 1;
            if !e.delta {
                for c in e.covered.iter() {
                    terms.push((c, Src::Held(self.clean_bytes(stripe, c)?)));
                }
            }
            let first = sp.reads.len();
            for c in k..k + m {
                sp.reads.push(self.op(stripe, c, Role::Code));
            }
            let reads = (first..first + m).collect();
            if summed { Base::Reads(reads) } else { Base::StoredAndReads { stripe, reads } }
        } else {
            if !uncovered.is_empty() {
                self.stats.method2 += 1;
            }
            for &c in &uncovered {
                if self.is_clean(stripe, c) {
                    self.stats.clean_hits += 1;
                    terms.push((c, Src::Held(self.clean_bytes(stripe, c)?)));
                } else if up(c) {
                    terms.push((c, Src::Read(sp.reads.len())));
                    sp.reads.push(self.op(stripe, c, Role::Data));
                } else if self.bytes.is_some() {
                    return Err(PlanError::Invalid(format!(
                        "stripe {stripe}: its partial parity cannot be completed: the member holding uncovered column {c} failed (see mosaic_core::cache)"
                    )));
                }
            }
            if summed { Base::Zero } else { Base::Stored { stripe, take: true } }
        };
        for c in k..k + m {
            if up(c) {
                sp.writes.push(self.op(stripe, c, Role::Code));
            }
        }
        self.count(&sp);
        self.covered_now_clean(stripe, e.covered);
        let recipe = Recipe::Parity { stripe, base, terms, keep: Keep::No, pages: vec![] };
        Ok(vec![Step { sp, recipe }])
    }

    /// A change entry whose old code cannot be read (a code member failed):
    /// the code from the row's data instead, the covered pages' latest
    /// values from the data buffer (ppc+data) or the drives.
    fn delta_rebuild(&mut self, stripe: u64, e: ParityEntry, h: &Health) -> Result<Vec<Step>, PlanError> {
        let (k, m) = (self.geo.k, self.geo.m);
        let mut sp = Self::stripe_plan(stripe, Method::Rcw);
        let mut terms = Vec::new();
        for c in 0..k {
            if self.cfg.policy == CachePolicy::PpcData && e.covered.contains(c) {
                terms.push((c, Src::Held(self.old_bytes(stripe, c)?)));
            } else if h.available(self.geo.member_of(stripe, c), stripe) {
                terms.push((c, Src::Read(sp.reads.len())));
                sp.reads.push(self.op(stripe, c, Role::Data));
            } else if self.bytes.is_some() {
                return Err(PlanError::Invalid(format!("stripe {stripe}: its parity cannot be completed: columns {c} and a code column failed")));
            }
        }
        for c in k..k + m {
            if h.available(self.geo.member_of(stripe, c), stripe) {
                sp.writes.push(self.op(stripe, c, Role::Code));
            }
        }
        self.count(&sp);
        self.covered_now_clean(stripe, e.covered);
        Ok(vec![Step { sp, recipe: Recipe::Parity { stripe, base: Base::ZeroTake { stripe }, terms, keep: Keep::No, pages: vec![] } }])
    }

    /// Whether the data buffer holds page `col` of `stripe` as it is on
    /// the drives, matching the row's code there.
    fn is_clean(&self, stripe: u64, col: usize) -> bool {
        self.clean.contains_key(&(stripe, col))
    }

    /// The clean value of a page (byte mode; scratch in counting mode),
    /// marked used.
    fn clean_bytes(&mut self, stripe: u64, col: usize) -> Result<Buf, PlanError> {
        self.clean_touch(stripe, col);
        match &self.bytes {
            Some(b) => b.clean.get(&(stripe, col)).map(|v| Buf::Page(v.clone())).ok_or_else(|| PlanError::Invalid(format!("stripe {stripe}: page {col} is buffered without its bytes"))),
            None => Ok(Buf::Scratch(self.geo.unit as usize)),
        }
    }

    /// The code on the drives now matches the covered pages' latest
    /// values: the data buffer (ppc+data) keeps them as the row's clean
    /// values.
    fn covered_now_clean(&mut self, stripe: u64, covered: ColSet) {
        for c in covered.iter() {
            let latest = self.bytes.as_mut().and_then(|b| b.old.remove(&(stripe, c)));
            if self.cfg.policy == CachePolicy::PpcData {
                self.clean_put(stripe, c, latest);
            }
        }
    }

    /// Keep a flushed row's page (its bytes in byte mode) as clean, the
    /// least recently used clean page making room (`old_data` bytes).
    /// The value stays while later writes cover the page under a new
    /// partial parity: it is then the "old data" of method 1.
    fn clean_put(&mut self, stripe: u64, col: usize, bytes: Option<Page>) {
        if self.od_pages() == 0 || (self.bytes.is_some() && bytes.is_none()) {
            self.clean_drop(stripe, col);
            return;
        }
        if let (Some(b), Some(v)) = (self.bytes.as_mut(), bytes) {
            if let Some(old) = b.clean.insert((stripe, col), v) {
                b.recycle(old);
            }
        }
        self.clean_touch(stripe, col);
        while self.clean.len() > self.od_pages() {
            let Some((_, _, (st, c))) = self.clean_lru.first() else { break };
            self.clean_drop(st, c);
        }
    }

    /// Mark a clean page used now (listing it if new).
    fn clean_touch(&mut self, stripe: u64, col: usize) {
        let lru = &mut self.clean_lru;
        let h = self.clean.entry((stripe, col)).or_insert(NIL);
        if *h != NIL {
            lru.remove(*h);
        }
        *h = lru.insert(0, self.clock, (stripe, col));
    }

    /// Forget a page's clean value (written with its code some other way).
    fn clean_drop(&mut self, stripe: u64, col: usize) {
        if let Some(h) = self.clean.remove(&(stripe, col)) {
            self.clean_lru.remove(h);
        }
        if let Some(b) = self.bytes.as_mut() {
            if let Some(old) = b.clean.remove(&(stripe, col)) {
                b.recycle(old);
            }
        }
    }

    /// Destage everything: every cached row, then every parity entry.
    pub fn flush_steps(&mut self, h: &Health) -> Result<Vec<Step>, PlanError> {
        let mut steps = Vec::new();
        self.flush_each(h, |_, more| {
            steps.extend(more);
            Ok::<_, PlanError>(())
        })?;
        Ok(steps)
    }

    /// The steps of [`CachedArray::flush_steps`], in its order, handed to
    /// `run` a row at a time: each cached row's destage, then each parity
    /// entry's flush.  A caller that runs them in `run` (the real volume)
    /// does the very steps `flush_steps` plans whole (planning never reads
    /// what running stores, the code bytes: [`Base::Stored`] is looked up
    /// when a step is lowered), without holding a whole cache's steps at
    /// once.
    pub fn flush_each<E: From<PlanError>>(&mut self, h: &Health, mut run: impl FnMut(&mut CachedArray, Vec<Step>) -> Result<(), E>) -> Result<(), E> {
        while let Some(steps) = self.flush_next_row(h)? {
            run(self, steps)?;
        }
        for row in self.parity_rows() {
            let steps = self.parity_flush(row, h)?;
            run(self, steps)?;
        }
        Ok(())
    }

    /// The steps that destage the write cache's next victim (`None` once
    /// it is empty): the first part of [`CachedArray::flush_each`].
    pub fn flush_next_row(&mut self, h: &Health) -> Result<Option<Vec<Step>>, PlanError> {
        if self.victims.is_empty() {
            return Ok(None);
        }
        self.evict_victim(h).map(Some)
    }

    /// [`CachedArray::flush_steps`] as programs (counting mode), for a
    /// simulator to time the final destage an evaluation charges.
    pub fn flush_programs(&mut self, h: &Health) -> Result<Vec<Program>, PlanError> {
        let steps = self.flush_steps(h)?;
        self.lower_all(&steps)
    }

    /// [`CachedArray::flush_steps`] as one plan (counting mode).
    pub fn flush_all(&mut self, h: &Health) -> Result<Plan, PlanError> {
        Ok(plan_of(self.flush_steps(h)?))
    }

    /// Write the cached parity of these rows (before a degraded read of
    /// them: their code on the drives is stale).
    pub fn flush_rows(&mut self, stripes: &[u64], h: &Health) -> Result<Vec<Step>, PlanError> {
        let mut steps = Vec::new();
        for &s in stripes {
            steps.extend(self.parity_flush(s, h)?);
        }
        Ok(steps)
    }

    /// What a read of `offset..offset+len` takes from the drives: the
    /// ranges whose pages are not cached (merged where adjacent), after
    /// `flush`, the steps that write the cached parity of degraded rows
    /// among them (their code on the drives is stale and must not feed a
    /// reconstruction).  Both modes read exactly `ranges` with the layout's
    /// own read plans; the cached pages come from the cache.
    pub fn read_steps(&mut self, offset: u64, len: u64, h: &Health) -> Result<ReadSteps, PlanError> {
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        let mut stripes = Vec::new();
        for e in self.geo.split(offset, len) {
            for c in e.cols.iter().filter(|c| !self.is_cached(e.stripe, c.col)) {
                let at = offset + c.buf_off;
                let l = c.end - c.start;
                match ranges.last_mut() {
                    Some(r) if r.0 + r.1 == at => r.1 += l,
                    _ => ranges.push((at, l)),
                }
                if stripes.last() != Some(&e.stripe) {
                    stripes.push(e.stripe);
                }
            }
        }
        if ranges.is_empty() {
            self.stats.read_hits += 1;
        }
        let mut flush = Vec::new();
        if h.is_degraded() {
            let rows: Vec<u64> = stripes.into_iter().filter(|s| self.parity.contains_key(s) && self.has_failure(*s, h)).collect();
            flush = self.flush_rows(&rows, h)?;
        }
        Ok(ReadSteps { ranges, flush })
    }

    /// A read's programs (counting mode): [`CachedArray::read_steps`]'s
    /// parity flushes, then the layout's read program of each range, as
    /// the real volume runs them.
    fn read_programs(&mut self, offset: u64, len: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        let r = self.read_steps(offset, len, h)?;
        let mut programs = self.lower_all(&r.flush)?;
        for (o, l) in r.ranges {
            programs.push(self.layout.read_program(o, l, h)?);
        }
        Ok(programs)
    }

    /// Lower steps that need no commit between them (counting mode: no
    /// code is stored, so lowering is the same at any point).
    fn lower_all(&self, steps: &[Step]) -> Result<Vec<Program>, PlanError> {
        steps.iter().map(|st| self.lower(st, false)).collect()
    }

    /// The one program that carries out `step`: its reads, the code
    /// computed as GF(2^8) combinations, its writes journaled.  A step
    /// that keeps its code in the parity cache keeps the code buffer
    /// ([`Program::keep`]) and, with `resync`, logs the journal mark
    /// [`Mark::Resync`] of its row beside its writes (the row's code on the
    /// drives goes stale).  In byte mode lower each step right before it
    /// runs, after the previous step's [`CachedArray::commit`]: a step may
    /// start from the code an earlier one stored.
    pub fn lower(&self, step: &Step, resync: bool) -> Result<Program, PlanError> {
        let one = || Plan { stripes: vec![step.sp.clone()] };
        match &step.recipe {
            Recipe::Direct { input } => self.layout.math.write_program_from(&one(), input.clone()),
            Recipe::Read => self.layout.math.read_program(&one()),
            Recipe::Parity { stripe, base, terms, keep, pages } => {
                let (k, m) = (self.geo.k, self.geo.m);
                let marks = if resync && keep.stale() { vec![Mark::Resync { row: *stripe }] } else { vec![] };
                if *keep == Keep::Buffered {
                    // A summed entry's update computes no code: the
                    // program writes the pages.
                    if !terms.is_empty() || !matches!(base, Base::Zero | Base::ZeroTake { .. }) || step.sp.writes.iter().any(|o| o.role == Role::Code) {
                        return Err(PlanError::Invalid(format!("stripe {stripe}: a summed entry's step computing or writing code")));
                    }
                    let mut b = ParityBuilder::new(&step.sp, pages, self.geo.unit as usize, 0);
                    b.writes(&step.sp, k)?;
                    return Ok(b.finish(false, marks));
                }
                let mut b = ParityBuilder::new(&step.sp, pages, self.geo.unit as usize, m);
                let base: Vec<Sum> = match base {
                    Base::Zero | Base::ZeroTake { .. } => vec![],
                    Base::Reads(idx) => idx.iter().map(|&i| b.read(i).map(|r| (r, None))).collect::<Result<_, _>>()?,
                    Base::Stored { stripe, .. } => b.rows(self.stored_code(*stripe)?, m).map(|r| (r, None)).collect(),
                    Base::StoredAndReads { stripe, reads } => {
                        let rows = b.rows(self.stored_code(*stripe)?, m);
                        if reads.len() != m {
                            return Err(PlanError::Invalid(format!("stripe {stripe}: {} old code units, not {m}", reads.len())));
                        }
                        rows.zip(reads).map(|(r, &i)| b.read(i).map(|o| (r, Some(o)))).collect::<Result<_, _>>()?
                    }
                };
                if !base.is_empty() && base.len() != m {
                    return Err(PlanError::Invalid(format!("stripe {stripe}: a base of {} code units, not {m}", base.len())));
                }
                let terms = b.terms(terms)?;
                b.combines(self.layout.math.code()?, m, &base, &terms);
                b.writes(&step.sp, k)?;
                Ok(b.finish(*keep == Keep::Code, marks))
            }
        }
    }

    /// The code units the parity cache holds for `stripe` (byte mode;
    /// scratch of `m` units in counting mode).
    fn stored_code(&self, stripe: u64) -> Result<Buf, PlanError> {
        match &self.bytes {
            Some(b) => b.parity.get(&stripe).map(|v| Buf::Page(v.clone())).ok_or_else(|| PlanError::Invalid(format!("stripe {stripe}: no cached parity bytes"))),
            None => Ok(Buf::Scratch(self.geo.m * self.geo.unit as usize)),
        }
    }

    /// `step`'s program ran; `kept` holds its kept buffers.  The code a
    /// step keeps goes into the parity cache; a step that takes the stored
    /// code drops it.  Nothing to do in counting mode.
    pub fn commit(&mut self, step: &Step, kept: &[Vec<u8>]) -> Result<(), PlanError> {
        let (Recipe::Parity { stripe, base, keep, .. }, Some(b)) = (&step.recipe, self.bytes.as_mut()) else { return Ok(()) };
        if base.takes() {
            if let Some(old) = b.parity.remove(stripe) {
                b.recycle(old);
            }
        }
        if *keep == Keep::Code {
            let code = kept.first().ok_or_else(|| PlanError::Invalid(format!("stripe {stripe}: the program kept no code")))?;
            // Over the row's old code when nothing else holds it (the
            // step that read it is gone): no new buffer.
            match b.parity.get_mut(stripe).and_then(Page::get_mut).filter(|d| d.len() == code.len()) {
                Some(dst) => dst.copy_from_slice(code),
                None => {
                    let a = b.page_of(code);
                    if let Some(old) = b.parity.insert(*stripe, a) {
                        b.recycle(old);
                    }
                }
            }
        }
        Ok(())
    }

    /// A step has run (and been committed): its page buffers that no
    /// structure holds any more are reused for later pages (byte mode).
    /// So are the old and clean values its terms held when the structure
    /// that had them let them go while the step was pending (a page's old
    /// value replaced by its new one, a clean page dropped): the step had
    /// the last reference.  A buffer is reused only when nothing else
    /// holds it ([`Bytes::recycle`]).
    pub fn recycle(&mut self, step: Step) {
        let (Recipe::Parity { pages, terms, .. }, Some(b)) = (step.recipe, self.bytes.as_mut()) else { return };
        let held = terms.into_iter().filter_map(|(_, src)| match src {
            Src::Xor(buf) | Src::Held(buf) => Some(buf),
            _ => None,
        });
        for buf in pages.into_iter().map(|(_, buf)| buf).chain(held) {
            if let Buf::Page(a) = buf {
                b.recycle(a);
            }
        }
    }

    /// `step`'s program did not complete: store nothing, and drop the
    /// row's cached code bytes if the step would have replaced or dropped
    /// them.  The policy updated the row's entry when it planned the step,
    /// so the old bytes no longer match it; a later flush of the row is
    /// then an error rather than wrong code on the drives.
    pub fn abort(&mut self, step: &Step) {
        if let (Recipe::Parity { stripe, base, keep, .. }, Some(b)) = (&step.recipe, self.bytes.as_mut()) {
            if *keep == Keep::Code || base.takes() {
                b.parity.remove(stripe);
            }
            if *keep == Keep::Buffered {
                // The row's code is summed from values the drives may not
                // hold: drop them, so its flush fails.
                for c in 0..self.geo.k {
                    if let Some(old) = b.old.remove(&(*stripe, c)) {
                        b.recycle(old);
                    }
                }
            }
        }
    }
}

/// One or two buffers summed (a value, or old and new values).
type Sum = (Ref, Option<Ref>);

/// The program of one [`Recipe::Parity`] step under construction: one
/// scratch buffer for the reads, one for the `m` code units (row `r` at
/// `r * unit`), the pages' bytes as the recipe holds them.
struct ParityBuilder {
    p: Program,
    unit: usize,
    /// Where each read of the plan lands, in order.
    reads: Vec<Io>,
    /// Where each page's new bytes are: (column, bytes).
    pages: Vec<(usize, Ref)>,
    code: usize,
    combines: Vec<Combine>,
    writes: Vec<Io>,
}

impl ParityBuilder {
    fn new(sp: &StripePlan, pages: &[(usize, Buf)], unit: usize, m: usize) -> ParityBuilder {
        // Reads (a buffer each, so a member in memory may lend what the
        // program only reads: a flush's uncovered pages), code, pages, then
        // a stored code and held values: sized once (no regrowth while the
        // program is built).
        let mut p = Program { locks: vec![sp.stripe], methods: vec![sp.method], bufs: Vec::with_capacity(sp.reads.len() + pages.len() + 1 + 4), phases: Vec::with_capacity(3), ..Default::default() };
        let mut reads = Vec::with_capacity(sp.reads.len());
        for op in &sp.reads {
            let rd = p.buf(Buf::Scratch(op.len as usize));
            reads.push(Io::new(*op, Ref::new(rd, 0)));
        }
        let code = p.buf(Buf::Scratch(m * unit));
        let pages = pages.iter().map(|(c, b)| (*c, Ref::new(p.buf(b.clone()), 0))).collect();
        ParityBuilder { p, unit, reads, pages, code, combines: Vec::with_capacity(m), writes: Vec::with_capacity(sp.writes.len()) }
    }

    fn read(&self, i: usize) -> Result<Ref, PlanError> {
        self.reads.get(i).map(|io| io.at).ok_or_else(|| PlanError::Invalid(format!("a cache recipe names read {i} of {}", self.reads.len())))
    }

    fn page(&self, col: usize) -> Result<Ref, PlanError> {
        self.pages.iter().find(|p| p.0 == col).map(|p| p.1).ok_or_else(|| PlanError::Invalid(format!("a cache recipe names page {col}, which the step does not write")))
    }

    /// Add `code`, `m` code units, as a buffer: where each row starts.
    fn rows(&mut self, code: Buf, m: usize) -> impl Iterator<Item = Ref> {
        let (b, unit) = (self.p.buf(code), self.unit);
        (0..m).map(move |r| Ref::new(b, r * unit))
    }

    /// Each term of column `c` as the buffers it sums (its bytes, or old
    /// and new bytes, whose sum is their difference).
    fn terms(&mut self, terms: &[(usize, Src)]) -> Result<Vec<(usize, Sum)>, PlanError> {
        let mut out = Vec::with_capacity(terms.len());
        for (c, src) in terms {
            let refs = match src {
                Src::Page => (self.page(*c)?, None),
                Src::Read(i) => (self.read(*i)?, None),
                Src::ReadXor(i) => (self.read(*i)?, Some(self.page(*c)?)),
                Src::Xor(old) => (Ref::new(self.p.buf(old.clone()), 0), Some(self.page(*c)?)),
                Src::Held(v) => (Ref::new(self.p.buf(v.clone()), 0), None),
            };
            out.push((*c, refs));
        }
        Ok(out)
    }

    /// Code row `r` = the sum of base row `r` (if any) + sum of A[r][c] * term.
    fn combines(&mut self, code: &mosaic_ec::Code, m: usize, base: &[Sum], terms: &[(usize, Sum)]) {
        let n = |s: &Sum| 1 + s.1.is_some() as usize;
        let per_row = terms.iter().map(|(_, s)| n(s)).sum::<usize>();
        for r in 0..m {
            let mut t: Vec<(u8, Ref)> = Vec::with_capacity(per_row + base.get(r).map_or(0, n));
            if let Some(&(x, y)) = base.get(r) {
                t.push((1, x));
                t.extend(y.map(|y| (1, y)));
            }
            for &(c, (x, y)) in terms {
                let a = code.coefficient(r, c);
                t.push((a, x));
                t.extend(y.map(|y| (a, y)));
            }
            self.combines.push(Combine { dst: Ref::new(self.code, r * self.unit), len: self.unit, acc: false, terms: t });
        }
    }

    /// The plan's writes: code units from the code buffer, data pages
    /// from their bytes.
    fn writes(&mut self, sp: &StripePlan, k: usize) -> Result<(), PlanError> {
        for op in &sp.writes {
            let at = match (op.role, op.col.checked_sub(k)) {
                (Role::Code, Some(row)) => Ref::new(self.code, row * self.unit),
                _ => self.page(op.col)?,
            };
            self.writes.push(Io::new(*op, at));
        }
        Ok(())
    }

    /// Reads, computation, journaled writes (with `marks`); the code
    /// buffer kept when `keep`.
    fn finish(mut self, keep: bool, marks: Vec<Mark>) -> Program {
        if !self.reads.is_empty() {
            self.p.phases.push(Phase::Read(self.reads));
        }
        if !self.combines.is_empty() {
            self.p.phases.push(Phase::Compute(self.combines));
        }
        if !self.writes.is_empty() {
            self.p.phases.push(Phase::Write { ops: self.writes, journal: true, marks });
        }
        if keep {
            self.p.keep.push(self.code as u32);
        }
        self.p
    }
}

fn plan_of(steps: Vec<Step>) -> Plan {
    Plan { stripes: steps.into_iter().map(|s| s.sp).collect() }
}

impl Frontend for CachedArray {
    fn describe(&self) -> String {
        format!("{} cache={}", self.layout.describe(), self.cfg.policy.name())
    }
    fn capacity(&self) -> u64 {
        self.layout.capacity()
    }
    fn block_size(&self) -> u64 {
        self.layout.block_size()
    }
    fn members(&self) -> usize {
        self.layout.members()
    }
    fn submit(&mut self, write: bool, offset: u64, len: u64, _now_ns: u64, h: &Health) -> Result<Staged, PlanError> {
        self.layout.planner.check(offset, len)?;
        let fg = if write {
            let steps = self.write_steps(offset, len, None, h)?;
            self.lower_all(&steps)?
        } else {
            self.read_programs(offset, len, h)?
        };
        Ok(Staged { fg, bg: vec![] })
    }
    /// The replay's closing flush: the caches' destage when asked for
    /// ([`CachedArray::destage_at_end`]); otherwise nothing (a real
    /// volume's flush keeps the caches: they are journaled).
    fn flush(&mut self, _now_ns: u64, h: &Health) -> Result<Vec<Program>, PlanError> {
        if !self.destage_at_end {
            return Ok(Vec::new());
        }
        self.flush_programs(h)
    }
    fn flush_is_deferred_writes(&self) -> bool {
        self.destage_at_end
    }
    fn stats(&self) -> Vec<(String, f64)> {
        let s = &self.stats;
        let per = |x: u64| if s.writes > 0 { x as f64 / s.writes as f64 } else { 0.0 };
        vec![
            ("write_hits".into(), s.write_hits as f64),
            ("read_hits".into(), s.read_hits as f64),
            ("victims".into(), s.victims as f64),
            ("parity_reads".into(), s.parity_reads as f64),
            ("parity_writes".into(), s.parity_writes as f64),
            ("data_writes".into(), s.data_writes as f64),
            ("parity_reads_per_write".into(), per(s.parity_reads)),
            ("parity_writes_per_write".into(), per(s.parity_writes)),
            ("parity_evictions".into(), s.parity_evictions as f64),
            ("method1".into(), s.method1 as f64),
            ("method2".into(), s.method2 as f64),
            ("old_data_hits".into(), s.old_data_hits as f64),
            ("clean_hits".into(), s.clean_hits as f64),
            ("merges".into(), s.merges as f64),
            ("fills".into(), s.fills as f64),
        ]
    }
}
