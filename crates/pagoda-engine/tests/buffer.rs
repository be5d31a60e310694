#![allow(clippy::unwrap_used)]
//! Buffer pool behaviour: midpoint insertion keeps the hot set through a large scan, the page
//! cleaner writes batches sorted by page number on the data stream (double-write area on its
//! own stream), counters move.

use pagoda_device::fault::{FaultDevice, Op};
use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use pagoda_engine::{stats::BufferStats, Db, DbOptions, TornMode};
use std::sync::Arc;

/// One request seen on the data device.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    /// A write: first sector, stream, and the page ids named by the headers of the 4 KiB
    /// pages written (byte 8..16 of each page; the test uses 4 KiB pages).
    Write {
        sector: u64,
        stream: u16,
        pages: Vec<u64>,
    },
    /// A flush (the writes before it are durable).
    Flush,
}

/// A data device that records every write (with its bytes) and flush.
fn recorder() -> Arc<FaultDevice> {
    let rec = Arc::new(FaultDevice::new(Arc::new(
        MemDevice::with_capacity(64 << 20).unwrap(),
    )));
    rec.record_data(true);
    rec
}

/// The writes and flushes `rec` saw since the last call, in order.
fn events(rec: &FaultDevice) -> Vec<Event> {
    rec.take_records()
        .into_iter()
        .filter_map(|r| match r.op {
            Op::Write => Some(Event::Write {
                sector: r.sector,
                stream: r.stream,
                pages: r
                    .data
                    .chunks(4096)
                    .map(|p| u64::from_le_bytes(p[8..16].try_into().unwrap()))
                    .collect(),
            }),
            Op::Flush => Some(Event::Flush),
            _ => None,
        })
        .collect()
}

fn opts(d: &DeviceRef, l: &DeviceRef, frames: usize) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(4096)
        .buffer_bytes(frames * 4096)
        .background(false)
        .verify_on_open(false)
        // The pool alone: these tests measure eviction and cleaning under its own size.
        .commit_spill_bytes(0)
}

