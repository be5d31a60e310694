#![allow(clippy::unwrap_used)]
mod common;

use pagoda_device::fault::{Fault, FaultDevice, Op};
use pagoda_device::mem::{MemConfig, MemDevice};
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions, Error, TornMode};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

fn devs() -> (DeviceRef, DeviceRef) {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(256 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
    (d, l)
}

fn opts(d: &DeviceRef, l: &DeviceRef) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(4096)
        .buffer_bytes(64 * 4096)
        .background(false)
}

#[test]
fn put_get_reopen_scan() {
    let (d, l) = devs();
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    for i in 0..2000u32 {
        let tx = db.begin_write().unwrap();
        tx.open_table("t")
            .unwrap()
            .put(
                format!("key{i:05}").as_bytes(),
                format!("value{i}").repeat(5).as_bytes(),
            )
            .unwrap();
        tx.commit().unwrap();
    }
    let big = vec![7u8; 100_000];
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"big", &big).unwrap();
    tx.commit().unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.open_table("t")
            .unwrap()
            .get(b"key00042")
            .unwrap()
            .unwrap(),
        "value42".repeat(5).as_bytes()
    );
    assert_eq!(
        r.open_table("t").unwrap().get(b"big").unwrap().unwrap(),
        big
    );
    let n = r.open_table("t").unwrap().range(..).count();
    assert_eq!(n, 2001);
    let first: Vec<_> = r
        .open_table("t")
        .unwrap()
        .range_rev((
            Bound::Included(&b"key00010"[..]),
            Bound::Excluded(&b"key00020"[..]),
        ))
        .map(|x| x.unwrap().0)
        .collect();
    assert_eq!(first.len(), 10);
    assert_eq!(first[0], b"key00019");
    drop(r);
    db.abandon();
    // Crash-free reopen without checkpoint: recovery replays the log.
    let db = Db::open(opts(&d, &l)).unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.open_table("t")
            .unwrap()
            .get(b"key01999")
            .unwrap()
            .unwrap(),
        "value1999".repeat(5).as_bytes()
    );
    assert_eq!(
        r.open_table("t").unwrap().get(b"big").unwrap().unwrap(),
        big
    );
    assert_eq!(r.open_table("t").unwrap().range(..).count(), 2001);
    drop(r);
    // Delete most keys: merges.
    for i in 0..1900u32 {
        let tx = db.begin_write().unwrap();
        tx.open_table("t")
            .unwrap()
            .delete(format!("key{i:05}").as_bytes())
            .unwrap();
        tx.commit().unwrap();
    }
    let r = db.begin_read().unwrap();
    assert_eq!(r.open_table("t").unwrap().range(..).count(), 101);
    drop(r);
    db.close().unwrap();
    let db = Db::open(opts(&d, &l)).unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.open_table("t").unwrap().range(..).count(), 101);
    assert!(matches!(r.open_table("nope"), Err(Error::NoSuchTable(_))));
}

#[test]
fn atomic_refused_when_unit_too_small() {
    let d: DeviceRef = Arc::new(
        MemDevice::new(MemConfig {
            capacity_bytes: 64 << 20,
            atomic_write_unit: Some(4096),
            streams: 4,
        })
        .unwrap(),
    );
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
    let e = Db::open(DbOptions::with_devices(d, l).torn(TornMode::Atomic)).unwrap_err();
    assert!(matches!(e, Error::Config(_)), "{e}");
    assert!(e.to_string().contains("atomic"), "{e}");
}

/// A device whose writes fail once `broken` is set.
#[derive(Debug)]
struct Flaky {
    inner: MemDevice,
    broken: std::sync::atomic::AtomicBool,
}

