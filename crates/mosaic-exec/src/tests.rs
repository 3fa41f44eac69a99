use std::io;
use std::sync::Arc;

use mosaic_core::{Buf, Combine, DevOp, Io, Mark, Method, Phase, Program, Ref, Role};
use mosaic_dev::{FaultyMember, MemMember, Member};
use proptest::prelude::*;

use crate::{Client, DevWrite, ExecError, Executor, Failure, Held, JournalHook, Planner};

fn mems(n: usize) -> Vec<Arc<MemMember>> {
    (0..n).map(|i| Arc::new(MemMember::new(format!("m{i}"), 1 << 20))).collect()
}

fn exec_on(ms: &[Arc<MemMember>]) -> Executor {
    Executor::new(ms.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0)
}

fn op(member: usize, offset: u64, len: u64, role: Role) -> DevOp {
    DevOp { member, offset, len, role, col: member }
}

fn peek(m: &MemMember, off: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    m.read_at(&mut b, off).unwrap();
    b
}

/// A raid5-style read-modify-write written as a program: P' = P + D + D'.
fn rmw(data_member: usize, parity_member: usize, offset: u64) -> Program {
    let mut p = Program { locks: vec![offset / 4096], methods: vec![Method::Rmw], ..Default::default() };
    let input = p.buf(Buf::Input { off: 0, len: 4096 });
    let old = p.buf(Buf::Scratch(8192));
    p.phases.push(Phase::Read(vec![
        Io::new(op(data_member, offset, 4096, Role::Data), Ref::new(old, 0)),
        Io::new(op(parity_member, offset, 4096, Role::Code), Ref::new(old, 4096)),
    ]));
    p.phases.push(Phase::Compute(vec![Combine { dst: Ref::new(old, 4096), len: 4096, acc: true, terms: vec![(1, Ref::new(old, 0)), (1, Ref::new(input, 0))] }]));
    p.phases.push(Phase::Write {
        ops: vec![Io::new(op(data_member, offset, 4096, Role::Data), Ref::new(input, 0)), Io::new(op(parity_member, offset, 4096, Role::Code), Ref::new(old, 4096))],
        journal: true,
        marks: vec![],
    });
    p
}

#[test]
fn a_read_modify_write_program_keeps_parity_and_counts_every_op() {
    let ms = mems(3);
    let ex = exec_on(&ms);
    let a = vec![0x5au8; 4096];
    let b = vec![0xc3u8; 4096];
    ex.run(&rmw(0, 2, 8192), Client::In(&a), None).unwrap();
    ex.run(&rmw(1, 2, 8192), Client::In(&b), None).unwrap();
    let p = peek(&ms[2], 8192, 4096);
    assert!(p.iter().all(|&x| x == 0x5a ^ 0xc3));
    let c = ex.counters();
    assert_eq!((c.ops.data_reads, c.ops.code_reads, c.ops.data_writes, c.ops.code_writes, c.ops.stripes_rmw), (2, 2, 2, 2, 2));
    assert_eq!(c.members[2].reads, 2);
    assert_eq!(c.members[2].write_bytes, 8192);
}

#[test]
fn reads_land_in_the_client_buffer_and_decode_is_a_combination() {
    let ms = mems(3);
    ms[0].write_at(&[1u8; 4096], 0).unwrap();
    ms[1].write_at(&[2u8; 4096], 0).unwrap();
    ms[2].write_at(&[3u8; 4096], 0).unwrap();
    let ex = exec_on(&ms);
    // Column 0 read straight into the client's buffer; column 1 rebuilt
    // from 0 and P (a degraded read).
    let mut p = Program::default();
    let out0 = p.buf(Buf::Output { off: 0, len: 4096 });
    let out1 = p.buf(Buf::Output { off: 4096, len: 4096 });
    let par = p.buf(Buf::Scratch(4096));
    p.phases.push(Phase::Read(vec![Io::new(op(0, 0, 4096, Role::Data), Ref::new(out0, 0)), Io::new(op(2, 0, 4096, Role::Code), Ref::new(par, 0))]));
    p.phases.push(Phase::Compute(vec![Combine { dst: Ref::new(out1, 0), len: 4096, acc: false, terms: vec![(1, Ref::new(out0, 0)), (1, Ref::new(par, 0))] }]));
    let mut buf = vec![0u8; 8192];
    ex.run(&p, Client::Out(&mut buf), None).unwrap();
    assert!(buf[..4096].iter().all(|&x| x == 1));
    assert!(buf[4096..].iter().all(|&x| x == 1 ^ 3));
}

/// Logs where writes go (member, offset, total length), the bytes of
/// each write as its parts, and the marks beside them.
#[derive(Default)]
struct Log(parking_lot::Mutex<Vec<(usize, u64, usize)>>, parking_lot::Mutex<Vec<Mark>>, parking_lot::Mutex<Vec<Vec<Vec<u8>>>>);
impl JournalHook for Log {
    fn log<'a>(&'a self, writes: &[DevWrite<'_>], marks: &[Mark]) -> Result<Box<dyn Held + 'a>, String> {
        self.0.lock().extend(writes.iter().map(|(o, b)| (o.member, o.offset, b.iter().map(|p| p.len()).sum())));
        self.2.lock().extend(writes.iter().map(|(_, b)| b.iter().map(|p| p.to_vec()).collect()));
        self.1.lock().extend_from_slice(marks);
        Ok(Box::new(()))
    }
}

struct Refuse;
impl JournalHook for Refuse {
    fn log<'a>(&'a self, _: &[DevWrite<'_>], _: &[Mark]) -> Result<Box<dyn Held + 'a>, String> {
        Err("journal full".into())
    }
}

#[test]
fn a_journaled_phase_is_logged_first_and_a_refused_log_writes_nothing() {
    let ms = mems(3);
    let ex = exec_on(&ms);
    let log = Log::default();
    let mut p = rmw(0, 2, 0);
    if let Some(Phase::Write { marks, .. }) = p.phases.last_mut() {
        marks.push(Mark::Resync { row: 0 });
    }
    ex.run(&p, Client::In(&[7u8; 4096]), Some(&log)).unwrap();
    assert_eq!(*log.0.lock(), vec![(0, 0, 4096), (2, 0, 4096)]);
    assert_eq!(*log.1.lock(), vec![Mark::Resync { row: 0 }], "marks reach the journal beside the writes");
    let err = ex.run(&rmw(0, 2, 4096), Client::In(&[9u8; 4096]), Some(&Refuse)).unwrap_err();
    assert!(matches!(err, ExecError::Journal(_)));
    assert!(peek(&ms[0], 4096, 4096).iter().all(|&x| x == 0), "nothing written after a refused log");
}

#[test]
fn a_merged_write_reaches_member_and_journal_as_its_pieces_without_a_gather_copy() {
    // Two 4 KiB pieces per member, 8 KiB apart in the client's buffer
    // (stripes of 4 KiB units on two members), plus a parity piece from
    // scratch computed in the program: merged into one write per member.
    let ms = mems(2);
    let ex = exec_on(&ms);
    let k = 4096u64;
    let mut p = Program::default();
    let input = p.buf(Buf::Input { off: 0, len: 16384 });
    let code = p.buf(Buf::Scratch(4096));
    p.phases.push(Phase::Compute(vec![Combine { dst: Ref::new(code, 0), len: 4096, acc: false, terms: vec![(1, Ref::new(input, 4096)), (1, Ref::new(input, 12288))] }]));
    let ios = vec![
        Io::new(op(0, 0, k, Role::Data), Ref::new(input, 0)),
        Io::new(op(1, 0, k, Role::Data), Ref::new(input, 4096)),
        Io::new(op(0, k, k, Role::Data), Ref::new(input, 8192)),
        Io::new(op(1, k, k, Role::Code), Ref::new(code, 0)),
    ];
    p.phases.push(Phase::Write { ops: ios, journal: true, marks: Vec::new() });
    mosaic_core::merge_contiguous(&mut p);
    assert_eq!(p.phases.len(), 2, "no gather phase: {:?}", p.phases);
    assert!(p.bufs.iter().any(|b| matches!(b, Buf::Gather(_))));
    let client: Vec<u8> = (0..16384u32).map(|i| (i / 4096 + 1) as u8 * 16 + (i % 7) as u8).collect();
    let log = Log::default();
    ex.run(&p, Client::In(&client), Some(&log)).unwrap();
    let code_bytes: Vec<u8> = client[4096..8192].iter().zip(&client[12288..]).map(|(a, b)| a ^ b).collect();
    let m0 = [&client[..4096], &client[8192..12288]].concat();
    let m1 = [&client[4096..8192], &code_bytes[..]].concat();
    assert_eq!(peek(&ms[0], 0, 8192), m0);
    assert_eq!(peek(&ms[1], 0, 8192), m1);
    assert_eq!(*log.0.lock(), vec![(0, 0, 8192), (1, 0, 8192)]);
    let parts = log.2.lock();
    assert_eq!(parts.iter().map(|w| w.len()).collect::<Vec<_>>(), vec![2, 2], "each write logged as its two pieces");
    assert_eq!(parts[0].concat(), m0);
    assert_eq!(parts[1].concat(), m1);
    let c = ex.counters();
    assert_eq!((c.members[0].writes, c.members[0].write_bytes, c.members[1].writes), (1, 8192, 1), "one device write per member");
    // A write of part of a gather (a policy bug validation catches) takes
    // no bytes, never the whole gather's.
    let g = p.bufs.iter().position(|b| matches!(b, Buf::Gather(_))).unwrap();
    let slots = crate::slots::materialize(&p, &Default::default(), Client::In(&client), &[]).unwrap();
    let (mut whole, mut part) = (Vec::new(), Vec::new());
    crate::slots::write_parts(&p, &slots, Ref::new(g, 0), 8192, &mut whole);
    crate::slots::write_parts(&p, &slots, Ref::new(g, 0), 4096, &mut part);
    assert_eq!((whole.len(), whole.concat().len(), part.len()), (2, 8192, 0));
}

/// What a test planner does when members fail: remember them, and tell
/// the executor the health changed.
fn mark_failed(ex: &Executor, failed: &mut [bool], f: &[Failure]) {
    for x in f {
        failed[x.member] = true;
    }
    ex.bump();
}

/// Plans a mirrored write over the members it believes healthy.
struct Mirror<'e> {
    ex: &'e Executor,
    failed: Vec<bool>,
    plans: usize,
    aborts: usize,
}

impl Planner for Mirror<'_> {
    type Error = ExecError;
    fn plan(&mut self) -> Result<Program, ExecError> {
        self.plans += 1;
        let mut p = Program { methods: vec![Method::Mirror], ..Default::default() };
        let input = p.buf(Buf::Input { off: 0, len: 4096 });
        let ops = (0..self.failed.len()).filter(|&m| !self.failed[m]).map(|m| Io::new(op(m, 0, 4096, Role::Data), Ref::new(input, 0))).collect();
        p.phases.push(Phase::write(ops));
        Ok(p)
    }
    fn abort(&mut self, _: &Program) {
        self.aborts += 1;
    }
    fn failed(&mut self, f: &[Failure]) -> Result<(), ExecError> {
        mark_failed(self.ex, &mut self.failed, f);
        Ok(())
    }
}

