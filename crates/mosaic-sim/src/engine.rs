//! The discrete-event replay engine.
//!
//! Requests flow through the very planner the real array uses:
//!
//! ```text
//!   trace ─> arrival ─> Frontend::submit ─> Programs (the ones the real
//!                                            │       executor runs)
//!         per drive: pending queue ─(pick, queue depth)─> DriveModel::submit
//!                                            │ completion event
//!   lane (a stripe): its ops of one phase done ─> its next phase queued
//!                    ─> … ─> lane done
//!   request: all lanes done ─> latency recorded (closed loop: next request)
//! ```
//!
//! Reads, writes, flushes and zone resets of a program's phases are timed;
//! its computation takes no virtual time.
//!
//! A [`Frontend`] (write cache, log-structured layout) may answer a request
//! with foreground programs, which the request waits for, and background ones
//! (destage, garbage collection), which run on the same drives without
//! holding it; a bare layout is the [`Direct`] front end.  When no
//! foreground request has been outstanding for the front end's
//! `idle_after_ns`, its idle work is started, one step at a time.
//!
//! Time is virtual (nanoseconds).  Events with equal times are ordered by a
//! sequence number, so a run is a pure function of its inputs and seed.

use std::collections::VecDeque;

use mosaic_core::{Direct, Frontend, Health, Layout, MemberState, OpCounts, Phase, Program, Staged};
use mosaic_drives::{DriveModel, DriveRequest, ReqKind};
use mosaic_trace::{Op, Request};
use serde::Serialize;

use crate::SimError;

/// How requests are issued.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "mode")]
pub enum Mode {
    /// At the trace's timestamps multiplied by `time_scale` (smaller = faster arrivals).
    Open { time_scale: f64 },
    /// A fixed number of requests outstanding; trace timestamps ignored.
    Closed { queue_depth: usize },
}

/// Replay configuration.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub mode: Mode,
    /// Members treated as failed for the whole run (degraded replay).
    pub failed: Vec<usize>,
    /// Keep per-request latencies for CDF plots (memory grows with the trace).
    pub keep_latencies: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { mode: Mode::Closed { queue_depth: 1 }, failed: vec![], keep_latencies: false }
    }
}

/// Response-time summary in microseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// One drive's totals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeviceStats {
    pub index: usize,
    pub model: String,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Time with at least one request outstanding.
    pub busy_ns: u64,
    pub utilisation: f64,
}

/// The result of one replay.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SimReport {
    pub layout: String,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub device_reads: u64,
    pub device_writes: u64,
    /// From the first arrival to the last completion.
    pub duration_s: f64,
    pub iops: f64,
    pub mib_per_s: f64,
    pub read_latency: Latency,
    pub write_latency: Latency,
    /// Device reads and writes caused by logical writes, per logical write
    /// (foreground and background work both count).
    pub device_reads_per_write: f64,
    pub device_writes_per_write: f64,
    pub ops: OpCounts,
    pub devices: Vec<DeviceStats>,
    /// Requests moved or trimmed to fit the array (see [`Simulator`]).
    pub realigned: u64,
    pub wrapped: u64,
    /// Background plans run (destage, GC) and the front end's own counters.
    pub background_plans: u64,
    pub policy: Vec<(String, f64)>,
    #[serde(skip)]
    pub read_latencies_ns: Vec<u64>,
    #[serde(skip)]
    pub write_latencies_ns: Vec<u64>,
}

struct ReqState {
    arrival: u64,
    write: bool,
    lanes_left: usize,
}

/// One lane of a program in flight.
struct LaneState {
    /// None for background work.
    req: Option<usize>,
    /// Index into `plans`.
    plan: usize,
    lane: u32,
    /// The next phase to look at.
    phase: usize,
    ops_left: usize,
}

/// A request waiting in a drive's queue, and the lane it belongs to.
#[derive(Clone, Copy)]
struct Queued {
    lane: usize,
    req: DriveRequest,
}

struct Drive {
    model: Box<dyn DriveModel>,
    /// Waiting requests, oldest first.
    pending: VecDeque<Queued>,
    /// Whether the model chooses among waiting requests
    /// ([`DriveModel::reorders`]); FIFO models are not asked.
    reorders: bool,
    /// The model's host queue depth (at least 1).
    depth: usize,
    /// Scratch: the waiting requests as one slice, for `pick`.
    picking: Vec<DriveRequest>,
    /// Ordered programs ([`Program::ordered`]) with writes or zone resets
    /// on this drive, in launch order, and how many each has left: an
    /// ordered program's writes go only once every earlier one's have.
    write_order: VecDeque<(usize, usize)>,
    outstanding: usize,
    busy_since: u64,
    stats: DeviceStats,
}

#[derive(Clone, Copy)]
enum Ev {
    Arrival,
    OpDone { drive: u32, lane: u32 },
    /// Idle check scheduled when the last foreground request finished;
    /// valid only if no request started since (generation matches).
    Idle { generation: u64 },
}

