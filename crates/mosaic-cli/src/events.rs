//! Events of a served array: each is a `tracing` event (warn for failures,
//! stale members, scrub findings and warnings at open; info otherwise)
//! with fields `kind`, `array` and `member`, is kept in a short list of
//! the newest ([`Events::recent`], for `mosaic status`), and is handed to
//! `serve --on-event CMD` (as mdadm's `--monitor --program` and ZFS's
//! zedlets): the program runs through `sh -c` with the event in its
//! environment, one at a time in order, never holding up the array.
//!
//! ```text
//!   MOSAIC_EVENT    member-failed | member-stale | journal-replay |
//!                   spare-takeover | spare-added | spare-removed | re-add |
//!                   rebuild-start | rebuild-end | replace-start | replace-end |
//!                   grow-start | grow-end | scrub-start | scrub-end | scrub-finding |
//!                   open-warning (any other warning at open)
//!   MOSAIC_ARRAY    the array's UUID          MOSAIC_TIME    RFC 3339, UTC
//!   MOSAIC_MEMBER   the member index, when one is concerned
//!   MOSAIC_DETAIL   the event in words (the log line's message)
//! ```

use std::collections::VecDeque;
use std::sync::mpsc::{channel, Sender};
use std::sync::Mutex;

use serde::Serialize;

/// A member failed (after I/O errors while serving, or by request).
pub const MEMBER_FAILED: &str = "member-failed";
/// A member found behind the array at open (it missed writes): failed, never read.
pub const MEMBER_STALE: &str = "member-stale";
/// The open replayed records of the write-ahead journal (a crash or power cut before).
pub const JOURNAL_REPLAY: &str = "journal-replay";
/// A rebuild (asked for, or onto a hot spare) started.
pub const REBUILD_START: &str = "rebuild-start";
/// A rebuild ended (its detail says how, or why it stopped).
pub const REBUILD_END: &str = "rebuild-end";
/// A hot replace (`replace --hot`: a working member copied onto a new
/// drive) started.
pub const REPLACE_START: &str = "replace-start";
/// A hot replace ended (its detail says how, or why it stopped).
pub const REPLACE_END: &str = "replace-end";
/// A scrub started by itself (`serve --scrub-every`).
pub const SCRUB_START: &str = "scrub-start";
/// A scrub ended.
pub const SCRUB_END: &str = "scrub-end";
/// A hot spare took a failed member's place (a rebuild follows).
pub const SPARE_TAKEOVER: &str = "spare-takeover";
/// A hot spare was added.
pub const SPARE_ADDED: &str = "spare-added";
/// A hot spare was removed (its label erased).
pub const SPARE_REMOVED: &str = "spare-removed";
/// A failed remote member answers again with the session it left in: it
/// is put back in its slot (md's re-add; a rebuild of what it missed follows).
pub const RE_ADD: &str = "re-add";
/// A grow's restripe started or resumed.
pub const GROW_START: &str = "grow-start";
/// A grow's restripe ended, paused or stopped.
pub const GROW_END: &str = "grow-end";
/// A resync (a repairing scrub the server starts by itself for an array
/// without a journal that was not shut down cleanly, as md's) started.
pub const RESYNC_START: &str = "resync-start";
/// A resync ended (its detail says how many stripes it repaired, or why it stopped).
pub const RESYNC_END: &str = "resync-end";
/// One mismatch a scrub found.
pub const SCRUB_FINDING: &str = "scrub-finding";
/// Any other warning at open (a device not used, an unclean shutdown, damaged journal records, ...).
pub const OPEN_WARNING: &str = "open-warning";

/// How many events [`Events::recent`] keeps.
pub const RECENT: usize = 32;

/// One event.
#[derive(Debug, Clone)]
pub struct Event {
    pub kind: &'static str,
    pub member: Option<usize>,
    pub detail: String,
}

/// An event as [`Events::recent`] keeps it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Record {
    /// RFC 3339, UTC (`MOSAIC_TIME`).
    pub time: String,
    pub kind: &'static str,
    pub member: Option<usize>,
    pub detail: String,
}

/// Whether events of `kind` are logged as warnings.
fn is_warning(kind: &str) -> bool {
    matches!(kind, MEMBER_FAILED | MEMBER_STALE | SCRUB_FINDING | OPEN_WARNING)
}

