//! Golden tests: small fixtures written from each format's description.

use std::path::PathBuf;

use mosaic_trace::{from_reader, open, Format, Op, Request, TraceError, TraceOptions, TraceWriter};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn read_all(name: &str, opts: &TraceOptions) -> (Format, Vec<Request>, u64) {
    let mut r = open(&fixture(name), opts).unwrap();
    let v: Vec<Request> = r.by_ref().map(|x| x.unwrap()).collect();
    (r.format(), v, r.skipped_ops())
}

fn req(time_ns: u64, op: Op, offset: u64, len: u64) -> Request {
    Request { time_ns, op, offset, len }
}

#[test]
fn spc() {
    let (f, v, _) = read_all("spc.csv", &TraceOptions::default());
    assert_eq!(f, Format::Spc);
    assert_eq!(v, vec![
        req(0, Op::Write, 20941264 * 512, 8192),
        req(2_335_000, Op::Read, 20939840 * 512, 8192),
        req(4_373_000, Op::Read, 20939808 * 512, 4096),
    ]);
    let only1 = TraceOptions { device: Some("1".into()), ..Default::default() };
    let mut r = open(&fixture("spc.csv"), &only1).unwrap();
    assert_eq!(r.by_ref().count(), 1);
    assert_eq!(r.filtered(), 2);
}

#[test]
fn msr() {
    let (f, v, _) = read_all("msr.csv", &TraceOptions::default());
    assert_eq!(f, Format::Msr);
    assert_eq!(v[0], req(0, Op::Write, 3872768, 4096));
    assert_eq!(v[1], req((128166372016382155 - 128166372003061629) * 100, Op::Read, 8192, 512));
    assert_eq!(v[2].op, Op::Read);
    let (_, v, _) = read_all("msr.csv", &TraceOptions { device: Some("0".into()), ..Default::default() });
    assert_eq!(v.len(), 2);
}

#[test]
fn blkparse_takes_q_events() {
    let (f, v, other) = read_all("blkparse.txt", &TraceOptions::default());
    assert_eq!(f, Format::Blkparse);
    assert_eq!(v, vec![req(0, Op::Write, 1000 * 512, 4096), req(500_000, Op::Read, 2048 * 512, 8192), req(800_000, Op::Read, 64 * 512, 4096)]);
    assert_eq!(other, 2, "flush and discard are other ops");
    let (_, v, _) = read_all("blkparse.txt", &TraceOptions { device: Some("8,16".into()), ..Default::default() });
    assert_eq!(v.len(), 1);
}

#[test]
fn blkparse_falls_back_to_d_events() {
    let (f, v, _) = read_all("blkparse-donly.txt", &TraceOptions { format: Some(Format::Blkparse), ..Default::default() });
    assert_eq!(f, Format::Blkparse);
    assert_eq!(v, vec![req(0, Op::Write, 100 * 512, 4096), req(200_000, Op::Read, 200 * 512, 8192)]);
    let text = std::fs::read(fixture("blkparse-donly.txt")).unwrap();
    let r = from_reader("mem", std::io::Cursor::new(text), &TraceOptions::default()).unwrap();
    assert_eq!(r.map(|x| x.unwrap()).count(), 2);
}

#[test]
fn cloudphysics_spreads_requests_within_a_second() {
    let (f, v, other) = read_all("cloudphysics.csv", &TraceOptions::default());
    assert_eq!(f, Format::CloudPhysics);
    assert_eq!(other, 1, "opcode 35 is skipped and counted");
    assert_eq!(v, vec![
        req(0, Op::Write, 8 * 512, 4096),
        req(333_333_333, Op::Read, 16 * 512, 512),
        req(666_666_666, Op::Write, 24 * 512, 8192),
        req(1_000_000_000, Op::Read, 32 * 512, 1024),
    ]);
}

#[test]
fn fio_v2_and_v3() {
    let (f, v, other) = read_all("fio2.log", &TraceOptions::default());
    assert_eq!(f, Format::FioV2);
    assert_eq!(v, vec![req(0, Op::Write, 4096, 8192), req(0, Op::Read, 0, 4096)]);
    assert_eq!(other, 1);
    let (f, v, other) = read_all("fio3.log", &TraceOptions::default());
    assert_eq!(f, Format::FioV3);
    assert_eq!(v, vec![req(0, Op::Write, 1048576, 65536), req(7_000_000, Op::Read, 0, 4096)]);
    assert_eq!(other, 1);
}

