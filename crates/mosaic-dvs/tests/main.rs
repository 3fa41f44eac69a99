//! mosaic-dvs's integration tests as one binary: each file in `tests/` is a
//! module here (why, and the check that none is left out: mosaic-cli's
//! `tests/test_layout.rs`).

mod array;
mod baseline_real;
mod discard;
mod hooked;
mod hot;
mod nopanic;
mod read_errors;
mod same_ops;
mod sim;
mod write_errors;
