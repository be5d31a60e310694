//! The database: open and recovery, transactions, scans, checkpoints, statistics.

use crate::btree::{self, inline_max, Apply, MAX_KEY_LEN};
use crate::error::{Error, Result};
use crate::format::{
    check_page, decode_log_header, encode_log_header, encode_page, is_zero, CommitRecord, Meta,
    Node, Page, RedoOp, Superblock, Val, HEADER_BYTES, SECTOR,
};
use crate::mvcc::{Mvcc, Resolved, Value, Version};
use crate::options::{CommitMode, DbOptions, TornMode};
use crate::pipeline::{Admission, CommitTicket, Pipeline, Target};
use crate::pool::{Pool, Streams};
use crate::probe::{self, Event, RecoveryStep, Sabotage};
use crate::profile::{Phase, ProfileStats};
use crate::settings;
use crate::wal::{self, Wal};
use crate::MAX_VALUE_LEN;
use pagoda_device::file::{FileDevice, FileOptions};
use pagoda_device::{DeviceRef, WriteHints};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

const CATALOG: u32 = 0;

#[derive(Clone, Copy, Debug)]
struct TableInfo {
    id: u32,
    root: u64,
}

fn encode_table(t: TableInfo) -> Vec<u8> {
    let mut v = t.id.to_le_bytes().to_vec();
    v.extend_from_slice(&t.root.to_le_bytes());
    v
}

fn decode_table(v: &[u8]) -> Option<TableInfo> {
    Some(TableInfo {
        id: u32::from_le_bytes(v.get(0..4)?.try_into().ok()?),
        root: u64::from_le_bytes(v.get(4..12)?.try_into().ok()?),
    })
}

/// What recovery did at the last open.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RecoveryStats {
    /// Wall time of recovery in milliseconds.
    pub duration_ms: f64,
    /// Pages read from the data device during recovery.
    pub pages_read: u64,
    /// Commit records replayed.
    pub records_replayed: u64,
    /// Log groups read.
    pub log_groups: u64,
    /// Torn pages repaired (from the double-write area, or from full page images in the log).
    pub torn_pages_repaired: u64,
    /// Pages found corrupt and not repairable (mode `none`).
    pub corrupt_pages: Vec<u64>,
    /// Whether the log ended in a torn, unacknowledged group.
    pub torn_log_tail: bool,
    /// Checkpoint LSN recovery started from.
    pub checkpoint_lsn: u64,
    /// Highest commit timestamp recovered.
    pub last_cts: u64,
}

/// Buffer pool counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BufferStats {
    /// Page requests served from memory.
    pub hits: u64,
    /// Page requests that read the device.
    pub misses: u64,
    /// hits / (hits + misses).
    pub hit_ratio: f64,
    /// Pages read.
    pub reads: u64,
    /// Pages written in place.
    pub writes: u64,
    /// Pages evicted.
    pub evictions: u64,
    /// Cleaner batches.
    pub cleaner_batches: u64,
    /// Pages written to the double-write area.
    pub doublewrite_pages: u64,
    /// Frames in the pool.
    pub frames: u64,
    /// Dirty frames now.
    pub dirty_frames: u64,
}

/// Counters of a [`Db`] (serialisable for `--json`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DbStats {
    /// Buffer pool.
    pub buffer: BufferStats,
    /// Committed write transactions.
    pub commits: u64,
    /// Transactions aborted by a write-write conflict.
    pub conflicts: u64,
    /// Log bytes written.
    pub log_bytes: u64,
    /// Log syncs.
    pub log_syncs: u64,
    /// Commit records per log sync (group commit factor).
    pub commits_per_sync: f64,
    /// Checkpoints taken.
    pub checkpoints: u64,
    /// Log bytes in use (since the last checkpoint).
    pub log_used_bytes: u64,
    /// Versions held in memory for snapshots.
    pub mvcc_versions: u64,
    /// Recovery at the last open.
    pub recovery: RecoveryStats,
    /// Page size.
    pub page_size: usize,
    /// Torn-write mode.
    pub torn: TornMode,
    /// Failure reason, once the database refuses writes.
    pub failed: Option<String>,
    /// Commit mode.
    pub commit_mode: CommitMode,
    /// Pipelined commits admitted and not yet durable.
    pub pipelined_inflight: u64,
    /// Per-phase time of transactions and of the log path.
    pub profile: ProfileStats,
}

/// Result of a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitInfo {
    /// Commit timestamp (0 for a transaction without writes).
    pub cts: u64,
    /// LSN of the commit record (0 without writes).
    pub lsn: u64,
}

/// Result of a checkpoint.
#[derive(Clone, Copy, Debug)]
pub struct CheckpointInfo {
    /// Redo will start here.
    pub lsn: u64,
    /// Milliseconds taken.
    pub duration_ms: f64,
}

#[derive(Debug)]
struct CommitState {
    next_cts: u64,
}

#[derive(Debug, Default)]
struct Counters {
    commits: AtomicU64,
    conflicts: AtomicU64,
    checkpoints: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    data: DeviceRef,
    pool: Pool,
    wal: Arc<Wal>,
    mvcc: Mvcc,
    commit: Mutex<CommitState>,
    catalog: RwLock<HashMap<String, TableInfo>>,
    /// Tables whose creation is logged but not yet durable (and so not yet in `catalog`):
    /// a second create of the same name must fail, not race it.
    creating: Mutex<BTreeSet<String>>,
    roots: RwLock<HashMap<u32, u64>>,
    sb: Mutex<Superblock>,
    meta_page: u64,
    failed: Mutex<Option<String>>,
    closed: AtomicBool,
    counters: Counters,
    recovery: RecoveryStats,
    ckpt_lock: Mutex<()>,
    bg_stop: Mutex<bool>,
    bg_cond: Condvar,
    bg: Mutex<Option<std::thread::JoinHandle<()>>>,
    corrupt: RwLock<BTreeSet<u64>>,
    rec_times: Mutex<(f64, u64)>,
    opts: DbOptions,
    data_stream: u16,
    pipe: Option<Arc<Pipeline>>,
    flusher: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// A database: named tables of ordered byte-string keys with snapshot-isolated transactions.
///
/// `Db` is cheap to clone and shares one engine; many threads may use it at once. Readers never
/// block writers; a write-write conflict aborts the later committer with [`Error::Conflict`].
///
/// ```
/// use pagoda_engine::{Db, DbOptions, Error, TornMode};
/// use pagoda_device::mem::MemDevice;
/// use std::sync::Arc;
/// # fn main() -> pagoda_engine::Result<()> {
/// // Any block devices work; here two RAM devices with power-cut emulation.
/// let data = Arc::new(MemDevice::with_capacity(64 << 20)?);
/// let log = Arc::new(MemDevice::with_capacity(16 << 20)?);
/// let db = Db::open(DbOptions::with_devices(data, log).buffer_bytes(1 << 20).torn(TornMode::Atomic))?;
/// db.create_table("t")?;
///
/// let mut a = db.begin()?;
/// let mut b = db.begin()?;
/// a.put("t", b"k", b"from a")?;
/// b.put("t", b"k", b"from b")?;
/// a.commit()?;
/// assert!(matches!(b.commit(), Err(Error::Conflict { .. })));
///
/// let r = db.begin_read()?;
/// let all: Vec<_> = r.range("t", ..)?.collect::<Result<_, _>>()?;
/// assert_eq!(all, vec![(b"k".to_vec(), b"from a".to_vec())]);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Db {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("data", &self.inner.data.describe())
            .field("page_size", &self.inner.pool.page_size())
            .field("frames", &self.inner.pool.frames())
            .field("torn", &self.inner.opts.torn)
            .field("failed", &*self.inner.failed.lock())
            .finish_non_exhaustive()
    }
}

