//! Drive configurations: TOML-loadable, overridable, with named presets.
//!
//! A configuration is one flat TOML table tagged by `kind`:
//!
//! ```toml
//! kind = "hdd"            # hdd | hdd-detailed | ssd | smr | ram
//! name = "my-disk"        # optional; shown by describe()
//! capacity = 1000204886016
//! t_pos_ms = 5.0
//! rate_kib_s = 89592.0
//! ```
//!
//! The fields of each kind are those of [`HddSimpleParams`],
//! [`HddDetailedParams`], [`SsdParams`], [`ZonedParams`] and [`RamParams`];
//! unknown fields are errors.  The files under `presets/` of this crate are
//! complete, commented examples of every kind.
//!
//! **Overrides.**  A TOML file may start from a preset and change some
//! fields:
//!
//! ```toml
//! base = "ssd:samsung-830-128g"
//! steady_state = true
//! wa_model = "xiang-kurkoski"
//! ```
//!
//! and a device spec may do the same inline:
//! `ssd:samsung-830-128g,steady_state=true,queue_depth=8` (values are TOML
//! values; a value that does not parse as one is taken as a string).
//!
//! Every configuration is validated when loaded: zero or negative rates,
//! zero page sizes, inconsistent seek times, capacities that are not whole
//! zones and the like give [`DriveError::Config`] naming the field.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{
    DriveError, DriveModel, HddDetailed, HddDetailedParams, HddSimple, HddSimpleParams, Ram,
    RamParams, Scheduler, Ssd, SsdParams, WaModel, Zoned, ZonedParams,
};

/// A drive model's parameters: a name and the kind's parameters, flattened
/// into one TOML table tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DriveConfig {
    Hdd {
        #[serde(default)]
        name: String,
        #[serde(flatten)]
        params: HddSimpleParams,
    },
    HddDetailed {
        #[serde(default)]
        name: String,
        #[serde(flatten)]
        params: HddDetailedParams,
    },
    Ssd {
        #[serde(default)]
        name: String,
        #[serde(flatten)]
        params: SsdParams,
    },
    Smr {
        #[serde(default)]
        name: String,
        #[serde(flatten)]
        params: ZonedParams,
    },
    Ram {
        #[serde(default)]
        name: String,
        #[serde(flatten)]
        params: RamParams,
    },
}

/// Run `$e` on the name and parameters of whichever kind `$c` is.
macro_rules! each {
    ($c:expr, $name:ident, $p:ident => $e:expr) => {
        match $c {
            DriveConfig::Hdd {
                name: $name,
                params: $p,
            } => $e,
            DriveConfig::HddDetailed {
                name: $name,
                params: $p,
            } => $e,
            DriveConfig::Ssd {
                name: $name,
                params: $p,
            } => $e,
            DriveConfig::Smr {
                name: $name,
                params: $p,
            } => $e,
            DriveConfig::Ram {
                name: $name,
                params: $p,
            } => $e,
        }
    };
}

impl DriveConfig {
    /// Parse and validate one configuration (optionally `base = "PRESET"`
    /// plus overrides).
    pub fn from_toml_str(s: &str) -> Result<DriveConfig, DriveError> {
        let table: toml::Table = toml::from_str(s).map_err(|e| DriveError::Toml(e.to_string()))?;
        DriveConfig::from_table(table)
    }

    /// [`from_toml_str`](Self::from_toml_str) of a file; a configuration
    /// without a `name` is named `file:PATH`.
    pub fn from_toml_file(path: &Path) -> Result<DriveConfig, DriveError> {
        let file_err = |message: String| DriveError::File {
            path: path.display().to_string(),
            message,
        };
        let s = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
        let table: toml::Table = toml::from_str(&s)
            .map_err(|e| file_err(DriveError::Toml(e.to_string()).to_string()))?;
        let named = table.contains_key("name");
        let mut c = DriveConfig::from_table(table).map_err(|e| file_err(e.to_string()))?;
        if !named {
            c.set_name(&format!("file:{}", path.display()));
        }
        Ok(c)
    }

