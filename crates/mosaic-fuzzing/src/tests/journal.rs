use std::sync::Arc;

use mosaic_array::journal::{decode_entry_table, decode_header, decode_record, encode_header, encode_record, Entry, Extent, Journal, HEADER_BYTES, MIN_JOURNAL};
use mosaic_dev::{MemMember, Member};
use mosaic_format::frame::{HEADER_LEN, KIND_JOURNAL_HEADER, KIND_JOURNAL_RECORD};
use uuid::Uuid;

use super::{frame_prefix, mutations, random_inputs, resealed_flips};
use crate::journal;

/// Record 1: a device write, a logical write (of bytes record 2 copies),
/// a resync mark.
fn record1() -> Vec<u8> {
    let d: Vec<u8> = (0..700u32).map(|i| (i * 7) as u8).collect();
    encode_record(1, &[Entry::Device { member: 3, offset: 8192, data: &d[..] }, Entry::Logical { offset: 1 << 20, data: &d[..512] }, Entry::Resync { row: 9 }])
}

/// Record 2: a device write and a copy of record 1's logical write.
fn record2() -> Vec<u8> {
    encode_record(2, &[Entry::Device { member: 0, offset: 0, data: &[5; 100][..] }, Entry::Copy { member: 1, offset: 4096, len: 512, seq: 1, from: 1 << 20 }])
}

/// What the body does with its input: the ring of a formatted journal
/// (array 1), opened.  The number of records open reads.
fn records_opened(ring: &[u8]) -> usize {
    let dev: Arc<dyn Member> = Arc::new(MemMember::new("t", MIN_JOURNAL));
    Journal::format(dev.clone(), Uuid::from_u128(1), Uuid::nil()).unwrap();
    dev.write_at(ring, HEADER_BYTES).unwrap();
    let (_, log) = Journal::open(dev, Uuid::from_u128(1)).unwrap();
    assert!(log.records.iter().map(|(s, _)| *s).eq(1..=log.records.len() as u64), "records in sequence from the checkpoint");
    log.records.len()
}

/// The seed corpus of the cargo-fuzz target: each record, the pair, a
/// header.
pub(super) fn corpus() -> Vec<Vec<u8>> {
    let (r1, r2) = (record1(), record2());
    let both = [&r1[..], &r2[..]].concat();
    vec![r1, r2, both, encode_header(Uuid::from_u128(3), 1 << 30, 17, Uuid::from_u128(4))]
}

#[test]
fn random_bytes() {
    random_inputs(journal, 0x10, 3000, 4096, &[&frame_prefix(KIND_JOURNAL_RECORD), &frame_prefix(KIND_JOURNAL_HEADER)]);
}

#[test]
fn valid_inputs_decode() {
    let (r1, r2) = (record1(), record2());
    let (seq, entries, len) = decode_record(&r1).unwrap();
    assert_eq!((seq, len as usize, entries.len()), (1, r1.len(), 3));
    let extents: Vec<Extent> = entries.iter().map(Entry::extent).collect();
    assert_eq!(decode_entry_table(&r1), Some(extents));
    assert_eq!(decode_record(&r2).unwrap().1[1], Entry::Copy { member: 1, offset: 4096, len: 512, seq: 1, from: 1 << 20 });
    assert_eq!(records_opened(&r1), 1);
    assert_eq!(records_opened(&[&r1[..], &r2[..]].concat()), 2, "the copy resolves against record 1");
    let h = encode_header(Uuid::from_u128(3), 1 << 30, 17, Uuid::from_u128(4));
    let hd = decode_header(&h).unwrap();
    assert_eq!((hd.array, hd.size, hd.checkpoint, hd.session), (Uuid::from_u128(3), 1 << 30, 17, Uuid::from_u128(4)));
}

#[test]
fn valid_inputs_damaged() {
    let (r1, r2) = (record1(), record2());
    let both = [&r1[..], &r2[..]].concat();
    // Every cut of the pair: either record torn anywhere.
    mutations(journal, "records 1 and 2", &both, 64, both.len());
    resealed_flips(journal, "record 1", &r1, 8 + 3 * 24);
    let h = encode_header(Uuid::from_u128(1), MIN_JOURNAL, 1, Uuid::nil());
    mutations(journal, "a journal header", &h, 64, HEADER_LEN + 45);
    resealed_flips(journal, "a journal header", &h, 44);
}
