//! `mosaic examine MEMBER` and `mosaic assemble --scan PATH...`: what is
//! on the disks, without opening an array (`mosaic_volume::scan`);
//! `mosaic wipe DEVICE...`: erase it (`mosaic_volume::guard::erase`).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use mosaic_volume::guard;
use mosaic_volume::scan::{self, FoundArray};

use crate::util::print_json;

#[derive(Args)]
pub struct ExamineArgs {
    /// A member file or block device (or a journal)
    pub member: PathBuf,
    /// Print the label as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct AssembleArgs {
    /// Find the members of every array under these directories, files or devices
    #[arg(long, required = true, num_args = 1..)]
    pub scan: Vec<PathBuf>,
    /// Print every array found, with the -a spec to open it, as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct WipeArgs {
    /// Files or block devices whose mosaic label, journal header or older
    /// format's superblock to erase
    #[arg(required = true)]
    pub devices: Vec<PathBuf>,
    /// Erase even when a device belongs to an array (which loses it):
    /// without it nothing is written and each such device is named
    #[arg(long)]
    pub force: bool,
    /// Print what each device carried as JSON
    #[arg(long)]
    pub json: bool,
}

/// `mosaic wipe`: erase what each device carries of mosaic's, as `mdadm
/// --zero-superblock` and `zpool labelclear` do.  Every device is checked
/// before any is written: without `--force` a device that belongs to an
/// array is refused and none is touched.
pub fn wipe(a: WipeArgs) -> Result<i32> {
    let mut carrying = Vec::new();
    for d in &a.devices {
        // As mdadm --zero-superblock: a device that is not there is an
        // error, not "nothing to erase" (a mistyped path would pass).
        if !mosaic_dev::nbd::is_uri(&d.to_string_lossy()) && std::fs::symlink_metadata(d).is_err() {
            bail!("{}: no such file or device (nothing was written)", d.display());
        }
        match guard::to_erase(d) {
            Err(e) => bail!("{e} (nothing was written)"),
            Ok(Some(w)) => carrying.push(format!("{} is {w}", d.display())),
            Ok(None) => {}
        }
    }
    if !a.force && !carrying.is_empty() {
        bail!("{}; use --force to erase (nothing was written)", carrying.join("; "));
    }
    let mut out = Vec::new();
    for d in &a.devices {
        let was = guard::erase(d, a.force)?;
        if !a.json {
            match &was {
                Some(w) => println!("{}: erased (it was {w})", d.display()),
                None => println!("{}: nothing of mosaic's to erase", d.display()),
            }
        }
        out.push(serde_json::json!({ "path": d, "erased": was.is_some(), "was": was.as_ref().map(|w| w.to_string()), "array": was.as_ref().and_then(|w| w.array().map(str::to_string)) }));
    }
    if a.json {
        print_json(&serde_json::Value::Array(out))?;
    }
    Ok(0)
}

/// `mosaic examine`: one member's label (identity, event counter, the
/// layout its policy records).  Exit 1 when the path carries nothing.
pub fn examine(a: ExamineArgs) -> Result<i32> {
    // identify() takes a missing path as carrying nothing (a new file is
    // free to create); a path to examine must exist.
    if !a.member.to_str().is_some_and(mosaic_dev::nbd::is_uri) && std::fs::symlink_metadata(&a.member).is_err() {
        bail!("{}: no such file or directory", a.member.display());
    }
    let what = guard::identify(&a.member)?;
    let label = if a.member.is_file() || guard::is_block(&a.member) || a.member.to_str().is_some_and(mosaic_dev::nbd::is_uri) { guard::member_label(&a.member)? } else { None };
    if a.json {
        print_json(&serde_json::json!({ "path": a.member, "carries": what.to_string(), "array": what.array(), "label": label.as_ref().map(label_json) }))?;
    } else {
        println!("{}: {what}", a.member.display());
        if let Some(l) = &label {
            println!("  kind      {}", l.kind);
            println!("  array     {}", l.array_uuid);
            if matches!(what, guard::Carries::Spare { .. }) {
                println!("  spare     {} (for an array of {} members)", l.member_uuid, l.members);
            } else {
                println!("  member    {} of {} ({})", l.member_index, l.members, l.member_uuid);
            }
            println!("  events    {}", l.events);
            println!("  created   {}", crate::cmd_serve::rfc3339(std::time::Duration::from_secs(l.created)));
            for (k, v) in l.policy.as_object().into_iter().flatten() {
                println!("  {k:<9} {v}");
            }
        }
    }
    if what == guard::Carries::Nothing {
        bail!("{} carries nothing of mosaic's", a.member.display());
    }
    Ok(0)
}

