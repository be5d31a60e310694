//! Every peer behaves as a `Store` must: the same checks for each engine, and a random
//! sequence of operations compared with `MemStore`, the reference.
#![allow(clippy::unwrap_used)] // tests: a failure should panic with the cause

use pagoda_peers::{open, PeerKind, PeerOptions};
use pagoda_workload::{MemStore, Store, StoreError};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::Path;

fn built() -> Vec<PeerKind> {
    PeerKind::ALL.into_iter().filter(|k| k.is_built()).collect()
}

fn opts() -> PeerOptions {
    PeerOptions {
        cache_bytes: 4 << 20,
        lmdb_map_bytes: 1 << 30,
        ..PeerOptions::default()
    }
}

fn store(kind: PeerKind, dir: &Path) -> Box<dyn Store> {
    open(kind, dir, &opts()).unwrap()
}

fn keys(rows: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<Vec<u8>> {
    rows.into_iter().map(|(k, _)| k).collect()
}

fn put_all(s: &dyn Store, table: &str, ks: &[&[u8]]) {
    let mut t = s.begin().unwrap();
    let table_t = t.open(table).unwrap();
    for k in ks {
        t.put(table_t, k, &[k[0], b'!']).unwrap();
    }
    t.commit().unwrap();
}

#[test]
fn put_get_delete_and_commit_visibility() {
    for kind in built() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(kind, dir.path());
        s.create_table("t").unwrap();
        s.create_table("t").unwrap(); // creating twice is not an error
        let mut t = s.begin().unwrap();
        let t_t = t.open("t").unwrap();
        t.put(t_t, b"a", b"1").unwrap();
        t.put(t_t, b"b", b"2").unwrap();
        t.put(t_t, b"a", b"3").unwrap(); // replaces
        assert_eq!(
            t.get(t_t, b"a").unwrap(),
            Some(b"3".to_vec()),
            "{kind}: own write"
        );
        assert!(t.delete(t_t, b"b").unwrap(), "{kind}: delete existing");
        assert!(!t.delete(t_t, b"b").unwrap(), "{kind}: delete missing");
        assert_eq!(t.get(t_t, b"b").unwrap(), None, "{kind}");
        t.commit().unwrap();
        let mut r = s.begin_read().unwrap();
        let t_t = r.open("t").unwrap();
        assert_eq!(
            r.get(t_t, b"a").unwrap(),
            Some(b"3".to_vec()),
            "{kind}: committed"
        );
        assert_eq!(r.get(t_t, b"b").unwrap(), None, "{kind}");
        assert_eq!(r.get(t_t, b"zz").unwrap(), None, "{kind}");
        assert!(
            matches!(r.put(t_t, b"x", b"1"), Err(StoreError::Other(_))),
            "{kind}: a read transaction refuses writes"
        );
        assert!(
            matches!(r.open("missing"), Err(StoreError::Other(_))),
            "{kind}: a missing table is an error"
        );
        r.commit().unwrap();
        let v = s.stats_json();
        assert_eq!(v["engine"], kind.name(), "{v}");
        assert!(v["commits"].as_u64().unwrap() >= 1, "{kind}: {v}");
        assert!(s.describe().starts_with(kind.name()), "{}", s.describe());
    }
}

#[test]
fn rollback_and_drop_discard_writes() {
    for kind in built() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(kind, dir.path());
        s.create_table("t").unwrap();
        put_all(&*s, "t", &[b"a"]);
        let mut t = s.begin().unwrap();
        let t_t = t.open("t").unwrap();
        t.put(t_t, b"a", b"changed").unwrap();
        t.put(t_t, b"new", b"1").unwrap();
        t.rollback().unwrap();
        {
            let mut t = s.begin().unwrap();
            let t_t = t.open("t").unwrap();
            assert!(t.delete(t_t, b"a").unwrap());
            t.put(t_t, b"dropped", b"1").unwrap();
        } // dropped without commit
        let mut r = s.begin_read().unwrap();
        let t_t = r.open("t").unwrap();
        assert_eq!(r.get(t_t, b"a").unwrap(), Some(b"a!".to_vec()), "{kind}");
        assert_eq!(r.get(t_t, b"new").unwrap(), None, "{kind}: rolled back");
        assert_eq!(r.get(t_t, b"dropped").unwrap(), None, "{kind}: dropped");
        drop(r);
        // The store is usable after a dropped writer (the lock / connection was given back).
        put_all(&*s, "t", &[b"z"]);
        assert!(s.stats_json()["rollbacks"].as_u64().unwrap() >= 2, "{kind}");
    }
}

