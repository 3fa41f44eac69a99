//! mosaic-tier's integration tests as one binary: each file in `tests/` is a
//! module here (why, and the check that none is left out: mosaic-cli's
//! `tests/test_layout.rs`).

mod policy_support;
mod alloc;
mod geometry;
mod policy_alloc;
mod policy_basic;
mod policy_crash;
mod policy_large;
mod policy_move;
mod policy_prop;
mod prop;
mod run;
