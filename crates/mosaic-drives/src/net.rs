//! A drive on another machine: any drive model behind a network link, for
//! replaying arrays of remote members (`mosaic replay --device
//! net:10gbe/hdd:generic-7200`) before anybody buys the servers.
//!
//! ```text
//!   client                      link (per member)              server
//!   write ──> payload at link rate ──> + rtt/2 (+ jitter) ──> drive ──> + rtt/2 ──> done
//!   read  ──> + rtt/2 (+ jitter) ──> drive ──> payload at link rate ──> + rtt/2 ──> done
//! ```
//!
//! Each direction of the link carries one payload at a time (a payload
//! waits for the one before it); requests reach the drive in the order
//! they were sent.  The drive's queue is the inner model's: the engine
//! dispatches up to its queue depth, as to a local drive.  Jitter is a
//! seeded uniform delay in `[0, jitter_us]` added to each request's trip
//! out, so runs repeat.

use serde::{Deserialize, Serialize};

use crate::{ns, xfer_ns, DriveError, DriveModel, DriveRequest, Nanos, ReqKind};

/// A link between the client and one remote drive's server.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetParams {
    /// Round-trip time of an empty message, microseconds (the network
    /// and both servers' NBD stacks).
    pub rtt_us: f64,
    /// Link rate, Gbit/s (payload bytes; framing is in the rate).
    pub gbit: f64,
    /// Up to this much extra delay on each request's trip out, µs.
    #[serde(default)]
    pub jitter_us: f64,
    /// Seed of the jitter.
    #[serde(default)]
    pub seed: u64,
}

/// Named links: (name, round trip µs, Gbit/s, description).
const PROFILES: [(&str, f64, f64, &str); 5] = [
    ("1gbe", 100.0, 1.0, "1 Gb Ethernet in one rack: 100 us round trip"),
    ("10gbe", 50.0, 10.0, "10 Gb Ethernet in one rack: 50 us round trip"),
    ("25gbe", 30.0, 25.0, "25 Gb Ethernet: 30 us round trip"),
    ("100gbe", 20.0, 100.0, "100 Gb Ethernet: 20 us round trip"),
    ("wan", 20_000.0, 0.1, "a site 20 ms away over 100 Mbit/s"),
];

impl NetParams {
    /// A named link (see [`profiles`]).
    pub fn profile(name: &str) -> Result<NetParams, DriveError> {
        let p = PROFILES.iter().find(|p| p.0 == name).ok_or_else(|| {
            DriveError::config("net", format!("unknown link {name:?}: expected one of {}", PROFILES.map(|p| p.0).join(", ")))
        })?;
        Ok(NetParams { rtt_us: p.1, gbit: p.2, jitter_us: 0.0, seed: 0 })
    }

    /// Check every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), DriveError> {
        let finite = |v: f64| v.is_finite() && v >= 0.0;
        if !finite(self.rtt_us) || self.rtt_us > 10e6 {
            return Err(DriveError::config("rtt_us", "must be a round trip in microseconds, 0 to 10 s"));
        }
        if !finite(self.gbit) || self.gbit <= 0.0 || self.gbit > 10_000.0 {
            return Err(DriveError::config("gbit", "must be a link rate in Gbit/s, above 0 and at most 10000"));
        }
        if !finite(self.jitter_us) || self.jitter_us > 10e6 {
            return Err(DriveError::config("jitter_us", "must be microseconds, 0 to 10 s"));
        }
        Ok(())
    }
}

/// The named links, for `--help` and errors: (name, description).
pub fn profiles() -> Vec<(&'static str, &'static str)> {
    PROFILES.iter().map(|p| (p.0, p.3)).collect()
}

/// Parse `PROFILE[,key=value...]` (keys: rtt_us, gbit, jitter_us, seed).
pub fn parse_link(spec: &str) -> Result<NetParams, DriveError> {
    let mut parts = spec.split(',');
    let mut p = NetParams::profile(parts.next().unwrap_or("").trim())?;
    for kv in parts {
        let (k, v) = kv.split_once('=').ok_or_else(|| DriveError::config("net", format!("{kv:?} is not key=value")))?;
        let num = |f: &str| v.trim().parse::<f64>().map_err(|_| DriveError::config(f, format!("{v:?} is not a number")));
        match k.trim() {
            "rtt_us" => p.rtt_us = num("rtt_us")?,
            "gbit" => p.gbit = num("gbit")?,
            "jitter_us" => p.jitter_us = num("jitter_us")?,
            "seed" => p.seed = v.trim().parse().map_err(|_| DriveError::config("seed", format!("{v:?} is not a whole number")))?,
            other => return Err(DriveError::config("net", format!("unknown link field {other:?}: expected rtt_us, gbit, jitter_us or seed"))),
        }
    }
    p.validate()?;
    Ok(p)
}

/// A drive model behind a link.
pub struct Networked {
    inner: Box<dyn DriveModel>,
    p: NetParams,
    /// When each direction of the link is free: to the server, back.
    up_free: Nanos,
    down_free: Nanos,
    /// The last request's arrival at the server (arrivals keep order).
    last_arrival: Nanos,
    rng: u64,
}

impl Networked {
    pub fn new(inner: Box<dyn DriveModel>, p: NetParams) -> Networked {
        Networked { inner, p, up_free: 0, down_free: 0, last_arrival: 0, rng: p.seed ^ 0x9e37_79b9_7f4a_7c15 }
    }

