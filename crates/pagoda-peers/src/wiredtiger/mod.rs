//! WiredTiger as a store (cargo feature `wiredtiger`): one `table:` object (raw byte keys and
//! values, `key_format=u,value_format=u`) per store table, through WiredTiger's own C API.
//!
//! Settings (each with its reason in `docs/peers.md`): the write-ahead log on, commits synced
//! with `transaction_sync=(enabled=true,method=fsync)` (lazy: `enabled=false`, the log
//! written at commit and synced by `make_durable`'s checkpoint); a cache of `cache_bytes`;
//! checkpoints every 60 s (as MongoDB runs it); snapshot isolation, a write-write conflict
//! reported as `WT_ROLLBACK` and retried by the driver; a session per concurrent
//! transaction (kept in a pool, so each client thread ends up with its own) with a cursor per
//! table opened once and reused; the load through a `bulk` cursor into an empty table.

mod ffi;

use crate::{other, read_only, Counters, PeerDurability, PeerOptions, TableMap};
use pagoda_workload::store::Rows;
use pagoda_workload::{Store, StoreError, StoreTxn, TableId};
use std::ffi::{c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr;

/// A WiredTiger return code turned into a store error: `WT_ROLLBACK` (a write-write conflict
/// or a transaction WiredTiger chose to abort) is retryable, anything else is not.
fn check(code: c_int) -> Result<(), StoreError> {
    if code == 0 {
        return Ok(());
    }
    // SAFETY: constants defined by the shim.
    if code == unsafe { ffi::PGWT_ROLLBACK } {
        return Err(StoreError::Conflict);
    }
    Err(other("wiredtiger", strerror(code)))
}

fn strerror(code: c_int) -> String {
    // SAFETY: wiredtiger_strerror returns a static NUL-terminated string for any code.
    unsafe { CStr::from_ptr(ffi::pgwt_strerror(code)) }
        .to_string_lossy()
        .into_owned()
}

fn not_found(code: c_int) -> bool {
    // SAFETY: a constant defined by the shim.
    code == unsafe { ffi::PGWT_NOTFOUND }
}

fn cstring(s: &str) -> Result<CString, StoreError> {
    CString::new(s).map_err(|_| other("wiredtiger", format!("`{s}` contains a NUL byte")))
}

/// Table names WiredTiger takes in a `table:` URI without quoting.
fn check_name(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(other(
            "wiredtiger",
            format!("table name `{name}`: use letters, digits, `_`, `-` or `.`"),
        ))
    }
}

/// A session and the cursors it opened, by table position (null: not opened yet). WiredTiger
/// sessions are single-threaded but may move between threads; one is used by one transaction
/// at a time.
struct Session {
    raw: *mut ffi::Session,
    cursors: Vec<*mut ffi::Cursor>,
}

// SAFETY: a session is used by one thread at a time (it lives in the pool or in one
// transaction); WiredTiger allows a session to move between threads.
unsafe impl Send for Session {}

impl Session {
    /// This session's cursor on table `uri` at position `index`, opened on first use.
    fn cursor(&mut self, index: usize, uri: &CStr) -> Result<*mut ffi::Cursor, StoreError> {
        if self.cursors.len() <= index {
            self.cursors.resize(index + 1, ptr::null_mut());
        }
        if self.cursors[index].is_null() {
            let mut c = ptr::null_mut();
            // SAFETY: a live session; `c` receives the cursor.
            check(unsafe { ffi::pgwt_cursor(self.raw, uri.as_ptr(), ptr::null(), &mut c) })?;
            self.cursors[index] = c;
        }
        Ok(self.cursors[index])
    }
}

/// A WiredTiger database directory.
pub(crate) struct WiredTigerStore {
    conn: *mut ffi::Connection,
    path: PathBuf,
    /// Each table's `table:NAME` URI.
    tables: TableMap<CString>,
    sessions: parking_lot::Mutex<Vec<Session>>,
    durability: PeerDurability,
    cache_bytes: u64,
    version: String,
    counters: Counters,
}

