use std::sync::Arc;

use mosaic_core::{Dir, MemberState};
use mosaic_dev::{MemMember, Member};
use mosaic_exec::{Client, Executor};

use super::*;
use crate::addr::DvsConfig;
use crate::engine::{Dvs, DvsParams};

/// A write-through DVS engine of `n` members and `k` parity.
fn dvs(n: usize, k: usize) -> Dvs {
    Dvs::new(Geo::new(DvsConfig::new(n, k, 4096, 16 * 4096, 8, 1)).unwrap(), DvsParams::write_through())
}

/// Bytes of chunk `lcn` (any pattern that differs per chunk and byte).
fn chunk_bytes(lcn: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(lcn * 97 + 7) as u8).collect()
}

fn lower<'a>(d: &'a Dvs, code: &'a Code) -> Lower<'a> {
    Lower { geo: &d.geo, code, healthy: &d.healthy }
}

fn io_of(p: &Program) -> Vec<(Dir, Vec<Io>)> {
    p.io().map(|(d, ios)| (d, ios.to_vec())).collect()
}

/// A job lowered in byte mode and in counting mode.
fn both_modes(d: &Dvs, code: &Code, job: &Job) -> (Program, Program) {
    let c = d.geo.chunk as usize;
    let meta = |payload| Some(Meta { offset: 4096, payload, members: vec![0, 1, 2, 3, 4] });
    let bytes = lower(d, code).job(job, &mut |l, _| Ok(Payload::Bytes(chunk_bytes(l, c).into())), &d.healthy, meta(Payload::Bytes(vec![9u8; 300].into())), &job.resets).unwrap();
    let count = lower(d, code).job(job, &mut |_, _| Ok(Payload::Len(c)), &d.healthy, meta(Payload::Len(300)), &job.resets).unwrap();
    (bytes, count)
}

#[test]
fn byte_mode_and_counting_mode_issue_the_same_operations() {
    let mut d = dvs(5, 1);
    let code = Code::new(d.geo.data, d.geo.k).unwrap();
    let c = d.geo.chunk;
    let mut jobs = Vec::new();
    jobs.extend(d.write(0, 6 * c, 0).unwrap().0);
    jobs.extend(d.write(512, 1024, 0).unwrap().0); // a partial chunk: a fill
    for _ in 0..40 {
        jobs.extend(d.write(c, c, 0).unwrap().0); // until a foreground GC
    }
    let (m, _) = d.tables.lookup(0, 2).unwrap();
    let mut h = mosaic_core::Health::all_active(5);
    h.states[m] = MemberState::Failed;
    d.set_health(&h);
    jobs.extend(d.write(2 * c + 512, 512, 0).unwrap().0); // a degraded fill
    assert!(jobs.iter().any(|j| j.old_phys.is_some() && !j.resets.is_empty()), "a GC with resets");
    assert!(jobs.iter().any(|j| j.fills.iter().any(|f| matches!(f.src, Src::Recon { .. }))), "a reconstruction");
    for j in &jobs {
        let (b, n) = both_modes(&d, &code, j);
        assert_eq!(b.validate(), Ok(()));
        assert_eq!(io_of(&b), io_of(&n));
        assert_eq!(b.phases.len(), n.phases.len());
        assert!(matches!(b.phases.last(), Some(Phase::Reset(_)) | Some(Phase::Flush(_))));
    }
}

/// RAM members the size of the array's members.
fn ram(geo: &Geo) -> (Vec<Arc<MemMember>>, Executor) {
    let size = geo.cfg.zone_size * geo.cfg.zones;
    let ms: Vec<Arc<MemMember>> = (0..geo.n).map(|i| Arc::new(MemMember::new(format!("m{i}"), size))).collect();
    let exec = Executor::new(ms.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0);
    (ms, exec)
}

