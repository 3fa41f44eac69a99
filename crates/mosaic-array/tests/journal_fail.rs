//! The journal device itself failing: a failed record, sync or checkpoint
//! header makes the journal refuse every write after it until the array is
//! opened again, so replay never combines a record whose write failed with
//! later records of its stripe, or misses records after a checkpoint that
//! did not take.  Each case ends with a power cut, a reopen from what the
//! devices hold, a scrub, and a read of an acknowledged page without its
//! member.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::SeqCst};
use std::sync::Arc;

use mosaic_array::{Array, CacheVolume, CreateOptions, DATA_OFFSET};
use mosaic_core::{CacheConfig, CachePolicy, Level};
use mosaic_dev::{MemMember, Member};

const U: u64 = 4096;

/// A RAM device whose flushes fail on command (`after_header`: only the
/// flush right after a write at offset 0, a journal header), whose writes
/// fail on command, and whose writes past `budget` are dropped silently
/// (a power cut).
struct Dev {
    m: Arc<MemMember>,
    fail_flush: AtomicBool,
    fail_write: AtomicBool,
    after_header: AtomicBool,
    last_header: AtomicBool,
    budget: Arc<AtomicI64>,
}

impl Dev {
    fn new(m: Arc<MemMember>, budget: Arc<AtomicI64>) -> Arc<Dev> {
        let no = || AtomicBool::new(false);
        Arc::new(Dev { m, fail_flush: no(), fail_write: no(), after_header: no(), last_header: no(), budget })
    }
}

impl Member for Dev {
    fn describe(&self) -> String {
        self.m.describe()
    }
    fn size(&self) -> u64 {
        self.m.size()
    }
    fn read_at(&self, b: &mut [u8], o: u64) -> io::Result<()> {
        self.m.read_at(b, o)
    }
    fn write_at(&self, b: &[u8], o: u64) -> io::Result<()> {
        if self.fail_write.load(SeqCst) {
            return Err(io::Error::other("injected write error"));
        }
        self.last_header.store(o == 0, SeqCst);
        if self.budget.fetch_sub(1, SeqCst) > 0 {
            self.m.write_at(b, o)?;
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        let header = self.last_header.load(SeqCst);
        if self.fail_flush.load(SeqCst) && (!self.after_header.load(SeqCst) || header) {
            return Err(io::Error::other("injected flush error"));
        }
        Ok(())
    }
    fn is_memory(&self) -> bool {
        true
    }
}

struct Rig {
    mems: Vec<Arc<MemMember>>,
    jmem: Arc<MemMember>,
    jdev: Arc<Dev>,
    budget: Arc<AtomicI64>,
}

fn rig(level: &str, n: usize, jsize: u64) -> (Rig, Array) {
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let mems: Vec<Arc<MemMember>> = (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + 32 * U))).collect();
    let jmem = Arc::new(MemMember::new("journal", jsize));
    let jdev = Dev::new(jmem.clone(), Arc::new(AtomicI64::new(i64::MAX)));
    let members = mems.iter().map(|m| (Dev::new(m.clone(), budget.clone()) as Arc<dyn Member>, m.describe())).collect();
    let o = CreateOptions { level: level.parse::<Level>().unwrap(), members: Some(n), member_size: None, unit: U, block: 4096, force: true, assume_clean: true };
    let arr = Array::create_with_journal(members, &o, true, Some((jdev.clone() as Arc<dyn Member>, "journal".into()))).unwrap();
    (Rig { mems, jmem, jdev, budget }, arr)
}

fn read(arr: &Array, off: u64) -> Vec<u8> {
    let mut b = vec![0u8; U as usize];
    arr.read(off, &mut b).unwrap();
    b
}

/// The journal has failed: writes are refused (even with the device
/// working again), reads work, `info` and close say why.
fn check_refusing(r: &Rig, arr: &Array) {
    r.jdev.fail_flush.store(false, SeqCst);
    r.jdev.fail_write.store(false, SeqCst);
    let e = arr.write(3 * U, &[4u8; 4096]).unwrap_err().to_string();
    assert!(e.contains("the write-ahead journal") && e.contains("refuses writes") && e.contains("open it again"), "{e}");
    assert!(arr.info().journal_failed.is_some_and(|w| w.contains("injected")), "{:?}", arr.info().journal_failed);
    let e = arr.close().unwrap_err().to_string();
    assert!(e.contains("closed without a checkpoint"), "{e}");
}

