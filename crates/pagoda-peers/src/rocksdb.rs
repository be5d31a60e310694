//! RocksDB as a store (cargo feature `rocksdb`): a plain `DB`, one column family per store
//! table, configured as RocksDB's tuning guide sets up a point-lookup and update workload
//! (each setting's reason is in `docs/peers.md`).
//!
//! Settings: the WAL on, `WriteOptions::sync` on every commit (lazy: WAL written, not synced),
//! `recycle_log_file_num` (a sync overwrites an old WAL file in place instead of growing a new
//! one, so `fdatasync` does not also commit file-size metadata), a 10-bit bloom filter per
//! SST file, index and filter blocks in one LRU block cache of `cache_bytes` shared by every
//! column family (L0's pinned), LZ4, `bytes_per_sync` 1 MiB, two background jobs. Built with
//! SSE4.2 and PCLMULQDQ (the workspace's `.cargo/config.toml`), so checksums use hardware CRC.
//! `stats_json` reports what RocksDB's own info LOG says at open (its version, whether its CRC32C
//! is the hardware one, the WAL recycling it kept after sanitising the options), not what was
//! asked for: a library built elsewhere, or an older one, may differ.
//!
//! Transactions: a write transaction collects its writes and commits them as one `WriteBatch`
//! (atomic, one WAL record, one sync). It locks each key it reads or writes (see
//! [`KeyLocks`]) until it ends, so read-modify-write transactions on the same keys are
//! serialised (strict two-phase locking on keys; a scan does not lock its range, so phantoms
//! are possible). A lock held by another transaction for longer than [`LOCK_WAIT`] is a
//! conflict, which the driver retries (this also breaks deadlocks). A read-only transaction
//! reads the latest committed data with each `get` (read committed; a scan is a consistent
//! view of its own). A bulk load writes sorted SST files and ingests them.

use crate::{other, read_only, Counters, PeerDurability, PeerOptions, TableMap};
use pagoda_workload::store::Rows;
use pagoda_workload::{Store, StoreError, StoreTxn, TableId};
use rocksdb::{
    AsColumnFamilyRef, BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType,
    DBWithThreadMode, Direction, ErrorKind, IngestExternalFileOptions, IteratorMode, MultiThreaded,
    Options, SstFileWriter, WriteBatch, WriteOptions,
};
use std::collections::BTreeMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

type Db = DBWithThreadMode<MultiThreaded>;

/// How long a transaction waits for a key lock before it reports a conflict.
pub(crate) const LOCK_WAIT: Duration = Duration::from_millis(20);

/// Key-lock stripes: far more than client threads, so unrelated keys rarely share one.
const STRIPES: usize = 1 << 14;

/// WAL files kept for reuse (RocksDB's tuning guide for sync-heavy writes).
const RECYCLE_LOG_FILES: usize = 4;

/// Bytes of rows per SST file of a bulk load (RocksDB's default target file size).
const BULK_FILE_BYTES: u64 = 64 << 20;

/// A column family's handle. RocksDB owns it for as long as the database is open and the
/// family is not dropped (this store never drops one), so keeping the raw handle spares every
/// operation the name lookup (a lock and an `Arc` clone in `cf_handle`).
#[derive(Debug, Clone, Copy)]
struct Cf {
    raw: *mut librocksdb_sys::rocksdb_column_family_handle_t,
    /// The table's position in the store's [`TableMap`], a stable id for key locks.
    id: usize,
}

// SAFETY: a column-family handle is immutable and RocksDB allows using it from any thread.
unsafe impl Send for Cf {}
// SAFETY: as above.
unsafe impl Sync for Cf {}

impl AsColumnFamilyRef for Cf {
    fn inner(&self) -> *mut librocksdb_sys::rocksdb_column_family_handle_t {
        self.raw
    }
}

