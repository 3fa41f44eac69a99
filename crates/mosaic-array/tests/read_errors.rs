//! Read errors corrected from the other members, as md corrects them
//! (`mosaic_array::correct`): a member that cannot read a few sectors is
//! rewritten there and kept in service; one that cannot take the rewrite,
//! whose bytes nothing else can rebuild, or that errs too often, is
//! failed, as before.

use std::sync::Arc;

use mosaic_array::correct::MAX_CORRECTED;
use mosaic_array::{Array, CacheVolume, CreateOptions, DATA_OFFSET};
use mosaic_core::{CacheConfig, CachePolicy, Level, MemberState};
use mosaic_dev::{FaultyMember, MemMember, Member};

const UNIT: u64 = 16384;
const STRIPES: u64 = 16;

struct Rig {
    mems: Vec<Arc<MemMember>>,
    faulty: Vec<Arc<FaultyMember>>,
    arr: Array,
    data: Vec<u8>,
}

/// An array of `level` over `n` RAM members, each behind a
/// [`FaultyMember`], filled with a pattern.
fn rig(level: Level, n: usize) -> Rig {
    let mems: Vec<Arc<MemMember>> = (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + UNIT * STRIPES))).collect();
    let faulty: Vec<Arc<FaultyMember>> = mems.iter().map(|m| Arc::new(FaultyMember::new(m.clone() as Arc<dyn Member>))).collect();
    let members = faulty.iter().map(|f| (f.clone() as Arc<dyn Member>, f.describe())).collect();
    let o = CreateOptions { level, members: Some(n), member_size: None, unit: UNIT, block: 4096, force: true, assume_clean: true };
    let arr = Array::create_on(members, &o, true).unwrap();
    let data: Vec<u8> = (0..arr.capacity()).map(|i| (i * 7 % 251) as u8).collect();
    arr.write(0, &data).unwrap();
    Rig { mems, faulty, arr, data }
}

impl Rig {
    /// The member holding data column `col` of `stripe`, and the device
    /// offset of the 4 KiB block `block` of that unit.
    fn unit(&self, stripe: u64, col: usize, block: u64) -> (usize, u64) {
        let g = self.arr.geometry();
        (g.member_of(stripe, col), DATA_OFFSET + g.offset_of(stripe, col) + block * 4096)
    }
    /// The logical offset of block `block` of data column `col` of `stripe`.
    fn logical(&self, stripe: u64, col: usize, block: u64) -> u64 {
        let g = self.arr.geometry();
        stripe * g.stripe_data_bytes() + col as u64 * g.unit + block * 4096
    }
    fn read_all(&self) -> Vec<u8> {
        let mut b = vec![0u8; self.data.len()];
        self.arr.read(0, &mut b).unwrap();
        b
    }
    /// The array records exactly the 4 KiB blocks at logical `lost` as
    /// lost (sorted), reads of them fail, and every other block reads its
    /// pattern.
    fn reads_all_but(&self, lost: &[u64]) {
        let recorded: Vec<u64> = self.arr.lost().iter().flat_map(|l| (l.offset..l.end()).step_by(4096)).collect();
        assert_eq!(recorded, lost);
        let mut b = vec![0u8; 4096];
        for at in (0..self.data.len() as u64).step_by(4096) {
            let res = self.arr.read(at, &mut b);
            if lost.contains(&at) {
                assert!(res.unwrap_err().to_string().contains("were lost"));
            } else {
                res.unwrap();
                assert!(b[..] == self.data[at as usize..at as usize + 4096], "block at {at}");
            }
        }
    }
    /// Block `block` of data columns `cols` of `stripe` unreadable (until
    /// written); their members.
    fn unreadable<const N: usize>(&self, stripe: u64, cols: [usize; N], block: u64) -> [usize; N] {
        cols.map(|c| {
            let (m, at) = self.unit(stripe, c, block);
            self.faulty[m].bad_range(at, 4096, false);
            m
        })
    }
    fn device(&self, m: usize, at: u64, len: usize) -> Vec<u8> {
        self.mems[m].snapshot()[at as usize..at as usize + len].to_vec()
    }
}

