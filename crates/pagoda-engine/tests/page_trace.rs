#![allow(clippy::unwrap_used)]
//! The page-reference recorder and the miss-ratio curve on a real pool: the recorder sees
//! every fix the pool counts, and for uniform reads the pure-LRU prediction at the pool's own
//! size is close to the hit ratio the (midpoint-LRU) pool measured.

use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use pagoda_engine::sizing::{Mrc, ShardsRate};
use pagoda_engine::{Db, DbOptions};
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const KEYS: u64 = 20_000;
const FRAMES: usize = 160;

fn key(i: u64) -> Vec<u8> {
    format!("user{i:08}").into_bytes()
}

/// A database of `KEYS` rows (about 800 leaf pages of 4 KiB) behind a pool of `FRAMES`.
fn loaded() -> Db {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    let db = Db::open(
        DbOptions::with_devices(d, l)
            .page_size(4096)
            .buffer_bytes(FRAMES * 4096),
    )
    .unwrap();
    db.create_table("t").unwrap();
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(500) {
        let tx = db.begin_write().unwrap();
        for &i in chunk {
            tx.open_table("t")
                .unwrap()
                .put(&key(i), &[7u8; 120])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    // The load's commits spilled past the budget; once written, a commit trims the pool back.
    db.checkpoint().unwrap();
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"trim", b"").unwrap();
    tx.commit().unwrap();
    db
}

/// Uniform point reads from `threads` threads.
fn read_uniformly(db: &Db, threads: u64, per_thread: u64) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(t);
                for _ in 0..per_thread {
                    let tx = db.begin_read().unwrap();
                    let k = key(rng.gen_range(0..KEYS));
                    assert!(tx.open_table("t").unwrap().get(&k).unwrap().is_some());
                }
            });
        }
    });
}

#[test]
fn the_curve_at_the_pools_size_is_near_the_measured_hit_ratio() {
    let db = loaded();
    // Off by default: nothing recorded.
    let none = db.take_page_trace();
    assert!(none.rate.is_none() && none.references.is_empty());

    let before = db.stats().buffer;
    db.start_page_trace(ShardsRate::FULL);
    read_uniformly(&db, 4, 4_000);
    let trace = db.take_page_trace();
    let after = db.stats().buffer;
    let fixes = (after.hits + after.misses) - (before.hits + before.misses);
    assert_eq!(trace.references.len() as u64, fixes, "every counted fix");
    assert_eq!(trace.total, fixes);
    assert_eq!(trace.dropped, 0);
    assert_eq!(trace.page_size, 4096);
    // The pool was full after the load: its pages prime the stack.
    assert!(
        (FRAMES / 2..=FRAMES).contains(&trace.warm.len()),
        "{}",
        trace.warm.len()
    );

    let measured = (after.hits - before.hits) as f64 / fixes as f64;
    let mrc = Mrc::from_trace(&trace);
    let predicted = mrc.hit_ratio(FRAMES as f64);
    // Each read fixes the root, inner pages and one of ~800 leaves, so neither is trivial.
    assert!((0.3..0.9).contains(&measured), "measured {measured}");
    assert!(
        (predicted - measured).abs() < 0.06,
        "LRU prediction {predicted} vs midpoint-LRU pool {measured}"
    );
    // The curve rises with the cache and reaches the reuse ceiling past the data size.
    assert!(mrc.hit_ratio(16.0) < predicted);
    assert!(mrc.hit_ratio(2_000.0) > 0.95, "{}", mrc.hit_ratio(2_000.0));
    db.close().unwrap();
}

#[test]
fn a_sampled_trace_keeps_about_its_rate_and_predicts_alike() {
    let db = loaded();
    db.start_page_trace(ShardsRate::FULL);
    read_uniformly(&db, 2, 4_000);
    let full = Mrc::from_trace(&db.take_page_trace());
    db.start_page_trace(ShardsRate::new(0.25).unwrap());
    read_uniformly(&db, 2, 4_000);
    let t = db.take_page_trace();
    let share = t.references.len() as f64 / t.total as f64;
    // Fixes are per page, and a few pages (the root) take many of them: a loose band.
    assert!((0.05..0.6).contains(&share), "{share}");
    let sampled = Mrc::from_trace(&t);
    for cap in [64.0, FRAMES as f64, 600.0] {
        let (a, b) = (full.hit_ratio(cap), sampled.hit_ratio(cap));
        assert!((a - b).abs() < 0.1, "cache {cap}: full {a} vs sampled {b}");
    }
    db.close().unwrap();
}
