//! The seam between the workload driver and a storage engine.
//!
//! A [`Store`] is a transactional, multi-table map from byte-string keys to byte-string values,
//! ordered by key bytes. Engines (pagoda, later peers) implement it in their own crates; this
//! crate ships [`MemStore`], the in-memory reference implementation used by the tests and as the
//! `mem` engine.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

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
        let mut written = 0u64;
        loop {
            let mut txn = self.begin()?;
            let mut in_txn = 0usize;
            for (k, v) in &mut *rows {
                txn.put(table, &k, &v)?;
                in_txn += 1;
                if in_txn == BULK_BATCH {
                    break;
                }
            }
            if in_txn == 0 {
                return txn.rollback().map(|()| written);
            }
            txn.commit()?;
            written += in_txn as u64;
        }
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

/// One transaction. Dropping it without `commit` must roll it back.
pub trait StoreTxn {
    /// Reads one key.
    fn get(&mut self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Inserts or replaces one key.
    fn put(&mut self, table: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
    /// Deletes one key; returns whether it existed.
    fn delete(&mut self, table: &str, key: &[u8]) -> Result<bool, StoreError>;
    /// Up to `limit` pairs with `start <= key < end` (no upper bound when `end` is `None`),
    /// in ascending key order, or descending from the top of the range when `reverse`.
    fn scan(
        &mut self,
        table: &str,
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

type Table = BTreeMap<Vec<u8>, Vec<u8>>;

/// Key-value pairs returned by a scan, in scan order.
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// The reference in-memory store.
///
/// Serializable by construction: a read-write transaction holds the store's write lock from
/// `begin` to `commit`/`rollback`, writes in place and keeps an undo log for rollback; read
/// transactions share the read lock. Simple and obviously correct, which is what a reference
/// needs; it never produces a conflict on its own, so [`MemStore::with_conflict_rate`] can inject
/// them at commit to exercise the driver's retry path.
///
/// A thread must not hold two transactions of the same `MemStore` at once (it would deadlock).
#[derive(Debug, Default)]
pub struct MemStore {
    tables: RwLock<HashMap<String, Table>>,
    counters: Mutex<MemCounters>,
    conflict: Option<Mutex<(f64, SmallRng)>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct MemCounters {
    commits: u64,
    rollbacks: u64,
    injected_conflicts: u64,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose read-write commits fail with [`StoreError::Conflict`] with
    /// probability `rate` (drawn from a generator seeded with `seed`).
    pub fn with_conflict_rate(rate: f64, seed: u64) -> Self {
        MemStore {
            conflict: Some(Mutex::new((rate, SmallRng::seed_from_u64(seed)))),
            ..Self::default()
        }
    }

    /// Number of rows in `table` (0 when it does not exist).
    pub fn table_len(&self, table: &str) -> usize {
        self.tables.read().get(table).map_or(0, BTreeMap::len)
    }

    /// Names of all tables, sorted.
    pub fn table_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tables.read().keys().cloned().collect();
        names.sort();
        names
    }

    fn inject_conflict(&self) -> bool {
        let Some(c) = &self.conflict else {
            return false;
        };
        let mut c = c.lock();
        let rate = c.0;
        c.1.gen_bool(rate.clamp(0.0, 1.0))
    }
}

fn missing(table: &str) -> StoreError {
    StoreError::Other(format!(
        "table `{table}` does not exist; create it with create_table first"
    ))
}

fn scan_table(t: &Table, start: &[u8], end: Option<&[u8]>, limit: usize, reverse: bool) -> Rows {
    if let Some(e) = end {
        if e <= start {
            return Vec::new();
        }
    }
    let hi = end.map_or(Bound::Unbounded, Bound::Excluded);
    let range = t.range::<[u8], _>((Bound::Included(start), hi));
    let clone = |(k, v): (&Vec<u8>, &Vec<u8>)| (k.clone(), v.clone());
    if reverse {
        range.rev().take(limit).map(clone).collect()
    } else {
        range.take(limit).map(clone).collect()
    }
}

impl Store for MemStore {
    fn create_table(&self, name: &str) -> Result<(), StoreError> {
        self.tables.write().entry(name.to_string()).or_default();
        Ok(())
    }

    fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(Box::new(MemTxn {
            store: self,
            guard: Some(self.tables.write()),
            undo: Vec::new(),
        }))
    }

    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(Box::new(MemReadTxn {
            store: self,
            guard: self.tables.read(),
        }))
    }

    fn stats_json(&self) -> serde_json::Value {
        let c = *self.counters.lock();
        let tables = self.tables.read();
        let rows: usize = tables.values().map(BTreeMap::len).sum();
        serde_json::json!({
            "engine": "mem",
            "commits": c.commits,
            "rollbacks": c.rollbacks,
            "injected_conflicts": c.injected_conflicts,
            "tables": tables.len(),
            "rows": rows,
        })
    }

    fn describe(&self) -> String {
        match &self.conflict {
            Some(c) => format!("mem (reference store, conflict rate {})", c.lock().0),
            None => "mem (reference store)".to_string(),
        }
    }
}

/// Undo record: the table, the key and the value before the first write (None: absent).
type Undo = (String, Vec<u8>, Option<Vec<u8>>);

struct MemTxn<'a> {
    store: &'a MemStore,
    guard: Option<RwLockWriteGuard<'a, HashMap<String, Table>>>,
    undo: Vec<Undo>,
}

impl MemTxn<'_> {
    fn tables(&mut self) -> Result<&mut HashMap<String, Table>, StoreError> {
        self.guard
            .as_deref_mut()
            .ok_or_else(|| StoreError::Other("transaction already finished".to_string()))
    }

