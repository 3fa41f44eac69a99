//! Transactions: the sets of remap units requested together (the paper's
//! §3.1, "storage workload monitoring").
//!
//! A transaction starts at a request and takes in every later request
//! whose arrival falls within `window_ns` of that first request
//! (inter-request correlation); with a window of 0 each request is its own
//! transaction (intra-request correlation only).  Requests are mapped to
//! remap units (`offset / unit ..= (offset + len - 1) / unit`), and a
//! transaction is the sorted, deduplicated list of its units.
//!
//! The number of pairs a transaction feeds the correlator grows as m², so
//! a transaction holds at most `max_units` distinct units.  The cap rule:
//!
//! * a request whose units fit, but would take the open transaction past
//!   the cap, closes it and opens a new one (its window starts at this
//!   request) — counted in [`TxnStats::cap_closes`];
//! * a single request spanning more than `max_units` units closes the open
//!   transaction and becomes consecutive chunks of `max_units` units (the
//!   last one shorter), each its own transaction; the next request opens a
//!   fresh transaction — counted in [`TxnStats::splits`].  Chunks are made
//!   lazily, so a huge request never allocates more than one chunk at a
//!   time.
//!
//! Reads and writes both count by default (both make drives work together);
//! [`Ops`] keeps only one kind.  Filtered requests are ignored entirely:
//! they neither join nor close a transaction.
//!
//! The text format is the paper's Fig. 2a "market basket" file: one
//! transaction per line, unit numbers in decimal separated by spaces.
//!
//! ```text
//!   1 2
//!   1 3 4
//!   4 5
//! ```

use std::collections::{BTreeSet, VecDeque};

use mosaic_trace::{Op, Request};

use crate::graph::Vertex;

/// One transaction: sorted, deduplicated unit numbers.
pub type Txn = Vec<Vertex>;

/// Errors from configuration, requests and the text format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    /// An invalid [`TxnConfig`].
    #[error("transaction config: {0}")]
    Config(String),
    /// A request that names no bytes or runs past the end of the address
    /// space; `index` is its 0-based position among the pushed requests.
    #[error("request {index}: {message}")]
    Request { index: u64, message: String },
    /// A malformed line of the text format (1-based line number).
    #[error("line {line}: {message}")]
    Parse { line: usize, message: String },
}

/// Which requests count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ops {
    /// Reads and writes (the default).
    #[default]
    Both,
    Reads,
    Writes,
}

impl Ops {
    fn keeps(self, op: Op) -> bool {
        match self {
            Ops::Both => true,
            Ops::Reads => op == Op::Read,
            Ops::Writes => op == Op::Write,
        }
    }
}

/// How requests become transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnConfig {
    /// Remap unit in bytes: a power of two of at least 512 (a sector), as
    /// mosaic's other block sizes, so it lines up with stripe units.
    pub unit: u64,
    /// Requests arriving less than this many ns after a transaction's first
    /// request join it; 0 = one request per transaction.
    pub window_ns: u64,
    /// Cap on distinct units per transaction (>= 2: fewer makes no pairs).
    pub max_units: usize,
    /// Which requests count.
    pub ops: Ops,
}

impl Default for TxnConfig {
    /// 64 KiB units, a 1 ms window, at most 64 units, reads and writes.
    fn default() -> Self {
        TxnConfig { unit: 64 << 10, window_ns: 1_000_000, max_units: 64, ops: Ops::Both }
    }
}

impl TxnConfig {
    /// A config counting reads and writes.
    pub fn new(unit: u64, window_ns: u64, max_units: usize) -> TxnConfig {
        TxnConfig { unit, window_ns, max_units, ops: Ops::Both }
    }

    /// Check the fields (see their docs).
    pub fn validate(&self) -> Result<(), TxnError> {
        if self.unit < 512 || !self.unit.is_power_of_two() {
            return Err(TxnError::Config(format!("unit {} is not a power of two of at least 512 bytes", self.unit)));
        }
        if self.max_units < 2 {
            return Err(TxnError::Config(format!("max_units {} is below 2 (a transaction needs two units to make a pair)", self.max_units)));
        }
        Ok(())
    }
}

/// What the builder saw and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxnStats {
    /// Requests pushed (including filtered ones).
    pub requests: u64,
    /// Requests dropped by [`TxnConfig::ops`].
    pub filtered: u64,
    /// Transactions handed out.
    pub transactions: u64,
    /// Units over all transactions handed out.
    pub units: u64,
    /// Transactions closed early because the next request would have
    /// taken them past `max_units`.
    pub cap_closes: u64,
    /// Requests larger than `max_units` units, split into chunks.
    pub splits: u64,
}

/// Work waiting to be handed out, in order.
#[derive(Debug)]
enum Pending {
    Txn(Txn),
    /// The units `next ..= last` of a split request, still to be cut into
    /// chunks.
    Chunks { next: u64, last: u64 },
}

/// The streaming builder.  Feed requests in arrival order with
/// [`push`](Transactions::push), call [`finish`](Transactions::finish) at
/// the end; both return a draining iterator of the transactions completed
/// so far (one push can complete several: the open transaction plus the
/// chunks of a split request).  Whatever a caller leaves undrained stays
/// queued, in order, for the next drain or [`pop`](Transactions::pop).
#[derive(Debug)]
pub struct Transactions {
    cfg: TxnConfig,
    open: BTreeSet<Vertex>,
    start_ns: u64,
    ready: VecDeque<Pending>,
    stats: TxnStats,
}

/// Transactions completed so far; see [`Transactions`].
#[derive(Debug)]
pub struct Drain<'a>(&'a mut Transactions);

impl Iterator for Drain<'_> {
    type Item = Txn;
    fn next(&mut self) -> Option<Txn> {
        self.0.pop()
    }
}

