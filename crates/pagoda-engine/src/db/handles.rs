//! The typed transaction API: [`ReadTxn`] and [`WriteTxn`] (read-only is a type, not a flag),
//! and the table handles they open once ([`ReadOnlyTable`], [`Table`]), which resolve the
//! table's id and root at open so that no operation looks a name up.

use super::scan::Scan;
use super::txn::{Opened, Txn};
use crate::error::Result;
use crate::pipeline::{CommitInfo, CommitTicket};
use std::ops::RangeBounds;

/// A read-only transaction: a snapshot of every table, taken at [`crate::Db::begin_read`].
/// It has no writes, so it never conflicts and ends by being dropped. Its tables have no
/// `put` or `delete` at all, so a write in a reader is a compile error, not a runtime one:
///
/// ```compile_fail
/// # fn f(db: &pagoda_engine::Db) -> pagoda_engine::Result<()> {
/// let tx = db.begin_read()?;
/// tx.open_table("t")?.put(b"k", b"v")?; // ReadOnlyTable has no put
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ReadTxn<'db> {
    pub(super) txn: Txn<'db>,
}

/// A read-write transaction ([`crate::Db::begin_write`]). Reads see its snapshot plus its own
/// writes; writes are buffered until [`WriteTxn::commit`] (first committer wins). Dropping it
/// uncommitted rolls it back.
#[derive(Debug)]
pub struct WriteTxn<'db> {
    pub(super) txn: Txn<'db>,
}

/// A table opened in a [`ReadTxn`] (or read through a [`Table`]): gets and scans over the
/// transaction's snapshot.
#[derive(Debug)]
pub struct ReadOnlyTable<'t> {
    txn: &'t Txn<'t>,
    t: Opened,
}

/// A table opened in a [`WriteTxn`]: reads see the transaction's own writes; puts and deletes
/// are buffered in the transaction. Several tables of one transaction may be open at once;
/// all must be dropped before the transaction commits (the borrow checker sees to it).
#[derive(Debug)]
pub struct Table<'t> {
    read: ReadOnlyTable<'t>,
}

impl<'db> ReadTxn<'db> {
    /// The snapshot timestamp: this transaction sees every commit with a timestamp up to it.
    pub fn snapshot(&self) -> u64 {
        self.txn.snapshot
    }

    /// Opens `name` for reading. Errors: [`crate::Error::NoSuchTable`].
    pub fn open_table(&self, name: &str) -> Result<ReadOnlyTable<'_>> {
        Ok(ReadOnlyTable {
            txn: &self.txn,
            t: self.txn.open(name)?,
        })
    }
}

impl<'db> WriteTxn<'db> {
    /// The snapshot timestamp: this transaction sees every commit with a timestamp up to it.
    pub fn snapshot(&self) -> u64 {
        self.txn.snapshot
    }

    /// Opens `name` for reading and writing. Errors: [`crate::Error::NoSuchTable`] (tables are
    /// made by [`crate::Db::create_table`]).
    pub fn open_table(&self, name: &str) -> Result<Table<'_>> {
        Ok(Table {
            read: ReadOnlyTable {
                txn: &self.txn,
                t: self.txn.open(name)?,
            },
        })
    }

    /// Commits: validates (first committer wins), applies, logs, and returns once durable
    /// (in [`crate::CommitMode::Pipelined`] by waiting for the ticket of
    /// [`WriteTxn::commit_pipelined`]). Errors: [`crate::Error::Conflict`] when a transaction
    /// that committed after this one began wrote one of its keys (retry it).
    pub fn commit(self) -> Result<CommitInfo> {
        self.txn.commit()
    }

    /// Pipelined commit: validates (first committer wins), applies, appends the commit record
    /// to the log buffer and returns at once with a [`CommitTicket`], without waiting for the
    /// log write or sync (the database's flush thread does them). The transaction is committed
    /// only when the ticket resolves: until then other transactions do not see its writes,
    /// and a crash may lose it (never partly). A later transaction writing one of its keys
    /// fails with [`crate::Error::Conflict`] (first committer wins, counting pending commits).
    ///
    /// Blocks while [`crate::DbOptions::max_inflight_commits`] commits are in flight
    /// (back-pressure). In [`crate::CommitMode::Sync`] there is no flush thread: it commits
    /// synchronously and returns a resolved ticket. Errors (conflicts, a failed database) are
    /// returned here; a ticket fails only if the database fails before the record is durable.
    pub fn commit_pipelined(self) -> Result<CommitTicket> {
        self.txn.commit_pipelined()
    }

    /// Discards the transaction's writes (as dropping it does, but explicit).
    pub fn rollback(self) {
        self.txn.rollback();
    }
}

impl<'t> ReadOnlyTable<'t> {
    /// The table's name.
    pub fn name(&self) -> &str {
        &self.t.name
    }

    /// Reads `key`. Errors: [`crate::Error::KeyTooLarge`], or [`crate::Error::NoSuchTable`]
    /// when the table was dropped while this transaction read it.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.txn.get(&self.t, key)
    }

    /// Forward scan over `range` (e.g. `..` or
    /// `(Bound::Included(&b"a"[..]), Bound::Excluded(&b"m"[..]))`), one leaf at a time. The
    /// scan borrows the transaction, not this handle; in a [`WriteTxn`] each leaf it reads
    /// merges the transaction's writes as they are when it reaches that leaf.
    pub fn range<R: RangeBounds<[u8]>>(&self, range: R) -> Scan<'t> {
        self.txn.scan(&self.t, range, false)
    }

    /// Reverse scan over `range`, largest key first.
    pub fn range_rev<R: RangeBounds<[u8]>>(&self, range: R) -> Scan<'t> {
        self.txn.scan(&self.t, range, true)
    }
}

impl<'t> Table<'t> {
    /// The table's name.
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// This handle's read side, for code that reads tables of either kind of transaction.
    pub fn as_read_only(&self) -> &ReadOnlyTable<'t> {
        &self.read
    }

    /// Reads `key`, seeing this transaction's own writes.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read.get(key)
    }

    /// Forward scan over `range`, merging this transaction's own writes.
    pub fn range<R: RangeBounds<[u8]>>(&self, range: R) -> Scan<'t> {
        self.read.range(range)
    }

    /// Reverse scan over `range`, largest key first, merging this transaction's own writes.
    pub fn range_rev<R: RangeBounds<[u8]>>(&self, range: R) -> Scan<'t> {
        self.read.range_rev(range)
    }

    /// Sets `key` to `value`. Errors: [`crate::Error::KeyTooLarge`],
    /// [`crate::Error::ValueTooLarge`], [`crate::Error::Conflict`] when a newer commit wrote
    /// `key` already (the transaction can then only roll back).
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.read.txn.write(&self.read.t, key, Some(value))
    }

    /// Removes `key` (no error when absent); errors as [`Table::put`].
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.read.txn.write(&self.read.t, key, None)
    }
}
