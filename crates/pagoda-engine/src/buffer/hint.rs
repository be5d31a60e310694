//! Where each page was last mapped: a direct-mapped table from page id to frame, read with
//! one relaxed load and no lock. A hit through it skips the page table (a shard lock taken
//! with an atomic write, a hash and two dependent cache misses per level of a descent).
//! An entry is only a guess: [`super::Pool::read`] latches the frame it names and uses it
//! only if the frame is still mapped to that page. Page ids are dense, so with twice as many
//! slots as frames a database that fits the pool never shares a slot.

use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Debug)]
pub(super) struct Hints {
    /// Frame + 1 per slot (0: none).
    slots: Box<[AtomicU32]>,
    mask: u64,
}

impl Hints {
    pub(super) fn new(frames: usize) -> Self {
        let n = (frames.max(1) * 2).next_power_of_two();
        Self {
            slots: (0..n).map(|_| AtomicU32::new(0)).collect(),
            mask: n as u64 - 1,
        }
    }

    #[inline]
    fn slot(&self, page: u64) -> &AtomicU32 {
        &self.slots[(page & self.mask) as usize]
    }

    /// The frame `page` was last mapped to, if its slot still remembers it.
    #[inline]
    pub(super) fn lookup(&self, page: u64) -> Option<u32> {
        self.slot(page).load(Ordering::Relaxed).checked_sub(1)
    }

    /// Remembers that `page` is in `frame` (a store only when the slot says otherwise, so
    /// that readers keep the line shared).
    #[inline]
    pub(super) fn remember(&self, page: u64, frame: u32) {
        let s = self.slot(page);
        if s.load(Ordering::Relaxed) != frame + 1 {
            s.store(frame + 1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Hints;

    #[test]
    fn remembers_the_last_frame_per_slot() {
        let h = Hints::new(4); // 8 slots
        assert_eq!(h.lookup(3), None);
        h.remember(3, 0);
        assert_eq!(h.lookup(3), Some(0));
        h.remember(11, 2); // same slot as 3: the entry is a guess the caller checks
        assert_eq!(h.lookup(3), Some(2));
        assert_eq!(h.lookup(11), Some(2));
    }
}