/// raid5 4+1: an unreadable block under a client's read is rebuilt from
/// the other four, written back, and read again; the client gets its
/// bytes, the member stays in service with one read error, corrected,
/// and the drive's block holds the right bytes again (the rewrite cleared
/// the bad range, as a drive remaps a pending sector).
#[test]
fn a_read_error_under_a_read_is_corrected_and_the_member_kept() {
    let r = rig(Level::Raid5, 5);
    let (m, at) = r.unit(3, 1, 2);
    let want = r.device(m, at, 4096);
    r.mems[m].corrupt(at, 4096);
    r.faulty[m].bad_range(at, 4096, false);
    r.arr.reset_counters();
    assert!(r.read_all() == r.data);
    assert_eq!(r.arr.health().states[m], MemberState::Active);
    let info = &r.arr.info().member_list[m];
    // Two failed reads: the client's (merged over several stripes), and
    // its piece in the bad block's stripe, read again to find what to
    // rebuild.
    assert_eq!((info.read_errors, info.write_errors, info.corrected_reads), (2, 0, 1), "{info:?}");
    assert!(r.faulty[m].bad_ranges().is_empty(), "the rewrite covered the bad range");
    assert_eq!(r.device(m, at, 4096), want, "the unit's bytes rebuilt onto the drive");
    assert!(r.arr.auto_failed().is_empty());
    // Every other member's stripe-3 unit was read once more for the
    // rebuild, and the member took one write: the unit's range the read
    // had asked of it.
    let (_, per) = r.arr.counters();
    assert_eq!(per[m].writes, 1);
    assert_eq!(per.iter().enumerate().filter(|&(i, _)| i != m).map(|(_, c)| c.writes).sum::<u64>(), 0);
    assert!(r.arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty());
}

/// A write's read-modify-write meets the unreadable block (the parity
/// unit of its stripe): corrected, then the write goes on and reads back.
#[test]
fn a_read_error_under_a_writes_read_modify_write_is_corrected() {
    let r = rig(Level::Raid5, 5);
    let g = r.arr.geometry().clone();
    let (pm, pat) = (g.member_of(6, g.k), DATA_OFFSET + g.offset_of(6, g.k));
    r.faulty[pm].bad_range(pat, UNIT, false);
    let at = r.logical(6, 2, 1);
    r.arr.write(at, &[0xAB; 4096]).unwrap();
    let mut want = r.data.clone();
    want[at as usize..at as usize + 4096].fill(0xAB);
    assert!(r.read_all() == want);
    assert_eq!(r.arr.health().states[pm], MemberState::Active);
    assert_eq!(r.arr.info().member_list[pm].corrected_reads, 1);
    assert!(r.arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty(), "the parity agrees with the data");
}

/// A block the drive cannot rewrite either: the member is failed (as at
/// any write error) and the read served degraded.
#[test]
fn a_block_that_cannot_be_rewritten_fails_the_member() {
    let r = rig(Level::Raid5, 5);
    let (m, at) = r.unit(9, 0, 0);
    r.faulty[m].bad_range(at, 4096, true);
    assert!(r.read_all() == r.data);
    assert_eq!(r.arr.health().states[m], MemberState::Failed);
    let failed = r.arr.auto_failed();
    assert_eq!(failed.len(), 1);
    assert!(failed[0].1.contains("injected medium error") && failed[0].1.contains("rebuilding the unreadable bytes onto it failed"), "{failed:?}");
    assert_eq!(r.arr.info().member_list[m].corrected_reads, 0);
}