/// A queued event.
#[derive(Clone, Copy)]
struct Event {
    t: u64,
    seq: u64,
    ev: Ev,
}

impl Event {
    /// The order of events: by time, then in the order they were queued.
    #[inline]
    fn key(&self) -> u128 {
        (self.t as u128) << 64 | self.seq as u128
    }
}

/// The pending events, by [`Event::key`] (keys are unique, so the order
/// of events is fully determined).
///
/// A replay keeps few events pending (one per operation a drive is
/// serving, plus an arrival), and a new one nearly always completes after
/// all of them: they are kept sorted in `v[head..]`, a push appends (or
/// moves the later ones up one place: insertion sort from the back), a
/// pop takes `v[head]`.  Past
/// [`SORTED_MAX`] pending events that could cost a move per event, so
/// the queue turns into a binary min-heap in `v` for the rest of the run
/// (a sorted vector is a heap; `head` is then 0).
#[derive(Default)]
struct Events {
    v: Vec<Event>,
    head: usize,
    heap: bool,
}

/// At most this many pending events are kept sorted (then, a heap).
const SORTED_MAX: usize = 64;
/// Popped slots at the front of a sorted queue are reclaimed once there
/// are this many.
const RECLAIM: usize = 64;

impl Events {
    #[inline(always)]
    fn push(&mut self, e: Event) {
        if self.heap || self.v.len() - self.head >= SORTED_MAX {
            return self.heap_push(e);
        }
        // Usually after every pending event.
        if self.v.last().map_or(true, |last| last.key() < e.key()) {
            return self.v.push(e);
        }
        self.insert(e);
    }

    /// Put `e` in its place among the sorted events.
    #[inline(never)]
    fn insert(&mut self, e: Event) {
        let key = e.key();
        self.v.push(e);
        let live = &mut self.v[self.head..];
        let mut i = live.len() - 1;
        while i > 0 && live[i - 1].key() > key {
            live[i] = live[i - 1];
            i -= 1;
        }
        live[i] = e;
    }

    #[inline]
    fn pop(&mut self) -> Option<Event> {
        if self.heap {
            return self.heap_pop();
        }
        let e = *self.v.get(self.head)?;
        self.head += 1;
        if self.head == self.v.len() {
            self.v.clear();
            self.head = 0;
        } else if self.head >= RECLAIM {
            self.reclaim();
        }
        Some(e)
    }

    /// Move the pending events to the front of `v`.
    #[cold]
    fn reclaim(&mut self) {
        self.v.drain(..self.head);
        self.head = 0;
    }

    /// Push onto the heap, turning the sorted events into one first.
    #[inline(never)]
    fn heap_push(&mut self, e: Event) {
        if !self.heap {
            self.reclaim();
            self.heap = true;
        }
        self.v.push(e);
        self.sift_up(self.v.len() - 1, e);
    }

    /// Put `e` in the hole at `i` or above it, moving larger parents down.
    fn sift_up(&mut self, mut i: usize, e: Event) {
        let key = e.key();
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.v[parent].key() < key {
                break;
            }
            self.v[i] = self.v[parent];
            i = parent;
        }
        self.v[i] = e;
    }

    #[inline(never)]
    fn heap_pop(&mut self) -> Option<Event> {
        let last = self.v.pop()?;
        let Some(&top) = self.v.first() else { return Some(last) };
        // The root's hole goes down to a leaf along the smaller children
        // (one comparison a level), then the last event climbs back up
        // from there: it came from the bottom, so it rarely climbs far.
        let n = self.v.len();
        let mut i = 0;
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let c = if l + 1 < n && self.v[l + 1].key() < self.v[l].key() { l + 1 } else { l };
            self.v[i] = self.v[c];
            i = c;
        }
        self.sift_up(i, last);
        Some(top)
    }
}

/// A slab: reuse freed slots so memory stays bounded by what is in flight.
struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Slab<T> {
    fn new() -> Self {
        Slab { items: Vec::new(), free: Vec::new() }
    }
    fn insert(&mut self, t: T) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.items[i] = Some(t);
                i
            }
            None => {
                self.items.push(Some(t));
                self.items.len() - 1
            }
        }
    }
    fn get(&mut self, i: usize) -> &mut T {
        self.items[i].as_mut().expect("live slab entry")
    }
    fn peek(&self, i: usize) -> &T {
        self.items[i].as_ref().expect("live slab entry")
    }
    fn remove(&mut self, i: usize) -> T {
        self.free.push(i);
        self.items[i].take().expect("live slab entry")
    }
}

