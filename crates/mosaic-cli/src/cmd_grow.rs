//! `mosaic grow` (add members and restripe, online when served; or
//! `--size`: use more of each member), `mosaic add --spare` and
//! `mosaic remove --spare` (hot spares).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;

use mosaic_dev::nbd::absolute;
use mosaic_volume::{GrowOptions, GrowReport, GrowSizeReport, Volume};

use crate::cmd_array::{check_drive, given_twice, open};
use crate::control::{ask, print_remote, Request};
use crate::util::{human, print_json};

#[derive(Args)]
pub struct GrowArgs {
    /// The array: a directory or a comma list of member paths
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// A new member: a file or block device (a missing file is created at
    /// the members' size); repeat for several
    #[arg(long = "add", value_name = "DRIVE")]
    pub add: Vec<PathBuf>,
    /// Grow a directory array to this many members, creating member-NN.img
    /// files in it (instead of --add)
    #[arg(long, conflicts_with = "add")]
    pub members: Option<usize>,
    /// Use a drive that carries another array's superblock or journal
    #[arg(long)]
    pub force: bool,
    /// A new file (on another device) where the grow saves the data its
    /// first steps rewrite in place, as mdadm's --backup-file: needed when
    /// the members' reserved bytes are too small for a second copy (large
    /// stripe units, wide arrays); removed when the grow ends
    #[arg(long, value_name = "FILE")]
    pub backup_file: Option<PathBuf>,
    /// Take more of each member for stripes instead, as mdadm's --grow
    /// --size: SIZE bytes a member (512M, 4G, ...) or "max", all the
    /// smallest member holds (after each drive was replaced by a larger
    /// one).  The new stripes are written with zeros, then the array has
    /// the new capacity; served, under its clients (an NBD client learns
    /// an export's size when it connects: new connections see it)
    #[arg(long, value_name = "SIZE|max", value_parser = member_size, conflicts_with_all = ["add", "members", "backup_file"])]
    pub size: Option<MemberSize>,
    /// Change the level where no data moves, as mdadm's --grow --level
    /// (md's takeover): raid1 of 2 members <-> raid5; raid0 -> raid4 with
    /// one new member (--add or --members) for the parity, and raid4 ->
    /// raid0 dropping it; raid1 -> raid1 with new mirrors, or fewer
    /// (--members N: the first N kept).  Members added are rebuilt at once
    /// (online when served); a mirror made raid5 with --add or --members
    /// grows onto them at once, as mdadm --grow --level=5 --raid-devices=N
    #[arg(long, value_name = "LEVEL", conflicts_with_all = ["size", "backup_file"])]
    pub level: Option<mosaic_core::Level>,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

/// `grow --size`: bytes a member, or all the smallest member holds.
#[derive(Clone, Copy, Debug)]
pub enum MemberSize {
    Max,
    Bytes(u64),
}

/// clap value parser of `--size`: "max" or a size.
fn member_size(s: &str) -> Result<MemberSize, String> {
    match s {
        "max" => Ok(MemberSize::Max),
        _ => crate::util::size(s).map(MemberSize::Bytes).map_err(|e| format!("{e} (or \"max\")")),
    }
}

#[derive(Args)]
pub struct AddArgs {
    /// The array: a directory or a comma list of member paths
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// A hot spare: a file or block device (a missing file is created at
    /// the members' size); it takes a failed member's place by itself
    /// while the array is served; repeat for several.  A tier array's
    /// spare names its side: fast:PATH or slow:PATH
    #[arg(long = "spare", value_name = "DRIVE", required = true)]
    pub spare: Vec<PathBuf>,
    /// Use a drive that carries another array's superblock or journal
    #[arg(long)]
    pub force: bool,
    /// Print the outcome as JSON: the spares added, whether a server
    /// added them, and the array's status after (as `status --json` has it)
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct RemoveArgs {
    /// The array: a directory or a comma list of member paths
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// A hot spare to remove, by the path `status` lists it under (or the
    /// same file by another name); repeat for several.  Its label is
    /// erased, so it is free for any array again
    #[arg(long = "spare", value_name = "DRIVE", required = true)]
    pub spare: Vec<PathBuf>,
    /// Print the outcome as JSON: the spares removed (where each file is
    /// now), whether a server removed them, and the array's status after
    #[arg(long)]
    pub json: bool,
}

/// The drives `a` adds: `--add`, or the member files `--members N` means
/// (`now`: [`members_now`], when the caller asked already).
fn new_drives(a: &GrowArgs, now: Option<(usize, bool)>) -> Result<Vec<PathBuf>> {
    let Some(n) = a.members else {
        let drives: Vec<PathBuf> = a.add.iter().map(|p| absolute(p)).collect();
        if let Some(twice) = given_twice(&drives) {
            bail!("{} is given twice as --add: each new member needs a drive of its own", twice.display());
        }
        return Ok(drives);
    };
    let dir = Path::new(&a.array);
    if a.array.contains(',') || !dir.is_dir() {
        bail!("--members N creates member files in a directory array; for a list of members, name each new one with --add");
    }
    let (have, pending) = match now {
        Some(x) => x,
        None => members_now(&a.array)?,
    };
    if n == have && pending {
        bail!("the array has {have} members already: a grow to {have} members stopped before it ended; resume it with mosaic grow -a {}", a.array);
    }
    if n <= have {
        bail!("the array has {have} members already; --members must be more (shrinking is not supported)");
    }
    Ok((have..n).map(|i| absolute(&mosaic_array::spec::ArraySpec::member_file(dir, i))).collect())
}

/// How many members the array has now, and whether a grow is pending:
/// from its server when served.
fn members_now(array: &str) -> Result<(usize, bool)> {
    Ok(match ask(array, &Request::Status)? {
        Some(st) => (st["members"].as_array().map_or(0, Vec::len), !st["grow"].is_null()),
        None => {
            let vol = open(array, false)?;
            (vol.info().members.len(), vol.grow_pending().is_some())
        }
    })
}

pub fn grow(a: GrowArgs) -> Result<i32> {
    if let Some(size) = a.size {
        return grow_size(&a, size);
    }
    if let Some(level) = a.level {
        return takeover(&a, level);
    }
    let drives = new_drives(&a, None)?;
    // The server resolves paths from its own directory: send an absolute one.
    let backup_file = a.backup_file.as_deref().map(absolute);
    if backup_file.is_some() && drives.is_empty() {
        bail!("--backup-file is for starting a grow (with --add or --members); a resumed grow uses the one it started with");
    }
    if let Some(b) = ask(&a.array, &Request::Grow { drives: drives.clone(), force: a.force, backup_file: backup_file.clone() })? {
        return print_remote(&b, a.json);
    }
    let vol = open(&a.array, true)?;
    if !drives.is_empty() {
        for d in &drives {
            check_drive(vol.as_ref(), d, a.force)?;
        }
        vol.grow_start(&drives, backup_file.as_deref())?;
    }
    let rep = grow_with_progress(vol.as_ref())?;
    vol.close()?;
    report(&rep, grow_text(&rep), a.json)
}

/// Print a finished grow's report: as JSON, or its text.
fn report<T: serde::Serialize>(rep: &T, text: String, json: bool) -> Result<i32> {
    if json {
        print_json(rep)?;
    } else {
        print!("{text}");
    }
    Ok(0)
}

/// `grow --size`: through the server when served (new connections see
/// the new capacity), else here with a progress bar over the new stripes.
fn grow_size(a: &GrowArgs, size: MemberSize) -> Result<i32> {
    let size = match size {
        MemberSize::Max => None,
        MemberSize::Bytes(b) => Some(b),
    };
    if let Some(b) = ask(&a.array, &Request::GrowSize { size })? {
        return print_remote(&b, a.json);
    }
    let vol = open(&a.array, true)?;
    let (pb, tick) = crate::util::step_ticks("zeroing new stripes");
    let r = vol.grow_size(size, &tick);
    pb.finish_and_clear();
    let rep = r?;
    vol.close()?;
    report(&rep, grow_size_text(&rep), a.json)
}

/// `grow --level`: through the server when served, else here, the
/// rebuild of the members it adds under a progress bar.
fn takeover(a: &GrowArgs, level: mosaic_core::Level) -> Result<i32> {
    // --members N below the count now: keep the first N (fewer mirrors).
    let now = a.members.map(|_| members_now(&a.array)).transpose()?;
    let keep = a.members.filter(|&n| now.is_some_and(|(have, _)| n < have));
    let drives = if keep.is_some() { Vec::new() } else { new_drives(a, now)? };
    if let Some(b) = ask(&a.array, &Request::Takeover { level: level.to_string(), drives: drives.clone(), force: a.force, keep })? {
        return print_remote(&b, a.json);
    }
    let vol = open(&a.array, true)?;
    for d in &drives {
        check_drive(vol.as_ref(), d, a.force)?;
    }
    let rep = vol.takeover(level, &drives, keep)?;
    let rebuilt = if rep.rebuild.is_empty() { None } else { Some(crate::cmd_array::rebuild_run(vol.as_ref())?) };
    // A mirror made raid5 with new drives grows onto them now.
    let grown = if vol.grow_pending().is_some() { Some(grow_with_progress(vol.as_ref())?) } else { None };
    vol.close()?;
    if a.json {
        print_json(&serde_json::json!({ "takeover": rep, "rebuild": rebuilt, "grow": grown }))?;
    } else {
        print!("{}{}{}", takeover_text(&rep), rebuilt.as_ref().map(crate::cmd_array::rebuild_text).unwrap_or_default(), grown.as_ref().map(grow_text).unwrap_or_default());
    }
    Ok(rebuilt.as_ref().map_or(crate::exit::OK, crate::cmd_array::rebuild_code))
}

/// What `grow --level` prints.
pub(crate) fn takeover_text(rep: &mosaic_array::takeover::TakeoverReport) -> String {
    format!(
        "level changed from {} to {}, {} members{}\n",
        rep.from,
        rep.to,
        rep.members,
        match (rep.rebuild.is_empty(), rep.dropped.is_empty()) {
            (false, _) => format!("; member(s) {:?} added and rebuilt", rep.rebuild),
            (true, false) => format!("; dropped {} (label erased: free for any array)", rep.dropped.join(", ")),
            (true, true) => String::from(" (no data moved)"),
        }
    )
}

/// What `grow --size` prints.
pub(crate) fn grow_size_text(rep: &GrowSizeReport) -> String {
    format!(
        "grown to {} a member, capacity {} (was {}): {} new stripes written with zeros ({} in {:.2} s)\n",
        human(rep.member_data_size),
        human(rep.capacity),
        human(rep.capacity_before),
        rep.stripes_added,
        human(rep.bytes_written),
        rep.seconds
    )
}

/// Restripe to the end with a progress bar (offline).
fn grow_with_progress(vol: &dyn Volume) -> Result<GrowReport> {
    let info = vol.info();
    let (pb, tick) = crate::util::region_progress(info.regions, info.capacity, "grow");
    let opts = GrowOptions { abort_after_stripes: fault_abort(), stop: None };
    let rep = vol.grow_continue(&tick, opts)?;
    pb.finish_and_clear();
    Ok(rep)
}

/// For tests: `MOSAIC_FAULT_ABORT_GROW_AFTER=N` kills the process after
/// N stripes of a grow, as `kill -9` would.
pub(crate) fn fault_abort() -> Option<u64> {
    std::env::var("MOSAIC_FAULT_ABORT_GROW_AFTER").ok().and_then(|v| v.parse().ok())
}

/// What `grow` prints.
pub(crate) fn grow_text(rep: &GrowReport) -> String {
    format!(
        "{} {} members, capacity {}: {} stripes restriped{} ({} written in {:.2} s)\n",
        if rep.paused { "grow paused (resume with mosaic grow -a ARRAY):" } else { "grown to" },
        rep.members,
        human(rep.capacity),
        rep.stripes,
        if rep.resumed { " (resumed)" } else { "" },
        human(rep.bytes_written),
        rep.seconds
    )
}

/// A spare as given: `fast:PATH` / `slow:PATH` (a tier's side) or a path;
/// the side, if any, and the absolute path.
fn spare_arg(p: &Path) -> Result<(Option<&'static str>, PathBuf)> {
    let s = p.to_string_lossy();
    for side in ["fast:", "slow:"] {
        if let Some(rest) = s.strip_prefix(side) {
            return Ok((Some(side), absolute(Path::new(rest))));
        }
    }
    Ok((None, absolute(p)))
}

/// `--spare DRIVE` as the volume takes it: absolute, after its side.
fn spare_drive(p: &Path) -> Result<PathBuf> {
    Ok(match spare_arg(p)? {
        (Some(side), path) => PathBuf::from(format!("{side}{}", path.display())),
        (None, path) => path,
    })
}

/// The spares given to one `add`, checked before any is added, so a
/// command that is refused for a bad path adds none: each named once, and
/// each an existing drive or a new file in a directory that exists.
fn check_spare_args(spares: &[PathBuf]) -> Result<()> {
    let drives: Vec<PathBuf> = spares.iter().map(|s| spare_arg(s).map(|d| d.1)).collect::<Result<_>>()?;
    if let Some(twice) = given_twice(&drives) {
        bail!("{} is given twice as --spare", twice.display());
    }
    for d in &drives {
        if d.to_str().is_some_and(mosaic_dev::nbd::is_uri) {
            continue; // a remote export: the array checks it when it adds it
        }
        if d.is_dir() {
            bail!("{} is a directory, not a drive or a file for a spare", d.display());
        }
        let dir = d.parent().unwrap_or(Path::new("/"));
        if !d.exists() && !dir.is_dir() {
            bail!("{}: the directory {} does not exist", d.display(), dir.display());
        }
    }
    Ok(())
}

pub fn add(a: AddArgs) -> Result<i32> {
    check_spare_args(&a.spare)?;
    let drives: Vec<PathBuf> = a.spare.iter().map(|s| spare_drive(s)).collect::<Result<_>>()?;
    let req = Request::AddSpare { drives: drives.clone(), force: a.force };
    let (served, status) = match ask(&a.array, &req)? {
        Some(_) => (true, None),
        None => {
            let vol = open(&a.array, true)?;
            add_spares(vol.as_ref(), &drives, a.force)?;
            let status = a.json.then(|| crate::control::status(vol.as_ref(), false));
            vol.close()?;
            (false, status)
        }
    };
    if a.json {
        // Served: the server's status; else the one read before closing.
        let status = status.map_or_else(|| crate::cmd_control::one(&a.array), Ok)?;
        print_json(&serde_json::json!({ "spares": drives, "served": served, "status": status }))?;
    } else {
        for d in &drives {
            println!("{} is a hot spare of {}", d.display(), a.array);
        }
    }
    Ok(0)
}

pub fn remove(a: RemoveArgs) -> Result<i32> {
    let drives: Vec<PathBuf> = a.spare.iter().map(|s| spare_drive(s)).collect::<Result<_>>()?;
    let (now, served, status): (Vec<PathBuf>, bool, _) = match ask(&a.array, &Request::RemoveSpare { drives: drives.clone() })? {
        Some(body) => {
            let now = body.get("now").and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or_else(|| drives.clone());
            (now, true, None)
        }
        None => {
            let vol = open(&a.array, true)?;
            let now = remove_spares(vol.as_ref(), &drives)?;
            let status = a.json.then(|| crate::control::status(vol.as_ref(), false));
            vol.close()?;
            (now, false, status)
        }
    };
    let removed: Vec<serde_json::Value> = drives.iter().zip(&now).map(|(d, n)| serde_json::json!({ "spare": d, "now": n })).collect();
    if a.json {
        let status = status.map_or_else(|| crate::cmd_control::one(&a.array), Ok)?;
        print_json(&serde_json::json!({ "removed": removed, "served": served, "status": status }))?;
    } else {
        for (d, n) in drives.iter().zip(&now) {
            println!("{} is no longer a hot spare of {} (label erased)", d.display(), a.array);
            if !mosaic_array::spare::names_same(&n.to_string_lossy(), d) {
                println!("its file is now {}", n.display());
            }
        }
    }
    Ok(0)
}

/// Remove every one of `drives` as a hot spare, or none: each is named
/// once and listed as a spare before the first is removed.  Where each
/// file is now.
pub(crate) fn remove_spares(vol: &dyn Volume, drives: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let paths: Vec<PathBuf> = drives.iter().map(|d| spare_arg(d).map(|p| p.1)).collect::<Result<_>>()?;
    if let Some(twice) = given_twice(&paths) {
        bail!("{} is given twice as --spare", twice.display());
    }
    let listed: Vec<String> = crate::control::spare_list(&vol.info()).iter().filter_map(|v| v.as_str().map(str::to_string)).collect();
    if let Some(p) = paths.iter().find(|p| !listed.iter().any(|l| mosaic_array::spare::names_same(l, p))) {
        bail!(mosaic_array::spare::not_a_spare(p, listed));
    }
    drives.iter().map(|d| Ok(vol.remove_spare(d)?)).collect()
}

/// Check every one of `drives` (no other array's device without
/// `--force`, and what the volume asks of a spare), then add them: a
/// refused drive leaves none added.
pub(crate) fn add_spares(vol: &dyn Volume, drives: &[PathBuf], force: bool) -> Result<()> {
    for d in drives {
        check_drive(vol, &spare_arg(d)?.1, force)?;
        vol.check_spare(d)?;
    }
    for d in drives {
        vol.add_spare(d)?;
    }
    Ok(())
}
