//! mosaic-adapt's integration tests as one binary: each file in `tests/` is a
//! module here (why, and the check that none is left out: mosaic-cli's
//! `tests/test_layout.rs`).

mod assign;
mod correlate;
mod group;
mod plan;
mod txn;
