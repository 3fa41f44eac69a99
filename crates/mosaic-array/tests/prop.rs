//! Property tests: every geometry against a reference byte vector, with
//! random member failures up to M, then rebuild; rebuilt members must be
//! byte-identical to a twin array that never failed.

use std::sync::Arc;

use proptest::prelude::*;

use mosaic_array::{Array, CreateOptions, DATA_OFFSET};
use mosaic_core::Level;
use mosaic_dev::{MemMember, Member};

#[derive(Debug, Clone)]
enum Op {
    Write { off: u64, len: u64, seed: u8 },
    Read { off: u64, len: u64 },
    Fail { member: usize },
}

struct Case {
    level: &'static str,
    n: usize,
    unit: u64,
    block: u64,
    stripes: u64,
}

const CASES: &[Case] = &[
    Case { level: "raid0", n: 3, unit: 4096, block: 4096, stripes: 16 },
    Case { level: "raid1", n: 3, unit: 8192, block: 512, stripes: 16 },
    Case { level: "raid4", n: 4, unit: 4096, block: 512, stripes: 16 },
    Case { level: "raid5", n: 5, unit: 12 << 10, block: 4096, stripes: 12 },
    Case { level: "raid5", n: 3, unit: 896 << 10, block: 4096, stripes: 3 },
    Case { level: "raid6", n: 6, unit: 4096, block: 512, stripes: 16 },
    Case { level: "raid6", n: 5, unit: 12 << 10, block: 4096, stripes: 8 },
    Case { level: "rs:10+4", n: 14, unit: 12 << 10, block: 4096, stripes: 6 },
    Case { level: "rs:3+3", n: 6, unit: 4096, block: 512, stripes: 12 },
    Case { level: "cbro:4+1", n: 5, unit: 8192, block: 4096, stripes: 12 },
    Case { level: "cbro:3+2,cda=raid0:2", n: 7, unit: 4096, block: 512, stripes: 12 },
];

fn mem_array(c: &Case) -> (Array, Vec<Arc<MemMember>>) {
    let size = DATA_OFFSET + c.unit * c.stripes;
    let mems: Vec<Arc<MemMember>> = (0..c.n).map(|i| Arc::new(MemMember::new(format!("m{i}"), size))).collect();
    let members = mems.iter().map(|m| (m.clone() as Arc<dyn Member>, m.describe())).collect();
    let level: Level = c.level.parse().unwrap();
    let o = CreateOptions { level, members: Some(c.n), member_size: None, unit: c.unit, block: c.block, force: true, assume_clean: true };
    (Array::create_on(members, &o, true).unwrap(), mems)
}

fn fill(seed: u8, off: u64, len: u64) -> Vec<u8> {
    (0..len).map(|i| ((off + i) as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8).collect()
}

fn ops_strategy(c: &'static Case) -> impl Strategy<Value = Vec<Op>> {
    let cap_blocks = {
        let lvl: Level = c.level.parse().unwrap();
        let (k, _) = lvl.columns(c.n).unwrap();
        k as u64 * c.unit * c.stripes / c.block
    };
    let block = c.block;
    let max_len_blocks = (3 * c.unit / block).clamp(1, cap_blocks);
    let extent = (0..cap_blocks, 1..=max_len_blocks).prop_map(move |(start, len)| {
        let len = len.min(cap_blocks - start).max(1);
        let start = start.min(cap_blocks - len);
        (start * block, len * block)
    });
    let op = prop_oneof![
        5 => (extent.clone(), any::<u8>()).prop_map(|((off, len), seed)| Op::Write { off, len, seed }),
        3 => extent.prop_map(|(off, len)| Op::Read { off, len }),
        1 => (0..c.n).prop_map(|member| Op::Fail { member }),
    ];
    prop::collection::vec(op, 1..40)
}

fn run_case(c: &Case, ops: &[Op]) -> Result<(), TestCaseError> {
    let (arr, mems) = mem_array(c);
    let (twin, twin_mems) = mem_array(c);
    let cap = arr.capacity();
    let mut reference = vec![0u8; cap as usize];
    let m = arr.geometry().m;
    let mut failed: Vec<usize> = Vec::new();
    for op in ops {
        match *op {
            Op::Write { off, len, seed } => {
                let data = fill(seed, off, len);
                arr.write(off, &data).map_err(|e| TestCaseError::fail(format!("write {off}+{len}: {e}")))?;
                twin.write(off, &data).unwrap();
                reference[off as usize..(off + len) as usize].copy_from_slice(&data);
            }
            Op::Read { off, len } => {
                let mut buf = vec![0u8; len as usize];
                arr.read(off, &mut buf).map_err(|e| TestCaseError::fail(format!("read {off}+{len}: {e}")))?;
                prop_assert!(buf == reference[off as usize..(off + len) as usize], "read {}+{} differs from reference (failed {:?})", off, len, failed);
            }
            Op::Fail { member } => {
                // Within the code: at most M columns of any stripe out
                // (two members of one CBRO raid0 check drive array cost one).
                let more: Vec<usize> = failed.iter().copied().chain([member]).collect();
                if !failed.contains(&member) && arr.geometry().columns_out(&more) <= m {
                    arr.fail_member(member).unwrap();
                    failed.push(member);
                } else {
                    // More columns out than M (or a member twice) are refused, changing nothing.
                    prop_assert!(arr.fail_member(member).is_err());
                }
            }
        }
    }
    // Everything reads back, degraded or not.
    let mut all = vec![0u8; cap as usize];
    arr.read(0, &mut all).unwrap();
    prop_assert!(all == reference, "full read differs (failed {:?})", failed);
    // Replace and rebuild; members must then equal the never-failed twin.
    let size = DATA_OFFSET + c.unit * c.stripes;
    let mut new_mems = mems.clone();
    for &f in &failed {
        let nm = Arc::new(MemMember::new(format!("new{f}"), size));
        arr.replace_with(f, nm.clone(), "new").unwrap();
        new_mems[f] = nm;
    }
    if !failed.is_empty() {
        arr.rebuild(&|_, _| {}, Default::default()).unwrap();
    }
    for i in 0..c.n {
        let a = new_mems[i].snapshot();
        let b = twin_mems[i].snapshot();
        prop_assert!(a[DATA_OFFSET as usize..] == b[DATA_OFFSET as usize..], "{}: member {} differs from twin after rebuild (failed {:?})", c.level, i, failed);
    }
    let sc = arr.scrub(false, &|_, _| {}).unwrap();
    prop_assert!(sc.mismatched_stripes.is_empty(), "scrub mismatches {:?}", sc.mismatched_stripes);
    Ok(())
}

macro_rules! case_test {
    ($name:ident, $idx:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
            #[test]
            fn $name(ops in ops_strategy(&CASES[$idx])) {
                run_case(&CASES[$idx], &ops)?;
            }
        }
    };
}

case_test!(raid0_3, 0);
case_test!(raid1_3_mirror_512, 1);
case_test!(raid4_4_512, 2);
case_test!(raid5_5_unit12k, 3);
case_test!(raid5_3_unit896k, 4);
case_test!(raid6_6_512, 5);
case_test!(raid6_5_unit12k, 6);
case_test!(rs_10_4_unit12k, 7);
case_test!(rs_3_3_512, 8);
case_test!(cbro_4_1, 9);
case_test!(cbro_3_2_cda_raid0_2, 10);
