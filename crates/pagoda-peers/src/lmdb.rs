//! LMDB (via heed) as a store: one named database per store table.
//!
//! Settings: the default sync flags (a commit `fsync`s the data file before it returns; lazy
//! uses `NO_SYNC`), a map of `lmdb_map_bytes` (the largest the database may grow; the file is
//! sparse and grows with the data), read transactions on thread-local reader slots (LMDB's
//! default: a thread finds its slot once, later readers reuse it without the reader-table
//! mutex; the price is one reader at a time per thread, which the driver respects). Table
//! handles are looked up without a lock. LMDB has one writer at a time: `begin` waits for the
//! writer lock, which is how LMDB is run; it never reports a conflict. It has no cache of its
//! own: reads go through the OS page cache. A bulk load appends (`MDB_APPEND`) in transactions
//! of [`BULK_TXN_ROWS`] rows.

use crate::{
    other, read_only, take_rows, Counters, PeerDurability, PeerOptions, TableMap, MAX_TABLES,
};
use heed::types::{Bytes, DecodeIgnore, Str};
use heed::{CommitOrAbort, Env, EnvFlags, EnvOpenOptions, PutFlags, RoTxn, RwTxn, WithTls};
use pagoda_workload::store::Rows;
use pagoda_workload::{Store, StoreError, StoreTxn, TableId};
use std::ops::Bound;
use std::path::{Path, PathBuf};

/// A database handle that outlives the transaction that opened it (heed gives `'static` ones
/// once that transaction committed).
type Db = heed::Database<'static, Bytes, Bytes>;

/// Rows per transaction of a bulk load: LMDB keeps a transaction's dirty pages in memory (at
/// most 128 Ki of them), so a load of a gigabyte cannot be one transaction; 50,000 rows of
/// 1 KB are about 13 Ki pages.
pub(crate) const BULK_TXN_ROWS: usize = 50_000;

/// An LMDB environment with its table handles.
#[derive(Debug)]
pub(crate) struct LmdbStore {
    env: Env<WithTls>,
    path: PathBuf,
    tables: TableMap<Db>,
    durability: PeerDurability,
    map_bytes: u64,
    cache_bytes: u64,
    counters: Counters,
}

fn err(e: heed::Error) -> StoreError {
    other("lmdb", e)
}

impl LmdbStore {
    pub(crate) fn open(path: &Path, opts: &PeerOptions) -> Result<Self, String> {
        std::fs::create_dir_all(path).map_err(|e| e.to_string())?;
        let mut o = EnvOpenOptions::new();
        o.map_size(usize::try_from(opts.lmdb_map_bytes).map_err(|e| e.to_string())?)
            .max_dbs(MAX_TABLES as u32)
            .max_readers(1024);
        if opts.durability == PeerDurability::Lazy {
            // SAFETY: NO_SYNC only skips the fsync at commit; the environment stays consistent
            // unless the machine crashes, which is what lazy durability accepts.
            unsafe {
                o.flags(EnvFlags::NO_SYNC);
            }
        }
        // SAFETY: the directory is this store's own and is not opened twice in this process
        // (heed refuses a second open of the same path) nor modified while mapped.
        let env = unsafe { o.open(path) }.map_err(|e| e.to_string())?;
        let store = LmdbStore {
            env,
            path: path.to_path_buf(),
            tables: TableMap::default(),
            durability: opts.durability,
            map_bytes: opts.lmdb_map_bytes,
            cache_bytes: opts.cache_bytes,
            counters: Counters::default(),
        };
        store.open_existing().map_err(|e| e.to_string())?;
        Ok(store)
    }