/// A planner whose every plan is made stale before it runs (as a health
/// change elsewhere would): the first `stale` plans.
struct Unsettled<'e> {
    ex: &'e Executor,
    stale: usize,
    plans: usize,
}

impl Planner for Unsettled<'_> {
    type Error = ExecError;
    fn plan(&mut self) -> Result<Program, ExecError> {
        self.plans += 1;
        if self.plans <= self.stale {
            self.ex.bump();
        }
        let mut p = Program { methods: vec![Method::Mirror], ..Default::default() };
        let input = p.buf(Buf::Input { off: 0, len: 4096 });
        p.phases.push(Phase::write(vec![Io::new(op(0, 0, 4096, Role::Data), Ref::new(input, 0))]));
        Ok(p)
    }
    fn failed(&mut self, _: &[Failure]) -> Result<(), ExecError> {
        Ok(())
    }
}

/// Stale plans are planned again without counting as member failures
/// (more of them than members + 1 still complete), up to `MAX_STALE`,
/// then the error says the health kept changing.
#[test]
fn stale_plans_are_made_again_and_bounded() {
    let ms = mems(2);
    let ex = Executor::new(ms.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0);
    let mut pl = Unsettled { ex: &ex, stale: 50, plans: 0 };
    ex.submit(&mut pl, Client::In(&[6u8; 4096]), None).unwrap();
    assert_eq!(pl.plans, 51);
    assert!(peek(&ms[0], 0, 4096).iter().all(|&x| x == 6));
    let mut pl = Unsettled { ex: &ex, stale: usize::MAX, plans: 0 };
    let e = ex.submit(&mut pl, Client::In(&[7u8; 4096]), None).unwrap_err().to_string();
    assert!(e.contains("the array's health kept changing"), "{e}");
    assert_eq!(pl.plans, crate::MAX_STALE);
}

#[test]
fn a_member_failing_mid_program_is_recorded_and_the_request_replanned() {
    let ms = mems(3);
    let bad = Arc::new(FaultyMember::new(ms[1].clone()));
    let ex = Executor::new(vec![Some(ms[0].clone() as Arc<dyn Member>), Some(bad.clone() as Arc<dyn Member>), Some(ms[2].clone() as Arc<dyn Member>)], 0);
    bad.break_now();
    let mut pl = Mirror { ex: &ex, failed: vec![false; 3], plans: 0, aborts: 0 };
    ex.submit(&mut pl, Client::In(&[4u8; 4096]), None).unwrap();
    assert_eq!((pl.plans, pl.aborts), (2, 1));
    assert_eq!(pl.failed, vec![false, true, false]);
    assert!(peek(&ms[0], 0, 4096).iter().all(|&x| x == 4));
    assert!(peek(&ms[2], 0, 4096).iter().all(|&x| x == 4));
    // Counted: the two writes of the first try that completed, the two of
    // the second; never the failed one.
    assert_eq!(ex.counters().ops.data_writes, 4);
    assert_eq!(ex.counters().members[1].writes, 0);
}

#[test]
fn a_program_planned_before_a_health_change_is_stale() {
    let ms = mems(2);
    let ex = exec_on(&ms);
    let e = ex.epoch();
    ex.bump();
    let p = rmw(0, 1, 0);
    assert!(matches!(ex.run_at(&p, Client::In(&[0u8; 4096]), None, Some(e)), Err(ExecError::Stale)));
}

#[test]
fn kept_buffers_come_back_and_zone_resets_need_a_zoned_device() {
    let ms = mems(2);
    let ex = exec_on(&ms);
    let mut p = Program::default();
    let b = p.buf(Buf::Bytes(Arc::from(vec![6u8; 512])));
    let s = p.buf(Buf::Scratch(512));
    let page = p.buf(Buf::Page(mosaic_core::Page::copy_of(&[3u8; 512])));
    let t = p.buf(Buf::Scratch(512));
    p.phases.push(Phase::Compute(vec![Combine::copy(Ref::new(s, 0), Ref::new(b, 0), 512), Combine::copy(Ref::new(t, 0), Ref::new(page, 0), 512)]));
    p.keep = vec![s as u32, t as u32];
    assert_eq!(ex.run(&p, Client::None, None).unwrap(), vec![vec![6u8; 512], vec![3u8; 512]]);
    p.phases.push(Phase::Reset(vec![DevOp { member: 1, offset: 3 << 20, len: 0, role: Role::ZoneReset, col: 0 }]));
    match ex.run(&p, Client::None, None) {
        Err(ExecError::Device(f)) => assert_eq!((f[0].member, f[0].read), (1, None)),
        other => panic!("expected a device error, got {other:?}"),
    }
}

#[test]
fn a_malformed_program_is_an_error_not_a_panic() {
    let ms = mems(1);
    let ex = exec_on(&ms);
    let mut p = Program::default();
    let i = p.buf(Buf::Input { off: 0, len: 16 });
    p.phases.push(Phase::Read(vec![Io::new(op(0, 0, 16, Role::Data), Ref::new(i, 0))]));
    assert!(matches!(ex.run(&p, Client::In(&[0u8; 16]), None), Err(ExecError::Program(_))));
    let mut p = Program::default();
    p.buf(Buf::Input { off: 8, len: 16 });
    assert!(matches!(ex.run(&p, Client::In(&[0u8; 16]), None), Err(ExecError::Program(_))));
}

/// An allocating policy: each write reserves an extent on the first member
/// it believes healthy and writes there.
struct Allocating<'e> {
    ex: &'e Executor,
    alloc: mosaic_map::ExtentAllocator,
    failed: Vec<bool>,
    held: Option<mosaic_map::Reservation>,
    placed: Vec<mosaic_map::Placement>,
}

impl Planner for Allocating<'_> {
    type Error = ExecError;
    fn plan(&mut self) -> Result<Program, ExecError> {
        use mosaic_map::{Allocator, Placement, Pool};
        let m = (0..self.failed.len()).find(|&m| !self.failed[m]).ok_or(ExecError::Stale)?;
        let r = self.alloc.allocate_in(4096, Pool::Member(m as u32)).ok_or(ExecError::Stale)?;
        let Placement::Member { offset, .. } = r.placement() else { unreachable!("member pools place on members") };
        self.held = Some(r);
        let mut p = Program::default();
        let input = p.buf(Buf::Input { off: 0, len: 4096 });
        p.phases.push(Phase::write(vec![Io::new(op(m, offset, 4096, Role::Data), Ref::new(input, 0))]));
        Ok(p)
    }
    fn commit(&mut self, _: &Program, _: Vec<Vec<u8>>) -> Result<(), ExecError> {
        use mosaic_map::Allocator;
        let r = self.held.take().ok_or(ExecError::Stale)?;
        self.placed.push(r.placement());
        self.alloc.commit(r).map_err(|e| ExecError::Program(e.to_string()))
    }
    fn abort(&mut self, _: &Program) {
        use mosaic_map::Allocator;
        if let Some(r) = self.held.take() {
            self.alloc.abort(r).expect("a reservation this allocator made");
        }
    }
    fn failed(&mut self, f: &[Failure]) -> Result<(), ExecError> {
        mark_failed(self.ex, &mut self.failed, f);
        Ok(())
    }
}

#[test]
fn an_allocating_policy_neither_leaks_nor_double_allocates_when_a_member_fails_mid_program() {
    use mosaic_map::{Allocator, Placement, Pool};
    let ms = mems(2);
    let bad = Arc::new(FaultyMember::new(ms[0].clone()));
    let ex = Executor::new(vec![Some(bad.clone() as Arc<dyn Member>), Some(ms[1].clone() as Arc<dyn Member>)], 0);
    let alloc = mosaic_map::ExtentAllocator::new(&[(Pool::Member(0), 1 << 20), (Pool::Member(1), 1 << 20)]);
    let mut pl = Allocating { ex: &ex, alloc, failed: vec![false; 2], held: None, placed: vec![] };
    ex.submit(&mut pl, Client::In(&[1u8; 4096]), None).unwrap();
    bad.break_now();
    ex.submit(&mut pl, Client::In(&[2u8; 4096]), None).unwrap();
    ex.submit(&mut pl, Client::In(&[3u8; 4096]), None).unwrap();
    // The first write landed on member 0; the second was planned there,
    // failed, was aborted and re-planned on member 1; the third went to
    // member 1 at once.  Exactly three extents are owned, none twice, and
    // member 0's aborted reservation is free again.
    assert_eq!(pl.placed.len(), 3);
    assert!(matches!(pl.placed[0], Placement::Member { member: 0, .. }));
    assert!(pl.placed[1..].iter().all(|p| matches!(p, Placement::Member { member: 1, .. })));
    assert_ne!(pl.placed[1], pl.placed[2]);
    assert_eq!(pl.alloc.free_bytes(), (2 << 20) - 3 * 4096);
    assert!(pl.held.is_none());
    for (p, byte) in pl.placed[1..].iter().zip([2u8, 3]) {
        let Placement::Member { offset, .. } = p else { unreachable!() };
        assert!(peek(&ms[1], *offset, 4096).iter().all(|&x| x == byte));
    }
}

/// Leave a scratch buffer of `n` bytes full of 0xee in the executor's pool.
fn dirty_pool(ex: &Executor, dirty: &MemMember, n: usize) {
    dirty.write_at(&vec![0xeeu8; n], 0).unwrap();
    let mut p = Program::default();
    let s = p.buf(Buf::Scratch(n));
    p.phases.push(Phase::Read(vec![Io::new(op(0, 0, n as u64, Role::Data), Ref::new(s, 0))]));
    p.phases.push(Phase::write(vec![Io::new(op(1, 0, n as u64, Role::Data), Ref::new(s, 0))]));
    ex.run(&p, Client::None, None).unwrap();
    assert!(peek(dirty, 0, n).iter().all(|&x| x == 0xee));
}

