use mosaic_dvs::meta::{decode_checkpoint, decode_journal, decode_record, label_config, MetaLayout};
use mosaic_dvs::tables::Tables;
use mosaic_dvs::{DvsConfig, Geo};
use mosaic_format::frame::{encode, KIND_DVS_CHECKPOINT, KIND_JOURNAL_RECORD, KIND_DVS_LOG, KIND_LABEL};
use mosaic_format::Label;

/// Fuzz the DVS metadata decoders: the member label (its DVS policy
/// blob, then the metadata layout open makes of it), log record (applied
/// to tables as recovery does), checkpoint (its parts), and write-cache
/// journal entry.  The first byte chooses whether the rest is framed with
/// a good checksum (so the parsers behind the frame are reached) and as
/// which kind.  Never panic.
pub fn dvs_meta(data: &[u8]) {
    let geo = Geo::new(DvsConfig::new(4, 1, 4096, 8 * 4096, 8, 1)).expect("geometry");
    let (first, rest) = data.split_first().map_or((0, data), |(f, r)| (*f, r));
    let kinds = [KIND_LABEL, KIND_DVS_LOG, KIND_JOURNAL_RECORD, KIND_DVS_CHECKPOINT];
    let framed;
    let input: &[u8] = match kinds.get(first as usize % 8) {
        Some(&kind) => {
            framed = encode(kind, 1, rest);
            &framed
        }
        None => data,
    };
    if let Ok(l) = Label::decode(input) {
        if let Ok(g) = label_config(&l).and_then(Geo::new) {
            let _ = MetaLayout::new(&g);
        }
    }
    if let Some((_, rec, len)) = decode_record(input, &geo) {
        assert!(len <= input.len());
        let _ = rec.apply(&mut Tables::new(geo.clone()));
    }
    // The length is the entry's footprint in the area: padded to whole
    // sectors, which the input may stop short of (the array journal reads
    // records unpadded).
    if let Some((_, _, d, len)) = decode_journal(input) {
        assert!(len <= input.len().next_multiple_of(mosaic_format::frame::SECTOR) && d.len() < len);
    }
    let _ = decode_checkpoint(input, &geo);
}
