#![allow(clippy::unwrap_used)]
//! Model-based randomized tests of the whole API against a `BTreeMap` oracle, single-threaded
//! (with reopen, checkpoints, table drop/create) and with concurrent threads. Every failure
//! prints its seed; `PAGODA_SEED=N` reruns one.

use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions, Error, TornMode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn seeds(default: &[u64]) -> Vec<u64> {
    match std::env::var("PAGODA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(s) => vec![s],
        None => default.to_vec(),
    }
}

fn devices() -> (DeviceRef, DeviceRef) {
    (
        Arc::new(MemDevice::with_capacity(128 << 20).unwrap()),
        Arc::new(MemDevice::with_capacity(4 << 20).unwrap()),
    )
}

fn options(d: &DeviceRef, l: &DeviceRef) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(4096)
        .buffer_bytes(24 * 4096)
        .torn(TornMode::Doublewrite)
}

fn rand_key(rng: &mut SmallRng) -> Vec<u8> {
    if rng.gen_bool(0.02) {
        let mut k = vec![b'z'; rng.gen_range(500..=1024)];
        k[0] = rng.gen();
        return k;
    }
    format!("{:05}", rng.gen_range(0..600)).into_bytes()
}

fn rand_val(rng: &mut SmallRng) -> Vec<u8> {
    let len = if rng.gen_bool(0.05) {
        rng.gen_range(2000..20_000)
    } else {
        rng.gen_range(0..200)
    };
    let b: u8 = rng.gen();
    (0..len).map(|i| b.wrapping_add(i as u8)).collect()
}

