//! The adaptive layout on a real remapped array: requests to
//! transactions, transactions to a correlation graph, the graph to moves
//! (`mosaic_adapt::target`), the moves predicted on drive models and
//! carried out through the array's migration protocol.  `mosaic adapt`
//! and the periodic job of `mosaic serve --adapt-every` share it.
//!
//! ```text
//!   requests (trace file, or serve's monitor ring)
//!     -> Transactions (unit = the remap unit, window, size cap)
//!     -> MBC graph, cut at the threshold
//!     -> target: plan from the current placement (W = a drive's slots),
//!        assign colours to drives, moves best first, cut at --max-move
//!     -> dry run: bytes, conflicts before/after, simulator's prediction
//!     -> migrate: set_target, step until done (budget: --rate)
//! ```

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

use mosaic_adapt::{correlate, Target, TargetInput, Txn, TxnConfig, Vertex};
use mosaic_core::{FixedLayout, Frontend, Health};
use mosaic_drives::DriveModel;
use mosaic_remap::RemapPolicy;
use mosaic_sim::nested::ArrayDrive;
use mosaic_sim::{Mode, SimConfig, Simulator};
use mosaic_trace::Request;
use mosaic_volume::RemapVolume;

/// How to plan.
#[derive(Clone, Debug, Serialize)]
pub struct PlanOpts {
    /// Keep edges of at least this weight (the paper's correlation threshold).
    pub threshold: u64,
    /// Arrivals within this many ns join one transaction.
    pub window_ns: u64,
    /// Largest transaction in units (pairs grow as m^2).
    pub max_units: usize,
    /// Most bytes to move (None: all the plan wants).
    pub max_move: Option<u64>,
    /// MBC threads.
    pub threads: usize,
}

/// A plan for the array.
#[derive(Debug, Serialize)]
pub struct AdaptPlan {
    pub requests: usize,
    pub transactions: usize,
    pub vertices: usize,
    pub edges: usize,
    /// Units the requests named beyond the capacity (ignored).
    pub beyond_capacity: usize,
    pub target: Target,
    /// Moves the plan wanted before --max-move cut it.
    pub wanted_moves: usize,
    pub wanted_bytes: u64,
}

/// Plan moves for `vol` from `reqs`.
pub fn plan(vol: &RemapVolume, reqs: &[Request], o: &PlanOpts) -> Result<AdaptPlan> {
    let unit = vol.blob().config.unit;
    let tc = TxnConfig::new(unit, o.window_ns, o.max_units);
    let (txns, _) = mosaic_adapt::txn::transactions(tc, reqs.iter().copied()).map_err(|e| anyhow!("transactions: {e}"))?;
    plan_txns(vol, reqs.len(), &txns, o)
}

/// Plan moves for `vol` from transactions.
pub fn plan_txns(vol: &RemapVolume, requests: usize, txns: &[Txn], o: &PlanOpts) -> Result<AdaptPlan> {
    let lay = vol.layout().ok_or_else(|| anyhow!("the array's map could not be read back: reopen it"))?;
    let unit = lay.unit;
    let full = correlate::mbc(txns, o.threads.max(1)).at_least(o.threshold.max(1));
    // Every vertex's drive under one look at the map (None: beyond the capacity).
    let drives_of: Vec<(Vertex, Option<usize>)> = vol
        .with_policy(|p| full.vertices().map(|v| (v, p.placement(v).map(|(c, _)| p.layout().columns[c]))).collect())
        .ok_or_else(|| anyhow!("the array's map could not be read back: reopen it"))?;
    let beyond = drives_of.iter().filter(|(_, d)| d.is_none()).count();
    let current: HashMap<Vertex, usize> = drives_of.into_iter().filter_map(|(v, d)| Some((v, d?))).collect();
    let graph = if beyond > 0 { restrict(&full, &current) } else { full };
    let drives = vol.inner().geometry().members;
    let mut base: Vec<u64> = vol.drive_fill().iter().map(|n| n * unit).collect();
    for &d in current.values() {
        base[d] = base[d].saturating_sub(unit);
    }
    // Drives holding no data (raid4's parity) get no room.
    let cap = lay.slots * unit;
    for (d, b) in base.iter_mut().enumerate() {
        if lay.column_of_drive(d).is_none() {
            *b = cap;
        }
    }
    let input = TargetInput { graph: &graph, current: &current, base, drives, capacity: cap };
    let mut target = mosaic_adapt::target(&input, |_| unit).map_err(|e| anyhow!("planning: {e}"))?;
    let (wanted_moves, wanted_bytes) = (target.moves.len(), target.bytes());
    if let Some(m) = o.max_move {
        target.truncate_bytes(m);
    }
    Ok(AdaptPlan { requests, transactions: txns.len(), vertices: graph.vertex_count(), edges: graph.edge_count(), beyond_capacity: beyond, target, wanted_moves, wanted_bytes })
}

