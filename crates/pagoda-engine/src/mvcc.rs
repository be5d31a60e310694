//! Multi-version concurrency control: snapshot isolation on top of the B+trees.
//!
//! The trees hold the newest applied value of every key. Each commit first records, per key it
//! writes, a version `(cts, new value, previous value)` in an ordered in-memory map, then
//! changes the tree. A reader with snapshot `s` reads the tree, then consults the key's version
//! chain: the newest version with `cts <= s` wins; if every version is newer than `s`, the
//! oldest version's previous value is the answer; with no chain the tree value is visible to
//! everyone. Versions with `cts <=` the oldest active snapshot are garbage-collected.
//!
//! A commit becomes visible (the visible timestamp moves past it) only once its log record is
//! durable, and commits become visible in commit order. This is what makes pipelined commit
//! safe: a pending commit's versions are chained (so it holds its keys against later writers)
//! but invisible until the flush thread has made its record durable. Conflicts are first-committer-wins:
//! a transaction that writes a key whose newest version is newer than its snapshot aborts with
//! [`crate::Error::Conflict`].

use crate::striped::{stripe, STRIPES};
use crossbeam::utils::CachePadded;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// A value as kept in memory (`None` = deleted / absent).
pub type Value = Option<Arc<[u8]>>;

/// One committed version of a key.
#[derive(Clone, Debug)]
pub struct Version {
    /// Commit timestamp.
    pub cts: u64,
    /// The value it wrote.
    pub val: Value,
    /// The value before it.
    pub prev: Value,
}

/// Map key: (table id, key).
pub type VKey = (u32, Vec<u8>);

/// Active snapshot timestamps of one stripe, each with the number of transactions holding
/// it, oldest first. A vector that keeps its capacity, not a map: registering and releasing
/// a snapshot is on every transaction's path and must not allocate.
#[derive(Debug, Default)]
struct Snapshots(Vec<(u64, usize)>);

impl Snapshots {
    /// Registers `s`. Snapshots are taken under the stripe's lock from a timestamp that only
    /// grows, so `s` is normally at least every timestamp here and is pushed at the end.
    fn add(&mut self, s: u64) {
        match self.0.last_mut() {
            Some((t, n)) if *t == s => *n += 1,
            Some((t, _)) if *t > s => match self.0.binary_search_by_key(&s, |&(t, _)| t) {
                Ok(i) => self.0[i].1 += 1,
                Err(i) => self.0.insert(i, (s, 1)),
            },
            _ => self.0.push((s, 1)),
        }
    }

    /// Gives up one holder of `s`; false if `s` is not here.
    fn remove(&mut self, s: u64) -> bool {
        let Ok(i) = self.0.binary_search_by_key(&s, |&(t, _)| t) else {
            return false;
        };
        self.0[i].1 -= 1;
        if self.0[i].1 == 0 {
            self.0.remove(i);
        }
        true
    }

    fn oldest(&self) -> Option<u64> {
        self.0.first().map(|&(t, _)| t)
    }
}

/// Version chains, snapshots and the visible timestamp.
#[derive(Debug)]
pub struct Mvcc {
    chains: RwLock<BTreeMap<VKey, VecDeque<Version>>>,
    /// Keys in `chains`: a point read of a key with no chain skips the map's lock when there
    /// are none at all (a read-only phase after the versions were collected).
    chained: AtomicUsize,
    gc_queue: Mutex<VecDeque<(u64, VKey)>>,
    /// Active snapshots (timestamp -> count), striped by thread: every transaction registers
    /// one and releases it, so one shared lock would bounce between cores on every begin.
    active: Box<[CachePadded<Mutex<Snapshots>>]>,
    visible: AtomicU64,
    pending: Mutex<VecDeque<(u64, u64)>>,
}

impl Default for Mvcc {
    fn default() -> Self {
        Self {
            chains: RwLock::default(),
            chained: AtomicUsize::new(0),
            gc_queue: Mutex::default(),
            active: (0..STRIPES).map(|_| CachePadded::default()).collect(),
            visible: AtomicU64::new(0),
            pending: Mutex::default(),
        }
    }
}

