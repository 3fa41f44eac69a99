//! DVS-RAID commands: arrays on emulated zoned drives (`--level dvs
//! --zoned`), DVS and the SMR baselines in `mosaic replay`, and `mosaic
//! eval dvs`.  The work is in `mosaic-dvs`; these are thin wrappers.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use mosaic_core::Frontend;
use mosaic_drives::DriveModel;
use mosaic_dvs::{baseline, exp, files, DvsArray};

use crate::util::{human, print_json};

/// Default zone (segment) size of created DVS members.
pub const DEFAULT_ZONE: u64 = 16 << 20;

/// `mosaic create -a DIR --level dvs[:K] --members N --member-size S --zoned --stripe-unit U`.
/// `level` is `dvs` (one parity chunk) or `dvs:2` (Reed-Solomon P+Q);
/// `zone_size` defaults to [`DEFAULT_ZONE`]; `cache_size` (bytes) gives
/// the array a journalled SSG write cache (None: write-through).
#[allow(clippy::too_many_arguments)]
pub fn create_dvs(array: &str, level: &str, members: Option<usize>, member_size: Option<u64>, stripe_unit: u64, block_size: u64, zone_size: Option<u64>, cache_size: Option<u64>, force: bool, json: bool) -> Result<i32> {
    let parity = match level {
        "dvs" | "dvs:1" => 1,
        "dvs:2" => 2,
        _ => bail!("unknown DVS level {level:?}: expected dvs or dvs:2"),
    };
    if array.contains(',') {
        bail!("--level dvs creates its members as zoned files in a directory: give -a DIR");
    }
    let members = members.ok_or_else(|| anyhow!("--level dvs needs --members"))?;
    let member_size = member_size.ok_or_else(|| anyhow!("--level dvs needs --member-size"))?;
    let spec = files::CreateSpec { members, member_size, chunk: stripe_unit, block: block_size, zone_size: zone_size.unwrap_or(DEFAULT_ZONE.min(member_size / 4).max(4096)), parity, cache_chunks: cache_size.unwrap_or(0) / stripe_unit.max(1) };
    let a = files::create_in_dir(Path::new(array), &spec, force).with_context(|| format!("creating a DVS array in {array}"))?;
    let info = a.info();
    if json {
        print_json(&info)?;
    } else {
        let c = &info.config;
        println!(
            "created dvs array {:016x}: {} zoned members ({} zones of {}, {} conventional), {}+{} chunks of {}, {} SSGs, capacity {}",
            info.uuid,
            c.members,
            c.zones,
            human(c.zone_size),
            c.conventional,
            c.members - c.parity,
            c.parity,
            human(c.chunk),
            info.ssgs,
            human(info.capacity)
        );
    }
    Ok(0)
}

/// Whether `-a SPEC` names a DVS array (the other array commands delegate
/// to the functions below when it does).
pub fn is_dvs_array(array: &str) -> bool {
    files::is_dvs(array)
}

fn open(array: &str) -> Result<DvsArray> {
    files::open_spec(array).with_context(|| format!("opening DVS array {array}"))
}

/// `mosaic info -a SPEC` on a DVS array.
pub fn info_dvs(array: &str, json: bool) -> Result<i32> {
    let a = open(array)?;
    let info = a.info();
    if json {
        print_json(&info)?;
    } else {
        println!("dvs array {:016x}", info.uuid);
        println!("  members      {} ({}+{} per full stripe)", info.config.members, info.config.members - info.config.parity, info.config.parity);
        println!("  chunk        {}", human(info.config.chunk));
        println!("  zones        {} of {} ({} conventional for metadata)", info.config.zones, human(info.config.zone_size), info.config.conventional);
        println!("  SSGs         {} ({} in use), {} logical chunks each", info.ssgs, info.live_ssgs, info.logical_chunks_per_ssg);
        println!("  capacity     {}", human(info.capacity));
        println!("  valid chunks {}", info.valid_chunks);
        println!("  failed       {:?}", info.failed);
    }
    Ok(if info.failed.is_empty() { 0 } else { 1 })
}

