//! The pagoda engine behind the workload crate's `Store` trait.

use pagoda_engine::{CommitTicket, Db, Error, ReadOnlyTable, ReadTxn, WriteTxn};
use pagoda_workload::store::Rows;
use pagoda_workload::{PendingCommit, Store, StoreError, StoreTxn};
use std::ops::Bound;

/// A pagoda database as a workload store.
#[derive(Debug)]
pub struct PagodaStore {
    db: Db,
    describe: String,
}

impl PagodaStore {
    /// Wraps an open database; `describe` names its devices and options.
    pub fn new(db: Db, describe: String) -> Self {
        Self { db, describe }
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// What `new` was told the store is.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// Closes the database (checkpoint), consuming the store.
    pub fn close(self) -> Result<(), Error> {
        self.db.close()
    }

    /// Drops the database as a crash would (no checkpoint; see [`Db::abandon`]).
    pub fn abandon(self) {
        self.db.abandon();
    }
}

fn store_err(e: Error) -> StoreError {
    match e {
        Error::Conflict { .. } => StoreError::Conflict,
        other => StoreError::Other(other.to_string()),
    }
}

impl Store for PagodaStore {
    fn create_table(&self, name: &str) -> Result<(), StoreError> {
        if self.db.list_tables().iter().any(|t| t == name) {
            return Ok(());
        }
        match self.db.create_table(name) {
            // Another loader thread may have created it meanwhile.
            Err(_) if self.db.list_tables().iter().any(|t| t == name) => Ok(()),
            r => r.map_err(store_err),
        }
    }

    fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        let tx = self.db.begin_write().map_err(store_err)?;
        Ok(Box::new(PagodaTxn::Write(tx)))
    }

    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        let tx = self.db.begin_read().map_err(store_err)?;
        Ok(Box::new(PagodaTxn::Read(tx)))
    }

    /// The engine's bottom-up build (`Db::bulk_load`): into an empty table, all or nothing.
    fn bulk_load(
        &self,
        table: &str,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<u64, StoreError> {
        self.db.bulk_load(table, rows).map_err(store_err)
    }

    /// A checkpoint: every page changed so far written to the data device and synced.
    fn make_durable(&self) -> Result<(), StoreError> {
        self.db.checkpoint().map(|_| ()).map_err(store_err)
    }

    fn stats_json(&self) -> serde_json::Value {
        let s = self.db.stats();
        let mut v = serde_json::json!({
            "buffer_hit_ratio": s.buffer.hit_ratio,
            "buffer_reads": s.buffer.reads,
            "buffer_writes": s.buffer.writes,
            "commits": s.commits,
            "log_syncs": s.log_syncs,
            "commits_per_sync": s.commits_per_sync,
            "open_ms": s.recovery.duration_ms,
            // WiredTiger's log-path breakdown (`ProfileStats::log_path_ms` has the mapping). The
            // keys keep the reproduction's paper number: `reproduce` reads them from saved cells.
            "commit_phases_seed002": s.profile.log_path_ms().fractions(),
            "commit_phases_seed002_ms": s.profile.log_path_ms(),
        });
        if let (Some(obj), Some(fc)) = (v.as_object_mut(), &s.flash_cache) {
            // Only when a flash cache is configured.
            obj.insert(
                "flash_cache_hit_ratio".to_string(),
                serde_json::json!(fc.hit_ratio),
            );
            obj.insert("flash_cache".to_string(), serde_json::json!(fc));
        }
        if let (Some(obj), Ok(full)) = (v.as_object_mut(), serde_json::to_value(&s)) {
            obj.insert("detail".to_string(), full);
        }
        v
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}

/// One engine transaction. The `StoreTxn` seam names a table per operation, so each operation
/// opens its table handle (one catalog lookup, as the engine's string API cost before).
enum PagodaTxn<'a> {
    Read(ReadTxn<'a>),
    Write(WriteTxn<'a>),
}

/// A store transaction the driver began read-only and then wrote in: the driver's mistake.
fn read_only() -> StoreError {
    StoreError::Other("write in a read-only transaction: begin it with Store::begin".into())
}

impl PagodaTxn<'_> {
    fn write(&mut self) -> Result<&WriteTxn<'_>, StoreError> {
        match self {
            PagodaTxn::Write(tx) => Ok(tx),
            PagodaTxn::Read(_) => Err(read_only()),
        }
    }
}

impl StoreTxn for PagodaTxn<'_> {
    fn get(&mut self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        match self {
            PagodaTxn::Read(tx) => tx.open_table(table).and_then(|t| t.get(key)),
            PagodaTxn::Write(tx) => tx.open_table(table).and_then(|t| t.get(key)),
        }
        .map_err(store_err)
    }

    fn put(&mut self, table: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let mut t = self.write()?.open_table(table).map_err(store_err)?;
        t.put(key, value).map_err(store_err)
    }

    fn delete(&mut self, table: &str, key: &[u8]) -> Result<bool, StoreError> {
        let mut t = self.write()?.open_table(table).map_err(store_err)?;
        let existed = t.get(key).map_err(store_err)?.is_some();
        if existed {
            t.delete(key).map_err(store_err)?;
        }
        Ok(existed)
    }

    fn scan(
        &mut self,
        table: &str,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Rows, StoreError> {
        if end.is_some_and(|e| e <= start) {
            return Ok(Vec::new());
        }
        let range = (
            Bound::Included(start),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        );
        match self {
            PagodaTxn::Read(tx) => {
                let t = tx.open_table(table).map_err(store_err)?;
                scan_rows(&t, range, limit, reverse)
            }
            PagodaTxn::Write(tx) => {
                let t = tx.open_table(table).map_err(store_err)?;
                scan_rows(t.as_read_only(), range, limit, reverse)
            }
        }
    }

    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        match *self {
            // A reader has nothing to commit: ending it releases its snapshot.
            PagodaTxn::Read(_) => Ok(()),
            PagodaTxn::Write(tx) => tx.commit().map(|_| ()).map_err(store_err),
        }
    }

    fn commit_pipelined(self: Box<Self>) -> Result<Box<dyn PendingCommit>, StoreError> {
        match *self {
            PagodaTxn::Read(_) => Ok(Box::new(pagoda_workload::store::Resolved)),
            PagodaTxn::Write(tx) => {
                let t = tx.commit_pipelined().map_err(store_err)?;
                Ok(Box::new(PagodaPending(t)))
            }
        }
    }

    fn rollback(self: Box<Self>) -> Result<(), StoreError> {
        if let PagodaTxn::Write(tx) = *self {
            tx.rollback();
        }
        Ok(())
    }
}

/// Up to `limit` rows of `range` in `t`, forward or in reverse.
fn scan_rows(
    t: &ReadOnlyTable<'_>,
    range: (Bound<&[u8]>, Bound<&[u8]>),
    limit: usize,
    reverse: bool,
) -> Result<Rows, StoreError> {
    let scan = if reverse {
        t.range_rev(range)
    } else {
        t.range(range)
    };
    scan.take(limit)
        .collect::<Result<Rows, Error>>()
        .map_err(store_err)
}

/// A pipelined commit of the engine.
#[derive(Debug)]
struct PagodaPending(CommitTicket);

impl PendingCommit for PagodaPending {
    fn poll(&mut self) -> Option<Result<(), StoreError>> {
        self.0.try_wait().map(|r| r.map(|_| ()).map_err(store_err))
    }

    fn wait(self: Box<Self>) -> Result<(), StoreError> {
        self.0.wait().map(|_| ()).map_err(store_err)
    }
}

impl std::fmt::Debug for PagodaTxn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PagodaTxn")
    }
}