#[test]
fn a_job_program_writes_the_codes_parity_and_a_read_program_reconstructs() {
    let mut d = dvs(5, 2);
    let code = Code::new(d.geo.data, d.geo.k).unwrap();
    let (c, geo) = (d.geo.chunk as usize, d.geo.clone());
    let (ms, exec) = ram(&geo);
    // Two chunks: a stripe narrower than the 3 data columns.
    let job = d.write(0, 2 * c as u64, 0).unwrap().0.remove(0);
    let (p, _) = both_modes(&d, &code, &job);
    exec.run(&p, Client::None, None).unwrap();
    for st in &job.stripes {
        let data: Vec<Vec<u8>> = (0..geo.data).map(|j| st.lcns.get(j).map_or(vec![0u8; c], |&l| chunk_bytes(l, c))).collect();
        let mut par = vec![vec![0u8; c]; geo.k];
        code.encode(&data.iter().map(|v| v.as_slice()).collect::<Vec<_>>(), &mut par.iter_mut().map(|v| v.as_mut_slice()).collect::<Vec<_>>()).unwrap();
        for (col, (&m, &idx)) in st.members.iter().zip(&st.idx).enumerate() {
            let mut got = vec![0u8; c];
            ms[m as usize].read_at(&mut got, geo.slot_offset(job.phys, idx)).unwrap();
            let want = if col < st.width() { &data[col] } else { &par[col - st.width()] };
            assert!(&got == want, "column {col} on member {m}");
        }
    }
    // Both data members of the stripe fail: reads decode from the parity.
    let st = &job.stripes[0];
    let mut h = mosaic_core::Health::all_active(5);
    for &m in &st.members[..2] {
        h.states[m as usize] = MemberState::Failed;
    }
    d.set_health(&h);
    let pieces = d.read(0, 2 * c as u64, 0).unwrap();
    let reads: Vec<&ChunkRead> = pieces.iter().filter_map(|p| if let crate::engine::ReadSrc::Disk(r) = &p.src { Some(r) } else { None }).collect();
    assert!(reads.iter().all(|r| matches!(r.src, Src::Recon { .. })));
    let (p, at) = lower(&d, &code).read(&reads).unwrap();
    let got = exec.run(&p, Client::None, None).unwrap().remove(0);
    for (r, o) in reads.iter().zip(at) {
        assert!(got[o..o + c] == chunk_bytes(r.key.1, c)[..], "chunk {} reconstructed", r.key.1);
    }
}

fn direct(member: usize, offset: u64, a: u64, b: u64) -> ChunkRead {
    ChunkRead { key: (0, 0), a, b, src: Src::Direct { member, offset: offset + a } }
}

#[test]
fn read_runs_merge_contiguous_reads_of_one_member_in_one_zone() {
    let g = Geo::new(DvsConfig::new(5, 1, 4096, 4 * 4096, 8, 1)).unwrap();
    let z = g.cfg.zone_size;
    // Member 1: slots 1, 2 (contiguous), 3 from byte 512 (a gap);
    // member 2: the last slot of one zone and the first of the next.
    let r = [direct(1, z + 8192, 0, 4096), direct(1, z + 4096, 0, 4096), direct(1, z + 12288, 512, 4096), direct(2, 2 * z - 4096, 0, 4096), direct(2, 2 * z, 0, 4096)];
    let refs: Vec<&ChunkRead> = r.iter().collect();
    let run = |member, offset, len, parts: Vec<(usize, u64)>| ReadRun { member, offset, len, parts };
    assert_eq!(
        read_runs(&g, &refs),
        vec![
            run(1, z + 4096, 8192, vec![(1, 0), (0, 4096)]),
            run(1, z + 12288 + 512, 3584, vec![(2, 0)]),
            run(2, 2 * z - 4096, 4096, vec![(3, 0)]),
            run(2, 2 * z, 4096, vec![(4, 0)]),
        ]
    );
}

#[test]
fn a_jobs_appends_are_one_write_per_member_and_contiguous_slots() {
    let mut d = dvs(5, 1);
    let code = Code::new(d.geo.data, d.geo.k).unwrap();
    // Eight chunks: two full stripes, each member gets two contiguous slots.
    let job = d.write(0, 8 * d.geo.chunk, 0).unwrap().0.remove(0);
    let (p, _) = both_modes(&d, &code, &job);
    let (_, appends) = p.io().find(|(dir, _)| *dir == Dir::Write).unwrap();
    let mut ms: Vec<usize> = appends.iter().map(|io| io.op.member).collect();
    ms.dedup();
    assert_eq!(ms, vec![0, 1, 2, 3, 4]);
    assert!(appends.iter().all(|io| io.op.len == 2 * d.geo.chunk));
}

/// Run `jobs` on RAM members, the cached chunks given by `cached`: the
/// members' bytes afterwards.
fn run_jobs(d: &Dvs, code: &Code, jobs: &[Job], cached: &mut dyn FnMut(u32, &crate::cache::Bitmap) -> Result<Payload, DvsError>) -> Vec<Vec<u8>> {
    let (ms, exec) = ram(&d.geo);
    for j in jobs {
        let p = lower(d, code).job(j, cached, &d.healthy, None, &j.resets).unwrap();
        exec.run(&p, Client::None, None).unwrap();
    }
    ms.iter()
        .map(|m| {
            let mut v = vec![0u8; m.size() as usize];
            m.read_at(&mut v, 0).unwrap();
            v
        })
        .collect()
}

