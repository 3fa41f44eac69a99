//! A cache volume meeting an unplanned member failure, over CBRO and
//! raid5: a read that meets it, a flush that cannot be planned, a
//! write-through volume's stop, and the replay of a CBRO array's journal.
//! Each case names what an audit found before its fix: old bytes of an
//! acknowledged write, or bytes never written, returned without an error.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_array::{Array, CacheVolume, CreateOptions, DATA_OFFSET};
use mosaic_core::{CacheConfig, CachePolicy, Level};
use mosaic_dev::{FaultyMember, MemMember, Member};

const U: u64 = 4096;
const STRIPES: u64 = 24;
const CBRO: Level = Level::Cbro { n: 4, k: 1, w: 1 };
const CODE_KEPT: [CachePolicy; 3] = [CachePolicy::Fpc, CachePolicy::Ppc, CachePolicy::PpcData];

struct Rig {
    mems: Vec<Arc<MemMember>>,
    faulty: Vec<Arc<FaultyMember>>,
    journal: Option<Arc<MemMember>>,
}

impl Rig {
    /// The members as they are now, without `skip`.
    fn members(&self, skip: Option<usize>) -> Vec<Arc<dyn Member>> {
        self.mems.iter().enumerate().filter(|(i, _)| Some(*i) != skip).map(|(_, m)| m.clone() as Arc<dyn Member>).collect()
    }
}

/// `level` on five members of `STRIPES` units of `unit` bytes, each
/// behind a FaultyMember; a RAM journal when `journal`; a cache of
/// `policy` with a write cache of `wc` pages.
fn volume(level: Level, unit: u64, policy: CachePolicy, journal: bool, wc: u64) -> (Rig, CacheVolume) {
    let mems: Vec<Arc<MemMember>> = (0..5).map(|i| Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + unit * STRIPES))).collect();
    let faulty: Vec<Arc<FaultyMember>> = mems.iter().map(|m| Arc::new(FaultyMember::new(m.clone() as Arc<dyn Member>))).collect();
    let jdev = journal.then(|| Arc::new(MemMember::new("journal", 16 << 20)));
    let members = faulty.iter().enumerate().map(|(i, f)| (f.clone() as Arc<dyn Member>, format!("m{i}"))).collect();
    let o = CreateOptions { level, members: Some(5), member_size: None, unit, block: 4096, force: true, assume_clean: true };
    let arr = Array::create_with_journal(members, &o, true, jdev.as_ref().map(|j| (j.clone() as Arc<dyn Member>, "journal".to_string()))).unwrap();
    let v = CacheVolume::new(arr, CacheConfig { policy, write_cache: wc * unit, parity_cache: 3 * unit, old_data: 6 * unit }).unwrap();
    (Rig { mems, faulty, journal: jdev }, v)
}

/// A data drive fails during a read of a page whose row's code only the
/// cache holds.  The array retried the read degraded, from the stale code
/// on the drives, and the volume returned those bytes: zeros for the
/// acknowledged 0xAA.  Now the volume reads again, planned degraded
/// (the row's code written out first).
#[test]
fn a_read_that_meets_a_failure_never_rebuilds_from_stale_code() {
    for level in [CBRO, Level::Raid5] {
        for policy in CODE_KEPT {
            let (rig, v) = volume(level, U, policy, true, 1);
            let a = vec![0xAAu8; U as usize];
            v.write(0, &a).unwrap();
            // Another row's page: destages page 0, its row's code stays cached.
            v.write(v.array().geometry().stripe_data_bytes(), &[0xBBu8; U as usize]).unwrap();
            let victim = v.array().geometry().member_of(0, 0);
            rig.faulty[victim].break_now();
            let mut b = vec![0u8; U as usize];
            if v.read(0, &mut b).is_ok() {
                assert!(b == a, "{level} {policy:?}: an acknowledged page read back as {:02x?}..", &b[..4]);
            }
        }
    }
}

/// The same failure met by a partial-page write's fill (16 KiB units, a
/// 4 KiB write): the wrong bytes used to be cached as part of the write
/// and acknowledged, so they outlived a reopen.
#[test]
fn a_fill_that_meets_a_failure_never_takes_stale_bytes() {
    const P: u64 = 16 << 10;
    for policy in CODE_KEPT {
        let (rig, v) = volume(CBRO, P, policy, true, 1);
        let a = vec![0xAAu8; P as usize];
        v.write(0, &a).unwrap();
        v.write(4 * P, &[0xBBu8; P as usize]).unwrap();
        rig.faulty[0].break_now();
        let w = v.write(4096, &[0xCCu8; 4096]);
        let mut want = a.clone();
        want[4096..8192].fill(0xCC);
        let mut b = vec![0u8; P as usize];
        if w.is_ok() && v.read(0, &mut b).is_ok() {
            assert!(b == want, "{policy:?}: an acknowledged 4 KiB write changed the bytes around it");
        }
    }
}

