//! No input makes a parser panic.

use mosaic_trace::{from_reader, Format, TraceOptions};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400), fmt in 0usize..9) {
        let format = if fmt == 8 { None } else { Some(Format::ALL[fmt]) };
        let opts = TraceOptions { format, skip_bad: fmt % 2 == 0, ..Default::default() };
        if let Ok(r) = from_reader("fuzz", std::io::Cursor::new(bytes), &opts) {
            for x in r.take(1000) { let _ = x; }
        }
    }

    #[test]
    fn random_csv_lines_never_panic(lines in prop::collection::vec("[0-9a-fA-FrwRW,. +\\-]{0,60}", 0..20), fmt in 0usize..8) {
        let text = lines.join("\n");
        let opts = TraceOptions { format: Some(Format::ALL[fmt]), ..Default::default() };
        if let Ok(r) = from_reader("fuzz", std::io::Cursor::new(text.into_bytes()), &opts) {
            for x in r.take(1000) { let _ = x; }
        }
    }
}
