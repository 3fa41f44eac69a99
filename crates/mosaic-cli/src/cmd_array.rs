//! Array commands: create, info, write, read, fail, replace, rebuild, scrub.
//!
//! `create` is dispatched by `--level`; every other command opens the
//! array with `mosaic_volume::open`, which decides the kind (fixed,
//! nested CBRO, DVS) from the members, and uses the `Volume` trait only.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use mosaic_array::maint::RebuildOptions;
use mosaic_array::spec::ArraySpec;
use mosaic_array::{Array, CreateOptions};
use mosaic_core::{Level, MemberState, OpCounts};
use mosaic_volume::{Volume, VolumeInfo};

use crate::util::{check_output, human, print_json, progress, size, table};

/// Largest piece moved per array call by `read`/`write`.
const CHUNK: u64 = 8 << 20;

/// Every level `create --level` takes, as (syntax, an example, what it
/// is): the one list `create --help` is made from, checked against the
/// level parsers by the help tests.
pub const LEVELS: &[(&str, &str, &str)] = &[
    ("raid0", "raid0", "striping, no redundancy"),
    ("raid1", "raid1", "n-way mirror"),
    ("raid4", "raid4", "one dedicated parity member"),
    ("raid5", "raid5", "rotating parity (left-symmetric, like md)"),
    ("raid6", "raid6", "rotating P+Q"),
    ("rs:K+M", "rs:10+4", "Reed-Solomon, K data + M code members"),
    ("cbro:N+K[,cda=...]", "cbro:16+1,cda=raid5:4", "N data members, K check drive arrays (cda=single, raid0:W, raid5:W, raid6:W, rs:K+M or cbro:...)"),
    ("dvs[:2]", "dvs:2", "DVS-RAID on zoned members (--zoned), 1 or 2 parity"),
    ("tier", "tier", "hybrid tier of two inner arrays (--fast, --slow)"),
    ("remap", "remap", "remapped inner array (--inner), see mosaic adapt"),
];

/// Whether `create` knows `level` (lower-case): an unknown name is
/// refused with every level [`LEVELS`] lists, not only the fixed ones; a
/// known family with bad numbers keeps its own parser's message.
fn known_level(level: &str) -> Result<()> {
    // A name alone (`tier`), or a family that takes numbers after a colon
    // (`rs:K+M`, `dvs[:2]`), as LEVELS spells them.
    let known = LEVELS.iter().any(|(syntax, _, _)| match syntax.split_once([':', '[']) {
        None => level == *syntax,
        Some((family, _)) => level == family || level.strip_prefix(family).is_some_and(|r| r.starts_with(':')),
    });
    if known {
        return Ok(());
    }
    let names: Vec<&str> = LEVELS.iter().map(|(s, _, _)| *s).collect();
    bail!("unknown level {level:?}: expected one of {} (mosaic create --help says what each is)", names.join(", "))
}

/// `--level`'s help: the names (short) or a line per level (long, each
/// description wrapped to fit 80 columns below clap's indent of 10).
fn level_help(long: bool) -> String {
    let names: Vec<&str> = LEVELS.iter().map(|(s, _, _)| *s).collect();
    let mut h = format!("The array's level: {}", names.join(", "));
    if long {
        h.push(':');
        for (syntax, _, what) in LEVELS {
            let mut line = format!("\n  {syntax:<18}");
            for word in what.split(' ') {
                if line.len() + 1 + word.len() > 70 {
                    h.push_str(&line);
                    line = format!("\n{:20}", "");
                }
                line.push(' ');
                line.push_str(word);
            }
            h.push_str(&line);
        }
    }
    h
}

/// `--bitmap`: a write-intent bitmap or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BitmapArg {
    Internal,
    None,
}

