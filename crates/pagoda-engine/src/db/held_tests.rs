#![allow(clippy::unwrap_used)]
//! Overflow chains that commits free stay readable while a snapshot older than the commit
//! lives (`freelist.rs`, held pages).
//!
//! Regression (`overflow_values_under_concurrent_overwrite` in `tests/isolation.rs`, 12 of 200
//! runs: "overflow chain holds 1596 of 9400 bytes"): a point read copies the leaf's
//! pointer to a value's overflow chain and then follows it, without a latch between the
//! two. A commit in that window frees the chain, and before the fix the free list handed
//! those pages out at once (to the next key's new value in the same commit), so the reader
//! followed a chain rewritten under it. The version chain had the old value, but a failed
//! tree read reaches the caller. These tests hold that window open deterministically.

use super::Db;
use crate::btree;
use crate::format::{Node, Val};
use crate::DbOptions;
use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use std::sync::Arc;

fn db(log_bytes: u64) -> Db {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(log_bytes).unwrap());
    let db = Db::open(
        DbOptions::with_devices(d, l)
            .page_size(4096)
            .buffer_bytes(64 * 4096),
    )
    .unwrap();
    db.create_table("t").unwrap();
    db
}

fn val(k: u8, ver: u8, len: usize) -> Vec<u8> {
    let mut v = vec![ver; len];
    v[0] = k;
    v
}

fn put(db: &Db, rows: &[(u8, Vec<u8>)]) {
    let tx = db.begin_write().unwrap();
    for (k, v) in rows {
        tx.open_table("t").unwrap().put(&[*k], v).unwrap();
    }
    tx.commit().unwrap();
}

/// The tree's value of `k` as a pointer, as a reader copies it out of the leaf.
fn pointer(db: &Db, k: u8) -> Val {
    let root = db.table("t").unwrap().root;
    let v = btree::get(&db.inner.pool, root, &[k]).unwrap().unwrap();
    assert!(
        matches!(v, Val::Overflow { .. }),
        "key {k} is not in overflow pages"
    );
    v
}

fn next_page(db: &Db) -> u64 {
    match &db.inner.pool.read(db.inner.meta_page).unwrap().node {
        Node::Meta(m) => m.next_page,
        _ => panic!("no meta page"),
    }
}

/// Overwrites of keys 0..3 (three overflow pages each), version `ver`.
fn overwrite(db: &Db, ver: u8) {
    let rows: Vec<(u8, Vec<u8>)> = (0..3)
        .map(|k| (k, val(k, ver, 9000 + usize::from(k) * 100)))
        .collect();
    put(db, &rows);
}

#[test]
fn freed_chain_stays_readable_while_an_older_snapshot_lives() {
    let db = db(8 << 20);
    overwrite(&db, 0);
    let r = db.begin_read().unwrap();
    let stale = pointer(&db, 0);
    for ver in 1..=4 {
        overwrite(&db, ver);
    }
    // Key 0's old chain was freed by the first overwrite; keys 1 and 2 (and key 0 again)
    // took new pages since.
    assert_eq!(
        btree::load_value(&db.inner.pool, &stale).unwrap(),
        val(0, 0, 9000)
    );
    let t = r.open_table("t").unwrap();
    assert_eq!(t.get(&[0]).unwrap().unwrap(), val(0, 0, 9000));
    drop(t);
    drop(r);
    db.check().unwrap();
    // With the snapshot gone, the held pages are reused: the database stops growing.
    overwrite(&db, 5);
    let grown = next_page(&db);
    for ver in 6..=30 {
        overwrite(&db, ver);
    }
    assert_eq!(
        next_page(&db),
        grown,
        "freed overflow pages are never reused"
    );
    db.check().unwrap();
}

/// More held pages than the meta page's free list takes: the list spills into trunk pages,
/// and no held page may become a trunk (a trunk is rewritten at once).
#[test]
fn held_pages_beyond_the_meta_list_stay_intact() {
    let db = db(32 << 20);
    // About 390 pages a value: two overwrites hold more than the ~500 the meta list takes.
    let big = |ver: u8| val(7, ver, 1_600_000);
    put(&db, &[(7, big(0)), (8, val(8, 0, 9000))]);
    let r = db.begin_read().unwrap();
    let stale = pointer(&db, 7);
    let mut stale8 = Vec::new();
    for ver in 1..=3 {
        put(&db, &[(7, big(ver)), (8, val(8, ver, 9000))]);
        stale8.push((ver, pointer(&db, 8)));
        let r8 = db.begin_read().unwrap();
        drop(r8);
    }
    assert_eq!(btree::load_value(&db.inner.pool, &stale).unwrap(), big(0));
    // Key 8's chains of versions 1 and 2 were freed by commits the snapshot `r` predates.
    for (ver, p) in &stale8[..2] {
        assert_eq!(
            btree::load_value(&db.inner.pool, p).unwrap(),
            val(8, *ver, 9000)
        );
    }
    db.check().unwrap();
    drop(r);
    let grown = next_page(&db);
    for ver in 4..=8 {
        put(&db, &[(7, big(ver)), (8, val(8, ver, 9000))]);
    }
    assert_eq!(
        next_page(&db),
        grown,
        "held pages in trunks are never reused"
    );
    db.check().unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_table("t").unwrap();
    assert_eq!(t.get(&[7]).unwrap().unwrap(), big(8));
    assert_eq!(t.get(&[8]).unwrap().unwrap(), val(8, 8, 9000));
}