fn clamp_stream(want: u16, streams: u16) -> u16 {
    want.min(streams.saturating_sub(1))
}

fn read_sb(dev: &DeviceRef) -> Result<Option<Superblock>> {
    let mut buf = vec![0u8; 2 * SECTOR];
    dev.read(0, &mut buf)?;
    let a = Superblock::decode(&buf[..SECTOR]);
    let b = Superblock::decode(&buf[SECTOR..]);
    match (a, b) {
        (Ok(a), Ok(b)) => Ok(Some(if a.generation >= b.generation { a } else { b })),
        (Ok(a), Err(_)) => Ok(Some(a)),
        (Err(_), Ok(b)) => Ok(Some(b)),
        (Err(ea), Err(eb)) => {
            if is_zero(&buf) {
                Ok(None)
            } else {
                Err(Error::corrupt(
                    0,
                    format!("both superblocks are invalid ({ea}; {eb})"),
                ))
            }
        }
    }
}

/// Opens the devices an options value names.
pub(crate) fn devices(opts: &DbOptions, read_only: bool) -> Result<(DeviceRef, DeviceRef)> {
    if let (Some(d), Some(l)) = (&opts.data, &opts.log) {
        return Ok((d.clone(), l.clone()));
    }
    let Some(dir) = &opts.dir else {
        return Err(Error::config("no directory and no devices given"));
    };
    if !read_only {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Device(pagoda_device::DeviceError::io(dir, e)))?;
    }
    let data = dir.join("data.pagoda");
    let log = dir.join("log.pagoda");
    if read_only && !data.exists() {
        return Err(Error::config(format!(
            "{} has no data.pagoda: not a pagoda database",
            dir.display()
        )));
    }
    let open = |path: &std::path::Path, default: u64| -> Result<DeviceRef> {
        let existing = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let cap = if read_only {
            existing
        } else {
            existing.max(default)
        };
        let fo = FileOptions {
            direct: false,
            capacity_bytes: Some(cap / SECTOR as u64 * SECTOR as u64),
            streams: 4,
        };
        Ok(Arc::new(FileDevice::open(path, fo)?))
    };
    if !read_only && !log.exists() {
        preallocate(&log, opts.log_file_bytes + SECTOR as u64)?;
    }
    let d = open(&data, opts.data_file_bytes)?;
    let l = open(&log, opts.log_file_bytes + SECTOR as u64)?;
    Ok((d, l))
}

/// Writes a new log file full of zeros, so that log writes never allocate blocks (an fsync
/// after an allocating write also commits file-system metadata: several times slower).
fn preallocate(path: &std::path::Path, bytes: u64) -> Result<()> {
    use std::io::Write;
    let io = |e| Error::Device(pagoda_device::DeviceError::io(path, e));
    let tmp = path.with_extension("pagoda.tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    let chunk = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).map_err(io)?;
        left -= n as u64;
    }
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(())
}

impl Db {
    /// Opens (or creates) a database, running crash recovery when needed.
    ///
    /// Errors: [`Error::Config`] for bad options (including `atomic` on a device whose atomic
    /// unit is not the page size), [`Error::Corruption`] / [`Error::LogCorruption`] naming the
    /// damaged page or log position, [`Error::Device`] for I/O errors.
    pub fn open(opts: DbOptions) -> Result<Db> {
        opts.validate()?;
        let (data, log) = devices(&opts, false)?;
        let started = Instant::now();
        let dcaps = data.caps();
        let lcaps = log.caps();
        let sb = match read_sb(&data)? {
            Some(sb) => sb,
            None => create(&opts, &data, &log)?,
        };
        let page_size = sb.page_size as usize;
        settings::check(&data, opts.torn, clamp_stream(2, dcaps.streams))?;
        if opts.torn == TornMode::Atomic {
            match dcaps.atomic_write_unit {
                Some(u) if u == page_size => {}
                Some(u) => {
                    return Err(Error::config(format!(
                        "torn mode atomic needs an atomic write unit equal to the page size ({page_size} bytes), \
                         but the data device's unit is {u} bytes; use --page-size {u} or --torn doublewrite"
                    )))
                }
                None => {
                    return Err(Error::config(
                        "torn mode atomic needs a device with atomic writes; this data device has none \
                         (use --torn doublewrite)",
                    ))
                }
            }
        }
        let mut lh = vec![0u8; SECTOR];
        log.read(0, &mut lh)?;
        let (log_id, _) =
            decode_log_header(&lh).map_err(|e| Error::LogCorruption { lsn: 0, detail: e })?;
        if log_id != sb.db_id {
            return Err(Error::config(
                "the log device belongs to another database (ids differ); give the matching log",
            ));
        }
        let obs = opts.observer.clone();
        probe::emit(&obs, Event::Recovery(RecoveryStep::ScanLog));
        let scan = wal::scan(&log, sb.log_capacity, sb.checkpoint_lsn)?;
        probe::emit(&obs, Event::Recovery(RecoveryStep::ClearLog));
        // Groups that were in flight at a crash may sit after the end: erase them.
        wal::clear_after(
            &log,
            sb.log_capacity,
            clamp_stream(1, lcaps.streams),
            sb.checkpoint_lsn,
            scan.end,
        )?;
        let streams = Streams {
            data: clamp_stream(2, dcaps.streams),
            dw: clamp_stream(3, dcaps.streams),
        };
        let wal = Arc::new(
            Wal::new(
                log.clone(),
                sb.log_capacity,
                clamp_stream(1, lcaps.streams),
                scan.end,
                sb.checkpoint_lsn,
            )
            .sabotaged(opts.sabotage),
        );
        let frames = opts.buffer_bytes / page_size;
        let pool = Pool::new(
            data.clone(),
            page_size,
            frames,
            opts.torn,
            sb.dw_start,
            sb.dw_pages as usize,
            streams,
            wal.clone(),
        )
        .sabotaged(opts.sabotage);
        pool.applied.store(scan.end, Ordering::Release);
        let mut rec = RecoveryStats {
            checkpoint_lsn: sb.checkpoint_lsn,
            log_groups: scan.groups,
            torn_log_tail: scan.torn_tail,
            ..RecoveryStats::default()
        };
        if opts.torn == TornMode::Doublewrite {
            probe::emit(&obs, Event::Recovery(RecoveryStep::RepairDoublewrite));
            rec.torn_pages_repaired += repair_from_doublewrite(&pool, &data, &sb, streams.data)?;
        }
        let imaged: BTreeSet<u64> = scan
            .records
            .iter()
            .flat_map(|(_, r)| r.images.iter().map(|(p, _)| *p))
            .collect();
        if opts.verify_on_open {
            let bad = verify_pages(&pool, &data, &sb, &imaged)?;
            if let Some(&first) = bad.first() {
                return Err(Error::Corruption {
                    page_id: first,
                    all_pages: bad,
                    detail: "checksum verification at open failed".into(),
                });
            }
        }
        let meta_page = sb.meta_page;
        let mut corrupt = BTreeSet::new();
        probe::emit(&obs, Event::Recovery(RecoveryStep::Redo));
        let last_cts = redo(
            &pool,
            &opts,
            meta_page,
            &scan.records,
            &mut corrupt,
            &mut rec,
        )?;
        rec.records_replayed = scan.records.len() as u64;
        rec.last_cts = last_cts.max(sb.checkpoint_cts);
        if !corrupt.is_empty() && !opts.allow_corrupt {
            let all: Vec<u64> = corrupt.iter().copied().collect();
            return Err(Error::Corruption {
                page_id: all[0],
                all_pages: all,
                detail: "torn or damaged page(s) found during recovery (torn mode none cannot repair them)".into(),
            });
        }
        rec.corrupt_pages = corrupt.iter().copied().collect();
        let next_cts = rec.last_cts + 1;
        let inner = Arc::new(Inner {
            data,
            pool,
            wal,
            mvcc: Mvcc::new(next_cts - 1),
            commit: Mutex::new(CommitState { next_cts }),
            catalog: RwLock::new(HashMap::new()),
            creating: Mutex::new(BTreeSet::new()),
            roots: RwLock::new(HashMap::new()),
            sb: Mutex::new(sb),
            meta_page,
            failed: Mutex::new(None),
            closed: AtomicBool::new(false),
            counters: Counters::default(),
            recovery: rec,
            ckpt_lock: Mutex::new(()),
            bg_stop: Mutex::new(false),
            bg_cond: Condvar::new(),
            bg: Mutex::new(None),
            corrupt: RwLock::new(corrupt),
            rec_times: Mutex::new((0.0, 0)),
            data_stream: streams.data,
            pipe: (opts.commit == CommitMode::Pipelined)
                .then(|| Arc::new(Pipeline::new(opts.max_inflight_commits))),
            flusher: Mutex::new(None),
            opts,
        });
        let db = Db { inner };
        db.load_catalog()?;
        probe::emit(&obs, Event::Recovery(RecoveryStep::Checkpoint));
        db.checkpoint()?;
        // Pages read so far belong to recovery.
        let reads = db.inner.pool.counters.reads.load(Ordering::Relaxed);
        *db.inner.rec_times.lock() = (started.elapsed().as_secs_f64() * 1000.0, reads);
        if db.inner.opts.background {
            db.start_background();
        }
        db.start_flusher()?;
        probe::emit(&obs, Event::Opened);
        Ok(db)
    }