// SAFETY: WT_CONNECTION is thread-safe; sessions are handed to one transaction at a time
// through the pool's lock.
unsafe impl Send for WiredTigerStore {}
// SAFETY: as above.
unsafe impl Sync for WiredTigerStore {}

impl std::fmt::Debug for WiredTigerStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WiredTigerStore")
            .field("path", &self.path)
            .field("tables", &self.tables)
            .finish_non_exhaustive()
    }
}

impl Drop for WiredTigerStore {
    fn drop(&mut self) {
        // Closing the connection closes its sessions and cursors and takes a checkpoint.
        // SAFETY: no transaction outlives the store (they borrow it).
        let _ = unsafe { ffi::pgwt_close(self.conn) };
    }
}

impl WiredTigerStore {
    pub(crate) fn open(path: &Path, opts: &PeerOptions) -> Result<Self, String> {
        std::fs::create_dir_all(path).map_err(|e| e.to_string())?;
        let sync = match opts.durability {
            PeerDurability::Sync => "enabled=true,method=fsync",
            PeerDurability::Lazy => "enabled=false",
        };
        // WiredTiger's smallest cache is 1 MB.
        let cache = opts.cache_bytes.max(1 << 20);
        let config = format!(
            "create,cache_size={cache},log=(enabled=true),transaction_sync=({sync}),\
             checkpoint=(wait=60),session_max=1024,statistics=(fast)"
        );
        let home = CString::new(path.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
        let config = CString::new(config).map_err(|e| e.to_string())?;
        let mut conn = ptr::null_mut();
        // SAFETY: valid C strings; `conn` receives the connection.
        let rc = unsafe { ffi::pgwt_open(home.as_ptr(), config.as_ptr(), &mut conn) };
        if rc != 0 {
            return Err(format!("wiredtiger_open: {}", strerror(rc)));
        }
        let (mut major, mut minor, mut patch) = (0, 0, 0);
        // SAFETY: three integers for wiredtiger_version to fill.
        unsafe { ffi::pgwt_version(&mut major, &mut minor, &mut patch) };
        let version = format!("{major}.{minor}.{patch}");
        let store = WiredTigerStore {
            conn,
            path: path.to_path_buf(),
            tables: TableMap::default(),
            sessions: parking_lot::Mutex::new(Vec::new()),
            durability: opts.durability,
            cache_bytes: cache,
            version,
            counters: Counters::default(),
        };
        for name in store.existing_tables().map_err(|e| e.to_string())? {
            let uri = cstring(&format!("table:{name}")).map_err(|e| e.to_string())?;
            store
                .tables
                .insert_with(&name, |_| Ok::<_, String>(uri))
                .map_err(|e| e.to_string())?;
        }
        Ok(store)
    }

    /// A session from the pool, or a new one.
    fn session(&self) -> Result<Session, StoreError> {
        if let Some(s) = self.sessions.lock().pop() {
            return Ok(s);
        }
        let mut raw = ptr::null_mut();
        // SAFETY: a live connection; `raw` receives the session.
        check(unsafe { ffi::pgwt_session(self.conn, &mut raw) })?;
        Ok(Session {
            raw,
            cursors: Vec::new(),
        })
    }

    fn give_back(&self, s: Session) {
        self.sessions.lock().push(s);
    }

    /// The tables of a database opened again: the `table:` entries of its metadata.
    fn existing_tables(&self) -> Result<Vec<String>, StoreError> {
        let s = self.session()?;
        let mut c = ptr::null_mut();
        let uri = cstring("metadata:")?;
        // SAFETY: a live session; `c` receives the cursor, closed below.
        check(unsafe { ffi::pgwt_cursor(s.raw, uri.as_ptr(), ptr::null(), &mut c) })?;
        let mut names = Vec::new();
        let result = loop {
            // SAFETY: `c` is open.
            let rc = unsafe { ffi::pgwt_next(c) };
            if not_found(rc) {
                break Ok(());
            }
            if let Err(e) = check(rc) {
                break Err(e);
            }
            let mut key = ptr::null();
            // SAFETY: positioned cursor; the key string lives until the cursor moves.
            if let Err(e) = check(unsafe { ffi::pgwt_meta_key(c, &mut key) }) {
                break Err(e);
            }
            // SAFETY: as above.
            let key = unsafe { CStr::from_ptr(key) }.to_string_lossy();
            if let Some(name) = key.strip_prefix("table:") {
                names.push(name.to_string());
            }
        };
        // SAFETY: `c` is open and not used after this.
        let closed = check(unsafe { ffi::pgwt_cursor_close(c) });
        self.give_back(s);
        result.and(closed).map(|()| names)
    }

    /// Whether the table at `uri` holds no row.
    fn is_empty(&self, uri: &CStr) -> Result<bool, StoreError> {
        let s = self.session()?;
        let mut c = ptr::null_mut();
        // SAFETY: a live session; the cursor is closed below so a bulk cursor may open.
        let r = check(unsafe { ffi::pgwt_cursor(s.raw, uri.as_ptr(), ptr::null(), &mut c) })
            .and_then(|()| {
                // SAFETY: `c` is open.
                let rc = unsafe { ffi::pgwt_next(c) };
                let empty = not_found(rc);
                let r = if empty {
                    Ok(true)
                } else {
                    check(rc).map(|()| false)
                };
                // SAFETY: `c` is open and not used after this.
                check(unsafe { ffi::pgwt_cursor_close(c) }).and(r)
            });
        self.give_back(s);
        r
    }

    /// Loads sorted `rows` through a bulk cursor; `None` if WiredTiger refuses one (another
    /// handle has the table open), so the caller loads through transactions instead.
    fn load_bulk(
        &self,
        uri: &CStr,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<Option<u64>, StoreError> {
        let s = self.session()?;
        let bulk = cstring("bulk")?;
        let mut c = ptr::null_mut();
        // SAFETY: a live session; `c` receives the cursor, closed below.
        let rc = unsafe { ffi::pgwt_cursor(s.raw, uri.as_ptr(), bulk.as_ptr(), &mut c) };
        // SAFETY: a constant defined by the shim.
        if rc == unsafe { ffi::PGWT_EBUSY } {
            self.give_back(s);
            return Ok(None);
        }
        if let Err(e) = check(rc) {
            self.give_back(s);
            return Err(e);
        }
        let mut n = 0u64;
        let mut r = Ok(());
        for (k, v) in rows {
            // SAFETY: an open cursor; the buffers outlive the call (WiredTiger copies them).
            let rc = unsafe {
                ffi::pgwt_insert(c, k.as_ptr().cast(), k.len(), v.as_ptr().cast(), v.len())
            };
            r = check(rc);
            if r.is_err() {
                break;
            }
            n += 1;
        }
        // SAFETY: `c` is open and not used after this; closing makes the rows visible.
        let closed = check(unsafe { ffi::pgwt_cursor_close(c) });
        self.give_back(s);
        r.and(closed).map(|()| Some(n))
    }

    /// Loads `rows` through transactions of [`pagoda_workload::BULK_BATCH`] rows.
    fn start(&self, write: bool) -> Result<WtTxn<'_>, StoreError> {
        let session = self.session()?;
        let config = c"isolation=snapshot";
        // SAFETY: a live session with no transaction running.
        if let Err(e) = check(unsafe { ffi::pgwt_begin(session.raw, config.as_ptr()) }) {
            self.give_back(session);
            return Err(e);
        }
        Ok(WtTxn {
            store: self,
            session: Some(session),
            write,
        })
    }

    /// The connection statistics the report carries, by name.
    fn stats(&self) -> Result<serde_json::Map<String, serde_json::Value>, StoreError> {
        let s = self.session()?;
        // SAFETY: a function of the shim without arguments.
        let len = usize::try_from(unsafe { ffi::pgwt_stats_len() }).unwrap_or(0);
        let mut out = vec![0i64; len];
        // SAFETY: `out` holds the `len` values the shim writes.
        let r = check(unsafe { ffi::pgwt_stats(s.raw, out.as_mut_ptr()) });
        self.give_back(s);
        r?;
        Ok(ffi::STAT_NAMES
            .iter()
            .zip(out)
            .map(|(n, v)| (n.to_string(), v.into()))
            .collect())
    }
}

impl Store for WiredTigerStore {
    fn create_table(&self, name: &str) -> Result<(), StoreError> {
        if self.tables.get(name).is_some() {
            return Ok(());
        }
        check_name(name)?;
        let uri = cstring(&format!("table:{name}"))?;
        self.tables.insert_with(name, |_| {
            let s = self.session()?;
            let config = c"key_format=u,value_format=u";
            // SAFETY: a live session and valid C strings.
            let r = check(unsafe { ffi::pgwt_create(s.raw, uri.as_ptr(), config.as_ptr()) });
            self.give_back(s);
            r.map(|()| uri.clone())
        })?;
        Ok(())
    }

