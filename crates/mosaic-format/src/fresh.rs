//! The one freshness rule: which devices may serve as which members.
//!
//! ```text
//!   labels read from the devices given (and from path hints)
//!     the array = the UUID most devices carry; others reported, not used
//!     authoritative label = the highest event counter (choose, below)
//!     member index out of range ───────────────────────┐
//!     replaced since (member UUID differs) ────────────┤
//!     stale: events + EVENT_MARGIN < the array's ──────┼──> not used, named
//!     another copy's session (diverged copy) ──────────┤    in a warning
//!     the kind's own reason (too small, ...) ──────────┤
//!     two devices claim one slot: the fresher wins ────┘
//!     a device the array recorded replacing, found where it looks for
//!       its own (Kind::retired) ──> not used, not said
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
//! device of another copy is named and not used.
//!
//! **Which copy is the array** ([`choose`]).  A copy of an array is its
//! own array: identities are UUIDs, paths are hints, and copies are told
//! apart by session.  Event counters decide *within one copy* only, so one
//! device of a copy written further must not out-vote the members of the
//! array it was put among:
//!
//! ```text
//!   the freshest label (highest event counter; at a tie, the session
//!   most devices there carry) accounts for every device: each serves
//!   under it, is failed or replaced on its record, or is out of range
//!     ──> it is the array (stale members stay stale)
//!   else the devices disagree about which writes are the array's (two
//!   copies' members mixed): each session's freshest label is a candidate;
//!   the one whose own devices can serve the array (the kind's `serves`:
//!   its code tolerates the rest out), with the most of them, wins
//!     ──> the others' devices are named, never read
//!   no candidate can serve it, or two serve it with as many members
//!     ──> refused, naming each copy's devices
//! ```
//!
//! A member that left the array (missing at an open, failed, replaced) is
//! recorded so by the writes that went on without it, so it is accounted
//! for and stays stale, however few the members that went on.  A device
//! two or more events behind that the freshest label still counts in
//! service was never left behind by this array: it is an old copy of a
//! member or another copy's, and only the members that can serve the
//! array decide.  So a stale member is never read, and a copy's member
//! never out-votes the array's own.

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

/// Which of the labels given as `(events, session)` is the freshest: one
/// at the highest event counter, of the session most devices there carry
/// (the last such, as `max_by_key` picks).  [`choose`] starts from it.
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

/// What the one rule asks of a kind about the array a label describes.
pub struct Kind<'a, T> {
    /// Member `i` is failed on the record of `auth`: its device is not
    /// used until replaced (the failure was reported when it happened).
    pub failed: &'a dyn Fn(&Label, usize) -> bool,
    /// The kind's own reason the device `f` cannot serve in the array of
    /// `auth` (too small, ...).
    pub own: &'a dyn Fn(&Found<T>, &Label) -> Option<String>,
    /// Whether the array of `auth` can be served with only the member
    /// slots marked in `filled` (its code tolerates the others out).
    pub serves: &'a dyn Fn(&Label, &[bool]) -> bool,
    /// The device `f` is one the array of `auth` recorded replacing,
    /// found where the array looks for its own devices (not named by the
    /// user): not used, and not worth a warning.
    pub retired: &'a dyn Fn(&Found<T>, &Label) -> bool,
}

/// Which label among `found` is the array's (its index; None when there
/// is none): the freshest, unless a device it cannot account for shows
/// copies mixed, when the copy whose members can serve the array wins
/// (see the module doc).  Every kind picks through here.
pub fn choose<T>(found: &[Found<T>], kind: &Kind<T>) -> Result<Option<usize>, String> {
    let keys: Vec<(u64, Uuid)> = found.iter().map(|f| (f.label.events, f.label.session)).collect();
    let Some(top) = pick_authoritative(&keys) else { return Ok(None) };
    let heads = heads(found);
    if heads.len() < 2 || found.iter().all(|f| accounts_for(&found[top].label, f, kind)) {
        return Ok(Some(top));
    }
    let serving: Vec<(usize, usize)> = heads
        .iter()
        .filter_map(|&h| {
            let filled = filled(found, &found[h].label, kind);
            (kind.serves)(&found[h].label, &filled).then(|| (h, filled.iter().filter(|x| **x).count()))
        })
        .collect();
    let most = serving.iter().map(|s| s.1).max();
    let best: Vec<usize> = serving.iter().filter(|s| Some(s.1) == most).map(|s| s.0).collect();
    match best[..] {
        [one] => Ok(Some(one)),
        _ => Err(copies_refused(found, &heads, &best, kind)),
    }
}