    /// Starts the flush thread of pipelined commit.
    fn start_flusher(&self) -> Result<()> {
        let Some(pipe) = self.inner.pipe.clone() else {
            return Ok(());
        };
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let h = std::thread::Builder::new()
            .name("pagoda-flush".into())
            .spawn(move || flusher(weak, pipe))
            .map_err(|e| Error::config(format!("cannot start the flush thread: {e}")))?;
        *self.inner.flusher.lock() = Some(h);
        Ok(())
    }

    /// Stops the flush thread: after draining the queue (`drain`), or at once failing what is
    /// queued.
    fn stop_flusher(&self, drain: bool) {
        let Some(pipe) = &self.inner.pipe else {
            return;
        };
        if drain {
            pipe.stop();
        } else {
            pipe.exit("database abandoned before the commit was durable");
        }
        if let Some(h) = self.inner.flusher.lock().take() {
            let _ = h.join();
        }
    }

    fn load_catalog(&self) -> Result<()> {
        let root = self.inner.meta_page + 1;
        let mut cat = HashMap::new();
        let mut roots = HashMap::new();
        let mut cursor = Bound::Unbounded;
        loop {
            let b = btree::batch(&self.inner.pool, root, &cursor, false)?;
            for (k, v) in &b.entries {
                let v = btree::load_value(&self.inner.pool, v)?;
                let t =
                    decode_table(&v).ok_or_else(|| Error::corrupt(root, "bad catalog entry"))?;
                cat.insert(String::from_utf8_lossy(k).into_owned(), t);
                roots.insert(t.id, t.root);
            }
            match b.fence {
                Some(f) => cursor = Bound::Included(f),
                None => break,
            }
        }
        *self.inner.catalog.write() = cat;
        *self.inner.roots.write() = roots;
        Ok(())
    }

    fn start_background(&self) {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let handle = std::thread::Builder::new()
            .name("pagoda-bg".into())
            .spawn(move || background(weak));
        if let Ok(h) = handle {
            *self.inner.bg.lock() = Some(h);
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if let Some(f) = &*self.inner.failed.lock() {
            return Err(Error::Failed(f.clone()));
        }
        Ok(())
    }

    fn fail(&self, e: &Error) {
        let mut f = self.inner.failed.lock();
        if f.is_none() {
            *f = Some(e.to_string());
        }
    }

    /// Starts a read-write transaction.
    pub fn begin(&self) -> Result<Txn> {
        let t0 = Instant::now();
        self.check_open()?;
        let t = Txn::new(self.clone(), false);
        self.inner.wal.profile.add(Phase::Begin, t0);
        Ok(t)
    }

    /// Starts a read-only transaction (a snapshot).
    pub fn begin_read(&self) -> Result<Txn> {
        let t0 = Instant::now();
        self.check_open()?;
        let t = Txn::new(self.clone(), true);
        self.inner.wal.profile.add(Phase::Begin, t0);
        Ok(t)
    }

    /// Takes the commit lock, yielding the CPU a few times before sleeping on it: the critical
    /// section is short (tens of µs), and with more runnable threads than cores a sleeping
    /// waiter's wake-up costs more than the section itself (the lock then idles between
    /// holders).
    fn lock_commit(&self) -> parking_lot::MutexGuard<'_, CommitState> {
        for _ in 0..32 {
            if let Some(g) = self.inner.commit.try_lock() {
                return g;
            }
            std::thread::yield_now();
        }
        self.inner.commit.lock()
    }

    /// Zeroes the phase profile of [`DbStats::profile`] (e.g. before a measured run).
    pub fn reset_profile(&self) {
        self.inner.wal.profile.reset();
    }

    /// The commit mode.
    pub fn commit_mode(&self) -> CommitMode {
        self.inner.opts.commit
    }

    /// The durable end of the log: every commit whose [`CommitInfo::lsn`] is at or below it
    /// is durable.
    pub fn durable_lsn(&self) -> u64 {
        self.inner.wal.durable()
    }

    /// Levels of `table`'s B+tree (1 = the root is a leaf).
    pub fn tree_depth(&self, table: &str) -> Result<usize> {
        let t = self.table(table)?;
        btree::depth(&self.inner.pool, t.root)
    }

    /// Names of the tables, sorted.
    pub fn list_tables(&self) -> Vec<String> {
        let mut v: Vec<String> = self.inner.catalog.read().keys().cloned().collect();
        v.sort();
        v
    }

    fn table(&self, name: &str) -> Result<TableInfo> {
        self.inner
            .catalog
            .read()
            .get(name)
            .copied()
            .ok_or_else(|| Error::NoSuchTable(name.to_string()))
    }

    /// Creates a table (durable when this returns).
    pub fn create_table(&self, name: &str) -> Result<()> {
        if name.is_empty() || name.len() > 255 {
            return Err(Error::config("table names are 1 to 255 bytes"));
        }
        self.ensure_log_space(4 * self.inner.pool.page_size() as u64)?;
        self.check_writable()?;
        let cs = self.inner.commit.lock();
        if self.inner.catalog.read().contains_key(name)
            || !self.inner.creating.lock().insert(name.to_string())
        {
            return Err(Error::TableExists(name.to_string()));
        }
        let res = (|| {
            let mut ap = Apply::new(&self.inner.pool, self.inner.meta_page);
            let id = ap.next_table_id()?;
            let root = ap.alloc(Node::Leaf(Vec::new()))?;
            let t = TableInfo { id, root };
            let val = Val::Inline(encode_table(t));
            ap.put(self.inner.meta_page + 1, name.as_bytes(), val.clone())?;
            let ops = vec![RedoOp::Put {
                table: CATALOG,
                key: name.as_bytes().to_vec(),
                val,
            }];
            let end = self.log_and_stamp(&ap, ops, cs.next_cts.saturating_sub(1))?;
            Ok::<_, Error>((t, end))
        })();
        let (t, end) = match res {
            Ok(x) => x,
            Err(e) => {
                self.inner.creating.lock().remove(name);
                self.fail(&e);
                return Err(e);
            }
        };
        drop(cs);
        let durable = self.wait(end);
        if durable.is_ok() {
            // Visible once durable; the name stays reserved until then.
            self.inner.catalog.write().insert(name.to_string(), t);
            self.inner.roots.write().insert(t.id, t.root);
        }
        self.inner.creating.lock().remove(name);
        durable
    }

