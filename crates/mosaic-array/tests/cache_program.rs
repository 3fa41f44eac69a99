//! The small-write caches' steps as programs on the real executor: every
//! step lowers into one program (`CachedArray::lower`) that does exactly
//! its plan's device operations; run on RAM members through
//! `mosaic_exec::Executor` and committed, the code on the members always
//! equals an independent encode of their data (except the rows whose
//! parity the cache holds), and counting mode lowers the very same
//! programs, byte buffers aside.  The members lend the reads a program
//! does not overwrite.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_core::cache::{Keep, Step};
use mosaic_core::{Buf, CacheConfig, CachePolicy, CachedArray, Dir, FixedLayout, Frontend, Geometry, Health, Level, Program};
use mosaic_dev::{MemMember, Member};
use mosaic_exec::{Client, Executor};

const U: u64 = 4096;
const STRIPES: u64 = 16;

struct Rig {
    mems: Vec<Arc<MemMember>>,
    exec: Executor,
    cache: CachedArray,
    geo: Geometry,
    h: Health,
    /// Reads the members lent instead of copying (`mosaic_exec::lendable`).
    lent: usize,
}

impl Rig {
    fn new(level: &str, n: usize, policy: CachePolicy, pages: u64) -> Rig {
        let geo = Geometry::new(level.parse::<Level>().unwrap(), n, U, 4096, STRIPES * U).unwrap();
        let layout = FixedLayout::new(geo.clone()).unwrap();
        let cfg = CacheConfig { policy, write_cache: pages * U, parity_cache: 2 * U * geo.m as u64, old_data: 3 * U };
        let cache = CachedArray::new(&layout, cfg).unwrap().with_bytes().unwrap();
        let mems: Vec<Arc<MemMember>> = (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), STRIPES * U))).collect();
        let exec = Executor::new(mems.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0);
        Rig { mems, exec, cache, geo, h: Health::all_active(n), lent: 0 }
    }

    /// Lower, run and commit each step in order; the program of a step
    /// does exactly its plan's reads and writes.  The programs run.
    fn exec(&mut self, steps: Vec<Step>) -> Vec<Program> {
        let mut ran = Vec::new();
        for st in steps {
            let p = self.cache.lower(&st, false).unwrap();
            assert_eq!(ops(&p, Dir::Read), st.sp.reads);
            assert_eq!(ops(&p, Dir::Write), st.sp.writes);
            self.lent += lent_reads(&p, matches!(st.recipe, mosaic_core::cache::Recipe::Parity { .. }));
            let kept = self.exec.run(&p, Client::None, None).unwrap();
            self.cache.commit(&st, &kept).unwrap();
            ran.push(p);
        }
        ran
    }

    fn write(&mut self, off: u64, data: &[u8]) -> Vec<Program> {
        let steps = self.cache.write_steps(off, data.len() as u64, Some(data), &self.h).unwrap();
        self.exec(steps)
    }

    fn unit(&self, stripe: u64, col: usize) -> Vec<u8> {
        let mut b = vec![0u8; U as usize];
        self.mems[self.geo.member_of(stripe, col)].read_at(&mut b, self.geo.offset_of(stripe, col)).unwrap();
        b
    }

    /// Every row whose parity is not cached: the code on the members is
    /// the encode of the data on the members.
    fn check_code(&self, what: &str) {
        let (k, m) = (self.geo.k, self.geo.m);
        let code = mosaic_ec::Code::new(k, m).unwrap();
        let cached = self.cache.parity_rows();
        for s in (0..self.geo.stripes).filter(|s| !cached.contains(s)) {
            let data: Vec<Vec<u8>> = (0..k).map(|c| self.unit(s, c)).collect();
            let mut want = vec![vec![0u8; U as usize]; m];
            let d: Vec<&[u8]> = data.iter().map(|v| v.as_slice()).collect();
            let mut w: Vec<&mut [u8]> = want.iter_mut().map(|v| v.as_mut_slice()).collect();
            code.encode(&d, &mut w).unwrap();
            for (r, want) in want.iter().enumerate() {
                assert!(self.unit(s, k + r) == *want, "{what}: stripe {s} code row {r} is not the encode of its data");
            }
        }
    }

    /// The members' data, in logical order.
    fn data(&self) -> Vec<u8> {
        (0..self.geo.stripes).flat_map(|s| (0..self.geo.k).flat_map(move |c| self.unit(s, c))).collect()
    }
}

/// The device operations of one direction, in program order.
fn ops(p: &Program, d: Dir) -> Vec<mosaic_core::DevOp> {
    p.io().filter(|(x, _)| *x == d).flat_map(|(_, ios)| ios.iter().map(|io| io.op)).collect()
}

/// How many of `p`'s reads its members may lend (`mosaic_exec::lendable`,
/// whose rules mosaic-exec's tests check); in a program the cache builds
/// (`own`), at least every read of a range the program does not write (a
/// flush's uncovered pages, an RCW's untouched ones).  The layout's own
/// programs (a write that bypasses the cache) read into one buffer.
fn lent_reads(p: &Program, own: bool) -> usize {
    let lend = mosaic_exec::lendable(p);
    let writes = ops(p, Dir::Write);
    let mut n = 0;
    for (_, ios) in p.io().filter(|(d, _)| *d == Dir::Read) {
        for io in ios {
            let overwritten = writes.iter().any(|w| w.overlaps(&io.op));
            let lent = lend.get(io.at.buf as usize).copied().unwrap_or(false);
            assert!(!own || lent || overwritten, "a cache program's read not lent: {:?}", io.op);
            n += lent as usize;
        }
    }
    n
}

