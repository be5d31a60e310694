//! Options of [`crate::Db::open`].

use crate::error::{Error, Result};
use crate::probe::{Observer, Sabotage};
use pagoda_device::DeviceRef;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use crate::flash_options::same_device;
pub use crate::flash_options::{FlashCacheOptions, FlashPages, FlashPolicy};

/// Torn-write protection of data pages: the double-write area, 16 KiB (page-sized) atomic
/// writes, or none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TornMode {
    /// Each batch of pages goes to the double-write area first, is synced, then written in
    /// place; recovery repairs torn pages from the area. A page whose image is in the log
    /// recovery would read skips the copy (redo repairs it from that image).
    #[default]
    Doublewrite,
    /// Every flushed page is copied to the double-write area first, as InnoDB does; the
    /// papers' baseline. Same on-disk layout and recovery as `Doublewrite`: a database opens
    /// in either of the two.
    DoublewriteFull,
    /// One atomic device write per page; refused at open unless the device's atomic unit
    /// equals the page size.
    Atomic,
    /// No protection (unsafe): torn pages are detected by checksum and reported as corruption.
    None,
}

impl FromStr for TornMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "doublewrite" => Ok(Self::Doublewrite),
            "doublewrite-full" => Ok(Self::DoublewriteFull),
            "atomic" => Ok(Self::Atomic),
            "none" => Ok(Self::None),
            _ => Err(Error::config(format!(
                "torn mode '{s}': use doublewrite, doublewrite-full, atomic or none"
            ))),
        }
    }
}

impl fmt::Display for TornMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Doublewrite => "doublewrite",
            Self::DoublewriteFull => "doublewrite-full",
            Self::Atomic => "atomic",
            Self::None => "none",
        })
    }
}

impl TornMode {
    /// Every mode.
    pub const ALL: [TornMode; 4] = [
        Self::Doublewrite,
        Self::DoublewriteFull,
        Self::Atomic,
        Self::None,
    ];

    /// Whether pages go through the double-write area (and recovery repairs from it).
    pub fn uses_doublewrite_area(self) -> bool {
        matches!(self, Self::Doublewrite | Self::DoublewriteFull)
    }

    /// Whether a page whose image is in the log recovery would read is written in place
    /// without a double-write copy. Only `Doublewrite`: `DoublewriteFull` copies every page.
    pub fn skips_imaged_pages(self) -> bool {
        self == Self::Doublewrite
    }

    /// The mode as the data device records it: the two double-write modes write the same
    /// layout and recover alike, so they share one.
    pub fn on_disk(self) -> TornMode {
        match self {
            Self::DoublewriteFull => Self::Doublewrite,
            t => t,
        }
    }
}

// Here rather than in probe.rs, so that probe does not depend on options (no import cycle).
#[cfg(feature = "fault-injection")]
impl Sabotage {
    /// The torn modes the sabotage needs, if it only has an effect in some.
    pub fn needs_torn(self) -> Option<&'static [TornMode]> {
        match self {
            Self::SkipDoublewrite => Some(&[TornMode::Doublewrite, TornMode::DoublewriteFull]),
            // Full mode copies every page whatever the images: nothing to leave out.
            Self::DoublewriteOldImages => Some(&[TornMode::Doublewrite]),
            Self::NonAtomicPages => Some(&[TornMode::Atomic]),
            _ => None,
        }
    }
}

/// When a commit is acknowledged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CommitMode {
    /// [`crate::WriteTxn::commit`] returns after the commit record is durable (group commit: one
    /// sync serves every commit that joined the same log slot). The committing threads write
    /// and sync the log themselves.
    #[default]
    Sync,
    /// Pipelined (asynchronous) commit: [`crate::WriteTxn::commit_pipelined`] returns at
    /// once with a [`crate::CommitTicket`]; a dedicated flush thread per database writes and
    /// syncs the log, and resolves the ticket once the commit is durable. Until then the
    /// transaction is not committed: its effects are invisible to other transactions. Nothing
    /// acknowledged is ever lost. In-flight commits are bounded by
    /// [`DbOptions::max_inflight_commits`] (the caller blocks when the bound is reached).
    /// [`crate::WriteTxn::commit`] in this mode waits for its ticket.
    Pipelined,
    /// Lazy (no-sync) commit, like RocksDB's `sync=false` or SQLite's `synchronous=NORMAL`:
    /// [`crate::WriteTxn::commit`] returns as soon as the record is in the log buffer, and the
    /// commit is visible at once. A flush thread writes and syncs the log at least every
    /// [`DbOptions::lazy_flush_interval`], so a crash loses at most the commits of that last
    /// interval: only a suffix of the commit order, never one commit while a later one stays.
    Lazy,
}

