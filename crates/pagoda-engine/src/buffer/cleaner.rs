//! The page cleaner: writes dirty pages in batches, cold end first, sorted by page number,
//! after the log is durable up to their LSNs (the WAL rule), through the torn-write guard.

use super::{Pin, Pool, UNSET};
use crate::error::{Error, Result};
use crate::format::encode_page;
use crate::probe::{self, Sabotage};
use crate::TornMode;
use std::sync::atomic::Ordering;

/// A page image prepared for write-back.
pub(super) struct Out {
    pub(super) pid: u64,
    pub(super) idx: u32,
    pub(super) version: u64,
    pub(super) lsn: u64,
    pub(super) bytes: Vec<u8>,
}

impl Pool {
    /// Writes one batch of dirty pages (cold end first), sorted by page number. With
    /// `rec_below`, only pages first dirtied before that LSN (checkpoint). Returns pages
    /// written.
    pub fn clean_batch(&self, rec_below: Option<u64>) -> Result<usize> {
        let _one = self.clean_lock.lock();
        let limit = match self.torn {
            TornMode::Doublewrite => self.dw_pages,
            _ => 64,
        };
        let mut pins = Vec::new();
        {
            let inner = self.inner.lock();
            for i in inner.lru.cold_order() {
                if pins.len() >= limit {
                    break;
                }
                let f = &self.frames[i as usize];
                let st = f.state.lock();
                if st.dirty && !st.in_progress && rec_below.is_none_or(|b| st.rec_lsn < b) {
                    f.pin.fetch_add(1, Ordering::Acquire);
                    pins.push(Pin { pool: self, idx: i });
                }
            }
        }
        let applied = self.applied.load(Ordering::Acquire);
        let mut outs = Vec::with_capacity(pins.len());
        for pin in &pins {
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
                st.dirty = false;
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
    pub fn flush_dirty(&self, below: Option<u64>) -> Result<()> {
        let mut idle = 0;
        loop {
            let remaining = self
                .frames
                .iter()
                .filter(|f| {
                    let st = f.state.lock();
                    st.dirty && below.is_none_or(|b| st.rec_lsn < b)
                })
                .count();
            if remaining == 0 {
                break;
            }
            let n = self.clean_batch(below)?;
            if n == 0 {
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
        self.dev.flush()?;
        Ok(())
    }
}
