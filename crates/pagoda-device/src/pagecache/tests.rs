use super::*;
use crate::mem::{MemConfig, MemDevice};
use std::sync::Arc;

/// A RAM device that records every write request it receives.
#[derive(Debug)]
struct Recorder {
    mem: MemDevice,
    writes: Mutex<Vec<(u64, u64, WriteHints)>>,
}

impl crate::DelegateDevice for Recorder {
    fn inner(&self) -> &dyn BlockDevice {
        &self.mem
    }
    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        let n = (buf.len() / SECTOR_SIZE) as u64;
        self.writes.lock().push((sector, n, hints));
        self.mem.write(sector, buf, hints)
    }
    fn describe(&self) -> String {
        "recorder".into()
    }
}

fn inner() -> Arc<Recorder> {
    let cfg = MemConfig {
        capacity_bytes: 64 << 20,
        ..MemConfig::default()
    };
    Arc::new(Recorder {
        mem: MemDevice::new(cfg).expect("mem"),
        writes: Mutex::new(Vec::new()),
    })
}

fn cache(inner: &Arc<Recorder>, capacity: u64, request: usize, depth: usize) -> PageCache {
    let opts = PageCacheOptions {
        capacity_bytes: capacity,
        max_request_bytes: request,
        depth,
    };
    PageCache::new(Arc::clone(inner) as DeviceRef, opts).expect("cache")
}

/// `pages` 4 KiB pages, each filled with `tag` and its index.
fn data(pages: usize, tag: u8) -> Vec<u8> {
    (0..pages)
        .flat_map(|i| {
            let mut p = vec![tag; SECTOR_SIZE];
            p[0] = i as u8;
            p
        })
        .collect()
}

fn read(dev: &dyn BlockDevice, sector: u64, pages: usize) -> Vec<u8> {
    let mut b = vec![0u8; pages * SECTOR_SIZE];
    dev.read(sector, &mut b).expect("read");
    b
}

#[test]
fn a_write_reaches_the_device_only_at_flush() {
    let dev = inner();
    let c = cache(&dev, 8 << 20, 512 << 10, 4);
    c.write(8, &data(4, 7), WriteHints::NORMAL).expect("write");
    assert!(
        dev.writes.lock().is_empty(),
        "a buffered write issues no I/O"
    );
    assert_eq!(read(&*dev, 8, 4), vec![0u8; 4 * SECTOR_SIZE]);
    assert_eq!(c.stats().page_cache.expect("stats").dirty_pages, 4);
    c.flush().expect("flush");
    assert_eq!(read(&*dev, 8, 4), data(4, 7));
    assert_eq!(
        dev.stats().flushes,
        1,
        "the device is flushed after writeback"
    );
    let s = c.stats().page_cache.expect("stats");
    assert_eq!((s.dirty_pages, s.writeback_pages), (0, 4));
}

#[test]
fn flush_writes_sorted_merged_4k_units_without_the_atomic_hint() {
    let dev = inner();
    // One request in flight at a time, so that the device sees them in issue order; requests
    // of at most 3 pages.
    let c = cache(&dev, 8 << 20, 3 * SECTOR_SIZE, 1);
    for s in [10, 3, 11, 4, 20, 5, 6, 12] {
        c.write(s, &data(1, s as u8), WriteHints::NORMAL)
            .expect("write");
    }
    // A 16 KiB page at 100, and one on another stream right after it.
    c.write(100, &data(4, 1), WriteHints::NORMAL)
        .expect("write");
    c.write(104, &data(1, 2), WriteHints::stream(1))
        .expect("write");
    c.flush().expect("flush");
    let got: Vec<(u64, u64)> = dev.writes.lock().iter().map(|w| (w.0, w.1)).collect();
    assert_eq!(
        got,
        [
            (3, 3),
            (6, 1),
            (10, 3),
            (20, 1),
            (100, 3),
            (103, 1),
            (104, 1)
        ],
        "sorted by address, contiguous pages of one stream merged up to the request size"
    );
    let hints: Vec<WriteHints> = dev.writes.lock().iter().map(|w| w.2).collect();
    assert!(hints.iter().all(|h| !h.atomic), "{hints:?}");
    assert_eq!(hints[6].stream, 1, "a page keeps its stream");
    assert_eq!(read(&*dev, 100, 4), data(4, 1));
    // An atomic write cannot go through the cache at all.
    assert!(c.caps().atomic_write_unit.is_none());
    let e = c
        .write(200, &data(4, 1), WriteHints::atomic(0))
        .expect_err("atomic");
    assert!(matches!(e, DeviceError::AtomicRejected(_)), "{e}");
}

#[test]
fn writeback_with_requests_in_flight_writes_every_page_once() {
    let dev = inner();
    let c = cache(&dev, 8 << 20, 64 << 10, 8);
    for s in (0..400).step_by(2) {
        c.write(s, &data(1, 3), WriteHints::NORMAL).expect("write");
    }
    c.flush().expect("flush");
    let mut got: Vec<u64> = dev.writes.lock().iter().map(|w| w.0).collect();
    got.sort_unstable();
    assert_eq!(got, (0..400).step_by(2).collect::<Vec<u64>>());
    assert_eq!(c.stats().page_cache.expect("stats").writeback_requests, 200);
}