/// raid5 with a member already failed: nothing can rebuild the other's
/// unreadable block.  Failing that member too would put every stripe
/// out of reach; instead the block is set aside: the bytes it takes with
/// it (its own, and the failed member's beside it, which only it could
/// rebuild) recorded lost, zeros written over it.  The read of them
/// fails; every other byte reads; a write needing the block goes on; the
/// member stays in service.
#[test]
fn an_unreadable_block_in_a_degraded_array_is_set_aside() {
    let (r, gone, m) = set_aside_in_stripe_4();
    let g = r.arr.geometry().clone();
    let mut b = vec![0u8; 4096];
    assert_eq!(r.arr.health().states[m], MemberState::Active);
    assert!(r.arr.auto_failed().is_empty(), "{:?}", r.arr.auto_failed());
    assert!(r.faulty[m].bad_ranges().is_empty(), "zeros written over the block");
    let lost = vec![r.logical(4, 0, 3), r.logical(4, 1, 3)];
    r.reads_all_but(&lost);
    // A write into the stripe (a degraded write reads every survivor over
    // its span, the zeros included) goes on and reads back.
    let w = r.logical(4, 2, 3);
    r.arr.write(w, &[6; 4096]).unwrap();
    r.arr.read(w, &mut b).unwrap();
    assert_eq!(b, vec![6; 4096]);
    // A scrub of the degraded array meeting another such block sets it
    // aside too, says so, and goes on to the end.
    let s9 = (9..STRIPES).find(|&s| g.column_of(s, gone).unwrap() < g.k && g.column_of(s, m).unwrap() < g.k).unwrap();
    let (m9, at9) = r.unit(s9, g.column_of(s9, m).unwrap(), 0);
    assert_eq!(m9, m);
    r.faulty[m].bad_range(at9, 4096, false);
    let rep = r.arr.scrub(false, &|_, _| {}).unwrap();
    assert!(rep.notes.iter().any(|n| n.contains(&format!("stripe {s9}: 8192 bytes")) && n.contains("recorded lost")), "{rep:?}");
    assert_eq!(rep.stripes_checked, STRIPES);
    assert_eq!(r.arr.health().states[m], MemberState::Active);
    assert_eq!(r.arr.lost().len(), 4, "{:?}", r.arr.lost());
}

/// raid5 4+1 with the member of stripe 4's first data unit failed and
/// block 3 of its second unreadable (member `m`): a read of that block
/// sets it aside, and fails saying the bytes were lost.  The rig, the
/// member failed and `m`.
fn set_aside_in_stripe_4() -> (Rig, usize, usize) {
    let r = rig(Level::Raid5, 5);
    let gone = r.arr.geometry().member_of(4, 0);
    r.arr.fail_member(gone).unwrap();
    let (m, at) = r.unit(4, 1, 3);
    r.faulty[m].bad_range(at, 4096, false);
    let err = r.arr.read(r.logical(4, 1, 3), &mut vec![0u8; 4096]).unwrap_err().to_string();
    assert!(err.contains("were lost"), "{err}");
    (r, gone, m)
}

/// raid6: two members unreadable in the same stripe unit range; each is
/// rebuilt from the others (the second left out of the first's sources).
#[test]
fn raid6_corrects_two_members_unreadable_in_one_stripe() {
    let r = rig(Level::Raid6, 6);
    let [a, b] = r.unreadable(2, [0, 3], 1);
    assert!(r.read_all() == r.data);
    let info = r.arr.info();
    assert_eq!((info.member_list[a].corrected_reads, info.member_list[b].corrected_reads), (1, 1));
    assert!(r.arr.health().states.iter().all(|s| *s == MemberState::Active));
    assert!(r.arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty());
}

/// raid1: the other copy rebuilds the block.
#[test]
fn raid1_corrects_from_the_other_copy() {
    let r = rig(Level::Raid1, 2);
    r.faulty[0].bad_range(DATA_OFFSET + 5 * UNIT, 8192, false);
    r.faulty[1].bad_range(DATA_OFFSET + 9 * UNIT, 4096, false);
    assert!(r.read_all() == r.data);
    assert!(r.read_all() == r.data);
    let info = r.arr.info();
    assert_eq!(info.member_list[0].corrected_reads + info.member_list[1].corrected_reads, 1, "only the copy read met its bad range: {:?}", info.member_list);
    assert!(r.arr.health().states.iter().all(|s| *s == MemberState::Active));
}

/// More than md's `max_read_errors` corrected errors fail the member.
#[test]
fn too_many_corrected_read_errors_fail_the_member() {
    let r = rig(Level::Raid5, 5);
    let g = r.arr.geometry().clone();
    let m = 2;
    let mut n = 0;
    let mut b = vec![0u8; 4096];
    'out: for s in 0..STRIPES {
        let Some(col) = g.column_of(s, m).filter(|&c| c < g.k) else { continue };
        for blk in 0..UNIT / 4096 {
            r.faulty[m].bad_range(DATA_OFFSET + g.offset_of(s, col) + blk * 4096, 4096, false);
            let at = r.logical(s, col, blk);
            r.arr.read(at, &mut b).unwrap();
            assert!(b[..] == r.data[at as usize..at as usize + 4096]);
            n += 1;
            if n > MAX_CORRECTED {
                break 'out;
            }
            assert_eq!(r.arr.health().states[m], MemberState::Active, "after {n}");
        }
    }
    assert_eq!(r.arr.health().states[m], MemberState::Failed);
    assert_eq!(r.arr.info().member_list[m].corrected_reads, MAX_CORRECTED + 1);
    assert!(r.arr.auto_failed()[0].1.contains("max_read_errors"), "{:?}", r.arr.auto_failed());
}

