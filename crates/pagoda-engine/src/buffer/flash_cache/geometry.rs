//! Where things lie on the cache device.

use crate::error::{Error, Result};
use crate::format::{CacheHeader, DirCheckpoint, MAX_PER_SEGMENT, SECTOR};

/// Header sectors at the start of each segment: policy `lru` rewrites a segment's header in
/// place, alternating between the two, so a torn header write leaves the previous one intact
/// (the ring writes both copies with its pages).
pub(crate) const HEADER_SECTORS: u64 = 2;

/// Largest cleaner batch in pages; the ring must hold two.
pub(crate) const MAX_BATCH: u64 = 64;

/// The cache device's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) segments: u32,
    pub(crate) per_segment: u32,
    pub(crate) dir_sectors: u32,
    pub(crate) page_sectors: u64,
    pub(crate) ring_start: u64,
}

impl Geometry {
    /// The layout of a cache of `bytes` (metadata included) for pages of `page_size`:
    /// segments of up to 64 pages (a cleaner batch: one write and one sync each) and at most
    /// 1 MiB, behind two header sectors.
    pub(crate) fn for_size(bytes: u64, page_size: usize) -> Result<Self> {
        let page_sectors = (page_size / SECTOR) as u64;
        let per = ((1 << 20) / page_size).clamp(8, 64).min(MAX_PER_SEGMENT) as u64;
        let seg = HEADER_SECTORS + per * page_sectors;
        let total = bytes / SECTOR as u64;
        let mut n = total.saturating_sub(2) / seg;
        let mut dir = 0;
        // The directory areas depend on the slot count and take room from the ring.
        for _ in 0..4 {
            dir = (DirCheckpoint::bytes_for((n * per) as usize) as u64).div_ceil(SECTOR as u64);
            n = total.saturating_sub(2 + 2 * dir) / seg;
        }
        let g = Self {
            segments: n as u32,
            per_segment: per as u32,
            dir_sectors: dir as u32,
            page_sectors,
            ring_start: 2 + 2 * dir,
        };
        let min_slots = 2 * MAX_BATCH;
        if n < 4 || n * per < min_slots {
            let need = (2 + 2 * dir + seg * 4.max(min_slots.div_ceil(per))) * SECTOR as u64;
            return Err(Error::config(format!(
                "a flash cache of {bytes} bytes holds {} page slots of {page_size} bytes; it must \
                 hold at least {min_slots} (two cleaner batches, in at least 4 segments of {per}): \
                 give --flash-cache-size of at least {need} bytes",
                n * per
            )));
        }
        Ok(g)
    }

    /// The layout a cache header records.
    pub(crate) fn of_header(h: &CacheHeader) -> Self {
        let page_sectors = (h.page_size as usize / SECTOR) as u64;
        Self {
            segments: h.segments,
            per_segment: h.per_segment,
            dir_sectors: h.dir_sectors,
            page_sectors,
            ring_start: 2 + 2 * u64::from(h.dir_sectors),
        }
    }

    pub(crate) fn slots(&self) -> usize {
        self.segments as usize * self.per_segment as usize
    }

    pub(crate) fn segment_sectors(&self) -> u64 {
        HEADER_SECTORS + u64::from(self.per_segment) * self.page_sectors
    }

    pub(crate) fn segment_sector(&self, seg: u32) -> u64 {
        self.ring_start + u64::from(seg) * self.segment_sectors()
    }

    pub(crate) fn slot_sector(&self, slot: u32) -> u64 {
        let per = self.per_segment;
        self.segment_sector(slot / per) + HEADER_SECTORS + u64::from(slot % per) * self.page_sectors
    }

    pub(crate) fn ring_end(&self) -> u64 {
        self.segment_sector(self.segments)
    }

    pub(crate) fn dir_sector(&self, area: u64) -> u64 {
        2 + area * u64::from(self.dir_sectors)
    }

    /// Slots of segment `seg`.
    pub(crate) fn slots_of(&self, seg: u32) -> std::ops::Range<u32> {
        seg * self.per_segment..(seg + 1) * self.per_segment
    }

    /// Ring writes between directory checkpoints: a quarter of the ring, so that a rebuild
    /// reads few segment headers and a checkpoint costs under 1 % of the ring's writes.
    pub(crate) fn checkpoint_every(&self) -> u64 {
        (u64::from(self.segments) / 4).max(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_fits_and_refuses_tiny_caches() {
        for ps in [4096, 16384, 65536] {
            for bytes in [16u64 << 20, 100 << 20, 1 << 30] {
                let Ok(g) = Geometry::for_size(bytes, ps) else {
                    continue;
                };
                assert!(g.ring_end() * SECTOR as u64 <= bytes);
                assert!(g.slots() >= 128);
                let need = DirCheckpoint::bytes_for(g.slots()) as u64;
                assert!(u64::from(g.dir_sectors) * SECTOR as u64 >= need);
            }
        }
        let e = Geometry::for_size(1 << 20, 16384).unwrap_err().to_string();
        assert!(e.contains("--flash-cache-size"), "{e}");
    }
}
