//! Engines behind [`pagoda_workload::Store`], so that `pagoda bench` runs the same
//! workloads, through the same driver, on pagoda and on the engines it is compared with.
//!
//! One module per engine:
//! - `pagoda`: [`PagodaStore`], the pagoda engine itself: each transaction opens a table
//!   once and keeps the engine's handle, as an embedder does.
//! - `sqlite`: SQLite (rusqlite, bundled), WAL, one `WITHOUT ROWID` table per store table
//!   (engine `sqlite`) or one rowid table with a unique key (engine `sqlite-rowid`), a pool of
//!   connections (one per client thread), `BEGIN IMMEDIATE` for writers.
//! - `lmdb`: LMDB (heed), one named database per table, one writer at a time.
//! - `redb`: redb, one table per store table, one writer at a time.
//! - `fjall`: fjall, a keyspace per table in its optimistic transactional database, the
//!   journal synced at each commit.
//! - `rocksdb` (cargo feature `rocksdb`): a plain RocksDB `DB`, a column family per table,
//!   one `WriteBatch` per commit with the WAL synced, key locks for read-modify-writes.
//! - `wiredtiger` (cargo feature `wiredtiger`): WiredTiger through its C API, a table per
//!   store table, the log synced at each commit, a session and cursors per client thread.
//!
//! Every peer runs on real files under a directory ([`PeerKind::path`]), commits durably by
//! default ([`PeerDurability::Sync`]), reports its settings in `stats_json()` and has no
//! device counters (it runs on the host's file system, not on an emulated device).

#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod fjall;
mod lmdb;
mod pagoda;
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;
mod sqlite;
#[cfg(feature = "wiredtiger")]
mod wiredtiger;

pub use pagoda::PagodaStore;
use pagoda_workload::{Store, TableId};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The peer engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerKind {
    /// SQLite in WAL mode, `WITHOUT ROWID` tables in 16 KiB pages.
    Sqlite,
    /// SQLite in WAL mode, rowid tables with a unique key in 4 KiB pages (the other layout in
    /// which a 1 KB row fits a page).
    SqliteRowid,
    /// LMDB.
    Lmdb,
    /// redb.
    Redb,
    /// fjall.
    Fjall,
    /// RocksDB (needs the `rocksdb` cargo feature).
    Rocksdb,
    /// WiredTiger (needs the `wiredtiger` cargo feature and the system's libwiredtiger).
    Wiredtiger,
}

impl PeerKind {
    /// Every peer, in the order reports list them.
    pub const ALL: [PeerKind; 7] = [
        PeerKind::Sqlite,
        PeerKind::SqliteRowid,
        PeerKind::Lmdb,
        PeerKind::Redb,
        PeerKind::Fjall,
        PeerKind::Rocksdb,
        PeerKind::Wiredtiger,
    ];

    /// The name `--engine` takes.
    pub fn name(self) -> &'static str {
        match self {
            PeerKind::Sqlite => "sqlite",
            PeerKind::SqliteRowid => "sqlite-rowid",
            PeerKind::Lmdb => "lmdb",
            PeerKind::Redb => "redb",
            PeerKind::Fjall => "fjall",
            PeerKind::Rocksdb => "rocksdb",
            PeerKind::Wiredtiger => "wiredtiger",
        }
    }

    /// Where this peer keeps its database under `dir` (a file for SQLite and redb, a
    /// directory for LMDB, fjall, RocksDB and WiredTiger). Its existence tells whether anything was created.
    pub fn path(self, dir: &Path) -> PathBuf {
        dir.join(match self {
            PeerKind::Sqlite => "sqlite.db",
            PeerKind::SqliteRowid => "sqlite-rowid.db",
            PeerKind::Lmdb => "lmdb",
            PeerKind::Redb => "redb.redb",
            PeerKind::Fjall => "fjall",
            PeerKind::Rocksdb => "rocksdb",
            PeerKind::Wiredtiger => "wiredtiger",
        })
    }

    /// The cargo feature that builds this engine in, for the engines that need one.
    pub fn feature(self) -> Option<&'static str> {
        match self {
            PeerKind::Rocksdb => Some("rocksdb"),
            PeerKind::Wiredtiger => Some("wiredtiger"),
            _ => None,
        }
    }

    /// Whether this binary was built with the engine (RocksDB and WiredTiger are cargo
    /// features).
    pub fn is_built(self) -> bool {
        const BUILT: [(&str, bool); 2] = [
            ("rocksdb", cfg!(feature = "rocksdb")),
            ("wiredtiger", cfg!(feature = "wiredtiger")),
        ];
        self.feature()
            .is_none_or(|f| BUILT.iter().any(|&(name, on)| name == f && on))
    }
}

impl fmt::Display for PeerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PeerKind {
    type Err = PeerError;
    fn from_str(s: &str) -> Result<Self, PeerError> {
        PeerKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| PeerError::UnknownEngine(s.to_string()))
    }
}

