//! The pagoda engine behind the workload crate's `Store` trait, beside the peers it is
//! compared with. A transaction opens each table once ([`StoreTxn::open`]) and keeps the
//! engine's table handle for the rest of it, as an embedder of the engine does: the
//! benchmarks run the engine's typed API, with no catalog lookup per operation.

use pagoda_engine::{CommitTicket, Db, Error, ReadOnlyTable, ReadTxn, Table, WriteTxn};
use pagoda_workload::store::{OpenTables, Rows};
use pagoda_workload::{PendingCommit, Store, StoreError, StoreTxn, TableId};
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
        let cell = WriteCell::new(tx, |_| Vec::new());
        Ok(Box::new(PagodaTxn::Write(cell, OpenTables::default())))
    }

    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        let tx = self.db.begin_read().map_err(store_err)?;
        let cell = ReadCell::new(tx, |_| Vec::new());
        Ok(Box::new(PagodaTxn::Read(cell, OpenTables::default())))
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

/// The tables a read transaction opened, borrowing it.
type ReadTables<'t> = Vec<ReadOnlyTable<'t>>;
/// The tables a write transaction opened, borrowing it.
type WriteTables<'t> = Vec<Table<'t>>;

// The engine's table handles borrow their transaction: each cell keeps the transaction and
// the handles opened in it together, for as long as the store transaction lives.
self_cell::self_cell!(
    struct ReadCell<'db> {
        owner: ReadTxn<'db>,
        #[not_covariant]
        dependent: ReadTables,
    }
);

self_cell::self_cell!(
    struct WriteCell<'db> {
        owner: WriteTxn<'db>,
        #[not_covariant]
        dependent: WriteTables,
    }
);

/// One engine transaction with the tables it opened (same index as `names`).
enum PagodaTxn<'db> {
    Read(ReadCell<'db>, OpenTables),
    Write(WriteCell<'db>, OpenTables),
}

/// A store transaction the driver began read-only and then wrote in: the driver's mistake.
fn read_only() -> StoreError {
    StoreError::Other("write in a read-only transaction: begin it with Store::begin".into())
}

/// A handle this transaction did not give out.
fn unknown(t: TableId) -> StoreError {
    StoreError::Other(format!(
        "table handle {} was not opened in this transaction; open the table first",
        t.index()
    ))
}

impl PagodaTxn<'_> {
    /// Runs `f` on the write transaction's table `t`.
    fn with_table<R>(
        &mut self,
        t: TableId,
        f: impl FnOnce(&mut Table<'_>) -> Result<R, Error>,
    ) -> Result<R, StoreError> {
        match self {
            PagodaTxn::Write(cell, _) => cell
                .with_dependent_mut(|_, tables| tables.get_mut(t.index()).map(f))
                .ok_or_else(|| unknown(t))?
                .map_err(store_err),
            PagodaTxn::Read(..) => Err(read_only()),
        }
    }

    /// Runs `f` on table `t` for reading (a write transaction's table reads its own writes).
    fn with_read<R>(
        &mut self,
        t: TableId,
        f: impl FnOnce(&ReadOnlyTable<'_>) -> Result<R, Error>,
    ) -> Result<R, StoreError> {
        match self {
            PagodaTxn::Read(cell, _) => cell
                .with_dependent(|_, tables| tables.get(t.index()).map(f))
                .ok_or_else(|| unknown(t))?
                .map_err(store_err),
            PagodaTxn::Write(cell, _) => cell
                .with_dependent(|_, tables| tables.get(t.index()).map(|t| f(t.as_read_only())))
                .ok_or_else(|| unknown(t))?
                .map_err(store_err),
        }
    }
}

impl StoreTxn for PagodaTxn<'_> {
    fn open(&mut self, table: &str) -> Result<TableId, StoreError> {
        match self {
            PagodaTxn::Read(cell, names) => {
                if let Some(t) = names.find(table) {
                    return Ok(t);
                }
                cell.with_dependent_mut(|tx, tables| {
                    tables.push(tx.open_table(table)?);
                    Ok::<(), Error>(())
                })
                .map_err(store_err)?;
                Ok(names.open(table).0)
            }
            PagodaTxn::Write(cell, names) => {
                if let Some(t) = names.find(table) {
                    return Ok(t);
                }
                cell.with_dependent_mut(|tx, tables| {
                    tables.push(tx.open_table(table)?);
                    Ok::<(), Error>(())
                })
                .map_err(store_err)?;
                Ok(names.open(table).0)
            }
        }
    }

    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.with_read(table, |t| t.get(key))
    }

    fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.with_table(table, |t| t.put(key, value))
    }

    fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool, StoreError> {
        self.with_table(table, |t| {
            let existed = t.get(key)?.is_some();
            if existed {
                t.delete(key)?;
            }
            Ok(existed)
        })
    }

    fn scan(
        &mut self,
        table: TableId,
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
        self.with_read(table, |t| scan_rows(t, range, limit, reverse))
    }

    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        match *self {
            // A reader has nothing to commit: ending it releases its snapshot.
            PagodaTxn::Read(..) => Ok(()),
            PagodaTxn::Write(cell, _) => cell.into_owner().commit().map(|_| ()).map_err(store_err),
        }
    }

    fn commit_pipelined(self: Box<Self>) -> Result<Box<dyn PendingCommit>, StoreError> {
        match *self {
            PagodaTxn::Read(..) => Ok(Box::new(pagoda_workload::store::Resolved)),
            PagodaTxn::Write(cell, _) => {
                let t = cell.into_owner().commit_pipelined().map_err(store_err)?;
                Ok(Box::new(PagodaPending(t)))
            }
        }
    }

    fn rollback(self: Box<Self>) -> Result<(), StoreError> {
        if let PagodaTxn::Write(cell, _) = *self {
            cell.into_owner().rollback();
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
) -> Result<Rows, Error> {
    let scan = if reverse {
        t.range_rev(range)
    } else {
        t.range(range)
    };
    scan.take(limit).collect()
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
