//! The commit path: validation (first committer wins), apply under the commit lock, the
//! commit record (`apply.rs`, shared by every mode), then per mode how the commit becomes
//! durable and visible: `sync.rs` waits, `lazy.rs` leaves it to the lazy flush thread,
//! `pipelined.rs` queues it for the flush thread and returns a ticket.

mod apply;
mod lazy;
mod pipelined;
mod sync;

use super::{Db, Txn};
use crate::error::{Error, Result};
use crate::options::CommitMode;
use crate::pipeline::{Admission, CommitInfo, CommitTicket};
use crate::probe::{self, Sabotage};
use crate::profile::{Phase, Stamp};
use std::sync::atomic::Ordering;

#[derive(Debug)]
pub(super) struct CommitState {
    pub(super) next_cts: u64,
}

impl Db {
    /// Takes the commit lock, yielding the CPU a few times before sleeping on it: the critical
    /// section is short (tens of µs), and with more runnable threads than cores a sleeping
    /// waiter's wake-up costs more than the section itself (the lock then idles between
    /// holders).
    pub(super) fn lock_commit(&self) -> parking_lot::MutexGuard<'_, CommitState> {
        crate::buffer::latch_order::assert_no_latch("the commit lock");
        for _ in 0..32 {
            if let Some(g) = self.inner.commit.try_lock() {
                return g;
            }
            std::thread::yield_now();
        }
        self.inner.commit.lock()
    }

    /// The commit lock, for a change: refused once the database has failed. A committer that
    /// passed [`Db::check_writable`] may have waited here behind the change that failed it (a
    /// drop whose sync failed has freed its table's pages in memory, and the table is still
    /// visible), so the check is repeated under the lock: a failed database applies nothing.
    pub(super) fn lock_writable(&self) -> Result<parking_lot::MutexGuard<'_, CommitState>> {
        let cs = self.lock_commit();
        self.check_writable()?;
        Ok(cs)
    }

    /// After a change failed before its record was logged: puts the changed pages back as
    /// they were (see [`crate::buffer::Pool::rollback_undo`]) and returns the error for the
    /// caller; the database fails only if the error itself must fail it or the undo failed.
    pub(super) fn undo(&self, e: Error) -> Error {
        match self.inner.pool.rollback_undo() {
            Ok(()) => self.fail(e),
            Err(_) => self.fail_now(e),
        }
    }

    pub(super) fn wait(&self, end: u64) -> Result<()> {
        self.waited(self.inner.wal.wait_durable(end))
    }

    /// [`Db::wait`] for a synchronous commit: a round's leader may gather the committers the
    /// last round acknowledged (see the log's group commit).
    pub(super) fn wait_commit(&self, end: u64) -> Result<()> {
        self.waited(self.inner.wal.wait_committed(end))
    }

    fn waited(&self, r: Result<()>) -> Result<()> {
        if let Err(e) = r {
            return Err(self.fail(e));
        }
        self.inner.mvcc.advance(self.inner.wal.durable());
        Ok(())
    }

    pub(super) fn ensure_log_space(&self, need: u64) -> Result<()> {
        let cap = self.inner.wal.capacity();
        // One commit record may take up to half the log (it is one group, of any size); a
        // checkpoint first makes room for it.
        if need > cap / 2 {
            return Err(Error::LogFull {
                need,
                capacity: cap,
            });
        }
        let short = || self.inner.wal.used() + need > cap / 4 * 3;
        if short() {
            let t0 = Stamp::now();
            let r = self.make_log_space(&short);
            self.inner.wal.profile.add(Phase::LogWaitSpace, t0);
            return r;
        }
        Ok(())
    }

    /// Waits for the checkpoint running, or runs one, until `short()` no longer holds.
    fn make_log_space(&self, short: &dyn Fn() -> bool) -> Result<()> {
        // The checkpoint running (the background thread's, begun at half the log) frees
        // the log when it ends: wait for it, and take another only if it left too little.
        // Taking one after it regardless wrote the whole dirty set twice while commits
        // stood (1.7 s stalls in no-sync runs of a million records).
        self.check_writable()?;
        // A paced checkpoint running turns to full speed while anyone waits here.
        self.hurrying(|| {
            let one = self.inner.ckpt_lock.lock();
            if short() {
                self.checkpoint_held(&one, false)?;
            }
            Ok(())
        })
    }
}

