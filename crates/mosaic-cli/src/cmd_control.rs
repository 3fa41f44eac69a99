//! `mosaic status`, `flush` and `stop`: through the control channel of a
//! running `mosaic serve` (`control.rs`), or directly on the disks when
//! the array is not served.

use std::path::Path;

use anyhow::{bail, Result};
use clap::Args;

use crate::control::{self, Request};
use crate::util::{human, print_json};

#[derive(Args)]
pub struct StatusArgs {
    /// The array (default: every array this user serves)
    #[arg(short = 'a', long = "array")]
    pub array: Option<String>,
    /// Print each array's status as JSON (a list; with --watch, one line per sample)
    #[arg(long)]
    pub json: bool,
    /// Print again every SECS seconds, with client ops/s and MiB/s over
    /// each interval (as iostat does), until interrupted
    #[arg(long, value_name = "SECS")]
    pub watch: Option<f64>,
}

#[derive(Args)]
pub struct ArrayArg {
    /// The array: a directory of member files, or a comma list of member files
    /// and block devices in any order
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Print the outcome as JSON (an object; `served` says whether a
    /// server did it)
    #[arg(long)]
    pub json: bool,
}

/// `mosaic status`: health, members and counters of one array, or of
/// every served one.  Exit 0 healthy, 4 degraded, 5 failed (the worst).
pub fn status(a: StatusArgs) -> Result<i32> {
    let Some(every) = a.watch else { return status_once(&a, &mut Default::default()) };
    if !(every > 0.0 && every.is_finite()) {
        bail!("--watch needs a positive number of seconds");
    }
    let mut last = std::collections::HashMap::new();
    loop {
        status_once(&a, &mut last)?;
        std::thread::sleep(std::time::Duration::from_secs_f64(every));
    }
}

/// Client rates of `b` since the sample in `last` (or since the server
/// started): ops/s and MiB/s, reads and writes.
fn rates(b: &mut serde_json::Value, last: &mut std::collections::HashMap<String, serde_json::Value>) {
    let c = b["clients"].clone();
    if c.is_null() {
        return;
    }
    let key = b["uuid"].as_str().unwrap_or_default().to_string();
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let prev = last.insert(key, c.clone()).unwrap_or_else(|| serde_json::json!({}));
    let secs = (f(&c, "seconds") - f(&prev, "seconds")).max(1e-9);
    let per = |k: &str| (f(&c, k) - f(&prev, k)) / secs;
    b["client_rates"] = serde_json::json!({
        "seconds": secs,
        "read_ops_per_s": per("reads"), "write_ops_per_s": per("writes"),
        "read_mib_per_s": per("read_bytes") / 1048576.0, "write_mib_per_s": per("write_bytes") / 1048576.0,
    });
}

fn status_once(a: &StatusArgs, last: &mut std::collections::HashMap<String, serde_json::Value>) -> Result<i32> {
    let mut bodies = match &a.array {
        Some(spec) => vec![one(spec)?],
        None => served()?,
    };
    for b in &mut bodies {
        rates(b, last);
    }
    if a.json && a.watch.is_some() {
        println!("{}", serde_json::Value::Array(bodies.clone()));
    } else if a.json {
        print_json(&serde_json::Value::Array(bodies.clone()))?;
    } else if bodies.is_empty() {
        println!("no arrays served by this user");
    }
    let mut code = crate::exit::OK;
    for b in &bodies {
        if !a.json {
            print!("{}", text(b));
        }
        code = code.max(match b["health"].as_str() {
            Some("healthy") => crate::exit::OK,
            Some("degraded") => crate::exit::DEGRADED,
            _ => crate::exit::FAILED,
        });
    }
    Ok(code)
}

/// The status of the array `spec` (what `status --json` lists for it):
/// through its server when one answers, else read from the disks.
pub(crate) fn one(spec: &str) -> Result<serde_json::Value> {
    if let Some(b) = control::ask(spec, &Request::Status)? {
        return Ok(b);
    }
    match mosaic_volume::open(spec, false) {
        Ok(vol) => Ok(control::status(vol.as_ref(), false)),
        Err(e) => failed_status(spec, e),
    }
}

/// The status of an array that cannot be opened because too few of its
/// members are there or fresh (md's "inactive"): failed, exit 5, with the
/// members its labels name; any other error stays an error.
fn failed_status(spec: &str, e: mosaic_volume::VolumeError) -> Result<serde_json::Value> {
    let paths: Vec<std::path::PathBuf> = spec.split(',').map(|p| std::path::PathBuf::from(p.trim())).collect();
    let found = mosaic_volume::scan::scan(&paths).unwrap_or_default();
    let [f] = found.as_slice() else { return Err(e.into()) };
    if f.complete {
        return Err(e.into());
    }
    let why = crate::exit::error_text(&anyhow::Error::from(e));
    // The members as every status lists them (`VolumeMember`).
    let member = |index: usize, path: &str, present: bool, failed: bool| mosaic_volume::VolumeMember {
        index,
        state: if failed { mosaic_core::MemberState::Failed } else { mosaic_core::MemberState::Active },
        present,
        path: path.to_string(),
        uuid: None,
        errors: Default::default(),
        host: mosaic_array::domain::LOCAL.into(),
        remote: None,
        readd: false,
        replacing: None,
        write_mostly: false,
        inner_out: Vec::new(),
    };
    let mut members: Vec<mosaic_volume::VolumeMember> = f.found.iter().map(|m| member(m.index, &m.path, true, m.stale)).collect();
    members.extend(f.missing.iter().map(|&i| member(i, "", false, true)));
    members.sort_by_key(|m| m.index);
    Ok(serde_json::json!({
        "uuid": f.uuid,
        "kind": f.kind,
        "level": f.level,
        "served": false,
        "health": "failed",
        "unassembled": why,
        "members": members,
        "events": [],
    }))
}

/// Every array with a live control socket of this user.
fn served() -> Result<Vec<serde_json::Value>> {
    let dir = control::runtime_dir();
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(&dir) else { return Ok(out) };
    let mut socks: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "sock")).collect();
    socks.sort();
    for s in socks {
        // One server that does not answer does not hide the others.
        match control::ask_socket(&s, &Request::Status) {
            Ok(Some(b)) => out.push(b),
            Ok(None) => {}
            Err(e) => tracing::warn!("mosaic status: {}", crate::exit::error_text(&e)),
        }
    }
    Ok(out)
}