    fn half_rtt(&self) -> f64 {
        self.p.rtt_us * 500.0
    }

    fn xfer(&self, bytes: u64) -> f64 {
        xfer_ns(bytes, self.p.gbit * 1e9 / 8.0)
    }

    /// A uniform delay in [0, jitter] ns (splitmix64).
    fn jitter(&mut self) -> f64 {
        if self.p.jitter_us <= 0.0 {
            return 0.0;
        }
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64 * self.p.jitter_us * 1000.0
    }
}

/// Whether the request carries its payload to the server (else back).
fn payload_out(kind: ReqKind) -> bool {
    matches!(kind, ReqKind::Write)
}

impl DriveModel for Networked {
    fn describe(&self) -> String {
        format!("{} over a {} Gbit/s link, {} us round trip", self.inner.describe(), self.p.gbit, self.p.rtt_us)
    }
    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }
    fn queue_depth(&self) -> usize {
        self.inner.queue_depth()
    }
    fn reorders(&self) -> bool {
        self.inner.reorders()
    }
    fn pick(&self, now: Nanos, pending: &[DriveRequest]) -> usize {
        self.inner.pick(now, pending)
    }
    fn submit(&mut self, now: Nanos, req: &DriveRequest) -> Result<Nanos, DriveError> {
        let (half, xfer, jitter) = (ns(self.half_rtt()), ns(self.xfer(req.len)), ns(self.jitter()));
        let sent = if payload_out(req.kind) {
            self.up_free = self.up_free.max(now) + xfer;
            self.up_free
        } else {
            now
        };
        let arrival = (sent + half + jitter).max(self.last_arrival);
        self.last_arrival = arrival;
        let done = self.inner.submit(arrival, req)?;
        let back = if req.kind == ReqKind::Read {
            self.down_free = self.down_free.max(done) + xfer;
            self.down_free
        } else {
            done
        };
        Ok(back + half)
    }
    fn random_service_ns(&self, kind: ReqKind, len: u64) -> f64 {
        let payload = if matches!(kind, ReqKind::Read | ReqKind::Write) { self.xfer(len) } else { 0.0 };
        self.inner.random_service_ns(kind, len) + 2.0 * self.half_rtt() + payload + self.p.jitter_us * 500.0
    }
    fn zone_size(&self) -> Option<u64> {
        self.inner.zone_size()
    }
    fn zone_report(&self) -> Vec<crate::ZoneInfo> {
        self.inner.zone_report()
    }
    fn write_pointer(&self, zone: u64) -> Option<u64> {
        self.inner.write_pointer(zone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ram() -> Box<dyn DriveModel> {
        crate::preset("ram:default").unwrap().build(Some(1 << 30))
    }

    #[test]
    fn a_request_pays_the_round_trip_and_its_payload_on_the_link() {
        let link = parse_link("10gbe").unwrap();
        let mut local = ram();
        let mut remote = Networked::new(ram(), link);
        let w = DriveRequest::write(0, 1 << 20);
        let t_local = local.submit(0, &w).unwrap();
        let t_remote = remote.submit(0, &w).unwrap();
        // 1 MiB at 10 Gbit/s is 838,861 ns; the round trip 50 us.
        let payload = (1u64 << 20) as f64 * 8.0 / 10.0;
        assert_eq!(t_remote - t_local, (payload + 50_000.0).round() as u64);
        // A second write right away waits for the link: the first payload
        // is still on it.
        let t2 = remote.submit(0, &DriveRequest::write(1 << 20, 1 << 20)).unwrap();
        assert!(t2 >= t_remote + payload as u64 - 1, "{t2} vs {t_remote}");
        // A small read pays mostly the round trip.
        let mut r = Networked::new(ram(), link);
        let l = ram().submit(0, &DriveRequest::read(0, 4096)).unwrap();
        let t = r.submit(0, &DriveRequest::read(0, 4096)).unwrap();
        assert_eq!(t - l, (4096.0 * 8.0 / 10.0 + 50_000.0f64).round() as u64);
    }

    #[test]
    fn jitter_is_bounded_and_repeats_with_its_seed() {
        let link = parse_link("1gbe,jitter_us=200,seed=7").unwrap();
        let run = || {
            let mut d = Networked::new(ram(), link);
            (0..200u64).map(|i| d.submit(i * 10_000_000, &DriveRequest::read(i * 4096, 4096)).unwrap() - i * 10_000_000).collect::<Vec<_>>()
        };
        let (a, b) = (run(), run());
        assert_eq!(a, b, "the same seed gives the same delays");
        let (lo, hi) = (a.iter().min().unwrap(), a.iter().max().unwrap());
        assert!(hi - lo > 100_000 && hi - lo <= 200_000, "{lo}..{hi}");
    }

    #[test]
    fn links_are_named_or_refused_with_the_reason() {
        assert_eq!(parse_link("25gbe,rtt_us=80").unwrap().rtt_us, 80.0);
        for (bad, why) in [("5gbe", "unknown link"), ("10gbe,gbit=0", "gbit"), ("10gbe,mtu=9000", "unknown link field"), ("10gbe,rtt_us", "key=value"), ("10gbe,jitter_us=x", "not a number")] {
            let e = parse_link(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
