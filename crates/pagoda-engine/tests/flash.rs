//! The FaCE flash cache tier: every policy serves the newest page, survives restarts
//! warm and power cuts whole, refuses bad configurations, and never serves a damaged or stale
//! copy.
#![allow(clippy::unwrap_used)]

use pagoda_device::mem::MemDevice;
use pagoda_device::{DeviceRef, PowerCut, WriteHints};
use pagoda_engine::{Db, DbOptions, Error, FlashCacheOptions, FlashPages, FlashPolicy, TornMode};
use std::collections::BTreeMap;
use std::sync::Arc;

struct Devs {
    data: Arc<MemDevice>,
    log: Arc<MemDevice>,
    cache: Arc<MemDevice>,
}

impl Devs {
    fn new() -> Self {
        Self {
            data: Arc::new(MemDevice::with_capacity(64 << 20).unwrap()),
            log: Arc::new(MemDevice::with_capacity(16 << 20).unwrap()),
            cache: Arc::new(MemDevice::with_capacity(8 << 20).unwrap()),
        }
    }

    fn opts(&self, policy: FlashPolicy, pages: FlashPages) -> DbOptions {
        DbOptions::with_devices(self.data.clone(), self.log.clone())
            .page_size(4096)
            .buffer_bytes(128 * 4096)
            .commit_spill_bytes(0)
            .torn(TornMode::None)
            .flash_cache(self.flash(policy, pages))
    }

    fn flash(&self, policy: FlashPolicy, pages: FlashPages) -> FlashCacheOptions {
        FlashCacheOptions::new(self.cache.clone())
            .size_bytes(2 << 20)
            .policy(policy)
            .pages(pages)
    }