/// The blocks of chunk `lcn` that `bm` marks, one buffer each (as the
/// array's cache gives them).
fn marked_blocks(lcn: u32, bm: &crate::cache::Bitmap, c: usize, blk: usize) -> Payload {
    let all = chunk_bytes(lcn, c);
    Payload::Blocks((0..c / blk).filter(|&i| bm.get(i)).map(|i| Arc::from(&all[i * blk..(i + 1) * blk])).collect())
}

#[test]
fn a_cached_chunks_marked_blocks_packed_write_what_the_whole_chunk_writes() {
    let mut d = dvs(5, 1);
    let code = Code::new(d.geo.data, d.geo.k).unwrap();
    let (c, blk) = (d.geo.chunk as usize, d.geo.block as usize);
    let mut jobs = d.write(0, 6 * c as u64, 0).unwrap().0;
    // Blocks 1-2 and 5 of chunk 0, block 15 of chunk 3: fills merged with them.
    for (off, len) in [(blk, 2 * blk), (5 * blk, blk), (3 * c + 15 * blk, blk)] {
        jobs.extend(d.write(off as u64, len as u64, 0).unwrap().0);
    }
    assert!(jobs.iter().any(|j| !j.fills.is_empty() && j.chunks.iter().any(|(_, bm)| bm.as_ref().is_some_and(|b| b.ones() < 16))));
    let whole = run_jobs(&d, &code, &jobs, &mut |l, _| Ok(Payload::Bytes(chunk_bytes(l, c).into())));
    let packed = run_jobs(&d, &code, &jobs, &mut |l, bm| {
        let all = chunk_bytes(l, c);
        Ok(Payload::Bytes((0..16).filter(|&i| bm.get(i)).flat_map(|i| all[i * blk..(i + 1) * blk].to_vec()).collect::<Vec<u8>>().into()))
    });
    assert!(whole == packed, "the same bytes on every member");
    // Each marked block in a buffer of its own (the array's cache): the same bytes.
    let blocks = run_jobs(&d, &code, &jobs, &mut |l, bm| Ok(marked_blocks(l, bm, c, blk)));
    assert!(whole == blocks, "the same bytes on every member, blocks given one by one");
    // A packed payload of the wrong length is an error, not a bad write.
    let j = jobs.iter().find(|j| j.chunks.iter().any(|(_, bm)| bm.as_ref().is_some_and(|b| b.ones() < 16))).unwrap();
    let e = lower(&d, &code).job(j, &mut |_, _| Ok(Payload::Len(blk * 17)), &d.healthy, None, &j.resets).unwrap_err();
    assert!(e.to_string().contains(&format!("a cached chunk came with {} bytes for", blk * 17)), "{e}");
    let e = lower(&d, &code).job(j, &mut |_, _| Ok(Payload::Blocks(vec![Arc::from(vec![0u8; blk])])), &d.healthy, None, &j.resets).unwrap_err();
    assert!(e.to_string().contains("a cached chunk came with 1 blocks for"), "{e}");
}

