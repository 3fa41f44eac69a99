//! What stops a DVS array and can be mended, as md mends it: a member
//! whose write, flush or zone reset fails is failed (md fails a member at
//! a write error), and the bytes a degraded array's destage or GC can
//! neither read nor decode are set aside as lost (md's bad-block log);
//! either way the array goes on.
//!
//! A program that fails part-way leaves the array's memory ahead of its
//! drives: its job is in the tables, the cache let go of its chunks, and
//! the destager dropped the programs queued behind it (planned on top of
//! it).  So nothing can be mended in place, as [`DvsArray::fail`] fails a
//! member.  The array is opened again from its drives instead, which
//! puts memory back where the drives are, by the rules a power cut
//! relies on:
//!
//! ```text
//!   a program's write, flush or zone reset fails on members F, or its
//!   fills meet sectors nothing can read nor decode (members out)
//!     ──> the array stops, as before, noting F or those reads (`Cause`)
//!     ──> at its next request, or at once for the client write or
//!         flush that met it:
//!           members out + F > k, anything else failed, or this failed
//!           once already ──> it stays stopped until opened again
//!           otherwise ──> opened again from the other members and the
//!           hot spares; F missing ──> failed on record (the open's
//!           checkpoint and label rounds, before anything else is
//!           written); slots a partial job appended are garbage; the
//!           journal replayed into the cache
//!     ──> for unreadable fills: each valid data chunk of their stripes
//!         that cannot be read whole put together from what can be, the
//!         blocks nothing gives back recorded lost (array/lost.rs), the
//!         chunk written again, so nothing reads those sectors again
//!     ──> the request runs (a write or flush once more)
//! ```
//!
//! Nothing acknowledged is lost but what was set aside: a cached write
//! was acknowledged once its journal record was on k + 1 members, so k of
//! them still hold it; a write-through one once its job's record was.  A
//! member the open finds holding less than the tables say (its append
//! failed, the record landed elsewhere) is stale there, failed anyway.  A
//! hot replace in progress ends (a member leaving ends one, as with
//! [`DvsArray::fail`]): the slot's old drive is used, not the new one.

use std::collections::BTreeSet;
use std::fmt;
use std::io;

use mosaic_core::MemberState;
use mosaic_exec::{describe_failures, Failure};

use super::{as_member, DvsArray};
use crate::DvsError;

/// Why a program failed, where the array can mend it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cause {
    /// Members' writes, flushes or zone resets failed: fail the members.
    Writes(BTreeSet<usize>),
    /// Reads of sectors their members could not read, which nothing
    /// could decode (a degraded array's destage or GC fills: member,
    /// offset, length): set their bytes aside ([`super::lost`]).
    Unreadable(Vec<(usize, u64, u64)>),
}

impl Cause {
    /// Both causes as one, when they are of one kind.
    fn and(self, other: Cause) -> Option<Cause> {
        match (self, other) {
            (Cause::Writes(mut a), Cause::Writes(b)) => {
                a.extend(b);
                Some(Cause::Writes(a))
            }
            (Cause::Unreadable(mut a), Cause::Unreadable(b)) => {
                a.extend(b.into_iter().filter(|x| !a.contains(x)).collect::<Vec<_>>());
                Some(Cause::Unreadable(a))
            }
            _ => None,
        }
    }
}

/// What a failed program's I/O error carries beside its words.
#[derive(Debug)]
pub(super) struct MemberErrors {
    cause: Option<Cause>,
    text: String,
}

impl fmt::Display for MemberErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for MemberErrors {}

/// Members' failures as one I/O error of the first one's kind, saying
/// which members' writes failed, or which reads met sectors their
/// members cannot read.
pub(super) fn failures_error(f: &[Failure]) -> DvsError {
    let kind = f.first().map_or(io::ErrorKind::Other, |x| x.error.kind());
    let cause = if f.is_empty() {
        None
    } else if f.iter().all(|x| x.read.is_none()) {
        Some(Cause::Writes(f.iter().map(|x| x.member).collect()))
    } else if f.iter().all(|x| x.medium_error()) {
        Some(Cause::Unreadable(f.iter().filter_map(|x| x.read).map(|op| (op.member, op.offset, op.len)).collect()))
    } else {
        None
    };
    member_error(kind, cause, describe_failures(f))
}