#[test]
fn scratch_a_program_reads_before_filling_is_zero_even_when_reused() {
    const K: usize = 16 << 10; // large enough to be analyzed, not zeroed whole
    let ms = mems(3);
    let ex = exec_on(&ms);
    dirty_pool(&ex, &ms[0], 4 * K);
    // Read K bytes into the second quarter of a scratch buffer, accumulate
    // them into its first, write all of it: the rest must be zeros, not
    // an earlier run's bytes.
    ms[0].write_at(&[3u8; K], 8 * K as u64).unwrap();
    let mut p = Program::default();
    let s = p.buf(Buf::Scratch(4 * K));
    p.phases.push(Phase::Read(vec![Io::new(op(0, 8 * K as u64, K as u64, Role::Data), Ref::new(s, K))]));
    p.phases.push(Phase::Compute(vec![Combine { dst: Ref::new(s, 0), len: K, acc: true, terms: vec![(1, Ref::new(s, K))] }]));
    p.phases.push(Phase::write(vec![Io::new(op(2, 0, 4 * K as u64, Role::Data), Ref::new(s, 0))]));
    ex.run(&p, Client::None, None).unwrap();
    let got = peek(&ms[2], 0, 4 * K);
    assert!(got[..2 * K].iter().all(|&x| x == 3), "the read bytes and their accumulation");
    assert!(got[2 * K..].iter().all(|&x| x == 0), "unfilled scratch reads as zeros");
    // A kept buffer the program only partly fills: zeros elsewhere.
    dirty_pool(&ex, &ms[0], 4 * K);
    let mut p = Program::default();
    let s = p.buf(Buf::Scratch(4 * K));
    p.phases.push(Phase::Read(vec![Io::new(op(2, 0, K as u64, Role::Data), Ref::new(s, 0))]));
    p.keep = vec![s as u32];
    let kept = ex.run(&p, Client::None, None).unwrap().remove(0);
    assert!(kept[..K].iter().all(|&x| x == 3) && kept[K..].iter().all(|&x| x == 0));
    // Small scratch is zeroed whole, whatever the pool holds.
    dirty_pool(&ex, &ms[0], 4096);
    let mut p = Program::default();
    let s = p.buf(Buf::Scratch(4096));
    p.phases.push(Phase::write(vec![Io::new(op(2, 0, 4096, Role::Data), Ref::new(s, 0))]));
    ex.run(&p, Client::None, None).unwrap();
    assert!(peek(&ms[2], 0, 4096).iter().all(|&x| x == 0));
}

/// A small kept buffer comes from the pool too (a dirty earlier run's
/// 4 KiB): the bytes the program writes are its own, the rest read zero.
#[test]
fn a_kept_buffer_from_the_pool_has_no_earlier_bytes() {
    let ms = mems(2);
    let ex = exec_on(&ms);
    let src: Vec<u8> = (0..4096u32).map(|i| (i * 13 + 5) as u8).collect();
    for (len, hole) in [(4096, false), (1024, true), (4096, false)] {
        dirty_pool(&ex, &ms[0], 4096);
        let mut p = Program::default();
        let b = p.buf(Buf::Bytes(Arc::from(src.clone())));
        let k = p.buf(Buf::Scratch(4096));
        p.phases.push(Phase::Compute(vec![Combine::copy(Ref::new(k, 0), Ref::new(b, 0), len)]));
        p.keep = vec![k as u32];
        let got = ex.run(&p, Client::None, None).unwrap().remove(0);
        assert_eq!(got.len(), 4096);
        assert_eq!(&got[..len], &src[..len]);
        assert_eq!(hole, len < 4096);
        assert!(got[len..].iter().all(|&x| x == 0));
    }
}

/// A kept buffer given back (dirty) is reused by the next program that
/// keeps one, and only the bytes that program writes show: the rest read
/// zero, not the given-back bytes.
#[test]
fn a_given_back_buffer_is_reused_without_its_bytes() {
    let ms = mems(1);
    let ex = exec_on(&ms);
    let keep_copy = |src: &[u8], len: usize| {
        let mut p = Program::default();
        let b = p.buf(Buf::Bytes(Arc::from(src)));
        let k = p.buf(Buf::Scratch(4096));
        p.phases.push(Phase::Compute(vec![Combine::copy(Ref::new(k, 0), Ref::new(b, 0), len)]));
        p.keep = vec![k as u32];
        ex.run(&p, Client::None, None).unwrap()
    };
    let first = keep_copy(&[0xee; 4096], 4096);
    let at = first[0].as_ptr();
    ex.give_back(first);
    let again = keep_copy(&[7; 4096], 1000);
    assert_eq!(again[0].as_ptr(), at, "the given-back buffer was reused");
    assert!(again[0][..1000].iter().all(|&x| x == 7));
    assert!(again[0][1000..].iter().all(|&x| x == 0));
}

#[test]
fn only_bytes_read_before_written_must_be_zero() {
    use crate::slots::must_zero;
    // Data chunks copied in, parity computed beside them from the same
    // buffer, all written: nothing to zero.
    let mut p = Program::default();
    let d = p.buf(Buf::Bytes(Arc::from(vec![1u8; 2048])));
    let out = p.buf(Buf::Scratch(3072));
    p.phases.push(Phase::Compute(vec![
        Combine::copy(Ref::new(out, 0), Ref::new(d, 0), 1024),
        Combine::copy(Ref::new(out, 1024), Ref::new(d, 1024), 1024),
        Combine { dst: Ref::new(out, 2048), len: 1024, acc: false, terms: vec![(1, Ref::new(out, 0)), (1, Ref::new(out, 1024))] },
    ]));
    p.phases.push(Phase::write(vec![Io::new(op(0, 0, 3072, Role::Data), Ref::new(out, 0))]));
    assert!(must_zero(&p, 0).iter().all(|r| r.total() == 0));
    // A term read before its bytes are computed, an accumulating base, a
    // write of a hole, a kept buffer with a hole.
    let mut p = Program::default();
    let s = p.buf(Buf::Scratch(4096));
    let k = p.buf(Buf::Scratch(512));
    p.phases.push(Phase::Read(vec![Io::new(op(0, 0, 512, Role::Data), Ref::new(s, 0)), Io::new(op(0, 0, 256, Role::Data), Ref::new(k, 0))]));
    p.phases.push(Phase::Compute(vec![
        Combine::copy(Ref::new(s, 512), Ref::new(s, 1024), 256),
        Combine::copy(Ref::new(s, 1024), Ref::new(s, 0), 512),
        Combine { dst: Ref::new(s, 2048), len: 256, acc: true, terms: vec![(1, Ref::new(s, 0))] },
    ]));
    p.phases.push(Phase::write(vec![Io::new(op(0, 0, 512, Role::Data), Ref::new(s, 3000))]));
    p.keep = vec![k as u32];
    let z = must_zero(&p, 0);
    assert_eq!(z[s].spans(), &[(1024, 1280), (2048, 2304), (3000, 3512)]);
    assert_eq!(z[k].spans(), &[(256, 512)]);
    // A write of a gather reads its pieces: the computed one needs no
    // zeroing, the one never written does.
    let mut p = Program::default();
    let s = p.buf(Buf::Scratch(2048));
    p.phases.push(Phase::Compute(vec![Combine::copy(Ref::new(s, 0), Ref::new(s, 1536), 512)]));
    let g = p.buf(Buf::Gather(vec![(Ref::new(s, 0), 512), (Ref::new(s, 1024), 256)]));
    p.phases.push(Phase::write(vec![Io::new(op(0, 0, 768, Role::Data), Ref::new(g, 0))]));
    let z = must_zero(&p, 0);
    assert_eq!(z[s].spans(), &[(1024, 1280), (1536, 2048)]);
    assert_eq!(z[g].total(), 0);
}

#[test]
fn terms_beside_the_destination_in_its_own_buffer() {
    let ex = exec_on(&mems(1));
    let mut p = Program::default();
    let b = p.buf(Buf::Bytes(Arc::from((0..=255u8).collect::<Vec<u8>>())));
    let s = p.buf(Buf::Scratch(1024));
    p.phases.push(Phase::Compute(vec![
        Combine::copy(Ref::new(s, 0), Ref::new(b, 0), 256),
        Combine::copy(Ref::new(s, 768), Ref::new(b, 0), 256),
        Combine::copy(Ref::new(s, 300), Ref::new(b, 0), 256),
        // Before and after the destination, and one overlapping it.
        Combine { dst: Ref::new(s, 256), len: 256, acc: true, terms: vec![(2, Ref::new(s, 0)), (1, Ref::new(s, 768)), (3, Ref::new(s, 300))] },
    ]));
    p.keep = vec![s as u32];
    let got = ex.run(&p, Client::None, None).unwrap().remove(0);
    for i in 0..256 {
        let x = i as u8;
        let base = if i < 44 { 0 } else { x.wrapping_sub(44) }; // s[256 + i] after the copy to 300
        // s[300 + i] is x before the combination overwrites part of it.
        assert_eq!(got[256 + i], base ^ gf_mul(2, x) ^ x ^ gf_mul(3, x), "byte {i}");
    }
}

proptest! {
    /// Random programs over one scratch buffer that a dirty earlier run
    /// left in the pool give the bytes they would with zeroed scratch.
    #[test]
    fn reused_scratch_is_as_good_as_zeroed(steps in prop::collection::vec((0u8..4, 0usize..8, 1usize..4, 0usize..8), 1..12)) {
        const BLK: usize = 4096;
        const N: usize = 8 * BLK; // a large buffer (slots::LARGE)
        let ms = mems(3);
        let ex = exec_on(&ms);
        let pattern: Vec<u8> = (0..N).map(|i| (i as u8).wrapping_mul(7).wrapping_add(1)).collect();
        let mut p = Program::default();
        let s = p.buf(Buf::Scratch(N));
        let mut want = vec![0u8; N];
        let mut dev1 = vec![0u8; N];
        for &(kind, a, n, b) in &steps {
            let n = n.min(8 - a).min(8 - b) * BLK;
            let (a, b) = (a * BLK, b * BLK);
            match kind {
                0 => {
                    p.phases.push(Phase::Read(vec![Io::new(op(2, a as u64, n as u64, Role::Data), Ref::new(s, b))]));
                    want[b..b + n].copy_from_slice(&pattern[a..a + n]);
                }
                1 if a + n <= b || b + n <= a => {
                    p.phases.push(Phase::Compute(vec![Combine::copy(Ref::new(s, b), Ref::new(s, a), n)]));
                    let src = want[a..a + n].to_vec();
                    want[b..b + n].copy_from_slice(&src);
                }
                2 => {
                    p.phases.push(Phase::Compute(vec![Combine { dst: Ref::new(s, b), len: n, acc: true, terms: vec![(1, Ref::new(s, a))] }]));
                    let src = want[a..a + n].to_vec();
                    want[b..b + n].iter_mut().zip(src).for_each(|(d, x)| *d ^= x);
                }
                _ => {
                    p.phases.push(Phase::write(vec![Io::new(op(1, a as u64, n as u64, Role::Data), Ref::new(s, a))]));
                    dev1[a..a + n].copy_from_slice(&want[a..a + n]);
                }
            }
        }
        p.phases.push(Phase::write(vec![Io::new(op(0, 0, N as u64, Role::Data), Ref::new(s, 0))]));
        ms[2].write_at(&pattern, 0).unwrap();
        dirty_pool(&ex, &ms[0], N);
        ms[0].write_at(&[0u8; N], 0).unwrap();
        ms[1].write_at(&[0u8; N], 0).unwrap();
        ex.run(&p, Client::None, None).unwrap();
        prop_assert_eq!(peek(&ms[0], 0, N), want);
        prop_assert_eq!(peek(&ms[1], 0, N), dev1);
    }

    /// A combination over GF(2^8) equals the byte-wise reference, with the
    /// destination's own buffer among the terms.
    #[test]
    fn combinations_match_the_reference(coefs in prop::collection::vec(any::<u8>(), 1..5), seed in any::<u8>(), acc in any::<bool>()) {
        let ex = exec_on(&mems(1));
        let n = coefs.len();
        let mut p = Program::default();
        let srcs: Vec<Vec<u8>> = (0..n).map(|t| (0..64).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed).wrapping_add(t as u8 * 17)).collect()).collect();
        let mut bufs: Vec<usize> = srcs.iter().map(|s| p.buf(Buf::Bytes(Arc::from(s.clone())))).collect();
        // The destination buffer holds a term too (at offset 64).
        let dst = p.buf(Buf::Scratch(128));
        p.phases.push(Phase::Compute(vec![Combine::copy(Ref::new(dst, 0), Ref::new(bufs[0], 0), 64), Combine::copy(Ref::new(dst, 64), Ref::new(bufs[n - 1], 0), 64)]));
        bufs[n - 1] = dst;
        let terms: Vec<(u8, Ref)> = coefs.iter().zip(&bufs).map(|(&c, &b)| (c, if b == dst { Ref::new(dst, 64) } else { Ref::new(b, 0) })).collect();
        p.phases.push(Phase::Compute(vec![Combine { dst: Ref::new(dst, 0), len: 64, acc, terms }]));
        p.keep = vec![dst as u32];
        let got = ex.run(&p, Client::None, None).unwrap().remove(0);
        for i in 0..64 {
            let mut want = if acc { srcs[0][i] } else { 0 };
            for (t, &c) in coefs.iter().enumerate() {
                want ^= gf_mul(c, srcs[t][i]);
            }
            prop_assert_eq!(got[i], want, "byte {}", i);
        }
    }
}

