//! The log: `tracing` events on stderr, set up once in `main` for every
//! command (the server is the one that logs; other commands print their
//! output and errors as before).
//!
//! ```text
//!   --log-format text   2026-01-02T03:04:05.678Z  WARN mosaic serve: member 1 (...) failed ... kind=member-failed array=UUID member=1
//!   --log-format json   {"timestamp":"2026-01-02T03:04:05.678Z","level":"WARN","message":"mosaic serve: member 1 ...",
//!                        "kind":"member-failed","array":"UUID","member":1,"target":"mosaic::events"}
//!   --log-level LEVEL   error | warn | info | debug | trace, or RUST_LOG-style directives
//!                       (default: RUST_LOG when set, else info)
//! ```
//!
//! Timestamps are RFC 3339 in UTC with milliseconds, as `MOSAIC_TIME` of
//! `serve --on-event`.

use std::io::IsTerminal;
use std::sync::OnceLock;

use clap::ValueEnum;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::EnvFilter;

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    /// Timestamp, level, message, then the fields as key=value
    #[default]
    Text,
    /// One JSON object a line: timestamp, level, message, the fields, target
    Json,
}

impl LogFormat {
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

/// The level when neither `--log-level` nor `RUST_LOG` says.
const DEFAULT_LEVEL: &str = "info";

/// What `init` was given, for the children `serve --config` starts.
static SETTINGS: OnceLock<(LogFormat, Option<String>)> = OnceLock::new();

/// clap value parser for `--log-level`: a level or filter directives.
pub fn parse_level(s: &str) -> Result<String, String> {
    EnvFilter::builder().parse(s).map(|_| s.to_string()).map_err(|e| format!("{s:?}: {e} (give error, warn, info, debug or trace)"))
}

/// RFC 3339 UTC timestamps with milliseconds.
struct Rfc3339;

impl FormatTime for Rfc3339 {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        w.write_str(&crate::cmd_serve::now_rfc3339())
    }
}

/// Install the subscriber: stderr, `format`, `level` (else `RUST_LOG`,
/// else info).  Once; later calls do nothing.
pub fn init(format: LogFormat, level: Option<&str>) {
    if SETTINGS.set((format, level.map(str::to_string))).is_err() {
        return;
    }
    let filter = match level {
        Some(l) => EnvFilter::builder().parse_lossy(l),
        None => match std::env::var("RUST_LOG") {
            Ok(v) if !v.trim().is_empty() => EnvFilter::builder().parse(&v).unwrap_or_else(|e| {
                eprintln!("warning: RUST_LOG={v:?} is not a log filter ({e}); logging at {DEFAULT_LEVEL}");
                EnvFilter::new(DEFAULT_LEVEL)
            }),
            _ => EnvFilter::new(DEFAULT_LEVEL),
        },
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_timer(Rfc3339);
    let _ = match format {
        LogFormat::Text => {
            let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").map_or(true, |v| v.is_empty());
            builder.with_target(false).with_ansi(colour).try_init()
        }
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).with_span_list(false).try_init(),
    };
}

/// The global log flags as given, to pass on to a child `mosaic`.
pub fn child_args() -> Vec<String> {
    let Some((format, level)) = SETTINGS.get() else { return Vec::new() };
    let mut v = vec!["--log-format".to_string(), format.name().to_string()];
    if let Some(l) = level {
        v.extend(["--log-level".to_string(), l.clone()]);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_directives_parse_and_nonsense_is_refused() {
        assert_eq!(parse_level("debug").as_deref(), Ok("debug"));
        assert_eq!(parse_level("info,mosaic_nbd=warn").as_deref(), Ok("info,mosaic_nbd=warn"));
        assert!(parse_level("loud=!!").is_err());
    }
}