#[derive(Args)]
pub struct CreateArgs {
    /// A directory to create member files in, or a comma list of existing member files / block devices
    #[arg(short = 'a', long = "array")]
    pub array: String,
    // The list, with one line per level in --help: `LEVELS`.
    #[arg(long, help = level_help(false), long_help = level_help(true))]
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
    /// Logical block size in bytes: 512 or 4096
    #[arg(long, value_parser = size, default_value = "4096")]
    pub block_size: u64,
    /// Overwrite members that already belong to an array
    #[arg(long)]
    pub force: bool,
    /// Skip the initial parity sync of existing devices (their code units are
    /// taken as consistent)
    #[arg(long)]
    pub assume_clean: bool,
    /// Write-ahead journal (a file, created when absent, or a fast device) that
    /// closes the RAID write hole; default for a directory: DIR/journal.img
    #[arg(long, conflicts_with = "no_journal")]
    pub journal: Option<PathBuf>,
    /// Size of the journal file to create (with a directory or --journal FILE)
    #[arg(long, value_parser = size, default_value = "64M")]
    pub journal_size: u64,
    /// No journal: a crash during a write followed by a member failure can
    /// corrupt other blocks of the stripe (the write hole)
    #[arg(long)]
    pub no_journal: bool,
    /// Without a journal: a write-intent bitmap, so the resync after a
    /// crash reads only the regions written near it (internal), or none.
    /// Default: internal for arrays of 100 GB and more, as mdadm
    #[arg(long, value_enum)]
    pub bitmap: Option<BitmapArg>,
    /// Each member's bytes one bitmap bit covers (mdadm --bitmap-chunk)
    #[arg(long, value_parser = size, default_value = "64M")]
    pub bitmap_chunk: u64,
    /// cbro: drive model of the data drives (e.g. hdd:seagate-st91000640ss),
    /// with --cda-device for the check drive arrays: warns, with the
    /// model's numbers, when a CDA will be the bottleneck
    #[arg(long, requires = "cda_device")]
    pub data_device: Option<String>,
    /// cbro: drive model of the check drive arrays (e.g. ssd:samsung-830-128g),
    /// with --data-device
    #[arg(long, requires = "data_device")]
    pub cda_device: Option<String>,
    /// dvs: members are emulated host-managed zoned drives (required)
    #[arg(long)]
    pub zoned: bool,
    /// dvs: zone (= segment) size (default: 16M, at most a quarter of
    /// --member-size)
    #[arg(long, value_parser = size)]
    pub zone_size: Option<u64>,
    /// dvs: write cache size (journalled in the conventional zones; 0 or
    /// absent: write-through)
    #[arg(long, value_parser = size)]
    pub dvs_cache: Option<u64>,
    /// remap: the inner array whose units are re-placed, LEVEL:N
    /// (raid0:14, raid5:4, raid6:6) or rs:K+M; created in DIR/inner
    #[arg(long)]
    pub inner: Option<String>,
    /// remap: the unit that moves; divides --stripe-unit (default: the stripe
    /// unit)
    #[arg(long, value_parser = size)]
    pub remap_unit: Option<u64>,
    /// remap: share of each drive's units kept spare, where moves land, in
    /// (0, 0.5] (default: 0.125)
    #[arg(long)]
    pub remap_spare: Option<f64>,
    /// raid1: a member (its slot, from 0) read only when no other copy
    /// serves, as mdadm's --write-mostly (the slow side of a mirror of
    /// mixed drives); repeat or give a comma list
    #[arg(long = "write-mostly", value_name = "N", value_delimiter = ',')]
    pub write_mostly: Vec<usize>,
    /// A hot spare for a fixed-level array: a file or block device (a
    /// missing file is created at the members' size) that takes a failed
    /// member's place while the array is served; repeat for several
    #[arg(long = "spare", value_name = "DRIVE")]
    pub spare: Vec<PathBuf>,
    /// The host that holds each member (its failure domain), in the
    /// members' order: H0,H1,...  Members without one are placed by their
    /// URI's host (nbd://HOST/...), or on this machine.  No host may hold
    /// more members than the level survives losing, unless --force
    #[arg(long, value_name = "H0,H1,...")]
    pub hosts: Option<String>,
    /// tier: the fast inner array, LEVEL:N (raid1:2, raid5:4), rs:K+M or
    /// cbro:N+K[,cda=...]; created in DIR/fast
    #[arg(long)]
    pub fast: Option<String>,
    /// tier: the slow inner array (e.g. raid6:6), created in DIR/slow
    #[arg(long)]
    pub slow: Option<String>,
    /// tier: size of each fast member file (default: --member-size)
    #[arg(long, value_parser = size)]
    pub fast_size: Option<u64>,
    /// tier: size of each slow member file (default: --member-size)
    #[arg(long, value_parser = size)]
    pub slow_size: Option<u64>,
    /// tier: ReHypar data sections' extent sizes, equal shares of the fast
    /// data space (default: 64K,256K)
    #[arg(long)]
    pub tier_extents: Option<String>,
    /// tier: ReHypar's chunk threshold V in blocks (default: 8; the paper uses
    /// 8 and 32)
    #[arg(long)]
    pub tier_v: Option<u64>,
    /// tier: the fast devices' erase block; extents are aligned to it
    /// (default: 256K)
    #[arg(long, value_parser = size)]
    pub tier_erase_block: Option<u64>,
    /// tier: plain fixed extents instead of ReHypar's chunk partitioning
    #[arg(long)]
    pub tier_fixed_extents: bool,
    /// tier: demote when the fast tier is fuller than this share (default: 0.8)
    #[arg(long)]
    pub tier_high_water: Option<f64>,
    /// tier: ... until it is at most this full (default: 0.6)
    #[arg(long)]
    pub tier_low_water: Option<f64>,
    /// tier: promote a slow group after this many read hits (default: 2)
    #[arg(long)]
    pub tier_promote_hits: Option<u32>,
    /// tier: decide by a clock that advances this many ns per request
    /// instead of real time (reproducible replays; 0 = real time)
    #[arg(long, default_value_t = 0)]
    pub tier_request_clock: u64,
    /// Print the created array's description as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct InfoArgs {
    /// The array: a directory of member files, or a comma list of member files
    /// and block devices in any order
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Print the superblock and members as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct WriteArgs {
    /// The array: a directory of member files, or a comma list of member files
    /// and block devices in any order
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Logical byte offset in the array to write at (a size: 0, 4096, 1M)
    #[arg(long, value_parser = size)]
    pub offset: u64,
    /// File whose bytes are written (`-`: standard input); any offset and
    /// length (partial blocks are read, modified and written back)
    #[arg(long)]
    pub input: PathBuf,
    /// Print the report (bytes, device operations) as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ReadArgs {
    /// The array: a directory of member files, or a comma list of member files
    /// and block devices in any order
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Logical byte offset in the array to read from (a size: 0, 4096, 1M)
    #[arg(long, value_parser = size)]
    pub offset: u64,
    /// Bytes to read (a size: 4096, 4M)
    #[arg(long, value_parser = size)]
    pub length: u64,
    /// File to write the bytes to (`-`: standard output; the report then
    /// goes to standard error)
    #[arg(long)]
    pub output: PathBuf,
    /// Overwrite an output that is a member or journal of another array
    #[arg(long)]
    pub force: bool,
    /// Print the report (bytes, device operations) as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct FailArgs {
    /// The array: a directory of member files, or a comma list of member files
    /// and block devices in any order
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Member index to mark failed (see mosaic info)
    #[arg(long)]
    pub member: usize,
    /// Print the outcome as JSON: the member failed, whether a server did
    /// it, and the array's status after it (as `status --json` has it)
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ReplaceArgs {
    /// The array: a directory of member files, or a comma list of member files
    /// and block devices in any order
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Index of the member to replace: a failed one, or with --hot a working one
    #[arg(long)]
    pub member: usize,
    /// The new drive: a file or block device (a missing file is created at
    /// the member size), or an NBD URI.  With --hot it may be left out: the
    /// first hot spare is used
    #[arg(long, required_unless_present = "hot")]
    pub drive: Option<PathBuf>,
    /// Replace a working member (md's --replace): its contents are copied
    /// onto the new drive (or the first hot spare) while it stays in
    /// service, so the array keeps all its redundancy, and the new drive
    /// then takes its place (a DVS array copies zone by zone).  If the old
    /// drive of a fixed array fails during the copy, the new one is put in
    /// as a plain replacement and rebuilt.  A copy cut off starts over when
    /// asked again (a spare stays a spare)
    #[arg(long)]
    pub hot: bool,
    /// The host that holds the new drive (its failure domain; default: its
    /// URI's host, or this machine)
    #[arg(long)]
    pub host: Option<String>,
    /// Overwrite a drive that is a member or journal of another array, or
    /// place it on a host that already holds as many members as the level
    /// survives losing
    #[arg(long)]
    pub force: bool,
    /// Print the rebuild report as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct RebuildArgs {
    /// The array: a directory of member files, or a comma list of member files
    /// and block devices in any order
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Print the rebuild report as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ScrubArgs {
    /// The array: a directory of member files, or a comma list of member files
    /// and block devices in any order
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Rewrite code units that disagree with the data
    #[arg(long)]
    pub repair: bool,
    /// End the scrub a server is running for the array (as zpool scrub
    /// -s); its command prints what it checked and exits 4
    #[arg(long, conflicts_with = "repair")]
    pub cancel: bool,
    /// Print the scrub report (every mismatch found) as JSON
    #[arg(long)]
    pub json: bool,
}

/// Open any kind of array (fixed, nested CBRO or DVS) as a volume, with
/// what the open found worth a warning.
pub(crate) fn open(spec: &str, writable: bool) -> Result<Box<dyn Volume>> {
    let vol = match mosaic_volume::open(spec, writable) {
        Ok(v) => v,
        // Held by a server of this array: say so, and how to reach it.
        Err(e) if e.to_string().contains("in use by another mosaic process") && crate::control::ask(spec, &crate::control::Request::Status).ok().flatten().is_some() => {
            bail!("{e}: the array is served by `mosaic serve`; reach its bytes through the server (NBD: qemu-io, nbdcopy, nbdfuse) or stop it first (`mosaic stop -a {spec}`)")
        }
        Err(e) => return Err(e.into()),
    };
    for w in vol.warnings() {
        eprintln!("warning: {w}");
    }
    Ok(vol)
}

/// `mosaic create`: refuse to overwrite another array's files, check the
/// sizes, create; when anything fails, remove what this create made.
pub fn create(mut a: CreateArgs) -> Result<i32> {
    // Level names are case-blind, as the fixed levels' parser is.
    a.level = a.level.trim().to_ascii_lowercase();
    known_level(&a.level)?;
    let made = Snapshot::take(&create_roots(&a));
    let r = preflight(&a).and_then(|_| create_array(&a));
    if r.is_err() {
        made.undo();
    } else if let Some(w) = thin_warning(&create_roots(&a)) {
        eprintln!("warning: {w}");
    }
    r
}

/// Member and journal files are made sparse, so a create may promise more
/// than the file system holds (thin provisioning, as a sparse file vdev
/// does): said, not refused, when the bytes not yet allocated under
/// `roots` pass the space free there.
fn thin_warning(roots: &[PathBuf]) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let (mut unallocated, mut stack) = (0u64, roots.to_vec());
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
        if m.is_dir() {
            stack.extend(std::fs::read_dir(&p).into_iter().flatten().flatten().map(|e| e.path()));
        } else if m.is_file() {
            unallocated = unallocated.saturating_add(m.len().saturating_sub(m.blocks().saturating_mul(512)));
        }
    }
    let root = roots.first()?;
    let free = crate::util::space_free(root.parent().filter(|_| root.is_file()).unwrap_or(root))?;
    (unallocated > free).then(|| {
        format!(
            "the array's files are sparse: {} of them is not yet allocated, more than the {} free on {}'s file system; writes will fail once it fills",
            human(unallocated),
            human(free),
            root.display()
        )
    })
}

/// Whether `-a` names a directory to create members in (not a list, not a file).
fn is_dir_spec(array: &str) -> bool {
    !array.contains(',') && std::fs::metadata(array).map(|m| m.is_dir()).unwrap_or(true)
}

/// The paths a create may make files under: the directory of a directory
/// array and an explicit journal.
fn create_roots(a: &CreateArgs) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if is_dir_spec(&a.array) {
        roots.push(PathBuf::from(&a.array));
    }
    roots.extend(a.journal.clone());
    roots
}