#[test]
fn scan_does_not_flush_the_hot_set() {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    let db = Db::open(opts(&d, &l, 64)).unwrap();
    db.create_table("hot").unwrap();
    db.create_table("cold").unwrap();
    let tx = db.begin_write().unwrap();
    for i in 0..100u32 {
        tx.open_table("hot")
            .unwrap()
            .put(format!("h{i:04}").as_bytes(), &[1u8; 200])
            .unwrap();
    }
    tx.commit().unwrap();
    for chunk in 0..20u32 {
        let tx = db.begin_write().unwrap();
        for i in chunk * 200..(chunk + 1) * 200 {
            tx.open_table("cold")
                .unwrap()
                .put(format!("c{i:05}").as_bytes(), &[2u8; 200])
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
                .open_table("hot")
                .unwrap()
                .get(format!("h{i:04}").as_bytes())
                .unwrap()
                .is_some());
        }
    };
    read_hot(&db);
    read_hot(&db);
    let cold_pages = {
        let before = db.stats().buffer.misses;
        let tx = db.begin_read().unwrap();
        assert_eq!(tx.open_table("cold").unwrap().range(..).count(), 4000);
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

/// Where the cleaner is in its double-write protocol (modes doublewrite and doublewrite-full).
#[derive(Debug)]
enum Dw {
    /// Every page written so far is durable in place; the area may be overwritten.
    Idle,
    /// The batch is in the double-write area, not yet synced: no page may be written in place.
    AreaUnsynced(Vec<u64>),
    /// The area copy is durable: the batch's pages may be written in place (`written` so far).
    AreaSynced { batch: Vec<u64>, written: Vec<u64> },
    /// A batch with no page in the area (every page's image is in the log): written so far.
    Direct(Vec<u64>),
}

/// One in-place request of a batch: consecutive pages at their own sector, after the batch's
/// earlier requests in page order. Appends them to `written`; true for a multi-page request.
fn in_place_run(at: &str, written: &mut Vec<u64>, pages: &[u64], sector: u64) -> bool {
    assert_eq!(sector, pages[0], "{at}: page id does not match its sector");
    assert!(
        pages.windows(2).all(|w| w[1] == w[0] + 1),
        "{at}: one request must hold consecutive pages: {pages:?}"
    );
    assert!(
        written.last() < pages.first(),
        "{at}: in-place writes of a batch out of page order"
    );
    written.extend_from_slice(pages);
    pages.len() > 1
}

/// Checks the double-write protocol of a data-device trace (from after the database was
/// created): each batch's copied pages go to the area (stream 3) and are synced before any page
/// is written in place (stream 2); then the batch's pages, every copied one among them, are
/// written in place sorted by page id, and synced before the next batch overwrites the area.
/// Returns the number of batches, of multi-page in-place requests, and of pages written in
/// place without a copy (which the engine may do only for pages imaged in the log).
fn check_doublewrite_protocol(log: &[Event], first_page_sector: u64) -> (usize, usize, u64) {
    let mut state = Dw::Idle;
    let mut batches = 0;
    let mut multi_page_runs = 0;
    let mut uncopied = 0u64;
    for (i, e) in log.iter().enumerate() {
        let at = format!("event {i} ({e:?})");
        state = match (state, e) {
            (
                Dw::Idle,
                Event::Write {
                    stream: 3, pages, ..
                },
            ) => {
                assert!(
                    pages.windows(2).all(|w| w[0] < w[1]),
                    "{at}: batch not sorted by page id: {pages:?}"
                );
                batches += 1;
                Dw::AreaUnsynced(pages.clone())
            }
            (Dw::AreaSynced { batch, written }, Event::Write { stream: 3, .. }) => panic!(
                "{at}: the double-write area is overwritten before the in-place writes of the \
                 previous batch were synced (batch {batch:?}, written {written:?})"
            ),
            (Dw::AreaUnsynced(batch), Event::Write { stream: 3, .. }) => {
                panic!("{at}: second area write before batch {batch:?} was synced")
            }
            (Dw::AreaUnsynced(batch), Event::Flush) => Dw::AreaSynced {
                batch,
                written: Vec::new(),
            },
            (
                Dw::AreaUnsynced(batch),
                Event::Write {
                    stream: 2, sector, ..
                },
            ) if *sector >= first_page_sector => {
                panic!("{at}: page written in place before the area copy of batch {batch:?} was synced")
            }
            (
                Dw::Idle,
                Event::Write {
                    stream: 2,
                    sector,
                    pages,
                },
            ) if *sector >= first_page_sector => {
                let mut written = Vec::new();
                multi_page_runs += usize::from(in_place_run(&at, &mut written, pages, *sector));
                batches += 1;
                uncopied += pages.len() as u64;
                Dw::Direct(written)
            }
            (
                Dw::Direct(mut written),
                Event::Write {
                    stream: 2,
                    sector,
                    pages,
                },
            ) if *sector >= first_page_sector => {
                multi_page_runs += usize::from(in_place_run(&at, &mut written, pages, *sector));
                uncopied += pages.len() as u64;
                Dw::Direct(written)
            }
            (Dw::Direct(_), Event::Flush) => Dw::Idle,
            (Dw::Direct(written), Event::Write { stream: 3, .. }) => {
                panic!(
                    "{at}: the area is written before the in-place writes {written:?} were synced"
                )
            }
            (
                Dw::AreaSynced { batch, mut written },
                Event::Write {
                    stream: 2,
                    sector,
                    pages,
                },
            ) if *sector >= first_page_sector => {
                multi_page_runs += usize::from(in_place_run(&at, &mut written, pages, *sector));
                uncopied += pages.iter().filter(|p| !batch.contains(p)).count() as u64;
                Dw::AreaSynced { batch, written }
            }
            (Dw::AreaSynced { batch, written }, Event::Flush) => {
                if written.is_empty() {
                    // A sync between the area write and the first in-place write.
                    Dw::AreaSynced { batch, written }
                } else {
                    assert!(
                        batch.iter().all(|p| written.contains(p)),
                        "{at}: the in-place writes {written:?} must include every copied page \
                         {batch:?}"
                    );
                    Dw::Idle
                }
            }
            // Superblocks (below the first page) and syncs with nothing pending.
            (s, _) => s,
        };
    }
    assert!(
        matches!(state, Dw::Idle),
        "trace ends inside a batch: {state:?}"
    );
    (batches, multi_page_runs, uncopied)
}

#[test]
fn cleaner_writes_sorted_batches_on_separate_streams() {
    let st = cleaner_protocol(TornMode::Doublewrite);
    // Random inserts split leaves, and split halves are imaged in the log.
    assert!(st.doublewrite_skipped > 0, "{st:?}");
}

/// The InnoDB-like baseline keeps the same protocol and copies every page it writes.
#[test]
fn doublewrite_full_copies_every_page_in_the_same_protocol() {
    let st = cleaner_protocol(TornMode::DoublewriteFull);
    assert_eq!(st.doublewrite_skipped, 0, "{st:?}");
    assert_eq!(st.doublewrite_pages, st.writes, "{st:?}");
}

/// Random-order inserts through a small pool in mode `torn`, then a checkpoint: checks the
/// trace of the data device against the double-write protocol; returns the buffer stats.
fn cleaner_protocol(torn: TornMode) -> BufferStats {
    let rec = recorder();
    let d: DeviceRef = rec.clone();
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    let db = Db::open(opts(&d, &l, 32).torn(torn)).unwrap();
    // Creation writes its first pages directly; the protocol applies from here on.
    events(&rec);
    db.create_table("t").unwrap();
    // Random-order inserts dirty many pages in random order; the pool must evict.
    let mut x = 12345u64;
    for _ in 0..300 {
        let tx = db.begin_write().unwrap();
        for _ in 0..10 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            tx.open_table("t")
                .unwrap()
                .put(format!("{:08}", x >> 40).as_bytes(), &[3u8; 150])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    db.checkpoint().unwrap();
    let st = db.stats();
    assert!(st.buffer.cleaner_batches > 0 && st.buffer.writes > 0 && st.buffer.evictions > 0);
    assert_eq!(
        st.buffer.doublewrite_pages + st.buffer.doublewrite_skipped,
        st.buffer.writes
    );
    let log = events(&rec);
    // 4 KiB pages: the area is pages 16..48 (sector = page id), data pages start at 48.
    let (batches, runs, uncopied) = check_doublewrite_protocol(&log, 48);
    assert_eq!(uncopied, st.buffer.doublewrite_skipped);
    assert_eq!(batches as u64, st.buffer.cleaner_batches);
    assert!(
        batches > 3 && runs > 3,
        "expected several batches with merged runs, saw {batches} batches, {runs} runs"
    );
    // Every area write starts at the area (sector 16) on stream 3; data pages use stream 2.
    for e in log.iter() {
        if let Event::Write { sector, stream, .. } = e {
            assert!(
                (*stream == 3) == (*sector == 16),
                "area write off stream 3 or stream-3 write outside the area: {e:?}"
            );
            assert!(*stream == 3 || *stream == 2, "{e:?}");
        }
    }
    st.buffer
}

#[test]
fn checkpoint_writes_the_dirty_set_in_one_ascending_sweep() {
    let rec = recorder();
    let d: DeviceRef = rec.clone();
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    // A pool that holds the whole table (every page stays dirty until the checkpoint) but
    // not in its young zone, so that touches reorder the LRU lists.
    let db = Db::open(opts(&d, &l, 256).torn(pagoda_engine::TornMode::None)).unwrap();
    db.create_table("t").unwrap();
    let mut x = 777u64;
    let mut keys = Vec::new();
    for _ in 0..300 {
        let tx = db.begin_write().unwrap();
        for _ in 0..10 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let k = format!("{:08}", x >> 40);
            tx.open_table("t")
                .unwrap()
                .put(k.as_bytes(), &[5u8; 150])
                .unwrap();
            keys.push(k);
        }
        tx.commit().unwrap();
    }
    // Touch the leaves in descending key order, twice: the LRU order is then about key
    // order, which is not page order (random inserts split leaves into newly allocated
    // pages anywhere in the tree).
    keys.sort();
    let tx = db.begin_read().unwrap();
    for _ in 0..2 {
        for k in keys.iter().rev() {
            assert!(tx
                .open_table("t")
                .unwrap()
                .get(k.as_bytes())
                .unwrap()
                .is_some());
        }
    }
    drop(tx);
    events(&rec);
    db.checkpoint().unwrap();
    let log = events(&rec);
    let writes: Vec<&Vec<u64>> = log
        .iter()
        .filter_map(|e| match e {
            // Data pages only (the superblocks sit below page 16).
            Event::Write { sector, pages, .. } if *sector >= 16 => Some(pages),
            _ => None,
        })
        .collect();
    let pages: Vec<u64> = writes.iter().flat_map(|p| p.iter().copied()).collect();
    assert!(pages.len() > 100, "the load dirtied {} pages", pages.len());
    // Random-order inserts dirty pages in no particular order; the checkpoint still writes
    // them in one ascending sweep, so consecutive pages merge into few long requests.
    assert!(
        pages.windows(2).all(|w| w[0] < w[1]),
        "checkpoint writes not in one ascending sweep: {pages:?}"
    );
    assert!(
        writes.len() * 8 <= pages.len(),
        "{} requests for {} pages: runs were not merged",
        writes.len(),
        pages.len()
    );
}

fn key(i: u32) -> String {
    format!("k{i:06}")
}

/// Loads 2,000 keys in order in mode `torn` through a pool that holds the table, then
/// checkpoints: every leaf is new, so its final image is in the log after the redo start.
fn ordered_load(d: &DeviceRef, l: &DeviceRef, torn: TornMode) -> (Db, BufferStats) {
    let db = Db::open(opts(d, l, 512).torn(torn)).unwrap();
    db.create_table("t").unwrap();
    for chunk in 0..20u32 {
        let tx = db.begin_write().unwrap();
        for i in chunk * 100..(chunk + 1) * 100 {
            tx.open_table("t")
                .unwrap()
                .put(key(i).as_bytes(), &[1u8; 150])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    db.checkpoint().unwrap();
    let load = db.stats().buffer;
    assert!(load.writes > 50, "the load wrote {} pages", load.writes);
    (db, load)
}

/// The same load that skips nearly every copy in mode doublewrite copies every page in
/// doublewrite-full (a mode the cleaner ignored would skip here too).
#[test]
fn doublewrite_full_copies_the_pages_doublewrite_skips() {
    let mem = |mib: u64| -> DeviceRef { Arc::new(MemDevice::with_capacity(mib << 20).unwrap()) };
    let (_, skipping) = ordered_load(&mem(64), &mem(16), TornMode::Doublewrite);
    let (_, full) = ordered_load(&mem(64), &mem(16), TornMode::DoublewriteFull);
    assert!(skipping.doublewrite_skipped > 0, "{skipping:?}");
    assert_eq!(full.doublewrite_skipped, 0, "{full:?}");
    assert_eq!(full.doublewrite_pages, full.writes, "{full:?}");
    assert_eq!(
        full.writes, skipping.writes,
        "the same load wrote other pages"
    );
}

#[test]
fn only_pages_imaged_since_the_redo_start_skip_the_doublewrite_copy() {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    // The pool holds the table: the checkpoints write every page, the new leaves with no
    // double-write copy.
    let (db, load) = ordered_load(&d, &l, TornMode::Doublewrite);
    assert!(
        load.doublewrite_skipped * 10 >= load.writes * 9,
        "new leaves were copied: {load:?}"
    );
    // Updates in place, one value per leaf: their images now lie before the redo start (the
    // checkpoint moved it), so a torn write could be repaired only from a copy: all copied.
    for i in (0..2000u32).step_by(20) {
        let tx = db.begin_write().unwrap();
        tx.open_table("t")
            .unwrap()
            .put(key(i).as_bytes(), &[2u8; 150])
            .unwrap();
        tx.commit().unwrap();
    }
    db.checkpoint().unwrap();
    let upd = db.stats().buffer;
    assert!(upd.writes - load.writes > 50, "{upd:?}");
    assert_eq!(
        upd.doublewrite_skipped, load.doublewrite_skipped,
        "pages imaged before the redo start skipped the copy: {upd:?}"
    );
    assert_eq!(
        upd.doublewrite_pages - load.doublewrite_pages,
        upd.writes - load.writes
    );
    db.close().unwrap();
    let db = Db::open(opts(&d, &l, 512)).unwrap();
    let tx = db.begin_read().unwrap();
    for i in 0..2000u32 {
        let want = if i % 20 == 0 { 2u8 } else { 1u8 };
        assert_eq!(
            tx.open_table("t").unwrap().get(key(i).as_bytes()).unwrap(),
            Some(vec![want; 150])
        );
    }
}

/// A batch whose in-place sync fails leaves its pages neither durable nor intact (a failed
/// write may stop halfway through a page; Linux drops the dirty pages of a failed fsync, so a
/// retried one succeeds without them): their copies in the double-write area are what repairs
/// them at recovery. A checkpoint already waiting for the cleaner when the sync failed must
/// then fail, writing nothing: before the fix it wrote its own batches over those copies.
#[test]
fn a_failed_batch_sync_stops_every_later_write_out() {
    use pagoda_device::fault::{Failure, Fault};
    use pagoda_engine::fault::Event as Probe;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    let rec = recorder();
    let d: DeviceRef = rec.clone();
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    let begun = Arc::new(AtomicUsize::new(0));
    let seen = begun.clone();
    let observer = Arc::new(move |e: Probe| {
        if e == Probe::CheckpointBegin {
            seen.fetch_add(1, Ordering::AcqRel);
        }
    });
    // A pool that holds the whole table: the checkpoint writes every page.
    let open = |d: &DeviceRef| opts(d, &l, 256).torn(TornMode::Doublewrite);
    let db = Db::open(open(&d).observer(observer)).unwrap();
    db.create_table("t").unwrap();
    for chunk in 0..10u32 {
        let tx = db.begin_write().unwrap();
        for i in chunk * 100..(chunk + 1) * 100 {
            tx.open_table("t")
                .unwrap()
                .put(format!("k{i:05}").as_bytes(), &[7u8; 150])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    rec.take_records();
    begun.store(0, Ordering::Release);
    // The first batch's second sync (after its in-place writes) fails and drops them.
    rec.inject(Fault::Fail {
        op: Op::Flush,
        after: 1,
        times: 1,
        failure: Failure::EioLosingWrites,
    })
    .unwrap();
    rec.hold(Op::Flush);
    std::thread::scope(|s| {
        let first = s.spawn(|| db.checkpoint());
        // It holds the checkpoint and cleaner locks, in the sync of the double-write area.
        assert!(rec.wait_until_held(Op::Flush, 1, Duration::from_secs(10)));
        let second = s.spawn(|| db.checkpoint());
        // Time for it to find the database up and wait for the checkpoint lock.
        std::thread::sleep(Duration::from_millis(200));
        rec.release(Op::Flush);
        assert!(
            first.join().unwrap().is_err(),
            "the failed sync must fail it"
        );
        let r = second.join().unwrap();
        assert_eq!(
            begun.load(Ordering::Acquire),
            2,
            "the second checkpoint was not in flight when the sync failed"
        );
        assert!(
            r.is_err(),
            "a checkpoint went on after a failed sync: {r:?}"
        );
    });
    assert!(db.failure().is_some());
    let log = rec.take_records();
    let failed = log
        .iter()
        .position(|r| r.op == Op::Flush && r.failed)
        .expect("the sync failed");
    assert!(
        log[..failed]
            .iter()
            .any(|r| r.op == Op::Write && r.stream == 3),
        "the failed batch had no copy in the area: {log:?}"
    );
    let later: Vec<_> = log[failed + 1..]
        .iter()
        .filter(|r| r.op != Op::Read)
        .collect();
    assert!(
        later.is_empty(),
        "the data device was written after the failed sync: {later:?}"
    );
    db.abandon();
    // Recovery brings back every row from the area and the log.
    let db = Db::open(open(&d)).unwrap();
    let tx = db.begin_read().unwrap();
    assert_eq!(tx.open_table("t").unwrap().range(..).count(), 1000);
    drop(tx);
    db.close().unwrap();
}
