//! The page cleaner: writes dirty pages in batches, cold end first, sorted by page number,
//! after the log is durable up to their LSNs (the WAL rule), through the torn-write guard.

use super::{Pin, Pool, UNSET};
use crate::error::{Error, Result};
use crate::format::encode_page;
use crate::probe::{self, Sabotage};
use std::sync::atomic::Ordering;

/// A page image prepared for write-back.
pub(super) struct Out {
    pub(super) pid: u64,
    pub(super) idx: u32,
    pub(super) version: u64,
    pub(super) lsn: u64,
    pub(super) bytes: Vec<u8>,
    /// The page is written without a double-write copy: the mode skips imaged pages and the
    /// log recovery would read holds an image of it, from which a torn write is repaired.
    pub(super) skip_copy: bool,
}

impl Pool {
    /// Writes one batch of dirty pages (cold end first), sorted by page number. With
    /// `rec_below`, only pages first dirtied before that LSN (checkpoint). Returns pages
    /// written.
    pub fn clean_batch(&self, rec_below: Option<u64>) -> Result<usize> {
        let _one = self.clean_lock.lock();
        let limit = self.batch_limit();
        let mut pins = Vec::new();
        {
            let inner = self.inner.lock();
            for i in inner.lru.cold_order() {
                if pins.len() >= limit {
                    break;
                }
                if let Some(pin) = self.pin_if_dirty(i, rec_below) {
                    pins.push(pin);
                }
            }
        }
        self.write_pinned(&pins)
    }

    /// Writes the superblock that moves the redo start to `c` (`write`) with no cleaner batch
    /// in flight, then lets batches leave out of the double-write area the pages imaged at or
    /// after `c`. A batch that chose by the old start is synced before the superblock is
    /// written, so no page whose image the new start drops can be torn by it.
    pub fn move_redo_start(&self, c: u64, write: impl FnOnce() -> Result<()>) -> Result<()> {
        let _one = self.clean_lock.lock();
        // Not after a failed batch: its torn pages may need the log images the move drops.
        self.guard(write)?;
        self.redo_start.store(c, Ordering::Release);
        Ok(())
    }

    /// Pages per cleaner batch (one double-write area, or 64).
    fn batch_limit(&self) -> usize {
        if self.torn.uses_doublewrite_area() {
            self.dw_pages
        } else {
            64
        }
    }

