//! The commit path: validation (first committer wins), apply under the commit lock, the
//! commit record, and waiting for durability (sync) or a ticket (pipelined).

use super::{Db, Txn};
use crate::btree::{self, inline_max, Apply};
use crate::error::{Error, Result};
use crate::format::{CommitRecord, RedoOp, Val};
use crate::mvcc::{Value, Version};
use crate::options::CommitMode;
use crate::pipeline::{Admission, CommitInfo, CommitTicket};
use crate::probe::{self, Sabotage};
use crate::profile::{Phase, Stamp};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[derive(Debug)]
pub(super) struct CommitState {
    pub(super) next_cts: u64,
}

thread_local! {
    /// The committing thread's record buffer, reused: a fresh 100 KiB record per bulk-load
    /// commit was new memory the kernel zeroed each time (`clear_page_erms`).
    static RECORD_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A record buffer larger than this is not kept for the thread's next commit.
const KEPT_RECORD_BUF: usize = 4 << 20;

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

    /// Appends the commit record of an applied change and stamps its pages. Caller holds the
    /// commit lock. Returns the record's end LSN.
    pub(super) fn log_and_stamp(&self, ap: &Apply<'_>, ops: Vec<RedoOp>, cts: u64) -> Result<u64> {
        let images = ap.images()?;
        let (lsn, end) = RECORD_BUF.with(|buf| {
            let mut buf = buf.borrow_mut();
            CommitRecord { cts, ops, images }.encode_into(&mut buf);
            let r = self.inner.wal.append(&mut buf);
            if buf.capacity() > KEPT_RECORD_BUF {
                *buf = Vec::new();
            }
            r
        })?;
        // Logged: the change can no longer be taken back, and failing from here on fails the
        // database.
        self.inner.pool.end_undo();
        let stamped = (|| {
            let touched: Vec<u64> = ap
                .touched
                .iter()
                .copied()
                .filter(|p| !ap.freed.contains(p))
                .collect();
            self.inner.pool.stamp(&touched, lsn, &ap.imaged)?;
            // Freed pages may still sit in the pool marked "in progress"; stamp them too (the
            // record holds no image of them).
            let freed: Vec<u64> = ap.freed.iter().copied().collect();
            self.inner.pool.stamp(&freed, lsn, &BTreeSet::new())
        })();
        if let Err(e) = stamped {
            return Err(self.fail_now(e));
        }
        self.inner.pool.applied.store(end, Ordering::Release);
        self.inner.pool.trim();
        Ok(end)
    }

    /// The operations of a commit that redo needs beside its page images: an operation whose
    /// key ends in a leaf imaged by the same record is in that image, and redo skips it
    /// anyway (the leaf's LSN is at least the record's, and later records that move the key
    /// image the leaves they change), so the record does not carry it twice. A bulk insert
    /// fills new leaves, so this halves its log. Called after every change is applied.
    /// `leaves[i]` is the leaf operation `i` found ([`Apply::last_leaf`]).
    fn ops_outside_images(&self, ap: &Apply<'_>, ops: Vec<RedoOp>, leaves: &[u64]) -> Vec<RedoOp> {
        if probe::is(self.inner.opts.sabotage, Sabotage::DropOpsOfImagedRecords) {
            return Vec::new();
        }
        ops.into_iter()
            .zip(leaves)
            .filter(|(op, leaf)| {
                // A found leaf that a merge freed gave its keys to an imaged sibling.
                matches!(op, RedoOp::DropTable { .. })
                    || !(ap.imaged.contains(leaf) || ap.freed.contains(leaf))
            })
            .map(|(op, _)| op)
            .collect()
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
        if let Err(e) = self.inner.wal.wait_durable(end) {
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
            // The checkpoint running (the background thread's, begun at half the log) frees
            // the log when it ends: wait for it, and take another only if it left too little.
            // Taking one after it regardless wrote the whole dirty set twice while commits
            // stood (1.7 s stalls in no-sync runs of a million records).
            self.check_writable()?;
            let one = self.inner.ckpt_lock.lock();
            if short() {
                self.checkpoint_held(&one)?;
            }
        }
        Ok(())
    }
}

