//! Checkpoints and the background threads: the checkpointer/cleaner, the pipelined-commit
//! flush thread and the lazy-commit flush thread.

use super::{Db, Inner};
use crate::error::{Error, Failure, Result};
use crate::options::CommitMode;
use crate::pipeline::{Pipeline, Target};
use parking_lot::{Condvar, Mutex};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

impl Db {
    /// Starts the flush thread of pipelined commit.
    pub(super) fn start_flusher(&self) -> Result<()> {
        let Some(pipe) = self.inner.pipe.clone() else {
            return Ok(());
        };
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let h = std::thread::Builder::new()
            .name("pagoda-flush".into())
            .spawn(move || guarded("pagoda-flush", weak, move |w| flusher(w, pipe)))
            .map_err(|e| Error::config(format!("cannot start the flush thread: {e}")))?;
        *self.inner.flusher.lock() = Some(h);
        Ok(())
    }

    /// Starts the flush thread of lazy commit.
    pub(super) fn start_lazy_flusher(&self) -> Result<()> {
        let Some(lazy) = self.inner.lazy.clone() else {
            return Ok(());
        };
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let every = self.inner.opts.lazy_flush_interval;
        let h = std::thread::Builder::new()
            .name("pagoda-lazy-flush".into())
            .spawn(move || {
                guarded("pagoda-lazy-flush", weak, move |w| {
                    lazy_flusher(w, lazy, every);
                });
            })
            .map_err(|e| Error::config(format!("cannot start the lazy flush thread: {e}")))?;
        *self.inner.flusher.lock() = Some(h);
        Ok(())
    }

    /// Makes every commit so far durable (with [`CommitMode::Lazy`], commits return before
    /// that; in the other modes it is so already when they return).
    pub fn sync_log(&self) -> Result<()> {
        self.check_writable()?;
        let end = self.inner.wal.end();
        self.wait(end)
    }

    /// A lazy commit whose record leaves this much of the log unsynced wakes the flush thread
    /// before its interval is up, so the log buffer stays small under a fast stream of commits.
    pub(super) fn kick_lazy_flusher(&self, end: u64) {
        if let Some(lazy) = &self.inner.lazy {
            if end.saturating_sub(self.inner.wal.durable()) >= LAZY_KICK_BYTES {
                lazy.kick();
            }
        }
    }

    /// Stops the flush thread: after draining the queue (`drain`), or at once failing what is
    /// queued.
    pub(super) fn stop_flusher(&self, drain: bool) {
        if let Some(lazy) = &self.inner.lazy {
            lazy.stop(drain);
        }
        let Some(pipe) = &self.inner.pipe else {
            if let Some(h) = self.inner.flusher.lock().take() {
                self.join("pagoda-lazy-flush", h);
            }
            return;
        };
        if drain {
            pipe.stop();
        } else {
            pipe.exit(Failure::new(Error::Abandoned));
        }
        let h = self.inner.flusher.lock().take();
        if let Some(h) = h {
            self.join("pagoda-flush", h);
        }
    }

    pub(super) fn start_background(&self) {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let handle = std::thread::Builder::new()
            .name("pagoda-bg".into())
            .spawn(move || guarded("pagoda-bg", weak, background));
        if let Ok(h) = handle {
            *self.inner.bg.lock() = Some(h);
        }
    }

    pub(super) fn stop_background(&self) {
        *self.inner.bg_stop.lock() = true;
        self.inner.bg_cond.notify_all();
        let h = self.inner.bg.lock().take();
        if let Some(h) = h {
            self.join("pagoda-bg", h);
        }
        let h = self.inner.log_prep.lock().take();
        if let Some(h) = h {
            self.join("pagoda-log-prep", h);
        }
    }

    /// Starts the thread that makes a new log file's ring ready ahead of the log's end
    /// (when part of it is not ready yet).
    pub(super) fn start_log_prep(&self) {
        if !self.inner.wal.preparing() {
            return;
        }
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let handle = std::thread::Builder::new()
            .name("pagoda-log-prep".into())
            .spawn(move || guarded("pagoda-log-prep", weak, log_prep));
        if let Ok(h) = handle {
            *self.inner.log_prep.lock() = Some(h);
        }
    }

    /// Joins an engine thread; a panic that escaped it fails the database.
    fn join(&self, name: &str, h: std::thread::JoinHandle<()>) {
        if let Err(payload) = h.join() {
            self.fail(Error::Failed(Failure::from_panic(name, payload.as_ref())));
        }
    }
}

/// Runs an engine thread's body; a panic in it becomes the database's failure (and fails the
/// pending pipelined commits) instead of vanishing with the thread.
fn guarded(name: &'static str, weak: Weak<Inner>, body: impl FnOnce(Weak<Inner>)) {
    let w = weak.clone();
    if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(move || body(w))) {
        let why = Failure::from_panic(name, payload.as_ref());
        if let Some(inner) = weak.upgrade() {
            let db = Db { inner };
            db.fail(Error::Failed(why.clone()));
            if let Some(pipe) = &db.inner.pipe {
                pipe.exit(why);
            }
        }
    }
}

