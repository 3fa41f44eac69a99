//! `mosaic serve --adapt-every SECS`: the adaptive layout as a periodic
//! job inside the server, on a remapped array, while clients keep reading
//! and writing.
//!
//! ```text
//!   every SECS:  ring.take_since(cursor) ── the requests served since the last round
//!                  └─ at least --adapt-min-requests?  plan (adapt_job::plan_txns,
//!                     as `mosaic adapt`) ─> migrate: one batch per step, the
//!                     policy lock released between batches (clients go first),
//!                     paced by --adapt-rate; paused while the array is degraded;
//!                     a progress bar on a terminal, a log line per round
//!   stop flag (the server stopping) ends a round between batches
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Result;

use mosaic_adapt::monitor::Ring;
use mosaic_volume::Volume;

use crate::adapt_job::{self, PlanOpts};

/// The job's settings.
#[derive(Clone, Debug)]
pub struct Every {
    pub every: Duration,
    pub opts: PlanOpts,
    /// Migration budget, bytes/s (0: unlimited).
    pub rate: u64,
    /// Rounds with fewer new requests plan nothing.
    pub min_requests: usize,
}

/// What the job did over the server's life.
#[derive(Debug, Default)]
pub struct Done {
    pub rounds: u64,
    pub bytes: u64,
    pub moves: u64,
    pub lost: u64,
}

/// Start the job; it returns when `stop` is set.
pub fn spawn(vol: Arc<dyn Volume>, ring: Arc<Ring>, cfg: Every, stop: Arc<AtomicBool>) -> JoinHandle<Result<Done>> {
    std::thread::spawn(move || {
        let mut done = Done::default();
        let mut cursor = ring.pushed();
        while !wait(cfg.every, &stop) {
            let t = ring.take_since(cursor);
            cursor = t.next;
            done.lost += t.lost;
            if t.requests.len() < cfg.min_requests {
                continue;
            }
            round(vol.as_ref(), &t.requests, &cfg, &stop, &mut done)?;
        }
        Ok(done)
    })
}

/// Wait `d`, looking at `stop` every 50 ms (or when unparked: the
/// server's stop unparks this thread); whether `stop` was set.
fn wait(d: Duration, stop: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::park_timeout(Duration::from_millis(50).min(end.saturating_duration_since(Instant::now())));
    }
    stop.load(Ordering::Relaxed)
}

/// One round: plan on `reqs`, migrate.
fn round(vol: &dyn Volume, reqs: &[mosaic_trace::Request], cfg: &Every, stop: &AtomicBool, done: &mut Done) -> Result<()> {
    let Some(remap) = vol.as_remap() else { return Ok(()) };
    let plan = adapt_job::plan(remap, reqs, &cfg.opts)?;
    done.rounds += 1;
    if plan.target.moves.is_empty() {
        return Ok(());
    }
    remap.set_rate(cfg.rate);
    tracing::info!(
        "mosaic serve: adapt: {} requests, conflicts {} -> {}: moving {} units ({})",
        reqs.len(),
        plan.target.conflicts_before,
        plan.target.conflicts_after,
        plan.target.moves.len(),
        crate::util::human(plan.target.bytes())
    );
    // A progress bar on a terminal (indicatif hides it otherwise).
    let bar = crate::util::progress(plan.target.bytes().max(1), "adapt");
    let m = adapt_job::migrate(remap, &plan, &|done, total| {
        bar.set_length(total.max(1));
        bar.set_position(done);
    }, &|| stop.load(Ordering::Relaxed))?;
    bar.finish_and_clear();
    done.bytes += m.bytes;
    done.moves += m.moves;
    let why = if m.paused { ", paused: the array is degraded" } else { "" };
    tracing::info!("mosaic serve: adapt: moved {} units, {} in {:.1} s, {} left{why}", m.moves, crate::util::human(m.bytes), m.seconds, m.left);
    Ok(())
}

/// Where `serve` leaves the monitor ring of a remapped array when it
/// stops, and where `mosaic adapt` looks without `--trace`.
pub const MONITOR_FILE: &str = "monitor.trace";

/// Write the ring's requests (the newest it kept) to `DIR/monitor.trace`
/// as an MSR trace, replacing the previous one; the count.
pub fn save_ring(dir: &std::path::Path, ring: &Ring) -> Result<usize> {
    let reqs = ring.snapshot();
    let path = dir.join(MONITOR_FILE);
    let tmp = dir.join(format!("{MONITOR_FILE}.tmp"));
    let f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    let mut f = mosaic_trace::write_msr(f, &reqs)?;
    std::io::Write::flush(&mut f)?;
    f.get_ref().sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(reqs.len())
}