/// GF(2^8) multiply over the polynomial ISA-L and reed-solomon-erasure
/// use (0x11d).
fn gf_mul(mut a: u8, mut b: u8) -> u8 {
    let mut r = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            r ^= a;
        }
        let hi = a & 0x80;
        a <<= 1;
        if hi != 0 {
            a ^= 0x1d;
        }
        b >>= 1;
    }
    r
}

/// A raid5 write over four whole stripes of 4 KiB units: the layout's
/// program merges each member's four adjacent transfers (three data, one
/// parity) into one write, and a merged read gives the bytes back.
#[test]
fn a_multi_stripe_write_is_one_op_per_member_and_reads_back() {
    use mosaic_core::{FixedLayout, Geometry, Health, Layout, Level};
    let ms = mems(4);
    let ex = exec_on(&ms);
    let l = FixedLayout::new(Geometry::new(Level::Raid5, 4, 4096, 512, 1 << 20).unwrap()).unwrap();
    let h = Health::all_active(4);
    let data: Vec<u8> = (0..4 * 3 * 4096u32).map(|i| (i * 7 + i / 4096) as u8).collect();
    // Unmerged, the same plan is four transfers on every member.
    let plan = l.plan_write(0, data.len() as u64, &h).unwrap();
    let unmerged = l.math.write_program(&plan, data.len()).unwrap();
    assert!((0..4).all(|m| unmerged.ops_on(m).len() == 4));
    ex.run(&l.write_program(0, data.len() as u64, &h).unwrap(), Client::In(&data), None).unwrap();
    let c = ex.counters();
    for (m, mc) in c.members.iter().enumerate() {
        assert_eq!((mc.writes, mc.write_bytes, mc.reads), (1, 4 * 4096, 0), "member {m}");
    }
    let mut back = vec![0u8; data.len()];
    ex.run(&l.read_program(0, data.len() as u64, &h).unwrap(), Client::Out(&mut back), None).unwrap();
    assert!(back == data);
    // A read skips parity: a member whose parity unit is in stripe 0 or
    // 3 reads its three data units at once, the two with parity in the
    // middle read twice (12 reads unmerged).
    let reads: Vec<u64> = ex.counters().members.iter().map(|mc| mc.reads).collect();
    assert_eq!(reads.iter().sum::<u64>(), 6, "{reads:?}");
    // Every stripe's parity is the XOR of its data units.
    for s in 0..4u64 {
        let units: Vec<Vec<u8>> = ms.iter().map(|m| peek(m, s * 4096, 4096)).collect();
        assert!((0..4096).all(|i| units.iter().fold(0u8, |x, u| x ^ u[i]) == 0), "stripe {s}");
    }
}

/// A member that notes which call each write (and prefetch hint) came
/// through; `cheap`: its flushes are free, as RAM's are.
struct Calls {
    inner: MemMember,
    log: parking_lot::Mutex<Vec<(&'static str, u64, usize)>>,
    cheap: bool,
}

impl Calls {
    fn new(cheap: bool) -> Arc<Calls> {
        Arc::new(Calls { inner: MemMember::new("m", 1 << 20), log: Default::default(), cheap })
    }
}

impl Member for Calls {
    fn describe(&self) -> String {
        "calls".into()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.log.lock().push(("write_at", offset, buf.len()));
        self.inner.write_at(buf, offset)
    }
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        self.log.lock().push(("write_parts_at", offset, parts.iter().map(|p| p.len()).sum()));
        self.inner.write_parts_at(parts, offset)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn cheap_flush(&self) -> bool {
        self.cheap
    }
    fn prefetch_write(&self, offset: u64, len: usize) {
        self.log.lock().push(("prefetch_write", offset, len));
    }
}

/// Metadata writes (log and journal records, tables: nothing reads them
/// back before an open) reach the member as log appends
/// (`write_parts_at`, streamed around the CPU cache on memory); data and
/// code writes as plain writes.  The bytes are the same either way.
#[test]
fn metadata_writes_reach_members_as_appends_and_the_rest_as_writes() {
    let m = Calls::new(false);
    let ex = Executor::new(vec![Some(m.clone() as Arc<dyn Member>)], 0);
    let mut p = Program::default();
    let input = p.buf(Buf::Input { off: 0, len: 3 * 4096 + 100 });
    p.phases.push(Phase::write(vec![
        Io::new(op(0, 0, 4096, Role::Data), Ref::new(input, 0)),
        Io::new(op(0, 8192, 4096, Role::Code), Ref::new(input, 4096)),
        Io::new(op(0, 65536, 4196, Role::Meta), Ref::new(input, 8192)),
    ]));
    let client: Vec<u8> = (0..3 * 4096 + 100u32).map(|i| (i * 7 + i / 4096) as u8).collect();
    ex.run(&p, Client::In(&client), None).unwrap();
    let mut calls = m.log.lock().clone();
    calls.sort_by_key(|c| c.1);
    assert_eq!(calls, vec![("write_at", 0, 4096), ("write_at", 8192, 4096), ("write_parts_at", 65536, 4196)]);
    let read = |off: u64, len: usize| {
        let mut b = vec![0u8; len];
        m.read_at(&mut b, off).unwrap();
        b
    };
    assert_eq!(read(0, 4096), client[..4096]);
    assert_eq!(read(8192, 4096), client[4096..8192]);
    assert_eq!(read(65536, 4196), client[8192..]);
    assert_eq!(ex.counters().ops.meta_writes, 1);
}

/// On members in memory a program first asks each member to fetch the
/// lines of its small data and code writes that it does not read first
/// (a cache's destage writing pages whose homes nothing read), before
/// any phase runs; not an RMW's writes over what it just read, not
/// metadata, not a write over 64 KiB, and nothing on members whose
/// operations are not memory copies.  The bytes written are the same.
#[test]
fn small_writes_not_read_first_are_prefetched_on_memory_members() {
    for cheap in [true, false] {
        let ms: Vec<Arc<Calls>> = (0..3).map(|_| Calls::new(cheap)).collect();
        let ex = Executor::new(ms.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0);
        ex.run(&rmw(0, 2, 8192), Client::In(&[5u8; 4096]), None).unwrap();
        assert!(ms.iter().all(|m| m.log.lock().iter().all(|c| c.0 != "prefetch_write")), "an RMW's writes go where its reads were");
        for m in &ms {
            m.log.lock().clear();
        }
        let mut p = Program::default();
        let input = p.buf(Buf::Input { off: 0, len: 4096 });
        let big = p.buf(Buf::Scratch(128 << 10));
        let old = p.buf(Buf::Scratch(2048));
        // Half of member 1's write is read first: the write is still prefetched.
        p.phases.push(Phase::Read(vec![Io::new(op(1, 4096, 2048, Role::Code), Ref::new(old, 0))]));
        p.phases.push(Phase::write(vec![
            Io::new(op(0, 0, 4096, Role::Data), Ref::new(input, 0)),
            Io::new(op(1, 4096, 4096, Role::Code), Ref::new(input, 0)),
            Io::new(op(2, 0, 4096, Role::Meta), Ref::new(input, 0)),
            Io::new(op(2, 65536, 128 << 10, Role::Data), Ref::new(big, 0)),
        ]));
        let client: Vec<u8> = (0..4096u32).map(|i| (i * 13) as u8).collect();
        ex.run(&p, Client::In(&client), None).unwrap();
        let hinted = |m: usize| ms[m].log.lock().iter().filter(|c| c.0 == "prefetch_write").map(|c| (c.1, c.2)).collect::<Vec<_>>();
        let want = |w: Vec<(u64, usize)>| if cheap { w } else { Vec::new() };
        assert_eq!((hinted(0), hinted(1), hinted(2)), (want(vec![(0, 4096)]), want(vec![(4096, 4096)]), vec![]), "cheap {cheap}");
        // Each hint came before its member's write.
        for m in 0..2 {
            let log = ms[m].log.lock();
            let first_write = log.iter().position(|c| c.0 != "prefetch_write").unwrap();
            assert!(log[..first_write].len() == usize::from(cheap), "member {m}: {log:?}");
        }
        assert_eq!(peek(&ms[0].inner, 0, 4096), client);
        assert_eq!(peek(&ms[1].inner, 4096, 4096), client);
        assert_eq!(peek(&ms[2].inner, 0, 4096), client);
    }
}

/// A member file on the RAM file system (mapped, so it can lend its
/// bytes), counting the reads it lends; with `lends` false it lends none.
/// With `cheap` it says its flushes are free, as the file does (the
/// executor then fuses large computations with their writes), and logs
/// every write call as (offset, bytes, its place among all members' calls).
struct Lending {
    inner: mosaic_dev::FileMember,
    lends: bool,
    lent: std::sync::atomic::AtomicUsize,
    cheap: bool,
    writes: parking_lot::Mutex<Vec<(u64, usize, usize)>>,
}

/// Orders write calls across members ([`Lending`]'s log).
static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Lending {
    fn log(&self, offset: u64, len: usize) {
        self.writes.lock().push((offset, len, CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst)));
    }
}

impl Member for Lending {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.log(offset, buf.len());
        self.inner.write_at(buf, offset)
    }
    fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        self.log(offset, parts.iter().map(|p| p.len()).sum());
        self.inner.write_parts_at(parts, offset)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn cheap_flush(&self) -> bool {
        self.cheap && self.inner.cheap_flush()
    }
    fn view(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let v = self.inner.view(offset, len).filter(|_| self.lends);
        if v.is_some() {
            self.lent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        v
    }
}

