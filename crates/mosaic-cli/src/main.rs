//! `mosaic`: the command-line face of the mosaic library.  Every command is
//! thin: parse, call the library, print a table (or JSON with `--json`).

mod adapt_job;
mod bench_cache;
mod bench_dvs;
mod bench_tier;
#[cfg(test)]
mod cli_help;
mod cmd_adapt;
mod control;
mod cmd_array;
mod cmd_bench;
mod cmd_bitmap;
mod cmd_mostly;
mod cmd_control;
mod cmd_demo;
mod cmd_dvs;
mod cmd_eval;
mod cmd_grow;
mod cmd_journal;
mod cmd_model;
mod cmd_scan;
mod cmd_serve;
mod events;
mod exit;
mod logging;
mod cmd_sim;
mod eval_cbro;
mod eval_ppc;
#[cfg(test)]
mod plot_png;
mod remap_sim;
mod replay_real;
mod serve_adapt;
mod serve_config;
mod serve_run;
mod tier_sim;
mod util;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Planning and replay allocate many small vectors; mimalloc serves them
/// markedly faster than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// Help pages wrap to the terminal, at most 80 columns, and end with the
// exit statuses.
#[derive(Parser)]
#[command(name = "mosaic", version, about = "Adaptive erasure-coded storage arrays for mixed drives, and a simulator to pick their layout")]
#[command(max_term_width = 80, after_help = after_help())]
struct Cli {
    /// Log lines on stderr (the server's): text, or json (one object a line)
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
    /// Least level logged: error, warn, info, debug, trace, or RUST_LOG-style
    /// directives [default: RUST_LOG when set, else info]
    #[arg(long, global = true, value_parser = logging::parse_level)]
    log_level: Option<String>,
    /// How long a request to a remote member (an NBD URI) may take,
    /// reconnects and retries included, before the member is failed
    #[arg(long, global = true, value_name = "SECS", default_value_t = 30.0, value_parser = positive_secs)]
    remote_timeout: f64,
    /// A remote member whose recent requests average more than this is
    /// reported slow by status (and each request above it is counted)
    #[arg(long, global = true, value_name = "MS", default_value_t = 200.0, value_parser = positive_ms)]
    remote_slow_ms: f64,
    /// How long info and status wait for the answer of a server that
    /// holds the array before naming it as not answering
    #[arg(long, global = true, value_name = "SECS", default_value_t = 20.0, value_parser = positive_secs)]
    server_timeout: f64,
    /// Open for writing an array that was not shut down cleanly, has no
    /// journal and is degraded (refused otherwise, as md's
    /// start_dirty_degraded): its missing members' blocks come from code
    /// the crash may have left wrong
    #[arg(long, global = true)]
    start_dirty_degraded: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once per run: boxing the large argument structs would gain nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Run the built-in demonstration: a raid6 array on files survives two failures, rebuilds, scrubs clean
    Demo(cmd_demo::DemoArgs),
    /// Create an array
    Create(cmd_array::CreateArgs),
    /// Show an array's superblock and members
    Info(cmd_array::InfoArgs),
    /// Write a file's bytes into an array
    Write(cmd_array::WriteArgs),
    /// Read bytes from an array into a file
    Read(cmd_array::ReadArgs),
    /// Mark a member failed
    Fail(cmd_array::FailArgs),
    /// Replace a failed member with a new drive and rebuild onto it
    Replace(cmd_array::ReplaceArgs),
    /// Add members to a raid0/4/5/6 or rs array and restripe onto them (online when served; resumes an interrupted grow), or take more of each member (--size)
    Grow(cmd_grow::GrowArgs),
    /// Add hot spares to an array
    Add(cmd_grow::AddArgs),
    /// Remove hot spares from an array (their labels erased: free for any array again)
    Remove(cmd_grow::RemoveArgs),
    /// Give an array a new write-ahead journal (the old one failed, or moves to a faster device), as md's --add-journal
    ReplaceJournal(cmd_journal::ReplaceJournalArgs),
    /// Give an array without a journal a write-intent bitmap (internal) or take it away (none), as mdadm --grow --bitmap
    Bitmap(cmd_bitmap::BitmapArgs),
    /// Read these mirror members only when no other copy serves (the slow side of a mirror of mixed drives), as mdadm --write-mostly
    WriteMostly(cmd_mostly::WriteMostlyArgs),
    /// Resume an interrupted rebuild
    Rebuild(cmd_array::RebuildArgs),
    /// Verify every stripe's code units (and repair with --repair)
    Scrub(cmd_array::ScrubArgs),
    /// Serve an array over NBD (qemu, nbdcopy, nbdfuse, fio, nbd-client)
    Serve(cmd_serve::ServeArgs),
    /// Health, members and counters of an array (or of every array this user serves); exit 0 healthy, 4 degraded, 5 failed
    Status(cmd_control::StatusArgs),
    /// Make every completed write of an array durable (through its server when served)
    Flush(cmd_control::ArrayArg),
    /// Ask the server of an array to stop: drain clients, flush, close
    Stop(cmd_control::ArrayArg),
    /// Print one member's superblock (label): its array, index, event counter, layout
    Examine(cmd_scan::ExamineArgs),
    /// Find the members of every array by UUID, wherever their files are (--scan DIR|DEVICES...)
    Assemble(cmd_scan::AssembleArgs),
    /// Erase mosaic's label, journal header or old superblock from devices, as mdadm --zero-superblock (--force for a device of an array)
    Wipe(cmd_scan::WipeArgs),
    /// Re-place a remapped array's units so blocks requested together sit on different drives
    Adapt(cmd_adapt::AdaptArgs),
    /// Trace tools
    #[command(subcommand)]
    Trace(cmd_sim::TraceCmd),
    /// Replay a trace (or a synthetic workload) on modelled drives in virtual time
    Replay(cmd_sim::ReplayArgs),
    /// The analytical random-write model: throughput per method and size, crossovers
    Model(cmd_model::ModelArgs),
    /// Recommend a stripe unit for a trace's writes
    Advise(cmd_model::AdviseArgs),
    /// Reproducible experiments (tables and SVG plots)
    #[command(subcommand)]
    Eval(cmd_eval::EvalCmd),
    /// Benchmarks (ratios against a reference measured in the same run)
    #[command(subcommand)]
    Bench(cmd_bench::BenchCmd),
}

