//! Events of a served array, logged with a timestamp and handed to
//! `serve --on-event CMD` (as mdadm's `--monitor --program` and ZFS's
//! zedlets): the program runs through `sh -c` with the event in its
//! environment, one at a time in order, never holding up the array.
//!
//! ```text
//!   MOSAIC_EVENT    member-failed | rebuild-start | rebuild-end | scrub-end |
//!                   scrub-finding | open-warning (stale member, journal replay, ...)
//!   MOSAIC_ARRAY    the array's UUID          MOSAIC_TIME    RFC 3339, UTC
//!   MOSAIC_MEMBER   the member index, when one is concerned
//!   MOSAIC_DETAIL   the event in words (the log line after its timestamp)
//! ```

use std::sync::mpsc::{channel, Sender};
use std::sync::Mutex;

/// One event.
#[derive(Debug, Clone)]
pub struct Event {
    pub kind: &'static str,
    pub member: Option<usize>,
    pub detail: String,
}

/// Where events go: the log, and the `--on-event` program.
pub struct Events {
    /// The newest events (time, event), for `mosaic status`.
    recent: Mutex<std::collections::VecDeque<(String, Event)>>,
    tx: Option<Mutex<Sender<(Event, String)>>>,
    runner: Option<std::thread::JoinHandle<()>>,
}

impl Events {
    /// Events of array `array`; `cmd` runs for each (in a thread of its own).
    pub fn new(array: &str, cmd: Option<String>) -> Events {
        let Some(cmd) = cmd else { return Events { recent: Default::default(), tx: None, runner: None } };
        let (tx, rx) = channel::<(Event, String)>();
        let array = array.to_string();
        let runner = std::thread::spawn(move || {
            for (e, time) in rx {
                run(&cmd, &array, &e, &time);
            }
        });
        Events { recent: Default::default(), tx: Some(Mutex::new(tx)), runner: Some(runner) }
    }

    /// Log `e` and hand it to the program.
    pub fn emit(&self, e: Event) {
        let time = crate::cmd_serve::now_rfc3339();
        eprintln!("mosaic serve: {time}: {}", e.detail);
        {
            let mut r = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            if r.len() == RECENT {
                r.pop_front();
            }
            r.push_back((time.clone(), e.clone()));
        }
        if let Some(tx) = &self.tx {
            let _ = tx.lock().unwrap_or_else(|p| p.into_inner()).send((e, time));
        }
    }
}

/// How many events `status` shows.
const RECENT: usize = 32;

impl Events {
    /// The newest events, oldest first.
    pub fn recent(&self) -> Vec<serde_json::Value> {
        let r = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        r.iter().map(|(t, e)| serde_json::json!({ "time": t, "kind": e.kind, "member": e.member, "detail": e.detail })).collect()
    }

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
        Ok(s) if !s.success() => eprintln!("mosaic serve: --on-event program exited {s} for {}", e.kind),
        Err(err) => eprintln!("mosaic serve: --on-event program: {err}"),
        _ => {}
    }
}
