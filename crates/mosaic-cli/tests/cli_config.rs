//! `mosaic serve --config FILE`: one server per array the file lists,
//! stopped together by one SIGTERM; a bad file starts nothing.

use crate::common;
use common::serve::{message, Serve};
use common::{fails, json, mosaic, ok};

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn qemu_io(port: u16, export: &str, cmds: &[&str]) {
    let uri = format!("nbd://127.0.0.1:{port}/{export}");
    let mut args = vec!["-f", "raw", uri.as_str()];
    for c in cmds {
        args.extend(["-c", c]);
    }
    let o = Command::new("qemu-io").args(&args).output().expect("qemu-io");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && !out.contains("Pattern verification failed") && !out.contains("failed"), "qemu-io {cmds:?}: {out} {}", String::from_utf8_lossy(&o.stderr));
}

/// The pids of the servers the supervisor started, from its log.
fn children(lines: &[String]) -> Vec<i32> {
    lines
        .iter()
        .filter_map(|l| message(std::slice::from_ref(l), "mosaic serve: config: started the server of "))
        .map(|m| m.split("(pid ").nth(1).unwrap().split(',').next().unwrap().parse().unwrap())
        .collect()
}

fn create(dir: &Path, level: &str, members: &str) -> String {
    let a = dir.to_str().unwrap().to_string();
    ok(&["create", "-a", &a, "--level", level, "--members", members, "--member-size", "16M"]);
    a
}

#[test]
fn one_config_serves_every_array_listed_and_a_sigterm_stops_them_all_clean() {
    let t = tempfile::tempdir().unwrap();
    let a = create(&t.path().join("a"), "raid5", "4");
    let b = create(&t.path().join("b"), "raid1", "2");
    let uuid = |arr: &str| json(&ok(&["info", "-a", arr, "--json"]))["uuid"].as_str().unwrap().to_string();
    let (ua, ub) = (uuid(&a), uuid(&b));
    let cfg = t.path().join("mosaic.toml");
    // Port 0: each server picks a free port and logs it.
    std::fs::write(
        &cfg,
        format!(
            "# two arrays\n[defaults]\nquiet = true\nmaint-rate = \"64M\"\n\n\
             [[serve]]\narray = \"{a}\"\nlisten = \"127.0.0.1:0\"\nexport = \"a\"\n\n\
             [[serve]]\narray = \"{b}\"\nlisten = \"127.0.0.1:0\"\nexport = \"b\"\nhandshake-timeout = 5\n"
        ),
    )
    .unwrap();
    let srv = Serve::spawn(&["serve", "--config", cfg.to_str().unwrap()], 2);
    let ports: Vec<(u16, String)> = srv.listening();
    let port = |e: &str| ports.iter().find(|p| p.1 == e).unwrap_or_else(|| panic!("no export {e}: {ports:?}")).0;
    let pids = children(&srv.lines());
    assert_eq!(pids.len(), 2, "{:#?}", srv.lines());
    // Both exports take writes and read them back.
    qemu_io(port("a"), "a", &["write -P 0x5a 0 1M", "flush"]);
    qemu_io(port("b"), "b", &["write -P 0xa5 1M 1M", "flush"]);
    qemu_io(port("a"), "a", &["read -P 0x5a 0 1M"]);
    qemu_io(port("b"), "b", &["read -P 0xa5 1M 1M", "read -P 0 0 1M"]);
    // Both are served, each through its own control channel.
    let all = json(&String::from_utf8_lossy(&mosaic(&["status", "--json"]).stdout));
    for u in [&ua, &ub] {
        let st = all.as_array().unwrap().iter().find(|s| s["uuid"] == u.as_str()).unwrap_or_else(|| panic!("{u} not served: {all}"));
        assert_eq!((st["served"].as_bool(), st["health"].as_str()), (Some(true), Some("healthy")), "{st}");
    }
    // One SIGTERM: both servers drain, flush and close; the supervisor exits 0.
    let (code, log) = srv.stop();
    assert_eq!(code, 0, "{log:#?}");
    for pid in pids {
        // SAFETY: signal 0 only asks whether the process exists.
        assert_eq!(unsafe { libc::kill(pid, 0) }, -1, "server {pid} is still running");
    }
    assert_eq!(log.iter().filter(|l| l.contains("mosaic serve: array flushed and closed clean")).count(), 2, "{log:#?}");
    assert_eq!(log.iter().filter(|l| l.contains(") exited 0")).count(), 2, "{log:#?}");
    assert!(log.iter().any(|l| l.contains("mosaic serve: config: SIGTERM: stopping 2 servers")), "{log:#?}");
    // --quiet from [defaults]: no connection lines.
    assert!(!log.iter().any(|l| l.contains("mosaic-nbd: conn")), "{log:#?}");
    for (arr, u, pat, at) in [(&a, &ua, 0x5au8, "0"), (&b, &ub, 0xa5, "1M")] {
        let st = json(&String::from_utf8_lossy(&mosaic(&["status", "-a", arr, "--json"]).stdout));
        assert_eq!((st[0]["served"].as_bool(), st[0]["health"].as_str()), (Some(false), Some("healthy")), "{st}");
        let info = json(&ok(&["info", "-a", arr, "--json"]));
        assert_eq!((info["uuid"].as_str(), info["state"].as_str()), (Some(u.as_str()), Some("clean")), "{info}");
        let out = t.path().join("out.bin");
        ok(&["read", "-a", arr, "--offset", at, "--length", "1M", "--output", out.to_str().unwrap(), "--force"]);
        assert!(std::fs::read(&out).unwrap().iter().all(|&x| x == pat), "{arr}: the bytes written over NBD");
    }
}