/// Replays requests on a layout over modelled drives.
///
/// Trace requests are mapped onto the array: offsets beyond the capacity
/// wrap around (counted in `wrapped`); requests not aligned to the layout's
/// block size are widened to block boundaries (counted in `realigned`).
pub struct Simulator<'a> {
    fe: Box<dyn Frontend + 'a>,
    /// The front end's block size and capacity, fixed for its life (read
    /// once: every request is fitted to them).
    block: u64,
    capacity: u64,
    drives: Vec<Drive>,
    health: Health,
    cfg: SimConfig,
    now: u64,
    seq: u64,
    events: Events,
    reqs: Slab<ReqState>,
    lanes: Slab<LaneState>,
    plans: Slab<(Program, usize)>,
    /// Scratch: the drives a phase queued on, in order.
    order: Vec<usize>,
    /// Scratch: the programs of the request being started.
    staged: Staged,
    report: SimReport,
    write_dev_reads: u64,
    write_dev_writes: u64,
    first_arrival: Option<u64>,
    last_done: u64,
    started: u64,
    completed: u64,
    error: Option<SimError>,
    /// Foreground requests in flight; background lanes in flight.
    fg_inflight: u64,
    bg_inflight: u64,
    /// Bumped whenever a foreground request starts (invalidates idle checks).
    generation: u64,
    idle_pending: bool,
}

impl<'a> Simulator<'a> {
    /// Replay on a bare layout: every request waits for its one plan.
    pub fn new(layout: &'a dyn Layout, models: Vec<Box<dyn DriveModel>>, cfg: SimConfig) -> Result<Simulator<'a>, SimError> {
        Self::with_frontend(Box::new(Direct(layout)), models, cfg)
    }

    /// Replay through a front end (cache, log-structured layout).
    pub fn with_frontend(fe: Box<dyn Frontend + 'a>, models: Vec<Box<dyn DriveModel>>, cfg: SimConfig) -> Result<Simulator<'a>, SimError> {
        let members = fe.members();
        if models.len() != members {
            return Err(SimError::Config(format!("{} drive models given for {} members", models.len(), members)));
        }
        let mut health = Health::all_active(members);
        for &f in &cfg.failed {
            if f >= members {
                return Err(SimError::Config(format!("failed member {f} out of range")));
            }
            health.states[f] = MemberState::Failed;
        }
        if let Mode::Closed { queue_depth: 0 } = cfg.mode {
            return Err(SimError::Config("closed-loop queue depth must be at least 1".into()));
        }
        let drives = models
            .into_iter()
            .enumerate()
            .map(|(i, model)| Drive {
                stats: DeviceStats { index: i, model: model.describe(), ..Default::default() },
                reorders: model.reorders(),
                depth: model.queue_depth().max(1),
                model,
                pending: VecDeque::new(),
                picking: Vec::new(),
                write_order: VecDeque::new(),
                outstanding: 0,
                busy_since: 0,
            })
            .collect();
        let describe = fe.describe();
        Ok(Simulator {
            block: fe.block_size(),
            capacity: fe.capacity(),
            fe,
            drives,
            health,
            cfg,
            now: 0,
            seq: 0,
            events: Events::default(),
            reqs: Slab::new(),
            lanes: Slab::new(),
            order: Vec::new(),
            staged: Staged::default(),
            plans: Slab::new(),
            report: SimReport { layout: describe, ..Default::default() },
            write_dev_reads: 0,
            write_dev_writes: 0,
            first_arrival: None,
            last_done: 0,
            started: 0,
            completed: 0,
            error: None,
            fg_inflight: 0,
            bg_inflight: 0,
            generation: 0,
            idle_pending: false,
        })
    }

    #[inline]
    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Event { t, seq: self.seq, ev });
    }

    /// Fit a trace request onto the array.
    fn fit(&mut self, r: &Request) -> Option<(u64, u64)> {
        let f = fit(r, self.block, self.capacity)?;
        self.report.realigned += f.realigned as u64;
        self.report.wrapped += f.wrapped as u64;
        Some((f.offset, f.len))
    }

    /// Start a request now.
    fn start(&mut self, r: &Request) -> Result<bool, SimError> {
        let Some((off, len)) = self.fit(r) else { return Ok(false) };
        if len > MAX_REQUEST {
            return Err(SimError::Config(format!(
                "a {} of {} bytes at offset {}: larger than the {MAX_REQUEST} bytes the simulator plans as one request (damaged sizes in the trace?)",
                if r.op == Op::Write { "write" } else { "read" },
                r.len,
                r.offset
            )));
        }
        let write = r.op == Op::Write;
        // The front end stages into vectors the simulator keeps.
        let Simulator { fe, health, staged, now, .. } = self;
        if let Err(e) = fe.submit_into(write, off, len, *now, health, staged) {
            staged.fg.clear();
            staged.bg.clear();
            return Err(e.into());
        }
        self.start_staged(write, len);
        Ok(true)
    }

