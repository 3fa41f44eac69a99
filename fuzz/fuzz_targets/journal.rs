//! Fuzz the write-ahead journal decoders: the header, a record, a damaged
//! record's op table, and `Journal::open` reading a ring that holds the
//! input (scanning past damaged records).  Never panic; what decodes is
//! consistent with the bytes it came from.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use mosaic_array::journal::{decode_header, decode_op_table, decode_record, Journal, HEADER_BYTES, MIN_JOURNAL};
use mosaic_dev::{MemMember, Member};
use uuid::Uuid;

fuzz_target!(|data: &[u8]| {
    let _ = decode_header(data);
    let table = decode_op_table(data);
    if let Ok((_, ops, len)) = decode_record(data) {
        assert!(len as usize >= ops.iter().map(|o| o.data.len()).sum::<usize>());
        let extents: Vec<(usize, u64, u64)> = ops.iter().map(|o| (o.member, o.offset, o.data.len() as u64)).collect();
        assert_eq!(table, Some(extents), "a valid record's op table reads the same without its checksum");
    }
    // The input as the ring of a formatted journal, read as open does.
    let id = Uuid::from_u128(1);
    let dev: Arc<dyn Member> = Arc::new(MemMember::new("fuzz", MIN_JOURNAL));
    Journal::format(dev.clone(), id).expect("format");
    let room = (MIN_JOURNAL - HEADER_BYTES) as usize;
    dev.write_at(&data[..data.len().min(room)], HEADER_BYTES).expect("write");
    if let Ok((_, log)) = Journal::open(dev, id) {
        let (apply, held) = log.replayable();
        assert_eq!(apply.len() + held.len(), log.records.len());
    }
});
