//! The tier policy as a scheme: [`mosaic_tier::TierPolicy`] on the rig's
//! FAST and SLOW arrays.
//!
//! One data section per scheme (the extent size under study takes the
//! whole fast data space), so "tier 64K" and "tier 256K" are the paper's
//! two configurations of Figure 3 (a) and (b).
//!
//! **Threshold V.**  The paper's V = 8 and 32 count its 1 KB blocks; the
//! tier runs on the rig's blocks (4 KiB).  V is kept in bytes (8 KB and
//! 32 KB: V = 2 and 8 blocks of 4 KiB), which keeps the ratio s / V and
//! so the whole chunk structure of Table 1 (deepest split level 2, 0, 4
//! and 2 for 64K/8, 64K/32, 256K/8, 256K/32) unchanged.  Keeping V = 8
//! and 32 *blocks* instead would switch partitioning off for 64 KiB
//! extents at V = 32 (16 blocks < V), which the paper's setup never does.
//!
//! Everything else is the policy's default (10 ms coalescing
//! window, 30 s expiry, watermarks 0.8/0.6, promotion after 2 hits).  The
//! format program (the empty map on FAST) is not replayed: the volume
//! starts formatted, as the baselines start empty.

use mosaic_core::Frontend;
use mosaic_tier::{PolicyConfig, TierGeometry, TierPolicy};

use super::rig::Rig;
use super::TierEvalError;

/// The paper's block size, in which its V is given.
pub const PAPER_BLOCK: u64 = 1024;

/// The paper's V (in 1 KB blocks) in the tier's blocks of `block` bytes:
/// the same bytes, at least 2 blocks (the allocator's smallest V).
pub fn threshold_blocks(v_paper: u64, block: u64) -> u64 {
    (v_paper * PAPER_BLOCK / block.max(1)).max(2)
}

/// The policy configuration of a scheme.
pub fn config(rig: &Rig, extent: u64, v_paper: u64) -> PolicyConfig {
    PolicyConfig { block: rig.block, sections: vec![(extent, 1.0)], threshold_v: threshold_blocks(v_paper, rig.block), ..Default::default() }
}

/// The tier's geometry on the rig.
pub fn geometry(rig: &Rig) -> Result<TierGeometry, TierEvalError> {
    let (fast_bytes, slow_bytes, slow_stripe) = rig.member_bytes()?;
    Ok(TierGeometry { fast_bytes, slow_bytes, slow_stripe })
}

/// The tier front end with one section of `extent` bytes and threshold `v`.
pub fn policy(rig: &Rig, extent: u64, v: u64) -> Result<TierPolicy, TierEvalError> {
    let (p, _format) = TierPolicy::format(config(rig, extent, v), geometry(rig)?).map_err(|e| TierEvalError::NotReady(format!("tier {}K V={v}: {e}", extent >> 10)))?;
    Ok(p)
}

/// [`policy`] boxed for the simulator.
pub fn frontend(rig: &Rig, extent: u64, v: u64) -> Result<Box<dyn Frontend>, TierEvalError> {
    Ok(Box::new(policy(rig, extent, v)?))
}
