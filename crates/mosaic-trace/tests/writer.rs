//! TraceWriter output reads back unchanged.

use crate::common;

use common::*;
use mosaic_trace::{from_reader, write_msr, Format, Op, Request, TraceOptions, TraceWriter};
use proptest::prelude::*;

#[test]
fn writer_round_trips() {
    let reqs = vec![req(0, Op::Write, 4096, 8192), req(1_500_000, Op::Read, 0, 512), req(2_000_000, Op::Write, 1 << 40, 1 << 20)];
    let mut w = TraceWriter::new(Vec::new(), "nbd server, 1").with_disk(3).with_base_ticks(128166372003061629);
    for r in &reqs {
        w.write(r, 1000).unwrap();
    }
    assert_eq!(w.written(), 3);
    let bytes = w.into_inner();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert_eq!(text.lines().next().unwrap(), "128166372003061629,nbd_server__1,3,Write,4096,8192,10");
    let r = from_reader("rec", std::io::Cursor::new(bytes), &opts_device("3")).unwrap();
    assert_eq!(r.format(), Format::Msr);
    assert_eq!(r.map(|x| x.unwrap()).collect::<Vec<_>>(), reqs);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn random_requests_round_trip(v in prop::collection::vec((0u64..1 << 40, any::<bool>(), 0u64..1 << 50, 1u64..1 << 30), 1..50)) {
        let mut t = 0;
        let reqs: Vec<Request> = v.iter().enumerate().map(|(i, &(dt, w, off, len))| {
            if i > 0 { t += dt / 100 * 100; }
            Request { time_ns: t, op: if w { Op::Write } else { Op::Read }, offset: off, len }
        }).collect();
        let bytes = write_msr(Vec::new(), &reqs).unwrap();
        let back: Vec<Request> = from_reader("rt", std::io::Cursor::new(bytes), &TraceOptions::default()).unwrap().map(|x| x.unwrap()).collect();
        prop_assert_eq!(back, reqs);
    }
}
