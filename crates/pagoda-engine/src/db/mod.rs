//! The database handle: open (with recovery), begin, close.

mod background;
mod bootstrap;
mod bulk;
mod catalog;
mod checkpoint;
mod commit;
mod devices;
mod handles;
#[cfg(test)]
mod held_tests;
mod recovery;
mod scan;
mod stats;
mod txn;

pub use crate::buffer::flash_cache::FlashCacheStats;
pub use devices::preallocate_log_file;
pub(crate) use devices::{devices, Devices};
pub use handles::{ReadOnlyTable, ReadTxn, Table, WriteTxn};
pub use scan::Scan;
pub use stats::{BufferStats, CheckpointInfo, DbStats, RecoveryStats};
pub(crate) use txn::Txn;

use crate::btree;
use crate::buffer::Pool;
use crate::error::{Error, Failure, Result};
use crate::format::Superblock;
use crate::mvcc::Mvcc;
use crate::options::{CommitMode, DbOptions};
use crate::pipeline::Pipeline;
use crate::probe::{self, Event, RecoveryStep};
use crate::profile::{Phase, Stamp};
use crate::settings;
use crate::stream::Stream;
use crate::striped::ReadMostly;
use crate::wal::Wal;
use bootstrap::{create, read_sb};
use catalog::TableInfo;
use commit::CommitState;
use pagoda_device::{DeviceRef, WriteHints};
use parking_lot::{Condvar, Mutex, RwLock};
use recovery::{recover, Recovered};
use stats::Counters;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Aligned to a cache-line pair so that the `Arc`'s counts, which every transaction changes
/// (a `Txn` holds a `Db`), share no line with the fields every page access reads.
#[derive(Debug)]
#[repr(align(128))]
struct Inner {
    data: DeviceRef,
    pool: Pool,
    wal: Arc<Wal>,
    mvcc: Mvcc,
    commit: Mutex<CommitState>,
    catalog: ReadMostly<BTreeMap<String, TableInfo>>,
    /// Tables whose creation is logged but not yet durable (and so not yet in `catalog`):
    /// a second create of the same name must fail, not race it.
    creating: Mutex<BTreeSet<String>>,
    roots: ReadMostly<BTreeMap<u32, u64>>,
    sb: Mutex<Superblock>,
    meta_page: u64,
    /// The first cause of failure; sticky.
    failed: Mutex<Option<Failure>>,
    closed: AtomicBool,
    counters: Counters,
    recovery: RecoveryStats,
    ckpt_lock: Mutex<()>,
    /// Commits waiting for log space: a paced checkpoint then writes at full speed.
    ckpt_hurry: AtomicUsize,
    bg_stop: Mutex<bool>,
    bg_cond: Condvar,
    bg: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The thread making a new log file ready ahead of the log (see the log's `prepare`).
    log_prep: Mutex<Option<std::thread::JoinHandle<()>>>,
    corrupt: RwLock<BTreeSet<u64>>,
    rec_times: Mutex<(f64, u64)>,
    opts: DbOptions,
    data_stream: u16,
    pipe: Option<Arc<Pipeline>>,
    /// The lazy-commit flush thread's signals ([`CommitMode::Lazy`] only).
    lazy: Option<Arc<background::LazyFlush>>,
    /// The pipelined- or lazy-commit flush thread.
    flusher: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// A database: named tables of ordered byte-string keys with snapshot-isolated transactions.
///
/// `Db` is `Sync`: many threads may use one `Db` at once (share `&Db`, or an `Arc<Db>` for
/// threads that outlive the scope). It is deliberately not `Clone`, so [`Db::close`] holds the
/// only handle and no other can be left pointing at a closed database. Readers never
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
/// let a = db.begin_write()?;
/// let b = db.begin_write()?;
/// a.open_table("t")?.put(b"k", b"from a")?;
/// b.open_table("t")?.put(b"k", b"from b")?;
/// a.commit()?;
/// assert!(matches!(b.commit(), Err(Error::Conflict { .. })));
///
/// let r = db.begin_read()?;
/// let all: Vec<_> = r.open_table("t")?.range(..).collect::<Result<_, _>>()?;
/// assert_eq!(all, vec![(b"k".to_vec(), b"from a".to_vec())]);
/// # Ok(()) }
/// ```
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

impl Db {
    /// Opens (or creates) a database, running crash recovery when needed.
    ///
    /// Errors: [`Error::Config`] for bad options (including `atomic` on a device whose atomic
    /// unit is not the page size), [`Error::Corruption`] / [`Error::LogCorruption`] naming the
    /// damaged page or log position, [`Error::Device`] for I/O errors.
    pub fn open(opts: DbOptions) -> Result<Db> {
        opts.validate()?;
        let Devices {
            data,
            log,
            log_allocated,
        } = devices(&opts, false)?;
        let started = Instant::now();
        let dcaps = data.caps();
        let sb = match read_sb(&data)? {
            Some(sb) => sb,
            None => create(&opts, &data, &log)?,
        };
        let page_size = sb.page_size as usize;
        settings::check(&data, opts.torn, Stream::Data.on(&dcaps))?;
        devices::check_atomic_unit(opts.torn, &data, page_size)?;
        let obs = opts.observer.clone();
        let Recovered {
            wal,
            pool,
            sb,
            stats: rec,
            corrupt,
        } = recover(&opts, &data, &log, sb, log_allocated)?;
        let meta_page = sb.meta_page;
        let next_cts = rec.last_cts + 1;
        let inner = Arc::new(Inner {
            data,
            pool,
            wal,
            mvcc: Mvcc::new(next_cts - 1),
            commit: Mutex::new(CommitState { next_cts }),
            catalog: ReadMostly::new(BTreeMap::new()),
            creating: Mutex::new(BTreeSet::new()),
            roots: ReadMostly::new(BTreeMap::new()),
            sb: Mutex::new(sb),
            meta_page,
            failed: Mutex::new(None),
            closed: AtomicBool::new(false),
            counters: Counters::default(),
            recovery: rec,
            ckpt_lock: Mutex::new(()),
            ckpt_hurry: AtomicUsize::new(0),
            bg_stop: Mutex::new(false),
            bg_cond: Condvar::new(),
            bg: Mutex::new(None),
            log_prep: Mutex::new(None),
            corrupt: RwLock::new(corrupt),
            rec_times: Mutex::new((0.0, 0)),
            data_stream: Stream::Data.on(&dcaps),
            pipe: (opts.commit == CommitMode::Pipelined)
                .then(|| Arc::new(Pipeline::new(opts.max_inflight_commits))),
            lazy: background::LazyFlush::for_mode(opts.commit),
            flusher: Mutex::new(None),
            opts,
        });
        let db = Db { inner };
        db.load_catalog()?;
        if db.inner.opts.paranoid {
            db.check()?;
        }
        probe::emit(&obs, Event::Recovery(RecoveryStep::Checkpoint));
        db.checkpoint()?;
        // Pages read so far belong to recovery.
        let reads = db.inner.pool.counters.reads.load(Ordering::Relaxed);
        *db.inner.rec_times.lock() = (started.elapsed().as_secs_f64() * 1000.0, reads);
        if db.inner.opts.background {
            db.start_background();
            db.start_log_prep();
        }
        db.start_flusher()?;
        db.start_lazy_flusher()?;
        probe::emit(&obs, Event::Opened);
        Ok(db)
    }

    /// Writes the flash cache's dirty pages back and records in the superblock that the
    /// database no longer depends on it.
    fn drain_flash(&self) -> Result<()> {
        let Some(fc) = self.inner.pool.flash() else {
            return Ok(());
        };
        fc.drain().map_err(|e| self.fail(e))?;
        self.write_superblock(|sb| sb.flash_dependent = false)
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

    /// Records `e` as the database's failure if it must fail the database (the first cause
    /// sticks) and returns the error to give the caller: [`Error::Failed`] naming the first
    /// cause, or `e` itself when it belongs to one operation only.
    fn fail(&self, e: Error) -> Error {
        if !e.fails_database() {
            return e;
        }
        self.fail_now(e)
    }

    /// Fails the database with `e` whatever its kind (e.g. a commit that changed pages in
    /// memory and cannot finish).
    fn fail_now(&self, e: Error) -> Error {
        if let Some(o) = &self.inner.opts.observer {
            o(Event::Failed(e.to_string()));
        }
        let mut f = self.inner.failed.lock();
        let first = f.get_or_insert_with(|| match e {
            Error::Failed(why) => why,
            e => Failure::new(e),
        });
        Error::Failed(first.clone())
    }

    /// Starts a read-write transaction. Errors: [`Error::Closed`].
    pub fn begin_write(&self) -> Result<WriteTxn<'_>> {
        Ok(WriteTxn { txn: self.begin()? })
    }

    /// Starts a read-only transaction (a snapshot). Errors: [`Error::Closed`].
    pub fn begin_read(&self) -> Result<ReadTxn<'_>> {
        Ok(ReadTxn { txn: self.begin()? })
    }

    fn begin(&self) -> Result<Txn<'_>> {
        let t0 = Stamp::now();
        self.check_open()?;
        let t = Txn::new(self);
        self.inner.wal.profile.add(Phase::Begin, t0);
        Ok(t)
    }

