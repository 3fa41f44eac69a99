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

/// An error and its causes, as anyhow's `{:#}` joins them, but a cause
/// whose text the message holds already is not printed again: errors that
/// show their source and chain it too (thiserror's `"{0}"` over
/// `#[from] io::Error`) said everything twice.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let t = cause.to_string();
        if out.contains(&t) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As thiserror's `#[error("{0}")] Io(#[from] io::Error)`: shows its
    /// source and chains it.
    #[derive(Debug)]
    struct Shows(std::io::Error);
    impl std::fmt::Display for Shows {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.0.fmt(f)
        }
    }
    impl std::error::Error for Shows {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// A cause already in the message is said once; a new one is added.
    #[test]
    fn a_cause_the_message_shows_is_not_repeated() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "/x: not an emulated zoned drive");
        let e = anyhow::Error::from(Shows(io()));
        assert_eq!(format!("{e:#}"), "/x: not an emulated zoned drive: /x: not an emulated zoned drive");
        assert_eq!(error_text(&e), "/x: not an emulated zoned drive");
        let e = anyhow::Error::from(io()).context("adding a spare");
        assert_eq!(error_text(&e), "adding a spare: /x: not an emulated zoned drive");
    }
}
