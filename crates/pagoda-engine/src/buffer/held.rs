//! Free pages that snapshots older than the commit that freed them may still read: the pool
//! keeps the set, the allocator (`freelist.rs`) skips them, and a commit releases them once
//! the MVCC horizon has passed the commit that freed them.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Free pages that must not be reused yet: page -> timestamp of the commit that freed it.
#[derive(Debug, Default)]
pub(crate) struct Held {
    inner: Mutex<HeldInner>,
    /// Pages held: allocation looks at the map only when some are.
    len: AtomicUsize,
}

#[derive(Debug, Default)]
struct HeldInner {
    pages: HashMap<u64, u64>,
    /// `(cts, page)` in the order the pages were held, so by commit timestamp.
    order: VecDeque<(u64, u64)>,
}

impl Held {
    /// Holds `pid`, freed by the commit `cts`, until [`Held::release`] passes `cts`. A page
    /// held again (its commit was undone, and a later one freed it) keeps the later commit's
    /// timestamp.
    pub(crate) fn hold(&self, pid: u64, cts: u64) {
        let mut h = self.inner.lock();
        let c = h.pages.entry(pid).or_insert(cts);
        *c = (*c).max(cts);
        h.order.push_back((cts, pid));
        self.len.store(h.pages.len(), Ordering::Release);
    }

    /// Lets go of the pages of commits at or below `horizon`, the oldest snapshot (or the
    /// visible timestamp, if older): no snapshot that read before those commits remains.
    pub(crate) fn release(&self, horizon: u64) {
        if self.is_empty() {
            return;
        }
        let mut h = self.inner.lock();
        while let Some(&(cts, pid)) = h.order.front() {
            if cts > horizon {
                break;
            }
            h.order.pop_front();
            if h.pages.get(&pid).is_some_and(|&c| c <= horizon) {
                h.pages.remove(&pid);
            }
        }
        self.len.store(h.pages.len(), Ordering::Release);
    }

    /// Pages held.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The index of the last page of `list` that is not held (the one to take).
    pub(crate) fn pick(&self, list: &[u64]) -> Option<usize> {
        if self.is_empty() {
            return list.len().checked_sub(1);
        }
        let h = self.inner.lock();
        list.iter().rposition(|p| !h.pages.contains_key(p))
    }

    /// Pages of `list` not held, counted up to `enough`.
    pub(crate) fn free_in(&self, list: &[u64], enough: u64) -> usize {
        if self.is_empty() {
            return list.len();
        }
        let h = self.inner.lock();
        list.iter()
            .filter(|p| !h.pages.contains_key(p))
            .take(usize::try_from(enough).unwrap_or(usize::MAX))
            .count()
    }

    pub(crate) fn contains(&self, pid: u64) -> bool {
        !self.is_empty() && self.inner.lock().pages.contains_key(&pid)
    }
}
