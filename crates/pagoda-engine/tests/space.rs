#![allow(clippy::unwrap_used)]
//! Running out of data pages, and reusing freed pages (issue 10, defects 2 and 3).

use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions, Error};
use std::sync::Arc;

const PAGE: usize = 4096;

fn opts(d: &DeviceRef, l: &DeviceRef) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(PAGE)
        .buffer_bytes(256 * PAGE)
        .background(false)
}

/// Keys in a scrambled order, so that splits happen in the middle of the tree.
fn key(i: u32) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(2_654_435_761) % 100_000_007).into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("v{i}-").repeat(12).into_bytes()
}

/// Asserts that every committed key reads back, by point reads and by a scan.
fn assert_all_readable(db: &Db, committed: u32, when: &str) {
    let r = db.begin_read().unwrap();
    let missing: Vec<u32> = (0..committed)
        .filter(|&i| r.get("t", &key(i)).unwrap().as_deref() != Some(&value(i)[..]))
        .collect();
    assert!(
        missing.is_empty(),
        "{when}: {} of {committed} committed keys do not read back (first: {:?})",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    assert_eq!(
        r.range("t", ..).unwrap().count(),
        committed as usize,
        "{when}: scan"
    );
}

/// Defect 2: a commit that runs out of pages in the middle of a node split gets `Error::Full`,
/// and the tree is left as it was: every key committed before reads back, in the same process
/// and after a reopen.
#[test]
fn full_device_during_a_split_loses_no_committed_key() {
    // 1 MiB: 16 header pages, 32 double-write pages, about 200 pages for the trees.
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(1 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    let mut committed = 0u32;
    let err = loop {
        let mut tx = db.begin().unwrap();
        tx.put("t", &key(committed), &value(committed)).unwrap();
        match tx.commit() {
            Ok(_) => committed += 1,
            Err(e) => break e,
        }
        assert!(committed < 100_000, "the device never filled up");
    };
    assert!(matches!(err, Error::Full { .. }), "got {err}");
    // Enough keys for a tree of several levels: the failing commit split more than a leaf.
    assert!(db.tree_depth("t").unwrap() >= 2);
    assert!(committed > 500, "only {committed} keys fit");
    assert_all_readable(&db, committed, "after the failed commit");
    db.abandon();
    let db = Db::open(opts(&d, &l)).unwrap();
    assert_all_readable(&db, committed, "after reopening");
}
