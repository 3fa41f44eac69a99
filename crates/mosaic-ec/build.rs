//! Probe for Intel ISA-L (Debian: libisal-dev).  When found, the `isal`
//! kernel is compiled in (`cfg(mosaic_isal)`); without it the crate still
//! builds and uses the reed-solomon-erasure kernel.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(mosaic_isal)");
    println!("cargo:rerun-if-env-changed=MOSAIC_NO_ISAL");
    if std::env::var_os("MOSAIC_NO_ISAL").is_some() {
        return;
    }
    let found = pkg_config::Config::new().probe("libisal").is_ok() || {
        let lib = ["/usr/lib/x86_64-linux-gnu/libisal.so", "/usr/lib/libisal.so", "/usr/local/lib/libisal.so"]
            .iter()
            .find(|p| std::path::Path::new(p).exists());
        if let Some(p) = lib {
            let dir = std::path::Path::new(p).parent().unwrap();
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=isal");
            true
        } else {
            false
        }
    };
    if found {
        println!("cargo:rustc-cfg=mosaic_isal");
    }
}
