use mosaic_array::Superblock;
use mosaic_format::frame;
use mosaic_format::label::Label;

/// Fuzz the one member label format and the frame codec under it, and the
/// fixed array's superblock on top: never panic; whatever decodes
/// re-encodes and decodes to the same value.
pub fn superblock(data: &[u8]) {
    if let Ok(Some(f)) = frame::decode(data) {
        let again = frame::encode(f.kind, f.seq, &f.payload);
        assert_eq!(frame::decode(&again), Ok(Some(f)), "a decoded frame encodes and decodes again");
    }
    let _ = frame::frame_len(data);
    // (A frame longer than a slot may decode, but does not encode as a label.)
    if let Some((l, b)) = Label::decode(data).ok().and_then(|l| Some((l.clone(), l.encode().ok()?))) {
        assert_eq!(Label::decode(&b).expect("a re-encoded label decodes"), l);
    }
    if let Some((sb, b)) = Superblock::decode(data).ok().and_then(|sb| Some((sb.clone(), sb.encode().ok()?))) {
        assert_eq!(Superblock::decode(&b).expect("a re-encoded superblock decodes"), sb);
    }
}
