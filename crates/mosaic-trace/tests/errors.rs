//! Errors: malformed lines, skip_bad, detection, I/O and options.

use crate::common;

use common::*;
use mosaic_trace::{from_reader, open, Format, Request, TraceError, TraceOptions};

fn spc() -> TraceOptions {
    TraceOptions { format: Some(Format::Spc), ..Default::default() }
}

#[test]
fn malformed_lines_name_file_line_and_field() {
    let text = "0,100,4096,W,0.1\n0,abc,4096,W,0.2\n0,300,4096,X,0.3\n0,400,4096,R,0.4\n";
    let v: Vec<Result<Request, TraceError>> = mem("bad.csv", text, &spc()).collect();
    assert_eq!(v.len(), 2, "the iterator ends after the error");
    let e = v[1].as_ref().unwrap_err();
    assert_eq!(e.to_string(), "bad.csv:2: field 'LBA': invalid number \"abc\"");
    assert!(matches!(e, TraceError::Parse { line: 2, .. }));

    let mut r = mem("bad.csv", text, &TraceOptions { skip_bad: true, ..spc() });
    assert_eq!(r.by_ref().collect::<Result<Vec<_>, _>>().unwrap().len(), 2);
    assert_eq!(r.skipped_bad(), 2);
}

#[test]
fn error_messages_per_format() {
    let cases: [(Format, &str, &str); 12] = [
        (Format::Spc, "0,1,12x,w,0.1", "t:1: field 'Size': invalid number \"12x\""),
        (Format::Spc, "0,1,512,w", "t:1: field 'Timestamp': missing"),
        (Format::Spc, "0,1,512,w,-3", "t:1: field 'Timestamp': negative time \"-3\""),
        (Format::Msr, "1,h,0,Flush,0,512,1", "t:1: field 'Type': expected Read or Write, got \"Flush\""),
        (Format::Msr, "99999999999999999999,h,0,Read,0,512,1", "t:1: field 'Timestamp': number too large \"99999999999999999999\""),
        (Format::Msr, "184467440737095517,h,0,Read,0,512,1", "t:1: field 'Timestamp': value too large (184467440737095517 x 100 overflows)"),
        (Format::Msr, "1,h,0,Read,18446744073709551615,512,1", "t:1: field 'Size': offset 18446744073709551615 + length 512 overflows"),
        (Format::Alibaba, "3,X,0,512,1", "t:1: field 'opcode': expected R or W, got \"X\""),
        (Format::Tencent, "1,0,8,2,7", "t:1: field 'iotype': expected 0 (read) or 1 (write), got \"2\""),
        (Format::FioV2, "/dev/sdb frob 0 512", "t:1: field 'action': unknown fio action \"frob\""),
        (Format::FioV3, "x /dev/sdb read 0 512", "t:1: field 'timestamp': invalid number \"x\""),
        (Format::Blkparse, "  8,0 0 1 0.5 9 Q W 8 - 8 [x]", "t:1: field 'count': expected `+ COUNT` after the sector"),
    ];
    for (f, line, want) in cases {
        let mut r = mem("t", line, &TraceOptions { format: Some(f), ..Default::default() });
        let e = r.next().unwrap().unwrap_err();
        assert_eq!(e.to_string(), want, "{f}");
        assert!(r.next().is_none());
    }
}

#[test]
fn cannot_detect_lists_what_was_tried() {
    let e = from_reader("junk", std::io::Cursor::new(b"hello world\nfoo\n".to_vec()), &TraceOptions::default()).unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("junk: cannot detect the trace format"), "{s}");
    for f in Format::ALL {
        assert!(s.contains(f.describe()), "{s} lacks {f}");
    }
    assert!(s.contains("hello world"), "{s}");
    let e = from_reader("empty", std::io::Cursor::new(Vec::new()), &TraceOptions::default()).unwrap_err();
    assert!(matches!(e, TraceError::Detect { .. }), "{e}");
}

#[test]
fn empty_trace_with_a_named_format_is_empty() {
    let mut r = from_reader("e", std::io::Cursor::new(Vec::new()), &spc()).unwrap();
    assert!(r.next().is_none());
}

