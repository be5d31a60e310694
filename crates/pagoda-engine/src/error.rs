//! Typed errors of the engine. Every message names the problem and, where there is one, the fix.

use pagoda_device::DeviceError;
use std::sync::Arc;

/// Result alias for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A write-write conflict under snapshot isolation: another transaction committed a newer
    /// version of a key this transaction wrote. The transaction is aborted; retry it.
    #[error("write-write conflict on table {table} key {key:?}: another transaction committed it first; retry the transaction")]
    Conflict {
        /// Table of the conflicting key.
        table: String,
        /// The key (lossy UTF-8 for display).
        key: String,
    },
    /// A page (or the superblock) failed its checksum or identity check.
    #[error(
        "corruption in page {page_id}: {detail}; restore from a backup (pages: {all_pages:?})"
    )]
    Corruption {
        /// The first corrupt page id.
        page_id: u64,
        /// All corrupt page ids found by the operation.
        all_pages: Vec<u64>,
        /// What was wrong.
        detail: String,
    },
    /// The write-ahead log is damaged before its end (not a torn tail).
    #[error("log corruption at LSN {lsn} (log device byte {offset}): {detail}; committed transactions from there on cannot be recovered: restore from a backup")]
    LogCorruption {
        /// LSN (log byte offset) of the damaged group.
        lsn: u64,
        /// Byte offset of the damaged group on the log device.
        offset: u64,
        /// What was wrong.
        detail: String,
    },
    /// The database was made in another on-disk format version.
    #[error("the database has format version {found}, this build reads version {supported} (version 2 changed the log group header); open it with a build that reads version {found}, or create a new database and load the data again")]
    UnsupportedFormat {
        /// Version on disk.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// A device error.
    #[error("device error: {0}")]
    Device(#[from] DeviceError),
    /// A key longer than [`crate::limits::MAX_KEY_LEN`].
    #[error("key of {len} bytes is too large: keys are at most {max} bytes")]
    KeyTooLarge {
        /// Length given.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// A value longer than the documented limit.
    #[error("value of {len} bytes is too large: values are at most {max} bytes (a quarter of the log capacity, at most 16 MiB); store large blobs elsewhere")]
    ValueTooLarge {
        /// Length given.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// No table by this name.
    #[error("no table named '{0}': create it with Db::create_table")]
    NoSuchTable(String),
    /// A table by this name exists already.
    #[error("table '{0}' exists already")]
    TableExists(String),
    /// Bad configuration or options.
    #[error("bad configuration: {0}")]
    Config(String),
    /// The database failed earlier and refuses further work; the [`Failure`] holds the first
    /// cause (an error that may have left durable state uncertain, or a panic in an engine
    /// thread). Reopening runs recovery.
    #[error(
        "database failed earlier and refuses further work ({0}); close and reopen it to recover"
    )]
    Failed(Failure),
    /// An engine thread panicked (a bug); the database fails with this as its cause.
    #[error("engine thread '{thread}' panicked: {message}; please report this bug")]
    Panicked {
        /// The thread's name.
        thread: String,
        /// The panic message.
        message: String,
    },
    /// The handle was abandoned ([`crate::Db::abandon`]) before the operation finished.
    #[error("the database was abandoned (as in a crash) before this finished")]
    Abandoned,
    /// Work could not go on for now (e.g. a checkpoint whose pages stayed in use); nothing
    /// durable changed, and the database stays up. Retry later.
    #[error("{0}; nothing was changed, retry later")]
    Stalled(&'static str),
    /// An engine invariant does not hold (a bug).
    #[error("internal error: {0}; please report this bug")]
    Internal(String),
    /// The database was closed.
    #[error("database is closed")]
    Closed,
    /// The buffer pool has no page that can be evicted.
    #[error("buffer pool exhausted: every frame, the commit spill room included, holds a page in use or changed by the running commit; use a larger buffer (or commit_spill_bytes), or a smaller transaction")]
    BufferFull,
    /// The log has no room for a record even after a checkpoint.
    #[error("log full: a record of {need} bytes does not fit in the log of {capacity} bytes; use a larger log device or smaller transactions")]
    LogFull {
        /// Bytes needed.
        need: u64,
        /// Log capacity.
        capacity: u64,
    },
    /// [`crate::Db::bulk_load`] into a table that has rows (or versions that running
    /// transactions may still read).
    #[error("bulk load into table '{0}' refused: the table is not empty (a bulk load builds a new tree and installs it as the whole table); load into a new or emptied table, or insert with transactions")]
    TableNotEmpty(String),
    /// [`crate::Db::bulk_load`] got a key not above the one before it. Nothing was loaded.
    #[error("bulk load into table '{table}': row {row} has a key not above the previous row's (rows must come in strictly ascending key order, no duplicates); sort the input, or insert with transactions")]
    KeysNotAscending {
        /// The table.
        table: String,
        /// Index of the offending row (0-based).
        row: u64,
    },
    /// The data device is full.
    #[error("data device full: page {page} is beyond its {capacity_pages} pages; use a larger data device")]
    Full {
        /// Page that did not fit.
        page: u64,
        /// Pages the device holds.
        capacity_pages: u64,
    },
}

impl Error {
    /// A corruption error for one page.
    pub fn corrupt(page_id: u64, detail: impl Into<String>) -> Self {
        Self::Corruption {
            page_id,
            all_pages: vec![page_id],
            detail: detail.into(),
        }
    }

    /// A configuration error.
    pub fn config(msg: impl Into<String>) -> Self {
        Self::Config(msg.into())
    }

    /// Whether this error must fail the whole database: it may have left durable state (the
    /// log, a page on disk) uncertain, or an engine invariant broke. Other errors belong to one
    /// operation or transaction and leave the database up.
    pub fn fails_database(&self) -> bool {
        matches!(
            self,
            Self::Device(_)
                | Self::Corruption { .. }
                | Self::LogCorruption { .. }
                | Self::Failed(_)
                | Self::Panicked { .. }
                | Self::Abandoned
                | Self::Internal(_)
        )
    }

    /// Whether this error says the data on disk is damaged.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Self::Corruption { .. } | Self::LogCorruption { .. })
    }
}

/// The first cause of a database failure, shared by every later error (cheap to clone).
#[derive(Clone, Debug)]
pub struct Failure(Arc<Error>);

impl Failure {
    /// A failure caused by `cause`.
    pub fn new(cause: Error) -> Self {
        Self(Arc::new(cause))
    }

    /// A failure caused by a panic with `payload` on `thread`.
    pub fn from_panic(thread: &str, payload: &(dyn std::any::Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-text panic payload".into());
        Self::new(Error::Panicked {
            thread: thread.to_string(),
            message,
        })
    }

    /// The error that made the database fail.
    pub fn cause(&self) -> &Error {
        &self.0
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
