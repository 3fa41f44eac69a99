//! `mosaic bench tier`: a real hybrid tier array against its slow array
//! alone and its fast array alone, same member files, same scratch
//! directory (RAM when /dev/shm exists), as ratios measured in the same run.
//!
//! ```text
//!   tier        raid1 over 2 "SSD" files  +  raid6 over 6 "HDD" files (ReHypar, demotion on)
//!   slow alone  the same raid6 4+2 with its journal
//!   fast alone  the same raid1 1+1 with its journal
//!
//!   1 MiB sequential write   over the footprint (the fast array's capacity, so all three hold it)
//!   4 KiB random write       over the same footprint, for --seconds: the tier demotes as it fills
//! ```
//!
//! On RAM every "drive" is equally fast, so this measures what the tier's
//! policy costs in CPU and metadata (map writes, demotion copies), not the
//! SSD/HDD gap; `mosaic eval tier` and `mosaic replay --layout tier` give
//! that on drive models.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use mosaic_array::spec::ArraySpec;
use mosaic_array::{Array, CreateOptions};
use mosaic_core::Level;
use mosaic_tier::policy::PolicyConfig;
use mosaic_volume::{InnerSpec, TierCreate, TierVolume, Volume};

use crate::bench_dvs::{random, scratch, scratch_base, sequential};
use crate::util::{human, print_json, size, table};

#[derive(Args)]
pub struct TierBenchArgs {
    /// Seconds of 4 KiB random writes per scheme
    #[arg(long, default_value = "2", value_parser = crate::cmd_bench::bench_seconds)]
    pub seconds: Duration,
    /// Size of each fast member (the slow members are 2x): at least 3.5
    /// MiB (the bench needs room for it, 28 times, in its scratch directory)
    #[arg(long, value_parser = member_size, default_value = "64M")]
    pub member_size: u64,
    /// Print the measurements as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Row {
    workload: &'static str,
    scheme: &'static str,
    per_sec: f64,
    unit: &'static str,
    vs_slow: f64,
    vs_fast: f64,
}

const UNIT: u64 = 64 << 10;
const SCHEMES: [&str; 3] = ["tier", "slow alone", "fast alone"];
/// Each inner array's journal, a file beside its members.
const JOURNAL: u64 = 64 << 20;
/// The smallest fast member: past its 1 MiB header, the fast tier's 1 MiB
/// label area and its map, room for the bench's 1 MiB writes (a smaller
/// one is refused by the tier, or takes no write that size).
const MIN_MEMBER: u64 = 3584 << 10;
/// The largest fast member: a slow member is twice its size, and a file
/// ends below 8 EiB.
const MAX_MEMBER: u64 = (i64::MAX as u64) / 2;
/// Member files of all three schemes at once, in fast members: the
/// tier's 2 fast and 6 slow (each 2 fast), and the same arrays alone.
const FILES: u64 = 2 + 6 * 2 + 6 * 2 + 2;

/// clap value parser of `--member-size`: from [`MIN_MEMBER`] to
/// [`MAX_MEMBER`].
fn member_size(s: &str) -> Result<u64, String> {
    match size(s).map_err(|e| e.to_string())? {
        b if !(MIN_MEMBER..=MAX_MEMBER).contains(&b) => Err(format!(
            "{s:?}: give at least {} (the fast tier's header, label area and map, and room for a 1 MiB write) and at most {} (a slow member, twice the size, must fit a file)",
            human(MIN_MEMBER),
            human(MAX_MEMBER)
        )),
        b => Ok(b),
    }
}

/// One inner-style array alone, with its journal, opened as a volume.
fn plain(dir: &Path, level: Level, members: usize, member_size: u64) -> Result<Box<dyn Volume>> {
    std::fs::create_dir_all(dir)?;
    let o = CreateOptions { level, members: Some(members), member_size: Some(member_size), unit: UNIT, block: 4096, force: true, assume_clean: true };
    Array::create_journaled(&ArraySpec::Dir(dir.to_path_buf()), &o, Some((&dir.join("journal.img"), JOURNAL)))?.close()?;
    Ok(mosaic_volume::open(&dir.display().to_string(), true)?)
}

