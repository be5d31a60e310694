//! SQLite (bundled, via rusqlite) as a store, in one of two layouts ([`Layout`]), both keyed
//! by a BLOB (SQLite compares BLOBs with memcmp, the store's key order) and both sized so that
//! a 1 KB row fits in its leaf instead of spilling to an overflow page:
//! - `sqlite`: one `WITHOUT ROWID` table per store table in 16 KiB pages (a `WITHOUT ROWID`
//!   leaf holds a row inline only up to about a quarter of a page);
//! - `sqlite-rowid`: a rowid table with a `UNIQUE` key column in 4 KiB pages (a rowid leaf
//!   holds a row of up to a page inline; a lookup descends the key's index, then the table).
//!
//! Both were measured against each other; `docs/peers.md` has the figures and why `sqlite` is
//! the default.
//!
//! Settings: `journal_mode=WAL`, `synchronous=FULL` (sync) or `NORMAL` (lazy), `cache_size`
//! of `cache_bytes` per connection, `busy_timeout` 5 s, statements prepared once per
//! connection and kept (their SQL is built once per table). Connections live in a pool
//! (a connection is not `Sync`); a transaction takes one and gives it back. Writers start with
//! `BEGIN IMMEDIATE` (they take the write lock up front, so a transaction never fails half
//! way); readers with `BEGIN DEFERRED` (a WAL snapshot). `SQLITE_BUSY` after the timeout is a
//! conflict, which the driver retries.

use crate::{other, read_only, take_rows, Counters, PeerDurability, PeerOptions, TableMap};
use pagoda_workload::store::Rows;
use pagoda_workload::{Store, StoreError, StoreTxn, TableId};
use parking_lot::Mutex;
use rusqlite::{params, Connection, ErrorCode, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::Duration;

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How store tables are laid out (one engine name each, so one `bench compare` runs both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `WITHOUT ROWID` tables keyed by the BLOB, 16 KiB pages: one tree per table.
    WithoutRowid,
    /// Rowid tables with a `UNIQUE` BLOB key (an index beside the table), 4 KiB pages.
    Rowid,
}

impl Layout {
    /// The database's page size, set before its first table exists.
    pub(crate) fn page_size(self) -> u32 {
        match self {
            Layout::WithoutRowid => 16 << 10,
            Layout::Rowid => 4 << 10,
        }
    }

    fn engine(self) -> &'static str {
        match self {
            Layout::WithoutRowid => "sqlite",
            Layout::Rowid => "sqlite-rowid",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Layout::WithoutRowid => "WITHOUT ROWID",
            Layout::Rowid => "rowid table, UNIQUE key",
        }
    }

    /// The statement creating a store table (quoted name `t`).
    fn create_sql(self, t: &str) -> String {
        match self {
            Layout::WithoutRowid => {
                format!("CREATE TABLE IF NOT EXISTS {t} (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")
            }
            // NOT NULL: the store's keys never are, and a nullable UNIQUE column would let
            // several NULL keys in.
            Layout::Rowid => {
                format!("CREATE TABLE IF NOT EXISTS {t} (k BLOB NOT NULL UNIQUE, v BLOB)")
            }
        }
    }
}

/// The statements of one table, built once (the statement cache is keyed by this text).
#[derive(Debug)]
struct Sql {
    get: String,
    upsert: String,
    delete: String,
    /// `[forward, reverse]` scans, without and with an upper bound.
    scan: [[String; 2]; 2],
}

impl Sql {
    fn new(table: &str) -> Sql {
        let t = ident(table);
        let scan = |upper: &str, order: &str| {
            format!("SELECT k, v FROM {t} WHERE k >= ?1 {upper} ORDER BY k {order} LIMIT ?2")
        };
        Sql {
            get: format!("SELECT v FROM {t} WHERE k = ?1"),
            upsert: format!(
                "INSERT INTO {t} (k, v) VALUES (?1, ?2) ON CONFLICT(k) DO UPDATE SET v = excluded.v"
            ),
            delete: format!("DELETE FROM {t} WHERE k = ?1"),
            scan: [
                [scan("", "ASC"), scan("", "DESC")],
                [scan("AND k < ?3", "ASC"), scan("AND k < ?3", "DESC")],
            ],
        }
    }
}

