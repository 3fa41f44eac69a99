//! Write-mostly mirror members (md's `--write-mostly`): written as every
//! copy is, read only when no other copy serves a stripe; the flag is in
//! the superblocks, so it outlives the open.

use std::sync::Arc;

use mosaic_array::Array;
use mosaic_core::Level;
use mosaic_dev::Member;

use crate::common::{mem, named, opts, pattern};

/// Per-member (reads, writes) since open.
fn ops(a: &Array) -> Vec<(u64, u64)> {
    a.counters().1.iter().map(|m| (m.reads, m.writes)).collect()
}

fn read_all(a: &Array) -> Vec<u8> {
    let mut b = vec![0u8; a.capacity() as usize];
    a.read(0, &mut b).unwrap();
    b
}

#[test]
fn a_write_mostly_member_is_written_but_read_only_when_no_other_copy_serves() {
    let ms: Vec<Arc<dyn Member>> = (0..3).map(|i| mem(&format!("m{i}"), 32) as Arc<dyn Member>).collect();
    let a = Array::create_with_journal(named(&ms), &opts(Level::Raid1, 3), true, None).unwrap();
    let data = pattern(a.capacity(), 7);
    a.write(0, &data).unwrap();
    assert!(read_all(&a) == data);
    assert!(ops(&a)[1].0 > 0, "without the flag member 1 takes its share of reads: {:?}", ops(&a));
    a.set_write_mostly(&[1]).unwrap();
    assert_eq!(a.info().member_list.iter().map(|m| m.write_mostly).collect::<Vec<_>>(), [false, true, false]);
    a.reset_counters();
    let more = pattern(a.capacity(), 9);
    a.write(0, &more).unwrap();
    assert!(read_all(&a) == more);
    let c = ops(&a);
    assert!(c[1].0 == 0 && c[0].0 > 0 && c[2].0 > 0, "member 1 not read: {c:?}");
    assert!(c[1].1 == c[0].1 && c[1].1 > 0, "member 1 written as the others: {c:?}");
    drop(a);
    // Reopened: the flag is the superblocks'.
    let a = Array::open_members_with_journal(ms.clone(), true, None).unwrap();
    assert_eq!(a.write_mostly(), [1]);
    a.fail_member(0).unwrap();
    a.fail_member(2).unwrap();
    a.reset_counters();
    assert!(read_all(&a) == more, "the write-mostly copy serves when it is the only one");
    assert!(ops(&a)[1].0 > 0);
    // A new drive in the write-mostly slot, rebuilt: write-mostly too.
    a.set_write_mostly(&[2]).unwrap();
    a.replace_with(2, mem("new2", 32), "new2").unwrap();
    a.rebuild(&|_, _| {}, Default::default()).unwrap();
    assert_eq!(a.write_mostly(), [2], "the slot keeps its flag");
    // Refusals say why; none leaves every copy read again.
    let e = a.set_write_mostly(&[0, 1, 2]).unwrap_err().to_string();
    assert_eq!(e, "every member of the mirror would be write-mostly: at least one must take its reads (members [0, 1, 2] of 3)");
    let e = a.set_write_mostly(&[3]).unwrap_err().to_string();
    assert_eq!(e, "write-mostly member 3: the array has members 0 to 2");
    a.set_write_mostly(&[]).unwrap();
    assert!(a.write_mostly().is_empty());
    let r5: Vec<Arc<dyn Member>> = (0..4).map(|i| mem(&format!("r{i}"), 32) as Arc<dyn Member>).collect();
    let b = Array::create_with_journal(named(&r5), &opts(Level::Raid5, 4), true, None).unwrap();
    let e = b.set_write_mostly(&[1]).unwrap_err().to_string();
    assert_eq!(e, "write-mostly members are for mirrors (raid1), not raid5: every member of raid5 holds data reads need");
}
