//! The one freshness rule: which devices may serve as which members.
//!
//! ```text
//!   labels read from the devices given (and from path hints)
//!     the array = the UUID most devices carry; others reported, not used
//!     authoritative label = the highest event counter
//!     member index out of range ───────────────────────┐
//!     replaced since (member UUID differs) ────────────┤
//!     stale: events + EVENT_MARGIN < the array's ──────┼──> not used, named
//!     another copy's session (diverged copy) ──────────┤    in a warning
//!     the kind's own reason (too small, ...) ──────────┤
//!     two devices claim one slot: the fresher wins ────┘
//! ```
//!
//! Like md, the event counter decides.  Every update of an array's state
//! is written in two rounds, each bumping `events` and reaching every
//! member in service before the next starts, with no data written between
//! the rounds.  So a crash during an update leaves members at most one
//! event apart ([`EVENT_MARGIN`]), while a member that missed data writes
//! (it was out of the array, or its device was swapped for an old copy)
//! is at least two events behind: it is *stale*, and is never read or used
//! for code until rebuilt.  Every kind of array assembles through
//! [`assemble`], so the rule lives here once.
//!
//! **Copies.**  Event counters alone cannot tell two copies of an array
//! apart (`cp -a`, `dd` of every member) once both were written: each
//! counts up from the same number.  So every writable open starts a
//! *session* (a random UUID in the labels it writes, with the session
//! before it): a device at the array's event counter, or one behind it,
//! serves only when it carries the authoritative session, or the one
//! before it having missed just the update that started this one.  A
//! device of another copy is named and not used, and members of two copies
//! at one event counter, as many of each, are refused as a tie.

use uuid::Uuid;

use crate::label::Label;

/// A member whose event counter is more than this behind the array's is
/// stale (see the module doc).
pub const EVENT_MARGIN: u64 = 1;

/// Whether a member at `member` events is stale in an array at `array`.
pub fn is_stale(member: u64, array: u64) -> bool {
    member.saturating_add(EVENT_MARGIN) < array
}

/// A device that carries a valid label.
pub struct Found<T> {
    pub label: Label,
    /// How to name it to a user (its path).
    pub name: String,
    pub dev: T,
}

/// The outcome of [`assemble`].
pub struct Assembled<T> {
    /// The authoritative label (the highest event counter).
    pub auth: Label,
    /// The device serving each member slot, with its name.
    pub slots: Vec<Option<(String, T)>>,
    /// Every device not used, and why.
    pub warnings: Vec<String>,
}

/// Keep the devices of the array most of them belong to; the others are
/// reported in `warnings`.  A tie between two arrays is an error.
pub fn pick_array<T>(found: Vec<Found<T>>, warnings: &mut Vec<String>) -> Result<Vec<Found<T>>, String> {
    let mut groups: Vec<(Uuid, usize)> = Vec::new();
    for f in &found {
        match groups.iter_mut().find(|g| g.0 == f.label.array_uuid) {
            Some(g) => g.1 += 1,
            None => groups.push((f.label.array_uuid, 1)),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.1));
    if groups.len() > 1 && groups[0].1 == groups[1].1 {
        let names = |u: Uuid| found.iter().filter(|f| f.label.array_uuid == u).map(|f| f.name.clone()).collect::<Vec<_>>().join(", ");
        return Err(format!(
            "members from two arrays, as many of each: {} belong to {} but {} belong to {}",
            names(groups[0].0),
            groups[0].0,
            names(groups[1].0),
            groups[1].0
        ));
    }
    let Some(&(uuid, _)) = groups.first() else { return Ok(found) };
    let (ours, theirs): (Vec<_>, Vec<_>) = found.into_iter().partition(|f| f.label.array_uuid == uuid);
    for f in theirs {
        warnings.push(format!("{}: belongs to another array ({}, member {}); not used", f.name, f.label.array_uuid, f.label.member_index));
    }
    Ok(ours)
}

/// The authoritative label among `found`: the highest event counter (see
/// [`pick_authoritative`]).
pub fn authoritative<T>(found: &[Found<T>]) -> Option<&Label> {
    let keys: Vec<(u64, Uuid)> = found.iter().map(|f| (f.label.events, f.label.session)).collect();
    pick_authoritative(&keys).map(|i| &found[i].label)
}

