//! A client's discard on the real array: the written chunks wholly inside
//! it read as holes, the SSG's next GC leaves them behind (and that makes
//! it durable), and a reopen before that GC finds the old bytes, which a
//! discard allows.  Write-through and with a journalled write cache.

use mosaic_dvs::{DvsArray, DvsConfig};

use crate::array::{cfg, cfg_cached, check_all, files_for, reopen_files, scratch};

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8).collect()
}

fn holes(a: &DvsArray, off: u64, len: u64) -> Vec<bool> {
    a.holes(off, len).unwrap().into_iter().map(|r| r.1).collect()
}

fn discard_then_gc(c: DvsConfig) {
    let dir = scratch();
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let (chunk, ssg) = (a.geo().chunk, a.geo().ssg_bytes());
    let lchunks = ssg / chunk;
    // SSG 0 written whole, and the first chunk of SSG 1.
    let mut reference = vec![0u8; a.capacity() as usize];
    let written = (ssg + chunk) as usize;
    reference[..written].copy_from_slice(&pattern(written, 1));
    a.write(0, &reference[..written]).unwrap();
    a.flush().unwrap();
    assert_eq!(a.tables().get(0).unwrap().valid as u64, lchunks);
    // From half a chunk into chunk 3 to half a chunk into chunk 15: chunks
    // 4..15 whole.  Their bytes may now be anything; here they are zeros.
    let (lo, hi) = (3 * chunk + chunk / 2, 15 * chunk + chunk / 2);
    assert_eq!(a.discard(lo, hi - lo).unwrap(), 11);
    assert_eq!(a.stats().discarded, 11);
    reference[4 * chunk as usize..15 * chunk as usize].fill(0);
    check_all(&mut a, &reference);
    let expect: Vec<bool> = (0..lchunks).map(|i| (4..15).contains(&i)).collect();
    assert_eq!(holes(&a, 0, ssg), expect);
    // A write into a discarded chunk: the rest of it reads as zeros.
    let b = a.geo().block as usize;
    let at = 6 * chunk as usize + b;
    reference[at..at + b].copy_from_slice(&pattern(b, 9));
    a.write(at as u64, &reference[at..at + b]).unwrap();
    a.flush().unwrap();
    check_all(&mut a, &reference);
    assert_eq!(a.tables().get(0).unwrap().valid as u64, lchunks - 10);

    // A reopen before any GC: the discard was never durable, the old
    // bytes are back (and the array is whole).
    drop(a);
    let mut a = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    // (Chunk 6 was written since: its new stripe holds zeros around the
    // block, and its record maps it there.)
    let mut old = pattern(written, 1);
    let c6 = 6 * chunk as usize..7 * chunk as usize;
    old[c6.clone()].copy_from_slice(&reference[c6]);
    old.resize(reference.len(), 0);
    check_all(&mut a, &old);

    // Discarded again, then the GC: it moves only what is still mapped,
    // and what it left behind stays a hole across a reopen.
    assert_eq!(a.discard(lo, hi - lo).unwrap(), 11);
    reference[4 * chunk as usize..15 * chunk as usize].fill(0);
    let moved_before = a.stats().gc_moved;
    assert!(a.gc_step().unwrap(), "SSG 0 has garbage worth a GC");
    assert_eq!(a.stats().gc_moved - moved_before, lchunks - 11, "the GC moved the mapped chunks only");
    assert_eq!(a.scrub().unwrap(), 0);
    drop(a);
    let mut a = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    check_all(&mut a, &reference);
    assert_eq!(holes(&a, 0, ssg), expect);
    assert_eq!(a.tables().get(0).unwrap().valid as u64, lchunks - 11);
    assert_eq!(a.scrub().unwrap(), 0);
}

#[test]
fn a_discard_unmaps_chunks_until_a_gc_makes_it_durable_write_through() {
    discard_then_gc(cfg(1));
}

#[test]
fn a_discard_unmaps_chunks_until_a_gc_makes_it_durable_with_a_write_cache() {
    discard_then_gc(cfg_cached(1, 8));
}

