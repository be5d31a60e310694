#![allow(clippy::unwrap_used)]
//! Snapshot isolation: no dirty reads, repeatable reads (point and scan), no lost update,
//! read-your-own-writes, readers do not block writers, consistent snapshots under concurrency.
mod common;

use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions, Error};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn db() -> Db {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
    let db = Db::open(
        DbOptions::with_devices(d, l)
            .page_size(4096)
            .buffer_bytes(64 * 4096),
    )
    .unwrap();
    db.create_table("t").unwrap();
    db
}

/// Stops the writers even when a reader assertion fails.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn put(db: &Db, k: &[u8], v: &[u8]) {
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(k, v).unwrap();
    tx.commit().unwrap();
}

#[test]
fn no_dirty_read_and_repeatable_read() {
    let db = db();
    put(&db, b"k", b"v1");
    put(&db, b"m", b"m1");
    let reader = db.begin_read().unwrap();
    assert_eq!(
        reader.open_table("t").unwrap().get(b"k").unwrap().unwrap(),
        b"v1"
    );
    let writer = db.begin_write().unwrap();
    writer.open_table("t").unwrap().put(b"k", b"v2").unwrap();
    writer.open_table("t").unwrap().put(b"n", b"new").unwrap();
    // Uncommitted: invisible to others, visible to itself.
    assert_eq!(
        reader.open_table("t").unwrap().get(b"k").unwrap().unwrap(),
        b"v1"
    );
    assert_eq!(
        writer.open_table("t").unwrap().get(b"k").unwrap().unwrap(),
        b"v2"
    );
    assert_eq!(writer.open_table("t").unwrap().range(..).count(), 3);
    writer.commit().unwrap();
    // Committed after the reader began: still invisible to it (point and scan).
    assert_eq!(
        reader.open_table("t").unwrap().get(b"k").unwrap().unwrap(),
        b"v1"
    );
    assert_eq!(reader.open_table("t").unwrap().get(b"n").unwrap(), None);
    let all: Vec<_> = reader
        .open_table("t")
        .unwrap()
        .range(..)
        .map(|x| x.unwrap())
        .collect();
    assert_eq!(
        all,
        vec![
            (b"k".to_vec(), b"v1".to_vec()),
            (b"m".to_vec(), b"m1".to_vec())
        ]
    );
    // A new snapshot sees it.
    assert_eq!(common::read(&db, "t", b"k").unwrap(), b"v2");
    // Deletes too.
    let d = db.begin_write().unwrap();
    d.open_table("t").unwrap().delete(b"m").unwrap();
    d.commit().unwrap();
    assert_eq!(
        reader.open_table("t").unwrap().get(b"m").unwrap().unwrap(),
        b"m1"
    );
    assert_eq!(common::read(&db, "t", b"m"), None);
}

#[test]
fn lost_update_is_a_conflict() {
    let db = db();
    put(&db, b"x", b"0");
    let a = db.begin_write().unwrap();
    let b = db.begin_write().unwrap();
    assert_eq!(a.open_table("t").unwrap().get(b"x").unwrap().unwrap(), b"0");
    assert_eq!(b.open_table("t").unwrap().get(b"x").unwrap().unwrap(), b"0");
    a.open_table("t").unwrap().put(b"x", b"a").unwrap();
    b.open_table("t").unwrap().put(b"x", b"b").unwrap();
    a.commit().unwrap();
    let e = b.commit().unwrap_err();
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    assert!(e.to_string().contains("retry"), "{e}");
    assert_eq!(common::read(&db, "t", b"x").unwrap(), b"a");
    // Writing after a newer commit is detected at put time too.
    let c = db.begin_write().unwrap();
    put(&db, b"x", b"d");
    assert!(matches!(
        c.open_table("t").unwrap().put(b"x", b"c"),
        Err(Error::Conflict { .. })
    ));
    assert!(matches!(c.commit(), Err(Error::Conflict { .. })));
    assert_eq!(db.stats().conflicts, 2);
    // Disjoint keys do not conflict.
    let e1 = db.begin_write().unwrap();
    let e2 = db.begin_write().unwrap();
    e1.open_table("t").unwrap().put(b"p", b"1").unwrap();
    e2.open_table("t").unwrap().put(b"q", b"2").unwrap();
    e1.commit().unwrap();
    e2.commit().unwrap();
}

#[test]
fn limits() {
    let db = db();
    let w = db.begin_write().unwrap();
    assert!(matches!(
        w.open_table("t").unwrap().put(&vec![0u8; 1025], b"v"),
        Err(Error::KeyTooLarge { .. })
    ));
    w.open_table("t")
        .unwrap()
        .put(&vec![7u8; 1024], &vec![1u8; 200_000])
        .unwrap();
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.open_table("t")
            .unwrap()
            .get(&vec![7u8; 1024])
            .unwrap()
            .unwrap()
            .len(),
        200_000
    );
    let w = db.begin_write().unwrap();
    assert!(matches!(
        w.open_table("t").unwrap().put(b"huge", &vec![0u8; 3 << 20]),
        Err(Error::ValueTooLarge { .. })
    ));
    assert!(matches!(db.create_table("t"), Err(Error::TableExists(_))));
    assert_eq!(db.list_tables(), vec!["t".to_string()]);
}

