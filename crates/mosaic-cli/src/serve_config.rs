//! `mosaic serve --config FILE`: serve every array a TOML file lists, as a
//! service does (docs/SERVICE.md, docs/mosaic.service).
//!
//! ```text
//!   [defaults]                 optional: keys every [[serve]] table gets
//!   on-event = "/usr/local/bin/mosaic-event"
//!
//!   [[serve]]                  one `mosaic serve` each; its keys are serve's
//!   array = "/srv/mosaic/a"    long options without the dashes:
//!   listen = "127.0.0.1:10809" true/false for flags, a string or number otherwise
//!   maint-rate = "64M"
//!
//!   the whole file checked first (toml + clap's own parsers of serve's options,
//!   unknown keys, missing arrays, two tables for one array or one address:
//!   errors name FILE:LINE) ─▶ one child `mosaic [--log-*] serve --array=... ...`
//!   per table, each in its own process group, SIGTERM'd if this process dies
//!
//!   SIGTERM/SIGINT ─▶ forwarded to every child (a second one too: they exit at once)
//!   a child exits 0 (mosaic stop -a) ─▶ the others go on
//!   a child fails ─▶ the others are stopped cleanly, exit 1 (systemd restarts the unit)
//! ```
//!
//! The options are serve's own, through clap: the file knows no option the
//! command line does not, and a value is checked by the same parser.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, FromArgMatches};
use serde::Deserialize;
use toml::Spanned;

use crate::cmd_serve::ServeArgs;

/// A table of options, each key and value with where it stands in the file.
type Table = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

/// The file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    defaults: Option<Table>,
    #[serde(default)]
    serve: Vec<Spanned<Table>>,
}

/// serve's options a config file may not set: they are not about one
/// array's server, or not for a service (`run`, whose command's end stops
/// its server; `exit-with-parent`: every child stops with the parent
/// already).
const NOT_IN_FILE: &[&str] = &["config", "demo", "run", "exit-with-parent"];
/// Options that name one array's server: in [[serve]] tables only.
const NOT_IN_DEFAULTS: &[&str] = &["array", "listen", "socket", "pidfile"];

/// One `[[serve]]` table, checked.
#[derive(Debug)]
pub struct Entry {
    /// Line of the table in the file.
    pub line: usize,
    /// serve's arguments (`--key=value`, `--flag`).
    pub argv: Vec<String>,
    pub array: String,
    /// Its UUID as the disks tell it (the `array` field of its log lines).
    pub uuid: Option<String>,
    /// Where it listens, as a user reads it.
    pub at: String,
}

/// The line (from 1) of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

/// A value as a command-line argument of `--key`.
fn arg_value(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        _ => None,
    }
}

/// Where a table's keys came from: the key, its value, its line.
struct Key<'a> {
    name: &'a str,
    value: &'a toml::Value,
    line: usize,
}