/// Which of the labels given as `(events, session)` is authoritative: one
/// at the highest event counter, of the session most devices there carry
/// (the last such, as `max_by_key` picks).  Every kind picks through
/// here, so it and [`assemble`] agree.
pub fn pick_authoritative(keys: &[(u64, Uuid)]) -> Option<usize> {
    let top = keys.iter().map(|k| k.0).max()?;
    let at_top = |s: Uuid| keys.iter().filter(|k| **k == (top, s)).count();
    (0..keys.len()).filter(|&i| keys[i].0 == top).max_by_key(|&i| at_top(keys[i].1))
}

/// Whether a device labelled `l` carries the writes of the array whose
/// authoritative label is `auth`: the same session, or the one before it
/// when `l` is behind (it missed the update that started `auth`'s).
pub fn same_session(l: &Label, auth: &Label) -> bool {
    l.session == auth.session || l.session == auth.prev_session && l.events < auth.events
}

/// Two copies' devices, as many of each, at the authoritative event
/// counter: an error naming both groups.
fn diverged_tie<T>(found: &[Found<T>], auth: &Label) -> Result<(), String> {
    let at = |s: Uuid| found.iter().filter(move |f| f.label.events == auth.events && f.label.session == s);
    let Some(other) = found.iter().find(|f| f.label.events == auth.events && f.label.session != auth.session) else { return Ok(()) };
    if at(other.label.session).count() < at(auth.session).count() {
        return Ok(());
    }
    let names = |s: Uuid| at(s).map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ");
    Err(format!(
        "members of two copies of array {} that were written apart, as many of each at event counter {}: {} carry one copy's writes, {} the other's; \
         give the members of one copy",
        auth.array_uuid,
        auth.events,
        names(auth.session),
        names(other.label.session)
    ))
}

/// Why the device labelled `l` cannot serve as its member of the array
/// whose authoritative label is `auth`, if it cannot.
pub fn verdict(name: &str, l: &Label, auth: &Label) -> Option<String> {
    let (i, n) = (l.member_index, auth.members);
    if i >= n || l.kind != auth.kind {
        return Some(format!("{name}: member index {i} out of range for {n} members; not used"));
    }
    if l.member_uuid != auth.member_uuids[i] {
        return Some(format!("{name}: was member {i} before that member was replaced; not used"));
    }
    if is_stale(l.events, auth.events) {
        return Some(format!(
            "{name}: member {i}{STALE} {}, the array is at {}): it missed writes, so it is failed and never read; \
             `mosaic replace --member {i} --drive PATH` rebuilds it",
            l.events, auth.events
        ));
    }
    if !same_session(l, auth) {
        return Some(format!(
            "{name}: member {i} carries the writes of another copy of this array (session {}, event counter {}; the array's members \
             are at session {}, event counter {}): the two copies were written apart, so it is not used",
            short_session(l.session),
            l.events,
            short_session(auth.session),
            auth.events
        ));
    }
    None
}

/// A session's first eight hex digits (enough to tell two apart).
pub fn short_session(s: Uuid) -> String {
    s.simple().to_string()[..8].to_string()
}

/// What a stale member's warning ([`verdict`]) says right after its index.
const STALE: &str = " is stale (event counter";

/// A warning of an open about a stale member (see [`stale_member`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale {
    pub member: usize,
    /// A nesting kind prefixed the warning ("slow tier: ", "check drive
    /// array D: "): the index is its inner array's.
    pub nested: bool,
}

/// The member a warning of an open names as stale (a member found behind
/// the array: it missed writes), if it is such a warning; a server turns
/// it into a `member-stale` event.  Warnings are passed up as text through
/// every kind (and prefixed by nesting ones), so the kind is read here,
/// next to the one place that writes it.
pub fn stale_member(warning: &str) -> Option<Stale> {
    let (head, _) = warning.split_once(STALE)?;
    let (device, index) = head.rsplit_once("member ")?;
    // "{device}: member {i}": one ": " unless something was put in front.
    Some(Stale { member: index.parse().ok()?, nested: device.matches(": ").count() > 1 })
}

