//! Writing sorted pages in runs: shared by the torn-write guard's in-place writes and the flash
//! cache's write-backs, in a module of its own so neither depends on the other for it.

use crate::error::Result;
use crate::format::SECTOR;
use pagoda_device::WriteHints;

/// Writes pages sorted by id to `dev`, merging runs of consecutive ids into one request (one
/// write per page when the hints ask for atomicity): the cleaner's in-place writes and the
/// flash cache's write-backs.
pub(super) fn write_runs(
    dev: &pagoda_device::DeviceRef,
    pages: &[(u64, &[u8])],
    page_size: usize,
    hints: WriteHints,
) -> Result<()> {
    let per = (page_size / SECTOR) as u64;
    let mut i = 0;
    while i < pages.len() {
        let mut j = i + 1;
        while !hints.atomic && j < pages.len() && pages[j].0 == pages[j - 1].0 + 1 {
            j += 1;
        }
        if j == i + 1 {
            dev.write(pages[i].0 * per, pages[i].1, hints)?;
        } else {
            let mut buf = Vec::with_capacity((j - i) * page_size);
            for (_, b) in &pages[i..j] {
                buf.extend_from_slice(b);
            }
            dev.write(pages[i].0 * per, &buf, hints)?;
        }
        i = j;
    }
    Ok(())
}