impl Txn<'_> {
    /// Commits and waits until durable ([`super::WriteTxn::commit`] documents it).
    pub(super) fn commit(self) -> Result<CommitInfo> {
        match self.db.inner.opts.commit {
            // Nothing to commit (a reader): no phase to time either.
            _ if self.writes.borrow().is_empty() && self.aborted.borrow().is_none() => {
                self.finish(None).and_then(|t| t.wait())
            }
            CommitMode::Sync | CommitMode::Lazy => {
                let t0 = Stamp::now();
                let db = self.db;
                let r = self.finish(None).and_then(|t| t.wait());
                db.inner.wal.profile.add(Phase::Commit, t0);
                r
            }
            CommitMode::Pipelined => self.commit_pipelined()?.wait(),
        }
    }

    /// Commits without waiting ([`super::WriteTxn::commit_pipelined`] documents it).
    pub(super) fn commit_pipelined(self) -> Result<CommitTicket> {
        let t0 = Stamp::now();
        let db = self.db;
        let r = match db.inner.pipe.as_ref() {
            None => self.finish(None),
            Some(pipe) => match pipe.admit() {
                Ok(adm) => self.finish(Some(adm)),
                Err(e) => {
                    let mut me = self;
                    me.done = true;
                    me.db.inner.mvcc.release(me.snapshot);
                    Err(e)
                }
            },
        };
        db.inner.wal.profile.add(Phase::Commit, t0);
        r
    }

    pub(super) fn finish(mut self, adm: Option<Admission>) -> Result<CommitTicket> {
        self.done = true;
        let res = self.commit_inner(adm);
        self.db.inner.mvcc.release(self.snapshot);
        if matches!(res, Err(Error::Conflict { .. })) {
            self.db
                .inner
                .counters
                .conflicts
                .fetch_add(1, Ordering::Relaxed);
        }
        res
    }

    pub(super) fn commit_inner(&mut self, adm: Option<Admission>) -> Result<CommitTicket> {
        if let Some((table, key)) = self.aborted.take() {
            return Err(Error::Conflict { table, key });
        }
        if self.writes.borrow().is_empty() {
            return Ok(CommitTicket::resolved(CommitInfo { cts: 0, lsn: 0 }));
        }
        let prof = &self.db.inner.wal.profile;
        let db = self.db;
        db.check_writable()?;
        let ps = db.inner.pool.page_size();
        let estimate: u64 = self
            .writes
            .borrow()
            .iter()
            .map(|((_, k), v)| (k.len() + v.as_ref().map_or(0, |b| b.len()) + 64) as u64)
            .sum::<u64>()
            + (8 + self.writes.borrow().len() as u64 / 16) * ps as u64;
        let pre = self.pre_read()?;
        // Room in the log is checked again under the commit lock (other committers may have
        // used it meanwhile): once a commit has changed pages, its record must fit.
        // Waiting for log space is booked apart from the commit lock (`log.wait_space`).
        let (mut cs, t_apply) = loop {
            db.ensure_log_space(estimate)?;
            let t_lock = Stamp::now();
            let cs = db.lock_writable()?;
            let cap = db.inner.wal.capacity();
            if db.inner.wal.used() + estimate <= cap / 8 * 7 {
                break (cs, prof.add(Phase::CommitLock, t_lock));
            }
            drop(cs);
            let t_space = prof.add(Phase::CommitLock, t_lock);
            db.checkpoint()?;
            prof.add(Phase::LogWaitSpace, t_space);
        };
        self.validate(&pre)?;
        let cts = cs.next_cts;
        let end = self.apply_and_log(cts, pre)?;
        cs.next_cts += 1;
        let mvcc = &db.inner.mvcc;
        mvcc.committed(cts, end);
        let lazy = db.inner.opts.commit == CommitMode::Lazy;
        if lazy {
            db.visible_at_once(end);
        }
        if probe::is(db.inner.opts.sabotage, Sabotage::VisibleBeforeDurable) {
            mvcc.advance(u64::MAX);
        }
        let logged = Logged {
            cs,
            info: CommitInfo { cts, lsn: end },
            t_apply,
        };
        // The modes differ only from here on: how the commit becomes durable and visible.
        match adm {
            Some(adm) => Ok(db.commit_queued(logged, adm)),
            None if lazy => db.commit_lazy(logged),
            None => db.commit_sync(logged),
        }
    }
}

/// A commit whose record is in the log, still under the commit lock.
pub(super) struct Logged<'a> {
    pub(super) cs: parking_lot::MutexGuard<'a, CommitState>,
    pub(super) info: CommitInfo,
    /// When the apply began (after the lock was taken), for the phase profile.
    pub(super) t_apply: Stamp,
}

impl Db {
    /// The end of a commit that does not wait for a flush thread (sync, lazy): counts it and
    /// collects old versions every 64 commits.
    fn count_commit(&self, info: CommitInfo) -> CommitTicket {
        let n = self.inner.counters.commits.fetch_add(1, Ordering::Relaxed);
        if n.is_multiple_of(64) {
            self.inner.mvcc.gc();
        }
        CommitTicket::resolved(info)
    }
}
