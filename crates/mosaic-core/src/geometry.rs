//! Fixed stripe geometries: RAID-0/1/4/5/6 and general Reed–Solomon `rs:K+M`.
//!
//! Every member holds one *unit* (`unit` bytes) of every stripe, at member
//! data offset `stripe * unit`.  A stripe has `k` data columns and `m` code
//! columns; which member holds which column depends on the level:
//!
//! ```text
//!   raid5, n = 5 (k = 4, m = 1), left-symmetric like md's default:
//!
//!            member:  0     1     2     3     4
//!   stripe 0          D0    D1    D2    D3    P
//!   stripe 1          D1    D2    D3    P     D0
//!   stripe 2          D2    D3    P     D0    D1
//!   stripe 3          D3    P     D0    D1    D2
//!   stripe 4          P     D0    D1    D2    D3
//!
//!   first code member c0 = n - 1 - (stripe mod n)
//!   code column c (0..m)  -> member (c0 + c) mod n
//!   data column j (0..k)  -> member (c0 + m + j) mod n
//! ```
//!
//! The same rotation gives md's raid6 left-symmetric layout (P at c0, Q at
//! c0+1, data after Q) and is used for every `rs:K+M` with M >= 1.  `raid4`
//! does not rotate: data columns on members 0..k, parity on member k.
//! `raid0` has no code columns; `raid1` is an n-way mirror, modelled as one
//! data column (member 0) plus n-1 copy columns.
//!
//! Logical addresses run across the data columns of a stripe, then on to the
//! next stripe:
//!
//! ```text
//!   logical = stripe * (k * unit) + column * unit + offset_in_unit
//! ```

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use crate::PlanError;

/// Largest supported stripe unit: 64 MiB.
pub const MAX_UNIT: u64 = 64 << 20;

/// RAID level / code family of a fixed geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Raid0,
    Raid1,
    Raid4,
    Raid5,
    Raid6,
    /// General Reed–Solomon with K data and M code columns, rotating.
    Rs { k: u16, m: u16 },
    /// Code Block Request Offloading: `n` data drives hold only data; each
    /// of the `k` code columns lives on its own check drive array (CDA) of
    /// `w` members, striped raid0 by stripe number (w = 1: one device).
    Cbro { n: u16, k: u16, w: u16 },
}

impl Level {
    /// Data and code columns for `members` members.
    pub fn columns(&self, members: usize) -> Result<(usize, usize), PlanError> {
        let n = members;
        let need = |min: usize, what: &str| -> Result<(), PlanError> {
            if n < min {
                Err(PlanError::Geometry(format!(
                    "{what} needs at least {min} members, got {n}"
                )))
            } else {
                Ok(())
            }
        };
        if n > 255 {
            return Err(PlanError::Geometry(format!(
                "at most 255 members are supported, got {n}"
            )));
        }
        match *self {
            Level::Raid0 => need(1, "raid0").map(|_| (n, 0)),
            Level::Raid1 => need(2, "raid1").map(|_| (1, n - 1)),
            Level::Raid4 => need(2, "raid4").map(|_| (n - 1, 1)),
            Level::Raid5 => need(2, "raid5").map(|_| (n - 1, 1)),
            Level::Raid6 => need(3, "raid6").map(|_| (n - 2, 2)),
            Level::Cbro { n: d, k, w } => {
                let (d, k, w) = (d as usize, k as usize, w as usize);
                if d == 0 || k == 0 || w == 0 {
                    return Err(PlanError::Geometry("cbro:N+K needs N >= 1 data drives, K >= 1 check drive arrays of at least one member".into()));
                }
                if d + k > 255 {
                    return Err(PlanError::Geometry(format!("cbro:{d}+{k} has {} columns; at most 255 are supported", d + k)));
                }
                if d + k * w != n {
                    return Err(PlanError::Geometry(format!("{self} needs exactly {} members ({d} data drives + {k} x {w} CDA members), got {n}", d + k * w)));
                }
                Ok((d, k))
            }
            Level::Rs { k, m } => {
                let (k, m) = (k as usize, m as usize);
                if k == 0 {
                    return Err(PlanError::Geometry("rs:K+M needs K >= 1".into()));
                }
                if k + m > 255 {
                    return Err(PlanError::Geometry(format!(
                        "rs:{k}+{m} has {} columns; at most 255 are supported",
                        k + m
                    )));
                }
                if k + m != n {
                    return Err(PlanError::Geometry(format!(
                        "rs:{k}+{m} needs exactly {} members, got {n}",
                        k + m
                    )));
                }
                Ok((k, m))
            }
        }
    }

