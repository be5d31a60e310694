//! fjall as a store: one keyspace per store table in an `OptimisticTxDatabase`.
//!
//! Settings (each with its reason in `docs/peers.md`): serializable optimistic transactions
//! (fjall's transactional database; a lost conflict is reported as
//! [`StoreError::Conflict`] and retried by the driver); each write transaction's journal
//! persisted with `PersistMode::SyncAll` at commit (lazy: `PersistMode::Buffer`, made durable
//! by [`Store::make_durable`]); a block cache of `cache_bytes`; the load through fjall's
//! ingestion of sorted input (SST files written directly) into an empty keyspace, its
//! `WriteBatch` otherwise.

use crate::{other, read_only, take_rows, Counters, PeerDurability, PeerOptions, TableMap};
use fjall::{
    KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace,
    OptimisticWriteTx as WriteTransaction, PersistMode, Readable, Snapshot,
};
use pagoda_workload::store::Rows;
use pagoda_workload::{Store, StoreError, StoreTxn, TableId};
use std::ops::Bound;
use std::path::{Path, PathBuf};

/// Rows per `WriteBatch` when the load cannot use ingestion (a keyspace that holds rows).
const LOAD_BATCH: usize = 10_000;

/// A fjall database directory.
pub(crate) struct FjallStore {
    db: OptimisticTxDatabase,
    path: PathBuf,
    tables: TableMap<OptimisticTxKeyspace>,
    durability: PeerDurability,
    cache_bytes: u64,
    counters: Counters,
}

impl std::fmt::Debug for FjallStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FjallStore")
            .field("path", &self.path)
            .field("tables", &self.tables)
            .finish_non_exhaustive()
    }
}

fn err(e: impl std::fmt::Display) -> StoreError {
    other("fjall", e)
}

/// fjall panics on a keyspace name it cannot store; this refuses it by name instead.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 255 {
        return Err(format!(
            "fjall: table name `{name}` must be 1 to 255 bytes long"
        ));
    }
    Ok(())
}

impl FjallStore {
    pub(crate) fn open(path: &Path, opts: &PeerOptions) -> Result<Self, String> {
        let db = OptimisticTxDatabase::builder(path)
            .cache_size(opts.cache_bytes)
            .open()
            .map_err(|e| e.to_string())?;
        let tables = TableMap::default();
        for name in db.list_keyspace_names() {
            let name: &str = &name;
            tables
                .insert_with(name, |_| db.keyspace(name, KeyspaceCreateOptions::default))
                .map_err(|e| e.to_string())?;
        }
        Ok(FjallStore {
            db,
            path: path.to_path_buf(),
            tables,
            durability: opts.durability,
            cache_bytes: opts.cache_bytes,
            counters: Counters::default(),
        })
    }

    fn persist_mode(&self) -> PersistMode {
        match self.durability {
            PeerDurability::Sync => PersistMode::SyncAll,
            PeerDurability::Lazy => PersistMode::Buffer,
        }
    }

    /// Writes `rows` in `WriteBatch`es of [`LOAD_BATCH`] (journal buffered: the load is made
    /// durable by `make_durable`).
    fn load_batched(
        &self,
        ks: &OptimisticTxKeyspace,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<u64, StoreError> {
        let mut n = 0u64;
        loop {
            let mut batch = self
                .db
                .inner()
                .batch()
                .durability(Some(PersistMode::Buffer));
            for (k, v) in (&mut *rows).take(LOAD_BATCH) {
                batch.insert(ks.inner(), k, v);
            }
            if batch.is_empty() {
                return Ok(n);
            }
            n += batch.len() as u64;
            batch.commit().map_err(err)?;
            self.counters.commit();
        }
    }
}

impl Store for FjallStore {
    fn create_table(&self, name: &str) -> Result<(), StoreError> {
        if self.tables.get(name).is_some() {
            return Ok(());
        }
        check_name(name).map_err(StoreError::Other)?;
        self.tables.insert_with(name, |_| {
            self.db.keyspace(name, KeyspaceCreateOptions::default)
        })?;
        Ok(())
    }

    /// fjall's ingestion (sorted rows written straight into SST files) when the keyspace is
    /// empty, as fjall advises for bulk loads; its `WriteBatch` otherwise.
    fn bulk_load(
        &self,
        table: &str,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<u64, StoreError> {
        let ks = self.tables.require(table)?;
        if ks.first_key_value().is_some() {
            return self.load_batched(ks, rows);
        }
        let mut ingest = ks.inner().start_ingestion().map_err(err)?;
        let mut n = 0u64;
        for (k, v) in rows {
            ingest.write(k, v).map_err(err)?;
            n += 1;
        }
        ingest.finish().map_err(err)?;
        self.counters.commit();
        Ok(n)
    }

    /// Syncs the journal: every earlier buffered commit becomes durable.
    fn make_durable(&self) -> Result<(), StoreError> {
        self.db.persist(PersistMode::SyncAll).map_err(err)
    }

    fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        let w = self
            .db
            .write_tx()
            .map_err(err)?
            .durability(Some(self.persist_mode()));
        Ok(Box::new(FjallTxn {
            store: self,
            txn: Some(Txn::Write(Box::new(w))),
        }))
    }

    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(Box::new(FjallTxn {
            store: self,
            txn: Some(Txn::Read(self.db.read_tx())),
        }))
    }