/// What `mosaic --help` ends with: the size grammar and the exit statuses.
fn after_help() -> String {
    format!("Sizes (--member-size, --stripe-unit, --offset ...): {}.\n\n{}", mosaic_size::GRAMMAR, exit::HELP)
}

fn positive_secs(s: &str) -> Result<f64, String> {
    positive(s, "seconds")
}

fn positive_ms(s: &str) -> Result<f64, String> {
    positive(s, "milliseconds")
}

fn positive(s: &str, unit: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v < 1e9 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number of {unit}")),
    }
}

fn main() {
    // Like other Unix tools, end quietly when the reader of our output goes
    // away (`mosaic info | head`) instead of failing on a broken pipe.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::command().mut_subcommand("serve", cmd_serve::config_alone).get_matches();
    let cli = Cli::from_arg_matches(&cli).unwrap_or_else(|e| e.exit());
    logging::init(cli.log_format, cli.log_level.as_deref());
    mosaic_dev::nbd::set_default_timeout(std::time::Duration::from_secs_f64(cli.remote_timeout));
    mosaic_dev::nbd::set_slow_threshold(std::time::Duration::from_secs_f64(cli.remote_slow_ms / 1000.0));
    control::set_server_timeout(std::time::Duration::from_secs_f64(cli.server_timeout));
    mosaic_array::set_start_dirty_degraded(cli.start_dirty_degraded);
    let res = match cli.cmd {
        Cmd::Demo(a) => cmd_demo::run(a),
        Cmd::Create(a) => cmd_array::create(a),
        Cmd::Info(a) => cmd_array::info(a),
        Cmd::Write(a) => cmd_array::write(a),
        Cmd::Read(a) => cmd_array::read(a),
        Cmd::Fail(a) => cmd_array::fail(a),
        Cmd::Replace(a) => cmd_array::replace(a),
        Cmd::Grow(a) => cmd_grow::grow(a),
        Cmd::Add(a) => cmd_grow::add(a),
        Cmd::ReplaceJournal(a) => cmd_journal::replace_journal(a),
        Cmd::Bitmap(a) => cmd_bitmap::run(a),
        Cmd::WriteMostly(a) => cmd_mostly::run(a),
        Cmd::Remove(a) => cmd_grow::remove(a),
        Cmd::Rebuild(a) => cmd_array::rebuild(a),
        Cmd::Scrub(a) => cmd_array::scrub(a),
        Cmd::Serve(a) => cmd_serve::run(a),
        Cmd::Status(a) => cmd_control::status(a),
        Cmd::Flush(a) => cmd_control::flush(a),
        Cmd::Stop(a) => cmd_control::stop(a),
        Cmd::Examine(a) => cmd_scan::examine(a),
        Cmd::Assemble(a) => cmd_scan::assemble(a),
        Cmd::Wipe(a) => cmd_scan::wipe(a),
        Cmd::Adapt(a) => cmd_adapt::run(a),
        Cmd::Trace(t) => cmd_sim::trace(t),
        Cmd::Replay(a) => cmd_sim::replay(a),
        Cmd::Model(a) => cmd_model::model(a),
        Cmd::Advise(a) => cmd_model::advise(a),
        Cmd::Eval(e) => cmd_eval::run(e),
        Cmd::Bench(b) => cmd_bench::run(b),
    };
    match res {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {}", exit::error_text(&e));
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        let m = Cli::command().mut_subcommand("serve", cmd_serve::config_alone).try_get_matches_from(args)?;
        Cli::from_arg_matches(&m)
    }

    #[test]
    fn serve_config_takes_the_log_flags_and_no_other_option() {
        Cli::command().debug_assert();
        let cli = parse(&["mosaic", "serve", "--config", "f.toml", "--log-format", "json", "--log-level", "debug"]).unwrap();
        assert_eq!((cli.log_format, cli.log_level.as_deref()), (logging::LogFormat::Json, Some("debug")));
        assert!(matches!(cli.cmd, Cmd::Serve(a) if a.config.is_some()));
        for other in [&["--quiet"][..], &["-a", "x"], &["--listen", "127.0.0.1:1"], &["--maint-rate", "1M"]] {
            let args: Vec<&str> = ["mosaic", "serve", "--config", "f.toml"].iter().chain(other).copied().collect();
            let e = parse(&args).err().unwrap_or_else(|| panic!("{other:?} was taken with --config"));
            assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{e}");
        }
        assert!(parse(&["mosaic", "serve", "-a", "x", "--quiet", "--log-level", "warn"]).is_ok());
        assert!(parse(&["mosaic", "serve"]).is_err(), "-a, --demo or --config");
        assert!(parse(&["mosaic", "--log-level", "loud=!!", "info", "-a", "x"]).is_err());
    }
}
