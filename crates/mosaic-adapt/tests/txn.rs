//! Transactions from hand-built request sequences: windowing, the cap
//! rule, the op filter, bad input, and the text format.

use mosaic_adapt::txn::{parse_line, parse_text, to_text, transactions, Ops, Transactions, Txn, TxnConfig, TxnError, TxnStats};
use mosaic_trace::{Op, Request};
use proptest::prelude::*;

const UNIT: u64 = 4096;

/// A request at `t` ns for `n` units starting at unit `first`.
fn req(t: u64, first: u64, n: u64) -> Request {
    Request { time_ns: t, op: Op::Read, offset: first * UNIT, len: n * UNIT }
}

fn run(cfg: TxnConfig, reqs: &[Request]) -> (Vec<Txn>, TxnStats) {
    transactions(cfg, reqs.iter().copied()).unwrap()
}

#[test]
fn window_groups_requests_by_distance_from_the_first() {
    let reqs = [req(0, 1, 1), req(50, 3, 1), req(99, 2, 1), req(100, 7, 1), req(150, 7, 1), req(300, 9, 1)];
    let (txns, stats) = run(TxnConfig::new(UNIT, 100, 8), &reqs);
    assert_eq!(txns, vec![vec![1, 2, 3], vec![7], vec![9]]);
    assert_eq!((stats.requests, stats.transactions, stats.units, stats.cap_closes, stats.splits), (6, 3, 5, 0, 0));
}

#[test]
fn window_zero_is_one_request_per_transaction() {
    let reqs = [req(0, 1, 1), req(0, 3, 2), req(0, 2, 1), req(5, 7, 1)];
    let (txns, _) = run(TxnConfig::new(UNIT, 0, 8), &reqs);
    assert_eq!(txns, vec![vec![1], vec![3, 4], vec![2], vec![7]]);
}

#[test]
fn unaligned_requests_cover_every_unit_they_touch() {
    let r = Request { time_ns: 0, op: Op::Write, offset: 4000, len: 200 };
    let last = Request { time_ns: 0, op: Op::Write, offset: 3 * UNIT - 1, len: 1 };
    let (txns, _) = run(TxnConfig::new(UNIT, 0, 8), &[r, last]);
    assert_eq!(txns, vec![vec![0, 1], vec![2]]);
}

#[test]
fn cap_closes_the_transaction_and_restarts_the_window() {
    let reqs = [req(0, 0, 3), req(10, 1, 1), req(20, 2, 2), req(900, 10, 1), req(1500, 11, 1), req(2000, 12, 1)];
    let (txns, stats) = run(TxnConfig::new(UNIT, 1000, 4), &reqs);
    // 0..=3 fills the cap; unit 10 would make 5, so it opens a new
    // transaction at 900, which 1500 still joins; 2000 is 1100 after 900.
    assert_eq!(txns, vec![vec![0, 1, 2, 3], vec![10, 11], vec![12]]);
    assert_eq!((stats.cap_closes, stats.splits), (1, 0));
}

#[test]
fn duplicate_units_do_not_count_against_the_cap() {
    let reqs = [req(0, 0, 4), req(1, 0, 4), req(2, 2, 2)];
    let (txns, stats) = run(TxnConfig::new(UNIT, 1000, 4), &reqs);
    assert_eq!(txns, vec![vec![0, 1, 2, 3]]);
    assert_eq!(stats.cap_closes, 0);
}

#[test]
fn a_request_larger_than_the_cap_is_split_into_chunks() {
    let reqs = [req(0, 1, 1), req(5, 10, 10), req(6, 20, 1), req(7, 30, 4)];
    let (txns, stats) = run(TxnConfig::new(UNIT, 1000, 4), &reqs);
    // The last request fits the cap alone (4 units) but not with unit 20.
    let expect: Vec<Txn> = vec![vec![1], vec![10, 11, 12, 13], vec![14, 15, 16, 17], vec![18, 19], vec![20], vec![30, 31, 32, 33]];
    assert_eq!(txns, expect);
    assert_eq!(
        stats,
        TxnStats { requests: 4, filtered: 0, transactions: 6, units: 1 + 4 + 4 + 2 + 1 + 4, cap_closes: 1, splits: 1 }
    );
}

#[test]
fn a_huge_request_is_chunked_lazily() {
    let mut b = Transactions::new(TxnConfig::new(512, 0, 2)).unwrap();
    let huge = Request { time_ns: 0, op: Op::Read, offset: 0, len: u64::MAX };
    let first: Vec<Txn> = b.push(&huge).unwrap().take(2).collect();
    assert_eq!(first, vec![vec![0, 1], vec![2, 3]]);
    assert_eq!(b.pop(), Some(vec![4, 5]));
    assert_eq!(b.stats().splits, 1);
}

