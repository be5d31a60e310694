//! redb as a store: one redb table (`&[u8]` keys and values) per store table.
//!
//! Settings: `Durability::Immediate` for every write transaction (lazy: `Durability::None`,
//! made durable by the next immediate commit), a cache of `cache_bytes`. redb has one writer at
//! a time (`begin_write` waits for the previous one) and never reports a conflict.

use crate::{other, read_only, take_rows, Counters, PeerDurability, PeerOptions, TableMap};
use pagoda_workload::store::Rows;
use pagoda_workload::{Store, StoreError, StoreTxn, TableId};
use redb::{
    Database, Durability, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, TableHandle, WriteTransaction,
};
use std::ops::Bound;
use std::path::{Path, PathBuf};

type Def<'a> = TableDefinition<'a, &'static [u8], &'static [u8]>;
/// A table of a read transaction (it owns what it needs: no borrow of the transaction).
type ReadTable = ReadOnlyTable<&'static [u8], &'static [u8]>;

/// A redb database file.
#[derive(Debug)]
pub(crate) struct RedbStore {
    db: Database,
    path: PathBuf,
    /// Tables that exist: a write transaction's `open_table` would create a missing one, so
    /// this is what tells a missing table apart.
    tables: TableMap<()>,
    durability: PeerDurability,
    cache_bytes: u64,
    counters: Counters,
}

fn err(e: impl std::fmt::Display) -> StoreError {
    other("redb", e)
}

impl RedbStore {
    pub(crate) fn open(path: &Path, opts: &PeerOptions) -> Result<Self, String> {
        let db = Database::builder()
            .set_cache_size(usize::try_from(opts.cache_bytes).map_err(|e| e.to_string())?)
            .create(path)
            .map_err(|e| e.to_string())?;
        let names = {
            let r = db.begin_read().map_err(|e| e.to_string())?;
            let names: Vec<String> = r
                .list_tables()
                .map_err(|e| e.to_string())?
                .map(|t| t.name().to_string())
                .collect();
            names
        };
        let tables = TableMap::default();
        for n in &names {
            tables
                .insert_with(n, |_| Ok::<_, String>(()))
                .map_err(|e| e.to_string())?;
        }
        Ok(RedbStore {
            db,
            path: path.to_path_buf(),
            tables,
            durability: opts.durability,
            cache_bytes: opts.cache_bytes,
            counters: Counters::default(),
        })
    }

    fn def<'a>(&self, table: &'a str) -> Result<Def<'a>, StoreError> {
        self.tables.require(table)?;
        Ok(TableDefinition::new(table))
    }

    /// The definition of the table a transaction's handle names. A write transaction's table
    /// handles borrow it, so a writer opens its table per operation from this definition; a
    /// reader keeps its tables (`RedbTxn::read_tables`).
    fn def_at(&self, table: TableId) -> Result<Def<'_>, StoreError> {
        let (name, _) = self.tables.at(table)?;
        Ok(TableDefinition::new(name))
    }

    fn durability(&self) -> Durability {
        match self.durability {
            PeerDurability::Sync => Durability::Immediate,
            PeerDurability::Lazy => Durability::None,
        }
    }

    fn begin_write(&self) -> Result<WriteTransaction, StoreError> {
        let mut w = self.db.begin_write().map_err(err)?;
        w.set_durability(self.durability()).map_err(err)?;
        Ok(w)
    }
}

impl Store for RedbStore {
    fn create_table(&self, name: &str) -> Result<(), StoreError> {
        if self.tables.get(name).is_some() {
            return Ok(());
        }
        // Lookups take no lock, so a writer using a table while this waits for redb's write
        // transaction cannot deadlock with it.
        self.tables.insert_with(name, |_| {
            let w = self.begin_write()?;
            w.open_table(Def::new(name)).map_err(err)?;
            w.commit().map_err(err)
        })?;
        Ok(())
    }

    /// One write transaction for the whole load, the table opened once: redb's advice for
    /// bulk inserts (each commit writes and syncs a new root).
    fn bulk_load(
        &self,
        table: &str,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<u64, StoreError> {
        let def = self.def(table)?;
        let mut w = self.db.begin_write().map_err(err)?;
        w.set_durability(Durability::Immediate).map_err(err)?;
        let mut n = 0u64;
        {
            let mut t = w.open_table(def).map_err(err)?;
            for (k, v) in rows {
                t.insert(k.as_slice(), v.as_slice()).map_err(err)?;
                n += 1;
            }
        }
        w.commit().map_err(err)?;
        self.counters.commit();
        Ok(n)
    }

    /// An empty immediate commit: it makes every earlier `Durability::None` commit durable.
    fn make_durable(&self) -> Result<(), StoreError> {
        let mut w = self.db.begin_write().map_err(err)?;
        w.set_durability(Durability::Immediate).map_err(err)?;
        w.commit().map_err(err)
    }

    fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(Box::new(RedbTxn {
            store: self,
            txn: Some(Txn::Write(Box::new(self.begin_write()?))),
            read_tables: Vec::new(),
        }))
    }

    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        let r = self.db.begin_read().map_err(err)?;
        Ok(Box::new(RedbTxn {
            store: self,
            txn: Some(Txn::Read(r)),
            read_tables: Vec::new(),
        }))
    }

    fn stats_json(&self) -> serde_json::Value {
        self.counters.add_to(serde_json::json!({
            "engine": "redb",
            "version": "4",
            "path": self.path,
            "durability": match self.durability {
                PeerDurability::Sync => "Immediate",
                PeerDurability::Lazy => "None",
            },
            "cache_bytes": self.cache_bytes,
            "writers": 1,
        }))
    }

    fn describe(&self) -> String {
        format!(
            "redb ({}, durability={:?}, cache {} MiB, one writer)",
            self.path.display(),
            self.durability(),
            self.cache_bytes >> 20
        )
    }
}