    /// Drops a table and frees its pages (durable when this returns).
    pub fn drop_table(&self, name: &str) -> Result<()> {
        self.ensure_log_space(4 * self.inner.pool.page_size() as u64)?;
        self.check_writable()?;
        let cs = self.inner.commit.lock();
        let t = self.table(name)?;
        let res = (|| {
            let mut ap = Apply::new(&self.inner.pool, self.inner.meta_page);
            ap.drop_tree(t.root)?;
            ap.delete(self.inner.meta_page + 1, name.as_bytes())?;
            let ops = vec![
                RedoOp::DropTable { table: t.id },
                RedoOp::Delete {
                    table: CATALOG,
                    key: name.as_bytes().to_vec(),
                },
            ];
            self.log_and_stamp(&ap, ops, cs.next_cts.saturating_sub(1))
        })();
        let end = match res {
            Ok(x) => x,
            Err(e) => {
                self.fail(&e);
                return Err(e);
            }
        };
        self.inner.catalog.write().remove(name);
        self.inner.roots.write().remove(&t.id);
        drop(cs);
        self.wait(end)
    }

    /// Appends the commit record of an applied change and stamps its pages. Caller holds the
    /// commit lock. Returns the record's end LSN.
    fn log_and_stamp(&self, ap: &Apply<'_>, ops: Vec<RedoOp>, cts: u64) -> Result<u64> {
        let images = ap.images()?;
        let rec = CommitRecord { cts, ops, images }.encode();
        let (lsn, end) = self.inner.wal.append(rec)?;
        let touched: Vec<u64> = ap
            .touched
            .iter()
            .copied()
            .filter(|p| !ap.freed.contains(p))
            .collect();
        self.inner.pool.stamp(&touched, lsn)?;
        // Freed pages may still sit in the pool marked "in progress"; stamp them too.
        let freed: Vec<u64> = ap.freed.iter().copied().collect();
        self.inner.pool.stamp(&freed, lsn)?;
        self.inner.pool.applied.store(end, Ordering::Release);
        Ok(end)
    }

    fn wait(&self, end: u64) -> Result<()> {
        if let Err(e) = self.inner.wal.wait_durable(end) {
            self.fail(&e);
            return Err(e);
        }
        self.inner.mvcc.advance(self.inner.wal.durable());
        Ok(())
    }

