use std::sync::{Arc, OnceLock};

use mosaic_core::{Frontend, Health};
use mosaic_dev::{MemMember, Member};
use mosaic_exec::{Client, Executor};
use mosaic_remap::{RemapConfig, RemapGeometry, RemapPolicy};
use mosaic_tier::{PolicyConfig, TierGeometry, TierPolicy};

/// The bytes `[0, n)` of member 0 after running a format program.
pub(crate) fn formatted(p: &mosaic_core::Program, members: usize, bytes: u64, n: u64) -> Vec<u8> {
    let mems: Vec<Arc<MemMember>> = (0..members).map(|i| Arc::new(MemMember::new(&format!("m{i}"), bytes))).collect();
    let devs = mems.iter().map(|m| Some(m.clone() as Arc<dyn Member>)).collect();
    Executor::new(devs, 0).run(p, Client::None, None).expect("format runs");
    mems[0].snapshot()[..n as usize].to_vec()
}

pub(crate) fn tier_cfg() -> (PolicyConfig, TierGeometry) {
    let cfg = PolicyConfig { sections: vec![(16 << 10, 0.5), (64 << 10, 0.5)], erase_block: 64 << 10, threshold_v: 4, ..PolicyConfig::default() };
    let mut geo = TierGeometry { fast_bytes: 1 << 40, slow_bytes: 24 * (64 << 10), slow_stripe: 64 << 10 };
    geo.fast_bytes = TierPolicy::map_bytes(&cfg, &geo) + (256 << 10);
    (cfg, geo)
}

pub(crate) fn remap_cfg() -> (RemapConfig, RemapGeometry) {
    let inner = mosaic_core::Geometry::new(mosaic_core::Level::Raid5, 4, 4096, 4096, 1 << 20).unwrap();
    (RemapConfig { unit: 4096, ..RemapConfig::default() }, RemapGeometry::new(inner))
}

pub(crate) static TIER: OnceLock<Vec<u8>> = OnceLock::new();
pub(crate) static REMAP: OnceLock<Vec<u8>> = OnceLock::new();

pub(crate) fn xored(base: &[u8], data: &[u8]) -> Vec<u8> {
    let mut r = base.to_vec();
    if !r.is_empty() {
        for (i, b) in data.iter().enumerate() {
            let at = i % r.len();
            r[at] ^= b;
        }
    }
    r
}

/// Fuzz the map regions of the mapped policies (the hybrid tier's on its
/// fast array, the remapped array's at the start of its inner array): the input is XORed
/// onto a freshly formatted region, so the fuzzer starts from valid
/// labels, checkpoints and logs.  Recovery never panics; a recovered
/// policy plans reads over its whole capacity without panicking.
pub fn mapped_policies(data: &[u8]) {
    let (tc, tg) = tier_cfg();
    let tbase = TIER.get_or_init(|| {
        let (_, p) = TierPolicy::format(tc.clone(), tg).unwrap();
        formatted(&p, 2, tg.fast_bytes.max(tg.slow_bytes), TierPolicy::map_bytes(&tc, &tg))
    });
    if let Ok(mut pol) = TierPolicy::recover(tc, tg, &xored(tbase, data)) {
        let _ = pol.submit(false, 0, pol.capacity(), 0, &Health::all_active(2));
    }
    let (rc, rg) = remap_cfg();
    let rbase = REMAP.get_or_init(|| {
        let (_, p) = RemapPolicy::format(rc.clone(), rg.clone()).unwrap();
        formatted(&p, 1, rg.inner.capacity(), RemapPolicy::map_bytes(&rc, &rg))
    });
    if let Ok(mut pol) = RemapPolicy::recover(rc, rg, &xored(rbase, data)) {
        let _ = pol.submit(false, 0, pol.capacity(), 0, &Health::all_active(1));
    }
}
