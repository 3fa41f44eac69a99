//! Random reads, writes, targets and idle steps against a byte model,
//! then a recovery: the array always holds what was written.

use crate::support;

use proptest::prelude::*;
use support::*;

#[derive(Clone, Debug)]
enum Act {
    Write { block: u64, blocks: u64, tag: u64 },
    Read { block: u64, blocks: u64 },
    Target { seed: u64, share: u64 },
    Idle { steps: usize },
    Recover,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        4 => (0u64..1000, 1u64..12, any::<u64>()).prop_map(|(block, blocks, tag)| Act::Write { block, blocks, tag }),
        3 => (0u64..1000, 1u64..12).prop_map(|(block, blocks)| Act::Read { block, blocks }),
        1 => (any::<u64>(), 1u64..4).prop_map(|(seed, share)| Act::Target { seed, share }),
        2 => (1usize..4).prop_map(|steps| Act::Idle { steps }),
        1 => Just(Act::Recover),
    ]
}

/// A target moving about 1/(share+1) of the units to pseudo-random columns.
fn target(units: u64, n: usize, seed: u64, share: u64) -> Vec<(u64, usize)> {
    let mix = |l: u64| (l ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 17;
    (0..units).filter(|&l| mix(l) % (share + 1) == 0).map(|l| (l, (mix(l) / 7 % n as u64) as usize)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn reads_and_writes_match_the_model(acts in proptest::collection::vec(act(), 1..40), unit_log in 0u32..3, raid5 in any::<bool>()) {
        let cfg = mosaic_remap::RemapConfig { unit: 4096 << unit_log, batch_units: 3, ..small_cfg() };
        let g = if raid5 { geo_level(&cfg, mosaic_core::Level::Raid5, 4, 16) } else { geo(&cfg, 4, 16) };
        let mut r = Rig::new(cfg, g);
        let cap = r.capacity();
        let blocks = cap / 4096;
        let mut m = Model::new(cap);
        for a in acts {
            match a {
                Act::Write { block, blocks: n, tag } => {
                    let b = block % blocks;
                    let n = n.min(blocks - b);
                    let d = pattern(tag, b * 4096, n * 4096);
                    r.write(b * 4096, &d).unwrap();
                    m.write(b * 4096, &d);
                }
                Act::Read { block, blocks: n } => {
                    let b = block % blocks;
                    let n = n.min(blocks - b);
                    prop_assert!(r.read(b * 4096, n * 4096).unwrap() == m.get(b * 4096, n * 4096), "read of {} blocks at block {} differs", n, b);
                }
                Act::Target { seed, share } => {
                    let units = r.pol.layout().capacity_units;
                    r.pol.set_target(target(units, 4, seed, share)).unwrap();
                }
                Act::Idle { steps } => {
                    r.idle(steps);
                }
                Act::Recover => r.recover(),
            }
        }
        placements_consistent(&r.pol);
        prop_assert!(r.read(0, cap).unwrap() == m.get(0, cap), "the volume differs from the model");
        r.recover();
        placements_consistent(&r.pol);
        prop_assert!(r.read(0, cap).unwrap() == m.get(0, cap), "the volume differs from the model");
    }
}