/// Read and check `path`; the arrays to serve.
pub fn load(path: &Path) -> Result<Vec<Entry>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// Check the config `text` (named `name` in errors).
pub fn parse(text: &str, name: &str) -> Result<Vec<Entry>> {
    let file: ConfigFile = toml::from_str(text).map_err(|e| anyhow!("{name}: {}", e.to_string().trim_end()))?;
    let at = |line: usize| format!("{name}:{line}");
    let cmd = ServeArgs::augment_args(clap::Command::new("serve").no_binary_name(true));
    // serve's long options: whether each takes a value.
    let options: BTreeMap<String, bool> =
        cmd.get_arguments().filter_map(|a| a.get_long().map(|l| (l.to_string(), a.get_action().takes_values()))).collect();
    let check_key = |k: &Key, table: &str| -> Result<()> {
        if NOT_IN_FILE.contains(&k.name) {
            bail!("{}: `{}` is not for a config file", at(k.line), k.name);
        }
        if !options.contains_key(k.name) {
            let hint = match k.name.replace('_', "-") {
                h if h != k.name && options.contains_key(&h) => format!("; did you mean `{h}`?"),
                _ => String::new(),
            };
            bail!("{}: unknown key `{}` in {table} (mosaic serve has no --{}){hint}", at(k.line), k.name, k.name);
        }
        Ok(())
    };
    let defaults: Vec<Key> = file
        .defaults
        .iter()
        .flatten()
        .map(|(k, v)| Key { name: k.get_ref().as_str(), value: v.get_ref(), line: line_of(text, k.span().start) })
        .collect();
    for k in &defaults {
        check_key(k, "[defaults]")?;
        if NOT_IN_DEFAULTS.contains(&k.name) {
            bail!("{}: `{}` names one array's server: give it in each [[serve]] table, not in [defaults]", at(k.line), k.name);
        }
    }
    if file.serve.is_empty() {
        bail!("{name}: no [[serve]] table: nothing to serve");
    }
    let mut entries = Vec::new();
    for table in &file.serve {
        let line = line_of(text, table.span().start);
        let own: Vec<Key> =
            table.get_ref().iter().map(|(k, v)| Key { name: k.get_ref().as_str(), value: v.get_ref(), line: line_of(text, k.span().start) }).collect();
        for k in &own {
            check_key(k, "[[serve]]")?;
        }
        // The table's keys over the defaults'.
        let mut keys: BTreeMap<&str, &Key> = defaults.iter().map(|k| (k.name, k)).collect();
        keys.extend(own.iter().map(|k| (k.name, k)));
        let Some(array_key) = keys.get("array") else { bail!("{}: this [[serve]] table has no `array` (the array to serve)", at(line)) };
        let mut argv = Vec::new();
        for k in keys.values() {
            if options[k.name] {
                let Some(v) = arg_value(k.value) else { bail!("{}: `{}` takes a string or a number", at(k.line), k.name) };
                argv.push(format!("--{}={v}", k.name));
            } else {
                match k.value {
                    toml::Value::Boolean(true) => argv.push(format!("--{}", k.name)),
                    toml::Value::Boolean(false) => {}
                    _ => bail!("{}: `{}` is a switch: give true or false", at(k.line), k.name),
                }
            }
        }
        // The values through serve's own parsers (sizes, seconds, ranges, conflicts).
        let args = cmd.clone().try_get_matches_from(&argv).and_then(|m| ServeArgs::from_arg_matches(&m)).map_err(|e| {
            let msg = e.to_string();
            let msg = msg.lines().next().unwrap_or_default().trim_start_matches("error: ").to_string();
            // Name the line of the key the message is about, if one is.
            let l = keys.values().find(|k| msg.contains(&format!("--{}", k.name))).map_or(line, |k| k.line);
            anyhow!("{}: {msg}", at(l))
        })?;
        let array = args.array.clone().unwrap_or_default();
        for p in array.split(',').map(str::trim) {
            if !Path::new(p).exists() {
                bail!("{}: array {array}: {p} does not exist", at(array_key.line));
            }
        }
        let at_text = match &args.socket {
            Some(s) => format!("unix socket {}", s.display()),
            None => args.listen_addr().to_string(),
        };
        let uuid = crate::control::array_uuid(&array);
        entries.push((Entry { line, argv, array, uuid, at: at_text }, args, array_key.line, keys.get("listen").or(keys.get("socket")).map(|k| k.line)));
    }
    // Two tables for one array, or for one address.
    for (j, (b, bargs, bline, blisten)) in entries.iter().enumerate() {
        for (a, aargs, _, _) in &entries[..j] {
            if (a.uuid.is_some() && a.uuid == b.uuid && !copies(&a.array, &b.array)) || same_array(&a.array, &b.array) {
                bail!("{}: array {} is served by the [[serve]] table at line {} already", at(*bline), b.array, a.line);
            }
            if let Some(what) = same_address(aargs, bargs) {
                let default = if blisten.is_none() { " (the default: give each table its own `listen` or `socket`)" } else { "" };
                bail!("{}: {what} is taken by the [[serve]] table at line {} already{default}", at(blisten.unwrap_or(b.line)), a.line);
            }
        }
    }
    Ok(entries.into_iter().map(|e| e.0).collect())
}

/// Whether specs `a` and `b` name a member path in common.
/// Whether `a` and `b` are two directories holding copies of one array
/// (`cp -a`: one UUID, other files), each its own array.
fn copies(a: &str, b: &str) -> bool {
    let dir = |s: &str| (!s.contains(',')).then(|| std::fs::canonicalize(s).ok()).flatten().filter(|p| p.is_dir());
    matches!((dir(a), dir(b)), (Some(x), Some(y)) if x != y && !x.starts_with(&y) && !y.starts_with(&x))
}

fn same_array(a: &str, b: &str) -> bool {
    let paths = |s: &str| -> Vec<PathBuf> { s.split(',').map(|p| std::fs::canonicalize(p.trim()).unwrap_or_else(|_| PathBuf::from(p.trim()))).collect() };
    let pb = paths(b);
    paths(a).iter().any(|p| pb.contains(p))
}

