//! Fuzz the DVS metadata decoders: superblock, log record (applied to
//! tables as recovery does), checkpoint, and write-cache journal entry.
//! Never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mosaic_dvs::meta::{decode_checkpoint, decode_journal, decode_record, peek_record, MetaLayout, Superblock};
use mosaic_dvs::tables::Tables;
use mosaic_dvs::{DvsConfig, Geo};

fuzz_target!(|data: &[u8]| {
    let geo = Geo::new(DvsConfig::new(4, 1, 4096, 8 * 4096, 8, 1)).expect("geometry");
    if let Ok(sb) = Superblock::decode(data) {
        if let Ok(g) = Geo::new(sb.config) {
            let _ = MetaLayout::new(&g);
        }
    }
    let _ = peek_record(data);
    if let Some((_, rec, len)) = decode_record(data, &geo) {
        assert!(len <= data.len());
        let _ = rec.apply(&mut Tables::new(geo.clone()));
    }
    if let Some((_, _, d, len)) = decode_journal(data) {
        assert!(len <= data.len() && d.len() < len);
    }
    let _ = decode_checkpoint(data, &geo);
});