/// Assign devices of one array (after [`pick_array`]) to member slots.
/// `skip(i)` says member `i` is failed on record (its device is not used
/// until replaced); `own(&found)` is the kind's own reason a device cannot
/// serve (too small, ...).  Two devices with the same event counter
/// claiming one slot is an error; otherwise the fresher wins.
pub fn assemble<T>(
    mut found: Vec<Found<T>>,
    mut warnings: Vec<String>,
    skip: impl Fn(usize) -> bool,
    own: impl Fn(&Found<T>, &Label) -> Option<String>,
) -> Result<Assembled<T>, String> {
    let Some(auth) = authoritative(&found).cloned() else {
        let why = if warnings.is_empty() { String::new() } else { format!(": {}", warnings.join("; ")) };
        return Err(format!("no member of any array found{why}"));
    };
    diverged_tie(&found, &auth)?;
    // The freshest device first, so it wins a slot two devices claim.
    found.sort_by_key(|f| std::cmp::Reverse(f.label.events));
    let mut slots: Vec<Option<(String, T)>> = (0..auth.members).map(|_| None).collect();
    let mut slot_events = vec![0u64; auth.members];
    for f in found {
        let i = f.label.member_index;
        if i < auth.members && skip(i) {
            continue;
        }
        if let Some(why) = verdict(&f.name, &f.label, &auth).or_else(|| own(&f, &auth)) {
            warnings.push(why);
            continue;
        }
        if let Some((held, _)) = &slots[i] {
            if slot_events[i] == f.label.events {
                return Err(format!(
                    "two devices claim member {i} of array {}: {held} and {} (same event counter {}); give only one",
                    auth.array_uuid, f.name, f.label.events
                ));
            }
            warnings.push(format!("{}: an older copy of member {i} (event counter {}, {held} is at {}); not used", f.name, f.label.events, slot_events[i]));
            continue;
        }
        slot_events[i] = f.label.events;
        slots[i] = Some((f.name, f.dev));
    }
    Ok(Assembled { auth, slots, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(array: u128, i: usize, events: u64) -> Label {
        Label {
            kind: "fixed".into(),
            array_uuid: Uuid::from_u128(array),
            member_uuid: Uuid::from_u128(100 + i as u128),
            member_index: i,
            members: 3,
            events,
            member_uuids: (0..3).map(|j| Uuid::from_u128(100 + j)).collect(),
            created: 0,
            policy: serde_json::Value::Null,
            session: Uuid::from_u128(50),
            prev_session: Uuid::from_u128(49),
        }
    }

    fn f(label: Label, name: &str) -> Found<()> {
        Found { label, name: name.into(), dev: () }
    }

    #[test]
    fn the_margin_is_one_event() {
        assert!(!is_stale(9, 10));
        assert!(is_stale(8, 10));
        assert!(!is_stale(u64::MAX, 3));
    }

    #[test]
    fn stale_replaced_foreign_and_duplicate_devices_are_named_not_used() {
        let mut w = Vec::new();
        let mut replaced = l(1, 2, 10);
        replaced.member_uuid = Uuid::from_u128(7);
        let found = vec![f(l(1, 0, 10), "a"), f(l(1, 1, 8), "b"), f(replaced, "c"), f(l(2, 0, 50), "x"), f(l(1, 0, 9), "a-old")];
        let ours = pick_array(found, &mut w).unwrap();
        assert_eq!(ours.len(), 4);
        assert!(w[0].starts_with("x: belongs to another array"));
        let a = assemble(ours, w, |_| false, |_, _| None).unwrap();
        assert_eq!(a.auth.events, 10);
        assert_eq!(a.slots.iter().map(|s| s.as_ref().map(|s| s.0.as_str())).collect::<Vec<_>>(), [Some("a"), None, None]);
        let w = a.warnings.join("\n");
        assert!(w.contains("b: member 1 is stale (event counter 8, the array is at 10)"), "{w}");
        let stale: Vec<Stale> = a.warnings.iter().filter_map(|w| stale_member(w)).collect();
        assert_eq!(stale, [Stale { member: 1, nested: false }], "{w}");
        let nested = format!("slow tier: check drive array /d: {}", a.warnings.iter().find(|w| w.contains("stale")).unwrap());
        assert_eq!(stale_member(&nested), Some(Stale { member: 1, nested: true }));
        assert_eq!(stale_member("member 1 (x): too small"), None);
        assert!(w.contains("c: was member 2 before that member was replaced"), "{w}");
        assert!(w.contains("a-old: an older copy of member 0"), "{w}");
    }

    #[test]
    fn ties_are_errors() {
        let mut w = Vec::new();
        let Err(e) = pick_array(vec![f(l(1, 0, 1), "a"), f(l(2, 0, 1), "b")], &mut w) else { panic!("a tie was accepted") };
        assert!(e.contains("two arrays"), "{e}");
        let Err(e) = assemble(vec![f(l(1, 0, 4), "a"), f(l(1, 0, 4), "b")], vec![], |_| false, |_, _| None) else { panic!("a tie was accepted") };
        assert!(e.contains("two devices claim member 0"), "{e}");
        let a = assemble(vec![f(l(1, 0, 4), "a"), f(l(1, 1, 4), "b")], vec![], |i| i == 1, |f, _| (f.name == "a").then(|| "a: too small".to_string())).unwrap();
        assert!(a.slots.iter().all(Option::is_none));
        assert_eq!(a.warnings, ["a: too small"]);
    }

    /// `l(array, i, events)` of another session (a copy written apart).
    fn other(i: usize, events: u64, session: u128, prev: u128) -> Label {
        Label { session: Uuid::from_u128(session), prev_session: Uuid::from_u128(prev), ..l(1, i, events) }
    }

    #[test]
    fn a_copy_written_apart_is_named_not_used() {
        // Copy B of the array was opened and written: its member 2 is at the
        // same event counter as the original's members, or one behind.
        for b_events in [10, 9] {
            let found = vec![f(l(1, 0, 10), "a0"), f(l(1, 1, 10), "a1"), f(other(2, b_events, 77, 49), "b2")];
            let a = assemble(found, vec![], |_| false, |_, _| None).unwrap();
            assert_eq!(a.auth.session, Uuid::from_u128(50));
            assert!(a.slots[2].is_none(), "a member of another copy was used");
            let w = a.warnings.join("\n");
            assert!(w.contains("b2: member 2 carries the writes of another copy of this array"), "{w}");
        }
        // The copy's members outnumber the original's: the copy is the array.
        let found = vec![f(l(1, 0, 10), "a0"), f(other(1, 10, 77, 49), "b1"), f(other(2, 10, 77, 49), "b2")];
        let a = assemble(found, vec![], |_| false, |_, _| None).unwrap();
        assert_eq!(a.auth.session, Uuid::from_u128(77));
        assert_eq!(a.slots.iter().map(|s| s.as_ref().map(|s| s.0.as_str())).collect::<Vec<_>>(), [None, Some("b1"), Some("b2")]);
        // As many of each: no copy is the array.
        let Err(e) = assemble(vec![f(l(1, 0, 10), "a0"), f(other(1, 10, 77, 49), "b1")], vec![], |_| false, |_, _| None) else {
            panic!("a tie between two copies was accepted")
        };
        assert!(e.contains("two copies of array") && e.contains("b1 carry one copy's writes, a0 the other's"), "{e}");
    }

    #[test]
    fn a_member_that_missed_only_the_update_starting_a_session_serves() {
        // A crash in the first update of session 50 (which followed 49):
        // member 1 is one event behind and still in session 49.
        let found = vec![f(l(1, 0, 10), "a0"), f(other(1, 9, 49, 48), "a1"), f(l(1, 2, 10), "a2")];
        let a = assemble(found, vec![], |_| false, |_, _| None).unwrap();
        assert!(a.slots.iter().all(Option::is_some), "{:?}", a.warnings);
        // Session 49 at the same event counter is not that: it is a copy.
        let found = vec![f(l(1, 0, 10), "a0"), f(other(1, 10, 49, 48), "a1"), f(l(1, 2, 10), "a2")];
        let a = assemble(found, vec![], |_| false, |_, _| None).unwrap();
        assert!(a.slots[1].is_none());
        // Labels written before sessions (nil) assemble as they did.
        let old = |i| other(i, 10, 0, 0);
        let a = assemble(vec![f(old(0), "o0"), f(old(1), "o1"), f(old(2), "o2")], vec![], |_| false, |_, _| None).unwrap();
        assert!(a.slots.iter().all(Option::is_some) && a.warnings.is_empty());
    }
}