/// A sync whose flush of a row cannot be planned (its partial parity
/// needs a unit of the failed member): the volume used to report the error
/// and serve on, reading bytes never written, and its close emptied the
/// journal.  It stops now; opened again, the journal's replay (or, write-
/// through, the units recorded lost at the stop) reads right or names the
/// unit lost, never wrong bytes.
#[test]
fn a_flush_that_cannot_be_planned_stops_the_volume() {
    for (policy, journal) in [CachePolicy::Ppc, CachePolicy::PpcData].into_iter().flat_map(|p| [(p, true), (p, false)]) {
        let what = format!("{policy:?} journal={journal}");
        let (rig, v) = volume(CBRO, U, policy, journal, 2);
        let mut d = vec![0x11u8; 2 * U as usize];
        d[U as usize..].fill(0x33);
        v.write(U, &d).unwrap();
        v.write(4 * U, &[0x22u8; U as usize]).unwrap();
        rig.faulty[0].break_now();
        let mut b = vec![0u8; U as usize];
        let _ = v.read(8 * U, &mut b);
        if v.sync().is_err() {
            assert!(v.stopped().is_some(), "{what}: a failed sync left the volume serving");
            assert!(v.read(0, &mut b).is_err(), "{what}: a stopped volume served a read");
        }
        if v.read(0, &mut b).is_ok() {
            assert!(b == vec![0u8; U as usize], "{what}: page 0 (never written) read as {:02x?}..", &b[..4]);
        }
        let stopped = v.stopped().is_some();
        drop(v);
        let arr = Array::open_members_with_journal(rig.members(Some(0)), true, rig.journal.clone().map(|j| j as Arc<dyn Member>)).unwrap();
        match arr.read(0, &mut b) {
            Ok(()) => assert!(b == vec![0u8; U as usize], "{what}: reopened, page 0 (never written) read as {:02x?}..", &b[..4]),
            Err(e) => assert!(stopped && e.to_string().contains("were lost"), "{what}: {e}"),
        }
        let mut got = vec![0u8; 2 * U as usize];
        arr.read(U, &mut got).unwrap();
        assert!(got == d, "{what}: reopened, the acknowledged pages 1 and 2");
    }
}

/// Write-through (no journal), a drive failing during a destage: the
/// volume stops, and the rows whose code only the cache held keep stale
/// code.  Opened again without the drive, a page of such a row that was
/// never written used to read back as other bytes; it is recorded lost
/// now, so its read fails, naming the range.
#[test]
fn a_stopped_write_through_volume_records_the_units_it_cannot_rebuild() {
    for policy in CODE_KEPT {
        let (rig, v) = volume(CBRO, U, policy, false, 16);
        assert!(!v.is_write_back());
        let bytes = |tag: u64, pages: usize| -> Vec<u8> {
            let mut r = ChaCha8Rng::seed_from_u64(tag);
            (0..pages * U as usize).map(|_| r.gen()).collect()
        };
        v.write(54 * U, &bytes(1, 1)).unwrap();
        rig.faulty[3].break_after(2);
        assert!(v.write(7 * U, &bytes(2, 3)).is_err(), "{policy:?}: the destage meets the failure");
        assert!(v.stopped().is_some());
        drop(v);
        // Stopped (not closed) without a journal and degraded: started as
        // md's start_dirty_degraded would.
        let arr = Array::open_members_with(rig.members(Some(3)), true, None, true).unwrap();
        let mut b = vec![0u8; U as usize];
        match arr.read(11 * U, &mut b) {
            Ok(()) => assert!(b == vec![0u8; U as usize], "{policy:?}: page 11 (never written) read as {:02x?}..", &b[..4]),
            Err(e) => assert!(e.to_string().contains("were lost"), "{policy:?}: {e}"),
        }
        assert!(!arr.lost().is_empty(), "{policy:?}: nothing recorded lost");
        // A page on the drives still there reads back.
        let mut p = vec![0u8; U as usize];
        arr.read(54 * U, &mut p).unwrap();
        assert!(p == bytes(1, 1), "{policy:?}: page 54");
    }
}

/// fpc caches a row's code and a sync writes it to the drives: the code
/// there is current again.  After a crash, an open without a data drive
/// rebuilds that row's unit, on CBRO as on raid5; CBRO used to name it
/// lost, its code writes (to the check drive) never seen as covering the
/// row's mark.
#[test]
fn a_cbro_replay_rebuilds_units_whose_code_was_written_again() {
    for level in [Level::Raid5, CBRO] {
        let (rig, v) = volume(level, U, CachePolicy::Fpc, true, 1);
        let geo = v.array().geometry().clone();
        v.write(0, &[0x11u8; U as usize]).unwrap();
        v.write(geo.stripe_data_bytes(), &[0x22u8; U as usize]).unwrap();
        v.sync().unwrap();
        let victim = geo.member_of(0, 1);
        std::mem::forget(v);
        let arr = Array::open_members_with_journal(rig.members(Some(victim)), true, rig.journal.clone().map(|j| j as Arc<dyn Member>)).unwrap();
        let mut b = vec![1u8; U as usize];
        arr.read(U, &mut b).unwrap_or_else(|e| panic!("{level}: {e}"));
        assert!(b == vec![0u8; U as usize], "{level}: stripe 0's unit on the missing drive");
        assert!(arr.lost().is_empty(), "{level}: {:?}", arr.lost());
    }
}