    /// A bulk cursor when the table is empty (WiredTiger builds the pages directly, without
    /// logging; the rows are durable at the next checkpoint, which `make_durable` takes);
    /// transactions of 1000 rows otherwise.
    fn bulk_load(
        &self,
        table: &str,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<u64, StoreError> {
        let uri = self.tables.require(table)?;
        if self.is_empty(uri)? {
            if let Some(n) = self.load_bulk(uri, rows)? {
                self.counters.commit();
                return Ok(n);
            }
        }
        pagoda_workload::store::load_in_transactions(self, table, rows)
    }

    /// A checkpoint: every committed row (bulk-loaded ones included) is on disk after it.
    fn make_durable(&self) -> Result<(), StoreError> {
        let s = self.session()?;
        // SAFETY: a live session with no transaction running.
        let r = check(unsafe { ffi::pgwt_checkpoint(s.raw) });
        self.give_back(s);
        r
    }

    fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(Box::new(self.start(true)?))
    }

    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(Box::new(self.start(false)?))
    }

    fn stats_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "engine": "wiredtiger",
            "version": self.version,
            "path": self.path,
            "transaction_sync": match self.durability {
                PeerDurability::Sync => "enabled=true,method=fsync",
                PeerDurability::Lazy => "enabled=false",
            },
            "cache_bytes": self.cache_bytes,
            "sessions": self.sessions.lock().len(),
        });
        if let (Ok(stats), Some(o)) = (self.stats(), v.as_object_mut()) {
            let commits = stats
                .get("transactions_committed")
                .and_then(serde_json::Value::as_f64);
            let syncs = stats.get("log_syncs").and_then(serde_json::Value::as_f64);
            if let (Some(c), Some(s)) = (commits, syncs) {
                if s > 0.0 {
                    o.insert("commits_per_sync".into(), (c / s).into());
                }
            }
            o.insert("wiredtiger".into(), stats.into());
        }
        self.counters.add_to(v)
    }

    fn describe(&self) -> String {
        format!(
            "wiredtiger {} ({}, log on, transaction_sync {}, cache {} MiB, session per thread)",
            self.version,
            self.path.display(),
            match self.durability {
                PeerDurability::Sync => "fsync",
                PeerDurability::Lazy => "off",
            },
            self.cache_bytes >> 20
        )
    }
}

