#![allow(clippy::unwrap_used)]
//! The superblock's two copies (issue 42). With its newest copy damaged, recovery starts from
//! the older one, and the log still holds that copy's whole redo range (a checkpoint writes its
//! redo start into both copies before the log before it is reused), so every committed row is
//! back and the open says it fell back. A damaged older copy costs nothing; both copies
//! damaged: open refuses, naming the superblock. A tiny log keeps making progress.

use pagoda_device::mem::MemDevice;
use pagoda_device::{DeviceRef, WriteHints};
use pagoda_engine::format::Superblock;
use pagoda_engine::{Db, DbOptions, Error};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The smallest log the engine takes: a few dozen commits fill it.
const LOG: u64 = 256 << 10;

fn devices() -> (DeviceRef, DeviceRef) {
    (
        Arc::new(MemDevice::with_capacity(64 << 20).unwrap()),
        Arc::new(MemDevice::with_capacity(2 << 20).unwrap()),
    )
}

fn opts(d: &DeviceRef, l: &DeviceRef) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(4096)
        .buffer_bytes(8 << 20)
        .log_capacity(LOG)
        .background(false)
}

/// Both superblock copies as the device holds them (sectors 0 and 1).
fn copies(d: &DeviceRef) -> [Result<Superblock, String>; 2] {
    let mut b = vec![0u8; 2 * 4096];
    d.read(0, &mut b).unwrap();
    [
        Superblock::decode(&b[..4096]),
        Superblock::decode(&b[4096..]),
    ]
}

/// The slot of the newest intact copy.
fn newest_slot(d: &DeviceRef) -> usize {
    let c = copies(d);
    (0..2)
        .filter(|&i| c[i].is_ok())
        .max_by_key(|&i| c[i].as_ref().unwrap().generation)
        .unwrap()
}

/// Flips one bit of superblock copy `slot` on the medium (in its checkpoint LSN).
fn flip(d: &DeviceRef, slot: usize) {
    let mut b = vec![0u8; 4096];
    d.read(slot as u64, &mut b).unwrap();
    b[25] ^= 0x10;
    d.write(slot as u64, &b, WriteHints::NORMAL).unwrap();
    d.flush().unwrap();
    assert!(copies(d)[slot].is_err(), "the flip must damage copy {slot}");
}

/// Commits `n` rows from key `*next` on; returns the commit's LSN.
fn put(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, next: &mut u64, n: u64) -> u64 {
    let tx = db.begin_write().unwrap();
    let mut t = tx.open_table("t").unwrap();
    for _ in 0..n {
        let k = format!("k{:07}", *next).into_bytes();
        let v = format!("{}-{}", *next, "v".repeat(180)).into_bytes();
        t.put(&k, &v).unwrap();
        model.insert(k, v);
        *next += 1;
    }
    drop(t);
    tx.commit().unwrap().lsn
}

fn verify(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let tx = db.begin_read().unwrap();
    let all: BTreeMap<Vec<u8>, Vec<u8>> = tx
        .open_table("t")
        .unwrap()
        .range(..)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(all.len(), model.len(), "rows lost");
    assert!(all == *model, "contents differ from the model");
}

#[test]
fn a_damaged_newest_copy_falls_back_to_the_older_one_and_loses_nothing() {
    let (d, l) = devices();
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    let (mut model, mut next) = (BTreeMap::new(), 0);
    // Several laps of the ring: the commits that run short of log space checkpoint.
    while db.stats().checkpoints < 8 {
        put(&db, &mut model, &mut next, 10);
    }
    db.checkpoint().unwrap();
    let a = copies(&d)[newest_slot(&d)].clone().unwrap().checkpoint_lsn;
    let mut lsn = 0;
    while lsn < a + LOG / 2 {
        lsn = put(&db, &mut model, &mut next, 10);
    }
    db.checkpoint().unwrap();
    // On past where the ring reaches checkpoint `a`'s redo start again: a log reclaimed up
    // to the newest checkpoint would have overwritten it while `a` was still the older copy.
    while lsn < a + LOG + (16 << 10) {
        lsn = put(&db, &mut model, &mut next, 10);
    }
    db.abandon();
    let slot = newest_slot(&d);
    let older = copies(&d)[1 - slot].clone().unwrap();
    flip(&d, slot);

    let db = Db::open(opts(&d, &l)).unwrap();
    let rec = db.stats().recovery;
    assert!(rec.superblock_fallback, "{rec:?}");
    let note = rec.superblock_damage.clone().unwrap();
    assert!(
        note.contains(&format!("copy {slot}")) && note.contains("checksum"),
        "{note}"
    );
    assert_eq!(rec.checkpoint_lsn, older.checkpoint_lsn, "{rec:?}");
    verify(&db, &model);
    // The open's checkpoint wrote over the damaged copy.
    assert!(copies(&d).iter().all(Result::is_ok));
    put(&db, &mut model, &mut next, 10);
    db.close().unwrap();
    let db = Db::open(opts(&d, &l)).unwrap();
    assert!(!db.stats().recovery.superblock_fallback);
    assert_eq!(db.stats().recovery.superblock_damage, None);
    verify(&db, &model);
    db.close().unwrap();
}