fn lending(dir: &tempfile::TempDir, n: usize, lends: bool) -> (Vec<Arc<Lending>>, Executor) {
    members_on_shm(dir, n, 1 << 20, lends, false)
}

fn members_on_shm(dir: &tempfile::TempDir, n: usize, size: u64, lends: bool, cheap: bool) -> (Vec<Arc<Lending>>, Executor) {
    let ms: Vec<Arc<Lending>> = (0..n)
        .map(|i| {
            let inner = mosaic_dev::FileMember::create(&dir.path().join(format!("m{i}-{lends}-{cheap}")), size).unwrap();
            assert!(inner.is_mapped(), "a file on /dev/shm is mapped");
            Arc::new(Lending { inner, lends, lent: Default::default(), cheap, writes: Default::default() })
        })
        .collect();
    let ex = Executor::new(ms.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0);
    (ms, ex)
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8).collect()
}

/// A destage's shape: old chunks read from two members, their parity
/// computed, the chunks written elsewhere as one gathered write and the
/// parity beside them.  Members that lend give exactly the bytes and
/// the operation counts of members that copy, and lend both reads.
#[test]
fn a_member_lends_what_a_program_only_reads_with_the_same_bytes_and_counts() {
    const K: usize = 64 << 10;
    let mut p = Program { methods: vec![Method::Fsw], ..Default::default() };
    let a = p.buf(Buf::Scratch(2 * K));
    let b = p.buf(Buf::Scratch(K));
    let parity = p.buf(Buf::Scratch(K));
    let new = p.buf(Buf::Bytes(pattern(4096, 9).into()));
    let chunk = p.buf(Buf::Gather(vec![(Ref::new(a, 0), 4096), (Ref::new(new, 0), 4096), (Ref::new(a, 8192), 2 * K - 8192)]));
    p.phases.push(Phase::Read(vec![Io::new(op(0, 0, 2 * K as u64, Role::Data), Ref::new(a, 0)), Io::new(op(1, 4096, K as u64, Role::Data), Ref::new(b, 0))]));
    p.phases.push(Phase::Compute(vec![Combine { dst: Ref::new(parity, 0), len: K, acc: false, terms: vec![(1, Ref::new(a, 0)), (1, Ref::new(a, K)), (1, Ref::new(b, 0))] }]));
    p.phases.push(Phase::write(vec![Io::new(op(2, 0, 2 * K as u64, Role::Data), Ref::new(chunk, 0)), Io::new(op(3, 0, K as u64, Role::Code), Ref::new(parity, 0))]));
    assert_eq!(crate::slots::lendable(&p), vec![true, true, false, false, false]);
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut seen = Vec::new();
    for lends in [true, false] {
        let (ms, ex) = lending(&dir, 4, lends);
        ms[0].write_at(&pattern(2 * K, 1), 0).unwrap();
        ms[1].write_at(&pattern(K + 4096, 2), 0).unwrap();
        ex.run(&p, Client::None, None).unwrap();
        let read = |m: &Lending, len: usize| {
            let mut v = vec![0u8; len];
            m.read_at(&mut v, 0).unwrap();
            v
        };
        let (old, other) = (pattern(2 * K, 1), pattern(K + 4096, 2));
        let mut want = old.clone();
        want[4096..8192].copy_from_slice(&pattern(4096, 9));
        assert_eq!(read(&ms[2], 2 * K), want, "lends: {lends}");
        let xor: Vec<u8> = (0..K).map(|i| old[i] ^ old[K + i] ^ other[4096 + i]).collect();
        assert_eq!(read(&ms[3], K), xor, "lends: {lends}");
        let lent: Vec<usize> = ms.iter().map(|m| m.lent.load(std::sync::atomic::Ordering::SeqCst)).collect();
        assert_eq!(lent, if lends { vec![1, 1, 0, 0] } else { vec![0; 4] });
        let c = ex.counters();
        seen.push((c.ops.data_reads, c.members.iter().map(|m| (m.reads, m.read_bytes, m.writes, m.write_bytes)).collect::<Vec<_>>()));
    }
    assert_eq!(seen[0], seen[1], "lent reads count as reads");
    assert_eq!(seen[0].0, 2);
}