    /// Count and start the programs a request at `now` caused (in
    /// `self.staged`, left empty).
    fn start_staged(&mut self, write: bool, len: u64) {
        self.generation += 1;
        self.first_arrival.get_or_insert(self.now);
        self.started += 1;
        self.report.requests += 1;
        if write {
            self.report.writes += 1;
            self.report.write_bytes += len;
        } else {
            self.report.reads += 1;
            self.report.read_bytes += len;
        }
        // The counts add up, so a write's device operations are the
        // difference they make to the totals.
        let ops = &mut self.report.ops;
        let staged = &self.staged;
        let (reads, writes) = (ops.device_reads(), ops.device_writes());
        let mut n = 0;
        for p in &staged.fg {
            n += p.count_into(ops);
        }
        for p in &staged.bg {
            p.count_into(ops);
        }
        if write {
            self.write_dev_reads += ops.device_reads() - reads;
            self.write_dev_writes += ops.device_writes() - writes;
        }
        let req = self.reqs.insert(ReqState { arrival: self.now, write, lanes_left: n });
        self.fg_inflight += 1;
        if n == 0 {
            // Served without touching a drive (a cache hit).
            self.req_done(req);
        }
        if self.staged.fg.len() == 1 {
            // The common case: one program, with all `n` lanes.
            if let Some(plan) = self.staged.fg.pop() {
                self.launch(plan, n, Some(req));
            }
        } else {
            let mut fg = std::mem::take(&mut self.staged.fg);
            for plan in fg.drain(..) {
                let lanes = plan.lanes();
                self.launch(plan, lanes, Some(req));
            }
            self.staged.fg = fg;
        }
        if !self.staged.bg.is_empty() {
            let mut bg = std::mem::take(&mut self.staged.bg);
            self.start_background(bg.drain(..));
            self.staged.bg = bg;
        }
    }

    fn start_background(&mut self, programs: impl IntoIterator<Item = Program>) {
        for p in programs {
            let n = p.lanes();
            if n == 0 {
                continue;
            }
            self.report.background_plans += 1;
            self.bg_inflight += n as u64;
            self.launch(p, n, None);
        }
    }

    /// Start every lane of `p`, which has `n` ([`Program::lanes`]).
    fn launch(&mut self, p: Program, n: usize, req: Option<usize>) {
        if n == 0 {
            return;
        }
        let writes = if p.ordered { writes_per_drive(&p, self.drives.len()) } else { vec![] };
        let plan = self.plans.insert((p, n));
        for (d, &w) in writes.iter().enumerate() {
            if w > 0 {
                self.drives[d].write_order.push_back((plan, w));
            }
        }
        for lane in 0..n as u32 {
            let st = self.lanes.insert(LaneState { req, plan, lane, phase: 0, ops_left: 0 });
            self.next_phase(st);
        }
    }

    /// Queue the lane's next phase that has operations for it; the lane is
    /// done when none is left.
    fn next_phase(&mut self, st: usize) {
        loop {
            let (plan, lane, phase) = {
                let s = self.lanes.get(st);
                s.phase += 1;
                (s.plan, s.lane, s.phase - 1)
            };
            let Simulator { plans, drives, order, .. } = self;
            let p = &plans.get(plan).0;
            let Some(ph) = p.phases.get(phase) else {
                self.lane_done(st);
                return;
            };
            // Drives are dispatched in the order the phase names them.
            order.clear();
            let mut queue = |member: usize, kind: ReqKind, offset: u64, len: u64| {
                drives[member].pending.push_back(Queued { lane: st, req: DriveRequest { kind, offset, len } });
                order.push(member);
            };
            match ph {
                Phase::Read(ios) => ios.iter().filter(|io| io.lane == lane).for_each(|io| queue(io.op.member, ReqKind::Read, io.op.offset, io.op.len)),
                Phase::Write { ops, .. } => ops.iter().filter(|io| io.lane == lane).for_each(|io| queue(io.op.member, ReqKind::Write, io.op.offset, io.op.len)),
                Phase::Flush(ms) if lane == 0 => ms.iter().for_each(|&m| queue(m, ReqKind::Flush, 0, 0)),
                Phase::Reset(ops) if lane == 0 => ops.iter().for_each(|o| queue(o.member, ReqKind::ZoneReset, o.offset, 0)),
                _ => {}
            }
            if order.is_empty() {
                continue;
            }
            self.lanes.get(st).ops_left = order.len();
            // Dispatching leaves `order` alone.
            for i in 0..self.order.len() {
                self.dispatch(self.order[i]);
            }
            return;
        }
    }

    /// Send drive `d` what it may take now of its waiting requests.
    #[inline]
    fn dispatch(&mut self, d: usize) {
        // Most calls find nothing to do: answer those without the call.
        let drive = &self.drives[d];
        if !drive.pending.is_empty() && drive.outstanding < drive.depth {
            self.dispatch_some(d);
        }
    }

