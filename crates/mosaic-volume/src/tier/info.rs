//! What `mosaic info` shows of a tier: members flattened (fast first),
//! a summary naming both inner layouts, the fast tier's fill and
//! fragmentation and the tier's state, and the policy's counters.

use std::path::Path;
use std::sync::atomic::Ordering;

use mosaic_array::nested;
use mosaic_tier::policy::{TierPolicy, TierState, TierStats, FAST, SLOW};

use super::{TierVolume, KIND, SIDES};
use crate::{human, VolumeInfo, VolumeMember};

impl TierVolume {
    /// What `info` shows: both inner layouts, fill, fragmentation, state;
    /// the detail holds the tier's config, geometry, stats and inner infos.
    pub(super) fn volume_info(&self) -> VolumeInfo {
        let (stats, state) = {
            let g = self.lock();
            (g.as_ref().map(TierPolicy::stats), g.as_ref().map(TierPolicy::state))
        };
        let [fi, si] = [self.inner[FAST].info(), self.inner[SLOW].info()];
        let detail = serde_json::json!({
            "capacity": self.capacity,
            "stopped": self.stopped(),
            "tier": {
                "uuid": self.uuid,
                "events": self.events.load(Ordering::Relaxed),
                "state": state,
                "config": self.blob.config,
                "geometry": self.blob.geometry,
                "data_offset": self.blob.data_offset,
            },
            "stats": stats,
            "fast": fi,
            "slow": si,
            "inner_io": { "fast": self.inner[FAST].counters().1, "slow": self.inner[SLOW].counters().1 },
        });
        let journals: Vec<String> = [(&fi, FAST), (&si, SLOW)]
            .iter()
            .filter_map(|(i, side)| i.journal.as_ref().map(|j| format!("{}: {}", SIDES[*side], self.member_path(*side, j))))
            .collect();
        VolumeInfo {
            kind: KIND.into(),
            level: "tier".into(),
            uuid: self.uuid.to_string(),
            capacity: self.capacity,
            block_size: self.blob.config.block,
            stripe_unit: si.stripe_unit,
            regions: fi.stripes + si.stripes,
            members: self.members(),
            degraded: fi.degraded || si.degraded,
            journal: (!journals.is_empty()).then(|| journals.join(", ")),
            summary: self.summary(stats.as_ref(), state),
            detail,
        }
    }

    /// A member path as a user can find it: an inner array's hint may be
    /// relative to where it was created or to its own directory.
    pub(super) fn member_path(&self, side: usize, p: &str) -> String {
        let (prefix, rest) = match p.strip_prefix(nested::ARRAY_PREFIX) {
            Some(r) => (nested::ARRAY_PREFIX, r),
            None => ("", p),
        };
        let path = Path::new(rest);
        if path.is_absolute() || mosaic_dev::nbd::is_uri(rest) {
            return p.to_string();
        }
        let inside = self.dir.join(SIDES[side]).join(path.file_name().map(Path::new).unwrap_or(path));
        if inside.exists() || !path.exists() {
            return format!("{prefix}{}", inside.display());
        }
        p.to_string()
    }

    fn members(&self) -> Vec<VolumeMember> {
        let mut out = Vec::new();
        for side in [FAST, SLOW] {
            for m in self.inner[side].info().member_list {
                out.push(VolumeMember {
                    index: out.len(),
                    state: m.state,
                    present: m.present,
                    path: self.member_path(side, &m.path),
                    uuid: Some(m.uuid.to_string()),
                    errors: crate::MemberErrors { read: m.read_errors, write: m.write_errors, checksum: m.checksum_errors, corrected: m.corrected_reads },
                    host: m.host,
                    remote: m.remote,
                    readd: m.readd,
                    replacing: m.replacing.clone(),
                    write_mostly: m.write_mostly,
                    inner_out: m.inner_out.clone(),
                });
            }
        }
        out
    }

    fn summary(&self, stats: Option<&TierStats>, state: Option<TierState>) -> Vec<(String, String)> {
        let inner = |side: usize| {
            let i = self.inner[side].info();
            format!(
                "{} over {} members ({} data + {} code columns, unit {}), array {}, {} in {}",
                i.level,
                i.members,
                i.data_columns,
                i.code_columns,
                human(i.stripe_unit),
                i.uuid,
                human(i.capacity),
                self.dir.join(SIDES[side]).display()
            )
        };
        let mut s = vec![
            ("array".to_string(), format!("{} (a tier array, event counter {})", self.uuid, self.events.load(Ordering::Relaxed))),
            ("level".into(), "tier (fast + slow inner arrays; ReHypar on the fast tier)".into()),
            ("fast".into(), inner(FAST)),
            ("slow".into(), inner(SLOW)),
            ("capacity".into(), format!("{} ({} bytes): the slow tier's, less its compaction reserve", human(self.capacity), self.capacity)),
        ];
        // Each side keeps its own last scrub (a scrub of the tier checks both).
        let scrubs = [FAST, SLOW].map(|side| self.inner[side].info().last_scrub);
        if scrubs.iter().any(Option::is_some) {
            let now = mosaic_array::now_secs();
            let said = |side: usize| format!("{}: {}", SIDES[side], scrubs[side].map_or("never".into(), |r| r.line(now)));
            s.push(("last scrub".into(), format!("{}; {}", said(FAST), said(SLOW))));
        }
        if let Some(st) = stats {
            let fill = if st.fast_blocks > 0 { 100.0 * st.fast_allocated as f64 / st.fast_blocks as f64 } else { 0.0 };
            s.push((
                "fill".into(),
                format!(
                    "fast tier {fill:.1}% allocated ({} of {} blocks), {} live blocks; fragmentation: {:.1}% of allocated fast space holds live data",
                    st.fast_allocated,
                    st.fast_blocks,
                    st.fast_live,
                    100.0 * st.fast_live_fraction
                ),
            ));
            s.push((
                "moved".into(),
                format!(
                    "{} demoted in {} batches, {} promoted in {} batches; {} slow-tier RMWs avoided",
                    human(st.demoted_bytes),
                    st.demote_batches,
                    human(st.promoted_bytes),
                    st.promote_batches,
                    st.slow_rmw_avoided
                ),
            ));
        }
        let degraded = self.inner.iter().any(|a| a.health().is_degraded());
        s.push((
            "state".into(),
            match state {
                Some(st) => format!("{st:?}{}", if degraded { ", degraded (movement paused)" } else { "" }),
                None => match self.stopped() {
                    Some(why) => format!("stopped ({why}): close the array and open it again"),
                    None => "the tier map could not be read back after a failure: reopen the array".into(),
                },
            },
        ));
        s
    }
}