/// Under a cache volume the drives' code can be older than the cache's:
/// a read error fails the member, as before, and nothing is rebuilt from
/// that code.
#[test]
fn under_a_cache_volume_a_read_error_fails_the_member() {
    let r = rig(Level::Raid5, 5);
    let Rig { faulty, arr, data, .. } = r;
    let cfg = CacheConfig::uniform(CachePolicy::Ppc, 4 * UNIT);
    let v = CacheVolume::new(arr, cfg).unwrap();
    let m = 1;
    faulty[m].bad_range(DATA_OFFSET, UNIT * STRIPES, false);
    let mut b = vec![0u8; data.len()];
    v.read(0, &mut b).unwrap();
    assert!(b == data);
    assert_eq!(v.array().health().states[m], MemberState::Failed);
    assert_eq!(v.array().info().member_list[m].corrected_reads, 0);
}

/// Opened dirty without a journal, before a resync: the drives' code may
/// disagree with their data, so nothing is rebuilt from it.  The member
/// fails (as before), and its bytes are not overwritten with a unit
/// computed from parity that is wrong.
#[test]
fn an_unsynced_array_does_not_rebuild_from_its_code() {
    let r = rig(Level::Raid5, 5);
    let Rig { mems, arr, .. } = r;
    // A crash: the superblocks still say dirty.
    std::mem::forget(arr);
    let faulty: Vec<Arc<FaultyMember>> = mems.iter().map(|m| Arc::new(FaultyMember::new(m.clone() as Arc<dyn Member>))).collect();
    let arr = Array::open_members(faulty.iter().map(|f| f.clone() as Arc<dyn Member>).collect(), true).unwrap();
    assert!(arr.needs_resync());
    let g = arr.geometry().clone();
    // Stripe 7's parity no longer agrees with its data (a write the crash
    // cut off), and a data block of it is unreadable.
    let p = g.member_of(7, g.k);
    mems[p].corrupt(DATA_OFFSET + g.offset_of(7, g.k), 4096);
    let m = g.member_of(7, 0);
    let at = DATA_OFFSET + g.offset_of(7, 0);
    let before = mems[m].snapshot()[at as usize..at as usize + 4096].to_vec();
    faulty[m].bad_range(at, 4096, false);
    let mut b = vec![0u8; 4096];
    let _ = arr.read(7 * g.stripe_data_bytes(), &mut b);
    assert_eq!(arr.health().states[m], MemberState::Failed);
    assert_eq!(arr.info().member_list[m].corrected_reads, 0);
    assert_eq!(mems[m].snapshot()[at as usize..at as usize + 4096], before[..], "nothing written from the spoiled parity");
    assert_eq!(faulty[m].bad_ranges().len(), 1);
}

/// A scrub (a check, without --repair) meets unreadable blocks on two
/// members: each is rebuilt and written back, as md's check does, the
/// scrub goes on to the end, all consistent, and says what it corrected.
#[test]
fn a_scrub_corrects_the_blocks_it_cannot_read() {
    let r = rig(Level::Raid5, 5);
    let (a, at_a) = r.unit(1, 2, 0);
    let (b, at_b) = r.unit(11, 0, 2);
    r.faulty[a].bad_range(at_a, 4096, false);
    r.faulty[b].bad_range(at_b, 8192, false);
    let rep = r.arr.scrub(false, &|_, _| {}).unwrap();
    assert_eq!((rep.stripes_checked, rep.mismatched, rep.unverified_stripes, rep.read_errors_corrected), (STRIPES, 0, 0, 2), "{rep:?}");
    assert!(r.arr.health().states.iter().all(|s| *s == MemberState::Active));
    assert!(r.faulty[a].bad_ranges().is_empty() && r.faulty[b].bad_ranges().is_empty());
    let info = r.arr.info();
    assert_eq!((info.member_list[a].corrected_reads, info.member_list[b].corrected_reads), (1, 1));
    assert!(r.read_all() == r.data);
    // A block that cannot be rewritten fails its member; the scrub goes
    // on without it, degraded, as before.
    let (c, at_c) = r.unit(5, 1, 1);
    r.faulty[c].bad_range(at_c, 4096, true);
    let rep = r.arr.scrub(false, &|_, _| {}).unwrap();
    assert_eq!(rep.read_errors_corrected, 0);
    assert_eq!(r.arr.health().states[c], MemberState::Failed);
    assert!(rep.notes.iter().any(|n| n.contains("failed during the scrub")), "{rep:?}");
}

