//! A damaged journal record never rolls back acknowledged writes silently.
//!
//! A run of overlapping writes (raid5, raid6, rs:3+2) leaves N records in
//! the journal and is then cut off (`PowerCut`: nothing more reaches the
//! devices, not even the close).  In the "kill -9" case every write reached
//! the members; in the "power cut" case the members lost the last writes
//! (acknowledged from a drive's volatile cache: their images are taken
//! from before those writes) while the journal, synced, kept them.  For
//! every record position i and three kinds of damage (a payload byte, the
//! frame magic, the frame's payload length), record i is corrupted and the array reopened:
//! every block must hold its newest acknowledged bytes, unless it is a
//! block of a record the replay report names (with its stripe, or
//! "unknown") and the array warns about.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_array::journal::{RecordStripes, HEADER_BYTES};
use mosaic_array::{Array, CreateOptions, ReplayReport, DATA_OFFSET};
use mosaic_dev::{MemMember, Member, PowerCut};

const BLOCK: u64 = 4096;
const STRIPES: u64 = 16;
const WRITES: usize = 10;

/// What a crashed run left, and what it acknowledged.
struct Crashed {
    members: Vec<Vec<u8>>,
    journal: Vec<u8>,
    /// Where each write's record starts in the journal, and its sequence.
    starts: Vec<u64>,
    first_seq: u64,
    /// Data blocks per stripe (one unit is one block).
    data: u64,
    /// Per block: every value written, oldest first, with the write's index.
    versions: Vec<Vec<(usize, Vec<u8>)>>,
}

/// `WRITES` overlapping writes of 1-3 blocks in the first 24 blocks of
/// an array of `level` on `n` members; the members lose the last `lost`.
fn crashed_run(level: &str, n: usize, seed: u64, lost: usize) -> Crashed {
    let mut images = None;
    let size = DATA_OFFSET + BLOCK * STRIPES;
    let mems: Vec<Arc<MemMember>> = (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), size))).collect();
    let jdev = Arc::new(MemMember::new("journal", 1 << 20));
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let wrap = |m: &Arc<MemMember>| (Arc::new(PowerCut::new(m.clone(), budget.clone())) as Arc<dyn Member>, m.describe());
    let o = CreateOptions { level: level.parse().unwrap(), members: Some(n), member_size: None, unit: BLOCK, block: BLOCK, force: true, assume_clean: true };
    let arr = Array::create_with_journal(mems.iter().map(wrap).collect(), &o, true, Some(wrap(&jdev))).unwrap();
    let j = arr.journal().unwrap();
    let first_seq = j.pending() + 1;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut versions = vec![Vec::new(); (arr.capacity() / BLOCK) as usize];
    let mut starts = Vec::new();
    for w in 0..WRITES {
        if w + lost == WRITES {
            images = Some(mems.iter().map(|m| m.snapshot()).collect());
        }
        let (blk, n) = (rng.gen_range(0..22u64), rng.gen_range(1..=3u64));
        let data: Vec<u8> = (0..n * BLOCK).map(|_| rng.gen()).collect();
        starts.push(HEADER_BYTES + j.used());
        let before = j.records.load(Ordering::Relaxed);
        arr.write(blk * BLOCK, &data).unwrap();
        assert_eq!(j.records.load(Ordering::Relaxed), before + 1, "one record per write");
        for (k, chunk) in data.chunks(BLOCK as usize).enumerate() {
            versions[blk as usize + k].push((w, chunk.to_vec()));
        }
    }
    assert_eq!(j.checkpoints.load(Ordering::Relaxed), 0, "the run must not wrap the journal");
    // The crash: the close reaches no device.
    let data = arr.geometry().k as u64;
    budget.store(0, Ordering::SeqCst);
    drop(arr);
    let members = images.unwrap_or_else(|| mems.iter().map(|m| m.snapshot()).collect());
    Crashed { members, journal: jdev.snapshot(), starts, first_seq, data, versions }
}

