//! The caches in byte mode on in-memory members: every policy returns the
//! reference bytes at every point, and after a flush every stripe's code
//! agrees with its data.  Each step runs as the program it lowers into, on
//! the one executor.

use std::sync::Arc;

use mosaic_core::cache::{Keep, Recipe, Src, Step};
use mosaic_core::{CacheConfig, CachePolicy, CachedArray, Dir, FixedLayout, Geometry, Health, Layout, Level};
use mosaic_dev::{MemMember, Member};
use mosaic_exec::{Client, Executor};
use proptest::prelude::*;

const U: u64 = 4096;

struct Rig {
    layout: FixedLayout,
    mem: Vec<Arc<MemMember>>,
    exec: Executor,
    cache: CachedArray,
    h: Health,
}

impl Rig {
    fn new(level: &str, n: usize, stripes: u64, policy: CachePolicy, pages: u64) -> Rig {
        let m = Geometry::new(level.parse::<Level>().unwrap(), n, U, 4096, stripes * U).unwrap().m as u64;
        Rig::with(level, n, stripes, CacheConfig { policy, write_cache: pages * U, parity_cache: 3 * U * m, old_data: 4 * U })
    }

    fn with(level: &str, n: usize, stripes: u64, cfg: CacheConfig) -> Rig {
        let geo = Geometry::new(level.parse::<Level>().unwrap(), n, U, 4096, stripes * U).unwrap();
        let layout = FixedLayout::new(geo).unwrap();
        let cache = CachedArray::new(&layout, cfg).unwrap().with_bytes().unwrap();
        let mem: Vec<Arc<MemMember>> = (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), stripes * U))).collect();
        let exec = Executor::new(mem.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0);
        Rig { mem, exec, h: Health::all_active(n), layout, cache }
    }

    /// Lower, run, commit and recycle each step in order; a step's program
    /// does exactly its plan's device operations.
    fn exec(&mut self, steps: Vec<Step>) {
        for st in steps {
            let p = self.cache.lower(&st, false).unwrap();
            let ops = |d: Dir| p.io().filter(|(x, _)| *x == d).flat_map(|(_, ios)| ios.iter().map(|io| io.op)).collect::<Vec<_>>();
            assert_eq!(ops(Dir::Read), st.sp.reads);
            assert_eq!(ops(Dir::Write), st.sp.writes);
            let kept = self.exec.run(&p, Client::None, None).unwrap();
            // As the real volume does: the program's references go first,
            // so the code is stored over the old and the pages reused.
            drop(p);
            self.cache.commit(&st, &kept).unwrap();
            self.cache.recycle(st);
        }
    }

    fn write(&mut self, off: u64, data: &[u8]) {
        let steps = self.cache.write_steps(off, data.len() as u64, Some(data), &self.h).unwrap();
        self.exec(steps);
    }

    fn read(&self, off: u64, len: u64) -> Vec<u8> {
        let mut out = vec![0u8; len as usize];
        let p = self.layout.read_program(off, len, &self.h).unwrap();
        self.exec.run(&p, Client::Out(&mut out), None).unwrap();
        // Cached pages are newer than the members.
        let g = self.layout.geometry();
        for e in g.split(off, len) {
            for c in &e.cols {
                if let Some(p) = self.cache.cached_page(e.stripe, c.col) {
                    out[c.buf_off as usize..(c.buf_off + c.end - c.start) as usize].copy_from_slice(&p[c.start as usize..c.end as usize]);
                }
            }
        }
        out
    }

    fn scrub_clean(&self) -> bool {
        let g = self.layout.geometry();
        (0..g.stripes).all(|s| {
            let sp = self.layout.planner.plan_scrub(s, 0, U, &self.h).unwrap();
            let reads: Vec<Vec<u8>> = sp
                .reads
                .iter()
                .map(|op| {
                    let mut b = vec![0u8; op.len as usize];
                    self.mem[op.member].read_at(&mut b, op.offset).unwrap();
                    b
                })
                .collect();
            self.layout.scrub_check(&sp, &reads).unwrap().bad_cols.is_empty()
        })
    }
}