    fn ensure_log_space(&self, need: u64) -> Result<()> {
        let cap = self.inner.wal.capacity();
        if need > cap / 4 {
            return Err(Error::LogFull {
                need,
                capacity: cap,
            });
        }
        if self.inner.wal.used() + need > cap / 4 * 3 {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Takes a fuzzy checkpoint: notes the log end, writes every page dirtied before it (commits
    /// continue meanwhile), syncs, and records the new redo start in the superblock; the log
    /// before it is reused.
    pub fn checkpoint(&self) -> Result<CheckpointInfo> {
        self.check_writable()?;
        let t0 = Instant::now();
        let _one = self.inner.ckpt_lock.lock();
        let obs = &self.inner.opts.observer;
        probe::emit(obs, Event::CheckpointBegin);
        let res = (|| {
            let (c, cts) = {
                let cs = self.inner.commit.lock();
                let d = self.inner.wal.flush_all()?;
                (d, cs.next_cts - 1)
            };
            if !probe::is(self.inner.opts.sabotage, Sabotage::SkipCheckpointFlush) {
                self.inner.pool.flush_dirty(Some(c))?;
            }
            let mut sb = self.inner.sb.lock();
            let mut next = sb.clone();
            next.generation += 1;
            next.checkpoint_lsn = c;
            next.checkpoint_cts = cts;
            let slot = next.generation % 2;
            self.inner.data.write(
                slot,
                &next.encode(),
                WriteHints::stream(self.inner.data_stream),
            )?;
            self.inner.data.flush()?;
            *sb = next;
            self.inner.wal.set_reclaim(c);
            Ok::<_, Error>(c)
        })();
        probe::emit(obs, Event::CheckpointEnd);
        match res {
            Ok(lsn) => {
                self.inner
                    .counters
                    .checkpoints
                    .fetch_add(1, Ordering::Relaxed);
                Ok(CheckpointInfo {
                    lsn,
                    duration_ms: t0.elapsed().as_secs_f64() * 1000.0,
                })
            }
            Err(e) => {
                self.fail(&e);
                Err(e)
            }
        }
    }

    /// Counters.
    pub fn stats(&self) -> DbStats {
        let i = &self.inner;
        let pc = &i.pool.counters;
        let hits = pc.hits.load(Ordering::Relaxed);
        let misses = pc.misses.load(Ordering::Relaxed);
        let commits = i.wal.counters.commits.load(Ordering::Relaxed);
        let syncs = i.wal.counters.syncs.load(Ordering::Relaxed);
        let mut recovery = i.recovery.clone();
        let (ms, reads) = *i.rec_times.lock();
        recovery.duration_ms = ms;
        recovery.pages_read = reads;
        recovery.corrupt_pages = i.corrupt.read().iter().copied().collect();
        DbStats {
            buffer: BufferStats {
                hits,
                misses,
                hit_ratio: if hits + misses == 0 {
                    0.0
                } else {
                    hits as f64 / (hits + misses) as f64
                },
                reads: pc.reads.load(Ordering::Relaxed),
                writes: pc.writes.load(Ordering::Relaxed),
                evictions: pc.evictions.load(Ordering::Relaxed),
                cleaner_batches: pc.cleaner_batches.load(Ordering::Relaxed),
                doublewrite_pages: pc.dw_writes.load(Ordering::Relaxed),
                frames: i.pool.frames() as u64,
                dirty_frames: i.pool.dirty_frames() as u64,
            },
            commits: i.counters.commits.load(Ordering::Relaxed),
            conflicts: i.counters.conflicts.load(Ordering::Relaxed),
            log_bytes: i.wal.counters.bytes.load(Ordering::Relaxed),
            log_syncs: syncs,
            commits_per_sync: if syncs == 0 {
                0.0
            } else {
                commits as f64 / syncs as f64
            },
            checkpoints: i.counters.checkpoints.load(Ordering::Relaxed),
            log_used_bytes: i.wal.used(),
            mvcc_versions: i.mvcc.versions() as u64,
            recovery,
            page_size: i.pool.page_size(),
            torn: i.opts.torn,
            failed: i.failed.lock().clone(),
            commit_mode: i.opts.commit,
            pipelined_inflight: i.pipe.as_ref().map_or(0, |p| p.inflight() as u64),
            profile: i.wal.profile.stats(),
        }
    }

    /// Counters of the data and log devices (host I/O, and FTL counters on an emulated SSD).
    pub fn device_stats(&self) -> (pagoda_device::DeviceStats, pagoda_device::DeviceStats) {
        (self.inner.data.stats(), self.inner.wal.device().stats())
    }

    /// Checkpoints and closes. Other handles of this database fail with [`Error::Closed`].
    pub fn close(self) -> Result<()> {
        self.stop_flusher(true);
        self.stop_background();
        let res = if self.inner.failed.lock().is_none() {
            self.checkpoint().map(|_| ())
        } else {
            Ok(())
        };
        self.inner.closed.store(true, Ordering::Release);
        res
    }

    fn stop_background(&self) {
        *self.inner.bg_stop.lock() = true;
        self.inner.bg_cond.notify_all();
        if let Some(h) = self.inner.bg.lock().take() {
            let _ = h.join();
        }
    }

    /// Stops background work without a checkpoint and drops this handle (as a crash would,
    /// for tests): nothing more is written by the engine.
    pub fn abandon(self) {
        self.stop_flusher(false);
        self.stop_background();
        self.inner.closed.store(true, Ordering::Release);
        let mut f = self.inner.failed.lock();
        if f.is_none() {
            *f = Some("abandoned".into());
        }
    }

    /// Whether the database refuses writes, and why.
    pub fn failure(&self) -> Option<String> {
        self.inner.failed.lock().clone()
    }
}

/// Writes a fresh database's log header, meta page, catalog root and first superblock.
fn create(opts: &DbOptions, data: &DeviceRef, log: &DeviceRef) -> Result<Superblock> {
    let ps = opts.page_size as u64;
    let dw_start = HEADER_BYTES / ps;
    let meta = dw_start + u64::from(opts.dw_pages);
    let catalog = meta + 1;
    if (catalog + 1) * ps > data.caps().capacity_bytes() {
        return Err(Error::config(format!(
            "data device of {} bytes is too small for a database with {} byte pages",
            data.caps().capacity_bytes(),
            ps
        )));
    }
    let dev_log = log.caps().capacity_bytes().saturating_sub(SECTOR as u64);
    let log_capacity =
        opts.log_capacity.map_or(dev_log, |c| c.min(dev_log)) / SECTOR as u64 * SECTOR as u64;
    if log_capacity < 256 * 1024 {
        return Err(Error::config(format!(
            "log of {log_capacity} bytes is too small: give at least 256 KiB"
        )));
    }
    let db_id: u64 = rand::random();
    let lstream = WriteHints::stream(clamp_stream(1, log.caps().streams));
    let dstream = WriteHints::stream(clamp_stream(2, data.caps().streams));
    log.write(0, &encode_log_header(db_id, log_capacity), lstream)?;
    // Clear the start of the ring so that no stale group of an earlier database looks valid.
    let clear = (wal::MAX_GROUP_BYTES + 4 * SECTOR as u64).min(log_capacity) as usize;
    log.write(1, &vec![0u8; clear], lstream)?;
    log.flush()?;
    let mut buf = Vec::new();
    let pages = [
        Page {
            id: meta,
            lsn: 0,
            node: Node::Meta(Meta {
                next_page: catalog + 1,
                next_table: 1,
                free: Vec::new(),
                free_trunk: 0,
            }),
        },
        Page {
            id: catalog,
            lsn: 0,
            node: Node::Leaf(Vec::new()),
        },
    ];
    for p in &pages {
        encode_page(p, opts.page_size, &mut buf);
        data.write(p.id * ps / SECTOR as u64, &buf, dstream)?;
    }
    settings::write(data, opts.torn, dstream.stream)?;
    data.flush()?;
    let sb = Superblock {
        generation: 1,
        page_size: opts.page_size as u32,
        checkpoint_lsn: 0,
        checkpoint_cts: 0,
        log_capacity,
        dw_start,
        dw_pages: opts.dw_pages,
        meta_page: meta,
        db_id,
    };
    data.write(1, &sb.encode(), dstream)?;
    data.flush()?;
    Ok(sb)
}

/// Copies valid pages of the double-write area over torn (or older) pages in place. Returns
/// the number of torn pages repaired.
fn repair_from_doublewrite(
    pool: &Pool,
    data: &DeviceRef,
    sb: &Superblock,
    stream: u16,
) -> Result<u64> {
    let mut best: BTreeMap<u64, (u64, Vec<u8>)> = BTreeMap::new();
    for i in 0..u64::from(sb.dw_pages) {
        let buf = pool.read_raw(sb.dw_start + i)?;
        if is_zero(&buf) {
            continue;
        }
        let id = u64::from_le_bytes(buf[8..16].try_into().unwrap_or([0xff; 8]));
        if id < sb.meta_page || id >= pool.capacity_pages() {
            continue;
        }
        if let Ok(lsn) = check_page(&buf, id) {
            if best.get(&id).is_none_or(|(l, _)| *l < lsn) {
                best.insert(id, (lsn, buf));
            }
        }
    }
    let mut repaired = 0;
    let mut wrote = false;
    let per_page = (pool.page_size() / SECTOR) as u64;
    for (pid, (lsn, bytes)) in best {
        let cur = pool.read_raw(pid)?;
        match check_page(&cur, pid) {
            Ok(l) if l >= lsn => continue,
            Ok(_) => {}
            Err(_) => repaired += 1,
        }
        data.write(pid * per_page, &bytes, WriteHints::stream(stream))?;
        wrote = true;
    }
    if wrote {
        data.flush()?;
    }
    Ok(repaired)
}

/// Checks the checksum of every allocated page (except those recovery will overwrite).
fn verify_pages(
    pool: &Pool,
    data: &DeviceRef,
    sb: &Superblock,
    skip: &BTreeSet<u64>,
) -> Result<Vec<u64>> {
    let ps = pool.page_size();
    let per_page = (ps / SECTOR) as u64;
    let read = |pid: u64| -> Result<Vec<u8>> {
        let mut b = vec![0u8; ps];
        data.read(pid * per_page, &mut b)?;
        Ok(b)
    };
    let mut bad = Vec::new();
    let mut limit = sb.meta_page + 2;
    let mbuf = read(sb.meta_page)?;
    match crate::format::decode_page(&mbuf, sb.meta_page) {
        Ok(Page {
            node: Node::Meta(m),
            ..
        }) => limit = limit.max(m.next_page),
        _ if skip.contains(&sb.meta_page) => {}
        _ => bad.push(sb.meta_page),
    }
    if let Some(&m) = skip.iter().next_back() {
        limit = limit.max(m + 1);
    }
    for pid in sb.meta_page + 1..limit.min(pool.capacity_pages()) {
        if skip.contains(&pid) {
            continue;
        }
        let buf = read(pid)?;
        if !is_zero(&buf) && crate::format::decode_page(&buf, pid).is_err() {
            bad.push(pid);
        }
    }
    Ok(bad)
}

/// Redo from the checkpoint: pass 1 restores the newest logged image of every page whose
/// on-disk LSN is older; pass 2 replays the logical operations of every commit record on
/// leaves whose LSN is older than the record. Returns the highest commit timestamp seen.
fn redo(
    pool: &Pool,
    opts: &DbOptions,
    meta: u64,
    records: &[(u64, CommitRecord)],
    corrupt: &mut BTreeSet<u64>,
    rec: &mut RecoveryStats,
) -> Result<u64> {
    let none = opts.torn == TornMode::None;
    let mut last_cts = 0;
    let mut latest: BTreeMap<u64, (u64, &Node)> = BTreeMap::new();
    let mut dropped = BTreeSet::new();
    for (lsn, r) in records {
        last_cts = last_cts.max(r.cts);
        for (pid, node) in &r.images {
            latest.insert(*pid, (*lsn, node));
        }
        for op in &r.ops {
            if let RedoOp::DropTable { table } = op {
                dropped.insert(*table);
            }
        }
    }
    for (pid, (lsn, node)) in latest {
        let buf = pool.read_raw(pid)?;
        if !is_zero(&buf) {
            match check_page(&buf, pid) {
                Ok(l) if l >= lsn => continue,
                Ok(_) => {}
                Err(_) if none => {
                    corrupt.insert(pid);
                    continue;
                }
                Err(_) => rec.torn_pages_repaired += 1,
            }
        }
        let mut w = pool.install(Page {
            id: pid,
            lsn,
            node: node.clone(),
        })?;
        w.modified_at(lsn);
    }
    let catalog_root = meta + 1;
    let replay = |table_filter: &dyn Fn(u32) -> Option<u64>,
                  corrupt: &mut BTreeSet<u64>|
     -> Result<()> {
        for (lsn, r) in records {
            // Decide per operation before the record changes any leaf: a leaf whose LSN is
            // at least the record's already holds all of the record's effects.
            let mut todo = Vec::with_capacity(r.ops.len());
            for op in &r.ops {
                let (table, key, val) = match op {
                    RedoOp::Put { table, key, val } => (*table, key, Some(val.clone())),
                    RedoOp::Delete { table, key } => (*table, key, None),
                    RedoOp::DropTable { .. } => continue,
                };
                let Some(root) = table_filter(table) else {
                    continue;
                };
                let ap = Apply::new(pool, meta);
                match ap.leaf_lsn(root, key) {
                    Ok(l) if l >= *lsn => {}
                    Ok(_) => todo.push((root, key, val)),
                    Err(Error::Corruption { all_pages, .. }) if none => corrupt.extend(all_pages),
                    Err(e) => return Err(e),
                }
            }
            let mut ap = Apply::new(pool, meta);
            ap.recovery_lsn = Some(*lsn);
            for (root, key, val) in todo {
                match ap.redo_apply(root, key, val) {
                    Ok(()) => {}
                    Err(Error::Corruption { all_pages, .. }) if none => corrupt.extend(all_pages),
                    Err(e) => return Err(e),
                }
            }
            // The record's pages become writable together, with its LSN.
            let touched: Vec<u64> = ap.touched.iter().copied().collect();
            pool.stamp(&touched, *lsn)?;
        }
        Ok(())
    };
    replay(&|t| (t == CATALOG).then_some(catalog_root), corrupt)?;
    let mut roots = HashMap::new();
    let mut cursor = Bound::Unbounded;
    loop {
        let b = btree::batch(pool, catalog_root, &cursor, false)?;
        for (_, v) in &b.entries {
            if let Some(t) = decode_table(&btree::load_value(pool, v)?) {
                roots.insert(t.id, t.root);
            }
        }
        match b.fence {
            Some(f) => cursor = Bound::Included(f),
            None => break,
        }
    }
    replay(
        &|t| {
            if t == CATALOG || dropped.contains(&t) {
                None
            } else {
                roots.get(&t).copied()
            }
        },
        corrupt,
    )?;
    Ok(last_cts)
}

/// The flush thread of pipelined commit: makes the log durable up to the newest queued commit
/// (writing and syncing it; committing threads only copy their records into the log buffer),
/// makes the durable commits visible, and resolves their tickets.
fn flusher(weak: Weak<Inner>, pipe: Arc<Pipeline>) {
    loop {
        let target = match pipe.next_target() {
            Target::Stop => break,
            Target::Idle => {
                if weak.strong_count() == 0 {
                    break;
                }
                continue;
            }
            Target::Lsn(l) => l,
        };
        let Some(inner) = weak.upgrade() else {
            break;
        };
        let db = Db { inner };
        let res = db.inner.wal.wait_durable(target);
        let durable = db.inner.wal.durable();
        db.inner.mvcc.advance(durable);
        pipe.resolve_upto(durable, &db.inner.counters.commits);
        if let Err(e) = res {
            db.fail(&e);
            pipe.fail_all(&e.to_string());
        }
    }
    pipe.exit("database closed before the commit was durable");
}

fn background(weak: Weak<Inner>) {
    let mut last_ckpt = Instant::now();
    loop {
        let Some(inner) = weak.upgrade() else { return };
        {
            let mut stop = inner.bg_stop.lock();
            if *stop {
                return;
            }
            inner.bg_cond.wait_for(&mut stop, Duration::from_millis(20));
            if *stop {
                return;
            }
        }
        let db = Db { inner };
        if db.failure().is_some() || db.inner.closed.load(Ordering::Acquire) {
            continue;
        }
        let cap = db.inner.wal.capacity();
        let due = db
            .inner
            .opts
            .checkpoint_interval
            .is_some_and(|every| last_ckpt.elapsed() >= every);
        if db.inner.wal.used() > cap / 2 || due {
            let _ = db.checkpoint();
            last_ckpt = Instant::now();
        }
        if db.inner.pool.dirty_frames() * 2 > db.inner.pool.frames() {
            if let Err(e) = db.inner.pool.clean_batch(None) {
                db.fail(&e);
            }
        }
        db.inner.mvcc.gc();
    }
}

type WKey = (u32, Vec<u8>);

/// A transaction. Reads see the snapshot taken at `begin` plus the transaction's own writes;
/// writes are buffered until [`Txn::commit`]. Dropping an uncommitted transaction rolls it
/// back.
#[derive(Debug)]
pub struct Txn {
    db: Db,
    snapshot: u64,
    writes: BTreeMap<WKey, Option<Vec<u8>>>,
    read_only: bool,
    done: bool,
    aborted: Option<(String, String)>,
}

fn tuple_bounds(table: u32, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> (Bound<WKey>, Bound<WKey>) {
    let lo = match lo {
        Bound::Included(k) => Bound::Included((table, k.to_vec())),
        Bound::Excluded(k) => Bound::Excluded((table, k.to_vec())),
        Bound::Unbounded => Bound::Included((table, Vec::new())),
    };
    let hi = match hi {
        Bound::Included(k) => Bound::Included((table, k.to_vec())),
        Bound::Excluded(k) => Bound::Excluded((table, k.to_vec())),
        Bound::Unbounded => Bound::Excluded((table + 1, Vec::new())),
    };
    (lo, hi)
}

/// Whether `(lo, hi)` is a range `BTreeMap::range` accepts and that may hold keys.
pub(crate) fn range_ok<T: Ord>(lo: &Bound<T>, hi: &Bound<T>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a <= b,
        (Bound::Included(a), Bound::Excluded(b)) | (Bound::Excluded(a), Bound::Included(b)) => {
            a < b
        }
        (Bound::Excluded(a), Bound::Excluded(b)) => a < b,
        _ => true,
    }
}

impl Txn {
    fn new(db: Db, read_only: bool) -> Self {
        let snapshot = db.inner.mvcc.snapshot();
        Self {
            db,
            snapshot,
            writes: BTreeMap::new(),
            read_only,
            done: false,
            aborted: None,
        }
    }

    /// The snapshot timestamp: this transaction sees every commit with a timestamp up to it.
    pub fn snapshot(&self) -> u64 {
        self.snapshot
    }

    fn check_key(key: &[u8]) -> Result<()> {
        if key.len() > MAX_KEY_LEN {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: MAX_KEY_LEN,
            });
        }
        Ok(())
    }

    /// Reads `key` of `table`.
    pub fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let t0 = Instant::now();
        let r = self.get_inner(table, key);
        self.db.inner.wal.profile.add(Phase::Search, t0);
        r
    }

