#![allow(clippy::unwrap_used)]
//! DDL under concurrency: a drop is visible only once durable, and a reader of a table that
//! is dropped (and whose pages are reused) gets an error, never another table's rows.

use pagoda_device::mem::MemDevice;
mod common;

use pagoda_device::fault::{FaultDevice, Op};
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions, Error};
use std::sync::Arc;
use std::time::Duration;

fn open(d: &DeviceRef, l: &DeviceRef) -> Db {
    Db::open(
        DbOptions::with_devices(d.clone(), l.clone())
            .page_size(4096)
            .buffer_bytes(256 * 4096)
            .background(false),
    )
    .unwrap()
}

/// A database on RAM devices whose log syncs can be held or failed, with a table "t"; also
/// its data and log devices, to reopen it.
/// The database is in an `Arc`: the tests run its operations on threads of their own.
fn gated_with_table() -> (Arc<Db>, Arc<FaultDevice>, DeviceRef, DeviceRef) {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let gate = Arc::new(FaultDevice::new(Arc::new(
        MemDevice::with_capacity(8 << 20).unwrap(),
    )));
    let l: DeviceRef = gate.clone();
    let db = open(&d, &l);
    db.create_table("t").unwrap();
    (Arc::new(db), gate, d, l)
}

/// Drops "t" on another thread with the log's syncs held: the drop is logged, not durable.
fn drop_held(db: &Arc<Db>, gate: &FaultDevice) -> std::thread::JoinHandle<Result<(), Error>> {
    gate.hold(Op::Flush);
    let dropper = {
        let db = Arc::clone(db);
        std::thread::spawn(move || db.drop_table("t"))
    };
    assert!(
        gate.wait_until_held(Op::Flush, 1, Duration::from_secs(20)),
        "the drop never synced the log"
    );
    assert!(!dropper.is_finished(), "the drop returned before its sync");
    dropper
}

#[test]
fn a_drop_is_visible_only_once_durable() {
    let (db, gate, d, l) = gated_with_table();
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"row", b"kept").unwrap();
    tx.commit().unwrap();

    // The drop is logged but not durable: a crash now would keep the table, so nobody may
    // see it gone yet.
    let dropper = drop_held(&db, &gate);
    assert_eq!(db.list_tables(), vec!["t".to_string()]);
    assert_eq!(
        common::read(&db, "t", b"row").as_deref(),
        Some(&b"kept"[..])
    );
    gate.release(Op::Flush);
    dropper.join().unwrap().unwrap();
    assert!(db.list_tables().is_empty());
    Arc::into_inner(db)
        .expect("the dropper thread ended")
        .abandon();
    // Durable: the drop survives a crash.
    let db = open(&d, &l);
    assert!(db.list_tables().is_empty());
    assert!(matches!(
        db.begin_read().unwrap().open_table("t"),
        Err(Error::NoSuchTable(_))
    ));
}

#[test]
fn a_scan_of_a_dropped_table_never_returns_rows_of_the_table_that_reused_its_pages() {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    let db = open(&d, &l);
    db.create_table("a").unwrap();
    let value = [b'a'; 200];
    for chunk in 0..10u32 {
        let tx = db.begin_write().unwrap();
        for i in 0..200u32 {
            tx.open_table("a")
                .unwrap()
                .put(format!("a-{:06}", chunk * 200 + i).as_bytes(), &value)
                .unwrap();
        }
        tx.commit().unwrap();
    }
    let reader = db.begin_read().unwrap();
    let reader_a = reader.open_table("a").unwrap();
    let mut scan = reader_a.range(..);
    let mut seen = 0;
    for _ in 0..10 {
        let (k, _) = scan.next().unwrap().unwrap();
        assert!(k.starts_with(b"a-"));
        seen += 1;
    }
    // Drop the table and fill its freed pages with another table's rows.
    db.drop_table("a").unwrap();
    db.create_table("b").unwrap();
    for chunk in 0..10u32 {
        let tx = db.begin_write().unwrap();
        for i in 0..200u32 {
            tx.open_table("b")
                .unwrap()
                .put(format!("b-{:06}", chunk * 200 + i).as_bytes(), &[b'b'; 200])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    let mut ended_with = None;
    for item in scan {
        match item {
            Ok((k, v)) => {
                assert!(
                    k.starts_with(b"a-") && v == value,
                    "the scan of 'a' returned {:?} after 'a' was dropped",
                    String::from_utf8_lossy(&k)
                );
                seen += 1;
            }
            Err(e) => {
                ended_with = Some(e);
                break;
            }
        }
    }
    match ended_with {
        Some(Error::NoSuchTable(why)) => assert!(why.contains("dropped"), "{why}"),
        other => panic!("expected the scan to report the drop after {seen} rows, got {other:?}"),
    }
    // Point reads of the dropped table fail the same way.
    assert!(matches!(
        reader_a.get(b"a-000001"),
        Err(Error::NoSuchTable(_))
    ));
    drop(reader_a);
    drop(reader);
    db.close().unwrap();
}

/// A commit that passed the writable check and then waited for the commit lock behind a drop
/// whose log sync failed must not apply: the drop freed the table's pages (overflow chains
/// too) in memory, and applying an overwrite there frees those pages a second time. The
/// database has failed, so the commit fails too. (Found by the crash test: "page N freed
/// twice" in a commit after a power cut.)
#[test]
fn a_commit_queued_behind_a_failed_drop_applies_nothing() {
    let (db, gate, _, _) = gated_with_table();
    // An overflow value (longer than a quarter of a 4 KiB page): its pages are freed by the
    // drop and again by an overwrite.
    let big = vec![b'v'; 3000];
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"row", &big).unwrap();
    tx.commit().unwrap();

    let dropper = drop_held(&db, &gate);
    // The table is still visible, so this transaction writes it; its commit then waits for the
    // commit lock the drop holds through its sync.
    // An inline value: the overwrite allocates nothing, so it reaches the freed leaf and
    // frees the old value's pages.
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let tx = db.begin_write()?;
            tx.open_table("t")?.put(b"row", b"small")?;
            tx.commit()
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    common::fail_syncs(&gate);
    gate.release(Op::Flush);
    assert!(matches!(dropper.join().unwrap(), Err(Error::Failed(_))));
    match writer.join() {
        Ok(Err(Error::Failed(_))) => {}
        Ok(other) => panic!("expected the queued commit to fail with the database, got {other:?}"),
        Err(p) => panic!(
            "the queued commit panicked: {:?}",
            p.downcast_ref::<String>()
        ),
    }
    Arc::into_inner(db).expect("both threads ended").abandon();
}