impl FromStr for CommitMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sync" => Ok(Self::Sync),
            "pipelined" => Ok(Self::Pipelined),
            "lazy" => Ok(Self::Lazy),
            _ => Err(Error::config(format!(
                "commit mode '{s}': use sync, pipelined or lazy"
            ))),
        }
    }
}

impl fmt::Display for CommitMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sync => "sync",
            Self::Pipelined => "pipelined",
            Self::Lazy => "lazy",
        })
    }
}

/// The largest log file a new database gets by default ([`DbOptions::new_log_file_bytes`]).
pub const DEFAULT_LOG_CAP: u64 = 1 << 30;

/// Options of [`crate::Db::open`]. Build with [`DbOptions::in_dir`] (real files) or
/// [`DbOptions::with_devices`] (any block devices), then chain setters. The fields are private
/// so that options can grow without breaking embedders, and so that every value passes a
/// setter (and [`crate::Db::open`]'s check).
#[derive(Clone)]
#[non_exhaustive]
pub struct DbOptions {
    /// Directory for `data.pagoda` and `log.pagoda` when devices are not given.
    pub(crate) dir: Option<PathBuf>,
    /// Data device (pages, superblocks, double-write area).
    pub(crate) data: Option<DeviceRef>,
    /// Log device.
    pub(crate) log: Option<DeviceRef>,
    /// Page size in bytes: a power of two from 4 KiB to 64 KiB. Default 16 KiB. An existing
    /// database keeps the page size it was created with.
    pub(crate) page_size: usize,
    /// Buffer pool size in bytes (at least 16 pages). Default 64 MiB.
    pub(crate) buffer_bytes: usize,
    /// Extra memory a commit may fill with the pages it changes when the buffer pool has no
    /// clean page left (those pages cannot be written before the commit's record is logged).
    /// The pool shrinks back as they are written. A commit that changes more pages than the
    /// pool and this room hold fails alone with [`crate::Error::BufferFull`]. `None` (the
    /// default): the larger of 64 MiB and a quarter of the buffer.
    pub(crate) commit_spill_bytes: Option<usize>,
    /// Torn-write protection. Default doublewrite.
    pub(crate) torn: TornMode,
    /// Commit mode. Default sync.
    pub(crate) commit: CommitMode,
    /// Pipelined commits in flight (not yet durable) at most; a pipelined commit beyond it
    /// blocks until one resolves (back-pressure). Default 1024.
    pub(crate) max_inflight_commits: usize,
    /// With [`CommitMode::Lazy`]: the longest a commit waits in the log buffer before the flush
    /// thread makes it durable (the window of commits a crash may lose). Default 10 ms.
    pub(crate) lazy_flush_interval: Duration,
    /// With [`CommitMode::Sync`]: a thread that leads a log round first waits, briefly, for
    /// the committers the last round acknowledged (so one sync carries every thread instead
    /// of half of them). Default on.
    pub(crate) commit_gather: bool,
    /// Log ring size in bytes (default: the whole log device less its 4 KiB header).
    pub(crate) log_capacity: Option<u64>,
    /// Pages in the double-write area (also the cleaner batch size). Default 128: each batch
    /// costs two flushes, and 32-page batches made a checkpoint of a 1 GB dirty set 4x as many
    /// flushes, each one queued ahead of the commits' log syncs.
    pub(crate) dw_pages: u32,
    /// Size of a new data file in bytes (sparse). Default 64 GiB.
    pub(crate) data_file_bytes: u64,
    /// Size of a new log file in bytes (written out with zeros at creation so that log writes
    /// never allocate). `None` (the default): see [`DbOptions::new_log_file_bytes`].
    pub(crate) log_file_bytes: Option<u64>,
    /// The log device allocates on first write (a sparse file given as a device): only this
    /// many ring bytes are known written, the engine makes the rest ready ahead of its
    /// writer. `None`: the whole ring is ready (or, for [`DbOptions::in_dir`], read from the
    /// log file's blocks).
    pub(crate) log_ready_bytes: Option<u64>,
    /// Periodic checkpoint interval (default 60 s; a checkpoint is also taken when half the
    /// log is in use, and on demand with `Db::checkpoint`). `None`: by log use only.
    pub(crate) checkpoint_interval: Option<Duration>,
    /// The share (0..=1) of the log a background checkpoint spreads its page writes over:
    /// of the gap between the log in use when it begins and the point where commits would
    /// wait for space (and the same share of the checkpoint interval). 0 writes at full
    /// speed. Default 0.5.
    pub(crate) checkpoint_pacing: f64,
    /// Verify every allocated page's checksum at open, so that damage is reported at once by
    /// page id. Default off: it reads the whole database, so open time would grow with it
    /// (damage is still found by checksum when a page is read).
    pub(crate) verify_on_open: bool,
    /// After recovery, walk every tree and the free list ([`crate::Db::check`]) and refuse
    /// to open on a structural fault. Default off (it reads the whole database).
    pub(crate) paranoid: bool,
    /// Open even when recovery finds corrupt pages (they are listed in the stats and every
    /// access to them fails with [`Error::Corruption`]).
    pub(crate) allow_corrupt: bool,
    /// Run the background thread (checkpoints by log use, page cleaning). Default on.
    pub(crate) background: bool,
    /// Receives engine events (recovery steps, checkpoints); for crash tests and progress.
    pub(crate) observer: Option<Observer>,
    /// One safety step removed on purpose (only for `pagoda crashtest --sabotage`).
    pub(crate) sabotage: Option<Sabotage>,
    /// A flash cache between the buffer pool and the data device (FaCE), if any.
    pub(crate) flash_cache: Option<FlashCacheOptions>,
}

