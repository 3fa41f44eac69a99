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
//!   │  then (ppc+data) has a   │               │  none  RMW | RCW | FSW  │
//!   │  partial parity, then LRU│               │  fpc   full parity kept │
//!   └──────────────────────────┘               │  ppc   partial parity   │
//!                                              └───┬──────────┬─────────┘
//!        data pages written to the drives at once ◀┘          │ parity kept
//!   ┌──────────────────────────┐                   ┌──────────▼─────────┐
//!   │ old-data buffer (ppc+data│ latest value of   │ parity cache (LRU)  │
//!   │ only; LRU by page)       │ covered pages ───▶│ full: written as is │
//!   └──────────────────────────┘ no read to update │ partial: reads the  │
//!                                                  │ uncovered pages     │
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
//!   XOR for one code column, the coded sum for RS).  A victim row with no
//!   entry starts one with no read at all; one with an entry folds its pages
//!   in, reading the old value of each page that was covered already (to
//!   take it out).  Evicting an entry (LRU) writes the full parity, reading
//!   only the pages it does not cover; a row covered entirely needs none.
//!   The paper's "method 1" (old data plus old parity) would need the
//!   covered pages' values from before the entry began, which the write
//!   through of the victim's data has overwritten; mosaic uses method 2.
//! * `ppc+data`: the paper's proposal: `ppc`, plus the old-data buffer that
//!   keeps the latest value of covered pages so folding an update in reads
//!   nothing, plus the victim rule that prefers, among the rows with the
//!   most pages, one whose partial parity is already cached (so it merges
//!   instead of taking a new entry).
//!
//! **Replacement**, per structure: the write cache evicts the row with the
//! most cached pages (ties: the one with a parity-cache entry under
//! `ppc+data`, then least recently written); the parity cache evicts its
//! least recently used row; the old-data buffer its least recently used
//! page.  Capacities are bytes: the write cache and old-data buffer hold
//! `unit`-byte pages, a parity-cache entry costs `m * unit` bytes.
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
//! supplying its pages as shared [`Buf::Bytes`], and stores the code a
//! step keeps ([`CachedArray::commit`]).  Both modes lower a step into the
//! same program, byte buffers aside.
//!
//! A write whose pages cannot all fit the write cache bypasses it (its
//! cached pages are dropped) and is planned directly.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde::Serialize;

use crate::frontend::{Frontend, Staged};
use crate::geometry::Geometry;
use crate::health::Health;
use crate::layout::{FixedLayout, Layout};
use crate::plan::{DevOp, Method, Plan, Role, StripePlan};
use crate::planner::WritePolicy;
use crate::program::{Buf, Combine, Io, Mark, Phase, Program, Ref};
use crate::PlanError;

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
    pub old_data_hits: u64,
    pub old_data_misses: u64,
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
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..256).filter(move |&c| self.contains(c))
    }
}

/// A cached row of the write cache (whole pages only).
#[derive(Debug, Clone, Default)]
struct Row {
    pages: ColSet,
    last: u64,
}

/// Victim order: most pages first, then (ppc+data) rows with a parity
/// entry, then least recently written.
type VictimKey = (std::cmp::Reverse<usize>, bool, u64, u64);

/// A parity-cache entry: full parity (fpc) or partial parity (ppc).
#[derive(Debug, Clone, Copy)]
struct ParityEntry {
    covered: ColSet,
    last: u64,
}

/// Least-recently-used index over keys with a use stamp.
#[derive(Debug, Default)]
struct Lru {
    order: BTreeSet<(u64, u64)>,
}

impl Lru {
    fn touch(&mut self, key: u64, old: Option<u64>, now: u64) {
        if let Some(o) = old {
            self.order.remove(&(o, key));
        }
        self.order.insert((now, key));
    }
    fn remove(&mut self, key: u64, stamp: u64) {
        self.order.remove(&(stamp, key));
    }
    fn oldest(&self) -> Option<(u64, u64)> {
        self.order.first().copied()
    }
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
}