/// What two servers would both listen on, if anything.
fn same_address(a: &ServeArgs, b: &ServeArgs) -> Option<String> {
    match (&a.socket, &b.socket) {
        (Some(x), Some(y)) => (x == y).then(|| format!("unix socket {}", y.display())),
        (None, None) => {
            let (al, bl) = (a.listen_addr(), b.listen_addr());
            let clash = match (al.parse::<SocketAddr>(), bl.parse::<SocketAddr>()) {
                // Port 0 picks a free port; a wildcard address takes the port on every address.
                (Ok(x), Ok(y)) => x.port() == y.port() && x.port() != 0 && (x.ip() == y.ip() || x.ip().is_unspecified() || y.ip().is_unspecified()),
                _ => al == bl,
            };
            clash.then(|| format!("address {bl}"))
        }
        _ => None,
    }
}

/// Signals this process got, and the last one.
static SIGNALS: AtomicUsize = AtomicUsize::new(0);
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only atomics: async-signal-safe.
    LAST_SIGNAL.store(sig, Ordering::SeqCst);
    SIGNALS.fetch_add(1, Ordering::SeqCst);
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "a signal",
    }
}

/// A child server.
struct Server {
    entry: Entry,
    child: Child,
    exited: Option<ExitStatus>,
}

impl Server {
    fn signal(&self, sig: i32) {
        if self.exited.is_none() {
            // SAFETY: signalling our own child, not yet reaped.
            unsafe { libc::kill(self.child.id() as i32, sig) };
        }
    }
}

/// Start one child `mosaic serve` for `e`.
fn spawn(exe: &Path, e: &Entry) -> Result<Child> {
    let mut c = Command::new(exe);
    c.args(crate::logging::child_args()).arg("serve").args(&e.argv);
    if mosaic_array::start_dirty_degraded() {
        c.arg("--start-dirty-degraded");
    }
    // Its own process group: a terminal's Ctrl-C reaches this process
    // only, which passes it on once (a second signal stops a server at once).
    c.process_group(0);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            // Stop cleanly when this process dies, however it dies.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() != parent {
                libc::raise(libc::SIGTERM);
            }
            Ok(())
        });
    }
    c.spawn().with_context(|| format!("starting {} serve for {}", exe.display(), e.array))
}

/// `mosaic serve --config FILE`.
pub fn run(path: &Path) -> Result<i32> {
    let entries = load(path)?;
    // SAFETY: handlers that only touch atomics; SIGPIPE ignored as in serve.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let exe = std::env::current_exe().context("finding the mosaic executable")?;
    let config = path.display().to_string();
    tracing::info!(config = %config, "mosaic serve: config {config}: serving {} arrays", entries.len());
    let mut servers: Vec<Server> = Vec::new();
    for entry in entries {
        match spawn(&exe, &entry) {
            Ok(child) => {
                let pid = child.id();
                tracing::info!(array = %entry.uuid.as_deref().unwrap_or(&entry.array), pid, "mosaic serve: config: started the server of {} on {} (pid {pid}, line {})", entry.array, entry.at, entry.line);
                servers.push(Server { entry, child, exited: None });
            }
            Err(e) => {
                for s in &servers {
                    s.signal(libc::SIGTERM);
                }
                for s in &mut servers {
                    let _ = s.child.wait();
                }
                return Err(e);
            }
        }
    }
    supervise(&mut servers)
}

