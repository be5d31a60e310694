//! Where this thread last found a page: a hit on a page it found before skips the page table
//! (and its shard lock, which every thread descending from the same root would otherwise take
//! in turn). A hint is only a guess: [`super::Pool::read`] latches the frame it names and
//! uses it only if the frame is still mapped to that page.

use std::cell::Cell;

const SLOTS: usize = 64;

thread_local! {
    /// `(pool, page, frame)` per slot, direct-mapped by page id.
    static HINTS: [Cell<(usize, u64, u32)>; SLOTS] =
        const { [const { Cell::new((0, u64::MAX, 0)) }; SLOTS] };
}

/// The frame this thread last found `page` of `pool` in, if it remembers one.
#[inline]
pub(super) fn lookup(pool: usize, page: u64) -> Option<u32> {
    HINTS.with(|h| {
        let (p, pg, idx) = h[(page % SLOTS as u64) as usize].get();
        (p == pool && pg == page).then_some(idx)
    })
}

/// Remembers that `page` of `pool` was in `frame`.
#[inline]
pub(super) fn remember(pool: usize, page: u64, frame: u32) {
    HINTS.with(|h| h[(page % SLOTS as u64) as usize].set((pool, page, frame)));
}