/// The graph without vertices outside `keep`.
fn restrict(g: &mosaic_adapt::Graph, keep: &HashMap<Vertex, usize>) -> mosaic_adapt::Graph {
    let mut out = mosaic_adapt::Graph::new();
    for (a, b, w) in g.edges() {
        if keep.contains_key(&a) && keep.contains_key(&b) {
            out.add(a, b, w);
        }
    }
    out
}

/// Mean response times (ms) of replaying `reqs` on drive models of
/// `model`, before and after the plan's moves.
#[derive(Debug, Serialize)]
pub struct Prediction {
    pub model: String,
    pub before_ms: f64,
    pub after_ms: f64,
    /// before / after - 1.
    pub gain: f64,
}

/// Replay `reqs` on the array's layout over `model` drives, as it is now
/// and with the plan's moves made.
pub fn predict(vol: &RemapVolume, plan: &AdaptPlan, reqs: &[Request], model: &str) -> Result<Prediction> {
    let blob = vol.blob();
    let moved: Vec<(u64, usize)> = vol.with_policy(|p| p.moved().iter().map(|(&l, &(c, _))| (l, c)).collect()).ok_or_else(|| anyhow!("no map"))?;
    let lay = vol.layout().ok_or_else(|| anyhow!("no map"))?;
    let planned: Vec<(u64, usize)> = plan.target.moves.iter().filter_map(|m| Some((m.vertex, lay.column_of_drive(m.to)?))).collect();
    let before = replay(blob, &moved, &[], reqs, model)?;
    let after = replay(blob, &moved, &planned, reqs, model)?;
    Ok(Prediction { model: model.into(), before_ms: before, after_ms: after, gain: if after > 0.0 { before / after - 1.0 } else { 0.0 } })
}