fn rand_bounds(rng: &mut SmallRng) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let mut b = || match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(format!("{:05}", rng.gen_range(0..600)).into_bytes()),
        _ => Bound::Excluded(format!("{:05}", rng.gen_range(0..600)).into_bytes()),
    };
    (b(), b())
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn model_range(m: &Map, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter()
        .filter(|(k, _)| {
            (match lo {
                Bound::Included(l) => *k >= l,
                Bound::Excluded(l) => *k > l,
                Bound::Unbounded => true,
            }) && (match hi {
                Bound::Included(h) => *k <= h,
                Bound::Excluded(h) => *k < h,
                Bound::Unbounded => true,
            })
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn run_single(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let (d, l) = devices();
    let mut db = Db::open(options(&d, &l)).unwrap();
    db.create_table("a").unwrap();
    db.create_table("b").unwrap();
    let mut model: BTreeMap<&str, Map> = BTreeMap::from([("a", Map::new()), ("b", Map::new())]);
    for step in 0..400 {
        let ctx = format!("seed {seed} step {step}");
        match rng.gen_range(0..100) {
            0..=2 => {
                db.checkpoint().unwrap();
            }
            3..=4 => {
                // Clean close or crash-like abandon, then reopen (recovery).
                if rng.gen_bool(0.5) {
                    db.close().unwrap();
                } else {
                    db.abandon();
                }
                db = Db::open(options(&d, &l)).unwrap();
            }
            5 => {
                db.drop_table("b").unwrap();
                assert!(matches!(
                    db.begin().unwrap().get("b", b"x"),
                    Err(Error::NoSuchTable(_))
                ));
                db.create_table("b").unwrap();
                model.insert("b", Map::new());
            }
            _ => {
                let table = if rng.gen_bool(0.8) { "a" } else { "b" };
                let mut tx = db.begin().unwrap();
                let mut local = model[table].clone();
                for _ in 0..rng.gen_range(1..12) {
                    match rng.gen_range(0..10) {
                        0..=4 => {
                            let (k, v) = (rand_key(&mut rng), rand_val(&mut rng));
                            tx.put(table, &k, &v).unwrap();
                            local.insert(k, v);
                        }
                        5 => {
                            let k = local
                                .keys()
                                .nth(rng.gen_range(0..local.len().max(1)))
                                .cloned()
                                .unwrap_or_else(|| rand_key(&mut rng));
                            tx.delete(table, &k).unwrap();
                            local.remove(&k);
                        }
                        6..=7 => {
                            let k = rand_key(&mut rng);
                            assert_eq!(
                                tx.get(table, &k).unwrap(),
                                local.get(&k).cloned(),
                                "{ctx} get"
                            );
                        }
                        _ => {
                            let (lo, hi) = rand_bounds(&mut rng);
                            let want = model_range(&local, &lo, &hi);
                            let rev = rng.gen_bool(0.5);
                            let got: Vec<_> = if rev {
                                tx.range_rev(table, (as_ref(&lo), as_ref(&hi)))
                                    .unwrap()
                                    .map(|x| x.unwrap())
                                    .collect()
                            } else {
                                tx.range(table, (as_ref(&lo), as_ref(&hi)))
                                    .unwrap()
                                    .map(|x| x.unwrap())
                                    .collect()
                            };
                            let want: Vec<_> = if rev {
                                want.into_iter().rev().collect()
                            } else {
                                want
                            };
                            assert!(
                                got == want,
                                "{ctx} range {lo:?}..{hi:?} rev {rev}: {} vs {}",
                                got.len(),
                                want.len()
                            );
                        }
                    }
                }
                if rng.gen_bool(0.85) {
                    tx.commit().unwrap();
                    model.insert(table, local);
                } else {
                    tx.rollback();
                }
            }
        }
    }
    // Final full comparison, after a reopen.
    db.abandon();
    let db = Db::open(options(&d, &l)).unwrap();
    let tx = db.begin_read().unwrap();
    for (t, m) in &model {
        let got: Map = tx.range(t, ..).unwrap().map(|x| x.unwrap()).collect();
        assert!(
            got == *m,
            "seed {seed}: final state of {t} differs ({} vs {} keys)",
            got.len(),
            m.len()
        );
    }
}

#[test]
fn model_single_thread() {
    for seed in seeds(&[1, 2, 3, 4]) {
        run_single(seed);
    }
}

/// Threads own disjoint key prefixes (each has its own oracle) while also contending on shared
/// counters incremented read-modify-write with retry on `Conflict`: no increment may be lost.
#[test]
fn model_concurrent_threads() {
    for seed in seeds(&[7, 8]) {
        let (d, l) = devices();
        let db = Db::open(options(&d, &l).buffer_bytes(48 * 4096)).unwrap();
        db.create_table("t").unwrap();
        db.create_table("c").unwrap();
        let threads = 4;
        let increments: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    let db = db.clone();
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(seed * 100 + t);
                        let mut mine = Map::new();
                        let mut incs = 0u64;
                        for step in 0..150 {
                            let ctx = format!("seed {seed} thread {t} step {step}");
                            // Own keys.
                            let mut tx = db.begin().unwrap();
                            let mut local = mine.clone();
                            for _ in 0..rng.gen_range(1..5) {
                                let k = format!("{t}-{:04}", rng.gen_range(0..200)).into_bytes();
                                if rng.gen_bool(0.2) {
                                    tx.delete("t", &k).unwrap();
                                    local.remove(&k);
                                } else {
                                    let v = rand_val(&mut rng);
                                    tx.put("t", &k, &v).unwrap();
                                    local.insert(k, v);
                                }
                            }
                            let prefix = format!("{t}-").into_bytes();
                            let mut hi = prefix.clone();
                            hi.push(0xff);
                            let got: Map = tx
                                .range(
                                    "t",
                                    (Bound::Included(&prefix[..]), Bound::Excluded(&hi[..])),
                                )
                                .unwrap()
                                .map(|x| x.unwrap())
                                .collect();
                            assert!(got == local, "{ctx}: own range differs");
                            tx.commit().unwrap();
                            mine = local;
                            // Shared counter.
                            let c = format!("counter{}", rng.gen_range(0..3)).into_bytes();
                            loop {
                                let mut tx = db.begin().unwrap();
                                let n = tx
                                    .get("c", &c)
                                    .unwrap()
                                    .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
                                match tx
                                    .put("c", &c, &(n + 1).to_le_bytes())
                                    .and_then(|()| tx.commit().map(|_| ()))
                                {
                                    Ok(()) => {
                                        incs += 1;
                                        break;
                                    }
                                    Err(Error::Conflict { .. }) => continue,
                                    Err(e) => panic!("{ctx}: {e}"),
                                }
                            }
                        }
                        let tx = db.begin_read().unwrap();
                        for (k, v) in &mine {
                            assert_eq!(
                                tx.get("t", k).unwrap().as_ref(),
                                Some(v),
                                "seed {seed} thread {t}"
                            );
                        }
                        incs
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let total: u64 = increments.iter().sum();
        let tx = db.begin_read().unwrap();
        let sum: u64 = tx
            .range("c", ..)
            .unwrap()
            .map(|x| u64::from_le_bytes(x.unwrap().1.try_into().unwrap()))
            .sum();
        assert_eq!(sum, total, "seed {seed}: lost update");
        assert!(db.stats().commits_per_sync >= 1.0);
    }
}
