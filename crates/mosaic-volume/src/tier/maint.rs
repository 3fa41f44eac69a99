//! Rebuild and scrub of a tier: each inner array does its own; the
//! reports are merged (members flattened, findings named by tier).

use mosaic_array::{RebuildReport, ScrubReport};

use super::SIDES;

/// Merge per-tier rebuild reports (members flattened).
pub(super) fn merge_rebuild(reps: Vec<(usize, RebuildReport)>) -> RebuildReport {
    let mut out = RebuildReport { members: vec![], regions: 0, resumed_from: 0, bytes_written: 0, seconds: 0.0, mib_per_s: 0.0, skipped_regions: 0, paused: false, lost_bytes: 0 };
    for (shift, r) in reps {
        out.members.extend(r.members.iter().map(|m| m + shift));
        out.regions += r.regions;
        out.resumed_from = out.resumed_from.max(r.resumed_from);
        out.bytes_written += r.bytes_written;
        out.skipped_regions += r.skipped_regions;
        out.lost_bytes += r.lost_bytes;
        out.paused |= r.paused;
        out.seconds += r.seconds;
    }
    out.mib_per_s = if out.seconds > 0.0 { out.bytes_written as f64 / (1 << 20) as f64 / out.seconds } else { 0.0 };
    out
}

/// Merge per-tier scrub reports; findings and notes name their tier.
pub(super) fn merge_scrub(reps: Vec<(usize, ScrubReport)>) -> ScrubReport {
    let mut out = ScrubReport::default();
    for (side, r) in reps {
        out.stripes_checked += r.stripes_checked;
        out.mismatched += r.mismatched;
        out.mismatched_stripes.extend(r.mismatched_stripes);
        out.findings.extend(r.findings.into_iter().map(|mut f| {
            f.detail = format!("{} tier: {}", SIDES[side], f.detail);
            f
        }));
        out.notes.extend(r.notes.into_iter().map(|n| format!("{} tier: {n}", SIDES[side])));
        out.unverified_stripes += r.unverified_stripes;
        out.unlocated_stripes += r.unlocated_stripes;
        out.skipped_stripes += r.skipped_stripes;
        out.rewritten_chunks += r.rewritten_chunks;
        out.read_errors_corrected += r.read_errors_corrected;
        out.repaired |= r.repaired;
        out.interrupted |= r.interrupted;
        out.bytes_read += r.bytes_read;
        out.seconds += r.seconds;
    }
    out
}