/// What a chain says for a snapshot.
#[derive(Debug)]
pub enum Resolved {
    /// No versions: the tree value is visible.
    Tree,
    /// This value (or absence).
    Value(Value),
}

fn resolve(chain: &VecDeque<Version>, snapshot: u64) -> Resolved {
    if chain.is_empty() {
        return Resolved::Tree;
    }
    match chain.iter().rev().find(|v| v.cts <= snapshot) {
        Some(v) => Resolved::Value(v.val.clone()),
        None => Resolved::Value(chain[0].prev.clone()),
    }
}

impl Mvcc {
    /// Starts with `visible` as the newest visible commit.
    pub fn new(visible: u64) -> Self {
        let m = Self::default();
        m.visible.store(visible, Ordering::Release);
        m
    }

    /// The newest visible commit timestamp.
    pub fn visible(&self) -> u64 {
        self.visible.load(Ordering::Acquire)
    }

    /// Takes a snapshot (registered until [`Mvcc::release`]).
    pub fn snapshot(&self) -> u64 {
        let mut a = self.active[stripe()].lock();
        // Read under the stripe's lock: see `gc` for why that is enough.
        let s = self.visible();
        a.add(s);
        s
    }

    /// Releases a snapshot (registered in this thread's stripe, unless the transaction moved
    /// to another thread: any stripe holding `s` then gives one up, which keeps the count of
    /// every timestamp over all stripes right).
    pub fn release(&self, s: u64) {
        let unregister = |a: &Mutex<Snapshots>| a.lock().remove(s);
        let mine = stripe();
        if unregister(&self.active[mine]) {
            return;
        }
        for (i, a) in self.active.iter().enumerate() {
            if i != mine && unregister(a) {
                return;
            }
        }
    }

    /// Resolves `key` of `table` for `snapshot`.
    pub fn read(&self, table: u32, key: &[u8], snapshot: u64) -> Resolved {
        // A commit adds its chain before it changes the tree (and releases the page latch the
        // reader then took), so a reader that saw the new value in the tree sees the count.
        if self.chained.load(Ordering::Acquire) == 0 {
            return Resolved::Tree;
        }
        let chains = self.chains.read();
        match chains.get(&(table, key.to_vec())) {
            Some(c) => resolve(c, snapshot),
            None => Resolved::Tree,
        }
    }

    /// Resolves every chained key of `table` in `[lo, hi]` (as bounds).
    pub fn read_range(
        &self,
        table: u32,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snapshot: u64,
    ) -> Vec<(Vec<u8>, Value)> {
        let map = |b: Bound<&[u8]>| match b {
            Bound::Included(k) => Bound::Included((table, k.to_vec())),
            Bound::Excluded(k) => Bound::Excluded((table, k.to_vec())),
            Bound::Unbounded => Bound::Unbounded,
        };
        let (lo, hi) = (map(lo), map(hi));
        let lo = match lo {
            Bound::Unbounded => Bound::Included((table, Vec::new())),
            b => b,
        };
        let hi = match hi {
            Bound::Unbounded => Bound::Excluded((table + 1, Vec::new())),
            b => b,
        };
        if !crate::bounds::range_ok(&lo, &hi) {
            return Vec::new();
        }
        let chains = self.chains.read();
        chains
            .range((lo, hi))
            .filter_map(|((_, k), c)| match resolve(c, snapshot) {
                Resolved::Tree => None,
                Resolved::Value(v) => Some((k.clone(), v)),
            })
            .collect()
    }

    /// The newest committed version's timestamp of `key`, if chained.
    pub fn newest(&self, key: &VKey) -> Option<u64> {
        self.chains
            .read()
            .get(key)
            .and_then(|c| c.back().map(|v| v.cts))
    }

    /// The newest committed value of a chained key (`None` = not chained).
    pub fn newest_value(&self, key: &VKey) -> Option<Value> {
        self.chains
            .read()
            .get(key)
            .and_then(|c| c.back().map(|v| v.val.clone()))
    }