/// A member that cannot be reached (its file cut short: reads end early)
/// is failed at once, with no rewrite tried: no write reaches it.
#[test]
fn a_member_cut_short_is_failed_without_a_rewrite() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("a");
    let spec = mosaic_array::spec::ArraySpec::Dir(dir.clone());
    let o = CreateOptions { level: Level::Raid5, members: Some(5), member_size: Some(DATA_OFFSET + UNIT * STRIPES), unit: UNIT, block: 4096, force: true, assume_clean: true };
    let arr = Array::create(&spec, &o).unwrap();
    let data: Vec<u8> = (0..arr.capacity()).map(|i| (i * 3 % 241) as u8).collect();
    arr.write(0, &data).unwrap();
    let member = dir.join("member-02.img");
    let f = std::fs::OpenOptions::new().write(true).open(&member).unwrap();
    f.set_len(DATA_OFFSET + UNIT).unwrap();
    arr.reset_counters();
    let mut b = vec![0u8; data.len()];
    arr.read(0, &mut b).unwrap();
    assert!(b == data);
    assert_eq!(arr.health().states[2], MemberState::Failed);
    let (_, per) = arr.counters();
    assert_eq!(per[2].writes, 0, "no rewrite tried");
    assert!(!arr.auto_failed()[0].1.contains("not corrected"), "{:?}", arr.auto_failed());
}

/// raid6 rebuilding one member has a column to spare: a source's
/// unreadable block is rebuilt from the others and the rebuild goes on.
#[test]
fn a_rebuild_corrects_a_source_block_where_the_code_spares_a_column() {
    let r = rig(Level::Raid6, 6);
    r.arr.fail_member(0).unwrap();
    r.arr.replace_with(0, Arc::new(MemMember::new("y", DATA_OFFSET + UNIT * STRIPES)), "mem:y").unwrap();
    let g = r.arr.geometry().clone();
    let s = (0..STRIPES).find(|&s| g.column_of(s, 3).is_some_and(|c| c < g.k)).unwrap();
    let at = DATA_OFFSET + g.offset_of(s, g.column_of(s, 3).unwrap()) + 4096;
    r.faulty[3].bad_range(at, 4096, false);
    let rep = r.arr.rebuild(&|_, _| {}, mosaic_array::maint::RebuildOptions::default()).unwrap();
    assert_eq!(rep.lost_bytes, 0);
    assert!(r.arr.health().states.iter().all(|s| *s == MemberState::Active), "{:?}", r.arr.health());
    assert_eq!(r.arr.info().member_list[3].corrected_reads, 1);
    assert!(r.faulty[3].bad_ranges().is_empty());
    assert!(r.read_all() == r.data);
    assert!(r.arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty());
    // The rebuilt member alone holds what it should: read with two
    // others failed.
    r.arr.fail_member(1).unwrap();
    r.arr.fail_member(2).unwrap();
    assert!(r.read_all() == r.data);
}