    /// Members implied by the level alone (only `rs:K+M` fixes it).
    pub fn implied_members(&self) -> Option<usize> {
        match *self {
            Level::Rs { k, m } => Some(k as usize + m as usize),
            Level::Cbro { n, k, w } => Some(n as usize + k as usize * w as usize),
            _ => None,
        }
    }

    fn rotates(&self) -> bool {
        matches!(self, Level::Raid5 | Level::Raid6 | Level::Rs { .. })
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Level::Raid0 => write!(f, "raid0"),
            Level::Raid1 => write!(f, "raid1"),
            Level::Raid4 => write!(f, "raid4"),
            Level::Raid5 => write!(f, "raid5"),
            Level::Raid6 => write!(f, "raid6"),
            Level::Rs { k, m } => write!(f, "rs:{k}+{m}"),
            Level::Cbro { n, k, w: 1 } => write!(f, "cbro:{n}+{k}"),
            Level::Cbro { n, k, w } => write!(f, "cbro:{n}+{k},cda=raid0:{w}"),
        }
    }
}

impl FromStr for Level {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, PlanError> {
        let t = s.trim().to_ascii_lowercase();
        Ok(match t.as_str() {
            "raid0" => Level::Raid0,
            "raid1" => Level::Raid1,
            "raid4" => Level::Raid4,
            "raid5" => Level::Raid5,
            "raid6" => Level::Raid6,
            _ if t.starts_with("cbro:") => {
                let bad = || PlanError::Geometry(format!("bad level {s:?}: expected cbro:N+K[,cda=single|raid0:W], e.g. cbro:16+1,cda=raid0:4"));
                let rest = &t["cbro:".len()..];
                let (nk, cda) = match rest.split_once(',') {
                    Some((a, b)) => (a, Some(b)),
                    None => (rest, None),
                };
                let (n, k) = nk.split_once('+').ok_or_else(bad)?;
                let n: u16 = n.trim().parse().map_err(|_| bad())?;
                let k: u16 = k.trim().parse().map_err(|_| bad())?;
                let w: u16 = match cda.map(str::trim) {
                    None | Some("cda=single") => 1,
                    Some(c) => c.strip_prefix("cda=raid0:").and_then(|w| w.parse().ok()).ok_or_else(bad)?,
                };
                let lvl = Level::Cbro { n, k, w };
                lvl.columns(n as usize + k as usize * w as usize)?;
                lvl
            }
            _ => {
                let Some(rest) = t.strip_prefix("rs:") else {
                    return Err(PlanError::Geometry(format!(
                        "unknown level {s:?}: expected raid0, raid1, raid4, raid5, raid6, rs:K+M or cbro:N+K[,cda=raid0:W]"
                    )));
                };
                let bad = || PlanError::Geometry(format!("bad level {s:?}: expected rs:K+M, e.g. rs:10+4"));
                let (k, m) = rest.split_once('+').ok_or_else(bad)?;
                let k: u16 = k.trim().parse().map_err(|_| bad())?;
                let m: u16 = m.trim().parse().map_err(|_| bad())?;
                if m == 0 {
                    return Err(PlanError::Geometry(format!("{s:?} has no code members and survives no failure: use raid0 to stripe without redundancy, or M >= 1")));
                }
                let lvl = Level::Rs { k, m };
                lvl.columns(k as usize + m as usize)?;
                lvl
            }
        })
    }
}

/// A validated fixed geometry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Geometry {
    pub level: Level,
    /// Number of members.
    pub members: usize,
    /// Data columns per stripe.
    pub k: usize,
    /// Code columns per stripe (copies for raid1).
    pub m: usize,
    /// Stripe unit in bytes.
    pub unit: u64,
    /// Logical block size in bytes (512 or 4096).
    pub block: u64,
    /// Stripes in the array (each member holds `stripes * unit` data bytes).
    pub stripes: u64,
}