impl fmt::Debug for DbOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbOptions")
            .field("dir", &self.dir)
            .field("data", &self.data.as_ref().map(|d| d.describe()))
            .field("log", &self.log.as_ref().map(|d| d.describe()))
            .field("page_size", &self.page_size)
            .field("buffer_bytes", &self.buffer_bytes)
            .field("torn", &self.torn)
            .field("commit", &self.commit)
            .field("log_capacity", &self.log_capacity)
            .field("dw_pages", &self.dw_pages)
            .field("sabotage", &self.sabotage)
            .field("flash_cache", &self.flash_cache)
            .finish_non_exhaustive()
    }
}

impl Default for DbOptions {
    fn default() -> Self {
        Self {
            dir: None,
            data: None,
            log: None,
            page_size: 16 * 1024,
            buffer_bytes: 64 << 20,
            commit_spill_bytes: None,
            torn: TornMode::Doublewrite,
            commit: CommitMode::Sync,
            max_inflight_commits: 1024,
            lazy_flush_interval: Duration::from_millis(10),
            commit_gather: true,
            log_capacity: None,
            dw_pages: 128,
            data_file_bytes: 64 << 30,
            log_file_bytes: None,
            log_ready_bytes: None,
            checkpoint_interval: Some(Duration::from_secs(60)),
            checkpoint_pacing: 0.5,
            verify_on_open: false,
            paranoid: false,
            allow_corrupt: false,
            background: true,
            observer: None,
            sabotage: None,
            flash_cache: None,
        }
    }
}

impl DbOptions {
    /// Real files `data.pagoda` and `log.pagoda` in `dir` (created if missing).
    pub fn in_dir(dir: impl AsRef<Path>) -> Self {
        Self {
            dir: Some(dir.as_ref().to_path_buf()),
            ..Self::default()
        }
    }

    /// Any block devices for data and log (e.g. emulated SSDs); they must be distinct.
    pub fn with_devices(data: DeviceRef, log: DeviceRef) -> Self {
        Self {
            data: Some(data),
            log: Some(log),
            ..Self::default()
        }
    }

    /// Sets the page size.
    pub fn page_size(mut self, bytes: usize) -> Self {
        self.page_size = bytes;
        self
    }

    /// Sets the buffer pool size.
    pub fn buffer_bytes(mut self, bytes: usize) -> Self {
        self.buffer_bytes = bytes;
        self
    }

    /// Sets the commit spill room (see [`DbOptions::commit_spill_bytes`]).
    pub fn commit_spill_bytes(mut self, bytes: usize) -> Self {
        self.commit_spill_bytes = Some(bytes);
        self
    }

    /// The commit spill room in bytes.
    pub(crate) fn spill_bytes(&self) -> usize {
        self.commit_spill_bytes
            .unwrap_or((64 << 20).max(self.buffer_bytes / 4))
    }

