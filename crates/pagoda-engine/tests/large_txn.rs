#![allow(clippy::unwrap_used)]
//! Issue 10, defect 4: one transaction of 24,000 rows of 1 KB (24 MB) on a 4 MiB buffer with
//! the default 128 MiB log commits (its record is one large group; the pages it changes spill
//! past the pool until they are written), and survives a crash right after.

use pagoda_engine::{Db, DbOptions, Error};

fn key(i: u32) -> Vec<u8> {
    format!("row-{i:08}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("{i:08}|").into_bytes();
    v.resize(1000, b'a' + (i % 26) as u8);
    v
}

#[test]
fn a_24_mb_transaction_commits_on_a_4_mib_buffer() {
    const ROWS: u32 = 24_000;
    let dir = tempfile::tempdir().unwrap();
    let opts = || DbOptions::in_dir(dir.path()).buffer_bytes(4 << 20);
    let db = Db::open(opts()).unwrap();
    db.create_table("t").unwrap();
    let tx = db.begin_write().unwrap();
    for i in 0..ROWS {
        tx.open_table("t").unwrap().put(&key(i), &value(i)).unwrap();
    }
    let info = tx.commit().unwrap();
    assert!(
        info.lsn > u64::from(ROWS) * 1000,
        "the record is smaller than the data: {info:?}"
    );
    assert!(db.failure().is_none());
    // Crash right after the commit: recovery replays the one large record.
    db.abandon();
    let db = Db::open(opts().paranoid(true)).unwrap();
    let r = db.begin_read().unwrap();
    let mut n = 0;
    for (i, item) in r.open_table("t").unwrap().range(..).enumerate() {
        let (k, v) = item.unwrap();
        assert_eq!(k, key(i as u32));
        assert_eq!(v, value(i as u32));
        n += 1;
    }
    assert_eq!(n, ROWS as usize);
    drop(r);
    // Beyond the documented limit (half the log for one record) a clear error, and the
    // database goes on.
    let tx = db.begin_write().unwrap();
    for i in 0..70_000u32 {
        tx.open_table("t")
            .unwrap()
            .put(&key(ROWS + i), &value(i))
            .unwrap();
    }
    match tx.commit() {
        Err(Error::LogFull { need, capacity }) => assert!(need > capacity / 2),
        other => panic!("expected LogFull, got {other:?}"),
    }
    assert!(db.failure().is_none());
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"after", b"ok").unwrap();
    tx.commit().unwrap();
    db.close().unwrap();
}
