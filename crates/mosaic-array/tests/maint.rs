//! Scrub, automatic failure on I/O errors, device-op counts, superblocks.

use std::sync::Arc;

use mosaic_array::superblock::Superblock;
use mosaic_array::{Array, CreateOptions, DATA_OFFSET};
use mosaic_core::{Level, MemberState};
use mosaic_dev::{FaultyMember, MemMember, Member};

fn opts(level: Level, n: usize, unit: u64) -> CreateOptions {
    CreateOptions { level, members: Some(n), member_size: None, unit, block: 4096, force: true, assume_clean: true }
}

fn mems(n: usize, size: u64) -> Vec<Arc<MemMember>> {
    (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), size))).collect()
}

fn as_members(m: &[Arc<MemMember>]) -> Vec<(Arc<dyn Member>, String)> {
    m.iter().map(|m| (m.clone() as Arc<dyn Member>, m.describe())).collect()
}

#[test]
fn scrub_finds_corrupt_code_and_data_and_repairs_code() {
    let unit = 16384;
    let ms = mems(6, DATA_OFFSET + unit * 32);
    let arr = Array::create_on(as_members(&ms), &opts(Level::Raid6, 6, unit), true).unwrap();
    let data: Vec<u8> = (0..arr.capacity()).map(|i| (i * 7 % 251) as u8).collect();
    arr.write(0, &data).unwrap();
    assert!(arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty());

    let g = arr.geometry().clone();
    // Corrupt the P unit of stripe 5 and a data unit of stripe 9.
    let p_member = g.member_of(5, g.k);
    ms[p_member].corrupt(DATA_OFFSET + 5 * unit + 100, 10);
    let d_member = g.member_of(9, 1);
    ms[d_member].corrupt(DATA_OFFSET + 9 * unit + 4000, 1);

    let rep = arr.scrub(false, &|_, _| {}).unwrap();
    assert_eq!(rep.mismatched_stripes, vec![5, 9]);

    let rep = arr.scrub(true, &|_, _| {}).unwrap();
    assert_eq!(rep.mismatched_stripes, vec![5, 9]);
    // Code corruption is repaired: stripe 5 reads back the original bytes
    // even with the data members of stripe 5 failed.
    let rep = arr.scrub(false, &|_, _| {}).unwrap();
    assert!(rep.mismatched_stripes.is_empty());
    arr.fail_member(g.member_of(5, 0)).unwrap();
    arr.fail_member(g.member_of(5, 1)).unwrap();
    let sd = g.stripe_data_bytes();
    let mut buf = vec![0u8; sd as usize];
    arr.read(5 * sd, &mut buf).unwrap();
    assert!(buf == data[(5 * sd) as usize..(6 * sd) as usize]);
}

#[test]
fn io_error_fails_member_and_reads_reconstruct() {
    let unit = 4096;
    let size = DATA_OFFSET + unit * 64;
    let ms = mems(5, size);
    let faulty: Vec<Arc<FaultyMember>> = ms.iter().map(|m| Arc::new(FaultyMember::new(m.clone() as Arc<dyn Member>))).collect();
    let members = faulty.iter().map(|f| (f.clone() as Arc<dyn Member>, f.describe())).collect();
    let arr = Array::create_on(members, &opts(Level::Raid5, 5, unit), true).unwrap();
    let data: Vec<u8> = (0..arr.capacity()).map(|i| (i % 253) as u8).collect();
    arr.write(0, &data).unwrap();
    faulty[2].break_now();
    let mut buf = vec![0u8; data.len()];
    arr.read(0, &mut buf).unwrap();
    assert!(buf == data);
    assert_eq!(arr.health().states[2], MemberState::Failed);
    assert_eq!(arr.auto_failed().len(), 1);
    let m2 = &arr.info().member_list[2];
    // The failed read is counted as a read error, and the rewrite that
    // would have corrected it (`mosaic_array::correct`) as a write error.
    assert!(m2.read_errors >= 1 && m2.write_errors >= 1 && m2.corrected_reads == 0, "{m2:?}");
    assert!(arr.auto_failed()[0].1.contains("rebuilding the unreadable bytes onto it failed"), "{:?}", arr.auto_failed());
    // Writes continue degraded and read back.
    let new = vec![0x77u8; 3 * 4096];
    arr.write(5 * 4096, &new).unwrap();
    arr.read(0, &mut buf).unwrap();
    assert!(buf[5 * 4096..8 * 4096] == new[..]);
    // The failure is recorded in the other members' superblocks.
    let sb = Superblock::read_from(ms[0].as_ref()).unwrap();
    assert_eq!(sb.member_states[2], MemberState::Failed);
    // A second failure on raid5 makes reads of lost data an error, not wrong bytes.
    faulty[3].break_now();
    let err = arr.read(0, &mut buf).unwrap_err();
    assert!(err.to_string().contains("failed"), "{err}");
}

