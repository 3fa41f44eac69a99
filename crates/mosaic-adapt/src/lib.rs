//! The analysis half of mosaic's adaptive layout (the paper in
//! `../shared/papers/adaptive-parallel-storage-layout.txt`): block
//! requests become transactions, transactions a weighted correlation
//! graph, the graph a placement of vertices on drives that puts
//! correlated blocks on different drives, and the placement a
//! least-movement mapping of colours to drives.  Pure computation: no
//! I/O, and no clock except in `correlate::speedup` (a report's wall-clock
//! timing); the remapped array and `mosaic adapt` are to use it.
//! `monitor` is the live source of requests: a lock-free ring that
//! `mosaic serve` pushes every served request into.

pub mod assign;
pub mod correlate;
pub mod graph;
pub mod group;
pub mod monitor;
pub mod plan;
pub mod target;
pub mod txn;

pub use assign::{assign, AssignError, Assignment};
pub use correlate::{mbc, sequential};
pub use graph::{Graph, Vertex};
pub use group::{group, max_group_bytes, GroupError, Grouping};
pub use monitor::{MonitorError, Ring, Taken};
pub use plan::{conflicts, plan, Plan, PlanConfig, PlanError};
pub use target::{target, Target, TargetError, TargetInput};
pub use txn::{Transactions, Txn, TxnConfig, TxnError, TxnStats};