    fn cut(&self, seed: u64) {
        self.data.power_cut(seed).unwrap();
        self.log.power_cut(seed + 1).unwrap();
        self.cache.power_cut(seed + 2).unwrap();
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes()
}

/// Writes `rounds` rounds of updates over `n` keys (values 300 bytes: ~12 per page, so the
/// table spans several times the pool) and returns the expected contents.
fn churn(db: &Db, n: u64, rounds: u64, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for r in 0..rounds {
        for chunk in (0..n).collect::<Vec<_>>().chunks(50) {
            let tx = db.begin_write().unwrap();
            for &i in chunk {
                let v = format!("{r}-{i}-{}", "x".repeat(290)).into_bytes();
                tx.open_table("t").unwrap().put(&key(i), &v).unwrap();
                model.insert(key(i), v);
            }
            tx.commit().unwrap();
        }
    }
}

fn verify(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let tx = db.begin_read().unwrap();
    let all: BTreeMap<Vec<u8>, Vec<u8>> = tx
        .open_table("t")
        .unwrap()
        .range(..)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(all.len(), model.len());
    assert!(all == *model, "contents differ from the model");
}

#[test]
fn every_policy_serves_the_newest_pages_and_restarts_warm() {
    for (policy, pages) in [
        (FlashPolicy::Face, FlashPages::Dirty),
        (FlashPolicy::FaceGsc, FlashPages::Dirty),
        (FlashPolicy::Lru, FlashPages::Dirty),
        (FlashPolicy::Face, FlashPages::All),
    ] {
        let d = Devs::new();
        let db = Db::open(d.opts(policy, pages)).unwrap();
        db.create_table("t").unwrap();
        let mut model = BTreeMap::new();
        churn(&db, 6000, 3, &mut model);
        verify(&db, &model);
        let s = db.stats();
        let f = s.flash_cache.clone().expect("flash stats");
        assert!(f.ring_page_writes > 1000, "{policy}: {f:?}");
        assert!(f.write_backs > 0, "{policy}: the ring must wrap: {f:?}");
        assert!(f.hits > 0, "{policy}: DRAM misses served from flash: {f:?}");
        assert!(!f.warm_start);
        if policy == FlashPolicy::Lru {
            assert!(f.sequential_fraction < 0.5, "{f:?}");
        } else {
            assert!(f.sequential_fraction > 0.9, "{f:?}");
        }
        if policy == FlashPolicy::FaceGsc {
            assert!(f.gsc_reappends > 0, "{f:?}");
        }
        let report = db.check().unwrap();
        assert!(report.flash_slots_checked > 0);
        assert_eq!(report.flash_stale_slots, 0);
        db.close().unwrap();
        // Clean close: nothing dirty in flash, the data device alone is complete...
        let alone = Db::open(
            DbOptions::with_devices(d.data.clone(), d.log.clone())
                .buffer_bytes(128 * 4096)
                .torn(TornMode::None),
        )
        .unwrap();
        verify(&alone, &model);
        alone.close().unwrap();
        // ...and after that the cache starts cold, with a note (the database ran without it).
        let db = Db::open(d.opts(policy, pages)).unwrap();
        let f = db.stats().flash_cache.unwrap();
        assert!(!f.warm_start, "{f:?}");
        assert!(f.start_note.unwrap().contains("without it"));
        churn(&db, 2000, 1, &mut model);
        db.close().unwrap();
        // A clean close keeps it warm.
        let db = Db::open(d.opts(policy, pages)).unwrap();
        let f = db.stats().flash_cache.unwrap();
        assert!(f.warm_start, "{policy}: {f:?}");
        assert!(f.rebuild_pages > 0);
        verify(&db, &model);
        assert!(db.stats().flash_cache.unwrap().hits > 0);
        db.close().unwrap();
    }
}

#[test]
fn power_cuts_lose_nothing_acknowledged_and_recovery_reads_flash() {
    for (k, policy) in [FlashPolicy::Face, FlashPolicy::FaceGsc, FlashPolicy::Lru]
        .into_iter()
        .enumerate()
    {
        let d = Devs::new();
        let db = Db::open(d.opts(policy, FlashPages::Dirty)).unwrap();
        db.create_table("t").unwrap();
        let mut model = BTreeMap::new();
        let mut db = Some(db);
        for cycle in 0..4u64 {
            let cur = db.take().unwrap();
            churn(&cur, 4000, 1, &mut model);
            cur.checkpoint().unwrap();
            churn(&cur, 1000, 1, &mut model);
            cur.abandon();
            d.cut(100 * k as u64 + cycle);
            // The database depends on its cache now: without it, open refuses.
            let e = Db::open(
                DbOptions::with_devices(d.data.clone(), d.log.clone())
                    .buffer_bytes(128 * 4096)
                    .torn(TornMode::None),
            )
            .unwrap_err();
            assert!(e.to_string().contains("flash cache"), "{e}");
            let back = Db::open(d.opts(policy, FlashPages::Dirty).paranoid(true)).unwrap();
            let f = back.stats().flash_cache.unwrap();
            assert!(f.warm_start, "{policy}: {f:?}");
            assert!(f.rebuild_pages > 0, "{policy}: {f:?}");
            verify(&back, &model);
            assert_eq!(back.check().unwrap().flash_stale_slots, 0);
            db = Some(back);
        }
        db.unwrap().close().unwrap();
        let again = Db::open(d.opts(policy, FlashPages::Dirty)).unwrap();
        verify(&again, &model);
        again.close().unwrap();
    }
}

#[test]
fn bad_configurations_are_refused_with_the_fix() {
    let d = Devs::new();
    let base = || {
        DbOptions::with_devices(d.data.clone(), d.log.clone())
            .page_size(4096)
            .buffer_bytes(128 * 4096)
            .torn(TornMode::None)
    };
    let msg = |o: DbOptions| Db::open(o).unwrap_err().to_string();
    // The double-write buffer is what the cache replaces.
    let e = msg(base()
        .torn(TornMode::Doublewrite)
        .flash_cache(d.flash(FlashPolicy::Face, FlashPages::Dirty)));
    assert!(e.contains("--torn none"), "{e}");
    // A cache smaller than two batches.
    let e = msg(base().flash_cache(FlashCacheOptions::new(d.cache.clone()).size_bytes(256 << 10)));
    assert!(e.contains("--flash-cache-size"), "{e}");
    // A cache size beyond its device.
    let e = msg(base().flash_cache(FlashCacheOptions::new(d.cache.clone()).size_bytes(1 << 30)));
    assert!(e.contains("larger than its device"), "{e}");
    // The cache on the data or log device.
    let data: DeviceRef = d.data.clone();
    let e = msg(base().flash_cache(FlashCacheOptions::new(data)));
    assert!(e.contains("give it a device of its own"), "{e}");
    let log: DeviceRef = d.log.clone();
    let e = msg(base().flash_cache(FlashCacheOptions::new(log)));
    assert!(e.contains("give it a device of its own"), "{e}");
    // Bad names.
    assert!("fifo"
        .parse::<FlashPolicy>()
        .unwrap_err()
        .to_string()
        .contains("face-gsc"));
    assert!("some"
        .parse::<FlashPages>()
        .unwrap_err()
        .to_string()
        .contains("dirty or all"));
    // A cache of another database starts cold.
    let db = Db::open(d.opts(FlashPolicy::Face, FlashPages::Dirty)).unwrap();
    db.create_table("t").unwrap();
    db.close().unwrap();
    let other = Devs {
        data: Arc::new(MemDevice::with_capacity(64 << 20).unwrap()),
        log: Arc::new(MemDevice::with_capacity(16 << 20).unwrap()),
        cache: d.cache.clone(),
    };
    let db = Db::open(other.opts(FlashPolicy::Face, FlashPages::Dirty)).unwrap();
    let f = db.stats().flash_cache.unwrap();
    assert!(!f.warm_start);
    assert!(f.start_note.unwrap().contains("another database"));
    db.close().unwrap();
}

/// Overwrites the first sector of every page slot of the ring (not the segment headers), so
/// that every flash copy is damaged.
fn damage_ring(cache: &MemDevice) {
    let mut hb = vec![0u8; 2 * 4096];
    cache.read(0, &mut hb).unwrap();
    let h = hb
        .chunks(4096)
        .filter_map(|c| CacheHeader::decode(c).ok())
        .max_by_key(|h| h.generation)
        .expect("a cache header");
    let page_sectors = u64::from(h.page_size) / 4096;
    let seg_sectors = 2 + u64::from(h.per_segment) * page_sectors;
    let ring = 2 + 2 * u64::from(h.dir_sectors);
    let junk = vec![0x5au8; 4096];
    for seg in 0..u64::from(h.segments) {
        for k in 0..u64::from(h.per_segment) {
            let at = ring + seg * seg_sectors + 2 + k * page_sectors;
            cache.write(at, &junk, WriteHints::default()).unwrap();
        }
    }
    cache.flush().unwrap();
}

use pagoda_device::BlockDevice;
use pagoda_engine::format::CacheHeader;

#[test]
fn damaged_flash_copies_are_detected_never_served() {
    let d = Devs::new();
    let db = Db::open(d.opts(FlashPolicy::Face, FlashPages::Dirty)).unwrap();
    db.create_table("t").unwrap();
    let mut model = BTreeMap::new();
    churn(&db, 3000, 2, &mut model);
    // Clean close: every flash copy is also on the data device.
    db.close().unwrap();
    damage_ring(&d.cache);
    let db = Db::open(d.opts(FlashPolicy::Face, FlashPages::Dirty)).unwrap();
    verify(&db, &model);
    let f = db.stats().flash_cache.unwrap();
    assert!(f.corrupt_slots > 0, "the damage must be seen: {f:?}");
    db.close().unwrap();
    // Dirty copies (the only newest copy) damaged: the read fails, naming the page, rather
    // than serving the older data-device version.
    let db = Db::open(d.opts(FlashPolicy::Face, FlashPages::Dirty)).unwrap();
    churn(&db, 3000, 1, &mut model);
    db.checkpoint().unwrap();
    db.abandon();
    damage_ring(&d.cache);
    match Db::open(d.opts(FlashPolicy::Face, FlashPages::Dirty)) {
        Err(e) => assert!(
            matches!(e, Error::Corruption { .. }) && e.to_string().contains("flash cache"),
            "{e}"
        ),
        Ok(db) => {
            let tx = db.begin_read().unwrap();
            let r: Result<Vec<_>, _> = tx.open_table("t").unwrap().range(..).collect();
            let e = r.unwrap_err();
            assert!(e.to_string().contains("flash cache"), "{e}");
        }
    }
}
