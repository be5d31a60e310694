#![allow(clippy::unwrap_used)]
//! Damaged files give typed errors naming the page (or log position), never a panic.
//! Checked-in fixtures live in `tests/fixtures/`; `PAGODA_REGEN_FIXTURES=1` rebuilds them.

use pagoda_device::mem::MemDevice;
use pagoda_device::{DeviceRef, WriteHints};
use pagoda_engine::inspect::{inspect_devices, inspect_dir};
use pagoda_engine::{Db, DbOptions, Error};
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const PAGE: usize = 4096;
/// The first table's root: header 16 pages + 32 double-write pages = meta 48, catalog 49.
const TABLE_ROOT: u64 = 50;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn small(dir: &Path) -> DbOptions {
    DbOptions {
        data_file_bytes: 1 << 20,
        log_file_bytes: 256 << 10,
        ..DbOptions::in_dir(dir)
            .page_size(PAGE)
            .buffer_bytes(64 * PAGE)
            .background(false)
    }
}

fn fill(db: &Db, n: u32) {
    for i in 0..n {
        let mut tx = db.begin().unwrap();
        tx.put("t", format!("key{i:04}").as_bytes(), &[i as u8; 100])
            .unwrap();
        tx.commit().unwrap();
    }
}

fn flip(path: &Path, offset: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[offset as usize] ^= 0x10;
    std::fs::write(path, b).unwrap();
}

fn regen() {
    let root = fixtures();
    for name in [
        "clean",
        "page-bitflip",
        "log-bitflip",
        "superblocks-bitflip",
    ] {
        let dir = root.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        let db = Db::open(small(&dir)).unwrap();
        db.create_table("t").unwrap();
        fill(&db, 10);
        if name == "log-bitflip" {
            db.checkpoint().unwrap();
            fill(&db, 30);
            db.abandon();
            // Damage the body of the first group after the checkpoint (later groups exist).
            flip(
                &dir.join("log.pagoda"),
                4096 + first_group_offset(&dir) + 100,
            );
            continue;
        }
        db.close().unwrap();
        match name {
            "page-bitflip" => {
                flip(&dir.join("data.pagoda"), TABLE_ROOT * PAGE as u64 + 2000);
                // No intact copy in the double-write area (else opening repairs the page).
                let mut b = std::fs::read(dir.join("data.pagoda")).unwrap();
                b[16 * PAGE..48 * PAGE].fill(0);
                std::fs::write(dir.join("data.pagoda"), b).unwrap();
            }
            "superblocks-bitflip" => {
                flip(&dir.join("data.pagoda"), 30);
                flip(&dir.join("data.pagoda"), 4096 + 30);
            }
            _ => {}
        }
    }
}

fn first_group_offset(dir: &Path) -> u64 {
    // The checkpoint LSN is in the newest superblock; both copies are read by inspect, so use it.
    let r = inspect_dir(dir).unwrap();
    r.checkpoint_lsn % (256 << 10)
}

fn copy(name: &str) -> tempfile::TempDir {
    let src = fixtures().join(name);
    assert!(
        src.join("data.pagoda").exists(),
        "fixture {name} missing: run with PAGODA_REGEN_FIXTURES=1"
    );
    let t = tempfile::tempdir().unwrap();
    for f in ["data.pagoda", "log.pagoda"] {
        std::fs::copy(src.join(f), t.path().join(f)).unwrap();
    }
    t
}

#[test]
fn fixtures_give_errors_naming_the_damage() {
    if std::env::var("PAGODA_REGEN_FIXTURES").is_ok() {
        regen();
    }
    // Clean: opens, inspects ok, holds the rows.
    let t = copy("clean");
    let r = inspect_dir(t.path()).unwrap();
    assert!(r.is_ok(), "{r}");
    let db = Db::open(small(t.path())).unwrap();
    assert_eq!(db.begin_read().unwrap().range("t", ..).unwrap().count(), 10);
    drop(db);

    // A bit flip in a table page: open and inspect name page 50.
    let t = copy("page-bitflip");
    let r = inspect_dir(t.path()).unwrap();
    assert_eq!(r.corrupt_page_ids(), vec![TABLE_ROOT], "{r}");
    assert!(r.to_string().contains("corrupt page 50"), "{r}");
    match Db::open(small(t.path())) {
        Err(Error::Corruption { page_id, .. }) => assert_eq!(page_id, TABLE_ROOT),
        other => panic!(
            "expected corruption of page 50, got {:?}",
            other.map(|_| ())
        ),
    }
    // Without the open-time check, reading the page fails the same way.
    let db = Db::open(small(t.path()).verify_on_open(false)).unwrap();
    match db.begin_read().unwrap().get("t", b"key0001") {
        Err(Error::Corruption { page_id, .. }) => assert_eq!(page_id, TABLE_ROOT),
        other => panic!(
            "expected corruption of page 50, got {:?}",
            other.map(|_| ())
        ),
    }
    drop(db);

    // A bit flip in the middle of the log: open refuses with the LSN, inspect reports it.
    let t = copy("log-bitflip");
    let r = inspect_dir(t.path()).unwrap();
    assert!(!r.log_problems.is_empty(), "{r}");
    match Db::open(small(t.path())) {
        Err(Error::LogCorruption { .. }) => {}
        other => panic!("expected log corruption, got {:?}", other.map(|_| ())),
    }

    // Both superblocks damaged: page 0 named.
    let t = copy("superblocks-bitflip");
    assert!(matches!(
        inspect_dir(t.path()),
        Err(Error::Corruption { page_id: 0, .. })
    ));
    assert!(matches!(
        Db::open(small(t.path())),
        Err(Error::Corruption { page_id: 0, .. })
    ));
}