/// `mosaic write -a SPEC --offset O --input FILE` on a DVS array.
pub fn write_dvs(array: &str, offset: u64, input: &Path) -> Result<i32> {
    let data = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
    let mut a = open(array)?;
    a.write(offset, &data)?;
    println!("wrote {} at offset {offset}", human(data.len() as u64));
    Ok(0)
}

/// `mosaic read -a SPEC --offset O --length L --output FILE` on a DVS array.
pub fn read_dvs(array: &str, offset: u64, length: u64, output: &Path) -> Result<i32> {
    let mut a = open(array)?;
    let mut buf = vec![0u8; length as usize];
    a.read(offset, &mut buf)?;
    std::fs::write(output, &buf).with_context(|| format!("writing {}", output.display()))?;
    Ok(0)
}

/// `mosaic replace -a SPEC --member M --drive PATH` on a DVS array: the
/// drive (a zoned file, created if missing) takes member M's place and is
/// rebuilt through the stripe information tables.
pub fn replace_dvs(array: &str, member: usize, drive: &Path) -> Result<i32> {
    let mut a = open(array)?;
    if !a.info().failed.contains(&member) {
        a.fail(member)?;
    }
    files::replace_with_file(&mut a, member, drive)?;
    drop(a);
    // In a directory array, the new drive takes the member's file name.
    let dir = Path::new(array);
    if !array.contains(',') && dir.is_dir() {
        let slot = dir.join(format!("dvs-{member}.zoned"));
        if slot.exists() {
            std::fs::rename(&slot, dir.join(format!("dvs-{member}.zoned.replaced"))).with_context(|| format!("moving {} aside", slot.display()))?;
        }
        std::fs::rename(drive, &slot).with_context(|| format!("moving {} to {}", drive.display(), slot.display()))?;
        println!("member {member} rebuilt onto {} (now {})", drive.display(), slot.display());
    } else {
        println!("member {member} rebuilt onto {}; list it in -a from now on", drive.display());
    }
    Ok(0)
}

/// `mosaic rebuild -a SPEC` on a DVS array: DVS rebuilds during `replace`;
/// this reports members that still need a replacement.
pub fn rebuild_dvs(array: &str) -> Result<i32> {
    let a = open(array)?;
    let failed = a.info().failed;
    if failed.is_empty() {
        println!("no member needs rebuilding");
        return Ok(0);
    }
    println!("members {failed:?} are missing or stale: run `mosaic replace -a {array} --member M --drive PATH` for each");
    Ok(1)
}

/// `mosaic scrub -a SPEC` on a DVS array: exit 2 when a stripe's parity
/// does not match its data.
pub fn scrub_dvs(array: &str, json: bool) -> Result<i32> {
    let mut a = open(array)?;
    let bad = a.scrub()?;
    if json {
        print_json(&serde_json::json!({ "bad_stripes": bad }))?;
    } else {
        println!("scrub: {bad} stripes with mismatched parity");
    }
    Ok(if bad == 0 { 0 } else { 2 })
}

// ------------------------------------------------------------------ replay

/// Layout names `mosaic replay` runs through [`replay_frontend`].
pub fn is_dvs_scheme(name: &str) -> bool {
    baseline::is_zoned_scheme(name)
}

/// The front end of `dvs`, `dvs2`, `segment-raid5` or `sblock-raid5` on
/// `drives` (host-managed zoned models, e.g. `smr:default`), with a write
/// and a read cache of `cache_chunks` chunks each (0: none).
pub fn replay_frontend(name: &str, drives: &[Box<dyn DriveModel>], stripe_unit: u64, block_size: u64, cache_chunks: usize) -> Result<Box<dyn Frontend + Send>> {
    let spec = baseline::SchemeSpec { chunk: stripe_unit, block: block_size, cache_chunks, parity: 1 };
    Ok(baseline::build_frontend(name, drives, &spec)?)
}

/// For fixed layouts (raid5 ...) compared against DVS on zoned drives:
/// conventional drives with the same timing, since a fixed layout
/// overwrites in place, which a host-managed zoned drive refuses.
pub fn drives_for_fixed_layout(drives: Vec<Box<dyn DriveModel>>) -> Vec<Box<dyn DriveModel>> {
    if drives.iter().any(|d| d.zone_size().is_some()) {
        baseline::conventional_twin(&drives)
    } else {
        drives
    }
}

