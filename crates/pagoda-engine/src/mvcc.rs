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

use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// Version chains, snapshots and the visible timestamp.
#[derive(Debug, Default)]
pub struct Mvcc {
    chains: RwLock<BTreeMap<VKey, VecDeque<Version>>>,
    gc_queue: Mutex<VecDeque<(u64, VKey)>>,
    active: Mutex<BTreeMap<u64, usize>>,
    visible: AtomicU64,
    pending: Mutex<VecDeque<(u64, u64)>>,
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
        let mut a = self.active.lock();
        let s = self.visible();
        *a.entry(s).or_insert(0) += 1;
        s
    }

    /// Releases a snapshot.
    pub fn release(&self, s: u64) {
        let mut a = self.active.lock();
        if let Some(n) = a.get_mut(&s) {
            *n -= 1;
            if *n == 0 {
                a.remove(&s);
            }
        }
    }

    /// Resolves `key` for `snapshot`.
    pub fn read(&self, key: &VKey, snapshot: u64) -> Resolved {
        let chains = self.chains.read();
        match chains.get(key) {
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
        self.chains
            .write()
            .entry(key.clone())
            .or_default()
            .push_back(v);
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

    /// Drops versions no snapshot needs.
    pub fn gc(&self) {
        let horizon = {
            let a = self.active.lock();
            a.keys()
                .next()
                .copied()
                .unwrap_or(u64::MAX)
                .min(self.visible())
        };
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
                }
            }
        }
    }

    /// Versions held in memory.
    pub fn versions(&self) -> usize {
        self.chains.read().values().map(VecDeque::len).sum()
    }
}
