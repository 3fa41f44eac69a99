//! Sectors a member cannot read (array/correct.rs): decoded from the
//! stripe, the chunk written again elsewhere, the member kept and counted.

use std::io;
use std::sync::{Arc, Mutex};

use mosaic_core::MemberState;
use mosaic_dvs::array::ZonedMember;
use mosaic_dvs::{DvsArray, DvsConfig};
use mosaic_exec::corrected::MAX_CORRECTED;
use mosaic_format::lost::LostRange;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::array::{cfg, cfg_cached, check_all, files_for, fill, more_writes, scratch};
use crate::hooked::{Hooked, Hooks};

/// A zoned member's reads of some byte ranges fail with EIO (or with
/// `kind`) until their zone is reset, as a drive's unreadable sectors
/// are until rewritten.
struct BadSectors {
    bad: Mutex<Vec<(u64, u64)>>,
    kind: io::ErrorKind,
    zone: u64,
}

impl BadSectors {
    fn wrap(inner: Arc<dyn ZonedMember>, kind: io::ErrorKind) -> Arc<Hooked<BadSectors>> {
        let zone = inner.zone_size();
        Hooked::new(inner, BadSectors { bad: Mutex::new(Vec::new()), kind, zone })
    }
}

impl Hooks for BadSectors {
    fn read(&self, offset: u64, len: usize) -> io::Result<()> {
        let end = offset + len as u64;
        if !self.bad.lock().unwrap().iter().any(|&(a, b)| a < end && offset < b) {
            return Ok(());
        }
        Err(match self.kind {
            io::ErrorKind::Other => io::Error::from_raw_os_error(libc::EIO),
            k => io::Error::new(k, "injected"),
        })
    }
    fn reset_done(&self, zone: u64) {
        self.bad.lock().unwrap().retain(|&(a, _)| a / self.zone != zone);
    }
}

/// Spoil `len` bytes at `offset` of a member: its reads there fail.
fn spoil(m: &Hooked<BadSectors>, offset: u64, len: u64) {
    m.hooks.bad.lock().unwrap().push((offset, offset + len));
}

struct Rig {
    _dir: tempfile::TempDir,
    a: DvsArray,
    bad: Vec<Arc<Hooked<BadSectors>>>,
    reference: Vec<u8>,
}

fn rig(c: DvsConfig, kind: io::ErrorKind, seed: u64) -> Rig {
    let dir = scratch();
    let bad: Vec<Arc<Hooked<BadSectors>>> = files_for(dir.path(), 5, &c).into_iter().map(|f| BadSectors::wrap(f, kind)).collect();
    let mut a = DvsArray::create(bad.iter().map(|b| b.clone() as Arc<dyn ZonedMember>).collect(), c).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let reference = fill(&mut a, &mut rng, 250);
    a.flush().unwrap();
    Rig { _dir: dir, a, bad, reference }
}

/// The valid chunks on member `m`: (LSN, LCN, member byte offset).
fn chunks_on(a: &DvsArray, m: usize) -> Vec<(u32, u32, u64)> {
    let t = a.tables();
    let mut live = t.live.clone();
    live.sort_unstable();
    let mut out = Vec::new();
    for lsn in live {
        let phys = t.get(lsn).unwrap().phys;
        for lcn in t.valid_lcns(lsn) {
            if let Some((_, idx)) = t.lookup(lsn, lcn).filter(|x| x.0 == m) {
                out.push((lsn, lcn, a.geo().slot_offset(phys, idx)));
            }
        }
    }
    out
}

/// Where chunk (lsn, lcn) lies: its member and member byte offset.
fn where_is(a: &DvsArray, lsn: u32, lcn: u32) -> Option<(usize, u64)> {
    let t = a.tables();
    t.lookup(lsn, lcn).map(|(m, idx)| (m, a.geo().slot_offset(t.get(lsn).unwrap().phys, idx)))
}

/// Member `m` is active with `n` failed reads, each corrected; the
/// chunks `moved` (LSN, LCN, member offset) lie elsewhere than on their
/// bad sectors; everything reads back, and no read meets them again.
fn corrected_and_moved(r: &mut Rig, m: usize, n: u64, moved: &[(u32, u32, u64)]) {
    let i = &r.a.info().member_list[m];
    assert_eq!((i.state, i.read_errors, i.corrected_reads), (MemberState::Active, n, n));
    for &(lsn, lcn, off) in moved {
        assert_ne!(where_is(&r.a, lsn, lcn), Some((m, off)), "chunk {lcn} of SSG {lsn} was written again elsewhere");
    }
    check_all(&mut r.a, &r.reference);
    assert_eq!(r.a.info().member_list[m].read_errors, n, "no read meets the bad sectors again");
}