/// How durable a peer's commit is. Only `Sync` is offered by the CLI today; `Lazy` is the
/// mapping a later `--commit lazy` takes (each engine's own no-sync mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PeerDurability {
    /// A commit returns once it is on stable storage: SQLite `synchronous=FULL`, LMDB's
    /// default sync, redb `Durability::Immediate`, fjall `PersistMode::SyncAll`, RocksDB
    /// `WriteOptions::sync`, WiredTiger `transaction_sync=(enabled=true,method=fsync)`.
    #[default]
    Sync,
    /// A commit returns once it is in the OS's hands: SQLite `synchronous=NORMAL` (WAL: synced
    /// at checkpoints), LMDB `NO_SYNC`, redb `Durability::None`, fjall `PersistMode::Buffer`,
    /// RocksDB WAL without sync, WiredTiger `transaction_sync=(enabled=false)`. A crash of the
    /// machine may lose recent commits.
    Lazy,
}

impl PeerDurability {
    /// `sync` or `lazy`.
    pub fn name(self) -> &'static str {
        match self {
            PeerDurability::Sync => "sync",
            PeerDurability::Lazy => "lazy",
        }
    }
}

/// How to open a peer.
#[derive(Debug, Clone)]
pub struct PeerOptions {
    /// The engine's page/block cache in bytes (`--buffer`). SQLite's cache is per connection
    /// (as SQLite is configured in practice: `cache_size` is a connection's setting), so its
    /// pool of one connection per client thread may hold up to that many times this. LMDB has
    /// no cache of its own (it reads through the OS page cache), so this is only reported.
    pub cache_bytes: u64,
    /// Commit durability.
    pub durability: PeerDurability,
    /// LMDB's map size: the largest the database may grow (the file is sparse).
    pub lmdb_map_bytes: u64,
}

impl Default for PeerOptions {
    fn default() -> Self {
        PeerOptions {
            cache_bytes: 64 << 20,
            durability: PeerDurability::Sync,
            lmdb_map_bytes: 64 << 30,
        }
    }
}

/// Why a peer could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// `--engine` named no engine.
    #[error(
        "unknown engine `{0}`; choose pagoda, sqlite, sqlite-rowid, lmdb, redb, fjall, \
         rocksdb or wiredtiger"
    )]
    UnknownEngine(String),
    /// An engine behind a cargo feature was asked for in a binary built without it.
    #[error(
        "this pagoda was built without {engine}; rebuild with the `{feature}` feature: \
         `cargo run --release -p pagoda --features {feature} -- ...`"
    )]
    NotBuilt {
        /// The engine.
        engine: PeerKind,
        /// The feature that builds it in.
        feature: &'static str,
    },
    /// The engine refused to open or set up its database.
    #[error("{engine}: cannot open {path}: {detail}; check the directory is writable, or use an empty --dir")]
    Open {
        /// The engine.
        engine: PeerKind,
        /// Its database path.
        path: PathBuf,
        /// The engine's message.
        detail: String,
    },
}

impl PeerError {
    /// The error for `engine` asked for in a binary built without its feature.
    pub fn not_built(engine: PeerKind) -> Self {
        PeerError::NotBuilt {
            engine,
            feature: engine.feature().unwrap_or("default"),
        }
    }
}

/// Opens (creating when absent) the peer's database under `dir`.
pub fn open(kind: PeerKind, dir: &Path, opts: &PeerOptions) -> Result<Box<dyn Store>, PeerError> {
    let path = kind.path(dir);
    let fail = |detail: String| PeerError::Open {
        engine: kind,
        path: path.clone(),
        detail,
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
    Ok(match kind {
        PeerKind::Sqlite => Box::new(
            sqlite::SqliteStore::open(&path, opts, sqlite::Layout::WithoutRowid).map_err(fail)?,
        ),
        PeerKind::SqliteRowid => {
            Box::new(sqlite::SqliteStore::open(&path, opts, sqlite::Layout::Rowid).map_err(fail)?)
        }
        PeerKind::Lmdb => Box::new(lmdb::LmdbStore::open(&path, opts).map_err(fail)?),
        PeerKind::Redb => Box::new(redb::RedbStore::open(&path, opts).map_err(fail)?),
        PeerKind::Fjall => Box::new(fjall::FjallStore::open(&path, opts).map_err(fail)?),
        #[cfg(feature = "rocksdb")]
        PeerKind::Rocksdb => Box::new(rocksdb::RocksStore::open(&path, opts).map_err(fail)?),
        #[cfg(feature = "wiredtiger")]
        PeerKind::Wiredtiger => {
            Box::new(wiredtiger::WiredTigerStore::open(&path, opts).map_err(fail)?)
        }
        #[allow(unreachable_patterns)] // every engine built in
        k => return Err(PeerError::not_built(k)),
    })
}

/// Transaction outcomes every peer counts for its `stats_json()`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    commits: AtomicU64,
    rollbacks: AtomicU64,
    conflicts: AtomicU64,
}