/// The flush thread of pipelined commit: makes the log durable up to the newest queued commit
/// (writing and syncing it; committing threads only copy their records into the log buffer),
/// makes the durable commits visible, and resolves their tickets.
pub(super) fn flusher(weak: Weak<Inner>, pipe: Arc<Pipeline>) {
    loop {
        let target = match pipe.next_target() {
            Target::Stop => break,
            Target::Idle => {
                if weak.strong_count() == 0 {
                    break;
                }
                continue;
            }
            Target::Lsn(l) => l,
        };
        let Some(inner) = weak.upgrade() else {
            break;
        };
        let db = Db { inner };
        let res = db.inner.wal.wait_durable(target);
        let durable = db.inner.wal.durable();
        db.inner.mvcc.advance(durable);
        pipe.resolve_upto(durable, &db.inner.counters.commits);
        if let Err(e) = res {
            if let Error::Failed(why) = db.fail(e) {
                pipe.fail_all(&why);
            }
        }
    }
    pipe.exit(Failure::new(Error::Closed));
}

/// Unsynced log after which a lazy commit wakes the flush thread early.
const LAZY_KICK_BYTES: u64 = 1 << 20;

/// What the lazy-commit flush thread and the committing threads share.
#[derive(Debug, Default)]
pub(super) struct LazyFlush {
    /// (stop, drain on stop, kicked)
    state: Mutex<(bool, bool, bool)>,
    cond: Condvar,
}

impl LazyFlush {
    pub(super) fn for_mode(mode: CommitMode) -> Option<Arc<Self>> {
        (mode == CommitMode::Lazy).then(|| Arc::new(Self::default()))
    }

    fn kick(&self) {
        let mut st = self.state.lock();
        if !st.2 {
            st.2 = true;
            self.cond.notify_one();
        }
    }

    fn stop(&self, drain: bool) {
        let mut st = self.state.lock();
        st.0 = true;
        st.1 = drain;
        self.cond.notify_all();
    }
}

/// The flush thread of lazy commit: every `every` (or when kicked), writes and syncs the log up
/// to its end. Failing the sync fails the database (later commits are refused): a commit
/// already returned may then be lost, as a crash would lose it, but never one in the middle.
fn lazy_flusher(weak: Weak<Inner>, lazy: Arc<LazyFlush>, every: Duration) {
    loop {
        let stopping = {
            let mut st = lazy.state.lock();
            if !st.0 && !st.2 {
                lazy.cond.wait_for(&mut st, every);
            }
            st.2 = false;
            match (st.0, st.1) {
                (true, false) => return,
                (stop, _) => stop,
            }
        };
        let Some(inner) = weak.upgrade() else { return };
        let db = Db { inner };
        if db.failure().is_none() {
            let end = db.inner.wal.end();
            if end > db.inner.wal.durable() {
                if let Err(e) = db.inner.wal.wait_durable(end) {
                    db.fail(e);
                }
            }
        }
        if stopping {
            return;
        }
    }
}

/// The log-preparing thread: keeps the ring ready ahead of the log's end until all of it is.
/// A failed zero write ends it quietly: the rounds then make their own room (and meet the
/// device's error themselves, if it persists).
fn log_prep(weak: Weak<Inner>) {
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if !inner.wal.preparing() || inner.closed.load(Ordering::Acquire) {
            return;
        }
        match inner.wal.prepare_ahead() {
            Ok(true) => {}
            Ok(false) => {
                let mut stop = inner.bg_stop.lock();
                if !*stop {
                    inner.bg_cond.wait_for(&mut stop, Duration::from_millis(10));
                }
            }
            Err(_) => return,
        }
        if *inner.bg_stop.lock() {
            return;
        }
    }
}

pub(super) fn background(weak: Weak<Inner>) {
    let mut last_ckpt = Instant::now();
    loop {
        let Some(inner) = weak.upgrade() else { return };
        {
            let mut stop = inner.bg_stop.lock();
            if *stop {
                return;
            }
            inner.bg_cond.wait_for(&mut stop, Duration::from_millis(20));
            if *stop {
                return;
            }
        }
        let db = Db { inner };
        if db.failure().is_some() || db.inner.closed.load(Ordering::Acquire) {
            continue;
        }
        let cap = db.inner.wal.capacity();
        let due = db
            .inner
            .opts
            .checkpoint_interval
            .is_some_and(|every| last_ckpt.elapsed() >= every);
        if db.inner.wal.used() > cap / 2 || due {
            let _ = db.checkpoint_background();
            last_ckpt = Instant::now();
        }
        chores(&db);
    }
}

/// The background thread's work besides checkpoints (also done by a paced checkpoint while
/// it waits): cleaning when half the pool is dirty, the flash cache's staged clean pages,
/// the pool back to its size, old versions dropped.
pub(super) fn chores(db: &Db) {
    if db.inner.pool.dirty_frames() * 2 > db.inner.pool.frames() {
        if let Err(e) = db.inner.pool.clean_batch(None) {
            db.fail(e);
        }
    }
    if let Some(fc) = db.inner.pool.flash() {
        // Clean pages evicted from DRAM wait for a ring write (pages `all`).
        if fc.staged_full() {
            if let Err(e) = fc.write(Vec::new()) {
                db.fail(e);
            }
        }
    }
    db.inner.pool.trim();
    db.inner.mvcc.gc();
}
