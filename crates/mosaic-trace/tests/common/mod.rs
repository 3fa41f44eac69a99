#![allow(dead_code)]

use std::path::PathBuf;

use mosaic_trace::{from_reader, open, Op, Request, TraceOptions, TraceReader};

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

pub fn req(time_ns: u64, op: Op, offset: u64, len: u64) -> Request {
    Request { time_ns, op, offset, len }
}

/// All requests of a fixture (panics on an error), and the spent reader.
pub fn read_all(name: &str, opts: &TraceOptions) -> (TraceReader, Vec<Request>) {
    let mut r = open(&fixture(name), opts).unwrap();
    let v = r.by_ref().map(|x| x.unwrap()).collect();
    (r, v)
}

pub fn mem(name: &str, text: &str, opts: &TraceOptions) -> TraceReader {
    from_reader(name, std::io::Cursor::new(text.as_bytes().to_vec()), opts).unwrap()
}

pub fn opts_device(d: &str) -> TraceOptions {
    TraceOptions { device: Some(d.into()), ..Default::default() }
}
