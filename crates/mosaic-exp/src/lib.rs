//! mosaic-exp: the experiments, apart from the storage path.
//!
//! The storage-path crates (`mosaic-dvs`, `mosaic-array`, ...) hold the
//! policies and the real executor; what replays them on modelled drives
//! for a paper's figures, and draws the plots, lives here:
//!
//! * [`dvs`]: the DVS-RAID experiments (HDD RAID-5, DVS, Segment and
//!   Sblock RAID-5 on the same drives: trace, synthetic workloads, cache
//!   and zone-size sweeps), `mosaic eval dvs`;
//! * [`dvs_plot`]: their SVG plots;
//! * [`tier`]: the ReHypar hybrid SSD+HDD experiments (fast-tier space
//!   utilisation, IOzone-like and Postmark-like workloads, the real trace;
//!   the tier policy against all-SSD, all-HDD and an LRU block cache),
//!   `mosaic eval tier`;
//! * [`adapt`]: the adaptive layout's analysis on a real trace (static vs
//!   adaptive placement, migration cost vs gain), `mosaic eval adapt`;
//! * [`adapt_plot`]: its SVG plots.

// `is_multiple_of` needs Rust 1.87; the workspace MSRV is 1.80.
#![allow(clippy::manual_is_multiple_of)]

pub mod adapt;
pub mod adapt_plot;
pub mod adapt_striped;
pub mod dvs;
pub mod dvs_paper;
pub mod dvs_plot;
pub mod tier;
