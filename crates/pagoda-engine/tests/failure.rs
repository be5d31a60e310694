#![allow(clippy::unwrap_used)]
//! One way to fail: a panic on an engine thread becomes the database's sticky failure (typed,
//! naming the thread), and errors that belong to one transaction leave the database up.

mod common;

use pagoda_device::fault::{FaultDevice, Op};
use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use pagoda_engine::{fault::Event, CommitMode, Db, DbOptions, Error};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn devs() -> (DeviceRef, DeviceRef) {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(4 << 20).unwrap());
    (d, l)
}

fn opts(d: &DeviceRef, l: &DeviceRef) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(4096)
        .buffer_bytes(64 * 4096)
}

/// Polls `f` until it returns `Some`, for at most 10 s.
fn eventually<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if let Some(x) = f() {
            return Some(x);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

fn assert_panicked_on(e: &Error, thread: &str) {
    match e {
        Error::Failed(why) => match why.cause() {
            Error::Panicked { thread: t, message } => {
                assert_eq!(t, thread, "{e}");
                assert!(message.contains("planted"), "{e}");
            }
            other => panic!("expected a panic as the cause, got {other:?}"),
        },
        other => panic!("expected Error::Failed, got {other:?}"),
    }
}

#[test]
fn a_panic_in_the_background_thread_fails_the_database() {
    let (d, l) = devs();
    // The observer runs inline on the engine's threads: panic only on the background thread's
    // checkpoint.
    let observer = Arc::new(|e: Event| {
        let on_bg = std::thread::current().name() == Some("pagoda-bg");
        if on_bg && e == Event::CheckpointBegin {
            panic!("planted panic in a background checkpoint");
        }
    });
    let db = Db::open(
        opts(&d, &l)
            .background(true)
            .checkpoint_interval(Duration::from_millis(10))
            .observer(observer),
    )
    .unwrap();
    db.create_table("t").unwrap();
    let why = eventually(|| db.failure()).expect("the background panic must fail the database");
    assert!(
        matches!(why.cause(), Error::Panicked { thread, .. } if thread == "pagoda-bg"),
        "{why}"
    );
    // Sticky: every later write names the cause.
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"k", b"v").unwrap();
    let e = tx.commit().unwrap_err();
    assert_panicked_on(&e, "pagoda-bg");
    assert_panicked_on(&db.checkpoint().unwrap_err(), "pagoda-bg");
    assert!(db.stats().failed.unwrap().contains("planted"));
    db.abandon();
}

#[test]
fn a_panic_on_the_flush_thread_fails_pending_commits_and_the_database() {
    let (d, l) = devs();
    // Syncs held until the callback is registered: it must run on the flush thread.
    let gate = Arc::new(FaultDevice::new(l));
    let l: DeviceRef = gate.clone();
    let db = Db::open(opts(&d, &l).background(false).commit(CommitMode::Pipelined)).unwrap();
    db.create_table("t").unwrap();
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"a", b"1").unwrap();
    gate.hold(Op::Flush);
    // Durable callbacks run on the flush thread.
    tx.commit_pipelined()
        .unwrap()
        .on_durable(|_| panic!("planted panic in a durable callback"));
    gate.release(Op::Flush);
    let why = eventually(|| db.failure()).expect("the flush-thread panic must fail the database");
    assert!(
        matches!(why.cause(), Error::Panicked { thread, .. } if thread == "pagoda-flush"),
        "{why}"
    );
    // No later commit waits forever on a flush thread that is gone.
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"b", b"2").unwrap();
    let res = std::thread::scope(|s| s.spawn(move || tx.commit()).join()).expect("commit thread");
    assert_panicked_on(&res.unwrap_err(), "pagoda-flush");
    db.abandon();
}

#[test]
fn errors_of_one_transaction_leave_the_database_up() {
    let (d, l) = devs();
    let db = Db::open(opts(&d, &l).background(false)).unwrap();
    db.create_table("t").unwrap();
    // A conflict aborts the later committer only.
    let a = db.begin_write().unwrap();
    let b = db.begin_write().unwrap();
    a.open_table("t").unwrap().put(b"k", b"a").unwrap();
    b.open_table("t").unwrap().put(b"k", b"b").unwrap();
    a.commit().unwrap();
    assert!(matches!(b.commit(), Err(Error::Conflict { .. })));
    // A transaction whose record cannot fit in the log is refused before it changes anything.
    let big = db.begin_write().unwrap();
    for i in 0..2_000u32 {
        big.open_table("t")
            .unwrap()
            .put(&i.to_be_bytes(), &[7u8; 900])
            .unwrap();
    }
    assert!(matches!(big.commit(), Err(Error::LogFull { .. })));
    // A missing table: the caller's mistake, not the database's.
    assert!(matches!(
        db.begin_write().unwrap().open_table("nope"),
        Err(Error::NoSuchTable(_))
    ));
    assert!(db.failure().is_none(), "{:?}", db.failure());
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"after", b"ok").unwrap();
    tx.commit().unwrap();
    assert_eq!(common::read(&db, "t", b"after").unwrap(), b"ok");
    db.close().unwrap();
}