/// A SQLite database with a pool of connections.
#[derive(Debug)]
pub(crate) struct SqliteStore {
    path: PathBuf,
    layout: Layout,
    pool: Mutex<Vec<Connection>>,
    synchronous: &'static str,
    cache_bytes: u64,
    cache_kib_per_connection: u64,
    connections: Mutex<usize>,
    tables: TableMap<Sql>,
    counters: Counters,
}

fn err(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Conflict,
        _ => other("sqlite", e),
    }
}

/// The SQL name of a store table: quoted, so any table name is a valid identifier.
fn ident(table: &str) -> String {
    format!("\"t_{}\"", table.replace('"', "\"\""))
}

impl SqliteStore {
    pub(crate) fn open(path: &Path, opts: &PeerOptions, layout: Layout) -> Result<Self, String> {
        let store = SqliteStore {
            path: path.to_path_buf(),
            layout,
            pool: Mutex::new(Vec::new()),
            synchronous: match opts.durability {
                PeerDurability::Sync => "FULL",
                PeerDurability::Lazy => "NORMAL",
            },
            cache_bytes: opts.cache_bytes,
            cache_kib_per_connection: (opts.cache_bytes / 1024).max(1),
            connections: Mutex::new(0),
            tables: TableMap::default(),
            counters: Counters::default(),
        };
        // One connection now: sets WAL (persistent in the file) and fails early on a bad path.
        let c = store.connect().map_err(|e| e.to_string())?;
        let names: Vec<String> = {
            let mut st = c
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
                .map_err(|e| e.to_string())?;
            let names = st
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(|e| e.to_string())?
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?;
            names
        };
        for n in names.iter().filter_map(|n| n.strip_prefix("t_")) {
            store
                .tables
                .insert_with(n, |_| Ok::<_, String>(Sql::new(n)))
                .map_err(|e| e.to_string())?;
        }
        store.pool.lock().push(c);
        Ok(store)
    }

    fn connect(&self) -> Result<Connection, StoreError> {
        let c = self.configure(Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        ))?;
        *self.connections.lock() += 1;
        Ok(c)
    }

    fn configure(&self, c: Result<Connection, rusqlite::Error>) -> Result<Connection, StoreError> {
        let c = c.map_err(err)?;
        c.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
        // Only takes effect on a database without tables yet (before WAL is set).
        c.execute_batch(&format!("PRAGMA page_size={}", self.layout.page_size()))
            .map_err(err)?;
        let mode: String = c
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(other("sqlite", format!("journal_mode is {mode}, not wal")));
        }
        c.execute_batch(&format!(
            "PRAGMA synchronous={}; PRAGMA cache_size=-{};",
            self.synchronous, self.cache_kib_per_connection
        ))
        .map_err(err)?;
        // TPC-C touches 9 tables with 4 statements each.
        c.set_prepared_statement_cache_capacity(64);
        Ok(c)
    }

    fn take(&self) -> Result<Connection, StoreError> {
        if let Some(c) = self.pool.lock().pop() {
            return Ok(c);
        }
        self.connect()
    }

    fn begin_txn(&self, read_only: bool) -> Result<SqliteTxn<'_>, StoreError> {
        let conn = self.take()?;
        let sql = if read_only {
            "BEGIN DEFERRED"
        } else {
            "BEGIN IMMEDIATE"
        };
        if let Err(e) = conn.execute_batch(sql) {
            self.pool.lock().push(conn);
            let e = err(e);
            if e.is_retryable() {
                self.counters.conflict();
            }
            return Err(e);
        }
        Ok(SqliteTxn {
            store: self,
            conn: Some(conn),
            read_only,
        })
    }
}

