//! The DVS metadata tables: GTT, and per SSG the AMT and the SIT.
//!
//! ```text
//!   GTT:  LSN ──> physical SSG p (a zone on every member) + that SSG's tables
//!
//!   AMT of one SSG:  LCN ──> PCN = member:segment:chunk     (NONE: never written)
//!   SIT of one SSG:  stripe ──> [ (member, chunk) of each data column ] + [ parity columns ]
//!
//!   example (paper Fig. 3/4, SSG 1, 5 members, k = 1):
//!
//!            m0    m1    m2    m3    m4      wp = 5 5 5 4 4
//!   idx 0    D0    D1    D2    D3    P0      stripe 0: full   (w = 4)
//!   idx 1    D4    D5    D6    P1    D7      stripe 1: full
//!   idx 2    D4'   D5'   D2'   D3'   P2      stripe 2: D2'..D5' rewritten: new stripe, old marked invalid
//!   idx 3    D8    D9    P3    D10   D11     stripes 3, 4: partial stripes (w = 2 each), placed on the
//!   idx 4    D12   P4    D13                 members with the lowest write pointers, appended
//! ```
//!
//! A stripe's columns are `members[c]`/`idx[c]`: columns `0..w` carry data
//! chunks `lcns[c]`, columns `w..w+k` parity rows `0..k`.  A data chunk is
//! valid while the AMT still points at its slot.  `owner[m][idx]` finds
//! the stripe of a slot (degraded reads and rebuild).  Slots between a
//! table's write pointer and the drive's (a destage cut short by a crash)
//! belong to no stripe and are garbage.

use crate::addr::Geo;
use mosaic_core::MemberState;
use crate::DvsError;

pub const NONE: u32 = u32::MAX;

/// Pack a physical chunk of the SSG's segment: member in the top 8 bits.
pub fn pack(member: usize, idx: u32) -> u32 {
    ((member as u32) << 24) | idx
}

pub fn unpack(v: u32) -> (usize, u32) {
    ((v >> 24) as usize, v & 0xff_ffff)
}

/// One stripe of an SSG (an SIT row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stripe {
    /// Data chunks (w of them, 1..=N).
    pub lcns: Vec<u32>,
    /// Members of columns 0..w+k.
    pub members: Vec<u8>,
    /// Chunk slot of each column in its member's segment.
    pub idx: Vec<u32>,
}

impl Stripe {
    pub fn width(&self) -> usize {
        self.lcns.len()
    }
    /// Column of `member` in this stripe.
    pub fn col_of(&self, member: usize) -> Option<usize> {
        self.members.iter().position(|&m| m as usize == member)
    }
}

/// Tables of one SSG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ssg {
    /// Physical segment (GTT entry).
    pub phys: u32,
    /// AMT: LCN -> packed PCN or NONE.
    pub amt: Vec<u32>,
    /// SIT.
    pub sit: Vec<Stripe>,
    /// Per member, per slot: stripe index in `sit`, or NONE.
    pub owner: Vec<Vec<u32>>,
    /// Per member write pointer (chunk slots).
    pub wp: Vec<u32>,
    /// Valid data chunks.
    pub valid: u32,
}

impl Ssg {
    fn new(geo: &Geo, phys: u32) -> Ssg {
        Ssg { phys, amt: vec![NONE; geo.lchunks as usize], sit: Vec::new(), owner: vec![Vec::new(); geo.n], wp: vec![0; geo.n], valid: 0 }
    }

    /// Slots a compaction would free: used slots minus what the valid
    /// chunks need as full stripes of `data` chunks plus `k` parity.
    pub fn garbage(&self, data: usize, k: usize) -> u64 {
        let used = self.wp.iter().map(|&w| w as u64).sum::<u64>();
        let v = self.valid as u64;
        used.saturating_sub(v + k as u64 * v.div_ceil(data as u64))
    }
}

/// GTT plus the lazily allocated tables of every SSG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    pub geo: Geo,
    /// LSN -> physical segment.
    pub gtt: Vec<u32>,
    /// Physical segment -> LSN (NONE: spare).
    pub phys_owner: Vec<u32>,
    pub ssg: Vec<Option<Box<Ssg>>>,
    /// LSNs with tables, for victim scans.
    pub live: Vec<u32>,
    /// Real arrays with a journalled cache: the first live journal record.
    pub journal_from: u64,
    /// Real arrays: each member's state, kept durably so a failed member
    /// stays failed when it comes back, and a rebuild resumes where it
    /// stopped (`Rebuilding { done }`: SSGs below LSN `done` are rebuilt).
    pub member_state: Vec<MemberState>,
}

impl Tables {
    pub fn new(geo: Geo) -> Tables {
        let gtt: Vec<u32> = (0..geo.ssgs).collect();
        let phys_owner = (0..geo.phys).map(|p| if p < geo.ssgs { p } else { NONE }).collect();
        Tables { ssg: vec![None; geo.ssgs as usize], gtt, phys_owner, live: Vec::new(), journal_from: 0, member_state: vec![MemberState::Active; geo.n], geo }
    }