impl pagoda_device::BlockDevice for Flaky {
    fn caps(&self) -> pagoda_device::Capabilities {
        self.inner.caps()
    }
    fn read(&self, s: u64, b: &mut [u8]) -> pagoda_device::Result<()> {
        self.inner.read(s, b)
    }
    fn write(&self, s: u64, b: &[u8], h: pagoda_device::WriteHints) -> pagoda_device::Result<()> {
        if self.broken.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(pagoda_device::DeviceError::Unsupported(
                "injected write failure".into(),
            ));
        }
        self.inner.write(s, b, h)
    }
    fn flush(&self) -> pagoda_device::Result<()> {
        self.inner.flush()
    }
    fn trim(&self, s: u64, n: u64) -> pagoda_device::Result<()> {
        self.inner.trim(s, n)
    }
    fn stats(&self) -> pagoda_device::DeviceStats {
        self.inner.stats()
    }
    fn describe(&self) -> String {
        "flaky".into()
    }
}

#[test]
fn io_failure_is_sticky_and_recoverable() {
    let log = Arc::new(Flaky {
        inner: MemDevice::with_capacity(8 << 20).unwrap(),
        broken: false.into(),
    });
    let (d, _) = devs();
    let l: DeviceRef = log.clone();
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"a", b"1").unwrap();
    tx.commit().unwrap();
    log.broken.store(true, std::sync::atomic::Ordering::Relaxed);
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"b", b"2").unwrap();
    assert!(tx.commit().is_err());
    log.broken
        .store(false, std::sync::atomic::Ordering::Relaxed);
    // Sticky: refuses writes with the reason, even though the device works again.
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"c", b"3").unwrap();
    match tx.commit() {
        Err(Error::Failed(why)) => {
            assert!(why.to_string().contains("injected write failure"), "{why}");
        }
        other => panic!("expected a sticky failure, got {other:?}"),
    }
    assert!(db.stats().failed.is_some());
    // Reads still work; reopening recovers the acknowledged commit.
    assert_eq!(common::read(&db, "t", b"a").unwrap(), b"1");
    db.abandon();
    let db = Db::open(opts(&d, &l)).unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.open_table("t").unwrap().get(b"a").unwrap().unwrap(), b"1");
    assert_eq!(r.open_table("t").unwrap().get(b"c").unwrap(), None);
}

/// The torn mode is recorded at creation: reopening with another one is refused with an error
/// that names both, and nothing is changed; the right mode still opens it.
#[test]
fn reopening_with_another_torn_mode_is_refused() {
    let (d, l) = devs();
    let db = Db::open(opts(&d, &l).torn(TornMode::Doublewrite)).unwrap();
    db.create_table("t").unwrap();
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"k", b"v").unwrap();
    tx.commit().unwrap();
    db.close().unwrap();
    for other in [TornMode::None, TornMode::Atomic] {
        let e = Db::open(opts(&d, &l).torn(other)).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Config(_)), "{msg}");
        assert!(
            msg.contains("created with torn mode doublewrite")
                && msg.contains(&format!("opened with torn mode {other}")),
            "{msg}"
        );
    }
    let db = Db::open(opts(&d, &l).torn(TornMode::Doublewrite)).unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.open_table("t").unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
}

