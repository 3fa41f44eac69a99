//! Member health as the planner sees it.

use serde::{Deserialize, Serialize};

/// State of one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "state")]
pub enum MemberState {
    /// In service.
    Active,
    /// Failed or missing: never read or written.
    Failed,
    /// A replacement being rebuilt: stripes below `done` hold valid data and
    /// are in service; stripes at or above it are treated as failed until the
    /// rebuild reaches them.
    Rebuilding { done: u64 },
}

/// Health of every member of an array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub states: Vec<MemberState>,
}

impl Health {
    pub fn all_active(members: usize) -> Health {
        Health { states: vec![MemberState::Active; members] }
    }

    /// Whether `member` holds valid data for `stripe`.
    pub fn available(&self, member: usize, stripe: u64) -> bool {
        match self.states.get(member) {
            Some(MemberState::Active) => true,
            Some(MemberState::Rebuilding { done }) => stripe < *done,
            _ => false,
        }
    }

    /// Members not fully in service.
    pub fn degraded_members(&self) -> Vec<usize> {
        self.states
            .iter()
            .enumerate()
            .filter(|(_, s)| !matches!(s, MemberState::Active))
            .map(|(i, _)| i)
            .collect()
    }

    pub fn is_degraded(&self) -> bool {
        self.states.iter().any(|s| !matches!(s, MemberState::Active))
    }
}

/// Result of a rebuild, for every kind of array (regions: stripes of a
/// fixed layout, SSGs of DVS).
#[derive(Debug, Clone, Serialize)]
pub struct RebuildReport {
    pub members: Vec<usize>,
    pub regions: u64,
    pub resumed_from: u64,
    pub bytes_written: u64,
    pub seconds: f64,
    pub mib_per_s: f64,
    /// Regions a re-added member still held (no write came while it was
    /// out, says the write-intent bitmap): passed over, not rebuilt.
    #[serde(skip_serializing_if = "is_zero")]
    pub skipped_regions: u64,
    /// Stopped before its end (a server stopping): the members are still
    /// being rebuilt, and the next rebuild resumes where this one stopped.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Logical bytes it could not rebuild (a source's unreadable blocks
    /// where the code had no column to spare): recorded lost, so reads of
    /// them fail instead of returning wrong bytes (a fixed array's
    /// `correct`, as md's bad-block log).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_bytes: u64,
}

/// Result of a hot replace (md's `--replace`): a working member's
/// contents copied onto a new drive while the member stayed in service.
#[derive(Debug, Clone, Serialize)]
pub struct HotReport {
    pub member: usize,
    /// The new drive, as the array now names it.
    pub drive: String,
    pub regions: u64,
    pub bytes_copied: u64,
    pub seconds: f64,
    pub mib_per_s: f64,
    /// Stopped before its end (a server stopping, a signal): the member
    /// stays on its old drive.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
    /// Stopped and paused at this stripe: the new drive takes every write
    /// until the array closes, and the copy resumes here when asked again
    /// or at the next writable open after a clean close (a server resumes
    /// it by itself).  `None` when stopped: it starts over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<u64>,
    /// A paused copy resumed at this stripe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<u64>,
    /// The old drive failed during the copy: the new one takes the slot
    /// as a plain replacement (the volume's `replace_hot` does it), and a
    /// rebuild fills it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rebuild_needed: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where a scrub finding is: a stripe of a fixed layout (by number), or a
/// stripe of a mapped layout, named by its group and row (DVS: the SSG and
/// its SIT row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum ScrubAt {
    Stripe { stripe: u64 },
    Extent { group: u64, row: u64 },
}

impl std::fmt::Display for ScrubAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScrubAt::Stripe { stripe } => write!(f, "stripe {stripe}"),
            ScrubAt::Extent { group, row } => write!(f, "SSG {group} row {row}"),
        }
    }
}

/// One stripe whose code disagrees with its data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScrubFinding {
    pub at: ScrubAt,
    /// The member holding the one wrong column, when two redundant
    /// columns located it; None when it cannot be told.
    pub member: Option<usize>,
    /// What was found and what repair does, in words.
    pub detail: String,
}

/// Result of a scrub, for every kind of array (fixed layouts by stripe,
/// mapped layouts by extent).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ScrubReport {
    pub stripes_checked: u64,
    /// Stripes whose code units disagree with their data (`findings.len()`).
    pub mismatched: u64,
    /// The stripe numbers of the findings, for kinds with numbered stripes.
    pub mismatched_stripes: Vec<u64>,
    /// Every mismatch, where it is and which member is wrong if known.
    pub findings: Vec<ScrubFinding>,
    /// What repair did, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Stripes that could not be verified (too many members missing).
    pub unverified_stripes: u64,
    /// Mismatched stripes whose wrong column could not be located (one
    /// redundant column: raid5, DVS with k = 1, raid6 with a member out).
    pub unlocated_stripes: u64,
    /// Stripes not checked because they protect nothing (a log-structured
    /// kind's stripes whose chunks were all superseded, awaiting GC).
    pub skipped_stripes: u64,
    /// Chunks a log-structured kind's repair wrote again elsewhere (zones
    /// are never rewritten in place: repair re-stripes).
    pub rewritten_chunks: u64,
    /// Member reads that failed and were rebuilt from the other members
    /// and written back (a fixed array's `correct`, as md's check does):
    /// the members stay in service.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub read_errors_corrected: u64,
    pub repaired: bool,
    pub bytes_read: u64,
    pub seconds: f64,
    /// Ended before its last stripe on request (the stripes left count as
    /// unverified).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

impl ScrubReport {
    /// What the labels keep of this scrub, which ended at `end` (seconds
    /// since the Unix epoch): every kind of array records it alike.
    pub fn kept(&self, end: u64) -> mosaic_format::scrub::ScrubRecord {
        mosaic_format::scrub::ScrubRecord {
            end,
            millis: (self.seconds * 1000.0) as u64,
            stripes: self.stripes_checked,
            mismatched: self.mismatched,
            unverified: self.unverified_stripes,
            repaired: self.repaired,
            interrupted: self.interrupted,
        }
    }

    /// Count a finding.
    pub fn record(&mut self, f: ScrubFinding) {
        self.mismatched += 1;
        self.unlocated_stripes += f.member.is_none() as u64;
        if let ScrubAt::Stripe { stripe } = f.at {
            self.mismatched_stripes.push(stripe);
        }
        self.findings.push(f);
    }
}
