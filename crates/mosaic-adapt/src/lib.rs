//! The analysis half of mosaic's adaptive layout (the paper in
//! `../shared/papers/adaptive-parallel-storage-layout.txt`): block
//! requests become transactions, transactions a weighted correlation
//! graph, the graph a placement of vertices on drives that puts
//! correlated blocks on different drives, and the placement a
//! least-movement mapping of colours to drives.  Pure computation: no
//! I/O, no clock; the remapped array and `mosaic adapt` use it.

pub mod graph;

pub use graph::{Graph, Vertex};
