//! `mosaic replay --on ARRAY`: a trace (or synthetic workload) replayed on
//! a real array, closed loop at `--queue-depth`, reported in the same JSON
//! schema as a simulated replay so the two can be compared member by
//! member (`mosaic_volume::replay` runs it; `mosaic_sim::fit` places each
//! request exactly as the simulator does).

use anyhow::{anyhow, bail, Result};

use mosaic_sim::{DeviceStats, Latency, SimReport};
use mosaic_trace::{Op, Request};
use mosaic_volume::replay::{self, Req, RunStats};
use mosaic_volume::{Volume, VolumeError};

use crate::cmd_sim::ReplayArgs;

/// Open the array of `--on` (behind `--cache` when given) and replay.
pub fn run(a: &ReplayArgs, spec: &str) -> Result<SimReport> {
    if a.compare.is_some() {
        bail!("--on replays on one real array; --compare is for simulated layouts");
    }
    if !a.write_mostly.is_empty() {
        bail!("--on replays on a real array, whose write-mostly members are its own (mosaic write-mostly); --write-mostly is for simulated layouts");
    }
    mosaic_volume::refuse_part_of(spec)?;
    let vol: Box<dyn Volume> = match a.cache.as_deref() {
        None => mosaic_volume::open(spec, true)?,
        Some(name) if name.contains(',') => bail!("--on takes one --cache policy, not a list"),
        Some(name) => mosaic_volume::open_cached(spec, true, crate::cmd_sim::cache_config(a, name)?)?,
    };
    for w in vol.warnings() {
        eprintln!("warning: {w}");
    }
    // As the simulator's replay of a cache ends (`--keep-cache`).
    let destage = a.cache.is_some() && !a.keep_cache;
    let (block, cap) = (vol.block_size(), vol.capacity());
    let (mut realigned, mut wrapped) = (0u64, 0u64);
    let mut place = |r: Request| -> Option<Req> {
        let f = mosaic_sim::engine::fit(&r, block, cap)?;
        realigned += f.realigned as u64;
        wrapped += f.wrapped as u64;
        Some(Req { write: r.op == Op::Write, offset: f.offset, len: f.len })
    };
    // A bar over the trace file's bytes, or the synthetic requests' bytes.
    let pb = crate::util::progress(0, "replay");
    let stats = match (&a.synthetic, &a.input.trace) {
        (Some(kind), _) => {
            let syn = crate::cmd_sim::synthetic_for(a, kind, cap, block)?;
            pb.set_length(syn.count.saturating_mul(syn.size));
            let reqs = syn.requests().inspect(|_| pb.inc(syn.size)).filter_map(|r| r.ok()).filter_map(&mut place).map(Ok);
            replay::run(vol.as_ref(), reqs, a.queue_depth, destage)?
        }
        (None, Some(path)) => {
            let mut reader = a.input.open_with_bar(path, &pb)?;
            let reqs = reader.by_ref().filter_map(|r| match r {
                Ok(r) => place(r).map(Ok),
                Err(e) => Some(Err(VolumeError::Usage(e.to_string()))),
            });
            let stats = replay::run(vol.as_ref(), reqs, a.queue_depth, destage)?;
            crate::cmd_sim::TraceInput::warn_skipped(path, &reader);
            stats
        }
        (None, None) => bail!("give --trace FILE or --synthetic KIND"),
    };
    pb.finish_and_clear();
    let mut rep = report(vol.as_ref(), stats);
    rep.realigned = realigned;
    rep.wrapped = wrapped;
    vol.close().map_err(|e| anyhow!(e))?;
    Ok(rep)
}

/// A simulator-shaped report of a real run.
fn report(vol: &dyn Volume, mut s: RunStats) -> SimReport {
    let info = vol.info();
    let c = &s.counters;
    let secs = s.elapsed.as_secs_f64().max(1e-9);
    let requests = s.reads + s.writes;
    let per_write = |n: u64| if s.writes > 0 { n as f64 / s.writes as f64 } else { 0.0 };
    SimReport {
        layout: format!("{} (real: {})", info.level, info.kind),
        requests,
        reads: s.reads,
        writes: s.writes,
        read_bytes: s.read_bytes,
        write_bytes: s.write_bytes,
        device_reads: c.device_reads,
        device_writes: c.device_writes,
        duration_s: secs,
        iops: requests as f64 / secs,
        mib_per_s: (s.read_bytes + s.write_bytes) as f64 / (1 << 20) as f64 / secs,
        read_latency: Latency::of(&mut s.read_latencies_ns),
        write_latency: Latency::of(&mut s.write_latencies_ns),
        device_reads_per_write: per_write(s.write_device_reads),
        device_writes_per_write: per_write(s.write_device_writes),
        ops: c.ops.unwrap_or_default(),
        devices: c
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| DeviceStats {
                index: i,
                model: info.members.get(i).map(|x| x.path.clone()).unwrap_or_default(),
                reads: m.reads,
                writes: m.writes,
                read_bytes: m.read_bytes,
                write_bytes: m.write_bytes,
                busy_ns: 0,
                utilisation: 0.0,
            })
            .collect(),
        ..SimReport::default()
    }
}