fn run(level: &str, n: usize, policy: CachePolicy, pages: u64, ops: &[(u64, u64, u8)]) {
    let stripes = 16;
    let mut r = Rig::new(level, n, stripes, policy, pages);
    let cap = r.layout.capacity();
    let mut model = vec![0u8; cap as usize];
    for (i, &(slot, npages, seed)) in ops.iter().enumerate() {
        let len = npages * U;
        let off = (slot * U) % (cap - len + U) / U * U;
        let data: Vec<u8> = (0..len).map(|j| (j as u8).wrapping_mul(seed | 1).wrapping_add(i as u8)).collect();
        r.write(off, &data);
        model[off as usize..(off + len) as usize].copy_from_slice(&data);
        if i % 7 == 0 {
            assert!(r.read(0, cap) == model, "{policy:?} {level}: read back after op {i}");
        }
    }
    assert!(r.read(0, cap) == model, "{policy:?} {level}: final read");
    let steps = r.cache.flush_steps(&r.h.clone()).unwrap();
    r.exec(steps);
    assert!(r.cache.parity_rows().is_empty());
    assert!(r.read(0, cap) == model, "{policy:?} {level}: after flush");
    assert!(r.scrub_clean(), "{policy:?} {level}: code disagrees with data after flush");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn every_policy_matches_the_reference(ops in prop::collection::vec((0u64..200, 1u64..=3, any::<u8>()), 1..120), pages in 1u64..6) {
        for p in CachePolicy::ALL {
            run("raid5", 5, p, pages, &ops);
            run("raid6", 6, p, pages, &ops);
            run("rs:3+3", 6, p, pages, &ops);
        }
    }
}

#[test]
fn byte_mode_wants_whole_pages() {
    let geo = Geometry::new(Level::Raid5, 5, 2 * U, 4096, 8 * U).unwrap();
    let l = FixedLayout::new(geo).unwrap();
    let mut c = CachedArray::new(&l, CacheConfig::uniform(CachePolicy::Ppc, 1 << 20)).unwrap().with_bytes().unwrap();
    let e = c.write_steps(4096, 4096, Some(&[0u8; 4096]), &Health::all_active(5)).unwrap_err();
    assert!(e.to_string().contains("whole 8192-byte pages"), "{e}");
    let mut r = Rig::new("raid5", 5, 4, CachePolicy::Ppc, 2);
    let e = r.cache.write_steps(0, 4096, None, &r.h.clone()).unwrap_err();
    assert!(e.to_string().contains("needs the write's bytes"), "{e}");
    r.write(0, &[1u8; 4096]);
}

/// Full destages (a journal checkpoint's) let go of every page the write
/// cache held; writes after them reuse those buffers, pages and code
/// (two lengths under raid6) alike.  Over six rounds of 400 random
/// writes, each ending in a full destage, the cache allocates
/// no more buffers than its structures hold when full (plus the pages of
/// one write's steps in flight), and every byte reads back.
#[test]
fn a_refilled_cache_reuses_the_buffers_a_full_destage_let_go() {
    for (policy, level, n) in CachePolicy::ALL.into_iter().flat_map(|p| [(p, "raid5", 5), (p, "raid6", 6)]) {
        let cfg = CacheConfig { policy, write_cache: 96 * U, parity_cache: 48 * U, old_data: 96 * U };
        let mut r = Rig::with(level, n, 256, cfg);
        let cap = r.layout.capacity();
        let mut model = vec![0u8; cap as usize];
        let mut x = 7u64;
        for round in 0..6u8 {
            for i in 0..400u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let off = (x >> 33) % (cap / U) * U;
                let data = vec![round.wrapping_mul(31).wrapping_add(i as u8); U as usize];
                r.write(off, &data);
                model[off as usize..(off + U) as usize].copy_from_slice(&data);
            }
            let steps = r.cache.flush_steps(&r.h.clone()).unwrap();
            r.exec(steps);
        }
        let (held, allocated) = (r.cache.buffers_held() as u64, r.cache.buffers_allocated());
        assert!(held > 64, "{policy:?} {level}: the structures hold {held} buffers");
        // In flight besides: the pages of the rows one write destages
        // (about two rows' here).  With at most 64 spare buffers kept, as
        // before, raid5 allocated 262, 550, 550 and 1,207; with one spare
        // stack for pages and code alike, raid6's fpc 391.
        assert!(allocated <= held + 10, "{policy:?} {level}: {allocated} buffers allocated for structures holding {held}");
        assert!(r.read(0, cap) == model, "{policy:?} {level}: read back");
        assert!(r.scrub_clean(), "{policy:?} {level}: code disagrees with data");
    }
}