    fn from_table(mut table: toml::Table) -> Result<DriveConfig, DriveError> {
        let named = table.contains_key("name");
        match table.remove("base") {
            Some(toml::Value::String(base)) => {
                let mut c = preset(&base)?.with_overrides(&table)?;
                if !named {
                    let mut spec = base;
                    for (k, v) in &table {
                        spec.push_str(&format!(",{k}={v}"));
                    }
                    c.set_name(&spec);
                }
                Ok(c)
            }
            Some(other) => Err(DriveError::config(
                "base",
                format!("must be a preset name string, not {other}"),
            )),
            None => {
                // Unknown fields first: a misspelt field would otherwise be
                // reported as the correct one missing.
                if let Some(sample) = table
                    .get("kind")
                    .and_then(|k| k.as_str())
                    .and_then(sample_of_kind)
                {
                    sample.check_fields(table.keys())?;
                }
                let mut c: DriveConfig = table
                    .clone()
                    .try_into()
                    .map_err(|e: toml::de::Error| DriveError::Toml(e.to_string()))?;
                c.check_fields(table.keys())?;
                c.validate()?;
                if !named {
                    c.set_name(c.kind());
                }
                Ok(c)
            }
        }
    }

    /// The TOML fields of this kind.
    pub fn fields(&self) -> Vec<String> {
        let mut f: Vec<String> = toml::Table::try_from(self)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default();
        if let DriveConfig::Ssd { params, .. } = self {
            if params.host_mib_s.is_none() {
                f.push("host_mib_s".into());
            }
        }
        f
    }