    #[inline(never)]
    fn dispatch_some(&mut self, d: usize) {
        let now = self.now;
        let Simulator { drives, lanes, plans, events, seq, error, .. } = self;
        let drive = &mut drives[d];
        while !drive.pending.is_empty() && drive.outstanding < drive.depth {
            // The usual: a FIFO drive (or one request to choose from) and
            // no ordered writes queued, so the oldest request goes.
            let idx = if drive.write_order.is_empty() && (drive.pending.len() == 1 || !drive.reorders) {
                0
            } else {
                let Some(idx) = choose(drive, lanes, plans, now) else { return };
                idx
            };
            let Some(Queued { lane: st, req }) = (if idx == 0 { drive.pending.pop_front() } else { drive.pending.remove(idx) }) else { return };
            let done = match drive.model.submit(now, &req) {
                Ok(t) => t.max(now),
                Err(e) => failed(error, d, e, now),
            };
            if drive.outstanding == 0 {
                drive.busy_since = now;
            }
            drive.outstanding += 1;
            match req.kind {
                ReqKind::Read => {
                    drive.stats.reads += 1;
                    drive.stats.read_bytes += req.len
                }
                ReqKind::ZoneReset | ReqKind::ZoneFinish | ReqKind::Flush => {}
                _ => {
                    drive.stats.writes += 1;
                    drive.stats.write_bytes += req.len
                }
            }
            *seq += 1;
            events.push(Event { t: done, seq: *seq, ev: Ev::OpDone { drive: d as u32, lane: st as u32 } });
        }
    }

    fn lane_done(&mut self, st: usize) {
        let s = self.lanes.remove(st);
        {
            let p = self.plans.get(s.plan);
            p.1 -= 1;
            if p.1 == 0 {
                self.plans.remove(s.plan).0.recycle();
            }
        }
        self.last_done = self.last_done.max(self.now);
        let Some(req) = s.req else {
            self.bg_inflight -= 1;
            if self.bg_inflight == 0 && self.fg_inflight == 0 {
                // A background step finished on idle drives: next step.
                self.schedule_idle(0);
            }
            return;
        };
        let left = {
            let r = self.reqs.get(req);
            r.lanes_left -= 1;
            r.lanes_left
        };
        if left == 0 {
            self.req_done(req);
        }
    }

    fn req_done(&mut self, req: usize) {
        let r = self.reqs.remove(req);
        let lat = self.now - r.arrival;
        self.last_done = self.last_done.max(self.now);
        if r.write {
            self.report.write_latencies_ns.push(lat);
        } else {
            self.report.read_latencies_ns.push(lat);
        }
        self.completed += 1;
        self.fg_inflight -= 1;
        if self.fg_inflight == 0 {
            if let Some(after) = self.fe.idle_after_ns() {
                self.schedule_idle(after);
            }
        }
    }

    fn schedule_idle(&mut self, after: u64) {
        if self.idle_pending || self.fe.idle_after_ns().is_none() {
            return;
        }
        self.idle_pending = true;
        let generation = self.generation;
        self.push(self.now + after, Ev::Idle { generation });
    }

    fn on_idle(&mut self, generation: u64) -> Result<(), SimError> {
        self.idle_pending = false;
        if generation != self.generation || self.fg_inflight > 0 {
            // Foreground I/O came in: it aborts idle work; the next idle
            // period reschedules.
            return Ok(());
        }
        if self.bg_inflight > 0 {
            return Ok(());
        }
        let plans = self.fe.idle(self.now, &self.health)?;
        for p in &plans {
            self.report.ops.merge(&p.counts());
        }
        self.start_background(plans);
        Ok(())
    }

    fn op_done(&mut self, d: usize, st: usize) {
        let drive = &mut self.drives[d];
        drive.outstanding -= 1;
        if drive.outstanding == 0 {
            drive.stats.busy_ns += self.now - drive.busy_since;
        }
        let left = {
            let s = self.lanes.get(st);
            s.ops_left -= 1;
            s.ops_left
        };
        if left == 0 {
            self.next_phase(st);
        }
        self.dispatch(d);
    }
}

/// The pending request of `drive` to dispatch next: the model's pick
/// (reordering models, several waiting), kept to the ordered programs'
/// write order ([`in_order`]); None when none may go.
#[cold]
#[inline(never)]
fn choose(drive: &mut Drive, lanes: &Slab<LaneState>, plans: &Slab<(Program, usize)>, now: u64) -> Option<usize> {
    let picked = if drive.pending.len() == 1 || !drive.reorders {
        0
    } else {
        drive.picking.clear();
        drive.picking.extend(drive.pending.iter().map(|q| q.req));
        drive.model.pick(now, &drive.picking).min(drive.pending.len() - 1)
    };
    in_order(drive, lanes, plans, picked)
}

/// A drive's refusal of a request, kept for `run` to return (the first
/// one); the request completes at once, at `now`.
#[cold]
#[inline(never)]
fn failed(error: &mut Option<SimError>, d: usize, e: mosaic_drives::DriveError, now: u64) -> u64 {
    error.get_or_insert(SimError::Drive { drive: d, message: e.to_string() });
    now
}