    /// Zeroes the phase profile of [`DbStats::profile`] (e.g. before a measured run).
    pub fn reset_profile(&self) {
        self.inner.wal.profile.reset();
    }

    /// The commit mode.
    pub fn commit_mode(&self) -> CommitMode {
        self.inner.opts.commit
    }

    /// The durable end of the log: every commit whose [`crate::CommitInfo::lsn`] is at or below it
    /// is durable.
    pub fn durable_lsn(&self) -> u64 {
        self.inner.wal.durable()
    }

    /// Levels of `table`'s B+tree (1 = the root is a leaf).
    pub fn tree_depth(&self, table: &str) -> Result<usize> {
        let t = self.table(table)?;
        btree::depth(&self.inner.pool, t.root)
    }

    /// Checkpoints and closes. Takes the database by value: no transaction can still borrow
    /// it, and pending pipelined tickets resolve before the close returns. Dropping a `Db`
    /// without `close` skips the checkpoint: the next open recovers from the log as after a
    /// crash (every acknowledged commit is kept).
    /// With a flash cache, its dirty pages are written back to the data device first, so the
    /// database no longer depends on it (the cache stays warm for the next open).
    pub fn close(self) -> Result<()> {
        self.stop_flusher(true);
        self.stop_background();
        let res = if self.inner.failed.lock().is_none() {
            self.checkpoint()
                .map(|_| ())
                .and_then(|()| self.drain_flash())
        } else {
            Ok(())
        };
        self.inner.closed.store(true, Ordering::Release);
        res
    }

