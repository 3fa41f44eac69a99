//! DVS arrays on emulated zoned drive files: naming, create, open,
//! replace.  The CLI (`mosaic create --level dvs --zoned ...`) is a thin
//! layer over these.
//!
//! ```text
//!   -a DIR          members DIR/dvs-0.zoned .. DIR/dvs-{n-1}.zoned,
//!                   hot spares DIR/dvs-spare-ID.zoned
//!   -a P0,P1,...    members and spares are those files, in any order
//!                   (labels decide)
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mosaic_dev::zoned::ZonedFile;
use mosaic_format::label::read_label;

use crate::addr::{DvsConfig, Geo};
use crate::array::{DvsArray, ZonedMember};
use crate::meta::MetaLayout;
use crate::DvsError;

/// Parameters of `create`.
#[derive(Debug, Clone)]
pub struct CreateSpec {
    pub members: usize,
    pub member_size: u64,
    pub chunk: u64,
    pub block: u64,
    pub zone_size: u64,
    pub parity: usize,
    /// Journalled write cache in chunks (0: write-through).
    pub cache_chunks: u64,
}

/// The config for a spec: zones of `zone_size`, the fewest conventional
/// zones that hold the metadata.  With a write cache, the journal is
/// sized to hold the whole cache as one-block records
/// ([`journal_for_cache`]) when that leaves at least half the zones for
/// data; otherwise the journal shares the metadata area with the log (a
/// full journal then destages the cache before it is full).
pub fn config_for(s: &CreateSpec) -> Result<DvsConfig, DvsError> {
    if s.zone_size == 0 || s.member_size % s.zone_size != 0 {
        return Err(DvsError::Geometry(format!("member size {} is not a whole number of {}-byte zones", s.member_size, s.zone_size)));
    }
    let zones = s.member_size / s.zone_size;
    let journal = journal_for_cache(s.cache_chunks, s.chunk, s.block);
    if journal > 0 {
        if let Ok(cfg) = fewest_conventional(s, zones, journal, zones / 2) {
            return Ok(cfg);
        }
    }
    fewest_conventional(s, zones, 0, zones.saturating_sub(1).max(1))
}

/// Journal bytes that hold a cache of `cache_chunks` chunks as records of
/// one block each (the smallest write, the most overhead per block).
pub fn journal_for_cache(cache_chunks: u64, chunk: u64, block: u64) -> u64 {
    let blocks = cache_chunks.saturating_mul(chunk / block.max(1));
    blocks.saturating_mul(crate::meta::journal_record_len(block))
}

/// The first config with fewer than `below` conventional zones whose
/// metadata (and a journal of `journal` bytes) fits.
fn fewest_conventional(s: &CreateSpec, zones: u64, journal: u64, below: u64) -> Result<DvsConfig, DvsError> {
    let mut last = None;
    for conv in 1..below {
        let ring = s.cache_chunks > 0;
        let cfg = DvsConfig { block: s.block, cache_chunks: s.cache_chunks, journal_bytes: journal, journal_ring: ring, ..DvsConfig::new(s.members, s.parity, s.chunk, s.zone_size, zones, conv) };
        match Geo::new(cfg.clone()).and_then(|g| MetaLayout::new(&g).map(|_| ())) {
            Ok(()) => return Ok(cfg),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| DvsError::Geometry(format!("{zones} zones per member are too few for a DVS array"))))
}

/// Member paths of an array spec.
pub fn member_paths(spec: &str) -> Result<Vec<PathBuf>, DvsError> {
    if spec.contains(',') {
        return Ok(spec.split(',').map(|s| PathBuf::from(s.trim())).filter(|p| !p.as_os_str().is_empty()).collect());
    }
    let dir = Path::new(spec);
    let mut v: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| DvsError::Io(std::io::Error::new(e.kind(), format!("{}: {e}", dir.display()))))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = name.strip_prefix("dvs-")?.strip_suffix(".zoned")?;
            // Spares after the members.
            let i = if stem.starts_with("spare-") { usize::MAX } else { stem.parse().ok()? };
            Some((i, e.path()))
        })
        .collect();
    v.sort();
    if v.iter().all(|x| x.0 == usize::MAX) {
        return Err(DvsError::Other(format!("{}: no DVS member files (dvs-N.zoned)", dir.display())));
    }
    Ok(v.into_iter().map(|x| x.1).collect())
}

