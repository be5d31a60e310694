//! Latching pages: reads (a hit through the pool's hints or the page table, latched without
//! a pin; a miss pinned and loaded), writes (with or without a before-image for undo), and
//! new pages installed without a read.

use super::{latch_order, Pool, ReadPage, WritePage};
use crate::error::{Error, Result};
use crate::format::Page;
use std::sync::atomic::Ordering;

impl Pool {
    /// Latches `pid` for reading.
    pub fn read(&self, pid: u64) -> Result<ReadPage<'_>> {
        if let Some(page) = self.read_hit(pid) {
            return Ok(page);
        }
        loop {
            let pin = self.pin(pid, None)?;
            let guard = self.frames[pin.idx as usize].latch.read();
            if guard.as_ref().is_some_and(|p| p.id == pid) {
                latch_order::acquired();
                return Ok(ReadPage {
                    guard,
                    _pin: Some(pin),
                });
            }
        }
    }

    /// The hit path of [`Pool::read`]: the latch is tried under the shard's read lock (never
    /// waited for there: a writer holding it may be waiting for this shard's write lock), so
    /// no pin count changes hands between cores on a hit; `None` sends the caller to the
    /// pinned path.
    #[inline]
    fn read_hit(&self, pid: u64) -> Option<ReadPage<'_>> {
        let hinted = self.hints.lookup(pid).and_then(|idx| {
            let f = self.frames.get(idx as usize)?;
            let guard = f.latch.try_read()?;
            // Latched, the frame keeps its page; mapped, that page is the current one (an
            // unmapped frame may still hold an old copy).
            (f.mapped.load(Ordering::Acquire) == pid && guard.as_ref().is_some_and(|p| p.id == pid))
                .then_some((guard, idx))
        });
        let (guard, idx) = match hinted {
            Some(x) => x,
            None => {
                let t = self.shard(pid).read();
                let idx = *t.get(&pid)?;
                let guard = self.frames[idx as usize].latch.try_read()?;
                drop(t);
                if guard.as_ref().is_none_or(|p| p.id != pid) {
                    return None;
                }
                self.hints.remember(pid, idx);
                (guard, idx)
            }
        };
        self.trace.record(pid);
        self.counters.hits.add(0, 1);
        if self.needs_promotion(idx) {
            // Latched, the frame cannot be taken for another page, and it is in the lists
            // (an evictor unlinks a victim only while it holds the pool mutex).
            let mut inner = self.inner.lock();
            self.promote(&mut inner, idx);
        }
        latch_order::acquired();
        Some(ReadPage { guard, _pin: None })
    }

    /// Latches `pid` for writing.
    pub fn write(&self, pid: u64) -> Result<WritePage<'_>> {
        loop {
            let pin = self.pin(pid, None)?;
            let guard = self.frames[pin.idx as usize].latch.write();
            if guard.as_ref().is_some_and(|p| p.id == pid) {
                if self.journaling.load(Ordering::Acquire) {
                    self.note_before(pid, pin.idx, guard.as_ref());
                }
                latch_order::acquired();
                return Ok(WritePage { guard, pin });
            }
        }
    }

    /// Latches `pid` for writing without copying it into the undo journal: the caller changes
    /// one leaf entry in place and records how to take that back ([`Pool::note_leaf_undo`])
    /// before it does.
    pub fn write_in_place(&self, pid: u64) -> Result<WritePage<'_>> {
        loop {
            let pin = self.pin(pid, None)?;
            let guard = self.frames[pin.idx as usize].latch.write();
            if guard.as_ref().is_some_and(|p| p.id == pid) {
                latch_order::acquired();
                return Ok(WritePage { guard, pin });
            }
        }
    }

    /// Installs a page without reading the device (new pages, recovery images); returns it
    /// latched for writing. The caller marks it modified.
    pub fn install(&self, page: Page) -> Result<WritePage<'_>> {
        let pid = page.id;
        if pid >= self.capacity_pages {
            return Err(Error::Full {
                page: pid,
                capacity_pages: self.capacity_pages,
            });
        }
        let mut slot = Some(page);
        loop {
            let pin = self.pin(pid, Some(&mut slot))?;
            let mut guard = self.frames[pin.idx as usize].latch.write();
            let journaling = self.journaling.load(Ordering::Acquire);
            if let Some(p) = slot.take() {
                // The page was resident: replace its contents.
                if journaling && guard.as_ref().is_some_and(|g| g.id == pid) {
                    self.note_before(pid, pin.idx, guard.as_ref());
                }
                *guard = Some(p);
            } else if journaling {
                self.note_before(pid, pin.idx, None);
            }
            if guard.as_ref().is_some_and(|p| p.id == pid) {
                latch_order::acquired();
                return Ok(WritePage { guard, pin });
            }
        }
    }
}