/// A full destage run row by row (`flush_next_row`, each row's steps run
/// before the next is planned, then the parity rows one at a time, as the
/// cache volume's checkpoint does) plans the very steps `flush_steps`
/// plans whole, in its order, and leaves the same bytes on every member.
#[test]
fn a_full_destage_row_by_row_runs_the_steps_of_flush_steps() {
    for (policy, level, n) in CachePolicy::ALL.into_iter().flat_map(|p| [(p, "raid5", 5), (p, "raid6", 6)]) {
        let cfg = CacheConfig { policy, write_cache: 24 * U, parity_cache: 12 * U, old_data: 16 * U };
        let (mut whole, mut by_row) = (Rig::with(level, n, 64, cfg), Rig::with(level, n, 64, cfg));
        let cap = whole.layout.capacity();
        let mut x = 11u64;
        for i in 0..300u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let off = (x >> 33) % (cap / U) * U;
            let data = vec![i as u8 ^ 0x5a; U as usize];
            whole.write(off, &data);
            by_row.write(off, &data);
        }
        let h = whole.h.clone();
        let steps = whole.cache.flush_steps(&h).unwrap();
        let planned: Vec<_> = steps.iter().map(|s| s.sp.clone()).collect();
        whole.exec(steps);
        let mut ran = Vec::new();
        while let Some(steps) = by_row.cache.flush_next_row(&h).unwrap() {
            ran.extend(steps.iter().map(|s| s.sp.clone()));
            by_row.exec(steps);
        }
        for row in by_row.cache.parity_rows() {
            let steps = by_row.cache.flush_rows(&[row], &h).unwrap();
            ran.extend(steps.iter().map(|s| s.sp.clone()));
            by_row.exec(steps);
        }
        assert!(!planned.is_empty(), "{policy:?} {level}: nothing to destage");
        assert_eq!(ran, planned, "{policy:?} {level}: the steps");
        for (a, b) in whole.mem.iter().zip(&by_row.mem) {
            let (mut x, mut y) = (vec![0u8; (64 * U) as usize], vec![0u8; (64 * U) as usize]);
            a.read_at(&mut x, 0).unwrap();
            b.read_at(&mut y, 0).unwrap();
            assert!(x == y, "{policy:?} {level}: member bytes differ");
        }
        assert!(by_row.scrub_clean(), "{policy:?} {level}: code disagrees with data");
    }
}

