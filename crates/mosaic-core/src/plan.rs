//! Plans: what a layout asks the executors to do for one logical request.
//!
//! A [`Plan`] is a list of [`StripePlan`]s.  Each runs in two phases:
//!
//! ```text
//!   reads (all concurrent) ──> compute (pure, in mosaic-core) ──> writes (all concurrent)
//! ```
//!
//! The real executor (mosaic-array) performs the device operations on member
//! files and calls [`crate::compute`] between the phases; the simulator
//! (mosaic-sim) only times the same device operations on drive models.  The
//! planning code is therefore written once.

use serde::Serialize;

use crate::geometry::ColRange;

/// What a device operation carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// User data units.
    Data,
    /// Code (parity) units, or mirror copies.
    Code,
    /// Layout metadata (mapping tables, logs).
    Meta,
    /// A zone reset of a zoned drive: `offset` is the zone's first byte,
    /// `len` is 0.  Only in a write phase, and only from layouts that
    /// manage zones (DVS).
    ZoneReset,
}

/// Direction of a device operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    Read,
    Write,
}

/// One device operation: `len` bytes at byte `offset` of member `member`'s
/// data area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DevOp {
    pub member: usize,
    pub offset: u64,
    pub len: u64,
    pub role: Role,
    /// Column of the stripe this op belongs to (used by compute).
    pub col: usize,
}

impl DevOp {
    /// Whether the two operations touch a common byte of one member.
    pub fn overlaps(&self, other: &DevOp) -> bool {
        self.member == other.member && self.offset < other.offset + other.len && other.offset < self.offset + self.len
    }
}

/// How a stripe is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
pub enum Method {
    /// Healthy read of data units.
    Read,
    /// Read that reconstructs units of failed members.
    DegradedRead,
    /// Write with no redundancy (raid0).
    Direct,
    /// Write of every mirror copy (raid1).
    Mirror,
    /// Read-modify-write: read old data and old code, apply deltas.
    Rmw,
    /// Reconstruct-write: read the untouched data, encode afresh.
    Rcw,
    /// Full-stripe write: nothing read.
    Fsw,
    /// Write to a stripe with a failed data member: read survivors, decode,
    /// re-encode.
    DegradedWrite,
    /// Reconstruct units of rebuilt members.
    Rebuild,
    /// Verify (and optionally rewrite) code units.
    Scrub,
}

impl Method {
    pub fn name(&self) -> &'static str {
        match self {
            Method::Read => "read",
            Method::DegradedRead => "degraded-read",
            Method::Direct => "direct",
            Method::Mirror => "mirror",
            Method::Rmw => "rmw",
            Method::Rcw => "rcw",
            Method::Fsw => "fsw",
            Method::DegradedWrite => "degraded-write",
            Method::Rebuild => "rebuild",
            Method::Scrub => "scrub",
        }
    }
    pub const ALL: [Method; 10] = [
        Method::Read,
        Method::DegradedRead,
        Method::Direct,
        Method::Mirror,
        Method::Rmw,
        Method::Rcw,
        Method::Fsw,
        Method::DegradedWrite,
        Method::Rebuild,
        Method::Scrub,
    ];
}

/// The work for one stripe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripePlan {
    pub stripe: u64,
    pub method: Method,
    /// Data columns the request touches (with their buffer offsets).
    pub touched: Vec<ColRange>,
    /// Phase 1.
    pub reads: Vec<DevOp>,
    /// Phase 2.
    pub writes: Vec<DevOp>,
    /// For degraded reads/writes, rebuild and scrub: the in-unit byte range
    /// over which columns are reconstructed or verified.
    pub span: (u64, u64),
    /// Columns that must be reconstructed (failed members).
    pub missing: Vec<usize>,
}

/// Everything one logical request needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub stripes: Vec<StripePlan>,
}

impl Plan {
    /// Count the plan's device operations.
    pub fn counts(&self) -> OpCounts {
        let mut c = OpCounts::default();
        for s in &self.stripes {
            c.add_stripe(s);
        }
        c
    }