    fn get_inner(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Self::check_key(key)?;
        let t = self.db.table(table)?;
        let wk = (t.id, key.to_vec());
        if let Some(v) = self.writes.get(&wk) {
            return Ok(v.clone());
        }
        let pool = &self.db.inner.pool;
        let tree = btree::get(pool, t.root, key)
            .and_then(|v| v.map(|v| btree::load_value(pool, &v)).transpose());
        match self.db.inner.mvcc.read(&wk, self.snapshot) {
            Resolved::Value(v) => Ok(v.map(|b| b.to_vec())),
            Resolved::Tree => tree,
        }
    }

    fn write(&mut self, table: &str, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let t0 = Instant::now();
        let r = self.write_inner(table, key, value);
        self.db.inner.wal.profile.add(Phase::Update, t0);
        r
    }

    fn write_inner(&mut self, table: &str, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        Self::check_key(key)?;
        if let Some(v) = value {
            let max = MAX_VALUE_LEN.min((self.db.inner.wal.capacity() / 4) as usize);
            if v.len() > max {
                return Err(Error::ValueTooLarge { len: v.len(), max });
            }
        }
        let t = self.db.table(table)?;
        let wk = (t.id, key.to_vec());
        if self
            .db
            .inner
            .mvcc
            .newest(&wk)
            .is_some_and(|c| c > self.snapshot)
        {
            let e = (table.to_string(), String::from_utf8_lossy(key).into_owned());
            self.aborted = Some(e.clone());
            return Err(Error::Conflict {
                table: e.0,
                key: e.1,
            });
        }
        self.writes.insert(wk, value.map(<[u8]>::to_vec));
        Ok(())
    }

