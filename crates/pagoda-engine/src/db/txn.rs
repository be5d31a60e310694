//! The transaction core behind [`super::ReadTxn`] and [`super::WriteTxn`]: snapshot reads,
//! buffered writes, rollback. Tables come in already resolved ([`Opened`]), so no operation
//! looks a name up.

use super::catalog::TableInfo;
use super::Db;
use crate::bounds::WKey;
use crate::btree::{self, MAX_KEY_LEN};
use crate::error::{Error, Result};
use crate::limits::MAX_VALUE_LEN;
use crate::mvcc::Resolved;
use crate::profile::{Phase, Stamp};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// A table resolved once, when a handle opens it: its name (for errors) and its id and root.
#[derive(Debug)]
pub(super) struct Opened {
    pub(super) name: Box<str>,
    pub(super) info: TableInfo,
}

/// A transaction. Reads see the snapshot taken at `begin` plus the transaction's own writes;
/// writes are buffered until commit. Dropping an uncommitted transaction rolls it back.
///
/// The buffered writes sit in a `RefCell` so that several table handles, each borrowing the
/// transaction, can write at once; every borrow is released before the call returns.
#[derive(Debug)]
pub(crate) struct Txn<'db> {
    pub(super) db: &'db Db,
    pub(super) snapshot: u64,
    /// Buffered writes (`None`: delete). A value is shared with the version the commit
    /// chains, not copied for it.
    pub(super) writes: RefCell<BTreeMap<WKey, crate::mvcc::Value>>,
    pub(super) done: bool,
    pub(super) aborted: RefCell<Option<(String, String)>>,
}

impl<'db> Txn<'db> {
    pub(super) fn new(db: &'db Db) -> Self {
        let snapshot = db.inner.mvcc.snapshot();
        Self {
            db,
            snapshot,
            writes: RefCell::new(BTreeMap::new()),
            done: false,
            aborted: RefCell::new(None),
        }
    }

    /// Resolves `name` for a table handle: the one catalog lookup a handle costs.
    pub(super) fn open(&self, name: &str) -> Result<Opened> {
        Ok(Opened {
            name: name.into(),
            info: self.db.table(name)?,
        })
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

    /// Reads `key` of `t`.
    pub(super) fn get(&self, t: &Opened, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let t0 = Stamp::now();
        let r = self.get_inner(t, key);
        self.db.inner.wal.profile.add(Phase::Search, t0);
        r
    }

    fn get_inner(&self, t: &Opened, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Self::check_key(key)?;
        let info = t.info;
        {
            let writes = self.writes.borrow();
            if !writes.is_empty() {
                if let Some(v) = writes.get(&(info.id, key.to_vec())) {
                    return Ok(v.as_deref().map(<[u8]>::to_vec));
                }
            }
        }
        let pool = &self.db.inner.pool;
        let tree = btree::get(pool, info.root, key)
            .and_then(|v| v.map(|v| btree::into_value(pool, v)).transpose());
        let r = match self.db.inner.mvcc.read(info.id, key, self.snapshot) {
            // The versions answer, but a failed tree read still reaches the caller: a device
            // error or damage must never go unheard because memory happened to hold the value.
            Resolved::Value(v) => tree.map(|_| v.map(|b| b.to_vec())),
            Resolved::Tree => tree,
        };
        // After the read (see `still_live`), on both paths: a handle opened before a drop
        // reads nothing of the dropped table, as its scans do not either.
        // A device error is the device's, dropped table or not: it must reach the caller.
        if matches!(r, Err(Error::Device(_))) {
            return r;
        }
        self.db.still_live(&t.name, info)?;
        r
    }

    /// Buffers a write of `key` in `t` (`None`: a delete).
    pub(super) fn write(&self, t: &Opened, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let t0 = Stamp::now();
        let r = self.write_inner(t, key, value);
        self.db.inner.wal.profile.add(Phase::Update, t0);
        r
    }

    fn write_inner(&self, t: &Opened, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        Self::check_key(key)?;
        if let Some(v) = value {
            let max = MAX_VALUE_LEN.min((self.db.inner.wal.capacity() / 4) as usize);
            if v.len() > max {
                return Err(Error::ValueTooLarge { len: v.len(), max });
            }
        }
        let wk = (t.info.id, key.to_vec());
        if self
            .db
            .inner
            .mvcc
            .newest(&wk)
            .is_some_and(|c| c > self.snapshot)
        {
            let e = (
                t.name.to_string(),
                String::from_utf8_lossy(key).into_owned(),
            );
            *self.aborted.borrow_mut() = Some(e.clone());
            return Err(Error::Conflict {
                table: e.0,
                key: e.1,
            });
        }
        self.writes
            .borrow_mut()
            .insert(wk, value.map(std::sync::Arc::from));
        Ok(())
    }

    /// Discards the transaction's writes.
    pub(super) fn rollback(mut self) {
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
