//! Helpers for tests of policies on RAM members: a byte pattern distinct
//! per (tag, offset), and the reference model of a volume's bytes.

/// A byte pattern for a write: distinct per (tag, offset).
pub fn pattern(tag: u64, off: u64, len: u64) -> Vec<u8> {
    (0..len).map(|i| (((off + i) / 7) ^ tag.wrapping_mul(131) ^ (i % 251)) as u8).collect()
}

/// The reference model: the bytes a volume must hold.
pub struct Model(pub Vec<u8>);

impl Model {
    /// `cap` bytes of zeros (a fresh volume).
    pub fn new(cap: u64) -> Model {
        Model(vec![0; cap as usize])
    }
    pub fn write(&mut self, off: u64, data: &[u8]) {
        self.0[off as usize..off as usize + data.len()].copy_from_slice(data);
    }
    pub fn get(&self, off: u64, len: u64) -> &[u8] {
        &self.0[off as usize..(off + len) as usize]
    }
}