fn member_error(kind: io::ErrorKind, cause: Option<Cause>, text: String) -> DvsError {
    DvsError::Io(io::Error::new(kind, MemberErrors { cause, text }))
}

/// What `e` says the array can mend, if anything.
pub(super) fn cause(e: &DvsError) -> Option<Cause> {
    let DvsError::Io(io) = e else { return None };
    io.get_ref()?.downcast_ref::<MemberErrors>()?.cause.clone()
}

/// The sticky record of the first program that failed, given again as an
/// error that still says what can mend it.
pub(super) fn again(text: &str, cause: &Option<Cause>) -> DvsError {
    match cause {
        Some(c) => member_error(io::ErrorKind::Other, Some(c.clone()), text.to_string()),
        None => DvsError::Other(text.to_string()),
    }
}

/// Why the array stopped, as far as it can mend it.
#[derive(Debug, Default)]
pub(super) enum Stop {
    /// It has not stopped.
    #[default]
    Serving,
    /// For a cause it can mend.
    For(Cause),
    /// For anything else first, or mending it failed.
    Other,
}

impl Stop {
    /// One more error: the first decides; later ones (consequences of
    /// it) of the same kind add theirs.
    pub(super) fn note(&mut self, e: &DvsError) {
        *self = match (std::mem::take(self), cause(e)) {
            (Stop::Serving, Some(c)) => Stop::For(c),
            (Stop::For(a), Some(b)) => match a.clone().and(b) {
                Some(c) => Stop::For(c),
                None => Stop::For(a),
            },
            (Stop::For(a), None) => Stop::For(a),
            _ => Stop::Other,
        };
    }
}

/// The members whose writes failed in an open's error.
fn cause_of_open(e: &DvsError) -> Option<BTreeSet<usize>> {
    match cause(e)? {
        Cause::Writes(m) => Some(m),
        Cause::Unreadable(_) => None,
    }
}

/// Member indices in words: `1, 3`.
fn list(m: &BTreeSet<usize>) -> String {
    m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(", ")
}

impl DvsArray {
    /// What mends the array, when it stopped for a cause it can mend.
    fn mendable(&self) -> Option<Cause> {
        let mut out: Option<Cause> = None;
        if self.destager.failed().is_some() {
            out = Some(self.destager.failed_cause()?);
        }
        if self.poisoned.is_some() {
            let Stop::For(c) = &self.stop else { return None };
            out = match out {
                None => Some(c.clone()),
                Some(o) => Some(o.and(c.clone())?),
            };
        }
        out
    }

    /// When the array stopped for members' write errors the parity
    /// tolerates, or for fills a degraded array could neither read nor
    /// decode: open it again (without those members), set those bytes
    /// aside (see the module's notes), true.  False when it stopped for
    /// anything else (it stays stopped).  An error when that failed; the
    /// array then stays stopped too.
    pub(super) fn mend(&mut self) -> Result<bool, DvsError> {
        let _ = self.destager.wait();
        let Some(cause) = self.mendable() else { return Ok(false) };
        let mut why = self.stopped().unwrap_or_default();
        let (mut gone, unreadable) = match cause {
            Cause::Writes(g) => (g, Vec::new()),
            Cause::Unreadable(ops) => (BTreeSet::new(), ops),
        };
        if !self.tolerates(&gone) {
            return Ok(false);
        }
        // Never twice: an open that fails leaves the array stopped.
        self.stop = Stop::Other;
        let mut a = loop {
            let e = match self.reopened(&gone) {
                Ok(a) => break a,
                Err(e) => e,
            };
            // The open's own writes (its checkpoint, labels, a spare
            // segment's reset) may fail on another member: that one goes too.
            let more = match cause_of_open(&e) {
                Some(m) if m.iter().all(|m| !gone.contains(m)) && self.tolerates(&gone.iter().chain(&m).copied().collect()) => m,
                _ => {
                    let msg = format!("{why}; opening the array again without member(s) {} failed: {e}", list(&gone));
                    self.poisoned = Some(msg.clone());
                    return Err(DvsError::Other(msg));
                }
            };
            gone.extend(more);
            why = format!("{why}; {e}");
        };
        self.hand_over(&mut a, &gone, &why);
        *self = a;
        if !gone.is_empty() {
            tracing::warn!("DVS array {}: member(s) {} failed after a write error ({why}); it goes on without them", self.label.array_uuid, list(&gone));
        }
        if !unreadable.is_empty() {
            if let Err(e) = self.set_aside_unreadable(&unreadable) {
                let msg = format!("{why}; setting aside what could not be read failed: {e}");
                self.poisoned = Some(msg.clone());
                self.stop = Stop::Other;
                return Err(DvsError::Other(msg));
            }
            tracing::warn!("DVS array {}: bytes no member could read nor rebuild ({why}) were set aside as lost; it goes on", self.label.array_uuid);
        }
        Ok(true)
    }