    /// Stops background work without a checkpoint and drops this handle (as a crash would,
    /// for tests): nothing more is written by the engine.
    pub fn abandon(self) {
        self.stop_flusher(false);
        self.stop_background();
        self.inner.closed.store(true, Ordering::Release);
        self.fail(Error::Abandoned);
    }

    /// The first cause, once the database has failed and refuses work.
    pub fn failure(&self) -> Option<Failure> {
        self.inner.failed.lock().clone()
    }
}

/// Opens the flash cache the options name (refusing one that is also the data or log
/// device), or checks that the database does not need one.
fn open_flash(
    opts: &DbOptions,
    data: &DeviceRef,
    log: &DeviceRef,
    sb: &Superblock,
) -> Result<Option<crate::buffer::flash_cache::FlashCache>> {
    use crate::buffer::flash_cache::{Binding, FlashCache};
    let Some(fo) = &opts.flash_cache else {
        if sb.flash_dependent {
            return Err(Error::config(
                "this database's newest pages are in its flash cache: open it with the flash \
                 cache it last ran with (--flash-cache DEVICE --flash-cache-size SIZE)",
            ));
        }
        return Ok(None);
    };
    for (what, d) in [("data", data), ("log", log)] {
        if crate::flash_options::same_device(d, &fo.device) {
            return Err(Error::config(format!(
                "the flash cache device {} is also the {what} device: give it a device of its own",
                fo.device.describe()
            )));
        }
    }
    probe::emit(&opts.observer, Event::Recovery(RecoveryStep::FlashRebuild));
    let binding = Binding {
        cache_id: sb.flash_cache_id,
        seq: sb.flash_seq,
        dependent: sb.flash_dependent,
    };
    FlashCache::open(
        fo,
        data,
        sb.page_size as usize,
        sb.db_id,
        binding,
        opts.torn,
        opts.observer.clone(),
        opts.sabotage,
    )
    .map(Some)
}

/// Opening without a flash cache: the pages written now go to the data device only, so the
/// cache the superblock names would hold older copies of them. Unbind it before anything is
/// written, so that it can never be taken as warm later.
fn forget_flash_cache(opts: &DbOptions, data: &DeviceRef, sb: Superblock) -> Result<Superblock> {
    if opts.flash_cache.is_some() || sb.flash_cache_id == 0 || sb.flash_dependent {
        return Ok(sb);
    }
    let next = Superblock {
        generation: sb.generation + 1,
        flash_cache_id: 0,
        flash_seq: 0,
        ..sb
    };
    data.write(
        next.generation % 2,
        &next.encode(),
        WriteHints::stream(Stream::Data.on(&data.caps())),
    )?;
    data.flush()?;
    Ok(next)
}
