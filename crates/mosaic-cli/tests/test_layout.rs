//! The workspace's test layout: a crate with `autotests = false` runs its
//! integration tests as one binary, `tests/main.rs`, which declares each
//! file in `tests/` as a module.  One binary links once, where a binary per
//! file linked the whole dependency graph again for each, and its tests
//! share the test threads instead of one binary running after another.
//! A file in `tests/` that `main.rs` does not declare would never compile
//! nor run; this test finds such a file.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The module names `main.rs` declares (`mod name;` lines).
fn declared(main: &str) -> BTreeSet<String> {
    main.lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';').map(str::to_string))
        .collect()
}

/// The `.rs` files directly in `tests/` and the directories holding a
/// `mod.rs`, by module name, `main` left out.
fn modules_on_disk(tests: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in fs::read_dir(tests).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.is_dir() && p.join("mod.rs").exists() || p.extension().is_some_and(|x| x == "rs") && name != "main" {
            out.insert(name);
        }
    }
    out
}

#[test]
fn every_test_file_is_in_its_crates_test_binary() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut merged = 0;
    for e in fs::read_dir(crates).unwrap() {
        let dir = e.unwrap().path();
        let Ok(manifest) = fs::read_to_string(dir.join("Cargo.toml")) else { continue };
        if !manifest.lines().any(|l| l.trim() == "autotests = false") {
            continue;
        }
        assert!(manifest.contains("path = \"tests/main.rs\""), "{}: autotests = false needs the [[test]] tests/main.rs", dir.display());
        let tests = dir.join("tests");
        let main = fs::read_to_string(tests.join("main.rs")).unwrap();
        assert_eq!(declared(&main), modules_on_disk(&tests), "{}: tests/main.rs must declare every test file", dir.display());
        merged += 1;
    }
    assert!(merged >= 11, "only {merged} crates found with one test binary");
}
