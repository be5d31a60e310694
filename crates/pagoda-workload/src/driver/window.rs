//! The pipelined-commit window of one client thread (`DriverConfig::pipeline_depth`).
//!
//! **Depth d: at most d of the thread's commits are unresolved at any instant.** The thread
//! hands a commit off (`commit_pipelined`) and goes on with its next operation while the flush
//! thread makes the commit durable; before it queues another commit it waits, oldest first,
//! until fewer than d are unresolved. The wait comes after the next transaction's body and
//! just before its commit, so:
//!
//! * depth 1 keeps one commit in flight per thread, as a synchronous commit does; what it adds
//!   is the overlap of the next transaction's body (and its commit's apply, up to the hand-off)
//!   with the previous commit's log write and sync;
//! * depth d is comparable to synchronous commit with d times the client threads (the same
//!   total number of commits in flight), which pays for it in threads.

use super::OpStatus;
use crate::store::{PendingCommit, Resolved, StoreError};
use std::collections::VecDeque;
use std::time::Instant;

/// An operation whose commit is in flight.
pub(crate) struct InFlight {
    pub(crate) op: usize,
    pub(crate) status: OpStatus,
    pub(crate) pending: Box<dyn PendingCommit>,
    pub(crate) t0: Instant,
    pub(crate) warming: bool,
    pub(crate) conflicts: u64,
}

/// A finished operation, for the driver's statistics.
pub(crate) struct Outcome {
    pub(crate) op: usize,
    pub(crate) status: Result<OpStatus, StoreError>,
    pub(crate) nanos: u64,
    pub(crate) warming: bool,
    pub(crate) conflicts: u64,
    /// When it finished (its commit resolved).
    pub(crate) at: Instant,
}

impl Outcome {
    /// An operation that finished at `at` after starting at `t0`.
    pub(crate) fn new(
        op: usize,
        status: Result<OpStatus, StoreError>,
        t0: Instant,
        warming: bool,
        conflicts: u64,
        at: Instant,
    ) -> Self {
        let nanos = u64::try_from(at.saturating_duration_since(t0).as_nanos()).unwrap_or(u64::MAX);
        Outcome {
            op,
            status,
            nanos,
            warming,
            conflicts,
            at,
        }
    }
}

/// The commits a thread has in flight, oldest first, and those resolved since last taken.
#[derive(Default)]
pub(crate) struct Window {
    depth: usize,
    queue: VecDeque<InFlight>,
    done: Vec<Outcome>,
}

impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("depth", &self.depth)
            .field("in_flight", &self.queue.len())
            .field("done", &self.done.len())
            .finish()
    }
}

impl Window {
    /// Bounds the window to `depth` unresolved commits (0: no bound).
    pub(crate) fn set_depth(&mut self, depth: usize) {
        self.depth = depth;
    }

    /// Commits queued and not yet seen resolved.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn push(&mut self, f: InFlight) {
        self.queue.push_back(f);
    }

    /// Moves the resolved commits at the front to the finished list (never blocks). Commits
    /// resolve in commit order, so the first unresolved one ends the scan.
    pub(crate) fn poll(&mut self) {
        while let Some(front) = self.queue.front_mut() {
            let Some(r) = front.pending.poll() else { break };
            if let Some(f) = self.queue.pop_front() {
                self.finish(f, r);
            }
        }
    }

    /// Before queuing another commit: waits, oldest first, until fewer than `depth` are
    /// unresolved.
    pub(crate) fn make_room(&mut self) {
        self.poll();
        while self.depth > 0 && self.queue.len() >= self.depth {
            self.wait_oldest();
        }
    }

    /// Waits for every commit in flight.
    pub(crate) fn drain(&mut self) {
        while !self.queue.is_empty() {
            self.wait_oldest();
        }
    }

    /// The operations finished since the last call, in the order they finished.
    pub(crate) fn take_done(&mut self) -> std::vec::Drain<'_, Outcome> {
        self.done.drain(..)
    }

    fn wait_oldest(&mut self) {
        if let Some(mut f) = self.queue.pop_front() {
            // `wait` consumes the pending commit; the rest of the entry is still needed.
            let pending = std::mem::replace(&mut f.pending, Box::new(Resolved));
            let r = pending.wait();
            self.finish(f, r);
        }
    }

    fn finish(&mut self, f: InFlight, r: Result<(), StoreError>) {
        self.done.push(Outcome::new(
            f.op,
            r.map(|()| f.status),
            f.t0,
            f.warming,
            f.conflicts,
            Instant::now(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A commit that stays unresolved for many polls; `live` counts the unresolved ones.
    struct Slow {
        live: Arc<AtomicUsize>,
        polls_left: u32,
    }

    impl PendingCommit for Slow {
        fn poll(&mut self) -> Option<Result<(), StoreError>> {
            if self.polls_left == 0 {
                return Some(Ok(()));
            }
            self.polls_left -= 1;
            if self.polls_left == 0 {
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
            None
        }
        fn wait(self: Box<Self>) -> Result<(), StoreError> {
            if self.polls_left > 0 {
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
            Ok(())
        }
    }

    /// Queues `n` commits the way the driver does; returns the most ever unresolved.
    fn most_unresolved(depth: usize, n: usize, polls: u32) -> usize {
        let live = Arc::new(AtomicUsize::new(0));
        let mut most = 0;
        let mut w = Window::default();
        w.set_depth(depth);
        for op in 0..n {
            w.make_room();
            assert!(w.in_flight() < depth, "no room made at depth {depth}");
            most = most.max(live.fetch_add(1, Ordering::Relaxed) + 1);
            w.push(InFlight {
                op,
                status: OpStatus::Ok,
                pending: Box::new(Slow {
                    live: live.clone(),
                    polls_left: polls,
                }),
                t0: Instant::now(),
                warming: false,
                conflicts: 0,
            });
        }
        w.drain();
        assert_eq!(w.in_flight(), 0);
        assert_eq!(live.load(Ordering::Relaxed), 0);
        let order: Vec<usize> = w.take_done().map(|o| o.op).collect();
        assert_eq!(order, (0..n).collect::<Vec<_>>(), "finished out of order");
        most
    }

    #[test]
    fn depth_bounds_the_unresolved_commits_of_a_thread() {
        // Slow commits: the window fills to exactly its depth, never beyond.
        assert_eq!(most_unresolved(1, 20, 1000), 1);
        assert_eq!(most_unresolved(4, 40, 1000), 4);
        assert_eq!(most_unresolved(32, 100, 1000), 32);
        // Commits that resolve after two polls: the poll in make_room frees the room.
        assert!(most_unresolved(8, 100, 2) <= 8);
    }
}
