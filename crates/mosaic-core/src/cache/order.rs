//! The cache's victim and LRU orders without a search tree.
//!
//! [`StampOrder`] keeps entries `(bucket, stamp, key)` in the order
//! "highest bucket first, then oldest stamp, then smallest key", the order
//! of a `BTreeSet<(Reverse(bucket), stamp, key)>`, and gives exactly that
//! set's first element, ties included.  Each bucket is a doubly-linked
//! list (indices into one slab) kept sorted by `(stamp, key)`; a bitmap
//! says which buckets hold entries.  The cache stamps entries with its
//! clock, which never goes back, so nearly every insert lands at its
//! bucket's tail, O(1).  Entries that share the newest stamp (one write's
//! pages, or a whole destage at one clock) are also listed by key in a
//! small sorted vector per bucket, so where a tie goes is a binary search
//! rather than a walk.  Only an entry re-listed with an older stamp than
//! its bucket's newest (a row losing pages to a write larger than the
//! cache) walks back.  Remove and first are O(1) (remove of an entry with
//! the newest stamp also takes it out of that vector).  The caller keeps
//! the [`Handle`] an insert returns to remove the entry later.

/// Where an entry lives in its [`StampOrder`] (valid until removed).
pub(crate) type Handle = u32;

/// No entry (an unlisted row, the end of a list).
pub(crate) const NIL: Handle = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node<K> {
    stamp: u64,
    key: K,
    bucket: u32,
    prev: Handle,
    next: Handle,
}

/// One bucket's list: its ends, and its entries with the newest stamp
/// by key (all of them while `newest` is not empty).
#[derive(Debug, Clone)]
struct Ends<K> {
    head: Handle,
    tail: Handle,
    stamp: u64,
    newest: Vec<(K, Handle)>,
}

impl<K> Default for Ends<K> {
    fn default() -> Self {
        Ends { head: NIL, tail: NIL, stamp: 0, newest: Vec::new() }
    }
}

/// Entries in the order of `(Reverse(bucket), stamp, key)` (see the module).
#[derive(Debug, Clone)]
pub(crate) struct StampOrder<K> {
    nodes: Vec<Node<K>>,
    free: Vec<Handle>,
    ends: Vec<Ends<K>>,
    /// Bit b set: bucket b holds an entry.
    busy: Vec<u64>,
    len: usize,
}

impl<K> Default for StampOrder<K> {
    fn default() -> Self {
        StampOrder { nodes: Vec::new(), free: Vec::new(), ends: Vec::new(), busy: Vec::new(), len: 0 }
    }
}

impl<K: Ord + Copy> StampOrder<K> {
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn sorts_after(&self, at: Handle, stamp: u64, key: &K) -> bool {
        let n = &self.nodes[at as usize];
        (n.stamp, &n.key) > (stamp, key)
    }

    /// Where a new entry goes in its bucket: after `prev` (NIL: first),
    /// and its place among the entries with the newest stamp, if it is one.
    fn place(&self, bucket: usize, stamp: u64, key: &K) -> (Handle, Option<usize>) {
        let e = &self.ends[bucket];
        if !e.newest.is_empty() && stamp == e.stamp {
            let i = e.newest.partition_point(|(k, _)| k < key);
            let prev = match i {
                0 => self.nodes[e.newest[0].1 as usize].prev,
                i => e.newest[i - 1].1,
            };
            return (prev, Some(i));
        }
        if e.tail == NIL || self.nodes[e.tail as usize].stamp < stamp {
            return (e.tail, Some(0));
        }
        // An older stamp than the newest: walk back past what sorts after it.
        let mut prev = e.newest.first().map_or(e.tail, |&(_, h)| self.nodes[h as usize].prev);
        while prev != NIL && self.sorts_after(prev, stamp, key) {
            prev = self.nodes[prev as usize].prev;
        }
        (prev, None)
    }

    /// Add an entry (its key must not be in the order already).
    pub(crate) fn insert(&mut self, bucket: usize, stamp: u64, key: K) -> Handle {
        if bucket >= self.ends.len() {
            self.ends.resize_with(bucket + 1, Ends::default);
            self.busy.resize(bucket / 64 + 1, 0);
        }
        let (prev, newest) = self.place(bucket, stamp, &key);
        let next = if prev == NIL { self.ends[bucket].head } else { self.nodes[prev as usize].next };
        let node = Node { stamp, key, bucket: bucket as u32, prev, next };
        let h = match self.free.pop() {
            Some(h) => {
                self.nodes[h as usize] = node;
                h
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as Handle
            }
        };
        let e = &mut self.ends[bucket];
        match newest {
            Some(i) if !e.newest.is_empty() && stamp == e.stamp => e.newest.insert(i, (key, h)),
            Some(_) => {
                e.newest.clear();
                e.newest.push((key, h));
                e.stamp = stamp;
            }
            None => {}
        }
        self.join(bucket, prev, h);
        self.join(bucket, h, next);
        self.busy[bucket / 64] |= 1 << (bucket % 64);
        self.len += 1;
        h
    }

