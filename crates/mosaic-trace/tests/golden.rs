//! Golden tests: small fixtures written from each format's description.

use crate::common;

use common::*;
use mosaic_trace::{from_reader, Format, Op::*, TraceOptions};

#[test]
fn every_fixture_is_detected() {
    for (name, f) in [
        ("spc.csv", Format::Spc),
        ("msr.csv", Format::Msr),
        ("blkparse.txt", Format::Blkparse),
        ("blkparse-donly.txt", Format::Blkparse),
        ("cloudphysics.csv", Format::CloudPhysics),
        ("fio2.log", Format::FioV2),
        ("fio3.log", Format::FioV3),
        ("alibaba.csv", Format::Alibaba),
        ("tencent.csv", Format::Tencent),
    ] {
        let (r, v) = read_all(name, &TraceOptions::default());
        assert_eq!(r.format(), f, "{name}");
        assert!(!v.is_empty(), "{name}");
        // Naming the format gives the same requests.
        let (_, named) = read_all(name, &TraceOptions { format: Some(f), ..Default::default() });
        assert_eq!(named, v, "{name}");
    }
}

#[test]
fn spc() {
    let (r, v) = read_all("spc.csv", &TraceOptions::default());
    assert_eq!(
        v,
        vec![req(0, Write, 20941264 * 512, 8192), req(2_335_000, Read, 20939840 * 512, 8192), req(4_373_000, Read, 20939808 * 512, 4096)]
    );
    assert_eq!((r.skipped_bad(), r.skipped_ops(), r.filtered()), (0, 0, 0));
    let (r, v) = read_all("spc.csv", &opts_device("1"));
    assert_eq!(v, vec![req(0, Read, 20939840 * 512, 8192)]);
    assert_eq!(r.filtered(), 2);
}

#[test]
fn spc_header_and_spaces() {
    let text = "ASU,LBA,Size,Opcode,Timestamp\r\n0, 10, 512, w, 1.5\r\n\r\n0,11,512,R,2\r\n";
    let r = mem("h.csv", text, &TraceOptions::default());
    assert_eq!(r.format(), Format::Spc);
    let v: Vec<_> = r.map(|x| x.unwrap()).collect();
    assert_eq!(v, vec![req(0, Write, 5120, 512), req(500_000_000, Read, 5632, 512)]);
}

#[test]
fn msr() {
    let (_, v) = read_all("msr.csv", &TraceOptions::default());
    assert_eq!(
        v,
        vec![
            req(0, Write, 3872768, 4096),
            req((128166372016382155 - 128166372003061629) * 100, Read, 8192, 512),
            req((128166372026382155 - 128166372003061629) * 100, Read, 1024, 1024),
        ]
    );
    let (r, v) = read_all("msr.csv", &opts_device("0"));
    assert_eq!(v.len(), 2);
    assert_eq!(v[1].time_ns, (128166372026382155 - 128166372003061629) * 100);
    assert_eq!(r.filtered(), 1);
}

#[test]
fn blkparse_takes_q_events() {
    let (r, v) = read_all("blkparse.txt", &TraceOptions::default());
    assert_eq!(
        v,
        vec![
            req(0, Write, 1000 * 512, 4096),
            req(500_000, Read, 2048 * 512, 8192),
            req(800_000, Read, 64 * 512, 4096),
            req(1_100_000, Write, 5000 * 512, 256 * 512),
        ]
    );
    assert_eq!(r.skipped_ops(), 3, "empty pre-flush, pure flush and discard");
    assert_eq!(r.skipped_bad(), 0);
    let (r, v) = read_all("blkparse.txt", &opts_device("8,16"));
    assert_eq!(v, vec![req(0, Read, 64 * 512, 4096)]);
    assert_eq!((r.filtered(), r.skipped_ops()), (6, 0));
}

#[test]
fn blkparse_falls_back_to_d_events() {
    let want = vec![req(0, Write, 100 * 512, 4096), req(200_000, Read, 200 * 512, 8192)];
    let (r, v) = read_all("blkparse-donly.txt", &TraceOptions::default());
    assert_eq!(v, want);
    assert_eq!(r.skipped_ops(), 1, "the discard");
    // from_reader decides lazily and agrees, for both files.
    for (name, n) in [("blkparse-donly.txt", 2), ("blkparse.txt", 4)] {
        let text = std::fs::read(fixture(name)).unwrap();
        let mut r = from_reader(name, std::io::Cursor::new(text), &TraceOptions::default()).unwrap();
        let v: Vec<_> = r.by_ref().map(|x| x.unwrap()).collect();
        assert_eq!(v.len(), n, "{name}");
        if n == 2 {
            assert_eq!(v, want);
            assert_eq!(r.skipped_ops(), 1);
        }
    }
}

#[test]
fn blkparse_lazy_drops_d_events_before_the_first_q() {
    let text = "  8,0 0 1 0.1 9 D W 8 + 8 [x]\n  8,0 0 2 0.2 9 Q R 16 + 8 [x]\n  8,0 0 3 0.3 9 D R 16 + 8 [x]\n";
    let v: Vec<_> = mem("t", text, &TraceOptions::default()).map(|x| x.unwrap()).collect();
    assert_eq!(v, vec![req(0, Read, 16 * 512, 4096)]);
}

