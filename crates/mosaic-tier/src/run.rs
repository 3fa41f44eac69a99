//! The write-run coalescer: block write requests become "files".
//!
//! ReHypar places *files*; mosaic sees block requests. A **write run** is
//! one request, or a run of requests of one stream where each starts at
//! the block the previous one ended (`offset == prev.offset + prev.len`)
//! and arrives at most `window_ns` after it. Anything else (a gap, an
//! overwrite, a backwards jump, a pause longer than the window, another
//! stream's id) closes the run. Requests without a stream id share one
//! anonymous stream: the sequentiality test still separates writers in
//! the common case, and no guess is better than that.
//!
//! **Default window: 10 ms** ([`DEFAULT_WINDOW_NS`]). It must exceed the
//! gap between back-to-back requests of one sequential writer, which is
//! bounded by one request's service time: a 1 MiB request on an HDD at
//! ~150 MB/s takes ~7 ms, on an SSD well under 1 ms. It must stay well
//! below the kernel's writeback period (5 s) and dirty expiry (30 s), so
//! data flushed in separate writeback passes — separate decisions of the
//! writer — stays in separate runs.

use std::collections::BTreeMap;

/// Default coalescing window: 10 ms (see the module docs).
pub const DEFAULT_WINDOW_NS: u64 = 10_000_000;

/// Errors of the coalescer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The configuration is invalid.
    #[error("bad run config: {0}")]
    Config(String),
    /// A request is malformed or out of time order.
    #[error("bad request: {0}")]
    Request(String),
}

/// One block write request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRequest {
    /// Arrival time, ns (non-decreasing across pushes).
    pub time_ns: u64,
    /// First logical block.
    pub offset: u64,
    /// Length in blocks (> 0).
    pub len: u64,
    /// Stream id, if the submitter gives one.
    pub stream: Option<u64>,
}

/// A coalesced write run: ReHypar's "file".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRun {
    /// Stream of the requests.
    pub stream: Option<u64>,
    /// First logical block.
    pub offset: u64,
    /// Length in blocks.
    pub len: u64,
    /// Arrival of the first request.
    pub start_ns: u64,
    /// Arrival of the last request.
    pub last_ns: u64,
    /// Number of requests joined.
    pub requests: u64,
}

/// Coalescer settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunConfig {
    /// Largest gap between consecutive requests of a run, ns (> 0).
    pub window_ns: u64,
    /// Close a run once it reaches this many blocks (`None`: no cap).
    pub max_run_blocks: Option<u64>,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            window_ns: DEFAULT_WINDOW_NS,
            max_run_blocks: None,
        }
    }
}

/// Streaming coalescer: push requests in time order, collect closed runs.
#[derive(Debug, Clone)]
pub struct Coalescer {
    cfg: RunConfig,
    open: BTreeMap<Option<u64>, WriteRun>,
    last_ns: u64,
}

impl Coalescer {
    /// A coalescer with `cfg` (window > 0, cap > 0 if set).
    pub fn new(cfg: RunConfig) -> Result<Self, RunError> {
        if cfg.window_ns == 0 {
            return Err(RunError::Config("window_ns must be > 0".into()));
        }
        if cfg.max_run_blocks == Some(0) {
            return Err(RunError::Config("max_run_blocks must be > 0".into()));
        }
        Ok(Self {
            cfg,
            open: BTreeMap::new(),
            last_ns: 0,
        })
    }

    /// Add a request; returns the runs it closed (expired runs of any
    /// stream first, oldest first, then this stream's previous run).
    pub fn push(&mut self, req: BlockRequest) -> Result<Vec<WriteRun>, RunError> {
        check(&req, self.last_ns)?;
        self.last_ns = req.time_ns;
        let mut closed = self.close_expired(req.time_ns);
        if let Some(run) = self.open.get_mut(&req.stream) {
            if joins(run, &req, &self.cfg) {
                run.len += req.len;
                run.last_ns = req.time_ns;
                run.requests += 1;
                return Ok(closed);
            }
            closed.extend(self.open.remove(&req.stream));
        }
        let run = WriteRun {
            stream: req.stream,
            offset: req.offset,
            len: req.len,
            start_ns: req.time_ns,
            last_ns: req.time_ns,
            requests: 1,
        };
        self.open.insert(req.stream, run);
        Ok(closed)
    }

    /// Close runs whose last request is more than the window before `now_ns`.
    pub fn close_expired(&mut self, now_ns: u64) -> Vec<WriteRun> {
        let w = self.cfg.window_ns;
        let gone: Vec<Option<u64>> = self
            .open
            .iter()
            .filter(|(_, r)| now_ns.saturating_sub(r.last_ns) > w)
            .map(|(&k, _)| k)
            .collect();
        let mut out: Vec<WriteRun> = gone.iter().filter_map(|k| self.open.remove(k)).collect();
        out.sort_by_key(|r| (r.start_ns, r.stream));
        out
    }

    /// Close every open run (end of stream), oldest first.
    pub fn finish(mut self) -> Vec<WriteRun> {
        let mut out: Vec<WriteRun> = std::mem::take(&mut self.open).into_values().collect();
        out.sort_by_key(|r| (r.start_ns, r.stream));
        out
    }
}

/// Coalesce a whole request sequence (in time order) into runs.
pub fn coalesce(
    cfg: RunConfig,
    reqs: impl IntoIterator<Item = BlockRequest>,
) -> Result<Vec<WriteRun>, RunError> {
    let mut c = Coalescer::new(cfg)?;
    let mut out = Vec::new();
    for r in reqs {
        out.extend(c.push(r)?);
    }
    out.extend(c.finish());
    Ok(out)
}

fn check(req: &BlockRequest, last_ns: u64) -> Result<(), RunError> {
    if req.len == 0 {
        return Err(RunError::Request("request of 0 blocks".into()));
    }
    if req.offset.checked_add(req.len).is_none() {
        return Err(RunError::Request("offset + len overflows".into()));
    }
    if req.time_ns < last_ns {
        return Err(RunError::Request(format!(
            "time {} before previous {last_ns}",
            req.time_ns
        )));
    }
    Ok(())
}

/// Does `req` extend `run`: sequential, within the window, under the cap?
fn joins(run: &WriteRun, req: &BlockRequest, cfg: &RunConfig) -> bool {
    let sequential = req.offset == run.offset + run.len;
    let in_window = req.time_ns - run.last_ns <= cfg.window_ns;
    let under_cap = !matches!(cfg.max_run_blocks, Some(cap) if run.len + req.len > cap);
    sequential && in_window && under_cap
}