    pub fn get(&self, lsn: u32) -> Option<&Ssg> {
        self.ssg[lsn as usize].as_deref()
    }

    /// The SSG's tables, created on first use.
    pub fn get_mut(&mut self, lsn: u32) -> &mut Ssg {
        if self.ssg[lsn as usize].is_none() {
            self.ssg[lsn as usize] = Some(Box::new(Ssg::new(&self.geo, self.gtt[lsn as usize])));
            self.live.push(lsn);
        }
        self.ssg[lsn as usize].as_deref_mut().unwrap()
    }

    /// AMT lookup: (member, slot) of a logical chunk.
    pub fn lookup(&self, lsn: u32, lcn: u32) -> Option<(usize, u32)> {
        let v = self.get(lsn)?.amt[lcn as usize];
        (v != NONE).then(|| unpack(v))
    }

    /// The SIT row holding slot `idx` of `member`.
    pub fn stripe_at(&self, lsn: u32, member: usize, idx: u32) -> Option<&Stripe> {
        let s = self.get(lsn)?;
        let i = *s.owner[member].get(idx as usize)?;
        (i != NONE).then(|| &s.sit[i as usize])
    }

    /// Spare physical segments.
    pub fn spares(&self) -> impl Iterator<Item = u32> + '_ {
        self.phys_owner.iter().enumerate().filter(|(_, &o)| o == NONE).map(|(p, _)| p as u32)
    }

    /// Lay `lcns` out as new stripes appended to the SSG's segment
    /// (members with the lowest write pointers first, parity on the last k
    /// chosen), without changing anything.  `None` when the segment has no
    /// room for all of them.
    pub fn layout(&self, lsn: u32, lcns: &[u32], healthy: &[bool]) -> Option<Vec<Stripe>> {
        let g = &self.geo;
        let (mut wp, rot0) = match self.get(lsn) {
            Some(s) => (s.wp.clone(), s.sit.len()),
            None => (vec![0; g.n], 0),
        };
        layout_on(g, &mut wp, rot0, lcns, healthy)
    }

    /// Commit stripes appended to the SSG's current segment: AMT entries
    /// move (old slots become invalid), SIT rows and write pointers grow.
    pub fn commit(&mut self, lsn: u32, stripes: &[Stripe]) -> Result<(), DvsError> {
        let g = self.geo.clone();
        let s = self.get_mut(lsn);
        for st in stripes {
            let row = s.sit.len() as u32;
            for (c, (&m, &idx)) in st.members.iter().zip(&st.idx).enumerate() {
                let m = m as usize;
                // At the write pointer, or beyond it after slots a crash
                // left as garbage; never below it.
                if m >= g.n || idx < s.wp[m] || idx >= g.seg_chunks {
                    return Err(DvsError::Corrupt(format!("SSG {lsn}: stripe column {c} at member {m} slot {idx} is below the write pointer {} or beyond the segment", s.wp.get(m).copied().unwrap_or(0))));
                }
                s.wp[m] = idx + 1;
                let o = &mut s.owner[m];
                o.resize(idx as usize, NONE);
                o.push(row);
            }
            for (c, &lcn) in st.lcns.iter().enumerate() {
                if lcn >= g.lchunks {
                    return Err(DvsError::Corrupt(format!("SSG {lsn}: LCN {lcn} beyond the {} of an SSG", g.lchunks)));
                }
                if s.amt[lcn as usize] == NONE {
                    s.valid += 1;
                }
                s.amt[lcn as usize] = pack(st.members[c] as usize, st.idx[c]);
            }
            s.sit.push(st.clone());
        }
        Ok(())
    }

    /// Unmap logical chunk `lcn` of SSG `lsn` (a client's discard): it
    /// reads as never written and counts as garbage, its slot and stripe
    /// left as they are.  Whether it was mapped.
    pub fn unmap(&mut self, lsn: u32, lcn: u32) -> bool {
        let Some(s) = self.ssg.get_mut(lsn as usize).and_then(|s| s.as_deref_mut()) else { return false };
        match s.amt.get_mut(lcn as usize) {
            Some(v) if *v != NONE => {
                *v = NONE;
                s.valid -= 1;
                true
            }
            _ => false,
        }
    }

    /// Move the SSG to the spare segment `new` (its tables start empty) and
    /// free its old segment.  Returns the old segment.
    pub fn switch(&mut self, lsn: u32, new: u32) -> Result<u32, DvsError> {
        if new >= self.geo.phys || self.phys_owner[new as usize] != NONE {
            return Err(DvsError::Corrupt(format!("segment {new} is not a spare")));
        }
        let old = self.gtt[lsn as usize];
        self.phys_owner[old as usize] = NONE;
        self.phys_owner[new as usize] = lsn;
        self.gtt[lsn as usize] = new;
        let fresh = Ssg::new(&self.geo, new);
        let s = self.get_mut(lsn);
        *s = fresh;
        Ok(old)
    }

    /// Valid LCNs of an SSG.
    pub fn valid_lcns(&self, lsn: u32) -> Vec<u32> {
        match self.get(lsn) {
            Some(s) => (0..s.amt.len() as u32).filter(|&l| s.amt[l as usize] != NONE).collect(),
            None => vec![],
        }
    }
}