impl Geometry {
    /// Validate and build a geometry. `member_data_size` is the bytes each
    /// member offers for stripe data; it is rounded down to whole units.
    pub fn new(
        level: Level,
        members: usize,
        unit: u64,
        block: u64,
        member_data_size: u64,
    ) -> Result<Geometry, PlanError> {
        let (k, m) = level.columns(members)?;
        if block != 512 && block != 4096 {
            return Err(PlanError::Geometry(format!(
                "logical block size must be 512 or 4096 bytes, got {block}"
            )));
        }
        if unit == 0 || unit % block != 0 {
            return Err(PlanError::Geometry(format!(
                "stripe unit {unit} is not a positive multiple of the block size {block}"
            )));
        }
        if unit > MAX_UNIT {
            return Err(PlanError::Geometry(format!(
                "stripe unit {unit} exceeds the maximum of 64 MiB"
            )));
        }
        let stripes = member_data_size / unit;
        if stripes == 0 {
            return Err(PlanError::Geometry(format!(
                "members offer {member_data_size} data bytes, less than one stripe unit ({unit})"
            )));
        }
        Ok(Geometry { level, members, k, m, unit, block, stripes })
    }

    /// Logical capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.stripes * self.stripe_data_bytes()
    }

    /// Data bytes per stripe.
    pub fn stripe_data_bytes(&self) -> u64 {
        self.k as u64 * self.unit
    }

    /// Bytes of each member used for stripes.
    pub fn member_data_bytes(&self) -> u64 {
        self.stripes * self.unit
    }

    /// Stripe data bytes member `member` must offer: one unit per stripe,
    /// except CBRO CDA members, which hold one unit per `w` stripes.
    pub fn member_bytes(&self, member: usize) -> u64 {
        match self.level {
            Level::Cbro { w, .. } if member >= self.k => self.stripes.div_ceil(w as u64) * self.unit,
            _ => self.stripes * self.unit,
        }
    }

    /// Whether this geometry is a mirror (code columns are plain copies).
    pub fn is_mirror(&self) -> bool {
        self.level == Level::Raid1
    }

    /// The member holding column `col` (0..k data, k..k+m code) of `stripe`.
    pub fn member_of(&self, stripe: u64, col: usize) -> usize {
        debug_assert!(col < self.k + self.m);
        if let Level::Cbro { w, .. } = self.level {
            // Data drives first, then each CDA's members, raid0 by stripe.
            let w = w as usize;
            return if col < self.k { col } else { self.k + (col - self.k) * w + (stripe % w as u64) as usize };
        }
        let n = self.members;
        if !self.level.rotates() {
            // raid0, raid1, raid4: data columns first, code columns after.
            return col;
        }
        let c0 = n - 1 - (stripe % n as u64) as usize;
        // c0 < n and the column's place after it is < n: one wrap at most.
        let at = if col >= self.k { c0 + (col - self.k) } else { c0 + self.m + col };
        if at >= n {
            at - n
        } else {
            at
        }
    }

    /// The column that `member` holds in `stripe` (inverse of [`member_of`]).
    ///
    /// [`member_of`]: Geometry::member_of
    /// None when `member` holds no unit of `stripe` (a CDA member whose
    /// turn it is not).
    pub fn column_of(&self, stripe: u64, member: usize) -> Option<usize> {
        let n = self.members;
        if let Level::Cbro { w, .. } = self.level {
            let w = w as usize;
            if member < self.k {
                return Some(member);
            }
            let (cda, idx) = ((member - self.k) / w, (member - self.k) % w);
            return (idx as u64 == stripe % w as u64).then_some(self.k + cda);
        }
        if !self.level.rotates() {
            return Some(member);
        }
        let c0 = n - 1 - (stripe % n as u64) as usize;
        let rel = (member + n - c0) % n;
        Some(if rel < self.m { self.k + rel } else { rel - self.m })
    }

    /// The most columns one stripe loses with the members `out` not in
    /// service: what they cost against the `m` code columns.  Every member
    /// holds a unit of every stripe, except the members of a CBRO check
    /// drive array, which take the stripes in turn (raid0 by stripe
    /// number, see [`Geometry::member_of`]): two members of one such array
    /// out cost its one column, not two.
    pub fn columns_out(&self, out: &[usize]) -> usize {
        let Level::Cbro { w, .. } = self.level else { return out.len() };
        let data = out.iter().filter(|&&i| i < self.k).count();
        let w = w as usize;
        (0..w)
            .map(|r| data + (0..self.m).filter(|cda| out.contains(&(self.k + cda * w + r))).count())
            .max()
            .unwrap_or(data)
    }

    /// How many leading stripes have at most `m` columns out with members
    /// in `states`: a failed member is out of every stripe, a member being
    /// rebuilt only from its `done` stripe on ([`Health::available`]).
    /// Stripes from the result on have more columns out than the code
    /// columns; it is `stripes` when none has, 0 when every stripe has.
    ///
    /// [`Health::available`]: crate::Health::available
    pub fn whole_stripes(&self, states: &[crate::MemberState]) -> u64 {
        use crate::MemberState;
        let mut out: Vec<usize> = (0..states.len()).filter(|&i| matches!(states[i], MemberState::Failed)).collect();
        let mut rebuilding: Vec<(u64, usize)> = (0..states.len())
            .filter_map(|i| match states[i] {
                MemberState::Rebuilding { done } => Some((done, i)),
                _ => None,
            })
            .collect();
        rebuilding.sort_unstable();
        if self.columns_out(&out) > self.m {
            return 0;
        }
        for (done, i) in rebuilding {
            out.push(i);
            if self.columns_out(&out) > self.m {
                return done.min(self.stripes);
            }
        }
        self.stripes
    }

    /// Member byte offset of column `col` of `stripe`.  Every member holds
    /// one unit per stripe at `stripe * unit`, except CDA members of cbro,
    /// which hold one per `w` stripes.
    pub fn offset_of(&self, stripe: u64, col: usize) -> u64 {
        match self.level {
            Level::Cbro { w, .. } if col >= self.k => stripe / w as u64 * self.unit,
            _ => stripe * self.unit,
        }
    }

    /// The first and last stripe whose units `len > 0` bytes at `offset`
    /// of `member`'s stripe data touch (the inverse of
    /// [`Geometry::offset_of`]; a CBRO check drive array member holds
    /// every `w`-th stripe, so stripes between them belong to its
    /// neighbours).
    pub fn stripes_at(&self, member: usize, offset: u64, len: u64) -> (u64, u64) {
        let (first, last) = (offset / self.unit, (offset + len.max(1) - 1) / self.unit);
        match self.level {
            Level::Cbro { w, .. } if member >= self.k => {
                let (w, turn) = (w as u64, ((member - self.k) % w as usize) as u64);
                (first * w + turn, last * w + turn)
            }
            _ => (first, last),
        }
    }

    /// Split a logical extent into per-stripe, per-column pieces.
    pub fn split(&self, offset: u64, len: u64) -> Vec<StripeExtent> {
        self.stripes_of(offset, len)
            .map(|(stripe, lo, hi)| {
                let mut cols = Vec::new();
                self.cols_into(stripe, lo, hi, offset, &mut cols);
                StripeExtent { stripe, cols }
            })
            .collect()
    }

    /// The stripes a logical extent touches, in order, each as (stripe,
    /// first logical byte, end) of the extent's part in it.
    pub fn stripes_of(&self, offset: u64, len: u64) -> impl Iterator<Item = (u64, u64, u64)> {
        let sd = self.stripe_data_bytes();
        let end = offset.saturating_add(len);
        let mut pos = offset;
        std::iter::from_fn(move || {
            if pos >= end || sd == 0 {
                return None;
            }
            let stripe = pos / sd;
            let hi = (stripe + 1).saturating_mul(sd).min(end);
            let lo = pos;
            pos = hi;
            Some((stripe, lo, hi))
        })
    }

    /// Replace `out` with the data-column pieces of logical bytes
    /// `[lo, hi)`, all in `stripe`, their buffer offsets counted from
    /// logical byte `base` (see [`split`](Geometry::split)).
    pub fn cols_into(&self, stripe: u64, lo: u64, hi: u64, base: u64, out: &mut Vec<ColRange>) {
        out.clear();
        let sd = self.stripe_data_bytes();
        let mut pos = lo;
        while pos < hi {
            let in_stripe = pos - stripe * sd;
            let col = (in_stripe / self.unit) as usize;
            let start = in_stripe % self.unit;
            let take = (self.unit - start).min(hi - pos);
            out.push(ColRange { col, start, end: start + take, buf_off: pos - base });
            pos += take;
        }
    }
}