#[test]
fn io_and_option_errors() {
    let e = open(&fixture("nope.csv"), &TraceOptions::default()).unwrap_err();
    assert!(matches!(e, TraceError::Io { .. }));
    assert!(e.to_string().contains("nope.csv"), "{e}");
    let e = open(&fixture("cloudphysics.csv"), &opts_device("1")).unwrap_err();
    assert!(e.to_string().contains("no device field"), "{e}");
    for scale in [f64::NAN, -1.0, f64::INFINITY, 0.0, -0.0] {
        let e = open(&fixture("spc.csv"), &TraceOptions { time_scale: scale, ..Default::default() }).unwrap_err();
        assert!(matches!(e, TraceError::Options(_)), "{e}");
        assert!(e.to_string().starts_with("time scale must be a finite number > 0, got "), "{e}");
    }
}

/// A time scale that takes a time past u64 nanoseconds is an error naming
/// the request's line, never a saturated time: in place, after the
/// CloudPhysics look-ahead (which reads the next second first) and after
/// blkparse D events held back.
#[test]
fn scaled_times_past_u64_name_their_line() {
    let big = |f: Option<Format>| TraceOptions { format: f, time_scale: 1e15, ..Default::default() };
    let v: Vec<_> = mem("t", "0,1,512,w,0\n0,2,512,w,0.000001\n0,3,512,w,1000\n", &big(None)).collect();
    assert_eq!(v[1].as_ref().unwrap().time_ns, 1_000_000_000_000_000_000);
    assert_eq!(v[2].as_ref().unwrap_err().to_string(), "t:3: field 'Timestamp': 1000000000000 ns after the first request times the time scale 1000000000000000 is past u64::MAX ns");
    assert_eq!(v.len(), 3, "the iterator ends after the error");
    let cp = "version,time,op,size,lbn\n1,5,2a,512,1\n1,100,2a,512,2\n1,100,2a,512,3\n1,101,2a,512,4\n";
    let v: Vec<_> = mem("cp", cp, &big(None)).collect();
    assert_eq!(v[1].as_ref().unwrap_err().to_string(), "cp:3: field 'time': 95000000000 ns after the first request times the time scale 1000000000000000 is past u64::MAX ns");
    let blk = "  8,0 0 1 0 9 D W 8 + 8 [x]\n  8,0 0 2 20 9 D W 16 + 8 [x]\n  8,0 0 3 30 9 C W 16 + 8 [x]\n";
    let v: Vec<_> = mem("blk", blk, &big(Some(Format::Blkparse))).collect();
    assert_eq!(v[1].as_ref().unwrap_err().to_string(), "blk:2: field 'time': 20000000000 ns after the first request times the time scale 1000000000000000 is past u64::MAX ns");
    // A scale that keeps every time in range is no error.
    assert_eq!(mem("t", "0,1,512,w,0\n0,2,512,w,18\n", &TraceOptions { time_scale: 1e9, ..Default::default() }).map(|r| r.unwrap().time_ns).last(), Some(18_000_000_000_000_000_000));
}

/// CloudPhysics has one version, 1: another is an error naming the line
/// (counted with skip_bad), as is an opcode over one byte.
#[test]
fn cloudphysics_version_must_be_1() {
    let text = "version,time,op,size,lbn\n1,5,2a,512,1\n2,5,2a,512,2\n1,5,2a,512,3\n1,6,1234,0,0\n";
    let v: Vec<_> = mem("cp", text, &TraceOptions::default()).collect();
    assert_eq!(v[1].as_ref().unwrap_err().to_string(), "cp:3: field 'version': expected 1 (the format's only version), got \"2\"");
    let mut r = mem("cp", text, &TraceOptions { skip_bad: true, ..Default::default() });
    assert_eq!(r.by_ref().map(|x| x.unwrap().offset).collect::<Vec<_>>(), vec![512, 3 * 512]);
    assert_eq!(r.skipped_bad(), 2);
}