/// Power cut (nothing more reaches the members or the journal), reopen
/// from what they hold: every stripe's code agrees with its data, and
/// page 1 (acknowledged as `w1`) reads back without its member.
/// Page 0's write failed: it reads its old or its new bytes.
fn crash_and_check(r: &Rig, arr: Array, w1: &[u8], page0: (&[u8], &[u8]), what: &str) {
    r.budget.store(i64::MIN / 2, SeqCst);
    r.jdev.budget.store(i64::MIN / 2, SeqCst);
    drop(arr);
    let ms = |without: Option<usize>| r.mems.iter().enumerate().filter(|(i, _)| Some(*i) != without).map(|(_, m)| m.clone() as Arc<dyn Member>).collect::<Vec<_>>();
    let arr = Array::open_members_with_journal(ms(None), true, Some(r.jmem.clone() as Arc<dyn Member>)).unwrap();
    let s = arr.scrub(false, &|_, _| {}).unwrap();
    assert!(s.mismatched_stripes.is_empty(), "{what}: scrub found {:?}", s.mismatched_stripes);
    let victim = arr.geometry().member_of(0, 1);
    arr.close().unwrap();
    drop(arr);
    let arr = Array::open_members_with_journal(ms(Some(victim)), true, Some(r.jmem.clone() as Arc<dyn Member>)).unwrap();
    assert!(read(&arr, U) == w1, "{what}: acknowledged page 1 rebuilt wrong");
    let p0 = read(&arr, 0);
    assert!(p0 == page0.0 || p0 == page0.1, "{what}: the failed write's page is neither old nor new");
}

/// A write whose journal sync failed (its record may be on the device):
/// without the refusal, the next write to its stripe was journaled with
/// code computed from members that never got the failed write, and replay
/// applied both (raid5 7 of 40 runs, rs:4+2 12 of 40 in a random audit,
/// an acknowledged page then rebuilt wrong).
#[test]
fn a_failed_journal_sync_refuses_every_later_write_and_replay_keeps_every_stripe() {
    for (level, n) in [("raid5", 5), ("rs:4+2", 6)] {
        let (r, arr) = rig(level, n, 4 << 20);
        let w1 = vec![1u8; 4096];
        arr.write(U, &w1).unwrap();
        r.jdev.fail_flush.store(true, SeqCst);
        let e = arr.write(0, &[2u8; 4096]).unwrap_err().to_string();
        assert!(e.contains("syncing journal") && e.contains("injected flush error"), "{level}: {e}");
        assert_eq!(read(&arr, 0), vec![0u8; 4096], "{level}: the failed write did not reach the members");
        check_refusing(&r, &arr);
        // Another stripe-0 write is refused too: nothing follows the
        // failed record.
        assert!(arr.write(2 * U, &[3u8; 4096]).is_err());
        crash_and_check(&r, arr, &w1, (&[0u8; 4096], &[2u8; 4096]), level);
    }
}

/// A failed record write refuses the writes after it the same way.
#[test]
fn a_failed_journal_write_refuses_every_later_write() {
    let (r, arr) = rig("raid5", 5, 4 << 20);
    let w1 = vec![1u8; 4096];
    arr.write(U, &w1).unwrap();
    r.jdev.fail_write.store(true, SeqCst);
    let e = arr.write(0, &[2u8; 4096]).unwrap_err().to_string();
    assert!(e.contains("writing journal") && e.contains("injected write error"), "{e}");
    check_refusing(&r, &arr);
    crash_and_check(&r, arr, &w1, (&[0u8; 4096], &[2u8; 4096]), "write");
}