/// The array of `scheme` in `dir`.
fn make(dir: &Path, scheme: &str, member_size: u64) -> Result<Box<dyn Volume>> {
    match scheme {
        "tier" => {
            let c = TierCreate {
                fast: InnerSpec::parse("raid1:2", member_size)?,
                slow: InnerSpec::parse("raid6:6", 2 * member_size)?,
                unit: UNIT,
                block: 4096,
                force: true,
                journal_size: Some(JOURNAL),
                config: PolicyConfig::default(),
            };
            TierVolume::create(dir, &c)?.close()?;
            Ok(mosaic_volume::open(&dir.display().to_string(), true)?)
        }
        "slow alone" => plain(dir, Level::Raid6, 6, 2 * member_size),
        _ => plain(dir, Level::Raid1, 2, member_size),
    }
}

pub fn run(a: TierBenchArgs) -> Result<i32> {
    let dur = a.seconds;
    // Every file of the three schemes exists at once, and may fill: the
    // tier demotes into its slow array as the random writes go on.
    crate::util::check_space(
        &scratch_base(),
        &[
            (format!("--member-size {} x {FILES} (the tier's 2 fast and 6 slow members, the slow 2x, and the same arrays alone)", human(a.member_size)), a.member_size.saturating_mul(FILES)),
            (format!("4 journals of {}", human(JOURNAL)), 4 * JOURNAL),
        ],
    )?;
    let tmp = scratch()?;
    let vols: Vec<Box<dyn Volume>> = SCHEMES.iter().map(|s| make(&tmp.path().join(s.replace(' ', "-")), s, a.member_size)).collect::<Result<_>>()?;
    let footprint = vols.iter().map(|v| v.capacity()).min().unwrap_or(0) / (1 << 20) * (1 << 20);
    let mut rows = Vec::new();
    for (v, scheme) in vols.iter().zip(SCHEMES) {
        rows.push(Row { workload: "1 MiB sequential write", scheme, per_sec: sequential(v.as_ref(), footprint)?, unit: "MiB/s", vs_slow: 0.0, vs_fast: 0.0 });
        rows.push(Row { workload: "4 KiB random write", scheme, per_sec: random(v.as_ref(), footprint, dur)?, unit: "IOPS", vs_slow: 0.0, vs_fast: 0.0 });
    }
    let rate = |w: &str, s: &str| rows.iter().find(|r| r.workload == w && r.scheme == s).map(|r| r.per_sec).unwrap_or(f64::NAN);
    let refs: Vec<(f64, f64)> = rows.iter().map(|r| (rate(r.workload, "slow alone"), rate(r.workload, "fast alone"))).collect();
    for (r, (s, f)) in rows.iter_mut().zip(refs) {
        (r.vs_slow, r.vs_fast) = (r.per_sec / s, r.per_sec / f);
    }
    rows.sort_by_key(|r| r.workload);
    if a.json {
        print_json(&rows)?;
        return Ok(0);
    }
    println!("tier: raid1 1+1 of {} members + raid6 4+2 of {} members; footprint {}", human(a.member_size), human(2 * a.member_size), human(footprint));
    let mut t = vec![vec!["workload".into(), "scheme".into(), "rate".into(), "unit".into(), "vs slow".into(), "vs fast".into()]];
    for r in &rows {
        t.push(vec![r.workload.to_string(), r.scheme.to_string(), format!("{:.1}", r.per_sec), r.unit.to_string(), format!("{:.2}", r.vs_slow), format!("{:.2}", r.vs_fast)]);
    }
    print!("{}", table(&t));
    Ok(0)
}
