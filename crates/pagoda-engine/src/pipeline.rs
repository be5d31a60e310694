//! Pipelined (asynchronous) commit, as the WiredTiger paper proposes: a committing thread appends
//! its record and gets a [`CommitTicket`] at once; the database's flush thread writes and syncs the
//! log and resolves the tickets whose records became durable.
//!
//! A pending commit (ticket not resolved) is *not committed*: its versions are in the MVCC
//! chains (so a later writer of the same key conflicts with it, first committer wins) but the
//! visible timestamp moves past it only once its record is durable, so no other transaction
//! reads its effects before then. If the database fails (or crashes) before the record is
//! durable, the ticket fails (or never resolves) and recovery either finds the whole record or
//! none of it. A writer aborted by a pending commit that then never becomes durable was aborted
//! conservatively; that is safe (the abort is a retryable [`crate::Error::Conflict`]).

use crate::error::{Error, Failure, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// A callback run once a pipelined commit resolves (on the flush thread, or at once if it is
/// resolved already). Keep it short: it delays the resolution of later commits.
pub type DurableCallback = Box<dyn FnOnce(Result<CommitInfo>) + Send + 'static>;

const PENDING: u8 = 0;
const DURABLE: u8 = 1;
const FAILED: u8 = 2;

struct TicketShared {
    info: CommitInfo,
    state: AtomicU8,
    /// The failure, once `FAILED`; and the callback while `PENDING`. The state changes only
    /// under this lock, so a callback is never lost.
    slot: Mutex<(Option<Failure>, Option<DurableCallback>)>,
}

impl TicketShared {
    fn result(&self) -> Option<Result<CommitInfo>> {
        match self.state.load(Ordering::Acquire) {
            DURABLE => Some(Ok(self.info)),
            FAILED => Some(Err(Error::Failed(
                self.slot.lock().0.clone().unwrap_or_else(|| {
                    Failure::new(Error::Internal("failed ticket without a cause".into()))
                }),
            ))),
            _ => None,
        }
    }

    /// Resolves; returns the callback to run (outside every lock).
    fn resolve(&self, res: std::result::Result<(), Failure>) -> Option<DurableCallback> {
        let mut s = self.slot.lock();
        if self.state.load(Ordering::Acquire) != PENDING {
            return None;
        }
        match res {
            Ok(()) => self.state.store(DURABLE, Ordering::Release),
            Err(m) => {
                s.0 = Some(m);
                self.state.store(FAILED, Ordering::Release);
            }
        }
        s.1.take()
    }
}

#[derive(Default)]
struct PipeState {
    /// Tickets whose records are appended, in LSN order.
    inflight: VecDeque<Arc<TicketShared>>,
    /// Admitted commits not yet resolved (appended or about to be): the bound applies to it.
    admitted: usize,
    stop: bool,
    /// Set when the flush thread has exited (no more resolutions).
    exited: Option<Failure>,
}

/// What the flush thread should do next.
pub(crate) enum Target {
    /// Make the log durable up to this LSN.
    Lsn(u64),
    /// Nothing pending.
    Idle,
    /// Exit.
    Stop,
}

/// The queue between committing threads and the flush thread.
pub(crate) struct Pipeline {
    state: Mutex<PipeState>,
    /// Wakes the flush thread.
    work: Condvar,
    /// Wakes ticket waiters and threads blocked by back-pressure.
    resolved: Condvar,
    limit: usize,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

/// An admission to the pipeline (one unit of the in-flight bound); released on drop unless it
/// became a ticket.
pub(crate) struct Admission {
    pipe: Arc<Pipeline>,
    used: bool,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if !self.used {
            let mut st = self.pipe.state.lock();
            st.admitted -= 1;
            drop(st);
            self.pipe.resolved.notify_all();
        }
    }
}

impl Admission {
    /// Queues the ticket of an appended record (call in commit order, under the commit lock).
    pub(crate) fn enqueue(mut self, info: CommitInfo) -> CommitTicket {
        self.used = true;
        let t = Arc::new(TicketShared {
            info,
            state: AtomicU8::new(PENDING),
            slot: Mutex::new((None, None)),
        });
        let mut st = self.pipe.state.lock();
        let wake = st.inflight.is_empty();
        st.inflight.push_back(t.clone());
        drop(st);
        if wake {
            self.pipe.work.notify_one();
        }
        CommitTicket {
            shared: t,
            pipe: Some(self.pipe.clone()),
        }
    }
}

impl Pipeline {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            state: Mutex::new(PipeState::default()),
            work: Condvar::new(),
            resolved: Condvar::new(),
            limit,
        }
    }

    /// Takes one unit of the in-flight bound, blocking while it is exhausted.
    pub(crate) fn admit(self: &Arc<Self>) -> Result<Admission> {
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.exited {
                return Err(Error::Failed(e.clone()));
            }
            if st.admitted < self.limit {
                st.admitted += 1;
                return Ok(Admission {
                    pipe: self.clone(),
                    used: false,
                });
            }
            self.resolved.wait(&mut st);
        }
    }

    /// Pipelined commits admitted and not yet resolved.
    pub(crate) fn inflight(&self) -> usize {
        self.state.lock().admitted
    }

    /// Flush thread: waits a little for a pending ticket.
    pub(crate) fn next_target(&self) -> Target {
        let mut st = self.state.lock();
        if st.exited.is_some() {
            return Target::Stop;
        }
        if st.inflight.is_empty() && !st.stop {
            self.work
                .wait_for(&mut st, std::time::Duration::from_millis(50));
        }
        if st.exited.is_some() {
            return Target::Stop;
        }
        match st.inflight.back() {
            Some(t) => Target::Lsn(t.info.lsn),
            None if st.stop => Target::Stop,
            None => Target::Idle,
        }
    }

    /// Flush thread: resolves every ticket whose record ends at or before `durable`, counting
    /// them in `commits` first (so that a resolved commit is counted).
    pub(crate) fn resolve_upto(&self, durable: u64, commits: &AtomicU64) {
        let mut cbs = Vec::new();
        {
            let mut st = self.state.lock();
            while st.inflight.front().is_some_and(|t| t.info.lsn <= durable) {
                if let Some(t) = st.inflight.pop_front() {
                    st.admitted -= 1;
                    commits.fetch_add(1, Ordering::Relaxed);
                    cbs.push((t.resolve(Ok(())), t.info));
                }
            }
        }
        self.resolved.notify_all();
        for (cb, info) in cbs {
            if let Some(cb) = cb {
                cb(Ok(info));
            }
        }
    }

    /// Fails every queued ticket with `why`.
    pub(crate) fn fail_all(&self, why: &Failure) {
        let mut cbs = Vec::new();
        {
            let mut st = self.state.lock();
            while let Some(t) = st.inflight.pop_front() {
                st.admitted -= 1;
                if let Some(cb) = t.resolve(Err(why.clone())) {
                    cbs.push(cb);
                }
            }
        }
        self.resolved.notify_all();
        for cb in cbs {
            cb(Err(Error::Failed(why.clone())));
        }
    }

    /// Asks the flush thread to stop once nothing is pending.
    pub(crate) fn stop(&self) {
        self.state.lock().stop = true;
        self.work.notify_all();
    }

    /// Marks the flush thread gone: fails what is queued and refuses new admissions.
    pub(crate) fn exit(&self, why: Failure) {
        self.state.lock().exited = Some(why.clone());
        // Wake the flush thread at once (it would otherwise sleep out its idle wait).
        self.work.notify_all();
        self.fail_all(&why);
    }
}