/// A simulated copy of the array with `moved` then `extra` applied (as
/// (unit, column)), `reqs` replayed at their times: mean response ms.
fn replay(blob: &mosaic_volume::remap::RemapBlob, moved: &[(u64, usize)], extra: &[(u64, usize)], reqs: &[Request], model: &str) -> Result<f64> {
    let batch = (mosaic_remap::MAX_STAGING / blob.config.unit).clamp(1, 4096) as u32;
    let cfg = mosaic_remap::RemapConfig { batch_units: batch, budget_bytes_per_s: 0, ..blob.config.clone() };
    let (mut pol, _) = RemapPolicy::format(cfg, blob.geometry.clone()).map_err(|e| anyhow!("{e}"))?;
    for t in [moved, extra] {
        pol.set_target(t.to_vec()).map_err(|e| anyhow!("{e}"))?;
        while !pol.idle(0, &Health::all_active(1)).map_err(|e| anyhow!("{e}"))?.is_empty() {}
    }
    let spec = mosaic_drives::preset(model).map_err(|e| anyhow!("--model {model}: {e}"))?;
    let inner = blob.geometry.inner.clone();
    let drives: Vec<Box<dyn DriveModel>> = (0..inner.members).map(|_| spec.build(Some(inner.member_data_bytes()))).collect();
    let array = ArrayDrive::new(FixedLayout::new(inner).map_err(|e| anyhow!("{e}"))?, drives).map_err(|e| anyhow!(e))?;
    let t0 = reqs.first().map(|r| r.time_ns).unwrap_or(0);
    let sc = SimConfig { mode: Mode::Open { time_scale: 1.0 }, ..SimConfig::default() };
    let sim = Simulator::with_frontend(Box::new(pol), vec![Box::new(array)], sc).map_err(|e| anyhow!("{e}"))?;
    let r = sim.run(reqs.iter().map(|r| Ok::<_, std::convert::Infallible>(Request { time_ns: r.time_ns.saturating_sub(t0), ..*r }))).map_err(|e| anyhow!("{e}"))?;
    let (nr, nw) = (r.read_latency.count as f64, r.write_latency.count as f64);
    Ok(if nr + nw > 0.0 { (r.read_latency.mean_us * nr + r.write_latency.mean_us * nw) / (nr + nw) / 1e3 } else { 0.0 })
}

/// What a migration did.
#[derive(Debug, Default, Serialize)]
pub struct Migrated {
    pub bytes: u64,
    pub moves: u64,
    pub seconds: f64,
    /// Moves still queued (blocked for room, or paused).
    pub left: u64,
    pub paused: bool,
}

/// Queue the plan's moves and carry them out, calling `progress(bytes
/// done, bytes planned)`; returns when all are done, when movement is
/// paused (degraded: `paused`), blocked, or `stop()` says so.
pub fn migrate(vol: &RemapVolume, plan: &AdaptPlan, progress: &dyn Fn(u64, u64), stop: &dyn Fn() -> bool) -> Result<Migrated> {
    let moves: Vec<(u64, usize)> = plan.target.moves.iter().map(|m| (m.vertex, m.to)).collect();
    let queued = vol.set_target(&moves)?;
    let total = queued as u64 * vol.blob().config.unit;
    let start = std::time::Instant::now();
    let before = vol.stats().map(|s| s.moves).unwrap_or(0);
    let mut done = 0u64;
    let mut idle_rounds = 0u32;
    while !stop() {
        let b = vol.step()?;
        done += b;
        progress(done, total);
        let st = vol.stats().ok_or_else(|| anyhow!("the map could not be read back: reopen the array"))?;
        if st.pending_moves == 0 {
            break;
        }
        if b > 0 {
            idle_rounds = 0;
            continue;
        }
        if vol.degraded() {
            return Ok(Migrated { bytes: done, moves: st.moves - before, seconds: start.elapsed().as_secs_f64(), left: st.pending_moves, paused: true });
        }
        // Out of budget (waits) or blocked for room (gives up after ~1 s).
        idle_rounds += 1;
        if st.moves_blocked == st.pending_moves && idle_rounds > 100 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = vol.stats().unwrap_or_default();
    Ok(Migrated { bytes: done, moves: st.moves - before, seconds: start.elapsed().as_secs_f64(), left: st.pending_moves, paused: false })
}

/// `N`, `N%` (of `capacity`) or a size (`64M`).
pub fn parse_max_move(s: &str, capacity: u64) -> Result<u64> {
    if let Some(p) = s.strip_suffix('%') {
        let f: f64 = p.trim().parse().map_err(|_| anyhow!("--max-move {s:?}: expected BYTES or PERCENT%"))?;
        if !(0.0..=100.0).contains(&f) {
            bail!("--max-move {s:?}: a percentage from 0 to 100");
        }
        return Ok((capacity as f64 * f / 100.0) as u64);
    }
    crate::util::size(s).map_err(|e| anyhow!("--max-move {s:?}: {e}"))
}
