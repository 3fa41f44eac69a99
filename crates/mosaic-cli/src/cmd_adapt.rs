//! `mosaic create --level remap` and `mosaic adapt`: the adaptive layout
//! on a real remapped array (planning and migration in `adapt_job.rs`).
//!
//! ```text
//!   mosaic adapt -a DIR [--trace FILE] [--threshold N] [--max-move B|P%] [--rate B/s] [--dry-run]
//!     (no --trace: DIR/monitor.trace, what the last `serve` monitored)
//!     open (read-only for a dry run) -> plan -> dry run: print the plan
//!                                            -> else: migrate with a progress bar
//! ```
//!
//! A kill -9 at any point loses nothing (every batch goes through the
//! kit's protocol: copy, flush, map, flush), and a re-run plans from the
//! placement the map holds, so it resumes.  Movement pauses while the
//! inner array is degraded: the command then stops and says so.  While
//! `mosaic serve` has the array, `serve --adapt-every` runs the same job
//! online (one writer per array).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use mosaic_remap::RemapConfig;
use mosaic_trace::{Request, TraceOptions};
use mosaic_volume::{RemapCreate, RemapVolume, Volume};

use crate::adapt_job::{self, PlanOpts};
use crate::cmd_array::CreateArgs;
use crate::util::{human, print_json, progress, size};

#[derive(Args)]
pub struct AdaptArgs {
    /// The remapped array (a directory made by create --level remap)
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// Requests to learn from: a trace in any format mosaic reads (serve
    /// --record writes one); default DIR/monitor.trace, the requests the
    /// last `mosaic serve` of the array monitored
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Use the first N requests of the trace
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Correlation threshold: keep pairs requested together at least N times
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub threshold: u64,
    /// Most data to move: a size (e.g. 64M) or PERCENT% of the capacity (e.g.
    /// 5%) (default: no limit)
    #[arg(long)]
    pub max_move: Option<String>,
    /// Migration budget in bytes per second, a size (e.g. 50M; default:
    /// unlimited)
    #[arg(long, value_parser = size)]
    pub rate: Option<u64>,
    /// Show the plan (bytes to move, conflicts before and after, the simulator's predicted gain); move nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Transaction window in microseconds: arrivals this close are requested together
    #[arg(long, default_value_t = 1000)]
    pub window_us: u64,
    /// Largest transaction in units (pairs grow as the square)
    #[arg(long, default_value_t = 64)]
    pub max_txn: usize,
    /// Drive model for the dry run's prediction (default: SSD)
    #[arg(long, default_value = "ssd:samsung-830-128g")]
    pub model: String,
    /// Print the plan and the moves as JSON
    #[arg(long)]
    pub json: bool,
}

/// `mosaic adapt`.
pub fn run(a: AdaptArgs) -> Result<i32> {
    let trace = match &a.trace {
        Some(t) => t.clone(),
        None => {
            let t = Path::new(&a.array).join(crate::serve_adapt::MONITOR_FILE);
            if !t.exists() {
                bail!("no --trace and no {}: serve the array first (its monitored requests are saved there when it stops), or give --trace FILE", t.display());
            }
            t
        }
    };
    let reqs = load(&trace, a.requests)?;
    let vol = RemapVolume::open(Path::new(&a.array), !a.dry_run).with_context(|| format!("opening {}", a.array))?;
    let cap = Volume::capacity(&vol);
    let max_move = a.max_move.as_deref().map(|s| adapt_job::parse_max_move(s, cap)).transpose()?;
    let o = PlanOpts { threshold: a.threshold, window_ns: a.window_us * 1000, max_units: a.max_txn, max_move, threads: 2 };
    let plan = adapt_job::plan(&vol, &reqs, &o)?;
    if a.dry_run {
        let pred = adapt_job::predict(&vol, &plan, &reqs, &a.model)?;
        return report(&a, &plan, Some(&pred), None);
    }
    if let Some(r) = a.rate {
        vol.set_rate(r);
    }
    let bar = progress(plan.target.bytes().max(1), "moving");
    let m = adapt_job::migrate(&vol, &plan, &|done, total| {
        bar.set_length(total.max(1));
        bar.set_position(done);
    }, &|| false)?;
    bar.finish_and_clear();
    Volume::close(&vol)?;
    report(&a, &plan, None, Some(&m))?;
    if m.paused {
        eprintln!("mosaic adapt: paused: the inner array is degraded ({} moves left); rebuild it, then run adapt again: it resumes", m.left);
        return Ok(crate::exit::DEGRADED);
    }
    Ok(0)
}