/// A destage's fills (whole chunks read from their members) each land in
/// a buffer of their own that a mapped member may lend, and a chunk is
/// never put together: the only computations are parity's, and every
/// append is written from the pieces where they lie.  The members' bytes
/// are those of the whole chunks, on RAM members (copies) and on mapped
/// files (lent), and the files lend every fill.
#[test]
fn fills_are_lent_and_chunks_are_written_from_their_pieces() {
    // Chunks of 16 KiB: reads as large as the executor lends.
    let mut d = Dvs::new(Geo::new(DvsConfig::new(5, 1, 16 << 10, 16 << 14, 8, 1)).unwrap(), DvsParams::write_through());
    let code = Code::new(d.geo.data, d.geo.k).unwrap();
    let (c, blk) = (d.geo.chunk as usize, d.geo.block as usize);
    let mut jobs = d.write(0, 8 * c as u64, 0).unwrap().0;
    jobs.extend(d.write(blk as u64, blk as u64, 0).unwrap().0); // block 1 of chunk 0: its SSG's other chunks are fills
    let j = jobs.iter().find(|j| !j.fills.is_empty()).expect("a destage with fills");
    let blocks = |l: u32, bm: &crate::cache::Bitmap| Ok(marked_blocks(l, bm, c, blk));
    let p = lower(&d, &code).job(j, &mut blocks.clone(), &d.healthy, None, &j.resets).unwrap();
    assert_eq!(p.validate(), Ok(()));
    let lend = mosaic_exec::lendable(&p);
    let reads: Vec<&Io> = p.phases.iter().flat_map(|ph| if let Phase::Read(v) = ph { v.as_slice() } else { &[] }).collect();
    assert_eq!(reads.len(), j.fills.len());
    for r in &reads {
        assert_eq!(p.bufs[r.at.buf as usize], Buf::Scratch(r.op.len as usize), "a buffer of its own");
        assert!(lend[r.at.buf as usize], "read {:?} may be lent", r.op);
    }
    let combines: Vec<&Combine> = p.phases.iter().flat_map(|ph| if let Phase::Compute(v) = ph { v.as_slice() } else { &[] }).collect();
    assert!(combines.iter().all(|cb| cb.dst.buf == 0), "parity only, into the parity buffer");
    assert_eq!(combines.iter().map(|cb| cb.len).sum::<usize>(), j.stripes.len() * d.geo.k * c);
    let got = run_jobs(&d, &code, &jobs, &mut blocks.clone());
    let whole = run_jobs(&d, &code, &jobs, &mut |l, _| Ok(Payload::Bytes(chunk_bytes(l, c).into())));
    assert!(got == whole, "the same bytes on every member as whole chunks write");
    // Mapped member files: every fill lent, the same bytes.
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let size = d.geo.cfg.zone_size * d.geo.cfg.zones;
    let files: Vec<Arc<mosaic_dev::FileMember>> = (0..5).map(|i| Arc::new(mosaic_dev::FileMember::create(&dir.path().join(format!("m{i}")), size).unwrap())).collect();
    let exec = Executor::new(files.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect(), 0);
    for j in &jobs {
        let p = lower(&d, &code).job(j, &mut blocks.clone(), &d.healthy, None, &j.resets).unwrap();
        exec.run(&p, Client::None, None).unwrap();
    }
    for (m, want) in files.iter().zip(&got) {
        assert!(m.is_mapped());
        let mut v = vec![0u8; size as usize];
        m.read_at(&mut v, 0).unwrap();
        assert!(&v == want, "{}", m.describe());
    }
}

/// A rebuild reads each surviving column into a buffer of its own (lent
/// by a mapped member), decodes, and writes the member's slots from
/// where they were decoded: no copy besides the decodes.  The rebuilt
/// member holds exactly what it held before it was lost.
#[test]
fn a_rebuild_lends_its_columns_and_writes_from_the_decodes() {
    let mut d = Dvs::new(Geo::new(DvsConfig::new(5, 1, 16 << 10, 16 << 14, 8, 1)).unwrap(), DvsParams::write_through());
    let code = Code::new(d.geo.data, d.geo.k).unwrap();
    let c = d.geo.chunk as usize;
    let (ms, exec) = ram(&d.geo);
    let jobs = d.write(0, 8 * c as u64, 0).unwrap().0;
    for j in &jobs {
        let p = lower(&d, &code).job(j, &mut |l, _| Ok(Payload::Bytes(chunk_bytes(l, c).into())), &d.healthy, None, &j.resets).unwrap();
        exec.run(&p, Client::None, None).unwrap();
    }
    let (m, lsn) = (1usize, jobs[0].lsn);
    let before = ms[m].snapshot();
    let mut h = mosaic_core::Health::all_active(5);
    h.states[m] = MemberState::Failed;
    d.set_health(&h);
    let s = d.tables.get(lsn).unwrap();
    let cols: Vec<Option<(&Stripe, usize)>> = (0..s.wp[m]).map(|idx| s.owner[m].get(idx as usize).filter(|&&r| r != crate::tables::NONE).map(|&r| (&s.sit[r as usize], s.sit[r as usize].col_of(m).unwrap()))).collect();
    assert!(cols.iter().filter(|c| c.is_some()).count() >= 2, "columns to rebuild");
    let p = lower(&d, &code).rebuild(lsn, s.phys, m, 0, &cols).unwrap();
    assert_eq!(p.validate(), Ok(()));
    let lend = mosaic_exec::lendable(&p);
    let reads: Vec<&Io> = p.phases.iter().flat_map(|ph| if let Phase::Read(v) = ph { v.as_slice() } else { &[] }).collect();
    assert!(reads.iter().all(|r| r.op.member != m && lend[r.at.buf as usize]), "every column read lendable, none from the lost member");
    let combines: Vec<&Combine> = p.phases.iter().flat_map(|ph| if let Phase::Compute(v) = ph { v.as_slice() } else { &[] }).collect();
    assert_eq!(combines.len(), cols.iter().filter(|c| c.is_some()).count(), "one decode a column, no copies");
    ms[m].restore(vec![0u8; before.len()]);
    exec.run(&p, Client::None, None).unwrap();
    assert!(ms[m].snapshot() == before, "the rebuilt member holds what it held");
}