/// A chunk on member `m` whose stripe holds other valid chunks: (LSN,
/// LCN, member offset, and each other chunk's LCN and where it lies).
#[allow(clippy::type_complexity)]
fn chunk_with_mates(a: &DvsArray, m: usize) -> (u32, u32, u64, Vec<(u32, (usize, u64))>) {
    let t = a.tables();
    chunks_on(a, m)
        .into_iter()
        .map(|(lsn, lcn, off)| {
            let st = t.stripe_at(lsn, m, t.lookup(lsn, lcn).unwrap().1).unwrap();
            let others: Vec<(u32, (usize, u64))> = (0..st.width())
                .filter(|&d| st.lcns[d] != lcn && t.lookup(lsn, st.lcns[d]) == Some((st.members[d] as usize, st.idx[d])))
                .map(|d| (st.lcns[d], where_is(a, lsn, st.lcns[d]).unwrap()))
                .collect();
            (lsn, lcn, off, others)
        })
        .find(|x| !x.3.is_empty())
        .expect("a stripe of two valid chunks or more")
}

/// The chunks `mates` of SSG `lsn` lie elsewhere than they did: their old
/// stripe, with a column that cannot be read, protects nothing now.
fn mates_moved(a: &DvsArray, lsn: u32, mates: &[(u32, (usize, u64))]) {
    for &(l, was) in mates {
        assert_ne!(where_is(a, lsn, l), Some(was), "chunk {l}, beside the unreadable one, was written again too");
    }
}

fn chunk_bytes(r: &mut Rig, lsn: u32, lcn: u32) -> (u64, Vec<u8>) {
    let at = r.a.geo().chunk_start((lsn, lcn));
    let mut got = vec![0u8; r.a.geo().chunk as usize];
    r.a.read(at, &mut got).unwrap();
    (at, got)
}

/// A client read over a sector member 2 cannot read gets the right bytes;
/// the chunk and the rest of its stripe are written again elsewhere (so
/// the next read does not touch the bad sector, and no stripe leans on
/// it), member 2 stays active and counts one corrected read.
#[test]
fn a_sector_a_member_cannot_read_is_decoded_and_its_chunk_written_again() {
    for k in [1usize, 2] {
        let mut r = rig(cfg(k), io::ErrorKind::Other, 11 + k as u64);
        let (lsn, lcn, off, others) = chunk_with_mates(&r.a, 2);
        spoil(&r.bad[2], off + 1024, 512);
        let before = r.a.io_counters();
        let (at, got) = chunk_bytes(&mut r, lsn, lcn);
        assert_eq!(got, r.reference[at as usize..at as usize + got.len()], "k={k}: decoded from the stripe");
        let after = r.a.io_counters();
        assert!(after.writes > before.writes, "k={k}: the chunk is written again");
        let m = &r.a.info().member_list[2];
        assert_eq!((m.state, m.read_errors, m.corrected_reads), (MemberState::Active, 1, 1), "k={k}");
        assert_ne!(where_is(&r.a, lsn, lcn), Some((2, off)), "k={k}: the chunk moved off the bad sector");
        mates_moved(&r.a, lsn, &others);
        // Read again: served without an error (the chunk moved).
        let (_, again) = chunk_bytes(&mut r, lsn, lcn);
        assert_eq!(again, got);
        assert_eq!(r.a.info().member_list[2].read_errors, 1, "k={k}: nothing more failed");
        check_all(&mut r.a, &r.reference);
        let scrub = r.a.scrub_with(false, &|_, _| {}).unwrap();
        assert_eq!((scrub.mismatched, scrub.read_errors_corrected), (0, 0), "k={k}: the new stripe's parity is right: {scrub:?}");
        // The old slot is garbage: GC resets its zone, the drive's rewrite.
        while r.a.gc_step().unwrap() {}
        r.a.flush().unwrap();
        check_all(&mut r.a, &r.reference);
    }
}

/// With a write cache holding newer blocks of the chunk, what is written
/// again is the chunk's logical bytes: the newer blocks stay; and they
/// survive a reopen (the journal replayed).
#[test]
fn a_chunk_written_again_keeps_the_newer_blocks_its_cache_holds() {
    let mut r = rig(cfg_cached(1, 16), io::ErrorKind::Other, 21);
    let (lsn, lcn, off) = chunks_on(&r.a, 1)[2];
    let at = r.a.geo().chunk_start((lsn, lcn));
    let newer = vec![0x5Au8; 512];
    r.a.write(at + 2048, &newer).unwrap();
    r.reference[(at + 2048) as usize..(at + 2560) as usize].copy_from_slice(&newer);
    // The sector under the cached block, and one outside it.
    spoil(&r.bad[1], off, 512);
    let (_, got) = chunk_bytes(&mut r, lsn, lcn);
    assert_eq!(got, r.reference[at as usize..at as usize + got.len()]);
    assert_eq!(r.a.info().member_list[1].corrected_reads, 1);
    check_all(&mut r.a, &r.reference);
    r.a.flush().unwrap();
    check_all(&mut r.a, &r.reference);
}

