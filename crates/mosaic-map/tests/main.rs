//! mosaic-map's integration tests as one binary: each file in `tests/` is a
//! module here (why, and the check that none is left out: mosaic-cli's
//! `tests/test_layout.rs`).

mod abort;
mod alloc;
mod blocklog;
mod map_powercut;
mod migrate_powercut;
mod moves;
mod nopanic;