/// Random whole-page writes of 1 to 3 pages at page offsets.
fn writes(seed: u64, cap: u64, n: usize) -> Vec<(u64, Vec<u8>)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let len = rng.gen_range(1..=3u64) * U;
            let off = rng.gen_range(0..=(cap - len) / U) * U;
            (off, (0..len).map(|_| rng.gen()).collect())
        })
        .collect()
}

#[test]
fn lowered_steps_write_the_encoded_code_on_ram_members() {
    for (level, n) in [("raid5", 5), ("raid6", 6), ("rs:3+3", 6)] {
        for p in CachePolicy::ALL {
            for pages in [1, 4] {
                let what = format!("{level} {p:?} {pages} pages");
                let mut r = Rig::new(level, n, p, pages);
                let cap = STRIPES * r.geo.stripe_data_bytes();
                let mut model = vec![0u8; cap as usize];
                for (i, (off, data)) in writes(pages + n as u64, cap, 80).into_iter().enumerate() {
                    r.write(off, &data);
                    model[off as usize..off as usize + data.len()].copy_from_slice(&data);
                    r.check_code(&format!("{what} after write {i}"));
                }
                let steps = r.cache.flush_steps(&r.h.clone()).unwrap();
                r.exec(steps);
                assert!(r.cache.parity_rows().is_empty(), "{what}");
                r.check_code(&format!("{what} after the flush"));
                assert!(r.data() == model, "{what}: members' data after the flush");
                // The partial parities' flushes read pages the program
                // does not write: the RAM members lent them.
                if matches!(p, CachePolicy::Ppc | CachePolicy::PpcData) {
                    assert!(r.lent > 0, "{what}: no read lent");
                }
            }
        }
    }
}

/// A byte-mode program with its byte buffers (the cache's pages, a
/// bypassing write's bytes) as scratch of their length.
fn as_counted(mut p: Program) -> Program {
    for b in &mut p.bufs {
        if matches!(b, Buf::Bytes(_) | Buf::Page(_)) {
            *b = Buf::Scratch(b.len());
        }
    }
    p
}

#[test]
fn counting_mode_lowers_the_programs_byte_mode_runs() {
    for (level, n) in [("raid5", 5), ("raid6", 6)] {
        for p in CachePolicy::ALL {
            let what = format!("{level} {p:?}");
            let mut r = Rig::new(level, n, p, 3);
            let layout = FixedLayout::new(r.geo.clone()).unwrap();
            let mut counted = CachedArray::new(&layout, r.cache.config()).unwrap();
            let cap = STRIPES * r.geo.stripe_data_bytes();
            for (i, (off, data)) in writes(7, cap, 60).into_iter().enumerate() {
                let ran: Vec<Program> = r.write(off, &data).into_iter().map(as_counted).collect();
                let staged = counted.submit(true, off, data.len() as u64, 0, &r.h.clone()).unwrap();
                assert!(staged.fg == ran, "{what}: write {i}: the simulator's programs differ from those run");
            }
            let h = r.h.clone();
            let ran: Vec<Program> = {
                let steps = r.cache.flush_steps(&h).unwrap();
                r.exec(steps).into_iter().map(as_counted).collect()
            };
            let lowered: Vec<Program> = counted.flush_steps(&h).unwrap().iter().map(|st| counted.lower(st, false).unwrap()).collect();
            assert!(lowered == ran, "{what}: flush programs differ");
        }
    }
}

/// A step that keeps its code logs a resync mark of its row, and
/// keeps the code buffer; a step that writes its code does neither.
#[test]
fn a_kept_code_is_marked_and_kept() {
    for p in CachePolicy::ALL {
        let mut r = Rig::new("raid5", 5, p, 1);
        let mut seen = 0;
        // One-page writes over two stripes through a one-page cache.
        for (off, data) in (0..12u64).map(|i| ((i * 3 % 8) * U, vec![i as u8 + 1; U as usize])) {
            let steps = r.cache.write_steps(off, data.len() as u64, Some(&data), &r.h.clone()).unwrap();
            for st in steps {
                let prog = r.cache.lower(&st, true).unwrap();
                let marks: Vec<mosaic_core::Mark> = prog
                    .phases
                    .iter()
                    .flat_map(|ph| match ph {
                        mosaic_core::Phase::Write { marks, .. } => marks.clone(),
                        _ => vec![],
                    })
                    .collect();
                let keep = match st.recipe {
                    mosaic_core::cache::Recipe::Parity { keep, .. } => keep,
                    _ => Keep::No,
                };
                let keeps = keep.stale();
                assert_eq!(marks, if keeps { vec![mosaic_core::Mark::Resync { row: st.sp.stripe }] } else { vec![] }, "{p:?}");
                // Code bytes are kept unless the row's code is the sum of
                // its data buffer's values (ppc+data without a change).
                assert_eq!(prog.keep.len(), (keep == Keep::Code) as usize, "{p:?}");
                assert_eq!(keep == Keep::Buffered, p == CachePolicy::PpcData && keeps && !prog.phases.iter().any(|ph| matches!(ph, mosaic_core::Phase::Compute(_))), "{p:?}");
                seen += keeps as usize;
                let kept = r.exec.run(&prog, Client::None, None).unwrap();
                r.cache.commit(&st, &kept).unwrap();
            }
        }
        assert_eq!(seen > 0, p != CachePolicy::None, "{p:?}: {seen} steps kept their code");
    }
}