    /// Sets `key` to `value` in `table`.
    pub fn put(&mut self, table: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(table, key, Some(value))
    }

    /// Removes `key` from `table` (no error when absent).
    pub fn delete(&mut self, table: &str, key: &[u8]) -> Result<()> {
        self.write(table, key, None)
    }

    /// Forward scan of `table` over `range` (e.g. `..` or
    /// `(Bound::Included(&b"a"[..]), Bound::Excluded(&b"m"[..]))`).
    pub fn range<R: RangeBounds<[u8]>>(&self, table: &str, range: R) -> Result<Scan<'_>> {
        self.scan(table, range, false)
    }

    /// Reverse scan of `table` over `range`, largest key first.
    pub fn range_rev<R: RangeBounds<[u8]>>(&self, table: &str, range: R) -> Result<Scan<'_>> {
        self.scan(table, range, true)
    }

    fn scan<R: RangeBounds<[u8]>>(&self, table: &str, range: R, reverse: bool) -> Result<Scan<'_>> {
        let t = self.db.table(table)?;
        let own = |b: Bound<&[u8]>| match b {
            Bound::Included(k) => Bound::Included(k.to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let lo = own(range.start_bound());
        let hi = own(range.end_bound());
        let cursor = if reverse { hi.clone() } else { lo.clone() };
        let done = !range_ok(&lo, &hi);
        Ok(Scan {
            txn: self,
            table: t.id,
            root: t.root,
            lo,
            hi,
            reverse,
            cursor,
            buf: VecDeque::new(),
            done,
        })
    }

    /// Commits: validates (first committer wins), applies, logs, and returns once durable
    /// (in [`CommitMode::Pipelined`] by waiting for the ticket of
    /// [`Txn::commit_pipelined`]).
    pub fn commit(self) -> Result<CommitInfo> {
        match self.db.inner.opts.commit {
            CommitMode::Sync => {
                let t0 = Instant::now();
                let db = self.db.clone();
                let r = self.finish(None).and_then(|t| t.wait());
                db.inner.wal.profile.add(Phase::Commit, t0);
                r
            }
            CommitMode::Pipelined => self.commit_pipelined()?.wait(),
        }
    }

    /// Pipelined commit: validates (first committer wins), applies, appends the commit record
    /// to the log buffer and returns at once with a [`CommitTicket`], without waiting for the
    /// log write or sync (the database's flush thread does them). The transaction is committed
    /// only when the ticket resolves: until then other transactions do not see its writes,
    /// and a crash may lose it (never partly). A later transaction writing one of its keys
    /// fails with [`Error::Conflict`] (first committer wins, counting pending commits).
    ///
    /// Blocks while [`DbOptions::max_inflight_commits`] commits are in flight
    /// (back-pressure). In [`CommitMode::Sync`] there is no flush thread: it commits
    /// synchronously and returns a resolved ticket. Errors (conflicts, a failed database) are
    /// returned here; a ticket fails only if the database fails before the record is durable.
    pub fn commit_pipelined(self) -> Result<CommitTicket> {
        let t0 = Instant::now();
        let db = self.db.clone();
        let r = match db.inner.pipe.as_ref() {
            None => self.finish(None),
            Some(pipe) => match pipe.admit() {
                Ok(adm) => self.finish(Some(adm)),
                Err(e) => {
                    let mut me = self;
                    me.done = true;
                    me.db.inner.mvcc.release(me.snapshot);
                    Err(e)
                }
            },
        };
        db.inner.wal.profile.add(Phase::Commit, t0);
        r
    }

    fn finish(mut self, adm: Option<Admission>) -> Result<CommitTicket> {
        self.done = true;
        let res = self.commit_inner(adm);
        self.db.inner.mvcc.release(self.snapshot);
        if matches!(res, Err(Error::Conflict { .. })) {
            self.db
                .inner
                .counters
                .conflicts
                .fetch_add(1, Ordering::Relaxed);
        }
        res
    }

    /// Discards the transaction's writes.
    pub fn rollback(mut self) {
        self.done = true;
        self.db.inner.mvcc.release(self.snapshot);
    }

    fn commit_inner(&mut self, adm: Option<Admission>) -> Result<CommitTicket> {
        if let Some((table, key)) = self.aborted.take() {
            return Err(Error::Conflict { table, key });
        }
        if self.writes.is_empty() {
            return Ok(CommitTicket::resolved(CommitInfo { cts: 0, lsn: 0 }));
        }
        let prof = &self.db.inner.wal.profile;
        let db = self.db.clone();
        db.check_writable()?;
        let ps = db.inner.pool.page_size();
        let estimate: u64 = self
            .writes
            .iter()
            .map(|((_, k), v)| (k.len() + v.as_ref().map_or(0, Vec::len) + 64) as u64)
            .sum::<u64>()
            + (8 + self.writes.len() as u64 / 16) * ps as u64;
        // Room in the log is checked again under the commit lock (other committers may have
        // used it meanwhile): once a commit has changed pages, its record must fit.
        let t_lock = Instant::now();
        let mut cs = loop {
            db.ensure_log_space(estimate)?;
            let cs = db.lock_commit();
            let cap = db.inner.wal.capacity();
            if db.inner.wal.used() + estimate <= cap / 8 * 7 {
                break cs;
            }
            drop(cs);
            db.checkpoint()?;
        };
        let t_apply = prof.add(Phase::CommitLock, t_lock);
        let mvcc = &db.inner.mvcc;
        for wk in self.writes.keys() {
            if mvcc.newest(wk).is_some_and(|c| c > self.snapshot) {
                let name = db
                    .inner
                    .catalog
                    .read()
                    .iter()
                    .find(|(_, t)| t.id == wk.0)
                    .map(|(n, _)| n.clone())
                    .unwrap_or_default();
                return Err(Error::Conflict {
                    table: name,
                    key: String::from_utf8_lossy(&wk.1).into_owned(),
                });
            }
        }
        let mut roots = Vec::with_capacity(self.writes.len());
        {
            let r = db.inner.roots.read();
            for wk in self.writes.keys() {
                match r.get(&wk.0) {
                    Some(&root) => roots.push(root),
                    None => {
                        return Err(Error::NoSuchTable(format!("(table id {}, dropped)", wk.0)))
                    }
                }
            }
        }
        let cts = cs.next_cts;
        let pool = &db.inner.pool;
        let res = (|| {
            let mut ap = Apply::new(pool, db.inner.meta_page);
            let mut ops = Vec::with_capacity(self.writes.len());
            for ((wk, v), root) in self.writes.iter().zip(&roots) {
                let prev: Value = match mvcc.newest_value(wk) {
                    Some(v) => v,
                    None => match btree::get(pool, *root, &wk.1)? {
                        Some(val) => Some(Arc::from(btree::load_value(pool, &val)?)),
                        None => None,
                    },
                };
                mvcc.push(
                    wk.clone(),
                    Version {
                        cts,
                        val: v.as_deref().map(Arc::from),
                        prev,
                    },
                );
                match v {
                    Some(b) => {
                        let val = if b.len() > inline_max(ps) {
                            ap.write_overflow(b)?
                        } else {
                            Val::Inline(b.clone())
                        };
                        if let Some(old) = ap.put(*root, &wk.1, val.clone())? {
                            ap.free_value(&old)?;
                        }
                        ops.push(RedoOp::Put {
                            table: wk.0,
                            key: wk.1.clone(),
                            val,
                        });
                    }
                    None => {
                        if let Some(old) = ap.delete(*root, &wk.1)? {
                            ap.free_value(&old)?;
                        }
                        ops.push(RedoOp::Delete {
                            table: wk.0,
                            key: wk.1.clone(),
                        });
                    }
                }
            }
            db.log_and_stamp(&ap, ops, cts)
        })();
        let end = match res {
            Ok(end) => end,
            Err(e) => {
                db.fail(&e);
                return Err(e);
            }
        };
        cs.next_cts += 1;
        mvcc.committed(cts, end);
        let sabotage = db.inner.opts.sabotage;
        if probe::is(sabotage, Sabotage::VisibleBeforeDurable) {
            mvcc.advance(u64::MAX);
        }
        let info = CommitInfo { cts, lsn: end };
        if let Some(adm) = adm {
            // Queued in commit order, under the commit lock.
            let mut ticket = adm.enqueue(info);
            if probe::is(sabotage, Sabotage::AckBeforeDurable) {
                ticket = CommitTicket::resolved(info);
            }
            drop(cs);
            prof.add(Phase::CommitApply, t_apply);
            if cts.is_multiple_of(64) {
                mvcc.gc();
            }
            return Ok(ticket);
        }
        drop(cs);
        let t_wait = prof.add(Phase::CommitApply, t_apply);
        if !probe::is(sabotage, Sabotage::AckBeforeDurable) {
            db.wait(end)?;
        }
        prof.add(Phase::WaitDurable, t_wait);
        let n = db.inner.counters.commits.fetch_add(1, Ordering::Relaxed);
        if n.is_multiple_of(64) {
            mvcc.gc();
        }
        Ok(CommitTicket::resolved(info))
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        if !self.done {
            self.db.inner.mvcc.release(self.snapshot);
        }
    }
}

