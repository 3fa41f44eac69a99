//! Failure domains: which machine holds each member, so that losing one
//! machine cannot lose more members of a stripe than the code tolerates
//! (Ceph's CRUSH failure domains, with the host as the domain).
//!
//! ```text
//!   member            its domain
//!   host label        --hosts a,a,b,... at create, --host at replace
//!   nbd://HOST/...    HOST (the URI's host, port dropped)
//!   anything else     "local": this machine (files, block devices,
//!                     unix sockets, nbd://localhost or 127.x / [::1])
//!
//!   raid6 (m = 2) over   a a b b c c   ok: any host holds 2 <= 2
//!                        a a a b c c   refused: host a holds 3 > 2
//! ```
//!
//! Every stripe of a fixed layout spans every member, so the rule is per
//! array: no domain may hold more than `m` members.  An array whose
//! members are all local has nothing to place and is not checked.

use std::collections::BTreeMap;

/// The domain of members on this machine.
pub const LOCAL: &str = "local";

/// The host an NBD URI over TCP names (None for a local path or a unix
/// socket); loopback addresses are this machine.
pub fn uri_host(path: &str) -> Option<String> {
    let rest = path.strip_prefix("nbd://").or_else(|| path.strip_prefix("nbds://"))?;
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let authority = authority.rsplit('@').next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    let loopback = host.is_empty() || host == "localhost" || host == "::1" || host.starts_with("127.");
    (!loopback).then(|| host.to_ascii_lowercase())
}

/// The domain of a member: its label when it has one, else its URI's host,
/// else [`LOCAL`].
pub fn domain_of(path: &str, label: Option<&str>) -> String {
    match label.filter(|l| !l.is_empty()) {
        Some(l) => l.to_string(),
        None => uri_host(path).unwrap_or_else(|| LOCAL.to_string()),
    }
}

/// Check a placement: `domains[i]` holds member `i`, and a stripe survives
/// the loss of `m` members.  The error names the domain that holds too
/// many and says how to place anyway.
pub fn check(domains: &[String], m: usize, level: &str) -> Result<(), String> {
    if domains.iter().all(|d| d == LOCAL) {
        return Ok(());
    }
    let mut count: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, d) in domains.iter().enumerate() {
        count.entry(d.as_str()).or_default().push(i);
    }
    match count.iter().find(|(_, v)| v.len() > m) {
        None => Ok(()),
        Some((host, members)) => Err(format!(
            "host {host} holds {} members of every stripe ({members:?}), and {level} survives the loss of {m}: losing that host loses data. Spread the members over more hosts, or give --force to place them anyway",
            members.len()
        )),
    }
}

/// Host labels as `--hosts a,b,...` gives them: one per member, each a
/// plain name.
pub fn parse_labels(s: &str, members: usize) -> Result<Vec<String>, String> {
    let labels: Vec<String> = s.split(',').map(|l| l.trim().to_string()).collect();
    if labels.len() != members {
        return Err(format!("--hosts names {} hosts for {members} members: give one per member, in the members' order", labels.len()));
    }
    if let Some(bad) = labels.iter().find(|l| !valid_label(l)) {
        return Err(format!("--hosts: {bad:?} is not a host name (letters, digits, '-', '_' and '.', at most 63)"));
    }
    Ok(labels)
}

/// Whether `l` is a usable host label.
pub fn valid_label(l: &str) -> bool {
    !l.is_empty() && l.len() <= 63 && l.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_uris_host_is_its_domain_and_loopback_is_local() {
        assert_eq!(uri_host("nbd://store-1:10809/e").as_deref(), Some("store-1"));
        assert_eq!(uri_host("nbds://user@Store-2/e?tls-verify-peer=false").as_deref(), Some("store-2"));
        assert_eq!(uri_host("nbd://[fd00::7]:10809/e").as_deref(), Some("fd00::7"));
        for local in ["nbd://127.0.0.1:10809/e", "nbd://localhost/e", "nbd://[::1]/e", "nbd+unix:///e?socket=/s", "/dev/sdb", "m.img"] {
            assert_eq!(uri_host(local), None, "{local}");
        }
        assert_eq!(domain_of("nbd+unix:///e?socket=/s", Some("rack1-a")), "rack1-a");
        assert_eq!(domain_of("nbd://b/e", Some("")), "b");
        assert_eq!(domain_of("m.img", None), LOCAL);
    }

    #[test]
    fn a_host_may_hold_as_many_members_as_the_code_tolerates() {
        assert!(check(&v(&["a", "a", "b", "b", "c", "c"]), 2, "raid6").is_ok());
        let e = check(&v(&["a", "a", "a", "b", "c", "c"]), 2, "raid6").unwrap_err();
        assert!(e.contains("host a holds 3") && e.contains("[0, 1, 2]") && e.contains("--force"), "{e}");
        // Local members are one domain once anything is remote.
        assert!(check(&v(&["local", "local", "b", "c"]), 1, "raid5").is_err());
        assert!(check(&v(&["local", "b", "c", "d"]), 1, "raid5").is_ok());
        // All local: nothing to place.
        assert!(check(&v(&["local"; 5]), 1, "raid5").is_ok());
        // raid0 tolerates no loss: any remote placement is refused.
        assert!(check(&v(&["a", "b"]), 0, "raid0").is_err());
    }

    #[test]
    fn labels_are_one_plain_name_per_member() {
        assert_eq!(parse_labels("a, b,c", 3).unwrap(), v(&["a", "b", "c"]));
        assert!(parse_labels("a,b", 3).unwrap_err().contains("2 hosts for 3 members"));
        assert!(parse_labels("a,b c,d", 3).unwrap_err().contains("not a host name"));
        assert!(parse_labels("a,,d", 3).is_err());
    }
}
