//! CBRO with a raid0 check drive array: its members take the stripes in
//! turn, so both of them out cost one code column, not two.  An array
//! whose data drives are whole serves, flushes, closes and opens again;
//! one more data drive out is one column too many.

use std::sync::Arc;

use mosaic_array::{Array, CreateOptions, DATA_OFFSET};
use mosaic_core::Level;
use mosaic_dev::{FaultyMember, MemMember, Member};

const U: u64 = 4096;

#[test]
fn both_members_of_one_raid0_check_drive_array_out_cost_one_column() {
    let level = Level::Cbro { n: 3, k: 1, w: 2 };
    let mems: Vec<Arc<MemMember>> = (0..5).map(|i| Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + 24 * U))).collect();
    let faulty: Vec<Arc<FaultyMember>> = mems.iter().map(|m| Arc::new(FaultyMember::new(m.clone() as Arc<dyn Member>))).collect();
    let jdev = Arc::new(MemMember::new("journal", 16 << 20));
    let members = faulty.iter().enumerate().map(|(i, f)| (f.clone() as Arc<dyn Member>, format!("m{i}"))).collect();
    let o = CreateOptions { level, members: Some(5), member_size: None, unit: U, block: 4096, force: true, assume_clean: true };
    let arr = Array::create_with_journal(members, &o, true, Some((jdev.clone() as Arc<dyn Member>, "journal".to_string()))).unwrap();
    assert_eq!(arr.geometry().columns_out(&[3, 4]), 1);
    assert_eq!(arr.geometry().columns_out(&[0, 3]), 2);
    let cap = arr.capacity() as usize;
    let d: Vec<u8> = (0..cap).map(|i| (i % 251) as u8).collect();
    arr.write(0, &d).unwrap();
    faulty[3].break_now();
    faulty[4].break_now();
    let new = vec![9u8; 3 * U as usize];
    arr.write(0, &new).unwrap();
    let mut want = d.clone();
    want[..new.len()].copy_from_slice(&new);
    let mut b = vec![0u8; cap];
    arr.read(0, &mut b).unwrap();
    assert!(b == want, "read with the check drive array out");
    assert_eq!(arr.columns_out(), 1, "{:?}", arr.health().states);
    assert_eq!(arr.info().columns_out, 1);
    arr.flush().unwrap();
    // A data drive more is beyond the one code column.
    let e = arr.fail_member(0).unwrap_err().to_string();
    assert!(e.contains("data would be lost"), "{e}");
    arr.close().unwrap();
    drop(arr);
    let ms = |n: usize| mems[..n].iter().map(|m| m.clone() as Arc<dyn Member>).collect::<Vec<_>>();
    let arr = Array::open_members_with_journal(ms(3), true, Some(jdev.clone() as Arc<dyn Member>)).unwrap();
    arr.read(0, &mut b).unwrap();
    assert!(b == want, "read after reopening from the data drives");
    drop(arr);
    let e = Array::open_members_with_journal(ms(2), true, Some(jdev as Arc<dyn Member>)).err().expect("two columns out").to_string();
    assert!(e.contains("2 columns of a stripe") && e.contains("tolerates"), "{e}");
}