fn text(b: &serde_json::Value) -> String {
    let mut s = format!(
        "array {} ({} {}): {}{}\n",
        b["uuid"].as_str().unwrap_or("?"),
        b["kind"].as_str().unwrap_or("?"),
        b["level"].as_str().unwrap_or("?"),
        b["health"].as_str().unwrap_or("?").to_uppercase(),
        if b["served"] == true { ", served" } else { "" }
    );
    if let Some(why) = b["unassembled"].as_str() {
        s += &format!("  cannot be opened: {why}\n");
    }
    if let Some(why) = b["stopped"].as_str() {
        s += &format!("  stopped: {why}; close the array and open it again\n");
    }
    if let Some(why) = b["journal_failed"].as_str() {
        s += &format!("  journal failed: {why}; writes are refused, reads work; open the array again once the journal device works\n");
    }
    if b["resync_needed"] == true {
        s += "  resync needed: not shut down cleanly, and no journal: code may disagree with data where writes were cut off (a server resyncs by itself; else mosaic scrub --repair)\n";
        if let Some(from) = b["resync_from"].as_u64() {
            s += &format!("  resync verified the stripes before {from} already: the next resync starts there\n");
        }
    }
    if let Ok(r) = serde_json::from_value::<mosaic_array::ScrubRecord>(b["last_scrub"].clone()) {
        s += &format!("  last scrub: {}\n", r.line(mosaic_array::now_secs()));
    }
    for side in ["fast", "slow"] {
        if let Ok(r) = serde_json::from_value::<mosaic_array::ScrubRecord>(b["tier_last_scrub"][side].clone()) {
            s += &format!("  last scrub ({side} tier): {}\n", r.line(mosaic_array::now_secs()));
        }
    }
    s += "  member  state      errors(r/w/cksum)  device\n";
    for m in b["members"].as_array().into_iter().flatten() {
        let st = m["state"]["state"].as_str().unwrap_or("?");
        let errs = format!("{}/{}/{}", m["errors"]["read"], m["errors"]["write"], m["errors"]["checksum"]);
        let path = m["path"].as_str().unwrap_or("");
        // A failed member is set aside (not open) on purpose: "missing"
        // only when its device is not there to open.
        let gone = m["present"] == false && (st != "failed" || !Path::new(path).exists());
        let readd = if m["readd"] == true { "  (re-addable: put its device back with mosaic replace)" } else { "" };
        let hot = m["replacing"].as_str().map(|d| format!("  (hot replace onto {d})")).unwrap_or_default();
        let hot = if m["write_mostly"] == true { format!("{hot}  (write-mostly)") } else { hot };
        let hot = match m["errors"]["corrected"].as_u64() {
            Some(n) if n > 0 => format!("{hot}  ({n} read error(s) corrected from the other members)"),
            _ => hot,
        };
        s += &format!("  {:>6}  {:<10} {:>17}  {path}{}{readd}{hot}\n", m["index"].as_u64().unwrap_or(0), st, errs, if gone { "  (missing)" } else { "" });
        for l in m["inner_out"].as_array().into_iter().flatten() {
            s += &format!("  {:>6}  {:<10} {:>17}  {}\n", "", "degraded", "", l.as_str().unwrap_or(""));
        }
    }
    for sp in b["spares"].as_array().into_iter().flatten() {
        s += &format!("   spare  {:<10} {:>17}  {}\n", "ready", "", sp.as_str().unwrap_or(""));
    }
    s += &remote_lines(b);
    if !b["device_reads"].is_null() {
        s += &format!("  device reads {}, writes {}\n", b["device_reads"], b["device_writes"]);
    }
    let j = &b["journal"];
    if !j.is_null() {
        let (u, c) = (j["used"].as_f64().unwrap_or(0.0), j["capacity"].as_f64().unwrap_or(1.0).max(1.0));
        s += &format!("  journal {:.1}% full ({} of {})\n", 100.0 * u / c, human(u as u64), human(c as u64));
    }
    let bm = &b["bitmap"];
    if !bm.is_null() {
        s += &format!("  bitmap {} of {} regions dirty ({} a bit)\n", bm["dirty_regions"], bm["regions"], human(bm["chunk_bytes"].as_u64().unwrap_or(0)));
    }
    let r = &b["client_rates"];
    if !r.is_null() {
        let g = |k: &str| r[k].as_f64().unwrap_or(0.0);
        s += &format!(
            "  clients over {:.1} s: read {:.0} ops/s {:.1} MiB/s, write {:.0} ops/s {:.1} MiB/s\n",
            g("seconds"), g("read_ops_per_s"), g("read_mib_per_s"), g("write_ops_per_s"), g("write_mib_per_s")
        );
    }
    let gr = &b["grow"];
    if !gr.is_null() {
        s += &format!("  grow from {} members: {} of {} stripes restriped\n", gr["from_members"], gr["done_stripes"], gr["total_stripes"]);
    }
    let m = &b["maintenance"];
    if !m.is_null() {
        let (d, t) = (m["done_bytes"].as_f64().unwrap_or(0.0), m["total_bytes"].as_f64().unwrap_or(1.0).max(1.0));
        s += &format!("  {} {:.1}% at {:.1} MiB/s, {:.0} s left\n", m["what"].as_str().unwrap_or("?"), 100.0 * d / t, m["mib_per_s"].as_f64().unwrap_or(0.0), m["eta_s"].as_f64().unwrap_or(0.0));
    }
    for f in b["failed_while_open"].as_array().into_iter().flatten() {
        s += &format!("  member {} failed while open: {}\n", f[0], f[1].as_str().unwrap_or(""));
    }
    let ev = b["events"].as_array().cloned().unwrap_or_default();
    if !ev.is_empty() {
        s += "  last events:\n";
        for e in ev.iter().rev().take(5).rev() {
            s += &format!("    {} {}: {}\n", e["time"].as_str().unwrap_or(""), e["kind"].as_str().unwrap_or(""), e["detail"].as_str().unwrap_or(""));
        }
    }
    s
}

