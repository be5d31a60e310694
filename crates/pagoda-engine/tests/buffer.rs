#![allow(clippy::unwrap_used)]
//! Buffer pool behaviour: midpoint insertion keeps the hot set through a large scan, the page
//! cleaner writes batches sorted by page number on the data stream (double-write area on its
//! own stream), counters move.

use pagoda_device::mem::MemDevice;
use pagoda_device::stats::DeviceStats;
use pagoda_device::{BlockDevice, Capabilities, DeviceRef, WriteHints};
use pagoda_engine::{Db, DbOptions};
use parking_lot::Mutex;
use std::sync::Arc;

/// Records `(sector, stream)` of writes and flush points.
#[derive(Debug)]
struct Recorder {
    inner: MemDevice,
    log: Mutex<Vec<Option<(u64, u16)>>>,
}

impl BlockDevice for Recorder {
    fn caps(&self) -> Capabilities {
        self.inner.caps()
    }
    fn read(&self, sector: u64, buf: &mut [u8]) -> pagoda_device::Result<()> {
        self.inner.read(sector, buf)
    }
    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> pagoda_device::Result<()> {
        self.log.lock().push(Some((sector, hints.stream)));
        self.inner.write(sector, buf, hints)
    }
    fn flush(&self) -> pagoda_device::Result<()> {
        self.log.lock().push(None);
        self.inner.flush()
    }
    fn trim(&self, sector: u64, sectors: u64) -> pagoda_device::Result<()> {
        self.inner.trim(sector, sectors)
    }
    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
    fn describe(&self) -> String {
        "recorder".into()
    }
}

fn opts(d: &DeviceRef, l: &DeviceRef, frames: usize) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(4096)
        .buffer_bytes(frames * 4096)
        .background(false)
        .verify_on_open(false)
}

#[test]
fn scan_does_not_flush_the_hot_set() {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    let db = Db::open(opts(&d, &l, 64)).unwrap();
    db.create_table("hot").unwrap();
    db.create_table("cold").unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..100u32 {
        tx.put("hot", format!("h{i:04}").as_bytes(), &[1u8; 200])
            .unwrap();
    }
    tx.commit().unwrap();
    for chunk in 0..20u32 {
        let mut tx = db.begin().unwrap();
        for i in chunk * 200..(chunk + 1) * 200 {
            tx.put("cold", format!("c{i:05}").as_bytes(), &[2u8; 200])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    db.close().unwrap();
    let db = Db::open(opts(&d, &l, 64)).unwrap();
    let read_hot = |db: &Db| {
        let tx = db.begin_read().unwrap();
        for i in 0..100u32 {
            assert!(tx
                .get("hot", format!("h{i:04}").as_bytes())
                .unwrap()
                .is_some());
        }
    };
    read_hot(&db);
    read_hot(&db);
    let cold_pages = {
        let before = db.stats().buffer.misses;
        let tx = db.begin_read().unwrap();
        assert_eq!(tx.range("cold", ..).unwrap().count(), 4000);
        db.stats().buffer.misses - before
    };
    assert!(
        cold_pages > 64,
        "the scan must read more pages than the pool holds ({cold_pages})"
    );
    let before = db.stats().buffer;
    read_hot(&db);
    let after = db.stats().buffer;
    assert_eq!(
        after.misses, before.misses,
        "hot pages were evicted by the scan"
    );
    assert!(after.evictions > 0 && after.hits > before.hits);
}

#[test]
fn cleaner_writes_sorted_batches_on_separate_streams() {
    let rec = Arc::new(Recorder {
        inner: MemDevice::with_capacity(64 << 20).unwrap(),
        log: Mutex::new(Vec::new()),
    });
    let d: DeviceRef = rec.clone();
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    let db = Db::open(opts(&d, &l, 32)).unwrap();
    db.create_table("t").unwrap();
    // Random-order inserts dirty many pages in random order; the pool must evict.
    let mut x = 12345u64;
    for _ in 0..300 {
        let mut tx = db.begin().unwrap();
        for _ in 0..10 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            tx.put("t", format!("{:08}", x >> 40).as_bytes(), &[3u8; 150])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    db.checkpoint().unwrap();
    let st = db.stats();
    assert!(st.buffer.cleaner_batches > 0 && st.buffer.writes > 0 && st.buffer.evictions > 0);
    assert!(st.buffer.doublewrite_pages >= st.buffer.writes);
    let log = rec.log.lock();
    let mut batches = 0;
    let mut run: Vec<u64> = Vec::new();
    for e in log.iter() {
        match e {
            Some((s, 2)) if *s >= 2 => run.push(*s),
            Some((_, 3)) | None => {
                if run.len() > 1 {
                    assert!(
                        run.windows(2).all(|w| w[0] < w[1]),
                        "batch not sorted by page: {run:?}"
                    );
                    batches += 1;
                }
                run.clear();
            }
            _ => {}
        }
    }
    assert!(
        batches > 3,
        "expected several multi-page batches, saw {batches}"
    );
    // Double-write area writes are on stream 3, data pages on stream 2.
    assert!(log.iter().flatten().any(|(_, s)| *s == 3));
}
