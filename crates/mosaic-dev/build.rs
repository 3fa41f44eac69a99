//! Probe for libnbd (Debian/Ubuntu: `libnbd-dev`; Fedora: `libnbd-devel`),
//! the NBD client library behind remote members (`nbd://`, `nbds://`,
//! `nbd+unix://`).  When found, `cfg(mosaic_libnbd)` compiles the binding
//! in; without it the crate builds, and opening a remote member says how
//! to get it.  `MOSAIC_NO_LIBNBD=1` skips the probe.
//!
//! Nothing is linked: the binding declares the few functions it calls and
//! loads `libnbd.so.0` when the first remote member connects, so a process
//! with none never maps libnbd and the libraries it brings.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(mosaic_libnbd)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=MOSAIC_NO_LIBNBD");
    if std::env::var_os("MOSAIC_NO_LIBNBD").is_some_and(|v| !v.is_empty() && v != "0") {
        return;
    }
    if probe() {
        println!("cargo::rustc-cfg=mosaic_libnbd");
    } else {
        println!("cargo::warning=libnbd not found: remote members (nbd:// URIs) are unavailable; install libnbd-dev");
    }
}

fn probe() -> bool {
    if pkg_config::Config::new().cargo_metadata(false).probe("libnbd").is_ok() {
        return true;
    }
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let dirs = [format!("/usr/lib/{arch}-linux-gnu"), "/usr/lib64".to_string(), "/usr/lib".to_string(), "/usr/local/lib".to_string()];
    dirs.iter().any(|dir| Path::new(dir).join("libnbd.so").exists())
}
