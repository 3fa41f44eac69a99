//! The bodies of mosaic's cargo-fuzz targets, one module and one public
//! function per target: `fuzz/fuzz_targets/X.rs` is
//! `fuzz_target!(|data: &[u8]| mosaic_fuzzing::X(data))`.  Here they are
//! built and tested with the workspace (`src/tests/`), so a target cannot
//! silently stop compiling.  Each body panics only on a bug.

mod bitmap;
mod block_map;
mod dvs_meta;
mod dvs_paths;
mod handshake;
mod journal;
mod mapped_policies;
mod psk_keys;
mod request;
mod superblock;
mod trace;
mod zoned_header;

pub use bitmap::bitmap;
pub use block_map::block_map;
pub use dvs_meta::dvs_meta;
pub use dvs_paths::dvs_paths;
pub use handshake::handshake;
pub use journal::journal;
pub use mapped_policies::mapped_policies;
pub use psk_keys::psk_keys;
pub use request::request;
pub use superblock::superblock;
pub use trace::trace;
pub use zoned_header::zoned_header;

#[cfg(test)]
mod tests;
