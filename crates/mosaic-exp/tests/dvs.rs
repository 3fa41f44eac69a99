//! The experiment runner on small workloads: the schemes differ the way
//! their designs say they must, and the experiment's own fixes hold
//! (idle-time GC, saturated throughput, the cache-size effect).

use mosaic_exp::dvs::{run_one, saturated_iops, synthetic, Workload};
use mosaic_sim::{Pattern, Synthetic};

const ZONE: u64 = 4 << 20;

#[test]
fn segment_raid5_rewrites_segments_and_dvs_appends() {
    let w = synthetic("rw-dense", 1500, 5).unwrap();
    let (dvs, _) = run_one("dvs", &w, 10, ZONE).unwrap();
    let (seg, _) = run_one("segment-raid5", &w, 10, ZONE).unwrap();
    let (r5, _) = run_one("raid5", &w, 10, ZONE).unwrap();
    assert_eq!(dvs.requests, 1500);
    // Segment RAID-5 resets (rewrites) zones all the time; HDD RAID-5 never.
    assert!(seg.zone_resets > 100, "{seg:?}");
    assert_eq!(r5.zone_resets, 0);
    // Segment rewrites read whole segments back: more device reads than DVS.
    assert!(seg.device_reads > dvs.device_reads, "{seg:?} {dvs:?}");
    assert!(seg.mean_ms > dvs.mean_ms, "{seg:?} {dvs:?}");
    // Sequential writes: DVS writes full stripes and reads nothing.
    let w = synthetic("seqwrite", 800, 5).unwrap();
    let (dvs, rep) = run_one("dvs", &w, 10, ZONE).unwrap();
    assert_eq!(dvs.device_reads, 0, "{dvs:?}");
    let full = rep.policy.iter().find(|p| p.0 == "full stripes").unwrap().1;
    let partial = rep.policy.iter().find(|p| p.0 == "partial stripes").unwrap().1;
    assert!(full > 3.0 * partial.max(1.0), "full {full} partial {partial}");
}

#[test]
fn dense_updates_make_dvs_collect_garbage_in_idle_time_sparse_writes_do_not() {
    let dense = synthetic("rw-dense", 3000, 1).unwrap();
    let sparse = synthetic("rw-sparse", 3000, 1).unwrap();
    assert!(dense.prefill > 0 && sparse.prefill == 0);
    let (d, rep) = run_one("dvs", &dense, 10, ZONE).unwrap();
    let (s, _) = run_one("dvs", &sparse, 10, ZONE).unwrap();
    // Dense: SSGs fill with garbage, and the idle gaps between bursts are
    // where it is collected: every reset is an idle-time one.
    assert!(d.zone_resets > 0, "{d:?}");
    assert_eq!(d.idle_resets, d.zone_resets, "{d:?}");
    let bg = rep.policy.iter().find(|p| p.0 == "background gc").unwrap().1;
    assert!(bg > 0.0);
    // Sparse: 3,000 writes over 32 GiB never fill a segment.
    assert_eq!(s.zone_resets, 0, "{s:?}");
}

#[test]
fn sblock_logs_wrap_and_clean_on_the_dense_workload() {
    let w = synthetic("rw-dense", 20_000, 1).unwrap();
    let (sb, _) = run_one("sblock-raid5", &w, 10, ZONE).unwrap();
    assert!(sb.zone_resets > 0, "the S-block logs never wrapped: {sb:?}");
    let w = synthetic("rw-sparse", 3000, 1).unwrap();
    let (sb, _) = run_one("sblock-raid5", &w, 10, ZONE).unwrap();
    assert_eq!(sb.zone_resets, 0, "{sb:?}");
}

#[test]
fn saturated_throughput_flags_unbounded_queues() {
    let w = synthetic("rw-dense", 1500, 1).unwrap();
    let offered = w.offered_iops();
    let seg = saturated_iops("segment-raid5", &w, 10, ZONE).unwrap().unwrap();
    let r5 = saturated_iops("raid5", &w, 10, ZONE).unwrap().unwrap();
    // Segment RAID-5 rewrites a segment per small write: below the offered
    // rate.  HDD RAID-5's read-modify-write keeps up.
    assert!(seg < offered && r5 > offered, "seg {seg} raid5 {r5} offered {offered}");
    // Open loop, the saturated scheme's queue grows for the whole run (its
    // p99 is a large part of the run), the other's does not.
    let span = (w.reqs.last().unwrap().time_ns - w.reqs[0].time_ns) as f64 / 1e6;
    let (mut s, _) = run_one("segment-raid5", &w, 10, ZONE).unwrap();
    let (mut r, _) = run_one("raid5", &w, 10, ZONE).unwrap();
    (s.sat_iops, r.sat_iops) = (Some(seg), Some(r5));
    assert!(s.saturated() && !r.saturated());
    assert!(s.p99_ms > span / 10.0 && r.p99_ms < span / 100.0, "seg p99 {} raid5 p99 {} span {span}", s.p99_ms, r.p99_ms);
}

#[test]
fn hdd_raid5_reads_do_not_wait_longer_behind_a_bigger_cache() {
    // 30% reads, 4 KiB, over 256 MiB of aged data, one request every 5 ms:
    // writes arrive a little faster than RAID-5 destages them, so read
    // misses queue behind destage work.  With background destage unbounded
    // (every write over the high-water mark queued another batch) the read
    // mean grew with the cache, 37 -> 91 -> 418 ms; bounded, it falls.
    let s = Synthetic { pattern: Pattern::Mixed { read_pct: 30 }, size: 4096, count: 4000, footprint: 256 << 20, seed: 1, interval_ns: 5_000_000 };
    let w = Workload { name: "mixed".into(), reqs: s.requests().map(|r| r.unwrap()).collect(), prefill: 256 << 20, spread: 1 };
    let reads: Vec<f64> = [5, 20, 50].iter().map(|&c| run_one("raid5", &w, c, ZONE).unwrap().0.read_mean_ms).collect();
    for p in reads.windows(2) {
        assert!(p[1] <= p[0] * 1.05, "read latency rose with the cache: {reads:?}");
    }
}