    /// Opens the handles of the tables a previous process created: their names are the keys
    /// of LMDB's unnamed database.
    fn open_existing(&self) -> Result<(), StoreError> {
        let rtxn = self.env.read_txn().map_err(err)?;
        let Some(main) = self
            .env
            .open_databases_and_commit(rtxn, |o, r| {
                o.open_database::<Str, DecodeIgnore>(r, None)
                    .map(CommitOrAbort::<_, ()>::Commit)
            })
            .map_err(err)?
            .unwrap_commit()
        else {
            return Ok(());
        };
        let names: Vec<String> = {
            let rtxn = self.env.read_txn().map_err(err)?;
            let names = main
                .iter(&rtxn)
                .map_err(err)?
                .map(|r| r.map(|(k, ())| k.to_string()))
                .collect::<Result<_, _>>()
                .map_err(err)?;
            drop(rtxn);
            names
        };
        for name in names {
            let rtxn = self.env.read_txn().map_err(err)?;
            let db = self
                .env
                .open_databases_and_commit(rtxn, |o, r| {
                    o.open_database::<Bytes, Bytes>(r, Some(&name))
                        .map(CommitOrAbort::<_, ()>::Commit)
                })
                .map_err(err)?
                .unwrap_commit();
            if let Some(db) = db {
                self.tables
                    .insert_with(&name, |_| Ok::<_, heed::Error>(db))?;
            }
        }
        Ok(())
    }

    fn db(&self, table: &str) -> Result<Db, StoreError> {
        self.tables.require(table).copied()
    }

    fn db_at(&self, table: TableId) -> Result<Db, StoreError> {
        self.tables.at(table).map(|(_, db)| *db)
    }

    /// Writes up to [`BULK_TXN_ROWS`] rows in one transaction, appended when `append`;
    /// returns how many.
    fn bulk_txn(
        &self,
        db: Db,
        append: bool,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<usize, heed::Error> {
        let mut w = self.env.write_txn()?;
        let flags = if append {
            PutFlags::APPEND
        } else {
            PutFlags::empty()
        };
        let mut n = 0;
        for (k, v) in rows.take(BULK_TXN_ROWS) {
            db.put_with_flags(&mut w, flags, &k, &v)?;
            n += 1;
        }
        w.commit()?;
        Ok(n)
    }
}

impl Store for LmdbStore {
    fn create_table(&self, name: &str) -> Result<(), StoreError> {
        if self.tables.get(name).is_some() {
            return Ok(());
        }
        // Lookups take no lock, so a writer using a table while this waits for LMDB's writer
        // lock cannot deadlock with it.
        self.tables.insert_with(name, |_| {
            let wtxn = self.env.write_txn()?;
            let db = self
                .env
                .create_databases_and_commit(wtxn, |o, w| {
                    o.create_database::<Bytes, Bytes>(w, Some(name))
                        .map(CommitOrAbort::<_, ()>::Commit)
                })?
                .unwrap_commit();
            Ok::<_, heed::Error>(db)
        })?;
        Ok(())
    }

    /// In-order rows go through `MDB_APPEND` (each put lands at the right edge of the tree,
    /// no search, full leaves), as LMDB's own bulk loaders do; rows that do not all sort after
    /// the table's last key take ordinary puts.
    fn bulk_load(
        &self,
        table: &str,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<u64, StoreError> {
        let db = self.db(table)?;
        let mut rows = rows.peekable();
        let Some((first, _)) = rows.peek() else {
            return Ok(0);
        };
        let last = {
            let r = self.env.read_txn().map_err(err)?;
            db.last(&r).map_err(err)?.map(|(k, _)| k.to_vec())
        };
        let append = last.is_none_or(|l| first.as_slice() > l.as_slice());
        let mut written = 0u64;
        loop {
            let n = self.bulk_txn(db, append, &mut rows).map_err(err)?;
            if n == 0 {
                return Ok(written);
            }
            self.counters.commit();
            written += n as u64;
        }
    }

    /// Commits already `fsync` the data file unless the store is lazy (`NO_SYNC`).
    fn make_durable(&self) -> Result<(), StoreError> {
        self.env.force_sync().map_err(err)
    }

    fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        let txn = self.env.write_txn().map_err(err)?;
        Ok(Box::new(LmdbTxn {
            store: self,
            txn: Some(Txn::Write(txn)),
        }))
    }

    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        let txn = self.env.read_txn().map_err(err)?;
        Ok(Box::new(LmdbTxn {
            store: self,
            txn: Some(Txn::Read(txn)),
        }))
    }

