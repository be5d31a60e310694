#![allow(clippy::unwrap_used)]
//! Random bytes where the engine expects its headers (superblock copies, settings record,
//! log header, log ring, flash cache header and directory): `Db::open` returns a typed error
//! naming the structure, or opens with every row when it can do without it; `inspect` says
//! the same. Never a panic.

mod common;

use pagoda_device::mem::MemDevice;
use pagoda_device::{DeviceRef, WriteHints};
use pagoda_engine::format::CacheHeader;
use pagoda_engine::inspect::inspect_devices;
use pagoda_engine::{Db, DbOptions, Error, FlashCacheOptions, FlashPolicy, TornMode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const SECTOR: usize = 4096;
const ROWS: u32 = 40;
const SEEDS: u64 = 8;

fn opts(d: &DeviceRef, l: &DeviceRef) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(SECTOR)
        .buffer_bytes(1 << 20)
        .background(false)
}

/// A closed database with `ROWS` rows in table "t", several checkpoints in (both superblock
/// copies written).
fn database() -> (DeviceRef, DeviceRef) {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(4 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(1 << 20).unwrap());
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    for i in 0..ROWS {
        let tx = db.begin_write().unwrap();
        tx.open_table("t")
            .unwrap()
            .put(format!("k{i:03}").as_bytes(), &[i as u8; 50])
            .unwrap();
        tx.commit().unwrap();
    }
    db.close().unwrap();
    (d, l)
}

/// Overwrites `sectors` sectors from `first` with random bytes.
fn scribble(dev: &DeviceRef, first: u64, sectors: usize, rng: &mut SmallRng) {
    let mut b = vec![0u8; sectors * SECTOR];
    rng.fill(&mut b[..]);
    dev.write(first, &b, WriteHints::NORMAL).unwrap();
    dev.flush().unwrap();
}

fn rows(db: &Db) -> usize {
    common::count(db, "t")
}

#[test]
fn garbage_in_both_superblocks_is_corruption_of_page_0() {
    for seed in 0..SEEDS {
        let (d, l) = database();
        let mut rng = SmallRng::seed_from_u64(seed);
        // Both copies, and with odd seeds the settings record and the rest of the header too.
        let sectors = if seed.is_multiple_of(2) { 2 } else { 16 };
        scribble(&d, 0, sectors, &mut rng);
        match Db::open(opts(&d, &l)) {
            Err(e @ Error::Corruption { page_id: 0, .. }) => {
                assert!(e.to_string().contains("superblock"), "seed {seed}: {e}");
            }
            Err(e) => panic!("seed {seed}: expected corruption of page 0, got {e}"),
            Ok(_) => panic!("seed {seed}: opened over random superblocks"),
        }
        match inspect_devices(&d, &l) {
            Err(Error::Corruption { page_id: 0, .. }) => {}
            other => panic!("seed {seed}: inspect: {:?}", other.map(|r| r.to_string())),
        }
    }
}

/// Each copy in turn: the other one (older or newer) still opens the database with every row,
/// since the log from the older checkpoint on is still in the ring.
#[test]
fn garbage_in_one_superblock_copy_opens_from_the_other() {
    for seed in 0..SEEDS {
        let (d, l) = database();
        let mut rng = SmallRng::seed_from_u64(100 + seed);
        scribble(&d, seed % 2, 1, &mut rng);
        let report = inspect_devices(&d, &l).unwrap();
        assert_eq!(report.superblock_problems.len(), 1, "seed {seed}: {report}");
        let copy = format!("copy {}: ", seed % 2);
        assert!(
            report.superblock_problems[0].starts_with(&copy),
            "seed {seed}: {report}"
        );
        let db = Db::open(opts(&d, &l))
            .unwrap_or_else(|e| panic!("seed {seed}: copy {} garbage: {e}", seed % 2));
        assert_eq!(rows(&db), ROWS as usize, "seed {seed}");
        db.close().unwrap();
    }
}

#[test]
fn garbage_log_header_is_log_corruption_naming_it() {
    for seed in 0..SEEDS {
        let (d, l) = database();
        let mut rng = SmallRng::seed_from_u64(200 + seed);
        // The header alone, or the whole log device.
        let sectors = if seed.is_multiple_of(2) {
            1
        } else {
            (l.caps().capacity_bytes() / SECTOR as u64) as usize
        };
        scribble(&l, 0, sectors, &mut rng);
        match Db::open(opts(&d, &l)) {
            Err(
                e @ Error::LogCorruption {
                    lsn: 0, offset: 0, ..
                },
            ) => {
                assert!(e.to_string().contains("log header"), "seed {seed}: {e}");
            }
            Err(e) => panic!("seed {seed}: expected log header corruption, got {e}"),
            Ok(_) => panic!("seed {seed}: opened over a random log header"),
        }
        let report = inspect_devices(&d, &l).unwrap();
        assert!(
            report
                .log_problems
                .iter()
                .any(|p| p.starts_with("log header: ")),
            "seed {seed}: {report}"
        );
        assert!(matches!(
            report.into_result(),
            Err(Error::LogCorruption { .. })
        ));
    }
}

