//! Probe for Intel ISA-L (Debian/Ubuntu: `libisal-dev`; Fedora:
//! `isa-l-devel`).  When found, the `isal` kernel is compiled in
//! (`cfg(mosaic_isal)`); without it the crate still builds and runs on the
//! reed-solomon-erasure kernel alone.  `MOSAIC_NO_ISAL=1` skips the probe.
//!
//! The binding declares the few functions it calls itself, so only the
//! shared library is needed, not the headers: pkg-config first (`libisal.pc`),
//! then the usual library directories.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(mosaic_isal)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=MOSAIC_NO_ISAL");
    if std::env::var_os("MOSAIC_NO_ISAL").is_some_and(|v| !v.is_empty() && v != "0") {
        return;
    }
    if probe() {
        println!("cargo::rustc-cfg=mosaic_isal");
    } else {
        println!("cargo::warning=ISA-L (libisal) not found: mosaic-ec builds with the rse kernel only; install libisal-dev for the faster isal kernel");
        // Probe again once a package lands where the library would: a
        // build made before `apt install libisal-dev` would otherwise keep
        // the rse kernel until build.rs itself changed.  (Not /usr/lib,
        // which holds the others: Cargo would walk all of it every build.)
        for dir in library_dirs().iter().filter(|d| *d != "/usr/lib" && Path::new(d).is_dir()) {
            println!("cargo::rerun-if-changed={dir}");
        }
    }
}

/// Where the shared library is looked for after pkg-config.
fn library_dirs() -> [String; 5] {
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    [format!("/usr/lib/{arch}-linux-gnu"), "/usr/lib64".to_string(), "/usr/lib".to_string(), "/usr/local/lib".to_string(), "/usr/local/lib64".to_string()]
}

fn probe() -> bool {
    // pkg-config emits the link flags itself when it succeeds.
    if pkg_config::Config::new().probe("libisal").is_ok() {
        return true;
    }
    for dir in &library_dirs() {
        if Path::new(dir).join("libisal.so").exists() {
            println!("cargo::rustc-link-search=native={dir}");
            println!("cargo::rustc-link-lib=isal");
            return true;
        }
    }
    false
}