/// Whether the array of `auth` accounts for the device `f`: it serves
/// under it, or is failed or replaced on its record, or is out of range
/// (named either way).  A device it counts in service that is stale, or
/// of another session, shows another copy's writes.
fn accounts_for<T>(auth: &Label, f: &Found<T>, kind: &Kind<T>) -> bool {
    let (l, i) = (&f.label, f.label.member_index);
    if i >= auth.members || l.kind != auth.kind || l.member_uuid != auth.member_uuids[i] || (kind.failed)(auth, i) {
        return true;
    }
    !is_stale(l.events, auth.events) && same_session(l, auth)
}

/// One label per session among `found`: its freshest.
fn heads<T>(found: &[Found<T>]) -> Vec<usize> {
    let mut heads: Vec<usize> = Vec::new();
    for (i, f) in found.iter().enumerate() {
        match heads.iter_mut().find(|h| found[**h].label.session == f.label.session) {
            Some(h) if found[*h].label.events < f.label.events => *h = i,
            Some(_) => {}
            None => heads.push(i),
        }
    }
    heads
}

/// The member slots of the array of `auth` that devices among `found`
/// could fill (each passing every check of [`assemble`]).
fn filled<T>(found: &[Found<T>], auth: &Label, kind: &Kind<T>) -> Vec<bool> {
    let mut filled = vec![false; auth.members];
    for f in found {
        let i = f.label.member_index;
        if i < auth.members && !(kind.failed)(auth, i) && !(kind.retired)(f, auth) && verdict(&f.name, &f.label, auth).or_else(|| (kind.own)(f, auth)).is_none() {
            filled[i] = true;
        }
    }
    filled
}

/// How to give one copy's members, for an array opened by its directory
/// too (a tier's or remapped array's inner arrays are opened no other
/// way).  An old copy of a member put back (from a backup) looks the same
/// as another copy's member: both carry an earlier session of the array.
const ONE_COPY: &str = ": list them, or move the other copy's files out of the array's directory \
     (a member put back from an old backup is such a file: without it the array opens degraded, and `mosaic replace` rebuilds the member)";

/// The refusal when devices of copies written apart are mixed and no one
/// copy is the array: `serving` are the candidates among `heads` that can
/// serve it, as many members each (none, or two or more).
fn copies_refused<T>(found: &[Found<T>], heads: &[usize], serving: &[usize], kind: &Kind<T>) -> String {
    let group = |h: usize| {
        let auth = &found[h].label;
        let filled = filled(found, auth, kind);
        let names: Vec<&str> = found
            .iter()
            .filter(|f| f.label.member_index < auth.members && filled[f.label.member_index] && verdict(&f.name, &f.label, auth).is_none())
            .map(|f| f.name.as_str())
            .collect();
        format!("{} (session {}, event counter {})", names.join(", "), short_session(auth.session), auth.events)
    };
    let uuid = found[heads[0]].label.array_uuid;
    let count = if heads.len() == 2 { "two".to_string() } else { heads.len().to_string() };
    if serving.is_empty() {
        let groups: Vec<String> = heads.iter().map(|&h| group(h)).collect();
        return format!(
            "members of {count} copies of array {uuid} that were written apart, none with enough members to serve it: {}; \
             give the members of one copy (each copy is its own array){ONE_COPY}",
            groups.join("; ")
        );
    }
    format!(
        "members of two copies of array {uuid} that were written apart, as many of each: {} carry one copy's writes, {} the other's; \
         give the members of one copy (each copy is its own array){ONE_COPY}",
        group(serving[0]),
        group(serving[1])
    )
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
             are at session {}, event counter {}): it is another copy's member, written apart from this one, so it is not used",
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