/// One line per remote member: its host, how its requests answer, and
/// SLOW when recent ones average above the threshold.
fn remote_lines(b: &serde_json::Value) -> String {
    let mut s = String::new();
    for m in b["members"].as_array().into_iter().flatten().filter(|m| m["remote"].is_object()) {
        let l = &m["remote"];
        let f = |k: &str| l[k].as_f64().unwrap_or(0.0);
        s += &format!(
            "  remote {} on host {}: {} requests, recent reads {:.1} ms, writes {:.1} ms, flushes {:.1} ms, max {:.1} ms, {} over {:.0} ms{}\n",
            m["index"],
            m["host"].as_str().unwrap_or("?"),
            l["requests"],
            f("recent_read_ms"),
            f("recent_write_ms"),
            f("recent_flush_ms"),
            f("max_ms"),
            l["slow_requests"],
            f("threshold_ms"),
            if l["slow"] == true { "  SLOW" } else { "" }
        );
    }
    s
}

/// `mosaic flush`: make every completed write durable.
pub fn flush(a: ArrayArg) -> Result<i32> {
    let served = control::ask(&a.array, &Request::Flush)?.is_some();
    if !served {
        let vol = mosaic_volume::open(&a.array, true)?;
        vol.flush()?;
        vol.close()?;
    }
    if a.json {
        print_json(&serde_json::json!({ "flushed": true, "served": served }))?;
    } else {
        println!("flushed");
    }
    Ok(0)
}

/// `mosaic stop`: ask the server of the array to stop (drain, flush, close).
pub fn stop(a: ArrayArg) -> Result<i32> {
    if control::ask(&a.array, &Request::Stop)?.is_none() {
        bail!("no mosaic serve answers for {}", a.array);
    }
    if a.json {
        print_json(&serde_json::json!({ "stopping": true, "served": true }))?;
    } else {
        println!("stopping");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    /// A member's corrected read errors are named on its line; none, no
    /// words.
    #[test]
    fn corrected_read_errors_are_named_on_the_members_line() {
        let member = |i: u64, corrected: u64| {
            serde_json::json!({"index": i, "state": {"state": "active"}, "present": true, "path": format!("m{i}"),
                "errors": {"read": corrected + 1, "write": 0, "checksum": 0, "corrected": corrected}})
        };
        let b = serde_json::json!({"uuid": "u", "kind": "fixed", "members": [member(0, 0), member(1, 3)]});
        let t = super::text(&b);
        let line = |i: usize| t.lines().find(|l| l.contains(&format!(" m{i}"))).unwrap_or_default().to_string();
        assert!(line(1).contains("4/0/0") && line(1).contains("(3 read error(s) corrected from the other members)"), "{t}");
        assert!(line(0).contains("1/0/0") && !line(0).contains("corrected"), "{t}");
    }
}