/// The part of a request that falls in one stripe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeExtent {
    pub stripe: u64,
    /// Touched data columns, in ascending column order.
    pub cols: Vec<ColRange>,
}

/// A byte range `[start, end)` inside one column's unit, and where its bytes
/// sit in the request buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColRange {
    pub col: usize,
    pub start: u64,
    pub end: u64,
    pub buf_off: u64,
}

impl ColRange {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(level: &str, n: usize, unit: u64) -> Geometry {
        Geometry::new(level.parse().unwrap(), n, unit, 4096, unit * 100).unwrap()
    }

    #[test]
    fn raid5_left_symmetric_matches_md() {
        let g = geo("raid5", 5, 4096);
        // stripe 0: parity on member 4, D0 on 0.
        assert_eq!(g.member_of(0, 4), 4);
        assert_eq!(g.member_of(0, 0), 0);
        // stripe 1: parity on 3, D0 on 4, D1 on 0.
        assert_eq!(g.member_of(1, 4), 3);
        assert_eq!(g.member_of(1, 0), 4);
        assert_eq!(g.member_of(1, 1), 0);
        // stripe 4: parity on 0, D0 on 1.
        assert_eq!(g.member_of(4, 4), 0);
        assert_eq!(g.member_of(4, 0), 1);
    }

