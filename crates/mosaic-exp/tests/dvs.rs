//! The experiment runner on small workloads: the schemes differ the way
//! their designs say they must.

use mosaic_exp::dvs::{run_one, synthetic};

#[test]
fn segment_raid5_rewrites_segments_and_dvs_appends() {
    let w = synthetic("randwrite", 1500, 5);
    let (dvs, _) = run_one("dvs", &w, 10, 4 << 20).unwrap();
    let (seg, _) = run_one("segment-raid5", &w, 10, 4 << 20).unwrap();
    let (r5, _) = run_one("raid5", &w, 10, 4 << 20).unwrap();
    assert_eq!(dvs.requests, 1500);
    // Segment RAID-5 resets (rewrites) zones all the time; HDD RAID-5 never.
    assert!(seg.zone_resets > 100, "{seg:?}");
    assert_eq!(r5.zone_resets, 0);
    // Segment rewrites read whole segments back: more device reads than DVS.
    assert!(seg.device_reads > dvs.device_reads, "{seg:?} {dvs:?}");
    assert!(seg.mean_ms > dvs.mean_ms, "{seg:?} {dvs:?}");
    // Sequential writes: DVS writes full stripes and reads nothing.
    let w = synthetic("seqwrite", 800, 5);
    let (dvs, rep) = run_one("dvs", &w, 10, 4 << 20).unwrap();
    assert_eq!(dvs.device_reads, 0, "{dvs:?}");
    let full = rep.policy.iter().find(|p| p.0 == "full stripes").unwrap().1;
    let partial = rep.policy.iter().find(|p| p.0 == "partial stripes").unwrap().1;
    assert!(full > 3.0 * partial.max(1.0), "full {full} partial {partial}");
}