    /// Unknown fields are errors (serde's flattening would ignore them).
    fn check_fields<'a>(&self, keys: impl Iterator<Item = &'a String>) -> Result<(), DriveError> {
        let known = self.fields();
        for k in keys {
            if !known.contains(k) {
                return Err(DriveError::config(
                    k,
                    format!(
                        "unknown field for kind \"{}\" (known: {})",
                        self.kind(),
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// This configuration with some fields replaced (validated).  The
    /// `kind` cannot change.
    pub fn with_overrides(&self, overrides: &toml::Table) -> Result<DriveConfig, DriveError> {
        self.check_fields(overrides.keys())?;
        let mut t = toml::Table::try_from(self).map_err(|e| DriveError::Toml(e.to_string()))?;
        for (k, v) in overrides {
            if k == "kind" && v.as_str() != Some(self.kind()) {
                return Err(DriveError::config(
                    "kind",
                    format!("cannot change the kind of a {} configuration", self.kind()),
                ));
            }
            t.insert(k.clone(), v.clone());
        }
        let c: DriveConfig = t
            .try_into()
            .map_err(|e: toml::de::Error| DriveError::Toml(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    /// The configuration as TOML (what [`from_toml_str`](Self::from_toml_str) reads back).
    pub fn to_toml(&self) -> Result<String, DriveError> {
        toml::to_string(self).map_err(|e| DriveError::Toml(e.to_string()))
    }

    /// `hdd`, `hdd-detailed`, `ssd`, `smr` or `ram`.
    pub fn kind(&self) -> &'static str {
        match self {
            DriveConfig::Hdd { .. } => "hdd",
            DriveConfig::HddDetailed { .. } => "hdd-detailed",
            DriveConfig::Ssd { .. } => "ssd",
            DriveConfig::Smr { .. } => "smr",
            DriveConfig::Ram { .. } => "ram",
        }
    }

    pub fn name(&self) -> &str {
        each!(self, name, _p => name)
    }

    pub fn set_name(&mut self, new: &str) {
        each!(self, name, _p => *name = new.to_string())
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        each!(self, _n, p => p.capacity)
    }

    /// Check every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), DriveError> {
        each!(self, _n, p => p.validate())
    }

    /// Build the model, optionally with another capacity.  Never panics: an
    /// unvalidated configuration builds a sanitised model (see each model's
    /// `new`); use [`try_build`](Self::try_build) to get the validation error
    /// instead.
    ///
    /// A capacity override gives SSD, RAM and simple HDD models that
    /// capacity; the detailed HDD short-strokes (smaller) or adds cylinders
    /// (larger, see [`HddDetailed::with_capacity`]); a zoned drive rounds
    /// down to whole zones (at least one) and keeps its share of conventional
    /// zones.
    pub fn build(&self, capacity_override: Option<u64>) -> Box<dyn DriveModel> {
        match self.clone() {
            DriveConfig::Hdd { name, mut params } => {
                params.capacity = capacity_override.unwrap_or(params.capacity);
                Box::new(HddSimple::new(&name, params))
            }
            DriveConfig::HddDetailed { name, params } => match capacity_override {
                Some(c) => Box::new(HddDetailed::with_capacity(&name, params, c)),
                None => Box::new(HddDetailed::new(&name, params)),
            },
            DriveConfig::Ssd { name, mut params } => {
                params.capacity = capacity_override.unwrap_or(params.capacity);
                Box::new(Ssd::new(&name, params))
            }
            DriveConfig::Smr { name, params } => match capacity_override {
                Some(c) => Box::new(Zoned::new(&name, params.with_capacity(c))),
                None => Box::new(Zoned::new(&name, params)),
            },
            DriveConfig::Ram { name, mut params } => {
                params.capacity = capacity_override.unwrap_or(params.capacity);
                Box::new(Ram::new(&name, params))
            }
        }
    }

    /// Validate, then build.
    pub fn try_build(
        &self,
        capacity_override: Option<u64>,
    ) -> Result<Box<dyn DriveModel>, DriveError> {
        self.validate()?;
        if capacity_override == Some(0) {
            return Err(DriveError::config("capacity", "override must be positive"));
        }
        if let (DriveConfig::Smr { params, .. }, Some(c)) = (self, capacity_override) {
            params.with_capacity(c).validate()?;
        }
        Ok(self.build(capacity_override))
    }
}

// ---------------------------------------------------------------------------
// Presets.  The numbers and where they come from are in the README.

/// 1 TB in the IDEMA LBA count: 1,953,525,168 sectors of 512 bytes.
const TB1: u64 = 1_000_204_886_016;

/// Named presets: (spec, description).
pub fn list_presets() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "hdd:seagate-st91000640ss",
            "Seagate Constellation.2 ST91000640SS, 1 TB 7200 rpm 2.5\" SAS, simple model: t_pos 5 ms, R 89,592 KiB/s (Jeremic et al.)",
        ),
        (
            "hdd:seagate-st91000640ss-detailed",
            "the same drive, detailed: 165,800 cylinders, seek 0.23 / 7.5 / 17.06 ms (track / average / full stroke), write settle 1 ms, SPTF",
        ),
        ("hdd:generic-7200", "a generic 2 TB 7200 rpm 3.5\" disk, detailed: seek 1.0 / 8.5 / 18 ms, 150,000 KiB/s, SPTF"),
        (
            "ssd:samsung-830-128g",
            "Samsung 830 128 GB SATA SSD: 8 KiB pages, 8 channels x 4 dies, read 60 us, program 750 us, SATA 6 Gb/s, QD 32, 7.3% OP",
        ),
        ("ssd:generic-sata", "a generic 512 GB SATA SSD: 16 KiB pages, 8 x 4 dies, read 60 us, program 900 us, QD 32"),
        ("nvme:generic", "a generic 1 TB NVMe SSD: 16 KiB pages, 8 x 8 dies, read 50 us, program 600 us, PCIe 3 x4, QD 1024"),
        ("ram:default", "DRAM: 100 ns, 10 GiB/s, 64 GiB, QD 1024"),
        ("nvram:default", "NVRAM / persistent memory: 300 ns, 2 GiB/s, 128 GiB, QD 256"),
        ("smr:default", "host-managed SMR: 1 TB, 256 MiB zones, 37 (1%) conventional, Seagate timing (5 ms, 89,592 KiB/s) with append discount"),
    ]
}

fn ssd(
    capacity: u64,
    page: u64,
    geometry: (u32, u32),
    times_us: (f64, f64, f64),
    pages_per_block: u64,
) -> SsdParams {
    SsdParams {
        capacity,
        page,
        channels: geometry.0,
        dies_per_channel: geometry.1,
        read_us: times_us.0,
        program_us: times_us.1,
        erase_us: times_us.2,
        pages_per_block,
        channel_mib_s: 0.0,
        host_mib_s: None,
        controller_us: 0.0,
        queue_depth: 32,
        over_provisioning: 0.0,
        steady_state: false,
        wa_model: WaModel::Agarwal,
        subpage_read: false,
    }
}

/// A configuration of `kind`, for its list of fields.
fn sample_of_kind(kind: &str) -> Option<DriveConfig> {
    let spec = match kind {
        "hdd" => "hdd:seagate-st91000640ss",
        "hdd-detailed" => "hdd:generic-7200",
        "ssd" => "ssd:samsung-830-128g",
        "smr" => "smr:default",
        "ram" => "ram:default",
        _ => return None,
    };
    preset(spec).ok()
}

/// A preset by name (see [`list_presets`]).
pub fn preset(spec: &str) -> Result<DriveConfig, DriveError> {
    let name = spec.to_string();
    Ok(match spec {
        "hdd:seagate-st91000640ss" => DriveConfig::Hdd {
            name,
            params: HddSimpleParams {
                capacity: TB1,
                t_pos_ms: 5.0,
                rate_kib_s: 89_592.0,
            },
        },
        "hdd:seagate-st91000640ss-detailed" => DriveConfig::HddDetailed {
            name,
            params: HddDetailedParams {
                capacity: TB1,
                rpm: 7200.0,
                cylinders: 165_800,
                track_to_track_ms: 0.23,
                average_seek_ms: 7.5,
                full_stroke_ms: 17.06,
                short_seek_fraction: 0.2,
                write_settle_ms: 1.0,
                rate_kib_s: 89_592.0,
                scheduler: Scheduler::Sptf,
            },
        },
        "hdd:generic-7200" => DriveConfig::HddDetailed {
            name,
            params: HddDetailedParams {
                capacity: 2_000_398_934_016,
                rpm: 7200.0,
                cylinders: 300_000,
                track_to_track_ms: 1.0,
                average_seek_ms: 8.5,
                full_stroke_ms: 18.0,
                short_seek_fraction: 0.2,
                write_settle_ms: 1.0,
                rate_kib_s: 150_000.0,
                scheduler: Scheduler::Sptf,
            },
        },
        "ssd:samsung-830-128g" => DriveConfig::Ssd {
            name,
            params: SsdParams {
                channel_mib_s: 127.0,
                host_mib_s: Some(500.0),
                controller_us: 12.5,
                over_provisioning: 0.0734,
                ..ssd(128_035_676_160, 8192, (8, 4), (60.0, 750.0, 3000.0), 128)
            },
        },
        "ssd:generic-sata" => DriveConfig::Ssd {
            name,
            params: SsdParams {
                channel_mib_s: 400.0,
                host_mib_s: Some(500.0),
                controller_us: 10.0,
                over_provisioning: 0.0735,
                ..ssd(512_110_190_592, 16384, (8, 4), (60.0, 900.0, 3500.0), 256)
            },
        },
        "nvme:generic" => DriveConfig::Ssd {
            name,
            params: SsdParams {
                channel_mib_s: 800.0,
                host_mib_s: Some(3500.0),
                controller_us: 2.0,
                queue_depth: 1024,
                over_provisioning: 0.0735,
                ..ssd(1_024_209_543_168, 16384, (8, 8), (50.0, 600.0, 3500.0), 256)
            },
        },
        "ram:default" => DriveConfig::Ram {
            name,
            params: RamParams {
                capacity: 64 << 30,
                latency_ns: 100.0,
                gib_s: 10.0,
                queue_depth: 1024,
            },
        },
        "nvram:default" => DriveConfig::Ram {
            name,
            params: RamParams {
                capacity: 128 << 30,
                latency_ns: 300.0,
                gib_s: 2.0,
                queue_depth: 256,
            },
        },
        "smr:default" => DriveConfig::Smr {
            name,
            params: ZonedParams {
                capacity: 3726 * (256 << 20),
                zone_size: 256 << 20,
                conventional_zones: 37,
                t_pos_ms: 5.0,
                rate_kib_s: 89_592.0,
            },
        },
        _ => {
            let known: Vec<&str> = list_presets().iter().map(|p| p.0).collect();
            return Err(DriveError::UnknownPreset {
                spec: spec.to_string(),
                known: known.join(", "),
            });
        }
    })
}

/// A device spec: a preset name, a preset with inline overrides
/// (`ssd:samsung-830-128g,steady_state=true`), or `file:PATH.toml`.
pub fn parse_device_spec(spec: &str) -> Result<DriveConfig, DriveError> {
    let spec = spec.trim();
    if let Some(path) = spec.strip_prefix("file:") {
        return DriveConfig::from_toml_file(Path::new(path));
    }
    let mut parts = spec.split(',');
    let base = preset(parts.next().unwrap_or("").trim())?;
    let mut overrides = toml::Table::new();
    for kv in parts {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(DriveError::Toml(format!(
                "override {kv:?} in {spec:?} is not key=value"
            )));
        };
        let (k, v) = (k.trim(), v.trim());
        let value = toml::from_str::<toml::Table>(&format!("v = {v}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(v.to_string()));
        overrides.insert(k.to_string(), value);
    }
    if overrides.is_empty() {
        return Ok(base);
    }
    let named = overrides.contains_key("name");
    let mut c = base.with_overrides(&overrides)?;
    if !named {
        c.set_name(spec);
    }
    Ok(c)
}

/// Build the drive a device spec names: [`parse_device_spec`]'s grammar,
/// or `net:LINK[,key=value...]/SPEC` for that drive on another machine
/// behind a link ([`crate::net`]: `net:10gbe/hdd:generic-7200`,
/// `net:1gbe,jitter_us=50/ssd:generic-sata`).
pub fn build_device(spec: &str, capacity_override: Option<u64>) -> Result<Box<dyn DriveModel>, DriveError> {
    let spec = spec.trim();
    if let Some(rest) = spec.strip_prefix("net:") {
        let (link, drive) = rest.split_once('/').ok_or_else(|| {
            let names: Vec<&str> = crate::net::profiles().iter().map(|p| p.0).collect();
            DriveError::config("net", format!("{spec:?}: give net:LINK/DRIVE, e.g. net:10gbe/hdd:generic-7200 (links: {})", names.join(", ")))
        })?;
        let link = crate::net::parse_link(link)?;
        return Ok(Box::new(crate::net::Networked::new(build_device(drive, capacity_override)?, link)));
    }
    parse_device_spec(spec)?.try_build(capacity_override)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DriveRequest, ReqKind};

    fn presets_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("presets")
    }

    fn preset_file(spec: &str) -> std::path::PathBuf {
        presets_dir().join(format!("{}.toml", spec.replace(':', "_")))
    }

    #[test]
    fn presets_validate_build_and_round_trip() {
        for (name, desc) in list_presets() {
            let c = preset(name).unwrap();
            c.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(c.name(), name);
            assert!(!desc.is_empty());
            let back = DriveConfig::from_toml_str(&c.to_toml().unwrap()).unwrap();
            assert_eq!(back, c, "{name}");
            let m = c.try_build(None).unwrap();
            assert!(m.capacity() > 0 && m.queue_depth() >= 1, "{name}");
            assert_eq!(m.capacity(), c.capacity());
            assert!(m.describe().starts_with(name), "{}", m.describe());
            assert!(m.random_service_ns(ReqKind::Write, 4096) > 0.0, "{name}");
        }
        let e = preset("hdd:nope").unwrap_err();
        assert!(
            e.to_string().contains("known:") && e.to_string().contains("smr:default"),
            "{e}"
        );
    }

    #[test]
    fn preset_files_parse_and_equal_the_builtins() {
        let mut files: Vec<String> = std::fs::read_dir(presets_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".toml"))
            .collect();
        files.sort();
        let mut want: Vec<String> = list_presets()
            .iter()
            .map(|(s, _)| format!("{}.toml", s.replace(':', "_")))
            .collect();
        want.sort();
        assert_eq!(files, want, "one file per preset, no strays");
        for (spec, _) in list_presets() {
            let path = preset_file(spec);
            let from_file = DriveConfig::from_toml_file(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(from_file, preset(spec).unwrap(), "{}", path.display());
            let via_spec = parse_device_spec(&format!("file:{}", path.display())).unwrap();
            assert_eq!(via_spec, from_file);
        }
    }

    #[test]
    fn bad_configs_name_the_field() {
        let cases = [
            (
                "kind = \"hdd\"\ncapacity = 100\nt_pos_ms = 5.0\nrate_kib_s = 0.0\n",
                "rate_kib_s",
            ),
            (
                "kind = \"hdd\"\ncapacity = 0\nt_pos_ms = 5.0\nrate_kib_s = 1.0\n",
                "capacity",
            ),
            (
                "kind = \"hdd\"\ncapacity = 100\nt_pos_ms = -1\nrate_kib_s = 1.0\n",
                "t_pos_ms",
            ),
            (
                "kind = \"hdd\"\ncapacity = 100\nt_pos_ms = 5.0\nrate_kb_s = 1.0\n",
                "rate_kb_s",
            ),
            (
                "kind = \"hdd\"\ncapacity = 100\nt_pos_ms = 5.0\n",
                "rate_kib_s",
            ),
            ("kind = \"floppy\"\n", "floppy"),
            ("base = \"ssd:samsung-830-128g\"\npage = 0\n", "page"),
            (
                "base = \"ssd:samsung-830-128g\"\nchannel_mib_s = 0\n",
                "channel_mib_s",
            ),
            (
                "base = \"ssd:samsung-830-128g\"\nqueue_depth = 0\n",
                "queue_depth",
            ),
            (
                "base = \"ssd:samsung-830-128g\"\nhost_mib_s = -5.0\n",
                "host_mib_s",
            ),
            ("base = \"ssd:samsung-830-128g\"\nkind = \"hdd\"\n", "kind"),
            ("base = \"hdd:generic-7200\"\nrpm = 0.0\n", "rpm"),
            (
                "base = \"hdd:generic-7200\"\nscheduler = \"elevator\"\n",
                "elevator",
            ),
            ("base = \"smr:default\"\nzone_size = 1000\n", "capacity"),
            (
                "base = \"smr:default\"\nconventional_zones = 5000\n",
                "conventional_zones",
            ),
            ("base = \"ram:default\"\ngib_s = 0.0\n", "gib_s"),
            ("base = \"nope:x\"\n", "known:"),
            ("base = 3\n", "base"),
        ];
        for (toml, field) in cases {
            let e = DriveConfig::from_toml_str(toml).unwrap_err();
            assert!(e.to_string().contains(field), "{toml:?}: {e}");
        }
    }

    #[test]
    fn overrides_from_toml_and_specs() {
        let c = DriveConfig::from_toml_str(
            "base = \"ssd:samsung-830-128g\"\nsteady_state = true\nqueue_depth = 8\n",
        )
        .unwrap();
        let DriveConfig::Ssd { params: p, .. } = &c else {
            panic!("{c:?}")
        };
        assert!(p.steady_state && p.queue_depth == 8 && p.page == 8192);
        assert_eq!(
            c.name(),
            "ssd:samsung-830-128g,queue_depth=8,steady_state=true"
        );
        let s =
            parse_device_spec("ssd:samsung-830-128g, steady_state=true ,queue_depth=8").unwrap();
        assert_eq!(s.with_overrides(&toml::Table::new()).unwrap(), s);
        let DriveConfig::Ssd { params: q, .. } = &s else {
            panic!()
        };
        assert_eq!(q, p);
        let h = parse_device_spec("hdd:generic-7200,scheduler=fifo,name=slow").unwrap();
        assert!(
            matches!(&h, DriveConfig::HddDetailed { name, params } if params.scheduler == Scheduler::Fifo && name == "slow")
        );
        assert!(parse_device_spec("hdd:generic-7200,scheduler").is_err());
        assert!(parse_device_spec("hdd:generic-7200,nonsense=1")
            .unwrap_err()
            .to_string()
            .contains("nonsense"));
        assert!(parse_device_spec("file:/nonexistent/x.toml")
            .unwrap_err()
            .to_string()
            .contains("/nonexistent/x.toml"));
        // A config with no name is named after its kind.
        let c = DriveConfig::from_toml_str(
            "kind = \"ram\"\ncapacity = 4096\nlatency_ns = 10\ngib_s = 1\nqueue_depth = 4\n",
        )
        .unwrap();
        assert_eq!(c.name(), "ram");
    }

    #[test]
    fn capacity_override() {
        for (spec, _) in list_presets() {
            let c = preset(spec).unwrap();
            let m = c.build(Some(10 << 30));
            assert!(
                m.capacity() <= 10 << 30 && m.capacity() > (9 << 30),
                "{spec}: {}",
                m.capacity()
            );
        }
        let z = preset("smr:default").unwrap().build(Some(100 << 30));
        assert_eq!(z.capacity(), 100 << 30);
        let conv = z.zone_report().iter().filter(|r| r.wp.is_none()).count();
        assert_eq!(conv, 4, "1% of 400 zones");
        assert!(preset("ram:default").unwrap().try_build(Some(0)).is_err());
    }

    /// A zone size that would make millions of zones (each modelled) is
    /// refused before anything is built, as the spec or by a capacity.
    #[test]
    fn zones_too_many_to_model_are_refused() {
        for spec in ["smr:default,zone_size=4096", "smr:default,zone_size=1"] {
            let e = parse_device_spec(spec).and_then(|c| c.try_build(None)).err().unwrap().to_string();
            assert!(e.contains("zone_size") && e.contains("use larger zones"), "{spec}: {e}");
        }
        let z = preset("smr:default").unwrap();
        assert!(z.try_build(Some(1 << 40)).is_ok());
        let e = z.try_build(Some(u64::MAX / 2)).err().unwrap().to_string();
        assert!(e.contains("more than the 4194304 modelled"), "{e}");
    }

    /// The presets behave like the drives they stand for (see the README).
    #[test]
    fn preset_behaviour() {
        let mib = 1u64 << 20;
        let seq = |spec: &str, kind: ReqKind| -> f64 {
            let mut m = preset(spec).unwrap().build(None);
            let mut done = 0;
            for i in 0..256u64 {
                done = done.max(
                    m.submit(
                        0,
                        &DriveRequest {
                            kind,
                            offset: i * mib,
                            len: mib,
                        },
                    )
                    .unwrap(),
                );
            }
            256.0 * mib as f64 / (done as f64 / 1e9) / 1e6 // MB/s
        };
        let iops = |spec: &str, kind: ReqKind, qd: u64| -> f64 {
            let mut m = preset(spec).unwrap().build(None);
            let mut done = 0;
            for i in 0..qd * 64 {
                done = done.max(
                    m.submit(
                        0,
                        &DriveRequest {
                            kind,
                            offset: (i * 7919 % 1_000_000) * 4096,
                            len: 4096,
                        },
                    )
                    .unwrap(),
                );
            }
            (qd * 64) as f64 / (done as f64 / 1e9)
        };
        // Samsung 830 128 GB: rated 520 MB/s read, 320 MB/s write, 80K random read IOPS.
        let (r, w) = (
            seq("ssd:samsung-830-128g", ReqKind::Read),
            seq("ssd:samsung-830-128g", ReqKind::Write),
        );
        assert!((500.0..540.0).contains(&r), "830 seq read {r} MB/s");
        assert!((300.0..340.0).contains(&w), "830 seq write {w} MB/s");
        let rr = iops("ssd:samsung-830-128g", ReqKind::Read, 32);
        assert!((70e3..=80.1e3).contains(&rr), "830 random read {rr} IOPS");
        let qd1 = preset("ssd:samsung-830-128g")
            .unwrap()
            .build(None)
            .random_service_ns(ReqKind::Read, 4096);
        assert!((100e3..125e3).contains(&qd1), "830 QD1 4K read {qd1} ns");
        // NVMe: several GB/s, tens of microseconds.
        assert!(seq("nvme:generic", ReqKind::Read) > 3000.0);
        let nv = preset("nvme:generic")
            .unwrap()
            .build(None)
            .random_service_ns(ReqKind::Read, 4096);
        assert!(nv < 70e3, "{nv}");
        // The detailed Seagate: an isolated random 4 KiB read is the datasheet
        // 7.5 ms seek + 4.17 ms rotation + transfer.
        let d = preset("hdd:seagate-st91000640ss-detailed")
            .unwrap()
            .build(None);
        let t = d.random_service_ns(ReqKind::Read, 4096);
        assert!(
            (t - (7.5e6 + 60e9 / 7200.0 / 2.0 + 4096.0 * 1e9 / (89_592.0 * 1024.0))).abs() < 1000.0,
            "{t}"
        );
        // RAM and NVRAM.
        let ram = preset("ram:default").unwrap().build(None);
        assert!(
            (ram.random_service_ns(ReqKind::Read, 4096) - (100.0 + 4096.0 / 10.0 / 1.073741824))
                .abs()
                < 1.0
        );
    }
}

#[cfg(test)]
mod calibration {
    use super::*;
    use crate::{DriveRequest, ReqKind};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Mean time per completion of a closed loop keeping `depth` random
    /// 4 KiB reads outstanding (dispatch as the engine does: at most
    /// queue_depth() in flight, `pick` chooses).
    fn closed_loop(spec: &str, depth: usize, n: usize) -> f64 {
        let mut m = parse_device_spec(spec).unwrap().build(None);
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let blocks = m.capacity() / 4096;
        let mut gen = move || DriveRequest::read(rng.gen_range(0..blocks) * 4096, 4096);
        let mut pending: Vec<DriveRequest> = (0..depth).map(|_| gen()).collect();
        let (mut in_flight, mut now) = (Vec::<u64>::new(), 0u64);
        for _ in 0..n {
            while in_flight.len() < m.queue_depth() && !pending.is_empty() {
                let r = pending.remove(m.pick(now, &pending));
                in_flight.push(m.submit(now, &r).unwrap());
            }
            let i = (0..in_flight.len()).min_by_key(|&i| in_flight[i]).unwrap();
            now = in_flight.swap_remove(i);
            pending.push(gen());
        }
        now as f64 / n as f64
    }

    #[test]
    fn detailed_seagate_16_deep_with_sptf_gives_the_simple_models_5_ms() {
        let simple = preset("hdd:seagate-st91000640ss")
            .unwrap()
            .build(None)
            .random_service_ns(ReqKind::Read, 4096);
        let sptf = closed_loop("hdd:seagate-st91000640ss-detailed", 16, 3000);
        assert!(
            (sptf / simple - 1.0).abs() < 0.06,
            "SPTF 16 deep {sptf} ns vs simple {simple} ns"
        );
        let fifo = closed_loop("hdd:seagate-st91000640ss-detailed,scheduler=fifo", 16, 1000);
        assert!(fifo > 11e6 && fifo < 12.5e6, "FIFO {fifo}");
    }
}