#[test]
fn three_writes_to_one_stripe_of_4_plus_1_count_ops() {
    // Hand-computed: each 4 KiB write to a 4+1 stripe is RMW: 2 reads, 2 writes.
    let unit = 4096;
    let ms = mems(5, DATA_OFFSET + unit * 8);
    let arr = Array::create_on(as_members(&ms), &opts(Level::Raid5, 5, unit), true).unwrap();
    for i in 0..3u64 {
        arr.write(i * 4096, &[i as u8 + 1; 4096]).unwrap();
    }
    let (c, per) = arr.counters();
    assert_eq!((c.data_reads, c.code_reads, c.data_writes, c.code_writes), (3, 3, 3, 3));
    assert_eq!(c.stripes_rmw, 3);
    // Stripe 0's parity lives on member 4: read and written three times.
    assert_eq!((per[4].reads, per[4].writes), (3, 3));
    // A full-stripe write reads nothing.
    arr.reset_counters();
    arr.write(0, &vec![9u8; 4 * 4096]).unwrap();
    let (c, _) = arr.counters();
    assert_eq!((c.device_reads(), c.device_writes(), c.stripes_fsw), (0, 5, 1));
}

#[test]
fn superblock_survives_reopen_and_detects_corruption() {
    let unit = 4096;
    let ms = mems(4, DATA_OFFSET + unit * 16);
    let arr = Array::create_on(as_members(&ms), &opts(Level::Raid5, 4, unit), true).unwrap();
    arr.write(0, &[3u8; 8192]).unwrap();
    arr.close().unwrap();
    drop(arr);
    // Reopen from members in shuffled order.
    let shuffled: Vec<Arc<dyn Member>> = vec![ms[2].clone(), ms[0].clone(), ms[3].clone(), ms[1].clone()];
    let arr = Array::open_members(shuffled, false).unwrap();
    let mut b = vec![0u8; 8192];
    arr.read(0, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 3));
    drop(arr);
    // Corrupt both superblock slots of member 1.
    ms[1].corrupt(30, 4);
    ms[1].corrupt(mosaic_array::superblock::SLOT_SIZE + 30, 4);
    let e = Superblock::read_from(ms[1].as_ref()).unwrap_err();
    assert!(e.to_string().contains("corrupt superblock"), "{e}");
    // One torn slot is tolerated: the other copy is used.
    let e = Superblock::read_from(ms[0].as_ref());
    assert!(e.is_ok());
    ms[0].corrupt(30, 4);
    let sb = Superblock::read_from(ms[0].as_ref());
    assert!(sb.is_ok(), "the older slot must still decode");
}

/// A scrub of an array open for writing keeps its result in the
/// superblocks (as ZFS keeps its scan's): what it found, whether it
/// repaired or was stopped; a read-only open's scrub leaves them alone.
#[test]
fn a_scrub_is_recorded_in_the_superblocks() {
    let unit = 16384;
    let ms = mems(4, DATA_OFFSET + unit * 32);
    let arr = Array::create_on(as_members(&ms), &opts(Level::Raid5, 4, unit), true).unwrap();
    assert!(arr.info().last_scrub.is_none());
    arr.write(0, &vec![9u8; arr.capacity() as usize]).unwrap();
    let g = arr.geometry().clone();
    ms[g.member_of(7, g.k)].corrupt(DATA_OFFSET + 7 * unit, 8);
    arr.scrub(true, &|_, _| {}).unwrap();
    let r = arr.info().last_scrub.unwrap();
    assert_eq!((r.stripes, r.mismatched, r.unverified, r.repaired, r.interrupted), (32, 1, 0, true, false), "{r:?}");
    // Stopped after 10 stripes.
    arr.scrub(false, &|done, _| if done == 10 { arr.interrupt_scrub() }).unwrap();
    let r = arr.info().last_scrub.unwrap();
    assert_eq!((r.stripes, r.mismatched, r.repaired, r.interrupted), (10, 0, false, true), "{r:?}");
    arr.close().unwrap();
    drop(arr);
    let sb = Superblock::read_from(ms[0].as_ref()).unwrap();
    assert_eq!(sb.last_scrub, Some(r), "on disk");
    // Read-only: checked, not recorded.
    let ro = Array::open_members(ms.iter().map(|m| m.clone() as Arc<dyn Member>).collect(), false).unwrap();
    assert_eq!(ro.scrub(false, &|_, _| {}).unwrap().stripes_checked, 32);
    assert_eq!(ro.info().last_scrub, Some(r));
}