/// A checkpoint whose header write landed but whose flush failed: the
/// device names a checkpoint the ring in memory has not taken.  Without
/// the refusal a small write still fitting at the ring's end was
/// journaled past that checkpoint, acknowledged, and never replayed (a
/// power cut in its member writes then left its stripe torn).
#[test]
fn a_checkpoint_whose_header_flush_failed_refuses_the_writes_after_it() {
    let (r, arr) = rig("raid5", 5, 1 << 20);
    let j = arr.journal().unwrap();
    let big = vec![9u8; 12 * 4096];
    while j.used() + 2 * 16 * 4096 + 8192 < j.capacity() {
        arr.write(16 * U, &big).unwrap();
    }
    let w1 = vec![1u8; 4096];
    arr.write(U, &w1).unwrap();
    r.jdev.after_header.store(true, SeqCst);
    r.jdev.fail_flush.store(true, SeqCst);
    let e = (0..8).find_map(|_| arr.write(16 * U, &big).err()).expect("the ring filled").to_string();
    assert!(e.contains("journal header"), "{e}");
    // Page 0 fits in the rest of the ring: refused, not journaled.
    r.budget.store(1, SeqCst);
    assert!(arr.write(0, &[2u8; 4096]).is_err());
    r.budget.store(i64::MAX, SeqCst);
    check_refusing(&r, &arr);
    crash_and_check(&r, arr, &w1, (&[0u8; 4096], &[0u8; 4096]), "header");
}

/// A cache volume stopped by its journal says the journal failed, not a
/// member; it names the way back (keep the journal, open again once it
/// works); the journal brings every acknowledged write back.
#[test]
fn a_cache_volume_stopped_by_its_journal_says_so() {
    for policy in CachePolicy::ALL {
        let (r, arr) = rig("raid5", 5, 8 << 20);
        let cfg = CacheConfig { policy, write_cache: 4 * U, parity_cache: 2 * U, old_data: 4 * U };
        let v = CacheVolume::new(arr, cfg).unwrap();
        let mut model = vec![0u8; (32 * 4 * U) as usize];
        let mut failed = None;
        for i in 0..200u64 {
            if i == 40 {
                r.jdev.fail_write.store(true, SeqCst);
            }
            let off = (i * 7 % 96) * U;
            let data = vec![(i % 250 + 1) as u8; U as usize];
            match v.write(off, &data) {
                Ok(()) => model[off as usize..(off + U) as usize].copy_from_slice(&data),
                Err(e) => {
                    failed = Some((off, e.to_string()));
                    break;
                }
            }
        }
        let (off, e) = failed.unwrap_or_else(|| panic!("{policy:?}: no write failed"));
        assert!(!e.contains("a member failed"), "{policy:?}: {e}");
        assert!(e.contains("the write-ahead journal") && e.contains("injected write error"), "{policy:?}: {e}");
        let e = v.write(0, &[1u8; 4096]).unwrap_err().to_string();
        assert!(e.contains("keep its device") && e.contains("once the journal device works"), "{policy:?}: {e}");
        r.jdev.fail_write.store(false, SeqCst);
        drop(v);
        let ms = r.mems.iter().map(|m| m.clone() as Arc<dyn Member>).collect();
        let arr = Array::open_members_with_journal(ms, true, Some(r.jmem.clone() as Arc<dyn Member>)).unwrap();
        let mut got = vec![0u8; model.len()];
        arr.read(0, &mut got).unwrap();
        for p in 0..got.len() / U as usize {
            let at = p * U as usize;
            if at as u64 == off {
                continue;
            }
            assert!(got[at..at + U as usize] == model[at..at + U as usize], "{policy:?}: page {p}");
        }
    }
}