/// raid5 rebuilding a member has no column to spare: a source's
/// unreadable block cannot be rebuilt, and neither can the target's
/// bytes beside it.  Those blocks are set aside (md's bad-block log, ZFS's
/// permanent errors) instead of failing the source, which would lose every
/// stripe after it: zeros on both, the parity recomputed, the logical
/// bytes of the data among them recorded lost.  The rebuild completes;
/// reads of the lost bytes fail, every other byte reads right, a scrub
/// finds the stripes consistent, and writing the lost units again clears
/// them.
#[test]
fn a_raid5_rebuild_sets_aside_the_blocks_nothing_can_rebuild() {
    let r = rig(Level::Raid5, 5);
    let g = r.arr.geometry().clone();
    let (t, src) = (0, 3);
    r.arr.fail_member(t).unwrap();
    let y = Arc::new(MemMember::new("y", DATA_OFFSET + UNIT * STRIPES));
    r.arr.replace_with(t, y.clone(), "mem:y").unwrap();
    // A stripe where both the source and the target hold data, and one
    // where the target holds the parity.
    let both = (0..STRIPES).find(|&s| g.column_of(s, src).unwrap() < g.k && g.column_of(s, t).unwrap() < g.k).unwrap();
    let parity = (0..STRIPES).find(|&s| g.column_of(s, t).unwrap() == g.k).unwrap();
    let bad = |s: u64| DATA_OFFSET + g.offset_of(s, g.column_of(s, src).unwrap()) + 8192;
    r.faulty[src].bad_range(bad(both), 4096, false);
    r.faulty[src].bad_range(bad(parity), 4096, false);
    let rep = r.arr.rebuild(&|_, _| {}, mosaic_array::maint::RebuildOptions::default()).unwrap();
    assert_eq!(rep.lost_bytes, 3 * 4096, "two blocks in one stripe, one in the other: {rep:?}");
    assert!(r.arr.health().states.iter().all(|s| *s == MemberState::Active), "{:?}", r.arr.health());
    assert!(r.faulty[src].bad_ranges().is_empty(), "the zeros were written over the bad blocks");
    let logical = |s: u64, m: usize| r.logical(s, g.column_of(s, m).unwrap(), 2);
    let mut lost = vec![logical(both, src), logical(both, t), logical(parity, src)];
    lost.sort_unstable();
    r.reads_all_but(&lost);
    let mut b = vec![0u8; 4096];
    assert!(r.arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty(), "each stripe agrees with itself");
    // The lost block of the stripe with parity on the target, written
    // again as its whole unit: known again.
    let unit_at = logical(parity, src) - 8192;
    r.arr.write(unit_at, &vec![9u8; UNIT as usize]).unwrap();
    let mut u = vec![0u8; UNIT as usize];
    r.arr.read(unit_at, &mut u).unwrap();
    assert!(u.iter().all(|&x| x == 9));
    assert_eq!(r.arr.lost().len(), 2, "the other stripe's two blocks stay lost: {:?}", r.arr.lost());
    let mut data = r.data.clone();
    data[unit_at as usize..(unit_at + UNIT) as usize].fill(9);
    lost.retain(|&at| at != logical(parity, src));
    // The rebuilt member is right where it holds anything known: every
    // other byte reads with another member failed.
    r.arr.fail_member(4).unwrap();
    for at in (0..r.data.len() as u64).step_by(4096).filter(|at| !lost.contains(at)) {
        r.arr.read(at, &mut b).unwrap();
        assert!(b[..] == data[at as usize..at as usize + 4096], "block at {at}, degraded");
    }
    // The superblocks keep what is lost across a close and an open.
    let Rig { mems, arr, .. } = r;
    arr.close().unwrap();
    let devs = std::iter::once(y).chain(mems.into_iter().skip(1)).map(|m| m as Arc<dyn Member>).collect();
    let arr = Array::open_members(devs, true).unwrap();
    assert_eq!(arr.lost().len(), 2);
    assert!(arr.read(logical_of(&arr, both, src), &mut b).unwrap_err().to_string().contains("were lost"));
}

fn logical_of(arr: &Array, s: u64, m: usize) -> u64 {
    let g = arr.geometry();
    s * g.stripe_data_bytes() + g.column_of(s, m).unwrap() as u64 * g.unit + 8192
}

