use std::sync::Arc;

use mosaic_array::journal::{decode_entry_table, decode_header, decode_record, Entry, Extent, Journal, HEADER_BYTES, MIN_JOURNAL};
use mosaic_dev::{MemMember, Member};
use uuid::Uuid;

/// Fuzz the write-ahead journal decoders: the header, a record, a damaged
/// record's entry table (read best-effort, without the frame's checksum),
/// and `Journal::open` reading a ring that holds the input (scanning past
/// damaged records).  Never panic; what decodes is consistent with the
/// bytes it came from.
pub fn journal(data: &[u8]) {
    let _ = decode_header(data);
    let table = decode_entry_table(data);
    if let Ok((_, entries, len)) = decode_record(data) {
        assert!(len as usize >= entries.iter().map(|e| e.bytes().len()).sum::<usize>());
        let extents: Vec<Extent> = entries.iter().map(Entry::extent).collect();
        assert_eq!(table, Some(extents), "a valid record's entry table reads the same without the frame's checksum");
    }
    // The input as the ring of a formatted journal, read as open does.
    let id = Uuid::from_u128(1);
    let dev: Arc<dyn Member> = Arc::new(MemMember::new("fuzz", MIN_JOURNAL));
    Journal::format(dev.clone(), id, Uuid::nil()).expect("format");
    let room = (MIN_JOURNAL - HEADER_BYTES) as usize;
    dev.write_at(&data[..data.len().min(room)], HEADER_BYTES).expect("write");
    if let Ok((_, log)) = Journal::open(dev, id) {
        let (apply, held) = log.replayable();
        assert_eq!(apply.len() + held.len(), log.records.len());
    }
}