/// Assign devices of one array (after [`pick_array`]) to member slots,
/// under the label [`choose`] picks; `kind` says what is the kind's own
/// (failed on record, too small, enough to serve, replaced).  Two devices
/// with the same event counter claiming one slot is an error; otherwise
/// the fresher wins.
pub fn assemble<T>(mut found: Vec<Found<T>>, mut warnings: Vec<String>, kind: &Kind<T>) -> Result<Assembled<T>, String> {
    let Some(a) = choose(&found, kind)? else {
        let why = if warnings.is_empty() { String::new() } else { format!(": {}", warnings.join("; ")) };
        return Err(format!("no member of any array found{why}"));
    };
    let auth = found[a].label.clone();
    // The freshest device first, so it wins a slot two devices claim.
    found.sort_by_key(|f| std::cmp::Reverse(f.label.events));
    let mut slots: Vec<Option<(String, T)>> = (0..auth.members).map(|_| None).collect();
    let mut slot_events = vec![0u64; auth.members];
    for f in found {
        let i = f.label.member_index;
        if i < auth.members && (kind.failed)(&auth, i) || (kind.retired)(&f, &auth) {
            continue;
        }
        if let Some(why) = verdict(&f.name, &f.label, &auth).or_else(|| (kind.own)(&f, &auth)) {
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
        l_of(array, i, events, 3)
    }

    /// Member `i` of an array of `n` members (session 50, after 49).
    fn l_of(array: u128, i: usize, events: u64, n: usize) -> Label {
        Label {
            kind: "fixed".into(),
            array_uuid: Uuid::from_u128(array),
            member_uuid: Uuid::from_u128(100 + i as u128),
            member_index: i,
            members: n,
            events,
            member_uuids: (0..n).map(|j| Uuid::from_u128(100 + j as u128)).collect(),
            created: 0,
            policy: serde_json::Value::Null,
            session: Uuid::from_u128(50),
            prev_session: Uuid::from_u128(49),
        }
    }

    fn f(label: Label, name: &str) -> Found<()> {
        Found { label, name: name.into(), dev: () }
    }

    fn never(_: &Label, _: usize) -> bool {
        false
    }

    fn none_own(_: &Found<()>, _: &Label) -> Option<String> {
        None
    }

    fn not_retired(_: &Found<()>, _: &Label) -> bool {
        false
    }

    /// A code that tolerates one member out (raid5).
    fn one_out(_: &Label, filled: &[bool]) -> bool {
        filled.iter().filter(|x| !**x).count() <= 1
    }

    /// A kind that fails nothing on record, tolerates one member out and
    /// has no reason of its own.
    const RAID5: Kind<'static, ()> = Kind { failed: &never, own: &none_own, serves: &one_out, retired: &not_retired };

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
        let a = assemble(ours, w, &RAID5).unwrap();
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
        let Err(e) = assemble(vec![f(l(1, 0, 4), "a"), f(l(1, 0, 4), "b")], vec![], &RAID5) else { panic!("a tie was accepted") };
        assert!(e.contains("two devices claim member 0"), "{e}");
        let skip_1 = |_: &Label, i: usize| i == 1;
        let small_a = |f: &Found<()>, _: &Label| (f.name == "a").then(|| "a: too small".to_string());
        let kind = Kind { failed: &skip_1, own: &small_a, ..RAID5 };
        let a = assemble(vec![f(l(1, 0, 4), "a"), f(l(1, 1, 4), "b")], vec![], &kind).unwrap();
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
            let a = assemble(found, vec![], &RAID5).unwrap();
            assert_eq!(a.auth.session, Uuid::from_u128(50));
            assert!(a.slots[2].is_none(), "a member of another copy was used");
            let w = a.warnings.join("\n");
            assert!(w.contains("b2: member 2 carries the writes of another copy of this array") && w.contains("another copy's member"), "{w}");
        }
        // The copy's members outnumber the original's: the copy is the array.
        let found = vec![f(l(1, 0, 10), "a0"), f(other(1, 10, 77, 49), "b1"), f(other(2, 10, 77, 49), "b2")];
        let a = assemble(found, vec![], &RAID5).unwrap();
        assert_eq!(a.auth.session, Uuid::from_u128(77));
        assert_eq!(a.slots.iter().map(|s| s.as_ref().map(|s| s.0.as_str())).collect::<Vec<_>>(), [None, Some("b1"), Some("b2")]);
        // As many of each, neither able to serve: no copy is the array.
        let Err(e) = assemble(vec![f(l(1, 0, 10), "a0"), f(other(1, 10, 77, 49), "b1")], vec![], &RAID5) else {
            panic!("a tie between two copies was accepted")
        };
        assert!(e.contains("two copies of array") && e.contains("none with enough members") && e.contains("give the members of one copy"), "{e}");
        assert!(e.contains("b1 (session 00000000, event counter 10)") || e.contains("a0 (session"), "{e}");
    }

    /// The copy's member that went further (cp -a P Q, Q written, one of
    /// Q's files put in P) does not out-vote P's members: P serves from
    /// its own three, the intruder is named as another copy's member.
    #[test]
    fn one_member_of_a_copy_written_further_does_not_out_vote_the_array() {
        let p = |i| l_of(1, i, 9, 4);
        let q2 = Label { session: Uuid::from_u128(77), prev_session: Uuid::from_u128(50), ..l_of(1, 2, 13, 4) };
        let found = vec![f(p(0), "P/m0"), f(p(1), "P/m1"), f(q2, "P/m2"), f(p(3), "P/m3")];
        let a = assemble(found, vec![], &RAID5).unwrap();
        assert_eq!((a.auth.events, a.auth.session), (9, Uuid::from_u128(50)));
        let used: Vec<Option<&str>> = a.slots.iter().map(|s| s.as_ref().map(|s| s.0.as_str())).collect();
        assert_eq!(used, [Some("P/m0"), Some("P/m1"), None, Some("P/m3")]);
        let w = a.warnings.join("\n");
        assert!(w.contains("P/m2: member 2 carries the writes of another copy") && w.contains("another copy's member") && w.contains("not used"), "{w}");
        assert!(!w.contains("stale"), "the array's own members were called stale: {w}");
        // Two members of each copy (raid5 of 4): neither can serve; both named.
        let q = |i| Label { session: Uuid::from_u128(77), prev_session: Uuid::from_u128(50), ..l_of(1, i, 13, 4) };
        let found = vec![f(p(0), "P/m0"), f(p(1), "P/m1"), f(q(2), "P/m2"), f(q(3), "P/m3")];
        let Err(e) = assemble(found, vec![], &RAID5) else { panic!("two copies' members made one array") };
        assert!(e.contains("P/m2, P/m3 (session") && e.contains("event counter 13") && e.contains("P/m0, P/m1 (session") && e.contains("none with enough"), "{e}");
        // A mirror whose halves went apart (both could serve): refused.
        let two_way = |_: &Label, filled: &[bool]| filled.iter().any(|x| *x);
        let kind = Kind { serves: &two_way, ..RAID5 };
        let q0 = Label { session: Uuid::from_u128(77), prev_session: Uuid::from_u128(50), ..l_of(1, 0, 13, 2) };
        let Err(e) = assemble(vec![f(q0, "m0"), f(l_of(1, 1, 9, 2), "m1")], vec![], &kind) else { panic!("a mirror's diverged halves were mixed") };
        assert!(e.contains("as many of each") && e.contains("m0 (session") && e.contains("m1 (session"), "{e}");
    }

    /// A member that left the array (recorded failed by the writes that
    /// went on without it) stays stale however few members went on: the
    /// freshest label accounts for it.
    #[test]
    fn a_member_recorded_failed_stays_stale_whoever_outnumbers() {
        // A three-way mirror ran on member 0 alone (members 1 and 2 failed
        // on its record); 1 and 2 come back, from an older session.
        let mirror = |_: &Label, filled: &[bool]| filled.iter().any(|x| *x);
        let failed = |auth: &Label, i: usize| auth.events == 20 && i > 0;
        let kind = Kind { failed: &failed, serves: &mirror, ..RAID5 };
        let ran = Label { session: Uuid::from_u128(60), prev_session: Uuid::from_u128(59), ..l(1, 0, 20) };
        let found = vec![f(ran, "m0"), f(l(1, 1, 9), "m1"), f(l(1, 2, 9), "m2")];
        let a = assemble(found, vec![], &kind).unwrap();
        assert_eq!(a.auth.events, 20);
        assert_eq!(a.slots.iter().map(|s| s.as_ref().map(|s| s.0.as_str())).collect::<Vec<_>>(), [Some("m0"), None, None]);
        // Without that record, the two that agree are the array.
        let ran = Label { session: Uuid::from_u128(60), prev_session: Uuid::from_u128(59), ..l(1, 0, 20) };
        let kind = Kind { serves: &mirror, ..RAID5 };
        let a = assemble(vec![f(ran, "m0"), f(l(1, 1, 9), "m1"), f(l(1, 2, 9), "m2")], vec![], &kind).unwrap();
        assert_eq!(a.auth.events, 9);
    }

    #[test]
    fn a_retired_device_is_not_used_and_not_said() {
        let mut old = l(1, 1, 4);
        old.member_uuid = Uuid::from_u128(7);
        let retired = |f: &Found<()>, _: &Label| f.label.member_uuid == Uuid::from_u128(7);
        let kind = Kind { retired: &retired, ..RAID5 };
        let a = assemble(vec![f(l(1, 0, 10), "a"), f(l(1, 2, 10), "c"), f(old, "b-old")], vec![], &kind).unwrap();
        assert!(a.slots[1].is_none() && a.warnings.is_empty(), "{:?}", a.warnings);
    }

    #[test]
    fn a_member_that_missed_only_the_update_starting_a_session_serves() {
        // A crash in the first update of session 50 (which followed 49):
        // member 1 is one event behind and still in session 49.
        let found = vec![f(l(1, 0, 10), "a0"), f(other(1, 9, 49, 48), "a1"), f(l(1, 2, 10), "a2")];
        let a = assemble(found, vec![], &RAID5).unwrap();
        assert!(a.slots.iter().all(Option::is_some), "{:?}", a.warnings);
        // Session 49 at the same event counter is not that: it is a copy.
        let found = vec![f(l(1, 0, 10), "a0"), f(other(1, 10, 49, 48), "a1"), f(l(1, 2, 10), "a2")];
        let a = assemble(found, vec![], &RAID5).unwrap();
        assert!(a.slots[1].is_none());
        // Labels written before sessions (nil) assemble as they did.
        let old = |i| other(i, 10, 0, 0);
        let a = assemble(vec![f(old(0), "o0"), f(old(1), "o1"), f(old(2), "o2")], vec![], &RAID5).unwrap();
        assert!(a.slots.iter().all(Option::is_some) && a.warnings.is_empty());
    }
}
