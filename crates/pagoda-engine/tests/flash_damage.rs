#![allow(clippy::unwrap_used)]
//! A bad flash-cache slot (issue 42): a slot that fails its checksum (a bit flipped on the
//! medium, or on every read) or whose read fails is served from the data device when that
//! copy is as new (a clean page), and counted; when the slot holds the only newest copy (a
//! dirty page), the read fails naming the slot and the page, on every read, and the data
//! device's older version is never served.

use pagoda_device::fault::{Failure, Fault, FaultDevice, Op};
use pagoda_device::mem::MemDevice;
use pagoda_device::{BlockDevice, DeviceRef};
use pagoda_engine::format::CacheHeader;
use pagoda_engine::{Db, DbOptions, Error, FlashCacheOptions, FlashPages, FlashPolicy, TornMode};
use std::collections::BTreeMap;
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

#[derive(Clone, Copy, Debug)]
enum Bad {
    /// A bit flipped in every slot on the medium.
    Medium,
    /// A bit flipped in every slot on every read (the medium intact).
    OnRead,
    /// Every read of the cache device fails.
    Eio,
}

const ALL_BAD: [Bad; 3] = [Bad::Medium, Bad::OnRead, Bad::Eio];

struct Devs {
    data: Arc<MemDevice>,
    log: Arc<MemDevice>,
    cache: Arc<MemDevice>,
    /// The cache device as the engine sees it.
    faulty: Arc<FaultDevice>,
}

impl Devs {
    fn new() -> Self {
        let cache = Arc::new(MemDevice::with_capacity(8 << 20).unwrap());
        Self {
            data: Arc::new(MemDevice::with_capacity(64 << 20).unwrap()),
            log: Arc::new(MemDevice::with_capacity(16 << 20).unwrap()),
            faulty: Arc::new(FaultDevice::new(cache.clone())),
            cache,
        }
    }

    /// Background work off: no checkpoint or write-back reads a slot behind the test's back.
    fn opts(&self, pages: FlashPages) -> DbOptions {
        let cache: DeviceRef = self.faulty.clone();
        DbOptions::with_devices(self.data.clone(), self.log.clone())
            .page_size(4096)
            .buffer_bytes(128 * 4096)
            .commit_spill_bytes(0)
            .torn(TornMode::None)
            .background(false)
            .flash_cache(
                FlashCacheOptions::new(cache)
                    .size_bytes(2 << 20)
                    .policy(FlashPolicy::Face)
                    .pages(pages),
            )
    }

    /// Arms `bad` on every page slot of the ring (the segment headers stay intact).
    fn damage(&self, bad: Bad) {
        if let Bad::Eio = bad {
            let f = Fault::Fail {
                op: Op::Read,
                after: 0,
                times: u64::MAX,
                failure: Failure::Eio,
            };
            self.faulty.inject(f).unwrap();
            return;
        }
        for sector in slot_sectors(&self.cache) {
            let f = Fault::FlipBit {
                sector,
                byte: 100,
                bit: 3,
                persistent: matches!(bad, Bad::Medium),
            };
            self.faulty.inject(f).unwrap();
        }
    }
}

/// The first sector of every page slot of the cache's ring.
fn slot_sectors(cache: &MemDevice) -> Vec<u64> {
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
    let mut out = Vec::new();
    for seg in 0..u64::from(h.segments) {
        for k in 0..u64::from(h.per_segment) {
            out.push(ring + seg * seg_sectors + 2 + k * page_sectors);
        }
    }
    out
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes()
}

