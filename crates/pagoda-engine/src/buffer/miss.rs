//! The miss path of a pin: a victim frame taken from the LRU (its page unmapped, a clean
//! page staged for the flash cache), the new page mapped into it and read (or installed),
//! and the frame given back if the read fails. With no frame free, the pin waits for the
//! cleaner, within a patience.

use super::{flash_cache, Inner, Page, Pin, Pool, PIN_PATIENCE, UNSET};
use crate::error::{Error, Result};
use crate::format::{decode_page, is_zero};
use parking_lot::{MutexGuard, RwLockWriteGuard};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// A frame's latch held for writing while its page is loaded.
type Loading<'a> = RwLockWriteGuard<'a, Option<Page>>;

/// How long a pin has waited for a free frame.
#[derive(Default)]
struct FrameWait {
    attempts: u32,
    /// Since when no frame came free (reset when the cleaner frees some).
    since: Option<Instant>,
}

impl Pool {
    /// Pins the frame of `pid`, loading it when missing (`install` given: installs that page
    /// instead of reading).
    pub(super) fn pin(&self, pid: u64, install: Option<&mut Option<Page>>) -> Result<Pin<'_>> {
        self.trace.record(pid);
        let mut wait = FrameWait::default();
        loop {
            if let Some(pin) = self.pin_resident(pid) {
                return Ok(pin);
            }
            let mut inner = self.inner.lock();
            // Mappings change only under `inner`: a miss seen here is a miss.
            if let Some(idx) = self.lookup_pin(pid) {
                self.promote(&mut inner, idx);
                drop(inner);
                return Ok(Pin { pool: self, idx });
            }
            let Some(idx) = self.victim(&mut inner) else {
                drop(inner);
                self.wait_for_frame(&mut wait)?;
                continue;
            };
            let Some((guard, evicted)) = self.take_frame(&mut inner, idx) else {
                continue;
            };
            self.map_frame(inner, idx, pid);
            if let (Some(fc), Some((page, staged_at))) = (&self.flash, evicted) {
                let mut bytes = Vec::with_capacity(self.page_size);
                crate::format::encode_page(&page, self.page_size, &mut bytes);
                fc.stage(flash_cache::Img {
                    pid: page.id,
                    lsn: page.lsn,
                    bytes,
                    dirty: false,
                    staged_at,
                });
            }
            {
                let mut st = self.frames[idx as usize].state.lock();
                self.set_dirty(&mut st, false);
                st.relabeled = false;
                st.in_progress = false;
                st.rec_lsn = UNSET;
                st.imaged = UNSET;
                st.version += 1;
            }
            return self.load(pid, idx, guard, install);
        }
    }

    /// No frame is free: runs the cleaner and backs off. Frames free up as the cleaner writes
    /// pages, which may wait for the log to become durable: gives up after a while in which
    /// no frame came free and the cleaner freed none (others may take the ones it frees), not
    /// after a number of quick retries that a slow sync outlasts.
    fn wait_for_frame(&self, wait: &mut FrameWait) -> Result<()> {
        wait.attempts += 1;
        let since = *wait.since.get_or_insert_with(Instant::now);
        if wait.attempts > 50 && since.elapsed() > PIN_PATIENCE {
            return Err(Error::BufferFull);
        }
        let cleaned = self.clean_batch(None)?;
        if cleaned > 0 {
            wait.since = None;
        } else if wait.attempts > 50 {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        if wait.attempts > 2 {
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Takes victim frame `idx`: unmaps its page and latches it for the load, with the clean
    /// page it held when that goes to the flash cache (pages `all`). `None`: the frame was
    /// pinned or latched meanwhile (it stays in the list; pick another).
    fn take_frame(
        &self,
        inner: &mut Inner,
        idx: u32,
    ) -> Option<(Loading<'_>, Option<(Page, u64)>)> {
        let frame = &self.frames[idx as usize];
        let old = inner.ids[idx as usize];
        if old != u64::MAX {
            // Unmap under the shard's write lock: no pin or page-table hit can arrive after
            // this check (a hint's hit is refused once `mapped` no longer names the page).
            let mut t = self.shard(old).write();
            if !self.evictable(idx) {
                drop(t);
                inner.lru.insert_mid(idx);
                return None;
            }
            t.remove(&old);
            frame.mapped.store(u64::MAX, Ordering::Release);
        }
        let Some(mut guard) = frame.latch.try_write() else {
            // Someone still holds the latch (should not happen for an unpinned frame): keep
            // the frame, unmapped, in the list.
            inner.ids[idx as usize] = u64::MAX;
            inner.lru.insert_mid(idx);
            inner.free.retain(|&f| f != idx);
            return None;
        };
        if old != u64::MAX {
            self.counters.evictions.fetch_add(1, Ordering::Relaxed);
            self.left_dram(old);
        }
        // A clean page leaving DRAM goes to the flash cache too (pages `all`).
        let evicted = match &self.flash {
            Some(fc) if old != u64::MAX && fc.caches_clean() && !frame.state.lock().relabeled => {
                guard.take().map(|p| (p, fc.stage_mark()))
            }
            _ => None,
        };
        Some((guard, evicted))
    }

    /// Maps `pid` to frame `idx`, pinned, in the middle of the LRU list; releases `inner`.
    fn map_frame(&self, mut inner: MutexGuard<'_, Inner>, idx: u32, pid: u64) {
        let frame = &self.frames[idx as usize];
        inner.ids[idx as usize] = pid;
        self.young_at[idx as usize].store(UNSET, Ordering::Relaxed);
        inner.lru.insert_mid(idx);
        frame.pin.fetch_add(1, Ordering::Acquire);
        let mut t = self.shard(pid).write();
        t.insert(pid, idx);
        frame.mapped.store(pid, Ordering::Release);
        self.hints.remember(pid, idx);
    }

    /// Fills the latched frame `idx` with `pid`'s page: `install`'s, or read from the data
    /// device (a page never written is corruption). A failed read gives the frame back.
    fn load<'a>(
        &'a self,
        pid: u64,
        idx: u32,
        mut guard: Loading<'a>,
        install: Option<&mut Option<Page>>,
    ) -> Result<Pin<'a>> {
        let pin = Pin { pool: self, idx };
        let loaded = match install {
            Some(p) => Ok(p.take()),
            None => {
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                let read = self.read_page(pid).or_else(|e| {
                    crate::probe::unreadable_as_empty(self.sabotage, e, pid, self.page_size)
                });
                read.and_then(|mut b| {
                    crate::probe::trust_damaged_page(self.sabotage, &mut b, pid);
                    if is_zero(&b) {
                        Err(Error::corrupt(
                            pid,
                            "page was never written (reads as zeros)",
                        ))
                    } else {
                        decode_page(&b, pid).map(Some)
                    }
                })
            }
        };
        match loaded {
            Ok(p) => {
                *guard = p;
                Ok(pin)
            }
            Err(e) => {
                *guard = None;
                drop(guard);
                let mut inner = self.inner.lock();
                let mut t = self.shard(pid).write();
                if t.get(&pid) == Some(&idx) {
                    t.remove(&pid);
                    self.frames[idx as usize]
                        .mapped
                        .store(u64::MAX, Ordering::Release);
                    drop(t);
                    inner.ids[idx as usize] = u64::MAX;
                    inner.lru.unlink(idx);
                    inner.free.push(idx);
                    inner.resident -= 1;
                    self.left_dram(pid);
                }
                Err(e)
            }
        }
    }
}