    /// Pins frame `i` when it holds a dirty page to write (first dirtied before `rec_below`).
    fn pin_if_dirty(&self, i: u32, rec_below: Option<u64>) -> Option<Pin<'_>> {
        let f = &self.frames[i as usize];
        let st = f.state.lock();
        if st.dirty && !st.in_progress && rec_below.is_none_or(|b| st.rec_lsn < b) {
            f.pin.fetch_add(1, Ordering::Acquire);
            Some(Pin { pool: self, idx: i })
        } else {
            None
        }
    }

    /// Writes the dirty pages of pinned frames (sorted by page number, WAL rule first) and
    /// marks those not changed meanwhile clean. Returns pages written.
    fn write_pinned(&self, pins: &[Pin]) -> Result<usize> {
        let applied = self.applied.load(Ordering::Acquire);
        // Pages imaged at or after this LSN skip the copy (`None`: every page is copied, as in
        // `doublewrite-full`). Stable until this batch's last sync: the redo start moves under
        // `clean_lock`, which the caller holds.
        let skip_from = self.torn.skips_imaged_pages().then(|| {
            if probe::is(self.sabotage, Sabotage::DoublewriteOldImages) {
                0
            } else {
                self.redo_start.load(Ordering::Acquire)
            }
        });
        let mut outs = Vec::with_capacity(pins.len());
        for pin in pins {
            let f = &self.frames[pin.idx as usize];
            let Some(g) = f.latch.try_read() else {
                continue;
            };
            let Some(page) = g.as_ref() else { continue };
            let st = f.state.lock();
            if !st.dirty || st.in_progress || page.lsn > applied {
                continue;
            }
            let mut bytes = Vec::with_capacity(self.page_size);
            encode_page(page, self.page_size, &mut bytes);
            outs.push(Out {
                pid: page.id,
                idx: pin.idx,
                version: st.version,
                lsn: page.lsn,
                bytes,
                skip_copy: skip_from.is_some_and(|s| st.imaged != UNSET && st.imaged >= s),
            });
        }
        if outs.is_empty() {
            return Ok(0);
        }
        outs.sort_by_key(|o| o.pid);
        let max_lsn = outs.iter().map(|o| o.lsn).max().unwrap_or(0);
        // WAL rule: the log must be durable up to every page LSN before the page is written.
        if !probe::is(self.sabotage, Sabotage::SkipWalRule) {
            self.wal.wait_durable(max_lsn)?;
            let durable = self.wal.durable();
            assert!(
                max_lsn <= durable,
                "WAL rule: page LSN {max_lsn} > durable LSN {durable}"
            );
        }
        self.write_out(&outs)?;
        for o in &outs {
            let mut st = self.frames[o.idx as usize].state.lock();
            if st.version == o.version {
                self.set_dirty(&mut st, false);
                st.relabeled = false;
                st.rec_lsn = UNSET;
            }
        }
        self.counters
            .cleaner_batches
            .fetch_add(1, Ordering::Relaxed);
        Ok(outs.len())
    }

    /// Writes every page first dirtied before `below` (all dirty pages with `None`), then syncs.
    /// The dirty set goes out in one ascending sweep of page numbers, a batch at a time, not in
    /// cold-LRU batches: on a disk that is long sequential runs instead of a seek per page (as the
    /// buffer-sizing paper describes CUBRID: I/O that no client waits for is sorted by page
    /// number). `pace(written, total)` is called before each batch but the first, outside the
    /// cleaner's lock (a paced checkpoint waits there); `total` is the pages the scan found.
    pub(crate) fn flush_dirty(
        &self,
        below: Option<u64>,
        pace: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        let wanted = |f: &super::Frame| {
            let st = f.state.lock();
            st.dirty && below.is_none_or(|b| st.rec_lsn < b)
        };
        loop {
            // One scan, without the pool lock (misses and evictions go on): the frame's mapped
            // page number only orders the writes. With `below`, no page can later get a first
            // change before it (every commit logged before it has stamped its pages), so later
            // rounds retry only the pages found here; without it, a final scan must find none.
            let mut pending: Vec<(u64, u32)> = self
                .frames
                .iter()
                .enumerate()
                .filter(|(_, f)| wanted(f))
                .map(|(i, f)| (f.mapped.load(Ordering::Relaxed), i as u32))
                .collect();
            if pending.is_empty() {
                break;
            }
            pending.sort_unstable();
            let total = pending.len();
            let mut done = 0;
            let mut idle = 0;
            while !pending.is_empty() {
                let mut written = 0;
                for (n, chunk) in pending.chunks(self.batch_limit()).enumerate() {
                    if n > 0 || done > 0 {
                        pace(done + written, total);
                    }
                    let _one = self.clean_lock.lock();
                    let pins: Vec<Pin> = chunk
                        .iter()
                        .filter_map(|&(_, i)| self.pin_if_dirty(i, below))
                        .collect();
                    written += self.write_pinned(&pins)?;
                }
                done += written;
                pending.retain(|&(_, i)| wanted(&self.frames[i as usize]));
                if written == 0 && !pending.is_empty() {
                    idle += 1;
                    if idle > 10_000 {
                        return Err(Error::Stalled(
                            "a checkpoint could not write its dirty pages: they stayed latched or in use by a running commit for 2 s",
                        ));
                    }
                    std::thread::sleep(std::time::Duration::from_micros(200));
                } else {
                    idle = 0;
                }
            }
            if below.is_some() {
                break;
            }
        }
        self.guard(|| Ok(self.dev.flush()?))
    }
}
