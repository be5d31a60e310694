//! pagoda's transactional engine: named B+tree tables of ordered byte-string keys, snapshot
//! isolation with MVCC, a buffer pool with a hot/cold LRU and a sorted-batch page cleaner, a
//! redo write-ahead log with group commit through a consolidation array, fuzzy checkpoints,
//! crash recovery, and torn-write protection (double-write area, atomic writes, or none),
//! all on top of any [`pagoda_device::BlockDevice`].
//!
//! Start at [`Db`]: open it with [`DbOptions`], make tables with [`Db::create_table`], then
//! read in a [`ReadTxn`] ([`Db::begin_read`]) and write in a [`WriteTxn`]
//! ([`Db::begin_write`]). A transaction opens each table once ([`WriteTxn::open_table`] gives
//! a [`Table`], [`ReadTxn::open_table`] a [`ReadOnlyTable`]); the handle's operations do no
//! lookup by name. `examples/embed.rs` is the program to copy.
//!
//! Commit modes ([`CommitMode`]): `sync` ([`WriteTxn::commit`] returns once durable),
//! `pipelined` ([`WriteTxn::commit_pipelined`] returns a [`CommitTicket`] at once; a flush
//! thread makes the log durable and resolves it; the transaction is committed and visible
//! only then) and `lazy`.
//!
//! Besides the items on this page: [`stats`] (what [`Db::stats`] and [`Db::check`] report),
//! [`limits`] (key and value sizes), [`files`] (log-file preallocation), [`sizing`]
//! (buffer-pool sizing from a recorded page trace), [`inspect`] (the offline inspector behind
//! `pagoda inspect`) and [`format`](mod@format), the on-disk format's encoders and decoders,
//! which are for tools and not a stable API. With the `fault-injection` feature (off by
//! default), `fault` holds the crash test's observer probes and sabotage switches.
//!
//! Layers (internal modules): `Db`/`Txn` (snapshot isolation, `mvcc`) → `btree` (single
//! writer, latch coupling readers) → `buffer` (frames, hot/cold LRU, sorted-batch cleaner,
//! torn-write guard) and `wal` (consolidation-array group commit, redo-only records, ring
//! reuse after checkpoints); `ARCHITECTURE.md` maps them. The on-disk format is described in
//! `docs/format.md`.
//!
//! ```
//! use pagoda_engine::{Db, DbOptions};
//! # fn main() -> pagoda_engine::Result<()> {
//! let dir = tempfile::tempdir().expect("tempdir");
//! let db = Db::open(DbOptions::in_dir(dir.path()).buffer_bytes(4 << 20))?;
//! db.create_table("users")?;
//! let tx = db.begin_write()?;
//! tx.open_table("users")?.put(b"alice", b"engineer")?;
//! tx.commit()?;
//! let tx = db.begin_read()?;
//! assert_eq!(tx.open_table("users")?.get(b"alice")?.as_deref(), Some(&b"engineer"[..]));
//! drop(tx); // a transaction borrows its database: it ends before the close
//! db.close()?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod bounds;
mod btree;
mod buffer;
mod check;
mod db;
mod error;
mod flash_options;
pub mod format;
mod freelist;
pub mod inspect;
mod mvcc;
mod options;
mod pipeline;
mod probe;
mod profile;
mod settings;
pub mod sizing;
mod stream;
mod striped;
mod wal;

pub use db::{Db, ReadOnlyTable, ReadTxn, Scan, Table, WriteTxn};
pub use error::{Error, Failure, Result};
pub use options::{CommitMode, DbOptions, FlashCacheOptions, FlashPages, FlashPolicy, TornMode};
pub use pipeline::{CommitInfo, CommitTicket};

/// Diagnostics: what [`Db::stats`], [`Db::checkpoint`] and [`Db::check`] report, and the
/// CPU clock that the phase profile uses.
pub mod stats {
    pub use crate::check::CheckReport;
    pub use crate::db::{BufferStats, CheckpointInfo, DbStats, FlashCacheStats, RecoveryStats};
    pub use crate::profile::{CpuClock, CpuUsage, LogPathPhases, PhaseStat, ProfileStats};
}

/// Size limits of keys and values.
pub mod limits {
    pub use crate::btree::{inline_max, MAX_KEY_LEN};

    /// Largest value in bytes (values above a quarter page go to overflow pages); a value
    /// must also fit in a quarter of the log.
    pub const MAX_VALUE_LEN: usize = 16 << 20;
}

/// Database files: the log file's default size cap and its preallocation.
pub mod files {
    pub use crate::db::preallocate_log_file;
    pub use crate::options::DEFAULT_LOG_CAP;
}

/// Crash-test hooks (`fault-injection` feature only): engine events an [`fault::Observer`]
/// follows, and [`fault::Sabotage`], one safety step switched off on purpose so that the crash
/// test can prove it notices. A default build has neither.
#[cfg(feature = "fault-injection")]
pub mod fault {
    pub use crate::probe::{Event, FlashStep, Observer, RecoveryStep, Sabotage};
}
