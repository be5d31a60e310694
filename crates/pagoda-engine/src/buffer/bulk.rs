//! The buffer pool's part of a bulk load (`db/bulk.rs`): pages written straight to never-used
//! page ids of the data device, bypassing the frames, then synced before the record that
//! links them into a tree is logged.

use super::Pool;
use crate::error::{Error, Result};
use crate::format::decode_page;
use pagoda_device::WriteHints;
use std::sync::atomic::Ordering;

impl Pool {
    /// Writes `bytes` (whole encoded pages) at page `first` and the pages after it. Only for
    /// pages no tree, free list or log record names yet: nothing else reads them until a
    /// later record links them, after [`Pool::sync_data`].
    pub(crate) fn write_fresh(&self, first: u64, bytes: &[u8]) -> Result<()> {
        let pages = (bytes.len() / self.page_size) as u64;
        if first + pages > self.capacity_pages {
            return Err(Error::Full {
                page: first + pages - 1,
                capacity_pages: self.capacity_pages,
            });
        }
        self.dev.write(
            self.sector_of(first),
            bytes,
            // The load flushes at its end: the device may start on these now.
            WriteHints::stream(self.data_stream).behind(),
        )?;
        self.counters.writes.fetch_add(pages, Ordering::Relaxed);
        Ok(())
    }

    /// Makes every write to the data device durable.
    pub(crate) fn sync_data(&self) -> Result<()> {
        Ok(self.dev.flush()?)
    }

    /// A frame may still hold a never-used page id: a rolled-back commit that allocated it
    /// leaves the frame clean with what it had put there. After [`Pool::write_fresh`] wrote
    /// page `pid` (encoded in `bytes`) to the device, such a frame gets the same content, so
    /// no read is served the old one.
    pub(crate) fn refresh_if_resident(&self, pid: u64, bytes: &[u8]) -> Result<()> {
        if !self.shard(pid).read().contains_key(&pid) {
            return Ok(());
        }
        // Not marked modified: the device holds this very image.
        drop(self.install(decode_page(bytes, pid)?)?);
        Ok(())
    }
}
