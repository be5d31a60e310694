//! Each peer's own bulk path and durability point (`bulk_load`, `make_durable`), and the
//! isolation its read-write transactions give a read-modify-write.
#![allow(clippy::unwrap_used)] // tests: a failure should panic with the cause

use pagoda_peers::{open, PeerKind, PeerOptions};
use pagoda_workload::{Store, StoreError};
use std::path::Path;

fn built() -> Vec<PeerKind> {
    PeerKind::ALL.into_iter().filter(|k| k.is_built()).collect()
}

fn store(kind: PeerKind, dir: &Path) -> Box<dyn Store> {
    let opts = PeerOptions {
        cache_bytes: 4 << 20,
        lmdb_map_bytes: 1 << 30,
        ..PeerOptions::default()
    };
    open(kind, dir, &opts).unwrap()
}

/// Rows in ascending key order with values of varied length and content.
fn rows(n: u32, prefix: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let v = vec![(i % 251) as u8; 20 + (i % 180) as usize];
            (format!("{prefix}{i:08}").into_bytes(), v)
        })
        .collect()
}

#[test]
fn bulk_load_and_make_durable_survive_reopening() {
    // More rows than LMDB puts in one bulk transaction, so the load spans several.
    let first = rows(60_000, "b");
    // Sorts before every loaded key: LMDB cannot append it and takes ordinary puts.
    let second = rows(500, "a");
    for kind in built() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = store(kind, dir.path());
            s.create_table("t").unwrap();
            s.create_table("other").unwrap();
            let n = s.bulk_load("t", &mut first.clone().into_iter()).unwrap();
            assert_eq!(n, first.len() as u64, "{kind}");
            // Visible before make_durable, as the contract says.
            let mut r = s.begin_read().unwrap();
            let t_t = r.open("t").unwrap();
            assert_eq!(
                r.get(t_t, &first[777].0).unwrap().as_ref(),
                Some(&first[777].1)
            );
            drop(r);
            let n = s.bulk_load("t", &mut second.clone().into_iter()).unwrap();
            assert_eq!(n, second.len() as u64, "{kind}");
            assert_eq!(s.bulk_load("other", &mut std::iter::empty()).unwrap(), 0);
            s.make_durable().unwrap();
        }
        let s = store(kind, dir.path());
        let mut r = s.begin_read().unwrap();
        let t = r.open("t").unwrap();
        let got = r.scan(t, b"", None, usize::MAX, false).unwrap();
        drop(r);
        let want: Vec<_> = second.iter().chain(&first).cloned().collect();
        assert_eq!(got.len(), want.len(), "{kind}: rows after reopening");
        assert!(got == want, "{kind}: the rows read back differ");
        let mut r = s.begin_read().unwrap();
        let other_t = r.open("other").unwrap();
        assert!(r.scan(other_t, b"", None, 10, false).unwrap().is_empty());
        // An unknown table is refused by name.
        let e = s.bulk_load("missing", &mut rows(1, "x").into_iter());
        assert!(
            matches!(&e, Err(StoreError::Other(m)) if m.contains("missing")),
            "{kind}: {e:?}"
        );
    }
}

/// Four threads each add 1 to one shared counter 50 times, each addition a read-modify-write
/// transaction retried on conflict: every addition must count.
#[test]
fn read_modify_write_transactions_lose_no_update() {
    for kind in built() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(kind, dir.path());
        s.create_table("t").unwrap();
        let mut t = s.begin().unwrap();
        let t_t = t.open("t").unwrap();
        t.put(t_t, b"n", &0u64.to_le_bytes()).unwrap();
        t.commit().unwrap();
        std::thread::scope(|sc| {
            for _ in 0..4 {
                let s = &s;
                sc.spawn(move || {
                    for _ in 0..50 {
                        loop {
                            let r = (|| {
                                let mut t = s.begin()?;
                                let table = t.open("t")?;
                                let v = t.get(table, b"n")?.unwrap();
                                let n = u64::from_le_bytes(v.try_into().unwrap());
                                // Widen the window between read and write.
                                std::thread::yield_now();
                                t.put(table, b"n", &(n + 1).to_le_bytes())?;
                                t.commit()
                            })();
                            match r {
                                Ok(()) => break,
                                Err(e) => assert!(e.is_retryable(), "{kind}: {e}"),
                            }
                        }
                    }
                });
            }
        });
        let mut r = s.begin_read().unwrap();
        let t = r.open("t").unwrap();
        let v = r.get(t, b"n").unwrap().unwrap();
        assert_eq!(u64::from_le_bytes(v.try_into().unwrap()), 200, "{kind}");
    }
}
