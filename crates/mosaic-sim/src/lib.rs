//! mosaic-sim: replay block traces through mosaic's planner on modelled
//! drives, in deterministic virtual time.
//!
//! * [`engine`]: the discrete-event executor of layout plans;
//! * [`plot`]: SVG plots of replay results.

pub mod advise;
pub mod engine;
pub mod fsgen;
pub mod nested;
pub mod plot;
pub mod workload;

pub use engine::{DeviceStats, Latency, Mode, SimConfig, SimReport, Simulator};
pub use workload::{Pattern, Synthetic};

/// Errors from a replay.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Plan(#[from] mosaic_core::PlanError),
    #[error("drive {drive}: {message}")]
    Drive { drive: usize, message: String },
    #[error(transparent)]
    Trace(#[from] mosaic_trace::TraceError),
}

impl From<std::convert::Infallible> for SimError {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}
