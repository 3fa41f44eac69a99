//! Run the DVS experiments: `cargo run -p mosaic-exp --example dvs_eval -- [TRACE] [PLOT_DIR]`.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let trace = args.get(1).map(std::path::PathBuf::from);
    let cfg = mosaic_exp::dvs::ExpConfig::default();
    let t = std::time::Instant::now();
    let r = mosaic_exp::dvs::run_all(trace.as_deref(), &cfg).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    print!("{}", r.table());
    if let Some(d) = args.get(2) {
        r.plot(std::path::Path::new(d)).unwrap();
    }
    eprintln!("took {:.1}s", t.elapsed().as_secs_f64());
}
