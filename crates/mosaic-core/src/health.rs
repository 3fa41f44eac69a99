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
}