/// Opened read-only without its journal after a crash, an array says
/// its reads may miss what the journal holds; opened so when it was shut
/// down cleanly, it says nothing.
#[test]
fn a_read_only_open_without_the_journal_after_a_crash_warns() {
    let (r, arr) = rig("raid5", 5, 4 << 20);
    arr.write(0, &[5u8; 4096]).unwrap();
    // Power cut: the close at drop reaches nothing.
    r.budget.store(i64::MIN / 2, SeqCst);
    r.jdev.budget.store(i64::MIN / 2, SeqCst);
    drop(arr);
    let ms = || r.mems.iter().map(|m| m.clone() as Arc<dyn Member>).collect::<Vec<_>>();
    let ro = Array::open_members_with_journal(ms(), false, None).unwrap();
    assert!(ro.opened_dirty());
    let w = ro.open_warnings().join("\n");
    assert!(w.contains("cannot be used (not given)") && w.contains("reads may show old bytes"), "{w}");
    assert_eq!(ro.info().journal_failed.as_deref(), Some("not given"));
    drop(ro);
    let arr = Array::open_members_with_journal(ms(), true, Some(r.jmem.clone() as Arc<dyn Member>)).unwrap();
    arr.close().unwrap();
    drop(arr);
    let ro = Array::open_members_with_journal(ms(), false, None).unwrap();
    assert!(ro.open_warnings().is_empty(), "{:?}", ro.open_warnings());
    assert_eq!(ro.info().journal_failed, None);
}

/// A crash, then the journal file is gone: a new journal is refused
/// without `force` (what the crash left in the old one is gone); with it,
/// the new journal is attached and every stripe resynced, every
/// acknowledged write reads back (a plain array's writes reach the
/// members before they are acknowledged), scrub is clean, and the array
/// opens with its new journal.
#[test]
fn a_lost_journal_is_replaced_after_a_crash_with_force_and_a_resync() {
    use mosaic_array::spec::ArraySpec;
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let spec = ArraySpec::Dir(dir.clone());
    let o = CreateOptions { level: Level::Raid5, members: Some(4), member_size: Some(DATA_OFFSET + 64 * U), unit: U, block: 4096, force: false, assume_clean: false };
    let arr = Array::create_journaled(&spec, &o, Some((&dir.join("journal.img"), 1 << 20))).unwrap();
    let cap = arr.capacity() as usize;
    let data: Vec<u8> = (0..cap).map(|i| (i % 253) as u8).collect();
    arr.write(0, &data).unwrap();
    // The crash: the members as they are while the array is open (dirty),
    // copied without the journal; the copy is an array of its own.
    let crashed = t.path().join("crashed");
    std::fs::create_dir(&crashed).unwrap();
    for i in 0..4 {
        let f = ArraySpec::member_file(&dir, i);
        std::fs::copy(&f, crashed.join(f.file_name().unwrap())).unwrap();
    }
    drop(arr);
    let spec = ArraySpec::Dir(crashed.clone());
    let new = |name: &str| -> (Arc<dyn Member>, String) {
        let p = crashed.join(name);
        (Arc::new(mosaic_dev::Device::open_or_create(&p, 1 << 20).unwrap()), p.canonicalize().unwrap().display().to_string())
    };
    let (j, hint) = new("journal.img");
    let e = Array::replace_journal(&spec, j, hint, false).unwrap_err().to_string();
    assert!(e.contains("not shut down cleanly") && e.contains("--force"), "{e}");
    let (j, hint) = new("journal.img");
    let r = Array::replace_journal(&spec, j, hint, true).unwrap();
    assert!(!r.old_usable && r.resynced, "{r:?}");
    let arr = Array::open(&spec, true).unwrap();
    assert!(arr.info().journal.is_some_and(|j| j.ends_with("journal.img")));
    assert!(arr.open_warnings().is_empty(), "{:?}", arr.open_warnings());
    let mut got = vec![0u8; cap];
    arr.read(0, &mut got).unwrap();
    assert!(got == data, "acknowledged bytes after the new journal");
    assert!(arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty());
    arr.write(U, &[7u8; 4096]).unwrap();
    arr.close().unwrap();
    // With a working journal, a replacement replays and empties it first.
    drop(arr);
    let (j, hint) = new("j3.img");
    let r = Array::replace_journal(&spec, j, hint, false).unwrap();
    assert!(r.old_usable && !r.resynced, "{r:?}");
    let arr = Array::open(&spec, false).unwrap();
    let mut p = vec![0u8; 4096];
    arr.read(U, &mut p).unwrap();
    assert_eq!(p, vec![7u8; 4096]);
}
