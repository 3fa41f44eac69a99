use super::{mutations, random_inputs};
use crate::psk_keys;

/// Keys files as psktool writes them.
pub(crate) fn corpus() -> Vec<Vec<u8>> {
    vec![
        b"alice:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n".to_vec(),
        b"alice:0011\n\nbob:DEADbeef\r\ncarol:ff\n".to_vec(),
    ]
}

#[test]
fn random_bytes() {
    random_inputs(psk_keys, 0x5b, 4000, 300, &[b"alice:", b"bob:0011\n"]);
}

#[test]
fn mutated_files() {
    for (i, valid) in corpus().iter().enumerate() {
        mutations(psk_keys, &format!("keys file {i}"), valid, valid.len(), valid.len());
    }
}
