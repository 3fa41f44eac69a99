//! Array commands: create, info, write, read, fail, replace, rebuild, scrub.
//!
//! `create` is dispatched by `--level`; every other command opens the
//! array with `mosaic_volume::open`, which decides the kind (fixed,
//! nested CBRO, DVS) from the members, and uses the `Volume` trait only.

use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::spec::ArraySpec;
use mosaic_array::{Array, CreateOptions};
use mosaic_core::{Level, MemberState, OpCounts};
use mosaic_volume::{Volume, VolumeInfo};

use crate::util::{human, print_json, progress, size, table};

/// Largest piece moved per array call by `read`/`write`.
const CHUNK: u64 = 8 << 20;

#[derive(Args)]
pub struct CreateArgs {
    /// A directory to create member files in, or a comma list of existing member files / block devices
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// raid0, raid1, raid4, raid5, raid6 or rs:K+M
    #[arg(long)]
    pub level: String,
    /// Number of members (implied by rs:K+M; defaults to the number of paths)
    #[arg(long)]
    pub members: Option<usize>,
    /// Size of each member file created in a directory (e.g. 64M)
    #[arg(long, value_parser = size)]
    pub member_size: Option<u64>,
    /// Stripe unit: any multiple of the block size up to 64M (e.g. 12K, 896K)
    #[arg(long, value_parser = size, default_value = "64K")]
    pub stripe_unit: u64,
    /// Logical block size: 512 or 4096
    #[arg(long, value_parser = size, default_value = "4096")]
    pub block_size: u64,
    /// Overwrite members that already belong to an array
    #[arg(long)]
    pub force: bool,
    /// Skip the initial parity sync of existing devices
    #[arg(long)]
    pub assume_clean: bool,
    /// Write-ahead journal (a file, created when absent, or a fast device) that
    /// closes the RAID write hole; default for a directory: DIR/journal.img
    #[arg(long, conflicts_with = "no_journal")]
    pub journal: Option<PathBuf>,
    /// Size of a journal file to create
    #[arg(long, value_parser = size, default_value = "64M")]
    pub journal_size: u64,
    /// No journal: a crash during a write followed by a member failure can
    /// corrupt other blocks of the stripe (the write hole)
    #[arg(long)]
    pub no_journal: bool,
    /// cbro: drive model of the data drives (e.g. hdd:seagate-st91000640ss),
    /// with --cda-device for the check drive arrays: warns, with the
    /// model's numbers, when a CDA will be the bottleneck
    #[arg(long, requires = "cda_device")]
    pub data_device: Option<String>,
    #[arg(long, requires = "data_device")]
    pub cda_device: Option<String>,
    /// dvs: members are emulated host-managed zoned drives (required)
    #[arg(long)]
    pub zoned: bool,
    /// dvs: zone (= segment) size
    #[arg(long, value_parser = size)]
    pub zone_size: Option<u64>,
    /// dvs: write cache size (journalled in the conventional zones; 0 or
    /// absent: write-through)
    #[arg(long, value_parser = size)]
    pub dvs_cache: Option<u64>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct InfoArgs {
    #[arg(short = 'a', long = "array")]
    pub array: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct WriteArgs {
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Logical byte offset (K/M/G suffixes)
    #[arg(long, value_parser = size)]
    pub offset: u64,
    /// File whose bytes are written
    #[arg(long)]
    pub input: PathBuf,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ReadArgs {
    #[arg(short = 'a', long = "array")]
    pub array: String,
    #[arg(long, value_parser = size)]
    pub offset: u64,
    #[arg(long, value_parser = size)]
    pub length: u64,
    /// File to write the bytes to
    #[arg(long)]
    pub output: PathBuf,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct FailArgs {
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Member index (see mosaic info)
    #[arg(long)]
    pub member: usize,
}

#[derive(Args)]
pub struct ReplaceArgs {
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Index of the failed member to replace
    #[arg(long)]
    pub member: usize,
    /// The new drive: a file or block device (a missing file is created at the member size)
    #[arg(long)]
    pub drive: PathBuf,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct RebuildArgs {
    #[arg(short = 'a', long = "array")]
    pub array: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ScrubArgs {
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Rewrite code units that disagree with the data
    #[arg(long)]
    pub repair: bool,
    #[arg(long)]
    pub json: bool,
}

/// Open any kind of array (fixed, nested CBRO or DVS) as a volume, with
/// what the open found worth a warning.
fn open(spec: &str, writable: bool) -> Result<Box<dyn Volume>> {
    let vol = mosaic_volume::open(spec, writable)?;
    for w in vol.warnings() {
        eprintln!("warning: {w}");
    }
    Ok(vol)
}

pub fn create(a: CreateArgs) -> Result<i32> {
    if a.level == "dvs" || a.level.starts_with("dvs:") {
        if !a.zoned {
            bail!("--level dvs needs --zoned: its members are host-managed zoned drives");
        }
        return crate::cmd_dvs::create_dvs(&a.array, &a.level, a.members, a.member_size, a.stripe_unit, a.block_size, a.zone_size, a.dvs_cache, a.force, a.json);
    }
    if a.zoned {
        bail!("--zoned is for --level dvs: the other levels overwrite in place");
    }
    if let (Some(dd), Some(cd)) = (&a.data_device, &a.cda_device) {
        cda_performance_check(&a.level, dd, cd, a.stripe_unit)?;
    }
    if let Some((outer, _, _)) = mosaic_array::nested::split_cda(&a.level)? {
        // Check drive arrays that are arrays of their own: DIR/cda-I.
        let dir = PathBuf::from(&a.array);
        if a.array.contains(',') || dir.is_file() {
            bail!("{} puts its check drive arrays in subdirectories: give a directory with -a", a.level);
        }
        let opts = CreateOptions {
            level: outer,
            members: None,
            member_size: a.member_size,
            unit: a.stripe_unit,
            block: a.block_size,
            force: a.force,
            assume_clean: a.assume_clean,
        };
        let arr = mosaic_array::nested::create_dir(&dir, &a.level, &opts, (!a.no_journal).then_some(a.journal_size))?;
        return created(&arr, a.json);
    }
    let level: Level = a.level.parse()?;
    let spec = if !a.array.contains(',') && std::fs::metadata(&a.array).map(|m| m.is_dir()).unwrap_or(true) {
        ArraySpec::Dir(PathBuf::from(&a.array))
    } else {
        ArraySpec::parse(&a.array)?
    };
    let opts = CreateOptions {
        level,
        members: a.members,
        member_size: a.member_size,
        unit: a.stripe_unit,
        block: a.block_size,
        force: a.force,
        assume_clean: a.assume_clean,
    };
    let journal = match (&a.journal, &spec, a.no_journal) {
        (Some(p), _, _) => Some(p.clone()),
        (None, ArraySpec::Dir(d), false) => Some(d.join(mosaic_array::array::JOURNAL_FILE)),
        _ => None,
    };
    let arr = Array::create_journaled(&spec, &opts, journal.as_deref().map(|p| (p, a.journal_size)))?;
    if journal.is_none() && arr.geometry().m > 0 {
        eprintln!("warning: no write-ahead journal: a crash during a write followed by a member failure can corrupt other blocks of that stripe; give --journal PATH (a file on a fast device) to close the write hole");
    }
    created(&arr, a.json)
}

/// The model's CBRO performance check (Ineq. 23) for drive-model hints.
fn cda_performance_check(level: &str, data: &str, cda: &str, unit: u64) -> Result<()> {
    let outer = match mosaic_array::nested::split_cda(level)? {
        Some((outer, _, _)) => outer,
        None => level.parse()?,
    };
    let Level::Cbro { n, k, .. } = outer else { bail!("--data-device/--cda-device are for cbro levels, not {level}") };
    let row = crate::cmd_model::cbro_rows(data, cda, n as usize, k as usize, &[unit])?.remove(0);
    if !row.check.performance_ok {
        eprintln!("warning: {}", row.check.message);
    }
    Ok(())
}

fn created(arr: &Array, json: bool) -> Result<i32> {
    let info = arr.info();
    arr.close()?;
    if json {
        print_json(&info)?;
    } else {
        println!(
            "created {} array {}: {} members, {} data + {} code columns, unit {}, capacity {}",
            info.level,
            info.uuid,
            info.members,
            info.data_columns,
            info.code_columns,
            human(info.stripe_unit),
            human(info.capacity)
        );
    }
    Ok(0)
}

/// `info --json`: the kind's own info (for fixed arrays exactly what it
/// always was) with `kind` and the common `volume` part added.
fn info_json(info: &VolumeInfo) -> Result<serde_json::Value> {
    let mut common = serde_json::to_value(info)?;
    if let serde_json::Value::Object(m) = &mut common {
        m.remove("detail");
    }
    let mut out = match &info.detail {
        serde_json::Value::Object(m) => m.clone(),
        other => serde_json::Map::from_iter([("detail".to_string(), other.clone())]),
    };
    out.insert("kind".into(), info.kind.clone().into());
    out.insert("volume".into(), common);
    Ok(serde_json::Value::Object(out))
}

pub fn info(a: InfoArgs) -> Result<i32> {
    let vol = open(&a.array, false)?;
    let info = vol.info();
    if a.json {
        print_json(&info_json(&info)?)?;
        return Ok(0);
    }
    for (label, value) in &info.summary {
        println!("{label:<10} {value}");
    }
    let with_uuid = info.members.iter().any(|m| m.uuid.is_some());
    let mut header = vec!["member".to_string(), "state".into(), "present".into()];
    if with_uuid {
        header.push("uuid".into());
    }
    header.push("path".into());
    let mut rows = vec![header];
    for m in &info.members {
        let mut row = vec![
            m.index.to_string(),
            match m.state {
                MemberState::Active => "active".into(),
                MemberState::Failed => "failed".into(),
                MemberState::Rebuilding { done } => format!("rebuilding {done}/{}", info.regions),
            },
            if m.present { "yes".into() } else { "no".into() },
        ];
        if with_uuid {
            row.push(m.uuid.clone().unwrap_or_else(|| "-".into()));
        }
        row.push(m.path.clone());
        rows.push(row);
    }
    print!("{}", table(&rows));
    Ok(0)
}

#[derive(Serialize)]
struct IoReport {
    offset: u64,
    bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ops: Option<OpCounts>,
    device_reads: u64,
    device_writes: u64,
    auto_failed: Vec<(usize, String)>,
}

fn io_report(vol: &dyn Volume, offset: u64, bytes: u64, json: bool, verb: &str) -> Result<()> {
    let c = vol.io_counters();
    let r = IoReport { offset, bytes, ops: c.ops, device_reads: c.device_reads, device_writes: c.device_writes, auto_failed: vol.auto_failed() };
    for (m, e) in &r.auto_failed {
        eprintln!("warning: member {m} failed during I/O and was marked failed: {e}");
    }
    if json {
        return print_json(&r);
    }
    let stripes = match &r.ops {
        Some(ops) => format!(" (stripes: {} rmw, {} rcw, {} fsw, {} degraded)", ops.stripes_rmw, ops.stripes_rcw, ops.stripes_fsw, ops.stripes_degraded),
        None => String::new(),
    };
    println!("{verb} {} at offset {}: {} device reads, {} device writes{stripes}", human(bytes), offset, r.device_reads, r.device_writes);
    Ok(())
}

// `%` rather than `is_multiple_of`: the workspace's rust-version is 1.80.
#[allow(clippy::manual_is_multiple_of)]
fn check_extent(vol: &dyn Volume, offset: u64, len: u64) -> Result<()> {
    let b = vol.block_size();
    if offset % b != 0 || len % b != 0 {
        bail!("offset {offset} and length {len} must be multiples of the array's {b}-byte block size");
    }
    let cap = vol.capacity();
    if offset.checked_add(len).is_none_or(|e| e > cap) {
        bail!("offset {offset} + length {len} is beyond the array capacity of {cap} bytes");
    }
    Ok(())
}

pub fn write(a: WriteArgs) -> Result<i32> {
    let mut f = File::open(&a.input).with_context(|| format!("{}", a.input.display()))?;
    let len = f.metadata()?.len();
    if len == 0 {
        bail!("{}: input file is empty", a.input.display());
    }
    let vol = open(&a.array, true)?;
    check_extent(vol.as_ref(), a.offset, len)?;
    let mut buf = vec![0u8; CHUNK.min(len) as usize];
    let mut done = 0;
    while done < len {
        let n = CHUNK.min(len - done) as usize;
        f.read_exact(&mut buf[..n]).with_context(|| format!("reading {}", a.input.display()))?;
        vol.write(a.offset + done, &buf[..n])?;
        done += n as u64;
    }
    vol.flush()?;
    io_report(vol.as_ref(), a.offset, len, a.json, "wrote")?;
    vol.close()?;
    Ok(0)
}

pub fn read(a: ReadArgs) -> Result<i32> {
    let vol = open(&a.array, false)?;
    check_extent(vol.as_ref(), a.offset, a.length)?;
    let mut f = File::create(&a.output).with_context(|| format!("{}", a.output.display()))?;
    let mut buf = vec![0u8; CHUNK.min(a.length) as usize];
    let mut done = 0;
    while done < a.length {
        let n = CHUNK.min(a.length - done) as usize;
        vol.read(a.offset + done, &mut buf[..n])?;
        f.write_all(&buf[..n])?;
        done += n as u64;
    }
    f.sync_all()?;
    io_report(vol.as_ref(), a.offset, a.length, a.json, "read")?;
    vol.close()?;
    Ok(0)
}

pub fn fail(a: FailArgs) -> Result<i32> {
    let vol = open(&a.array, true)?;
    vol.fail_member(a.member)?;
    vol.close()?;
    println!("member {} marked failed; the array runs degraded", a.member);
    Ok(0)
}

fn rebuild_with_progress(vol: &dyn Volume, json: bool) -> Result<()> {
    let pb = progress(vol.info().regions, "rebuild");
    let opts = RebuildOptions { abort_after_regions: std::env::var("MOSAIC_FAULT_ABORT_REBUILD_AFTER").ok().and_then(|v| v.parse().ok()) };
    let rep = vol.rebuild(
        &|d, t| {
            pb.set_length(t);
            pb.set_position(d)
        },
        opts,
    )?;
    pb.finish_and_clear();
    if json {
        print_json(&rep)?;
    } else {
        println!(
            "rebuilt member(s) {:?}: {} written in {:.2} s ({:.1} MiB/s){}",
            rep.members,
            human(rep.bytes_written),
            rep.seconds,
            rep.mib_per_s,
            if rep.resumed_from > 0 { format!(", resumed at stripe {}", rep.resumed_from) } else { String::new() }
        );
    }
    Ok(())
}

pub fn replace(a: ReplaceArgs) -> Result<i32> {
    let vol = open(&a.array, true)?;
    vol.replace(a.member, &a.drive)?;
    rebuild_with_progress(vol.as_ref(), a.json)?;
    vol.close()?;
    // Where the new member lives now (a DVS directory array gives it the member's file name).
    let now = vol.info().members.get(a.member).map(|m| m.path.clone()).unwrap_or_default();
    if !a.json && !now.is_empty() && std::path::Path::new(&now) != a.drive {
        println!("member {} is now {now}", a.member);
    }
    if a.array.contains(',') {
        eprintln!("note: list {} in -a from now on", now);
    }
    Ok(0)
}

pub fn rebuild(a: RebuildArgs) -> Result<i32> {
    let vol = open(&a.array, true)?;
    rebuild_with_progress(vol.as_ref(), a.json)?;
    vol.close()?;
    Ok(0)
}

pub fn scrub(a: ScrubArgs) -> Result<i32> {
    let vol = open(&a.array, a.repair)?;
    let pb = progress(vol.info().regions, "scrub");
    let rep = vol.scrub(a.repair, &|d, t| {
        pb.set_length(t);
        pb.set_position(d)
    })?;
    pb.finish_and_clear();
    if a.repair {
        vol.close()?;
    }
    if a.json {
        print_json(&rep)?;
    } else if rep.mismatched == 0 {
        println!(
            "scrub: {} stripes checked, 0 stripes with mismatched parity: all consistent ({} read in {:.2} s)",
            rep.stripes_checked,
            human(rep.bytes_read),
            rep.seconds
        );
    } else {
        let list: Vec<String> = rep.mismatched_stripes.iter().take(50).map(|s| s.to_string()).collect();
        println!(
            "scrub: {} of {} stripes mismatched{}{}{}{}",
            rep.mismatched,
            rep.stripes_checked,
            if list.is_empty() { "" } else { ": " },
            list.join(", "),
            if rep.mismatched_stripes.len() > 50 { ", ..." } else { "" },
            if a.repair { " (repaired)" } else { " (run with --repair to repair them)" }
        );
    }
    if !a.json {
        for n in rep.notes.iter().take(50) {
            println!("scrub: {n}");
        }
    }
    if rep.unverified_stripes > 0 && !a.json {
        println!("scrub: {} stripes could not be verified (too many members missing)", rep.unverified_stripes);
    }
    // Exit 2 when inconsistencies remain, so scripts can tell.
    Ok(if rep.mismatched > 0 && !a.repair { 2 } else { 0 })
}