/// How a step computes the bytes of its writes.  Byte buffers are
/// [`Buf::Bytes`] in byte mode (shared with the cache, never copied) and
/// [`Buf::Scratch`] of the same length in counting mode, so both modes
/// lower a step into the same program ([`CachedArray::lower`]).
#[derive(Debug, Clone)]
pub enum Recipe {
    /// Code = base + sum of A[row][c] * term over `terms` (c, term).
    Parity {
        stripe: u64,
        base: Base,
        terms: Vec<(usize, Src)>,
        /// Keep the resulting code in the parity cache (its on-drive code
        /// is then stale until the entry is flushed).
        keep: bool,
        /// New bytes of the data pages this step writes.
        pages: Vec<(usize, Buf)>,
    },
    /// A write plan of the layout's own planner whose new bytes are `input`.
    Direct { input: Buf },
    /// A read plan of the layout's own planner (the fill of a partly
    /// written page, counting mode; the real volume reads its fills).
    Read,
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
    pages: HashMap<(u64, usize), Arc<[u8]>>,
    /// A row's `m` code units, one after the other.
    parity: HashMap<u64, Arc<[u8]>>,
    old: HashMap<(u64, usize), Arc<[u8]>>,
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
    rows: HashMap<u64, Row>,
    victims: BTreeSet<VictimKey>,
    cached_pages: u64,
    parity: HashMap<u64, ParityEntry>,
    parity_lru: Lru,
    /// Old-data buffer: page key -> use stamp.
    old: HashMap<(u64, usize), u64>,
    old_lru: BTreeSet<(u64, u64, usize)>,
    clock: u64,
    stats: CacheStats,
    bytes: Option<Bytes>,
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
            rows: HashMap::new(),
            victims: BTreeSet::new(),
            cached_pages: 0,
            parity: HashMap::new(),
            parity_lru: Lru::default(),
            old: HashMap::new(),
            old_lru: BTreeSet::new(),
            clock: 0,
            stats: CacheStats::default(),
            bytes: None,
        })
    }

    /// Keep the bytes of every structure (the real array's mode): writes
    /// must then cover whole pages (stripe units).
    pub fn with_bytes(mut self) -> Result<CachedArray, PlanError> {
        self.layout.math.code()?;
        self.bytes = Some(Bytes::default());
        Ok(self)
    }

    pub fn config(&self) -> CacheConfig {
        self.cfg
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.stats
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

    fn key_of(&self, stripe: u64, row: &Row) -> VictimKey {
        let pref = self.cfg.policy == CachePolicy::PpcData && self.parity.contains_key(&stripe);
        (std::cmp::Reverse(row.pages.len()), !pref, row.last, stripe)
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
            if data.is_none_or(|d| d.len() as u64 != len) {
                return Err(PlanError::Invalid("the byte-mode cache needs the write's bytes".into()));
            }
            if !offset.is_multiple_of(self.geo.unit) || !len.is_multiple_of(self.geo.unit) {
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
                let old_key = self.rows.get(&e.stripe).map(|r| self.key_of(e.stripe, r));
                if let Some(k) = old_key {
                    self.victims.remove(&k);
                }
                let row = self.rows.entry(e.stripe).or_default();
                if row.pages.insert(c.col) {
                    self.cached_pages += 1;
                }
                row.last = clock;
                let row = row.clone();
                let k = self.key_of(e.stripe, &row);
                self.victims.insert(k);
                if let (Some(b), Some(d)) = (self.bytes.as_mut(), data) {
                    let at = c.buf_off as usize;
                    b.pages.insert((e.stripe, c.col), d[at..at + (c.end - c.start) as usize].into());
                }
            }
        }
        if hit {
            self.stats.write_hits += 1;
        }
        Ok(fg)
    }

    fn drop_pages(&mut self, stripe: u64, cols: impl Iterator<Item = usize>) {
        let Some(row) = self.rows.get(&stripe).cloned() else { return };
        self.victims.remove(&self.key_of(stripe, &row));
        let mut row = row;
        for c in cols {
            if row.pages.contains(c) {
                row.pages.0[c / 64] &= !(1u64 << (c % 64));
                self.cached_pages -= 1;
                if let Some(b) = self.bytes.as_mut() {
                    b.pages.remove(&(stripe, c));
                }
            }
        }
        if row.pages.is_empty() {
            self.rows.remove(&stripe);
        } else {
            self.victims.insert(self.key_of(stripe, &row));
            self.rows.insert(stripe, row);
        }
    }

    /// Destage the write cache's victim row.
    fn evict_victim(&mut self, h: &Health) -> Result<Vec<Step>, PlanError> {
        let Some(&key) = self.victims.first() else {
            return Err(PlanError::Invalid("write cache full but holds no row".into()));
        };
        self.victims.remove(&key);
        let stripe = key.3;
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
                Some(b) => b.pages.remove(&(stripe, c)).map(|v| (c, Buf::Bytes(v))).ok_or_else(|| missing(c)),
                None => Ok((c, Buf::Scratch(unit))),
            })
            .collect()
    }

    /// The old-data buffer's bytes of a page (byte mode; scratch of a
    /// page's length in counting mode).
    fn old_bytes(&self, stripe: u64, col: usize) -> Result<Buf, PlanError> {
        match &self.bytes {
            Some(b) => b.old.get(&(stripe, col)).map(|v| Buf::Bytes(v.clone())).ok_or_else(|| PlanError::Invalid(format!("stripe {stripe}: page {col} is buffered without its bytes"))),
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
                keep = self.cfg.policy == CachePolicy::Fpc;
                if keep {
                    // fpc: the new full parity stays in the cache.
                    let mut all = ColSet::default();
                    (0..k).for_each(|c| {
                        all.insert(c);
                    });
                    after = self.parity_put(stripe, all, h)?;
                } else {
                    for c in k..k + m {
                        sp.writes.push(self.op(stripe, c, Role::Code));
                    }
                }
            }
            CachePolicy::Ppc | CachePolicy::PpcData => {
                let mut covered = self.parity.get(&stripe).map(|e| e.covered).unwrap_or_default();
                // A full row's partial parity is its full parity (the
                // paper): computed from the pages alone, nothing read, no
                // merge with what was cached.
                let full_row = w == k;
                if parity_cached && !full_row {
                    self.stats.merges += 1;
                    base = Base::Stored { stripe, take: false };
                }
                for c in row.pages.iter() {
                    if covered.contains(c) && !full_row {
                        // Take the page's previous value out of the partial parity.
                        let buffered = self.cfg.policy == CachePolicy::PpcData && self.old_hit(stripe, c);
                        if buffered {
                            self.stats.old_data_hits += 1;
                            terms.push((c, Src::Xor(self.old_bytes(stripe, c)?)));
                        } else {
                            if self.cfg.policy == CachePolicy::PpcData {
                                self.stats.old_data_misses += 1;
                            }
                            terms.push((c, Src::ReadXor(sp.reads.len())));
                            sp.reads.push(self.op(stripe, c, Role::Data));
                        }
                    } else {
                        terms.push((c, Src::Page));
                    }
                    covered.insert(c);
                }
                sp.method = if covered.len() == k { Method::Fsw } else { Method::Rmw };
                for (c, b) in &pages {
                    sp.writes.push(self.op(stripe, *c, Role::Data));
                    if self.cfg.policy == CachePolicy::PpcData {
                        self.old_put(stripe, *c, b);
                    }
                }
                keep = true;
                after = self.parity_put(stripe, covered, h)?;
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
    fn parity_put(&mut self, stripe: u64, covered: ColSet, h: &Health) -> Result<Vec<Step>, PlanError> {
        let mut steps = Vec::new();
        let clock = self.clock;
        let old = self.parity.get(&stripe).map(|e| e.last);
        if old.is_none() {
            while self.parity.len() >= self.pc_entries() {
                let (_, victim) = self.parity_lru.oldest().expect("parity cache non-empty");
                steps.extend(self.parity_flush(victim, h)?);
            }
        }
        self.parity_lru.touch(stripe, old, clock);
        self.parity.insert(stripe, ParityEntry { covered, last: clock });
        self.refresh_victim(stripe);
        Ok(steps)
    }

    /// The victim order of a cached row depends on its parity entry.
    fn refresh_victim(&mut self, stripe: u64) {
        if self.cfg.policy != CachePolicy::PpcData {
            return;
        }
        if let Some(row) = self.rows.get(&stripe).cloned() {
            let with = (std::cmp::Reverse(row.pages.len()), false, row.last, stripe);
            let without = (std::cmp::Reverse(row.pages.len()), true, row.last, stripe);
            self.victims.remove(&with);
            self.victims.remove(&without);
            self.victims.insert(self.key_of(stripe, &row));
        }
    }

    /// Write a row's cached parity to the drives and drop the entry.
    fn parity_flush(&mut self, stripe: u64, h: &Health) -> Result<Vec<Step>, PlanError> {
        let Some(e) = self.parity.remove(&stripe) else { return Ok(vec![]) };
        self.parity_lru.remove(stripe, e.last);
        self.refresh_victim(stripe);
        self.stats.parity_evictions += 1;
        let (k, m) = (self.geo.k, self.geo.m);
        let mut sp = Self::stripe_plan(stripe, if e.covered.len() == k { Method::Fsw } else { Method::Rcw });
        let mut terms = Vec::new();
        for c in (0..k).filter(|&c| !e.covered.contains(c)) {
            // Uncovered pages (never for a full parity).
            if h.available(self.geo.member_of(stripe, c), stripe) {
                terms.push((c, Src::Read(sp.reads.len())));
                sp.reads.push(self.op(stripe, c, Role::Data));
            } else if self.bytes.is_some() {
                return Err(PlanError::Invalid(format!(
                    "stripe {stripe}: its partial parity cannot be completed: the member holding uncovered column {c} failed (see mosaic_core::cache)"
                )));
            }
        }
        for c in k..k + m {
            if h.available(self.geo.member_of(stripe, c), stripe) {
                sp.writes.push(self.op(stripe, c, Role::Code));
            }
        }
        self.count(&sp);
        let recipe = Recipe::Parity { stripe, base: Base::Stored { stripe, take: true }, terms, keep: false, pages: vec![] };
        Ok(vec![Step { sp, recipe }])
    }

    fn old_hit(&mut self, stripe: u64, col: usize) -> bool {
        if let Some(stamp) = self.old.get(&(stripe, col)).copied() {
            self.old_lru.remove(&(stamp, stripe, col));
            self.old_lru.insert((self.clock, stripe, col));
            self.old.insert((stripe, col), self.clock);
            true
        } else {
            false
        }
    }

    /// Buffer the latest value of a covered page (its bytes in byte mode).
    fn old_put(&mut self, stripe: u64, col: usize, bytes: &Buf) {
        if self.od_pages() == 0 {
            return;
        }
        if let (Some(b), Buf::Bytes(v)) = (self.bytes.as_mut(), bytes) {
            b.old.insert((stripe, col), v.clone());
        }
        if let Some(stamp) = self.old.insert((stripe, col), self.clock) {
            self.old_lru.remove(&(stamp, stripe, col));
        } else {
            while self.old.len() > self.od_pages() {
                let (_, st, c) = self.old_lru.pop_first().expect("old-data buffer non-empty");
                self.old.remove(&(st, c));
                if let Some(b) = self.bytes.as_mut() {
                    b.old.remove(&(st, c));
                }
            }
        }
        self.old_lru.insert((self.clock, stripe, col));
    }

    /// Destage everything: every cached row, then every parity entry.
    pub fn flush_steps(&mut self, h: &Health) -> Result<Vec<Step>, PlanError> {
        let mut steps = Vec::new();
        while !self.victims.is_empty() {
            steps.extend(self.evict_victim(h)?);
        }
        for s in self.parity_rows() {
            steps.extend(self.parity_flush(s, h)?);
        }
        Ok(steps)
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
                let mut b = ParityBuilder::new(&step.sp, pages, self.geo.unit as usize, m);
                let base = match base {
                    Base::Zero => vec![],
                    Base::Reads(idx) => idx.iter().map(|&i| b.read(i)).collect::<Result<_, _>>()?,
                    Base::Stored { stripe, .. } => b.rows(self.stored_code(*stripe)?, m),
                };
                if !base.is_empty() && base.len() != m {
                    return Err(PlanError::Invalid(format!("stripe {stripe}: a base of {} code units, not {m}", base.len())));
                }
                let terms = b.terms(terms)?;
                b.combines(self.layout.math.code()?, m, &base, &terms);
                b.writes(&step.sp, k)?;
                let marks = if resync && *keep { vec![Mark::Resync { row: *stripe }] } else { vec![] };
                Ok(b.finish(*keep, marks))
            }
        }
    }

    /// The code units the parity cache holds for `stripe` (byte mode;
    /// scratch of `m` units in counting mode).
    fn stored_code(&self, stripe: u64) -> Result<Buf, PlanError> {
        match &self.bytes {
            Some(b) => b.parity.get(&stripe).map(|v| Buf::Bytes(v.clone())).ok_or_else(|| PlanError::Invalid(format!("stripe {stripe}: no cached parity bytes"))),
            None => Ok(Buf::Scratch(self.geo.m * self.geo.unit as usize)),
        }
    }

    /// `step`'s program ran; `kept` holds its kept buffers.  The code a
    /// step keeps goes into the parity cache; a step that takes the stored
    /// code drops it.  Nothing to do in counting mode.
    pub fn commit(&mut self, step: &Step, kept: Vec<Vec<u8>>) -> Result<(), PlanError> {
        let (Recipe::Parity { stripe, base, keep, .. }, Some(b)) = (&step.recipe, self.bytes.as_mut()) else { return Ok(()) };
        if let Base::Stored { stripe, take: true } = base {
            b.parity.remove(stripe);
        }
        if *keep {
            let code = kept.into_iter().next().ok_or_else(|| PlanError::Invalid(format!("stripe {stripe}: the program kept no code")))?;
            b.parity.insert(*stripe, code.into());
        }
        Ok(())
    }

    /// `step`'s program did not complete: store nothing, and drop the
    /// row's cached code bytes if the step would have replaced or dropped
    /// them.  The policy updated the row's entry when it planned the step,
    /// so the old bytes no longer match it; a later flush of the row is
    /// then an error rather than wrong code on the drives.
    pub fn abort(&mut self, step: &Step) {
        if let (Recipe::Parity { stripe, base, keep, .. }, Some(b)) = (&step.recipe, self.bytes.as_mut()) {
            if *keep || matches!(base, Base::Stored { take: true, .. }) {
                b.parity.remove(stripe);
            }
        }
    }
}

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
        let mut p = Program { locks: vec![sp.stripe], methods: vec![sp.method], ..Default::default() };
        let rd = p.buf(Buf::Scratch(sp.reads.iter().map(|o| o.len as usize).sum()));
        let mut at = 0;
        let mut reads = Vec::with_capacity(sp.reads.len());
        for op in &sp.reads {
            reads.push(Io::new(*op, Ref::new(rd, at)));
            at += op.len as usize;
        }
        let code = p.buf(Buf::Scratch(m * unit));
        let pages = pages.iter().map(|(c, b)| (*c, Ref::new(p.buf(b.clone()), 0))).collect();
        ParityBuilder { p, unit, reads, pages, code, combines: vec![], writes: vec![] }
    }

    fn read(&self, i: usize) -> Result<Ref, PlanError> {
        self.reads.get(i).map(|io| io.at).ok_or_else(|| PlanError::Invalid(format!("a cache recipe names read {i} of {}", self.reads.len())))
    }

    fn page(&self, col: usize) -> Result<Ref, PlanError> {
        self.pages.iter().find(|p| p.0 == col).map(|p| p.1).ok_or_else(|| PlanError::Invalid(format!("a cache recipe names page {col}, which the step does not write")))
    }

    /// Add `code`, `m` code units, as a buffer: where each row starts.
    fn rows(&mut self, code: Buf, m: usize) -> Vec<Ref> {
        let b = self.p.buf(code);
        (0..m).map(|r| Ref::new(b, r * self.unit)).collect()
    }

    /// Each term of column `c` as the buffers it sums (its bytes, or old
    /// and new bytes, whose sum is their difference).
    fn terms(&mut self, terms: &[(usize, Src)]) -> Result<Vec<(usize, Vec<Ref>)>, PlanError> {
        let mut out = Vec::with_capacity(terms.len());
        for (c, src) in terms {
            let refs = match src {
                Src::Page => vec![self.page(*c)?],
                Src::Read(i) => vec![self.read(*i)?],
                Src::ReadXor(i) => vec![self.read(*i)?, self.page(*c)?],
                Src::Xor(old) => vec![Ref::new(self.p.buf(old.clone()), 0), self.page(*c)?],
            };
            out.push((*c, refs));
        }
        Ok(out)
    }

    /// Code row `r` = base row `r` (if any) + sum of A[r][c] * term.
    fn combines(&mut self, code: &mosaic_ec::Code, m: usize, base: &[Ref], terms: &[(usize, Vec<Ref>)]) {
        for r in 0..m {
            let mut t: Vec<(u8, Ref)> = base.get(r).map(|&b| (1, b)).into_iter().collect();
            for (c, refs) in terms {
                let a = code.coefficient(r, *c);
                t.extend(refs.iter().map(|&x| (a, x)));
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
        self.p.phases.push(Phase::Compute(self.combines));
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
            ("old_data_hits".into(), s.old_data_hits as f64),
            ("merges".into(), s.merges as f64),
            ("fills".into(), s.fills as f64),
        ]
    }
}