fn label_json(l: &mosaic_format::label::Label) -> serde_json::Value {
    serde_json::json!({
        "kind": l.kind, "array_uuid": l.array_uuid, "member_uuid": l.member_uuid, "member_index": l.member_index,
        "members": l.members, "events": l.events, "member_uuids": l.member_uuids, "created": l.created, "policy": l.policy,
    })
}

/// `mosaic assemble --scan`: every array found, its members in order.
/// Exit 4 when an array found is incomplete (members missing or stale
/// beyond what its code tolerates).
pub fn assemble(a: AssembleArgs) -> Result<i32> {
    let pb = crate::util::steps(0, "assemble");
    let (found, loose) = scan::scan_report(&a.scan, &|done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })?;
    pb.finish_and_clear();
    for w in &loose {
        eprintln!("warning: {w}");
    }
    if a.json {
        let v: Vec<serde_json::Value> = found.iter().map(|f| serde_json::json!({ "array": f, "spec": f.spec() })).collect();
        print_json(&serde_json::Value::Array(v))?;
    } else {
        if found.is_empty() {
            println!("no arrays found");
        }
        for f in &found {
            print!("{}", describe(f));
        }
    }
    Ok(if found.iter().all(|f| f.complete) { crate::exit::OK } else { crate::exit::DEGRADED })
}

fn describe(f: &FoundArray) -> String {
    let mut s = format!(
        "array {} ({}{}): {} of {} members{}{}\n",
        f.uuid,
        f.kind,
        f.level.as_deref().map(|l| format!(", {l}")).unwrap_or_default(),
        f.found.len(),
        f.members,
        if f.complete { "" } else { ", INCOMPLETE" },
        match &f.copy {
            Some(c) if c.original => format!(" (the original, in {}: copies of it with its UUID are in other directories; each is its own array)", c.dir),
            Some(c) => format!(" (a copy, in {}: each copy is its own array)", c.dir),
            None => String::new(),
        }
    );
    for m in &f.found {
        let mark = if m.replaced {
            "  REPLACED (a former member; not used)"
        } else if m.stale {
            "  STALE"
        } else if m.other_copy {
            "  ANOTHER COPY'S (written apart from the others; not used)"
        } else {
            ""
        };
        s += &format!("  {:>3}  {}  events {}{mark}\n", m.index, m.path, m.events);
    }
    if let Some(why) = &f.conflict {
        s += &format!("  cannot be assembled: {why}\n");
    }
    for i in &f.missing {
        s += &format!("  {i:>3}  missing\n");
    }
    for d in &f.duplicates {
        s += &format!("       older copy: {d}\n");
    }
    for d in &f.former {
        s += &format!("       former member (replaced; not used): {d}\n");
    }
    for w in &f.warnings {
        s += &format!("  warning: {w}\n");
    }
    for j in &f.journals {
        s += &format!("  journal {j}\n");
    }
    for sp in &f.spares {
        s += &format!("  spare   {sp}\n");
    }
    for d in &f.paused_copies {
        s += &format!("  paused hot replace onto {d} (not a member: the copy resumes at the next writable open)\n");
    }
    if let Some(o) = &f.part_of {
        // Its bytes are the owner's: opened alone it is only read.
        match &f.owner_dir {
            Some(d) => s += &format!("  part of another array: {o} (open that one: -a {d})\n"),
            None => s += &format!("  part of another array: {o} (open that one: its directory holds this one)\n"),
        }
    } else if !f.found.is_empty() {
        s += &format!("  -a {}\n", f.spec());
    }
    s
}
