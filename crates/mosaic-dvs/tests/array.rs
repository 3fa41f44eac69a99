//! The real executor on emulated zoned drives (ZonedFile) against a
//! reference model of the logical space.

use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use mosaic_dev::zoned::ZonedFile;
use mosaic_dvs::array::{PowerCut, Unflushed, ZonedMember};
use mosaic_dvs::{DvsArray, DvsConfig, DvsError, Prepared};

use crate::hooked::{Hooked, Hooks};
use mosaic_format::frame::checksum;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const CHUNK: u64 = 4096;
const ZONE: u64 = 8 * CHUNK;
/// 4 conventional zones (128 KiB) hold the member labels; 2 more the
/// checkpoints and the log; 10 sequential zones.
const ZONES: u64 = 16;
const CONV: u64 = 6;

/// A scratch directory, in RAM when the machine has /dev/shm (the drives
/// fsync on every flush; on tmpfs that is free).
pub(crate) fn scratch() -> tempfile::TempDir {
    match std::fs::metadata("/dev/shm") {
        Ok(m) if m.is_dir() => tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap()),
        _ => tempfile::tempdir().unwrap(),
    }
}

pub(crate) fn cfg(k: usize) -> DvsConfig {
    DvsConfig::new(5, k, CHUNK, ZONE, ZONES, CONV)
}

/// With a journalled write cache of `cache` chunks (more conventional
/// zones for the journal).
pub(crate) fn cfg_cached(k: usize, cache: u64) -> DvsConfig {
    DvsConfig { cache_chunks: cache, ..DvsConfig::new(5, k, CHUNK, ZONE, ZONES, CONV + 2) }
}

fn files(dir: &Path, n: usize) -> Vec<Arc<dyn ZonedMember>> {
    files_for(dir, n, &cfg(1))
}

pub(crate) fn files_for(dir: &Path, n: usize, c: &DvsConfig) -> Vec<Arc<dyn ZonedMember>> {
    (0..n).map(|i| Arc::new(ZonedFile::create(&dir.join(format!("m{i}")), ZONE, ZONES, c.conventional).unwrap()) as Arc<dyn ZonedMember>).collect()
}

/// Five zoned files of `c`'s own zone geometry.
fn zoned_files(dir: &Path, c: &DvsConfig) -> Vec<Arc<dyn ZonedMember>> {
    (0..5).map(|i| Arc::new(ZonedFile::create(&dir.join(format!("m{i}")), c.zone_size, c.zones, c.conventional).unwrap()) as Arc<dyn ZonedMember>).collect()
}

pub(crate) fn reopen_files(dir: &Path, n: usize) -> Vec<Arc<dyn ZonedMember>> {
    (0..n).map(|i| Arc::new(ZonedFile::open(&dir.join(format!("m{i}"))).unwrap()) as Arc<dyn ZonedMember>).collect()
}

/// A write of one sector (all its journal records one length).
fn sector_write(rng: &mut ChaCha8Rng, cap: u64) -> (u64, Vec<u8>) {
    let off = rng.gen_range(0..cap / 512) * 512;
    let mut data = vec![0u8; 512];
    rng.fill(&mut data[..]);
    (off, data)
}

pub(crate) fn random_write(rng: &mut ChaCha8Rng, cap: u64) -> (u64, Vec<u8>) {
    let blocks = cap / 512;
    let len = rng.gen_range(1..=24u64).min(blocks);
    let off = rng.gen_range(0..=blocks - len) * 512;
    let mut data = vec![0u8; (len * 512) as usize];
    rng.fill(&mut data[..]);
    (off, data)
}

pub(crate) fn check_all(a: &mut DvsArray, reference: &[u8]) {
    let mut got = vec![0u8; reference.len()];
    // Read in odd-sized pieces to cross chunk and SSG boundaries.
    let mut pos = 0;
    while pos < reference.len() {
        let n = (7 * 512usize).min(reference.len() - pos);
        a.read(pos as u64, &mut got[pos..pos + n]).unwrap();
        pos += n;
    }
    if got != reference {
        let i = got.iter().zip(reference).position(|(a, b)| a != b).unwrap();
        panic!("logical byte {i} differs: got {} want {}", got[i], reference[i]);
    }
}

/// Random writes and reads against the model, up to k members failed at
/// random moments, replaced and rebuilt, scrubbed, reopened.
fn run_model(seed: u64, k: usize, ops: usize) {
    run_model_with(seed, cfg(k), ops)
}

