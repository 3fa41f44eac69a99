//! The write-ahead journal from the command line: default placement,
//! `kill -9` during writes, replay on the next open, clear errors.

use std::fs;
use std::io::Write;
use std::process::Command;
use std::time::Duration;

use crate::common;
use common::{fails, json, mosaic, ok};


#[test]
fn kill_during_writes_then_replay_and_scrub_clean() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let d = dir.to_str().unwrap();
    ok(&["create", "-a", d, "--level", "raid5", "--members", "5", "--member-size", "9M", "--stripe-unit", "4K", "--journal-size", "2M"]);
    let info = json(&ok(&["info", "-a", d, "--json"]));
    assert!(info["journal"].as_str().unwrap().ends_with("journal.img"), "{info}");
    let input = t.path().join("in.bin");
    let mut f = fs::File::create(&input).unwrap();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut buf = vec![0u8; 32 << 20];
    for b in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    f.write_all(&buf).unwrap();
    drop(f);
    let mut killed = 0;
    let jpath = dir.join("journal.img");
    // 24 MiB at offsets up to 12 KiB stays inside the 32 MiB array.
    let part = t.path().join("part.bin");
    fs::write(&part, &buf[..24 << 20]).unwrap();
    for (i, ms) in [0u64, 3, 10, 30].iter().enumerate() {
        // Kill once the writer has started writing (its journal changed).
        let before = fs::metadata(&jpath).unwrap().modified().unwrap();
        let off = format!("{}K", i * 4);
        let mut child = Command::new(env!("CARGO_BIN_EXE_mosaic"))
            .args(["write", "-a", d, "--offset", &off, "--input", part.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The journal changes at open (header) and then with each record:
        // wait for the second change, when writes are under way.
        let t0 = std::time::Instant::now();
        let (mut last, mut changes) = (before, 0);
        while changes < 2 && t0.elapsed() < Duration::from_secs(30) && child.try_wait().unwrap().is_none() {
            let now = fs::metadata(&jpath).unwrap().modified().unwrap();
            if now != last {
                changes += 1;
                last = now;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        std::thread::sleep(Duration::from_millis(*ms));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let out = child.wait_with_output().unwrap();
        let status = out.status;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(status.success() || status.code().is_none(), "writer {i} failed ({status:?}): {stderr} / {}", String::from_utf8_lossy(&out.stdout));
        let info = json(&ok(&["info", "-a", d, "--json"]));
        if status.success() {
            // It finished first (a fast machine): nothing to recover here.
            continue;
        }
        // Even a read-only open recovers first: it replays what the kill
        // left in the journal, and the array is clean again.
        assert!(info["journal_replayed"].is_object(), "kill {i}: no replay: {info}");
        assert_eq!(info["state"], "clean", "kill {i}");
        killed += 1;
        // The stripes the kill tore are whole again.
        let s = mosaic(&["scrub", "-a", d, "--json"]);
        assert!(s.status.success(), "scrub after kill {i}: {}", String::from_utf8_lossy(&s.stdout));
        let rep = json(&String::from_utf8_lossy(&s.stdout));
        assert_eq!(rep["mismatched_stripes"].as_array().unwrap().len(), 0, "{rep} / {info}");
    }
    assert!(killed > 0, "every writer finished before its kill");
    // Whatever the kills left, a complete write afterwards reads back.
    ok(&["write", "-a", d, "--offset", "0", "--input", input.to_str().unwrap()]);
    let out = t.path().join("out.bin");
    ok(&["read", "-a", d, "--offset", "0", "--length", "32M", "--output", out.to_str().unwrap()]);
    assert!(fs::read(&out).unwrap() == buf);

    // A damaged journal header is a clear error and nothing is written.
    let jp = dir.join("journal.img");
    let mut j = fs::read(&jp).unwrap();
    j[40] ^= 0xff;
    fs::write(&jp, &j).unwrap();
    let e = fails(&["write", "-a", d, "--offset", "0", "--input", input.to_str().unwrap()]);
    assert!(e.contains("corrupt journal header"), "{e}");
}

#[test]
fn member_lists_take_an_explicit_journal_or_warn() {
    let t = tempfile::tempdir().unwrap();
    let paths: Vec<String> = (0..3).map(|i| t.path().join(format!("d{i}")).display().to_string()).collect();
    for p in &paths {
        fs::File::create(p).unwrap().set_len(3 << 20).unwrap();
    }
    let list = paths.join(",");
    let o = mosaic(&["create", "-a", &list, "--level", "raid5", "--stripe-unit", "4K", "--force"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("warning: no write-ahead journal"));
    let jp = t.path().join("j.img");
    let o = mosaic(&["create", "-a", &list, "--level", "raid5", "--stripe-unit", "4K", "--force", "--journal", jp.to_str().unwrap(), "--journal-size", "1M"]);
    assert!(o.status.success() && o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    // The journal may be named among the members too.
    let with = format!("{list},{}", jp.display());
    let info = json(&ok(&["info", "-a", &with, "--json"]));
    assert_eq!(info["members"], 3);
    let e = fails(&["create", "-a", &list, "--level", "raid5", "--force", "--journal", t.path().join("tiny").to_str().unwrap(), "--journal-size", "4K"]);
    assert!(e.contains("journal too small"), "{e}");
}

/// An array whose journal file is gone: `status` says DEGRADED and why
/// (exit 4), `info` names it, reads still work, and a write is refused
/// with the reason.  With the file back, it is healthy again; with a new
/// journal (`replace-journal`) too.
#[test]
fn a_missing_journal_shows_in_status_and_refuses_writes() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let d = dir.to_str().unwrap();
    ok(&["create", "-a", d, "--level", "raid5", "--members", "4", "--member-size", "4M", "--stripe-unit", "4K", "--journal-size", "1M"]);
    let input = t.path().join("in.bin");
    fs::write(&input, vec![0x3cu8; 8192]).unwrap();
    ok(&["write", "-a", d, "--offset", "0", "--input", input.to_str().unwrap()]);
    let jpath = dir.join("journal.img");
    let away = t.path().join("journal.away");
    fs::rename(&jpath, &away).unwrap();
    let st = mosaic(&["status", "-a", d, "--json"]);
    let out = String::from_utf8_lossy(&st.stdout);
    assert_eq!(st.status.code(), Some(4), "degraded: exit 4\n{out}");
    let st = json(&out);
    assert_eq!(st[0]["health"], "degraded", "{st}");
    assert!(st[0]["journal_failed"].as_str().is_some_and(|w| w.contains("journal.img")), "{st}");
    let text = String::from_utf8_lossy(&mosaic(&["status", "-a", d]).stdout).to_string();
    assert!(text.contains("journal failed:") && text.contains("writes are refused"), "{text}");
    let info = json(&ok(&["info", "-a", d, "--json"]));
    assert!(info["detail"]["journal_failed"].is_string() || info["journal_failed"].is_string(), "{info}");
    let got = t.path().join("out.bin");
    ok(&["read", "-a", d, "--offset", "0", "--length", "8K", "--output", got.to_str().unwrap()]);
    assert_eq!(fs::read(&got).unwrap(), vec![0x3cu8; 8192]);
    let e = fails(&["write", "-a", d, "--offset", "0", "--input", input.to_str().unwrap()]);
    assert!(e.contains("write-ahead journal"), "{e}");
    fs::rename(&away, &jpath).unwrap();
    let st = mosaic(&["status", "-a", d, "--json"]);
    assert_eq!(st.status.code(), Some(0), "{}", String::from_utf8_lossy(&st.stdout));
    // Or a new journal in its place: another array's file is refused
    // without --force, a member always; then writes work again.
    fs::rename(&jpath, &away).unwrap();
    let other = t.path().join("other");
    ok(&["create", "-a", other.to_str().unwrap(), "--level", "raid5", "--members", "3", "--member-size", "4M", "--stripe-unit", "4K", "--journal-size", "1M"]);
    let e = fails(&["replace-journal", "-a", d, "--journal", other.join("journal.img").to_str().unwrap()]);
    assert!(e.contains("journal") && e.contains("--force"), "{e}");
    let e = fails(&["replace-journal", "-a", d, "--journal", dir.join("member-00.img").to_str().unwrap(), "--force"]);
    assert!(e.contains("a member of the array cannot be its journal"), "{e}");
    let newj = t.path().join("new-journal.img");
    let out = ok(&["replace-journal", "-a", d, "--journal", newj.to_str().unwrap(), "--journal-size", "1M"]);
    assert!(out.contains("now journals to") && out.contains("could not be read"), "{out}");
    let info = json(&ok(&["info", "-a", d, "--json"]));
    assert!(info["journal"].as_str().is_some_and(|j| j.ends_with("new-journal.img")), "{info}");
    // Its own hot spare is named as such (not "a copy's journal"), even
    // with --force, and stays a spare, byte for byte.
    let spare = t.path().join("spare.img");
    fs::write(&spare, vec![0u8; 4 << 20]).unwrap();
    ok(&["add", "-a", d, "--spare", spare.to_str().unwrap()]);
    let before = fs::read(&spare).unwrap();
    let e = fails(&["replace-journal", "-a", d, "--journal", spare.to_str().unwrap(), "--force"]);
    assert!(e.contains("spare.img is a hot spare") && e.contains("a spare of the array cannot be its journal"), "{e}");
    assert!(fs::read(&spare).unwrap() == before, "the spare changed");
    let info = json(&ok(&["info", "-a", d, "--json"]));
    assert!(info["journal"].as_str().is_some_and(|j| j.ends_with("new-journal.img")), "{info}");
    assert!(info["spares"].as_array().is_some_and(|v| v.len() == 1), "{info}");
    ok(&["write", "-a", d, "--offset", "8K", "--input", input.to_str().unwrap()]);
    ok(&["read", "-a", d, "--offset", "0", "--length", "16K", "--output", got.to_str().unwrap()]);
    assert_eq!(fs::read(&got).unwrap(), vec![0x3cu8; 16384]);
    let st = mosaic(&["status", "-a", d, "--json"]);
    assert_eq!(st.status.code(), Some(0), "{}", String::from_utf8_lossy(&st.stdout));
}