impl Txn<'_> {
    /// Commits: validates (first committer wins), applies, logs, and returns once durable
    /// (in [`CommitMode::Pipelined`] by waiting for the ticket of
    /// [`Txn::commit_pipelined`]).
    pub fn commit(self) -> Result<CommitInfo> {
        match self.db.inner.opts.commit {
            // Nothing to commit (a reader): no phase to time either.
            _ if self.writes.is_empty() && self.aborted.is_none() => {
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

    /// Pipelined commit: validates (first committer wins), applies, appends the commit record
    /// to the log buffer and returns at once with a [`CommitTicket`], without waiting for the
    /// log write or sync (the database's flush thread does them). The transaction is committed
    /// only when the ticket resolves: until then other transactions do not see its writes,
    /// and a crash may lose it (never partly). A later transaction writing one of its keys
    /// fails with [`Error::Conflict`] (first committer wins, counting pending commits).
    ///
    /// Blocks while [`crate::DbOptions::max_inflight_commits`] commits are in flight
    /// (back-pressure). In [`CommitMode::Sync`] there is no flush thread: it commits
    /// synchronously and returns a resolved ticket. Errors (conflicts, a failed database) are
    /// returned here; a ticket fails only if the database fails before the record is durable.
    pub fn commit_pipelined(self) -> Result<CommitTicket> {
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

    /// Reads, before the commit lock, what the apply step needs: each key's root and its
    /// previous value (for the version chain), which also brings the descent path and any
    /// overflow pages of the old value into the pool, so that the critical section finds
    /// them there instead of reading the device. The values stay valid under the lock: a
    /// commit that changes one of these keys meanwhile has a timestamp above our snapshot
    /// and makes the validation under the lock fail.
    fn pre_read(&self) -> Result<Vec<(u64, Value)>> {
        let db = &self.db;
        let pool = &db.inner.pool;
        let mut out = Vec::with_capacity(self.writes.len());
        for wk in self.writes.keys() {
            let root = db
                .inner
                .roots
                .read()
                .get(&wk.0)
                .copied()
                .ok_or_else(|| Error::NoSuchTable(format!("(table id {}, dropped)", wk.0)))?;
            let old = btree::get(pool, root, &wk.1)?;
            let newest = db.inner.mvcc.newest_value(wk);
            let prev = match (newest, old) {
                (Some(v), old) => {
                    if let Some(old @ Val::Overflow { .. }) = old {
                        // Warm the chain the apply step frees.
                        btree::load_value(pool, &old)?;
                    }
                    v
                }
                (None, Some(val)) => Some(Arc::from(btree::into_value(pool, val)?)),
                (None, None) => None,
            };
            out.push((root, prev));
        }
        Ok(out)
    }

    pub(super) fn commit_inner(&mut self, adm: Option<Admission>) -> Result<CommitTicket> {
        if let Some((table, key)) = self.aborted.take() {
            return Err(Error::Conflict { table, key });
        }
        if self.writes.is_empty() {
            return Ok(CommitTicket::resolved(CommitInfo { cts: 0, lsn: 0 }));
        }
        let prof = &self.db.inner.wal.profile;
        let db = self.db;
        db.check_writable()?;
        let ps = db.inner.pool.page_size();
        let estimate: u64 = self
            .writes
            .iter()
            .map(|((_, k), v)| (k.len() + v.as_ref().map_or(0, |b| b.len()) + 64) as u64)
            .sum::<u64>()
            + (8 + self.writes.len() as u64 / 16) * ps as u64;
        let pre = self.pre_read()?;
        // Room in the log is checked again under the commit lock (other committers may have
        // used it meanwhile): once a commit has changed pages, its record must fit.
        let t_lock = Stamp::now();
        let mut cs = loop {
            db.ensure_log_space(estimate)?;
            let cs = db.lock_writable()?;
            let cap = db.inner.wal.capacity();
            if db.inner.wal.used() + estimate <= cap / 8 * 7 {
                break cs;
            }
            drop(cs);
            db.checkpoint()?;
        };
        let t_apply = prof.add(Phase::CommitLock, t_lock);
        let mvcc = &db.inner.mvcc;
        for wk in self.writes.keys() {
            if mvcc.newest(wk).is_some_and(|c| c > self.snapshot) {
                let name = db
                    .inner
                    .catalog
                    .read()
                    .iter()
                    .find(|(_, t)| t.id == wk.0)
                    .map(|(n, _)| n.clone())
                    .unwrap_or_default();
                return Err(Error::Conflict {
                    table: name,
                    key: String::from_utf8_lossy(&wk.1).into_owned(),
                });
            }
        }
        {
            // A table dropped since the reads above: its pages may be reused.
            let r = db.inner.roots.read();
            for (wk, (root, _)) in self.writes.keys().zip(&pre) {
                if r.get(&wk.0) != Some(root) {
                    return Err(Error::NoSuchTable(format!("(table id {}, dropped)", wk.0)));
                }
            }
        }
        let cts = cs.next_cts;
        let pool = &db.inner.pool;
        pool.begin_undo();
        let res = (|| {
            let mut ap = Apply::new(pool, db.inner.meta_page);
            let mut ops = Vec::with_capacity(self.writes.len());
            let mut leaves = Vec::with_capacity(self.writes.len());
            for ((wk, v), (root, prev)) in self.writes.iter().zip(pre) {
                mvcc.push(
                    wk.clone(),
                    Version {
                        cts,
                        val: v.clone(),
                        prev,
                    },
                );
                match v {
                    Some(b) => {
                        let val = if b.len() > inline_max(ps) {
                            ap.write_overflow(b)?
                        } else {
                            Val::Inline(b.to_vec())
                        };
                        let old = ap.put(root, &wk.1, val.clone())?;
                        leaves.push(ap.last_leaf);
                        if let Some(old) = old {
                            ap.free_value(&old)?;
                        }
                        ops.push(RedoOp::Put {
                            table: wk.0,
                            key: wk.1.clone(),
                            val,
                        });
                    }
                    None => {
                        let old = ap.delete(root, &wk.1)?;
                        leaves.push(ap.last_leaf);
                        if let Some(old) = old {
                            ap.free_value(&old)?;
                        }
                        ops.push(RedoOp::Delete {
                            table: wk.0,
                            key: wk.1.clone(),
                        });
                    }
                }
            }
            if !ap.imaged.is_empty() {
                ops = db.ops_outside_images(&ap, ops, &leaves);
            }
            db.log_and_stamp(&ap, ops, cts)
        })();
        let end = match res {
            Ok(end) => end,
            Err(e) => {
                for wk in self.writes.keys() {
                    mvcc.retract(wk, cts);
                }
                return Err(db.undo(e));
            }
        };
        cs.next_cts += 1;
        mvcc.committed(cts, end);
        let lazy = db.inner.opts.commit == CommitMode::Lazy;
        if lazy {
            // Committed at once: visible in commit order (under the commit lock), durable with
            // the log buffer it is in, so a crash keeps a prefix of the commit order.
            mvcc.advance(end);
        }
        let sabotage = db.inner.opts.sabotage;
        if probe::is(sabotage, Sabotage::VisibleBeforeDurable) {
            mvcc.advance(u64::MAX);
        }
        let info = CommitInfo { cts, lsn: end };
        if let Some(adm) = adm {
            // Queued in commit order, under the commit lock.
            let mut ticket = adm.enqueue(info);
            if probe::is(sabotage, Sabotage::AckBeforeDurable) {
                ticket = CommitTicket::resolved(info);
            }
            drop(cs);
            prof.add(Phase::CommitApply, t_apply);
            if cts.is_multiple_of(64) {
                mvcc.gc();
            }
            return Ok(ticket);
        }
        drop(cs);
        let t_wait = prof.add(Phase::CommitApply, t_apply);
        if lazy {
            db.kick_lazy_flusher(end);
        } else if !probe::is(sabotage, Sabotage::AckBeforeDurable) {
            db.wait(end)?;
        }
        prof.add(Phase::WaitDurable, t_wait);
        let n = db.inner.counters.commits.fetch_add(1, Ordering::Relaxed);
        if n.is_multiple_of(64) {
            mvcc.gc();
        }
        Ok(CommitTicket::resolved(info))
    }
}
