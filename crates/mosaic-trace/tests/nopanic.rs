//! No input makes a parser (or detection, or decompression) panic.

use mosaic_trace::{from_reader, stats, Format, TraceOptions};
use proptest::prelude::*;

fn formats() -> impl Strategy<Value = Option<Format>> {
    (0usize..9).prop_map(|i| Format::ALL.get(i).copied())
}

fn drain(bytes: Vec<u8>, format: Option<Format>, skip_bad: bool, device: Option<String>) {
    let opts = TraceOptions { format, skip_bad, device, ..Default::default() };
    if let Ok(r) = from_reader("fuzz", std::io::Cursor::new(bytes.clone()), &opts) {
        for x in r.take(2000) {
            let _ = x;
        }
    }
    if let Ok(r) = from_reader("fuzz", std::io::Cursor::new(bytes), &opts) {
        let _ = stats(r);
    }
}

/// Field-ish tokens that the parsers care about.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,22}",
        "[0-9]{0,3}\\.[0-9]{0,12}",
        "[0-9a-fA-F]{1,4}",
        Just("18446744073709551615".to_string()),
        prop::sample::select(vec!["r", "W", "Read", "write", "Q", "D", "C", "m", "WS", "FWS", "RA", "N", "+", "8,0", "fio", "version", "2", "3", "iolog", "wait", "trim", "CPU0", "Total", "(8,0):", "2a", "28", "1e9", "-1", "nan", "\u{feff}", "é"]).prop_map(String::from),
        "[ -~]{0,8}",
    ]
}

fn line() -> impl Strategy<Value = String> {
    (prop::collection::vec(token(), 0..9), prop::sample::select(vec![",", " ", "  ", ", "])).prop_map(|(t, sep)| t.join(sep))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600), format in formats(), skip in any::<bool>()) {
        drain(bytes, format, skip, None);
    }

    #[test]
    fn random_lines(lines in prop::collection::vec(line(), 0..30), format in formats(), skip in any::<bool>(), dev in prop::option::of(prop::sample::select(vec!["0", "8,0", "/dev/sdb"]))) {
        let mut text = lines.join("\n");
        if format == Some(Format::FioV2) { text.insert_str(0, "fio version 2 iolog\n"); }
        let dev = if format == Some(Format::CloudPhysics) { None } else { dev.map(String::from) };
        drain(text.into_bytes(), format, skip, dev);
    }

    #[test]
    fn compressed_junk(bytes in prop::collection::vec(any::<u8>(), 0..300), zstd in any::<bool>(), format in formats()) {
        let mut data = if zstd { vec![0x28, 0xb5, 0x2f, 0xfd] } else { vec![0x1f, 0x8b] };
        data.extend(bytes);
        drain(data, format, true, None);
    }
}
