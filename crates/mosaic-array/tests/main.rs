//! mosaic-array's integration tests as one binary: each file in `tests/` is a
//! module here (why, and the check that none is left out: mosaic-cli's
//! `tests/test_layout.rs`).

mod common;
mod bitmap;
mod cache_program;
mod cached;
mod cached_failures;
mod cbro_columns;
mod crash;
mod grow;
mod grow_size;
mod hot;
mod journal_damage;
mod journal_fail;
mod maint;
mod maint_failures;
mod nested;
mod nopanic;
mod prop;
mod read_errors;
mod resync;
mod scrub_locate;
mod second_failure;
mod stale;
mod takeover;
mod write_mostly;