fn mem(name: &str, bytes: &[u8]) -> Arc<dyn Member> {
    let m = MemMember::new(name, bytes.len() as u64);
    m.write_at(bytes, 0).unwrap();
    Arc::new(m)
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    /// One byte in the middle of the record (its payload).
    Payload,
    /// The frame magic: the entry table still tells where it wrote.
    Magic,
    /// The payload length in the frame header (bytes 16..20): the entry
    /// table no longer adds up to it, so where it wrote is unknown.
    Length,
}

/// Corrupt record `i` of a copy of the crashed journal and reopen; the
/// array and its devices.
fn reopen_damaged(c: &Crashed, i: usize, d: Damage) -> (Array, Vec<Arc<dyn Member>>, Arc<dyn Member>) {
    let mut journal = c.journal.clone();
    let end = c.starts.get(i + 1).copied().unwrap_or(c.starts[i] + 8192);
    let at = match d {
        Damage::Payload => (c.starts[i] + end) / 2,
        Damage::Magic => c.starts[i],
        Damage::Length => c.starts[i] + 16,
    } as usize;
    journal[at] ^= 0x5a;
    let mems: Vec<Arc<dyn Member>> = c.members.iter().enumerate().map(|(k, b)| mem(&format!("m{k}"), b)).collect();
    let j = mem("journal", &journal);
    (Array::open_members_with_journal(mems.clone(), true, Some(j.clone())).unwrap(), mems, j)
}

/// The stripes a report names for `seq` (None: unknown), if it names it.
fn named(rep: &ReplayReport, seq: u64) -> Option<Option<BTreeSet<u64>>> {
    let all: Vec<&RecordStripes> = rep.damaged.iter().chain(&rep.held_back).chain(&rep.tail).collect();
    all.iter().find(|r| r.seq == seq).map(|r| r.stripes.as_ref().map(|s| s.iter().copied().collect()))
}

/// Check every block after reopening with record `i` damaged; returns
/// how many blocks were reported rather than newest.
fn check_case(c: &Crashed, i: usize, d: Damage, lost: usize) -> usize {
    let what = format!("record {i} of {WRITES}, {d:?}, members lost the last {lost}");
    let (arr, _, _) = reopen_damaged(c, i, d);
    let rep = arr.info().journal_replayed.expect("the journal was replayed");
    let seq = c.first_seq + i as u64;
    // The report names the damaged record: skipped when valid records
    // follow it, the end of the log when it is the last.
    if i + 1 < WRITES {
        assert_eq!(rep.damaged.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![seq], "{what}: {rep:?}");
        assert_eq!(rep.records, WRITES as u64 - 1 - rep.held_back.len() as u64, "{what}: the records after it are replayed");
    } else {
        assert!(rep.damaged.is_empty(), "{what}: {rep:?}");
        assert_eq!(rep.tail.as_ref().map(|t| t.seq), Some(seq), "{what}: {rep:?}");
    }
    // Where the entry table survives, the report has the record's stripes.
    let own: BTreeSet<u64> = (0..c.versions.len()).filter(|&b| c.versions[b].iter().any(|v| v.0 == i)).map(|b| b as u64 / c.data).collect();
    match d {
        Damage::Length => assert_eq!(named(&rep, seq), Some(None), "{what}: {rep:?}"),
        _ => assert_eq!(named(&rep, seq), Some(Some(own.clone())), "{what}: {rep:?}"),
    }
    // The warning, as the user sees it.
    let warning = rep.warning().expect("damage is warned about");
    assert!(warning.contains(&format!("record {seq} (stripe")), "{what}: {warning}");
    assert!(warning.ends_with("run `mosaic scrub` to check them (`mosaic scrub --repair` rewrites their code)"), "{warning}");
    assert!(arr.open_warnings().contains(&warning), "{what}: {:?}", arr.open_warnings());
    // Every block: the newest acknowledged bytes, or a block of a record
    // the report names (at a stripe it names, or stripes unknown).
    let mut got = vec![0u8; arr.capacity() as usize];
    arr.read(0, &mut got).unwrap();
    let mut reported = 0;
    for (b, vs) in c.versions.iter().enumerate() {
        let newest = vs.last().map(|v| v.1.clone()).unwrap_or_else(|| vec![0u8; BLOCK as usize]);
        let have = &got[b * BLOCK as usize..(b + 1) * BLOCK as usize];
        if have == &newest[..] {
            continue;
        }
        let covered = vs.iter().any(|(w, _)| match named(&rep, c.first_seq + *w as u64) {
            Some(None) => true,
            Some(Some(stripes)) => stripes.contains(&(b as u64 / c.data)),
            None => false,
        });
        assert!(covered, "{what}: block {b} lost its newest bytes and no record of it is reported: {rep:?}");
        reported += 1;
    }
    // Scrub finds inconsistent code only in stripes the report names.
    let s = arr.scrub(false, &|_, _| {}).unwrap();
    let unknown = rep.damaged.iter().chain(&rep.held_back).chain(&rep.tail).any(|r| r.stripes.is_none());
    let listed: BTreeSet<u64> = rep.damaged.iter().chain(&rep.held_back).chain(&rep.tail).flat_map(|r| r.stripes.iter().flatten().copied()).collect();
    assert!(unknown || s.mismatched_stripes.iter().all(|st| listed.contains(st)), "{what}: scrub found {:?}, reported {listed:?}", s.mismatched_stripes);
    reported
}

