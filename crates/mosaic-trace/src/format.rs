//! The [`Format`] enum: names, parsing and per-format documentation.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// A trace format.  Names (for [`FromStr`] and [`fmt::Display`]): `spc`,
/// `msr`, `blkparse`, `cloudphysics`, `fio2`, `fio3`, `alibaba`, `tencent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// SPC / UMass: `ASU,LBA,Size,Opcode,Timestamp`, e.g. `0,20941264,8192,W,0.551706`.
    Spc,
    /// MSR Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`,
    /// e.g. `128166372003061629,wdev,0,Write,3872768,4096,1125`.
    Msr,
    /// blkparse default text output, e.g. `8,0 3 1 0.000000000 1234 Q WS 1000 + 8 [kworker]`.
    Blkparse,
    /// libCacheSim / CloudPhysics: `version,time,op,size,lbn`, e.g. `1,5633898,2a,512,42932745`.
    CloudPhysics,
    /// fio iolog v2: `filename action offset length`, e.g. `/dev/sdb write 4096 8192`.
    FioV2,
    /// fio iolog v3: `timestamp_us filename action offset length`, e.g. `5000 /dev/nbd0 write 1048576 65536`.
    FioV3,
    /// Alibaba block traces: `device_id,opcode,offset,length,timestamp`, e.g. `3,W,1024,4096,1577808000000000`.
    Alibaba,
    /// Tencent CBS: `timestamp,offset,size,iotype,volume_id`, e.g. `1538323200,12345,8,1,1283`.
    Tencent,
}

impl Format {
    pub const ALL: [Format; 8] =
        [Format::Spc, Format::Msr, Format::Blkparse, Format::CloudPhysics, Format::FioV2, Format::FioV3, Format::Alibaba, Format::Tencent];

    /// The short name, as accepted by [`FromStr`].
    pub fn name(&self) -> &'static str {
        match self {
            Format::Spc => "spc",
            Format::Msr => "msr",
            Format::Blkparse => "blkparse",
            Format::CloudPhysics => "cloudphysics",
            Format::FioV2 => "fio2",
            Format::FioV3 => "fio3",
            Format::Alibaba => "alibaba",
            Format::Tencent => "tencent",
        }
    }

    /// One line describing the layout (used in help and detection errors).
    pub fn describe(&self) -> &'static str {
        match self {
            Format::Spc => crate::spc::SHAPE,
            Format::Msr => crate::msr::SHAPE,
            Format::Blkparse => crate::blkparse::SHAPE,
            Format::CloudPhysics => crate::cloudphysics::SHAPE,
            Format::FioV2 => crate::fio::SHAPE_V2,
            Format::FioV3 => crate::fio::SHAPE_V3,
            Format::Alibaba => crate::alibaba::SHAPE,
            Format::Tencent => crate::tencent::SHAPE,
        }
    }

    /// The name of the field holding a request's time, for errors.
    pub(crate) fn time_field(&self) -> &'static str {
        match self {
            Format::Spc | Format::Msr => "Timestamp",
            Format::Blkparse | Format::CloudPhysics | Format::FioV2 => "time",
            Format::FioV3 | Format::Alibaba | Format::Tencent => "timestamp",
        }
    }

    /// The name of the field holding a request's length, for errors.
    pub(crate) fn len_field(&self) -> &'static str {
        match self {
            Format::Spc | Format::Msr => "Size",
            Format::Blkparse => "count",
            Format::CloudPhysics | Format::Tencent => "size",
            Format::FioV2 | Format::FioV3 | Format::Alibaba => "length",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Format {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// An unknown format name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown trace format {0:?}; known: spc, msr, blkparse, cloudphysics, fio2, fio3, alibaba, tencent")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;
    /// The names above, any case; also `umass` (spc), `libcachesim` (cloudphysics),
    /// `fiov2`/`fiov3`, `cbs` (tencent).
    fn from_str(s: &str) -> Result<Format, UnknownFormat> {
        let l = s.trim().to_ascii_lowercase();
        let alias = match l.as_str() {
            "umass" => Some(Format::Spc),
            "libcachesim" => Some(Format::CloudPhysics),
            "fiov2" => Some(Format::FioV2),
            "fiov3" => Some(Format::FioV3),
            "cbs" => Some(Format::Tencent),
            _ => None,
        };
        alias.or_else(|| Format::ALL.iter().copied().find(|f| f.name() == l)).ok_or_else(|| UnknownFormat(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>().unwrap(), f);
            assert_eq!(f.to_string().to_uppercase().parse::<Format>().unwrap(), f);
            assert!(!f.describe().is_empty());
        }
        assert_eq!("umass".parse::<Format>().unwrap(), Format::Spc);
        assert!("auto".parse::<Format>().unwrap_err().to_string().contains("known: spc"));
        assert_eq!(serde_json::to_string(&Format::FioV3).unwrap(), "\"fio3\"");
    }
}