/// What may not be lent: a read the program writes over (or resets the
/// zone of) before its last use, one it keeps, computes into or reads
/// twice into; reads below a page, or sharing a buffer, are not looked
/// at.  The overwrite, run on members that would lend, still copies the
/// old bytes out first.
#[test]
fn a_read_the_program_overwrites_keeps_or_computes_into_is_copied() {
    const K: u64 = 64 << 10;
    let read = |len: u64| Phase::Read(vec![Io::new(op(0, 0, len, Role::Data), Ref::new(0, 0))]);
    let write_to = |member: usize, offset: u64, src: usize| Phase::write(vec![Io::new(op(member, offset, K, Role::Data), Ref::new(src, 0))]);
    let reset = |member: usize| Phase::Reset(vec![DevOp { member, offset: 0, len: 0, role: Role::ZoneReset, col: 0 }]);
    let prog = |phases: Vec<Phase>| Program { bufs: vec![Buf::Scratch(K as usize), Buf::Bytes(pattern(K as usize, 5).into())], phases, ..Default::default() };
    let lent = |p: &Program| crate::slots::lendable(p).first().copied().unwrap_or(false);
    // Overwritten (same member, overlapping) before its last use: copied;
    // after it, or elsewhere on the member, or on another member: lent.
    assert!(!lent(&prog(vec![read(K), write_to(0, 4096, 1), write_to(1, 0, 0)])));
    assert!(lent(&prog(vec![read(K), write_to(1, 0, 0), write_to(0, 0, 1)])));
    assert!(lent(&prog(vec![read(K), write_to(0, K, 1), write_to(1, 0, 0)])));
    // A zone reset on the member before its last use: copied; after: lent.
    assert!(!lent(&prog(vec![read(K), reset(0), write_to(1, 0, 0)])));
    assert!(lent(&prog(vec![read(K), write_to(1, 0, 0), reset(0)])));
    assert!(lent(&prog(vec![read(K), reset(1), write_to(1, 0, 0)])));
    // Kept, computed into, read into twice, used before its read, small.
    let mut kept = prog(vec![read(K), write_to(1, 0, 0)]);
    kept.keep = vec![0];
    assert!(!lent(&kept));
    assert!(!lent(&prog(vec![read(K), Phase::Compute(vec![Combine::copy(Ref::new(0, 0), Ref::new(1, 0), 4096)]), write_to(1, 0, 0)])));
    assert!(!lent(&prog(vec![read(K), read(K), write_to(1, 0, 0)])));
    assert!(!lent(&prog(vec![write_to(1, 0, 0), read(K), write_to(2, 0, 0)])));
    // Read by a computation whose phase may run fused with the writes
    // after it (`crate::fuse`), one of which overwrites it: copied.  With
    // those writes journaled (never fused), lent.
    let mut fused = prog(vec![
        read(K),
        Phase::Compute(vec![Combine::copy(Ref::new(2, 0), Ref::new(0, 0), K as usize)]),
        Phase::write(vec![Io::new(op(0, 0, K, Role::Data), Ref::new(1, 0)), Io::new(op(1, 0, K, Role::Data), Ref::new(2, 0))]),
    ]);
    fused.bufs.push(Buf::Scratch(K as usize));
    assert!(!lent(&fused));
    if let Phase::Write { journal, .. } = &mut fused.phases[2] {
        *journal = true;
    }
    assert!(lent(&fused));
    // Below a page: not looked at.  A page: lent.
    let mut small = prog(vec![read(2048), Phase::write(vec![Io::new(op(1, 0, 2048, Role::Data), Ref::new(0, 0))])]);
    small.bufs[0] = Buf::Scratch(2048);
    assert!(crate::slots::lendable(&small).is_empty());
    let mut page = prog(vec![read(4096), Phase::write(vec![Io::new(op(1, 0, 4096, Role::Data), Ref::new(0, 0))])]);
    page.bufs[0] = Buf::Scratch(4096);
    assert!(lent(&page));
    // Two reads sharing one buffer (a small write's old data and code):
    // not looked at.
    let mut shared = prog(vec![Phase::Read(vec![Io::new(op(0, 0, 4096, Role::Data), Ref::new(0, 0)), Io::new(op(1, 0, 4096, Role::Code), Ref::new(0, 4096))])]);
    shared.bufs[0] = Buf::Scratch(8192);
    assert!(crate::slots::lendable(&shared).is_empty());

    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let (ms, ex) = lending(&dir, 2, true);
    ms[0].write_at(&pattern(K as usize, 1), 0).unwrap();
    ex.run(&prog(vec![read(K), write_to(0, 0, 1), write_to(1, 0, 0)]), Client::None, None).unwrap();
    let mut got = vec![0u8; K as usize];
    ms[1].read_at(&mut got, 0).unwrap();
    assert_eq!(got, pattern(K as usize, 1), "the old bytes, copied before the overwrite");
    assert_eq!(ms[0].lent.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// A destage's shape at full size: 20 rows of four old 64 KiB chunks,
/// read (lent) from members 0-3, with one new block in each of member
/// 0's chunks; parity computed piece by piece (1.25 MiB, enough to fuse);
/// the chunks appended elsewhere on their members as gathered writes and
/// the parity on member 4 in two writes.  Members that say their writes
/// are copies into memory get the computation and the writes fused: the
/// same bytes and the same counted operations as phase by phase, each
/// member's writes in order from their first byte, interleaved across
/// members, parity pieces after their computations.
#[test]
fn a_large_computation_runs_fused_with_its_writes_with_the_same_bytes_and_counts() {
    const K: usize = 64 << 10;
    const ROWS: usize = 20;
    let mut p = Program { methods: vec![Method::Fsw], ..Default::default() };
    let old: Vec<usize> = (0..4).map(|_| p.buf(Buf::Scratch(ROWS * K))).collect();
    let new = p.buf(Buf::Bytes(pattern(ROWS * 4096, 77).into()));
    let parity = p.buf(Buf::Scratch(ROWS * K));
    // Chunk r of member 0: [old 0..4K][new block r][old 8K..64K].
    let piece0 = |r: usize| [(Ref::new(old[0], r * K), 4096), (Ref::new(new, r * 4096), 4096), (Ref::new(old[0], r * K + 8192), K - 8192)];
    let gathers: Vec<usize> = (0..4)
        .map(|j| {
            let pieces = (0..ROWS).flat_map(|r| if j == 0 { piece0(r).to_vec() } else { vec![(Ref::new(old[j], r * K), K)] }).collect();
            p.buf(Buf::Gather(pieces))
        })
        .collect();
    p.phases.push(Phase::Read((0..4).map(|j| Io::new(op(j, 0, (ROWS * K) as u64, Role::Data), Ref::new(old[j], 0))).collect()));
    let mut cs = Vec::new();
    for r in 0..ROWS {
        for (at, len) in [(0, 4096), (4096, 4096), (8192, K - 8192)] {
            let first = if at == 4096 { Ref::new(new, r * 4096) } else { Ref::new(old[0], r * K + at) };
            let terms = std::iter::once((1, first)).chain((1..4).map(|j| (1, Ref::new(old[j], r * K + at)))).collect();
            cs.push(Combine { dst: Ref::new(parity, r * K + at), len, acc: false, terms });
        }
    }
    p.phases.push(Phase::Compute(cs));
    let at = (ROWS * K) as u64;
    let mut writes: Vec<Io> = (0..4).map(|j| Io::new(op(j, at, at, Role::Data), Ref::new(gathers[j], 0))).collect();
    let half = ROWS / 2 * K;
    writes.push(Io::new(op(4, 0, half as u64, Role::Code), Ref::new(parity, 0)));
    writes.push(Io::new(op(4, half as u64, (ROWS * K - half) as u64, Role::Code), Ref::new(parity, half)));
    p.phases.push(Phase::write(writes));
    p.validate().unwrap();
    assert!(crate::fusable(&p.phases, 1));
    assert_eq!(crate::slots::lendable(&p)[..4], [true; 4]);

    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut seen = Vec::new();
    for cheap in [true, false] {
        let (ms, ex) = members_on_shm(&dir, 5, 2 * at, true, cheap);
        assert_eq!(ex.all_cheap(), cheap);
        for (j, m) in ms.iter().enumerate().take(4) {
            m.write_at(&pattern(ROWS * K, j as u32), 0).unwrap();
        }
        ms.iter().for_each(|m| m.writes.lock().clear());
        ex.run(&p, Client::None, None).unwrap();
        let read = |m: &Lending, off: u64, len: usize| {
            let mut v = vec![0u8; len];
            m.read_at(&mut v, off).unwrap();
            v
        };
        let mut chunks: Vec<Vec<u8>> = (0..4).map(|j| pattern(ROWS * K, j as u32)).collect();
        for r in 0..ROWS {
            chunks[0][r * K + 4096..r * K + 8192].copy_from_slice(&pattern(ROWS * 4096, 77)[r * 4096..(r + 1) * 4096]);
        }
        for j in 0..4 {
            assert_eq!(read(&ms[j], at, ROWS * K), chunks[j], "member {j}, cheap {cheap}");
        }
        let xor: Vec<u8> = (0..ROWS * K).map(|i| chunks.iter().fold(0, |x, c| x ^ c[i])).collect();
        assert_eq!(read(&ms[4], 0, ROWS * K), xor, "parity, cheap {cheap}");
        assert_eq!(ms.iter().map(|m| m.lent.load(std::sync::atomic::Ordering::SeqCst)).collect::<Vec<_>>(), vec![1, 1, 1, 1, 0]);
        let c = ex.counters();
        seen.push((c.ops.data_writes, c.ops.code_writes, c.members.iter().map(|m| (m.reads, m.read_bytes, m.writes, m.write_bytes)).collect::<Vec<_>>()));
        // Each member's write calls: in order (fused; phase by phase the
        // I/O threads take a member's two writes in either order),
        // contiguous, every byte once.
        let mut calls: Vec<Vec<(u64, usize, usize)>> = ms.iter().map(|m| m.writes.lock().clone()).collect();
        if !cheap {
            calls.iter_mut().for_each(|c| c.sort_unstable());
        }
        for (j, cl) in calls.iter().enumerate() {
            let start = if j < 4 { at } else { 0 };
            let mut next = start;
            for &(off, n, _) in cl {
                assert_eq!(off, next, "member {j}, cheap {cheap}: {cl:?}");
                next += n as u64;
            }
            assert_eq!(next - start, ROWS as u64 * K as u64, "member {j}");
        }
        if cheap {
            // Rounds of two rows: ten calls a member, the parity's first
            // before member 0's last.
            assert_eq!(calls.iter().map(|c| c.len()).collect::<Vec<_>>(), vec![ROWS / 2; 5]);
            assert!(calls[4][0].2 < calls[0][ROWS / 2 - 1].2, "{calls:?}");
        } else {
            assert_eq!(calls.iter().map(|c| c.len()).collect::<Vec<_>>(), vec![1, 1, 1, 1, 2]);
        }
    }
    assert_eq!(seen[0], seen[1], "fused or not, the same counted operations");
    assert_eq!((seen[0].0, seen[0].1), (4, 2));
}

/// One random computation of [`fused_programs_write_what_the_phases_would`]:
/// (destination buffer, block, blocks, accumulate, terms as (buffer, block)).
type Step = (usize, usize, usize, bool, Vec<(usize, usize)>);
/// One random write: (member, pieces as (buffer, block, blocks)).
type WriteSpec = (usize, Vec<(usize, usize, usize)>);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Random computations of 1 MiB and more over three read-filled
    /// buffers (overlapping, accumulating, a buffer's own bytes among its
    /// terms), then random unjournaled writes (several on one member,
    /// gathers of pieces anywhere): run fused on RAM members, each member
    /// holds exactly what running the computations first and the writes
    /// after gives, byte for byte, and each write counts once.
    #[test]
    fn fused_programs_write_what_the_phases_would(
        steps in prop::collection::vec((0usize..3, 0usize..96, 1usize..24, any::<bool>(), prop::collection::vec((0usize..3, 0usize..96), 1..4)), 24..60),
        writes in prop::collection::vec((0usize..4, prop::collection::vec((0usize..3, 0usize..120, 1usize..12), 1..6)), 1..8),
    ) {
        const BLK: usize = 4096;
        const BUF: usize = 128 * BLK;
        let ms: Vec<Arc<MemMember>> = (0..4).map(|i| Arc::new(MemMember::new(format!("m{i}"), 16 << 20))).collect();
        let ex = exec_on(&ms);
        prop_assert!(ex.all_cheap());
        let mut p = Program::default();
        let bufs: Vec<usize> = (0..3).map(|_| p.buf(Buf::Scratch(BUF))).collect();
        let mut model: Vec<Vec<u8>> = (0..3).map(|b| pattern(BUF, 100 + b as u32)).collect();
        for (b, m) in ms.iter().enumerate().take(3) {
            m.write_at(&model[b], 0).unwrap();
        }
        p.phases.push(Phase::Read((0..3).map(|b| Io::new(op(b, 0, BUF as u64, Role::Data), Ref::new(bufs[b], 0))).collect()));
        let mut cs = Vec::new();
        let steps: Vec<&Step> = steps.iter().collect();
        for (d, at, n, acc, terms) in steps.iter().map(|s| (s.0, s.1, s.2, s.3, &s.4)) {
            let len = n.min(128 - at) * BLK;
            let terms: Vec<(usize, usize)> = terms.iter().map(|&(b, t)| (b, t.min(128 - len / BLK) * BLK)).collect();
            // The reference: every term read before the destination changes.
            let sum = terms.iter().fold(vec![0u8; len], |mut s, &(b, t)| {
                s.iter_mut().zip(&model[b][t..t + len]).for_each(|(x, y)| *x ^= y);
                s
            });
            let dst = &mut model[d][at * BLK..at * BLK + len];
            if acc {
                dst.iter_mut().zip(&sum).for_each(|(x, y)| *x ^= y);
            } else {
                dst.copy_from_slice(&sum);
            }
            cs.push(Combine { dst: Ref::new(bufs[d], at * BLK), len, acc, terms: terms.iter().map(|&(b, t)| (1, Ref::new(bufs[b], t))).collect() });
        }
        prop_assume!(cs.iter().map(|c| c.len).sum::<usize>() >= 1 << 20);
        p.phases.push(Phase::Compute(cs));
        // Writes from 8 MiB up on each member, one after another.
        let mut ios = Vec::new();
        let mut next = [8u64 << 20; 4];
        let mut want: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 4];
        let writes: Vec<&WriteSpec> = writes.iter().collect();
        for (m, pieces) in writes.iter().map(|w| (w.0, &w.1)) {
            let pieces: Vec<(Ref, usize)> = pieces.iter().map(|&(b, at, n)| (Ref::new(bufs[b], at.min(127) * BLK), n.min(128 - at.min(127)) * BLK)).collect();
            let bytes: Vec<u8> = pieces.iter().flat_map(|&(r, n)| model[bufs.iter().position(|&b| b == r.buf as usize).unwrap()][r.off as usize..r.off as usize + n].to_vec()).collect();
            let len = bytes.len() as u64;
            let at = if pieces.len() == 1 { pieces[0].0 } else { Ref::new(p.buf(Buf::Gather(pieces)), 0) };
            ios.push(Io::new(op(m, next[m], len, Role::Data), at));
            want[m].push((next[m], bytes));
            next[m] += len;
        }
        p.phases.push(Phase::write(ios));
        p.validate().unwrap();
        ex.run(&p, Client::None, None).unwrap();
        for (m, ws) in want.iter().enumerate() {
            for (off, bytes) in ws {
                prop_assert!(peek(&ms[m], *off, bytes.len()) == *bytes, "member {} at {}", m, off);
            }
        }
        prop_assert_eq!(ex.counters().ops.data_writes, writes.len() as u64);
    }
}

/// A fused run whose second computation reads beyond its buffer fails
/// before any write goes out (a write that only needs the first one would
/// otherwise go out after it), as phase by phase; nothing is counted.
/// (`run` validates a program first in debug builds; this calls the fused
/// phases directly, as a release build reaches them.)
#[test]
fn a_fused_computation_that_cannot_run_fails_before_any_write() {
    const M: usize = 1 << 20;
    let ms = mems(1);
    let ex = exec_on(&ms);
    assert!(ex.all_cheap());
    let mut p = Program::default();
    let a = p.buf(Buf::Scratch(2 * M));
    let cs = vec![Combine::copy(Ref::new(a, 0), Ref::new(a, M), M), Combine::copy(Ref::new(a, 0), Ref::new(a, 2 * M - 4096), 8192)];
    let ops = vec![Io::new(op(0, 0, (M / 2) as u64, Role::Data), Ref::new(a, M / 2))];
    p.phases.push(Phase::Compute(cs.clone()));
    p.phases.push(Phase::write(ops.clone()));
    assert!(ex.fuses(&p, 0, &cs));
    let mut slots = crate::slots::materialize(&p, &ex.scratch, Client::None, &[]).unwrap();
    ms[0].write_at(&vec![0xee; M / 2], 0).unwrap();
    match ex.fused_phases(&p, 0, &ex.members.load(), &cs, &ops, &mut slots) {
        Err(ExecError::Program(m)) => assert_eq!(m, format!("range {}+8192 beyond buffer {a} of {} bytes", 2 * M - 4096, 2 * M)),
        other => panic!("{other:?}"),
    }
    assert!(peek(&ms[0], 0, M / 2).iter().all(|&b| b == 0xee), "nothing written");
    assert_eq!(ex.counters().ops.data_writes, 0);
    // A computation into a buffer the policy supplies (read-only) is
    // refused the same way, by name.
    let bytes = p.buf(Buf::Bytes(vec![0u8; 4096].into()));
    let cs = vec![Combine::copy(Ref::new(a, 0), Ref::new(a, M), M), Combine::copy(Ref::new(bytes, 0), Ref::new(a, 0), 4096)];
    let mut slots = crate::slots::materialize(&p, &ex.scratch, Client::None, &[]).unwrap();
    match ex.fused_phases(&p, 0, &ex.members.load(), &cs, &ops, &mut slots) {
        Err(e @ ExecError::Program(_)) => assert_eq!(e.to_string(), format!("invalid program: buffer {bytes} is read-only")),
        other => panic!("{other:?}"),
    }
    assert!(peek(&ms[0], 0, M / 2).iter().all(|&b| b == 0xee), "nothing written");
}