/// A read-only open (`set_read_correction(false)`) decodes the bytes and
/// writes nothing: the chunk stays where it is, nothing counts as
/// corrected.
#[test]
fn a_read_only_open_decodes_and_writes_nothing() {
    let mut r = rig(cfg(1), io::ErrorKind::Other, 31);
    r.a.set_read_correction(false);
    let (lsn, lcn, off) = chunks_on(&r.a, 0)[1];
    spoil(&r.bad[0], off, 4096);
    let before = r.a.io_counters();
    let (at, got) = chunk_bytes(&mut r, lsn, lcn);
    assert_eq!(got, r.reference[at as usize..at as usize + got.len()]);
    assert_eq!(r.a.io_counters().writes, before.writes, "nothing written");
    let m = &r.a.info().member_list[0];
    assert_eq!((m.state, m.read_errors, m.corrected_reads), (MemberState::Active, 1, 0));
    assert_eq!(r.a.tables().lookup(lsn, lcn).map(|x| x.0), Some(0), "the chunk stays");
    // A scrub too: the column decoded for the check, nothing written.
    let rep = r.a.scrub_with(false, &|_, _| {}).unwrap();
    assert_eq!((rep.mismatched, rep.read_errors_corrected, rep.rewritten_chunks), (0, 0, 0), "{rep:?}");
    assert_eq!(r.a.io_counters().writes, before.writes, "nothing written");
    assert_eq!(r.a.info().member_list[0].read_errors, 2);
}

/// A member that cannot be reached (a timeout, not a bad sector) is failed
/// at once, as md fails it; the read is served from the others.
#[test]
fn a_member_that_times_out_is_failed_and_the_read_served_degraded() {
    let mut r = rig(cfg(1), io::ErrorKind::TimedOut, 41);
    let (lsn, lcn, off) = chunks_on(&r.a, 3)[0];
    spoil(&r.bad[3], off, 512);
    let (at, got) = chunk_bytes(&mut r, lsn, lcn);
    assert_eq!(got, r.reference[at as usize..at as usize + got.len()]);
    assert_eq!(r.a.info().member_list[3].state, MemberState::Failed);
    assert_eq!(r.a.info().member_list[3].corrected_reads, 0);
    check_all(&mut r.a, &r.reference);
}

/// With member 0 failed (k = 1), a sector member 1 cannot read under a
/// stripe that spans both has no other copy: that read fails naming both
/// causes, and the array goes on serving everything else.
#[test]
fn bytes_no_other_member_can_rebuild_fail_that_read_alone() {
    let mut r = rig(cfg(1), io::ErrorKind::Other, 51);
    r.a.fail(0).unwrap();
    let (lsn, lcn, off) = chunks_on(&r.a, 1)[0];
    spoil(&r.bad[1], off, 512);
    let at = r.a.geo().chunk_start((lsn, lcn));
    let mut got = vec![0u8; r.a.geo().chunk as usize];
    let e = r.a.read(at, &mut got).unwrap_err().to_string();
    assert!(e.contains("member 1") && e.contains("cannot rebuild"), "{e}");
    assert!(r.a.stopped().is_none(), "the array keeps serving");
    assert_eq!(r.a.info().member_list[1].state, MemberState::Active);
    r.bad[1].hooks.bad.lock().unwrap().clear();
    check_all(&mut r.a, &r.reference);
}

/// Past MAX_CORRECTED corrections (md's max_read_errors) the member is
/// failed; every read still returns the right bytes.
#[test]
fn too_many_corrected_reads_fail_the_member() {
    let mut r = rig(cfg(1), io::ErrorKind::Other, 61);
    for i in 0..=MAX_CORRECTED {
        assert_eq!(r.a.info().member_list[4].state, MemberState::Active, "after {i} corrections");
        // A chunk on member 4 away from the sectors spoiled so far (a
        // chunk written again, or moved by GC, lies elsewhere).
        let spoiled = r.bad[4].hooks.bad.lock().unwrap().clone();
        let (lsn, lcn, off) = chunks_on(&r.a, 4).into_iter().find(|&(_, _, o)| spoiled.iter().all(|&(a, b)| b <= o || o + 4096 <= a)).expect("a chunk left on member 4");
        spoil(&r.bad[4], off, 512);
        let (at, got) = chunk_bytes(&mut r, lsn, lcn);
        assert_eq!(got, r.reference[at as usize..at as usize + got.len()]);
    }
    let m = &r.a.info().member_list[4];
    assert_eq!((m.state, m.corrected_reads), (MemberState::Failed, MAX_CORRECTED + 1));
    check_all(&mut r.a, &r.reference);
}