/// A chunk with blocks in the write cache keeps them, and its old bytes
/// around them: the discard skips it.
#[test]
fn a_discard_skips_a_chunk_with_cached_blocks() {
    let c = cfg_cached(1, 8);
    let dir = scratch();
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let chunk = a.geo().chunk;
    let mut reference = vec![0u8; a.capacity() as usize];
    reference[..4 * chunk as usize].copy_from_slice(&pattern(4 * chunk as usize, 3));
    a.write(0, &reference[..4 * chunk as usize]).unwrap();
    a.flush().unwrap();
    let b = a.geo().block as usize;
    reference[chunk as usize..chunk as usize + b].copy_from_slice(&pattern(b, 4));
    a.write(chunk, &reference[chunk as usize..chunk as usize + b]).unwrap();
    assert_eq!(a.discard(0, 4 * chunk).unwrap(), 3);
    reference[..chunk as usize].fill(0);
    reference[2 * chunk as usize..4 * chunk as usize].fill(0);
    check_all(&mut a, &reference);
    assert!(a.discard(0, 100).is_err(), "not whole blocks");
}

/// File churn on the engine, half the capacity in live files: each step
/// deletes a random file and writes a new one where none lives.  With the
/// deletes discarded, a GC copies the live files' chunks only; without,
/// every chunk once written stays valid and the GC copies the deleted
/// files' chunks too.  Returns (chunks the GC moved, chunks written).
fn churn(discard: bool) -> (u64, u64) {
    use mosaic_dvs::{Dvs, DvsParams, Geo};
    use rand::{Rng, SeedableRng};
    let geo = Geo::new(DvsConfig { op_pct: 10, ..DvsConfig::new(5, 1, 4096, 16 * 4096, 40, 1) }).unwrap();
    let mut d = Dvs::new(geo, DvsParams::write_through());
    let file = 4 * d.geo.chunk;
    let slots = d.geo.capacity() / file;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let (mut live, mut free): (Vec<u64>, Vec<u64>) = (Vec::new(), (0..slots).collect());
    for _ in 0..20 * slots {
        if live.len() as u64 >= slots / 2 {
            let f = live.swap_remove(rng.gen_range(0..live.len()));
            if discard {
                d.discard(f * file, file).unwrap();
            }
            free.push(f);
        }
        let f = free.swap_remove(rng.gen_range(0..free.len()));
        d.write(f * file, file, 0).unwrap();
        live.push(f);
    }
    (d.stats.gc_moved, d.stats.destaged_chunks)
}

#[test]
fn discards_spare_the_gc_the_deleted_files() {
    let (with, without) = (churn(true), churn(false));
    assert_eq!(with.1, without.1, "the same client chunks written");
    assert!(with.0 * 3 < without.0, "GC moved {} chunks with discards, {} without", with.0, without.0);
    println!("GC moved {} chunks with discards, {} without, for {} written", with.0, without.0, with.1);
}

/// A repairing scrub (k = 2) of a stripe whose rotten column holds a chunk
/// a client discarded: the discard is in memory only and the next open
/// maps the chunk there again, so the repair writes it again corrected,
/// and after a reopen it reads its bytes, never the rot.
#[test]
fn a_repair_corrects_a_discarded_chunk_the_next_open_maps_again() {
    use crate::array::{rot, stripe_with_valid_data};
    let c = cfg(2);
    let dir = scratch();
    let mut a = DvsArray::create(files_for(dir.path(), 5, &c), c.clone()).unwrap();
    let chunk = a.geo().chunk;
    let data = pattern(8 * a.geo().ssg_bytes().min(a.capacity() / 8) as usize, 5);
    a.write(0, &data).unwrap();
    let (lsn, st, col, phys) = stripe_with_valid_data(&a);
    let at = a.geo().chunk_start((lsn, st.lcns[col]));
    assert_eq!(a.discard(at, chunk).unwrap(), 1);
    rot(dir.path(), st.members[col] as usize, a.geo().slot_offset(phys, st.idx[col]));
    let fixed = a.scrub_with(true, &|_, _| {}).unwrap();
    assert_eq!(fixed.mismatched, 1, "{fixed:?}");
    drop(a);
    let mut a = DvsArray::open(reopen_files(dir.path(), 5)).unwrap();
    let mut got = vec![0u8; chunk as usize];
    a.read(at, &mut got).unwrap();
    assert!(got[..] == data[at as usize..(at + chunk) as usize], "the discarded chunk reads its bytes after a reopen, not the rot");
    assert_eq!(a.scrub().unwrap(), 0);
}