/// A member whose writes wait while its gate is shut (a slow drive, or
/// a test holding a background program); its flushes take `flush_ms`
/// and are not cheap, so a phase of them goes to the I/O threads.
struct Gated {
    inner: MemMember,
    shut: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    flush_ms: u64,
}

impl Member for Gated {
    fn describe(&self) -> String {
        "gated".into()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let (m, c) = &*self.shut;
        let mut g = m.lock().unwrap();
        while *g {
            g = c.wait(g).unwrap();
        }
        drop(g);
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        std::thread::sleep(std::time::Duration::from_millis(self.flush_ms));
        Ok(())
    }
}

/// A program whose writes wait on slow members holds only the I/O
/// threads running them: a flush of every member that another thread
/// started just before (one member's flush taking 50 ms) completes
/// meanwhile.  (Run on a work-stealing pool's `scope`, the thread
/// waiting for the flushes took up one of the held writes while it
/// waited, and the flush returned only once that write did: a cached
/// DVS write's journal flush waited for a background destage's appends.)
#[test]
fn a_program_held_on_slow_members_does_not_hold_another_threads_program() {
    let shut = Arc::new((std::sync::Mutex::new(true), std::sync::Condvar::new()));
    let ms: Vec<Arc<Gated>> = (0..5).map(|i| Arc::new(Gated { inner: MemMember::new(format!("g{i}"), 1 << 20), shut: shut.clone(), flush_ms: if i == 0 { 50 } else { 0 } })).collect();
    let ex = Arc::new(Executor::new(ms.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0));
    let mut held = Program::default();
    let big = held.buf(Buf::Input { off: 0, len: 128 << 10 });
    held.phases.push(Phase::write((0..5).map(|m| Io::new(op(m, 0, 128 << 10, Role::Data), Ref::new(big, 0))).collect()));
    let flush = Program { phases: vec![Phase::Flush((0..5).collect())], ..Default::default() };
    let mut stuck = 0;
    for round in 0..5u8 {
        *shut.0.lock().unwrap() = true;
        let (tx, rx) = std::sync::mpsc::channel();
        let (ex1, flush1) = (ex.clone(), flush.clone());
        let f = std::thread::spawn(move || {
            let r = ex1.run(&flush1, Client::None, None).map(drop);
            tx.send(()).unwrap();
            r
        });
        std::thread::sleep(std::time::Duration::from_millis(10));
        let (ex2, held2) = (ex.clone(), held.clone());
        let h = std::thread::spawn(move || ex2.run(&held2, Client::In(&[round + 1; 128 << 10]), None).map(drop));
        if rx.recv_timeout(std::time::Duration::from_secs(2)).is_err() {
            stuck += 1;
        }
        *shut.0.lock().unwrap() = false;
        shut.1.notify_all();
        h.join().unwrap().unwrap();
        f.join().unwrap().unwrap();
    }
    assert_eq!(stuck, 0, "of 5 flushes, {stuck} waited for another program's held writes");
    assert!(ms.iter().all(|m| peek(&m.inner, 0, 128 << 10) == vec![5u8; 128 << 10]), "the held writes completed once let through");
}

/// Programs from many threads at once: each thread counts into its own
/// shard, and `counters` sums every operation of every thread (and
/// `reset_counters` clears them all).  The parity each thread kept is the
/// XOR of what it wrote, so no two threads' runs mixed their bytes.
#[test]
fn counters_of_programs_from_many_threads_add_up_to_every_operation() {
    const THREADS: u64 = 12;
    const RUNS: u64 = 200;
    let ms = mems(3);
    let ex = exec_on(&ms);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let ex = &ex;
            s.spawn(move || {
                for i in 0..RUNS {
                    // Thread t's own stripe, data on member i % 2.
                    let d = vec![(t * RUNS + i) as u8; 4096];
                    ex.run(&rmw((i % 2) as usize, 2, t * 4096), Client::In(&d), None).unwrap();
                }
            });
        }
    });
    let c = ex.counters();
    let n = THREADS * RUNS;
    assert_eq!((c.ops.data_reads, c.ops.code_reads, c.ops.data_writes, c.ops.code_writes, c.ops.stripes_rmw), (n, n, n, n, n));
    assert_eq!((c.members[0].writes, c.members[1].writes, c.members[2].writes), (n / 2, n / 2, n));
    assert_eq!(c.members[2].read_bytes, n * 4096);
    for t in 0..THREADS {
        // Each stripe's parity is the XOR of its two data units.
        let (a, b, p) = (peek(&ms[0], t * 4096, 4096), peek(&ms[1], t * 4096, 4096), peek(&ms[2], t * 4096, 4096));
        assert_eq!(p, a.iter().zip(&b).map(|(x, y)| x ^ y).collect::<Vec<u8>>(), "stripe {t}");
        assert_eq!((a[0], b[0]), (((t + 1) * RUNS - 2) as u8, ((t + 1) * RUNS - 1) as u8));
    }
    ex.reset_counters();
    let c = ex.counters();
    assert_eq!((c.ops.data_writes, c.members[2].writes), (0, 0));
}

/// A member table change reaches the runs after it; the counters follow
/// members added and taken away, from every thread's shard.
#[test]
fn member_changes_reach_later_runs_and_the_counters_follow_the_width() {
    let ms = mems(4);
    let ex = Executor::new(ms[..3].iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0);
    let d = vec![0x11u8; 4096];
    ex.run(&rmw(0, 2, 0), Client::In(&d), None).unwrap();
    // Member 2 now a fresh device: the next run's parity goes there.
    let fresh = Arc::new(MemMember::new("fresh", 1 << 20));
    let e0 = ex.epoch();
    ex.set_member(2, Some(fresh.clone()));
    assert_eq!(ex.epoch(), e0 + 1, "a change bumps the epoch");
    ex.run(&rmw(0, 2, 4096), Client::In(&d), None).unwrap();
    assert_eq!(peek(&fresh, 4096, 1), vec![0x11]);
    assert_eq!(peek(&ms[2], 4096, 1), vec![0], "the old device took nothing after the change");
    // swap_member only over the device expected there.
    let other: Arc<dyn Member> = ms[3].clone();
    assert!(!ex.swap_member(2, &other, ms[2].clone()));
    assert!(Arc::ptr_eq(&ex.member(2).unwrap(), &(fresh.clone() as Arc<dyn Member>)));
    let expected: Arc<dyn Member> = fresh.clone();
    assert!(ex.swap_member(2, &expected, ms[2].clone()));
    // A fourth member, counted from any thread.
    ex.add_member(ms[3].clone());
    assert_eq!(ex.width(), 4);
    std::thread::scope(|s| {
        s.spawn(|| ex.run(&rmw(3, 2, 8192), Client::In(&d), None).unwrap());
    });
    let c = ex.counters();
    assert_eq!((c.members.len(), c.errors.len()), (4, 4));
    assert_eq!((c.members[3].reads, c.members[3].writes), (1, 1));
    assert!(ex.remove_last_member().is_some_and(|m| Arc::ptr_eq(&m, &(ms[3].clone() as Arc<dyn Member>))));
    assert_eq!((ex.width(), ex.counters().members.len()), (3, 3));
    // A missing member fails the run's operations on it, not the process.
    ex.set_member(1, None);
    match ex.run(&rmw(1, 2, 0), Client::In(&d), None) {
        Err(ExecError::Device(f)) => assert_eq!((f[0].member, f[0].error.to_string()), (1, "member missing".to_string())),
        other => panic!("{other:?}"),
    }
}

/// The gate's writer holds off readers on every thread (whichever shard
/// each takes), and a reader on any thread holds off the writer.
#[test]
fn the_gate_holds_readers_off_while_written_and_the_writer_off_while_read() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::time::Duration;
    let g = crate::Gate::default();
    let inside = AtomicUsize::new(0);
    let w = g.write();
    std::thread::scope(|s| {
        for _ in 0..3 * crate::shard::SHARDS {
            s.spawn(|| {
                let _r = g.read();
                inside.fetch_add(1, SeqCst);
            });
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(inside.load(SeqCst), 0, "no reader while the gate is written");
        drop(w);
    });
    assert_eq!(inside.load(SeqCst), 3 * crate::shard::SHARDS);
    for _ in 0..crate::shard::SHARDS {
        let (read, released) = (std::sync::Barrier::new(2), AtomicBool::new(false));
        std::thread::scope(|s| {
            s.spawn(|| {
                let _r = g.read();
                read.wait();
                std::thread::sleep(Duration::from_millis(20));
                released.store(true, SeqCst);
            });
            read.wait();
            let _w = g.write();
            assert!(released.load(SeqCst), "the writer waited for the reader");
        });
    }
}

