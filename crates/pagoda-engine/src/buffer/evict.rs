//! Giving frames back: the victim of a page fault (coldest clean, unpinned page) and the
//! trim back to the pool's budget after a commit spilled past it.

use super::{Inner, Pool, UNSET};
use std::sync::atomic::Ordering;

impl Pool {
    /// Whether a frame may be evicted (unpinned, unlatched, clean): checked again under its
    /// shard's write lock, where no pin or page-table hit can arrive.
    pub(super) fn evictable(&self, idx: u32) -> bool {
        let f = &self.frames[idx as usize];
        f.pin.load(Ordering::Acquire) == 0 && !f.latch.is_locked() && !f.state.lock().dirty
    }

    /// A frame for a page fault: a free one while under budget, else the coldest clean
    /// unpinned page's, else (during a commit) spill room.
    pub(super) fn victim(&self, inner: &mut Inner) -> Option<u32> {
        if inner.resident < self.budget {
            if let Some(i) = inner.free.pop() {
                inner.resident += 1;
                return Some(i);
            }
        }
        // Latched counts as in use: a hit is latched without a pin (`Pool::read`), and the
        // thread holding it may be the one faulting here (a descent holds the parent while it
        // reads the child), so waiting for that latch would never end.
        let found = inner.lru.cold_order().find(|&i| {
            let f = &self.frames[i as usize];
            f.pin.load(Ordering::Acquire) == 0 && !f.latch.is_locked() && !f.state.lock().dirty
        });
        if let Some(i) = found {
            inner.lru.unlink(i);
            return Some(i);
        }
        // Spill room, for a running commit only (no clean page to evict: writing one would be
        // I/O under the commit lock, and the commit's own pages cannot be written yet).
        if self.journaling.load(Ordering::Acquire) {
            if let Some(i) = inner.free.pop() {
                inner.resident += 1;
                self.over_budget.store(true, Ordering::Release);
                return Some(i);
            }
        }
        None
    }

    /// After a commit spilled: gives back frames of clean pages until the pool is within its
    /// budget again (dirty ones follow once the cleaner has written them).
    pub fn trim(&self) {
        if !self.over_budget.load(Ordering::Acquire) {
            return;
        }
        let mut inner = self.inner.lock();
        while inner.resident > self.budget {
            let found = inner.lru.cold_order().find(|&i| {
                let f = &self.frames[i as usize];
                f.pin.load(Ordering::Acquire) == 0 && !f.state.lock().dirty
            });
            let Some(i) = found else { return };
            let old = inner.ids[i as usize];
            let mut t = self.shard(old).write();
            if !self.evictable(i) {
                return;
            }
            let Some(mut guard) = self.frames[i as usize].latch.try_write() else {
                return;
            };
            t.remove(&old);
            self.frames[i as usize]
                .mapped
                .store(u64::MAX, Ordering::Release);
            drop(t);
            *guard = None;
            inner.ids[i as usize] = u64::MAX;
            self.young_at[i as usize].store(UNSET, Ordering::Relaxed);
            inner.lru.unlink(i);
            inner.free.push(i);
            inner.resident -= 1;
            self.counters.evictions.fetch_add(1, Ordering::Relaxed);
            self.left_dram(old);
        }
        self.over_budget.store(false, Ordering::Release);
    }
}
