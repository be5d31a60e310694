//! Transactions with conflict retries: [`TxnRunner`] runs a body synchronously or with a
//! pipelined commit, and counts the conflicts it retried.

use std::time::Duration;

use super::window::Window;
use crate::store::{PendingCommit, Store, StoreError, StoreTxn};

/// What a transaction body asks for at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish<T> {
    /// Commit and return the value.
    Commit(T),
    /// Roll back and return the value.
    Rollback(T),
}

/// An operation submitted by [`Worker::step_pipelined`](super::Worker::step_pipelined).
pub enum Submitted<T> {
    /// Completed (durable if it wrote).
    Done(T),
    /// Its commit is in flight; the operation completes with `T` when it resolves.
    Pending(T, Box<dyn PendingCommit>),
}

impl<T: std::fmt::Debug> std::fmt::Debug for Submitted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Submitted::Done(v) => f.debug_tuple("Done").field(v).finish(),
            Submitted::Pending(v, _) => f.debug_tuple("Pending").field(v).finish(),
        }
    }
}

/// Runs transaction bodies with conflict retries and counts the conflicts.
#[derive(Debug)]
pub struct TxnRunner {
    max_retries: u32,
    conflicts: u64,
    /// The thread's pipelined commits in flight, bounded by the driver's depth.
    pub(super) window: Window,
}

impl TxnRunner {
    /// A runner retrying each transaction up to `max_retries` times.
    pub fn new(max_retries: u32) -> Self {
        TxnRunner {
            max_retries,
            conflicts: 0,
            window: Window::default(),
        }
    }

    /// Conflicts seen since the last [`TxnRunner::take_conflicts`].
    pub fn take_conflicts(&mut self) -> u64 {
        std::mem::take(&mut self.conflicts)
    }

    /// Runs `body` in a transaction, retrying from scratch on [`StoreError::Conflict`] (from
    /// the body or from commit). The body must draw no new random inputs, so a retry repeats
    /// the same transaction.
    pub fn run<T>(
        &mut self,
        store: &dyn Store,
        read_only: bool,
        mut body: impl FnMut(&mut dyn StoreTxn) -> Result<Finish<T>, StoreError>,
    ) -> Result<T, StoreError> {
        let max_retries = self.max_retries;
        let mut conflicts = 0;
        let out = retry_conflicts(max_retries, &mut conflicts, || {
            Self::attempt(store, read_only, &mut body)
        });
        self.conflicts += conflicts;
        out
    }

    /// Like [`TxnRunner::run`], but a transaction that commits uses a pipelined commit and is
    /// returned pending. Conflicts seen before the commit is queued are retried. Under the
    /// driver, the commit is queued only once the thread's window has room (after the body).
    pub fn run_pipelined<T>(
        &mut self,
        store: &dyn Store,
        mut body: impl FnMut(&mut dyn StoreTxn) -> Result<Finish<T>, StoreError>,
    ) -> Result<Submitted<T>, StoreError> {
        let mut conflicts = 0;
        let window = &mut self.window;
        let out = retry_conflicts(self.max_retries, &mut conflicts, || {
            let mut txn = store.begin()?;
            match body(&mut *txn) {
                Ok(Finish::Commit(v)) => {
                    window.make_room();
                    Ok(Submitted::Pending(v, txn.commit_pipelined()?))
                }
                Ok(Finish::Rollback(v)) => {
                    txn.rollback()?;
                    Ok(Submitted::Done(v))
                }
                Err(e) => {
                    let _ = txn.rollback();
                    Err(e)
                }
            }
        });
        self.conflicts += conflicts;
        out
    }

    fn attempt<T>(
        store: &dyn Store,
        read_only: bool,
        body: &mut impl FnMut(&mut dyn StoreTxn) -> Result<Finish<T>, StoreError>,
    ) -> Result<T, StoreError> {
        let mut txn = if read_only {
            store.begin_read()?
        } else {
            store.begin()?
        };
        match body(&mut *txn) {
            Ok(Finish::Commit(v)) => {
                txn.commit()?;
                Ok(v)
            }
            Ok(Finish::Rollback(v)) => {
                txn.rollback()?;
                Ok(v)
            }
            Err(e) => {
                // The body's error is what matters; a failing rollback adds nothing.
                let _ = txn.rollback();
                Err(e)
            }
        }
    }
}

/// Runs `attempt` until it ends in something other than [`StoreError::Conflict`], at most
/// `max_retries` retries, backing off exponentially so the winner can finish: up to ~16 ms, so
/// that the driver's 100 retries outlast a winner whose commit waits on a slow sync (about
/// 1.4 s in all; with a 1 ms cap, 90 ms fell short of a 195 ms commit on a loaded machine).
/// Every conflict seen is added to `conflicts`.
fn retry_conflicts<R>(
    max_retries: u32,
    conflicts: &mut u64,
    mut attempt: impl FnMut() -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let mut retries = 0;
    loop {
        match attempt() {
            Err(StoreError::Conflict) if retries < max_retries => {
                *conflicts += 1;
                retries += 1;
                if retries > 1 {
                    std::thread::sleep(Duration::from_micros(1 << retries.min(14)));
                }
            }
            Err(StoreError::Conflict) => {
                *conflicts += 1;
                return Err(StoreError::Conflict);
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_hundred_retries_outlast_a_slow_winner() {
        // The winner holds its rows for 200 ms (a commit waiting on a slow sync).
        let held = Instant::now();
        let mut conflicts = 0;
        let out = retry_conflicts(100, &mut conflicts, || {
            if held.elapsed() < Duration::from_millis(200) {
                Err(StoreError::Conflict)
            } else {
                Ok(())
            }
        });
        assert!(out.is_ok(), "gave up after {conflicts} conflicts");
        assert!(conflicts > 0);
    }

    #[test]
    fn retries_stop_at_the_limit() {
        let mut conflicts = 0;
        let out: Result<(), _> = retry_conflicts(3, &mut conflicts, || Err(StoreError::Conflict));
        assert!(matches!(out, Err(StoreError::Conflict)));
        assert_eq!(conflicts, 4, "the first try and three retries");
    }
}
