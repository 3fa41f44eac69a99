//! Scrub locates a single wrong column when two redundant columns are
//! available (raid6, rs:K+M with M >= 2), and repair rewrites that column,
//! not the parity; with one redundant column it says it cannot tell.

use std::sync::Arc;

use mosaic_array::{Array, CreateOptions, DATA_OFFSET};
use mosaic_core::Level;
use mosaic_dev::{MemMember, Member};

fn array(level: Level, n: usize) -> (Vec<Arc<MemMember>>, Array, Vec<u8>) {
    let unit = 4096;
    let ms: Vec<Arc<MemMember>> = (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), DATA_OFFSET + unit * 16))).collect();
    let o = CreateOptions { level, members: Some(n), member_size: None, unit, block: 4096, force: true, assume_clean: true };
    let arr = Array::create_on(ms.iter().map(|m| (m.clone() as Arc<dyn Member>, m.describe())).collect(), &o, true).unwrap();
    let data: Vec<u8> = (0..arr.capacity()).map(|i| (i * 13 % 249) as u8).collect();
    arr.write(0, &data).unwrap();
    (ms, arr, data)
}

#[test]
fn every_single_wrong_column_is_located_and_repaired() {
    for (level, n) in [(Level::Raid6, 6), ("rs:3+3".parse().unwrap(), 6), ("rs:4+2".parse().unwrap(), 6)] {
        let (ms, arr, data) = array(level, n);
        let g = arr.geometry().clone();
        let clean: Vec<Vec<u8>> = ms.iter().map(|m| data_of(m)).collect();
        for col in 0..n {
            let member = g.member_of(2, col);
            ms[member].corrupt(DATA_OFFSET + 2 * 4096 + 100, 7);
            let rep = arr.scrub(false, &|_, _| {}).unwrap();
            assert_eq!(rep.mismatched_stripes, vec![2], "{level} col {col}");
            assert_eq!(rep.unlocated_stripes, 0);
            let kind = if col < g.k { "data" } else { "code" };
            let want = format!("stripe 2: member {member} holds the wrong {kind} column ({col})");
            assert!(rep.findings[0].detail.starts_with(&want), "{level}: {:?} (want {want})", rep.findings);
            assert_eq!(rep.findings[0].member, Some(member));
            let rep = arr.scrub(true, &|_, _| {}).unwrap();
            assert_eq!(rep.mismatched, 1);
            // The wrong column was rewritten with its true bytes: every
            // member is as before the rot, and the data reads back.
            for (i, m) in ms.iter().enumerate() {
                assert!(data_of(m) == clean[i], "{level} col {col}: member {i} differs after repair");
            }
            let mut got = vec![0u8; data.len()];
            arr.read(0, &mut got).unwrap();
            assert!(got == data);
        }
    }
}

#[test]
fn one_redundant_column_cannot_locate() {
    let (ms, arr, _) = array(Level::Raid5, 4);
    let g = arr.geometry().clone();
    ms[g.member_of(1, 0)].corrupt(DATA_OFFSET + 4096 + 5, 3);
    let rep = arr.scrub(false, &|_, _| {}).unwrap();
    assert_eq!(rep.mismatched_stripes, vec![1]);
    assert_eq!(rep.unlocated_stripes, 1);
    assert!(rep.findings[0].detail.contains("cannot be located") && rep.findings[0].member.is_none(), "{:?}", rep.findings);
    // raid6 with a member out has one redundant column left, too.
    let (ms, arr, _) = array(Level::Raid6, 6);
    let g = arr.geometry().clone();
    arr.fail_member(g.member_of(3, 5)).unwrap();
    ms[g.member_of(3, 1)].corrupt(DATA_OFFSET + 3 * 4096, 3);
    let rep = arr.scrub(false, &|_, _| {}).unwrap();
    assert_eq!((rep.mismatched, rep.unlocated_stripes), (1, 1), "{:?}", rep.findings);
}

/// A raid6 stripe missing a data column decodes it from a code column,
/// which may be the wrong one: a mismatch there is reported as uncertain
/// and nothing is rewritten (a repair from the decoded bytes would make
/// the rot look right, and destroy the column a whole-stripe scrub could
/// locate once the member is back).  A stripe missing only a code column
/// is repaired from its data, as with one redundant column anywhere.
#[test]
fn a_degraded_stripe_missing_a_data_column_is_not_repaired_from_decoded_bytes() {
    let (ms, arr, _) = array(Level::Raid6, 6);
    let g = arr.geometry().clone();
    let gone = g.member_of(3, 0);
    arr.fail_member(gone).unwrap();
    ms[g.member_of(3, g.k)].corrupt(DATA_OFFSET + 3 * 4096, 3); // P of stripe 3
    let before: Vec<Vec<u8>> = ms.iter().map(|m| data_of(m)).collect();
    let rep = arr.scrub(true, &|_, _| {}).unwrap();
    assert_eq!((rep.mismatched_stripes.clone(), rep.unlocated_stripes), (vec![3], 1), "{:?}", rep.findings);
    assert!(rep.findings[0].detail.contains("not repaired"), "{:?}", rep.findings);
    for (i, m) in ms.iter().enumerate().filter(|(i, _)| *i != gone) {
        assert!(data_of(m) == before[i], "member {i} was rewritten");
    }
    // Scrubbed again, the stripe is still named: nothing hid the mismatch.
    let rep = arr.scrub(false, &|_, _| {}).unwrap();
    assert_eq!(rep.mismatched_stripes, vec![3]);
    // A stripe whose data columns are all there (member `gone` holds a
    // code column of it) is repaired from its data.
    let s = (0..16).find(|&s| g.column_of(s, gone).unwrap() >= g.k).unwrap();
    let q = (g.k..g.k + 2).map(|c| g.member_of(s, c)).find(|&m| m != gone).unwrap();
    ms[q].corrupt(DATA_OFFSET + s * 4096 + 9, 2);
    let rep = arr.scrub(true, &|_, _| {}).unwrap();
    assert!(rep.findings.iter().any(|f| f.detail.starts_with(&format!("stripe {s}:")) && f.detail.contains("repair rewrites the code")), "{:?}", rep.findings);
    let rep = arr.scrub(false, &|_, _| {}).unwrap();
    assert_eq!(rep.mismatched_stripes, vec![3], "stripe {s} was repaired, stripe 3 left as it was");
}

/// A member's bytes from where stripe data starts (a scrub records its
/// result in the superblocks before that).
fn data_of(m: &MemMember) -> Vec<u8> {
    m.snapshot()[DATA_OFFSET as usize..].to_vec()
}
