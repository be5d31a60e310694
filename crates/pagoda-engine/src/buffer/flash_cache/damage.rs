//! A flash slot that fails its checksum or cannot be read. Its page is taken from the data
//! device when that copy is as new as the slot's (a clean page, or a dirty one already written
//! back): the read goes on, counted. When the slot holds the only newest copy, the read fails
//! naming the slot and the page, and the slot stays in the directory, so that every later
//! read fails too: dropping it would serve the data device's older version next time, and let
//! the next checkpoint record that the database no longer depends on the cache.

use super::{FlashCache, Slot};
use crate::error::{Error, Result};
use crate::format::{check_page, SECTOR};
use crate::FlashPolicy;
use pagoda_device::DeviceError;
use std::sync::atomic::Ordering;

/// What is wrong with a slot.
pub(super) enum SlotFault {
    /// Read, but not the image its directory entry describes (checksum, page id or LSN).
    Damaged,
    /// The cache device failed the read.
    Unreadable(DeviceError),
}

impl FlashCache {
    /// Serves a read of `slot` (its entry `meta`) that found it damaged or unreadable: the
    /// data device's copy when it is as new (the slot is dropped), else the error naming both.
    pub(super) fn reread(&self, slot: u32, meta: &Slot, fault: SlotFault) -> Result<Vec<u8>> {
        let what = match &fault {
            SlotFault::Damaged => "fails its check".to_string(),
            SlotFault::Unreadable(e) => format!("cannot be read ({e})"),
        };
        let buf = self.instead_of(slot, meta, fault)?;
        let at = self.geo.slot_sector(slot) * SECTOR as u64;
        crate::probe::emit(
            &self.observer,
            crate::probe::Event::Served(format!(
                "page {}: flash cache slot {slot} (byte {at}) {what}; served from the data device",
                meta.pid
            )),
        );
        let mut st = self.state.lock();
        if st.dir.get(&meta.pid) == Some(&slot) && st.slots[slot as usize].seq == meta.seq {
            st.evict(slot, self.policy == FlashPolicy::Lru);
        }
        drop(st);
        self.c.rereads.fetch_add(1, Ordering::Relaxed);
        Ok(buf)
    }

    /// The data device's copy of the page in `slot`, found damaged or unreadable, if it is at
    /// least as new as the slot's; else the error naming the slot and the page.
    pub(super) fn instead_of(&self, slot: u32, meta: &Slot, fault: SlotFault) -> Result<Vec<u8>> {
        self.c.corrupt.fetch_add(1, Ordering::Relaxed);
        let mut buf = vec![0u8; self.page_size];
        let data = self
            .data
            .read(self.data_sector(meta.pid), &mut buf)
            .map_err(|e| e.to_string())
            .and_then(|()| check_page(&buf, meta.pid));
        let other = match data {
            Ok(l) if l >= meta.lsn => return Ok(buf),
            Ok(l) => format!("the data device holds only LSN {l}, an older version"),
            Err(e) => format!("the data device's copy is unusable too ({e})"),
        };
        let whose = |device: &str| {
            format!(
                "its copy (LSN {}{}) in flash cache slot {slot} ({device}byte {})",
                meta.lsn,
                if meta.dirty { ", the newest" } else { "" },
                self.geo.slot_sector(slot) * SECTOR as u64,
            )
        };
        Err(match fault {
            SlotFault::Damaged => Error::corrupt(
                meta.pid,
                format!(
                    "{} fails its checksum, and {other}",
                    whose(&format!("cache device {} ", self.dev.describe()))
                ),
            ),
            // Still a device error (the cache device's, which it names), with the slot and
            // the page in its text.
            SlotFault::Unreadable(e) => {
                let kind = match &e {
                    DeviceError::Io { source, .. } => source.kind(),
                    _ => std::io::ErrorKind::Other,
                };
                let text = format!(
                    "page {}: {} cannot be read ({e}), and {other}",
                    meta.pid,
                    whose("")
                );
                Error::Device(DeviceError::io(
                    self.dev.describe(),
                    std::io::Error::new(kind, text),
                ))
            }
        })
    }
}