/// `rounds` rounds of updates over `n` keys (~12 rows per page: the table spans several
/// times the pool, so pages go to the cache and are read back from it).
fn churn(db: &Db, n: u64, rounds: u64, model: &mut Model) {
    db.create_table("t").unwrap();
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

/// The rows a full scan serves before its first error, and that error.
fn scan(db: &Db) -> (Rows, Option<Error>) {
    let tx = db.begin_read().unwrap();
    let t = match tx.open_table("t") {
        Ok(t) => t,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut rows = Vec::new();
    for r in t.range(..) {
        match r {
            Ok(kv) => rows.push(kv),
            Err(e) => return (rows, Some(e)),
        }
    }
    (rows, None)
}

/// The slot and the page an error names (the rest of its text may differ between reads).
fn named(msg: &str) -> (String, String) {
    let after = |what: &str| {
        msg.split(what)
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .unwrap_or_default()
            .to_string()
    };
    (after("flash cache slot "), after("page "))
}

/// Every row served is the model's (never an older version).
fn all_current(rows: &[(Vec<u8>, Vec<u8>)], model: &Model, ctx: &str) {
    for (k, v) in rows {
        assert_eq!(model.get(k), Some(v), "{ctx}: a stale or wrong row served");
    }
}

#[test]
fn a_bad_clean_slot_is_read_from_the_data_device_and_counted() {
    for bad in ALL_BAD {
        let d = Devs::new();
        let db = Db::open(d.opts(FlashPages::All)).unwrap();
        let mut model = Model::new();
        churn(&db, 3000, 2, &mut model);
        // A clean close: every flash copy is also the data device's.
        db.close().unwrap();
        let db = Db::open(d.opts(FlashPages::All)).unwrap();
        assert!(db.stats().flash_cache.unwrap().warm_start);
        d.damage(bad);
        let (rows, err) = scan(&db);
        assert!(err.is_none(), "{bad:?}: {err:?}");
        all_current(&rows, &model, &format!("{bad:?}"));
        assert_eq!(rows.len(), model.len(), "{bad:?}");
        let f = db.stats().flash_cache.unwrap();
        assert!(
            f.data_rereads > 0,
            "{bad:?}: the bad slots must be read: {f:?}"
        );
        assert_eq!(f.data_rereads, f.corrupt_slots, "{bad:?}: {f:?}");
        assert!(db.failure().is_none(), "{bad:?}: {:?}", db.failure());
        db.close().unwrap();
        d.faulty.clear();
        let db = Db::open(d.opts(FlashPages::All)).unwrap();
        let (rows, err) = scan(&db);
        assert!(
            err.is_none() && rows.len() == model.len(),
            "{bad:?}: {err:?}"
        );
        all_current(&rows, &model, &format!("{bad:?} after a reopen"));
        db.close().unwrap();
    }
}

#[test]
fn a_bad_dirty_slot_fails_the_read_naming_slot_and_page() {
    for bad in ALL_BAD {
        let d = Devs::new();
        let db = Db::open(d.opts(FlashPages::Dirty)).unwrap();
        let mut model = Model::new();
        churn(&db, 6000, 2, &mut model);
        // The checkpoint puts every dirty page in the cache: its only newest copy.
        db.checkpoint().unwrap();
        let f = db.stats().flash_cache.unwrap();
        assert!(f.dirty_slots > 100, "{f:?}");
        d.damage(bad);
        let (rows, err) = scan(&db);
        all_current(&rows, &model, &format!("{bad:?}"));
        let e = err.unwrap_or_else(|| panic!("{bad:?}: a dirty page must fail its read"));
        let msg = e.to_string();
        assert!(msg.contains("flash cache slot"), "{bad:?}: {msg}");
        match (bad, &e) {
            (Bad::Eio, Error::Device(_)) => {
                assert!(
                    msg.contains("cannot be read") && msg.contains("page "),
                    "{msg}"
                );
            }
            (
                Bad::Medium | Bad::OnRead,
                Error::Corruption {
                    page_id, detail, ..
                },
            ) => {
                assert!(detail.contains("older version"), "{bad:?}: {detail}");
                assert!(msg.contains(&format!("page {page_id}")), "{msg}");
            }
            _ => panic!("{bad:?}: {e:?}"),
        }
        assert_eq!(db.stats().flash_cache.unwrap().data_rereads, 0);
        // The slot stays: read again, the page fails again, never served from the data device.
        let (again, err2) = scan(&db);
        all_current(&again, &model, &format!("{bad:?}, read again"));
        let msg2 = err2.map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(named(&msg2), named(&msg), "{bad:?}: {msg2}");
        db.abandon();
        d.faulty.clear();
        if let Bad::Medium = bad {
            // The newest copies are gone: reported (at recovery or at the read), never stale.
            let e = match Db::open(d.opts(FlashPages::Dirty)) {
                Err(e) => e,
                Ok(db) => {
                    let (rows, err) = scan(&db);
                    all_current(&rows, &model, "medium, reopened");
                    err.expect("a lost page must fail its read")
                }
            };
            assert!(e.to_string().contains("flash cache slot"), "{e}");
            continue;
        }
        // The faults were in the reads only: nothing is lost.
        let db = Db::open(d.opts(FlashPages::Dirty)).unwrap();
        let (rows, err) = scan(&db);
        assert!(
            err.is_none() && rows.len() == model.len(),
            "{bad:?}: {err:?}"
        );
        all_current(&rows, &model, &format!("{bad:?} after a reopen"));
        db.close().unwrap();
    }
}
