//! The seam between the workload driver and a storage engine.
//!
//! A [`Store`] is a transactional, multi-table map from byte-string keys to byte-string values,
//! ordered by key bytes. A transaction opens each table it uses once ([`StoreTxn::open`]) and
//! its operations take that handle ([`TableId`]), as the engines' own APIs do. The engines
//! implement it in their own crates (pagoda and its peers in `pagoda-peers`); this crate ships
//! [`MemStore`] (`mem.rs`), the in-memory reference used by the tests and as the `mem` engine.

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The transaction lost a conflict with a concurrent one; retrying it may succeed.
    #[error("transaction conflict (retryable)")]
    Conflict,
    /// Any other failure (I/O, corruption, a missing table, ...); not retried.
    #[error("{0}")]
    Other(String),
}

impl StoreError {
    /// Whether the driver should retry the transaction.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Conflict)
    }
}

/// A transactional, multi-table, ordered key-value store.
pub trait Store: Send + Sync {
    /// Creates `name` if it does not exist yet; creating an existing table is not an error.
    fn create_table(&self, name: &str) -> Result<(), StoreError>;
    /// Starts a read-write transaction.
    fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError>;
    /// Starts a transaction that will only read; engines may make it cheaper.
    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        self.begin()
    }
    /// Engine-specific statistics (buffer hit ratio, commits, log syncs, device stats, ...),
    /// copied verbatim into the report's `engine` key.
    fn stats_json(&self) -> serde_json::Value;
    /// One line naming the engine and its configuration.
    fn describe(&self) -> String;
    /// Loads `rows` into `table` through the engine's fastest crash-safe path for sorted input
    /// (bottom-up leaf building, append mode, file ingestion, ...). `rows` arrive in strictly
    /// ascending key order. Returns the rows written. The rows must be visible and committed
    /// when it returns; [`Store::make_durable`] then makes them durable on disk. The default
    /// writes them through ordinary transactions of [`BULK_BATCH`] rows.
    fn bulk_load(
        &self,
        table: &str,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<u64, StoreError> {
        load_in_transactions(self, table, rows)
    }
    /// Makes everything committed so far durable on the data files (checkpoint, flush, sync),
    /// so that a load can be timed to data on disk, not only to the last acknowledged commit.
    /// The default does nothing: a store whose commits already leave data on disk.
    fn make_durable(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Rows per transaction in the default [`Store::bulk_load`].
pub const BULK_BATCH: usize = 1000;

/// Writes `rows` into `table` through ordinary transactions of [`BULK_BATCH`] rows and returns
/// the rows written: the default [`Store::bulk_load`], and the fallback of engines whose own
/// bulk path only applies to an empty table.
pub fn load_in_transactions<S: Store + ?Sized>(
    store: &S,
    table: &str,
    rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
) -> Result<u64, StoreError> {
    let mut written = 0u64;
    loop {
        let mut txn = store.begin()?;
        let t = txn.open(table)?;
        let mut in_txn = 0u64;
        for (k, v) in (&mut *rows).take(BULK_BATCH) {
            txn.put(t, &k, &v)?;
            in_txn += 1;
        }
        if in_txn == 0 {
            return txn.rollback().map(|()| written);
        }
        txn.commit()?;
        written += in_txn;
    }
}

/// A table opened in a transaction ([`StoreTxn::open`]): the handle its operations take,
/// valid until that transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableId(u32);

impl TableId {
    /// The handle of the `index`-th table a transaction opened (from 0).
    pub fn new(index: usize) -> Self {
        Self(u32::try_from(index).unwrap_or(u32::MAX))
    }

    /// Its index among the tables its transaction opened.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The tables a transaction opened, by name: what [`StoreTxn::open`] keeps in an engine whose
/// own calls name the table (or whose handles it keeps beside, at the same index).
#[derive(Debug, Default, Clone)]
pub struct OpenTables {
    names: Vec<String>,
}

impl OpenTables {
    /// The handle of `name`, if the transaction opened it already.
    pub fn find(&self, name: &str) -> Option<TableId> {
        self.names.iter().position(|n| n == name).map(TableId::new)
    }

    /// The handle of `name`, opened now if it was not (`true` then: an engine that keeps its
    /// own handles opens one at this index).
    pub fn open(&mut self, name: &str) -> (TableId, bool) {
        match self.find(name) {
            Some(t) => (t, false),
            None => {
                self.names.push(name.to_string());
                (TableId::new(self.names.len() - 1), true)
            }
        }
    }

    /// The name of `t`; an error for a handle this transaction did not open.
    pub fn name(&self, t: TableId) -> Result<&str, StoreError> {
        self.names
            .get(t.index())
            .map(String::as_str)
            .ok_or_else(|| {
                StoreError::Other(format!(
                    "table handle {} was not opened in this transaction; open the table with \
                 StoreTxn::open first",
                    t.index()
                ))
            })
    }
}

/// One transaction. Dropping it without `commit` must roll it back. Its operations take the
/// handle of a table it opened ([`StoreTxn::open`]), as an engine's own API does: the table is
/// looked up once per transaction, not once per operation.
pub trait StoreTxn {
    /// Opens `table` for the rest of the transaction (opening it again gives the same
    /// handle). A missing table is an error here or, in engines that find out only then, at
    /// its first operation.
    fn open(&mut self, table: &str) -> Result<TableId, StoreError>;
    /// Reads one key.
    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Inserts or replaces one key.
    fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
    /// Deletes one key; returns whether it existed.
    fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool, StoreError>;
    /// Up to `limit` pairs with `start <= key < end` (no upper bound when `end` is `None`),
    /// in ascending key order, or descending from the top of the range when `reverse`.
    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Rows, StoreError>;
    /// Makes the transaction's writes durable and visible.
    fn commit(self: Box<Self>) -> Result<(), StoreError>;
    /// Starts an asynchronous (pipelined) commit: returns once the commit is queued, with a
    /// [`PendingCommit`] that resolves when it is durable; only then is the transaction
    /// committed. Conflicts are reported here. The default commits synchronously.
    fn commit_pipelined(self: Box<Self>) -> Result<Box<dyn PendingCommit>, StoreError> {
        self.commit()?;
        Ok(Box::new(Resolved))
    }
    /// Discards the transaction's writes.
    fn rollback(self: Box<Self>) -> Result<(), StoreError>;
}

/// A commit in flight ([`StoreTxn::commit_pipelined`]).
pub trait PendingCommit: Send {
    /// The outcome once resolved (`Ok` = durable), `None` while pending. Never blocks.
    fn poll(&mut self) -> Option<Result<(), StoreError>>;
    /// Blocks until resolved.
    fn wait(self: Box<Self>) -> Result<(), StoreError>;
}

/// A commit that was durable when it was handed out.
#[derive(Debug, Clone, Copy, Default)]
pub struct Resolved;

impl PendingCommit for Resolved {
    fn poll(&mut self) -> Option<Result<(), StoreError>> {
        Some(Ok(()))
    }
    fn wait(self: Box<Self>) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The smallest key strictly greater than every key starting with `prefix`, or `None` when no
/// such key exists (the prefix is all `0xff`). Used as the exclusive end of a prefix scan.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Key-value pairs returned by a scan, in scan order.
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

mod mem;
pub use mem::MemStore;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
    }

    #[test]
    fn open_tables_give_one_handle_per_name() {
        let mut t = OpenTables::default();
        let (a, new_a) = t.open("a");
        let (b, new_b) = t.open("b");
        assert!(new_a && new_b && a != b);
        assert_eq!(t.open("a"), (a, false));
        assert_eq!(t.find("b"), Some(b));
        assert_eq!(t.name(b).unwrap(), "b");
        assert!(t.name(TableId::new(9)).is_err());
    }
}
