//! Small shared helpers for commands: sizes, progress bars, tables.

use indicatif::{ProgressBar, ProgressFinish, ProgressState, ProgressStyle};

/// Sizes: `size` is the clap value parser of every size flag, `human`
/// prints a size for a person, `short` labels one exactly (the grammar:
/// [`mosaic_size`]).
pub use mosaic_size::{human, parse as size, short};

/// clap value parser for a positive number of seconds (`serve
/// --handshake-timeout`, the benches' `--seconds`): finite, above zero and
/// within what a [`Duration`](std::time::Duration) holds.
pub fn seconds(s: &str) -> Result<std::time::Duration, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number of seconds"))?;
    match std::time::Duration::try_from_secs_f64(v) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!("{s:?}: give a positive number of seconds")),
    }
}

/// An interval: a number with a unit (s, m, h or d), or of seconds.
pub fn interval(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1),
        Some((i, 'm')) => (&t[..i], 60),
        Some((i, 'h')) => (&t[..i], 3600),
        Some((i, 'd')) => (&t[..i], 86_400),
        _ => (t, 1),
    };
    match num.parse::<u64>().ok().and_then(|n| n.checked_mul(mul)) {
        Some(secs) if secs > 0 => Ok(std::time::Duration::from_secs(secs)),
        _ => Err(format!("{s:?}: give a positive whole number of seconds, or of minutes, hours or days (90m, 12h, 30d)")),
    }
}

/// The machine's memory (MemTotal of /proc/meminfo), or `None` when it
/// cannot be read.
pub fn mem_total() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = info.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    kib.checked_mul(1024)
}

/// Refuse a RAM need of `parts` (a description, e.g. `--member-size 1.0
/// GiB x 5 members`, and its bytes) larger than the machine's memory,
/// before anything is allocated: allocating it would abort the process.
/// No check when the memory cannot be read.
pub fn check_ram(what: &str, parts: &[(String, u64)]) -> anyhow::Result<()> {
    let Some(mem) = mem_total() else { return Ok(()) };
    let (need, list, amount) = needs(parts);
    if need > mem {
        anyhow::bail!("{list}: {amount} of {what}, more than this machine's {} of memory", human(mem));
    }
    Ok(())
}

/// The total of `parts` (saturating), their descriptions joined with
/// " + ", and the total as said (`over 16.0 EiB` when it saturated).
fn needs(parts: &[(String, u64)]) -> (u64, String, String) {
    let need = parts.iter().fold(0u64, |t, (_, b)| t.saturating_add(*b));
    let list = parts.iter().map(|(d, _)| d.as_str()).collect::<Vec<_>>().join(" + ");
    let amount = if need == u64::MAX { format!("over {}", human(need)) } else { human(need) };
    (need, list, amount)
}

/// Bytes an unprivileged process may still write to the file system that
/// holds `dir` (statvfs: available blocks x fragment size), or `None`
/// when it cannot be read.
pub fn space_free(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs the call fills in.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    (s.f_bavail as u64).checked_mul(s.f_frsize as u64)
}

/// Refuse files of `parts` (a description naming the flag and its value,
/// and its bytes) to be made in `dir`, before anything is created there,
/// when they would not fit the space free on its file system; on a RAM
/// file system (/dev/shm's tmpfs) also when they would not fit the
/// machine's memory ([`check_ram`]).  Filling it would fail the bench
/// part-way, after starving everything else of space (of memory, on
/// tmpfs).  No check of what cannot be read.
pub fn check_space(dir: &std::path::Path, parts: &[(String, u64)]) -> anyhow::Result<()> {
    let (need, list, amount) = needs(parts);
    if let Some(free) = space_free(dir) {
        if need > free {
            anyhow::bail!("{list}: {amount} of files in {}, more than the {} free there", dir.display(), human(free));
        }
    }
    if std::fs::File::open(dir).is_ok_and(|f| mosaic_dev::on_ram_fs(&f)) {
        check_ram(&format!("RAM (files in {} are kept in memory)", dir.display()), parts)?;
    }
    Ok(())
}

/// A progress bar on stderr (hidden when stderr is not a terminal) over
/// `total` bytes: percent, bytes done of the total and per second (sizes
/// as [`human`] prints them, e.g. `12.5 MiB/s`) and the time left, within
/// 80 columns.
pub fn progress(total: u64, what: &str) -> ProgressBar {
    bar(total, what, human, |r| format!("{}/s", human(r as u64)))
}

/// [`progress`] over `total` steps (requests, runs, files) instead of bytes.
pub fn steps(total: u64, what: &str) -> ProgressBar {
    bar(total, what, |n| n.to_string(), |r| format!("{r:.1}/s"))
}