/// The pending request of `drive` to dispatch instead of `picked` so
/// ordered programs' writes keep their order (the first one allowed;
/// `picked` itself when allowed, or when the drive has no ordered
/// writes ahead, [`Drive::write_order`]); None when none may go.
fn in_order(drive: &mut Drive, lanes: &Slab<LaneState>, plans: &Slab<(Program, usize)>, picked: usize) -> Option<usize> {
    let Some(&(head, _)) = drive.write_order.front() else { return Some(picked) };
    let allowed = |q: &Queued| {
        let plan = lanes.peek(q.lane).plan;
        !matches!(q.req.kind, ReqKind::Write | ReqKind::ZoneReset) || !plans.peek(plan).0.ordered || plan == head
    };
    let idx = if allowed(&drive.pending[picked]) { picked } else { drive.pending.iter().position(allowed)? };
    let q = drive.pending[idx];
    let is_head_write = matches!(q.req.kind, ReqKind::Write | ReqKind::ZoneReset) && lanes.peek(q.lane).plan == head;
    if is_head_write {
        if let Some(w) = drive.write_order.front_mut() {
            w.1 -= 1;
            if w.1 == 0 {
                drive.write_order.pop_front();
            }
        }
    }
    Some(idx)
}

/// Writes and zone resets `p` sends to each of `n` drives.
fn writes_per_drive(p: &Program, n: usize) -> Vec<usize> {
    let mut w = vec![0usize; n];
    for ph in &p.phases {
        match ph {
            Phase::Write { ops, .. } => ops.iter().for_each(|io| w[io.op.member] += 1),
            Phase::Reset(ops) => ops.iter().for_each(|o| w[o.member] += 1),
            _ => {}
        }
    }
    w
}

/// The longest request the simulator plans (1 GiB): a program's buffers
/// are addressed with 32 bits, and no block trace holds one this long.
pub const MAX_REQUEST: u64 = 1 << 30;

/// A trace request placed on an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fitted {
    pub offset: u64,
    pub len: u64,
    /// Widened to block boundaries.
    pub realigned: bool,
    /// Moved because it ran past the capacity.
    pub wrapped: bool,
}

/// Place a trace request on an array of `cap` bytes with `block`-byte
/// blocks: widen to block boundaries, wrap offsets beyond the capacity.
pub fn fit(r: &Request, block: u64, cap: u64) -> Option<Fitted> {
    if r.len == 0 || cap < block {
        return None;
    }
    let mut start = r.offset / block * block;
    // A request ending within a block of 2^64 ends at the last block
    // boundary below it instead (and covers one block at least).
    let end_byte = r.offset.saturating_add(r.len);
    let mut end = match end_byte.div_ceil(block).checked_mul(block) {
        Some(e) => e,
        None => {
            let last = u64::MAX / block * block;
            start = start.min(last - block);
            last
        }
    };
    let realigned = start != r.offset || end != r.offset.saturating_add(r.len);
    if end - start > cap {
        end = start + cap / block * block;
    }
    let mut wrapped = false;
    if end > cap {
        wrapped = true;
        let len = end - start;
        start = start % cap / block * block;
        end = start + len;
        if end > cap {
            start = cap - len;
            end = cap;
        }
    }
    Some(Fitted { offset: start, len: end - start, realigned, wrapped })
}

