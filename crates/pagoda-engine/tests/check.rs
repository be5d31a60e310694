#![allow(clippy::unwrap_used)]
//! The paranoid check finds structural faults that pass every page checksum.

use pagoda_device::mem::MemDevice;
use pagoda_device::{DeviceRef, WriteHints, SECTOR_SIZE};
use pagoda_engine::format::{decode_page, encode_page, Node, Page};
use pagoda_engine::{Db, DbOptions, Error};
use std::sync::Arc;

const PS: usize = 4096;

fn opts(d: &DeviceRef, l: &DeviceRef) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(PS)
        .buffer_bytes(1024 * PS)
        .background(false)
}

/// A database with deep trees, overflow values and deletes; returns the rows kept.
fn build(d: &DeviceRef, l: &DeviceRef) -> u64 {
    let db = Db::open(opts(d, l)).unwrap();
    db.create_table("t").unwrap();
    db.create_table("u").unwrap();
    let mut kept = 0;
    for round in 0..8u32 {
        let tx = db.begin_write().unwrap();
        for i in 0..300u32 {
            let k = format!("k{:05}-{}", round * 300 + i, "x".repeat(200));
            let v = if i % 50 == 0 {
                vec![7u8; 9000]
            } else {
                vec![1u8; 40]
            };
            tx.open_table("t").unwrap().put(k.as_bytes(), &v).unwrap();
            tx.open_table("u")
                .unwrap()
                .put(&i.to_be_bytes(), b"u")
                .unwrap();
        }
        tx.commit().unwrap();
    }
    let tx = db.begin_write().unwrap();
    for i in (0..2400u32).step_by(3) {
        let k = format!("k{i:05}-{}", "x".repeat(200));
        tx.open_table("t").unwrap().delete(k.as_bytes()).unwrap();
    }
    tx.commit().unwrap();
    kept += 2400 - 800 + 300;
    let r = db.check().unwrap();
    assert_eq!(r.trees, 3, "{r:?}");
    assert_eq!(r.entries, kept + 2, "{r:?}"); // + the catalog's two tables
    assert!(r.max_depth >= 3, "{r:?}");
    db.close().unwrap();
    kept
}

fn read_page(d: &DeviceRef, pid: u64) -> Option<Page> {
    let mut buf = vec![0u8; PS];
    d.read(pid * (PS / SECTOR_SIZE) as u64, &mut buf).ok()?;
    decode_page(&buf, pid).ok()
}

fn write_page(d: &DeviceRef, p: &Page) {
    let mut buf = Vec::new();
    encode_page(p, PS, &mut buf);
    d.write(
        p.id * (PS / SECTOR_SIZE) as u64,
        &buf,
        WriteHints::default(),
    )
    .unwrap();
    d.flush().unwrap();
}

/// The first page in use (by id) that `pick` accepts (free pages keep stale contents).
fn find(d: &DeviceRef, pick: impl Fn(&Node) -> bool) -> Page {
    let pages: Vec<Page> = (0..4096).filter_map(|pid| read_page(d, pid)).collect();
    let free: Vec<u64> = pages
        .iter()
        .find_map(|p| match &p.node {
            Node::Meta(m) => Some(m.free.clone()),
            _ => None,
        })
        .unwrap();
    pages
        .into_iter()
        .find(|p| !free.contains(&p.id) && pick(&p.node))
        .expect("no such page")
}

fn devs() -> (DeviceRef, DeviceRef) {
    (
        Arc::new(MemDevice::with_capacity(64 << 20).unwrap()),
        Arc::new(MemDevice::with_capacity(16 << 20).unwrap()),
    )
}

fn assert_caught(d: &DeviceRef, l: &DeviceRef, what: &str) {
    // Every page still passes its checksum: a plain open does not notice.
    let db = Db::open(opts(d, l)).unwrap();
    let e = db.check().unwrap_err();
    assert!(matches!(e, Error::Corruption { .. }), "{what}: {e}");
    db.close().unwrap();
    match Db::open(opts(d, l).paranoid(true)) {
        Err(Error::Corruption { .. }) => {}
        other => panic!("{what}: a paranoid open must refuse, got {other:?}"),
    }
}

#[test]
fn a_healthy_database_passes() {
    let (d, l) = devs();
    build(&d, &l);
    let db = Db::open(opts(&d, &l).paranoid(true)).unwrap();
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn keys_out_of_order_in_a_leaf_are_caught() {
    let (d, l) = devs();
    build(&d, &l);
    let mut p = find(
        &d,
        |n| matches!(n, Node::Leaf(es) if es.len() > 4 && es[0].0.starts_with(b"k")),
    );
    if let Node::Leaf(es) = &mut p.node {
        es.swap(1, 2);
    }
    write_page(&d, &p);
    assert_caught(&d, &l, "swapped leaf keys");
}

#[test]
fn a_page_reached_twice_is_caught() {
    let (d, l) = devs();
    build(&d, &l);
    let mut p = find(
        &d,
        |n| matches!(n, Node::Internal { children, .. } if children.len() > 2),
    );
    if let Node::Internal { children, .. } = &mut p.node {
        children[1] = children[0];
    }
    write_page(&d, &p);
    assert_caught(&d, &l, "duplicate child");
}

#[test]
fn a_short_overflow_chain_is_caught() {
    let (d, l) = devs();
    build(&d, &l);
    let mut p = find(
        &d,
        |n| matches!(n, Node::Overflow { next, .. } if *next != 0),
    );
    if let Node::Overflow { next, .. } = &mut p.node {
        *next = 0;
    }
    write_page(&d, &p);
    assert_caught(&d, &l, "cut overflow chain");
}
