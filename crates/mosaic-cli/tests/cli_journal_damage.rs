//! A damaged journal record from the command line: the crash image of a
//! writer killed after its writes (members and journal as `kill -9` leaves
//! them) gets one record corrupted; the next open replays around it, warns
//! naming the record and its stripes, `mosaic read` gives the newest bytes
//! (or, for the reported record's own blocks, says so), and `mosaic scrub`
//! exits 2 exactly when the skipped record left code that disagrees.

use std::fs;
use std::path::Path;

use mosaic_array::journal::{decode_record, HEADER_BYTES};
use mosaic_array::spec::ArraySpec;
use mosaic_array::Array;

use crate::common;
use common::{json, mosaic, ok};

const K: usize = 4096;

/// Block-sized writes: (first block, fill bytes of each block).
type Writes = Vec<(usize, Vec<u8>)>;

/// Create a raid5 array of 4 KiB units in `dir`, write `writes` in process
/// and take the image a `kill -9` leaves (every file as the writer's
/// pwrites left it, superblocks dirty, journal full of records); the close
/// that follows is undone by putting the image back.
fn crash_image(dir: &Path, writes: &Writes) {
    let d = dir.to_str().unwrap();
    ok(&["create", "-a", d, "--level", "raid5", "--members", "5", "--member-size", "2M", "--stripe-unit", "4K", "--journal-size", "1M"]);
    let arr = Array::open(&ArraySpec::Dir(dir.to_path_buf()), true).unwrap();
    for (blk, fills) in writes {
        let data: Vec<u8> = fills.iter().flat_map(|&f| vec![f; K]).collect();
        arr.write((blk * K) as u64, &data).unwrap();
    }
    let image: Vec<(std::path::PathBuf, Vec<u8>)> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).map(|p| (p.clone(), fs::read(&p).unwrap())).collect();
    drop(arr);
    for (p, b) in image {
        fs::write(p, b).unwrap();
    }
}

/// Where each record of the journal starts, with its sequence number.
fn records(journal: &[u8]) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    let mut at = HEADER_BYTES as usize;
    while let Ok((seq, _, len)) = decode_record(&journal[at..]) {
        if out.last().is_some_and(|&(_, s)| seq != s + 1) {
            break;
        }
        out.push((at, seq));
        at += len as usize;
    }
    out
}

/// Flip a payload byte of record `i` (counted from the checkpoint);
/// returns its sequence number.
fn damage_record(dir: &Path, i: usize) -> u64 {
    let jp = dir.join("journal.img");
    let mut j = fs::read(&jp).unwrap();
    let recs = records(&j);
    let (at, seq) = recs[i];
    // Past the header and the entry table of these small records: payload.
    j[at + 600] ^= 0x5a;
    fs::write(&jp, &j).unwrap();
    seq
}

fn read_blocks(d: &str, t: &Path, n: usize) -> Vec<u8> {
    let out = t.join("out.bin");
    ok(&["read", "-a", d, "--offset", "0", "--length", &format!("{}", n * K), "--output", out.to_str().unwrap()]);
    fs::read(&out).unwrap()
}

/// The first writable open after the crash replays the journal and warns.
fn first_open_stderr(d: &str, t: &Path) -> String {
    let other = t.join("other.bin");
    fs::write(&other, vec![0xeeu8; K]).unwrap();
    let o = mosaic(&["write", "-a", d, "--offset", "1M", "--input", other.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_damaged_middle_record_is_skipped_named_and_nothing_rolls_back() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let d = dir.to_str().unwrap();
    // Stripe 0 is blocks 0-3, stripe 1 blocks 4-7; later writes overlap
    // earlier ones, so replaying an older record over them rolls back.
    let writes: Writes = vec![(0, vec![1, 1, 1]), (1, vec![2]), (4, vec![3, 3]), (5, vec![4]), (0, vec![5, 5])];
    crash_image(&dir, &writes);
    let seq = damage_record(&dir, 2);
    let err = first_open_stderr(d, t.path());
    assert!(
        err.contains(&format!(
            "warning: journal record {seq} (stripe 1) is damaged: the valid records after it were replayed and it was skipped, so its stripes may hold older data and code that disagrees with it; run `mosaic scrub` to check them (`mosaic scrub --repair` rewrites their code)\n"
        )),
        "{err}"
    );
    // Every block holds the newest bytes written.
    let mut want = vec![0u8; 8 * K];
    for (blk, fills) in &writes {
        for (k, f) in fills.iter().enumerate() {
            want[(blk + k) * K..(blk + k + 1) * K].fill(*f);
        }
    }
    assert!(read_blocks(d, t.path(), 8) == want, "a block came back older");
    // The writer's member writes had all landed: the code agrees.
    let s = mosaic(&["scrub", "-a", d]);
    assert_eq!(s.status.code(), Some(0), "{}", String::from_utf8_lossy(&s.stdout));
    // The warning was for that replay only.
    let o = mosaic(&["info", "-a", d]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("journal record"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_damaged_last_record_is_reported_and_scrub_finds_its_stripe() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let d = dir.to_str().unwrap();
    // The last write fills stripe 0, block 3 included, which no older
    // record wrote: replaying the older records around it leaves code
    // that disagrees with block 3, and scrub must say so.
    let writes: Writes = vec![(0, vec![1, 1, 1]), (1, vec![2]), (4, vec![3]), (0, vec![5, 5, 5, 6])];
    crash_image(&dir, &writes);
    let seq = damage_record(&dir, 3);
    let err = first_open_stderr(d, t.path());
    assert!(
        err.contains(&format!(
            "warning: journal record {seq} (stripe 0) at the end of the log is damaged or was torn by the crash, so it was not replayed and its stripes may hold the data from before it; run `mosaic scrub` to check them (`mosaic scrub --repair` rewrites their code)\n"
        )),
        "{err}"
    );
    // Outside the reported stripe everything is newest; inside it the
    // older records were replayed over blocks 0-2 (reported: stripe 0).
    let got = read_blocks(d, t.path(), 8);
    let fills: Vec<u8> = got.chunks(K).map(|b| b[0]).collect();
    assert_eq!(fills, vec![1, 2, 1, 6, 3, 0, 0, 0]);
    let s = mosaic(&["scrub", "-a", d, "--json"]);
    assert_eq!(s.status.code(), Some(3), "scrub must exit 3: {}", String::from_utf8_lossy(&s.stdout));
    assert_eq!(json(&String::from_utf8_lossy(&s.stdout))["mismatched_stripes"], serde_json::json!([0]));
    ok(&["scrub", "-a", d, "--repair"]);
    assert_eq!(mosaic(&["scrub", "-a", d]).status.code(), Some(0));
}

/// A read-only command is usually the first after a crash (`mosaic read`,
/// `mosaic info`): it replays through a writable open that it closes again,
/// and must pass the warning on.
#[test]
fn a_read_only_first_open_also_warns() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let d = dir.to_str().unwrap();
    let writes: Writes = vec![(0, vec![1, 1]), (1, vec![2]), (0, vec![3])];
    crash_image(&dir, &writes);
    let seq = damage_record(&dir, 1);
    let out = t.path().join("out.bin");
    let o = mosaic(&["read", "-a", d, "--offset", "0", "--length", "8K", "--output", out.to_str().unwrap()]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("warning: journal record {seq} (stripe 0) is damaged")), "{err}");
    assert_eq!(fs::read(&out).unwrap().chunks(K).map(|b| b[0]).collect::<Vec<u8>>(), vec![3, 2]);
}