/// Whether `spec` names DVS members (its first member carries a DVS label).
pub fn is_dvs(spec: &str) -> bool {
    let Ok(paths) = member_paths(spec) else { return false };
    let Some(p) = paths.first() else { return false };
    let Ok(z) = ZonedFile::open(p) else { return false };
    let mut read = |buf: &mut [u8], off: u64| mosaic_dev::Member::read_at(&z, buf, off);
    let size = mosaic_dev::Member::size(&z);
    matches!(read_label(size, &mut read), Ok(Ok(l)) if l.kind == crate::meta::LABEL_KIND)
}

/// Create member files `DIR/dvs-i.zoned` and an array on them.
pub fn create_in_dir(dir: &Path, s: &CreateSpec, force: bool) -> Result<DvsArray, DvsError> {
    let cfg = config_for(s)?;
    std::fs::create_dir_all(dir)?;
    let mut devs: Vec<Arc<dyn ZonedMember>> = Vec::new();
    // Held while the files are made: an array in use is never overwritten.
    let mut held = Vec::new();
    for i in 0..s.members {
        let p = dir.join(format!("dvs-{i}.zoned"));
        if p.exists() && !force {
            return Err(DvsError::Other(format!("{} exists; use --force to overwrite it", p.display())));
        }
        if p.exists() {
            held.push(mosaic_dev::DeviceLock::acquire(&p, true).map_err(|e| DvsError::Other(e.to_string()))?);
        }
        devs.push(Arc::new(ZonedFile::create(&p, cfg.zone_size, cfg.zones, cfg.conventional)?));
    }
    DvsArray::create(devs, cfg)
}

/// Open the array of a spec; member files that cannot be opened count as missing.
pub fn open_spec(spec: &str) -> Result<DvsArray, DvsError> {
    let mut devs: Vec<Arc<dyn ZonedMember>> = Vec::new();
    for p in member_paths(spec)? {
        if let Ok(z) = ZonedFile::open(&p) {
            devs.push(Arc::new(z));
        }
    }
    DvsArray::open(devs)
}

/// The file name of hot spare `uuid` in a directory array.
pub fn spare_file_name(uuid: uuid::Uuid) -> String {
    format!("dvs-spare-{}.zoned", &uuid.simple().to_string()[..8])
}

/// The zoned file at `path`, created with the geometry of `a` when it does
/// not exist.
pub fn open_or_create(a: &DvsArray, path: &Path) -> Result<ZonedFile, DvsError> {
    let c = &a.geo().cfg;
    Ok(if path.exists() { ZonedFile::open(path)? } else { ZonedFile::create(path, c.zone_size, c.zones, c.conventional)? })
}

/// Replace member `m` with the zoned file at `path` (created with the
/// array's zone geometry if it does not exist); [`DvsArray::rebuild`]
/// fills it.
pub fn replace_with_file(a: &mut DvsArray, m: usize, path: &Path) -> Result<(), DvsError> {
    let z = open_or_create(a, path)?;
    a.replace(m, Arc::new(z))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_open_write_read_replace_through_files() {
        let dir = tempfile::tempdir().unwrap();
        let s = CreateSpec { members: 5, member_size: 16 << 20, chunk: 64 << 10, block: 4096, zone_size: 1 << 20, parity: 1, cache_chunks: 8 };
        let mut a = create_in_dir(dir.path(), &s, false).unwrap();
        let spec = dir.path().to_str().unwrap();
        assert!(is_dvs(spec));
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let data = &data[..(data.len() / 4096 * 4096)];
        a.write(8192, data).unwrap();
        drop(a);
        assert!(create_in_dir(dir.path(), &s, false).err().unwrap().to_string().contains("--force"));
        let mut b = open_spec(spec).unwrap();
        let mut got = vec![0u8; data.len()];
        b.read(8192, &mut got).unwrap();
        assert_eq!(got, data);
        b.fail(2).unwrap();
        replace_with_file(&mut b, 2, &dir.path().join("new.zoned")).unwrap();
        b.rebuild(&|_, _| {}, None).unwrap();
        assert_eq!(b.scrub().unwrap(), 0);
        assert!(config_for(&CreateSpec { member_size: 1000, ..s.clone() }).is_err());
        assert!(!is_dvs("/nonexistent"));
    }
}
