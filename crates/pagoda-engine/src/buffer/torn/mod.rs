//! Torn-write protection: how a batch of pages reaches the data device in each torn mode
//! ([`TornMode`]), so that a page a power cut tears in place is repaired, never kept, or at
//! least detected.
//!
//! - `doublewrite` ([`doublewrite`]): the batch goes to the double-write area first (one
//!   sequential write on its own stream, then a sync), then in place; a page torn in place is
//!   restored from its copy. A page whose image is in the log recovery would read skips the
//!   copy: redo pass 1 installs that image over a torn page ([`Pool::move_redo_start`] keeps
//!   "would read" true).
//! - `doublewrite-full`: the same, but every page is copied, as InnoDB does (the papers'
//!   baseline); the cleaner decides which pages skip ([`TornMode::skips_imaged_pages`]).
//! - `atomic` ([`atomic`]): each page is one 16 KiB (page-sized) atomic write; the device never
//!   keeps half a page.
//! - `none`: pages are written in place; a torn page is detected by its checksum, not repaired.
//!
//! With a flash cache the pages go to the cache instead, which guards its own writes.

use super::cleaner::Out;
use super::runs::write_runs;
use super::Pool;
use crate::error::{Error, Failure, Result};
use crate::probe::{self, Sabotage};
use crate::TornMode;
use pagoda_device::WriteHints;
use std::sync::atomic::Ordering;

mod atomic;
mod doublewrite;

impl Pool {
    pub(super) fn write_out(&self, outs: &[Out]) -> Result<()> {
        if probe::is(self.sabotage, Sabotage::IgnoreWriteError) {
            let _ = self.write_out_checked(outs);
            return Ok(());
        }
        self.guard(|| self.write_out_checked(outs))
    }

    /// Runs `step`, a write-out to the data device, unless an earlier one failed; a failure of
    /// `step` that fails the database refuses every later one (see `Pool::broken`). A failed
    /// sync leaves its batch's in-place writes neither durable nor intact, and a retried sync
    /// succeeds without them (Linux drops the dirty pages): a batch already waiting for the
    /// cleaner's lock would otherwise write the double-write area over their only copies.
    pub(super) fn guard(&self, step: impl FnOnce() -> Result<()>) -> Result<()> {
        if self.flash.is_some() || probe::is(self.sabotage, Sabotage::WriteOutAfterFailure) {
            // Pages go to the flash cache, which guards its own writes (and has no area).
            return step();
        }
        if let Some(f) = &*self.broken.lock() {
            return Err(Error::Failed(f.clone()));
        }
        step().map_err(|e| {
            if !e.fails_database() {
                return e;
            }
            let f = match e {
                Error::Failed(f) => f,
                e => Failure::new(e),
            };
            Error::Failed(self.broken.lock().get_or_insert(f).clone())
        })
    }

    fn write_out_checked(&self, outs: &[Out]) -> Result<()> {
        let data = WriteHints::stream(self.data_stream);
        // The WAL rule, page by page (the cleaner waited for the batch's largest LSN).
        if !probe::is(self.sabotage, Sabotage::SkipWalRule) {
            // Kept in release builds: a page ahead of the log is a page recovery cannot
            // undo after a crash, and the check is one comparison per page written.
            let durable = self.wal.durable();
            assert!(
                outs.iter().all(|o| o.lsn <= durable),
                "WAL rule: a page is written ahead of the log (durable LSN {durable})"
            );
        }
        if let Some(fc) = &self.flash {
            // The flash cache is the only place pages are written to; the data device gets
            // them from there (FaCE).
            let imgs = outs
                .iter()
                .map(|o| super::flash_cache::Img {
                    pid: o.pid,
                    lsn: o.lsn,
                    bytes: o.bytes.clone(),
                    dirty: true,
                    staged_at: 0,
                })
                .collect();
            fc.write(imgs)?;
            self.counters
                .writes
                .fetch_add(outs.len() as u64, Ordering::Relaxed);
            return Ok(());
        }
        match self.torn {
            TornMode::Doublewrite | TornMode::DoublewriteFull => {
                self.write_doublewrite(outs, data)?;
            }
            TornMode::Atomic => self.write_atomic(outs, data)?,
            TornMode::None => self.write_runs(outs, data)?,
        }
        self.counters
            .writes
            .fetch_add(outs.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Writes sorted pages, merging runs of consecutive page ids into one request.
    fn write_runs(&self, outs: &[Out], hints: WriteHints) -> Result<()> {
        let pages: Vec<(u64, &[u8])> = outs.iter().map(|o| (o.pid, o.bytes.as_slice())).collect();
        write_runs(&self.dev, &pages, self.page_size, hints)
    }
}
