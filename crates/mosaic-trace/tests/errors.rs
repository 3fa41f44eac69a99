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
    for scale in [f64::NAN, -1.0, f64::INFINITY] {
        let e = open(&fixture("spc.csv"), &TraceOptions { time_scale: scale, ..Default::default() }).unwrap_err();
        assert!(matches!(e, TraceError::Options(_)), "{e}");
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