/// The checks before create touches anything: no other array's member,
/// journal or directory is overwritten without `--force`, and
/// `--member-size` agrees with existing files.
fn preflight(a: &CreateArgs) -> Result<()> {
    if let Some(j) = &a.journal {
        check_output(j, a.force)?;
    }
    if !is_dir_spec(&a.array) {
        let paths: Vec<&str> = a.array.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
        check_domains(a, &paths)?;
        for p in &paths {
            check_output(Path::new(p), a.force)?;
        }
        if let Some(want) = a.member_size {
            for p in &paths {
                check_size(Path::new(p), want, want)?;
            }
        }
        return Ok(());
    }
    let dir = Path::new(&a.array);
    check_output(dir, a.force)?;
    if a.hosts.is_some() {
        // Member files of a directory: their hosts are the labels alone.
        let n = a.level.parse::<Level>().ok().and_then(|l| l.implied_members()).or(a.members).unwrap_or(0);
        check_domains(a, &vec![""; n])?;
    }
    if let Some(want) = a.member_size {
        let dvs = a.level == "dvs" || a.level.starts_with("dvs:");
        // A DVS member file holds its zones after a 4 KiB zone header.
        let file_size = if dvs { want + ZONED_HEADER } else { want };
        for p in existing_member_files(dir, dvs) {
            check_size(&p, want, file_size)?;
        }
    }
    Ok(())
}

/// The members' host labels from `--hosts` (one per member).
fn host_labels(a: &CreateArgs, members: usize) -> Result<Option<Vec<String>>> {
    a.hosts.as_deref().map(|h| mosaic_array::domain::parse_labels(h, members).map_err(anyhow::Error::msg)).transpose()
}

/// Refuse members placed so that losing one host loses data (unless
/// `--force`): the failure-domain rule of [`mosaic_array::domain`].
fn check_domains(a: &CreateArgs, paths: &[&str]) -> Result<()> {
    let fixed = a.level.parse::<Level>().ok();
    if a.hosts.is_some() && (fixed.is_none() || mosaic_array::nested::split_cda(&a.level)?.is_some()) {
        bail!("--hosts is for fixed-layout arrays (raid0..6, rs, cbro without nested check arrays), not --level {}", a.level);
    }
    let labels = host_labels(a, paths.len())?;
    let (Some(level), false) = (fixed, a.force) else { return Ok(()) };
    let domains: Vec<String> = paths.iter().enumerate().map(|(i, p)| mosaic_array::domain::domain_of(p, labels.as_ref().map(|l| l[i].as_str()))).collect();
    // A wrong member count is create's to report, with its own words.
    let Ok((_, m)) = level.columns(paths.len()) else { return Ok(()) };
    mosaic_array::domain::check(&domains, m, &a.level).map_err(anyhow::Error::msg)
}

/// Refuse a replacement that puts more members of the array on one host
/// than it survives losing (unless `force`).
pub(crate) fn check_placement(vol: &dyn Volume, idx: usize, drive: &Path, host: Option<&str>, force: bool) -> Result<()> {
    if let Some(h) = host.filter(|h| !mosaic_array::domain::valid_label(h)) {
        bail!("--host {h:?} is not a host name (letters, digits, '-', '_' and '.', at most 63)");
    }
    let info = vol.info();
    let Some(m) = crate::control::code_columns(&info).filter(|_| !force) else { return Ok(()) };
    let mut domains: Vec<String> = info.members.iter().map(|m| m.host.clone()).collect();
    if let Some(d) = domains.get_mut(idx) {
        *d = mosaic_array::domain::domain_of(&drive.to_string_lossy(), host);
    }
    mosaic_array::domain::check(&domains, m as usize, &info.level).map_err(anyhow::Error::msg)
}

/// Bytes of the zone header that precedes the zones of an emulated zoned drive file.
const ZONED_HEADER: u64 = 4096;

/// Member files of a directory array that exist already
/// (`member-NN.img`, or `dvs-N.zoned` for DVS).
fn existing_member_files(dir: &Path, dvs: bool) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let (pre, suf) = if dvs { ("dvs-", ".zoned") } else { ("member-", ".img") };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(pre) && n.ends_with(suf)))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// An existing `path` must be `file_size` bytes, what a member of
/// `--member-size` bytes takes: an error naming both when it is not.
fn check_size(path: &Path, member_size: u64, file_size: u64) -> Result<()> {
    let Ok(mut f) = File::open(path) else { return Ok(()) };
    // Seeking to the end gives block devices their size too.
    let have = f.seek(SeekFrom::End(0)).with_context(|| format!("{}", path.display()))?;
    if have != file_size {
        let header = if file_size > member_size { format!(" ({file_size} with its {}-byte zone header)", file_size - member_size) } else { String::new() };
        bail!("{} is {have} bytes but --member-size says {member_size}{header}: give the size it has, or leave --member-size out", path.display());
    }
    Ok(())
}

/// What existed under create's paths before it ran, so that a failed
/// create removes exactly what it made.
struct Snapshot {
    roots: Vec<Root>,
}

enum Root {
    /// The path did not exist: `top` is its topmost missing ancestor
    /// (create_dir_all makes it), removed whole.
    Missing { top: PathBuf },
    /// A directory that existed, with every path under it then.
    Dir { dir: PathBuf, had: std::collections::HashSet<PathBuf> },
    /// A file (or device) that existed: left alone.
    Kept,
}

impl Snapshot {
    fn take(paths: &[PathBuf]) -> Snapshot {
        let mut roots = Vec::new();
        for p in paths {
            // A symbolic link to a directory counts as that directory.
            roots.push(match std::fs::metadata(p) {
                Err(_) if std::fs::symlink_metadata(p).is_ok() => Root::Kept,
                Err(_) => Root::Missing { top: topmost_missing(p) },
                Ok(m) if m.is_dir() => Root::Dir { dir: p.clone(), had: walk(p).into_iter().collect() },
                Ok(_) => Root::Kept,
            });
        }
        Snapshot { roots }
    }

    /// Remove what appeared since [`Snapshot::take`] (deepest first).
    fn undo(&self) {
        for r in &self.roots {
            match r {
                Root::Missing { top } => remove(top),
                Root::Dir { dir, had } => {
                    let mut new: Vec<PathBuf> = walk(dir).into_iter().filter(|p| !had.contains(p)).collect();
                    new.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
                    new.iter().for_each(|p| remove(p));
                }
                Root::Kept => {}
            }
        }
    }
}

/// The first ancestor of `p` (or `p`) that does not exist, below one that does.
fn topmost_missing(p: &Path) -> PathBuf {
    let mut top = p.to_path_buf();
    while let Some(parent) = top.parent() {
        if parent.as_os_str().is_empty() || std::fs::symlink_metadata(parent).is_ok() {
            break;
        }
        top = parent.to_path_buf();
    }
    top
}

/// Every path under `dir` (symbolic links not followed).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.filter_map(|e| e.ok()) {
        let p = e.path();
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// Remove a file or a whole directory that a failed create made.
fn remove(p: &Path) {
    let r = match std::fs::symlink_metadata(p) {
        Err(_) => return,
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
    };
    if let Err(e) = r {
        eprintln!("warning: could not remove {} left by the failed create: {e}", p.display());
    }
}