/// After a clean close the checkpoint is the end of the log: random bytes in the ring after it
/// are no group of this database (a torn tail at worst), so the open keeps every row.
#[test]
fn garbage_in_the_ring_after_a_clean_close_is_no_group() {
    for seed in 0..SEEDS {
        let (d, l) = database();
        let mut rng = SmallRng::seed_from_u64(300 + seed);
        let ring = (l.caps().capacity_bytes() / SECTOR as u64) as usize - 1;
        scribble(&l, 1, ring, &mut rng);
        let report = inspect_devices(&d, &l).unwrap();
        assert!(report.log_problems.is_empty(), "seed {seed}: {report}");
        let db = Db::open(opts(&d, &l)).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(rows(&db), ROWS as usize, "seed {seed}");
        db.close().unwrap();
    }
}

/// Data, log and flash cache devices (policy `face` for even seeds, `lru` for odd ones: they
/// rebuild differently).
struct Flash {
    d: DeviceRef,
    l: DeviceRef,
    c: DeviceRef,
    policy: FlashPolicy,
}

impl Flash {
    fn new(seed: u64) -> Self {
        let mem = |bytes| -> DeviceRef { Arc::new(MemDevice::with_capacity(bytes).unwrap()) };
        let policy = if seed.is_multiple_of(2) {
            FlashPolicy::Face
        } else {
            FlashPolicy::Lru
        };
        Self {
            d: mem(32 << 20),
            l: mem(8 << 20),
            c: mem(4 << 20),
            policy,
        }
    }

    fn opts(&self) -> DbOptions {
        DbOptions::with_devices(self.d.clone(), self.l.clone())
            .page_size(SECTOR)
            .buffer_bytes(64 * SECTOR)
            .torn(TornMode::None)
            .background(false)
            .flash_cache(
                FlashCacheOptions::new(self.c.clone())
                    .size_bytes(2 << 20)
                    .policy(self.policy),
            )
    }

    /// `n` rows of 300 bytes (several times the pool: dirty pages go to the flash cache).
    fn fill(&self, db: &Db, n: u32, round: u8) {
        for chunk in (0..n).collect::<Vec<_>>().chunks(50) {
            let tx = db.begin_write().unwrap();
            for &i in chunk {
                tx.open_table("t")
                    .unwrap()
                    .put(format!("k{i:05}").as_bytes(), &[round; 300])
                    .unwrap();
            }
            tx.commit().unwrap();
        }
    }

    /// A database with 2,000 rows in table "t".
    fn populated(&self) -> Db {
        let db = Db::open(self.opts()).unwrap();
        db.create_table("t").unwrap();
        self.fill(&db, 2000, 1);
        db
    }

    /// The newest intact cache header.
    fn header(&self) -> CacheHeader {
        let mut b = vec![0u8; 2 * SECTOR];
        self.c.read(0, &mut b).unwrap();
        b.chunks(SECTOR)
            .filter_map(|c| CacheHeader::decode(c).ok())
            .max_by_key(|h| h.generation)
            .unwrap()
    }
}

/// After a clean close the database does not need its cache: random bytes over the cache
/// header (or the whole cache device) start it cold, with a note saying why, and every row.
#[test]
fn garbage_flash_cache_header_after_a_clean_close_starts_cold() {
    for seed in 0..4 {
        let f = Flash::new(seed);
        let db = f.populated();
        db.close().unwrap();
        let mut rng = SmallRng::seed_from_u64(400 + seed);
        let sectors = if seed < 2 {
            2
        } else {
            (f.c.caps().capacity_bytes() / SECTOR as u64) as usize
        };
        scribble(&f.c, 0, sectors, &mut rng);
        let db = Db::open(f.opts()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let fc = db.stats().flash_cache.unwrap();
        assert!(!fc.warm_start, "seed {seed}: {fc:?}");
        let note = fc.start_note.unwrap_or_default();
        assert!(note.contains("no flash cache"), "seed {seed}: {note}");
        assert_eq!(rows(&db), 2000, "seed {seed}");
        let last = common::read(&db, "t", b"k01999");
        assert_eq!(last, Some(vec![1; 300]), "seed {seed}");
        db.close().unwrap();
    }
}

/// A database whose newest pages are in its cache: random bytes over the cache header or over
/// the directory checkpoint it names refuse the open, saying which structure is unusable.
#[test]
fn garbage_flash_structures_of_a_dependent_database_refuse_the_open() {
    for seed in 0..4 {
        let f = Flash::new(seed);
        let db = f.populated();
        db.checkpoint().unwrap();
        f.fill(&db, 500, 2);
        db.abandon();
        assert!(common::superblock(&f.d).flash_dependent, "seed {seed}");
        let mut rng = SmallRng::seed_from_u64(500 + seed);
        let want = if seed < 2 {
            scribble(&f.c, 0, 2, &mut rng);
            "no flash cache"
        } else {
            let h = f.header();
            let area = 2 + (h.generation % 2) * u64::from(h.dir_sectors);
            scribble(&f.c, area, h.dir_sectors as usize, &mut rng);
            "directory checkpoint is damaged"
        };
        match Db::open(f.opts()) {
            Err(e @ Error::Config(_)) => {
                let m = e.to_string();
                assert!(
                    m.contains("cannot be used") && m.contains(want),
                    "seed {seed}: {m}"
                );
            }
            Err(e) => panic!("seed {seed}: expected a refusal naming {want:?}, got {e}"),
            Ok(_) => panic!("seed {seed}: opened over a random {want:?}"),
        }
    }
}
