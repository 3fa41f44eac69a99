//! mosaic-remap's integration tests as one binary: each file in `tests/` is a
//! module here (why, and the check that none is left out: mosaic-cli's
//! `tests/test_layout.rs`).

mod support;
mod basic;
mod crash;
mod moves;
mod prop;
mod sim;
