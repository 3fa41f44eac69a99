//! Every preset, fed arbitrary requests: no panics, completions never
//! before dispatch, `pick` in range, rejected requests change nothing.

use mosaic_drives::{list_presets, preset, DriveError, DriveModel, DriveRequest, ReqKind};
use proptest::prelude::*;

fn kind(k: u8) -> ReqKind {
    match k % 6 {
        0 | 5 => ReqKind::Write,
        1 => ReqKind::Read,
        2 => ReqKind::Flush,
        3 => ReqKind::ZoneReset,
        _ => ReqKind::ZoneFinish,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_requests_never_panic(
        which in 0usize..9,
        ops in prop::collection::vec((any::<u8>(), any::<u64>(), 0u64..(1 << 22), 0u64..20_000_000, any::<bool>()), 1..40),
    ) {
        let presets = list_presets();
        let spec = presets[which % presets.len()].0;
        // 1 GiB so that the zoned preset has few zones and writes hit pointers.
        let mut m: Box<dyn DriveModel> = preset(spec).unwrap().build(Some(1 << 30));
        let cap = m.capacity();
        let mut now = 0u64;
        let mut last_done = 0u64;
        for (k, off, len, dt, in_range) in ops {
            now += dt;
            let kind = kind(k);
            let mut offset = if in_range { off % cap } else { off };
            // Aim some writes and zone operations at zone structure.
            if let Some(zs) = m.zone_size() {
                let zone = off % (cap / zs);
                if k % 6 == 5 {
                    offset = m.write_pointer(zone).unwrap_or(zone * zs);
                } else if matches!(kind, ReqKind::ZoneReset | ReqKind::ZoneFinish) && in_range {
                    offset = zone * zs;
                }
            }
            let req = DriveRequest { kind, offset, len };
            let pending = [req, DriveRequest::read(off % cap, 4096), req];
            prop_assert!(m.pick(now, &pending) < pending.len());
            let before = m.zone_report();
            match m.submit(now, &req) {
                Ok(t) => {
                    prop_assert!(t >= now, "{spec}: {req:?} done at {t} < {now}");
                    if kind == ReqKind::Flush {
                        prop_assert!(t >= last_done, "{}: flush done at {} before an earlier request at {}", spec, t, last_done);
                    }
                    last_done = last_done.max(t);
                }
                Err(e) => {
                    prop_assert_eq!(before, m.zone_report(), "{}: rejected {:?} changed zones", spec, req);
                    let zone_op = matches!(kind, ReqKind::ZoneReset | ReqKind::ZoneFinish);
                    let expected = matches!(e, DriveError::OutOfRange { .. })
                        || (m.zone_size().is_some() && (kind == ReqKind::Write || zone_op))
                        || (zone_op && matches!(e, DriveError::Unsupported { .. }));
                    prop_assert!(expected, "{}: unexpected error {} for {:?}", spec, e, req);
                }
            }
        }
        // A flush completes after everything before it.
        let f = m.submit(now, &DriveRequest { kind: ReqKind::Flush, offset: 0, len: 0 }).unwrap();
        prop_assert!(f >= last_done.max(now));
    }
}