/// A scrub decodes the columns a member cannot read (a data column of
/// one stripe, the parity column of another), writes their chunks again
/// and counts them; the members stay in service and the next scrub reads
/// everything.
#[test]
fn a_scrub_writes_again_what_a_member_cannot_read() {
    let mut r = rig(cfg(1), io::ErrorKind::Other, 71);
    let t = r.a.tables();
    let mut whole: Vec<(u32, mosaic_dvs::tables::Stripe)> = Vec::new();
    for &l in &t.live {
        for st in &t.get(l).unwrap().sit {
            if st.width() >= 2 && (0..st.width()).all(|c| t.lookup(l, st.lcns[c]) == Some((st.members[c] as usize, st.idx[c]))) {
                whole.push((l, st.clone()));
            }
        }
    }
    assert!(whole.len() >= 2, "two stripes whose chunks are all valid");
    let ((l1, s1), (l2, s2)) = (whole[0].clone(), whole[1].clone());
    let slot = |l: u32, st: &mosaic_dvs::tables::Stripe, c: usize| r.a.geo().slot_offset(t.get(l).unwrap().phys, st.idx[c]);
    let (dm, doff) = (s1.members[0] as usize, slot(l1, &s1, 0));
    let (pm, poff) = (s2.members[s2.width()] as usize, slot(l2, &s2, s2.width()));
    let s1_at: Vec<(usize, u64)> = (0..s1.width()).map(|c| (s1.members[c] as usize, slot(l1, &s1, c))).collect();
    let s2_at: Vec<(usize, u64)> = (0..s2.width()).map(|c| (s2.members[c] as usize, slot(l2, &s2, c))).collect();
    spoil(&r.bad[dm], doff + 512, 512);
    spoil(&r.bad[pm], poff, 512);
    let rep = r.a.scrub_with(false, &|_, _| {}).unwrap();
    assert_eq!((rep.mismatched, rep.read_errors_corrected, rep.rewritten_chunks), (0, 2, (s1.width() + s2.width()) as u64), "every chunk of both stripes: {rep:?}");
    for m in [dm, pm] {
        let i = &r.a.info().member_list[m];
        assert_eq!(i.state, MemberState::Active);
        assert_eq!((i.read_errors, i.corrected_reads), (1 + (dm == pm) as u64, 1 + (dm == pm) as u64));
    }
    for (l, st, was) in [(l1, &s1, s1_at), (l2, &s2, s2_at)] {
        for (c, at) in was.into_iter().enumerate() {
            assert_ne!(where_is(&r.a, l, st.lcns[c]), Some(at), "every chunk of a stripe with an unreadable column re-striped");
        }
    }
    let again = r.a.scrub_with(false, &|_, _| {}).unwrap();
    assert_eq!((again.mismatched, again.read_errors_corrected, again.rewritten_chunks), (0, 0, 0), "{again:?}");
    check_all(&mut r.a, &r.reference);
    while r.a.gc_step().unwrap() {}
    check_all(&mut r.a, &r.reference);
}

/// A destage whose fill (the old chunk under a partial write) sits on a
/// sector its member cannot read: the destager lowers the job again with
/// the fill decoded from its stripe, the write lands, the member stays
/// and counts one corrected read, and the fill's old stripe-mates are
/// written again (nothing leans on the bad column).  Write-through and
/// with a write cache.
#[test]
fn a_destage_decodes_a_fill_its_member_cannot_read() {
    for c in [cfg(1), cfg_cached(1, 16), cfg(2)] {
        let cached = c.cache_chunks > 0;
        let mut r = rig(c, io::ErrorKind::Other, 81);
        let (lsn, lcn, off, mates) = chunk_with_mates(&r.a, 3);
        spoil(&r.bad[3], off + 2048, 512);
        let at = r.a.geo().chunk_start((lsn, lcn)) + 512;
        let data = vec![0xC3u8; 512];
        r.a.write(at, &data).unwrap();
        r.reference[at as usize..at as usize + 512].copy_from_slice(&data);
        r.a.flush().unwrap();
        assert!(r.a.stopped().is_none(), "cached={cached}: {:?}", r.a.stopped());
        mates_moved(&r.a, lsn, &mates);
        corrected_and_moved(&mut r, 3, 1, &[(lsn, lcn, off)]);
    }
}

/// Garbage collection moving chunks one of which its member cannot read
/// (one spoiled chunk in every SSG): each is decoded, written to the new
/// segment, and the array goes on; every bad sector is met once.
#[test]
fn garbage_collection_decodes_chunks_their_member_cannot_read() {
    let mut r = rig(cfg(1), io::ErrorKind::Other, 91);
    // Overwrites leave garbage for GC to collect.
    let mut rng = ChaCha8Rng::seed_from_u64(92);
    more_writes(&mut r.a, &mut rng, &mut r.reference, 150);
    r.a.flush().unwrap();
    let mut spoiled = 0;
    let mut seen_ssg = std::collections::BTreeSet::new();
    for (lsn, _, off) in chunks_on(&r.a, 1) {
        if seen_ssg.insert(lsn) {
            spoil(&r.bad[1], off, 512);
            spoiled += 1;
        }
    }
    let mut steps = 0;
    while r.a.gc_step().unwrap() {
        steps += 1;
    }
    r.a.flush().unwrap();
    assert!(steps > 0 && r.a.stopped().is_none(), "{steps} GC steps: {:?}", r.a.stopped());
    let gc_found = r.a.info().member_list[1].read_errors;
    assert!(gc_found > 0, "GC read a spoiled chunk");
    check_all(&mut r.a, &r.reference);
    let m = &r.a.info().member_list[1];
    assert_eq!((m.state, m.read_errors, m.corrected_reads), (MemberState::Active, spoiled, spoiled), "{gc_found} met by GC");
}

/// A rebuild whose source cannot read a sector: with k = 2 and one member
/// rebuilt the code spares a column, so the slot is decoded from the
/// others and the rebuild goes on (the source's read counted).
#[test]
fn a_rebuild_decodes_past_a_source_it_cannot_read_while_the_code_spares_a_column() {
    {
        let k = 2;
        let mut r = rig(cfg(k), io::ErrorKind::Other, 101 + k as u64);
        r.a.fail(0).unwrap();
        let (_, _, off) = chunks_on(&r.a, 2)[2];
        spoil(&r.bad[2], off, 512);
        let c = r.a.geo().cfg.clone();
        let new = mosaic_dev::zoned::ZonedFile::create(&r._dir.path().join("new0"), c.zone_size, c.zones, c.conventional).unwrap();
        r.a.replace(0, Arc::new(new)).unwrap();
        r.a.rebuild(&|_, _| {}, None).unwrap();
        let m = &r.a.info().member_list[2];
        assert_eq!((m.state, m.read_errors), (MemberState::Active, 1));
        assert_eq!(r.a.info().member_list[0].state, MemberState::Active);
        // The new member holds its columns: lose two others, read it all.
        r.bad[2].hooks.bad.lock().unwrap().clear();
        r.a.fail(3).unwrap();
        r.a.fail(4).unwrap();
        check_all(&mut r.a, &r.reference);
    }
}