    pub fn reads(&self) -> impl Iterator<Item = &DevOp> {
        self.stripes.iter().flat_map(|s| s.reads.iter())
    }

    pub fn writes(&self) -> impl Iterator<Item = &DevOp> {
        self.stripes.iter().flat_map(|s| s.writes.iter())
    }
}

/// One device's operations and bytes, real or simulated: what a replay
/// compares between a real array and the simulator, member by member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct DeviceIo {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl DeviceIo {
    /// Count one operation of `bytes`.
    pub fn add(&mut self, dir: Dir, bytes: u64) {
        match dir {
            Dir::Read => {
                self.reads += 1;
                self.read_bytes += bytes
            }
            Dir::Write => {
                self.writes += 1;
                self.write_bytes += bytes
            }
        }
    }
}

/// Device-operation counters by direction and role, and stripe counts by
/// method.  Additive, so executors accumulate them per request, per device
/// and per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct OpCounts {
    pub data_reads: u64,
    pub data_read_bytes: u64,
    pub code_reads: u64,
    pub code_read_bytes: u64,
    pub data_writes: u64,
    pub data_write_bytes: u64,
    pub code_writes: u64,
    pub code_write_bytes: u64,
    pub meta_reads: u64,
    pub meta_writes: u64,
    pub zone_resets: u64,
    pub stripes_rmw: u64,
    pub stripes_rcw: u64,
    pub stripes_fsw: u64,
    pub stripes_degraded: u64,
    pub stripes_other: u64,
}

impl OpCounts {
    pub fn add_op(&mut self, dir: Dir, op: &DevOp) {
        match (dir, op.role) {
            (Dir::Read, Role::Data) => {
                self.data_reads += 1;
                self.data_read_bytes += op.len
            }
            (Dir::Read, Role::Code) => {
                self.code_reads += 1;
                self.code_read_bytes += op.len
            }
            (Dir::Write, Role::Data) => {
                self.data_writes += 1;
                self.data_write_bytes += op.len
            }
            (Dir::Write, Role::Code) => {
                self.code_writes += 1;
                self.code_write_bytes += op.len
            }
            (Dir::Read, Role::Meta) => self.meta_reads += 1,
            (Dir::Write, Role::Meta) => self.meta_writes += 1,
            (_, Role::ZoneReset) => self.zone_resets += 1,
        }
    }

    pub fn add_stripe(&mut self, s: &StripePlan) {
        for op in &s.reads {
            self.add_op(Dir::Read, op);
        }
        for op in &s.writes {
            self.add_op(Dir::Write, op);
        }
        self.add_method(s.method);
    }

    /// Count one stripe handled with `m`.
    pub fn add_method(&mut self, m: Method) {
        match m {
            Method::Rmw => self.stripes_rmw += 1,
            Method::Rcw => self.stripes_rcw += 1,
            Method::Fsw => self.stripes_fsw += 1,
            Method::DegradedWrite | Method::DegradedRead => self.stripes_degraded += 1,
            _ => self.stripes_other += 1,
        }
    }

    pub fn merge(&mut self, o: &OpCounts) {
        self.data_reads += o.data_reads;
        self.data_read_bytes += o.data_read_bytes;
        self.code_reads += o.code_reads;
        self.code_read_bytes += o.code_read_bytes;
        self.data_writes += o.data_writes;
        self.data_write_bytes += o.data_write_bytes;
        self.code_writes += o.code_writes;
        self.code_write_bytes += o.code_write_bytes;
        self.meta_reads += o.meta_reads;
        self.meta_writes += o.meta_writes;
        self.zone_resets += o.zone_resets;
        self.stripes_rmw += o.stripes_rmw;
        self.stripes_rcw += o.stripes_rcw;
        self.stripes_fsw += o.stripes_fsw;
        self.stripes_degraded += o.stripes_degraded;
        self.stripes_other += o.stripes_other;
    }

    pub fn device_reads(&self) -> u64 {
        self.data_reads + self.code_reads + self.meta_reads
    }
    pub fn device_writes(&self) -> u64 {
        self.data_writes + self.code_writes + self.meta_writes
    }
}
