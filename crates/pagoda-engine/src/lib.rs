//! pagoda's transactional engine: named B+tree tables of ordered byte-string keys, snapshot
//! isolation with MVCC, a buffer pool with a hot/cold LRU and a sorted-batch page cleaner, a
//! redo write-ahead log with group commit through a consolidation array, fuzzy checkpoints,
//! crash recovery, and torn-write protection (double-write area, atomic writes, or none),
//! all on top of any [`pagoda_device::BlockDevice`].
//!
//! Start at [`Db`]. The on-disk format is described in `docs/format.md`.
//!
//! Commit modes ([`CommitMode`]): `sync` ([`WriteTxn::commit`] returns once durable) and
//! `pipelined` ([`WriteTxn::commit_pipelined`] returns a [`CommitTicket`] at once; a flush thread
//! makes the log durable and resolves it; the transaction is committed and visible only then).
//! [`DbStats::profile`] breaks transaction and log time down per phase.
//!
//! Layers (internal modules, not part of the API): `Db`/`Txn` (snapshot isolation, `mvcc`)
//! → `btree` (single writer, latch coupling readers) → `buffer` (frames, hot/cold LRU,
//! sorted-batch cleaner, torn-write guard) and `wal` (consolidation-array group commit,
//! redo-only records, ring reuse after checkpoints); `ARCHITECTURE.md` maps them.
//!
//! The public API is what this page lists: the items re-exported here, plus two modules for
//! tools: [`format`](mod@format) (the documented on-disk format's encoders and decoders) and [`inspect`]
//! (the offline inspector behind `pagoda inspect`), and [`sizing`], buffer-pool sizing from a
//! recorded page trace ([`Db::start_page_trace`]): the miss-ratio curve, a TPS model, advice. The power-cut crash test is a separate
//! crate, `pagoda-crashtest`, over this public API (with the [`Observer`] probes and
//! [`Sabotage`] switches).
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

pub use btree::{inline_max, MAX_KEY_LEN};
pub use check::CheckReport;
pub use db::{
    preallocate_log_file, BufferStats, CheckpointInfo, Db, DbStats, FlashCacheStats, ReadOnlyTable,
    ReadTxn, RecoveryStats, Scan, Table, WriteTxn,
};
pub use error::{Error, Failure, Result};
pub use options::{
    CommitMode, DbOptions, FlashCacheOptions, FlashPages, FlashPolicy, TornMode, DEFAULT_LOG_CAP,
};
pub use pipeline::{CommitInfo, CommitTicket, DurableCallback};
pub use probe::{Event, FlashStep, Observer, RecoveryStep, Sabotage};
pub use profile::{CpuClock, CpuUsage, PhaseStat, ProfileStats, Seed002Phases};
pub use stream::Stream;

/// Largest value in bytes (values above a quarter page go to overflow pages); a value must
/// also fit in a quarter of the log.
pub const MAX_VALUE_LEN: usize = 16 << 20;