/// `lost` is what `a` has lost: a read of each range fails, saying so,
/// and every byte between them reads as `reference` has it.
fn reads_around(a: &mut DvsArray, reference: &[u8], lost: &[LostRange]) {
    for l in lost {
        let e = a.read(l.offset, &mut vec![0u8; l.len as usize]).unwrap_err().to_string();
        assert!(e.contains("were lost") && e.contains("write them again"), "{e}");
    }
    let mut at = 0u64;
    for l in lost.iter().copied().chain([LostRange { offset: reference.len() as u64, len: 0 }]) {
        let mut got = vec![0u8; (l.offset - at) as usize];
        a.read(at, &mut got).unwrap();
        assert!(got[..] == reference[at as usize..l.offset as usize], "bytes {at}..{} read wrong", l.offset);
        at = l.end();
    }
}

/// The classic RAID-5 loss set up (k = 1): member 0 failed, and member 2
/// unable to read the second block of a chunk whose stripe has a valid
/// data chunk on member 0: (rig, SSG, that chunk's LCN, member 0's LCN).
fn k1_loss() -> (Rig, u32, u32, u32) {
    let mut r = rig(cfg(1), io::ErrorKind::Other, 102);
    r.a.fail(0).unwrap();
    let blk = r.a.geo().block;
    let t = r.a.tables();
    let (lsn, lcn, off, mate) = chunks_on(&r.a, 2)
        .into_iter()
        .find_map(|(lsn, lcn, off)| {
            let st = t.stripe_at(lsn, 2, t.lookup(lsn, lcn)?.1)?;
            let c0 = st.col_of(0).filter(|&c| c < st.width())?;
            (t.lookup(lsn, st.lcns[c0]) == Some((0, st.idx[c0]))).then_some((lsn, lcn, off, st.lcns[c0]))
        })
        .expect("a stripe over members 0 and 2");
    spoil(&r.bad[2], off + blk, blk);
    (r, lsn, lcn, mate)
}

/// A k = 1 rebuild whose source cannot read a sector (the classic RAID-5
/// loss in a rebuild, array/lost.rs): the rebuild goes on, the block of
/// the unreadable chunk and the same block of the rebuilt member's chunk
/// in that stripe are recorded lost (exactly those), reads of them fail
/// and every other byte reads right, the stripe's chunks are written
/// again, the record survives a reopen, and writing the blocks whole
/// clears it.
#[test]
fn a_k1_rebuild_sets_aside_what_a_source_cannot_read_and_goes_on() {
    let (mut r, lsn, lcn, mate) = k1_loss();
    let blk = r.a.geo().block;
    let off = where_is(&r.a, lsn, lcn).unwrap().1;
    let geo = r.a.geo().clone();
    let want = vec![
        LostRange { offset: geo.chunk_start((lsn, lcn)) + blk, len: blk },
        LostRange { offset: geo.chunk_start((lsn, mate)) + blk, len: blk },
    ];
    let mut want = mosaic_format::lost::with(&[], &want);
    want.sort_by_key(|x| x.offset);
    let c = geo.cfg.clone();
    let new = mosaic_dev::zoned::ZonedFile::create(&r._dir.path().join("new0"), c.zone_size, c.zones, c.conventional).unwrap();
    r.a.replace(0, Arc::new(new)).unwrap();
    let rep = r.a.rebuild(&|_, _| {}, None).unwrap();
    assert_eq!(rep.lost_bytes, 2 * blk);
    assert_eq!(r.a.lost(), &want[..]);
    assert!(r.a.info().member_list.iter().all(|m| m.state == MemberState::Active));
    assert_eq!(where_is(&r.a, lsn, lcn).map(|w| w.1 == off), Some(false), "the stripe's chunks were written again");
    reads_around(&mut r.a, &r.reference, &want);
    r.a.flush().unwrap();
    let Rig { _dir: dir, a, mut reference, .. } = r;
    drop(a);
    let mut devs: Vec<Arc<dyn ZonedMember>> = (1..5).map(|i| Arc::new(mosaic_dev::zoned::ZonedFile::open(&dir.path().join(format!("m{i}"))).unwrap()) as Arc<dyn ZonedMember>).collect();
    devs.push(Arc::new(mosaic_dev::zoned::ZonedFile::open(&dir.path().join("new0")).unwrap()));
    let mut b = DvsArray::open(devs).unwrap();
    assert_eq!(b.lost(), &want[..], "kept in the labels");
    reads_around(&mut b, &reference, &want);
    for l in &want {
        let data = vec![0x5a; l.len as usize];
        b.write(l.offset, &data).unwrap();
        reference[l.offset as usize..l.end() as usize].copy_from_slice(&data);
    }
    assert!(b.lost().is_empty());
    check_all(&mut b, &reference);
    assert_eq!(b.scrub().unwrap(), 0);
}