    fn undo_all(&mut self) {
        let undo = std::mem::take(&mut self.undo);
        if let Some(tables) = self.guard.as_deref_mut() {
            for (table, key, old) in undo.into_iter().rev() {
                if let Some(t) = tables.get_mut(&table) {
                    match old {
                        Some(v) => {
                            t.insert(key, v);
                        }
                        None => {
                            t.remove(&key);
                        }
                    }
                }
            }
        }
    }
}

impl Drop for MemTxn<'_> {
    fn drop(&mut self) {
        if self.guard.is_some() {
            self.undo_all();
            self.store.counters.lock().rollbacks += 1;
        }
    }
}

impl StoreTxn for MemTxn<'_> {
    fn get(&mut self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let t = self.tables()?.get(table).ok_or_else(|| missing(table))?;
        Ok(t.get(key).cloned())
    }

    fn put(&mut self, table: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let t = self
            .tables()?
            .get_mut(table)
            .ok_or_else(|| missing(table))?;
        let old = t.insert(key.to_vec(), value.to_vec());
        self.undo.push((table.to_string(), key.to_vec(), old));
        Ok(())
    }

    fn delete(&mut self, table: &str, key: &[u8]) -> Result<bool, StoreError> {
        let t = self
            .tables()?
            .get_mut(table)
            .ok_or_else(|| missing(table))?;
        let old = t.remove(key);
        let existed = old.is_some();
        if existed {
            self.undo.push((table.to_string(), key.to_vec(), old));
        }
        Ok(existed)
    }

    fn scan(
        &mut self,
        table: &str,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Rows, StoreError> {
        let t = self.tables()?.get(table).ok_or_else(|| missing(table))?;
        Ok(scan_table(t, start, end, limit, reverse))
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        if self.store.inject_conflict() {
            self.undo_all();
            self.guard = None;
            let mut c = self.store.counters.lock();
            c.injected_conflicts += 1;
            c.rollbacks += 1;
            return Err(StoreError::Conflict);
        }
        self.undo.clear();
        self.guard = None;
        self.store.counters.lock().commits += 1;
        Ok(())
    }

    fn rollback(mut self: Box<Self>) -> Result<(), StoreError> {
        self.undo_all();
        self.guard = None;
        self.store.counters.lock().rollbacks += 1;
        Ok(())
    }
}

struct MemReadTxn<'a> {
    store: &'a MemStore,
    guard: RwLockReadGuard<'a, HashMap<String, Table>>,
}

fn read_only() -> StoreError {
    StoreError::Other("write in a read-only transaction; start it with begin()".to_string())
}

