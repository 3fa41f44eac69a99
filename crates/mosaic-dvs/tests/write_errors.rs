//! Members whose writes, flushes or zone resets fail (array/failing.rs):
//! failed, the array opened again without them, and the client's
//! requests served all along.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use mosaic_core::MemberState::{self, *};
use mosaic_dvs::array::ZonedMember;
use mosaic_dvs::{DvsArray, DvsConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::array::{cfg, cfg_cached, check_all, files_for, fill, more_writes, random_write, reopen_files, scratch, zoned};
use crate::hooked::{Hooked, Hooks};

const WRITE: u8 = 1;
const FLUSH: u8 = 2;
const RESET: u8 = 4;

/// A member whose writes (appends), flushes or zone resets fail while
/// armed for them; counts every one it is asked for.
#[derive(Default)]
struct BadWrites {
    armed: AtomicU8,
    calls: AtomicU64,
    refused: AtomicU64,
    /// Set at the first refusal (another member's hook may watch it).
    tripped: Arc<AtomicBool>,
}

impl BadWrites {
    fn wrap(inner: Arc<dyn ZonedMember>) -> Arc<Hooked<BadWrites>> {
        Hooked::new(inner, BadWrites::default())
    }
    fn op(&self, what: u8) -> io::Result<()> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.armed.load(Ordering::SeqCst) & what == 0 {
            return Ok(());
        }
        self.refused.fetch_add(1, Ordering::SeqCst);
        self.tripped.store(true, Ordering::SeqCst);
        Err(io::Error::from_raw_os_error(libc::EIO))
    }
}

impl Hooks for BadWrites {
    fn write(&self, _: u64, _: usize) -> io::Result<()> {
        self.op(WRITE)
    }
    fn flush(&self) -> io::Result<()> {
        self.op(FLUSH)
    }
    fn reset(&self, _: u64) -> io::Result<()> {
        self.op(RESET)
    }
}

fn bad_array(dir: &std::path::Path, c: &DvsConfig) -> (DvsArray, Vec<Arc<Hooked<BadWrites>>>) {
    let bad: Vec<_> = files_for(dir, 5, c).into_iter().map(BadWrites::wrap).collect();
    let a = DvsArray::create(bad.iter().map(|b| b.clone() as Arc<dyn ZonedMember>).collect(), c.clone()).unwrap();
    (a, bad)
}

fn states(a: &DvsArray) -> Vec<MemberState> {
    a.info().member_list.iter().map(|m| m.state).collect()
}

/// Written through and cached: member 2's writes fail from some point;
/// every client write and flush succeeds, member 2 is failed (once, and
/// said so), never written again, stays failed at the next open, and a
/// hot spare added before takes its place.
#[test]
fn a_members_write_error_fails_it_and_the_array_goes_on() {
    for cached in [false, true] {
        let dir = scratch();
        let c = if cached { cfg_cached(1, 16) } else { cfg(1) };
        let (mut a, bad) = bad_array(dir.path(), &c);
        let spare = a.add_spare(zoned(dir.path(), "s0", &c)).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut reference = fill(&mut a, &mut rng, 150);
        a.flush().unwrap();
        bad[2].hooks.armed.store(WRITE, Ordering::SeqCst);
        more_writes(&mut a, &mut rng, &mut reference, 200);
        a.flush().unwrap();
        assert!(bad[2].hooks.refused.load(Ordering::SeqCst) > 0, "cached={cached}: member 2 was asked to write");
        assert_eq!(a.stopped(), None, "cached={cached}");
        assert_eq!(states(&a), [Active, Active, Failed, Active, Active], "cached={cached}");
        let failed = a.auto_failed().to_vec();
        assert_eq!(failed.iter().map(|f| f.0).collect::<Vec<_>>(), [2], "cached={cached}: {failed:?}");
        assert!(failed[0].1.contains("member 2") && failed[0].1.contains("Input/output error"), "{failed:?}");
        assert!(a.warnings().iter().any(|w| w.starts_with("member 2 (") && w.contains("failed after a write error")), "{:?}", a.warnings());
        check_all(&mut a, &reference);
        // Never written again: its writes would go through now.
        bad[2].hooks.armed.store(0, Ordering::SeqCst);
        let calls = bad[2].hooks.calls.load(Ordering::SeqCst);
        more_writes(&mut a, &mut rng, &mut reference, 100);
        a.flush().unwrap();
        check_all(&mut a, &reference);
        assert_eq!(bad[2].hooks.calls.load(Ordering::SeqCst), calls, "cached={cached}: the failed member took no write");
        assert_eq!(a.spares().iter().map(|s| s.uuid).collect::<Vec<_>>(), [spare], "the spare is kept");
        drop(a);
        // Opened again with every file: member 2 stays failed on record.
        let mut devs = reopen_files(dir.path(), 5);
        devs.push(Arc::new(mosaic_dev::zoned::ZonedFile::open(&dir.path().join("s0")).unwrap()));
        let mut b = DvsArray::open(devs).unwrap();
        assert_eq!(states(&b), [Active, Active, Failed, Active, Active], "cached={cached}");
        check_all(&mut b, &reference);
        assert_eq!(b.take_spare().unwrap(), Some((2, spare)));
        b.rebuild(&|_, _| {}, None).unwrap();
        assert_eq!(states(&b), [Active; 5]);
        check_all(&mut b, &reference);
        assert_eq!(b.scrub().unwrap(), 0);
    }
}