/// A [`steps`] bar whose work says its total: `tick(done, total)`.
pub fn step_ticks(what: &str) -> (ProgressBar, impl Fn(u64, u64)) {
    let pb = steps(0, what);
    let p = pb.clone();
    (pb, move |done, total| {
        p.set_length(total);
        p.set_position(done);
    })
}

/// The one bar style: `what` (up to 8 columns), the bar, percent, the
/// amount done of the total, the rate and the time left, in 79 columns.
fn bar(total: u64, what: &str, amount: fn(u64) -> String, rate: fn(f64) -> String) -> ProgressBar {
    let pb = ProgressBar::new(total);
    let style = ProgressStyle::with_template("{msg:>8!} [{bar:23}] {percent:>3}% {done:>10}/{total:<10} {rate:>12} {eta:>4}")
        .map(|s| {
            s.with_key("done", move |st: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&amount(st.pos()));
            })
            .with_key("total", move |st: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&amount(st.len().unwrap_or(0)));
            })
            .with_key("rate", move |st: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&rate(st.per_sec()));
            })
        })
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style.progress_chars("=> "));
    pb.set_message(what.to_string());
    // A bar dropped unfinished (an error on the way) leaves no line behind.
    pb.with_finish(ProgressFinish::AndClear)
}

/// A progress bar over the regions (stripes, SSGs) of rebuild or scrub,
/// shown in the array's bytes (`capacity` over `regions`): the callback
/// to pass them and the bar to finish.
pub fn region_progress(regions: u64, capacity: u64, what: &str) -> (ProgressBar, impl Fn(u64, u64)) {
    let per = capacity.checked_div(regions).unwrap_or(0).max(1);
    let pb = progress(regions.saturating_mul(per), what);
    let bar = pb.clone();
    (pb, move |done: u64, total: u64| {
        bar.set_length(total.saturating_mul(per));
        bar.set_position(done.saturating_mul(per));
    })
}

/// Print rows as an aligned table; the first row is the header.
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut w = vec![0; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| if i == 0 { format!("{c:<w$}", w = w[i]) } else { format!("{c:>w$}", w = w[i]) })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
        if ri == 0 {
            out.push_str(&w.iter().map(|n| "-".repeat(*n)).collect::<Vec<_>>().join("  "));
            out.push('\n');
        }
    }
    out
}

pub fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Refuse to open `path` for writing when it carries a mosaic superblock
/// or journal (another array's member), unless `force`: the one check of
/// every output path (`mosaic_volume::guard`).
pub fn check_output(path: &std::path::Path, force: bool) -> anyhow::Result<()> {
    Ok(mosaic_volume::guard::check_output(path, force)?)
}

/// [`check_output`] for a directory that receives the files `names`: the
/// directory must not hold an array, nor any of the files carry one.
pub fn check_output_dir(dir: &std::path::Path, names: &[&str], force: bool) -> anyhow::Result<()> {
    check_output(dir, force)?;
    names.iter().try_for_each(|n| check_output(&dir.join(n), force))
}

