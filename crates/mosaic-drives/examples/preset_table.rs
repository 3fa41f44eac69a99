//! Print what each preset does on a few standard workloads:
//! `cargo run -p mosaic-drives --example preset_table`.

use mosaic_drives::{list_presets, preset, DriveModel, DriveRequest, ReqKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Sequential 1 MiB requests all queued at 0: MB/s.
fn seq(m: &mut dyn DriveModel, kind: ReqKind) -> f64 {
    let mib = 1u64 << 20;
    let n = 256.min(m.capacity() / mib);
    let mut done = 0;
    for i in 0..n {
        done = done.max(
            m.submit(
                0,
                &DriveRequest {
                    kind,
                    offset: i * mib,
                    len: mib,
                },
            )
            .unwrap(),
        );
    }
    (n * mib) as f64 / (done as f64 / 1e9) / 1e6
}

/// Closed loop of `qd` random 4 KiB requests for `n` completions: mean
/// service time per request (ns) from the drive's point of view, and IOPS.
/// The engine's dispatch rule: at most queue_depth() dispatched, pick() chooses.
fn closed_loop(
    m: &mut dyn DriveModel,
    kind: ReqKind,
    qd: usize,
    n: usize,
    seed: u64,
) -> (f64, f64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let blocks = m.capacity() / 4096;
    let gen = |rng: &mut ChaCha8Rng| DriveRequest {
        kind,
        offset: rng.gen_range(0..blocks) * 4096,
        len: 4096,
    };
    let mut pending: Vec<DriveRequest> = (0..qd).map(|_| gen(&mut rng)).collect();
    let mut in_flight: Vec<u64> = Vec::new();
    let mut now = 0u64;
    let mut completed = 0;
    while completed < n {
        while in_flight.len() < m.queue_depth() && !pending.is_empty() {
            let i = m.pick(now, &pending);
            let r = pending.remove(i);
            in_flight.push(m.submit(now, &r).unwrap());
        }
        // Advance to the next completion; its issuer sends a new request.
        let (i, &t) = in_flight
            .iter()
            .enumerate()
            .min_by_key(|(_, &t)| t)
            .unwrap();
        now = t;
        in_flight.swap_remove(i);
        completed += 1;
        pending.push(gen(&mut rng));
    }
    (now as f64 / n as f64, n as f64 / (now as f64 / 1e9))
}

fn main() {
    println!(
        "{:36} {:>10} {:>10} {:>9} {:>9} {:>11} {:>11}",
        "preset", "rd4K us", "wr4K us", "seqR MB/s", "seqW MB/s", "QD32 rd IOPS", "QD32 wr IOPS"
    );
    for (spec, _) in list_presets() {
        let c = preset(spec).unwrap();
        let m = c.build(None);
        let (r, w) = (
            m.random_service_ns(ReqKind::Read, 4096) / 1e3,
            m.random_service_ns(ReqKind::Write, 4096) / 1e3,
        );
        let sr = seq(&mut *c.build(None), ReqKind::Read);
        let sw = if spec.starts_with("smr") {
            f64::NAN
        } else {
            seq(&mut *c.build(None), ReqKind::Write)
        };
        let n = if spec.starts_with("hdd") || spec.starts_with("smr") {
            2000
        } else {
            20_000
        };
        let (_, ri) = closed_loop(&mut *c.build(None), ReqKind::Read, 32, n, 1);
        let wi = if spec.starts_with("smr") {
            f64::NAN
        } else {
            closed_loop(&mut *c.build(None), ReqKind::Write, 32, n, 2).1
        };
        println!("{spec:36} {r:>10.1} {w:>10.1} {sr:>9.0} {sw:>9.0} {ri:>11.0} {wi:>11.0}");
    }
    for spec in [
        "ssd:samsung-830-128g,steady_state=true",
        "ssd:samsung-830-128g,steady_state=true,wa_model=\"xiang-kurkoski\"",
    ] {
        let c = mosaic_drives::parse_device_spec(spec).unwrap();
        let (_, wi) = closed_loop(&mut *c.build(None), ReqKind::Write, 32, 20_000, 2);
        println!(
            "{spec}: {} | QD32 random 4K write {wi:.0} IOPS",
            c.build(None).describe()
        );
    }
    println!("\nhdd:seagate-st91000640ss-detailed, random 4 KiB reads, closed loop, mean service per request:");
    for qd in [1, 2, 4, 8, 16, 32, 64] {
        let c = preset("hdd:seagate-st91000640ss-detailed").unwrap();
        let (svc, _) = closed_loop(&mut *c.build(None), ReqKind::Read, qd, 4000, 3);
        let fifo =
            mosaic_drives::parse_device_spec("hdd:seagate-st91000640ss-detailed,scheduler=fifo")
                .unwrap();
        let (f, _) = closed_loop(&mut *fifo.build(None), ReqKind::Read, qd, 4000, 3);
        let sstf =
            mosaic_drives::parse_device_spec("hdd:seagate-st91000640ss-detailed,scheduler=sstf")
                .unwrap();
        let (s, _) = closed_loop(&mut *sstf.build(None), ReqKind::Read, qd, 4000, 3);
        println!(
            "  queue {qd:>2}: SPTF {:.2} ms   SSTF {:.2} ms   FIFO {:.2} ms",
            svc / 1e6,
            s / 1e6,
            f / 1e6
        );
    }
}
