//! Counters that every thread adds to on hot paths (a buffer hit, the phase times of each
//! transaction): one cache line per stripe, and a thread keeps to its stripe, so two cores
//! adding never bounce one line between them. Readers sum the stripes.

use crossbeam::utils::CachePadded;
use parking_lot::{RwLock, RwLockReadGuard};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes: more than the cores a machine running pagoda usually gives one process' hot
/// threads, so that threads rarely share one.
pub(crate) const STRIPES: usize = 16;

/// This thread's stripe, assigned round-robin at its first use.
#[inline]
pub(crate) fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    MINE.with(|m| *m)
}

/// `N` counters, striped.
#[derive(Debug)]
pub struct Striped<const N: usize> {
    stripes: Box<[CachePadded<[AtomicU64; N]>]>,
}

impl<const N: usize> Default for Striped<N> {
    fn default() -> Self {
        Self {
            stripes: (0..STRIPES)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }
}

impl<const N: usize> Striped<N> {
    /// Adds `n` to counter `i`.
    #[inline]
    pub(crate) fn add(&self, i: usize, n: u64) {
        self.stripes[stripe()][i].fetch_add(n, Ordering::Relaxed);
    }

    /// Counter `i`, summed over the stripes.
    pub(crate) fn sum(&self, i: usize) -> u64 {
        self.stripes
            .iter()
            .map(|s| s[i].load(Ordering::Relaxed))
            .sum()
    }

    /// Zeroes every counter.
    pub(crate) fn reset(&self) {
        for s in self.stripes.iter() {
            for a in s.iter() {
                a.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// A value read by every operation and changed rarely (the catalog): one copy per stripe, so
/// that readers on different cores take different locks; a change is made to every copy.
#[derive(Debug)]
pub(crate) struct ReadMostly<T> {
    stripes: Box<[CachePadded<RwLock<T>>]>,
}

impl<T: Clone> ReadMostly<T> {
    pub(crate) fn new(t: T) -> Self {
        Self {
            stripes: (0..STRIPES)
                .map(|_| CachePadded::new(RwLock::new(t.clone())))
                .collect(),
        }
    }

    /// This thread's copy.
    #[inline]
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
        self.stripes[stripe()].read()
    }

    /// Changes every copy with `f` (stripe by stripe: a reader elsewhere may see the change a
    /// moment before or after this thread does, never half of it).
    pub(crate) fn update(&self, mut f: impl FnMut(&mut T)) {
        for s in self.stripes.iter() {
            f(&mut s.write());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn sums_what_every_thread_added() {
        let c = Arc::new(Striped::<2>::default());
        let threads: Vec<_> = (0..20)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add(0, 1);
                        c.add(1, t);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(c.sum(0), 20_000);
        assert_eq!(c.sum(1), (0..20).sum::<u64>() * 1000);
        c.reset();
        assert_eq!((c.sum(0), c.sum(1)), (0, 0));
    }

    #[test]
    fn every_thread_reads_the_updated_value() {
        let v = Arc::new(ReadMostly::new(vec![1]));
        v.update(|x| x.push(2));
        let seen: Vec<Vec<i32>> = (0..STRIPES + 3)
            .map(|_| {
                let v = v.clone();
                std::thread::spawn(move || v.read().clone()).join().unwrap()
            })
            .collect();
        assert!(seen.iter().all(|x| x == &vec![1, 2]), "{seen:?}");
    }
}