    #[test]
    fn raid6_q_follows_p() {
        let g = geo("raid6", 6, 4096);
        for s in 0..12 {
            let p = g.member_of(s, 4);
            let q = g.member_of(s, 5);
            assert_eq!(q, (p + 1) % 6);
            assert_eq!(g.member_of(s, 0), (p + 2) % 6);
        }
    }

    #[test]
    fn column_of_inverts_member_of() {
        for (lvl, n) in [("raid0", 3), ("raid1", 3), ("raid4", 4), ("raid5", 5), ("raid6", 7), ("rs:10+4", 14), ("cbro:4+1", 5), ("cbro:4+2,cda=raid0:3", 10)] {
            let g = geo(lvl, n, 4096);
            for s in 0..30 {
                let mut seen = vec![false; n];
                for c in 0..g.k + g.m {
                    let mem = g.member_of(s, c);
                    assert!(!seen[mem]);
                    seen[mem] = true;
                    assert_eq!(g.column_of(s, mem), Some(c), "{lvl} stripe {s} col {c}");
                }
            }
        }
    }

    /// Every unit a member holds maps back to the stripe it belongs to,
    /// alone and within a longer write.
    #[test]
    fn stripes_at_inverts_offset_of() {
        for (lvl, n) in [("raid0", 3), ("raid1", 3), ("raid5", 5), ("raid6", 7), ("rs:10+4", 14), ("cbro:4+1", 5), ("cbro:4+2,cda=raid0:3", 10)] {
            let g = geo(lvl, n, 8192);
            for s in 0..30 {
                for c in 0..g.k + g.m {
                    let (mem, off) = (g.member_of(s, c), g.offset_of(s, c));
                    assert_eq!(g.stripes_at(mem, off, 1), (s, s), "{lvl} stripe {s} col {c}");
                    assert_eq!(g.stripes_at(mem, off + 100, g.unit - 100), (s, s), "{lvl} stripe {s} col {c}, within the unit");
                    let (a, b) = g.stripes_at(mem, off, 3 * g.unit);
                    assert!(a == s && b > s, "{lvl} stripe {s} col {c}: three units reach past it");
                }
            }
        }
    }