enum Txn {
    Read(ReadTransaction),
    Write(Box<WriteTransaction>),
}

/// A transaction; dropping a write transaction aborts it.
struct RedbTxn<'a> {
    store: &'a RedbStore,
    txn: Option<Txn>,
    /// A read transaction's tables, by handle, opened on first use and kept: redb's
    /// `open_table` looks the table up in the catalog each time.
    read_tables: Vec<Option<ReadTable>>,
}

/// Table `t` of read transaction `r`, opened on first use.
fn read_table<'c>(
    cache: &'c mut Vec<Option<ReadTable>>,
    r: &ReadTransaction,
    def: Def<'_>,
    t: TableId,
) -> Result<&'c ReadTable, StoreError> {
    if cache.len() <= t.index() {
        cache.resize_with(t.index() + 1, || None);
    }
    let slot = &mut cache[t.index()];
    if slot.is_none() {
        *slot = Some(r.open_table(def).map_err(err)?);
    }
    Ok(slot.as_ref().expect("opened just above"))
}

impl Drop for RedbTxn<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.txn.take() {
            if let Txn::Write(w) = t {
                let _ = w.abort();
            }
            self.store.counters.rollback();
        }
    }
}

fn finished() -> StoreError {
    other("redb", "transaction already finished")
}

/// Up to `limit` pairs of `t` in `range`, ascending or descending.
fn scan_table<T: ReadableTable<&'static [u8], &'static [u8]>>(
    t: &T,
    range: (Bound<&[u8]>, Bound<&[u8]>),
    limit: usize,
    reverse: bool,
) -> Result<Rows, redb::StorageError> {
    let it = t.range::<&[u8]>(range)?;
    type Guard<'g> = redb::AccessGuard<'g, &'static [u8]>;
    let own = |r: Result<(Guard<'_>, Guard<'_>), _>| {
        r.map(|(k, v)| (k.value().to_vec(), v.value().to_vec()))
    };
    if reverse {
        take_rows(it.rev().map(own), limit)
    } else {
        take_rows(it.map(own), limit)
    }
}

impl RedbTxn<'_> {
    fn write(&self) -> Result<&WriteTransaction, StoreError> {
        match &self.txn {
            Some(Txn::Write(w)) => Ok(w),
            Some(Txn::Read(_)) => Err(read_only()),
            None => Err(finished()),
        }
    }
}

impl StoreTxn for RedbTxn<'_> {
    fn open(&mut self, table: &str) -> Result<TableId, StoreError> {
        self.store.tables.open(table)
    }

    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let def = self.store.def_at(table)?;
        let v = match self.txn.as_ref().ok_or_else(finished)? {
            Txn::Read(r) => {
                let t = read_table(&mut self.read_tables, r, def, table)?;
                t.get(key).map_err(err)?.map(|g| g.value().to_vec())
            }
            Txn::Write(w) => {
                let t = w.open_table(def).map_err(err)?;
                let v = t.get(key).map_err(err)?.map(|g| g.value().to_vec());
                v
            }
        };
        Ok(v)
    }

    fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let def = self.store.def_at(table)?;
        let mut t = self.write()?.open_table(def).map_err(err)?;
        t.insert(key, value).map_err(err)?;
        Ok(())
    }

    fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool, StoreError> {
        let def = self.store.def_at(table)?;
        let mut t = self.write()?.open_table(def).map_err(err)?;
        let old = t.remove(key).map_err(err)?;
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
        let def = self.store.def_at(table)?;
        let range = (
            Bound::Included(start),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        );
        match self.txn.as_ref().ok_or_else(finished)? {
            Txn::Read(r) => {
                let t = read_table(&mut self.read_tables, r, def, table)?;
                scan_table(t, range, limit, reverse).map_err(err)
            }
            Txn::Write(w) => {
                let t = w.open_table(def).map_err(err)?;
                scan_table(&t, range, limit, reverse).map_err(err)
            }
        }
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        // The kept tables reference the transaction: `close` refuses while they live.
        self.read_tables.clear();
        let r = match self.txn.take().ok_or_else(finished)? {
            Txn::Write(w) => w.commit().map_err(err),
            Txn::Read(r) => r.close().map_err(err),
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
                w.abort().map_err(err)?;
            }
            self.store.counters.rollback();
        }
        Ok(())
    }
}