#[test]
fn cloudphysics_spreads_requests_within_a_second() {
    let (r, v) = read_all("cloudphysics.csv", &TraceOptions::default());
    assert_eq!(r.skipped_ops(), 1, "opcode 35 is skipped and counted");
    assert_eq!(
        v,
        vec![
            req(0, Write, 8 * 512, 4096),
            req(333_333_333, Read, 16 * 512, 512),
            req(666_666_666, Write, 24 * 512, 8192),
            req(1_000_000_000, Read, 32 * 512, 1024),
            req(3_000_000_000, Write, 40 * 512, 4096),
            req(3_500_000_000, Read, 48 * 512, 4096),
        ]
    );
    // `first` cuts after spreading over the whole second.
    let (_, v) = read_all("cloudphysics.csv", &TraceOptions { first: Some(2), ..Default::default() });
    assert_eq!(v.iter().map(|r| r.time_ns).collect::<Vec<_>>(), vec![0, 333_333_333]);
}

#[test]
fn cloudphysics_error_comes_after_the_second_it_interrupts() {
    let text = "version,time,op,size,lbn\n1,5,2a,512,1\n1,5,2a,512,2\n1,5,zz,512,3\n";
    let v: Vec<_> = mem("cp.csv", text, &TraceOptions::default()).collect();
    assert_eq!(v.len(), 3);
    assert_eq!(v[1].as_ref().unwrap().time_ns, 500_000_000);
    assert_eq!(v[2].as_ref().unwrap_err().to_string(), "cp.csv:4: field 'op': invalid SCSI opcode (hex) \"zz\"");
}

#[test]
fn fio_v2() {
    let (r, v) = read_all("fio2.log", &TraceOptions::default());
    assert_eq!(
        v,
        vec![req(0, Write, 4096, 8192), req(0, Read, 0, 4096), req(250_000_000, Write, 8192, 4096), req(250_000_000, Read, 0, 512)]
    );
    assert_eq!(r.skipped_ops(), 1, "trim");
    let (r, v) = read_all("fio2.log", &opts_device("/dev/sdc"));
    assert_eq!(v, vec![req(0, Read, 0, 512)]);
    assert_eq!(r.filtered(), 4);
}

#[test]
fn fio_v3_timestamps_are_microseconds() {
    let (r, v) = read_all("fio3.log", &TraceOptions::default());
    assert_eq!(v, vec![req(0, Write, 1048576, 65536), req(7_000_000, Read, 0, 4096)]);
    assert_eq!(r.skipped_ops(), 1, "sync");
}

#[test]
fn alibaba() {
    let (_, v) = read_all("alibaba.csv", &TraceOptions::default());
    assert_eq!(v, vec![req(0, Write, 1024, 4096), req(250_000, Read, 8192, 512), req(1_000_000, Write, 0, 4096)]);
    let (r, v) = read_all("alibaba.csv", &opts_device("7"));
    assert_eq!((v.len(), r.filtered()), (1, 2));
}

#[test]
fn tencent() {
    let (_, v) = read_all("tencent.csv", &TraceOptions::default());
    assert_eq!(v, vec![req(0, Write, 12345 * 512, 4096), req(1_000_000_000, Read, 64 * 512, 8192), req(1_000_000_000, Write, 0, 4096)]);
    let (_, v) = read_all("tencent.csv", &opts_device("1500"));
    assert_eq!(v, vec![req(0, Write, 0, 4096)]);
}

#[test]
fn first_and_time_scale() {
    let opts = TraceOptions { first: Some(2), time_scale: 0.5, ..Default::default() };
    let (_, v) = read_all("spc.csv", &opts);
    assert_eq!(v.len(), 2);
    assert_eq!(v[1].time_ns, 1_167_500);
    let (_, v) = read_all("spc.csv", &TraceOptions { first: Some(0), ..Default::default() });
    assert!(v.is_empty());
}

#[test]
fn out_of_order_times_clamp_to_zero_and_are_counted() {
    let text = "0,1,512,w,5.0\n0,2,512,w,4.0\n0,3,512,w,6.0\n0,4,512,w,5.5\n0,5,512,w,1\n";
    let mut r = mem("t", text, &TraceOptions::default());
    let v: Vec<_> = r.by_ref().map(|x| x.unwrap().time_ns).collect();
    assert_eq!(v, vec![0, 0, 1_000_000_000, 500_000_000, 0]);
    assert_eq!(r.clamped(), 2, "the two before the first; 5.5 is out of order but after it");
    let mut r = mem("t", text, &TraceOptions { format: Some(Format::Msr), ..Default::default() });
    assert!(r.next().unwrap().is_err());
    assert_eq!(r.clamped(), 0);
}

#[test]
fn zero_length_requests_are_skipped_ops() {
    let mut r = mem("t", "0,1,0,w,5.0\n0,2,512,w,5.0\n", &TraceOptions::default());
    assert_eq!(r.by_ref().count(), 1);
    assert_eq!(r.skipped_ops(), 1);
}
