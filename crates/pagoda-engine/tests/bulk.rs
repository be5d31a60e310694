#![allow(clippy::unwrap_used)]
//! `Db::bulk_load`: the tree it builds reads back by point reads and scans, passes the
//! paranoid check, survives a crash right after it returns (redo of the install record), takes
//! later commits (also redone onto the loaded leaves after a crash), and bad input is refused
//! with nothing loaded. Power cuts during loads: `pagoda-crashtest`'s bulk test.
mod common;

use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions, Error};
use std::sync::Arc;

const PAGE: usize = 4096;

fn devices() -> (DeviceRef, DeviceRef) {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
    (d, l)
}

fn opts(d: &DeviceRef, l: &DeviceRef) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(PAGE)
        .buffer_bytes(64 * PAGE)
        .background(false)
        .paranoid(true)
}

fn key(i: u32) -> Vec<u8> {
    // Some long keys, so that internal nodes hold few separators and the tree gets deep.
    let mut k = format!("k{i:08}").into_bytes();
    if i.is_multiple_of(7) {
        k.resize(200, b'x');
    }
    k
}

/// Values of many sizes, a few of them in overflow pages.
fn value(i: u32) -> Vec<u8> {
    let len = match i % 50 {
        0 => 3 * PAGE + 17,
        n => 10 + (n as usize * 37) % 900,
    };
    let mut v = format!("v{i}|").into_bytes();
    v.resize(len, (i % 251) as u8);
    v
}

fn rows(n: u32) -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> {
    (0..n).map(|i| (key(i), value(i)))
}

fn assert_loaded(db: &Db, n: u32, when: &str) {
    let r = db.begin_read().unwrap();
    for i in (0..n).step_by(13) {
        assert_eq!(
            r.open_table("t").unwrap().get(&key(i)).unwrap(),
            Some(value(i)),
            "{when}: row {i}"
        );
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = r
        .open_table("t")
        .unwrap()
        .range(..)
        .map(|x| x.unwrap())
        .collect();
    assert_eq!(all.len(), n as usize, "{when}: scan");
    assert!(all.iter().zip(rows(n)).all(|(a, b)| *a == b), "{when}");
    drop(r);
    let c = db.check().unwrap();
    assert_eq!(
        c.entries,
        u64::from(n) + 1,
        "{when}: check (plus the catalog's entry)"
    );
}

#[test]
fn bulk_load_builds_a_tree_that_reads_back_and_survives_a_crash() {
    let (d, l) = devices();
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    let n = 5_000;
    assert_eq!(db.bulk_load("t", &mut rows(n)).unwrap(), u64::from(n));
    assert!(db.tree_depth("t").unwrap() >= 3, "a deep tree");
    assert_loaded(&db, n, "after the load");
    // A crash right after: only the install record says the tree is there.
    db.abandon();
    let db = Db::open(opts(&d, &l)).unwrap();
    assert_loaded(&db, n, "after a crash");
    // Later commits change loaded leaves; after a crash redo applies them onto those leaves.
    let tx = db.begin_write().unwrap();
    tx.open_table("t")
        .unwrap()
        .put(&key(10), b"changed")
        .unwrap();
    tx.open_table("t").unwrap().delete(&key(20)).unwrap();
    tx.open_table("t")
        .unwrap()
        .put(b"k00000010a", b"new")
        .unwrap();
    tx.commit().unwrap();
    db.abandon();
    let db = Db::open(opts(&d, &l)).unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.open_table("t").unwrap().get(&key(10)).unwrap().as_deref(),
        Some(&b"changed"[..])
    );
    assert_eq!(r.open_table("t").unwrap().get(&key(20)).unwrap(), None);
    assert_eq!(
        r.open_table("t")
            .unwrap()
            .get(b"k00000010a")
            .unwrap()
            .as_deref(),
        Some(&b"new"[..])
    );
    assert_eq!(
        r.open_table("t").unwrap().get(&key(30)).unwrap(),
        Some(value(30))
    );
    drop(r);
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn one_row_and_no_rows() {
    let (d, l) = devices();
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    assert_eq!(db.bulk_load("t", &mut rows(0)).unwrap(), 0);
    assert_eq!(db.bulk_load("t", &mut rows(1)).unwrap(), 1);
    assert_loaded(&db, 1, "one row");
    assert_eq!(db.tree_depth("t").unwrap(), 1);
    db.close().unwrap();
}

#[test]
fn bad_input_is_refused_and_loads_nothing() {
    let (d, l) = devices();
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    let mut unsorted = vec![(key(1), value(1)), (key(3), value(3)), (key(2), value(2))].into_iter();
    match db.bulk_load("t", &mut unsorted) {
        Err(Error::KeysNotAscending { table, row }) => assert_eq!((table.as_str(), row), ("t", 2)),
        other => panic!("expected KeysNotAscending, got {other:?}"),
    }
    let mut dup = vec![(key(1), value(1)), (key(1), value(2))].into_iter();
    assert!(matches!(
        db.bulk_load("t", &mut dup),
        Err(Error::KeysNotAscending { row: 1, .. })
    ));
    let mut long = std::iter::once((vec![b'a'; 2000], b"v".to_vec()));
    assert!(matches!(
        db.bulk_load("t", &mut long),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(
        db.bulk_load("nope", &mut rows(3)),
        Err(Error::NoSuchTable(_))
    ));
    // The failed loads left nothing: a load now works, and a second one is refused.
    assert_eq!(db.bulk_load("t", &mut rows(300)).unwrap(), 300);
    assert_loaded(&db, 300, "after refused loads");
    let e = db.bulk_load("t", &mut rows(3)).unwrap_err();
    assert!(matches!(e, Error::TableNotEmpty(ref t) if t == "t"), "{e}");
    assert!(e.to_string().contains("not empty"), "{e}");
    db.close().unwrap();
}

#[test]
fn a_full_device_refuses_the_load_and_keeps_the_table_empty() {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(1 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    assert!(matches!(
        db.bulk_load("t", &mut rows(20_000)),
        Err(Error::Full { .. })
    ));
    assert_eq!(common::count(&db, "t"), 0);
    // The pages it wrote are free for ordinary commits.
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"a", b"b").unwrap();
    tx.commit().unwrap();
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn a_write_failing_mid_load_returns_its_error_and_loads_nothing() {
    use pagoda_device::fault::{Failure, Fault, FaultDevice, Op};
    let mem: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let fault = Arc::new(FaultDevice::new(mem));
    let d: DeviceRef = fault.clone();
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    // 20,000 rows are many runs of 256 pages: the third run's write fails, in the writer
    // thread, while the builder encodes the next.
    fault
        .inject(Fault::Fail {
            op: Op::Write,
            after: 2,
            times: 1,
            failure: Failure::Eio,
        })
        .unwrap();
    let e = db.bulk_load("t", &mut rows(20_000)).unwrap_err();
    assert!(
        matches!(&e, Error::Device(_)) || e.to_string().contains("I/O"),
        "the device's error, not the builder's: {e}"
    );
    assert!(!e.to_string().contains("writer stopped"), "{e}");
    fault.clear();
    drop(db);
    // Nothing of the load is visible after a reopen (the table stays empty).
    let db = Db::open(opts(&d, &l)).unwrap();
    assert_eq!(common::count(&db, "t"), 0);
    db.close().unwrap();
}