/// kill -9: every write reached the members.  A damaged record in the
/// middle costs nothing; only the last one (indistinguishable from a torn
/// record) may leave its own blocks older, and then it is reported.
#[test]
fn kill_nine_then_any_record_damaged() {
    for (seed, (level, n)) in [("raid5", 5), ("raid6", 6), ("rs:3+2", 5)].into_iter().enumerate() {
        let seed = seed as u64;
        let c = crashed_run(level, n, seed, 0);
        for i in 0..WRITES {
            for d in [Damage::Payload, Damage::Magic, Damage::Length] {
                let reported = check_case(&c, i, d, 0);
                if i + 1 < WRITES {
                    assert_eq!(reported, 0, "{level} record {i} {d:?}: a damaged record in the middle rolled blocks back");
                }
            }
        }
    }
}

/// Power cut: the members lost the last four writes, the journal has
/// them.  Blocks of the damaged record (and, when its extent is unknown,
/// of the records held back before it) may be older, and are reported.
#[test]
fn power_cut_then_any_record_damaged() {
    let mut reported = 0;
    for seed in 0..3 {
        let c = crashed_run(["raid5", "raid6", "rs:3+2"][seed as usize], [5, 6, 5][seed as usize], seed + 10, 4);
        for i in 0..WRITES {
            for d in [Damage::Payload, Damage::Magic, Damage::Length] {
                reported += check_case(&c, i, d, 4);
            }
        }
    }
    assert!(reported > 0, "the lost writes must leave some damaged record's blocks older");
}

/// The warning names the record and its stripes, exactly.
#[test]
fn the_warning_text() {
    let c = crashed_run("raid5", 5, 7, 0);
    let (arr, ms, j) = reopen_damaged(&c, 2, Damage::Payload);
    let seq = c.first_seq + 2;
    let stripes: BTreeSet<u64> = (0..c.versions.len()).filter(|&b| c.versions[b].iter().any(|v| v.0 == 2)).map(|b| b as u64 / c.data).collect();
    let list: Vec<String> = stripes.iter().map(u64::to_string).collect();
    let noun = if stripes.len() == 1 { "stripe" } else { "stripes" };
    let want = format!(
        "journal record {seq} ({noun} {}) is damaged: the valid records after it were replayed and it was skipped, so its stripes may hold older data and code that disagrees with it; run `mosaic scrub` to check them (`mosaic scrub --repair` rewrites their code)",
        list.join(", ")
    );
    assert_eq!(arr.open_warnings(), &[want]);
    // The replay is done: the next open has nothing to say.
    arr.close().unwrap();
    drop(arr);
    let again = Array::open_members_with_journal(ms, true, Some(j)).unwrap();
    assert!(again.open_warnings().is_empty(), "{:?}", again.open_warnings());
    assert_eq!(again.info().journal_replayed.unwrap().records, 0);
}