    /// Make `b` follow `a` in `bucket`'s list (NIL `a`: `b` is the head;
    /// NIL `b`: `a` is the tail).
    fn join(&mut self, bucket: usize, a: Handle, b: Handle) {
        match a {
            NIL => self.ends[bucket].head = b,
            a => self.nodes[a as usize].next = b,
        }
        match b {
            NIL => self.ends[bucket].tail = a,
            b => self.nodes[b as usize].prev = a,
        }
    }

    /// Take an entry out; returns its stamp.
    pub(crate) fn remove(&mut self, h: Handle) -> u64 {
        let Node { stamp, bucket, prev, next, key } = self.nodes[h as usize];
        let b = bucket as usize;
        let e = &mut self.ends[b];
        if stamp == e.stamp && !e.newest.is_empty() {
            let i = e.newest.partition_point(|(k, _)| *k < key);
            debug_assert!(e.newest.get(i).is_some_and(|&(_, x)| x == h));
            e.newest.remove(i);
        }
        self.join(b, prev, next);
        if self.ends[b].head == NIL {
            self.busy[b / 64] &= !(1 << (b % 64));
        }
        self.free.push(h);
        self.len -= 1;
        stamp
    }

    /// The first entry: the highest bucket's oldest (smallest key among
    /// equal stamps), as (bucket, stamp, key).
    pub(crate) fn first(&self) -> Option<(usize, u64, K)> {
        let (w, bits) = self.busy.iter().enumerate().rev().find(|(_, &b)| b != 0)?;
        let bucket = w * 64 + 63 - bits.leading_zeros() as usize;
        let n = &self.nodes[self.ends[bucket].head as usize];
        Some((bucket, n.stamp, n.key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::{BTreeSet, HashMap};

    /// One step of a random sequence: insert a key (or re-list it if
    /// present: remove, then insert) at the clock, at an older stamp, or
    /// after advancing the clock; or remove a present key.
    #[derive(Debug, Clone)]
    enum Op {
        Now { key: u16, bucket: u8 },
        Old { key: u16, bucket: u8, back: u8 },
        Tick,
        Remove { key: u16 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u16..40, 0u8..6).prop_map(|(key, bucket)| Op::Now { key, bucket }),
            1 => (0u16..40, 0u8..6, 0u8..8).prop_map(|(key, bucket, back)| Op::Old { key, bucket, back }),
            2 => Just(Op::Tick),
            2 => (0u16..40).prop_map(|key| Op::Remove { key }),
        ]
    }

    /// An entry of the old order.
    type Old = (Reverse<usize>, u64, u16);

    /// The old order (a `BTreeSet` of `(Reverse(bucket), stamp, key)`) and
    /// the new one, driven alike.
    #[derive(Default)]
    struct Both {
        old: BTreeSet<Old>,
        new: StampOrder<u16>,
        at: HashMap<u16, (Old, Handle)>,
        clock: u64,
    }

    impl Both {
        fn remove(&mut self, key: u16) {
            if let Some((k, h)) = self.at.remove(&key) {
                assert!(self.old.remove(&k));
                assert_eq!(self.new.remove(h), k.1);
            }
        }
        fn insert(&mut self, key: u16, bucket: usize, stamp: u64) {
            self.remove(key);
            let k = (Reverse(bucket), stamp, key);
            self.old.insert(k);
            self.at.insert(key, (k, self.new.insert(bucket, stamp, key)));
        }
        fn step(&mut self, op: &Op) {
            match *op {
                Op::Now { key, bucket } => self.insert(key, bucket as usize, self.clock),
                Op::Old { key, bucket, back } => self.insert(key, bucket as usize, self.clock.saturating_sub(back as u64)),
                Op::Tick => self.clock += 1,
                Op::Remove { key } => self.remove(key),
            }
        }
        fn check(&self) {
            let old = self.old.first().map(|&(Reverse(b), s, k)| (b, s, k));
            assert_eq!(self.new.first(), old);
            assert_eq!(self.new.len(), self.old.len());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// After every step the new order's first entry is the old
        /// `BTreeSet`'s, ties on stamps included.
        #[test]
        fn same_first_as_the_btreeset(ops in prop::collection::vec(op(), 1..400)) {
            let mut both = Both::default();
            for op in &ops {
                both.step(op);
                both.check();
            }
            // Drained in order, both agree to the end.
            while let Some(&(Reverse(b), s, k)) = both.old.first() {
                prop_assert_eq!(both.new.first(), Some((b, s, k)));
                both.remove(k);
            }
            prop_assert!(both.new.is_empty());
        }
    }

    #[test]
    fn ties_on_a_stamp_go_by_key() {
        let mut o = StampOrder::default();
        let a = o.insert(0, 5, 9u64);
        o.insert(0, 5, 3);
        o.insert(0, 5, 7);
        assert_eq!(o.first(), Some((0, 5, 3)));
        o.insert(2, 9, 1);
        assert_eq!(o.first(), Some((2, 9, 1)));
        o.insert(2, 4, 8);
        assert_eq!(o.first(), Some((2, 4, 8)));
        assert_eq!(o.remove(a), 5);
        assert_eq!(o.len(), 4);
    }
}
