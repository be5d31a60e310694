//! Torn-write protection: how a batch of pages reaches the data device in each
//! torn mode, and the double-write repair at recovery.
//!
//! - `doublewrite`: the batch goes to the double-write area first (one sequential write on its
//!   own stream, then a sync), then in place; a page torn in place is restored from its copy.
//!   A page whose image is in the log recovery would read skips the copy: redo pass 1
//!   installs that image over a torn page ([`Pool::move_redo_start`] keeps "would read" true).
//! - `doublewrite-full`: the same, but every page is copied, as InnoDB does (the papers'
//!   baseline); the cleaner decides which pages skip ([`TornMode::skips_imaged_pages`]).
//! - `atomic`: each page is one atomic write (the device never keeps half a page).
//! - `none`: pages are written in place; a torn page is detected by its checksum, not repaired.

use super::cleaner::Out;
use super::runs::write_runs;
use super::Pool;
use crate::error::{Error, Failure, Result};
use crate::format::{check_page, is_zero};
use crate::probe::{self, Sabotage};
use crate::TornMode;
use pagoda_device::WriteHints;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

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
            let durable = self.wal.durable();
            debug_assert!(
                outs.iter().all(|o| o.lsn <= durable),
                "a page is written ahead of the log (durable LSN {durable})"
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
            TornMode::Doublewrite | TornMode::DoublewriteFull
                if probe::is(self.sabotage, Sabotage::SkipDoublewrite) =>
            {
                self.write_runs(outs, data)?;
                self.dev.flush()?;
            }
            TornMode::Atomic if probe::is(self.sabotage, Sabotage::NonAtomicPages) => {
                for o in outs {
                    self.dev.write(self.sector_of(o.pid), &o.bytes, data)?;
                }
            }
            TornMode::Doublewrite | TornMode::DoublewriteFull => {
                // Pages whose image is in the log recovery would read (new leaves of a bulk
                // load, split halves) are repaired from there if torn: only the others are
                // copied, and a batch of such pages alone costs one sync, not two.
                let copied = outs.iter().filter(|o| !o.skip_copy).count();
                if copied > 0 {
                    let mut buf = Vec::with_capacity(copied * self.page_size);
                    for o in outs.iter().filter(|o| !o.skip_copy) {
                        buf.extend_from_slice(&o.bytes);
                    }
                    self.dev.write(
                        self.sector_of(self.dw_start),
                        &buf,
                        WriteHints::stream(self.dw_stream),
                    )?;
                    self.dev.flush()?;
                }
                self.counters
                    .dw_writes
                    .fetch_add(copied as u64, Ordering::Relaxed);
                self.counters
                    .dw_skipped
                    .fetch_add((outs.len() - copied) as u64, Ordering::Relaxed);
                self.write_runs(outs, data)?;
                self.dev.flush()?;
            }
            TornMode::Atomic => {
                let hints = WriteHints::atomic(self.data_stream);
                for o in outs {
                    self.dev.write(self.sector_of(o.pid), &o.bytes, hints)?;
                }
            }
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

    /// Recovery in the double-write modes: copies each valid page of the double-write area over its
    /// home when the home copy is torn or older (pages below `first_page`, the superblock and
    /// the area itself, are never targets). Returns the number of torn pages repaired.
    ///
    /// A copy at or after `redo_start` repairs a damaged home: every page a batch since the last
    /// completed checkpoint wrote was changed at or after it (the checkpoint wrote the older
    /// ones), and redo replays what followed. An older copy is left over from an earlier batch:
    /// it repairs the home only when the home is that very version with a few bits rotten
    /// ([`ROT_BITS`] at most differ); else the home may have held a newer version whose changes
    /// before `redo_start` redo would not replay, and it stays damaged for the checks to report
    /// (bit rot of a newer version, or a misdirected write that put another page there).
    pub fn repair_from_doublewrite(&self, first_page: u64, redo_start: u64) -> Result<u64> {
        let mut best: BTreeMap<u64, (u64, Vec<u8>)> = BTreeMap::new();
        for i in 0..self.dw_pages as u64 {
            let buf = self.read_raw(self.dw_start + i)?;
            if is_zero(&buf) {
                continue;
            }
            let id = u64::from_le_bytes(buf[8..16].try_into().unwrap_or([0xff; 8]));
            if id < first_page || id >= self.capacity_pages {
                continue;
            }
            if let Ok(lsn) = check_page(&buf, id) {
                if best.get(&id).is_none_or(|(l, _)| *l < lsn) {
                    best.insert(id, (lsn, buf));
                }
            }
        }
        let mut repaired = 0;
        let mut wrote = false;
        for (pid, (lsn, bytes)) in best {
            let cur = self.read_raw(pid)?;
            match check_page(&cur, pid) {
                Ok(l) if l >= lsn => continue,
                Ok(_) => {}
                Err(_)
                    if lsn < redo_start
                        && !rotten_copy_of(&cur, &bytes)
                        && !probe::is(self.sabotage, Sabotage::DoublewriteStaleCopy) =>
                {
                    continue
                }
                Err(_) => repaired += 1,
            }
            self.dev.write(
                self.sector_of(pid),
                &bytes,
                WriteHints::stream(self.data_stream),
            )?;
            wrote = true;
        }
        if wrote {
            self.dev.flush()?;
        }
        Ok(repaired)
    }
}

/// Bits that may differ between a damaged home page and an older double-write copy for the
/// copy to count as the home's own version (bit rot flips one; a torn write or another
/// version differs in far more).
const ROT_BITS: u32 = 8;

/// Whether `home` is `copy` with at most [`ROT_BITS`] bits flipped.
fn rotten_copy_of(home: &[u8], copy: &[u8]) -> bool {
    let mut bits = 0;
    for (a, b) in home.iter().zip(copy) {
        bits += (a ^ b).count_ones();
        if bits > ROT_BITS {
            return false;
        }
    }
    home.len() == copy.len()
}
