//! RocksDB as a store (cargo feature `rocksdb`): an `OptimisticTransactionDB`, one column
//! family per store table.
//!
//! Settings: the WAL on, `WriteOptions::sync = true` on every commit (lazy: WAL written, not
//! synced), one LRU block cache of `cache_bytes` shared by every column family, transactions
//! with a snapshot taken at begin. Reads in a write transaction use `get_for_update` so a
//! read-modify-write is validated at commit; a commit that lost a race fails with `Busy` or
//! `TryAgain`, which is a conflict the driver retries.

use crate::{other, read_only, Counters, PeerDurability, PeerOptions};
use pagoda_workload::store::Rows;
use pagoda_workload::{Store, StoreError, StoreTxn};
use parking_lot::Mutex;
use rocksdb::{
    BlockBasedOptions, BoundColumnFamily, Cache, ColumnFamilyDescriptor, Direction, ErrorKind,
    IteratorMode, MultiThreaded, OptimisticTransactionDB, OptimisticTransactionOptions, Options,
    ReadOptions, Transaction, WriteOptions,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

type Db = OptimisticTransactionDB<MultiThreaded>;

/// A RocksDB database directory.
pub(crate) struct RocksStore {
    db: Db,
    cf_opts: Options,
    path: PathBuf,
    durability: PeerDurability,
    cache_bytes: u64,
    /// Serialises column-family creation (two loader threads may create the same table).
    create: Mutex<()>,
    counters: Counters,
}

impl std::fmt::Debug for RocksStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn err(e: rocksdb::Error) -> StoreError {
    match e.kind() {
        ErrorKind::Busy | ErrorKind::TryAgain => StoreError::Conflict,
        _ => other("rocksdb", e),
    }
}

/// The column family of a store table (prefixed: `default` is RocksDB's own).
fn cf_name(table: &str) -> String {
    format!("t:{table}")
}

impl RocksStore {
    pub(crate) fn open(path: &Path, opts: &PeerOptions) -> Result<Self, String> {
        let cache =
            Cache::new_lru_cache(usize::try_from(opts.cache_bytes).map_err(|e| e.to_string())?);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        let mut cf_opts = Options::default();
        cf_opts.set_block_based_table_factory(&table);
        let mut db_opts = cf_opts.clone();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        // A new directory has no column families yet: listing it fails, which is fine.
        let names = Db::list_cf(&db_opts, path).unwrap_or_else(|_| vec!["default".to_string()]);
        let cfs = names
            .into_iter()
            .map(|n| ColumnFamilyDescriptor::new(n, cf_opts.clone()));
        let db = Db::open_cf_descriptors(&db_opts, path, cfs).map_err(|e| e.to_string())?;
        Ok(RocksStore {
            db,
            cf_opts,
            path: path.to_path_buf(),
            durability: opts.durability,
            cache_bytes: opts.cache_bytes,
            create: Mutex::new(()),
            counters: Counters::default(),
        })
    }

    fn cf(&self, table: &str) -> Result<Arc<BoundColumnFamily<'_>>, StoreError> {
        self.db.cf_handle(&cf_name(table)).ok_or_else(|| {
            StoreError::Other(format!(
                "table `{table}` does not exist; create it with create_table first"
            ))
        })
    }

    fn begin_txn(&self, read_only: bool) -> Box<dyn StoreTxn + '_> {
        let mut w = WriteOptions::default();
        w.set_sync(self.durability == PeerDurability::Sync);
        let mut t = OptimisticTransactionOptions::new();
        t.set_snapshot(true);
        Box::new(RocksTxn {
            store: self,
            txn: Some(self.db.transaction_opt(&w, &t)),
            read_only,
        })
    }
}

impl Store for RocksStore {
    fn create_table(&self, name: &str) -> Result<(), StoreError> {
        let _g = self.create.lock();
        if self.db.cf_handle(&cf_name(name)).is_some() {
            return Ok(());
        }
        self.db.create_cf(cf_name(name), &self.cf_opts).map_err(err)
    }

    fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(self.begin_txn(false))
    }

    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(self.begin_txn(true))
    }

    fn stats_json(&self) -> serde_json::Value {
        self.counters.add_to(serde_json::json!({
            "engine": "rocksdb",
            "path": self.path,
            "transactions": "optimistic",
            "wal": true,
            "sync": self.durability == PeerDurability::Sync,
            "block_cache_bytes": self.cache_bytes,
            "cache_bytes": self.cache_bytes,
        }))
    }

    fn describe(&self) -> String {
        format!(
            "rocksdb ({}, optimistic transactions, WAL sync={}, block cache {} MiB)",
            self.path.display(),
            self.durability == PeerDurability::Sync,
            self.cache_bytes >> 20
        )
    }
}

/// A transaction; dropping it rolls back (RocksDB discards an uncommitted transaction).
struct RocksTxn<'a> {
    store: &'a RocksStore,
    txn: Option<Transaction<'a, Db>>,
    read_only: bool,
}

impl Drop for RocksTxn<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.txn.take() {
            let _ = t.rollback();
            self.store.counters.rollback();
        }
    }
}

impl<'a> RocksTxn<'a> {
    fn txn(&self) -> Result<&Transaction<'a, Db>, StoreError> {
        self.txn
            .as_ref()
            .ok_or_else(|| other("rocksdb", "transaction already finished"))
    }

    fn writable(&self) -> Result<&Transaction<'a, Db>, StoreError> {
        if self.read_only {
            return Err(read_only());
        }
        self.txn()
    }
}

impl StoreTxn for RocksTxn<'_> {
    fn get(&mut self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let cf = self.store.cf(table)?;
        let t = self.txn()?;
        if self.read_only {
            t.get_cf(&cf, key).map_err(err)
        } else {
            // Validated at commit: a read-modify-write cannot lose an update.
            t.get_for_update_cf(&cf, key, true).map_err(err)
        }
    }

    fn put(&mut self, table: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let cf = self.store.cf(table)?;
        self.writable()?.put_cf(&cf, key, value).map_err(err)
    }

    fn delete(&mut self, table: &str, key: &[u8]) -> Result<bool, StoreError> {
        let cf = self.store.cf(table)?;
        let t = self.writable()?;
        let existed = t.get_for_update_cf(&cf, key, true).map_err(err)?.is_some();
        if existed {
            t.delete_cf(&cf, key).map_err(err)?;
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
        if end.is_some_and(|e| e <= start) || limit == 0 {
            return Ok(Vec::new());
        }
        let cf = self.store.cf(table)?;
        let t = self.txn()?;
        // Bounds are checked here rather than through ReadOptions: the transaction's iterator
        // merges its own writes, and this keeps both directions obviously right.
        let mode = match (reverse, end) {
            (false, _) => IteratorMode::From(start, Direction::Forward),
            (true, Some(e)) => IteratorMode::From(e, Direction::Reverse),
            (true, None) => IteratorMode::End,
        };
        let mut rows = Vec::new();
        for item in t.iterator_cf_opt(&cf, ReadOptions::default(), mode) {
            let (k, v) = item.map_err(err)?;
            let inside = k.as_ref() >= start && end.is_none_or(|e| k.as_ref() < e);
            if !inside {
                // Reverse from `end` starts at the key <= end: skip `end` itself.
                if reverse && end.is_some_and(|e| k.as_ref() >= e) {
                    continue;
                }
                break;
            }
            rows.push((k.into_vec(), v.into_vec()));
            if rows.len() == limit {
                break;
            }
        }
        Ok(rows)
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        let t = self
            .txn
            .take()
            .ok_or_else(|| other("rocksdb", "transaction already finished"))?;
        // A reader has nothing to write: ending it by a commit would still go through the
        // write path (and sync the WAL), so it is discarded instead.
        let r = if self.read_only {
            t.rollback()
        } else {
            t.commit()
        };
        match r.map_err(err) {
            Ok(()) => {
                self.store.counters.commit();
                Ok(())
            }
            Err(e) => {
                if e.is_retryable() {
                    self.store.counters.conflict();
                }
                self.store.counters.rollback();
                Err(e)
            }
        }
    }

    fn rollback(mut self: Box<Self>) -> Result<(), StoreError> {
        if let Some(t) = self.txn.take() {
            self.store.counters.rollback();
            t.rollback().map_err(err)?;
        }
        Ok(())
    }
}
