//! Lost bytes on a DVS array ([`mosaic_format::lost`], as a fixed array
//! keeps them): what a rebuild's source could not read where the code
//! spares no column, the classic RAID-5 loss in a rebuild.  md's bad-block
//! log keeps such a member and goes on; so does this:
//!
//! ```text
//!   a rebuild of member m meets a source it cannot read and the code
//!   spares no column (k = 1, or k members rebuilt)
//!     ──> the run rebuilt slot by slot: each source column read alone,
//!         block by block where it fails; a block nobody can read is
//!         taken as zeros, and m's column decoded from what is there
//!     ──> lost: the valid data at those blocks of m's column and of the
//!         unreadable one (logical ranges), in the labels (two rounds)
//!         before the rebuild logs that m holds the SSG
//!     ──> reads touching them fail ("write them again to clear"); a
//!         client write of whole blocks makes them known again
//!     ──> once the rebuild is done, every valid chunk of those stripes
//!         written again through the write path (decoded without the
//!         unreadable column): the old stripe, whose code no longer
//!         matches what the drive may yet read there, protects nothing
//! ```

use std::collections::BTreeSet;

use mosaic_core::{Buf, DevOp, Io, Method, Phase, Program, Ref, Role};
use mosaic_exec::{Client, ExecError};
use mosaic_format::lost::{self, LostRange};

use super::DvsArray;
use crate::program;
use crate::tables::Stripe;
use crate::DvsError;

/// A stripe's columns as [`DvsArray::read_stripe`] read them: zeros for
/// the erased ones (their members out, or the column rebuilt) and for
/// the blocks in `bad` (column, blocks) that could not be read.
#[derive(Debug, Default)]
struct StripeRead {
    cols: Vec<Vec<u8>>,
    erased: Vec<usize>,
    bad: Vec<(usize, Vec<u64>)>,
}

/// What a rebuild could not decode: the logical bytes lost, and the
/// stripes to write again once it is done (with the member that could
/// not read its column).
#[derive(Debug, Default)]
pub(super) struct Lossy {
    pub lost: Vec<LostRange>,
    pub stripes: Vec<(u32, u32, Stripe, usize)>,
}

impl DvsArray {
    /// The logical bytes lost ([`mosaic_format::lost`]).
    pub fn lost(&self) -> &[LostRange] {
        &self.lost
    }

    /// How many bytes are lost (the rebuild's report counts what it adds).
    pub(super) fn lost_bytes(&self) -> u64 {
        self.lost.iter().map(|r| r.len).sum()
    }

    /// A read of `offset..offset + len` must not touch lost bytes.
    pub(super) fn check_not_lost(&self, offset: u64, len: u64) -> Result<(), DvsError> {
        match lost::touched(&self.lost, offset, len) {
            None => Ok(()),
            Some(r) => Err(DvsError::Io(std::io::Error::other(format!(
                "bytes {}..{} of array {} were lost: a member could not read them while no other could rebuild them; write them again to clear",
                r.offset,
                r.end(),
                self.label.array_uuid
            )))),
        }
    }

    /// Record `add` lost, in the labels, before anything relies on it.
    pub(super) fn add_lost(&mut self, add: &[LostRange]) -> Result<(), DvsError> {
        self.lost = lost::with(&self.lost, add);
        let r = self.label_rounds();
        self.poison(r)
    }

    /// After a client's write of `offset..offset + len` is durable: its
    /// whole blocks are known again.
    pub(super) fn written_whole(&mut self, offset: u64, len: u64) -> Result<(), DvsError> {
        if self.lost.is_empty() {
            return Ok(());
        }
        let left = lost::without(&self.lost, offset, offset.saturating_add(len), self.geo.block);
        if left == self.lost {
            return Ok(());
        }
        self.lost = left;
        let r = self.label_rounds();
        self.poison(r)
    }

    /// Rebuild the run `first..` of segment `phys` of SSG `lsn` onto
    /// member `m` slot by slot, where the code cannot decode every source
    /// (`healthy`: the members read): see the module's notes.  `head`
    /// runs first (the zone's reset).
    pub(super) fn rebuild_lossy(&self, head: Program, (lsn, phys, m, first): (u32, u32, usize, u32), cols: &[Option<(&Stripe, usize)>], healthy: &[bool], lossy: &mut Lossy) -> Result<(), DvsError> {
        let c = self.geo.chunk as usize;
        let mut out = vec![0u8; cols.len() * c];
        for (i, col) in cols.iter().enumerate() {
            let Some((st, cm)) = *col else { continue };
            let read = self.read_stripe(phys, st, healthy, Some(cm))?;
            let (bytes, blocks) = self.column_lossy(st, &read, cm)?;
            out[i * c..(i + 1) * c].copy_from_slice(&bytes);
            let Some(&(j, _)) = read.bad.first() else { continue };
            lossy.stripes.push((lsn, phys, st.clone(), st.members[j] as usize));
            lossy.lost.extend(self.lost_in(lsn, st, cm, &blocks));
            for (j, _) in &read.bad {
                lossy.lost.extend(self.lost_in(lsn, st, *j, &self.column_lossy(st, &read, *j)?.1));
            }
        }
        let mut p = head;
        let len = out.len() as u64;
        let b = p.buf(Buf::Bytes(out.into()));
        p.phases.push(Phase::write(vec![Io::new(DevOp { member: m, offset: self.geo.slot_offset(phys, first), len, role: Role::Data, col: 0 }, Ref::new(b, 0))]));
        p.methods.push(Method::Rebuild);
        self.destager.wait()?;
        super::run_on(&self.exec, &p).map(drop)
    }

