//! Embedding pagoda, the program to copy: open a database, create a table, write in a
//! transaction, read and scan a snapshot, survive a crash (a power cut on emulated devices),
//! and run with a flash cache in front of the data device.
//!
//! `cargo run -p pagoda-engine --example embed [DIR]` (default: a temporary directory).
//! `cargo test -p pagoda-engine --example embed` runs it as a test.

use pagoda_device::mem::MemDevice;
use pagoda_device::{DeviceRef, PowerCut};
use pagoda_engine::{Db, DbOptions, Error, FlashCacheOptions, Result, TornMode};
use std::ops::Bound;
use std::sync::Arc;

fn main() -> Result<()> {
    let tmp = tempfile::tempdir().map_err(|e| Error::Config(e.to_string()))?;
    // A directory given as the first argument; flags (`cargo test` passes `--quiet` to the
    // example it runs as a test) are no directory.
    let dir = std::env::args()
        .nth(1)
        .filter(|a| !a.starts_with('-'))
        .map_or_else(|| tmp.path().to_path_buf(), Into::into);

    // 1. Files in a directory: data.pagoda and log.pagoda.
    let db = Db::open(DbOptions::in_dir(&dir).buffer_bytes(16 << 20))?;
    if !db.list_tables().iter().any(|t| t == "users") {
        db.create_table("users")?; // durable when it returns
    }
    write_users(&db)?;
    print_engineers(&db)?;
    db.close()?; // checkpoint; the next open has no log to replay

    // 2. A crash: emulated devices whose unflushed writes a power cut loses.
    let data = Arc::new(MemDevice::with_capacity(64 << 20)?);
    let log = Arc::new(MemDevice::with_capacity(16 << 20)?);
    let on_mem = || DbOptions::with_devices(data.clone(), log.clone()).buffer_bytes(4 << 20);
    let db = Db::open(on_mem())?;
    db.create_table("users")?;
    write_users(&db)?;
    db.abandon(); // the process dies: no checkpoint, nothing more written
    data.power_cut(1)?; // and the power goes: writes not yet flushed are lost
    log.power_cut(2)?;
    let db = Db::open(on_mem())?; // recovery replays the log
    assert_eq!(role(&db, "bob")?.as_deref(), Some("analyst"));
    let rec = db.stats().recovery;
    println!(
        "after the power cut: {} commit records replayed in {:.1} ms",
        rec.records_replayed, rec.duration_ms
    );
    db.close()?;

    // 3. A flash cache between the buffer pool and the data device. It repairs torn page
    //    writes itself, so the double-write area is off (TornMode::None). The torn mode is
    //    fixed when a database is created, so this is a new database.
    let data: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20)?);
    let log: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20)?);
    let flash: DeviceRef = Arc::new(MemDevice::with_capacity(32 << 20)?);
    let cached = DbOptions::with_devices(data, log)
        .buffer_bytes(4 << 20)
        .torn(TornMode::None)
        .flash_cache(FlashCacheOptions::new(flash).size_bytes(16 << 20));
    let db = Db::open(cached)?;
    db.create_table("users")?;
    write_users(&db)?;
    print_engineers(&db)?;
    db.checkpoint()?; // page writes go to the cache's ring, not to the data device
    let ring = db.stats().flash_cache.map_or(0, |f| f.ring_page_writes);
    println!("pages written to the flash cache: {ring}");
    db.close() // writes the cache's dirty pages back: the data device stands alone again
}

/// One transaction: a table handle opened once, three puts, one commit.
fn write_users(db: &Db) -> Result<()> {
    let tx = db.begin_write()?; // snapshot isolation; the later of two writers of a key fails
    let mut users = tx.open_table("users")?;
    for (name, role) in [
        ("alice", "engineer"),
        ("bob", "analyst"),
        ("carol", "engineer"),
    ] {
        users.put(name.as_bytes(), role.as_bytes())?;
    }
    drop(users); // a handle borrows its transaction: it ends before the commit
    tx.commit()?; // durable when it returns (the default sync commit mode)
    Ok(())
}

/// A point read in a read-only transaction (it has no put: writing there does not compile).
fn role(db: &Db, name: &str) -> Result<Option<String>> {
    let tx = db.begin_read()?;
    let users = tx.open_table("users")?;
    Ok(users
        .get(name.as_bytes())?
        .map(|v| String::from_utf8_lossy(&v).into_owned()))
}

/// A range scan: keys from "a" up to, not including, "c".
fn print_engineers(db: &Db) -> Result<()> {
    let tx = db.begin_read()?;
    let users = tx.open_table("users")?;
    let range = (Bound::Included(&b"a"[..]), Bound::Excluded(&b"c"[..]));
    for row in users.range(range) {
        let (k, v) = row?;
        if v == b"engineer" {
            println!("{} is an engineer", String::from_utf8_lossy(&k));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// CI runs the example (`test = true` in Cargo.toml): it must finish without an error.
    #[test]
    fn the_example_runs() {
        super::main().expect("the embed example");
    }
}