/// The same loss, the rebuilt member's chunk discarded by a client just
/// before: the discard is in memory only and the next open maps the
/// chunk to its slot again, so its block is recorded lost all the same,
/// and reads it as lost after the reopen, never as what the rebuild left
/// there.
#[test]
fn a_k1_rebuild_records_lost_a_discarded_chunk_the_next_open_maps_again() {
    let (mut r, lsn, lcn, mate) = k1_loss();
    let blk = r.a.geo().block;
    let geo = r.a.geo().clone();
    let at = geo.chunk_start((lsn, mate));
    assert_eq!(r.a.discard(at, geo.chunk).unwrap(), 1);
    let c = geo.cfg.clone();
    let new = mosaic_dev::zoned::ZonedFile::create(&r._dir.path().join("new0"), c.zone_size, c.zones, c.conventional).unwrap();
    r.a.replace(0, Arc::new(new)).unwrap();
    let rep = r.a.rebuild(&|_, _| {}, None).unwrap();
    let mut want = mosaic_format::lost::with(&[], &[LostRange { offset: geo.chunk_start((lsn, lcn)) + blk, len: blk }, LostRange { offset: at + blk, len: blk }]);
    want.sort_by_key(|x| x.offset);
    assert_eq!((rep.lost_bytes, r.a.lost()), (2 * blk, &want[..]), "the discarded chunk's block is on record too");
    r.a.flush().unwrap();
    let Rig { _dir: dir, a, .. } = r;
    drop(a);
    let mut devs: Vec<Arc<dyn ZonedMember>> = (1..5).map(|i| Arc::new(mosaic_dev::zoned::ZonedFile::open(&dir.path().join(format!("m{i}"))).unwrap()) as Arc<dyn ZonedMember>).collect();
    devs.push(Arc::new(mosaic_dev::zoned::ZonedFile::open(&dir.path().join("new0")).unwrap()));
    let mut b = DvsArray::open(devs).unwrap();
    assert_eq!(b.holes(at, geo.chunk).unwrap()[0].1, false, "mapped again by the open");
    let e = b.read(at + blk, &mut vec![0u8; blk as usize]).unwrap_err().to_string();
    assert!(e.contains("were lost"), "{e}");
}

/// k = 2.  Rebuilding one member while two others each cannot read a
/// different block of one stripe: every block has two unknowns, within
/// the code, so the run rebuilt slot by slot decodes them all and nothing
/// is lost.  Rebuilding two while a third cannot read a block of a stripe
/// over all three: that block has three unknowns and is lost, each valid
/// data chunk's of those columns, exactly; the rest reads right.
#[test]
fn a_k2_rebuild_loses_only_blocks_with_more_unknowns_than_the_code() {
    for two in [false, true] {
        let mut r = rig(cfg(2), io::ErrorKind::Other, 103);
        let blk = r.a.geo().block;
        let geo = r.a.geo().clone();
        let t = r.a.tables();
        let (lsn, lcn, off, st) = chunks_on(&r.a, 2)
            .into_iter()
            .map(|(lsn, lcn, off)| (lsn, lcn, off, t.stripe_at(lsn, 2, t.lookup(lsn, lcn).unwrap().1).unwrap().clone()))
            .find(|x| [0, 1, 3].iter().all(|&m| x.3.col_of(m).is_some()))
            .expect("a stripe over members 0 to 3");
        let valid_on = |m: usize| st.col_of(m).filter(|&c| c < st.width() && t.lookup(lsn, st.lcns[c]) == Some((m, st.idx[c]))).map(|c| st.lcns[c]);
        let want = if two {
            let lost = [Some(lcn), valid_on(0), valid_on(1)].into_iter().flatten().map(|l| LostRange { offset: geo.chunk_start((lsn, l)) + blk, len: blk });
            mosaic_format::lost::with(&[], &lost.collect::<Vec<_>>())
        } else {
            Vec::new()
        };
        let off3 = geo.slot_offset(t.get(lsn).unwrap().phys, st.idx[st.col_of(3).unwrap()]);
        spoil(&r.bad[2], off + blk, blk);
        if !two {
            spoil(&r.bad[3], off3 + 2 * blk, blk);
        }
        let out: &[usize] = if two { &[0, 1] } else { &[0] };
        let c = geo.cfg.clone();
        for &m in out {
            r.a.fail(m).unwrap();
        }
        for &m in out {
            let new = mosaic_dev::zoned::ZonedFile::create(&r._dir.path().join(format!("new{m}")), c.zone_size, c.zones, c.conventional).unwrap();
            r.a.replace(m, Arc::new(new)).unwrap();
        }
        let rep = r.a.rebuild(&|_, _| {}, None).unwrap();
        assert_eq!(r.a.lost(), &want[..], "two={two}");
        assert_eq!(rep.lost_bytes, want.iter().map(|l| l.len).sum::<u64>());
        assert!(r.a.info().member_list.iter().all(|m| m.state == MemberState::Active));
        reads_around(&mut r.a, &r.reference, &want);
        if !two {
            // What was rebuilt is right: with the spoiled members lost
            // too, the new member and the others read everything.
            r.bad[2].hooks.bad.lock().unwrap().clear();
            r.bad[3].hooks.bad.lock().unwrap().clear();
            r.a.fail(3).unwrap();
            r.a.fail(4).unwrap();
            check_all(&mut r.a, &r.reference);
        }
    }
}