impl Simulator<'_> {
    /// Replay `trace` to the end and report.
    pub fn run<E: Into<SimError>>(mut self, trace: impl Iterator<Item = Result<Request, E>>) -> Result<SimReport, SimError> {
        let mut trace = trace.map(|r| r.map_err(Into::into));
        match self.cfg.mode {
            Mode::Open { time_scale } => {
                if !(time_scale.is_finite() && time_scale >= 0.0) {
                    return Err(SimError::Config(format!("time scale must be a non-negative number, got {time_scale}")));
                }
                let mut next = trace.next().transpose()?;
                if let Some(r) = &next {
                    let t = (r.time_ns as f64 * time_scale) as u64;
                    self.push(t, Ev::Arrival);
                }
                while let Some(Event { t, ev, .. }) = self.events.pop() {
                    self.now = t;
                    match ev {
                        Ev::Arrival => {
                            if let Some(r) = next.take() {
                                self.start(&r)?;
                            }
                            next = trace.next().transpose()?;
                            if let Some(r) = &next {
                                let t = ((r.time_ns as f64 * time_scale) as u64).max(self.now);
                                self.push(t, Ev::Arrival);
                            }
                        }
                        Ev::OpDone { drive, lane } => self.op_done(drive as usize, lane as usize),
                        Ev::Idle { generation } => self.on_idle(generation)?,
                    }
                    if let Some(e) = self.error.take() {
                        return Err(e);
                    }
                }
            }
            Mode::Closed { queue_depth } => {
                let mut exhausted = false;
                loop {
                    while !exhausted && self.started - self.completed < queue_depth as u64 {
                        match trace.next().transpose()? {
                            Some(r) => {
                                self.start(&r)?;
                            }
                            None => exhausted = true,
                        }
                    }
                    let Some(Event { t, ev, .. }) = self.events.pop() else { break };
                    // Closed loop has no idle periods: the next request
                    // always arrives at once.
                    self.quiet_step(t, ev)?;
                }
            }
        }
        self.final_flush()?;
        Ok(self.finish())
    }

    /// The flush a real replay ends with (`Volume::flush`), from the moment
    /// the last request or background step completed: the front end's
    /// flush programs (metadata a policy keeps in memory until a flush,
    /// counted on both sides), then a flush of every drive, timed like any
    /// request (IOzone's `-e`).
    fn final_flush(&mut self) -> Result<(), SimError> {
        // The queue is empty: time goes back from the last (idle) event.
        self.now = self.last_done;
        let mut plans = self.fe.flush(self.now, &self.health)?;
        let deferred = self.fe.flush_is_deferred_writes();
        for p in &plans {
            let c = p.counts();
            if deferred {
                self.write_dev_reads += c.device_reads();
                self.write_dev_writes += c.device_writes();
            }
            self.report.ops.merge(&c);
        }
        plans.push(Program { phases: vec![Phase::Flush((0..self.drives.len()).collect())], ..Program::default() });
        for p in plans {
            // In order: the drives' flush after the policy's.
            let n = p.lanes();
            self.bg_inflight += n as u64;
            self.launch(p, n, None);
            self.drain()?;
        }
        Ok(())
    }

    /// Run the queued events to the end; idle periods start nothing.
    fn drain(&mut self) -> Result<(), SimError> {
        while let Some(Event { t, ev, .. }) = self.events.pop() {
            self.quiet_step(t, ev)?;
        }
        Ok(())
    }

    /// One event at `t` where idle periods start nothing: completions only.
    #[inline]
    fn quiet_step(&mut self, t: u64, ev: Ev) -> Result<(), SimError> {
        self.now = t;
        match ev {
            Ev::OpDone { drive, lane } => self.op_done(drive as usize, lane as usize),
            Ev::Idle { .. } => self.idle_pending = false,
            Ev::Arrival => {}
        }
        if self.error.is_none() {
            // Checked first: taking the (large) error moves it out.
            return Ok(());
        }
        self.error.take().map_or(Ok(()), Err)
    }

    fn finish(mut self) -> SimReport {
        let mut r = std::mem::take(&mut self.report);
        let t0 = self.first_arrival.unwrap_or(0);
        let span = self.last_done.saturating_sub(t0);
        r.duration_s = span as f64 / 1e9;
        if span > 0 {
            r.iops = r.requests as f64 / r.duration_s;
            r.mib_per_s = (r.read_bytes + r.write_bytes) as f64 / (1 << 20) as f64 / r.duration_s;
        }
        r.policy = self.fe.stats();
        r.device_reads = r.ops.device_reads();
        r.device_writes = r.ops.device_writes();
        if r.writes > 0 {
            r.device_reads_per_write = self.write_dev_reads as f64 / r.writes as f64;
            r.device_writes_per_write = self.write_dev_writes as f64 / r.writes as f64;
        }
        if self.cfg.keep_latencies {
            // Kept sorted, for CDFs.
            r.read_latency = latency(&mut r.read_latencies_ns);
            r.write_latency = latency(&mut r.write_latencies_ns);
        } else {
            r.read_latency = summarise_unsorted(&mut std::mem::take(&mut r.read_latencies_ns));
            r.write_latency = summarise_unsorted(&mut std::mem::take(&mut r.write_latencies_ns));
        }
        r.devices = self
            .drives
            .into_iter()
            .map(|d| {
                let mut s = d.stats;
                s.utilisation = if span > 0 { s.busy_ns as f64 / span as f64 } else { 0.0 };
                s
            })
            .collect();
        r
    }
}

/// Sorts `v` and summarises it.
fn latency(v: &mut [u64]) -> Latency {
    Latency::of(v)
}

impl Latency {
    /// Sort latencies in nanoseconds and summarise them (a real replay
    /// reports through this too).
    pub fn of(v: &mut [u64]) -> Latency {
        summarise(v)
    }
}

/// [`summarise`] without sorting all of `v` (it is left partly
/// reordered): the same numbers, in linear time.
fn summarise_unsorted(v: &mut [u64]) -> Latency {
    if v.is_empty() {
        return Latency::default();
    }
    let total: u128 = v.iter().map(|&x| x as u128).sum();
    if total >= 1 << 53 {
        // The f64 sum in sorted order may round: take that very path.
        return summarise(v);
    }
    // Below 2^53 every partial sum is exact, in any order.
    let mean_us = total as u64 as f64 / v.len() as f64 / 1e3;
    let last = v.len() - 1;
    let idx = |p: f64| ((last as f64) * p).round() as usize;
    let (i50, i95, i99) = (idx(0.50), idx(0.95), idx(0.99));
    // Each selection leaves everything after its index no smaller, so
    // the next one looks only there.
    let mut nth = |lo: usize, i: usize| -> u64 {
        let (_, x, _) = v[lo..].select_nth_unstable(i - lo);
        *x
    };
    let p50 = nth(0, i50);
    let p95 = nth(i50, i95);
    let p99 = nth(i95, i99);
    let max = nth(i99, last);
    Latency { count: v.len() as u64, mean_us, p50_us: p50 as f64 / 1e3, p95_us: p95 as f64 / 1e3, p99_us: p99 as f64 / 1e3, max_us: max as f64 / 1e3 }
}

