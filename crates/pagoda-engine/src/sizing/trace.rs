//! The page-reference recorder behind [`crate::Db::start_page_trace`]: every page fix of the
//! pool (hit or miss), SHARDS-sampled, for the miss-ratio curve of [`super::Mrc`]. The pool
//! owns one and calls [`Recorder::record`] on every fix (`buffer/trace.rs`).
//!
//! Off, it costs one relaxed load and a branch per fix. On, each kept reference takes a
//! number from one shared counter (the pool's hit counter is as shared) and goes into one of
//! a few buffers chosen per thread, so client threads rarely meet on a lock; sorting by the
//! numbers restores the order at the end.

use super::mrc::{PageTrace, ShardsRate};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Buffers references go into (a thread always uses the same one).
const BUFFERS: usize = 16;

#[derive(Debug)]
pub(crate) struct Recorder {
    on: AtomicBool,
    /// [`ShardsRate::threshold`] of the running or last recording; 0 before the first.
    threshold: AtomicU64,
    seq: AtomicU64,
    /// Every fix while on, kept or not (SHARDS-adj needs it).
    total: AtomicU64,
    dropped: AtomicU64,
    warm: Mutex<Vec<u64>>,
    buffers: Vec<Mutex<Vec<(u64, u64)>>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self {
            on: AtomicBool::new(false),
            threshold: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            total: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            warm: Mutex::new(Vec::new()),
            buffers: (0..BUFFERS).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }
}

fn buffer_of_thread() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed) % BUFFERS;
    }
    SLOT.with(|s| *s)
}

impl Recorder {
    /// Notes one page fix (call on every fix).
    #[inline]
    pub(crate) fn record(&self, page: u64) {
        if self.on.load(Ordering::Relaxed) {
            self.keep(page);
        }
    }

    #[cold]
    fn keep(&self, page: u64) {
        self.total.fetch_add(1, Ordering::Relaxed);
        let rate = ShardsRate::from_threshold(self.threshold.load(Ordering::Relaxed));
        if !rate.keeps(page) {
            return;
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        if seq >= PageTrace::MAX_REFERENCES {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.buffers[buffer_of_thread()].lock().push((seq, page));
    }

    /// Starts recording at `rate`, dropping any earlier recording; `warm` (the resident
    /// pages, coldest first, already sampled) primes the trace's stack.
    pub(crate) fn start(&self, rate: ShardsRate, warm: Vec<u64>) {
        self.on.store(false, Ordering::Release);
        for b in &self.buffers {
            b.lock().clear();
        }
        *self.warm.lock() = warm;
        self.threshold.store(rate.threshold(), Ordering::Relaxed);
        self.seq.store(0, Ordering::Relaxed);
        self.total.store(0, Ordering::Relaxed);
        self.dropped.store(0, Ordering::Relaxed);
        self.on.store(true, Ordering::Release);
    }

    /// Stops recording and returns what was recorded (empty when nothing was).
    pub(crate) fn take(&self, page_size: usize) -> PageTrace {
        self.on.store(false, Ordering::Release);
        let mut all: Vec<(u64, u64)> = Vec::new();
        for b in &self.buffers {
            all.append(&mut b.lock());
        }
        all.sort_unstable_by_key(|&(seq, _)| seq);
        PageTrace {
            rate: match self.threshold.swap(0, Ordering::Relaxed) {
                0 => None,
                th => Some(ShardsRate::from_threshold(th)),
            },
            warm: std::mem::take(&mut *self.warm.lock()),
            references: all.into_iter().map(|(_, p)| p).collect(),
            dropped: self.dropped.swap(0, Ordering::Relaxed),
            total: self.total.swap(0, Ordering::Relaxed),
            page_size,
        }
    }
}
