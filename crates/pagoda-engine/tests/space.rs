#![allow(clippy::unwrap_used)]
//! Running out of data pages, and reusing freed pages (issue 10, defects 2 and 3).

mod common;

use common::superblock;
use pagoda_device::mem::MemDevice;
use pagoda_device::{DeviceRef, WriteHints};
use pagoda_engine::format::{decode_page, encode_page, Meta, Node, Page};
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
        .filter(|&i| {
            r.open_table("t").unwrap().get(&key(i)).unwrap().as_deref() != Some(&value(i)[..])
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{when}: {} of {committed} committed keys do not read back (first: {:?})",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    assert_eq!(
        r.open_table("t").unwrap().range(..).count(),
        committed as usize,
        "{when}: scan"
    );
}

/// Defect 2: a commit that runs out of pages in the middle of a node split gets `Error::Full`,
/// and the tree is left as it was: every key committed before reads back, in the same process
/// and after a reopen.
#[test]
fn full_device_during_a_split_loses_no_committed_key() {
    let (d, l) = small_devices();
    let db = Db::open(opts(&d, &l)).unwrap();
    let (committed, err) = fill(&db);
    assert!(matches!(err, Error::Full { .. }), "got {err}");
    // Enough keys for a tree of several levels: the failing commit split more than a leaf.
    assert!(db.tree_depth("t").unwrap() >= 2);
    assert!(committed > 500, "only {committed} keys fit");
    assert_all_readable(&db, committed, "after the failed commit");
    db.abandon();
    let db = Db::open(opts(&d, &l)).unwrap();
    assert_all_readable(&db, committed, "after reopening");
}

/// A full data device fails the transaction that needed a page, not the database: once rows
/// are deleted, new commits fit again, and survive a reopen.
#[test]
fn a_full_device_takes_commits_again_once_space_is_freed() {
    let (d, l) = small_devices();
    let db = Db::open(opts(&d, &l)).unwrap();
    let (committed, err) = fill(&db);
    assert!(matches!(err, Error::Full { .. }), "got {err}");
    assert!(db.failure().is_none(), "a full device failed the database");
    for chunk in (0..committed).collect::<Vec<_>>().chunks(50) {
        let tx = db.begin_write().unwrap();
        let mut t = tx.open_table("t").unwrap();
        for &i in chunk {
            t.delete(&key(i)).unwrap();
        }
        drop(t);
        tx.commit().unwrap();
    }
    db.checkpoint().unwrap();
    for i in committed..committed + 200 {
        let tx = db.begin_write().unwrap();
        tx.open_table("t").unwrap().put(&key(i), &value(i)).unwrap();
        tx.commit()
            .unwrap_or_else(|e| panic!("commit {i} after freeing space: {e}"));
    }
    db.abandon();
    let db = Db::open(opts(&d, &l)).unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_table("t").unwrap();
    assert_eq!(t.range(..).count(), 200);
    for i in committed..committed + 200 {
        assert_eq!(t.get(&key(i)).unwrap(), Some(value(i)));
    }
}