/// Striped exclusive locks on `(table, key)`. A stripe is one flag: a transaction takes it
/// with a compare-and-swap and gives it back when it ends.
struct KeyLocks {
    stripes: Box<[AtomicBool]>,
}

impl KeyLocks {
    fn new() -> Self {
        KeyLocks {
            stripes: (0..STRIPES).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    fn stripe(cf: Cf, key: &[u8]) -> usize {
        let h = BuildHasherDefault::<DefaultHasher>::default().hash_one((cf.id, key));
        (h as usize) % STRIPES
    }

    /// Takes `stripe`, waiting up to [`LOCK_WAIT`]; false when it stayed taken.
    fn lock(&self, stripe: usize) -> bool {
        let flag = &self.stripes[stripe];
        let mut deadline = None;
        loop {
            if flag
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
            let d = *deadline.get_or_insert_with(|| Instant::now() + LOCK_WAIT);
            if Instant::now() >= d {
                return false;
            }
            std::thread::yield_now();
        }
    }

    fn unlock(&self, stripe: usize) {
        self.stripes[stripe].store(false, Ordering::Release);
    }
}

/// A RocksDB database directory.
pub(crate) struct RocksStore {
    // Declared before `db`: the handles must not outlive it (they are plain pointers).
    tables: TableMap<Cf>,
    db: Db,
    cf_opts: Options,
    write_opts: WriteOptions,
    path: PathBuf,
    durability: PeerDurability,
    cache_bytes: u64,
    locks: KeyLocks,
    counters: Counters,
    log: LogFacts,
}

/// Facts RocksDB writes to its info LOG when it opens.
#[derive(Debug, Default)]
struct LogFacts {
    version: Option<String>,
    /// `Fast CRC32 supported: Supported on x86` (hardware CRC32C) or `Not supported ...`.
    fast_crc: Option<bool>,
    /// `Options.recycle_log_file_num` after RocksDB's sanitising (older releases reset it
    /// to 0 under the default WAL recovery mode).
    recycle_log_file_num: Option<u64>,
}

impl LogFacts {
    /// Reads the facts from `dir`'s LOG; a missing LOG or line leaves a fact unknown.
    fn read(dir: &Path) -> LogFacts {
        let text = std::fs::read_to_string(dir.join("LOG")).unwrap_or_default();
        let after = |key: &str| {
            text.lines()
                .find_map(|l| l.split_once(key))
                .map(|(_, v)| v.trim().to_string())
        };
        LogFacts {
            version: after("RocksDB version:"),
            fast_crc: after("Fast CRC32 supported:").map(|v| v.starts_with("Supported")),
            recycle_log_file_num: after("Options.recycle_log_file_num:")
                .and_then(|v| v.parse().ok()),
        }
    }
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

/// The options of every column family and of the database.
fn options(cache_bytes: usize) -> Options {
    let cache = Cache::new_lru_cache(cache_bytes);
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(&cache);
    table.set_bloom_filter(10.0, false);
    table.set_cache_index_and_filter_blocks(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    let mut o = Options::default();
    o.set_block_based_table_factory(&table);
    o.set_compression_type(DBCompressionType::Lz4);
    o.set_bytes_per_sync(1 << 20);
    o.set_max_background_jobs(2);
    o.set_recycle_log_file_num(RECYCLE_LOG_FILES);
    o
}

impl RocksStore {
    pub(crate) fn open(path: &Path, opts: &PeerOptions) -> Result<Self, String> {
        let cf_opts = options(usize::try_from(opts.cache_bytes).map_err(|e| e.to_string())?);
        let mut db_opts = cf_opts.clone();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        // A new directory has no column families yet: listing it fails, which is fine.
        let names = Db::list_cf(&db_opts, path).unwrap_or_else(|_| vec!["default".to_string()]);
        let cfs = names
            .iter()
            .map(|n| ColumnFamilyDescriptor::new(n, cf_opts.clone()));
        let db = Db::open_cf_descriptors(&db_opts, path, cfs).map_err(|e| e.to_string())?;
        let mut write_opts = WriteOptions::default();
        write_opts.set_sync(opts.durability == PeerDurability::Sync);
        let store = RocksStore {
            tables: TableMap::default(),
            db,
            cf_opts,
            write_opts,
            path: path.to_path_buf(),
            durability: opts.durability,
            cache_bytes: opts.cache_bytes,
            locks: KeyLocks::new(),
            counters: Counters::default(),
            log: LogFacts::read(path),
        };
        for table in names.iter().filter_map(|n| n.strip_prefix("t:")) {
            store.table(table).map_err(|e| e.to_string())?;
        }
        Ok(store)
    }

    /// The handle of `table`'s column family, created when missing.
    fn table(&self, table: &str) -> Result<Cf, StoreError> {
        if let Some(cf) = self.tables.get(table) {
            return Ok(*cf);
        }
        self.tables
            .insert_with(table, |id| {
                let name = cf_name(table);
                if self.db.cf_handle(&name).is_none() {
                    self.db
                        .create_cf(&name, &self.cf_opts)
                        .map_err(|e| format!("rocksdb: {e}"))?;
                }
                let raw = self.db.cf_handle(&name).map(|h| h.inner());
                raw.map(|raw| Cf { raw, id })
                    .ok_or_else(|| format!("rocksdb: column family {name} vanished"))
            })
            .copied()
    }

    fn cf(&self, table: &str) -> Result<Cf, StoreError> {
        self.tables.require(table).copied()
    }

    fn cf_at(&self, table: TableId) -> Result<Cf, StoreError> {
        self.tables.at(table).map(|(_, cf)| *cf)
    }

    /// Writes `rows` (ascending) to SST files of about [`BULK_FILE_BYTES`] in `dir`.
    fn write_ssts(
        &self,
        dir: &Path,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<(Vec<PathBuf>, u64), rocksdb::Error> {
        let (mut files, mut n) = (Vec::new(), 0u64);
        let mut rows = rows.peekable();
        while rows.peek().is_some() {
            let f = dir.join(format!("{}.sst", files.len()));
            let mut w = SstFileWriter::create(&self.cf_opts);
            w.open(&f)?;
            let mut bytes = 0u64;
            for (k, v) in rows.by_ref() {
                bytes += (k.len() + v.len()) as u64;
                w.put(&k, &v)?;
                n += 1;
                if bytes >= BULK_FILE_BYTES {
                    break;
                }
            }
            w.finish()?;
            files.push(f);
        }
        Ok((files, n))
    }
}

impl Store for RocksStore {
    fn create_table(&self, name: &str) -> Result<(), StoreError> {
        self.table(name).map(|_| ())
    }

    fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(Box::new(RocksTxn::new(self, false)))
    }

    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(Box::new(RocksTxn::new(self, true)))
    }

    /// Sorted SST files ingested into the column family (RocksDB's own bulk path: no WAL, no
    /// memtable, no compaction of the loaded data; ingestion syncs the files and the MANIFEST,
    /// so the rows are durable when it returns).
    fn bulk_load(
        &self,
        table: &str,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<u64, StoreError> {
        let cf = self.cf(table)?;
        let dir = self.path.join("bulk-load");
        std::fs::create_dir_all(&dir).map_err(|e| other("rocksdb", e))?;
        let r = self.write_ssts(&dir, rows).and_then(|(files, n)| {
            if !files.is_empty() {
                let mut o = IngestExternalFileOptions::default();
                o.set_move_files(true);
                self.db.ingest_external_file_cf_opts(&cf, &o, files)?;
            }
            Ok(n)
        });
        let _ = std::fs::remove_dir_all(&dir);
        let n = r.map_err(err)?;
        self.counters.commit();
        Ok(n)
    }

    /// Flushes every memtable to SST files and syncs the WAL.
    fn make_durable(&self) -> Result<(), StoreError> {
        for name in self.tables.names() {
            self.db.flush_cf(&self.cf(name)?).map_err(err)?;
        }
        self.db.flush_wal(true).map_err(err)
    }

    fn stats_json(&self) -> serde_json::Value {
        self.counters.add_to(serde_json::json!({
            "engine": "rocksdb",
            "version": self.log.version,
            "path": self.path,
            "transactions": "WriteBatch per commit, key locks",
            "wal": true,
            "sync": self.durability == PeerDurability::Sync,
            "recycle_log_file_num": self.log.recycle_log_file_num,
            "bloom_bits_per_key": 10,
            "block_cache_bytes": self.cache_bytes,
            "cache_bytes": self.cache_bytes,
            "compression": "lz4",
            "hardware_crc": self.log.fast_crc,
        }))
    }

    fn describe(&self) -> String {
        let known = |v: Option<String>| v.unwrap_or_else(|| "?".to_string());
        format!(
            "rocksdb {} ({}, WriteBatch commits, WAL sync={}, recycle_log_file_num={}, \
             hardware CRC={}, bloom 10 bits, block cache {} MiB)",
            known(self.log.version.clone()),
            self.path.display(),
            self.durability == PeerDurability::Sync,
            known(self.log.recycle_log_file_num.map(|n| n.to_string())),
            known(self.log.fast_crc.map(|b| b.to_string())),
            self.cache_bytes >> 20
        )
    }
}

/// A transaction's pending writes: `(table id, key)` to the table's handle and the new value
/// (`None`: deleted).
type Writes = BTreeMap<(usize, Vec<u8>), (Cf, Option<Vec<u8>>)>;

/// A transaction: its writes wait in `writes` until commit; dropping it discards them.
struct RocksTxn<'a> {
    store: &'a RocksStore,
    read_only: bool,
    writes: Writes,
    /// Key-lock stripes this transaction holds.
    held: Vec<usize>,
    finished: bool,
}

impl Drop for RocksTxn<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.store.counters.rollback();
        }
        self.release();
    }
}