/// A transaction on one pooled session; dropping it rolls it back.
struct WtTxn<'a> {
    store: &'a WiredTigerStore,
    session: Option<Session>,
    write: bool,
}

impl Drop for WtTxn<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            // SAFETY: the session runs this transaction.
            let _ = unsafe { ffi::pgwt_rollback(s.raw) };
            self.store.counters.rollback();
            self.store.give_back(s);
        }
    }
}

fn finished() -> StoreError {
    other("wiredtiger", "transaction already finished")
}

/// Copies `len` bytes at `p` (a buffer WiredTiger owns until its cursor moves).
fn copy(p: *const c_void, len: usize) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    // SAFETY: WiredTiger returned `p` with `len` readable bytes.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec()
}

/// The pair a positioned cursor is on.
fn current(c: *mut ffi::Cursor) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
    let (mut k, mut kl, mut v, mut vl) = (ptr::null(), 0, ptr::null(), 0);
    // SAFETY: a positioned cursor; the buffers are copied before it moves.
    check(unsafe { ffi::pgwt_current(c, &mut k, &mut kl, &mut v, &mut vl) })?;
    Ok((copy(k, kl), copy(v, vl)))
}

/// Moves `c` one step (`next` or `prev`); `false` at the end.
fn step(c: *mut ffi::Cursor, reverse: bool) -> Result<bool, StoreError> {
    // SAFETY: an open cursor.
    let rc = unsafe {
        if reverse {
            ffi::pgwt_prev(c)
        } else {
            ffi::pgwt_next(c)
        }
    };
    if not_found(rc) {
        return Ok(false);
    }
    check(rc).map(|()| true)
}

