//! `mosaic replace-journal`: give an array a new write-ahead journal, as
//! md's `--add-journal` (the old one failed, or is moving to a faster
//! device).  The array must not be served.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::Args;

use mosaic_array::spec::ArraySpec;
use mosaic_array::Array;
use mosaic_dev::Device;

use crate::util::{check_output, print_json, size};

#[derive(Args)]
pub struct ReplaceJournalArgs {
    /// The array: a directory or a comma list of member paths
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// The new journal: a file (created when absent) or a fast device
    #[arg(long)]
    pub journal: PathBuf,
    /// Size of the journal file to create
    #[arg(long, value_parser = size, default_value = "64M")]
    pub journal_size: u64,
    /// Use a device that carries another array's superblock or journal;
    /// and attach the journal even when the old one cannot be read after
    /// an unclean shutdown (every stripe is then resynced, and writes a
    /// write-back cache held only in the old journal are lost)
    #[arg(long)]
    pub force: bool,
    /// Print the outcome as JSON
    #[arg(long)]
    pub json: bool,
}

pub fn replace_journal(a: ReplaceJournalArgs) -> Result<i32> {
    if crate::control::ask(&a.array, &crate::control::Request::Status)?.is_some() {
        bail!("{} is served: stop its server first (mosaic stop -a {}); the journal is replaced offline", a.array, a.array);
    }
    let spec = ArraySpec::parse(&a.array)?;
    check_journal_path(&spec, &a.journal, a.force)?;
    // The device's error names its path already.
    let dev = Device::open_or_create(&a.journal, a.journal_size)?;
    dev.lock(true)?;
    let hint = std::fs::canonicalize(&a.journal).unwrap_or_else(|_| a.journal.clone()).display().to_string();
    let r = Array::replace_journal(&spec, Arc::new(dev), hint.clone(), a.force)?;
    if a.json {
        print_json(&serde_json::json!({ "journal": hint, "replaced": r }))?;
    } else {
        let old = match (&r.old, r.old_usable) {
            (None, _) => "no journal before".to_string(),
            (Some(o), true) => format!("the old journal {o} was replayed and emptied"),
            (Some(o), false) => format!("the old journal {o} could not be read"),
        };
        let resync = if r.resynced { "; the stripes an unclean shutdown may have torn were resynced" } else { "" };
        println!("{} now journals to {hint} ({old}{resync})", a.array);
    }
    Ok(0)
}

/// The new journal must not be one of the array's members, nor carry
/// another array's superblock or journal (without `--force`); this
/// array's own journal (the one it names) may be written over; a copy's
/// or a former one, with the same identity, only with `--force`.
fn check_journal_path(spec: &ArraySpec, path: &Path, force: bool) -> Result<()> {
    let what = mosaic_volume::guard::identify(path)?;
    let info = Array::open(spec, false).map(|arr| arr.info()).ok();
    let uuid = info.as_ref().map(|i| i.uuid.to_string());
    if uuid.is_some() && what.array() == uuid.as_deref() {
        if what.member().is_some() {
            bail!("{} is {what}: a member of the array cannot be its journal", path.display());
        }
        // The array's own hot spare stays one until it is removed.
        let own_spare = matches!(what, mosaic_volume::guard::Carries::Spare { .. })
            && info.as_ref().is_some_and(|i| i.spares.iter().any(|s| mosaic_array::spare::names_same(s, path)));
        if own_spare {
            bail!("{} is {what}: a spare of the array cannot be its journal too (`mosaic remove` frees it)", path.display());
        }
        // Only the journal the array names is its own: another file with
        // its identity is a copy's (a copy is its own array), or a former
        // journal or spare.
        let named = info.as_ref().and_then(|i| i.journal.clone());
        if !force && !named.as_deref().is_some_and(|j| mosaic_array::spare::names_same(j, path)) {
            let kind = if matches!(what, mosaic_volume::guard::Carries::Spare { .. }) { "spare" } else { "journal" };
            bail!(
                "{} is {what}, but the array journals to {}: it is a copy's {kind} or a former one; use --force to overwrite it",
                path.display(),
                named.as_deref().unwrap_or("nothing")
            );
        }
        return Ok(());
    }
    check_output(path, force)
}
