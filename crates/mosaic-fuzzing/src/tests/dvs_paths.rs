use std::path::{Path, PathBuf};

use mosaic_dvs::files::{decode_paths, record_paths, PATHS_FILE};
use uuid::Uuid;

use super::{mutations, random_inputs};
use crate::dvs_paths;
use crate::dvs_paths::{listed, LISTED};

/// The paths file the real writer makes in a new directory for an array
/// of `outside` devices in another directory (absolute paths, with their
/// home) and one in a subdirectory (a relative path), with the directory.
fn recorded(outside: usize) -> (Vec<u8>, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let (dir, other) = (t.path().join("d"), t.path().join("other"));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::create_dir(&other).unwrap();
    let mut devices: Vec<PathBuf> = (0..outside).map(|i| other.join(format!("spare-{i}.zoned"))).collect();
    devices.push(dir.join("sub/in.zoned"));
    devices.push(dir.join("dvs-0.zoned"));
    for d in &devices {
        std::fs::write(d, b"").unwrap();
    }
    record_paths(&dir, Uuid::from_u128(0x67e5_5044_10b1_426f_9247_bb68_0e5f_e0c8), &devices).unwrap();
    (std::fs::read(dir.join(PATHS_FILE)).unwrap(), dir.canonicalize().unwrap())
}

/// Files the writer does not make: entries the decoder refuses, a field
/// it ignores, the short form of a UUID, a compact file; and an input the
/// body makes a file of.
const HANDWRITTEN: [(&str, &str); 4] = [
    ("refused entries", r#"{"array":"67e55044-10b1-426f-9247-bb680e5fe0c8","devices":[{"path":"../up.zoned"},{"path":""},{"path":"a/./b.zoned"},{"path":"/x/../y.zoned","home":"/h"}]}"#),
    ("an unknown field", r#"{"array":"67e55044-10b1-426f-9247-bb680e5fe0c8","version":2,"devices":[{"path":"a.zoned","size":1}]}"#),
    ("a simple UUID", r#"{"array":"67e5504410b1426f9247bb680e5fe0c8","devices":[]}"#),
    ("a listed input", "\u{1}a.zoned\0../b.zoned\0\0/c.zoned\t/home\0d/e.zoned"),
];

/// Valid inputs: written by `record_paths`, and the handwritten ones.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut v = vec![("recorded paths", recorded(2).0), ("many recorded paths", recorded(40).0)];
    v.extend(HANDWRITTEN.map(|(name, s)| (name, s.as_bytes().to_vec())));
    v
}

/// The seed corpus of the cargo-fuzz target.
pub(super) fn corpus() -> Vec<Vec<u8>> {
    seeds().into_iter().map(|(_, b)| b).collect()
}

#[test]
fn random_bytes() {
    let head = br#"{"array":"67e55044-10b1-426f-9247-bb680e5fe0c8","devices":[{"path":""#;
    random_inputs(dvs_paths, 0x2d, 4000, 4200, &[&[LISTED], &head[..]]);
}

#[test]
fn valid_inputs_decode() {
    let (b, home) = recorded(2);
    let h = decode_paths(&b).unwrap();
    let other = home.parent().unwrap().join("other");
    let want = [(other.join("spare-0.zoned"), Some(home.as_path())), (other.join("spare-1.zoned"), Some(&home)), (PathBuf::from("sub/in.zoned"), None)];
    let got: Vec<(PathBuf, Option<&Path>)> = h.devices().map(|(p, home)| (p.to_path_buf(), home)).collect();
    assert_eq!(got, want, "the devices the directory does not name");
    assert!(h.refused().is_empty());
    assert_eq!(h.encode().unwrap(), b, "the writer's bytes");
    assert_eq!(decode_paths(&recorded(40).0).unwrap().devices().count(), 41);
    let refused = decode_paths(HANDWRITTEN[0].1.as_bytes()).unwrap();
    assert_eq!(refused.devices().map(|d| d.0.to_str().unwrap()).collect::<Vec<_>>(), ["a/./b.zoned", "/x/../y.zoned"]);
    assert_eq!(refused.refused().len(), 2);
    assert_eq!(decode_paths(HANDWRITTEN[1].1.as_bytes()).unwrap().devices().count(), 1);
    assert_eq!(decode_paths(HANDWRITTEN[2].1.as_bytes()).unwrap().array(), h.array());
    let l = decode_paths(&listed(&HANDWRITTEN[3].1.as_bytes()[1..])).unwrap();
    assert_eq!((l.devices().count(), l.refused().len()), (3, 2));
    for (name, b) in seeds() {
        assert!(b[0] == LISTED || decode_paths(&b).is_ok(), "{name}");
    }
}

#[test]
fn valid_inputs_damaged() {
    for (name, b) in seeds() {
        mutations(dvs_paths, name, &b, b.len(), b.len());
    }
}