/// Transfers keep the sum constant; readers scanning concurrently must always see the same sum
/// (a consistent snapshot), and are never blocked by the writers.
#[test]
fn concurrent_snapshots_are_consistent() {
    let db = db();
    let accounts = 50u64;
    let tx = db.begin_write().unwrap();
    for i in 0..accounts {
        tx.open_table("t")
            .unwrap()
            .put(format!("acct{i:03}").as_bytes(), &100u64.to_le_bytes())
            .unwrap();
    }
    tx.commit().unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let db = &db;
            let stop = &stop;
            s.spawn(move || {
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    i = i
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let (a, b) = (i % accounts, (i >> 20) % accounts);
                    if a == b {
                        continue;
                    }
                    let ka = format!("acct{a:03}").into_bytes();
                    let kb = format!("acct{b:03}").into_bytes();
                    let tx = db.begin_write().unwrap();
                    let va = u64::from_le_bytes(
                        tx.open_table("t")
                            .unwrap()
                            .get(&ka)
                            .unwrap()
                            .unwrap()
                            .try_into()
                            .unwrap(),
                    );
                    let vb = u64::from_le_bytes(
                        tx.open_table("t")
                            .unwrap()
                            .get(&kb)
                            .unwrap()
                            .unwrap()
                            .try_into()
                            .unwrap(),
                    );
                    if va == 0 {
                        continue;
                    }
                    let r = tx
                        .open_table("t")
                        .and_then(|mut t| {
                            t.put(&ka, &(va - 1).to_le_bytes())?;
                            t.put(&kb, &(vb + 1).to_le_bytes())
                        })
                        .and_then(|()| tx.commit().map(|_| ()));
                    match r {
                        Ok(()) | Err(Error::Conflict { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
        let _stop = StopOnDrop(&stop);
        // At least 200 snapshots, and until the writers have committed a fair number.
        let mut scans = 0;
        while scans < 200 || (db.stats().commits < 50 && scans < 100_000) {
            scans += 1;
            let r = db.begin_read().unwrap();
            let sum: u64 = r
                .open_table("t")
                .unwrap()
                .range(..)
                .map(|x| u64::from_le_bytes(x.unwrap().1.try_into().unwrap()))
                .sum();
            let rev: u64 = r
                .open_table("t")
                .unwrap()
                .range_rev(..)
                .map(|x| u64::from_le_bytes(x.unwrap().1.try_into().unwrap()))
                .sum();
            assert_eq!(sum, accounts * 100);
            assert_eq!(rev, accounts * 100);
        }
    });
    assert!(db.stats().commits >= 50, "writers made no progress");
}

/// Large values (overflow pages) overwritten while other threads scan and read them: every
/// value read must be whole and from one version (no page of a freed, reused chain).
#[test]
fn overflow_values_under_concurrent_overwrite() {
    let db = db();
    let keys = 12u8;
    let val = |k: u8, ver: u8| {
        let mut v = vec![ver; 9000 + usize::from(k) * 100];
        v[0] = k;
        v
    };
    let tx = db.begin_write().unwrap();
    for k in 0..keys {
        tx.open_table("t").unwrap().put(&[k], &val(k, 0)).unwrap();
    }
    tx.commit().unwrap();
    let check = |k: &[u8], v: &[u8]| {
        assert_eq!(
            v.len(),
            9000 + usize::from(k[0]) * 100,
            "key {k:?}: wrong length"
        );
        assert_eq!(v[0], k[0]);
        assert!(
            v[1..].iter().all(|&b| b == v[1]),
            "key {k:?}: mixed versions"
        );
    };
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let db2 = &db;
        let stop2 = &stop;
        s.spawn(move || {
            let mut ver = 1u8;
            while !stop2.load(Ordering::Relaxed) {
                let tx = db2.begin_write().unwrap();
                for k in (ver % 3..keys).step_by(3) {
                    tx.open_table("t").unwrap().put(&[k], &val(k, ver)).unwrap();
                }
                tx.commit().unwrap();
                ver = ver.wrapping_add(1).max(1);
            }
        });
        let _stop = StopOnDrop(&stop);
        for round in 0..300 {
            let r = db.begin_read().unwrap();
            let mut n = 0;
            for x in r.open_table("t").unwrap().range(..) {
                let (k, v) = x.unwrap();
                check(&k, &v);
                n += 1;
            }
            assert_eq!(n, usize::from(keys), "round {round}");
            let k = [round as u8 % keys];
            check(&k, &r.open_table("t").unwrap().get(&k).unwrap().unwrap());
        }
    });
}
