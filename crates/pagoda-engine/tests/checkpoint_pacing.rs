#![allow(clippy::unwrap_used)]
//! The background checkpoint spreads its page writes (paced by the log's growth and the
//! checkpoint interval), and turns to full speed when the database closes or a caller asks for
//! a checkpoint; written at full speed (pacing 0) it ends at once.

use pagoda_device::mem::MemDevice;
use pagoda_engine::{Db, DbOptions, Error, TornMode};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LOG: u64 = 4 << 20;

fn open(data: &Arc<MemDevice>, log: &Arc<MemDevice>, pacing: f64) -> Db {
    Db::open(
        DbOptions::with_devices(data.clone(), log.clone())
            .buffer_bytes(64 << 20)
            .torn(TornMode::Atomic)
            .log_capacity(LOG)
            .checkpoint_pacing(pacing),
    )
    .unwrap()
}

/// Dirties well over one cleaner batch of pages and fills just over half of the log (where the
/// background thread begins a checkpoint), then stops writing.
fn fill(db: &Db) -> u32 {
    db.create_table("t").unwrap();
    let value = vec![5u8; 3000];
    let mut n = 0u32;
    while db.stats().log_used_bytes <= LOG / 2 + (64 << 10) {
        let tx = db.begin_write().unwrap();
        let mut t = tx.open_table("t").unwrap();
        for _ in 0..8 {
            t.put(&n.to_be_bytes(), &value).unwrap();
            n += 1;
        }
        drop(t);
        tx.commit().unwrap();
    }
    n
}

/// How long the log stays more than half used after the writes stop (the checkpoint running).
fn busy_for(db: &Db, most: Duration) -> Duration {
    let t0 = Instant::now();
    while db.stats().log_used_bytes > LOG / 2 && t0.elapsed() < most {
        std::thread::sleep(Duration::from_millis(5));
    }
    t0.elapsed()
}

fn devices() -> (Arc<MemDevice>, Arc<MemDevice>) {
    (
        Arc::new(MemDevice::with_capacity(256 << 20).unwrap()),
        Arc::new(MemDevice::with_capacity(LOG + (1 << 20)).unwrap()),
    )
}

fn check(data: &Arc<MemDevice>, log: &Arc<MemDevice>, n: u32) {
    let db = open(data, log, 0.5);
    let r = db.begin_read().unwrap();
    let t = r.open_table("t").unwrap();
    for i in 0..n {
        assert_eq!(
            t.get(&i.to_be_bytes()).unwrap().unwrap().len(),
            3000,
            "row {i}"
        );
    }
    drop(t);
    drop(r);
    db.close().unwrap();
}

#[test]
fn a_paced_checkpoint_waits_for_the_log_and_hurries_when_the_database_closes() {
    let (data, log) = devices();
    let db = open(&data, &log, 1.0);
    let n = fill(&db);
    // No more log grows and the interval's window (60 s) is long: the checkpoint writes its
    // first batch and then waits, so the log stays in use.
    let held = busy_for(&db, Duration::from_millis(1500));
    assert!(
        held >= Duration::from_millis(1500),
        "a paced checkpoint with no log growth ended after {held:?}"
    );
    // Closing turns it to full speed (else it would wait for its 60 s window).
    let t0 = Instant::now();
    db.close().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "close took {:?}",
        t0.elapsed()
    );
    check(&data, &log, n);
}

#[test]
fn an_explicit_checkpoint_hurries_a_paced_one() {
    let (data, log) = devices();
    let db = open(&data, &log, 1.0);
    let n = fill(&db);
    busy_for(&db, Duration::from_millis(300));
    let t0 = Instant::now();
    db.checkpoint().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "checkpoint took {:?}",
        t0.elapsed()
    );
    assert!(db.stats().log_used_bytes < LOG / 2);
    let s = db.stats();
    assert!(
        s.paced_checkpoints >= 1,
        "{} paced of {}",
        s.paced_checkpoints,
        s.checkpoints
    );
    db.close().unwrap();
    check(&data, &log, n);
}

#[test]
fn an_unpaced_background_checkpoint_ends_at_once() {
    let (data, log) = devices();
    let db = open(&data, &log, 0.0);
    let n = fill(&db);
    let held = busy_for(&db, Duration::from_secs(20));
    assert!(
        held < Duration::from_secs(20),
        "the log stayed in use for {held:?}"
    );
    assert_eq!(db.stats().paced_checkpoints, 0);
    db.close().unwrap();
    check(&data, &log, n);
}

#[test]
fn pacing_outside_zero_to_one_is_refused() {
    let (data, log) = devices();
    for bad in [-0.1, 1.5, f64::NAN] {
        let e = Db::open(DbOptions::with_devices(data.clone(), log.clone()).checkpoint_pacing(bad))
            .err()
            .unwrap();
        assert!(
            matches!(&e, Error::Config(m) if m.contains("checkpoint pacing")),
            "{bad}: {e}"
        );
    }
}