/// A degraded k = 1 array (member 0 out) whose destage meets a block of
/// member 2 it cannot read, in a stripe over member 0: nothing can decode
/// it, so it is set aside (array/failing.rs, array/lost.rs).  The
/// client's write and flush go on; exactly that block of the chunk and of
/// its stripe-mate on the missing member (when that holds data) are lost;
/// every other byte reads right, the write included; the record survives
/// a reopen.  Written through and cached.
#[test]
fn a_degraded_destage_sets_aside_what_nothing_can_read_and_goes_on() {
    for cached in [false, true] {
        let c = if cached { cfg_cached(1, 16) } else { cfg(1) };
        let mut r = rig(c, io::ErrorKind::Other, 104);
        r.a.fail(0).unwrap();
        let geo = r.a.geo().clone();
        let blk = geo.block;
        let t = r.a.tables();
        let (lsn, lcn, off, mate) = chunks_on(&r.a, 2)
            .into_iter()
            .find_map(|(lsn, lcn, off)| {
                let st = t.stripe_at(lsn, 2, t.lookup(lsn, lcn)?.1)?;
                let c0 = st.col_of(0)?;
                let mate = (c0 < st.width() && t.lookup(lsn, st.lcns[c0]) == Some((0, st.idx[c0]))).then(|| st.lcns[c0]);
                Some((lsn, lcn, off, mate))
            })
            .expect("a stripe over members 0 and 2");
        spoil(&r.bad[2], off + blk, blk);
        let want: Vec<LostRange> = [Some(lcn), mate].into_iter().flatten().map(|l| LostRange { offset: geo.chunk_start((lsn, l)) + blk, len: blk }).collect();
        let want = mosaic_format::lost::with(&[], &want);
        // A write into another block of that chunk: its destage fills the rest.
        let at = geo.chunk_start((lsn, lcn)) + 3 * blk;
        let data = vec![0x77u8; blk as usize];
        r.a.write(at, &data).unwrap();
        r.a.flush().unwrap();
        r.reference[at as usize..(at + blk) as usize].copy_from_slice(&data);
        assert_eq!(r.a.stopped(), None, "cached={cached}");
        assert_eq!(r.a.lost(), &want[..], "cached={cached}");
        assert!(r.a.warnings().iter().any(|w| w.contains("bytes lost")), "{:?}", r.a.warnings());
        let states: Vec<MemberState> = r.a.info().member_list.iter().map(|m| m.state).collect();
        assert_eq!(states, [MemberState::Failed, MemberState::Active, MemberState::Active, MemberState::Active, MemberState::Active]);
        reads_around(&mut r.a, &r.reference, &want);
        // More writes and a flush: nothing meets those sectors again.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let Rig { _dir: dir, mut a, mut reference, .. } = r;
        let lost_now = a.lost().to_vec();
        more_writes(&mut a, &mut rng, &mut reference, 100);
        a.flush().unwrap();
        assert_eq!(a.stopped(), None);
        // Writes may have covered lost blocks whole: what is left is a part of what was.
        assert!(a.lost().iter().all(|l| lost_now.iter().any(|w| w.offset <= l.offset && l.end() <= w.end())));
        let left = a.lost().to_vec();
        drop(a);
        let devs: Vec<Arc<dyn ZonedMember>> = (1..5).map(|i| Arc::new(mosaic_dev::zoned::ZonedFile::open(&dir.path().join(format!("m{i}"))).unwrap()) as Arc<dyn ZonedMember>).collect();
        let mut b = DvsArray::open(devs).unwrap();
        assert_eq!(b.lost(), &left[..], "cached={cached}: kept in the labels");
        reads_around(&mut b, &reference, &left);
    }
}

/// One read over the whole array meets two unreadable chunks of the same
/// member (two of its reads fail in one program): both are decoded, both
/// stripes written again, the member kept with two corrected reads.
#[test]
fn two_failed_reads_of_one_member_in_one_request_are_both_corrected() {
    let mut r = rig(cfg(1), io::ErrorKind::Other, 111);
    let on = chunks_on(&r.a, 2);
    let (first, last) = (on[1], on[on.len() - 2]);
    spoil(&r.bad[2], first.2, 512);
    spoil(&r.bad[2], last.2 + 1024, 512);
    let mut all = vec![0u8; r.reference.len()];
    r.a.read(0, &mut all).unwrap();
    assert!(all == r.reference);
    corrected_and_moved(&mut r, 2, 2, &[first, last]);
}