    #[test]
    fn cbro_puts_code_on_check_drive_arrays() {
        let g = geo("cbro:16+1,cda=raid0:4", 20, 4096);
        assert_eq!((g.k, g.m), (16, 1));
        for s in 0..8u64 {
            for j in 0..16 {
                assert_eq!(g.member_of(s, j), j, "data never moves");
                assert_eq!(g.offset_of(s, j), s * 4096);
            }
            assert_eq!(g.member_of(s, 16), 16 + (s % 4) as usize);
            assert_eq!(g.offset_of(s, 16), s / 4 * 4096);
            for cda in 16..20 {
                let expect = (cda as u64 - 16 == s % 4).then_some(16);
                assert_eq!(g.column_of(s, cda), expect);
            }
        }
        assert!("cbro:16+1,cda=raid5:4".parse::<Level>().is_err());
        assert!("cbro:0+1".parse::<Level>().is_err());
        let e = Geometry::new("cbro:4+1,cda=raid0:2".parse().unwrap(), 5, 4096, 4096, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("exactly 6 members"), "{e}");
    }

    #[test]
    fn split_covers_request_exactly() {
        let g = geo("raid5", 5, 12288);
        let parts = g.split(10000, 100_000);
        let mut total = 0;
        let mut expect_buf = 0;
        for p in &parts {
            for c in &p.cols {
                assert_eq!(c.buf_off, expect_buf);
                let logical = p.stripe * g.stripe_data_bytes() + c.col as u64 * g.unit + c.start;
                assert_eq!(logical, 10000 + c.buf_off);
                expect_buf += c.len();
                total += c.len();
            }
        }
        assert_eq!(total, 100_000);
    }

    #[test]
    fn bad_geometries_are_errors() {
        assert!("raid7".parse::<Level>().is_err());
        assert!("rs:0+2".parse::<Level>().is_err());
        assert!("rs:200+56".parse::<Level>().is_err());
        assert!("rs:4+x".parse::<Level>().is_err());
        let e = "rs:4+0".parse::<Level>().unwrap_err().to_string();
        assert!(e.contains("no code members") && e.contains("use raid0"), "{e}");
        assert!(Geometry::new(Level::Raid6, 2, 4096, 4096, 1 << 20).is_err());
        assert!(Geometry::new(Level::Raid5, 4, 6000, 4096, 1 << 20).is_err());
        assert!(Geometry::new(Level::Raid5, 4, 4096, 1024, 1 << 20).is_err());
        assert!(Geometry::new(Level::Raid5, 4, 128 << 20, 4096, 1 << 30).is_err());
        assert!(Geometry::new(Level::Raid5, 4, 1 << 20, 4096, 1000).is_err());
        let e = Geometry::new(Level::Rs { k: 4, m: 2 }, 5, 4096, 4096, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("exactly 6 members"), "{e}");
    }

    #[test]
    fn level_round_trips() {
        for s in ["raid0", "raid1", "raid4", "raid5", "raid6", "rs:10+4", "rs:1+1", "cbro:16+1", "cbro:8+2,cda=raid0:4"] {
            assert_eq!(s.parse::<Level>().unwrap().to_string(), s);
        }
    }

    /// A member being rebuilt is out only from its position on: the
    /// stripes below the lowest position past which too many columns
    /// are out stay whole.
    #[test]
    fn whole_stripes_count_a_rebuilding_member_from_its_position() {
        use crate::MemberState::{Active as A, Failed as F, Rebuilding as R};
        let g = geo("raid5", 5, 4096);
        assert_eq!(g.whole_stripes(&[A, A, A, A, A]), 100);
        assert_eq!(g.whole_stripes(&[A, R { done: 30 }, A, A, A]), 100);
        assert_eq!(g.whole_stripes(&[A, R { done: 30 }, F, A, A]), 30);
        assert_eq!(g.whole_stripes(&[A, R { done: 0 }, F, A, A]), 0);
        assert_eq!(g.whole_stripes(&[A, R { done: 500 }, F, A, A]), 100);
        assert_eq!(g.whole_stripes(&[F, A, F, A, A]), 0);
        let g = geo("raid6", 6, 4096);
        assert_eq!(g.whole_stripes(&[R { done: 40 }, R { done: 20 }, F, A, A, A]), 40);
        assert_eq!(g.whole_stripes(&[R { done: 40 }, R { done: 20 }, F, F, A, A]), 20);
    }
}