/// The stripe builder on a copy of the write pointers.
pub fn layout_on(g: &Geo, wp: &mut [u32], rot0: usize, lcns: &[u32], healthy: &[bool]) -> Option<Vec<Stripe>> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut rot = rot0;
    let ok = |m: usize| healthy.get(m).copied().unwrap_or(true);
    while i < lcns.len() {
        // Failed members take part (their columns are simply not written,
        // as in a degraded RAID write) so a degraded SSG keeps its capacity.
        let mut avail: Vec<usize> = (0..g.n).filter(|&m| wp[m] < g.seg_chunks).collect();
        if avail.len() < g.k + 1 {
            return None;
        }
        avail.sort_by_key(|&m| (wp[m], (m + g.n - rot % g.n) % g.n));
        let w = (lcns.len() - i).min(g.data).min(avail.len() - g.k);
        let mut chosen = avail[..w + g.k].to_vec();
        // Failed members last: they get parity columns when they can.
        chosen.sort_by_key(|&m| !ok(m));
        if chosen.iter().filter(|&&m| !ok(m)).count() > g.k {
            return None;
        }
        let st = Stripe {
            lcns: lcns[i..i + w].to_vec(),
            members: chosen.iter().map(|&m| m as u8).collect(),
            idx: chosen.iter().map(|&m| wp[m]).collect(),
        };
        for &m in &chosen {
            wp[m] += 1;
        }
        out.push(st);
        i += w;
        rot += 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::DvsConfig;

    fn geo() -> Geo {
        Geo::new(DvsConfig { op_pct: 0, ..DvsConfig::new(5, 1, 4096, 8 * 4096, 6, 1) }).unwrap()
    }

    #[test]
    fn appends_variable_width_stripes_and_invalidates_old_chunks() {
        let g = geo();
        let mut t = Tables::new(g.clone());
        let h = vec![true; 5];
        let s = t.layout(1, &[0, 1, 2, 3, 4, 5, 6, 7], &h).unwrap();
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|s| s.width() == 4 && s.members.len() == 5));
        t.commit(1, &s).unwrap();
        assert_eq!(t.get(1).unwrap().wp, vec![2; 5]);
        // Update D2..D5: one new full stripe, old slots invalid.
        let s2 = t.layout(1, &[2, 3, 4, 5], &h).unwrap();
        t.commit(1, &s2).unwrap();
        let ssg = t.get(1).unwrap();
        assert_eq!(ssg.valid, 8);
        assert_eq!(ssg.garbage(4, 1), 15 - 10);
        // A partial stripe of 2 goes to the members with the lowest pointers.
        let s3 = t.layout(1, &[8, 9], &h).unwrap();
        assert_eq!(s3.len(), 1);
        assert_eq!(s3[0].members.len(), 3);
        assert!(s3[0].idx.iter().all(|&i| i == 3));
        t.commit(1, &s3).unwrap();
        let s4 = t.layout(1, &[10, 11], &h).unwrap();
        // The two members still at 3 come first.
        let wp = t.get(1).unwrap().wp.clone();
        for (&m, &i) in s4[0].members.iter().zip(&s4[0].idx) {
            assert_eq!(i, wp[m as usize]);
        }
        assert!(s4[0].idx[..2].iter().all(|&i| i == 3));
        t.commit(1, &s4).unwrap();
        // Every slot's owner finds its stripe, every valid chunk its slot.
        for lcn in [0u32, 1, 2, 5, 8, 11] {
            let (m, idx) = t.lookup(1, lcn).unwrap();
            let st = t.stripe_at(1, m, idx).unwrap();
            assert_eq!(st.lcns[st.col_of(m).unwrap()], lcn);
        }
        // Committing a stripe off the write pointer is refused.
        assert!(t.commit(1, &s4).is_err());
    }

    #[test]
    fn full_segment_has_no_room_and_switch_frees_it() {
        let g = geo();
        let mut t = Tables::new(g.clone());
        let h = vec![true; 5];
        let lcns: Vec<u32> = (0..32).collect();
        let s = t.layout(0, &lcns, &h).unwrap();
        t.commit(0, &s).unwrap();
        assert!(t.layout(0, &[0], &h).is_none());
        let spare = t.spares().next().unwrap();
        let old = t.switch(0, spare).unwrap();
        assert_eq!(old, 0);
        assert_eq!(t.gtt[0], spare);
        assert_eq!(t.spares().collect::<Vec<_>>(), vec![0]);
        assert_eq!(t.get(0).unwrap().valid, 0);
        // A failed member only ever holds parity columns (not written).
        let h2 = vec![true, false, true, true, true];
        let s = t.layout(0, &lcns[..6], &h2).unwrap();
        assert!(s.iter().all(|s| s.col_of(1).is_none_or(|c| c >= s.width())));
        assert!(s.iter().any(|s| s.col_of(1).is_some()));
    }
}