/// Where events go: the log, the list of recent ones, and the `--on-event` program.
pub struct Events {
    array: String,
    recent: Mutex<VecDeque<Record>>,
    tx: Option<Mutex<Sender<(Event, String)>>>,
    runner: Option<std::thread::JoinHandle<()>>,
}

impl Events {
    /// Events of array `array`; `cmd` runs for each (in a thread of its own).
    pub fn new(array: &str, cmd: Option<String>) -> Events {
        let recent = Mutex::new(VecDeque::with_capacity(RECENT));
        let Some(cmd) = cmd else { return Events { array: array.to_string(), recent, tx: None, runner: None } };
        let (tx, rx) = channel::<(Event, String)>();
        let uuid = array.to_string();
        let runner = std::thread::spawn(move || {
            for (e, time) in rx {
                run(&cmd, &uuid, &e, &time);
            }
        });
        Events { array: array.to_string(), recent, tx: Some(Mutex::new(tx)), runner: Some(runner) }
    }

    /// Log `e`, keep it among the recent ones, and hand it to the program.
    pub fn emit(&self, e: Event) {
        let time = crate::cmd_serve::now_rfc3339();
        let (kind, array, member) = (e.kind, self.array.as_str(), e.member);
        if is_warning(kind) {
            tracing::warn!(%kind, %array, member, "mosaic serve: {}", e.detail);
        } else {
            tracing::info!(%kind, %array, member, "mosaic serve: {}", e.detail);
        }
        {
            let mut r = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            if r.len() == RECENT {
                r.pop_front();
            }
            r.push_back(Record { time: time.clone(), kind, member, detail: e.detail.clone() });
        }
        if let Some(tx) = &self.tx {
            let _ = tx.lock().unwrap_or_else(|p| p.into_inner()).send((e, time));
        }
    }

    /// The newest events (at most [`RECENT`]), oldest first.
    pub fn recent(&self) -> Vec<Record> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    }
}

impl Events {
    /// Wait until the program has run for every event emitted.
    pub fn finish(mut self) {
        self.tx = None;
        if let Some(r) = self.runner.take() {
            let _ = r.join();
        }
    }
}

fn run(cmd: &str, array: &str, e: &Event, time: &str) {
    let mut c = std::process::Command::new("sh");
    c.args(["-c", cmd]).env("MOSAIC_EVENT", e.kind).env("MOSAIC_ARRAY", array).env("MOSAIC_TIME", time).env("MOSAIC_DETAIL", &e.detail);
    match e.member {
        Some(m) => c.env("MOSAIC_MEMBER", m.to_string()),
        None => c.env_remove("MOSAIC_MEMBER"),
    };
    match c.status() {
        Ok(s) if !s.success() => tracing::warn!(kind = %e.kind, %array, "mosaic serve: --on-event program exited {s} for {}", e.kind),
        Err(err) => tracing::warn!(kind = %e.kind, %array, "mosaic serve: --on-event program: {err}"),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_events_are_kept_in_order_and_serialize() {
        let ev = Events::new("u", None);
        assert!(ev.recent().is_empty());
        for i in 0..RECENT + 8 {
            ev.emit(Event { kind: if i % 2 == 0 { MEMBER_FAILED } else { SCRUB_END }, member: (i % 2 == 0).then_some(i), detail: format!("event {i}") });
        }
        let r = ev.recent();
        assert_eq!(r.len(), RECENT);
        assert_eq!((r[0].detail.as_str(), r[RECENT - 1].detail.as_str()), ("event 8", "event 39"));
        assert_eq!((r[0].kind, r[0].member, r[1].member), (MEMBER_FAILED, Some(8), None));
        assert!(r[0].time.ends_with('Z') && r[0].time.len() == 24, "{}", r[0].time);
        let j = serde_json::to_value(&r[1]).unwrap();
        assert_eq!((j["kind"].as_str(), j["member"].is_null(), j["detail"].as_str()), (Some("scrub-end"), true, Some("event 9")));
        ev.finish();
    }

    #[test]
    fn failures_stale_members_findings_and_warnings_are_warnings() {
        assert!([MEMBER_FAILED, MEMBER_STALE, SCRUB_FINDING, OPEN_WARNING].iter().all(|k| is_warning(k)));
        assert!(![JOURNAL_REPLAY, REBUILD_START, REBUILD_END, SCRUB_END].iter().any(|k| is_warning(k)));
    }
}