/// Forward signals and watch the children until every one has exited.
fn supervise(servers: &mut [Server]) -> Result<i32> {
    let (mut forwarded, mut stopping) = (0, false);
    let mut failed: Vec<String> = Vec::new();
    loop {
        let n = SIGNALS.load(Ordering::SeqCst);
        if n > forwarded {
            let sig = LAST_SIGNAL.load(Ordering::SeqCst);
            let live = servers.iter().filter(|s| s.exited.is_none()).count();
            if forwarded == 0 && !stopping {
                tracing::info!("mosaic serve: config: {}: stopping {live} servers", signal_name(sig));
            } else {
                tracing::warn!("mosaic serve: config: {} again: the servers stop at once", signal_name(sig));
            }
            forwarded = n;
            stopping = true;
            for s in servers.iter() {
                s.signal(sig);
            }
        }
        for i in 0..servers.len() {
            if servers[i].exited.is_some() {
                continue;
            }
            let Some(status) = servers[i].child.try_wait().context("waiting for a server")? else { continue };
            servers[i].exited = Some(status);
            let s = &servers[i];
            let (array, pid) = (s.entry.array.as_str(), s.child.id());
            let uuid = s.entry.uuid.as_deref().unwrap_or(array);
            if status.success() {
                tracing::info!(array = %uuid, pid, "mosaic serve: config: the server of {array} (pid {pid}) exited 0");
                continue;
            }
            tracing::error!(array = %uuid, pid, "mosaic serve: config: the server of {array} (pid {pid}) failed: {status}");
            failed.push(format!("{array} ({status})"));
            if !stopping {
                stopping = true;
                tracing::warn!("mosaic serve: config: stopping the other servers (the service manager restarts them all)");
                for s in servers.iter() {
                    s.signal(libc::SIGTERM);
                }
            }
        }
        if servers.iter().all(|s| s.exited.is_some()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if !failed.is_empty() {
        bail!("{} of {} servers failed: {}", failed.len(), servers.len(), failed.join(", "));
    }
    tracing::info!("mosaic serve: config: every server stopped");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two array directories with a member file each (enough for the checks).
    fn dirs() -> (tempfile::TempDir, String, String) {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        for d in [&a, &b] {
            std::fs::create_dir(d).unwrap();
        }
        let s = |p: &Path| p.to_str().unwrap().to_string();
        (t, s(&a), s(&b))
    }

    fn err(text: &str) -> String {
        format!("{:#}", parse(text, "f.toml").unwrap_err())
    }

    #[test]
    fn tables_become_serve_arguments_over_the_defaults() {
        let (_t, a, b) = dirs();
        let text = format!(
            "[defaults]\nmaint-rate = \"64M\"\nquiet = true\nworkers = 2\n\n[[serve]]\narray = \"{a}\"\nlisten = \"127.0.0.1:10809\"\nexport = \"a\"\n\n\
             [[serve]]\narray = \"{b}\"\nsocket = \"/run/mosaic/b.sock\"\nread-only = true\nquiet = false\non-event = \"-x logger\"\n"
        );
        let e = parse(&text, "f.toml").unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].line, 6);
        assert_eq!(e[0].argv, [format!("--array={a}"), "--export=a".into(), "--listen=127.0.0.1:10809".into(), "--maint-rate=64M".into(), "--quiet".into(), "--workers=2".into()]);
        assert_eq!(e[1].argv, [format!("--array={b}"), "--maint-rate=64M".into(), "--on-event=-x logger".into(), "--read-only".into(), "--socket=/run/mosaic/b.sock".into(), "--workers=2".into()]);
        assert_eq!((e[0].at.as_str(), e[1].at.as_str()), ("127.0.0.1:10809", "unix socket /run/mosaic/b.sock"));
    }

    /// One array named twice (its directory, then a list of its members)
    /// is refused; a copy of it (`cp -a`: its UUID, other files) is an
    /// array of its own, served beside it.
    #[test]
    fn one_array_twice_is_refused_but_a_copy_is_another_array() {
        let t = tempfile::tempdir().unwrap();
        let (a, c) = (t.path().join("a"), t.path().join("c"));
        let o = mosaic_array::CreateOptions { level: mosaic_core::Level::Raid1, members: Some(2), member_size: Some(2 << 20), unit: 65536, block: 4096, force: false, assume_clean: false };
        mosaic_array::Array::create(&mosaic_array::spec::ArraySpec::Dir(a.clone()), &o).unwrap().close().unwrap();
        assert!(std::process::Command::new("cp").arg("-a").arg(&a).arg(&c).status().unwrap().success());
        let (sa, sc) = (a.display(), c.display());
        let list = format!("{sa}/member-00.img,{sa}/member-01.img");
        let e = err(&format!("[[serve]]\narray = \"{sa}\"\nlisten = \"127.0.0.1:0\"\n[[serve]]\narray = \"{list}\"\nlisten = \"127.0.0.1:0\"\n"));
        assert!(e.ends_with("is served by the [[serve]] table at line 1 already"), "{e}");
        let both = parse(&format!("[[serve]]\narray = \"{sa}\"\nlisten = \"127.0.0.1:0\"\n[[serve]]\narray = \"{sc}\"\nlisten = \"127.0.0.1:0\"\n"), "f.toml").unwrap();
        assert_eq!(both.len(), 2);
        assert_eq!(both[0].uuid, both[1].uuid, "one UUID, two arrays");
    }

    #[test]
    fn the_example_in_docs_parses() {
        let t = tempfile::tempdir().unwrap();
        for d in ["vm", "backup"] {
            std::fs::create_dir(t.path().join(d)).unwrap();
        }
        let text = include_str!("../../../docs/mosaic.toml.example").replace("/srv/mosaic", t.path().to_str().unwrap());
        let e = parse(&text, "mosaic.toml.example").unwrap();
        assert_eq!(e.len(), 2);
        assert!(e[1].argv.contains(&"--read-only".to_string()) && e[1].argv.contains(&"--handshake-timeout=5".to_string()), "{:?}", e[1].argv);
        assert!(e.iter().all(|e| e.argv.contains(&"--quiet".to_string())));
    }

    #[test]
    fn mistakes_are_named_by_line() {
        let (_t, a, b) = dirs();
        let e = err(&format!("[[serve]]\narray = \"{a}\"\nlisten = \"127.0.0.1:1\"\nmaint_rate = \"1M\"\n"));
        assert_eq!(e, "f.toml:4: unknown key `maint_rate` in [[serve]] (mosaic serve has no --maint_rate); did you mean `maint-rate`?");
        assert!(err("[serve]\narray = 1\n").starts_with("f.toml: TOML parse error at line 1"), "{}", err("[serve]\narray = 1\n"));
        assert!(err("servers = 1\n").contains("unknown field `servers`"), "{}", err("servers = 1\n"));
        assert_eq!(err(""), "f.toml: no [[serve]] table: nothing to serve");
        assert_eq!(err("[[serve]]\nlisten = \"127.0.0.1:1\"\n"), "f.toml:1: this [[serve]] table has no `array` (the array to serve)");
        assert_eq!(err("[[serve]]\narray = \"/nonexistent/x\"\n"), "f.toml:2: array /nonexistent/x: /nonexistent/x does not exist");
        assert_eq!(err(&format!("[[serve]]\narray = \"{a}\"\ndemo = true\n")), "f.toml:3: `demo` is not for a config file");
        assert_eq!(err(&format!("[defaults]\nlisten = \"x:1\"\n[[serve]]\narray = \"{a}\"\n")), "f.toml:2: `listen` names one array's server: give it in each [[serve]] table, not in [defaults]");
        assert_eq!(err(&format!("[[serve]]\narray = \"{a}\"\nrun = \"true\"\n")), "f.toml:3: `run` is not for a config file");
        assert_eq!(err(&format!("[[serve]]\narray = \"{a}\"\nexit-with-parent = true\n")), "f.toml:3: `exit-with-parent` is not for a config file");
        assert_eq!(err(&format!("[defaults]\npidfile = \"/p\"\n[[serve]]\narray = \"{a}\"\n")), "f.toml:2: `pidfile` names one array's server: give it in each [[serve]] table, not in [defaults]");
        assert_eq!(err(&format!("[[serve]]\narray = \"{a}\"\nread-only = \"yes\"\n")), "f.toml:3: `read-only` is a switch: give true or false");
        let e = err(&format!("[[serve]]\narray = \"{a}\"\n\nmaint-rate = \"fast\"\n"));
        assert!(e.starts_with("f.toml:4: invalid value 'fast' for '--maint-rate"), "{e}");
        let e = err(&format!("[[serve]]\narray = \"{a}\"\nlisten = \"127.0.0.1:1\"\nsocket = \"/s\"\n"));
        assert!(e.starts_with("f.toml:") && e.contains("cannot be used with"), "{e}");
        // Two tables for one array, or one address.
        let e = err(&format!("[[serve]]\narray = \"{a}\"\nlisten = \"127.0.0.1:1\"\n[[serve]]\narray = \"{a}/\"\nlisten = \"127.0.0.1:2\"\n"));
        assert_eq!(e, format!("f.toml:5: array {a}/ is served by the [[serve]] table at line 1 already"));
        let e = err(&format!("[[serve]]\narray = \"{a}\"\n[[serve]]\narray = \"{b}\"\n"));
        assert_eq!(e, "f.toml:3: address 127.0.0.1:10809 is taken by the [[serve]] table at line 1 already (the default: give each table its own `listen` or `socket`)");
        let e = err(&format!("[[serve]]\narray = \"{a}\"\nlisten = \"0.0.0.0:7000\"\n[[serve]]\narray = \"{b}\"\nlisten = \"127.0.0.1:7000\"\n"));
        assert_eq!(e, "f.toml:6: address 127.0.0.1:7000 is taken by the [[serve]] table at line 1 already");
        // Port 0 picks a free port each.
        assert!(parse(&format!("[[serve]]\narray = \"{a}\"\nlisten = \"127.0.0.1:0\"\n[[serve]]\narray = \"{b}\"\nlisten = \"127.0.0.1:0\"\n"), "f").is_ok());
    }
}