/// k = 2: one member's flushes fail, another's zone resets (met in GC):
/// both failed in turn, the array serves throughout.
#[test]
fn flush_and_zone_reset_errors_fail_their_members() {
    let dir = scratch();
    let c = cfg(2);
    let (mut a, bad) = bad_array(dir.path(), &c);
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let mut reference = fill(&mut a, &mut rng, 100);
    bad[1].hooks.armed.store(FLUSH, Ordering::SeqCst);
    bad[3].hooks.armed.store(RESET, Ordering::SeqCst);
    more_writes(&mut a, &mut rng, &mut reference, 50);
    assert_eq!(states(&a)[1], Failed, "a flush came and failed");
    for _ in 0..40 {
        if states(&a)[3] == Failed {
            break;
        }
        more_writes(&mut a, &mut rng, &mut reference, 100);
        while a.gc_step().unwrap() {}
    }
    assert!(bad[3].hooks.refused.load(Ordering::SeqCst) > 0, "a zone reset came");
    assert_eq!(states(&a), [Active, Failed, Active, Failed, Active]);
    assert_eq!(a.auto_failed().iter().map(|f| f.0).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(a.stopped(), None);
    check_all(&mut a, &reference);
    more_writes(&mut a, &mut rng, &mut reference, 100);
    check_all(&mut a, &reference);
}

/// k = 1 with a member already failed: a second member's write error
/// cannot be taken, so the array stops as before (the client's write
/// fails with the member's error, the next request says to reopen), and
/// an open afterwards finds every acknowledged write.
#[test]
fn a_write_error_past_the_parity_stops_the_array() {
    for cached in [false, true] {
        let dir = scratch();
        let c = if cached { cfg_cached(1, 16) } else { cfg(1) };
        let (mut a, bad) = bad_array(dir.path(), &c);
        let mut rng = ChaCha8Rng::seed_from_u64(13);
        let mut reference = fill(&mut a, &mut rng, 150);
        a.fail(0).unwrap();
        bad[2].hooks.armed.store(WRITE, Ordering::SeqCst);
        let cap = a.capacity();
        let mut inflight = None;
        for _ in 0..400 {
            let (off, data) = random_write(&mut rng, cap);
            match a.write(off, &data).and_then(|_| a.flush()) {
                Ok(()) => reference[off as usize..off as usize + data.len()].copy_from_slice(&data),
                Err(e) => {
                    assert!(e.to_string().contains("member 2") && e.to_string().contains("Input/output error"), "cached={cached}: {e}");
                    inflight = Some((off, data));
                    break;
                }
            }
        }
        let (off, data) = inflight.expect("a write met the error");
        let why = a.stopped().expect("stopped");
        let e = a.read(0, &mut [0u8; 512]).unwrap_err().to_string();
        assert!(e.contains("reopen it") && e.contains(&why), "{e}");
        assert!(a.auto_failed().is_empty());
        drop(a);
        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        assert_eq!(states(&b)[0], Failed);
        let mut got = vec![0u8; cap as usize];
        b.read(0, &mut got).unwrap();
        for (i, (&g, &w)) in got.iter().zip(&reference).enumerate() {
            let inside = (i as u64) >= off && (i as u64) < off + data.len() as u64;
            assert!(g == w || (inside && g == data[i - off as usize]), "cached={cached}: byte {i}: got {g}, acknowledged {w}");
        }
    }
}

/// A member that stops answering reads once `.0` is set.
struct Unanswering(Arc<AtomicBool>);

impl Hooks for Unanswering {
    fn read(&self, _: u64, _: usize) -> io::Result<()> {
        match self.0.load(Ordering::SeqCst) {
            true => Err(io::Error::new(io::ErrorKind::TimedOut, "injected: no answer")),
            false => Ok(()),
        }
    }
}

/// Member 2's write fails and, at that moment, member 3 stops answering
/// reads: the array cannot be opened again without member 2 (three of
/// five members answer), so the write fails saying so, and the array
/// stays stopped, the next request saying to reopen it.
#[test]
fn a_reopen_that_fails_says_why_and_the_array_stays_stopped() {
    let dir = scratch();
    let c = cfg(1);
    let mut devs = files_for(dir.path(), 5, &c);
    let bad = BadWrites::wrap(devs[2].clone());
    devs[3] = Hooked::new(devs[3].clone(), Unanswering(bad.hooks.tripped.clone()));
    devs[2] = bad.clone();
    let mut a = DvsArray::create(devs, c).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let _ = fill(&mut a, &mut rng, 100);
    bad.hooks.armed.store(WRITE, Ordering::SeqCst);
    let cap = a.capacity();
    let e = (0..400)
        .find_map(|_| {
            let (off, data) = random_write(&mut rng, cap);
            a.write(off, &data).err()
        })
        .expect("a write met the error")
        .to_string();
    assert!(e.contains("member 2: Input/output error") && e.contains("opening the array again without member(s) 2 failed: only 3 of 5 members present"), "{e}");
    let next = a.read(0, &mut [0u8; 512]).unwrap_err().to_string();
    assert!(next.contains("reopen it") && next.contains("opening the array again without member(s) 2 failed"), "{next}");
    assert!(a.auto_failed().is_empty());
}

/// A hot replace under way (member 1 onto a new drive, paused once so
/// the labels record it) when another member's writes fail: that member
/// is failed, the copy ends (member 1 stays on its old drive), everything
/// reads back, and a hot replace started again copies and switches.
#[test]
fn a_write_error_during_a_hot_replace_ends_the_copy_and_keeps_the_data() {
    let dir = scratch();
    let c = cfg_cached(2, 16);
    let (mut a, bad) = bad_array(dir.path(), &c);
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let mut reference = fill(&mut a, &mut rng, 150);
    a.hot_start(1, zoned(dir.path(), "new1", &c)).unwrap();
    a.hot_step(2).unwrap();
    a.hot_pause().unwrap();
    a.hot_step(1).unwrap();
    bad[3].hooks.armed.store(WRITE, Ordering::SeqCst);
    more_writes(&mut a, &mut rng, &mut reference, 150);
    a.flush().unwrap();
    assert_eq!(states(&a), [Active, Active, Active, Failed, Active]);
    assert!(a.hot_progress().is_none(), "the copy ended");
    assert!(a.hot_step(1).is_err());
    check_all(&mut a, &reference);
    a.hot_start(1, zoned(dir.path(), "new1b", &c)).unwrap();
    while a.hot_progress().is_some_and(|p| p.done < p.total) {
        a.hot_step(4).unwrap();
        more_writes(&mut a, &mut rng, &mut reference, 10);
    }
    a.hot_switch().unwrap();
    a.flush().unwrap();
    check_all(&mut a, &reference);
    drop(a);
    let mut devs = reopen_files(dir.path(), 5);
    devs.push(Arc::new(mosaic_dev::zoned::ZonedFile::open(&dir.path().join("new1b")).unwrap()));
    let mut b = DvsArray::open(devs).unwrap();
    assert_eq!(states(&b), [Active, Active, Active, Failed, Active]);
    check_all(&mut b, &reference);
}

/// A drive that dies (every operation fails from then on) at its
/// `after`-th write, flush or zone reset.
struct Dies {
    after: std::sync::atomic::AtomicI64,
}

impl Dies {
    fn op(&self, counts: bool) -> io::Result<()> {
        let left = if counts { self.after.fetch_sub(1, Ordering::SeqCst) - 1 } else { self.after.load(Ordering::SeqCst) };
        match left < 0 {
            true => Err(io::Error::other("injected: the drive died")),
            false => Ok(()),
        }
    }
}

impl Hooks for Dies {
    fn read(&self, _: u64, _: usize) -> io::Result<()> {
        self.op(false)
    }
    fn write(&self, _: u64, _: usize) -> io::Result<()> {
        self.op(true)
    }
    fn flush(&self) -> io::Result<()> {
        self.op(true)
    }
    fn reset(&self, _: u64) -> io::Result<()> {
        self.op(true)
    }
}

/// Seeded: k members die, one after another, at random operations of a
/// random workload (write-through, cached, a ring journal; GC steps and
/// flushes between the writes).  Every request succeeds, the dead members
/// end failed, every acknowledged write reads back, before and after the
/// array is opened again from its files.
#[test]
fn members_dying_at_random_operations_lose_nothing_acknowledged() {
    use rand::Rng;
    let mut failed_total = 0;
    for seed in 0..24u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
        let dir = scratch();
        let k = 1 + (seed % 2) as usize;
        let c = match seed % 3 {
            0 => cfg(k),
            1 => cfg_cached(k, 16),
            _ => DvsConfig { journal_ring: true, ..cfg_cached(k, 16) },
        };
        let mut dying = Vec::new();
        while dying.len() < k {
            let m = rng.gen_range(0..5);
            if !dying.contains(&m) {
                dying.push(m);
            }
        }
        let hooked: Vec<Arc<Hooked<Dies>>> = files_for(dir.path(), 5, &c).into_iter().map(|f| Hooked::new(f, Dies { after: i64::MAX.into() })).collect();
        let mut a = DvsArray::create(hooked.iter().map(|h| h.clone() as Arc<dyn ZonedMember>).collect(), c.clone()).unwrap();
        let cap = a.capacity();
        let warm = rng.gen_range(50..300);
        let mut reference = fill(&mut a, &mut rng, warm);
        for (i, &m) in dying.iter().enumerate() {
            hooked[m].hooks.after.store(rng.gen_range(0..200) + 200 * i as i64, Ordering::SeqCst);
        }
        for i in 0..800 {
            match i % 50 {
                17 => while a.gc_step().unwrap_or_else(|e| panic!("seed {seed}: gc: {e}")) {},
                33 => a.flush().unwrap_or_else(|e| panic!("seed {seed}: flush: {e}")),
                _ => {
                    let (off, data) = random_write(&mut rng, cap);
                    a.write(off, &data).unwrap_or_else(|e| panic!("seed {seed}: write {i}: {e}"));
                    reference[off as usize..off as usize + data.len()].copy_from_slice(&data);
                }
            }
        }
        a.flush().unwrap();
        assert_eq!(a.stopped(), None, "seed {seed}");
        let dead: Vec<usize> = (0..5).filter(|&m| hooked[m].hooks.after.load(Ordering::SeqCst) < 0).collect();
        let st = states(&a);
        for (m, s) in st.iter().enumerate() {
            assert_eq!(*s == Failed, dead.contains(&m), "seed {seed}: member {m} {s:?}, dead {dead:?}");
        }
        let mut auto: Vec<usize> = a.auto_failed().iter().map(|f| f.0).collect();
        auto.sort_unstable();
        assert_eq!(auto, dead, "seed {seed}");
        failed_total += dead.len();
        check_all(&mut a, &reference);
        drop(a);
        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        assert_eq!(states(&b), st, "seed {seed}");
        check_all(&mut b, &reference);
    }
    assert!(failed_total >= 24, "most drives died: {failed_total}");
}