#[test]
fn scans_honour_bounds_limit_and_direction() {
    for kind in built() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(kind, dir.path());
        s.create_table("t").unwrap();
        s.create_table("u").unwrap();
        put_all(&*s, "t", &[b"a", b"b", b"c", b"d", b"e"]);
        put_all(&*s, "u", &[b"c"]); // another table's keys never show
        let mut t = s.begin_read().unwrap();
        let t_t = t.open("t").unwrap();
        let k = |v: &[&[u8]]| v.iter().map(|k| k.to_vec()).collect::<Vec<_>>();
        let scan = |t: &mut Box<dyn pagoda_workload::StoreTxn + '_>,
                    a: &[u8],
                    b: Option<&[u8]>,
                    l: usize,
                    rev: bool| keys(t.scan(t_t, a, b, l, rev).unwrap());
        assert_eq!(
            scan(&mut t, b"b", Some(b"d"), 10, false),
            k(&[b"b", b"c"]),
            "{kind}"
        );
        assert_eq!(
            scan(&mut t, b"b", Some(b"d"), 10, true),
            k(&[b"c", b"b"]),
            "{kind}"
        );
        assert_eq!(scan(&mut t, b"", None, 2, true), k(&[b"e", b"d"]), "{kind}");
        assert_eq!(
            scan(&mut t, b"bb", None, 2, false),
            k(&[b"c", b"d"]),
            "{kind}"
        );
        assert_eq!(
            scan(&mut t, b"a", None, usize::MAX, false).len(),
            5,
            "{kind}"
        );
        assert!(
            scan(&mut t, b"d", Some(b"b"), 10, false).is_empty(),
            "{kind}"
        );
        assert!(scan(&mut t, b"a", None, 0, false).is_empty(), "{kind}");
        let rows = t.scan(t_t, b"c", Some(b"d"), 1, false).unwrap();
        assert_eq!(
            rows,
            vec![(b"c".to_vec(), b"c!".to_vec())],
            "{kind}: values"
        );
        drop(t);
        // A writer's scan sees its own writes.
        let mut w = s.begin().unwrap();
        let t_t = w.open("t").unwrap();
        w.put(t_t, b"bz", b"1").unwrap();
        w.delete(t_t, b"c").unwrap();
        let got = keys(w.scan(t_t, b"b", Some(b"d"), 10, false).unwrap());
        assert_eq!(got, k(&[b"b", b"bz"]), "{kind}: own writes in a scan");
    }
}

#[test]
fn committed_data_survives_reopening() {
    for kind in built() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = store(kind, dir.path());
            s.create_table("t").unwrap();
            s.create_table("other").unwrap();
            put_all(&*s, "t", &[b"k1", b"k2"]);
            let mut t = s.begin().unwrap();
            let t_t = t.open("t").unwrap();
            t.put(t_t, b"uncommitted", b"1").unwrap();
            drop(t);
        }
        assert!(kind.path(dir.path()).exists(), "{kind}");
        let s = store(kind, dir.path());
        let mut r = s.begin_read().unwrap();
        let t_t = r.open("t").unwrap();
        let other_t = r.open("other").unwrap();
        let all = keys(r.scan(t_t, b"", None, 100, false).unwrap());
        assert_eq!(all, vec![b"k1".to_vec(), b"k2".to_vec()], "{kind}");
        assert!(
            r.scan(other_t, b"", None, 10, false).unwrap().is_empty(),
            "{kind}"
        );
    }
}