/// Formats of a fixed field count refuse a further field (naming the
/// line); SPC allows further columns and blkparse free text after the
/// count.
#[test]
fn extra_fields_are_errors_where_the_count_is_fixed() {
    let cases: [(Format, &str, &str); 7] = [
        (Format::CloudPhysics, "1,5,2a,512,8", "1,5,2a,512,8,junk"),
        (Format::Tencent, "1538323200,12345,8,1,1283", "1538323200,12345,8,1,1283,9"),
        (Format::Alibaba, "3,W,1024,4096,1577808000000000", "3,W,1024,4096,1577808000000000,"),
        (Format::Msr, "128166372003061629,wdev,0,Write,3872768,4096,1125", "128166372003061629,wdev,0,Write,3872768,4096,1125,junk"),
        (Format::FioV2, "/dev/sdb write 4096 8192", "/dev/sdb write 4096 8192 junk"),
        (Format::FioV2, "/dev/sdb wait 250", "/dev/sdb wait 250 junk"),
        (Format::FioV3, "5000 /dev/nbd0 write 1048576 65536", "5000 /dev/nbd0 write 1048576 65536 junk"),
    ];
    for (f, good, bad) in cases {
        let opts = TraceOptions { format: Some(f), ..Default::default() };
        let v: Vec<_> = mem("t", &format!("{good}\n{bad}\n{good}\n"), &opts).collect();
        let e = v.last().unwrap().as_ref().unwrap_err().to_string();
        assert!(e.starts_with("t:2: field 'line': more than "), "{f}: {e}");
        let mut r = mem("t", &format!("{good}\n{bad}\n{good}\n"), &TraceOptions { skip_bad: true, ..opts });
        assert!(r.by_ref().all(|x| x.is_ok()));
        assert_eq!(r.skipped_bad(), 1, "{f}");
    }
    // Detected as before, then refused.
    let e = mem("t", "1,5,2a,512,8,junk\n", &TraceOptions::default()).next().unwrap().unwrap_err();
    assert_eq!(e.to_string(), "t:1: field 'line': more than 5 fields (extra \"junk\")");
    for (f, line) in [(Format::Spc, "0,303567,3584,w,0.000000,extra,cols"), (Format::Blkparse, "  8,0 0 1 0.5 9 Q W 8 + 8 [a process] more text")] {
        let v: Vec<_> = mem("t", line, &TraceOptions { format: Some(f), ..Default::default() }).collect::<Result<_, _>>().unwrap();
        assert_eq!(v.len(), 1, "{f}");
    }
}

