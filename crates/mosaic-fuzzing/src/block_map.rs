use mosaic_map::{frame, map};

/// Fuzz the mapped-layout kit's decoders (the frame codec, delta records,
/// checkpoints): never panic, and a frame that decodes re-encodes to the
/// same bytes.
pub fn block_map(data: &[u8]) {
    if let Ok(Some(f)) = frame::decode(data) {
        let again = frame::encode(f.kind, f.seq, &f.payload);
        assert_eq!(frame::decode(&again).ok().flatten().map(|g| g.payload), Some(f.payload));
    }
    let _ = map::decode_records(data);
    let _ = map::decode_checkpoint(data);
}
