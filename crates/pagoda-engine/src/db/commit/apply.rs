//! The steps every commit mode shares: the pre-read outside the commit lock; validation, the
//! apply and the commit record (with the stamping of its pages) under it.

use super::super::{Db, Txn};
use crate::btree::{self, inline_max, Apply};
use crate::error::{Error, Result};
use crate::format::{CommitRecord, RedoOp, Val};
use crate::mvcc::{Value, Version};
use crate::probe::{self, Sabotage};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

thread_local! {
    /// The committing thread's record buffer, reused: a fresh 100 KiB record per bulk-load
    /// commit was new memory the kernel zeroed each time (`clear_page_erms`).
    static RECORD_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A record buffer larger than this is not kept for the thread's next commit.
const KEPT_RECORD_BUF: usize = 4 << 20;

impl Db {
    /// Appends the commit record of an applied change and stamps its pages. Caller holds the
    /// commit lock. Returns the record's end LSN.
    pub(in crate::db) fn log_and_stamp(
        &self,
        ap: &Apply<'_>,
        ops: Vec<RedoOp>,
        cts: u64,
    ) -> Result<u64> {
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
}

impl Txn<'_> {
    /// Reads, before the commit lock, what the apply step needs: each key's root and its
    /// previous value (for the version chain), which also brings the descent path and any
    /// overflow pages of the old value into the pool, so that the critical section finds
    /// them there instead of reading the device. The values stay valid under the lock: a
    /// commit that changes one of these keys meanwhile has a timestamp above our snapshot
    /// and makes the validation under the lock fail.
    pub(super) fn pre_read(&self) -> Result<Vec<(u64, Value)>> {
        let db = &self.db;
        let pool = &db.inner.pool;
        let mut out = Vec::with_capacity(self.writes.borrow().len());
        for wk in self.writes.borrow().keys() {
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

    /// Under the commit lock: first committer wins (a key with a version newer than the
    /// snapshot is a conflict), and no written table was dropped since the pre-read.
    pub(super) fn validate(&self, pre: &[(u64, Value)]) -> Result<()> {
        let db = self.db;
        let mvcc = &db.inner.mvcc;
        for wk in self.writes.borrow().keys() {
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
            for (wk, (root, _)) in self.writes.borrow().keys().zip(pre) {
                if r.get(&wk.0) != Some(root) {
                    return Err(Error::NoSuchTable(format!("(table id {}, dropped)", wk.0)));
                }
            }
        }
        Ok(())
    }

    /// Under the commit lock: pushes the versions into the MVCC chains and applies the writes
    /// to the trees under the undo journal, then logs the record and stamps its pages. A
    /// failure before the record is logged retracts the versions and undoes the pages.
    /// Returns the record's end LSN.
    pub(super) fn apply_and_log(&self, cts: u64, pre: Vec<(u64, Value)>) -> Result<u64> {
        let db = self.db;
        let ps = db.inner.pool.page_size();
        let mvcc = &db.inner.mvcc;
        let pool = &db.inner.pool;
        // Overflow pages held for snapshots that have all ended may be reused now.
        if !pool.held().is_empty() {
            pool.held().release(mvcc.horizon());
        }
        pool.begin_undo();
        let res = (|| {
            let mut ap = Apply::new(pool, db.inner.meta_page);
            ap.hold = Some(cts);
            let mut ops = Vec::with_capacity(self.writes.borrow().len());
            let mut leaves = Vec::with_capacity(self.writes.borrow().len());
            for ((wk, v), (root, prev)) in self.writes.borrow().iter().zip(pre) {
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
                for wk in self.writes.borrow().keys() {
                    mvcc.retract(wk, cts);
                }
                return Err(db.undo(e));
            }
        };
        Ok(end)
    }
}
