//! Every integration test of mosaic-core, in one test binary: each file
//! in `tests/` is a module here.  One binary links once, and its tests share
//! the test threads, where a binary per file linked the whole dependency
//! graph again for each and ran them one after another.  `autotests = false`
//! in Cargo.toml; the workspace test `test_layout` (mosaic-cli) fails if a
//! file here is not declared below.

mod cache;
mod cache_bytes;
