//! The paper's equations (1)–(5), Table 1 and MAP on worked examples.

use mosaic_tier::rehypar::{Chunk, ChunkIdx, ExtentGeometry, MapOutcome};

fn c(level: u32, idx: ChunkIdx, start: u64, len: u64) -> Chunk {
    Chunk {
        level,
        idx,
        start,
        len,
    }
}
use ChunkIdx::{Head as H, Pow as P};

/// (starts, lens) of a partition, for compact asserts.
fn shape(v: &[Chunk]) -> Vec<(u64, u64)> {
    v.iter().map(|c| (c.start, c.len)).collect()
}

#[test]
fn eq1_eq2_level0_of_fig1() {
    // Fig. 1: s = 256, V = 32: c0H at 0 (1 block), c0j at 2^j (2^j blocks).
    let g = ExtentGeometry::new(256, 32).unwrap();
    let l0 = g.level0();
    assert_eq!(l0.len(), 9, "(log2 s) + 1 chunks");
    assert_eq!(
        shape(&l0),
        vec![
            (0, 1),
            (1, 1),
            (2, 2),
            (4, 4),
            (8, 8),
            (16, 16),
            (32, 32),
            (64, 64),
            (128, 128)
        ]
    );
    assert_eq!(l0[0].idx, H);
    assert_eq!(l0[8], c(0, P(7), 128, 128));
}

#[test]
fn eq3_recursive_split_of_fig1() {
    let g = ExtentGeometry::new(256, 32).unwrap();
    let c07 = g.level0()[8];
    // φ(128, c07) → {c1H, c10, ..., c16}
    let l1 = g.phi(&c07).unwrap();
    assert_eq!(l1.len(), 8);
    assert_eq!(l1[0], c(1, H, 128, 1));
    let c15 = l1[6];
    let c16 = l1[7];
    // "The starting block position of c15 is the one of c1H plus its length 32."
    assert_eq!(c15, c(1, P(5), 160, 32));
    assert_eq!(c16, c(1, P(6), 192, 64));
    // φ(160, c15) → {c2H, c20, ..., c24}
    let l2a = g.phi(&c15).unwrap();
    assert_eq!(
        shape(&l2a),
        vec![(160, 1), (161, 1), (162, 2), (164, 4), (168, 8), (176, 16)]
    );
    // φ(192, c16) → {c2H, c20, ..., c25}; c25 is the only one ≥ V.
    let l2b = g.phi(&c16).unwrap();
    assert_eq!(l2b.len(), 7);
    let big: Vec<_> = l2b.iter().filter(|c| g.phi(c).is_some()).collect();
    assert_eq!(big, vec![&c(2, P(5), 224, 32)]);
    // φ(224, c25) → {c3H, c30, ..., c34}
    let l3 = g.phi(big[0]).unwrap();
    assert_eq!(l3.len(), 6);
    assert_eq!((l3[0].start, l3[5]), (224, c(3, P(4), 240, 16)));
    // Chunks below V (and heads) are not partitioned.
    assert!(g.phi(&l3[5]).is_none() && g.phi(&l1[0]).is_none());
}

#[test]
fn partitions_tile_their_parent_exactly() {
    // Every φ covers its parent with no gap or overlap, at every level.
    for (s, v) in [(64, 8), (256, 8), (256, 32), (1024, 2)] {
        let g = ExtentGeometry::new(s, v).unwrap();
        let mut todo = vec![(0u64, s, g.level0())];
        while let Some((start, len, parts)) = todo.pop() {
            let mut at = start;
            for p in &parts {
                assert_eq!(p.start, at);
                at += p.len;
                if let Some(kids) = g.phi(p) {
                    todo.push((p.start, p.len, kids));
                }
            }
            assert_eq!(at, start + len);
        }
    }
}

#[test]
fn eq4_eq5_split_and_map_of_fig2() {
    // Fig. 2 / eq. (5): s = 128, V = 32, a file on blocks 0..=107.
    let g = ExtentGeometry::new(128, 32).unwrap();
    // split(c0H, 107) = c06, 2^6 ≤ 107 − 0 < 2^7
    let c06 = g.split_extent(107).unwrap();
    assert_eq!(c06, c(0, P(6), 64, 64));
    // split(c06, 107) = c15, 2^5 ≤ 107 − 64 < 2^6
    let c15 = g.split(&c06, 107).unwrap();
    assert_eq!(c15, c(1, P(5), 96, 32));
    // split(c15, 107) = c23, 2^3 ≤ 107 − 96 < 2^4; |c23| = 8 < V: stop.
    let c23 = g.split(&c15, 107).unwrap();
    assert_eq!(c23, c(2, P(3), 104, 8));
    assert_eq!(g.path(107).unwrap(), vec![c06, c15, c23]);
    // "the new file is allocated from c24": level 2, index 4, block 112.
    assert_eq!(
        g.map(107).unwrap(),
        MapOutcome::Next {
            level: 2,
            idx: 4,
            start: 112
        }
    );
    // split is only defined for chunks ≥ V and pos inside the chunk.
    assert!(g.split(&c23, 107).is_err());
    assert!(g.split(&c15, 50).is_err());
    assert!(g.split_extent(128).is_err());
}

