//! The write-run coalescer.

use mosaic_tier::run::{
    coalesce, BlockRequest, Coalescer, RunConfig, RunError, WriteRun, DEFAULT_WINDOW_NS,
};

const MS: u64 = 1_000_000;

fn rq(time_ns: u64, offset: u64, len: u64, stream: Option<u64>) -> BlockRequest {
    BlockRequest {
        time_ns,
        offset,
        len,
        stream,
    }
}

/// (stream, offset, len, requests) of each run.
fn runs(v: &[WriteRun]) -> Vec<(Option<u64>, u64, u64, u64)> {
    v.iter()
        .map(|r| (r.stream, r.offset, r.len, r.requests))
        .collect()
}

#[test]
fn default_window_is_10ms() {
    assert_eq!(DEFAULT_WINDOW_NS, 10 * MS);
    assert_eq!(RunConfig::default().window_ns, 10 * MS);
}

#[test]
fn sequential_requests_within_window_join() {
    let out = coalesce(
        RunConfig::default(),
        [
            rq(0, 100, 8, Some(1)),
            rq(MS, 108, 8, Some(1)),
            rq(11 * MS, 116, 4, Some(1)),
        ],
    )
    .unwrap();
    assert_eq!(runs(&out), vec![(Some(1), 100, 20, 3)]);
    assert_eq!((out[0].start_ns, out[0].last_ns), (0, 11 * MS));
}

#[test]
fn pause_gap_or_jump_closes_the_run() {
    let cfg = RunConfig::default();
    // Pause of 10 ms + 1 ns: two runs.
    let out = coalesce(cfg, [rq(0, 0, 8, Some(1)), rq(10 * MS + 1, 8, 8, Some(1))]).unwrap();
    assert_eq!(runs(&out), vec![(Some(1), 0, 8, 1), (Some(1), 8, 8, 1)]);
    // Hole, overwrite and backwards jump: each starts a new run.
    let out = coalesce(
        cfg,
        [
            rq(0, 0, 8, None),
            rq(1, 9, 1, None),
            rq(2, 9, 1, None),
            rq(3, 0, 2, None),
        ],
    )
    .unwrap();
    assert_eq!(
        runs(&out),
        vec![
            (None, 0, 8, 1),
            (None, 9, 1, 1),
            (None, 9, 1, 1),
            (None, 0, 2, 1)
        ]
    );
}

#[test]
fn interleaved_streams_are_separated() {
    let reqs = [
        rq(0, 0, 4, Some(1)),
        rq(1, 1000, 4, Some(2)),
        rq(2, 4, 4, Some(1)),
        rq(3, 1004, 4, Some(2)),
        rq(4, 8, 4, Some(1)),
    ];
    let out = coalesce(RunConfig::default(), reqs).unwrap();
    assert_eq!(runs(&out), vec![(Some(1), 0, 12, 3), (Some(2), 1000, 8, 2)]);
}

#[test]
fn push_reports_expired_runs_of_other_streams() {
    let mut c = Coalescer::new(RunConfig::default()).unwrap();
    assert!(c.push(rq(0, 0, 4, Some(1))).unwrap().is_empty());
    assert!(c.push(rq(MS, 50, 4, Some(2))).unwrap().is_empty());
    // At 20 ms both are stale: closed oldest first, before stream 3 opens.
    let closed = c.push(rq(20 * MS, 500, 1, Some(3))).unwrap();
    assert_eq!(runs(&closed), vec![(Some(1), 0, 4, 1), (Some(2), 50, 4, 1)]);
    assert_eq!(runs(&c.finish()), vec![(Some(3), 500, 1, 1)]);
}

#[test]
fn cap_closes_long_runs() {
    let cfg = RunConfig {
        window_ns: 10 * MS,
        max_run_blocks: Some(16),
    };
    let reqs = (0..5).map(|i| rq(i, i * 8, 8, Some(7)));
    let out = coalesce(cfg, reqs).unwrap();
    assert_eq!(
        runs(&out),
        vec![
            (Some(7), 0, 16, 2),
            (Some(7), 16, 16, 2),
            (Some(7), 32, 8, 1)
        ]
    );
}

#[test]
fn bad_input_is_an_error() {
    assert!(matches!(
        Coalescer::new(RunConfig {
            window_ns: 0,
            max_run_blocks: None
        }),
        Err(RunError::Config(_))
    ));
    assert!(matches!(
        Coalescer::new(RunConfig {
            window_ns: 1,
            max_run_blocks: Some(0)
        }),
        Err(RunError::Config(_))
    ));
    let mut c = Coalescer::new(RunConfig::default()).unwrap();
    assert!(matches!(
        c.push(rq(0, 0, 0, None)),
        Err(RunError::Request(_))
    ));
    assert!(matches!(
        c.push(rq(0, u64::MAX, 2, None)),
        Err(RunError::Request(_))
    ));
    c.push(rq(10, 0, 1, None)).unwrap();
    assert!(matches!(
        c.push(rq(9, 1, 1, None)),
        Err(RunError::Request(_))
    ));
}