    /// The columns of stripe `st` (segment `phys`) that the members in
    /// `healthy` hold, but `skip`'s: each read whole, or block by block
    /// where its member cannot read it (zeros there).
    fn read_stripe(&self, phys: u32, st: &Stripe, healthy: &[bool], skip: Option<usize>) -> Result<StripeRead, DvsError> {
        let c = self.geo.chunk as usize;
        let mut r = StripeRead::default();
        for j in 0..st.members.len() {
            if Some(j) == skip || !healthy[st.members[j] as usize] {
                r.erased.push(j);
                r.cols.push(vec![0u8; c]);
                continue;
            }
            let (bytes, blocks) = self.read_blocks(st.members[j] as usize, self.geo.slot_offset(phys, st.idx[j]), c)?;
            if !blocks.is_empty() {
                r.bad.push((j, blocks));
            }
            r.cols.push(bytes);
        }
        Ok(r)
    }

    /// Column `w` of a stripe as `read` has it: as read where it was
    /// read, decoded without the erased columns where it was not; each
    /// block some column could not read decoded without those too while
    /// the unknowns are within the code.  The bytes, and the blocks of it
    /// nothing can give back (zeros in the bytes).
    fn column_lossy(&self, st: &Stripe, read: &StripeRead, w: usize) -> Result<(Vec<u8>, Vec<u64>), DvsError> {
        let blk = self.geo.block;
        let mut bytes = match read.erased.contains(&w) {
            true => self.decode_column(st, &read.cols, &read.erased, w)?,
            false => read.cols[w].clone(),
        };
        let blocks: BTreeSet<u64> = read.bad.iter().flat_map(|b| b.1.iter().copied()).collect();
        let mut lost = Vec::new();
        for b in blocks {
            let unreadable = read.bad.iter().filter(|x| x.1.contains(&b)).map(|x| x.0);
            let unknown: Vec<usize> = read.erased.iter().copied().chain(unreadable).collect();
            if !unknown.contains(&w) {
                continue;
            }
            let r = (b * blk) as usize..((b + 1) * blk) as usize;
            if unknown.len() <= self.geo.k {
                bytes[r.clone()].copy_from_slice(&self.decode_column(st, &read.cols, &unknown, w)?[r]);
            } else {
                bytes[r].fill(0);
                lost.push(b);
            }
        }
        Ok((bytes, lost))
    }

    /// Whether column `d` of stripe `st` (SSG `lsn`) holds valid data.
    fn valid_data(&self, lsn: u32, st: &Stripe, d: usize) -> bool {
        d < st.width() && self.dvs.tables.lookup(lsn, st.lcns[d]) == Some((st.members[d] as usize, st.idx[d]))
    }

    /// Whether column `d` of stripe `st` (SSG `lsn`) holds data a read
    /// may return: valid now, or on record.  A chunk a client discarded
    /// (in memory only, `Dvs::discard`) is mapped there again by the next
    /// open until a GC drops it, so a rebuild or a repair must leave its
    /// bytes right or on record as lost, never as they happen to be.
    pub(super) fn holds_data(&self, lsn: u32, st: &Stripe, d: usize) -> bool {
        self.valid_data(lsn, st, d) || (d < st.width() && self.meta.durable.lookup(lsn, st.lcns[d]) == Some((st.members[d] as usize, st.idx[d])))
    }

    /// The logical ranges of `blocks` of column `d` of stripe `st` (SSG
    /// `lsn`), when it holds data there ([`DvsArray::holds_data`]).
    fn lost_in(&self, lsn: u32, st: &Stripe, d: usize, blocks: &[u64]) -> Vec<LostRange> {
        if !self.holds_data(lsn, st, d) {
            return Vec::new();
        }
        let at = self.geo.chunk_start((lsn, st.lcns[d]));
        blocks.iter().map(|&b| LostRange { offset: at + b * self.geo.block, len: self.geo.block }).collect()
    }

