//! CBRO from the command line: nested check drive arrays and the model's
//! CDA performance check at creation.

use std::fs;

use crate::common;
use common::{fails, mosaic, ok};

#[test]
fn create_warns_when_the_cda_is_the_bottleneck() {
    let t = tempfile::tempdir().unwrap();
    let run = |name: &str, cda: &str| {
        let d = t.path().join(name);
        mosaic(&["create", "-a", d.to_str().unwrap(), "--level", "cbro:16+1", "--member-size", "2M", "--stripe-unit", "64K", "--data-device", "hdd:seagate-st91000640ss", "--cda-device", cda])
    };
    let o = run("hdd", "hdd:seagate-st91000640ss");
    assert!(o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("CDA will be the bottleneck") && e.contains("Ineq. 23"), "{e}");
    let o = run("ssd", "ssd:samsung-830-128g");
    assert!(o.status.success());
    assert!(!String::from_utf8_lossy(&o.stderr).contains("bottleneck"));
    let e = fails(&["create", "-a", t.path().join("r5").to_str().unwrap(), "--level", "raid5", "--members", "3", "--member-size", "2M", "--data-device", "hdd:generic-7200", "--cda-device", "ssd:generic-sata"]);
    assert!(e.contains("are for cbro levels"), "{e}");
}

#[test]
fn nested_raid5_cda_round_trip_with_a_failed_cda_member() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let d = dir.to_str().unwrap();
    ok(&["create", "-a", d, "--level", "cbro:4+1,cda=raid5:3", "--member-size", "4M", "--stripe-unit", "16K"]);
    assert!(dir.join("cda-0").join("member-02.img").exists());
    let input = t.path().join("in.bin");
    let data: Vec<u8> = (0..(3u32 << 20)).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    fs::write(&input, &data).unwrap();
    ok(&["write", "-a", d, "--offset", "0", "--input", input.to_str().unwrap()]);
    ok(&["fail", "-a", dir.join("cda-0").to_str().unwrap(), "--member", "1"]);
    ok(&["fail", "-a", d, "--member", "2"]);
    let out = t.path().join("out.bin");
    ok(&["read", "-a", d, "--offset", "0", "--length", "3M", "--output", out.to_str().unwrap()]);
    assert!(fs::read(&out).unwrap() == data);
    let info = ok(&["info", "-a", d]);
    assert!(info.contains("array:"), "{info}");
    let e = fails(&["create", "-a", t.path().join("x").to_str().unwrap(), "--level", "cbro:4+1,cda=raid7:3", "--member-size", "4M"]);
    assert!(e.contains("bad check drive array"), "{e}");
}

/// The stripe-unit figures of Jeremic et al. 2015: with each member's
/// contiguous transfers merged, a 4 KiB unit no longer costs one HDD
/// positioning per unit (6.6 MiB/s before the merge), the paper's 4 MiB
/// wins Fig. 10, and Fig. 13's mixed sizes put 8 KiB best and 128 KiB
/// worst, as measured on the Samsung 830s.
#[test]
fn eval_cbro_stripe_units_print_the_paper_beside_mosaic() {
    let out = ok(&["eval", "cbro", "--part", "units", "--unit-requests", "3000"]);
    assert!(out.contains("Fig. 10") && out.contains("Fig. 13") && out.contains("best paper/mosaic"), "{out}");
    let j: serde_json::Value = serde_json::from_str(&ok(&["eval", "cbro", "--part", "units", "--unit-requests", "3000", "--json"])).unwrap();
    let cases = j["stripe_units"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    assert!(j["offload"].as_array().unwrap().is_empty());
    let fig = |f: &'static str| cases.iter().filter(move |c| c["figure"] == f);
    for c in fig("10") {
        assert_eq!(c["mosaic_best"], 4 << 20, "{c}");
    }
    let rmw5 = fig("10").next().unwrap();
    let at_4k = rmw5["units"][0]["mib_per_s"].as_f64().unwrap();
    assert!(at_4k > 40.0, "raid5 at u = 4 KiB: {at_4k} MiB/s");
    for c in fig("13").filter(|c| c["workload"].as_str().unwrap().contains("mixed")) {
        assert_eq!((c["mosaic_best"].as_u64(), c["mosaic_worst"].as_u64()), (Some(8 << 10), Some(128 << 10)), "{c}");
        assert_eq!(c["agrees"], true);
    }
    let e = fails(&["eval", "cbro", "--part", "units", "--plot", "/tmp/never-written.svg"]);
    assert!(e.contains("--plot draws the offload part"), "{e}");
}

/// A check drive array running degraded makes the CBRO array degraded in
/// `status` (exit 4, the CDA's member named with how to rebuild it) and in
/// `info`, though the outer array counts the CDA in service; a rebuild of
/// the CDA's member makes it healthy again.
#[test]
fn a_degraded_check_drive_array_makes_the_array_degraded() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let (d, cda) = (dir.to_str().unwrap(), dir.join("cda-0"));
    ok(&["create", "-a", d, "--level", "cbro:2+1,cda=raid5:3", "--member-size", "4M", "--stripe-unit", "16K"]);
    let status = || {
        let o = mosaic(&["status", "-a", d, "--json"]);
        (o.status.code(), common::json(&String::from_utf8_lossy(&o.stdout)))
    };
    let (code, st) = status();
    assert!(code == Some(0) && st[0]["health"] == "healthy" && st[0]["members"][2].get("inner_out").is_none(), "{st}");
    ok(&["fail", "-a", cda.to_str().unwrap(), "--member", "1"]);
    let (code, st) = status();
    assert!(code == Some(4) && st[0]["health"] == "degraded" && st[0]["members"][2]["state"]["state"] == "active", "{st}");
    let line = st[0]["members"][2]["inner_out"][0].as_str().unwrap_or_default().to_string();
    assert!(line.contains("member 1 failed") && line.contains(&format!("mosaic replace -a {} --member 1", cda.display())), "{st}");
    let text = String::from_utf8_lossy(&mosaic(&["status", "-a", d]).stdout).into_owned();
    assert!(text.contains("DEGRADED") && text.contains("member 1 failed"), "{text}");
    assert!(ok(&["info", "-a", d]).contains(&format!("degraded   {line}")));
    ok(&["replace", "-a", cda.to_str().unwrap(), "--member", "1", "--drive", cda.join("new1.img").to_str().unwrap()]);
    let (code, st) = status();
    assert!(code == Some(0) && st[0]["health"] == "healthy", "{st}");
}
