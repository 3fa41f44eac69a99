//! Running the `mosaic` binary from CLI tests.

#![allow(dead_code)]

use std::process::{Command, Output};

pub fn mosaic(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mosaic")).args(args).output().expect("run mosaic")
}

/// Run, expect success, return stdout.
pub fn ok(args: &[&str]) -> String {
    let o = mosaic(args);
    assert!(o.status.success(), "mosaic {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Run, expect failure with one clear error line and no panic, return stderr.
pub fn fails(args: &[&str]) -> String {
    let o = mosaic(args);
    assert!(!o.status.success(), "mosaic {args:?} should fail; stdout: {}", String::from_utf8_lossy(&o.stdout));
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(e.starts_with("error: "), "no clear error line: {e}");
    assert!(!e.contains("panicked"), "panic: {e}");
    e
}

/// Parse `--json` output, naming it when it is not JSON.
pub fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("bad json ({e}): {s}"))
}
