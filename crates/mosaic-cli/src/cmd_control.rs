//! `mosaic status`, `flush` and `stop`: through the control channel of a
//! running `mosaic serve` (`control.rs`), or directly on the disks when
//! the array is not served.

use anyhow::{bail, Result};
use clap::Args;

use crate::control::{self, Request};
use crate::util::print_json;

#[derive(Args)]
pub struct StatusArgs {
    /// The array (default: every array this user serves)
    #[arg(short = 'a', long = "array")]
    pub array: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ArrayArg {
    #[arg(short = 'a', long = "array")]
    pub array: String,
}

/// `mosaic status`: health, members and counters of one array, or of
/// every served one.  Exit 0 healthy, 4 degraded, 5 failed (the worst).
pub fn status(a: StatusArgs) -> Result<i32> {
    let bodies = match &a.array {
        Some(spec) => vec![one(spec)?],
        None => served()?,
    };
    if a.json {
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

fn one(spec: &str) -> Result<serde_json::Value> {
    if let Some(b) = control::ask(spec, &Request::Status)? {
        return Ok(b);
    }
    let vol = mosaic_volume::open(spec, false)?;
    Ok(control::status(vol.as_ref(), false))
}

/// Every array with a live control socket of this user.
fn served() -> Result<Vec<serde_json::Value>> {
    let dir = control::runtime_dir();
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(&dir) else { return Ok(out) };
    let mut socks: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "sock")).collect();
    socks.sort();
    for s in socks {
        if let Some(b) = control::ask_socket(&s, &Request::Status)? {
            out.push(b);
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
    for m in b["members"].as_array().into_iter().flatten() {
        let st = m["state"]["state"].as_str().unwrap_or("?");
        s += &format!("  {:>3}  {:<10} {}{}\n", m["index"], st, m["path"].as_str().unwrap_or(""), if m["present"] == false { "  (missing)" } else { "" });
    }
    s += &format!("  device reads {}, writes {}\n", b["device_reads"], b["device_writes"]);
    let m = &b["maintenance"];
    if !m.is_null() {
        let (d, t) = (m["done_bytes"].as_f64().unwrap_or(0.0), m["total_bytes"].as_f64().unwrap_or(1.0).max(1.0));
        s += &format!("  {} {:.1}% at {:.1} MiB/s, {:.0} s left\n", m["what"].as_str().unwrap_or("?"), 100.0 * d / t, m["mib_per_s"].as_f64().unwrap_or(0.0), m["eta_s"].as_f64().unwrap_or(0.0));
    }
    for f in b["failed_while_open"].as_array().into_iter().flatten() {
        s += &format!("  member {} failed while open: {}\n", f[0], f[1].as_str().unwrap_or(""));
    }
    s
}

/// `mosaic flush`: make every completed write durable.
pub fn flush(a: ArrayArg) -> Result<i32> {
    if control::ask(&a.array, &Request::Flush)?.is_none() {
        let vol = mosaic_volume::open(&a.array, true)?;
        vol.flush()?;
        vol.close()?;
    }
    println!("flushed");
    Ok(0)
}

/// `mosaic stop`: ask the server of the array to stop (drain, flush, close).
pub fn stop(a: ArrayArg) -> Result<i32> {
    if control::ask(&a.array, &Request::Stop)?.is_none() {
        bail!("no mosaic serve answers for {}", a.array);
    }
    println!("stopping");
    Ok(0)
}