/// Positions `c` on the first pair of the scan; `false` if there is none.
fn seek(
    c: *mut ffi::Cursor,
    start: &[u8],
    end: Option<&[u8]>,
    reverse: bool,
) -> Result<bool, StoreError> {
    let (key, want_at_or_above) = match (reverse, end) {
        // WiredTiger refuses an empty search key: from the bottom, `next` on an unpositioned
        // cursor gives the first key.
        (false, _) if start.is_empty() => return step(c, false),
        (false, _) => (start, true),
        // Descending from an exclusive end: the last key below it.
        (true, Some(e)) => (e, false),
        // Descending from the top: `prev` on an unpositioned cursor gives the last key.
        (true, None) => return step(c, true),
    };
    let mut exact = 0;
    // SAFETY: an open cursor; the key outlives the call.
    let rc = unsafe { ffi::pgwt_search_near(c, key.as_ptr().cast(), key.len(), &mut exact) };
    if not_found(rc) {
        return Ok(false);
    }
    check(rc)?;
    match (want_at_or_above, exact) {
        (true, e) if e < 0 => step(c, false),
        (false, e) if e >= 0 => step(c, true),
        _ => Ok(true),
    }
}

impl WtTxn<'_> {
    /// The session and this transaction's cursor on `table`.
    fn cursor(&mut self, table: TableId) -> Result<*mut ffi::Cursor, StoreError> {
        let (_, uri) = self.store.tables.at(table)?;
        let s = self.session.as_mut().ok_or_else(finished)?;
        s.cursor(table.index(), uri)
    }

    fn writable(&self) -> Result<(), StoreError> {
        match (&self.session, self.write) {
            (None, _) => Err(finished()),
            (Some(_), false) => Err(read_only()),
            (Some(_), true) => Ok(()),
        }
    }

    /// Reads `key` through `c`, copying the value out, and releases the cursor's position.
    fn search(c: *mut ffi::Cursor, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let (mut v, mut vl) = (ptr::null(), 0);
        // SAFETY: an open cursor; the key outlives the call, the value is copied at once.
        let rc = unsafe { ffi::pgwt_search(c, key.as_ptr().cast(), key.len(), &mut v, &mut vl) };
        let r = if not_found(rc) {
            Ok(None)
        } else {
            check(rc).map(|()| Some(copy(v, vl)))
        };
        // SAFETY: an open cursor (a reset releases the page it pinned).
        unsafe { ffi::pgwt_cursor_reset(c) };
        r
    }

    /// Ends the transaction with `commit` or a rollback and returns the session to the pool.
    fn finish(&mut self, commit: bool) -> Result<(), StoreError> {
        let s = self.session.take().ok_or_else(finished)?;
        // SAFETY: the session runs this transaction; a failed commit rolls it back.
        let rc = unsafe {
            if commit {
                ffi::pgwt_commit(s.raw)
            } else {
                ffi::pgwt_rollback(s.raw)
            }
        };
        self.store.give_back(s);
        let r = check(rc);
        match (&r, commit) {
            (Ok(()), true) => self.store.counters.commit(),
            (Err(StoreError::Conflict), _) => {
                self.store.counters.conflict();
                self.store.counters.rollback();
            }
            _ => self.store.counters.rollback(),
        }
        r
    }
}