/// Say where plots went, one "wrote FILE" line each: on stdout, or on
/// stderr with `--json` (stdout stays one JSON document).
pub fn say_written<P: AsRef<std::path::Path>>(files: &[P], json: bool) {
    for f in files {
        let line = format!("wrote plot {}", f.as_ref().display());
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
}

/// The real trace the evaluations use when `--trace` is not given: its
/// name under a `shared/traces` directory beside the project.
pub const DEFAULT_TRACE_NAME: &str = "cloudphysics-vscsi-part1.csv";

/// How the default trace is looked for, for messages.
pub const DEFAULT_TRACE: &str = "shared/traces/cloudphysics-vscsi-part1.csv beside the working directory or the mosaic binary (or one of their parents)";

/// The default trace: `shared/traces/NAME` under the working directory's
/// parent or an ancestor of the running binary's directory
/// (`target/release/mosaic` in a checkout beside `shared/`), so `eval`
/// finds it from anywhere inside the checkout, not only from its root.
/// `MOSAIC_DEFAULT_TRACE`, when set, replaces the search (empty: no
/// default trace; the tests run hermetic with it).
pub fn default_trace() -> Option<std::path::PathBuf> {
    if let Some(v) = std::env::var_os("MOSAIC_DEFAULT_TRACE") {
        return Some(std::path::PathBuf::from(v)).filter(|p| p.is_file());
    }
    let cwd = std::env::current_dir().ok();
    let exe = std::env::current_exe().ok().and_then(|e| e.parent().map(std::path::Path::to_path_buf));
    find_default_trace(cwd.into_iter().chain(exe))
}

/// The first `A/shared/traces/NAME` that is a file, for A each ancestor of
/// each start in turn (the start itself first).
fn find_default_trace(starts: impl IntoIterator<Item = std::path::PathBuf>) -> Option<std::path::PathBuf> {
    let rel = std::path::Path::new("shared/traces").join(DEFAULT_TRACE_NAME);
    starts.into_iter().flat_map(|s| s.ancestors().map(|a| a.join(&rel)).collect::<Vec<_>>()).find(|p| p.is_file())
}

/// The trace an `eval` uses: a `--trace` given must exist (an error,
/// not a silent skip); without one, the default when it is there, else
/// none, with a note saying what is skipped (`what`).
pub fn eval_trace(given: Option<&std::path::Path>, what: &str) -> anyhow::Result<Option<std::path::PathBuf>> {
    match given {
        Some(p) if p.exists() => Ok(Some(p.to_path_buf())),
        Some(p) => anyhow::bail!("trace {} does not exist", p.display()),
        None => match default_trace() {
            Some(p) => Ok(Some(p)),
            None => {
                eprintln!("note: no --trace and no {DEFAULT_TRACE}: {what}");
                Ok(None)
            }
        },
    }
}

/// The trace an `eval` cannot do without: `--trace`, else the default,
/// else an error saying where it was looked for.
pub fn required_trace(given: Option<&std::path::Path>, instead: &str) -> anyhow::Result<std::path::PathBuf> {
    match given {
        Some(p) if p.exists() => Ok(p.to_path_buf()),
        Some(p) => anyhow::bail!("trace {} does not exist", p.display()),
        None => default_trace().ok_or_else(|| anyhow::anyhow!("no --trace given and no {DEFAULT_TRACE}; give --trace FILE, or {instead}")),
    }
}

/// A count of at least one (drives, a queue depth), for clap: zero would
/// run nothing, or divide by it, and print a table of zeros or NaNs.
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// The median of `v` (the upper one of an even count; 0 when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// CPU seconds this process has used, all threads: benches divide work by
/// it so their rates are per core and hold on a machine others load too.
pub fn cpu_seconds() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return 0.0;
    }
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// A RAM device of `size` bytes with every page already touched, so no
/// measured run pays the kernel's first-touch faults (a real device has
/// none, and they would fall on whichever run first reaches a page).
pub fn ram(name: &str, size: u64) -> anyhow::Result<std::sync::Arc<dyn mosaic_dev::Member>> {
    use mosaic_dev::Member as _;
    let m = mosaic_dev::MemMember::new(name, size);
    let zeros = vec![0u8; 1 << 20];
    for at in (0..size).step_by(zeros.len()) {
        m.write_at(&zeros[..zeros.len().min((size - at) as usize)], at)?;
    }
    Ok(std::sync::Arc::new(m))
}

#[cfg(test)]
mod tests {
    #[test]
    fn intervals_take_a_unit_or_seconds() {
        let secs = |s: &str| super::interval(s).map(|d| d.as_secs());
        assert_eq!((secs("45"), secs("45s"), secs("90m"), secs("12h"), secs("30d")), (Ok(45), Ok(45), Ok(5400), Ok(43_200), Ok(2_592_000)));
        for bad in ["", "0", "0d", "-1h", "1.5h", "h", "12w", "99999999999999999999d"] {
            assert!(super::interval(bad).unwrap_err().contains("90m, 12h, 30d"), "{bad}");
        }
    }

    /// The default trace is found from anywhere inside a checkout beside
    /// `shared/` (it was looked for as ../shared/... from the working
    /// directory only), and not found where there is none.
    #[test]
    fn the_default_trace_is_found_from_any_depth_of_the_checkout() {
        let t = tempfile::tempdir().unwrap();
        let traces = t.path().join("shared/traces");
        std::fs::create_dir_all(&traces).unwrap();
        let deep = t.path().join("main/target/release");
        std::fs::create_dir_all(&deep).unwrap();
        let file = traces.join(super::DEFAULT_TRACE_NAME);
        // (A shared/ beside the temp directory may hold one: only ours counts.)
        assert_ne!(super::find_default_trace([deep.clone()]), Some(file.clone()), "no trace file yet");
        std::fs::write(&file, "x").unwrap();
        for start in [deep.clone(), t.path().join("main"), t.path().to_path_buf()] {
            assert_eq!(super::find_default_trace([start.clone()]), Some(file.clone()), "from {}", start.display());
        }
        let elsewhere = tempfile::tempdir().unwrap();
        if super::find_default_trace([elsewhere.path().to_path_buf()]).is_none() {
            assert_eq!(super::find_default_trace([elsewhere.path().to_path_buf(), deep]), Some(file), "the second start is tried");
        }
    }
}