/// A blkparse event line cut short is an error naming the line and the
/// first missing field, never skipped unseen; with skip_bad it is
/// counted.  Read with the format named, detected (from_reader decides Q
/// or D lazily) and through `open` (which pre-scans).
#[test]
fn truncated_blkparse_events_are_errors() {
    let whole = "  8,0    3        2     0.000000500  1234  Q  WS 1000 + 8 [kworker/3:1]";
    let cuts = [
        ("  8,0    3", "sequence"),
        ("  8,0    3        2", "time"),
        ("  8,0    3        2     0.0000", "pid"),
        ("  8,0    3        2     0.000000500  1234", "action"),
        ("  8,0    3        2     0.000000500  1234  Q", "RWBS"),
        ("  8,0    3        2     0.000000500  1234  Q  WS 1000", "count"),
        ("  8,0    3        2     0.000000500  1234  Q  WS 1000 +", "count"),
        ("  8,0", "cpu"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (cut, field) in cuts {
        let text = format!("{whole}\n{cut}\n{whole}\n");
        let p = dir.path().join("cut.txt");
        std::fs::write(&p, &text).unwrap();
        for format in [None, Some(Format::Blkparse)] {
            let opts = TraceOptions { format, ..Default::default() };
            for r in [mem("t", &text, &opts), open(&p, &opts).unwrap()] {
                let v: Vec<_> = r.collect();
                assert_eq!(v.len(), 2, "{cut:?}");
                let e = v[1].as_ref().unwrap_err().to_string();
                assert!(e.contains(":2: field '") && e.contains(&format!("field '{field}'")), "{cut:?}: {e}");
            }
            let mut r = mem("t", &text, &TraceOptions { skip_bad: true, ..opts });
            assert_eq!(r.by_ref().map(|x| x.unwrap()).count(), 2, "{cut:?}");
            assert_eq!(r.skipped_bad(), 1, "{cut:?}");
        }
    }
    let e = mem("t", &format!("{whole}\n  8,0 3 2 0.5 1234\n"), &TraceOptions::default()).nth(1).unwrap().unwrap_err();
    assert_eq!(e.to_string(), "t:2: field 'action': missing: the event line is cut short");
}

/// `set_max_len`: a longer request is an error naming its line (or is
/// skipped and counted with skip_bad); one of exactly the limit is read.
/// MSR lines read in one pass, blkparse D events held back and
/// CloudPhysics seconds alike.
#[test]
fn requests_over_the_max_len_are_malformed() {
    const GIB: u64 = 1 << 30;
    let cases = [
        (format!("1,h,0,Write,0,{GIB},1\n2,h,0,Write,0,{},1\n3,h,0,Read,0,4096,1\n", GIB + 1), "t:2: field 'Size': a write of 1073741825 bytes at offset 0: larger than the 1073741824 bytes planned as one request (damaged sizes in the trace?)"),
        (format!("  8,0 0 1 0.1 9 D W 8 + {}\n  8,0 0 2 0.2 9 D R 8 + {} [x]\n  8,0 0 3 0.3 9 D R 8 + 8 [x]\n", GIB / 512, GIB / 512 + 1), "t:2: field 'count': a read of 1073742336 bytes at offset 4096: larger than the 1073741824 bytes planned as one request (damaged sizes in the trace?)"),
        (format!("1,5,2a,{GIB},1\n1,5,28,1099511627776,2\n1,5,28,512,3\n"), "t:2: field 'size': a read of 1099511627776 bytes at offset 1024: larger than the 1073741824 bytes planned as one request (damaged sizes in the trace?)"),
    ];
    for (text, want) in cases {
        for skip_bad in [false, true] {
            let mut r = mem("t", &text, &TraceOptions { skip_bad, ..Default::default() });
            r.set_max_len(GIB);
            let v: Vec<_> = r.by_ref().collect();
            assert_eq!(v[0].as_ref().unwrap().len, GIB, "{text}");
            if skip_bad {
                assert_eq!((v.len(), r.skipped_bad()), (2, 1), "{text}");
            } else {
                assert_eq!(v.len(), 2, "{text}");
                assert_eq!(v[1].as_ref().unwrap_err().to_string(), want);
            }
        }
    }
}

#[test]
fn truncated_gzip_is_an_io_error_naming_the_file() {
    use std::io::Write;
    let mut text = String::new();
    for i in 0..5000 {
        text.push_str(&format!("{},h,0,Read,{},4096,1\n", 1000 + i, i * 4096));
    }
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    let mut gz = e.finish().unwrap();
    gz.truncate(gz.len() / 2);
    let r = from_reader("cut.gz", std::io::Cursor::new(gz), &TraceOptions::default()).unwrap();
    let last = r.last().unwrap();
    let e = last.unwrap_err();
    assert!(matches!(e, TraceError::Io { .. }), "{e}");
    assert!(e.to_string().starts_with("cut.gz: "), "{e}");
}

/// A compressed stream's error says where it broke: the line reached and
/// the byte of the decompressed data; every line before it was read.
#[test]
fn broken_compressed_streams_name_the_line_and_byte() {
    use std::io::Write;
    let mut text = String::new();
    for i in 0..20000 {
        text.push_str(&format!("{},h,0,Read,{},4096,1\n", 1000 + i, i * 4096));
    }
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    let gz = e.finish().unwrap();
    let zs = zstd::encode_all(text.as_bytes(), 3).unwrap();
    for (name, data) in [("gzip", gz), ("zstd", zs)] {
        for cut in [data.len() / 3, data.len() * 2 / 3, data.len() - 3] {
            let mut r = from_reader("cut", std::io::Cursor::new(data[..cut].to_vec()), &TraceOptions::default()).unwrap();
            let read = r.by_ref().take_while(|x| x.is_ok()).count();
            let e = r.last();
            assert!(e.is_none(), "the iterator ends after the error");
            let mut r = from_reader("cut", std::io::Cursor::new(data[..cut].to_vec()), &TraceOptions::default()).unwrap();
            let e = r.by_ref().find_map(Result::err).unwrap().to_string();
            let prefix = format!("cut: line {}: {name} stream broken at byte ", read + 1);
            assert!(e.starts_with(&prefix), "{e}");
            let byte: usize = e[prefix.len()..].split(' ').next().unwrap().parse().unwrap();
            assert_eq!(text[..byte].matches('\n').count(), read, "{e}");
        }
    }
    // Broken within the lines read for detection, and in a blkparse pre-scan.
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all("  8,0 0 1 0.5 9 D W 8 + 8 [x]\n".repeat(3000).as_bytes()).unwrap();
    let gz = e.finish().unwrap();
    let cut = &gz[..gz.len() - 4];
    let e = from_reader("cut", std::io::Cursor::new(cut[..30].to_vec()), &TraceOptions::default()).unwrap_err().to_string();
    assert!(e.starts_with("cut: line 1: gzip stream broken at byte "), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.gz");
    std::fs::write(&p, cut).unwrap();
    let e = open(&p, &TraceOptions::default()).unwrap_err().to_string();
    assert!(e.contains(": line 3001: gzip stream broken at byte "), "{e}");
}

#[test]
fn overlong_lines_are_malformed() {
    let mut text = String::from("0,1,512,w,0.1\n");
    text.push_str(&"9".repeat(3 << 20));
    text.push_str("\n0,2,512,r,0.2\n");
    let v: Vec<_> = mem("long", &text, &spc()).collect();
    assert_eq!(v[1].as_ref().unwrap_err().to_string(), "long:2: field 'line': longer than 1048576 bytes");
    let mut r = mem("long", &text, &TraceOptions { skip_bad: true, ..spc() });
    assert_eq!(r.by_ref().collect::<Result<Vec<_>, _>>().unwrap().len(), 2);
    assert_eq!(r.skipped_bad(), 1);
}

#[test]
fn devices_fifos_and_directories_are_not_trace_files() {
    let Err(e) = open("/dev/null".as_ref(), &TraceOptions::default()) else { panic!("/dev/null was opened as a trace") };
    assert_eq!(e.to_string(), "/dev/null: a character device/FIFO, not a trace file");
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("fifo");
    let st = std::process::Command::new("mkfifo").arg(&fifo).status().expect("run mkfifo");
    assert!(st.success(), "mkfifo failed");
    // Opening a FIFO with no writer would block: refused before opening.
    let Err(e) = open(&fifo, &TraceOptions::default()) else { panic!("a FIFO was opened as a trace") };
    assert_eq!(e.to_string(), format!("{}: a character device/FIFO, not a trace file", fifo.display()));
    let Err(e) = open(t.path(), &TraceOptions::default()) else { panic!("a directory was opened as a trace") };
    assert_eq!(e.to_string(), format!("{}: a directory, not a trace file", t.path().display()));
}

/// bzip2, xz and lz4 traces are named as such (only gzip and zstd are
/// read), not parsed as text ("cannot detect the trace format").
#[test]
fn compressions_not_read_are_named() {
    for (head, name) in [(&b"BZh91AY&SY"[..], "bzip2"), (&[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0, 0][..], "xz"), (&[0x04, 0x22, 0x4d, 0x18, 0x64, 0x40][..], "lz4")] {
        let e = match from_reader("t.bin", std::io::Cursor::new(head.to_vec()), &TraceOptions::default()) {
            Ok(mut r) => r.next().expect("an error").unwrap_err(),
            Err(e) => e,
        };
        let msg = e.to_string();
        assert!(msg.starts_with("t.bin: ") && msg.contains(&format!("{name}-compressed: only gzip and zstd are read")), "{name}: {msg}");
    }
}