    /// Adds a version (before the tree changes).
    pub fn push(&self, key: VKey, v: Version) {
        let cts = v.cts;
        let mut chains = self.chains.write();
        let c = chains.entry(key.clone()).or_insert_with(|| {
            self.chained.fetch_add(1, Ordering::AcqRel);
            VecDeque::new()
        });
        c.push_back(v);
        drop(chains);
        self.gc_queue.lock().push_back((cts, key));
    }

    /// Takes back the version `cts` pushed for `key` by a commit that failed before logging.
    pub fn retract(&self, key: &VKey, cts: u64) {
        let mut chains = self.chains.write();
        if let Some(c) = chains.get_mut(key) {
            if c.back().is_some_and(|v| v.cts == cts) {
                c.pop_back();
            }
            if c.is_empty() {
                chains.remove(key);
                self.chained.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Records a commit whose record ends at `end_lsn` (in commit order).
    pub fn committed(&self, cts: u64, end_lsn: u64) {
        self.pending.lock().push_back((cts, end_lsn));
    }

    /// Makes every commit whose record is durable (end ≤ `durable`) visible, in order.
    pub fn advance(&self, durable: u64) {
        let mut p = self.pending.lock();
        while let Some(&(cts, end)) = p.front() {
            if end > durable {
                break;
            }
            self.visible.fetch_max(cts, Ordering::AcqRel);
            p.pop_front();
        }
    }

    /// The oldest snapshot any transaction holds or may yet take: the oldest active one, or
    /// the visible timestamp if older. A commit at or below it was visible to every snapshot.
    pub fn horizon(&self) -> u64 {
        // Visible first, then the stripes: a snapshot registered in a stripe after it was read
        // here took the visible timestamp after this read, so it is at least the horizon.
        let visible = self.visible();
        self.active
            .iter()
            .filter_map(|a| a.lock().oldest())
            .min()
            .unwrap_or(u64::MAX)
            .min(visible)
    }

    /// Drops versions no snapshot needs.
    pub fn gc(&self) {
        let horizon = self.horizon();
        let mut todo = Vec::new();
        {
            let mut q = self.gc_queue.lock();
            while q.front().is_some_and(|(c, _)| *c <= horizon) {
                if let Some((_, k)) = q.pop_front() {
                    todo.push(k);
                }
            }
        }
        if todo.is_empty() {
            return;
        }
        let mut chains = self.chains.write();
        for k in todo {
            if let Some(c) = chains.get_mut(&k) {
                while c.front().is_some_and(|v| v.cts <= horizon) {
                    c.pop_front();
                }
                if c.is_empty() {
                    chains.remove(&k);
                    self.chained.fetch_sub(1, Ordering::AcqRel);
                }
            }
        }
    }

    /// Whether any key of `table` still has versions in memory.
    pub fn has_versions(&self, table: u32) -> bool {
        if self.chained.load(Ordering::Acquire) == 0 {
            return false;
        }
        let lo = (table, Vec::new());
        self.chains
            .read()
            .range(lo..)
            .next()
            .is_some_and(|((t, _), _)| *t == table)
    }

    /// Versions held in memory.
    pub fn versions(&self) -> usize {
        self.chains.read().values().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::Snapshots;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// The stripe's list counts holders like a map of timestamp -> count, whatever the
        /// order of adds and removes.
        #[test]
        fn snapshots_count_like_a_map(ops in proptest::collection::vec((any::<bool>(), 0u64..8), 0..200)) {
            let mut list = Snapshots::default();
            let mut model: BTreeMap<u64, usize> = BTreeMap::new();
            for (add, s) in ops {
                if add {
                    list.add(s);
                    *model.entry(s).or_default() += 1;
                } else {
                    let had = model.contains_key(&s);
                    prop_assert_eq!(list.remove(s), had);
                    if let Some(n) = model.get_mut(&s) {
                        *n -= 1;
                        if *n == 0 {
                            model.remove(&s);
                        }
                    }
                }
                prop_assert_eq!(list.oldest(), model.keys().next().copied());
                let flat: Vec<(u64, usize)> = model.iter().map(|(&k, &v)| (k, v)).collect();
                prop_assert_eq!(&list.0, &flat);
            }
        }
    }
}