impl<'a> RocksTxn<'a> {
    fn new(store: &'a RocksStore, read_only: bool) -> Self {
        RocksTxn {
            store,
            read_only,
            writes: BTreeMap::new(),
            held: Vec::new(),
            finished: false,
        }
    }

    fn release(&mut self) {
        for s in self.held.drain(..) {
            self.store.locks.unlock(s);
        }
    }

    fn live(&self) -> Result<(), StoreError> {
        if self.finished {
            return Err(other("rocksdb", "transaction already finished"));
        }
        Ok(())
    }

    /// Locks `key` of `cf` for the rest of the transaction.
    fn lock(&mut self, cf: Cf, key: &[u8]) -> Result<(), StoreError> {
        let s = KeyLocks::stripe(cf, key);
        if self.held.contains(&s) {
            return Ok(());
        }
        if !self.store.locks.lock(s) {
            self.store.counters.conflict();
            return Err(StoreError::Conflict);
        }
        self.held.push(s);
        Ok(())
    }

    fn writable(&mut self, table: TableId, key: &[u8]) -> Result<Cf, StoreError> {
        self.live()?;
        if self.read_only {
            return Err(read_only());
        }
        let cf = self.store.cf_at(table)?;
        self.lock(cf, key)?;
        Ok(cf)
    }