    fn stats_json(&self) -> serde_json::Value {
        self.counters.add_to(serde_json::json!({
            "engine": "fjall",
            "version": "3",
            "path": self.path,
            "transactions": "optimistic (serializable)",
            "persist_mode": format!("{:?}", self.persist_mode()),
            "cache_bytes": self.cache_bytes,
            "journal_count": self.db.journal_count(),
        }))
    }

    fn describe(&self) -> String {
        format!(
            "fjall ({}, optimistic transactions, journal {:?} at commit, cache {} MiB)",
            self.path.display(),
            self.persist_mode(),
            self.cache_bytes >> 20
        )
    }
}

enum Txn {
    Read(Snapshot),
    Write(Box<WriteTransaction>),
}

/// A transaction; dropping a write transaction rolls it back.
struct FjallTxn<'a> {
    store: &'a FjallStore,
    txn: Option<Txn>,
}

impl Drop for FjallTxn<'_> {
    fn drop(&mut self) {
        if self.txn.take().is_some() {
            self.store.counters.rollback();
        }
    }
}

fn finished() -> StoreError {
    other("fjall", "transaction already finished")
}

/// Up to `limit` pairs of `ks` in `range` read through `r`, ascending or descending.
fn scan_in<R: Readable>(
    r: &R,
    ks: &OptimisticTxKeyspace,
    range: (Bound<&[u8]>, Bound<&[u8]>),
    limit: usize,
    reverse: bool,
) -> Result<Rows, fjall::Error> {
    let own = |g: fjall::Guard| g.into_inner().map(|(k, v)| (k.to_vec(), v.to_vec()));
    let it = r.range::<&[u8], _>(ks, range);
    if reverse {
        take_rows(it.rev().map(own), limit)
    } else {
        take_rows(it.map(own), limit)
    }
}

impl FjallTxn<'_> {
    fn write(&mut self) -> Result<&mut WriteTransaction, StoreError> {
        match &mut self.txn {
            Some(Txn::Write(w)) => Ok(w),
            Some(Txn::Read(_)) => Err(read_only()),
            None => Err(finished()),
        }
    }
}

impl StoreTxn for FjallTxn<'_> {
    fn open(&mut self, table: &str) -> Result<TableId, StoreError> {
        self.store.tables.open(table)
    }

    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let (_, ks) = self.store.tables.at(table)?;
        let v = match self.txn.as_ref().ok_or_else(finished)? {
            Txn::Read(r) => r.get(ks, key),
            Txn::Write(w) => w.get(ks, key),
        };
        Ok(v.map_err(err)?.map(|v| v.to_vec()))
    }

    fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let (_, ks) = self.store.tables.at(table)?;
        self.write()?.insert(ks, key, value);
        Ok(())
    }

    fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool, StoreError> {
        let (_, ks) = self.store.tables.at(table)?;
        let old = self.write()?.take(ks, key).map_err(err)?;
        Ok(old.is_some())
    }

    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Rows, StoreError> {
        if end.is_some_and(|e| e <= start) || limit == 0 {
            return Ok(Vec::new());
        }
        let (_, ks) = self.store.tables.at(table)?;
        let range = (
            Bound::Included(start),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        );
        let rows = match self.txn.as_ref().ok_or_else(finished)? {
            Txn::Read(r) => scan_in(r, ks, range, limit, reverse),
            Txn::Write(w) => scan_in(w.as_ref(), ks, range, limit, reverse),
        };
        rows.map_err(err)
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        let r = match self.txn.take().ok_or_else(finished)? {
            Txn::Write(w) => match w.commit() {
                Ok(Ok(())) => Ok(()),
                Ok(Err(fjall::Conflict)) => {
                    self.store.counters.conflict();
                    Err(StoreError::Conflict)
                }
                Err(e) => Err(err(e)),
            },
            Txn::Read(_) => Ok(()),
        };
        match r {
            Ok(()) => self.store.counters.commit(),
            Err(_) => self.store.counters.rollback(),
        }
        r
    }

    fn rollback(mut self: Box<Self>) -> Result<(), StoreError> {
        if let Some(t) = self.txn.take() {
            if let Txn::Write(w) = t {
                w.rollback();
            }
            self.store.counters.rollback();
        }
        Ok(())
    }
}