impl StoreTxn for MemReadTxn<'_> {
    fn get(&mut self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let t = self.guard.get(table).ok_or_else(|| missing(table))?;
        Ok(t.get(key).cloned())
    }

    fn put(&mut self, _table: &str, _key: &[u8], _value: &[u8]) -> Result<(), StoreError> {
        Err(read_only())
    }

    fn delete(&mut self, _table: &str, _key: &[u8]) -> Result<bool, StoreError> {
        Err(read_only())
    }

    fn scan(
        &mut self,
        table: &str,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Rows, StoreError> {
        let t = self.guard.get(table).ok_or_else(|| missing(table))?;
        Ok(scan_table(t, start, end, limit, reverse))
    }

    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        self.store.counters.lock().commits += 1;
        Ok(())
    }

    fn rollback(self: Box<Self>) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> MemStore {
        let s = MemStore::new();
        s.create_table("t").unwrap();
        s
    }

    #[test]
    fn commit_keeps_rollback_discards() {
        let s = store();
        let mut t = s.begin().unwrap();
        t.put("t", b"a", b"1").unwrap();
        t.commit().unwrap();
        let mut t = s.begin().unwrap();
        t.put("t", b"a", b"2").unwrap();
        t.put("t", b"b", b"3").unwrap();
        assert!(t.delete("t", b"a").unwrap());
        t.rollback().unwrap();
        let mut t = s.begin_read().unwrap();
        assert_eq!(t.get("t", b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(t.get("t", b"b").unwrap(), None);
    }

    #[test]
    fn default_bulk_load_writes_every_row_across_batches() {
        let s = store();
        let n = BULK_BATCH * 2 + 7;
        let mut rows = (0..n).map(|i| (format!("{i:08}").into_bytes(), vec![i as u8; 3]));
        assert_eq!(s.bulk_load("t", &mut rows).unwrap(), n as u64);
        assert_eq!(s.table_len("t"), n);
        let mut t = s.begin_read().unwrap();
        assert_eq!(
            t.get("t", b"00002006").unwrap(),
            Some(vec![2006u32 as u8; 3])
        );
        drop(t);
        assert_eq!(s.bulk_load("t", &mut std::iter::empty()).unwrap(), 0);
        s.make_durable().unwrap();
    }

    #[test]
    fn drop_rolls_back() {
        let s = store();
        {
            let mut t = s.begin().unwrap();
            t.put("t", b"a", b"1").unwrap();
        }
        assert_eq!(s.table_len("t"), 0);
    }

    #[test]
    fn scan_bounds_limit_and_reverse() {
        let s = store();
        let mut t = s.begin().unwrap();
        for k in [b"a", b"b", b"c", b"d"] {
            t.put("t", k, b"").unwrap();
        }
        let keys = |v: Vec<(Vec<u8>, Vec<u8>)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(
            keys(t.scan("t", b"b", Some(b"d"), 10, false).unwrap()),
            vec![b"b".to_vec(), b"c".to_vec()]
        );
        assert_eq!(
            keys(t.scan("t", b"a", None, 2, true).unwrap()),
            vec![b"d".to_vec(), b"c".to_vec()]
        );
        assert!(t.scan("t", b"c", Some(b"b"), 10, false).unwrap().is_empty());
        t.commit().unwrap();
    }

    #[test]
    fn missing_table_and_read_only_are_errors() {
        let s = store();
        let mut t = s.begin().unwrap();
        assert!(matches!(t.get("nope", b"a"), Err(StoreError::Other(_))));
        drop(t);
        let mut r = s.begin_read().unwrap();
        assert!(matches!(r.put("t", b"a", b"1"), Err(StoreError::Other(_))));
    }

    #[test]
    fn injected_conflicts_roll_back() {
        let s = MemStore::with_conflict_rate(1.0, 7);
        s.create_table("t").unwrap();
        let mut t = s.begin().unwrap();
        t.put("t", b"a", b"1").unwrap();
        assert_eq!(t.commit(), Err(StoreError::Conflict));
        assert_eq!(s.table_len("t"), 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u8, u8),
        Delete(u8),
        Get(u8),
        Scan(u8, Option<u8>, usize, bool),
        Commit,
        Rollback,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0u8..16, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
            (0u8..16).prop_map(Op::Delete),
            (0u8..16).prop_map(Op::Get),
            (
                0u8..16,
                proptest::option::of(0u8..17),
                0usize..6,
                any::<bool>()
            )
                .prop_map(|(a, b, l, r)| Op::Scan(a, b, l, r)),
            Just(Op::Commit),
            Just(Op::Rollback),
        ]
    }

    proptest::proptest! {
        /// MemStore behaves like a BTreeMap with transactions that commit or roll back.
        #[test]
        fn matches_a_btreemap_model(ops in proptest::collection::vec(op(), 1..80)) {
            let s = store();
            let mut committed: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            let mut working = committed.clone();
            let mut txn = s.begin().unwrap();
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        txn.put("t", &[k], &[v]).unwrap();
                        working.insert(vec![k], vec![v]);
                    }
                    Op::Delete(k) => {
                        let existed = txn.delete("t", &[k]).unwrap();
                        proptest::prop_assert_eq!(existed, working.remove(&vec![k]).is_some());
                    }
                    Op::Get(k) => {
                        proptest::prop_assert_eq!(
                            txn.get("t", &[k]).unwrap(),
                            working.get(&vec![k]).cloned()
                        );
                    }
                    Op::Scan(a, b, limit, rev) => {
                        let end = b.map(|b| vec![b]);
                        let got = txn.scan("t", &[a], end.as_deref(), limit, rev).unwrap();
                        let range = working
                            .iter()
                            .filter(|(k, _)| k[0] >= a && !matches!(b, Some(b) if k[0] >= b))
                            .map(|(k, v)| (k.clone(), v.clone()));
                        let want: Vec<_> = if rev {
                            range.rev().take(limit).collect()
                        } else {
                            range.take(limit).collect()
                        };
                        proptest::prop_assert_eq!(got, want);
                    }
                    Op::Commit => {
                        txn.commit().unwrap();
                        committed = working.clone();
                        txn = s.begin().unwrap();
                    }
                    Op::Rollback => {
                        txn.rollback().unwrap();
                        working = committed.clone();
                        txn = s.begin().unwrap();
                    }
                }
            }
            drop(txn);
            let mut r = s.begin_read().unwrap();
            let all = r.scan("t", b"", None, usize::MAX, false).unwrap();
            proptest::prop_assert_eq!(all, committed.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn prefix_end_increments() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
    }
}