impl Counters {
    pub(crate) fn commit(&self) {
        self.commits.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn rollback(&self) {
        self.rollbacks.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn conflict(&self) {
        self.conflicts.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds the counters to a stats object.
    pub(crate) fn add_to(&self, mut v: serde_json::Value) -> serde_json::Value {
        if let Some(o) = v.as_object_mut() {
            for (k, c) in [
                ("commits", &self.commits),
                ("rollbacks", &self.rollbacks),
                ("conflicts", &self.conflicts),
            ] {
                o.insert(k.to_string(), c.load(Ordering::Relaxed).into());
            }
        }
        v
    }
}

/// A store error for an engine failure that retrying cannot fix.
pub(crate) fn other(engine: &str, e: impl fmt::Display) -> pagoda_workload::StoreError {
    pagoda_workload::StoreError::Other(format!("{engine}: {e}"))
}

/// The error of a write in a read-only transaction (as `MemStore` reports it).
pub(crate) fn read_only() -> pagoda_workload::StoreError {
    pagoda_workload::StoreError::Other(
        "write in a read-only transaction; start it with begin()".to_string(),
    )
}

/// The pairs of a scan that reads an ordered iterator (already bounded below and above).
pub(crate) fn take_rows<E>(
    it: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), E>>,
    limit: usize,
) -> Result<pagoda_workload::store::Rows, E> {
    it.take(limit).collect()
}

/// The most tables a peer store holds (TPC-C has 9; LMDB's `max_dbs` is set to this).
pub(crate) const MAX_TABLES: usize = 256;

/// An append-only map from table name to an engine's handle, read without a lock: every
/// operation looks its table up, and a shared lock there (even a read lock) is a cache line
/// that every client thread writes. Tables are created once and never dropped.
pub(crate) struct TableMap<T> {
    slots: Box<[OnceLock<(String, T)>]>,
    len: AtomicUsize,
    add: parking_lot::Mutex<()>,
}

impl<T> Default for TableMap<T> {
    fn default() -> Self {
        TableMap {
            slots: (0..MAX_TABLES).map(|_| OnceLock::new()).collect(),
            len: AtomicUsize::new(0),
            add: parking_lot::Mutex::new(()),
        }
    }
}

impl<T> fmt::Debug for TableMap<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl<T> TableMap<T> {
    /// The handle of `name`, if the table exists.
    pub(crate) fn get(&self, name: &str) -> Option<&T> {
        let len = self.len.load(Ordering::Acquire);
        self.slots[..len]
            .iter()
            .filter_map(OnceLock::get)
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// The handle of `name`, or the error the `Store` contract asks for.
    pub(crate) fn require(&self, name: &str) -> Result<&T, pagoda_workload::StoreError> {
        self.get(name).ok_or_else(|| {
            pagoda_workload::StoreError::Other(format!(
                "table `{name}` does not exist; create it with create_table first"
            ))
        })
    }

    /// Adds `name` (made by `make` from the table's position unless it is there already) and
    /// returns its handle. Positions are dense and stable: an id for the table.
    pub(crate) fn insert_with<E: fmt::Display>(
        &self,
        name: &str,
        make: impl FnOnce(usize) -> Result<T, E>,
    ) -> Result<&T, pagoda_workload::StoreError> {
        let _g = self.add.lock();
        if let Some(v) = self.get(name) {
            return Ok(v);
        }
        let len = self.len.load(Ordering::Acquire);
        let slot = self.slots.get(len).ok_or_else(|| {
            pagoda_workload::StoreError::Other(format!(
                "cannot create table `{name}`: a peer store holds at most {MAX_TABLES} tables"
            ))
        })?;
        let v = make(len).map_err(|e| pagoda_workload::StoreError::Other(e.to_string()))?;
        let _ = slot.set((name.to_string(), v));
        self.len.store(len + 1, Ordering::Release);
        Ok(&slot.get().expect("set just above").1)
    }

    /// The handle a transaction gets for `name` ([`pagoda_workload::StoreTxn::open`]): the
    /// table's position, dense and stable, so it stays valid for the store's life.
    pub(crate) fn open(&self, name: &str) -> Result<TableId, pagoda_workload::StoreError> {
        let len = self.len.load(Ordering::Acquire);
        self.slots[..len]
            .iter()
            .position(|s| s.get().is_some_and(|(n, _)| n == name))
            .map(TableId::new)
            .ok_or_else(|| {
                pagoda_workload::StoreError::Other(format!(
                    "table `{name}` does not exist; create it with create_table first"
                ))
            })
    }

    /// The table handle `t` names: its name and this store's handle.
    pub(crate) fn at(&self, t: TableId) -> Result<(&str, &T), pagoda_workload::StoreError> {
        let len = self.len.load(Ordering::Acquire);
        self.slots[..len]
            .get(t.index())
            .and_then(OnceLock::get)
            .map(|(n, v)| (n.as_str(), v))
            .ok_or_else(|| {
                pagoda_workload::StoreError::Other(format!(
                    "table handle {} was not opened on this store; open the table first",
                    t.index()
                ))
            })
    }

    /// The table names, in creation order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        let len = self.len.load(Ordering::Acquire);
        self.slots[..len]
            .iter()
            .filter_map(OnceLock::get)
            .map(|(n, _)| n.as_str())
    }
}
