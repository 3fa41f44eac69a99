//! A member whose write, flush or zone reset fails is failed, as md fails
//! a member at a write error, and the array goes on without it.
//!
//! A program that fails part-way leaves the array's memory ahead of its
//! drives: its job is in the tables, the cache let go of its chunks, and
//! the destager dropped the programs queued behind it (planned on top of
//! it).  So the member cannot be failed in place, as
//! [`DvsArray::fail`] does it.  The array is opened again from its other
//! drives instead, which puts memory back where the drives are, by the
//! rules a power cut relies on:
//!
//! ```text
//!   a program's write, flush or zone reset fails on members F
//!   (the destager's, or one run inline: a journal record, a label)
//!     ──> the array stops, as before, noting F (`MemberErrors`)
//!     ──> at its next request, or at once for the client write or
//!         flush that met it:
//!           members out + F > k, a read failed too, or this failed
//!           once already ──> it stays stopped until opened again
//!           otherwise ──> opened again from the other members and the
//!           hot spares; F missing ──> failed on record (the open's
//!           checkpoint and label rounds, before anything else is
//!           written); slots a partial job appended are garbage; the
//!           journal replayed into the cache
//!     ──> the request runs (a write or flush once more)
//! ```
//!
//! Nothing acknowledged is lost: a cached write was acknowledged once its
//! journal record was on k + 1 members, so k of them still hold it; a
//! write-through one once its job's record was.  A member the open finds
//! holding less than the tables say (its append failed, the record
//! landed elsewhere) is stale there, failed anyway.  A hot replace in
//! progress ends (a member leaving ends one, as with [`DvsArray::fail`]):
//! the slot's old drive is used, not the new one.

use std::collections::BTreeSet;
use std::fmt;
use std::io;

use mosaic_core::MemberState;
use mosaic_exec::{describe_failures, Failure};

use super::{as_member, DvsArray};
use crate::DvsError;

/// What a failed program's I/O error carries beside its words: the
/// members whose writes, flushes or zone resets failed (None when a read
/// failed).
#[derive(Debug)]
pub(super) struct MemberErrors {
    writes: Option<Vec<usize>>,
    text: String,
}

impl fmt::Display for MemberErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for MemberErrors {}

/// Members' failures as one I/O error of the first one's kind, saying
/// which members' writes failed.
pub(super) fn failures_error(f: &[Failure]) -> DvsError {
    let kind = f.first().map_or(io::ErrorKind::Other, |x| x.error.kind());
    let writes = f.iter().all(|x| x.read.is_none()).then(|| f.iter().map(|x| x.member).collect());
    member_error(kind, writes, describe_failures(f))
}

fn member_error(kind: io::ErrorKind, writes: Option<Vec<usize>>, text: String) -> DvsError {
    DvsError::Io(io::Error::new(kind, MemberErrors { writes, text }))
}

/// The members whose writes (flushes, zone resets) `e` says failed, when
/// nothing else did.
pub(super) fn failed_writes(e: &DvsError) -> Option<Vec<usize>> {
    let DvsError::Io(io) = e else { return None };
    io.get_ref()?.downcast_ref::<MemberErrors>()?.writes.clone().filter(|w| !w.is_empty())
}

/// The sticky record of the first program that failed, given again as an
/// error that still names the members whose writes failed.
pub(super) fn again(text: &str, writes: &Option<Vec<usize>>) -> DvsError {
    match writes {
        Some(w) => member_error(io::ErrorKind::Other, Some(w.clone()), text.to_string()),
        None => DvsError::Other(text.to_string()),
    }
}

/// Why the array stopped, as far as failing members can mend it.
#[derive(Debug, Default)]
pub(super) enum WriteFailed {
    /// It has not stopped.
    #[default]
    Serving,
    /// For these members' writes (flushes, zone resets).
    Members(BTreeSet<usize>),
    /// For anything else first, or failing the members failed.
    Other,
}

impl WriteFailed {
    /// One more error: the first decides whether the stop is a write
    /// failure; later ones (consequences of it) add their members.
    pub(super) fn note(&mut self, e: &DvsError) {
        let w = failed_writes(e);
        *self = match (std::mem::take(self), w) {
            (WriteFailed::Serving, Some(w)) => WriteFailed::Members(w.into_iter().collect()),
            (WriteFailed::Members(mut old), Some(w)) => {
                old.extend(w);
                WriteFailed::Members(old)
            }
            (WriteFailed::Members(old), None) => WriteFailed::Members(old),
            _ => WriteFailed::Other,
        };
    }
}

/// Member indices in words: `1, 3`.
fn list(m: &BTreeSet<usize>) -> String {
    m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(", ")
}

impl DvsArray {
    /// The members to fail for the array to serve again, when it stopped
    /// for their writes alone.
    fn stop_writes(&self) -> Option<BTreeSet<usize>> {
        let mut out = BTreeSet::new();
        if self.destager.failed().is_some() {
            out.extend(self.destager.failed_writes()?);
        }
        if self.poisoned.is_some() {
            let WriteFailed::Members(m) = &self.write_failed else { return None };
            out.extend(m);
        }
        (!out.is_empty()).then_some(out)
    }

    /// When the array stopped for members' write errors the parity
    /// tolerates: open it again without them (see the module's notes),
    /// true.  False when it stopped for anything else (it stays stopped).
    /// An error when the open failed; the array then stays stopped too.
    pub(super) fn fail_writers(&mut self) -> Result<bool, DvsError> {
        let _ = self.destager.wait();
        let Some(mut gone) = self.stop_writes() else { return Ok(false) };
        let mut why = self.stopped().unwrap_or_default();
        if !self.tolerates(&gone) {
            return Ok(false);
        }
        // Never twice: an open that fails leaves the array stopped.
        self.write_failed = WriteFailed::Other;
        let mut a = loop {
            let e = match self.reopened(&gone) {
                Ok(a) => break a,
                Err(e) => e,
            };
            // The open's own writes (its checkpoint, labels, a spare
            // segment's reset) may fail on another member: that one goes too.
            let more = failed_writes(&e).filter(|m| m.iter().all(|m| !gone.contains(m)));
            match more {
                Some(m) if self.tolerates(&gone.iter().chain(&m).copied().collect()) => {
                    gone.extend(m);
                    why = format!("{why}; {e}");
                }
                _ => {
                    let msg = format!("{why}; opening the array again without member(s) {} failed: {e}", list(&gone));
                    self.poisoned = Some(msg.clone());
                    return Err(DvsError::Other(msg));
                }
            }
        };
        self.hand_over(&mut a, &gone, &why);
        *self = a;
        tracing::warn!("DVS array {}: member(s) {} failed after a write error ({why}); it goes on without them", self.label.array_uuid, list(&gone));
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