/// A hot replace meets an unreadable block on the old drive: the unit is
/// rebuilt from the other members onto both drives (md's replace), the
/// copy goes on, and the new drive takes the slot with the right bytes.
#[test]
fn a_hot_replace_rebuilds_what_the_old_drive_cannot_read() {
    let r = rig(Level::Raid5, 5);
    let g = r.arr.geometry().clone();
    let m = 2;
    let at = DATA_OFFSET + g.offset_of(7, g.column_of(7, m).unwrap()) + 8192;
    r.faulty[m].bad_range(at, 4096, false);
    let y = Arc::new(MemMember::new("y", DATA_OFFSET + UNIT * STRIPES));
    let rep = r.arr.replace_hot_with(m, y.clone(), "mem:y", &|_, _| {}, mosaic_array::maint::RebuildOptions::default()).unwrap();
    assert!(!rep.stopped && !rep.rebuild_needed, "{rep:?}");
    assert!(r.faulty[m].bad_ranges().is_empty(), "the old drive was rewritten there too");
    assert_eq!(r.mems[m].snapshot()[at as usize..at as usize + 4096], y.snapshot()[at as usize..at as usize + 4096]);
    assert!(r.read_all() == r.data);
    assert!(r.arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty());
    // The new drive alone holds slot 2's bytes: read with another failed.
    r.arr.fail_member(0).unwrap();
    assert!(r.read_all() == r.data);
}

/// What nothing can set aside fails its member, and the reason says why:
/// two members unreadable at the same bytes of a healthy raid5 (no member
/// is out, yet neither can be rebuilt: the first fails), and a dead
/// drive in a degraded one (it reads nothing, not even its label).
#[test]
fn what_cannot_be_set_aside_fails_its_member_and_says_why() {
    let r = rig(Level::Raid5, 5);
    let [a, _] = r.unreadable(6, [0, 1], 1);
    let mut buf = vec![0u8; 4096];
    let _ = r.arr.read(r.logical(6, 0, 1), &mut buf);
    let failed = r.arr.auto_failed();
    assert!(failed[0].0 == a && failed[0].1.contains("nor set aside: no other member is out of stripe 6"), "{failed:?}");

    let r = rig(Level::Raid5, 5);
    r.arr.fail_member(0).unwrap();
    r.faulty[2].break_now();
    assert!(r.arr.read(0, &mut vec![0u8; r.data.len()]).is_err());
    let failed = r.arr.auto_failed();
    assert!(failed[0].0 == 2 && failed[0].1.contains("it reads nothing, not even its label: a dead drive, not a bad block"), "{failed:?}");
    assert!(r.arr.lost().is_empty(), "nothing recorded lost for a dead drive");
}

/// raid6 with two members out and raid1 with its other copy out: a block
/// the last holder cannot read is set aside as raid5's is (every code
/// column is spent on the members out): the data columns among the three
/// (raid6) or the block (raid1) recorded lost, zeros over it, the member
/// kept; every other block reads its pattern.
#[test]
fn with_every_code_column_spent_an_unreadable_block_is_set_aside() {
    for (level, n) in [(Level::Raid6, 6), (Level::Raid1, 2)] {
        let r = rig(level, n);
        let g = r.arr.geometry().clone();
        let stripe = 5;
        let (m, at) = r.unit(stripe, 0, 2);
        let out: Vec<usize> = (0..n).filter(|&x| x != m).take(g.m).collect();
        for &o in &out {
            r.arr.fail_member(o).unwrap();
        }
        r.faulty[m].bad_range(at, 4096, false);
        let mut b = vec![0u8; 4096];
        let err = r.arr.read(r.logical(stripe, 0, 2), &mut b).unwrap_err().to_string();
        assert!(err.contains("were lost"), "{level}: {err}");
        assert_eq!(r.arr.health().states[m], MemberState::Active, "{level}");
        assert!(r.arr.auto_failed().is_empty(), "{level}: {:?}", r.arr.auto_failed());
        assert!(r.faulty[m].bad_ranges().is_empty(), "{level}: zeros written over the block");
        let mut lost: Vec<u64> = std::iter::once(m).chain(out.iter().copied()).filter_map(|x| g.column_of(stripe, x)).filter(|&c| c < g.k).map(|c| r.logical(stripe, c, 2)).collect();
        lost.sort_unstable();
        r.reads_all_but(&lost);
    }
}

