//! CBRO with check drive arrays that are arrays of their own, on files.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use mosaic_array::nested::create_dir;
use mosaic_array::spec::ArraySpec;
use mosaic_array::{Array, CreateOptions};
use mosaic_core::Level;

fn opts() -> CreateOptions {
    CreateOptions { level: Level::Raid0, members: None, member_size: Some(3 << 20), unit: 16 << 10, block: 4096, force: false, assume_clean: false }
}

fn fill(arr: &Array, seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let cap = arr.capacity();
    let mut model = vec![0u8; cap as usize];
    for _ in 0..120 {
        let len = rng.gen_range(1..=10u64) * 4096;
        let off = rng.gen_range(0..(cap - len) / 4096) * 4096;
        let d: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        arr.write(off, &d).unwrap();
        model[off as usize..(off + len) as usize].copy_from_slice(&d);
    }
    model
}

fn read_all(arr: &Array) -> Vec<u8> {
    let mut b = vec![0u8; arr.capacity() as usize];
    arr.read(0, &mut b).unwrap();
    b
}

fn open(dir: &Path) -> Array {
    Array::open(&ArraySpec::Dir(dir.to_path_buf()), true).unwrap()
}

fn check_level(level: &str, cda_member_to_fail: usize) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("arr");
    let arr = create_dir(&dir, level, &opts(), Some(2 << 20)).unwrap();
    let n = arr.geometry().members;
    let model = fill(&arr, 7);
    assert!(read_all(&arr) == model, "{level}");
    arr.close().unwrap();
    drop(arr);
    // Reassembled from the directory, CDA array included.
    let arr = open(&dir);
    assert!(read_all(&arr) == model, "{level}: reopened");
    assert!(arr.scrub(false, &|_, _| {}).unwrap().mismatched_stripes.is_empty(), "{level}: outer scrub");
    // A data drive fails: its units come back through the code on the CDA.
    arr.fail_member(0).unwrap();
    assert!(read_all(&arr) == model, "{level}: data member 0 failed");
    drop(arr);
    // A member of the CDA fails: the CDA serves degraded, the outer array
    // never notices.
    let cda = dir.join("cda-0");
    open(&cda).fail_member(cda_member_to_fail).unwrap();
    let arr = open(&dir);
    assert_eq!(arr.geometry().members, n);
    assert!(read_all(&arr) == model, "{level}: data member 0 and CDA member {cda_member_to_fail} failed");
    // Writes still land (degraded twice over) and read back.
    let d = vec![0xabu8; 64 << 10];
    arr.write(0, &d).unwrap();
    let mut b = vec![0u8; d.len()];
    arr.read(0, &mut b).unwrap();
    assert_eq!(b, d);
}

#[test]
fn cbro_with_a_raid5_cda() {
    check_level("cbro:4+1,cda=raid5:3", 1);
}

#[test]
fn cbro_with_a_nested_cbro_cda() {
    // The CDA is cbro:2+1 whose own CDA is a raid5 2+1 array.
    check_level("cbro:3+1,cda=cbro:2+1,cda=raid5:3", 0);
}

#[test]
fn bad_cda_specs_are_clear() {
    let t = tempfile::tempdir().unwrap();
    let e = create_dir(&t.path().join("a"), "cbro:4+1,cda=raid9:3", &opts(), None).err().unwrap().to_string();
    assert!(e.contains("bad check drive array"), "{e}");
    let e = create_dir(&t.path().join("b"), "cbro:4+1,cda=raid5:1", &opts(), None).err().unwrap().to_string();
    assert!(e.contains("raid5 needs at least 2 members"), "{e}");
}