#[test]
fn a_bad_config_is_refused_with_its_line_and_starts_nothing() {
    let t = tempfile::tempdir().unwrap();
    let a = create(&t.path().join("a"), "raid1", "2");
    let cfg = t.path().join("bad.toml");
    let c = cfg.to_str().unwrap();
    std::fs::write(&cfg, format!("[[serve]]\narray = \"{a}\"\nlisten = \"127.0.0.1:0\"\n\n[[serve]]\narray = \"{a}-b\"\nlisten = \"127.0.0.1:0\"\nread-olny = true\n"))
        .unwrap();
    let t0 = Instant::now();
    let e = fails(&["serve", "--config", c]);
    assert_eq!(e, format!("error: {c}:8: unknown key `read-olny` in [[serve]] (mosaic serve has no --read-olny)\n"));
    assert!(t0.elapsed() < Duration::from_secs(10));
    // Nothing was started: the first array is not served.
    let st = json(&String::from_utf8_lossy(&mosaic(&["status", "-a", &a, "--json"]).stdout));
    assert_eq!(st[0]["served"], false, "{st}");
    // A missing array, and serve's own parser on a value.
    std::fs::write(&cfg, format!("[[serve]]\narray = \"{a}\"\nlisten = \"127.0.0.1:0\"\n[[serve]]\narray = \"{a}-gone\"\nlisten = \"127.0.0.1:0\"\n")).unwrap();
    assert_eq!(fails(&["serve", "--config", c]), format!("error: {c}:5: array {a}-gone: {a}-gone does not exist\n"));
    std::fs::write(&cfg, format!("[[serve]]\narray = \"{a}\"\nmaint-rate = \"fast\"\n")).unwrap();
    let e = fails(&["serve", "--config", c]);
    assert!(e.starts_with(&format!("error: {c}:3: invalid value 'fast' for '--maint-rate")), "{e}");
    // --config takes no other serve option.
    let o = mosaic(&["serve", "--config", c, "--quiet"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
}

/// nbdkit's captive mode: `serve --run CMD` runs CMD against the server
/// (its address in $uri, $port, $exportname), stops the server when CMD
/// exits (the array flushed and closed clean) and exits with CMD's
/// status; `--pidfile` holds the server's process id while it serves.
#[test]
fn serve_run_stops_with_its_command_and_exits_with_its_status() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "4", "--member-size", "8M"]);
    let (input, pid, seen) = (t.path().join("in.bin"), t.path().join("serve.pid"), t.path().join("seen"));
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
    std::fs::write(&input, &data).unwrap();
    let cmd = format!(
        "nbdcopy {} \"$uri\" && echo \"$port $exportname $(cat {}) $uri\" > {} && exit 7",
        input.display(),
        pid.display(),
        seen.display()
    );
    let o = Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .args(["serve", "-a", a, "--listen", "127.0.0.1:0", "--export", "disk", "--quiet", "--pidfile", pid.to_str().unwrap(), "--run", &cmd])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(7), "{err}");
    assert!(err.contains("array flushed and closed clean"), "{err}");
    let seen = std::fs::read_to_string(&seen).unwrap();
    let w: Vec<&str> = seen.split_whitespace().collect();
    assert_eq!((w[1], w[3]), ("disk", format!("nbd://127.0.0.1:{}/disk", w[0]).as_str()), "{seen}");
    assert!(w[2].parse::<u32>().unwrap() > 0, "the pid file was written before the command ran: {seen}");
    let out = t.path().join("out.bin");
    ok(&["read", "-a", a, "--offset", "0", "--length", "1M", "--output", out.to_str().unwrap()]);
    assert!(std::fs::read(&out).unwrap() == data, "the command's writes are in the array");
    // A command that fails: its status, and the server still closes clean.
    let o = Command::new(env!("CARGO_BIN_EXE_mosaic")).args(["serve", "-a", a, "--listen", "127.0.0.1:0", "--quiet", "--run", "exit 0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let o = Command::new(env!("CARGO_BIN_EXE_mosaic")).args(["serve", "-a", a, "--listen", "127.0.0.1:0", "--quiet", "--run", "kill -9 $$"]).output().unwrap();
    assert_eq!(o.status.code(), Some(128 + 9), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json(&ok(&["info", "-a", a, "--json"]))["state"], "clean");
}

/// `serve --exit-with-parent`: the server started by a shell that then
/// exits stops by itself, clients drained and the array closed clean.
#[test]
fn serve_exit_with_parent_stops_clean_when_its_parent_exits() {
    let t = tempfile::tempdir().unwrap();
    let arr = t.path().join("arr");
    let a = arr.to_str().unwrap();
    ok(&["create", "-a", a, "--level", "raid5", "--members", "3", "--member-size", "8M"]);
    let (pid, log) = (t.path().join("pid"), t.path().join("log"));
    let script = format!(
        "{} serve -a {a} --listen 127.0.0.1:0 --quiet --exit-with-parent --pidfile {} < /dev/null > /dev/null 2> {} & while [ ! -s {} ]; do sleep 0.05; done; exit 0",
        env!("CARGO_BIN_EXE_mosaic"),
        pid.display(),
        log.display(),
        pid.display()
    );
    assert!(Command::new("sh").arg("-c").arg(&script).status().unwrap().success());
    let server = std::fs::read_to_string(&pid).unwrap().trim().to_string();
    let t0 = Instant::now();
    while Path::new(&format!("/proc/{server}")).exists() && !std::fs::read_to_string(format!("/proc/{server}/stat")).unwrap_or_default().contains(") Z ") {
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = Command::new("kill").arg("-9").arg(&server).status();
            panic!("the server outlived its parent");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let t0 = Instant::now();
    while !std::fs::read_to_string(&log).unwrap().contains("array flushed and closed clean") {
        assert!(t0.elapsed() < Duration::from_secs(10), "{}", std::fs::read_to_string(&log).unwrap());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(json(&ok(&["info", "-a", a, "--json"]))["state"], "clean");
}

/// `--pidfile` naming a member of another array is refused (without
/// `--force`) before the server starts, and the member is left as it was.
#[test]
fn serve_pidfile_never_overwrites_an_arrays_member() {
    let t = tempfile::tempdir().unwrap();
    let (arr, other) = (t.path().join("arr"), t.path().join("other"));
    for d in [&arr, &other] {
        ok(&["create", "-a", d.to_str().unwrap(), "--level", "raid5", "--members", "3", "--member-size", "8M"]);
    }
    let member = other.join("member-00.img");
    let before = std::fs::read(&member).unwrap();
    let e = fails(&["serve", "-a", arr.to_str().unwrap(), "--listen", "127.0.0.1:0", "--pidfile", member.to_str().unwrap()]);
    assert!(e.contains(member.to_str().unwrap()) && e.contains("array") && e.contains("--force"), "{e}");
    assert!(std::fs::read(&member).unwrap() == before, "the member was written");
}