    fn stats_json(&self) -> serde_json::Value {
        let (major, minor, patch) = heed_version();
        self.counters.add_to(serde_json::json!({
            "engine": "lmdb",
            "version": format!("{major}.{minor}.{patch}"),
            "path": self.path,
            "sync": match self.durability {
                PeerDurability::Sync => "default (fsync at commit)",
                PeerDurability::Lazy => "NO_SYNC",
            },
            "map_bytes": self.map_bytes,
            // LMDB has no cache: the OS page cache serves its reads.
            "cache_bytes": serde_json::Value::Null,
            "cache_bytes_asked": self.cache_bytes,
            "writers": 1,
            "tls": true,
        }))
    }

    fn describe(&self) -> String {
        format!(
            "lmdb ({}, sync={}, map {} GiB, one writer, OS page cache)",
            self.path.display(),
            match self.durability {
                PeerDurability::Sync => "default",
                PeerDurability::Lazy => "NO_SYNC",
            },
            self.map_bytes >> 30
        )
    }
}

fn heed_version() -> (i32, i32, i32) {
    let v = heed::lmdb_version();
    (v.major, v.minor, v.patch)
}

enum Txn<'a> {
    Read(RoTxn<'a, WithTls>),
    Write(RwTxn<'a>),
}

/// A transaction; dropping it aborts (heed aborts an unfinished transaction on drop).
struct LmdbTxn<'a> {
    store: &'a LmdbStore,
    txn: Option<Txn<'a>>,
}

impl Drop for LmdbTxn<'_> {
    fn drop(&mut self) {
        if self.txn.take().is_some() {
            self.store.counters.rollback();
        }
    }
}

impl<'a> LmdbTxn<'a> {
    fn read(&self) -> Result<&RoTxn<'a>, StoreError> {
        match &self.txn {
            Some(Txn::Read(t)) => Ok(t),
            Some(Txn::Write(t)) => Ok(t),
            None => Err(other("lmdb", "transaction already finished")),
        }
    }

    fn write(&mut self) -> Result<&mut RwTxn<'a>, StoreError> {
        match &mut self.txn {
            Some(Txn::Write(t)) => Ok(t),
            Some(Txn::Read(_)) => Err(read_only()),
            None => Err(other("lmdb", "transaction already finished")),
        }
    }
}

impl StoreTxn for LmdbTxn<'_> {
    fn open(&mut self, table: &str) -> Result<TableId, StoreError> {
        self.store.tables.open(table)
    }

    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let db = self.store.db_at(table)?;
        let v = db.get(self.read()?, key).map_err(err)?;
        Ok(v.map(<[u8]>::to_vec))
    }

    fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let db = self.store.db_at(table)?;
        db.put(self.write()?, key, value).map_err(err)
    }

    fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool, StoreError> {
        let db = self.store.db_at(table)?;
        db.delete(self.write()?, key).map_err(err)
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
        let db = self.store.db_at(table)?;
        let txn = self.read()?;
        // LMDB refuses an empty key, even as a bound; every key is >= the empty one.
        let lower = if start.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Included(start)
        };
        let range = (lower, end.map_or(Bound::Unbounded, Bound::Excluded));
        let own = |r: heed::Result<(&[u8], &[u8])>| r.map(|(k, v)| (k.to_vec(), v.to_vec()));
        let rows = if reverse {
            take_rows(db.rev_range(txn, &range).map_err(err)?.map(own), limit)
        } else {
            take_rows(db.range(txn, &range).map_err(err)?.map(own), limit)
        };
        rows.map_err(err)
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        let r = match self.txn.take() {
            Some(Txn::Write(t)) => t.commit(),
            // A reader has nothing to commit: ending it is all.
            Some(Txn::Read(t)) => {
                drop(t);
                Ok(())
            }
            None => return Err(other("lmdb", "transaction already finished")),
        };
        match r {
            Ok(()) => {
                self.store.counters.commit();
                Ok(())
            }
            Err(e) => {
                self.store.counters.rollback();
                Err(err(e))
            }
        }
    }

    fn rollback(mut self: Box<Self>) -> Result<(), StoreError> {
        if self.txn.take().is_some() {
            self.store.counters.rollback();
        }
        Ok(())
    }
}
