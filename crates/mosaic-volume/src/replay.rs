//! Replaying requests on a real volume, closed loop.
//!
//! ```text
//!   requests ──> queue_depth threads, each: take the next request, run it
//!                on the volume (reads into a buffer, writes of a seeded
//!                pattern), record its latency ──> RunStats
//! ```
//!
//! This is the real-array half of `mosaic replay --on ARRAY`: the same
//! trace, fitted to the array the same way, replayed on modelled drives by
//! `mosaic-sim` must give the same per-member operation counts and bytes at
//! queue depth 1 (the project's central invariant).  Trace timestamps are
//! ignored: the loop keeps `queue_depth` requests outstanding.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{IoCounters, Result, Volume, VolumeError};

/// One request, already placed on the volume (aligned, within capacity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Req {
    pub write: bool,
    pub offset: u64,
    pub len: u64,
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct RunStats {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_latencies_ns: Vec<u64>,
    pub write_latencies_ns: Vec<u64>,
    pub elapsed: Duration,
    /// Device reads and writes made while a write was the request in
    /// flight (exact at queue depth 1; at larger depths concurrent reads'
    /// operations count too).
    pub write_device_reads: u64,
    pub write_device_writes: u64,
    /// The volume's counters over the run (reset at its start).
    pub counters: IoCounters,
}

/// The shared request source of the worker threads.
struct Source<I> {
    reqs: I,
    failed: Option<VolumeError>,
}

/// Run `reqs` on `vol` with `queue_depth` requests outstanding, after
/// resetting its counters, then (with `destage`) destage its cache, then
/// flush; the first error (a request the volume refused, or one the
/// source gives) stops the run.
pub fn run<I>(vol: &dyn Volume, reqs: I, queue_depth: usize, destage: bool) -> Result<RunStats>
where
    I: Iterator<Item = Result<Req>> + Send,
{
    vol.reset_counters();
    let src = Mutex::new(Source { reqs, failed: None });
    let t0 = Instant::now();
    let parts: Vec<RunStats> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..queue_depth.max(1)).map(|_| s.spawn(|| worker(vol, &src, queue_depth <= 1))).collect();
        workers.into_iter().map(|w| w.join().unwrap_or_default()).collect()
    });
    if let Some(e) = src.into_inner().unwrap_or_else(|e| e.into_inner()).failed {
        return Err(e);
    }
    // The run ends with a flush, timed and counted, as the simulator's
    // replay ends with the front end's flush (a cache's destage first).
    let before = vol.io_counters();
    if destage {
        vol.destage()?;
    }
    let after = vol.io_counters();
    vol.flush()?;
    let elapsed = t0.elapsed();
    let mut out = RunStats { elapsed, counters: vol.io_counters(), ..RunStats::default() };
    // The destage is the writes' deferred work (as the simulator counts it).
    out.write_device_reads = after.device_reads - before.device_reads;
    out.write_device_writes = after.device_writes - before.device_writes;
    for p in parts {
        out.reads += p.reads;
        out.writes += p.writes;
        out.read_bytes += p.read_bytes;
        out.write_bytes += p.write_bytes;
        out.write_device_reads += p.write_device_reads;
        out.write_device_writes += p.write_device_writes;
        out.read_latencies_ns.extend(p.read_latencies_ns);
        out.write_latencies_ns.extend(p.write_latencies_ns);
    }
    if queue_depth > 1 {
        // Without per-request attribution, all device work counts.
        out.write_device_reads = out.counters.device_reads;
        out.write_device_writes = out.counters.device_writes;
    }
    Ok(out)
}

/// Take the next request; None at the end or after an error.
fn next<I: Iterator<Item = Result<Req>>>(src: &Mutex<Source<I>>) -> Option<Req> {
    let mut s = src.lock().unwrap_or_else(|e| e.into_inner());
    if s.failed.is_some() {
        return None;
    }
    match s.reqs.next()? {
        Ok(r) => Some(r),
        Err(e) => {
            s.failed = Some(e);
            None
        }
    }
}

/// One worker: run requests until the source is done.  `attribute`:
/// snapshot the counters around each write (queue depth 1).
fn worker<I: Iterator<Item = Result<Req>>>(vol: &dyn Volume, src: &Mutex<Source<I>>, attribute: bool) -> RunStats {
    let mut st = RunStats::default();
    let (mut pattern, mut rbuf): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
    while let Some(r) = next(src) {
        let n = r.len as usize;
        if r.write && pattern.len() < n {
            pattern = (0..n).map(|i| (i as u8).wrapping_mul(151) ^ 0x5a).collect();
        }
        if !r.write && rbuf.len() < n {
            rbuf.resize(n, 0);
        }
        let before = (attribute && r.write).then(|| vol.io_counters());
        let t = Instant::now();
        let res = if r.write { vol.write(r.offset, &pattern[..n]) } else { vol.read(r.offset, &mut rbuf[..n]) };
        let ns = t.elapsed().as_nanos() as u64;
        if let Err(e) = res {
            let mut s = src.lock().unwrap_or_else(|e| e.into_inner());
            s.failed.get_or_insert(VolumeError::Usage(format!("request at {} ({} bytes): {e}", r.offset, r.len)));
            break;
        }
        if r.write {
            st.writes += 1;
            st.write_bytes += r.len;
            st.write_latencies_ns.push(ns);
            if let Some(b) = before {
                let a = vol.io_counters();
                st.write_device_reads += a.device_reads - b.device_reads;
                st.write_device_writes += a.device_writes - b.device_writes;
            }
        } else {
            st.reads += 1;
            st.read_bytes += r.len;
            st.read_latencies_ns.push(ns);
        }
    }
    st
}
