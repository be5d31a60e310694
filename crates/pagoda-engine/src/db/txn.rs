//! Transactions: snapshot reads, buffered writes, scans, rollback.

use super::Db;
use crate::bounds::WKey;
use crate::btree::{self, MAX_KEY_LEN};
use crate::error::{Error, Result};
use crate::mvcc::Resolved;
use crate::profile::{Phase, Stamp};
use crate::MAX_VALUE_LEN;
use std::collections::BTreeMap;

/// A transaction. Reads see the snapshot taken at `begin` plus the transaction's own writes;
/// writes are buffered until [`Txn::commit`]. Dropping an uncommitted transaction rolls it
/// back.
#[derive(Debug)]
pub struct Txn<'db> {
    pub(super) db: &'db Db,
    pub(super) snapshot: u64,
    /// Buffered writes (`None`: delete). A value is shared with the version the commit
    /// chains, not copied for it.
    pub(super) writes: BTreeMap<WKey, crate::mvcc::Value>,
    pub(super) read_only: bool,
    pub(super) done: bool,
    pub(super) aborted: Option<(String, String)>,
}

impl<'db> Txn<'db> {
    pub(super) fn new(db: &'db Db, read_only: bool) -> Self {
        let snapshot = db.inner.mvcc.snapshot();
        Self {
            db,
            snapshot,
            writes: BTreeMap::new(),
            read_only,
            done: false,
            aborted: None,
        }
    }

    /// The snapshot timestamp: this transaction sees every commit with a timestamp up to it.
    pub fn snapshot(&self) -> u64 {
        self.snapshot
    }

    pub(super) fn check_key(key: &[u8]) -> Result<()> {
        if key.len() > MAX_KEY_LEN {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: MAX_KEY_LEN,
            });
        }
        Ok(())
    }

    /// Reads `key` of `table`.
    pub fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let t0 = Stamp::now();
        let r = self.get_inner(table, key);
        self.db.inner.wal.profile.add(Phase::Search, t0);
        r
    }

    pub(super) fn get_inner(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Self::check_key(key)?;
        let t = self.db.table(table)?;
        if !self.writes.is_empty() {
            if let Some(v) = self.writes.get(&(t.id, key.to_vec())) {
                return Ok(v.as_deref().map(<[u8]>::to_vec));
            }
        }
        let pool = &self.db.inner.pool;
        let tree = btree::get(pool, t.root, key)
            .and_then(|v| v.map(|v| btree::into_value(pool, v)).transpose());
        match self.db.inner.mvcc.read(t.id, key, self.snapshot) {
            Resolved::Value(v) => Ok(v.map(|b| b.to_vec())),
            Resolved::Tree => {
                self.db.still_live(table, t)?;
                tree
            }
        }
    }

    pub(super) fn write(&mut self, table: &str, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let t0 = Stamp::now();
        let r = self.write_inner(table, key, value);
        self.db.inner.wal.profile.add(Phase::Update, t0);
        r
    }

    pub(super) fn write_inner(
        &mut self,
        table: &str,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        Self::check_key(key)?;
        if let Some(v) = value {
            let max = MAX_VALUE_LEN.min((self.db.inner.wal.capacity() / 4) as usize);
            if v.len() > max {
                return Err(Error::ValueTooLarge { len: v.len(), max });
            }
        }
        let t = self.db.table(table)?;
        let wk = (t.id, key.to_vec());
        if self
            .db
            .inner
            .mvcc
            .newest(&wk)
            .is_some_and(|c| c > self.snapshot)
        {
            let e = (table.to_string(), String::from_utf8_lossy(key).into_owned());
            self.aborted = Some(e.clone());
            return Err(Error::Conflict {
                table: e.0,
                key: e.1,
            });
        }
        self.writes.insert(wk, value.map(std::sync::Arc::from));
        Ok(())
    }

    /// Sets `key` to `value` in `table`.
    pub fn put(&mut self, table: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(table, key, Some(value))
    }

    /// Removes `key` from `table` (no error when absent).
    pub fn delete(&mut self, table: &str, key: &[u8]) -> Result<()> {
        self.write(table, key, None)
    }

    /// Discards the transaction's writes.
    pub fn rollback(mut self) {
        self.done = true;
        self.db.inner.mvcc.release(self.snapshot);
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.db.inner.mvcc.release(self.snapshot);
        }
    }
}