/// The two double-write modes write the same layout and recover alike: a database made in one
/// opens (and recovers after a crash) in the other, both ways; other modes are still refused.
#[test]
fn the_double_write_modes_open_each_others_databases() {
    let (d, l) = devs();
    let put = |db: &Db, k: &[u8]| {
        let tx = db.begin_write().unwrap();
        tx.open_table("t").unwrap().put(k, b"v").unwrap();
        tx.commit().unwrap();
    };
    let db = Db::open(opts(&d, &l).torn(TornMode::DoublewriteFull)).unwrap();
    db.create_table("t").unwrap();
    put(&db, b"a");
    db.abandon();
    let db = Db::open(opts(&d, &l).torn(TornMode::Doublewrite)).unwrap();
    put(&db, b"b");
    db.abandon();
    let db = Db::open(opts(&d, &l).torn(TornMode::DoublewriteFull)).unwrap();
    let r = db.begin_read().unwrap();
    for k in [&b"a"[..], b"b"] {
        assert_eq!(
            r.open_table("t").unwrap().get(k).unwrap().as_deref(),
            Some(&b"v"[..])
        );
    }
    drop(r);
    db.close().unwrap();
    let e = Db::open(opts(&d, &l).torn(TornMode::Atomic)).unwrap_err();
    assert!(
        e.to_string()
            .contains("--torn doublewrite or --torn doublewrite-full"),
        "{e}"
    );
    let (d, l) = devs();
    Db::open(opts(&d, &l).torn(TornMode::None))
        .unwrap()
        .close()
        .unwrap();
    let e = Db::open(opts(&d, &l).torn(TornMode::DoublewriteFull)).unwrap_err();
    assert!(
        e.to_string()
            .contains("created with torn mode none and is opened with torn mode doublewrite-full"),
        "{e}"
    );
}

/// Threads creating the same table at once: exactly one succeeds, the others get
/// `TableExists`, and the rows committed into the table survive a reopen.
#[test]
fn concurrent_creates_of_one_table_let_exactly_one_succeed() {
    let (d, l) = devs();
    // A log whose syncs take 2 ms, as a real device's do (so that racing DDL overlaps).
    let slow = FaultDevice::new(l);
    slow.inject(Fault::Delay {
        op: Op::Flush,
        by: Duration::from_millis(2),
    })
    .unwrap();
    let l: DeviceRef = Arc::new(slow);
    let db = Db::open(opts(&d, &l)).unwrap();
    for round in 0..20 {
        let name = format!("t{round}");
        let oks: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let (db, name) = (&db, name.clone());
                    s.spawn(move || match db.create_table(&name) {
                        Ok(()) => {
                            let tx = db.begin_write().unwrap();
                            tx.open_table(&name).unwrap().put(b"row", b"mine").unwrap();
                            tx.commit().unwrap();
                            1
                        }
                        Err(Error::TableExists(_)) => 0,
                        Err(e) => panic!("round {round}: {e}"),
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(
            oks, 1,
            "round {round}: {oks} creates of one table succeeded"
        );
    }
    db.close().unwrap();
    let db = Db::open(opts(&d, &l)).unwrap();
    let r = db.begin_read().unwrap();
    for round in 0..20 {
        let t = format!("t{round}");
        assert_eq!(
            r.open_table(&t).unwrap().get(b"row").unwrap().as_deref(),
            Some(&b"mine"[..]),
            "{t}"
        );
    }
}

/// The log is opened with O_DIRECT where the file system allows it; tmpfs does not, and a
/// database there still opens (the log falls back to the page cache), commits and recovers.
#[test]
fn a_database_on_tmpfs_opens_with_a_buffered_log() {
    // Any writable tmpfs will do; a Linux machine without one cannot run this test, and it
    // says so instead of passing.
    let mounts = std::fs::read_to_string("/proc/mounts").expect("read /proc/mounts");
    let tmpfs: Vec<&str> = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && f[2] == "tmpfs").then_some(f[1])
        })
        .collect();
    let dir = ["/dev/shm", "/run/shm", "/tmp", "/run"]
        .iter()
        .filter(|p| tmpfs.contains(p))
        .find_map(|p| tempfile::tempdir_in(p).ok())
        .unwrap_or_else(|| panic!("no writable tmpfs among {tmpfs:?}: mount one at /dev/shm"));
    let db = Db::open(DbOptions::in_dir(dir.path()).buffer_bytes(4 << 20)).unwrap();
    db.create_table("t").unwrap();
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"k", b"v").unwrap();
    tx.commit().unwrap();
    db.abandon();
    let db = Db::open(DbOptions::in_dir(dir.path()).buffer_bytes(4 << 20)).unwrap();
    assert_eq!(common::read(&db, "t", b"k").as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
}