impl Store for SqliteStore {
    fn create_table(&self, name: &str) -> Result<(), StoreError> {
        if self.tables.get(name).is_some() {
            return Ok(());
        }
        let conn = self.take()?;
        let r = conn.execute_batch(&self.layout.create_sql(&ident(name)));
        self.pool.lock().push(conn);
        r.map_err(err)?;
        self.tables
            .insert_with(name, |_| Ok::<_, String>(Sql::new(name)))?;
        Ok(())
    }

    /// One transaction for the whole load, one prepared insert: SQLite's own advice for
    /// bulk inserts (every transaction is a WAL sync).
    fn bulk_load(
        &self,
        table: &str,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<u64, StoreError> {
        let sql = self.tables.require(table)?;
        let t = self.begin_txn(false)?;
        let mut n = 0u64;
        {
            let c = t.conn()?;
            let mut st = c.prepare_cached(&sql.upsert).map_err(err)?;
            for (k, v) in rows {
                st.execute(params![k, v]).map_err(err)?;
                n += 1;
            }
        }
        Box::new(t).commit()?;
        Ok(n)
    }

    /// A restarting checkpoint: the WAL's pages go to the database file, which is synced
    /// (`synchronous=FULL`), and the next commit overwrites the WAL from its start. Not
    /// TRUNCATE: a WAL cut to zero grows again with every commit, and each `fdatasync` then
    /// also commits the file's new size.
    fn make_durable(&self) -> Result<(), StoreError> {
        let conn = self.take()?;
        let r = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get::<_, i64>(0));
        self.pool.lock().push(conn);
        match r.map_err(err)? {
            0 => Ok(()),
            _ => Err(StoreError::Conflict),
        }
    }

    fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(Box::new(self.begin_txn(false)?))
    }

    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(Box::new(self.begin_txn(true)?))
    }

    fn stats_json(&self) -> serde_json::Value {
        self.counters.add_to(serde_json::json!({
            "engine": self.layout.engine(),
            "version": rusqlite::version(),
            "path": self.path,
            "journal_mode": "wal",
            "page_size": self.layout.page_size(),
            "layout": self.layout.name(),
            "synchronous": self.synchronous,
            "cache_bytes": self.cache_bytes,
            "cache_bytes_per_connection": self.cache_kib_per_connection * 1024,
            "connections": *self.connections.lock(),
            "busy_timeout_ms": BUSY_TIMEOUT.as_millis() as u64,
            "write_txn": "BEGIN IMMEDIATE",
            "read_txn": "BEGIN DEFERRED",
        }))
    }

    fn describe(&self) -> String {
        format!(
            "{} {} ({}, {}, journal_mode=wal, synchronous={}, page {} KiB, cache {} KiB per connection)",
            self.layout.engine(),
            rusqlite::version(),
            self.path.display(),
            self.layout.name(),
            self.synchronous,
            self.layout.page_size() >> 10,
            self.cache_kib_per_connection
        )
    }
}

/// A transaction on a pooled connection; dropping it rolls back and returns the connection.
struct SqliteTxn<'a> {
    store: &'a SqliteStore,
    conn: Option<Connection>,
    read_only: bool,
}

impl SqliteTxn<'_> {
    fn conn(&self) -> Result<&Connection, StoreError> {
        self.conn
            .as_ref()
            .ok_or_else(|| other("sqlite", "transaction already finished"))
    }

    fn writable(&self) -> Result<&Connection, StoreError> {
        if self.read_only {
            return Err(read_only());
        }
        self.conn()
    }

    /// Ends the transaction with `sql` and gives the connection back; a connection whose
    /// transaction could not end is dropped instead (it would poison the next user).
    fn finish(&mut self, sql: &str) -> Result<(), rusqlite::Error> {
        let Some(conn) = self.conn.take() else {
            return Ok(());
        };
        let r = conn.execute_batch(sql);
        if r.is_err() && !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        if conn.is_autocommit() {
            self.store.pool.lock().push(conn);
        } else {
            *self.store.connections.lock() -= 1;
        }
        r
    }
}

impl Drop for SqliteTxn<'_> {
    fn drop(&mut self) {
        if self.conn.is_some() {
            let _ = self.finish("ROLLBACK");
            self.store.counters.rollback();
        }
    }
}

