//! What an embedder does, on the engine built with its default features: create a database in
//! a directory, write and read in transactions, close, reopen, and get typed errors for bad
//! input. The engine's own tests cover far more, but always with `fault-injection` on.
#![allow(clippy::unwrap_used)]

use pagoda_engine::limits::{MAX_KEY_LEN, MAX_VALUE_LEN};
use pagoda_engine::{Db, DbOptions, Error};
use std::ops::Bound;
use std::path::Path;

fn open(dir: &Path) -> Db {
    Db::open(DbOptions::in_dir(dir).buffer_bytes(4 << 20)).unwrap()
}

fn get(db: &Db, table: &str, key: &[u8]) -> Option<Vec<u8>> {
    let tx = db.begin_read().unwrap();
    let t = tx.open_table(table).unwrap();
    t.get(key).unwrap()
}

#[test]
fn a_database_keeps_its_tables_and_rows_across_a_clean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.create_table("users").unwrap();
    db.create_table("empty").unwrap();
    let tx = db.begin_write().unwrap();
    let mut users = tx.open_table("users").unwrap();
    for i in 0..500u32 {
        users
            .put(format!("user{i:04}").as_bytes(), &i.to_le_bytes())
            .unwrap();
    }
    users.delete(b"user0007").unwrap();
    drop(users);
    tx.commit().unwrap();
    db.close().unwrap();

    let db = open(dir.path());
    let mut tables = db.list_tables();
    tables.sort();
    assert_eq!(tables, ["empty", "users"]);
    // A clean close checkpointed: the reopen has nothing to replay.
    assert_eq!(db.stats().recovery.records_replayed, 0);
    assert_eq!(
        get(&db, "users", b"user0042"),
        Some(42u32.to_le_bytes().to_vec())
    );
    assert_eq!(get(&db, "users", b"user0007"), None);
    let tx = db.begin_read().unwrap();
    let users = tx.open_table("users").unwrap();
    let range = (
        Bound::Included(&b"user0100"[..]),
        Bound::Excluded(&b"user0110"[..]),
    );
    let keys: Vec<Vec<u8>> = users.range(range).map(|row| row.unwrap().0).collect();
    let want: Vec<Vec<u8>> = (100..110)
        .map(|i| format!("user{i:04}").into_bytes())
        .collect();
    assert_eq!(keys, want);
    let last = users.range_rev(..).next().unwrap().unwrap().0;
    assert_eq!(last, b"user0499");
    drop(users);
    drop(tx);
    db.close().unwrap();
}

#[test]
fn a_reader_sees_its_snapshot_and_a_rollback_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.create_table("t").unwrap();
    let before = db.begin_read().unwrap();

    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"k", b"v1").unwrap();
    tx.commit().unwrap();
    let tx = db.begin_write().unwrap();
    tx.open_table("t")
        .unwrap()
        .put(b"k", b"rolled back")
        .unwrap();
    tx.rollback();

    assert_eq!(before.open_table("t").unwrap().get(b"k").unwrap(), None);
    drop(before);
    assert_eq!(get(&db, "t", b"k").as_deref(), Some(&b"v1"[..]));
    db.close().unwrap();
}

#[test]
fn the_second_of_two_writers_of_a_key_gets_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.create_table("t").unwrap();
    let first = db.begin_write().unwrap();
    let second = db.begin_write().unwrap();
    first.open_table("t").unwrap().put(b"k", b"first").unwrap();
    first.commit().unwrap();
    // First committer wins: the loser fails at its write or at its commit, never silently.
    let put = second.open_table("t").unwrap().put(b"k", b"second");
    let lost = put.and_then(|()| second.commit().map(|_| ()));
    assert!(matches!(lost, Err(Error::Conflict { .. })), "{lost:?}");
    assert_eq!(get(&db, "t", b"k").as_deref(), Some(&b"first"[..]));
    // The database stays up for the retry.
    let retry = db.begin_write().unwrap();
    retry.open_table("t").unwrap().put(b"k", b"second").unwrap();
    retry.commit().unwrap();
    assert_eq!(get(&db, "t", b"k").as_deref(), Some(&b"second"[..]));
    db.close().unwrap();
}

#[test]
fn bad_input_is_a_typed_error_and_the_database_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = Db::open(DbOptions::in_dir(dir.path()).buffer_bytes(4096));
    assert!(matches!(tiny, Err(Error::Config(_))), "{:?}", tiny.err());
    let odd_page = Db::open(DbOptions::in_dir(dir.path()).page_size(5000));
    assert!(
        matches!(odd_page, Err(Error::Config(_))),
        "{:?}",
        odd_page.err()
    );

    let db = open(dir.path());
    db.create_table("t").unwrap();
    assert!(matches!(db.create_table("t"), Err(Error::TableExists(_))));
    let tx = db.begin_write().unwrap();
    assert!(matches!(tx.open_table("nope"), Err(Error::NoSuchTable(_))));
    let mut t = tx.open_table("t").unwrap();
    let long_key = vec![b'k'; MAX_KEY_LEN + 1];
    assert!(matches!(
        t.put(&long_key, b"v"),
        Err(Error::KeyTooLarge { .. })
    ));
    let huge = vec![0u8; MAX_VALUE_LEN + 1];
    assert!(matches!(
        t.put(b"k", &huge),
        Err(Error::ValueTooLarge { .. })
    ));
    t.put(b"k", b"v").unwrap();
    drop(t);
    tx.commit().unwrap();
    assert!(db.failure().is_none());
    assert_eq!(get(&db, "t", b"k").as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
}
