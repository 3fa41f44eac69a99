//! The exit statuses of `mosaic`, in one place: [`HELP`] is what
//! `mosaic --help` prints (and the README repeats).

/// The table of exit statuses, as `mosaic --help` ends.
pub const HELP: &str = "\
Exit status:
  0  ok
  1  error (the message says what)
  2  usage (a bad flag or argument, as clap reports it)
  3  scrub found mismatches it did not repair
  4  degraded: an array is incomplete (assemble), runs degraded (status),
     left stripes unverified (scrub), or work paused because one is (adapt)
  5  failed: an array lost more members than its code tolerates (status)";

pub const OK: i32 = 0;
pub const MISMATCH: i32 = 3;
pub const DEGRADED: i32 = 4;
pub const FAILED: i32 = 5;