    /// Sets the torn-write protection.
    pub fn torn(mut self, torn: TornMode) -> Self {
        self.torn = torn;
        self
    }

    /// Sets the commit mode.
    pub fn commit(mut self, commit: CommitMode) -> Self {
        self.commit = commit;
        self
    }

    /// Sets the bound on in-flight pipelined commits.
    pub fn max_inflight_commits(mut self, n: usize) -> Self {
        self.max_inflight_commits = n;
        self
    }

    /// Whether a synchronous committer leading a log round first gathers the committers the
    /// last round acknowledged (at most two rounds' time, only while the log is busy and they
    /// come back quickly; on by default). Off: every round starts at once, and threads whose
    /// work is shorter than a sync alternate in two cohorts, each sync carrying about half.
    pub fn commit_gather(mut self, on: bool) -> Self {
        self.commit_gather = on;
        self
    }

    /// Sets the flush interval of lazy commits.
    pub fn lazy_flush_interval(mut self, every: Duration) -> Self {
        self.lazy_flush_interval = every;
        self
    }

    /// The size a new log file gets: `log_file_bytes`, else `log_capacity` (the ring asked
    /// for), else the buffer pool's size from 128 MiB up to [`DEFAULT_LOG_CAP`] (1 GiB).
    ///
    /// Why a cap: the file is written out with zeros when it is created (so that log writes
    /// never allocate blocks), about 0.7 s per GiB here, and it takes that much disk whatever
    /// the data: a 4 GiB pool got a 4 GiB log for 1 GB of data, and its first open took
    /// seconds. Why not smaller: a checkpoint is due when half the log is used and writes
    /// every page dirtied since the last one, so a log small beside a large working set
    /// costs page writes per update (1M records of 1 KB, 2 GiB pool, no-sync updates: a
    /// 128 MiB log gave 0.5 page writes per update and 33k updates/s, 1 GiB 128k-138k, a log
    /// as large as the pool 143k-162k). 1 GiB (PostgreSQL's default `max_wal_size`) keeps
    /// most of that gain at a quarter of the 4 GiB log's creation time; a larger pool that
    /// updates a working set beyond it gains from a log sized to it (`log_file_bytes`, or
    /// `pagoda bench --log-size`).
    pub fn new_log_file_bytes(&self) -> u64 {
        self.log_file_bytes
            .or(self.log_capacity)
            .unwrap_or_else(|| {
                (self.buffer_bytes as u64).clamp(128 << 20, DEFAULT_LOG_CAP) / 4096 * 4096
            })
    }

    /// The devices these options name: data and log (when given as devices), then the flash
    /// cache's, if any (e.g. to reset or pause their statistics around a run).
    pub fn devices(&self) -> Vec<DeviceRef> {
        let mut v: Vec<DeviceRef> = [&self.data, &self.log]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        v.extend(self.flash_cache.as_ref().map(|f| f.device.clone()));
        v
    }

    /// Sets the size of a new log file (see [`DbOptions::new_log_file_bytes`]).
    pub fn log_file_bytes(mut self, bytes: u64) -> Self {
        self.log_file_bytes = Some(bytes);
        self
    }

    /// Sets the pages in the double-write area, also the cleaner's batch (4 to 1024).
    pub fn dw_pages(mut self, pages: u32) -> Self {
        self.dw_pages = pages;
        self
    }

    /// Sets the size of a new (sparse) data file.
    pub fn data_file_bytes(mut self, bytes: u64) -> Self {
        self.data_file_bytes = bytes;
        self
    }

    /// Sets the log ring size.
    pub fn log_capacity(mut self, bytes: u64) -> Self {
        self.log_capacity = Some(bytes);
        self
    }

    /// Says the log device allocates space on its first write to it (a sparse file passed as
    /// a device): only its first `ready_bytes` ring bytes are known written. The engine then
    /// writes zeros ahead of its log writer (an fdatasync after an allocating write also
    /// commits file-system metadata, several times slower) instead of the caller writing out
    /// the whole file first. A log that recovery finds longer counts as ready up to its end.
    pub fn log_ready_bytes(mut self, ready_bytes: u64) -> Self {
        self.log_ready_bytes = Some(ready_bytes);
        self
    }

    /// Sets the periodic checkpoint interval.
    pub fn checkpoint_interval(mut self, every: Duration) -> Self {
        self.checkpoint_interval = Some(every);
        self
    }