    /// Up to `limit` rows of the database in the scan's range and direction.
    fn db_rows(
        &self,
        cf: Cf,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Rows, StoreError> {
        let mode = match (reverse, end) {
            (false, _) => IteratorMode::From(start, Direction::Forward),
            (true, Some(e)) => IteratorMode::From(e, Direction::Reverse),
            (true, None) => IteratorMode::End,
        };
        let mut rows = Vec::new();
        for item in self.store.db.iterator_cf(&cf, mode) {
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
}

impl StoreTxn for RocksTxn<'_> {
    fn open(&mut self, table: &str) -> Result<TableId, StoreError> {
        self.store.tables.open(table)
    }

    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.live()?;
        let cf = self.store.cf_at(table)?;
        if !self.read_only {
            self.lock(cf, key)?;
            if let Some((_, v)) = self.writes.get(&(cf.id, key.to_vec())) {
                return Ok(v.clone());
            }
        }
        let v = self.store.db.get_pinned_cf(&cf, key).map_err(err)?;
        Ok(v.map(|v| v.to_vec()))
    }

    fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let cf = self.writable(table, key)?;
        self.writes
            .insert((cf.id, key.to_vec()), (cf, Some(value.to_vec())));
        Ok(())
    }

    fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool, StoreError> {
        let cf = self.writable(table, key)?;
        let existed = self.get(table, key)?.is_some();
        self.writes.insert((cf.id, key.to_vec()), (cf, None));
        Ok(existed)
    }

    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Rows, StoreError> {
        self.live()?;
        if end.is_some_and(|e| e <= start) || limit == 0 {
            return Ok(Vec::new());
        }
        let cf = self.store.cf_at(table)?;
        // This transaction's own writes in the range overlay the database's rows. Each can
        // hide at most one database row, so `limit` plus their number is enough to read.
        let lo = (cf.id, start.to_vec());
        let own: Vec<(&Vec<u8>, &Option<Vec<u8>>)> = self
            .writes
            .range(lo..)
            .take_while(|((id, k), _)| *id == cf.id && end.is_none_or(|e| k.as_slice() < e))
            .map(|((_, k), (_, v))| (k, v))
            .collect();
        let mut rows: BTreeMap<Vec<u8>, Vec<u8>> = self
            .db_rows(cf, start, end, limit.saturating_add(own.len()), reverse)?
            .into_iter()
            .collect();
        for (k, v) in own {
            match v {
                Some(v) => rows.insert(k.clone(), v.clone()),
                None => rows.remove(k),
            };
        }
        let take = |it: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>| it.take(limit).collect();
        Ok(if reverse {
            take(&mut rows.into_iter().rev())
        } else {
            take(&mut rows.into_iter())
        })
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        self.live()?;
        self.finished = true;
        let r = if self.writes.is_empty() {
            Ok(())
        } else {
            let mut batch = WriteBatch::default();
            for ((_, k), (cf, v)) in std::mem::take(&mut self.writes) {
                match v {
                    Some(v) => batch.put_cf(&cf, k, v),
                    None => batch.delete_cf(&cf, k),
                }
            }
            self.store
                .db
                .write_opt(batch, &self.store.write_opts)
                .map_err(err)
        };
        self.release();
        match r {
            Ok(()) => self.store.counters.commit(),
            Err(_) => self.store.counters.rollback(),
        }
        r
    }

    fn rollback(mut self: Box<Self>) -> Result<(), StoreError> {
        if !self.finished {
            self.finished = true;
            self.store.counters.rollback();
        }
        self.release();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RocksDB runs with the settings asked for, as its own LOG reports them: recycled WAL
    /// files (older releases drop them under the default recovery mode) and, when the build
    /// targets SSE4.2, hardware CRC32C (a library built without it, such as Debian's, checksums
    /// in software).
    #[test]
    fn the_log_confirms_the_tuned_settings() {
        let dir = tempfile::tempdir().unwrap();
        let s = RocksStore::open(dir.path(), &PeerOptions::default()).unwrap();
        let v = s.stats_json();
        assert_eq!(v["recycle_log_file_num"], RECYCLE_LOG_FILES as u64, "{v}");
        assert_eq!(v["hardware_crc"], cfg!(target_feature = "sse4.2"), "{v}");
        assert!(v["version"].as_str().is_some_and(|x| !x.is_empty()), "{v}");
        assert!(
            s.describe().contains("recycle_log_file_num=4"),
            "{}",
            s.describe()
        );
    }
}