#[test]
fn reads_hit_after_a_write_and_after_a_miss() {
    let dev = inner();
    dev.mem
        .write(40, &data(2, 9), WriteHints::NORMAL)
        .expect("w");
    let c = cache(&dev, 8 << 20, 512 << 10, 4);
    c.write(0, &data(2, 5), WriteHints::NORMAL).expect("write");
    assert_eq!(read(&c, 0, 2), data(2, 5));
    assert_eq!(dev.stats().host_read_requests, 0, "served from the cache");
    // A miss reads the device once, then the pages are cached.
    assert_eq!(read(&c, 40, 2), data(2, 9));
    assert_eq!(read(&c, 40, 2), data(2, 9));
    assert_eq!(dev.stats().host_read_requests, 1);
    // A partial hit reads only the missing run and keeps the cached (newer) page.
    c.write(51, &data(1, 6), WriteHints::NORMAL).expect("write");
    let b = read(&c, 50, 3);
    assert_eq!(&b[SECTOR_SIZE..2 * SECTOR_SIZE], &data(1, 6)[..]);
    assert_eq!(dev.stats().host_read_requests, 3, "pages 50 and 52, apart");
    let s = c.stats().page_cache.expect("stats");
    assert_eq!((s.read_hit_pages, s.read_miss_pages), (5, 4));
}

#[test]
fn the_capacity_bound_holds_and_evicts_the_least_recently_used() {
    let dev = inner();
    let c = cache(&dev, 1 << 20, 64 << 10, 4); // 256 pages
    for s in 0..1000u64 {
        c.write(s * 3, &data(1, s as u8), WriteHints::NORMAL)
            .expect("write");
        assert!(c.state.lock().pages.len() <= 256);
    }
    let s = c.stats().page_cache.expect("stats");
    assert!(
        s.forced_writebacks > 0,
        "a full cache made the writer write back"
    );
    for s in (0..1000u64).step_by(37) {
        assert_eq!(read(&c, s * 3, 1), data(1, s as u8), "page {s}");
    }
    // LRU: with every page clean, touch the oldest, then bring in new pages: the touched
    // one stays cached, the next oldest goes.
    c.flush().expect("flush");
    let oldest = {
        let st = c.state.lock();
        st.clean.values().take(2).copied().collect::<Vec<u64>>()
    };
    read(&c, oldest[0], 1);
    let free = c.state.lock().free.len() as u64;
    for s in 0..=free {
        read(&c, 10_000 + s, 1);
    }
    let st = c.state.lock();
    assert!(st.pages.contains_key(&oldest[0]), "touched: kept");
    assert!(
        !st.pages.contains_key(&oldest[1]),
        "least recently used: evicted"
    );
    assert!(st.pages.len() <= 256);
}

#[test]
fn a_power_cut_before_flush_loses_the_unflushed_writes() {
    let dev = inner();
    let c = cache(&dev, 8 << 20, 512 << 10, 4);
    c.write(0, &data(4, 1), WriteHints::NORMAL).expect("write");
    c.flush().expect("flush");
    c.write(0, &data(4, 2), WriteHints::NORMAL).expect("write");
    c.write(64, &data(2, 3), WriteHints::NORMAL).expect("write");
    let report = c
        .as_power_cut()
        .expect("the device below cuts power")
        .power_cut(1)
        .expect("cut");
    assert_eq!(report.dropped_sectors, 6, "{report:?}");
    assert_eq!(read(&c, 0, 4), data(4, 1), "the flushed version survives");
    assert_eq!(read(&c, 64, 2), vec![0u8; 2 * SECTOR_SIZE]);
}

#[test]
fn write_behind_starts_writeback_and_trim_drops_cached_pages() {
    let dev = inner();
    let c = cache(&dev, 8 << 20, 512 << 10, 4);
    c.write(0, &data(2, 1), WriteHints::NORMAL).expect("write");
    c.write(16, &data(8, 4), WriteHints::NORMAL.behind())
        .expect("write");
    assert_eq!(dev.writes.lock().as_slice(), [(16, 8, WriteHints::NORMAL)]);
    assert_eq!(dev.stats().flushes, 0, "write-behind flushes nothing");
    c.trim(0, 24).expect("trim");
    assert_eq!(read(&c, 0, 24), vec![0u8; 24 * SECTOR_SIZE]);
    c.flush().expect("flush");
    assert_eq!(
        dev.writes.lock().len(),
        1,
        "trimmed dirty pages are not written"
    );
}

#[test]
fn threads_see_their_own_last_writes_under_eviction_and_writeback() {
    let dev = inner();
    let c = cache(&dev, 1 << 20, 32 << 10, 4);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let c = &c;
            s.spawn(move || {
                let mut last = [0u8; 200];
                for round in 1..=20u8 {
                    for (i, v) in last.iter_mut().enumerate() {
                        let sector = t * 1000 + i as u64;
                        if (i as u64 + t + u64::from(round)).is_multiple_of(3) {
                            c.write(sector, &[round; SECTOR_SIZE], WriteHints::NORMAL)
                                .expect("write");
                            *v = round;
                        }
                        let b = read(c, sector, 1);
                        assert_eq!(b[17], *v, "thread {t} page {i} round {round}");
                    }
                    if round.is_multiple_of(7) {
                        c.flush().expect("flush");
                    }
                }
                for (i, v) in last.iter().enumerate() {
                    assert_eq!(read(c, t * 1000 + i as u64, 1)[17], *v);
                }
            });
        }
    });
    c.flush().expect("flush");
    assert!(c.stats().page_cache.expect("stats").evicted_pages > 0);
}