/// raid6 rebuilding two members at once meets a block a source cannot
/// read: nothing else holds it (both code columns go to the two rebuilt),
/// so it is set aside as raid5's rebuild does, and the rebuild finishes.
#[test]
fn a_raid6_rebuild_of_two_members_sets_aside_what_nothing_can_rebuild() {
    let r = rig(Level::Raid6, 6);
    let g = r.arr.geometry().clone();
    let (targets, src) = ([0usize, 1], 3);
    let mut news = Vec::new();
    for &t in &targets {
        r.arr.fail_member(t).unwrap();
        let y = Arc::new(MemMember::new(format!("y{t}"), DATA_OFFSET + UNIT * STRIPES));
        r.arr.replace_with(t, y.clone(), &format!("mem:y{t}")).unwrap();
        news.push(y);
    }
    let s = (0..STRIPES).find(|&s| [0, 1, src].iter().all(|&m| g.column_of(s, m).unwrap() < g.k)).unwrap();
    r.faulty[src].bad_range(DATA_OFFSET + g.offset_of(s, g.column_of(s, src).unwrap()) + 8192, 4096, false);
    let rep = r.arr.rebuild(&|_, _| {}, mosaic_array::maint::RebuildOptions::default()).unwrap();
    assert_eq!(rep.lost_bytes, 3 * 4096, "the source's block and the two rebuilt members' beside it: {rep:?}");
    assert!(r.arr.health().states.iter().all(|s| *s == MemberState::Active), "{:?}", r.arr.health());
    let mut lost: Vec<u64> = [0, 1, src].iter().map(|&m| r.logical(s, g.column_of(s, m).unwrap(), 2)).collect();
    lost.sort_unstable();
    r.reads_all_but(&lost);
    assert!(r.arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty(), "each stripe agrees with itself");
}

/// A lost range clears block by block as it is written, as md's bad-block
/// log clears a sector once written: one 4 KiB write of the two blocks set
/// aside (the member out's) makes that block known and leaves the other
/// lost; the stripe stays consistent once the member out is rebuilt, and
/// writing the other block clears the last.
#[test]
fn a_lost_block_written_again_is_known_again_alone() {
    let (r, gone, _) = set_aside_in_stripe_4();
    let (out_block, bad_block) = (r.logical(4, 0, 3), r.logical(4, 1, 3));
    r.reads_all_but(&[out_block, bad_block]);
    let mut data = r.data.clone();
    r.arr.write(out_block, &[0xE1; 4096]).unwrap();
    data[out_block as usize..out_block as usize + 4096].fill(0xE1);
    let r = Rig { data, ..r };
    r.reads_all_but(&[bad_block]);
    let y = Arc::new(MemMember::new("y", DATA_OFFSET + UNIT * STRIPES));
    r.arr.replace_with(gone, y, "mem:y").unwrap();
    r.arr.rebuild(&|_, _| {}, mosaic_array::maint::RebuildOptions::default()).unwrap();
    assert!(r.arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty());
    r.reads_all_but(&[bad_block]);
    let mut data = r.data.clone();
    r.arr.write(bad_block, &[0x1E; 4096]).unwrap();
    data[bad_block as usize..bad_block as usize + 4096].fill(0x1E);
    let r = Rig { data, ..r };
    r.reads_all_but(&[]);
}

/// raid6 with one member out and two others unreadable at the same block
/// of a stripe: the code's two columns cannot cover three unknowns, yet
/// not every one is spent on members out, so the first member's block is
/// not set aside: it fails, saying why.  Then both columns are spent, and
/// the second's block is set aside, the member kept.
#[test]
fn with_a_code_column_left_a_second_bad_block_is_not_set_aside() {
    let r = rig(Level::Raid6, 6);
    let gone = r.arr.geometry().member_of(7, 2);
    r.arr.fail_member(gone).unwrap();
    let [a, b] = r.unreadable(7, [0, 1], 1);
    let _ = r.arr.read(r.logical(7, 0, 1), &mut vec![0u8; 4096]);
    let failed = r.arr.auto_failed();
    assert!(failed.iter().any(|f| f.0 == a && f.1.contains(&format!("nor set aside: only members [{gone}] are out of stripe 7, which its 2 code columns cover"))), "{failed:?}");
    assert!(failed.iter().all(|f| f.0 != b), "{failed:?}");
    assert!(r.arr.lost().iter().any(|l| l.offset <= r.logical(7, 1, 1) && r.logical(7, 1, 1) < l.end()), "{:?}", r.arr.lost());
}