#[test]
fn alibaba_and_tencent() {
    let (f, v, _) = read_all("alibaba.csv", &TraceOptions::default());
    assert_eq!(f, Format::Alibaba);
    assert_eq!(v, vec![req(0, Op::Write, 1024, 4096), req(250_000, Op::Read, 8192, 512), req(1_000_000, Op::Write, 0, 4096)]);
    let (f, v, _) = read_all("tencent.csv", &TraceOptions::default());
    assert_eq!(f, Format::Tencent);
    assert_eq!(v, vec![req(0, Op::Write, 12345 * 512, 4096), req(1_000_000_000, Op::Read, 64 * 512, 8192), req(1_000_000_000, Op::Write, 0, 4096)]);
    let (_, v, _) = read_all("tencent.csv", &TraceOptions { device: Some("1500".into()), ..Default::default() });
    assert_eq!(v.len(), 1);
}

#[test]
fn first_and_time_scale() {
    let opts = TraceOptions { first: Some(2), time_scale: 0.5, ..Default::default() };
    let (_, v, _) = read_all("spc.csv", &opts);
    assert_eq!(v.len(), 2);
    assert_eq!(v[1].time_ns, 1_167_500);
}

#[test]
fn malformed_lines_name_file_line_and_field() {
    let text = "0,100,4096,W,0.1\n0,abc,4096,W,0.2\n0,300,4096,X,0.3\n0,400,4096,R,0.4\n";
    let r = from_reader("bad.csv", std::io::Cursor::new(text.as_bytes().to_vec()), &TraceOptions { format: Some(Format::Spc), ..Default::default() }).unwrap();
    let v: Vec<Result<Request, TraceError>> = r.collect();
    assert_eq!(v.len(), 2);
    let e = v[1].as_ref().unwrap_err().to_string();
    assert_eq!(e, "bad.csv:2: field 'LBA': invalid number \"abc\"");
    let mut r = from_reader("bad.csv", std::io::Cursor::new(text.as_bytes().to_vec()), &TraceOptions { format: Some(Format::Spc), skip_bad: true, ..Default::default() }).unwrap();
    assert_eq!(r.by_ref().map(|x| x.unwrap()).count(), 2);
    assert_eq!(r.skipped_bad(), 2);
    let e = from_reader("junk", std::io::Cursor::new(b"hello world\nfoo\n".to_vec()), &TraceOptions::default()).err().unwrap();
    assert!(e.to_string().contains("cannot detect the trace format"), "{e}");
    let e = open(&fixture("nope.csv"), &TraceOptions::default()).err().unwrap();
    assert!(e.to_string().contains("nope.csv"), "{e}");
    let e = open(&fixture("cloudphysics.csv"), &TraceOptions { device: Some("1".into()), ..Default::default() }).err().unwrap();
    assert!(e.to_string().contains("no device field"), "{e}");
}

#[test]
fn gzip_and_zstd_are_transparent() {
    use std::io::Write;
    let raw = std::fs::read(fixture("msr.csv")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("t.csv.gz");
    let mut e = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::default());
    e.write_all(&raw).unwrap();
    e.finish().unwrap();
    let zs = dir.path().join("t.bin");
    std::fs::write(&zs, zstd::encode_all(&raw[..], 3).unwrap()).unwrap();
    let plain: Vec<Request> = open(&fixture("msr.csv"), &TraceOptions::default()).unwrap().map(|x| x.unwrap()).collect();
    for p in [gz, zs] {
        let r = open(&p, &TraceOptions::default()).unwrap();
        assert_eq!(r.format(), Format::Msr);
        assert_eq!(r.map(|x| x.unwrap()).collect::<Vec<_>>(), plain);
    }
}

#[test]
fn writer_round_trips() {
    let reqs = vec![req(0, Op::Write, 4096, 8192), req(1_500_000, Op::Read, 0, 512), req(2_000_000, Op::Write, 1 << 30, 1 << 20)];
    let mut w = TraceWriter::new(Vec::new(), "mosaic");
    for r in &reqs {
        w.write(r, 1000).unwrap();
    }
    let bytes = w.into_inner();
    let back: Vec<Request> = from_reader("rec", std::io::Cursor::new(bytes), &TraceOptions::default()).unwrap().map(|x| x.unwrap()).collect();
    assert_eq!(back, reqs);
}

#[test]
fn real_cloudphysics_trace() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/cloudphysics-vscsi-part1.csv");
    if !p.exists() {
        eprintln!("skipping: {} not present", p.display());
        return;
    }
    let st = mosaic_trace::stats(open(&p, &TraceOptions::default()).unwrap()).unwrap();
    assert_eq!(st.format, Format::CloudPhysics);
    // The README: 22,427 reads (889 MB) and 34,509 writes (1.21 GB).
    assert_eq!(st.reads, 22_427);
    assert_eq!(st.writes, 34_509);
    assert!((st.read_bytes as f64 / 1e6 - 889.0).abs() < 1.0, "{}", st.read_bytes);
    assert!((st.write_bytes as f64 / 1e9 - 1.21).abs() < 0.01, "{}", st.write_bytes);
}