/// A hot replace whose old drive cannot read a chunk: the copy decodes
/// that chunk's slot from the other members onto the new drive (md's
/// replace rebuilds what the old drive cannot read) and goes on; after
/// the switch the new drive holds the right bytes (another member lost,
/// everything reads).
#[test]
fn a_hot_replace_decodes_what_the_old_drive_cannot_read() {
    let mut r = rig(cfg(1), io::ErrorKind::Other, 121);
    let (_, _, off) = chunks_on(&r.a, 1)[4];
    spoil(&r.bad[1], off + 512, 1024);
    let c = r.a.geo().cfg.clone();
    let new = mosaic_dev::zoned::ZonedFile::create(&r._dir.path().join("new1"), c.zone_size, c.zones, c.conventional).unwrap();
    r.a.hot_start(1, Arc::new(new)).unwrap();
    loop {
        let p = r.a.hot_step(1).unwrap();
        if p.done == p.total {
            break;
        }
    }
    let m = &r.a.info().member_list[1];
    assert_eq!((m.state, m.read_errors, m.corrected_reads), (MemberState::Active, 1, 1));
    r.a.hot_switch().unwrap();
    assert_eq!(r.a.info().member_list[1].read_errors, 0, "a new drive counts from nothing");
    r.a.fail(3).unwrap();
    check_all(&mut r.a, &r.reference);
}

/// Open with one member's copy of the metadata (checkpoints, log) or of
/// the journal unreadable: the others' copies are used, the open says so,
/// and every acknowledged byte reads back (the journal's records from the
/// lane's other member).
#[test]
fn an_open_reads_metadata_and_journal_a_member_cannot_read_from_the_others() {
    for journal in [false, true] {
        let c = if journal { cfg_cached(1, 16) } else { cfg(1) };
        let mut r = rig(c.clone(), io::ErrorKind::Other, 131);
        let mut rng = ChaCha8Rng::seed_from_u64(132);
        // Left in the journal (no flush) when it is the journal's turn.
        more_writes(&mut r.a, &mut rng, &mut r.reference, 30);
        let ml = mosaic_dvs::meta::MetaLayout::new(&mosaic_dvs::Geo::new(c.clone()).unwrap()).unwrap();
        let Rig { _dir, a, bad, reference } = r;
        drop(a);
        match journal {
            false => {
                spoil(&bad[2], ml.slot_offset(0), 512);
                spoil(&bad[2], ml.log_start, 512);
            }
            true => spoil(&bad[0], ml.journal_start, ml.journal_end - ml.journal_start),
        }
        let mut b = DvsArray::open(bad.iter().map(|d| d.clone() as Arc<dyn ZonedMember>).collect()).unwrap();
        let said = |what: &str| b.warnings().iter().any(|w| w.contains(what));
        assert!(if journal { said("journal: member 0's copy cannot be read") } else { said("member 2: its copy of the metadata cannot be read") }, "{:?}", b.warnings());
        assert!(b.info().member_list.iter().all(|m| m.state == MemberState::Active));
        check_all(&mut b, &reference);
    }
}

/// A journal lane neither of whose members can be read holds acknowledged
/// writes nothing else has: the open refuses, saying so, rather than come
/// up without them.
#[test]
fn an_open_refuses_a_journal_lane_no_member_can_read() {
    let c = cfg_cached(1, 16);
    let mut r = rig(c.clone(), io::ErrorKind::Other, 141);
    let mut rng = ChaCha8Rng::seed_from_u64(142);
    more_writes(&mut r.a, &mut rng, &mut r.reference, 30);
    let ml = mosaic_dvs::meta::MetaLayout::new(&mosaic_dvs::Geo::new(c).unwrap()).unwrap();
    let Rig { _dir, a, bad, .. } = r;
    drop(a);
    for m in [0, 1] {
        spoil(&bad[m], ml.journal_start, ml.journal_end - ml.journal_start);
    }
    let e = DvsArray::open(bad.iter().map(|d| d.clone() as Arc<dyn ZonedMember>).collect()).err().expect("refused").to_string();
    assert!(e.contains("journal: no member of lane 0 can be read"), "{e}");
}

/// The messages of what cannot be corrected: a scrub meeting two columns
/// of one stripe it cannot read with k = 1, and a read whose member times
/// out while another is failed already (failing it too is refused).
#[test]
fn what_cannot_be_corrected_says_why() {
    let mut r = rig(cfg(1), io::ErrorKind::Other, 151);
    let (lsn, _, off, mates) = chunk_with_mates(&r.a, 2);
    let phys = r.a.tables().get(lsn).unwrap().phys;
    let (m2, off2) = mates[0].1;
    spoil(&r.bad[2], off, 512);
    spoil(&r.bad[m2], off2, 512);
    let e = r.a.scrub_with(false, &|_, _| {}).unwrap_err().to_string();
    assert!(e.contains("the stripe's other columns cannot rebuild them (k = 1)"), "{e}");
    assert!(r.a.tables().get(lsn).is_some_and(|s| s.phys == phys));

    let mut r = rig(cfg(1), io::ErrorKind::TimedOut, 152);
    r.a.fail(0).unwrap();
    let (lsn, lcn, off) = chunks_on(&r.a, 1)[0];
    spoil(&r.bad[1], off, 512);
    let e = r.a.read(r.a.geo().chunk_start((lsn, lcn)), &mut vec![0u8; 512]).unwrap_err().to_string();
    assert!(e.contains("failing member 1 refused") && e.contains("already out"), "{e}");
    assert_eq!(r.a.info().member_list[1].state, MemberState::Active);
}
