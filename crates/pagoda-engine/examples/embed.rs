//! Embedding pagoda: open a database in a directory, write in a transaction, read a snapshot,
//! scan a range, reopen, close. `cargo run -p pagoda-engine --example embed [DIR]` (default: a
//! temporary directory).

use pagoda_engine::{Db, DbOptions, Error};
use std::ops::Bound;

fn main() -> Result<(), Error> {
    let tmp = tempfile::tempdir().map_err(|e| Error::Config(e.to_string()))?;
    let dir = std::env::args()
        .nth(1)
        .map_or_else(|| tmp.path().to_path_buf(), Into::into);

    let db = Db::open(DbOptions::in_dir(&dir).buffer_bytes(16 << 20))?;
    db.create_table("users")?;
    let tx = db.begin_write()?; // snapshot isolation; the later of two writers of a key fails
    for (name, role) in [
        ("alice", "engineer"),
        ("bob", "analyst"),
        ("carol", "engineer"),
    ] {
        tx.open_table("users")?
            .put(name.as_bytes(), role.as_bytes())?;
    }
    tx.commit()?; // durable when it returns
    db.close()?;

    // Reopened: recovery replays the log, nothing acknowledged is lost.
    let db = Db::open(DbOptions::in_dir(&dir).buffer_bytes(16 << 20))?;
    let r = db.begin_read()?;
    assert_eq!(
        r.open_table("users")?.get(b"bob")?.as_deref(),
        Some(&b"analyst"[..])
    );
    // Keys from "a" up to, not including, "c".
    let range = (Bound::Included(&b"a"[..]), Bound::Excluded(&b"c"[..]));
    for kv in r.open_table("users")?.range(range) {
        let (k, v) = kv?;
        println!(
            "{} = {}",
            String::from_utf8_lossy(&k),
            String::from_utf8_lossy(&v)
        );
    }
    drop(r); // a transaction borrows its database: it ends before the close
    db.close()
}