#[test]
fn undrained_transactions_wait_in_order() {
    let mut b = Transactions::new(TxnConfig::new(UNIT, 0, 4)).unwrap();
    b.push(&req(0, 1, 1)).unwrap();
    b.push(&req(1, 2, 1)).unwrap();
    b.push(&req(2, 3, 1)).unwrap();
    let got: Vec<Txn> = b.finish().collect();
    assert_eq!(got, vec![vec![1], vec![2], vec![3]]);
    assert_eq!(b.pop(), None);
}

#[test]
fn op_filter_ignores_the_other_kind_entirely() {
    let w = |t, u| Request { time_ns: t, op: Op::Write, offset: u * UNIT, len: UNIT };
    let reqs = [w(0, 1), req(10, 2, 1), w(20, 3), req(30, 4, 1)];
    let cfg = TxnConfig { ops: Ops::Writes, ..TxnConfig::new(UNIT, 100, 8) };
    let (txns, stats) = run(cfg, &reqs);
    assert_eq!(txns, vec![vec![1, 3]]);
    assert_eq!((stats.requests, stats.filtered), (4, 2));
    let (both, _) = run(TxnConfig::new(UNIT, 100, 8), &reqs);
    assert_eq!(both, vec![vec![1, 2, 3, 4]]);
}

#[test]
fn bad_requests_are_errors() {
    let mut b = Transactions::new(TxnConfig::new(UNIT, 10, 4)).unwrap();
    let zero = Request { time_ns: 0, op: Op::Read, offset: 0, len: 0 };
    assert!(matches!(b.push(&zero), Err(TxnError::Request { index: 0, .. })));
    let over = Request { time_ns: 0, op: Op::Read, offset: u64::MAX, len: 2 };
    assert!(matches!(b.push(&over), Err(TxnError::Request { index: 1, .. })));
    assert_eq!(b.finish().count(), 0);
}

#[test]
fn bad_configs_are_errors() {
    for (unit, cap) in [(0, 4), (256, 4), (4095, 4), (UNIT, 1), (UNIT, 0)] {
        let e = Transactions::new(TxnConfig::new(unit, 0, cap)).unwrap_err();
        assert!(matches!(e, TxnError::Config(_)), "{unit} {cap}: {e}");
    }
    assert!(TxnConfig::default().validate().is_ok());
}

#[test]
fn text_format_reads_fig_2a() {
    let t = parse_text("1 2\n1 3 4\n\n4\t 5\r\n").unwrap();
    assert_eq!(t, vec![vec![1, 2], vec![1, 3, 4], vec![4, 5]]);
    assert_eq!(to_text(&t), "1 2\n1 3 4\n4 5\n");
    assert_eq!(parse_line("5 3 5 1", 1).unwrap(), vec![1, 3, 5]);
}

#[test]
fn malformed_lines_name_their_line() {
    for (text, line, tok) in [
        ("1 2\n3 x 4\n", 2, "x"),
        ("-1\n", 1, "-1"),
        ("1\n2\n\n1.5", 4, "1.5"),
        ("+3", 1, "+3"),
        ("1 2,3", 1, "2,3"),
        ("18446744073709551616", 1, "18446744073709551616"),
    ] {
        let e = parse_text(text).unwrap_err();
        assert!(matches!(&e, TxnError::Parse { line: l, .. } if *l == line), "{text:?}: {e}");
        let msg = e.to_string();
        assert!(msg.starts_with(&format!("line {line}:")) && msg.contains(tok), "{msg}");
    }
}

fn txn_strategy() -> impl Strategy<Value = Txn> {
    prop::collection::btree_set(any::<u64>(), 1..20).prop_map(|s| s.into_iter().collect())
}

proptest! {
    #[test]
    fn text_format_round_trips(txns in prop::collection::vec(txn_strategy(), 0..30)) {
        prop_assert_eq!(parse_text(&to_text(&txns)).unwrap(), txns);
    }

    #[test]
    fn transactions_are_sorted_distinct_and_capped(
        reqs in prop::collection::vec((0u64..2000, 0u64..64, 1u64..20), 0..60),
        cap in 2usize..10,
        window in 0u64..300,
    ) {
        let mut t = 0;
        let reqs: Vec<Request> = reqs.into_iter().map(|(dt, u, n)| { t += dt; req(t, u, n) }).collect();
        let (txns, stats) = run(TxnConfig::new(UNIT, window, cap), &reqs);
        for x in &txns {
            prop_assert!(!x.is_empty() && x.len() <= cap);
            prop_assert!(x.windows(2).all(|w| w[0] < w[1]));
        }
        prop_assert_eq!(stats.transactions, txns.len() as u64);
        prop_assert_eq!(stats.units, txns.iter().map(|x| x.len() as u64).sum::<u64>());
    }
}
