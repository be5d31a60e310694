//! [`MemStore`], the reference in-memory engine: simple and obviously correct, which is what
//! the tests and the `mem` engine need.

use super::{OpenTables, Rows, Store, StoreError, StoreTxn, TableId};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

type Table = BTreeMap<Vec<u8>, Vec<u8>>;

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
            open: OpenTables::default(),
        }))
    }

    fn begin_read(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
        Ok(Box::new(MemReadTxn {
            store: self,
            guard: self.tables.read(),
            open: OpenTables::default(),
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
    open: OpenTables,
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
    fn open(&mut self, table: &str) -> Result<TableId, StoreError> {
        if !self.tables()?.contains_key(table) {
            return Err(missing(table));
        }
        Ok(self.open.open(table).0)
    }

    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let name = self.open.name(table)?.to_string();
        let t = self.tables()?.get(&name).ok_or_else(|| missing(&name))?;
        Ok(t.get(key).cloned())
    }

    fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let name = self.open.name(table)?.to_string();
        let t = self
            .tables()?
            .get_mut(&name)
            .ok_or_else(|| missing(&name))?;
        let old = t.insert(key.to_vec(), value.to_vec());
        self.undo.push((name, key.to_vec(), old));
        Ok(())
    }

    fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool, StoreError> {
        let name = self.open.name(table)?.to_string();
        let t = self
            .tables()?
            .get_mut(&name)
            .ok_or_else(|| missing(&name))?;
        let old = t.remove(key);
        let existed = old.is_some();
        if existed {
            self.undo.push((name, key.to_vec(), old));
        }
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
        let name = self.open.name(table)?.to_string();
        let t = self.tables()?.get(&name).ok_or_else(|| missing(&name))?;
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
    open: OpenTables,
}

impl MemReadTxn<'_> {
    fn table(&self, t: TableId) -> Result<&Table, StoreError> {
        let name = self.open.name(t)?;
        self.guard.get(name).ok_or_else(|| missing(name))
    }
}

fn read_only() -> StoreError {
    StoreError::Other("write in a read-only transaction; start it with begin()".to_string())
}

impl StoreTxn for MemReadTxn<'_> {
    fn open(&mut self, table: &str) -> Result<TableId, StoreError> {
        if !self.guard.contains_key(table) {
            return Err(missing(table));
        }
        Ok(self.open.open(table).0)
    }

    fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.table(table)?.get(key).cloned())
    }

    fn put(&mut self, _table: TableId, _key: &[u8], _value: &[u8]) -> Result<(), StoreError> {
        Err(read_only())
    }

    fn delete(&mut self, _table: TableId, _key: &[u8]) -> Result<bool, StoreError> {
        Err(read_only())
    }

    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Rows, StoreError> {
        Ok(scan_table(self.table(table)?, start, end, limit, reverse))
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
    use super::super::BULK_BATCH;
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
        let t_t = t.open("t").unwrap();
        t.put(t_t, b"a", b"1").unwrap();
        t.commit().unwrap();
        let mut t = s.begin().unwrap();
        let t_t = t.open("t").unwrap();
        t.put(t_t, b"a", b"2").unwrap();
        t.put(t_t, b"b", b"3").unwrap();
        assert!(t.delete(t_t, b"a").unwrap());
        t.rollback().unwrap();
        let mut t = s.begin_read().unwrap();
        let t_t = t.open("t").unwrap();
        assert_eq!(t.get(t_t, b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(t.get(t_t, b"b").unwrap(), None);
    }

    #[test]
    fn default_bulk_load_writes_every_row_across_batches() {
        let s = store();
        let n = BULK_BATCH * 2 + 7;
        let mut rows = (0..n).map(|i| (format!("{i:08}").into_bytes(), vec![i as u8; 3]));
        assert_eq!(s.bulk_load("t", &mut rows).unwrap(), n as u64);
        assert_eq!(s.table_len("t"), n);
        let mut t = s.begin_read().unwrap();
        let t_t = t.open("t").unwrap();
        assert_eq!(
            t.get(t_t, b"00002006").unwrap(),
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
            let t_t = t.open("t").unwrap();
            t.put(t_t, b"a", b"1").unwrap();
        }
        assert_eq!(s.table_len("t"), 0);
    }

    #[test]
    fn scan_bounds_limit_and_reverse() {
        let s = store();
        let mut t = s.begin().unwrap();
        let t_t = t.open("t").unwrap();
        for k in [b"a", b"b", b"c", b"d"] {
            t.put(t_t, k, b"").unwrap();
        }
        let keys = |v: Vec<(Vec<u8>, Vec<u8>)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(
            keys(t.scan(t_t, b"b", Some(b"d"), 10, false).unwrap()),
            vec![b"b".to_vec(), b"c".to_vec()]
        );
        assert_eq!(
            keys(t.scan(t_t, b"a", None, 2, true).unwrap()),
            vec![b"d".to_vec(), b"c".to_vec()]
        );
        assert!(t.scan(t_t, b"c", Some(b"b"), 10, false).unwrap().is_empty());
        t.commit().unwrap();
    }

    #[test]
    fn missing_table_and_read_only_are_errors() {
        let s = store();
        let mut t = s.begin().unwrap();
        let t_t = t.open("t").unwrap();
        assert_eq!(
            t.open("t").unwrap(),
            t_t,
            "one handle per table and transaction"
        );
        assert!(matches!(t.open("nope"), Err(StoreError::Other(_))));
        // A handle of another transaction is refused, not taken for a table of this one.
        assert!(matches!(
            t.get(TableId::new(3), b"a"),
            Err(StoreError::Other(_))
        ));
        drop(t);
        let mut r = s.begin_read().unwrap();
        let rt = r.open("t").unwrap();
        assert!(matches!(r.put(rt, b"a", b"1"), Err(StoreError::Other(_))));
    }

    #[test]
    fn injected_conflicts_roll_back() {
        let s = MemStore::with_conflict_rate(1.0, 7);
        s.create_table("t").unwrap();
        let mut t = s.begin().unwrap();
        let t_t = t.open("t").unwrap();
        t.put(t_t, b"a", b"1").unwrap();
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
            let mut txn_t = txn.open("t").unwrap();
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        txn.put(txn_t, &[k], &[v]).unwrap();
                        working.insert(vec![k], vec![v]);
                    }
                    Op::Delete(k) => {
                        let existed = txn.delete(txn_t, &[k]).unwrap();
                        proptest::prop_assert_eq!(existed, working.remove(&vec![k]).is_some());
                    }
                    Op::Get(k) => {
                        proptest::prop_assert_eq!(
                            txn.get(txn_t, &[k]).unwrap(),
                            working.get(&vec![k]).cloned()
                        );
                    }
                    Op::Scan(a, b, limit, rev) => {
                        let end = b.map(|b| vec![b]);
                        let got = txn.scan(txn_t, &[a], end.as_deref(), limit, rev).unwrap();
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
                        txn_t = txn.open("t").unwrap();
                    }
                    Op::Rollback => {
                        txn.rollback().unwrap();
                        working = committed.clone();
                        txn = s.begin().unwrap();
                        txn_t = txn.open("t").unwrap();
                    }
                }
            }
            drop(txn);
            let mut r = s.begin_read().unwrap();
            let r_t = r.open("t").unwrap();
            let all = r.scan(r_t, b"", None, usize::MAX, false).unwrap();
            proptest::prop_assert_eq!(all, committed.into_iter().collect::<Vec<_>>());
        }
    }
}
