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
            let erased: Vec<usize> = (0..st.members.len()).filter(|&j| j == cm || !healthy[st.members[j] as usize]).collect();
            let mut columns = Vec::with_capacity(st.members.len());
            let mut bad: Vec<(usize, Vec<u64>)> = Vec::new();
            for j in 0..st.members.len() {
                if erased.contains(&j) {
                    columns.push(vec![0u8; c]);
                    continue;
                }
                let (bytes, blocks) = self.read_blocks(st.members[j] as usize, self.geo.slot_offset(phys, st.idx[j]), c)?;
                if !blocks.is_empty() {
                    bad.push((j, blocks));
                }
                columns.push(bytes);
            }
            let slot = &mut out[i * c..(i + 1) * c];
            slot.copy_from_slice(&self.decode_column(st, &columns, &erased, cm)?);
            let Some(&(j, _)) = bad.first() else { continue };
            lossy.stripes.push((lsn, phys, st.clone(), st.members[j] as usize));
            let valid = |d: usize| d < st.width() && self.dvs.tables.lookup(lsn, st.lcns[d]) == Some((st.members[d] as usize, st.idx[d]));
            let blk = self.geo.block;
            let blocks: BTreeSet<u64> = bad.iter().flat_map(|b| b.1.iter().copied()).collect();
            for b in blocks {
                // The block's unknowns: the columns erased, and those that
                // cannot read it.  Within the code: decoded without them.
                let unreadable: Vec<usize> = bad.iter().filter(|x| x.1.contains(&b)).map(|x| x.0).collect();
                let unknown: Vec<usize> = erased.iter().chain(&unreadable).copied().collect();
                let r = (b * blk) as usize..((b + 1) * blk) as usize;
                if unknown.len() <= self.geo.k {
                    slot[r.clone()].copy_from_slice(&self.decode_column(st, &columns, &unknown, cm)?[r]);
                    continue;
                }
                for d in std::iter::once(cm).chain(unreadable).filter(|&d| valid(d)) {
                    lossy.lost.push(LostRange { offset: self.geo.chunk_start((lsn, st.lcns[d])) + b * blk, len: blk });
                }
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