    /// Whether the parity tolerates the members out now and `gone` too.
    fn tolerates(&self, gone: &BTreeSet<usize>) -> bool {
        let out = (0..self.geo.n).filter(|&m| !gone.contains(&m) && !matches!(self.state(m), MemberState::Active)).count();
        out + gone.len() <= self.geo.k
    }

    /// The array opened from its members but `gone` (a hot replace's old
    /// drive for its slot) and its hot spares.
    fn reopened(&self, gone: &BTreeSet<usize>) -> Result<DvsArray, DvsError> {
        let hot = self.hot.as_ref().map(|h| (h.member(), h.old_drive()));
        let mut devs = Vec::new();
        for (m, d) in self.members.iter().enumerate() {
            let Some(d) = d.as_ref().filter(|_| !gone.contains(&m)) else { continue };
            devs.push(match &hot {
                Some((hm, old)) if *hm == m => old.clone(),
                _ => d.clone(),
            });
        }
        devs.extend(self.spares.iter().map(|s| s.dev.clone()));
        DvsArray::open(devs)
    }

    /// What the array opened again keeps of this one: where each device
    /// came from, the members' read errors, the failed members' devices
    /// (seated, never used, as `fail` leaves them), the counters, the
    /// block pool the writers share, and what a user should hear.
    fn hand_over(&mut self, a: &mut DvsArray, gone: &BTreeSet<usize>, why: &str) {
        a.sources = self.sources.clone();
        for s in &mut a.spares {
            s.at = self.spares.iter().find(|o| o.uuid == s.uuid).and_then(|o| o.at);
        }
        a.read_errors = self.read_errors.clone();
        a.rewrite_unreadable = self.rewrite_unreadable;
        a.lossy_stripes = std::mem::take(&mut self.lossy_stripes);
        a.lent = self.lent.clone();
        let before = self.member_io();
        for (i, b) in a.side_io.get_mut().unwrap_or_else(|e| e.into_inner()).iter_mut().zip(before) {
            *i = mosaic_core::DeviceIo { reads: i.reads + b.reads, writes: i.writes + b.writes, read_bytes: i.read_bytes + b.read_bytes, write_bytes: i.write_bytes + b.write_bytes };
        }
        let missing: Vec<String> = gone.iter().map(|m| format!("member {m}: no usable device")).collect();
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.extend(a.warnings.drain(..).filter(|w| !missing.iter().any(|x| w.starts_with(x.as_str()))));
        let mut failed = std::mem::take(&mut self.auto_failed);
        for &m in gone {
            let dev = self.members[m].clone();
            if let Some(d) = &dev {
                a.exec.set_member(m, Some(as_member(d)));
                a.seat(m, d.clone());
            }
            let name = dev.map(|d| d.describe()).unwrap_or_default();
            warnings.push(format!("member {m} ({name}) failed after a write error ({why}); the array goes on without it until `mosaic replace --member {m} --drive PATH` rebuilds it"));
            failed.push((m, why.to_string()));
        }
        a.warnings = warnings;
        a.auto_failed = failed;
    }

    /// Members failed automatically since open (after write errors, or
    /// reads: a drive gone, too many corrected), with the error.
    pub fn auto_failed(&self) -> &[(usize, String)] {
        &self.auto_failed
    }
}