/// A thread takes the lowest number no living thread holds (so threads
/// alive together have distinct shards while there are at most `SHARDS`
/// of them, however many came and went before), and threads alive
/// together never share a number.
#[test]
fn thread_numbers_are_the_lowest_free_and_never_shared_by_living_threads() {
    let mut n = crate::shard::Numbers::default();
    assert_eq!((n.take(), n.take(), n.take()), (0, 1, 2));
    n.give_back(1);
    assert_eq!(n.take(), 1);
    n.give_back(2);
    n.give_back(0);
    assert_eq!((n.take(), n.take(), n.take()), (0, 2, 3));
    // Threads come and go, then several live together.
    for _ in 0..40 {
        std::thread::spawn(crate::shard::number).join().unwrap();
    }
    let barrier = std::sync::Barrier::new(12);
    let numbers: Vec<usize> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..12)
            .map(|_| {
                s.spawn(|| {
                    let m = crate::shard::number().unwrap();
                    barrier.wait();
                    m
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut distinct = numbers.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), numbers.len(), "{numbers:?}");
}

/// Destage-shaped programs made in place: each parity computation's
/// terms and result are the next bytes of writes to their own members
/// (`fuse::in_place`, `Executor::in_place`).
mod in_place {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const CHUNK: usize = 64 << 10;
    const ROWS: usize = 20;

    /// A RAM member that takes writes in place or not (`direct`),
    /// counting the ones it took and how many it refused (`refuse`: it
    /// refuses every one, before giving its memory).
    struct Counted {
        inner: Arc<MemMember>,
        direct: bool,
        refuse: bool,
        taken: AtomicUsize,
    }

    impl Member for Counted {
        fn describe(&self) -> String {
            self.inner.describe()
        }
        fn size(&self) -> u64 {
            self.inner.size()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            self.inner.write_at(buf, offset)
        }
        fn write_parts_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
            self.inner.write_parts_at(parts, offset)
        }
        fn write_in_place(&self, offset: u64, len: u64, fill: &mut dyn FnMut(&mut [u8]) -> io::Result<()>) -> Option<io::Result<()>> {
            if !self.direct {
                return None;
            }
            if self.refuse {
                return Some(Err(io::Error::other("refused")));
            }
            let r = self.inner.write_in_place(offset, len, fill)?;
            if r.is_ok() {
                self.taken.fetch_add(1, Ordering::SeqCst);
            }
            Some(r)
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
        fn is_memory(&self) -> bool {
            true
        }
    }

    /// Rows of 4 data chunks (their own byte buffers) and a parity chunk
    /// (row r of one scratch buffer), parity on member r % 5; each member
    /// takes its chunks, row after row, in one gathered write from byte 0.
    /// Each row's parity is computed in two pieces (16 KiB, then the rest),
    /// so a computation takes part of a write's piece.  The program and
    /// what each member must hold after it.
    fn destage() -> (Program, Vec<Vec<u8>>) {
        let mut p = Program::default();
        let parity = p.buf(Buf::Scratch(ROWS * CHUNK));
        let mut want = vec![Vec::new(); 5];
        let mut pieces: Vec<Vec<(Ref, usize)>> = vec![Vec::new(); 5];
        let mut cs = Vec::new();
        for r in 0..ROWS {
            let pm = r % 5;
            let mut sum = vec![0u8; CHUNK];
            let mut terms = Vec::new();
            for (j, m) in (0..5).filter(|&m| m != pm).enumerate() {
                let bytes = pattern(CHUNK, (r * 8 + j) as u32);
                sum.iter_mut().zip(&bytes).for_each(|(s, b)| *s ^= b);
                want[m].extend_from_slice(&bytes);
                let b = p.buf(Buf::Bytes(bytes.into()));
                pieces[m].push((Ref::new(b, 0), CHUNK));
                terms.push(Ref::new(b, 0));
            }
            want[pm].extend_from_slice(&sum);
            pieces[pm].push((Ref::new(parity, r * CHUNK), CHUNK));
            for (at, len) in [(0, 16 << 10), (16 << 10, CHUNK - (16 << 10))] {
                cs.push(Combine { dst: Ref::new(parity, r * CHUNK + at), len, acc: false, terms: terms.iter().map(|t| (1, t.at(at))).collect() });
            }
        }
        p.phases.push(Phase::Compute(cs));
        let ios = pieces.into_iter().enumerate().map(|(m, ps)| Io::new(op(m, 0, (ROWS * CHUNK) as u64, if m == 0 { Role::Code } else { Role::Data }), Ref::new(p.buf(Buf::Gather(ps)), 0))).collect();
        p.phases.push(Phase::write(ios));
        p.validate().unwrap();
        (p, want)
    }

    fn run_on(direct: bool, refuse: Option<usize>) -> (Vec<Arc<Counted>>, crate::Counters) {
        let (p, want) = destage();
        let ms: Vec<Arc<Counted>> = (0..5).map(|i| Arc::new(Counted { inner: Arc::new(MemMember::new(format!("m{i}"), 4 << 20)), direct, refuse: refuse == Some(i), taken: AtomicUsize::new(0) })).collect();
        let ex = Executor::new(ms.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0);
        assert!(ex.all_cheap());
        ex.run(&p, Client::None, None).unwrap();
        for (m, w) in ms.iter().zip(&want) {
            assert!(peek(&m.inner, 0, w.len()) == *w, "member {} holds the phases' bytes", m.describe());
        }
        (ms, ex.counters())
    }

    /// In place, each member takes its write once, holds what the phases
    /// would have written, and the counters are those of the fused run.
    #[test]
    fn a_destage_made_in_place_writes_what_the_phases_would_and_counts_the_same() {
        let (ms, direct) = run_on(true, None);
        assert!(ms.iter().all(|m| m.taken.load(Ordering::SeqCst) == 1));
        let (ms, fused) = run_on(false, None);
        assert!(ms.iter().all(|m| m.taken.load(Ordering::SeqCst) == 0));
        assert_eq!(format!("{:?}", direct.ops), format!("{:?}", fused.ops));
        assert_eq!(format!("{:?}", direct.members), format!("{:?}", fused.members));
        assert_eq!((direct.ops.data_writes, direct.ops.code_writes), (4, 1));
    }

    /// A member that refuses its write in place leaves all of them to the
    /// fused run: none is made in place, every member still gets its bytes.
    #[test]
    fn one_member_refusing_leaves_every_write_to_the_fused_run() {
        for refuse in [0, 2, 4] {
            let (ms, c) = run_on(true, Some(refuse));
            assert!(ms.iter().all(|m| m.taken.load(Ordering::SeqCst) == 0), "refused by member {refuse}");
            assert_eq!(c.ops.data_writes + c.ops.code_writes, 5);
        }
    }

    /// The plan takes a destage's shape and nothing else: two writes to
    /// one member, a coefficient other than 1, an accumulating
    /// computation, a kept or otherwise used result, or a write not made
    /// whole all leave the program to the fused run.
    #[test]
    fn only_parity_that_feeds_whole_writes_on_their_own_members_is_planned() {
        let (p, _) = destage();
        let parts = |p: &Program| -> (Vec<Combine>, Vec<Io>) {
            let (Phase::Compute(cs), Phase::Write { ops, .. }) = (&p.phases[0], &p.phases[1]) else { panic!("shape") };
            (cs.clone(), ops.clone())
        };
        let (cs, ops) = parts(&p);
        let steps = crate::fuse::in_place(&p, 0, &cs, &ops).expect("a destage is planned");
        assert_eq!(steps.len(), 2 * ROWS);
        // Row 1's first piece: parity on member 1 at byte 64 KiB, data on
        // members 0, 2, 3, 4 at 64 KiB; its second piece 16 KiB on.
        assert_eq!(steps[2].dst, (1, CHUNK as u64));
        assert_eq!(steps[2].srcs, vec![(0, CHUNK as u64), (2, CHUNK as u64), (3, CHUNK as u64), (4, CHUNK as u64)]);
        assert_eq!(steps[3].dst, (1, (CHUNK + (16 << 10)) as u64));
        let refused = |p: &Program, cs: &[Combine], ops: &[Io]| crate::fuse::in_place(p, 0, cs, ops).is_none();
        let mut o = ops.clone();
        o[1].op.member = 0;
        assert!(refused(&p, &cs, &o), "two writes on one member");
        let mut c = cs.clone();
        c[5].terms[2].0 = 2;
        assert!(refused(&p, &c, &ops), "a coefficient other than 1");
        let mut c = cs.clone();
        c[7].acc = true;
        assert!(refused(&p, &c, &ops), "accumulated");
        let mut kept = p.clone();
        kept.keep.push(0);
        assert!(refused(&kept, &cs, &ops), "the parity kept");
        let mut later = p.clone();
        later.phases.push(Phase::write(vec![Io::new(op(0, 8 << 20, 4096, Role::Code), Ref::new(0, 0))]));
        assert!(refused(&later, &cs, &ops), "the parity written again by a later phase");
        let mut o = ops.clone();
        o[3].op.len -= 4096;
        assert!(refused(&p, &cs, &o), "a write shorter than its bytes");
        assert!(refused(&p, &cs[..cs.len() - 1], &ops), "a write's last bytes computed by nothing");
    }

    /// The pass's own kernel: every output a copy of its source and the
    /// parity their XOR, for aligned and unaligned lengths and addresses.
    #[test]
    fn copy_and_xor_copies_every_source_and_sums_them() {
        for (n, len, skew) in [(4, 4096, 0), (1, 64, 0), (3, 100, 0), (5, 8192, 1), (2, 4160, 16)] {
            let srcs: Vec<Vec<u8>> = (0..n).map(|i| pattern(len + skew, 7 + i as u32)).collect();
            let views: Vec<&[u8]> = srcs.iter().map(|s| &s[skew..]).collect();
            let mut outs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; len + 64]).collect();
            let mut dst = vec![0u8; len + 64];
            let ptrs: Vec<*mut u8> = outs.iter_mut().map(|o| o[skew..].as_mut_ptr()).collect();
            // SAFETY: each output and the parity hold `len` bytes past `skew`.
            unsafe { crate::fuse::copy_and_xor(&views, &ptrs, dst[skew..].as_mut_ptr(), len) };
            let mut sum = vec![0u8; len];
            for (o, s) in outs.iter().zip(&views) {
                assert_eq!(&o[skew..skew + len], *s, "n {n} len {len} skew {skew}");
                sum.iter_mut().zip(s.iter()).for_each(|(x, y)| *x ^= y);
            }
            assert_eq!(dst[skew..skew + len], sum[..]);
        }
    }
}

/// A failed read names its operation (the array may rebuild what the
/// member could not read, `mosaic_array::correct`); a failed write does
/// not; and a read that fails runs no later phase.
#[test]
fn a_failed_read_names_its_operation_and_a_failed_write_does_not() {
    let ms = mems(2);
    let f = Arc::new(FaultyMember::new(ms[1].clone()));
    let ex = Executor::new(vec![Some(ms[0].clone() as Arc<dyn Member>), Some(f.clone() as Arc<dyn Member>)], 0);
    f.bad_range(4096, 4096, false);
    let mut p = Program::default();
    let b = p.buf(Buf::Scratch(16384));
    let (good, bad) = (op(0, 0, 8192, Role::Data), op(1, 0, 8192, Role::Data));
    p.phases.push(Phase::Read(vec![Io::new(good, Ref::new(b, 0)), Io::new(bad, Ref::new(b, 8192))]));
    p.phases.push(Phase::write(vec![Io::new(op(0, 65536, 8192, Role::Data), Ref::new(b, 0))]));
    match ex.run(&p, Client::None, None) {
        Err(ExecError::Device(fs)) => {
            assert_eq!(fs.len(), 1);
            assert_eq!((fs[0].member, fs[0].read), (1, Some(bad)));
            assert!(fs[0].error.to_string().contains("medium error"), "{}", fs[0].error);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ex.counters().members[0].writes, 0, "the write phase after the failed read did not run");
    f.bad_range(65536, 4096, true);
    let mut w = Program::default();
    let d = w.buf(Buf::Bytes(Arc::from(vec![1u8; 4096])));
    w.phases.push(Phase::write(vec![Io::new(op(1, 65536, 4096, Role::Data), Ref::new(d, 0))]));
    match ex.run(&w, Client::None, None) {
        Err(ExecError::Device(fs)) => assert_eq!((fs[0].member, fs[0].read), (1, None)),
        other => panic!("{other:?}"),
    }
}
