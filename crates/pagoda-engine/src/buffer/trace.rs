//! The pool's side of the page trace ([`crate::sizing`]): the recorder itself lives there;
//! the pool primes it with its resident pages and hands back what it recorded.

use super::Pool;
use crate::sizing::{PageTrace, ShardsRate};

impl Pool {
    /// Starts recording page references at `rate`, dropping any earlier recording; the
    /// resident pages, coldest first, prime the trace's stack.
    pub(crate) fn start_trace(&self, rate: ShardsRate) {
        let warm: Vec<u64> = {
            let inner = self.inner.lock();
            inner
                .lru
                .cold_order()
                .map(|i| inner.ids[i as usize])
                .filter(|&p| p != u64::MAX && rate.keeps(p))
                .collect()
        };
        self.trace.start(rate, warm);
    }

    /// Stops recording and returns what was recorded (empty when nothing was).
    pub(crate) fn take_trace(&self) -> PageTrace {
        self.trace.take(self.page_size)
    }
}
