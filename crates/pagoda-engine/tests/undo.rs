#![allow(clippy::unwrap_used)]
//! A commit that fails half-way for want of room (a full device, a full buffer pool) is taken
//! back in memory: the error goes to that transaction only, none of its writes show, every
//! tree stays well formed, and the database goes on.

use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions, Error};
use std::sync::Arc;

const PAGE: usize = 4096;

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}-{}", "k".repeat(300)).into_bytes()
}

fn open(d: &DeviceRef, l: &DeviceRef, frames: usize) -> Db {
    Db::open(
        DbOptions::with_devices(d.clone(), l.clone())
            .page_size(PAGE)
            .buffer_bytes(frames * PAGE)
            .background(false),
    )
    .unwrap()
}

/// Every committed key holds its committed value, and nothing else is there.
fn assert_holds(db: &Db, committed: &[(Vec<u8>, Vec<u8>)]) {
    let r = db.begin_read().unwrap();
    let all: Vec<(Vec<u8>, Vec<u8>)> = r
        .open_table("t")
        .unwrap()
        .range(..)
        .map(Result::unwrap)
        .collect();
    assert_eq!(all.len(), committed.len());
    for ((k, v), (ck, cv)) in all.iter().zip(committed) {
        assert_eq!(k, ck);
        assert_eq!(v, cv, "key {}", String::from_utf8_lossy(k));
    }
    db.check().unwrap();
}

#[test]
fn a_full_device_mid_commit_fails_only_that_transaction() {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(2 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
    let db = open(&d, &l, 256);
    db.create_table("t").unwrap();
    let mut committed = Vec::new();
    let mut i = 0u32;
    // Fill the device with transactions of 20 rows: the failing one has applied some of its
    // rows (and split some leaves) when it runs out of pages.
    let err = loop {
        let tx = db.begin_write().unwrap();
        let rows: Vec<_> = (i..i + 20).map(|j| (key(j), vec![b'v'; 500])).collect();
        for (k, v) in &rows {
            tx.open_table("t").unwrap().put(k, v).unwrap();
        }
        match tx.commit() {
            Ok(_) => committed.extend(rows),
            Err(e) => break e,
        }
        i += 20;
        assert!(i < 100_000, "the device never filled up");
    };
    assert!(matches!(err, Error::Full { .. }), "got {err}");
    assert!(db.failure().is_none(), "{:?}", db.failure());
    committed.sort();
    assert_holds(&db, &committed);
    // The database goes on: free some room and write again.
    let tx = db.begin_write().unwrap();
    for (k, _) in committed.drain(..200) {
        tx.open_table("t").unwrap().delete(&k).unwrap();
    }
    tx.commit().unwrap();
    let tx = db.begin_write().unwrap();
    tx.open_table("t")
        .unwrap()
        .put(&key(999_999), b"after")
        .unwrap();
    tx.commit().unwrap();
    committed.push((key(999_999), b"after".to_vec()));
    committed.sort();
    assert_holds(&db, &committed);
    // And a crash keeps exactly the committed state.
    db.abandon();
    let db = open(&d, &l, 256);
    assert_holds(&db, &committed);
}

/// A 24-page pool and no spill room: the pool alone must hold a commit's pages.
fn open_tight(d: &DeviceRef, l: &DeviceRef) -> Db {
    Db::open(
        DbOptions::with_devices(d.clone(), l.clone())
            .page_size(PAGE)
            .buffer_bytes(24 * PAGE)
            .commit_spill_bytes(0)
            .background(false),
    )
    .unwrap()
}

#[test]
fn a_full_pool_mid_commit_fails_only_that_transaction() {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    let db = open_tight(&d, &l);
    db.create_table("t").unwrap();
    let mut committed = Vec::new();
    for i in 0..40u32 {
        let tx = db.begin_write().unwrap();
        tx.open_table("t").unwrap().put(&key(i), b"small").unwrap();
        tx.commit().unwrap();
        committed.push((key(i), b"small".to_vec()));
    }
    // One transaction that changes far more pages than the pool holds.
    let tx = db.begin_write().unwrap();
    for i in 0..400u32 {
        tx.open_table("t")
            .unwrap()
            .put(&key(i), &[b'x'; 900])
            .unwrap();
    }
    let err = tx.commit().unwrap_err();
    assert!(matches!(err, Error::BufferFull), "got {err}");
    assert!(db.failure().is_none(), "{:?}", db.failure());
    assert_holds(&db, &committed);
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(&key(0), b"after").unwrap();
    tx.commit().unwrap();
    committed[0].1 = b"after".to_vec();
    assert_holds(&db, &committed);
    db.close().unwrap();
    let db = open_tight(&d, &l);
    assert_holds(&db, &committed);
}

#[test]
fn in_place_updates_of_a_failed_commit_are_taken_back() {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    let db = open_tight(&d, &l);
    db.create_table("t").unwrap();
    let mut committed = Vec::new();
    for i in 0..40u32 {
        let tx = db.begin_write().unwrap();
        tx.open_table("t").unwrap().put(&key(i), b"small").unwrap();
        tx.commit().unwrap();
        committed.push((key(i), b"small".to_vec()));
    }
    // Same-size updates change every leaf in place (no copy of the page is journaled); the
    // inserts after them split the last of those leaves (a copy taken after its in-place
    // changes) and then exhaust the pool.
    let tx = db.begin_write().unwrap();
    for i in 0..40u32 {
        tx.open_table("t").unwrap().put(&key(i), b"SMALL").unwrap();
    }
    tx.open_table("t").unwrap().delete(&key(3)).unwrap();
    for i in 40..440u32 {
        tx.open_table("t")
            .unwrap()
            .put(&key(i), &[b'x'; 900])
            .unwrap();
    }
    let err = tx.commit().unwrap_err();
    assert!(matches!(err, Error::BufferFull), "got {err}");
    assert!(db.failure().is_none(), "{:?}", db.failure());
    assert_holds(&db, &committed);
    db.close().unwrap();
    let db = open_tight(&d, &l);
    assert_holds(&db, &committed);
}
