use mosaic_core::MemberState;
use mosaic_dvs::meta::{self, decode_checkpoint, decode_journal, decode_record, encode_checkpoint, encode_journal, label_config, DvsPolicy, MetaLayout, Record};
use mosaic_dvs::tables::Tables;
use mosaic_dvs::{DvsConfig, Geo};
use mosaic_format::frame::{self, HEADER_LEN, KIND_DVS_CHECKPOINT, KIND_DVS_LOG, KIND_JOURNAL_RECORD, KIND_LABEL};
use mosaic_format::Label;
use uuid::Uuid;

use super::{frame_prefix, mutations, payload, random_inputs};
use crate::dvs_meta;

/// The body's geometry.
fn geo() -> Geo {
    Geo::new(DvsConfig::new(4, 1, 4096, 8 * 4096, 8, 1)).unwrap()
}

/// Tables with stripes in two SSGs, as a running array has them.
fn busy_tables() -> Tables {
    let mut t = Tables::new(geo());
    let h = vec![true; 4];
    for lsn in [1, 4] {
        let rows = t.layout(lsn, &[0, 1, 2, 3, 4, 7], &h).unwrap();
        t.commit(lsn, &rows).unwrap();
    }
    t
}

/// A member's label, with event counter `events`, of an array whose
/// conventional zones hold its metadata (the body's geometry is too small
/// for that: its `MetaLayout` is never made).
fn label(events: u64) -> Label {
    let policy = DvsPolicy { config: DvsConfig::new(4, 1, 4096, 64 << 10, 16, 3), failed: vec![3], spares: vec![Uuid::from_u128(9)], role: String::new(), last_scrub: Some(mosaic_format::scrub::ScrubRecord { end: 1_800_000_000, millis: 1234, stripes: 16, mismatched: 1, unverified: 2, repaired: true, interrupted: false }), replaced: vec![], hot: Some(mosaic_dvs::meta::HotRecord { member: 1, old: Uuid::from_u128(2), new: Uuid::from_u128(10), copied: 5 }), lost: vec![mosaic_format::lost::LostRange { offset: 8192, len: 4096 }] };
    let ids: Vec<Uuid> = (1..=4).map(Uuid::from_u128).collect();
    meta::label(&policy, Uuid::from_u128(8), &ids, 1, events, 1_700_000_000)
}

/// One log record of every kind.
fn records() -> Vec<Record> {
    let t = busy_tables();
    let rows = t.layout(2, &[5, 6, 9], &[true; 4]).unwrap();
    let spare = t.spares().next().unwrap();
    vec![
        Record::Append { lsn: 2, rows: rows.clone() },
        Record::Compact { lsn: 1, phys: spare, rows },
        Record::JournalReset { from: 1 << 40 },
        Record::Member { m: 2, state: MemberState::Rebuilding { done: 3 } },
    ]
}

/// The journal entry of a cached write.
fn journal_entry(jseq: u64) -> Vec<u8> {
    encode_journal(jseq, 3 << 12, &[0xab; 1000])
}

/// Valid encodings as the body reads them: whole frames (a first byte
/// `M`, 77 % 8 = 5, leaves the input unframed), and a selector byte
/// followed by a payload the body frames (sequence 1) as that kind.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let select = |k: u8, p: &[u8]| [&[k][..], p].concat();
    let mut v = vec![
        ("a label".to_string(), label(6).encode().unwrap()),
        ("a label to frame".into(), select(0, payload(&label(1).encode().unwrap()))),
        ("a journal entry".into(), journal_entry(4)),
        ("a journal entry to frame".into(), select(2, payload(&journal_entry(1)))),
        ("a checkpoint".into(), encode_checkpoint(&busy_tables(), 9)),
        ("a checkpoint to frame".into(), select(3, payload(&encode_checkpoint(&busy_tables(), 1)))),
    ];
    for (i, r) in records().iter().enumerate() {
        v.push((format!("log record {i}"), r.encode(11 + i as u64)));
        v.push((format!("log record {i} to frame"), select(1, &r.payload())));
    }
    v
}

/// The input the body decodes (framed as it frames it).
fn input(data: &[u8]) -> Vec<u8> {
    let kinds = [KIND_LABEL, KIND_DVS_LOG, KIND_JOURNAL_RECORD, KIND_DVS_CHECKPOINT];
    match kinds.get(data[0] as usize % 8) {
        Some(&kind) => frame::encode(kind, 1, &data[1..]),
        None => data.to_vec(),
    }
}

/// The seed corpus of the cargo-fuzz target.
pub(super) fn corpus() -> Vec<Vec<u8>> {
    seeds().into_iter().map(|(_, b)| b).collect()
}

#[test]
fn random_bytes() {
    let mut prefixes: Vec<Vec<u8>> = (0..4).map(|k| vec![k]).collect();
    prefixes.extend([KIND_LABEL, KIND_DVS_LOG, KIND_JOURNAL_RECORD, KIND_DVS_CHECKPOINT].map(frame_prefix));
    let p: Vec<&[u8]> = prefixes.iter().map(|p| &p[..]).collect();
    random_inputs(dvs_meta, 0xd5, 4000, 4096, &p);
}

#[test]
fn valid_inputs_decode() {
    let (g, s) = (geo(), seeds());
    for (name, b) in &s[..2] {
        let l = Label::decode(&input(b)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(l.member_index, 1);
        let cfg = label_config(&l).unwrap();
        MetaLayout::new(&Geo::new(cfg).unwrap()).unwrap();
    }
    for (name, b) in &s[2..4] {
        let (_, offset, d, len) = decode_journal(&input(b)).unwrap_or_else(|| panic!("{name}"));
        assert_eq!((offset, d, len), (3 << 12, vec![0xab; 1000], input(b).len()));
    }
    let busy = busy_tables();
    for (name, b) in &s[4..6] {
        let (_, t) = decode_checkpoint(&input(b), &g).unwrap().unwrap_or_else(|| panic!("{name}"));
        assert_eq!((&t.gtt, t.get(1), t.get(4)), (&busy.gtt, busy.get(1), busy.get(4)), "{name}");
    }
    for (i, r) in records().iter().enumerate() {
        for (name, b) in &s[6 + 2 * i..8 + 2 * i] {
            let (_, back, len) = decode_record(&input(b), &g).unwrap_or_else(|| panic!("{name}"));
            assert_eq!((&back, len), (r, input(b).len()), "{name}");
        }
    }
    // Applied as recovery applies them: to the tables they were made for.
    let mut t = busy_tables();
    for r in records() {
        r.apply(&mut t).unwrap();
    }
}

#[test]
fn valid_inputs_damaged() {
    for (name, b) in seeds() {
        // Framed by the body: every flip is behind a good checksum.
        let framed = b[0] < 4;
        mutations(dvs_meta, &name, &b, if framed { 256 } else { 64 }, b.len());
    }
}

/// A whole journal entry whose sector padding is cut short decodes
/// (`decode_journal`, through `mosaic_format::journal::decode_record`,
/// does not need the padding: the array journal reads records unpadded),
/// with its length, padding included, past the end of the input: the
/// entry's footprint, which the body bounds by the input rounded up to a
/// sector.  (This body once asserted `len <= input.len()` and failed.)
#[test]
fn journal_entry_with_its_padding_cut() {
    let b = journal_entry(4);
    let end = HEADER_LEN + payload(&b).len();
    let (_, _, _, len) = decode_journal(&b[..end]).unwrap();
    assert!(len > end && len == b.len(), "the length returned is the padded footprint");
    for cut in end..=b.len() {
        dvs_meta(&b[..cut]);
    }
}