/// Runs random operations in transactions that commit or roll back on `s` and on `MemStore`,
/// the reference, and returns the first difference: the round, whether the round before it
/// rolled back, and both outputs.
fn diverges_from_reference(s: &dyn Store, seed: u64) -> Option<String> {
    let m = MemStore::new();
    for st in [s, &m as &dyn Store] {
        st.create_table("t").unwrap();
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut rolled_back = false;
    for round in 0..40 {
        let commit = rng.gen_bool(0.7);
        let ops: Vec<(u8, u8, u8, usize, bool)> = (0..rng.gen_range(1..12))
            .map(|_| {
                (
                    rng.gen_range(0..4),
                    rng.gen_range(0..20),
                    rng.gen(),
                    rng.gen_range(0..6),
                    rng.gen(),
                )
            })
            .collect();
        let mut outs: Vec<Vec<String>> = Vec::new();
        for st in [s, &m as &dyn Store] {
            let mut t = st.begin().unwrap();
            let t_t = t.open("t").unwrap();
            let mut out = Vec::new();
            for &(op, k, v, limit, rev) in &ops {
                let key = [b'k', k];
                out.push(match op {
                    0 => format!("{:?}", t.put(t_t, &key, &[v]).unwrap()),
                    1 => format!("{:?}", t.delete(t_t, &key).unwrap()),
                    2 => format!("{:?}", t.get(t_t, &key).unwrap()),
                    _ => {
                        let end = [b'k', k.saturating_add(v % 8)];
                        format!("{:?}", t.scan(t_t, &key, Some(&end), limit, rev).unwrap())
                    }
                });
            }
            if commit {
                t.commit().unwrap();
            } else {
                t.rollback().unwrap();
            }
            outs.push(out);
        }
        if outs[0] != outs[1] {
            return Some(format!(
                "round {round} (after a rollback: {rolled_back}): {:?} against the reference's {:?}",
                outs[0], outs[1]
            ));
        }
        rolled_back = !commit;
    }
    let all = |st: &dyn Store| {
        let mut r = st.begin_read().unwrap();
        let t = r.open("t").unwrap();
        r.scan(t, b"", None, 1000, false)
    };
    let (got, want) = (all(s).unwrap(), all(&m).unwrap());
    (got != want).then(|| format!("final contents {got:?} against the reference's {want:?}"))
}

/// Random operations in transactions that commit or roll back give what `MemStore` gives.
#[test]
fn random_operations_match_the_reference() {
    for kind in built() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(kind, dir.path());
        assert_eq!(diverges_from_reference(&*s, 7), None, "{kind}");
    }
}

/// pagoda's own adapter (its table handles kept for the transaction's life) gives what
/// `MemStore` gives too, on in-memory devices.
#[test]
fn pagoda_matches_the_reference() {
    let dev = || {
        pagoda_device::spec::DeviceSpec::parse("mem")
            .unwrap()
            .open()
            .unwrap()
    };
    let opts = pagoda_engine::DbOptions::with_devices(dev(), dev()).buffer_bytes(8 << 20);
    let db = pagoda_engine::Db::open(opts).unwrap();
    let s = pagoda_peers::PagodaStore::new(db, "pagoda on mem".into());
    assert_eq!(diverges_from_reference(&s, 7), None);
}

/// The reference check is trusted because it catches a planted bug, a store whose rollback
/// commits, at the first round that reads what a rollback should have discarded; the same
/// store without the bug passes on the same seed (the control).
#[test]
fn the_reference_check_catches_a_rollback_that_commits() {
    let control = planted::Store::new(false);
    assert_eq!(diverges_from_reference(&control, 7), None);
    let planted = planted::Store::new(true);
    let found = diverges_from_reference(&planted, 7).expect("the planted bug went unnoticed");
    assert!(found.contains("(after a rollback: true)"), "{found}");
}

/// A store over `MemStore` that forwards everything, and with `rollback_commits` commits
/// instead of rolling back.
mod planted {
    use pagoda_workload::{MemStore, StoreError, StoreTxn, TableId};

    type Rows = Vec<(Vec<u8>, Vec<u8>)>;

    pub(super) struct Store {
        inner: MemStore,
        rollback_commits: bool,
    }

    impl Store {
        pub(super) fn new(rollback_commits: bool) -> Self {
            Self {
                inner: MemStore::new(),
                rollback_commits,
            }
        }
    }

    struct Txn<'a> {
        inner: Box<dyn StoreTxn + 'a>,
        rollback_commits: bool,
    }

    impl pagoda_workload::Store for Store {
        fn create_table(&self, name: &str) -> Result<(), StoreError> {
            self.inner.create_table(name)
        }
        fn begin(&self) -> Result<Box<dyn StoreTxn + '_>, StoreError> {
            Ok(Box::new(Txn {
                inner: self.inner.begin()?,
                rollback_commits: self.rollback_commits,
            }))
        }
        fn stats_json(&self) -> serde_json::Value {
            self.inner.stats_json()
        }
        fn describe(&self) -> String {
            "planted".to_string()
        }
    }

    impl StoreTxn for Txn<'_> {
        fn open(&mut self, table: &str) -> Result<TableId, StoreError> {
            self.inner.open(table)
        }
        fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            self.inner.get(table, key)
        }
        fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
            self.inner.put(table, key, value)
        }
        fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool, StoreError> {
            self.inner.delete(table, key)
        }
        fn scan(
            &mut self,
            table: TableId,
            start: &[u8],
            end: Option<&[u8]>,
            limit: usize,
            reverse: bool,
        ) -> Result<Rows, StoreError> {
            self.inner.scan(table, start, end, limit, reverse)
        }
        fn commit(self: Box<Self>) -> Result<(), StoreError> {
            self.inner.commit()
        }
        fn rollback(self: Box<Self>) -> Result<(), StoreError> {
            if self.rollback_commits {
                self.inner.commit()
            } else {
                self.inner.rollback()
            }
        }
    }
}