/// A step that keeps its row's code and did not run (its program failed)
/// leaves that row's flush failing, never writing code the drives' data
/// does not match: ppc's stored partial parity is dropped, ppc+data's
/// buffered values of the row (its code's terms) too.
#[test]
fn a_kept_step_that_did_not_run_makes_its_rows_flush_fail() {
    for policy in [CachePolicy::Ppc, CachePolicy::PpcData] {
        let mut r = Rig::new("raid5", 5, 16, policy, 2);
        let row = r.layout.geometry().stripe_data_bytes();
        // Two pages of row 0: their partial parity, not their change.
        r.write(0, &[7u8; 2 * U as usize]);
        // The two-page cache destages row 0 to take row 1's page.
        let h = r.h.clone();
        let steps = r.cache.write_steps(row, U, Some(&[9u8; U as usize]), &h).unwrap();
        let kept: Vec<Keep> = steps.iter().filter_map(|st| match st.recipe {
            Recipe::Parity { keep, .. } if st.sp.stripe == 0 => Some(keep),
            _ => None,
        }).collect();
        let want = if policy == CachePolicy::Ppc { Keep::Code } else { Keep::Buffered };
        assert_eq!(kept, vec![want], "{policy:?}: row 0 destaged, its code kept");
        steps.iter().for_each(|st| r.cache.abort(st));
        let mut failed = None;
        let flush = match r.cache.flush_steps(&h) {
            Ok(steps) => steps,
            Err(e) => {
                failed = Some(format!("planning: {e}"));
                vec![]
            }
        };
        for st in flush {
            match r.cache.lower(&st, false) {
                Err(e) => {
                    assert_eq!(st.sp.stripe, 0, "{policy:?}: {e}");
                    failed = Some(e.to_string());
                    break;
                }
                Ok(p) => {
                    let kept = r.exec.run(&p, Client::None, None).unwrap();
                    drop(p);
                    r.cache.commit(&st, &kept).unwrap();
                }
            }
        }
        let e = failed.unwrap_or_else(|| panic!("{policy:?}: row 0's flush ran after its destage failed"));
        assert!(e.contains("stripe 0"), "{policy:?}: {e}");
    }
}

/// A row whose code member failed: its cached parity's flush still reads
/// what its plan reads and writes no code (none can be written), without
/// error, under every policy that caches parity; the data stays readable.
#[test]
fn a_flush_of_a_row_whose_code_member_failed_writes_no_code() {
    for policy in [CachePolicy::Fpc, CachePolicy::Ppc, CachePolicy::PpcData] {
        let mut r = Rig::new("raid5", 5, 16, policy, 2);
        let g = r.layout.geometry().clone();
        let mut model = vec![0u8; r.layout.capacity() as usize];
        // Two pages of each of rows 0..4: each destage leaves a cached parity.
        for (i, s) in (0..4u64).enumerate() {
            let off = s * g.stripe_data_bytes();
            let data = vec![i as u8 + 1; 2 * U as usize];
            r.write(off, &data);
            model[off as usize..off as usize + data.len()].copy_from_slice(&data);
        }
        assert!(r.cache.parity_rows().contains(&0), "{policy:?}: row 0's parity cached");
        r.h.states[g.member_of(0, g.k)] = mosaic_core::MemberState::Failed;
        let h = r.h.clone();
        let steps = r.cache.flush_steps(&h).unwrap();
        let row0: Vec<_> = steps.iter().filter(|st| st.sp.stripe == 0).collect();
        assert!(row0.iter().all(|st| st.sp.writes.iter().all(|o| o.role != mosaic_core::Role::Code)), "{policy:?}: no code written to the failed member");
        r.exec(steps);
        assert!(r.cache.parity_rows().is_empty(), "{policy:?}");
        assert!(r.read(0, r.layout.capacity()) == model, "{policy:?}: data after the flush");
    }
}

/// A summed entry's step computes and writes no code: one that carries
/// terms or a code write is refused by name when lowered, not run.
#[test]
fn a_summed_step_with_code_work_is_refused_by_name() {
    let mut r = Rig::new("raid5", 5, 16, CachePolicy::PpcData, 2);
    let row = r.layout.geometry().stripe_data_bytes();
    r.write(0, &[7u8; 2 * U as usize]);
    let h = r.h.clone();
    let steps = r.cache.write_steps(row, U, Some(&[9u8; U as usize]), &h).unwrap();
    let st = steps.iter().find(|st| matches!(st.recipe, Recipe::Parity { keep: Keep::Buffered, .. })).expect("row 0's fold is summed");
    assert!(r.cache.lower(st, true).is_ok());
    let mut bad = st.clone();
    if let Recipe::Parity { terms, .. } = &mut bad.recipe {
        terms.push((0, Src::Page));
    }
    let e = r.cache.lower(&bad, true).unwrap_err().to_string();
    assert!(e.contains("stripe 0: a summed entry's step computing or writing code"), "{e}");
}