/// 1 MiB of data: 16 header pages, 32 double-write pages, about 200 pages for the trees.
fn small_devices() -> (DeviceRef, DeviceRef) {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(1 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
    (d, l)
}

/// Commits one key per transaction into a new table `t` until a commit fails; returns the keys
/// committed and the error.
fn fill(db: &Db) -> (u32, Error) {
    db.create_table("t").unwrap();
    let mut committed = 0u32;
    let err = loop {
        let tx = db.begin_write().unwrap();
        tx.open_table("t")
            .unwrap()
            .put(&key(committed), &value(committed))
            .unwrap();
        match tx.commit() {
            Ok(_) => committed += 1,
            Err(e) => break e,
        }
        assert!(committed < 100_000, "the device never filled up");
    };
    (committed, err)
}

/// The meta page on the data device (its `next_page` is the high-water mark of pages used).
fn meta_on_disk(d: &DeviceRef) -> Meta {
    let sb = superblock(d);
    let mut b = vec![0u8; PAGE];
    d.read(sb.meta_page * (PAGE / 4096) as u64, &mut b).unwrap();
    match decode_page(&b, sb.meta_page).unwrap().node {
        Node::Meta(m) => m,
        n => panic!("page {} is a {:?} page", sb.meta_page, n.kind()),
    }
}

fn row(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(900, b'a' + (round % 26) as u8);
    v
}

/// Defect 3: a fixed-size data set inserted and deleted over and over reuses the freed pages
/// every round, however many there are: the high-water mark stops growing. A round frees
/// about 1,000 pages, twice what the meta page's own list holds. Some rounds end in a crash,
/// so the free list also goes through the log and recovery.
#[test]
fn churn_reuses_freed_pages_without_limit() {
    const ROWS: u32 = 3000;
    const BATCH: u32 = 100;
    const ROUNDS: u32 = 12;
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(32 << 20).unwrap());
    let mut db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    let mut marks = Vec::new();
    for round in 0..ROUNDS {
        for start in (0..ROWS).step_by(BATCH as usize) {
            let tx = db.begin_write().unwrap();
            for i in start..start + BATCH {
                tx.open_table("t")
                    .unwrap()
                    .put(&key(i), &row(i, round))
                    .unwrap();
            }
            tx.commit().unwrap();
        }
        // Reused pages must not hold two things at once.
        let r = db.begin_read().unwrap();
        for i in 0..ROWS {
            assert_eq!(
                r.open_table("t").unwrap().get(&key(i)).unwrap(),
                Some(row(i, round)),
                "round {round}, row {i}"
            );
        }
        drop(r);
        for start in (0..ROWS).step_by(BATCH as usize) {
            let tx = db.begin_write().unwrap();
            for i in start..start + BATCH {
                tx.open_table("t").unwrap().delete(&key(i)).unwrap();
            }
            tx.commit().unwrap();
        }
        if round % 3 == 1 {
            // Crash before the checkpoint: recovery rebuilds the free list from the log.
            db.abandon();
            db = Db::open(opts(&d, &l)).unwrap();
        } else {
            db.checkpoint().unwrap();
        }
        assert_eq!(common::count(&db, "t"), 0);
        let meta = meta_on_disk(&d);
        // More pages are free than the meta page lists.
        assert_ne!(meta.free_trunk, 0, "round {round}: no free-list trunk");
        marks.push(meta.next_page);
    }
    db.close().unwrap();
    let grown = marks[ROUNDS as usize - 1] - marks[2];
    assert!(
        grown == 0,
        "the data device grew by {grown} pages after round 3 (high-water mark per round: {marks:?})"
    );
}

/// A trunk page that decodes but lists a page that cannot be free is a typed corruption
/// error naming the trunk when allocation reaches it, never a panic or a page handed out twice.
#[test]
fn a_damaged_trunk_is_a_typed_error() {
    const ROWS: u32 = 3000;
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(32 << 20).unwrap());
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    for del in [false, true] {
        for start in (0..ROWS).step_by(100) {
            let tx = db.begin_write().unwrap();
            for i in start..start + 100 {
                match del {
                    false => tx
                        .open_table("t")
                        .unwrap()
                        .put(&key(i), &row(i, 0))
                        .unwrap(),
                    true => tx.open_table("t").unwrap().delete(&key(i)).unwrap(),
                }
            }
            tx.commit().unwrap();
        }
    }
    db.close().unwrap();
    let meta = meta_on_disk(&d);
    let trunk = meta.free_trunk;
    assert_ne!(trunk, 0);
    // A well-formed trunk (valid checksum) naming page 1, in the superblock area. It keeps
    // the page's LSN: an older page would be "repaired" from its double-write copy at open.
    let mut old = vec![0u8; PAGE];
    d.read(trunk * (PAGE / 4096) as u64, &mut old).unwrap();
    let page = Page {
        id: trunk,
        lsn: decode_page(&old, trunk).unwrap().lsn,
        node: Node::Trunk {
            next: 0,
            free: vec![1],
        },
    };
    let mut buf = Vec::new();
    encode_page(&page, PAGE, &mut buf);
    d.write(trunk * (PAGE / 4096) as u64, &buf, WriteHints::default())
        .unwrap();
    let db = Db::open(opts(&d, &l)).unwrap();
    let mut i = 0;
    let err = loop {
        let tx = db.begin_write().unwrap();
        tx.open_table("t")
            .unwrap()
            .put(&key(i), &row(i, 1))
            .unwrap();
        if let Err(e) = tx.commit() {
            break e;
        }
        i += 1;
        assert!(i < ROWS, "the damaged trunk was never read");
    };
    // Corruption fails the database; the failure names it as its cause.
    let cause = match &err {
        Error::Failed(why) => why.cause(),
        e => e,
    };
    match cause {
        Error::Corruption {
            page_id, detail, ..
        } => {
            assert_eq!(*page_id, trunk);
            assert!(detail.contains("page 1"), "{detail}");
        }
        e => panic!("got {e}"),
    }
}