#[test]
fn table1_extent_structure() {
    // 1 KB blocks: 64 KB → s = 64 (c0H..c05), 256 KB → s = 256 (c0H..c07).
    // Table 1's level ranges: (64,8): 0 ≤ L ≤ 2; (64,32): L = 0;
    // (256,8): 0 ≤ L ≤ 4; (256,32): 0 ≤ L ≤ 2.
    for (s, v, chunks, max_l) in [
        (64, 8, 7, 2),
        (64, 32, 7, 0),
        (256, 8, 9, 4),
        (256, 32, 9, 2),
    ] {
        let g = ExtentGeometry::new(s, v).unwrap();
        assert_eq!(g.level0().len(), chunks);
        assert_eq!(g.max_split_level(), Some(max_l), "s={s} V={v}");
    }
    // "partitioning takes place when a file is mapped from c03 (V = 8)
    // ... with V = 32, from c05".
    let g8 = ExtentGeometry::new(256, 8).unwrap();
    let g32 = ExtentGeometry::new(256, 32).unwrap();
    let split_from =
        |g: &ExtentGeometry| g.level0().iter().position(|c| g.phi(c).is_some()).unwrap();
    assert_eq!(g8.level0()[split_from(&g8)].idx, P(3));
    assert_eq!(g32.level0()[split_from(&g32)].idx, P(5));
    // Deepest split level is really reached, and never exceeded.
    assert_eq!(g8.path(255).unwrap().len(), 6, "levels 0..=5 hold pos 255");
}

#[test]
fn map_hand_cases() {
    // s = 64, V = 8. pos 0 is the head: next is c00 at block 1.
    let g = ExtentGeometry::new(64, 8).unwrap();
    assert_eq!(
        g.map(0).unwrap(),
        MapOutcome::Next {
            level: 0,
            idx: 0,
            start: 1
        }
    );
    // pos 5 in c02 (4..8), 2 < log2 V = 3: next c03 at 8 (MAP line 4).
    assert_eq!(
        g.map(5).unwrap(),
        MapOutcome::Next {
            level: 0,
            idx: 3,
            start: 8
        }
    );
    // s = 16, V = 4: pos 13 → c03 (8..16) → c12 (12..16) → c20 (13);
    // next c21 at 14.
    let g = ExtentGeometry::new(16, 4).unwrap();
    assert_eq!(
        g.map(13).unwrap(),
        MapOutcome::Next {
            level: 2,
            idx: 1,
            start: 14
        }
    );
    // pos 15 → c21 (14..16) is the last child of c12, the last child of
    // c03, the last chunk of E: the extent is full.
    assert_eq!(g.map(15).unwrap(), MapOutcome::Full);
    // s = 32, V = 4: pos 15 → same chain inside c03, carried up to c04.
    let g = ExtentGeometry::new(32, 4).unwrap();
    assert_eq!(
        g.map(15).unwrap(),
        MapOutcome::Next {
            level: 0,
            idx: 4,
            start: 16
        }
    );
}

#[test]
fn map_agrees_with_path_everywhere() {
    // For every pos: the next start is the end of the finest chunk < V
    // holding pos, and the (level, idx) label names a chunk starting there.
    for (s, v) in [(4, 2), (16, 4), (64, 8), (256, 32), (256, 2)] {
        let g = ExtentGeometry::new(s, v).unwrap();
        for pos in 0..s {
            let path = g.path(pos).unwrap();
            let last = *path.last().unwrap();
            assert!(last.len < v || last.idx == H);
            assert!(last.start <= pos && pos < last.start + last.len);
            match g.map(pos).unwrap() {
                MapOutcome::Full => assert_eq!(last.start + last.len, s),
                MapOutcome::Next { level, idx, start } => {
                    assert_eq!(start, last.start + last.len);
                    let at = g.path(start).unwrap();
                    let named = at.iter().find(|c| c.level == level).unwrap();
                    assert_eq!(
                        (named.idx, named.start),
                        (P(idx), start),
                        "s={s} v={v} pos={pos}"
                    );
                }
            }
        }
    }
}

#[test]
fn bad_geometry_is_an_error() {
    assert!(ExtentGeometry::new(2, 2).is_err(), "n > 1");
    assert!(ExtentGeometry::new(48, 8).is_err());
    assert!(ExtentGeometry::new(64, 1).is_err());
    assert!(ExtentGeometry::new(64, 12).is_err());
    assert!(ExtentGeometry::new(0, 8).is_err());
    assert!(ExtentGeometry::new(64, 8).unwrap().map(64).is_err());
}