/// Create the array `a` describes (dispatched by `--level`).
fn create_array(a: &CreateArgs) -> Result<i32> {
    if !a.spare.is_empty() && (a.level == "tier" || a.level == "remap" || mosaic_array::nested::split_cda(&a.level)?.is_some()) {
        bail!("--spare at create is for fixed-level and dvs arrays (raid0..6, rs, cbro without nested check arrays, dvs); a {} array takes its spares with mosaic add --spare", a.level);
    }
    let plain = !(a.level == "tier" || a.level == "remap" || a.level.starts_with("dvs") || mosaic_array::nested::split_cda(&a.level)?.is_some());
    if !a.write_mostly.is_empty() && !plain {
        bail!("--write-mostly is for raid1 (mirror) arrays, not {}", a.level);
    }
    if a.bitmap == Some(BitmapArg::Internal) && !plain {
        bail!("--bitmap internal is for fixed-level arrays (raid1..6, rs, cbro without nested check arrays); a {} array has none", a.level);
    }
    if a.level == "tier" {
        return create_tier(a);
    }
    if a.level == "remap" {
        return crate::cmd_adapt::create_remap(a);
    }
    if a.inner.is_some() || a.remap_unit.is_some() || a.remap_spare.is_some() {
        bail!("--inner, --remap-unit and --remap-spare are for --level remap");
    }
    if a.fast.is_some() || a.slow.is_some() {
        bail!("--fast and --slow are for --level tier");
    }
    if a.level == "dvs" || a.level.starts_with("dvs:") {
        if !a.zoned {
            bail!("--level dvs needs --zoned: its members are host-managed zoned drives");
        }
        return crate::cmd_dvs::create_dvs(a);
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
    let spec = if is_dir_spec(&a.array) {
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
    for sp in &a.spare {
        check_output(sp, a.force)?;
    }
    check_create_spares(&a.spare, &spec, journal.as_deref(), a.member_size)?;
    if journal.is_some() && a.bitmap == Some(BitmapArg::Internal) {
        bail!("--bitmap internal is for arrays without a journal (--no-journal): the journal closes the write hole itself");
    }
    if a.bitmap_chunk < a.block_size {
        bail!("--bitmap-chunk {} is smaller than a block ({} bytes)", a.bitmap_chunk, a.block_size);
    }
    if level == Level::Raid0 && a.bitmap == Some(BitmapArg::Internal) {
        bail!("--bitmap internal: raid0 has no code columns, so nothing to resync");
    }
    let arr = Array::create_journaled(&spec, &opts, journal.as_deref().map(|p| (p, a.journal_size)))?;
    let big = arr.capacity() >= mosaic_array::bitmap::DEFAULT_FROM_BYTES;
    match a.bitmap.unwrap_or(if big && journal.is_none() && arr.geometry().m > 0 { BitmapArg::Internal } else { BitmapArg::None }) {
        BitmapArg::Internal => arr.set_bitmap(Some(a.bitmap_chunk))?,
        BitmapArg::None => {}
    }
    if !a.write_mostly.is_empty() {
        arr.set_write_mostly(&a.write_mostly)?;
    }
    for sp in &a.spare {
        arr.add_spare(sp)?;
    }
    for (i, h) in host_labels(a, arr.geometry().members)?.iter().flatten().enumerate() {
        arr.set_member_host(i, h)?;
    }
    if journal.is_none() && arr.geometry().m > 0 {
        eprintln!("warning: no write-ahead journal: a crash during a write followed by a member failure can corrupt other blocks of that stripe; give --journal PATH (a file on a fast device) to close the write hole");
    }
    created(&arr, a.json)
}

/// The hot spares given to `create`, checked before anything is written
/// (a refusal after the members were labelled and synced would have
/// written over the files given): each named once, none a member or the
/// journal, a drive or a new file in a directory that exists, and an
/// existing drive as large as a member (md's rule for spares).
pub(crate) fn check_create_spares(spares: &[PathBuf], spec: &ArraySpec, journal: Option<&Path>, member_size: Option<u64>) -> Result<()> {
    let same = |a: &Path, b: &Path| mosaic_array::spare::names_same(&b.to_string_lossy(), a);
    let members: Vec<PathBuf> = match spec {
        ArraySpec::Paths(p) => p.clone(),
        ArraySpec::Dir(_) => Vec::new(),
    };
    let need = member_size.or_else(|| members.iter().filter_map(|m| drive_size(m).ok()).min());
    if let Some(twice) = given_twice(spares) {
        bail!("{} is given twice as --spare", twice.display());
    }
    for sp in spares {
        let what = sp.display();
        if sp.to_str().is_some_and(mosaic_dev::nbd::is_uri) {
            continue; // a remote export: the array checks it when it adds it
        }
        if members.iter().any(|m| same(m, sp)) || journal.is_some_and(|j| same(j, sp)) {
            bail!("{what} is a member or the journal of the array being created: a spare must be another drive");
        }
        match std::fs::metadata(sp) {
            Ok(m) if m.is_dir() => bail!("{what} is a directory, not a drive or a file for a spare"),
            Ok(_) => {
                let have = drive_size(sp).with_context(|| format!("{what}: reading its size"))?;
                if let Some(n) = need.filter(|&n| have < n) {
                    bail!("{what}: too small for a spare: {have} bytes; a spare must be as large as a member ({n} bytes)");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let dir = mosaic_dev::nbd::absolute(sp).parent().map(Path::to_path_buf).unwrap_or_default();
                if !dir.is_dir() {
                    bail!("{what}: the directory {} does not exist", dir.display());
                }
            }
            Err(e) => bail!("{what}: {e}"),
        }
    }
    Ok(())
}

/// The first of `drives` named twice, however it is spelled.
pub(crate) fn given_twice(drives: &[PathBuf]) -> Option<&PathBuf> {
    drives.iter().enumerate().find(|(i, d)| drives[..*i].iter().any(|o| mosaic_array::spare::names_same(&o.to_string_lossy(), d))).map(|(_, d)| d)
}

/// The size of a file or block device (read-only: only looked at).
fn drive_size(p: &Path) -> std::io::Result<u64> {
    File::open(p)?.seek(SeekFrom::End(0))
}

/// `--level tier`: a fast and a slow inner array in DIR/fast and
/// DIR/slow, each made by the one create path for a directory (journal,
/// guard, geometry checks), then the tier labels and the empty map.
fn create_tier(a: &CreateArgs) -> Result<i32> {
    if !is_dir_spec(&a.array) {
        bail!("a tier array puts its inner arrays in DIR/fast and DIR/slow: give a directory with -a");
    }
    if a.journal.is_some() {
        bail!("--journal is not for tier arrays: each inner array gets its own journal (DIR/fast/journal.img, DIR/slow/journal.img)");
    }
    if a.members.is_some() || a.zoned || a.assume_clean {
        bail!("--members, --zoned and --assume-clean are not for tier arrays: give each tier's level and member count in --fast/--slow (e.g. --fast raid1:2 --slow raid6:6)");
    }
    let (Some(fast), Some(slow)) = (&a.fast, &a.slow) else { bail!("--level tier needs --fast SPEC and --slow SPEC (e.g. --fast raid1:2 --slow raid6:6)") };
    let need = |s: Option<u64>, which: &str| s.or(a.member_size).with_context(|| format!("--level tier needs --{which}-size (or --member-size): the size of each {which} member file"));
    let c = mosaic_volume::TierCreate {
        fast: mosaic_volume::InnerSpec::parse(fast, need(a.fast_size, "fast")?)?,
        slow: mosaic_volume::InnerSpec::parse(slow, need(a.slow_size, "slow")?)?,
        unit: a.stripe_unit,
        block: a.block_size,
        force: a.force,
        journal_size: (!a.no_journal).then_some(a.journal_size),
        config: tier_config(a)?,
    };
    if a.no_journal {
        eprintln!("warning: no write-ahead journals: a crash during a write followed by a member failure can corrupt other blocks of that stripe");
    }
    let vol = mosaic_volume::TierVolume::create(Path::new(&a.array), &c)?;
    let info = vol.info();
    vol.close()?;
    if a.json {
        print_json(&info_json(&info)?)?;
    } else {
        let line = |k: &str| info.summary.iter().find(|(l, _)| l == k).map(|(_, v)| v.clone()).unwrap_or_default();
        println!("created tier array {}: capacity {}", info.uuid, human(info.capacity));
        println!("  fast: {}", line("fast"));
        println!("  slow: {}", line("slow"));
    }
    Ok(0)
}

/// The tier policy's configuration from the `--tier-*` options.
fn tier_config(a: &CreateArgs) -> Result<mosaic_tier::policy::PolicyConfig> {
    let mut cfg = mosaic_tier::policy::PolicyConfig::default();
    if let Some(list) = &a.tier_extents {
        cfg.sections = crate::tier_sim::sections(list)?;
    }
    cfg.threshold_v = a.tier_v.unwrap_or(cfg.threshold_v);
    cfg.erase_block = a.tier_erase_block.unwrap_or(cfg.erase_block);
    cfg.fixed_extents = a.tier_fixed_extents;
    cfg.high_water = a.tier_high_water.unwrap_or(cfg.high_water);
    cfg.low_water = a.tier_low_water.unwrap_or(cfg.low_water);
    cfg.promote_hits = a.tier_promote_hits.unwrap_or(cfg.promote_hits);
    cfg.request_clock_ns = a.tier_request_clock;
    Ok(cfg)
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
    for (i, path, unused) in arr.larger_members() {
        eprintln!(
            "warning: member {i} ({path}) is larger than the array uses: {} of it unused (each member holds as much as the smallest, {}); `mosaic grow --size max` takes more once every member is larger",
            human(unused),
            human(info.member_data_size)
        );
    }
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
pub(crate) fn info_json(info: &VolumeInfo) -> Result<serde_json::Value> {
    let mut common = serde_json::to_value(info)?;
    if let serde_json::Value::Object(m) = &mut common {
        m.remove("detail");
    }
    let mut out = match &info.detail {
        serde_json::Value::Object(m) => m.clone(),
        other => serde_json::Map::from_iter([("detail".to_string(), other.clone())]),
    };
    out.insert("kind".into(), info.kind.clone().into());
    // Every kind has its identity and size at the top, as scripts read them.
    for key in ["uuid", "capacity"] {
        if !out.contains_key(key) {
            out.insert(key.into(), common[key].clone());
        }
    }
    out.insert("volume".into(), common);
    Ok(serde_json::Value::Object(out))
}

/// `mosaic info`: through the server when the array is served, else
/// from its disks.
pub fn info(a: InfoArgs) -> Result<i32> {
    let body = match crate::control::ask(&a.array, &crate::control::Request::Info)? {
        Some(b) => b,
        None => crate::control::info_body(open(&a.array, false)?.as_ref())?,
    };
    if a.json {
        print_json(&body["json"])?;
    } else {
        print!("{}", body["text"].as_str().unwrap_or_default());
    }
    Ok(0)
}

/// The human text of `info`: the summary, then the members.
pub fn info_text(info: &VolumeInfo) -> String {
    let mut out = String::new();
    for (label, value) in &info.summary {
        out += &format!("{label:<10} {value}\n");
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
                MemberState::Active if m.replacing.is_some() => format!("active, hot replace onto {}", m.replacing.as_deref().unwrap_or_default()),
                MemberState::Active => "active".into(),
                MemberState::Failed => "failed".into(),
                MemberState::Rebuilding { done } => format!("rebuilding {done}/{}", info.regions),
            },
            if m.present { "yes".into() } else { "no".into() },
        ];
        if with_uuid {
            row.push(m.uuid.clone().unwrap_or_else(|| "-".into()));
        }
        row.push(if m.write_mostly { format!("{} (write-mostly)", m.path) } else { m.path.clone() });
        rows.push(row);
    }
    out + &table(&rows)
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

/// Print what an I/O command did: on standard output, or on standard
/// error when standard output carries the data (`read --output -`).
fn io_report(vol: &dyn Volume, offset: u64, bytes: u64, json: bool, verb: &str, to_stderr: bool) -> Result<()> {
    let c = vol.io_counters();
    let r = IoReport { offset, bytes, ops: c.ops, device_reads: c.device_reads, device_writes: c.device_writes, auto_failed: vol.auto_failed() };
    for (m, e) in &r.auto_failed {
        eprintln!("warning: member {m} failed during I/O and was marked failed: {e}");
    }
    let text = if json {
        serde_json::to_string_pretty(&r)?
    } else {
        let stripes = match &r.ops {
            Some(ops) => format!(" (stripes: {} rmw, {} rcw, {} fsw, {} degraded)", ops.stripes_rmw, ops.stripes_rcw, ops.stripes_fsw, ops.stripes_degraded),
            None => String::new(),
        };
        format!("{verb} {} at offset {}: {} device reads, {} device writes{stripes}", human(bytes), offset, r.device_reads, r.device_writes)
    };
    if to_stderr {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
    Ok(())
}

/// `offset + len` must lie within the volume; any alignment is fine.
fn check_range(vol: &dyn Volume, offset: u64, len: u64) -> Result<()> {
    let cap = vol.capacity();
    if offset.checked_add(len).is_none_or(|e| e > cap) {
        bail!("offset {offset} + length {len} is beyond the array capacity of {cap} bytes");
    }
    Ok(())
}

/// Fill `buf` from `r` as far as it goes; fewer bytes only at end of input.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The input of `write`: standard input for `-`, else the file, with its
/// length when it is a regular file (checked against the capacity first).
fn open_input(path: &Path) -> Result<(Box<dyn Read>, Option<u64>, String)> {
    if mosaic_volume::guard::is_stdio(path) {
        return Ok((Box::new(std::io::stdin().lock()), None, "standard input".into()));
    }
    let f = File::open(path).with_context(|| format!("{}", path.display()))?;
    let meta = f.metadata().with_context(|| format!("{}", path.display()))?;
    let len = meta.is_file().then_some(meta.len());
    Ok((Box::new(f), len, path.display().to_string()))
}

/// Write `data` at byte `pos` (any alignment): the partial blocks at its
/// edges are read first and written back with the new bytes in them.
fn write_bytes(vol: &dyn Volume, pos: u64, data: &[u8], buf: &mut Vec<u8>) -> Result<()> {
    let b = vol.block_size();
    let stop = pos + data.len() as u64;
    let start = pos - pos % b;
    let astop = stop.div_ceil(b) * b;
    buf.clear();
    buf.resize((astop - start) as usize, 0);
    let last = buf.len() - b as usize;
    if pos != start {
        vol.read(start, &mut buf[..b as usize])?;
    }
    if stop != astop && (last > 0 || pos == start) {
        vol.read(astop - b, &mut buf[last..])?;
    }
    buf[(pos - start) as usize..(stop - start) as usize].copy_from_slice(data);
    vol.write(start, buf)?;
    Ok(())
}

pub fn write(a: WriteArgs) -> Result<i32> {
    let (mut input, len, name) = open_input(&a.input)?;
    if len == Some(0) {
        bail!("{name}: input file is empty");
    }
    mosaic_volume::refuse_part_of(&a.array)?;
    let vol = open(&a.array, true)?;
    if let Some(len) = len {
        check_range(vol.as_ref(), a.offset, len)?;
    }
    let b = vol.block_size();
    // Pieces after the first start on a block boundary.
    let mut data = vec![0u8; CHUNK as usize];
    let mut scratch = Vec::new();
    let mut done = 0u64;
    // A bar when the length is known (a file, not a pipe).
    let pb = progress(len.unwrap_or(0), "write");
    if len.is_none() {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    loop {
        let pos = a.offset + done;
        let want = (CHUNK - pos % b) as usize;
        let n = read_full(&mut input, &mut data[..want]).with_context(|| format!("reading {name}"))?;
        if n == 0 {
            break;
        }
        if pos.checked_add(n as u64).is_none_or(|e| e > vol.capacity()) {
            bail!(
                "{name}: offset {} + length {} is beyond the array capacity of {} bytes ({done} bytes were written before)",
                a.offset,
                done + n as u64,
                vol.capacity()
            );
        }
        write_bytes(vol.as_ref(), pos, &data[..n], &mut scratch)?;
        done += n as u64;
        pb.set_position(done);
        if n < want {
            break;
        }
    }
    pb.finish_and_clear();
    if done == 0 {
        bail!("{name}: input is empty");
    }
    vol.flush()?;
    io_report(vol.as_ref(), a.offset, done, a.json, "wrote", false)?;
    vol.close()?;
    Ok(0)
}

/// Where `read` puts its bytes.
enum Sink {
    Stdout(std::io::Stdout),
    File(File),
}

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Stdout(o) => o.write(b),
            Sink::File(f) => f.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Stdout(o) => o.flush(),
            Sink::File(f) => f.flush(),
        }
    }
}

impl Sink {
    /// Open `path` (`-`: standard output) without truncating what cannot
    /// be truncated; also whether it is standard output.
    fn open(path: &Path) -> Result<(Sink, bool)> {
        if mosaic_volume::guard::is_stdio(path) {
            return Ok((Sink::Stdout(std::io::stdout()), true));
        }
        let f = File::create(path).with_context(|| format!("{}", path.display()))?;
        let is_stdout = same_file(&f, &std::io::stdout());
        Ok((Sink::File(f), is_stdout))
    }

    /// Flush; make a regular file durable (a pipe or terminal cannot be synced).
    fn finish(&mut self, name: &Path) -> Result<()> {
        self.flush().with_context(|| format!("{}", name.display()))?;
        if let Sink::File(f) = self {
            if f.metadata().map(|m| m.is_file()).unwrap_or(false) {
                f.sync_all().with_context(|| format!("{}", name.display()))?;
            }
        }
        Ok(())
    }
}

/// Whether `f` is the file standard output writes to (`/dev/stdout`).
fn same_file(f: &File, out: &std::io::Stdout) -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Ok(fd) = out.as_fd().try_clone_to_owned() else { return false };
    match (f.metadata(), File::from(fd).metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Refuse a `read --output` that would overwrite a member or the journal
/// of the array being read (even with `--force`), or of another array
/// (without `--force`).
fn check_read_output(vol: &dyn Volume, out: &Path, force: bool) -> Result<()> {
    let what = mosaic_volume::guard::identify(out)?;
    let info = vol.info();
    if what.array() == Some(info.uuid.as_str()) || is_part_of(&info, out) {
        let what = if what.array().is_some() { what.to_string() } else { "a file of this array".to_string() };
        bail!("{} is {what}, the array being read: reading into it would destroy what is read", out.display());
    }
    check_output(out, force)
}

/// Whether `path` is one of the volume's member or journal files, or lies
/// in the directory of one of its nested arrays.
fn is_part_of(info: &mosaic_volume::VolumeInfo, path: &Path) -> bool {
    let Ok(target) = std::fs::canonicalize(path) else { return false };
    let files = info.members.iter().map(|m| m.path.as_str()).chain(info.journal.as_deref());
    files.into_iter().any(|p| {
        let (p, dir) = match p.strip_prefix(mosaic_array::nested::ARRAY_PREFIX) {
            Some(d) => (d, true),
            None => (p, false),
        };
        match std::fs::canonicalize(p) {
            Ok(c) if dir => target.starts_with(&c),
            Ok(c) => c == target,
            Err(_) => false,
        }
    })
}

pub fn read(a: ReadArgs) -> Result<i32> {
    let vol = open(&a.array, false)?;
    check_range(vol.as_ref(), a.offset, a.length)?;
    check_read_output(vol.as_ref(), &a.output, a.force)?;
    let (mut out, to_stdout) = Sink::open(&a.output)?;
    let b = vol.block_size();
    let mut buf = Vec::new();
    let end = a.offset + a.length;
    let mut pos = a.offset;
    let pb = progress(a.length, "read");
    // Each piece reads whole blocks; pieces after the first start on a boundary.
    while pos < end {
        let start = pos - pos % b;
        let stop = end.min(start + CHUNK);
        buf.resize((stop.div_ceil(b) * b - start) as usize, 0);
        vol.read(start, &mut buf)?;
        out.write_all(&buf[(pos - start) as usize..(stop - start) as usize]).with_context(|| format!("writing {}", a.output.display()))?;
        pos = stop;
        pb.set_position(pos - a.offset);
    }
    pb.finish_and_clear();
    out.finish(&a.output)?;
    io_report(vol.as_ref(), a.offset, a.length, a.json, "read", to_stdout)?;
    vol.close()?;
    Ok(0)
}

pub fn fail(a: FailArgs) -> Result<i32> {
    let req = crate::control::Request::Fail { member: a.member };
    let served = crate::control::ask(&a.array, &req)?.is_some();
    let mut status = None;
    if !served {
        let vol = open(&a.array, true)?;
        vol.fail_member(a.member)?;
        status = a.json.then(|| crate::control::status(vol.as_ref(), false));
        vol.close()?;
    }
    if a.json {
        let status = status.map_or_else(|| crate::cmd_control::one(&a.array), Ok)?;
        print_json(&serde_json::json!({ "failed": a.member, "served": served, "status": status }))?;
    } else {
        println!("member {} marked failed; the array runs degraded", a.member);
    }
    Ok(0)
}

/// Rebuild with a progress bar; SIGINT or SIGTERM pauses it at a
/// checkpoint (a second one exits at once).  Its exit status: 4 when
/// paused (the array still runs degraded).
fn rebuild_with_progress(vol: &dyn Volume, json: bool) -> Result<i32> {
    let rep = rebuild_run(vol)?;
    if json {
        print_json(&rep)?;
    } else {
        print!("{}", rebuild_text(&rep));
    }
    Ok(rebuild_code(&rep))
}

/// The rebuild under a progress bar, stopped (paused) by SIGINT or SIGTERM.
pub(crate) fn rebuild_run(vol: &dyn Volume) -> Result<mosaic_array::RebuildReport> {
    let info = vol.info();
    let (pb, tick) = crate::util::region_progress(info.regions, info.capacity, "rebuild");
    let stop = mosaic_nbd::signals::stop_on_signals().context("catching SIGINT and SIGTERM")?;
    let rep = vol.rebuild(&tick, RebuildOptions { stop: Some(stop), ..fault_options() })?;
    pb.finish_and_clear();
    Ok(rep)
}

pub(crate) fn rebuild_code(rep: &mosaic_array::RebuildReport) -> i32 {
    if rep.paused {
        crate::exit::DEGRADED
    } else {
        crate::exit::OK
    }
}

/// The test hook that kills a rebuild or a hot replace's copy part-way,
/// as kill -9 would (`MOSAIC_FAULT_ABORT_REBUILD_AFTER`: regions).
fn fault_options() -> RebuildOptions {
    RebuildOptions { abort_after_regions: std::env::var("MOSAIC_FAULT_ABORT_REBUILD_AFTER").ok().and_then(|v| v.parse().ok()), stop: None }
}

/// `replace --hot` offline: the copy under a progress bar, stopped by
/// SIGINT or SIGTERM, then the rebuild when the old drive failed during
/// it (the JSON then holds both, as a server's answer does); the exit code.
fn hot_with_progress(vol: &dyn Volume, member: usize, drive: Option<&Path>, json: bool) -> Result<i32> {
    let info = vol.info();
    let (pb, tick) = crate::util::region_progress(info.regions, info.capacity, "hot replace");
    let stop = mosaic_nbd::signals::stop_on_signals().context("catching SIGINT and SIGTERM")?;
    let rep = vol.replace_hot(member, drive, &tick, RebuildOptions { stop: Some(stop), ..fault_options() })?;
    pb.finish_and_clear();
    if !json {
        print!("{}", hot_text(&rep));
    }
    if rep.rebuild_needed {
        let rebuilt = rebuild_run(vol)?;
        match json {
            true => print_json(&serde_json::json!({ "hot_replace": rep, "rebuild": rebuilt }))?,
            false => print!("{}", rebuild_text(&rebuilt)),
        }
        return Ok(rebuild_code(&rebuilt));
    }
    if json {
        print_json(&rep)?;
    }
    Ok(if rep.stopped { crate::exit::DEGRADED } else { crate::exit::OK })
}

/// What `replace --hot` prints.
pub(crate) fn hot_text(rep: &mosaic_core::HotReport) -> String {
    let copied = format!("{} copied in {:.2} s ({:.1} MiB/s)", human(rep.bytes_copied), rep.seconds, rep.mib_per_s);
    let copied = match rep.resumed_from {
        Some(at) => format!("{copied}, resumed at stripe {at}"),
        None => copied,
    };
    if let Some(at) = rep.paused_at {
        format!(
            "paused the hot replace of member {} onto {} at stripe {at} of {} after {copied}; the member stays on its old drive, the new one takes every write until the array closes, and the copy resumes there when asked again (a server resumes it by itself)\n",
            rep.member, rep.drive, rep.regions
        )
    } else if rep.stopped {
        format!("stopped the hot replace of member {} after {copied}; the member stays on its old drive, and the copy starts over when asked again\n", rep.member)
    } else if rep.rebuild_needed {
        format!("member {}'s old drive failed during the hot replace (after {copied}): {} takes its place as a plain replacement, and is rebuilt\n", rep.member, rep.drive)
    } else {
        format!("hot-replaced member {} onto {}: {copied}\n", rep.member, rep.drive)
    }
}

/// What `rebuild` prints.
pub(crate) fn rebuild_text(rep: &mosaic_array::RebuildReport) -> String {
    format!(
        "{} member(s) {:?}: {} written in {:.2} s ({:.1} MiB/s){}{}\n",
        if rep.paused { "paused the rebuild of" } else { "rebuilt" },
        rep.members,
        human(rep.bytes_written),
        rep.seconds,
        rep.mib_per_s,
        if rep.resumed_from > 0 { format!(", resumed at stripe {}", rep.resumed_from) } else { String::new() },
        if rep.skipped_regions > 0 {
            format!("; re-added: {} of {} stripes passed over, no write came to them while it was out (write-intent bitmap)", rep.skipped_regions, rep.regions)
        } else {
            String::new()
        }
    ) + if rep.paused { "the rebuild resumes where it paused when the array is served again, or with mosaic rebuild; meanwhile the array runs degraded\n" } else { "" }
        + &lost_text(rep.lost_bytes)
}

/// What a rebuild's `lost_bytes` means for its user.
pub(crate) fn lost_text(lost: u64) -> String {
    match lost {
        0 => String::new(),
        n => format!(
            "{} of data could not be rebuilt (a source member could not read them, and nothing else holds them): they are recorded lost, reads of them fail (mosaic info lists them), and writing their whole stripe units again clears them\n",
            human(n)
        ),
    }
}

/// The checks of a replacement drive for member `idx`, wherever a replace
/// is run (offline or by a server): [`check_drive`] and
/// [`check_placement`].  None (a hot replace onto a spare): the spare
/// was checked when it was added.
pub(crate) fn check_new_drive(vol: &dyn Volume, idx: usize, drive: Option<&Path>, host: Option<&str>, force: bool) -> Result<()> {
    let Some(d) = drive else { return Ok(()) };
    // The drive of this member's paused hot replace: it resumes.
    if vol.hot_paused().is_some_and(|(m, p)| m == idx && mosaic_array::spare::names_same(&p, d)) {
        return Ok(());
    }
    check_drive(vol, d, force)?;
    check_placement(vol, idx, d, host, force)
}

/// Refuse a replacement drive that carries another array's member or
/// journal (without `--force`) or this array's journal.  A device with this
/// array's identity in a slot that is in service on another device is a
/// copy's member: another array's, refused without `--force`, unless the
/// array recorded replacing the member it carries (its own former member,
/// which md takes back too; it is written over).  A member in service is
/// refused; this array's stale or failed member (in any slot: the volume
/// checks) is taken back.  The inner arrays of a cache, a remapped array
/// or a tier count as this array ([`own_arrays`]).
pub(crate) fn check_drive(vol: &dyn Volume, drive: &Path, force: bool) -> Result<()> {
    let what = mosaic_volume::guard::identify(drive)?;
    let info = vol.info();
    if let Some(first) = what.array().and_then(|u| own_arrays(&info).into_iter().find(|a| a.0 == u).map(|a| a.1)) {
        let Some(i) = what.member().map(|m| first + m) else {
            bail!("{} is {what}, the array being repaired: it cannot be a member too", drive.display());
        };
        let in_service = info.members.get(i).filter(|m| m.present && !matches!(m.state, MemberState::Failed));
        if in_service.is_some_and(|m| mosaic_array::spare::names_same(&m.path, drive)) {
            bail!("{} is member {i} of this array, in service", drive.display());
        }
        if let Some(m) = in_service {
            let carried = mosaic_volume::guard::member_label(drive)?.map(|l| l.member_uuid.to_string());
            let former = carried.as_ref().is_some_and(|u| replaced_members(&info).contains(u));
            if !force && !former {
                // The very identity in service: a copy's.  Another one the
                // array kept no record of replacing: a copy's member
                // (which replaced its own), or a former member of this
                // array from before it kept one; the labels cannot tell.
                let why = match &carried {
                    Some(u) if m.uuid.as_ref() != Some(u) => "a copy's member (another array), or a former member of this one that it keeps no record of replacing",
                    _ => "a copy's member (another array)",
                };
                bail!("{} is {what}, whose member {i} is in service as {}: it is {why}; use --force to overwrite it", drive.display(), m.path);
            }
        }
        return Ok(());
    }
    check_output(drive, force)
}

/// The arrays whose labels are this volume's own, each with the volume
/// member index of its member 0: the volume's, and the inner arrays under
/// a cache or a remapped array (the same members) or a tier's two sides
/// (fast members first, as the volume lists them).
fn own_arrays(info: &mosaic_volume::VolumeInfo) -> Vec<(String, usize)> {
    let uuid = |p: &str| info.detail.pointer(p).and_then(|v| v.as_str()).map(str::to_string);
    let fast = info.detail.pointer("/fast/members").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
    let mut own = vec![(info.uuid.clone(), 0)];
    own.extend([("/inner/uuid", 0), ("/fast/uuid", 0), ("/slow/uuid", fast)].into_iter().filter_map(|(p, first)| uuid(p).map(|u| (u, first))));
    own
}

/// The member UUIDs an array recorded replacing (a fixed array's, or the
/// inner arrays' of a cache, a remapped array or a tier), as strings.
fn replaced_members(info: &mosaic_volume::VolumeInfo) -> Vec<String> {
    ["/replaced", "/inner/replaced", "/fast/replaced", "/slow/replaced"]
        .iter()
        .filter_map(|p| info.detail.pointer(p).and_then(|v| v.as_array()).cloned())
        .flatten()
        .filter_map(|u| u.as_str().map(str::to_string))
        .collect()
}

pub fn replace(a: ReplaceArgs) -> Result<i32> {
    // The server resolves paths from its own directory: send an absolute one.
    let drive = a.drive.as_deref().map(mosaic_dev::nbd::absolute);
    let req = crate::control::Request::Replace { member: a.member, drive, force: a.force, host: a.host.clone(), hot: a.hot };
    if let Some(b) = crate::control::ask(&a.array, &req)? {
        return crate::control::print_remote(&b, a.json);
    }
    let vol = open(&a.array, true)?;
    check_new_drive(vol.as_ref(), a.member, a.drive.as_deref(), a.host.as_deref(), a.force)?;
    let code = match (&a.drive, a.hot) {
        (drive, true) => hot_with_progress(vol.as_ref(), a.member, drive.as_deref(), a.json)?,
        (Some(d), false) => {
            vol.replace(a.member, d)?;
            rebuild_with_progress(vol.as_ref(), a.json)?
        }
        (None, false) => bail!("--drive is needed (only replace --hot takes a hot spare without one)"),
    };
    let stopped = a.hot && code != crate::exit::OK;
    if let (Some(h), false) = (&a.host, stopped) {
        vol.set_member_host(a.member, h)?;
    }
    vol.close()?;
    // Where the new member lives now, when the array names it otherwise.
    let now = vol.info().members.get(a.member).map(|m| m.path.clone()).unwrap_or_default();
    if !a.json && !a.hot && !now.is_empty() && a.drive.as_deref().is_some_and(|d| std::path::Path::new(&now) != d) {
        println!("member {} is now {now}", a.member);
    }
    if a.array.contains(',') {
        eprintln!("note: list {} in -a from now on", now);
    }
    Ok(code)
}

pub fn rebuild(a: RebuildArgs) -> Result<i32> {
    if let Some(b) = crate::control::ask(&a.array, &crate::control::Request::Rebuild)? {
        return crate::control::print_remote(&b, a.json);
    }
    let vol = open(&a.array, true)?;
    let code = rebuild_with_progress(vol.as_ref(), a.json)?;
    vol.close()?;
    Ok(code)
}

/// A scrub report for people: "all consistent" only when every stripe
/// was verified and none mismatched.
/// What `scrub` prints.
pub(crate) fn scrub_text(rep: &mosaic_array::ScrubReport, repair: bool) -> String {
    let mut out = Vec::new();
    // An interrupted scrub counts the stripes it did not reach as
    // unverified, not as checked.
    let verified = rep.stripes_checked.saturating_sub(rep.unverified_stripes);
    if rep.interrupted {
        out.push(format!("scrub: stopped after {} stripes, {} with mismatched parity ({} read in {:.2} s)", rep.stripes_checked, rep.mismatched, human(rep.bytes_read), rep.seconds));
    } else if rep.stripes_checked == 0 && rep.mismatched == 0 && rep.unverified_stripes == 0 && !rep.notes.is_empty() {
        // Nothing to check (raid0): the note says why.
    } else if rep.mismatched == 0 && rep.unverified_stripes == 0 {
        out.push(format!("scrub: {} stripes checked, 0 stripes with mismatched parity: all consistent ({} read in {:.2} s)", rep.stripes_checked, human(rep.bytes_read), rep.seconds));
    } else if rep.mismatched == 0 {
        out.push(format!("scrub: {verified} of {} stripes verified, 0 mismatched ({} read in {:.2} s)", rep.stripes_checked, human(rep.bytes_read), rep.seconds));
    }
    if rep.mismatched > 0 {
        let list: Vec<String> = rep.mismatched_stripes.iter().take(50).map(|s| s.to_string()).collect();
        out.push(format!(
            "scrub: {} of {} stripes mismatched{}{}{}{}",
            rep.mismatched,
            rep.stripes_checked,
            if list.is_empty() { "" } else { ": " },
            list.join(", "),
            if rep.mismatched_stripes.len() > 50 { ", ..." } else { "" },
            if repair { " (repaired)" } else { " (run with --repair to repair them)" }
        ));
    }
    for f in rep.findings.iter().take(50) {
        out.push(format!("scrub: {}", f.detail));
    }
    if rep.findings.len() > 50 {
        out.push(format!("scrub: ... {} more findings (--json lists them all)", rep.findings.len() - 50));
    }
    for n in &rep.notes {
        out.push(format!("scrub: {n}"));
    }
    if rep.unlocated_stripes > 0 {
        out.push(format!("scrub: {} mismatched stripes: the wrong column cannot be located (one redundant column)", rep.unlocated_stripes));
    }
    if rep.read_errors_corrected > 0 {
        out.push(format!("scrub: {} unreadable member range(s) rebuilt from the other members and written again (in place, or re-striped on zoned members; the members stay in service)", rep.read_errors_corrected));
    }
    if rep.unverified_stripes > 0 && rep.interrupted {
        out.push(format!("scrub: {} stripes were not verified: the scrub was stopped before its end (cancelled, interrupted, or a server stopping); run it again", rep.unverified_stripes));
    } else if rep.unverified_stripes > 0 {
        out.push(format!(
            "scrub: {} stripes could not be verified: too many members are missing or failed to check their code (the array is degraded; rebuild first)",
            rep.unverified_stripes
        ));
    }
    out.iter().map(|l| format!("{l}\n")).collect()
}

/// Exit 3 when inconsistencies remain, 4 when some stripes could not be
/// verified (a degraded array), so scripts can tell (crate::exit): a scrub
/// that checked nothing is not a clean one.
pub(crate) fn scrub_code(rep: &mosaic_array::ScrubReport, repair: bool) -> i32 {
    if rep.mismatched > 0 && !repair {
        crate::exit::MISMATCH
    } else if rep.unverified_stripes > 0 {
        crate::exit::DEGRADED
    } else {
        crate::exit::OK
    }
}

pub fn scrub(a: ScrubArgs) -> Result<i32> {
    if a.cancel {
        let Some(b) = crate::control::ask(&a.array, &crate::control::Request::CancelScrub)? else {
            bail!("no server runs {}: a scrub there runs only while its own command does (interrupt that one)", a.array);
        };
        if a.json {
            print_json(&b)?;
        } else {
            println!("the scrub of {} was asked to end; its command prints what it checked", a.array);
        }
        return Ok(0);
    }
    let req = crate::control::Request::Scrub { repair: a.repair };
    if let Some(b) = crate::control::ask(&a.array, &req)? {
        return crate::control::print_remote(&b, a.json);
    }
    let vol = open(&a.array, a.repair)?;
    let info = vol.info();
    let (pb, tick) = crate::util::region_progress(info.regions, info.capacity, "scrub");
    // SIGINT or SIGTERM ends it before its next stripe (a second one at once).
    let stop = mosaic_nbd::signals::stop_on_signals().context("catching SIGINT and SIGTERM")?;
    let rep = vol.scrub(a.repair, &|d, t| {
        tick(d, t);
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            vol.interrupt_scrub();
        }
    })?;
    pb.finish_and_clear();
    if a.repair {
        vol.close()?;
    }
    if a.json {
        print_json(&rep)?;
    } else {
        print!("{}", scrub_text(&rep, a.repair));
    }
    Ok(scrub_code(&rep, a.repair))
}

#[cfg(test)]
mod tests {
    use mosaic_array::RebuildReport;

    /// A rebuild that set bytes aside says how many, what that means and
    /// how to clear them; one that did not says nothing of it.
    #[test]
    fn a_rebuilds_lost_bytes_are_said() {
        let rep = |lost_bytes| RebuildReport { members: vec![1], regions: 8, resumed_from: 0, bytes_written: 1 << 20, seconds: 1.0, mib_per_s: 1.0, skipped_regions: 0, paused: false, lost_bytes };
        let t = super::rebuild_text(&rep(12288));
        assert!(t.starts_with("rebuilt member(s) [1]") && t.contains("12.0 KiB of data could not be rebuilt") && t.contains("recorded lost") && t.contains("mosaic info"), "{t}");
        assert!(!super::rebuild_text(&rep(0)).contains("lost"));
    }
}