    /// After a destage or GC stopped a degraded array at fills it could
    /// neither read nor decode (`ops`: member, offset, length), and the
    /// array was opened again: in each stripe those reads touch, every
    /// valid data chunk that cannot be read whole (its member out, or its
    /// sectors unreadable) is put together from what can be, the blocks
    /// nothing can give back recorded lost, then written again through
    /// the write path (the cache's newer blocks kept, and those not
    /// lost), so nothing reads those sectors again.
    pub(super) fn set_aside_unreadable(&mut self, ops: &[(usize, u64, u64)]) -> Result<(), DvsError> {
        let (z, c, conv) = (self.geo.cfg.zone_size, self.geo.chunk, self.geo.cfg.conventional);
        let mut stripes: Vec<(u32, u32, Stripe)> = Vec::new();
        for &(d, offset, len) in ops {
            let zone = offset / z;
            if zone < conv || len == 0 {
                continue;
            }
            let p = (zone - conv) as u32;
            let t = &self.dvs.tables;
            let lsn = t.phys_owner.get(p as usize).copied().unwrap_or(crate::tables::NONE);
            let Some(s) = t.get(lsn).filter(|s| s.phys == p) else { continue };
            for idx in (offset - zone * z) / c..=(offset - zone * z + len - 1) / c {
                let row = s.owner.get(d).and_then(|o| o.get(idx as usize)).copied().filter(|&r| r != crate::tables::NONE);
                if let Some(st) = row.and_then(|r| s.sit.get(r as usize)).filter(|st| !stripes.iter().any(|x| x.0 == lsn && &x.2 == *st)) {
                    stripes.push((lsn, p, st.clone()));
                }
            }
        }
        if stripes.is_empty() {
            return Err(DvsError::Other("the reads that failed hold no stripe's chunk".into()));
        }
        let healthy = self.dvs.healthy.clone();
        let mut chunks = Vec::new();
        let mut lost = Vec::new();
        for (lsn, phys, st) in &stripes {
            let read = self.read_stripe(*phys, st, &healthy, None)?;
            let unsure = |w: &usize| read.erased.contains(w) || read.bad.iter().any(|b| b.0 == *w);
            for w in (0..st.width()).filter(unsure).filter(|&w| self.valid_data(*lsn, st, w)) {
                let key = (*lsn, st.lcns[w]);
                let (mut bytes, blocks) = self.column_lossy(st, &read, w)?;
                let cached = self.dvs.cache.get(key).cloned();
                let blocks: Vec<u64> = blocks.into_iter().filter(|&b| !cached.as_ref().is_some_and(|bm| bm.get(b as usize))).collect();
                self.overlay_cached(key, 0, &mut bytes);
                lost.extend(self.lost_in(*lsn, st, w, &blocks));
                chunks.push((key, bytes));
            }
        }
        if !lost.is_empty() {
            let bytes: u64 = lost.iter().map(|r| r.len).sum();
            self.warnings.push(format!("{bytes} bytes lost: a member could not read them while another was out of their stripe; reads of them fail until they are written again (`info` lists them)"));
            self.add_lost(&lost)?;
        }
        for (key, bytes) in chunks {
            self.write_inner(self.geo.chunk_start(key), &bytes)?;
        }
        Ok(())
    }

    /// `len` bytes at `offset` of member `d`, read whole, or block by
    /// block when that fails for sectors it cannot read: the bytes (zeros
    /// where unreadable) and the blocks it could not read.  Any other
    /// failure is an error.
    fn read_blocks(&self, d: usize, offset: u64, len: usize) -> Result<(Vec<u8>, Vec<u64>), DvsError> {
        let blk = self.geo.block;
        let one = |off: u64, n: u64| match self.exec.run(&program::reads(&[(d, off, n)]), Client::None, None) {
            Ok(mut v) => Ok(Some(v.pop().unwrap_or_default())),
            Err(ExecError::Device(f)) if f.iter().all(|f| f.medium_error()) => Ok(None),
            Err(e) => Err(super::exec_error(e)),
        };
        if let Some(b) = one(offset, len as u64)? {
            return Ok((b, Vec::new()));
        }
        let mut bytes = vec![0u8; len];
        let mut bad = Vec::new();
        for (i, piece) in bytes.chunks_mut(blk as usize).enumerate() {
            match one(offset + i as u64 * blk, piece.len() as u64)? {
                Some(b) if b.len() == piece.len() => piece.copy_from_slice(&b),
                _ => bad.push(i as u64),
            }
        }
        Ok((bytes, bad))
    }

    /// Once a rebuild is done: write again every valid chunk of each
    /// stripe it could not fully decode, without the column that could
    /// not be read.  A stripe that cannot be is left to the next scrub
    /// (which meets the same unreadable column), with a warning.
    pub(super) fn restripe_lossy(&mut self) {
        for (lsn, phys, st, j) in std::mem::take(&mut self.lossy_stripes) {
            if let Err(e) = self.rewrite_stripe((lsn, phys), &st, j, None) {
                self.warnings.push(format!("SSG {lsn}: a stripe the rebuild could not fully decode was not written again ({e}); a scrub will"));
            }
        }
    }
}
