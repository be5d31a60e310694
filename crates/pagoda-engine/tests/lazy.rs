#![allow(clippy::unwrap_used)]
//! Lazy commit: committed and visible at once, durable within the flush interval (or at
//! `sync_log`), and a power cut keeps a prefix of the commit order.

use pagoda_device::mem::MemDevice;
use pagoda_device::{BlockDevice, DeviceRef, PowerCut};
use pagoda_engine::{CommitMode, Db, DbOptions};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn devices() -> (Arc<MemDevice>, Arc<MemDevice>) {
    (
        Arc::new(MemDevice::with_capacity(64 << 20).unwrap()),
        Arc::new(MemDevice::with_capacity(16 << 20).unwrap()),
    )
}

fn opts(d: &Arc<MemDevice>, l: &Arc<MemDevice>, every: Duration) -> DbOptions {
    let (d, l): (DeviceRef, DeviceRef) = (d.clone(), l.clone());
    DbOptions::with_devices(d, l)
        .page_size(4096)
        .buffer_bytes(1 << 20)
        .background(false)
        .commit(CommitMode::Lazy)
        .lazy_flush_interval(every)
}

fn put(db: &Db, k: u32) -> u64 {
    let tx = db.begin_write().unwrap();
    tx.open_table("t")
        .unwrap()
        .put(format!("k{k:05}").as_bytes(), &k.to_le_bytes())
        .unwrap();
    tx.commit().unwrap().lsn
}

fn keys(db: &Db) -> Vec<u32> {
    let r = db.begin_read().unwrap();
    r.open_table("t")
        .unwrap()
        .range(..)
        .map(|kv| {
            String::from_utf8(kv.unwrap().0).unwrap()[1..]
                .parse()
                .unwrap()
        })
        .collect()
}

#[test]
fn lazy_commit_is_visible_before_it_is_durable() {
    let (d, l) = devices();
    // An interval far beyond the test: only sync_log makes anything durable.
    let db = Db::open(opts(&d, &l, Duration::from_secs(10))).unwrap();
    db.create_table("t").unwrap();
    let syncs = l.stats().flushes;
    let lsn = put(&db, 1);
    assert!(db.durable_lsn() < lsn, "a lazy commit waited for its sync");
    assert_eq!(l.stats().flushes, syncs, "a lazy commit synced the log");
    assert_eq!(keys(&db), vec![1], "a lazy commit is not visible at once");
    db.sync_log().unwrap();
    assert!(db.durable_lsn() >= lsn);
    db.close().unwrap();
}

#[test]
fn the_flush_thread_makes_a_lazy_commit_durable_on_its_own() {
    let (d, l) = devices();
    let db = Db::open(opts(&d, &l, Duration::from_millis(5))).unwrap();
    db.create_table("t").unwrap();
    let lsn = put(&db, 7);
    // No other commit, no sync_log: only the flush thread can make it durable.
    let t0 = Instant::now();
    while db.durable_lsn() < lsn {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "not durable after 20 s with a 5 ms flush interval"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    d.power_cut(1).unwrap();
    l.power_cut(2).unwrap();
    db.abandon();
    let db = Db::open(opts(&d, &l, Duration::from_millis(5))).unwrap();
    assert_eq!(keys(&db), vec![7]);
}

#[test]
fn a_power_cut_keeps_a_prefix_of_lazy_commits() {
    for seed in 0..12u64 {
        let (d, l) = devices();
        // A short interval: the flush thread writes and syncs while commits go on.
        let db = Db::open(opts(&d, &l, Duration::from_micros(500))).unwrap();
        db.create_table("t").unwrap();
        let n = 200 + 50 * seed as u32;
        let lsns: Vec<u64> = (0..n).map(|k| put(&db, k)).collect();
        // Durable by now at least; then stop the flush thread where it is (as a crash would)
        // and cut the power.
        let synced = db.durable_lsn();
        db.abandon();
        let durable = lsns.iter().filter(|&&lsn| lsn <= synced).count() as u32;
        d.power_cut(seed).unwrap();
        l.power_cut(seed ^ 0xff).unwrap();
        let db = Db::open(opts(&d, &l, Duration::from_millis(10))).unwrap();
        let got = keys(&db);
        let kept = got.len() as u32;
        assert_eq!(
            got,
            (0..kept).collect::<Vec<_>>(),
            "seed {seed}: the survivors are not a prefix of the commit order"
        );
        assert!(
            kept >= durable,
            "seed {seed}: {durable} commits were durable, {kept} survived"
        );
        db.close().unwrap();
    }
}