fn load(path: &Path, first: Option<u64>) -> Result<Vec<Request>> {
    let opts = TraceOptions { first, ..TraceOptions::default() };
    let r = mosaic_trace::open(path, &opts).with_context(|| format!("trace {}", path.display()))?;
    let reqs: Vec<Request> = r.collect::<Result<_, _>>().with_context(|| format!("trace {}", path.display()))?;
    if reqs.is_empty() {
        bail!("trace {} holds no requests", path.display());
    }
    Ok(reqs)
}

fn report(a: &AdaptArgs, plan: &adapt_job::AdaptPlan, pred: Option<&adapt_job::Prediction>, m: Option<&adapt_job::Migrated>) -> Result<i32> {
    if a.json {
        print_json(&serde_json::json!({ "plan": plan, "prediction": pred, "migrated": m }))?;
        return Ok(0);
    }
    let t = &plan.target;
    println!("{} requests -> {} transactions; graph at threshold {}: {} units, {} pairs", plan.requests, plan.transactions, a.threshold, plan.vertices, plan.edges);
    if plan.beyond_capacity > 0 {
        println!("  {} units named by the trace lie beyond the capacity (ignored)", plan.beyond_capacity);
    }
    println!("conflicts (same-drive pair weight): {} -> {} ({} passes)", t.conflicts_before, t.conflicts_after, t.passes);
    println!("moves: {} units, {} (plan wanted {} units, {})", t.moves.len(), human(t.bytes()), plan.wanted_moves, human(plan.wanted_bytes));
    if let Some(g) = t.identity_gap {
        println!("identity mapping (P1) moves {:.1}% more than the optimal assignment", g * 100.0);
    }
    if let Some(p) = pred {
        println!("predicted mean response on {}: {:.3} ms -> {:.3} ms ({:+.1}%)", p.model, p.before_ms, p.after_ms, p.gain * 100.0);
    }
    if let Some(m) = m {
        let rate = if m.seconds > 0.0 { m.bytes as f64 / m.seconds } else { 0.0 };
        println!("moved {} units, {} in {:.2} s ({}/s); {} left", m.moves, human(m.bytes), m.seconds, human(rate as u64), m.left);
    }
    Ok(0)
}

/// `create --level remap --inner LEVEL:N`: the inner array in DIR/inner
/// (the one create path for a directory), then the label and empty map.
pub fn create_remap(a: &CreateArgs) -> Result<i32> {
    if a.array.contains(',') || Path::new(&a.array).is_file() {
        bail!("a remapped array puts its inner array in DIR/inner: give a directory with -a");
    }
    if a.journal.is_some() || a.members.is_some() || a.zoned || a.assume_clean {
        bail!("--journal, --members, --zoned and --assume-clean are not for remapped arrays: give the inner level and member count in --inner (e.g. --inner raid5:4)");
    }
    let Some(inner) = &a.inner else { bail!("--level remap needs --inner SPEC (e.g. --inner raid5:4 or raid0:14)") };
    let member_size = a.member_size.context("--level remap needs --member-size: the size of each inner member file")?;
    let mut config = RemapConfig { unit: a.remap_unit.unwrap_or(a.stripe_unit), ..RemapConfig::default() };
    if let Some(s) = a.remap_spare {
        config.spare_share = s;
    }
    let c = RemapCreate {
        inner: mosaic_volume::InnerSpec::parse(inner, member_size)?,
        unit: a.stripe_unit,
        block: a.block_size,
        force: a.force,
        journal_size: (!a.no_journal).then_some(a.journal_size),
        config,
    };
    let vol = RemapVolume::create(Path::new(&a.array), &c)?;
    let info = Volume::info(&vol);
    Volume::close(&vol)?;
    if a.json {
        print_json(&crate::cmd_array::info_json(&info)?)?;
    } else {
        println!("created remapped array {} over {}: capacity {}", info.uuid, inner, human(info.capacity));
    }
    Ok(0)
}