fn summarise(v: &mut [u64]) -> Latency {
    if v.is_empty() {
        return Latency::default();
    }
    v.sort_unstable();
    let pct = |p: f64| v[(((v.len() - 1) as f64) * p).round() as usize] as f64 / 1e3;
    Latency {
        count: v.len() as u64,
        mean_us: v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64 / 1e3,
        p50_us: pct(0.50),
        p95_us: pct(0.95),
        p99_us: pct(0.99),
        max_us: *v.last().unwrap() as f64 / 1e3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A request ending within a block of 2^64 (a trace may hold one:
    /// `offset + len` fits, rounding it up to a block does not) is placed,
    /// not a panic: one block or more, inside the capacity.
    #[test]
    fn a_request_ending_just_below_two_to_the_64_fits() {
        let cap = 1 << 30;
        for (offset, len) in [(0, u64::MAX), (u64::MAX - 100, 50), (u64::MAX - 5000, 5000), (1, u64::MAX - 1)] {
            let r = Request { time_ns: 0, op: mosaic_trace::Op::Read, offset, len };
            let f = fit(&r, 4096, cap).unwrap();
            assert!(f.len >= 4096 && f.len % 4096 == 0 && f.offset % 4096 == 0 && f.offset + f.len <= cap, "{offset} {len}: {f:?}");
        }
    }

    #[test]
    fn events_come_out_by_time_then_queueing_order() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut q = Events::default();
        let mut all = vec![];
        for seq in 0..2000u64 {
            let t = rng.gen_range(0..50u64);
            all.push((t, seq));
            q.push(Event { t, seq, ev: Ev::Arrival });
            if seq % 3 == 0 {
                // Interleave pops with pushes, as a replay does.
                let e = q.pop().unwrap();
                let min = *all.iter().min().unwrap();
                assert_eq!((e.t, e.seq), min);
                all.retain(|&x| x != min);
            }
        }
        all.sort();
        let rest: Vec<(u64, u64)> = std::iter::from_fn(|| q.pop()).map(|e| (e.t, e.seq)).collect();
        assert_eq!(rest, all);
    }

    /// Both forms of the queue (sorted while small, a heap once large)
    /// give the order of a full sort, with pops interleaved as a replay
    /// interleaves them, including events earlier than ones popped.
    #[test]
    fn events_stay_in_order_sorted_and_as_a_heap() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for (pending, spread) in [(1usize, 3u64), (9, 1000), (SORTED_MAX, 50), (SORTED_MAX + 1, 50), (300, 20)] {
            let (mut q, mut all, mut seq) = (Events::default(), std::collections::BTreeSet::new(), 0u64);
            let mut floor = 0;
            for step in 0..5000 {
                // Fill up to `pending`, then one push per pop; near the
                // end, drain.
                while step < 4000 && all.len() < pending {
                    seq += 1;
                    // Mostly at or after the last pop, sometimes before.
                    let t = if seq % 7 == 0 { rng.gen_range(0..floor + 1) } else { floor + rng.gen_range(0..spread) };
                    all.insert((t, seq));
                    q.push(Event { t, seq, ev: Ev::Arrival });
                }
                let Some(e) = q.pop() else { break };
                let min = all.pop_first().unwrap();
                assert_eq!((e.t, e.seq), min, "pending {pending}");
                floor = e.t;
            }
            assert!(all.is_empty() && q.pop().is_none());
            assert_eq!(q.heap, pending > SORTED_MAX, "pending {pending}");
        }
    }

    #[test]
    fn unsorted_summary_is_the_sorted_one() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for n in [1usize, 2, 3, 7, 100, 1001, 20_000] {
            let v: Vec<u64> = (0..n).map(|_| rng.gen_range(0..50_000_000u64)).collect();
            let (mut a, mut b) = (v.clone(), v.clone());
            let (x, y) = (summarise(&mut a), summarise_unsorted(&mut b));
            assert_eq!(format!("{x:?}"), format!("{y:?}"), "n={n}");
        }
        // Sums past 2^53 take the sorting path.
        let mut big = vec![u64::MAX / 4; 9];
        assert_eq!(format!("{:?}", summarise(&mut big.clone())), format!("{:?}", summarise_unsorted(&mut big)));
        assert_eq!(summarise_unsorted(&mut []).count, 0);
    }
}
