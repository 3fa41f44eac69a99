//! Hot spares of a DVS array: zoned devices held in reserve, each with a
//! label of role `spare` naming the array, listed by UUID in every
//! member's label (as fixed arrays list theirs in the superblock).
//!
//! ```text
//!   add_spare:  zone geometry checked ──> the spare's label (both slots)
//!               ──> every member's label lists it (two event rounds)
//!   open:       spares set aside before the freshness rule (no data, never
//!               stale) ──> kept when the authoritative label lists them
//!   remove_spare: every member's label drops it ──> its label erased
//!   take_spare: the first failed member ──> replace (zones reset, metadata
//!               cleared, a member label) ──> the labels drop the spare;
//!               rebuild follows
//! ```

use std::sync::Arc;

use mosaic_format::fresh::Found;
use mosaic_format::label::Label;
use mosaic_core::MemberState;
use uuid::Uuid;

use super::{check_zones, counted_label, DvsArray, Given, ZonedMember};
use crate::meta::{self, label_bytes, label_config, label_offset, MAX_SPARES};
use crate::DvsError;

/// A hot spare found at open or added since.
pub(super) struct SpareDev {
    pub(super) uuid: Uuid,
    pub(super) dev: Arc<dyn ZonedMember>,
    /// Its place in the device list given to open (None: added since).
    pub(super) at: Option<usize>,
}

/// What [`DvsArray::spares`] reports of one spare.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SpareInfo {
    pub uuid: Uuid,
    /// Its place in the device list given to open (None: added since).
    pub source: Option<usize>,
    pub describe: String,
}

/// The spares among `found` that the authoritative label `auth` lists, in
/// its order; any other spare label is named in `warnings` and not used.
pub(super) fn attach(found: Vec<Found<Given>>, auth: &Label, warnings: &mut Vec<String>) -> Vec<SpareDev> {
    let listed = meta::label_policy(auth).map(|p| p.spares).unwrap_or_default();
    let cfg = label_config(auth).ok();
    let mut kept: Vec<(usize, SpareDev)> = Vec::new();
    for f in found {
        let why = if f.label.array_uuid != auth.array_uuid {
            Some(format!("a hot spare of another DVS array ({})", f.label.array_uuid))
        } else if !listed.contains(&f.label.member_uuid) {
            Some("a former hot spare of this array (its labels no longer list it)".to_string())
        } else if label_config(&f.label).ok() != cfg {
            Some("a hot spare whose DVS configuration differs from the array's".to_string())
        } else {
            cfg.as_ref().and_then(|c| check_zones(c, "the spare", f.dev.dev.as_ref()).err()).map(|e| e.to_string())
        };
        match why {
            Some(why) => warnings.push(format!("{}: {why}; not used", f.name)),
            None => {
                let order = listed.iter().position(|u| *u == f.label.member_uuid).unwrap_or(usize::MAX);
                if !kept.iter().any(|(_, s)| s.uuid == f.label.member_uuid) {
                    kept.push((order, SpareDev { uuid: f.label.member_uuid, dev: f.dev.dev, at: Some(f.dev.at) }));
                }
            }
        }
    }
    kept.sort_by_key(|k| k.0);
    kept.into_iter().map(|k| k.1).collect()
}

impl DvsArray {
    pub(super) fn spare_uuids(&self) -> Vec<Uuid> {
        self.spares.iter().map(|s| s.uuid).collect()
    }

    /// The hot spares present.
    pub fn spares(&self) -> Vec<SpareInfo> {
        self.spares.iter().map(|s| SpareInfo { uuid: s.uuid, source: s.at, describe: s.dev.describe() }).collect()
    }

    /// Whether `dev` could be added as a hot spare, checked without
    /// writing: room for one more, zones like the members', and not in
    /// this array already.  [`DvsArray::add_spare`] checks the same.
    pub fn check_spare(&self, dev: &dyn ZonedMember) -> Result<(), DvsError> {
        if self.spares.len() >= MAX_SPARES {
            return Err(DvsError::Other(format!("the array has {MAX_SPARES} hot spares already, the most a DVS array holds")));
        }
        check_zones(&self.geo.cfg, "the spare", dev)?;
        if let (Ok(Ok(l)), _) = counted_label(dev) {
            let ours = l.array_uuid == self.label.array_uuid;
            let member = self.label.member_uuids.iter().position(|u| *u == l.member_uuid);
            if ours && (member.is_some_and(|m| !matches!(self.state(m), MemberState::Failed)) || self.spare_uuids().contains(&l.member_uuid)) {
                return Err(DvsError::Other(format!("{} is in this array already", dev.describe())));
            }
        }
        Ok(())
    }

    /// Add `dev` (zones like the members') as a hot spare; its UUID.
    pub fn add_spare(&mut self, dev: Arc<dyn ZonedMember>) -> Result<Uuid, DvsError> {
        self.check_ok()?;
        self.settle()?;
        self.check_spare(dev.as_ref())?;
        let uuid = Uuid::new_v4();
        // Both label slots, so the label outlives any later write of one.
        let events = self.meta.events;
        for ev in [events, events + 1] {
            let b = label_bytes(&meta::spare_label(&self.label, &self.geo.cfg, uuid, ev), self.ml.label_len)?;
            dev.write_at(&b, label_offset(ev))?;
        }
        dev.flush()?;
        self.spares.push(SpareDev { uuid, dev, at: None });
        let r = self.label_rounds();
        self.poison(r)?;
        Ok(uuid)
    }

    /// Remove hot spare `uuid`: every member's label stops listing it,
    /// then its own label is erased, so the device is free for any array
    /// again.  The device, which the caller releases.
    pub fn remove_spare(&mut self, uuid: Uuid) -> Result<Arc<dyn ZonedMember>, DvsError> {
        self.check_ok()?;
        self.settle()?;
        let at = self.spares.iter().position(|s| s.uuid == uuid).ok_or_else(|| DvsError::Other(format!("no hot spare {uuid} in this array")))?;
        // Listed nowhere first: a crash before the erase leaves a label
        // naming a spare the array no longer lists, which open ignores.
        let s = self.spares.remove(at);
        let r = self.label_rounds();
        self.poison(r)?;
        mosaic_format::label::erase(&mut |b, off| s.dev.write_at(b, off))?;
        s.dev.flush()?;
        Ok(s.dev)
    }

    /// Put the first spare in place of the first failed member (which is
    /// then being rebuilt; [`DvsArray::rebuild`] follows): that member and
    /// the spare's UUID, or None when no member is failed or no spare is
    /// left.
    pub fn take_spare(&mut self) -> Result<Option<(usize, Uuid)>, DvsError> {
        self.check_ok()?;
        self.settle()?;
        let Some(m) = (0..self.geo.n).find(|&m| matches!(self.state(m), MemberState::Failed)) else { return Ok(None) };
        if self.spares.is_empty() {
            return Ok(None);
        }
        // Out of the list first: replace's label rounds then drop it.
        let s = self.spares.remove(0);
        if let Err(e) = self.replace(m, s.dev.clone()) {
            if self.poisoned.is_none() {
                self.spares.insert(0, s);
            }
            return Err(e);
        }
        Ok(Some((m, s.uuid)))
    }
}