/// A member whose header (superblock) writes fail while `broken` is set;
/// its data reads and writes still work.
struct HeaderWritesFail {
    inner: Arc<MemMember>,
    broken: Arc<std::sync::atomic::AtomicBool>,
}
impl Member for HeaderWritesFail {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, off)
    }
    fn write_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        if off < DATA_OFFSET && self.broken.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::other(format!("{}: injected header write error", self.inner.describe())));
        }
        self.inner.write_at(buf, off)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A scrub whose result cannot be written to the superblocks still
/// reports what it found, and says the record is missing; the record
/// on disk stays the one before.  (The members that refused their
/// superblock are failed, as for any superblock write.)
#[test]
fn a_scrub_whose_result_cannot_be_recorded_says_so() {
    let unit = 16384;
    let ms = mems(4, DATA_OFFSET + unit * 32);
    let broken = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let devs: Vec<(Arc<dyn Member>, String)> =
        ms.iter().map(|m| (Arc::new(HeaderWritesFail { inner: m.clone(), broken: broken.clone() }) as Arc<dyn Member>, m.describe())).collect();
    let arr = Array::create_on(devs, &opts(Level::Raid5, 4, unit), true).unwrap();
    arr.write(0, &vec![3u8; arr.capacity() as usize]).unwrap();
    let g = arr.geometry().clone();
    ms[g.member_of(4, g.k)].corrupt(DATA_OFFSET + 4 * unit, 8);
    broken.store(true, std::sync::atomic::Ordering::SeqCst);
    let rep = arr.scrub(false, &|_, _| {}).unwrap();
    assert_eq!((rep.stripes_checked, rep.mismatched_stripes.clone()), (32, vec![4]), "{rep:?}");
    assert!(rep.notes.iter().any(|n| n.contains("its result could not be recorded in the superblocks") && n.contains("injected header write error")), "{:?}", rep.notes);
    assert_eq!(Superblock::read_from(ms[0].as_ref()).unwrap().last_scrub, None, "on disk");
}

/// A three-way mirror locates a wrong copy by majority and repairs it
/// from the two that agree, whichever member holds it (the first copy
/// included); with two copies the first is the reference, as md's.
#[test]
fn a_three_way_mirror_repairs_the_copy_the_others_outvote() {
    let unit = 16384;
    let ms = mems(3, DATA_OFFSET + unit * 16);
    let arr = Array::create_on(as_members(&ms), &opts(Level::Raid1, 3, unit), true).unwrap();
    let data: Vec<u8> = (0..arr.capacity()).map(|i| (i * 13 % 251) as u8).collect();
    arr.write(0, &data).unwrap();
    for bad in [0usize, 2] {
        ms[bad].corrupt(DATA_OFFSET + 5 * unit + 7, 3);
        let rep = arr.scrub(true, &|_, _| {}).unwrap();
        assert_eq!(rep.mismatched_stripes, vec![5], "{rep:?}");
        assert_eq!(rep.findings[0].member, Some(bad), "{:?}", rep.findings);
        assert!(rep.findings[0].detail.contains(&format!("member {bad} holds the wrong")), "{:?}", rep.findings);
        assert!(arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty(), "repaired");
        for m in &ms {
            let mut got = vec![0u8; unit as usize];
            m.read_at(&mut got, DATA_OFFSET + 5 * unit).unwrap();
            assert!(got[..] == data[(5 * unit) as usize..(6 * unit) as usize], "member {} after repairing member {bad}", m.describe());
        }
    }
}
