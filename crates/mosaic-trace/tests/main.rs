//! mosaic-trace's integration tests as one binary: each file in `tests/` is a
//! module here (why, and the check that none is left out: mosaic-cli's
//! `tests/test_layout.rs`).

mod common;
mod compress;
mod errors;
mod golden;
mod nopanic;
mod stats;
mod writer;
