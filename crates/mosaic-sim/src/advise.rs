//! Placement-aware stripe-unit estimates.
//!
//! The analytical model (mosaic-model) assumes writes spread evenly over the
//! drives.  Real traces have hot regions: with a large stripe unit, nearby
//! writes land on the same few drives.  This estimate keeps the model's
//! per-operation costs (each device operation costs the drive's isolated
//! random service time) but runs every write of the trace through the real
//! planner and adds up the time each drive is busy (per transfer the
//! executors issue: a member's contiguous pieces merged).  Load must balance not
//! only over the whole trace but among the requests in flight together, so
//! the trace is cut into windows of `window` consecutive writes (the queue
//! depth): a window finishes when its busiest drive does.
//!
//! ```text
//!   throughput(u) = bytes written / Σ over windows of max over drives of Σ service(op)
//! ```
//!
//! No queueing is simulated, so it is cheap enough to try every candidate.

use serde::Serialize;

use mosaic_core::{Dir, FixedLayout, Geometry, Health, Layout, Level};
use mosaic_drives::{DriveModel, ReqKind};
use mosaic_trace::{Op, Request};

use crate::engine::fit;
use crate::SimError;

/// One candidate unit's estimate.
#[derive(Debug, Clone, Serialize)]
pub struct UnitEstimate {
    pub unit: u64,
    pub throughput_bytes_per_s: f64,
    /// Sum over windows of the busiest drive's busy time, seconds.
    pub busiest_drive_s: f64,
    /// Mean busy time over drives, seconds (busiest / mean = imbalance).
    pub mean_drive_s: f64,
    pub rmw_stripes: u64,
    pub rcw_stripes: u64,
    pub fsw_stripes: u64,
}

/// Estimate random-write throughput of `writes` for each candidate unit.
pub fn estimate_units(level: Level, n: usize, block: u64, drive: &dyn DriveModel, writes: &[Request], candidates: &[u64], window: usize) -> Result<Vec<UnitEstimate>, SimError> {
    let window = window.max(1);
    let cap = drive.capacity();
    let h = Health::all_active(n);
    let mut out = Vec::new();
    for &u in candidates {
        let layout = FixedLayout::new(Geometry::new(level, n, u, block, cap)?)?;
        let mut busy = vec![0.0f64; n];
        let mut total = 0.0f64;
        let mut critical = 0.0f64;
        let mut in_window = 0;
        let mut bytes = 0u64;
        let (mut rmw, mut rcw, mut fsw) = (0, 0, 0);
        for w in writes.iter().filter(|w| w.op == Op::Write) {
            if in_window == window {
                critical += busy.iter().cloned().fold(0.0, f64::max);
                total += busy.iter().sum::<f64>();
                busy.iter_mut().for_each(|b| *b = 0.0);
                in_window = 0;
            }
            in_window += 1;
            let Some(f) = fit(w, block, layout.capacity()) else { continue };
            // The program's transfers, contiguous ones on a member merged
            // as the executors issue them.
            let prog = layout.io_program(true, f.offset, f.len, &h)?;
            bytes += f.len;
            for (dir, ios) in prog.io() {
                let kind = if dir == Dir::Read { ReqKind::Read } else { ReqKind::Write };
                for io in ios {
                    busy[io.op.member] += drive.random_service_ns(kind, io.op.len);
                }
            }
            let c = prog.counts();
            rmw += c.stripes_rmw;
            rcw += c.stripes_rcw;
            fsw += c.stripes_fsw;
        }
        critical += busy.iter().cloned().fold(0.0, f64::max);
        total += busy.iter().sum::<f64>();
        let max = critical / 1e9;
        let mean = total / n as f64 / 1e9;
        out.push(UnitEstimate {
            unit: u,
            throughput_bytes_per_s: if max > 0.0 { bytes as f64 / max } else { 0.0 },
            busiest_drive_s: max,
            mean_drive_s: mean,
            rmw_stripes: rmw,
            rcw_stripes: rcw,
            fsw_stripes: fsw,
        });
    }
    Ok(out)
}

/// The candidate with the highest estimate.
pub fn best_unit(est: &[UnitEstimate]) -> Option<u64> {
    est.iter().max_by(|a, b| a.throughput_bytes_per_s.total_cmp(&b.throughput_bytes_per_s)).map(|e| e.unit)
}