    /// Spreads a background checkpoint's page writes over this share (0..=1) of the log
    /// left before commits would wait for space, and of the checkpoint interval; a commit
    /// that waits for space turns it to full speed. 0 writes at full speed (the ablation).
    pub fn checkpoint_pacing(mut self, share: f64) -> Self {
        self.checkpoint_pacing = share;
        self
    }

    /// Verifies all pages at open.
    pub fn verify_on_open(mut self, on: bool) -> Self {
        self.verify_on_open = on;
        self
    }

    /// Checks every tree after recovery (see [`DbOptions::paranoid`](Self::paranoid)).
    pub fn paranoid(mut self, on: bool) -> Self {
        self.paranoid = on;
        self
    }

    /// Opens despite corrupt pages found by recovery.
    pub fn allow_corrupt(mut self, on: bool) -> Self {
        self.allow_corrupt = on;
        self
    }

    /// Sets the observer of engine events (crash tests; `fault-injection` feature only).
    #[cfg(feature = "fault-injection")]
    pub fn observer(mut self, o: Observer) -> Self {
        self.observer = Some(o);
        self
    }

    /// Removes one safety step on purpose (crash-test self-checks only). Exists only with the
    /// `fault-injection` feature: a default build cannot switch a safety step off.
    #[cfg(feature = "fault-injection")]
    pub fn sabotage(mut self, s: Option<Sabotage>) -> Self {
        self.sabotage = s;
        self
    }

    /// Puts a FaCE flash cache between the buffer pool and the data device.
    pub fn flash_cache(mut self, fc: FlashCacheOptions) -> Self {
        self.flash_cache = Some(fc);
        self
    }

    /// Turns the background thread on or off.
    pub fn background(mut self, on: bool) -> Self {
        self.background = on;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if !self.page_size.is_power_of_two() || !(4096..=65536).contains(&self.page_size) {
            return Err(Error::config(format!(
                "page size {} is not a power of two from 4 KiB to 64 KiB",
                self.page_size
            )));
        }
        if self.buffer_bytes / self.page_size < 16 {
            return Err(Error::config(format!(
                "buffer of {} bytes holds fewer than 16 pages of {} bytes; give a larger buffer",
                self.buffer_bytes, self.page_size
            )));
        }
        if !(1..=1 << 20).contains(&self.max_inflight_commits) {
            return Err(Error::config("max_inflight_commits must be 1..=1048576"));
        }
        if !(Duration::from_micros(100)..=Duration::from_secs(10))
            .contains(&self.lazy_flush_interval)
        {
            return Err(Error::config(format!(
                "lazy flush interval {:?} is outside 100 µs ..= 10 s",
                self.lazy_flush_interval
            )));
        }
        if !(0.0..=1.0).contains(&self.checkpoint_pacing) {
            return Err(Error::config(format!(
                "checkpoint pacing {} is outside 0..=1 (the share of the log a checkpoint \
                 spreads its writes over; 0 writes at full speed)",
                self.checkpoint_pacing
            )));
        }
        if !(4..=1024).contains(&self.dw_pages) {
            return Err(Error::config("dw_pages must be 4..=1024"));
        }
        if self.data.is_none() != self.log.is_none() {
            return Err(Error::config(
                "give both a data and a log device, or neither",
            ));
        }
        if let Some(fc) = &self.flash_cache {
            self.validate_flash_cache(fc)?;
        }
        if self.data.is_none() && self.dir.is_none() {
            return Err(Error::config(
                "give a directory (DbOptions::in_dir) or devices (DbOptions::with_devices)",
            ));
        }
        Ok(())
    }

    /// A flash cache with the rest of the options: the torn mode it replaces, devices of its
    /// own. Checked before the database's page size is known.
    fn validate_flash_cache(&self, fc: &FlashCacheOptions) -> Result<()> {
        if self.torn.uses_doublewrite_area() {
            return Err(Error::config(
                "a flash cache replaces the double-write buffer (the data device is written only \
                 from durable flash copies): use --torn none (or atomic) with --flash-cache",
            ));
        }
        let same = |d: &Option<DeviceRef>| d.as_ref().is_some_and(|d| same_device(d, &fc.device));
        if same(&self.data) || same(&self.log) {
            return Err(Error::config(format!(
                "the flash cache device {} is also the data or log device: give it a device of its own",
                fc.device.describe()
            )));
        }
        fc.validate()
    }
}
