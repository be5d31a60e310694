//! Serving FUSE requests concurrently. fuser reads one request at a time and calls the
//! `Filesystem` method on its session thread; its replies may be sent from any thread. So the
//! data requests (read, write, fsync) are handed to a pool of worker threads and the session
//! thread goes back to reading the next request at once.
//!
//! [`Ranges`] keeps two writes to the same 4 KiB block of a file (or a write and a truncate
//! of that file) from running at once: a partial-block write reads the old block and writes
//! it back, which would lose the other write's bytes.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send>;

/// A fixed pool of threads running jobs in arrival order.
pub(crate) struct Workers {
    tx: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// `n` threads; 0 runs every job on the caller's thread.
    pub(crate) fn new(n: usize) -> Self {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..n)
            .filter_map(|i| {
                let rx = Arc::clone(&rx);
                std::thread::Builder::new()
                    .name(format!("pagoda-fuse-{i}"))
                    .spawn(move || work(&rx))
                    .ok()
            })
            .collect::<Vec<_>>();
        Self {
            tx: (!threads.is_empty()).then_some(tx),
            threads,
        }
    }

    /// Worker threads running (0: requests are served on the session thread).
    pub(crate) fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Runs `job` on a worker, or here when there are none.
    pub(crate) fn run(&self, job: impl FnOnce() + Send + 'static) {
        match &self.tx {
            Some(tx) => {
                if let Err(back) = tx.send(Box::new(job)) {
                    // Only when every worker died: serve it here rather than drop the reply.
                    (back.0)();
                }
            }
            None => job(),
        }
    }
}

fn work(rx: &Mutex<Receiver<Job>>) {
    loop {
        let job = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

impl Drop for Workers {
    /// Lets the queued jobs finish (their replies go out), then joins: once the adapter is
    /// dropped no request is still writing, so the final commit sees everything.
    fn drop(&mut self) {
        self.tx = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Block ranges of files being written, each held by one request.
#[derive(Debug, Default)]
pub(crate) struct Ranges {
    held: Mutex<Vec<(u64, u64, u64)>>,
    freed: Condvar,
}

/// A held range; dropping it lets waiting requests on.
pub(crate) struct RangeGuard {
    ranges: Arc<Ranges>,
    range: (u64, u64, u64),
}

impl Ranges {
    fn held(&self) -> MutexGuard<'_, Vec<(u64, u64, u64)>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until no other request holds a block of `first..=last` of `ino`, then holds
    /// them. Taken before the file system's lock, never while holding it.
    pub(crate) fn lock(self: &Arc<Self>, ino: u64, first: u64, last: u64) -> RangeGuard {
        let mut held = self.held();
        while held
            .iter()
            .any(|&(i, a, b)| i == ino && a <= last && first <= b)
        {
            held = self
                .freed
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
        held.push((ino, first, last));
        RangeGuard {
            ranges: Arc::clone(self),
            range: (ino, first, last),
        }
    }
}

impl Drop for RangeGuard {
    fn drop(&mut self) {
        let mut held = self.ranges.held();
        if let Some(k) = held.iter().position(|&r| r == self.range) {
            held.swap_remove(k);
        }
        self.ranges.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn overlapping_ranges_wait_and_others_do_not() {
        let r = Arc::new(Ranges::default());
        let a = r.lock(7, 0, 3);
        // Another file, and blocks after the held ones: no wait.
        drop((r.lock(8, 0, 3), r.lock(7, 4, 9)));
        let done = Arc::new(AtomicBool::new(false));
        let t = {
            let (r, done) = (Arc::clone(&r), Arc::clone(&done));
            std::thread::spawn(move || {
                let _g = r.lock(7, 3, 5);
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst), "block 3 is held");
        drop(a);
        t.join().unwrap_or_else(|_| panic!("the waiter panicked"));
        assert!(done.load(Ordering::SeqCst));
    }

    #[test]
    fn jobs_run_on_workers_and_finish_before_drop_returns() {
        let w = Workers::new(3);
        assert_eq!(w.threads(), 3);
        let n = Arc::new(Mutex::new(0));
        for _ in 0..50 {
            let n = Arc::clone(&n);
            w.run(move || *n.lock().unwrap_or_else(PoisonError::into_inner) += 1);
        }
        drop(w);
        assert_eq!(*n.lock().unwrap_or_else(PoisonError::into_inner), 50);
    }
}