/// The promise of a pipelined commit ([`crate::WriteTxn::commit_pipelined`]). It resolves once the
/// commit record is durable: only then is the transaction committed (visible to others, and
/// kept by recovery). It fails with [`Error::Failed`] if the database fails (or is abandoned)
/// first; the transaction is then not known to be committed. Dropping a ticket does not cancel
/// the commit.
pub struct CommitTicket {
    shared: Arc<TicketShared>,
    pipe: Option<Arc<Pipeline>>,
}

impl std::fmt::Debug for CommitTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitTicket")
            .field("info", &self.shared.info)
            .field("state", &self.shared.state.load(Ordering::Relaxed))
            .finish()
    }
}

impl CommitTicket {
    /// A ticket resolved at creation (a commit that was durable already, or had no writes).
    pub(crate) fn resolved(info: CommitInfo) -> Self {
        Self {
            shared: Arc::new(TicketShared {
                info,
                state: AtomicU8::new(DURABLE),
                slot: Mutex::new((None, None)),
            }),
            pipe: None,
        }
    }

    /// Commit timestamp and end LSN of the record (known at once; committed only once durable).
    pub fn info(&self) -> CommitInfo {
        self.shared.info
    }

    /// Whether the commit is durable (and so committed and visible).
    pub fn is_durable(&self) -> bool {
        self.shared.state.load(Ordering::Acquire) == DURABLE
    }

    /// The outcome if resolved: `Some(Ok)` once durable, `Some(Err)` if the database failed
    /// first, `None` while pending. Never blocks.
    pub fn try_wait(&self) -> Option<Result<CommitInfo>> {
        self.shared.result()
    }

    /// Blocks until the commit is durable (or the database failed).
    pub fn wait(&self) -> Result<CommitInfo> {
        if let Some(r) = self.shared.result() {
            return r;
        }
        let Some(pipe) = &self.pipe else {
            return Err(Error::Internal("pending ticket without a pipeline".into()));
        };
        let mut st = pipe.state.lock();
        loop {
            if let Some(r) = self.shared.result() {
                return r;
            }
            if let Some(e) = &st.exited {
                // The flush thread is gone; nothing will resolve this ticket any more.
                let e = e.clone();
                drop(st);
                return self.shared.result().unwrap_or(Err(Error::Failed(e)));
            }
            pipe.resolved.wait(&mut st);
        }
    }

    /// Runs `f` with the outcome once the commit resolves: on the flush thread, or at once on
    /// this thread if it is resolved already. `f` should be short.
    pub fn on_durable(self, f: impl FnOnce(Result<CommitInfo>) + Send + 'static) {
        let mut s = self.shared.slot.lock();
        if self.shared.state.load(Ordering::Acquire) == PENDING {
            s.1 = Some(Box::new(f));
            return;
        }
        drop(s);
        if let Some(r) = self.shared.result() {
            f(r);
        }
    }
}

/// Result of a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitInfo {
    /// Commit timestamp (0 for a transaction without writes).
    pub cts: u64,
    /// LSN of the commit record (0 without writes).
    pub lsn: u64,
}