impl Transactions {
    pub fn new(cfg: TxnConfig) -> Result<Transactions, TxnError> {
        cfg.validate()?;
        Ok(Transactions { cfg, open: BTreeSet::new(), start_ns: 0, ready: VecDeque::new(), stats: TxnStats::default() })
    }

    pub fn stats(&self) -> &TxnStats {
        &self.stats
    }

    /// Add one request (arrival order).  A request with `len == 0` or
    /// `offset + len` past `u64::MAX` is an error and changes nothing but
    /// the request count.  A time earlier than the open transaction's start
    /// counts as inside the window (trace readers give monotone times).
    pub fn push(&mut self, r: &Request) -> Result<Drain<'_>, TxnError> {
        let index = self.stats.requests;
        self.stats.requests += 1;
        if !self.cfg.ops.keeps(r.op) {
            self.stats.filtered += 1;
            return Ok(Drain(self));
        }
        let (first, last) = self.unit_range(r, index)?;
        if last - first >= self.cfg.max_units as u64 {
            self.close();
            self.stats.splits += 1;
            self.ready.push_back(Pending::Chunks { next: first, last });
        } else {
            self.join(r.time_ns, first, last);
        }
        Ok(Drain(self))
    }

    /// Close the open transaction (end of the requests).
    pub fn finish(&mut self) -> Drain<'_> {
        self.close();
        Drain(self)
    }

    /// The next completed transaction, if any.
    pub fn pop(&mut self) -> Option<Txn> {
        let txn = match self.ready.front_mut()? {
            Pending::Txn(t) => std::mem::take(t),
            Pending::Chunks { next, last } => {
                let end = next.saturating_add(self.cfg.max_units as u64 - 1).min(*last);
                let chunk: Txn = (*next..=end).collect();
                if end < *last {
                    *next = end + 1;
                    return Some(self.count(chunk));
                }
                chunk
            }
        };
        self.ready.pop_front();
        Some(self.count(txn))
    }

    fn count(&mut self, t: Txn) -> Txn {
        self.stats.transactions += 1;
        self.stats.units += t.len() as u64;
        t
    }

    /// First and last unit of a request, or why it has none.
    fn unit_range(&self, r: &Request, index: u64) -> Result<(u64, u64), TxnError> {
        let bad = |message: &str| TxnError::Request { index, message: message.to_string() };
        if r.len == 0 {
            return Err(bad("length 0"));
        }
        let end = r.offset.checked_add(r.len - 1).ok_or_else(|| bad("offset + length overflows u64"))?;
        Ok((r.offset / self.cfg.unit, end / self.cfg.unit))
    }

    /// Put a request of at most `max_units` units into the open
    /// transaction, or close that and open a new one (outside the window,
    /// or the cap would be passed).
    fn join(&mut self, time_ns: u64, first: u64, last: u64) {
        let inside = !self.open.is_empty() && time_ns.saturating_sub(self.start_ns) < self.cfg.window_ns;
        if inside {
            let known = self.open.range(first..=last).count() as u64;
            let grown = self.open.len() as u64 + (last - first + 1) - known;
            if grown > self.cfg.max_units as u64 {
                self.stats.cap_closes += 1;
                self.close();
            }
        } else {
            self.close();
        }
        if self.open.is_empty() {
            self.start_ns = time_ns;
        }
        self.open.extend(first..=last);
    }

    fn close(&mut self) {
        if !self.open.is_empty() {
            let t: Txn = std::mem::take(&mut self.open).into_iter().collect();
            self.ready.push_back(Pending::Txn(t));
        }
    }
}

/// All transactions of a request sequence, with the builder's stats.
pub fn transactions<I>(cfg: TxnConfig, requests: I) -> Result<(Vec<Txn>, TxnStats), TxnError>
where
    I: IntoIterator<Item = Request>,
{
    let mut b = Transactions::new(cfg)?;
    let mut out = Vec::new();
    for r in requests {
        out.extend(b.push(&r)?);
    }
    out.extend(b.finish());
    Ok((out, b.stats))
}

/// The text format: one line per transaction, units separated by single
/// spaces, each line ending in `\n`.  Empty transactions have no line (a
/// blank line is skipped by the parser), so they do not round-trip.
pub fn to_text(txns: &[Txn]) -> String {
    let mut s = String::new();
    for t in txns.iter().filter(|t| !t.is_empty()) {
        write_line(&mut s, t);
    }
    s
}

fn write_line(s: &mut String, t: &[Vertex]) {
    use std::fmt::Write;
    for (i, u) in t.iter().enumerate() {
        let sep = if i == 0 { "" } else { " " };
        // Writing to a String cannot fail.
        let _ = write!(s, "{sep}{u}");
    }
    s.push('\n');
}

/// Parse the text format.  Units may be separated by any run of spaces or
/// tabs and come in any order; each transaction is sorted and deduplicated
/// (the basket format is a set).  Blank lines are skipped.  The first token
/// that is not a decimal `u64` is an error naming its 1-based line.
pub fn parse_text(text: &str) -> Result<Vec<Txn>, TxnError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = parse_line(line, i + 1)?;
        if !t.is_empty() {
            out.push(t);
        }
    }
    Ok(out)
}

/// One line of the text format; `line` (1-based) labels errors.
pub fn parse_line(text: &str, line: usize) -> Result<Txn, TxnError> {
    let mut t = Txn::new();
    for tok in text.split_ascii_whitespace() {
        let u = tok
            .parse::<u64>()
            .ok()
            .filter(|_| tok.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| TxnError::Parse { line, message: format!("'{tok}' is not a unit number (a decimal integer below 2^64)") })?;
        t.push(u);
    }
    t.sort_unstable();
    t.dedup();
    Ok(t)
}