enum Src {
    Tree(Result<Vec<u8>>),
    Value(Value),
    Own(Option<Vec<u8>>),
}

fn max_lower(a: Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    match (&a, b) {
        (_, Bound::Unbounded) => a,
        (Bound::Unbounded, _) => b.clone(),
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if x > y || (x == y && matches!(a, Bound::Excluded(_))) {
                a
            } else {
                b.clone()
            }
        }
    }
}

fn min_upper(a: Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    match (&a, b) {
        (_, Bound::Unbounded) => a,
        (Bound::Unbounded, _) => b.clone(),
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if x < y || (x == y && matches!(a, Bound::Excluded(_))) {
                a
            } else {
                b.clone()
            }
        }
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn in_range(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let above = match lo {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(h) => k <= h.as_slice(),
        Bound::Excluded(h) => k < h.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// An iterator over a range of a table inside a transaction's snapshot (with its own writes).
/// Reads one leaf at a time.
#[derive(Debug)]
pub struct Scan<'t> {
    txn: &'t Txn,
    table: u32,
    root: u64,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    reverse: bool,
    cursor: Bound<Vec<u8>>,
    buf: VecDeque<(Vec<u8>, Vec<u8>)>,
    done: bool,
}

impl Scan<'_> {
    fn fill(&mut self) -> Result<()> {
        let pool = &self.txn.db.inner.pool;
        let b = btree::batch(pool, self.root, &self.cursor, self.reverse)?;
        let (clo, chi) = if self.reverse {
            (
                b.fence.clone().map_or(Bound::Unbounded, Bound::Included),
                self.cursor.clone(),
            )
        } else {
            (
                self.cursor.clone(),
                b.fence.clone().map_or(Bound::Unbounded, Bound::Excluded),
            )
        };
        let lo = max_lower(clo, &self.lo);
        let hi = min_upper(chi, &self.hi);
        if range_ok(&lo, &hi) {
            let mut merged: BTreeMap<Vec<u8>, Src> = BTreeMap::new();
            // Values are loaded before the version chains are read: an overwrite that frees
            // an overflow chain we are reading has pushed its version by then, and overrides.
            for (k, v) in b.entries {
                if in_range(&k, &lo, &hi) {
                    let loaded = btree::load_value(pool, &v);
                    merged.insert(k, Src::Tree(loaded));
                }
            }
            for (k, v) in self.txn.db.inner.mvcc.read_range(
                self.table,
                as_ref(&lo),
                as_ref(&hi),
                self.txn.snapshot,
            ) {
                merged.insert(k, Src::Value(v));
            }
            let (tlo, thi) = tuple_bounds(self.table, as_ref(&lo), as_ref(&hi));
            if range_ok(&tlo, &thi) {
                for ((_, k), v) in self.txn.writes.range((tlo, thi)) {
                    merged.insert(k.clone(), Src::Own(v.clone()));
                }
            }
            let mut out = Vec::with_capacity(merged.len());
            for (k, src) in merged {
                let v = match src {
                    Src::Tree(loaded) => Some(loaded?),
                    Src::Value(v) => v.map(|b| b.to_vec()),
                    Src::Own(v) => v,
                };
                if let Some(v) = v {
                    out.push((k, v));
                }
            }
            if self.reverse {
                out.reverse();
            }
            self.buf.extend(out);
        }
        match b.fence {
            None => self.done = true,
            Some(f) => {
                if self.reverse {
                    let below = match &self.lo {
                        Bound::Included(l) | Bound::Excluded(l) => f <= *l,
                        Bound::Unbounded => false,
                    };
                    if below {
                        self.done = true;
                    } else {
                        self.cursor = Bound::Excluded(f);
                    }
                } else {
                    let beyond = match &self.hi {
                        Bound::Included(h) => f > *h,
                        Bound::Excluded(h) => f >= *h,
                        Bound::Unbounded => false,
                    };
                    if beyond {
                        self.done = true;
                    } else {
                        self.cursor = Bound::Included(f);
                    }
                }
            }
        }
        Ok(())
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(x) = self.buf.pop_front() {
                return Some(Ok(x));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.fill() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}