#[test]
fn doublewrite_copy_repairs_a_damaged_page() {
    let d = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
    let l = Arc::new(MemDevice::with_capacity(1 << 20).unwrap());
    let (dr, lr): (DeviceRef, DeviceRef) = (d.clone(), l.clone());
    let o = || {
        DbOptions::with_devices(dr.clone(), lr.clone())
            .page_size(PAGE)
            .buffer_bytes(32 * PAGE)
            .background(false)
    };
    let db = Db::open(o()).unwrap();
    db.create_table("t").unwrap();
    fill(&db, 10);
    db.close().unwrap();
    // The last cleaner batch (in the double-write area) holds page 50; damage it in place.
    let sector = TABLE_ROOT * (PAGE as u64 / 4096);
    let mut b = vec![0u8; 4096];
    dr.read(sector, &mut b).unwrap();
    b[2000] ^= 0x10;
    dr.write(sector, &b, WriteHints::NORMAL).unwrap();
    let r = inspect_devices(&dr, &lr).unwrap();
    assert_eq!(r.corrupt_page_ids(), vec![TABLE_ROOT]);
    assert!(
        r.to_string()
            .contains("double-write area holds an intact copy"),
        "{r}"
    );
    let db = Db::open(o()).unwrap();
    assert_eq!(db.stats().recovery.torn_pages_repaired, 1);
    assert_eq!(db.begin_read().unwrap().range("t", ..).unwrap().count(), 10);
    db.close().unwrap();
    assert!(inspect_devices(&dr, &lr).unwrap().is_ok());
}

#[test]
fn random_bit_flips_never_panic() {
    let seed = 0xb17f;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    for round in 0..25 {
        let d = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
        let l = Arc::new(MemDevice::with_capacity(1 << 20).unwrap());
        let (dr, lr): (DeviceRef, DeviceRef) = (d.clone(), l.clone());
        let o = || {
            DbOptions::with_devices(dr.clone(), lr.clone())
                .page_size(PAGE)
                .buffer_bytes(32 * PAGE)
                .background(false)
        };
        let db = Db::open(o()).unwrap();
        db.create_table("t").unwrap();
        fill(&db, 200);
        if round % 2 == 0 {
            db.close().unwrap();
        } else {
            db.checkpoint().unwrap();
            fill(&db, 50);
            db.abandon();
        }
        // Flip a bit in a used page or in the log.
        let in_log = rng.gen_bool(0.3);
        let dev: &DeviceRef = if in_log { &lr } else { &dr };
        let sector = if in_log {
            rng.gen_range(1..40)
        } else {
            rng.gen_range(0..60 * PAGE as u64 / 4096)
        };
        let mut b = vec![0u8; 4096];
        dev.read(sector, &mut b).unwrap();
        b[rng.gen_range(0..4096)] ^= 1 << rng.gen_range(0..8);
        dev.write(sector, &b, WriteHints::NORMAL).unwrap();
        dev.flush().unwrap();
        let ctx = format!("seed {seed} round {round} log {in_log} sector {sector}");
        let _ = inspect_devices(&dr, &lr);
        match Db::open(o()) {
            Ok(db) => {
                let tx = db.begin_read().unwrap();
                for x in tx.range("t", ..).unwrap() {
                    if let Err(e) = x {
                        assert!(e.is_corruption(), "{ctx}: {e}");
                        break;
                    }
                }
            }
            Err(e) => assert!(
                e.is_corruption() || matches!(e, Error::Config(_)),
                "{ctx}: {e}"
            ),
        }
    }
}