#[test]
fn a_damaged_older_copy_is_reported_and_rewritten() {
    let (d, l) = devices();
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    let (mut model, mut next) = (BTreeMap::new(), 0);
    for _ in 0..20 {
        put(&db, &mut model, &mut next, 10);
    }
    db.checkpoint().unwrap();
    put(&db, &mut model, &mut next, 10);
    db.abandon();
    let slot = newest_slot(&d);
    let newest = copies(&d)[slot].clone().unwrap();
    flip(&d, 1 - slot);
    let db = Db::open(opts(&d, &l)).unwrap();
    let rec = db.stats().recovery;
    assert!(!rec.superblock_fallback, "{rec:?}");
    let note = rec.superblock_damage.clone().unwrap();
    assert!(note.contains(&format!("copy {}", 1 - slot)), "{note}");
    assert_eq!(rec.checkpoint_lsn, newest.checkpoint_lsn);
    verify(&db, &model);
    assert!(copies(&d).iter().all(Result::is_ok));
    db.close().unwrap();
}

#[test]
fn both_copies_damaged_is_refused_naming_the_superblock() {
    let (d, l) = devices();
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    let (mut model, mut next) = (BTreeMap::new(), 0);
    put(&db, &mut model, &mut next, 10);
    db.close().unwrap();
    flip(&d, 0);
    flip(&d, 1);
    let e = Db::open(opts(&d, &l)).unwrap_err();
    assert!(
        matches!(&e, Error::Corruption { detail, .. } if detail.contains("both superblock copies")),
        "{e}"
    );
    assert!(e.to_string().contains("restore from a backup"), "{e}");
    // Nothing was written: the devices still hold the damaged copies (no new database).
    assert!(copies(&d).iter().all(Result::is_err));
}

/// Commits that each need nearly half the log, from three threads, with and without the
/// background thread, and a table created between them: every one finishes (a commit short of
/// space checkpoints until it fits).
#[test]
fn a_tiny_log_keeps_making_progress() {
    for background in [false, true] {
        let (d, l) = devices();
        let db = Arc::new(Db::open(opts(&d, &l).background(background)).unwrap());
        db.create_table("t").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        for th in 0..3u64 {
            let (db, tx) = (db.clone(), tx.clone());
            std::thread::spawn(move || {
                let r = (|| {
                    for i in 0..12u64 {
                        let w = db.begin_write()?;
                        let mut t = w.open_table("t")?;
                        for k in 0..60u64 {
                            let key = format!("{th}-{i:03}-{k:03}").into_bytes();
                            t.put(&key, &[th as u8; 1000])?;
                        }
                        drop(t);
                        match w.commit() {
                            Ok(_) | Err(Error::Conflict { .. }) => {}
                            Err(e) => return Err(e),
                        }
                        if th == 0 && i % 4 == 0 {
                            db.create_table(&format!("extra{i}"))?;
                        }
                    }
                    Ok::<_, Error>(())
                })();
                // The handle goes before the report: the test then holds the only one.
                drop(db);
                tx.send(r).unwrap();
            });
        }
        for _ in 0..3 {
            let r = rx
                .recv_timeout(Duration::from_secs(120))
                .expect("a committer made no progress in 120 s");
            r.unwrap();
        }
        let db = Arc::into_inner(db).unwrap();
        assert!(db.stats().checkpoints > 3, "{:?}", db.stats().checkpoints);
        db.close().unwrap();
        let db = Db::open(opts(&d, &l)).unwrap();
        let r = db.begin_read().unwrap();
        assert_eq!(r.open_table("t").unwrap().range(..).count(), 3 * 12 * 60);
        drop(r);
        db.close().unwrap();
    }
}