#[test]
fn concurrent_writers_all_commit() {
    for kind in built() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(kind, dir.path());
        s.create_table("t").unwrap();
        std::thread::scope(|sc| {
            for th in 0..4u8 {
                let s = &s;
                sc.spawn(move || {
                    for i in 0..25u8 {
                        // A conflict is retryable by contract; retry as the driver does.
                        loop {
                            let mut t = s.begin().unwrap();
                            let t_t = t.open("t").unwrap();
                            t.put(t_t, &[th, i], b"v").unwrap();
                            match t.commit() {
                                Ok(()) => break,
                                Err(e) => assert!(e.is_retryable(), "{kind}: {e}"),
                            }
                        }
                    }
                });
            }
        });
        let mut r = s.begin_read().unwrap();
        let t_t = r.open("t").unwrap();
        assert_eq!(
            r.scan(t_t, b"", None, 1000, false).unwrap().len(),
            100,
            "{kind}"
        );
    }
}

#[test]
fn unknown_engine_names_the_choices() {
    let e = "postgres".parse::<PeerKind>().unwrap_err().to_string();
    assert!(e.contains("postgres") && e.contains("sqlite"), "{e}");
    assert_eq!("lmdb".parse::<PeerKind>().unwrap(), PeerKind::Lmdb);
    assert_eq!("fjall".parse::<PeerKind>().unwrap(), PeerKind::Fjall);
    // An engine left out of this build is refused in one line naming its feature.
    for kind in PeerKind::ALL.into_iter().filter(|k| !k.is_built()) {
        let feature = kind.feature().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let e = open(kind, dir.path(), &opts()).err().unwrap().to_string();
        assert!(e.contains(&format!("--features {feature}")), "{e}");
        assert!(!e.contains('\n'), "{e}");
        assert!(!kind.path(dir.path()).exists(), "{kind}: nothing created");
    }
}

/// A table created while another thread's writer is open, and that writer then using a
/// table: both finish (no lock-order deadlock between the engine's writer lock and the
/// store's own table map).
#[test]
fn creating_a_table_beside_an_open_writer_does_not_deadlock() {
    use std::sync::{mpsc, Arc};
    use std::time::Duration;
    for kind in built() {
        let dir = tempfile::tempdir().unwrap();
        let s: Arc<dyn Store> = Arc::from(store(kind, dir.path()));
        s.create_table("t").unwrap();
        let (began, wait_began) = mpsc::channel();
        let (done, all_done) = mpsc::channel();
        let writer = {
            let (s, done) = (Arc::clone(&s), done.clone());
            std::thread::spawn(move || {
                let mut t = s.begin().unwrap();
                let t_t = t.open("t").unwrap();
                began.send(()).unwrap();
                // Give the creator time to start waiting for the writer lock.
                std::thread::sleep(Duration::from_millis(200));
                t.put(t_t, b"k", b"v").unwrap();
                t.commit().unwrap();
                done.send("writer").unwrap();
            })
        };
        wait_began.recv().unwrap();
        let creator = {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                s.create_table("u").unwrap();
                done.send("creator").unwrap();
            })
        };
        for _ in 0..2 {
            all_done
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("{kind}: deadlock between create_table and a writer"));
        }
        writer.join().unwrap();
        creator.join().unwrap();
        let mut r = s.begin_read().unwrap();
        let t_t = r.open("t").unwrap();
        let u_t = r.open("u").unwrap();
        assert_eq!(r.get(t_t, b"k").unwrap(), Some(b"v".to_vec()), "{kind}");
        assert!(
            r.scan(u_t, b"", None, 1, false).unwrap().is_empty(),
            "{kind}"
        );
    }
}