impl StoreTxn for SqliteTxn<'_> {
    fn open(&mut self, table: &str) -> Result<TableId, StoreError> {
        self.store.tables.open(table)
    }

    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let (_, sql) = self.store.tables.at(table)?;
        let mut st = self.conn()?.prepare_cached(&sql.get).map_err(err)?;
        let mut rows = st.query(params![key]).map_err(err)?;
        match rows.next().map_err(err)? {
            Some(r) => Ok(Some(r.get(0).map_err(err)?)),
            None => Ok(None),
        }
    }

    fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let (_, sql) = self.store.tables.at(table)?;
        let mut st = self.writable()?.prepare_cached(&sql.upsert).map_err(err)?;
        st.execute(params![key, value]).map_err(err)?;
        Ok(())
    }

    fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool, StoreError> {
        let (_, sql) = self.store.tables.at(table)?;
        let mut st = self.writable()?.prepare_cached(&sql.delete).map_err(err)?;
        Ok(st.execute(params![key]).map_err(err)? > 0)
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
        let (_, sql) = self.store.tables.at(table)?;
        let text = &sql.scan[usize::from(end.is_some())][usize::from(reverse)];
        let mut st = self.conn()?.prepare_cached(text).map_err(err)?;
        // SQLite's LIMIT is a signed 64-bit integer.
        let lim = i64::try_from(limit).unwrap_or(i64::MAX);
        let map = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?));
        let rows = match end {
            Some(e) => take_rows(
                st.query_map(params![start, lim, e], map).map_err(err)?,
                limit,
            ),
            None => take_rows(st.query_map(params![start, lim], map).map_err(err)?, limit),
        };
        rows.map_err(err)
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        match self.finish("COMMIT") {
            Ok(()) => {
                self.store.counters.commit();
                Ok(())
            }
            Err(e) => {
                let e = err(e);
                if e.is_retryable() {
                    self.store.counters.conflict();
                }
                self.store.counters.rollback();
                Err(e)
            }
        }
    }

    fn rollback(mut self: Box<Self>) -> Result<(), StoreError> {
        self.store.counters.rollback();
        self.finish("ROLLBACK").map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both layouts keep a 1 KB row inside its leaf: the database file after a checkpoint is
    /// under twice the data (a 4 KiB rowid leaf holds 3 such rows), where a row spilling to an
    /// overflow page would take a whole 4 KiB page of its own (four times the data).
    #[test]
    fn a_one_kb_row_fits_its_leaf_in_both_layouts() {
        let (rows, value) = (2_000u32, 1_000usize);
        for layout in [Layout::WithoutRowid, Layout::Rowid] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.db");
            let s = SqliteStore::open(&path, &PeerOptions::default(), layout).unwrap();
            s.create_table("t").unwrap();
            let mut it = (0..rows).map(|i| (format!("user{i:012}").into_bytes(), vec![7; value]));
            assert_eq!(s.bulk_load("t", &mut it).unwrap(), u64::from(rows));
            s.make_durable().unwrap();
            let c = Connection::open(&path).unwrap();
            let q = |p: &str| c.query_row(p, [], |r| r.get::<_, u64>(0)).unwrap();
            assert_eq!(
                q("PRAGMA page_size"),
                u64::from(layout.page_size()),
                "{layout:?}"
            );
            let file = q("PRAGMA page_count") * q("PRAGMA page_size");
            let data = u64::from(rows) * (value as u64 + 16);
            assert!(file < data * 2, "{layout:?}: {file} B for {data} B of rows");
            // The rowid layout reads a key through its unique index.
            let idx = q("SELECT count(*) FROM sqlite_master WHERE type = 'index'");
            assert_eq!(idx, u64::from(layout == Layout::Rowid), "{layout:?}");
            let mut t = s.begin_read().unwrap();
            let t_t = t.open("t").unwrap();
            assert_eq!(
                t.get(t_t, b"user000000001234").unwrap(),
                Some(vec![7; value])
            );
        }
    }
}
