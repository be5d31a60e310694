//! The double-write area (torn modes `doublewrite` and `doublewrite-full`, InnoDB's double-write
//! buffer): a batch's pages are first copied to the area, on a write stream of its own, and
//! synced, then written in place; at recovery a page torn in place is restored from its copy.
//! The area's stream is what the DWB-FTL paper's FTL keeps apart in flash ([`crate::stream`]).

use crate::buffer::cleaner::Out;
use crate::buffer::Pool;
use crate::error::Result;
use crate::format::{check_page, is_zero};
use crate::probe::{self, Sabotage};
use pagoda_device::WriteHints;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

impl Pool {
    /// Writes a batch through the double-write area: the copies in one sequential write on the
    /// area's stream and a sync, then the pages in place (`data`) and a sync.
    pub(super) fn write_doublewrite(&self, outs: &[Out], data: WriteHints) -> Result<()> {
        if probe::is(self.sabotage, Sabotage::SkipDoublewrite) {
            self.write_runs(outs, data)?;
            self.dev.flush()?;
            return Ok(());
        }
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
        Ok(())
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
