//! Remote members: arrays whose members are NBD exports of other servers
//! (here qemu-nbd on unix sockets; nothing leaves the machine), named by
//! NBD URIs wherever a member path is accepted.

mod common;
use common::{fails, ok};

use std::path::{Path, PathBuf};
use std::process::Child;

/// One export: qemu-nbd serving a raw file of `size` bytes.
struct Export {
    child: Option<Child>,
    sock: PathBuf,
}

impl Export {
    fn start(dir: &Path, name: &str, size: u64) -> Export {
        let file = dir.join(format!("{name}.img"));
        std::fs::File::create(&file).unwrap().set_len(size).unwrap();
        let sock = dir.join(format!("{name}.sock"));
        let child = mosaic_dev::testing::qemu_nbd(&file, &sock, 4);
        Export { child: Some(child), sock }
    }
    fn uri(&self) -> String {
        format!("nbd+unix:///m?socket={}", self.sock.display())
    }
    /// The server dies (as a machine that goes away).
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.sock);
    }
}

impl Drop for Export {
    fn drop(&mut self) {
        self.kill();
    }
}

fn read_back(a: &str, len: usize, out: &Path) -> Vec<u8> {
    ok(&["read", "-a", a, "--offset", "0", "--length", &len.to_string(), "--output", out.to_str().unwrap()]);
    std::fs::read(out).unwrap()
}

#[test]
fn raid6_over_six_remote_exports_loses_two_and_rebuilds_onto_a_new_one() {
    let t = tempfile::tempdir().unwrap();
    let mut ex: Vec<Export> = (0..7).map(|i| Export::start(t.path(), &format!("e{i}"), 64 << 20)).collect();
    let uris: Vec<String> = ex.iter().map(Export::uri).collect();
    let spec = |idx: &[usize]| idx.iter().map(|&i| uris[i].as_str()).collect::<Vec<_>>().join(",");
    let a = spec(&[0, 1, 2, 3, 4, 5]);
    let journal = t.path().join("journal.img");
    ok(&["create", "-a", &a, "--level", "raid6", "--stripe-unit", "64K", "--journal", journal.to_str().unwrap()]);
    let data: Vec<u8> = (0..(12u32 << 20)).map(|i| (i.wrapping_mul(2654435761) >> 9) as u8).collect();
    let input = t.path().join("data");
    std::fs::write(&input, &data).unwrap();
    ok(&["write", "-a", &a, "--offset", "0", "--input", input.to_str().unwrap()]);
    let out = t.path().join("back");
    assert!(read_back(&a, data.len(), &out) == data);
    // The members' bytes are on the exports: member 0 carries a superblock.
    let e = fails(&["create", "-a", &spec(&[0, 6]), "--level", "raid1"]);
    assert!(e.contains("is member 0 of array") && e.contains("--force"), "{e}");
    // Two servers go away: the array reads degraded, and says which.
    ex[1].kill();
    ex[4].kill();
    let o = common::mosaic(&["status", "-a", &a]);
    assert_eq!(o.status.code(), Some(4), "degraded is exit status 4");
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("DEGRADED") && s.matches("(missing)").count() == 2, "{s}");
    assert!(read_back(&a, data.len(), &out) == data, "degraded read");
    // A new, empty export takes member 1's place and is rebuilt.
    ok(&["replace", "-a", &a, "--member", "1", "--drive", &uris[6]]);
    let b = spec(&[0, 6, 2, 3, 5]);
    let scrub = ok(&["scrub", "-a", &b]);
    assert!(scrub.contains("0 stripes with mismatched"), "{scrub}");
    assert!(read_back(&b, data.len(), &out) == data, "after the rebuild");
    // A URI that reaches nothing is a clear error, not a hang.
    let gone = format!("nbd+unix:///m?socket={}", t.path().join("nothing.sock").display());
    let e = fails(&["examine", &gone]);
    assert!(e.contains("nothing.sock"), "{e}");
}