fn run_model_with(seed: u64, c: DvsConfig, ops: usize) {
    let k = c.parity;
    let dir = scratch();
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let cap = a.capacity();
    let mut reference = vec![0u8; cap as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut failed: Vec<usize> = Vec::new();
    let mut spare_id = 0;
    let mut paths: Vec<std::path::PathBuf> = (0..5).map(|i| dir.path().join(format!("m{i}"))).collect();
    // A hot replace in progress: its member and new drive's path.
    let mut hot: Option<(usize, std::path::PathBuf)> = None;
    let mut switched = 0;
    let mut ghosts = Ghosts::default();
    for i in 0..ops {
        if hot.is_some() && rng.gen_bool(0.2) {
            let p = a.hot_step(1).unwrap();
            if p.done == p.total {
                let (m, path) = hot.take().unwrap();
                a.hot_switch().unwrap();
                paths[m] = path;
                switched += 1;
                check_all(&mut a, &reference);
            }
        }
        match rng.gen_range(0..100) {
            0..=69 => {
                let (off, data) = random_write(&mut rng, cap);
                a.write(off, &data).unwrap();
                reference[off as usize..off as usize + data.len()].copy_from_slice(&data);
                ghosts.wrote(off, data.len());
            }
            70..=71 => ghosts.discard(&mut a, &mut rng, &mut reference, c.cache_chunks == 0),
            72..=89 => {
                let (off, data) = random_write(&mut rng, cap);
                let mut got = vec![0u8; data.len()];
                a.read(off, &mut got).unwrap();
                assert_eq!(got, reference[off as usize..off as usize + data.len()], "op {i}: read at {off}");
            }
            90..=91 => {
                a.gc_step().unwrap();
            }
            92..=94 if failed.len() < k => {
                let m = rng.gen_range(0..5);
                if !failed.contains(&m) {
                    a.fail(m).unwrap();
                    failed.push(m);
                    // A member failing ends a hot replace.
                    hot = None;
                    assert_eq!(a.hot_progress(), None);
                    check_all(&mut a, &reference);
                }
            }
            95..=99 if failed.is_empty() && hot.is_none() && rng.gen_bool(0.3) => {
                let m = rng.gen_range(0..5);
                spare_id += 1;
                let path = dir.path().join(format!("hot{spare_id}"));
                a.hot_start(m, Arc::new(ZonedFile::create(&path, ZONE, ZONES, c.conventional).unwrap())).unwrap();
                hot = Some((m, path));
            }
            _ if !failed.is_empty() && hot.is_none() => {
                let m = failed.remove(0);
                spare_id += 1;
                paths[m] = dir.path().join(format!("spare{spare_id}"));
                let dev = Arc::new(ZonedFile::create(&paths[m], ZONE, ZONES, c.conventional).unwrap());
                a.replace(m, dev).unwrap();
                let rep = a.rebuild(&|_, _| {}, None).unwrap();
                assert_eq!(rep.members, vec![m]);
                let s = a.scrub_with(false, &|_, _| {}).unwrap();
                assert!(s.mismatched == 0 && (s.unverified_stripes == 0) == failed.is_empty(), "op {i}: scrub after rebuilding member {m}: {s:?}");
                check_all(&mut a, &reference);
            }
            _ => {}
        }
    }
    check_all(&mut a, &reference);
    assert!(a.stats().fg_gc > 0, "the workload must have garbage-collected: {:?}", a.stats());
    if ops >= 1000 {
        assert!(a.stats().bg_gc > 0, "idle GC steps ran: {:?}", a.stats());
        assert!(switched > 0, "a hot replace ran to its end");
    }
    assert!(a.stats().partial_stripes > 0);
    if failed.is_empty() {
        assert_eq!(a.scrub().unwrap(), 0);
        drop(a);
        // Any order of members.
        let devs: Vec<Arc<dyn ZonedMember>> = paths.iter().rev().map(|p| Arc::new(ZonedFile::open(p).unwrap()) as Arc<dyn ZonedMember>).collect();
        let mut b = DvsArray::open(devs).unwrap();
        assert!(b.info().failed.is_empty());
        ghosts.check_reopened(&mut b, &reference);
    }
    assert!(ghosts.unmapped > 0, "the workload discarded chunks");
}

/// Discards in the model.  A chunk a discard unmaps reads as zeros from
/// then on; after a reopen it may read its bytes from before the discard
/// again (a discard is durable only once its SSG's GC has run), with what
/// was written into it since on top.
#[derive(Default)]
struct Ghosts {
    /// Chunk index -> its bytes before the discard, and which bytes were
    /// written since.
    chunks: std::collections::HashMap<u64, (Vec<u8>, Vec<bool>)>,
    unmapped: u64,
}

impl Ghosts {
    /// Discard a random range (from one block to six chunks, at any
    /// block): the whole chunks in it that become holes read as zeros;
    /// every other byte keeps its value.  Write-through, every whole
    /// chunk written is unmapped (no cache keeps any).
    fn discard(&mut self, a: &mut DvsArray, rng: &mut ChaCha8Rng, reference: &mut [u8], write_through: bool) {
        let (cap, chunk) = (reference.len() as u64, CHUNK);
        let len = rng.gen_range(1..=6 * chunk / 512).min(cap / 512) * 512;
        let off = rng.gen_range(0..=(cap - len) / 512) * 512;
        let (first, end) = (off.div_ceil(chunk), (off + len) / chunk);
        let holes = |a: &DvsArray| if end > first { a.holes(first * chunk, (end - first) * chunk).unwrap().into_iter().map(|r| r.1).collect() } else { Vec::new() };
        let before: Vec<bool> = holes(a);
        let n = a.discard(off, len).unwrap();
        let after: Vec<bool> = holes(a);
        let mut unmapped = 0;
        for (i, (b, h)) in before.iter().zip(&after).enumerate() {
            assert!(!b || *h, "a hole stays a hole");
            if write_through {
                assert!(*h, "write-through: chunk {} of the range is unmapped", first + i as u64);
            }
            if !b && *h {
                let at = ((first + i as u64) * chunk) as usize;
                let bytes = &mut reference[at..at + chunk as usize];
                self.chunks.insert(first + i as u64, (bytes.to_vec(), vec![false; chunk as usize]));
                bytes.fill(0);
                unmapped += 1;
            }
        }
        assert_eq!(n, unmapped, "the chunks that became holes are the ones unmapped");
        self.unmapped += n;
        check_all(a, reference);
    }

    /// A write of `len` bytes at `off` happened.
    fn wrote(&mut self, off: u64, len: usize) {
        for c in off / CHUNK..(off + len as u64).div_ceil(CHUNK) {
            if let Some((_, w)) = self.chunks.get_mut(&c) {
                let (s, e) = ((off.max(c * CHUNK) - c * CHUNK) as usize, ((off + len as u64).min((c + 1) * CHUNK) - c * CHUNK) as usize);
                w[s..e].fill(true);
            }
        }
    }

    /// After a reopen: every byte as the model has it, but each discarded
    /// chunk either so or its old bytes under what was written since.
    fn check_reopened(&self, a: &mut DvsArray, reference: &[u8]) {
        let mut got = vec![0u8; reference.len()];
        a.read(0, &mut got).unwrap();
        let mut want = reference.to_vec();
        let c = CHUNK as usize;
        for (&i, (old, written)) in &self.chunks {
            let at = i as usize * c;
            if got[at..at + c] != want[at..at + c] {
                for (j, w) in written.iter().enumerate() {
                    if !w {
                        want[at + j] = old[j];
                    }
                }
            }
        }
        if let Some(i) = got.iter().zip(&want).position(|(g, w)| g != w) {
            panic!("after a reopen, logical byte {i} (chunk {}) is {}, want {}", i / c, got[i], want[i]);
        }
    }
}

#[test]
fn model_k1_with_failures_rebuild_and_gc() {
    run_model(1, 1, 1500);
}

#[test]
fn model_k2_with_double_failures_rebuild_and_gc() {
    run_model(2, 2, 1500);
}

#[test]
fn model_with_journalled_write_cache() {
    run_model_with(3, cfg_cached(1, 24), 1500);
    // (write hits and journal replay are checked in the test below)
    run_model_with(4, cfg_cached(2, 24), 800);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    #[test]
    fn model_random_seeds(seed in 0u64..1_000_000, k in 1usize..=2) {
        run_model(seed, k, 400);
    }
}

#[test]
fn full_array_keeps_accepting_writes_to_capacity_and_refuses_beyond() {
    let dir = scratch();
    let mut a = DvsArray::create(files(dir.path(), 5), cfg(1)).unwrap();
    let cap = a.capacity();
    let mut reference = vec![0u8; cap as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    // Fill the whole logical space three times over in random order.
    for pass in 0..3u8 {
        let mut chunks: Vec<u64> = (0..cap / CHUNK).collect();
        for i in (1..chunks.len()).rev() {
            chunks.swap(i, rng.gen_range(0..=i));
        }
        for c in chunks {
            let data = vec![pass.wrapping_mul(31).wrapping_add(c as u8); CHUNK as usize];
            a.write(c * CHUNK, &data).unwrap();
            reference[(c * CHUNK) as usize..((c + 1) * CHUNK) as usize].copy_from_slice(&data);
        }
    }
    check_all(&mut a, &reference);
    assert!(a.stats().fg_gc > 0);
    let e = a.write(cap, &[0u8; 512]).unwrap_err();
    assert!(e.to_string().contains("beyond the array capacity"), "{e}");
    let e = a.write(cap - 512, &[0u8; 1024]).unwrap_err();
    assert!(e.to_string().contains("beyond the array capacity"), "{e}");
    let e = a.write(100, &[0u8; 512]).unwrap_err();
    assert!(e.to_string().contains("not aligned"), "{e}");
    // The refused writes changed nothing and the array still works.
    a.write(0, &[9u8; 512]).unwrap();
    reference[..512].fill(9);
    check_all(&mut a, &reference);
}

#[test]
fn crash_at_random_points_keeps_every_acknowledged_write() {
    let mut gcs = 0;
    let mut stopped = 0;
    let (mut cut_in_gc, mut cut_in_destage) = (0, 0);
    for seed in 0..40u64 {
        let dir = scratch();
        let budget = Arc::new(AtomicI64::new(i64::MAX));
        let refusals = Arc::new(AtomicU64::new(0));
        let k = 1 + (seed % 2) as usize;
        // Cached arrays: half with a ring journal retired piecewise.
        let c = if seed % 3 == 0 { DvsConfig { journal_ring: seed % 4 < 2, ..cfg_cached(k, 16) } } else { cfg(k) };
        let devs: Vec<Arc<dyn ZonedMember>> = files_for(dir.path(), 5, &c)
            .into_iter()
            .map(|inner| Arc::new(PowerCut::new(inner, budget.clone(), refusals.clone())) as Arc<dyn ZonedMember>)
            .collect();
        let mut a = DvsArray::create(devs, c.clone()).unwrap();
        let cap = a.capacity();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut reference = vec![0u8; cap as usize];
        // Warm up so segments are full and GC runs, then cut the power at
        // a random operation.
        for _ in 0..rng.gen_range(50..400) {
            let (off, data) = random_write(&mut rng, cap);
            a.write(off, &data).unwrap();
            reference[off as usize..off as usize + data.len()].copy_from_slice(&data);
        }
        gcs += a.stats().fg_gc;
        budget.store(rng.gen_range(0..400), Ordering::SeqCst);
        let mut inflight: Option<(u64, Vec<u8>)> = None;
        for i in 0..10_000 {
            if i % 7 == 3 {
                match a.gc_step() {
                    Ok(_) => continue,
                    Err(e) => {
                        assert!(e.to_string().contains("power cut"), "{e}");
                        inflight = Some((0, vec![]));
                        break;
                    }
                }
            }
            let (off, data) = random_write(&mut rng, cap);
            match a.write(off, &data) {
                Ok(()) => reference[off as usize..off as usize + data.len()].copy_from_slice(&data),
                Err(e) => {
                    assert!(e.to_string().contains("power cut"), "{e}");
                    inflight = Some((off, data));
                    break;
                }
            }
        }
        assert!(inflight.is_some(), "seed {seed}: the power was never cut");
        // A program that failed stops the array, and it says why.
        if let Some(why) = a.stopped() {
            assert!(why.contains("power cut"), "{why}");
            let e = a.write(0, &[0u8; 4096]).unwrap_err().to_string();
            assert!(e.contains("reopen it") && e.contains(&why), "{e}");
            stopped += 1;
        }
        match a.interrupted_job() {
            Some(mosaic_dvs::JobKind::Destage) => cut_in_destage += 1,
            Some(_) => cut_in_gc += 1,
            None => {}
        }
        assert_eq!(refusals.load(Ordering::SeqCst), 0, "seed {seed}: a zone write off its write pointer");
        drop(a);
        // Power back: reopen from the files.
        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        let mut got = vec![0u8; cap as usize];
        b.read(0, &mut got).unwrap();
        let (ioff, idata) = inflight.unwrap();
        for (i, (&g, &w)) in got.iter().zip(&reference).enumerate() {
            let in_flight = i as u64 >= ioff && (i as u64) < ioff + idata.len() as u64;
            if g != w && !(in_flight && g == idata[i - ioff as usize]) {
                panic!("seed {seed}: byte {i}: got {g}, acknowledged {w}");
            }
        }
        // The in-flight write is whatever the array now holds; carry on.
        reference.copy_from_slice(&got);
        for _ in 0..100 {
            let (off, data) = random_write(&mut rng, cap);
            b.write(off, &data).unwrap();
            reference[off as usize..off as usize + data.len()].copy_from_slice(&data);
        }
        check_all(&mut b, &reference);
        assert_eq!(b.scrub().unwrap(), 0, "seed {seed}");
    }
    assert!(gcs > 0);
    assert!(cut_in_gc > 0 && cut_in_destage > 0, "cuts in GC {cut_in_gc}, in destage {cut_in_destage}");
    assert!(stopped > 0, "no cut stopped the array");
}

#[test]
fn bad_members_and_metadata_give_clear_errors() {
    let dir = scratch();
    // Wrong member count, wrong zone geometry.
    let e = DvsArray::create(files(dir.path(), 4), cfg(1)).err().unwrap();
    assert!(e.to_string().contains("4 member devices given for a 5-member array"), "{e}");
    let mut devs = files(dir.path(), 4);
    devs.push(Arc::new(ZonedFile::create(&dir.path().join("odd"), ZONE, ZONES + 1, CONV).unwrap()));
    let e = DvsArray::create(devs, cfg(1)).err().unwrap();
    assert!(matches!(e, DvsError::Geometry(_)) && e.to_string().contains("17 zones"), "{e}");
    // Not DVS members.
    let e = DvsArray::open(files(dir.path(), 5)).err().unwrap();
    assert!(e.to_string().contains("no member of any array found") && e.to_string().contains("no label (not a DVS member)"), "{e}");
    // A damaged label: that device is not used (named in a warning).
    let mut a = DvsArray::create(files(dir.path(), 5), cfg(1)).unwrap();
    a.write(0, &[1u8; 8192]).unwrap();
    drop(a);
    let p0 = dir.path().join("m0");
    let mut bytes = std::fs::read(&p0).unwrap();
    bytes[4096 + 40] ^= 0xff; // inside member 0's label (after the 4 KiB zone header)
    std::fs::write(&p0, &bytes).unwrap();
    let b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    let w = b.warnings().join("\n");
    assert!(w.contains("m0 (zoned): damaged label") && w.contains("member 0: no usable device"), "{w}");
    assert_eq!(b.sources()[0], None);
    drop(b);
    // Without member 0 the array still opens (k = 1) and reads back.
    let mut rest = reopen_files(dir.path(), 5);
    rest.remove(0);
    let mut b = DvsArray::open(rest).unwrap();
    let mut got = vec![0u8; 8192];
    b.read(0, &mut got).unwrap();
    assert!(got.iter().all(|&x| x == 1));
    // Two missing members are too many for k = 1.
    let mut rest = reopen_files(dir.path(), 5);
    rest.remove(0);
    rest.truncate(3);
    let e = DvsArray::open(rest).err().unwrap();
    assert!(e.to_string().contains("at most 1 may be missing"), "{e}");
    // Bad geometry in the config.
    let e = DvsArray::create(files(dir.path(), 5), DvsConfig { parity: 3, ..cfg(1) }).err().unwrap();
    assert!(matches!(e, DvsError::Geometry(_)), "{e}");
    // A label of another kind, or of another DVS configuration: named, not used.
    let kind = |l: &mut mosaic_format::Label| l.kind = "fixed".into();
    let config = |l: &mut mosaic_format::Label| l.policy["config"]["cache_chunks"] = 9.into();
    let whys = ["m0 (zoned): a member of a fixed array, not of a DVS array; not used", "m0 (zoned): its DVS configuration differs from the array's; not used"];
    for (change, why) in [&kind as &dyn Fn(&mut mosaic_format::Label), &config].into_iter().zip(whys) {
        let dir = scratch();
        drop(DvsArray::create(files(dir.path(), 5), cfg(1)).unwrap());
        relabel(&dir.path().join("m0"), change);
        let b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        let w = b.warnings().join("\n");
        assert!(w.contains(why) && b.sources()[0].is_none(), "{w}");
        // With a second member gone too, the refusal says why each is out.
        drop(b);
        relabel(&dir.path().join("m1"), &kind);
        let e = DvsArray::open(reopen_files(dir.path(), 5)).err().unwrap().to_string();
        // Member 0 was recorded failed by the open above.
        assert!(e.contains("at most 1 may be missing") && e.contains("member 0 is failed on record") && e.contains("m1 (zoned): a member of a fixed array"), "{e}");
    }
}

/// A 5-member DVS array written with `seed` in one directory, and its
/// member files copied into another: (original, copy, bytes, rng).
fn copied_array(seed: u64) -> (tempfile::TempDir, tempfile::TempDir, Vec<u8>, ChaCha8Rng) {
    let (a, b) = (scratch(), scratch());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut x = DvsArray::create(files(a.path(), 5), cfg(1)).unwrap();
    let base = fill(&mut x, &mut rng, 40);
    x.flush().unwrap();
    drop(x);
    for i in 0..5 {
        std::fs::copy(a.path().join(format!("m{i}")), b.path().join(format!("m{i}"))).unwrap();
    }
    (a, b, base, rng)
}

/// One member of a copy that was opened and written further (its event
/// counter ahead) put among the array's own members: the array opens
/// degraded from its own members, reads its own bytes, and names the
/// intruder as another copy's member (it never out-votes them).
#[test]
fn one_member_of_a_copy_written_further_does_not_out_vote_the_array() {
    let (a, b, base, mut rng) = copied_array(6);
    // The copy is opened (and written) three times: its labels go ahead.
    let mut r = base.clone();
    for _ in 0..3 {
        let mut y = DvsArray::open(reopen_files(b.path(), 5)).unwrap();
        more_writes(&mut y, &mut rng, &mut r, 10);
        y.flush().unwrap();
    }
    std::fs::copy(b.path().join("m2"), a.path().join("m2")).unwrap();
    let mut m = DvsArray::open(reopen_files(a.path(), 5)).unwrap();
    let w = m.warnings().join("\n");
    assert!(w.contains("m2 (zoned): member 2 carries the writes of another copy") && w.contains("another copy's member"), "{w}");
    assert!(!w.contains("stale"), "the array's own members were called stale: {w}");
    assert!(m.sources()[2].is_none() && (0..5).filter(|&i| i != 2).all(|i| m.sources()[i].is_some()));
    check_all(&mut m, &base);
}

/// Two copies of a DVS array written apart (its member files copied,
/// then each copy opened and written): labels alone stay at the same event
/// counter, so a list mixing their members must be told apart by session.
#[test]
fn members_of_two_copies_written_apart_are_never_mixed() {
    let (a, b, base, mut rng) = copied_array(5);
    let mut copy_of = |dir: &Path| {
        let mut r = base.clone();
        let mut x = DvsArray::open(reopen_files(dir, 5)).unwrap();
        more_writes(&mut x, &mut rng, &mut r, 40);
        x.flush().unwrap();
        r
    };
    let (ra, _) = (copy_of(a.path()), copy_of(b.path()));
    let mut devs = reopen_files(a.path(), 4);
    devs.push(Arc::new(ZonedFile::open(&b.path().join("m4")).unwrap()));
    let mut m = DvsArray::open(devs).unwrap();
    let w = m.warnings().join("\n");
    assert!(w.contains("m4 (zoned): member 4 carries the writes of another copy") && m.sources()[4].is_none(), "{w}");
    check_all(&mut m, &ra);
}

/// Rewrite the newest label of the zoned member file at `path` through `f`.
fn relabel(path: &Path, f: &dyn Fn(&mut mosaic_format::Label)) {
    use mosaic_format::label::{read_label, SLOT_SIZE};
    let mut bytes = std::fs::read(path).unwrap();
    let dev = 4096; // device byte 0, after the zone header
    let mut l = read_label((bytes.len() - dev) as u64, &mut |buf: &mut [u8], off| {
        buf.copy_from_slice(&bytes[dev + off as usize..dev + off as usize + buf.len()]);
        Ok(())
    })
    .unwrap()
    .unwrap();
    f(&mut l);
    let enc = l.encode().unwrap();
    let at = dev + (l.slot() * SLOT_SIZE) as usize;
    bytes[at..at + enc.len()].copy_from_slice(&enc);
    std::fs::write(path, &bytes).unwrap();
}

#[test]
fn journalled_cache_survives_reopen_without_destage() {
    let dir = scratch();
    let c = cfg_cached(1, 64);
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c).unwrap();
    let cap = a.capacity();
    let mut reference = vec![0u8; cap as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for _ in 0..10 {
        // Small writes: the journal (a share of 4 conventional zones) holds them all.
        let off = rng.gen_range(0..cap / 1024) * 1024;
        let mut data = vec![0u8; 1024];
        rng.fill(&mut data[..]);
        a.write(off, &data).unwrap();
        reference[off as usize..off as usize + data.len()].copy_from_slice(&data);
    }
    assert_eq!(a.stats().destages, 0, "all ten writes are still in the cache");
    assert!(a.stats().write_chunks > 0);
    check_all(&mut a, &reference);
    drop(a); // no flush: the cached writes live only in the journal
    let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    check_all(&mut b, &reference);
    b.flush().unwrap();
    assert!(b.stats().destages > 0);
    drop(b);
    let mut c = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    check_all(&mut c, &reference);
    assert_eq!(c.scrub().unwrap(), 0);
}

trait ReadAll {
    fn read_all(&mut self) -> Vec<u8>;
}

impl ReadAll for DvsArray {
    /// The whole logical space, read a MiB at a time.
    fn read_all(&mut self) -> Vec<u8> {
        let mut got = vec![0u8; self.capacity() as usize];
        for (i, piece) in got.chunks_mut(1 << 20).enumerate() {
            self.read((i << 20) as u64, piece).unwrap();
        }
        got
    }
}

/// The block-granular cache: small writes to as many different chunks
/// as the cache holds blocks cost only their journal records (no chunk
/// is destaged, nothing is read), and survive a reopen without destage
/// (replayed from a journal sized to the cache, as `files::config_for`
/// makes it); a flush then destages them and they read back again.
#[test]
fn cached_small_blocks_survive_reopen_without_destage() {
    let dir = scratch();
    let spec = mosaic_dvs::files::CreateSpec { members: 5, member_size: 16 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 8 };
    let c = mosaic_dvs::files::config_for(&spec).unwrap();
    assert!(c.journal_bytes >= 8 * 16 * mosaic_dvs::meta::journal_record_len(4096), "the journal holds 128 one-block records");
    let members: Vec<Arc<dyn ZonedMember>> = zoned_files(dir.path(), &c);
    let mut a = DvsArray::create(members, c.clone()).unwrap();
    let cap = a.capacity();
    let mut reference = vec![0u8; cap as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    a.reset_io();
    // 100 one-block writes, each into a different chunk: 100 chunks,
    // far more than the 8 a chunk-counted cache would hold.
    let chunks = cap / c.chunk;
    let mut picked = std::collections::BTreeSet::new();
    while picked.len() < 100 {
        picked.insert(rng.gen_range(0..chunks));
    }
    for &ch in &picked {
        let off = ch * c.chunk + rng.gen_range(0..16u64) * 4096;
        let mut data = vec![0u8; 4096];
        rng.fill(&mut data[..]);
        a.write(off, &data).unwrap();
        reference[off as usize..off as usize + 4096].copy_from_slice(&data);
    }
    assert_eq!(a.stats().destages, 0, "all 100 blocks are still in the cache");
    let io = a.io_counters();
    assert_eq!((io.reads, io.read_bytes), (0, 0));
    assert_eq!(io.writes, 100 * 2, "one journal record per write on k + 1 = 2 members");
    assert_eq!(io.write_bytes, 100 * 2 * mosaic_dvs::meta::journal_record_len(4096));
    drop(a); // no flush: the blocks live only in the journal
    let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    assert_eq!((b.stats().destages, b.info().valid_chunks), (0, 0), "replayed into the cache, nothing destaged");
    assert!(b.read_all() == reference, "every cached block reads back after the reopen");
    b.flush().unwrap();
    assert!(b.stats().destages > 0);
    assert_eq!(b.info().valid_chunks, 100);
    drop(b);
    let mut d = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    assert!(d.read_all() == reference);
    assert_eq!(d.scrub().unwrap(), 0);
}

/// A ring journal (`files::config_for`) retired piecewise: with 256
/// records of room (two lanes of 128) and a 128-block cache, 3000 random
/// one-block writes wrap it many times; the SSGs holding the oldest
/// records are destaged and their segments retired, never the whole
/// cache.  Dropped without a flush at three points (after destaging
/// part of the cache), reopened, every block reads back; writing goes on
/// after each reopen.
#[test]
fn a_ring_journal_retired_piecewise_survives_reopens() {
    let dir = scratch();
    let spec = mosaic_dvs::files::CreateSpec { members: 5, member_size: 16 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 8 };
    let c = mosaic_dvs::files::config_for(&spec).unwrap();
    assert!(c.journal_ring);
    let members: Vec<Arc<dyn ZonedMember>> = zoned_files(dir.path(), &c);
    let mut a = DvsArray::create(members, c.clone()).unwrap();
    let cap = a.capacity();
    let mut reference = vec![0u8; cap as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    for round in 0..3 {
        block_writes_into(&mut a, &mut rng, &mut reference, 1000);
        assert!(a.stats().destages > 0, "round {round}: part of the cache was destaged");
        assert!(a.journal_segments() > 1, "round {round}: the ring holds live records in several segments");
        drop(a); // no flush: the cached blocks live only in the journal
        a = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        assert!(a.read_all() == reference, "round {round}: every block reads back after the reopen");
    }
    a.flush().unwrap();
    assert_eq!(a.journal_segments(), 1);
    drop(a);
    let mut d = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    assert!(d.read_all() == reference);
    assert_eq!(d.scrub().unwrap(), 0);
}

/// The journal is on k + 1 members: records written before and after a
/// journal member fails (the journal moves to the next member) are all
/// replayed after a reopen without destage; replacing the member retires
/// the journal (its records were on fewer than k + 1 members).
#[test]
fn journal_records_on_k_plus_one_members_survive_a_failure_and_a_reopen() {
    for k in [1, 2] {
        let dir = scratch();
        let c = cfg_cached(k, 64);
        let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
        let cap = a.capacity();
        let mut reference = vec![0u8; cap as usize];
        let mut rng = ChaCha8Rng::seed_from_u64(7 + k as u64);
        let mut write = |a: &mut DvsArray, n: usize, reference: &mut Vec<u8>| {
            for (off, data) in block_writes(&mut rng, cap, n) {
                a.write(off, &data).unwrap();
                reference[off as usize..off as usize + data.len()].copy_from_slice(&data);
            }
        };
        write(&mut a, 8, &mut reference);
        a.fail(0).unwrap();
        write(&mut a, 8, &mut reference);
        assert_eq!(a.stats().destages, 0);
        drop(a);
        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        assert_eq!(b.stats().destages, 0, "k = {k}: replayed, not destaged");
        check_all(&mut b, &reference);
        b.replace(0, Arc::new(ZonedFile::create(&dir.path().join("new0"), ZONE, ZONES, c.conventional).unwrap())).unwrap();
        assert!(b.stats().destages > 0, "k = {k}: replace destages the cache");
        write(&mut b, 4, &mut reference);
        b.rebuild(&|_, _| {}, None).unwrap();
        drop(b);
        let mut d = DvsArray::open(reopen_with(dir.path(), 5, &["new0"])).unwrap();
        check_all(&mut d, &reference);
        assert_eq!(d.scrub().unwrap(), 0);
    }
}

/// A ring journal over two lanes (members 0-1, then 2-3), dropped without
/// a flush whatever lane its oldest live record is in, opened, written a
/// little, dropped and opened again: every acknowledged block reads
/// back.  Replay once looked for each record at its offset in every
/// journal member, not only its own lane's: an oldest record in lane 1
/// was taken for lane 0's, the next records went over live ones, and the
/// second open dropped the acknowledged records after the gap as a torn
/// group (seeds 3, 19, 23 of these lost writes).
#[test]
fn a_ring_journal_over_two_lanes_survives_two_reopens_without_a_flush() {
    let spec = mosaic_dvs::files::CreateSpec { members: 5, member_size: 2 << 20, chunk: 16 << 10, block: 4096, zone_size: 128 << 10, parity: 1, cache_chunks: 16 };
    let c = mosaic_dvs::files::config_for(&spec).unwrap();
    assert!(c.journal_ring);
    for seed in 0..24u64 {
        let dir = scratch();
        let mut a = DvsArray::create(zoned_files(dir.path(), &c), c.clone()).unwrap();
        let cap = a.capacity();
        let mut reference = vec![0u8; cap as usize];
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut write = |a: &mut DvsArray, n: u64, reference: &mut Vec<u8>| {
            for _ in 0..n {
                let len = rng.gen_range(1..=16u64) * 4096;
                let off = rng.gen_range(0..=(cap - len) / 4096) * 4096;
                let mut data = vec![0u8; len as usize];
                rng.fill(&mut data[..]);
                a.write(off, &data).unwrap();
                reference[off as usize..(off + len) as usize].copy_from_slice(&data);
            }
        };
        let n = 20 + seed * 8;
        write(&mut a, n, &mut reference);
        drop(a);
        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        assert!(b.read_all() == reference, "seed {seed}: first reopen");
        write(&mut b, 1 + seed % 30, &mut reference);
        drop(b);
        let mut d = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        assert!(d.warnings().is_empty(), "seed {seed}: {:?}", d.warnings());
        assert!(d.read_all() == reference, "seed {seed}: second reopen");
    }
}

/// A member that breaks (every operation fails from then on) at its
/// first write to the journal area once `armed`.  `state` is shared with
/// the [`Downed`] others.
struct TornJournal {
    journal: std::ops::Range<u64>,
    /// (armed, broken)
    state: Arc<std::sync::Mutex<(bool, bool)>>,
}

/// The other members of a [`TornJournal`] one: once it broke, the
/// machine goes down with it, the writes already issued landing (so the
/// array cannot open again without the broken member and go on, as
/// array/failing.rs would).
struct Downed(Arc<std::sync::Mutex<(bool, bool)>>);

impl Downed {
    fn check(&self) -> std::io::Result<()> {
        match self.0.lock().unwrap().1 {
            true => Err(std::io::Error::other("injected: the machine is down")),
            false => Ok(()),
        }
    }
}

impl Hooks for Downed {
    fn read(&self, _: u64, _: usize) -> std::io::Result<()> {
        self.check()
    }
    fn flush(&self) -> std::io::Result<()> {
        self.check()
    }
    fn reset(&self, _: u64) -> std::io::Result<()> {
        self.check()
    }
}

impl TornJournal {
    fn check(&self, journal_write: bool) -> std::io::Result<()> {
        let mut s = self.state.lock().unwrap();
        s.1 |= s.0 && journal_write;
        match s.1 {
            true => Err(std::io::Error::other("injected I/O error")),
            false => Ok(()),
        }
    }
}

impl Hooks for TornJournal {
    fn read(&self, _: u64, _: usize) -> std::io::Result<()> {
        self.check(false)
    }
    fn write(&self, offset: u64, _: usize) -> std::io::Result<()> {
        self.check(self.journal.contains(&offset))
    }
    fn flush(&self) -> std::io::Result<()> {
        self.check(false)
    }
    fn reset(&self, _: u64) -> std::io::Result<()> {
        self.check(false)
    }
}

/// A journal write that fails on one member of its lane (the write is
/// not acknowledged; the other member holds the record) leaves a record
/// with one copy.  The next open, with every member back, replays it and
/// then destages everything and starts the journal over, so when the
/// member holding that one copy is lost later, the records acknowledged
/// after it are still found.  Before, the replay stopped at the missing
/// record and dropped them as a torn group.
#[test]
fn a_journal_record_left_on_one_lane_member_is_destaged_at_the_next_open() {
    let dir = scratch();
    let c = cfg_cached(1, 16);
    let ml = mosaic_dvs::meta::MetaLayout::new(&mosaic_dvs::Geo::new(c.clone()).unwrap()).unwrap();
    let mut members = files_for(dir.path(), 5, &c);
    let state: Arc<std::sync::Mutex<(bool, bool)>> = Default::default();
    let m0 = Hooked::new(members[0].clone(), TornJournal { journal: ml.journal_start..ml.journal_end, state: state.clone() });
    members[0] = m0.clone();
    for m in &mut members[1..] {
        *m = Hooked::new(m.clone(), Downed(state.clone()));
    }
    let mut a = DvsArray::create(members, c.clone()).unwrap();
    let cap = a.capacity();
    let mut reference = vec![0u8; cap as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    block_writes_into(&mut a, &mut rng, &mut reference, 10);
    m0.hooks.state.lock().unwrap().0 = true;
    // Writes go on until one fails (the array stops, the machine down
    // with it): that one is not acknowledged, its record is whole on
    // member 1 only.
    let torn = (0..2000).find_map(|_| {
        let off = rng.gen_range(0..cap / 4096) * 4096;
        let data: Vec<u8> = (0..4096).map(|_| rng.gen()).collect();
        match a.write(off, &data) {
            Ok(()) => {
                reference[off as usize..off as usize + 4096].copy_from_slice(&data);
                None
            }
            Err(_) => Some((off, data)),
        }
    });
    let (toff, torn) = torn.expect("a write failed");
    drop(a);
    // Every member back: the record is whole on member 1 only.
    let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    assert!(b.warnings().iter().any(|w| w.contains("fewer of its lane's members")), "{:?}", b.warnings());
    assert!(b.journal_segments() <= 1);
    let t = toff as usize..toff as usize + 4096;
    let mut got = vec![0u8; 4096];
    b.read(toff, &mut got).unwrap();
    assert!(got == torn || got == reference[t.clone()], "the failed write reads neither old nor new");
    reference[t].copy_from_slice(&got);
    block_writes_into(&mut b, &mut rng, &mut reference, 10);
    drop(b); // no flush: these live in the journal
    // Member 1, the one that held the lone copy, is lost.
    let mut rest = reopen_files(dir.path(), 5);
    rest.remove(1);
    let mut d = DvsArray::open(rest).unwrap();
    assert!(d.read_all() == reference, "an acknowledged block reads differently");
}

/// Journal lanes: with 5 members and k = 1 the journal has two lanes
/// (members 0-1, then 2-3); writes past the first lane go on into the
/// second with no destage, and a reopen without flush replays both.
#[test]
fn journal_records_fill_lane_after_lane_and_replay_across_lanes() {
    let dir = scratch();
    let c = cfg_cached(1, 1000);
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let cap = a.capacity();
    let lane = mosaic_dvs::meta::MetaLayout::new(a.geo()).unwrap();
    let per_lane = (lane.journal_end - lane.journal_start) / mosaic_dvs::meta::journal_record_len(512);
    let writes = block_writes(&mut ChaCha8Rng::seed_from_u64(21), cap, per_lane as usize + 5);
    let mut reference = vec![0u8; cap as usize];
    let before: Vec<u64> = a.member_io().iter().map(|m| m.writes).collect();
    for (o, d) in &writes {
        a.write(*o, d).unwrap();
        reference[*o as usize..*o as usize + d.len()].copy_from_slice(d);
    }
    assert_eq!(a.stats().destages, 0, "two lanes hold them all");
    let w: Vec<u64> = a.member_io().iter().zip(&before).map(|(m, b)| m.writes - b).collect();
    assert_eq!(w, vec![per_lane, per_lane, 5, 5, 0], "lane 0 on members 0-1, the rest on 2-3");
    drop(a);
    let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    assert_eq!(b.stats().destages, 0);
    check_all(&mut b, &reference);
}

/// Fill an array with random writes (GC runs) and return the reference.
pub(crate) fn fill(a: &mut DvsArray, rng: &mut ChaCha8Rng, writes: usize) -> Vec<u8> {
    let cap = a.capacity();
    let mut reference = vec![0u8; cap as usize];
    for _ in 0..writes {
        let (off, data) = random_write(rng, cap);
        a.write(off, &data).unwrap();
        reference[off as usize..off as usize + data.len()].copy_from_slice(&data);
    }
    reference
}

pub(crate) fn more_writes(a: &mut DvsArray, rng: &mut ChaCha8Rng, reference: &mut [u8], writes: usize) {
    for _ in 0..writes {
        let (off, data) = random_write(rng, reference.len() as u64);
        a.write(off, &data).unwrap();
        reference[off as usize..off as usize + data.len()].copy_from_slice(&data);
    }
}

/// `n` writes of 4 KiB at random 4 KiB-aligned offsets, into `reference` too.
fn block_writes_into(a: &mut DvsArray, rng: &mut ChaCha8Rng, reference: &mut [u8], n: usize) {
    for _ in 0..n {
        let off = rng.gen_range(0..reference.len() as u64 / 4096) * 4096;
        let mut data = vec![0u8; 4096];
        rng.fill(&mut data[..]);
        a.write(off, &data).unwrap();
        reference[off as usize..off as usize + 4096].copy_from_slice(&data);
    }
}

fn states(a: &DvsArray) -> Vec<mosaic_core::MemberState> {
    a.info().member_list.iter().map(|m| m.state).collect()
}

#[test]
fn a_failed_member_stays_failed_across_reopen_and_a_stopped_rebuild_resumes() {
    use mosaic_core::MemberState::*;
    for k in [1usize, 2] {
        let dir = scratch();
        let c = cfg(k);
        let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(100 + k as u64);
        let mut reference = fill(&mut a, &mut rng, 300);
        a.fail(3).unwrap();
        assert!(a.fail(3).unwrap_err().to_string().contains("already failed"));
        if k == 1 {
            let e = a.fail(0).unwrap_err().to_string();
            assert!(e.contains("refusing to fail member 0"), "{e}");
        }
        // Degraded writes: member 3's file still holds the old bytes.
        more_writes(&mut a, &mut rng, &mut reference, 200);
        drop(a);
        // Its file is back, but it missed writes: it must stay failed (by
        // the record and its label's event counter, not by luck of the
        // write pointers).
        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        assert_eq!(states(&b)[3], Failed, "k={k}");
        assert!(!b.info().member_list[3].present, "a member failed on record is not used");
        assert!(b.warnings().is_empty(), "failed by a command, it is skipped quietly: {:?}", b.warnings());
        check_all(&mut b, &reference);
        assert!(b.rebuild(&|_, _| {}, None).unwrap_err().to_string().contains("nothing to rebuild"));
        // Replacing an active member is refused; so is a device that is
        // another member of this array.
        assert!(b.replace(1, Arc::new(ZonedFile::open(&dir.path().join("m1")).unwrap())).unwrap_err().to_string().contains("active"));
        let e = b.replace(3, Arc::new(ZonedFile::open(&dir.path().join("m2")).unwrap())).unwrap_err().to_string();
        assert!(e.contains("is member 2 of this array"), "{e}");
        // Re-adding the failed member's own device: a full rebuild, stopped
        // after two SSGs as a killed process would be.
        b.replace(3, Arc::new(ZonedFile::open(&dir.path().join("m3")).unwrap())).unwrap();
        assert_eq!(states(&b)[3], Rebuilding { done: 0 });
        let e = b.replace(3, Arc::new(ZonedFile::open(&dir.path().join("m3")).unwrap())).unwrap_err().to_string();
        assert!(e.contains("already being rebuilt"), "{e}");
        assert!(b.fail(9).unwrap_err().to_string().contains("no member 9"));
        assert!(b.rebuild(&|_, _| {}, Some(2)).is_err());
        drop(b);
        let mut c2 = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        let Rebuilding { done } = states(&c2)[3] else { panic!("k={k}: {:?}", states(&c2)) };
        assert!((1..=2).contains(&done), "k={k}: rebuild position {done}");
        check_all(&mut c2, &reference);
        // Writes while half rebuilt: SSGs below `done` take them on member
        // 3, the rest are rebuilt later with them.
        let gc_before = c2.stats().fg_gc + c2.stats().bg_gc;
        more_writes(&mut c2, &mut rng, &mut reference, 200);
        while c2.gc_step().unwrap() {}
        assert!(c2.stats().fg_gc + c2.stats().bg_gc > gc_before, "k={k}: GC ran while half rebuilt");
        let progress = std::sync::Mutex::new(Vec::new());
        let rep = c2.rebuild(&|d, t| progress.lock().unwrap().push((d, t)), None).unwrap();
        assert_eq!((rep.members.clone(), rep.resumed_from), (vec![3], done));
        assert!(rep.bytes_written > 0);
        let p = progress.into_inner().unwrap();
        assert_eq!(p.last().map(|x| x.0 == x.1), Some(true), "{p:?}");
        assert_eq!(states(&c2), vec![Active; 5]);
        let s = c2.scrub_with(false, &|_, _| {}).unwrap();
        assert!(s.mismatched == 0 && s.unverified_stripes == 0 && s.stripes_checked > 0, "k={k}: {s:?}");
        drop(c2);
        // Member 3 now carries its share: lose k others and read everything.
        let mut d = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        for m in 0..k {
            d.fail(m).unwrap();
        }
        check_all(&mut d, &reference);
    }
}

#[test]
fn power_cuts_during_rebuild_resume_without_loss() {
    let mut cut = 0;
    for seed in 0..12u64 {
        let dir = scratch();
        let k = 1 + (seed % 2) as usize;
        let c = if seed % 3 == 0 { cfg_cached(k, 16) } else { cfg(k) };
        let budget = Arc::new(AtomicI64::new(i64::MAX));
        let refusals = Arc::new(AtomicU64::new(0));
        let wrap = |v: Vec<Arc<dyn ZonedMember>>| -> Vec<Arc<dyn ZonedMember>> {
            v.into_iter().map(|inner| Arc::new(PowerCut::new(inner, budget.clone(), refusals.clone())) as Arc<dyn ZonedMember>).collect()
        };
        let mut a = DvsArray::create(wrap(files_for(dir.path(), 5, &c)), c.clone()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut reference = fill(&mut a, &mut rng, 300);
        a.fail(1).unwrap();
        more_writes(&mut a, &mut rng, &mut reference, 50);
        a.flush().unwrap();
        let spare = Arc::new(ZonedFile::create(&dir.path().join("spare"), ZONE, ZONES, c.conventional).unwrap());
        a.replace(1, Arc::new(PowerCut::new(spare, budget.clone(), refusals.clone()))).unwrap();
        budget.store(rng.gen_range(0..120), Ordering::SeqCst);
        if a.rebuild(&|_, _| {}, None).is_err() {
            cut += 1;
        }
        assert_eq!(refusals.load(Ordering::SeqCst), 0, "seed {seed}: a zone write off its write pointer");
        drop(a);
        let mut files = reopen_files(dir.path(), 5);
        files[1] = Arc::new(ZonedFile::open(&dir.path().join("spare")).unwrap());
        let mut b = DvsArray::open(files).unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        check_all(&mut b, &reference);
        if b.rebuild_pending().is_some() {
            b.rebuild(&|_, _| {}, None).unwrap();
        }
        let s = b.scrub_with(false, &|_, _| {}).unwrap();
        assert!(s.mismatched == 0 && s.unverified_stripes == 0, "seed {seed}: {s:?}");
        for m in (0..5).filter(|&m| m != 1).take(k) {
            b.fail(m).unwrap();
        }
        check_all(&mut b, &reference);
    }
    assert!(cut > 6, "the power was cut in only {cut} rebuilds");
}

/// Overwrite bytes of a member's zone on its file (bit rot).
pub(crate) fn rot(dir: &Path, member: usize, offset: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(dir.join(format!("m{member}"))).unwrap();
    f.write_at(&[0xA5; 512], 4096 + offset + 1024).unwrap();
}

/// A stripe with a valid data chunk: (lsn, stripe, column of that chunk).
pub(crate) fn stripe_with_valid_data(a: &DvsArray) -> (u32, mosaic_dvs::tables::Stripe, usize, u32) {
    let t = a.tables();
    let mut live = t.live.clone();
    live.sort_unstable();
    for lsn in live {
        let s = t.get(lsn).unwrap();
        for st in &s.sit {
            if st.width() >= 2 {
                if let Some(c) = (0..st.width()).find(|&c| t.lookup(lsn, st.lcns[c]) == Some((st.members[c] as usize, st.idx[c]))) {
                    return (lsn, st.clone(), c, s.phys);
                }
            }
        }
    }
    panic!("no stripe with valid data");
}

#[test]
fn scrub_finds_rot_and_repair_restripes() {
    for (k, rot_parity) in [(1usize, true), (2, false), (2, true)] {
        let dir = scratch();
        let c = cfg(k);
        let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7 + k as u64);
        let reference = fill(&mut a, &mut rng, 250);
        let clean = a.scrub_with(false, &|_, _| {}).unwrap();
        assert!(clean.mismatched == 0 && clean.stripes_checked > 0 && clean.skipped_stripes > 0, "{clean:?}");
        let before = a.io_counters();
        let _ = a.scrub_with(false, &|_, _| {}).unwrap();
        let cols: u64 = {
            let t = a.tables();
            t.live.iter().flat_map(|&l| t.get(l).unwrap().sit.iter().filter(move |st| (0..st.width()).any(|c| t.lookup(l, st.lcns[c]) == Some((st.members[c] as usize, st.idx[c])))).map(|st| st.members.len() as u64)).sum()
        };
        assert_eq!(a.io_counters().reads - before.reads, cols, "one read per column of every live stripe");
        let (lsn, st, col, phys) = stripe_with_valid_data(&a);
        let bad_col = if rot_parity { st.width() } else { col };
        let bad_member = st.members[bad_col] as usize;
        rot(dir.path(), bad_member, a.geo().slot_offset(phys, st.idx[bad_col]));
        let found = a.scrub_with(false, &|_, _| {}).unwrap();
        assert_eq!(found.mismatched, 1, "k={k}: {found:?}");
        assert_eq!(found.findings[0].at, mosaic_core::ScrubAt::Extent { group: lsn as u64, row: found_row(&found) });
        if k >= 2 {
            assert_eq!(found.findings.iter().filter_map(|f| f.member).collect::<Vec<_>>(), vec![bad_member], "k={k}: the rotten column is located");
        } else {
            assert!(found.findings.iter().all(|f| f.member.is_none()), "k=1 cannot tell which column is wrong");
        }
        let chunk = a.geo().chunk_start((lsn, st.lcns[col]));
        let mut got = vec![0u8; c.chunk as usize];
        a.read(chunk, &mut got).unwrap();
        assert_eq!(got == reference[chunk as usize..chunk as usize + got.len()], rot_parity, "a rotten data chunk reads back rotten before repair");
        let valid = (0..st.width()).filter(|&c| a.tables().lookup(lsn, st.lcns[c]) == Some((st.members[c] as usize, st.idx[c]))).count() as u64;
        let fixed = a.scrub_with(true, &|_, _| {}).unwrap();
        assert_eq!(fixed.rewritten_chunks, valid, "every valid chunk of the stripe is re-striped");
        let after = a.scrub_with(false, &|_, _| {}).unwrap();
        assert!(after.mismatched == 0, "k={k}: {after:?}");
        check_all(&mut a, &reference);
        // The new stripes protect the data: lose k members, read it all.
        drop(a);
        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        for m in (0..5).filter(|&m| m != bad_member).take(k) {
            b.fail(m).unwrap();
        }
        check_all(&mut b, &reference);
    }
}

/// The SIT row of the one finding of a DVS scrub report.
fn found_row(r: &mosaic_core::ScrubReport) -> u64 {
    match r.findings[0].at {
        mosaic_core::ScrubAt::Extent { row, .. } => row,
        other => panic!("a DVS finding names an extent, not {other}"),
    }
}

/// A member file copied while the array was open, and put back after more
/// writes, carries the session's label: the write pointers name it stale.
#[test]
fn the_write_pointers_name_a_member_copied_within_a_session() {
    use mosaic_core::MemberState::Failed;
    let dir = scratch();
    let c = cfg(1);
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let mut reference = fill(&mut a, &mut rng, 100);
    a.flush().unwrap();
    let p2 = dir.path().join("m2");
    let old = std::fs::read(&p2).unwrap();
    more_writes(&mut a, &mut rng, &mut reference, 100);
    drop(a);
    std::fs::write(&p2, &old).unwrap();
    let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    let w = b.warnings().join("\n");
    assert!(w.contains("m2 (zoned): member 2 is stale (it holds less of SSG"), "{w}");
    assert_eq!(states(&b)[2], Failed);
    check_all(&mut b, &reference);
}

#[test]
fn a_stale_member_copy_is_named_and_never_read() {
    use mosaic_core::{DeviceIo, MemberState::*};
    let dir = scratch();
    let c = cfg(1);
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut reference = fill(&mut a, &mut rng, 100);
    drop(a);
    // Member 2's file is copied away, the array takes more writes, and
    // the old copy is put back.
    let p2 = dir.path().join("m2");
    let old = std::fs::read(&p2).unwrap();
    let mut a = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    assert!(a.warnings().is_empty(), "{:?}", a.warnings());
    more_writes(&mut a, &mut rng, &mut reference, 100);
    drop(a);
    std::fs::write(&p2, &old).unwrap();
    // The open that took the writes started a session, two events on:
    // the old copy's label names it stale, and it is failed.  (A copy
    // taken within the session is caught by the write pointers, DVS's own
    // evidence: `the_write_pointers_name_a_member_copied_within_a_session`.)
    let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    let w = b.warnings().join("\n");
    assert!(w.contains("m2 (zoned): member 2 is stale (event counter"), "{w}");
    assert_eq!(states(&b)[2], Failed);
    b.reset_io();
    check_all(&mut b, &reference);
    assert_eq!(b.member_io()[2], DeviceIo::default(), "a stale member is never read");
    drop(b);
    // Failed on record (the labels say so too): skipped quietly from now on.
    let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    assert!(b.warnings().is_empty() && !b.info().member_list[2].present, "{:?}", b.warnings());
    assert_eq!(b.member_io()[2], DeviceIo::default());
    b.replace(2, Arc::new(ZonedFile::open(&p2).unwrap())).unwrap();
    b.rebuild(&|_, _| {}, None).unwrap();
    drop(b);
    // Copied away again; meanwhile member 0 fails and is rebuilt (member
    // states change: the event counter goes up), then the copy is back.
    let old = std::fs::read(&p2).unwrap();
    let mut a = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    let at = a.info().events;
    a.fail(0).unwrap();
    more_writes(&mut a, &mut rng, &mut reference, 50);
    a.replace(0, Arc::new(ZonedFile::open(&dir.path().join("m0")).unwrap())).unwrap();
    a.rebuild(&|_, _| {}, None).unwrap();
    assert_eq!(a.info().events, at + 6, "fail, replace, rebuild done: two rounds each");
    drop(a);
    std::fs::write(&p2, &old).unwrap();
    // The one freshness rule names the copy stale before anything of it
    // but its label is read.  A member of another array given too is
    // named and not used.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    drop(DvsArray::create(files_for(&other, 5, &c), c.clone()).unwrap());
    let mut devs = reopen_files(dir.path(), 5);
    devs.push(Arc::new(ZonedFile::open(&other.join("m0")).unwrap()));
    let mut d = DvsArray::open(devs).unwrap();
    let w = d.warnings().join("\n");
    // (The copy was taken before the open that started this session.)
    assert!(w.contains(&format!("m2 (zoned): member 2 is stale (event counter {}, the array is at {})", at - 2, at + 6)), "{w}");
    assert!(w.contains("other/m0 (zoned): belongs to another array"), "{w}");
    assert_eq!(d.info().events, at + 8, "the open recorded member 2 failed");
    assert!(!d.info().member_list[2].present);
    assert_eq!(d.sources()[2], None);
    assert_eq!(d.member_io()[2], DeviceIo::default(), "a stale member is never read");
    check_all(&mut d, &reference);
    drop(d);
    assert!(std::fs::read(&p2).unwrap() == old, "nor written");
    // Replaced and rebuilt, the member is back.
    let mut e = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    assert!(e.warnings().is_empty(), "{:?}", e.warnings());
    e.replace(2, Arc::new(ZonedFile::open(&p2).unwrap())).unwrap();
    e.rebuild(&|_, _| {}, None).unwrap();
    drop(e);
    let mut f = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    assert_eq!(states(&f), vec![Active; 5]);
    check_all(&mut f, &reference);
}

pub(crate) fn zoned(dir: &Path, name: &str, c: &DvsConfig) -> Arc<dyn ZonedMember> {
    Arc::new(ZonedFile::create(&dir.join(name), ZONE, ZONES, c.conventional).unwrap())
}

fn reopen_with(dir: &Path, n: usize, extra: &[&str]) -> Vec<Arc<dyn ZonedMember>> {
    let mut v = reopen_files(dir, n);
    v.extend(extra.iter().map(|e| Arc::new(ZonedFile::open(&dir.join(e)).unwrap()) as Arc<dyn ZonedMember>));
    v
}

#[test]
fn a_hot_spare_takes_a_failed_members_place_and_is_rebuilt() {
    use mosaic_core::MemberState::*;
    let dir = scratch();
    let c = cfg(1);
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut reference = fill(&mut a, &mut rng, 200);
    // Wrong zones, a member of the array, and a fifth spare are refused.
    let odd = Arc::new(ZonedFile::create(&dir.path().join("odd"), ZONE, ZONES + 1, c.conventional).unwrap());
    assert!(a.add_spare(odd).unwrap_err().to_string().contains("the spare"));
    let e = a.add_spare(Arc::new(ZonedFile::open(&dir.path().join("m2")).unwrap())).unwrap_err().to_string();
    assert!(e.contains("in this array already"), "{e}");
    let s0 = a.add_spare(zoned(dir.path(), "s0", &c)).unwrap();
    let e = a.add_spare(Arc::new(ZonedFile::open(&dir.path().join("s0")).unwrap())).unwrap_err().to_string();
    assert!(e.contains("in this array already"), "{e}");
    let s1 = a.add_spare(zoned(dir.path(), "s1", &c)).unwrap();
    for i in 2..mosaic_dvs::meta::MAX_SPARES {
        a.add_spare(zoned(dir.path(), &format!("s{i}"), &c)).unwrap();
    }
    assert!(a.add_spare(zoned(dir.path(), "s9", &c)).unwrap_err().to_string().contains("hot spares already"));
    assert!(a.take_spare().unwrap().is_none(), "no member is failed");
    drop(a);
    // Spares are found by their labels, in any order, and listed in order.
    let names = ["s1", "s0", "s2", "s3"];
    let mut b = DvsArray::open(reopen_with(dir.path(), 5, &names)).unwrap();
    assert!(b.warnings().is_empty(), "{:?}", b.warnings());
    assert_eq!(b.spares().iter().map(|s| s.uuid).take(2).collect::<Vec<_>>(), vec![s0, s1]);
    assert_eq!(b.spares()[0].source, Some(6), "s0 was the 7th device given");
    b.fail(2).unwrap();
    more_writes(&mut b, &mut rng, &mut reference, 100);
    let m2 = b.info().member_list[2].uuid;
    assert_eq!(b.take_spare().unwrap(), Some((2, s0)));
    assert_eq!(b.info().replaced, [m2], "the labels list m2 as replaced");
    assert_eq!(states(&b)[2], Rebuilding { done: 0 });
    assert_eq!(b.spares().len(), 3);
    b.rebuild(&|_, _| {}, None).unwrap();
    assert_eq!(states(&b), vec![Active; 5]);
    check_all(&mut b, &reference);
    drop(b);
    // s0 now serves member 2; the other spares stay spares, and m2, a
    // former member by the labels, is passed over without a word.
    let mut devs = reopen_files(dir.path(), 5);
    devs[2] = Arc::new(ZonedFile::open(&dir.path().join("s0")).unwrap());
    devs.push(Arc::new(ZonedFile::open(&dir.path().join("m2")).unwrap()));
    devs.extend(["s1", "s2", "s3"].iter().map(|e| Arc::new(ZonedFile::open(&dir.path().join(e)).unwrap()) as Arc<dyn ZonedMember>));
    let mut d = DvsArray::open(devs).unwrap();
    assert_eq!(d.sources()[2], Some(2));
    assert_eq!(d.spares().len(), 3);
    assert!(d.warnings().is_empty(), "{:?}", d.warnings());
    assert!(d.sources().iter().all(|s| *s != Some(5)), "m2 (the 6th device) serves no member");
    // Lose another member: member 2 (the former spare) carries its share.
    d.fail(0).unwrap();
    check_all(&mut d, &reference);
    drop(d);
    // A spare of another array is named and not used.
    let other_dir = scratch();
    let mut o = DvsArray::create(files_for(other_dir.path(), 5, &c), c.clone()).unwrap();
    o.add_spare(zoned(other_dir.path(), "os", &c)).unwrap();
    drop(o);
    let mut devs = reopen_files(dir.path(), 5);
    devs[2] = Arc::new(ZonedFile::open(&dir.path().join("s0")).unwrap());
    devs.push(Arc::new(ZonedFile::open(&other_dir.path().join("os")).unwrap()));
    let e = DvsArray::open(devs).unwrap();
    assert!(e.warnings().iter().any(|w| w.contains("a hot spare of another DVS array")), "{:?}", e.warnings());
    assert!(e.spares().is_empty());
}

#[test]
fn a_removed_spare_is_listed_nowhere_its_label_is_erased_and_a_failure_takes_the_next() {
    use mosaic_core::MemberState::*;
    let dir = scratch();
    let c = cfg(1);
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let reference = fill(&mut a, &mut rng, 100);
    let s0 = a.add_spare(zoned(dir.path(), "s0", &c)).unwrap();
    let s1 = a.add_spare(zoned(dir.path(), "s1", &c)).unwrap();
    assert!(a.remove_spare(uuid::Uuid::nil()).err().unwrap().to_string().contains("no hot spare"));
    let dev = a.remove_spare(s0).unwrap();
    assert_eq!(a.spares().iter().map(|s| s.uuid).collect::<Vec<_>>(), vec![s1]);
    let mut read = |b: &mut [u8], off: u64| dev.read_at(b, off);
    assert_eq!(mosaic_format::label::read_label(dev.size(), &mut read).unwrap(), Err(mosaic_format::label::LabelError::None), "s0's label is erased");
    drop((dev, a));
    // Given again at open, s0 is no spare; s1 still is, and takes the failure.
    let mut b = DvsArray::open(reopen_with(dir.path(), 5, &["s0", "s1"])).unwrap();
    assert_eq!(b.spares().iter().map(|s| s.uuid).collect::<Vec<_>>(), vec![s1]);
    b.fail(3).unwrap();
    assert_eq!(b.take_spare().unwrap(), Some((3, s1)));
    b.rebuild(&|_, _| {}, None).unwrap();
    assert_eq!(states(&b), vec![Active; 5]);
    check_all(&mut b, &reference);
    assert!(b.spares().is_empty());
}

/// `members` on one power-cut budget, each cut tearing the writes not
/// yet flushed (noted in `unflushed`); with `in_place`, their flushes
/// free and their writes taken in place when the member can (a destage
/// then runs fused and made in place).
fn torn_on_cut(members: Vec<Arc<dyn ZonedMember>>, budget: &Arc<AtomicI64>, unflushed: &Arc<Unflushed>, in_place: bool) -> Vec<Arc<dyn ZonedMember>> {
    let refusals = Arc::new(AtomicU64::new(0));
    members.into_iter().map(|inner| Arc::new(PowerCut { cheap: in_place, in_place, unflushed: Some(unflushed.clone()), ..PowerCut::new(inner, budget.clone(), refusals.clone()) }) as Arc<dyn ZonedMember>).collect()
}

/// Counts every operation (flushes included) on the members it wraps.
fn counted(dir: &Path, c: &DvsConfig, ops: &Arc<AtomicI64>) -> Vec<Arc<dyn ZonedMember>> {
    let refusals = Arc::new(AtomicU64::new(0));
    files_for(dir, 5, c).into_iter().map(|inner| Arc::new(PowerCut::new(inner, ops.clone(), refusals.clone())) as Arc<dyn ZonedMember>).collect()
}

/// `n` block writes at distinct random blocks, with their bytes.
fn block_writes(rng: &mut ChaCha8Rng, cap: u64, n: usize) -> Vec<(u64, Vec<u8>)> {
    let mut offs: Vec<u64> = (0..cap / 512).collect();
    (0..n)
        .map(|_| {
            let off = offs.swap_remove(rng.gen_range(0..offs.len())) * 512;
            let mut d = vec![0u8; 512];
            rng.fill(&mut d[..]);
            (off, d)
        })
        .collect()
}

#[test]
fn concurrent_cached_writes_share_one_journal_write_and_flush_per_member() {
    const N: usize = 16;
    let c = cfg_cached(1, 64);
    let mut per_write = Vec::new();
    for grouped in [false, true] {
        let dir = scratch();
        let ops = Arc::new(AtomicI64::new(i64::MAX));
        let mut a = DvsArray::create(counted(dir.path(), &c, &ops), c.clone()).unwrap();
        let cap = a.capacity();
        let writes = block_writes(&mut ChaCha8Rng::seed_from_u64(5), cap, N);
        let (io0, ops0) = (a.io_counters(), ops.load(Ordering::SeqCst));
        if grouped {
            let refs: Vec<(u64, &[u8])> = writes.iter().map(|(o, d)| (*o, d.as_slice())).collect();
            a.write_many(&refs).unwrap();
        } else {
            for (o, d) in &writes {
                a.write(*o, d).unwrap();
            }
        }
        let io = a.io_counters();
        assert_eq!(a.stats().destages, 0, "the cache absorbs all {N} writes");
        assert_eq!(io.reads, io0.reads, "a cached write reads nothing");
        // Writes and flushes: one journal write + one flush per member for
        // the group, one per member per write without it.
        per_write.push(((io.writes - io0.writes) as usize, (ops0 - ops.load(Ordering::SeqCst)) as usize));
        let mut reference = vec![0u8; cap as usize];
        for (o, d) in &writes {
            reference[*o as usize..*o as usize + d.len()].copy_from_slice(d);
        }
        check_all(&mut a, &reference);
        drop(a); // not flushed: the writes live in the journal only
        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        check_all(&mut b, &reference);
        assert_eq!(b.scrub().unwrap(), 0);
    }
    // The journal goes to k + 1 = 2 of the 5 members.
    assert_eq!(per_write[0], (2 * N, 2 * 2 * N), "one by one: a journal write and a flush per journal member per write");
    assert_eq!(per_write[1], (2, 2 * 2), "grouped: one journal write and one flush per journal member");
}

#[test]
fn a_group_of_one_is_a_write_and_write_through_groups_destage_each() {
    // Same device operations for write_many of one and write (the
    // simulator's twin plans write), and write-through groups each write.
    for c in [cfg_cached(1, 16), cfg(1)] {
        let mut counts = Vec::new();
        for grouped in [false, true] {
            let dir = scratch();
            let ops = Arc::new(AtomicI64::new(i64::MAX));
            let mut a = DvsArray::create(counted(dir.path(), &c, &ops), c.clone()).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(9);
            let cap = a.capacity();
            for _ in 0..300 {
                let (off, data) = random_write(&mut rng, cap);
                if grouped {
                    a.write_many(&[(off, &data)]).unwrap();
                } else {
                    a.write(off, &data).unwrap();
                }
            }
            counts.push((a.member_io(), ops.load(Ordering::SeqCst), a.stats().clone()));
        }
        assert_eq!(counts[0], counts[1], "cache {}", c.cache_chunks);
    }
}

/// Writes prepared as a volume's writers prepare them (a whole block's
/// bytes put in a cache block buffer and their checksum taken before the
/// group) do exactly what the same writes unprepared do: the same device
/// operations, the same bytes read back, and, after a power cut, the
/// same bytes replayed from the journal.
#[test]
fn prepared_writes_do_what_bare_writes_do() {
    for k in [1, 2] {
        let c = cfg_cached(k, 16);
        let mut seen = Vec::new();
        for prepared in [false, true] {
            let dir = scratch();
            let ops = Arc::new(AtomicI64::new(i64::MAX));
            let mut a = DvsArray::create(counted(dir.path(), &c, &ops), c.clone()).unwrap();
            let (cap, block) = (a.capacity(), a.geo().block);
            let pool = a.block_pool();
            let mut rng = ChaCha8Rng::seed_from_u64(11);
            let mut reference = vec![0u8; cap as usize];
            let mut held = 0;
            for _ in 0..600 {
                // Groups of one to six: whole blocks, and odd writes.
                let group: Vec<(u64, Vec<u8>)> = (0..rng.gen_range(1..7))
                    .map(|_| {
                        if rng.gen_bool(0.7) {
                            let mut d = vec![0u8; block as usize];
                            rng.fill(&mut d[..]);
                            (rng.gen_range(0..cap / block) * block, d)
                        } else {
                            random_write(&mut rng, cap)
                        }
                    })
                    .collect();
                if prepared {
                    let blocks: Vec<Option<Arc<[u8]>>> = group.iter().map(|(o, d)| pool.block_for(*o, d)).collect();
                    held += blocks.iter().flatten().count();
                    let w: Vec<Prepared<'_>> = group.iter().zip(&blocks).map(|((o, d), b)| Prepared { offset: *o, data: d, sum: Some(checksum(d)), block: b.clone() }).collect();
                    a.write_prepared(&w).unwrap();
                } else {
                    let w: Vec<(u64, &[u8])> = group.iter().map(|(o, d)| (*o, d.as_slice())).collect();
                    a.write_many(&w).unwrap();
                }
                group.iter().for_each(|(o, d)| reference[*o as usize..*o as usize + d.len()].copy_from_slice(d));
            }
            assert!(!prepared || held > 1000, "whole blocks went as block buffers: {held}");
            check_all(&mut a, &reference);
            seen.push((a.member_io(), ops.load(Ordering::SeqCst), a.stats().clone()));
            // Cut the power: the cached blocks come back from the journal.
            ops.store(0, Ordering::SeqCst);
            drop(a);
            let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
            check_all(&mut b, &reference);
        }
        assert_eq!(seen[0], seen[1], "k {k}");
    }
    // Only whole aligned blocks of a cached array go as block buffers.
    let dir = scratch();
    let c = cfg_cached(1, 16);
    let a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let (pool, block) = (a.block_pool(), a.geo().block);
    let whole = vec![7u8; block as usize];
    assert_eq!(pool.block_for(3 * block, &whole).as_deref(), Some(&whole[..]));
    let half = block as usize / 2;
    assert!(pool.block_for(3 * block + half as u64, &whole).is_none(), "unaligned");
    assert!(pool.block_for(0, &whole[..half]).is_none() && pool.block_for(0, &[whole.clone(), whole.clone()].concat()).is_none(), "not one block");
    let dir = scratch();
    let a = DvsArray::create(files_for(dir.path(), 5, &cfg(1)), cfg(1)).unwrap();
    assert!(a.block_pool().block_for(0, &whole).is_none(), "write-through: no cache to hold it");
}

/// Every byte of `got` is the acknowledged one, or one a write of the
/// interrupted group `inflight` put there.
fn assert_acknowledged_or_inflight(seed: u64, got: &[u8], acknowledged: &[u8], inflight: &[(u64, Vec<u8>)]) {
    for (i, (&g, &w)) in got.iter().zip(acknowledged).enumerate() {
        let by_group = inflight.iter().any(|(o, d)| (i as u64) >= *o && (i as u64) < o + d.len() as u64 && d[i - *o as usize] == g);
        assert!(g == w || by_group, "seed {seed}: byte {i}: got {g}, acknowledged {w}");
    }
}

/// The array in `dir` opened again after a power cut, and what it reads:
/// every byte the acknowledged one, or one the interrupted writes put
/// there (any of them: none was acknowledged).
fn reopen_after_cut(dir: &Path, seed: u64, acknowledged: &[u8], inflight: &[(u64, Vec<u8>)]) -> (DvsArray, Vec<u8>) {
    let mut b = DvsArray::open(reopen_files(dir, 5)).unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
    let got = b.read_all();
    assert_acknowledged_or_inflight(seed, &got, acknowledged, inflight);
    (b, got)
}

/// Writes grouped as a volume's concurrent writers send them, the power cut
/// at a random point: every acknowledged group is whole after the reopen
/// (its records' checksums, whether taken whole or joined from the
/// writers', hold).
#[test]
fn power_cuts_during_grouped_writes_keep_every_acknowledged_group() {
    let mut cut = 0;
    for seed in 0..24u64 {
        let dir = scratch();
        let budget = Arc::new(AtomicI64::new(i64::MAX));
        let c = cfg_cached(1 + (seed % 2) as usize, 16);
        let mut a = DvsArray::create(counted(dir.path(), &c, &budget), c.clone()).unwrap();
        let cap = a.capacity();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut reference = vec![0u8; cap as usize];
        budget.store(rng.gen_range(50..1500), Ordering::SeqCst);
        let mut inflight = Vec::new();
        for _ in 0..2000 {
            let group: Vec<(u64, Vec<u8>)> = (0..rng.gen_range(1..12)).map(|_| random_write(&mut rng, cap)).collect();
            let refs: Vec<(u64, &[u8])> = group.iter().map(|(o, d)| (*o, d.as_slice())).collect();
            // Half the seeds as a volume writes: each write's checksum
            // taken beforehand, joined to its record's header.
            let written = if (seed / 2) % 2 == 0 {
                a.write_many(&refs)
            } else {
                let summed: Vec<Prepared<'_>> = refs.iter().map(|&(o, d)| Prepared { sum: Some(checksum(d)), ..Prepared::bare(o, d) }).collect();
                a.write_prepared(&summed)
            };
            match written {
                Ok(()) => group.iter().for_each(|(o, d)| reference[*o as usize..*o as usize + d.len()].copy_from_slice(d)),
                Err(e) => {
                    assert!(e.to_string().contains("power cut"), "{e}");
                    inflight = group;
                    break;
                }
            }
        }
        assert!(!inflight.is_empty(), "seed {seed}: the power was never cut");
        cut += 1;
        drop(a);
        let (mut b, _) = reopen_after_cut(dir.path(), seed, &reference, &inflight);
        assert_eq!(b.scrub().unwrap(), 0, "seed {seed}");
    }
    assert_eq!(cut, 24);
}

/// Destages made in place (members in memory that take writes in place,
/// `PowerCut::in_place`) under power cuts that also tear every write
/// not yet flushed: each reopen keeps every acknowledged write, holds
/// the interrupted one or not, and scrubs clean.
#[test]
fn power_cuts_during_destages_made_in_place_keep_every_acknowledged_write() {
    let c = DvsConfig { cache_chunks: 128, ..DvsConfig::new(5, 1, 64 << 10, 2 << 20, 12, 4) };
    let mut destaged = 0;
    for seed in 0..6u64 {
        let dir = scratch();
        let unflushed = Arc::new(Unflushed::default());
        let budget = Arc::new(AtomicI64::new(i64::MAX));
        let mut a = DvsArray::create(torn_on_cut(zoned_files(dir.path(), &c), &budget, &unflushed, true), c.clone()).unwrap();
        let cap = a.capacity();
        let mut rng = ChaCha8Rng::seed_from_u64(300 + seed);
        budget.store(rng.gen_range(8_000..40_000), Ordering::SeqCst);
        let (mut acked, mut inflight) = (vec![0u8; cap as usize], Vec::new());
        for _ in 0..20_000 {
            let off = rng.gen_range(0..cap / 4096) * 4096;
            let mut d = vec![0u8; 4096];
            rng.fill(&mut d[..]);
            if a.write(off, &d).is_err() {
                inflight = vec![(off, d)];
                break;
            }
            acked[off as usize..off as usize + 4096].copy_from_slice(&d);
        }
        assert!(!inflight.is_empty(), "seed {seed}: the power was never cut");
        destaged += a.stats().destages;
        drop(a);
        let (mut b, _) = reopen_after_cut(dir.path(), seed, &acked, &inflight);
        assert_eq!(b.scrub().unwrap(), 0, "seed {seed}");
    }
    assert!(destaged >= 12, "the cuts came before the destages: {destaged}");
}

/// As `power_cuts_during_grouped_writes_keep_every_acknowledged_group`,
/// but the cut tears every write not yet flushed (its first sector goes
/// back to what it was), so a group's later records may be whole behind
/// a torn first one.  The first reopen keeps every acknowledged write;
/// the reopened array then takes one write, in one-sector records like
/// the group's, and loses power again.  After the second reopen the
/// array holds exactly what the first reopen held plus that write:
/// nothing of the torn group comes back (the old code failed seed 13).
#[test]
fn torn_grouped_writes_and_a_second_power_cut_bring_nothing_back() {
    let (mut torn, mut dropped) = (0, 0);
    for seed in 0..200u64 {
        let unflushed = Arc::new(Unflushed::default());
        let dir = scratch();
        let budget = Arc::new(AtomicI64::new(i64::MAX));
        let c = cfg_cached(1 + (seed % 2) as usize, 64);
        let mut a = DvsArray::create(torn_on_cut(files_for(dir.path(), 5, &c), &budget, &unflushed, false), c.clone()).unwrap();
        let cap = a.capacity();
        let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
        budget.store(rng.gen_range(50..1500), Ordering::SeqCst);
        let (mut acked, mut inflight) = (vec![0u8; cap as usize], Vec::new());
        for _ in 0..2000 {
            let group: Vec<(u64, Vec<u8>)> = (0..rng.gen_range(4..12)).map(|_| sector_write(&mut rng, cap)).collect();
            let refs: Vec<(u64, &[u8])> = group.iter().map(|(o, d)| (*o, d.as_slice())).collect();
            if a.write_many(&refs).is_err() {
                inflight = group;
                break;
            }
            group.iter().for_each(|(o, d)| acked[*o as usize..*o as usize + d.len()].copy_from_slice(d));
        }
        torn += (unflushed.torn.load(Ordering::SeqCst) > 0) as usize;
        drop(a);

        let (mut b, mut reference) = reopen_after_cut(dir.path(), seed, &acked, &inflight);
        dropped += b.warnings().iter().filter(|w| w.contains("is whole on no member")).count();
        // One record, where the torn group's first one was when one was
        // dropped; the rest of that group lies after it.
        let (off, d) = sector_write(&mut rng, cap);
        b.write(off, &d).unwrap();
        reference[off as usize..off as usize + d.len()].copy_from_slice(&d);
        drop(b); // not flushed: the acknowledged write lives in the journal

        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap_or_else(|e| panic!("seed {seed}: second reopen: {e}"));
        assert!(b.read_all() == reference, "seed {seed}: the second reopen differs from the first plus what was acknowledged since");
        assert_eq!(b.scrub().unwrap(), 0, "seed {seed}");
    }
    // When written: 14 of the 200 reopens dropped a torn group; 91 cuts tore a write.
    assert!(dropped >= 4, "a torn group was behind only {dropped} of 200 reopens ({torn} cuts tore a write)");
}

/// A member whose appends (writes to sequential zones) and zone resets
/// are held until the test opens the gate or cuts the power; journal
/// writes (conventional zones), reads and flushes pass meanwhile.  After
/// a cut every operation fails.
struct Gate {
    /// The first byte of the sequential zones.
    seq_start: u64,
    state: Arc<GateState>,
}

#[derive(Default)]
struct GateState {
    /// (open, cut, appends waiting)
    s: std::sync::Mutex<(bool, bool, usize)>,
    wake: std::sync::Condvar,
}

impl GateState {
    /// Let held operations through (`cut`: make them, and every later
    /// operation, fail).
    fn release(&self, cut: bool) {
        let mut s = self.s.lock().unwrap();
        s.0 = true;
        s.1 = cut;
        self.wake.notify_all();
    }
    fn waiting(&self) -> usize {
        self.s.lock().unwrap().2
    }
    fn cut(&self) -> std::io::Result<()> {
        if self.s.lock().unwrap().1 {
            return Err(std::io::Error::other("power cut"));
        }
        Ok(())
    }
    /// Hold an append until released; a minute at most, so a mistake
    /// fails the test instead of hanging it.
    fn hold(&self) -> std::io::Result<()> {
        let mut s = self.s.lock().unwrap();
        s.2 += 1;
        self.wake.notify_all();
        while !s.0 {
            let (g, t) = self.wake.wait_timeout(s, std::time::Duration::from_secs(60)).unwrap();
            s = g;
            if t.timed_out() {
                s.0 = true;
                s.1 = true;
            }
        }
        s.2 -= 1;
        if s.1 {
            return Err(std::io::Error::other("power cut"));
        }
        Ok(())
    }
}

impl Hooks for Gate {
    fn read(&self, _: u64, _: usize) -> std::io::Result<()> {
        self.state.cut()
    }
    fn write(&self, offset: u64, _: usize) -> std::io::Result<()> {
        if offset >= self.seq_start {
            self.state.hold()?;
        }
        self.state.cut()
    }
    fn flush(&self) -> std::io::Result<()> {
        self.state.cut()
    }
    fn reset(&self, _: u64) -> std::io::Result<()> {
        self.state.hold()
    }
}

/// A 5-member DVS array (16 MiB members, 64 KiB chunks, an 8-chunk
/// cache) on zoned files in a new scratch directory, every member behind
/// one shared [`Gate`].
fn gated_array() -> (tempfile::TempDir, DvsConfig, Arc<GateState>, DvsArray) {
    let dir = scratch();
    let spec = mosaic_dvs::files::CreateSpec { members: 5, member_size: 16 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 8 };
    let c = mosaic_dvs::files::config_for(&spec).unwrap();
    let gate = Arc::new(GateState::default());
    let members: Vec<Arc<dyn ZonedMember>> = (0..5)
        .map(|i| {
            let inner = Arc::new(ZonedFile::create(&dir.path().join(format!("m{i}")), c.zone_size, c.zones, c.conventional).unwrap()) as Arc<dyn ZonedMember>;
            Hooked::new(inner.clone(), Gate { seq_start: inner.conventional_zones() * inner.zone_size(), state: gate.clone() }) as Arc<dyn ZonedMember>
        })
        .collect();
    let a = DvsArray::create(members, c.clone()).unwrap();
    (dir, c, gate, a)
}

/// Random 4 KiB writes to the first `blocks` blocks (seeded), each
/// also made to `reference`.
fn random_block_writer(seed: u64, blocks: u64) -> impl FnMut(&mut DvsArray, &mut [u8]) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    move |a, reference| {
        let off = rng.gen_range(0..blocks) * 4096;
        let mut data = vec![0u8; 4096];
        rng.fill(&mut data[..]);
        a.write(off, &data).unwrap();
        reference[off as usize..off as usize + 4096].copy_from_slice(&data);
    }
}

/// A destage runs in the background: the writes after the one that
/// started it are acknowledged (journalled) while its appends are still
/// held, and the next destage is planned and queued behind it.  Then
/// either the power is cut under them (the array reports the error on
/// the next request and on flush, names the interrupted destage, and
/// after a reopen from the files every acknowledged block reads back,
/// from the journal), or they are let through and the array dropped
/// without a flush (the drop waits for them; every block reads back
/// after a reopen).
#[test]
fn writes_are_acknowledged_while_a_background_destage_runs_and_survive_a_crash_under_it() {
    for cut in [true, false] {
        let (dir, _, gate, mut a) = gated_array();
        let cap = a.capacity();
        let mut reference = vec![0u8; cap as usize];
        let mut write = random_block_writer(23, cap / 4096);
        // Fill the 128-block cache until it destages an SSG.
        while a.stats().destages == 0 {
            write(&mut a, &mut reference);
        }
        while gate.waiting() == 0 {
            std::thread::yield_now();
        }
        // The journal (256 records) is half full: the cache fills again
        // and a second destage is planned and queued behind the held one,
        // then more writes are journalled beside both.
        while a.stats().destages < 2 {
            write(&mut a, &mut reference);
        }
        for _ in 0..8 {
            write(&mut a, &mut reference);
        }
        assert!(gate.waiting() > 0, "the first destage's appends are still held");
        assert_eq!(a.stats().destages, 2);
        gate.release(cut);
        if cut {
            let e = a.write(0, &[1u8; 4096]).unwrap_err();
            assert!(e.to_string().contains("power cut"), "{e}");
            assert_eq!(a.interrupted_job(), Some(mosaic_dvs::JobKind::Destage));
            assert!(a.flush().unwrap_err().to_string().contains("power cut"));
        }
        drop(a); // no flush, no close
        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        assert!(b.read_all() == reference, "cut {cut}: every acknowledged block reads back after the reopen");
        b.flush().unwrap();
        assert_eq!(b.scrub().unwrap(), 0);
    }
}

/// A ring journal's retirement runs on the destager behind the destage
/// that made its segments dead.  With the destages' appends held, writes
/// confined to SSG 0 fill the ring (SSG 0 keeps a few chunks cached, so
/// its oldest record stays live) until its reserve is reached: SSG 0 is
/// destaged again and the ring retired behind it, both queued, not run,
/// and more writes are acknowledged meanwhile into the segment still
/// free.  Then the power is cut under both (the retirement's record never
/// reaches the log: the reopen replays from the old first record, and
/// the dead records it passes over are older than the live ones that
/// follow), or they are let through and writing goes on until the freed
/// segments are reused, and the array is dropped unflushed.  Every
/// acknowledged block reads back after the reopen.
#[test]
fn a_ring_retirement_queued_behind_a_held_destage_loses_no_acknowledged_write() {
    for cut in [true, false] {
        let (dir, c, gate, mut a) = gated_array();
        assert!(c.journal_ring);
        let ssg0 = a.geo().lchunks as u64 * a.geo().chunk / 4096;
        let mut reference = vec![0u8; a.capacity() as usize];
        let mut write = random_block_writer(31, ssg0);
        // The cache fills and SSG 0 is destaged (held): its records die.
        while a.stats().destages == 0 {
            write(&mut a, &mut reference);
        }
        // The ring fills until it is retired early, behind the held destage.
        let mut most = a.journal_segments();
        while a.journal_segments() >= most {
            most = most.max(a.journal_segments());
            write(&mut a, &mut reference);
            assert!(a.stats().destages <= 3, "the queue never fills: {}", a.stats().destages);
        }
        assert!(most > a.journal_segments() + 8, "many segments retired at once ({most} -> {})", a.journal_segments());
        // Into the segment the retirement left free (not one it frees:
        // the writer would wait for the held destage).
        for _ in 0..4 {
            write(&mut a, &mut reference);
        }
        // The first destage reaches its appends and is held there (it
        // never completes before the gate opens).
        while gate.waiting() == 0 {
            std::thread::yield_now();
        }
        gate.release(cut);
        if cut {
            let e = a.write(0, &[1u8; 4096]).unwrap_err();
            assert!(e.to_string().contains("power cut"), "{e}");
        } else {
            // Reuse the freed segments (the writer waits for the retirement).
            for _ in 0..300 {
                write(&mut a, &mut reference);
            }
            assert!(a.stats().destages > 1);
        }
        drop(a);
        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        assert!(b.read_all() == reference, "cut {cut}: every acknowledged block reads back after the reopen");
        b.flush().unwrap();
        assert_eq!(b.scrub().unwrap(), 0);
    }
}

/// A zoned member that counts the writes reaching it by the call they
/// came through.
struct Calls {
    writes: AtomicU64,
    appends: AtomicU64,
}

impl Hooks for Calls {
    fn write(&self, _: u64, _: usize) -> std::io::Result<()> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn append(&self, _: u64, _: usize) -> std::io::Result<()> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A cached write's journal record reaches its k + 1 journal members as
/// a log append (streamed around the CPU cache on mapped files), through
/// a power-cut wrapper too, and nothing else is written while the write
/// stays in the cache; the bytes read back, before and after a reopen.
#[test]
fn journal_records_reach_members_as_appends() {
    let dir = scratch();
    let c = cfg_cached(1, 16);
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let refusals = Arc::new(AtomicU64::new(0));
    let calls: Vec<Arc<Hooked<Calls>>> = files_for(dir.path(), 5, &c).into_iter().map(|inner| Hooked::new(inner, Calls { writes: AtomicU64::new(0), appends: AtomicU64::new(0) })).collect();
    let devs: Vec<Arc<dyn ZonedMember>> = calls.iter().map(|m| Arc::new(PowerCut::new(m.clone(), budget.clone(), refusals.clone())) as Arc<dyn ZonedMember>).collect();
    let mut a = DvsArray::create(devs, c).unwrap();
    let count = |f: fn(&Calls) -> &AtomicU64| calls.iter().map(|m| f(&m.hooks).load(Ordering::SeqCst)).sum::<u64>();
    let (w0, a0) = (count(|m| &m.writes), count(|m| &m.appends));
    let mut reference = vec![0u8; 8 * 512];
    for i in 0..8u64 {
        let data = vec![i as u8 + 1; 512];
        a.write(i * 512, &data).unwrap();
        reference[(i * 512) as usize..][..512].copy_from_slice(&data);
    }
    assert_eq!(count(|m| &m.appends) - a0, 8 * 2, "each record appended on k + 1 = 2 members");
    assert_eq!(count(|m| &m.writes) - w0, 0, "nothing destaged yet");
    assert_eq!(refusals.load(Ordering::SeqCst), 0);
    check_all(&mut a, &reference);
    drop(a);
    let mut a = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    check_all(&mut a, &reference);
}

/// Flip a byte of every copy of `needle` on the member files (a record
/// whose write was torn on every journal member): how many copies.
fn tear_everywhere(dir: &Path, needle: &[u8]) -> usize {
    let mut torn = 0;
    for m in 0..5 {
        let path = dir.join(format!("m{m}"));
        let mut bytes = std::fs::read(&path).unwrap();
        let mut at = 0;
        while let Some(i) = bytes[at..].windows(needle.len()).position(|w| w == needle) {
            bytes[at + i + 100] ^= 0xff;
            at += i + needle.len();
            torn += 1;
        }
        std::fs::write(&path, &bytes).unwrap();
    }
    torn
}

/// A group whose first record was torn on every journal member (its later
/// records whole: the power went while the group was being written)
/// replays none of them: those writes were never acknowledged.  The next
/// record goes where the torn one was, with its sequence number; it
/// rewrites the block of the group's second write.  After the power goes
/// again, replay must not take the group's old, whole records for that
/// record's successors: the acknowledged block would be overwritten by
/// the group's never-acknowledged one.  On the lane journal and on the
/// ring (behind records still live).
#[test]
fn records_behind_a_torn_record_never_come_back() {
    let spec = mosaic_dvs::files::CreateSpec { members: 5, member_size: 16 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 8 };
    let ring = mosaic_dvs::files::config_for(&spec).unwrap();
    assert!(ring.journal_ring);
    for (c, before) in [(cfg_cached(1, 64), 0), (ring, 5)] {
        let dir = scratch();
        let members: Vec<Arc<dyn ZonedMember>> = zoned_files(dir.path(), &c);
        let mut a = DvsArray::create(members, c.clone()).unwrap();
        let cap = a.capacity();
        let block = a.geo().block as usize;
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let mut offs: Vec<u64> = (0..cap / block as u64).collect();
        let mut write = || {
            let off = offs.swap_remove(rng.gen_range(0..offs.len())) * block as u64;
            let mut d = vec![0u8; block];
            rng.fill(&mut d[..]);
            (off, d)
        };
        let mut reference = vec![0u8; cap as usize];
        for _ in 0..before {
            let (off, d) = write();
            a.write(off, &d).unwrap();
            reference[off as usize..off as usize + block].copy_from_slice(&d);
        }
        let group: Vec<(u64, Vec<u8>)> = (0..4).map(|_| write()).collect();
        let refs: Vec<(u64, &[u8])> = group.iter().map(|(o, d)| (*o, d.as_slice())).collect();
        a.write_many(&refs).unwrap();
        drop(a); // not flushed: the writes live in the journal only
        assert_eq!(tear_everywhere(dir.path(), &group[0].1), 2, "the first record, on its k + 1 = 2 journal members");

        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        assert!(b.read_all() == reference, "the torn group is gone, the records before it replayed");
        let torn = format!("journal: record {before} is whole on no member; records {} to {} after it dropped", before + 1, before + 3);
        assert!(b.warnings().iter().any(|w| w.starts_with(&torn)), "{:?}", b.warnings());
        // Acknowledged: the block of the group's second write, rewritten.
        let d = write().1;
        let off2 = group[1].0;
        b.write(off2, &d).unwrap();
        reference[off2 as usize..off2 as usize + block].copy_from_slice(&d);
        drop(b);

        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        assert!(b.read_all() == reference, "the acknowledged write reads back, and nothing of the torn group does");
        assert!(b.warnings().is_empty(), "{:?}", b.warnings());
        b.flush().unwrap();
        assert_eq!(b.scrub().unwrap(), 0);
    }
}

/// Destages large enough for the executor to fuse their parity with
/// their appends (64 KiB chunks and 2 MiB zones: over a MiB of parity
/// each), on members that say their writes are copies into memory:
/// every byte reads back, before and after a reopen, scrub is clean, and
/// the device operations and the array's work are those of the same
/// members running each destage phase by phase, in more write calls.
#[test]
fn destages_fused_with_their_appends_keep_every_byte_and_every_count() {
    let c = DvsConfig { cache_chunks: 128, ..DvsConfig::new(5, 1, 64 << 10, 2 << 20, 12, 4) };
    let mut seen = Vec::new();
    for (cheap, in_place) in [(false, false), (true, false), (true, true)] {
        let dir = scratch();
        let files: Vec<Arc<dyn ZonedMember>> = zoned_files(dir.path(), &c);
        assert!(files[0].cheap_flush(), "needs a RAM file system (/dev/shm) for members whose writes are copies");
        let calls = Arc::new(AtomicI64::new(i64::MAX));
        let refusals = Arc::new(AtomicU64::new(0));
        let devs = files.into_iter().map(|inner| Arc::new(PowerCut { cheap, in_place, ..PowerCut::new(inner, calls.clone(), refusals.clone()) }) as Arc<dyn ZonedMember>).collect();
        let mut a = DvsArray::create(devs, c.clone()).unwrap();
        let cap = a.capacity();
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let mut reference = vec![0u8; cap as usize];
        block_writes_into(&mut a, &mut rng, &mut reference, 12_000);
        a.flush().unwrap();
        check_all(&mut a, &reference);
        assert_eq!(a.scrub().unwrap(), 0, "cheap {cheap}");
        assert_eq!(refusals.load(Ordering::SeqCst), 0, "a zone write off its write pointer");
        seen.push((a.member_io(), a.stats().clone(), i64::MAX - calls.load(Ordering::SeqCst)));
        drop(a);
        let mut b = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
        check_all(&mut b, &reference);
    }
    let (plain, fused, direct) = (&seen[0], &seen[1], &seen[2]);
    assert!(plain.1.destages >= 10 && plain.1.fg_gc + plain.1.bg_gc > 0, "{:?}", plain.1);
    assert_eq!(plain.0, fused.0, "the same device operations and bytes on every member");
    assert_eq!(plain.1, fused.1);
    assert!(fused.2 > plain.2 + 10 * plain.1.destages as i64, "fused destages write in pieces: {} calls against {}", fused.2, plain.2);
    // Made in place, every write of a destage is one call again, as
    // phase by phase, with the same operations and bytes.
    assert_eq!(plain.0, direct.0, "the same device operations and bytes on every member");
    assert_eq!(plain.1, direct.1);
    assert_eq!(direct.2, plain.2, "one call a write, made in place");
}