impl WtTxn<'_> {
    /// Counts a conflict an operation met (the driver then rolls the transaction back).
    fn counted<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        if matches!(r, Err(StoreError::Conflict)) {
            self.store.counters.conflict();
        }
        r
    }
}

impl StoreTxn for WtTxn<'_> {
    fn open(&mut self, table: &str) -> Result<TableId, StoreError> {
        self.store.tables.open(table)
    }

    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let c = self.cursor(table)?;
        self.counted(Self::search(c, key))
    }

    fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.writable()?;
        let c = self.cursor(table)?;
        // SAFETY: an open cursor; WiredTiger copies the buffers.
        let rc = unsafe {
            ffi::pgwt_insert(
                c,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
            )
        };
        // SAFETY: an open cursor.
        unsafe { ffi::pgwt_cursor_reset(c) };
        self.counted(check(rc))
    }

    fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool, StoreError> {
        self.writable()?;
        let c = self.cursor(table)?;
        // A remove of an absent key succeeds (overwrite=true): look first to tell.
        if self.counted(Self::search(c, key))?.is_none() {
            return Ok(false);
        }
        // SAFETY: an open cursor; the key outlives the call.
        let rc = unsafe { ffi::pgwt_remove(c, key.as_ptr().cast(), key.len()) };
        // SAFETY: an open cursor.
        unsafe { ffi::pgwt_cursor_reset(c) };
        self.counted(check(rc).map(|()| true))
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
        let c = self.cursor(table)?;
        let mut rows = Vec::new();
        let r = (|| {
            let mut more = seek(c, start, end, reverse)?;
            while more && rows.len() < limit {
                let (k, v) = current(c)?;
                let inside = if reverse {
                    k.as_slice() >= start
                } else {
                    end.is_none_or(|e| k.as_slice() < e)
                };
                if !inside {
                    break;
                }
                rows.push((k, v));
                more = step(c, reverse)?;
            }
            Ok(())
        })();
        // SAFETY: an open cursor.
        unsafe { ffi::pgwt_cursor_reset(c) };
        self.counted(r.map(|()| rows))
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        self.finish(true)
    }

    fn rollback(mut self: Box<Self>) -> Result<(), StoreError> {
        match self.session {
            Some(_) => self.finish(false),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syncs_after_commits(durability: PeerDurability) -> i64 {
        let dir = tempfile::tempdir().unwrap();
        let opts = PeerOptions {
            cache_bytes: 4 << 20,
            durability,
            ..PeerOptions::default()
        };
        let s = WiredTigerStore::open(&dir.path().join("wt"), &opts).unwrap();
        s.create_table("t").unwrap();
        let before = s.stats().unwrap()["log_syncs"].as_i64().unwrap();
        for i in 0..20u32 {
            let mut t = s.begin().unwrap();
            let h = t.open("t").unwrap();
            t.put(h, &i.to_be_bytes(), b"v").unwrap();
            t.commit().unwrap();
        }
        s.stats().unwrap()["log_syncs"].as_i64().unwrap() - before
    }

    /// The setting that makes a commit durable is the one WiredTiger runs with: one thread's
    /// 20 sync commits take a log sync each, lazy ones none.
    #[test]
    fn sync_commits_sync_the_log_and_lazy_ones_do_not() {
        assert!(syncs_after_commits(PeerDurability::Sync) >= 20);
        assert_eq!(syncs_after_commits(PeerDurability::Lazy), 0);
    }
}