// -------------------------------------------------------------------- eval

#[derive(Args)]
pub struct EvalDvsArgs {
    /// Write dvs-overall.svg, dvs-cache.svg and dvs-band.svg into this directory
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
    /// The real trace (CloudPhysics format); the synthetic workloads run without it
    #[arg(long, default_value = "../shared/traces/cloudphysics-vscsi-part1.csv")]
    pub trace: PathBuf,
    /// Requests per synthetic workload
    #[arg(long, default_value_t = 20_000)]
    pub count: u64,
    /// Multiply trace timestamps by this (4 = replay the hour over four hours)
    #[arg(long, default_value_t = 4.0)]
    pub trace_time_scale: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `mosaic eval dvs`: every scheme on the trace and the synthetic
/// workloads, the cache-size sweep and the band-size sweep.
pub fn eval_dvs(a: EvalDvsArgs) -> Result<i32> {
    let cfg = exp::ExpConfig { synthetic_count: a.count, seed: a.seed, trace_time_scale: a.trace_time_scale, ..Default::default() };
    let trace = a.trace.exists().then_some(a.trace.as_path());
    if trace.is_none() {
        eprintln!("note: {} not found; running the synthetic workloads only", a.trace.display());
    }
    let r = exp::run_all(trace, &cfg)?;
    if let Some(d) = &a.plot {
        r.plot(d)?;
    }
    if a.json {
        print_json(&r)?;
    } else {
        print!("{}", r.table());
    }
    Ok(0)
}

/// A DVS array as an NBD export, with background garbage collection after
/// an idle period (`mosaic serve` on a DVS array).
///
/// ```text
///   NBD workers ──> Mutex<DvsArray> ──> write / read / flush
///   GC thread: every 50 ms, if no request for `idle` ──> one gc_step
///   (a request waits for at most the step in progress: foreground I/O
///    aborts background GC between steps, as in the paper)
/// ```
pub struct DvsExport {
    arr: std::sync::Mutex<DvsArray>,
    last_io: std::sync::Mutex<std::time::Instant>,
    size: u64,
    block: u64,
    chunk: u64,
    /// Background GC steps run.
    pub gc_steps: std::sync::atomic::AtomicU64,
}

impl DvsExport {
    pub fn open(array: &str) -> Result<DvsExport> {
        let a = open(array)?;
        let (size, block, chunk) = (a.capacity(), a.geo().block, a.geo().chunk);
        Ok(DvsExport { arr: std::sync::Mutex::new(a), last_io: std::sync::Mutex::new(std::time::Instant::now()), size, block, chunk, gc_steps: Default::default() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DvsArray> {
        *self.last_io.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
        self.arr.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One GC step if the array has been idle for `idle`; whether it ran.
    pub fn idle_gc(&self, idle: std::time::Duration) -> Result<bool> {
        if self.last_io.lock().unwrap_or_else(|e| e.into_inner()).elapsed() < idle {
            return Ok(false);
        }
        let Ok(mut a) = self.arr.try_lock() else { return Ok(false) };
        let ran = a.gc_step()?;
        if ran {
            self.gc_steps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(ran)
    }

    /// Destage and make everything durable (at shutdown).
    pub fn close(&self) -> Result<()> {
        Ok(self.lock().flush()?)
    }
}

fn dvs_io(e: mosaic_dvs::DvsError) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl mosaic_nbd::Export for DvsExport {
    fn size(&self) -> u64 {
        self.size
    }
    fn block_size(&self) -> u64 {
        self.block
    }
    fn preferred_block(&self) -> u64 {
        // The largest power of two dividing the chunk.
        1 << self.chunk.trailing_zeros().min(16)
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.lock().read(off, buf).map_err(dvs_io)
    }
    fn write(&self, off: u64, data: &[u8]) -> std::io::Result<()> {
        self.lock().write(off, data).map_err(dvs_io)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.lock().flush().map_err(dvs_io)
    }
    fn trim(&self, _off: u64, _len: u64) -> std::io::Result<()> {
        Ok(())
    }
}
