//! The count of device I/O that runs outside the file system's lock (see `io`): whatever names
//! or frees blocks waits, holding the lock, until it is empty.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Counts device I/O running outside the file system's lock.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    in_flight: Mutex<u64>,
    empty: Condvar,
    /// The first device write that failed outside the lock, recorded before its ticket ends:
    /// whoever drains the gate then sees it, before it can name the blocks that write missed.
    failed: Mutex<Option<String>>,
}

impl Gate {
    fn count(&self) -> MutexGuard<'_, u64> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// One more I/O in flight; returns how many are now. Called under the file system's lock,
    /// so never while [`Gate::drain`] waits.
    pub(crate) fn enter(self: &Arc<Self>) -> (Ticket, u64) {
        let mut n = self.count();
        *n += 1;
        (Ticket(Arc::clone(self)), *n)
    }

    /// Waits until no I/O is in flight, then returns the first failed write recorded (and
    /// keeps it). The caller holds the file system's lock, so no new I/O starts meanwhile;
    /// the I/O in flight does not need that lock to end.
    pub(crate) fn drain(&self) -> Option<String> {
        let mut n = self.count();
        while *n > 0 {
            n = self.empty.wait(n).unwrap_or_else(PoisonError::into_inner);
        }
        drop(n);
        self.failure()
    }

    /// The first failed write recorded, if any.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One I/O in flight; dropping it ends it.
#[derive(Debug)]
pub(crate) struct Ticket(Arc<Gate>);

impl Ticket {
    /// Records that this I/O's device write failed (`why`), before the ticket ends.
    pub(crate) fn fail(&self, why: String) {
        let mut f = self.0.failed.lock().unwrap_or_else(PoisonError::into_inner);
        f.get_or_insert(why);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut n = self.0.count();
        *n -= 1;
        if *n == 0 {
            self.0.empty.notify_all();
        }
    }
}
