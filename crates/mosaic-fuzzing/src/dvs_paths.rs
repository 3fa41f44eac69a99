use std::path::Component;

use mosaic_dvs::files::{decode_paths, MAX_PATHS_BYTES, MAX_PATHS_DEVICES};
use serde_json::{json, Value};

/// The first byte that makes the body build a paths file from the rest.
pub(crate) const LISTED: u8 = 1;

/// A paths file listing the pieces of `rest` between 0 bytes as devices
/// (as UTF-8, lossily): `path`, or `path\thome`.
pub(crate) fn listed(rest: &[u8]) -> Vec<u8> {
    let device = |piece: &[u8]| {
        let s = String::from_utf8_lossy(piece);
        match s.split_once('\t') {
            Some((path, home)) => json!({ "path": path, "home": home }),
            None => json!({ "path": s }),
        }
    };
    let devices: Vec<Value> = rest.split(|&b| b == 0).map(device).collect();
    json!({ "array": "67e55044-10b1-426f-9247-bb680e5fe0c8", "devices": devices }).to_string().into_bytes()
}

/// Fuzz the decoder of a DVS directory array's device paths file
/// (`dvs-paths.json`, mosaic_dvs::files::decode_paths): never panic; what
/// decodes keeps the limits (bytes, devices, no empty path, no `..` in a
/// relative one), and its devices, encoded as the writer writes them,
/// decode to the same with nothing refused.  After a first byte
/// [`LISTED`], the rest is a list of paths made into a well-formed file,
/// so the checks behind the JSON parser are reached.
pub fn dvs_paths(data: &[u8]) {
    let built;
    let input: &[u8] = match data.split_first() {
        Some((&LISTED, rest)) => {
            built = listed(rest);
            &built
        }
        _ => data,
    };
    let Ok(h) = decode_paths(input) else { return };
    assert!(input.len() <= MAX_PATHS_BYTES && std::str::from_utf8(input).is_ok());
    assert!(h.devices().count() + h.refused().len() <= MAX_PATHS_DEVICES);
    for (path, _) in h.devices() {
        assert!(!path.as_os_str().is_empty(), "an empty path kept");
        assert!(path.is_absolute() || !path.components().any(|c| c == Component::ParentDir), "{} kept", path.display());
    }
    match h.encode() {
        Ok(b) => {
            let back = decode_paths(&b).expect("what the writer writes decodes");
            assert!(back.array() == h.array() && back.devices().eq(h.devices()) && back.refused().is_empty());
        }
        // The writer's pretty form may pass the limit a compact file keeps.
        Err(e) => assert!(e.contains(&format!("more than the {MAX_PATHS_BYTES}")), "{e}"),
    }
}
