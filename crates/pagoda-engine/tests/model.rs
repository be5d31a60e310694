#![allow(clippy::unwrap_used)]
//! Model-based randomized tests of the whole API against a `BTreeMap` oracle, single-threaded
//! (with reopen, checkpoints, table drop/create) and with concurrent threads. A crash is an
//! `abandon` followed by a power cut of both RAM devices (unflushed writes survive only in
//! part); every acknowledged commit must survive it. Every failure prints its seed;
//! `PAGODA_SEED=N` reruns one.

use pagoda_device::mem::{MemConfig, MemDevice};
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions, Error, Scan, TornMode};
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

/// RAM devices whose atomic-write unit is the page size (so that every torn mode opens).
fn devices() -> (DeviceRef, DeviceRef) {
    let mem = |capacity_bytes| -> DeviceRef {
        Arc::new(
            MemDevice::new(MemConfig {
                capacity_bytes,
                atomic_write_unit: Some(4096),
                ..MemConfig::default()
            })
            .unwrap(),
        )
    };
    (mem(128 << 20), mem(4 << 20))
}

fn options(d: &DeviceRef, l: &DeviceRef, torn: TornMode) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(4096)
        .buffer_bytes(24 * 4096)
        // The pool alone: a small pool must evict (and write) pages all the time.
        .commit_spill_bytes(0)
        .torn(torn)
        // Deterministic I/O for a seed (a background checkpoint would also decide what a power
        // cut can lose).
        .background(false)
}

/// Cuts the power of both devices (after `Db::abandon`: nothing of the engine runs any more).
/// Returns the number of unflushed sectors the cut lost.
fn power_cut(d: &DeviceRef, l: &DeviceRef, seed: u64) -> u64 {
    [d, l]
        .into_iter()
        .enumerate()
        .map(|(i, dev)| {
            let seed = seed.wrapping_mul(2).wrapping_add(i as u64);
            dev.as_power_cut()
                .unwrap()
                .power_cut(seed)
                .unwrap()
                .dropped_sectors
        })
        .sum()
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

/// Runs one seed; returns the number of unflushed sectors its power cuts lost.
fn run_single(seed: u64, torn: TornMode) -> u64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let (d, l) = devices();
    let mut dropped = 0;
    let mut db = Db::open(options(&d, &l, torn)).unwrap();
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
                // Clean close, or a crash (abandon and power cut), then reopen (recovery). The
                // model holds exactly the acknowledged commits; later steps compare with it.
                if rng.gen_bool(0.5) {
                    db.close().unwrap();
                } else {
                    db.abandon();
                    dropped += power_cut(&d, &l, seed << 16 | step);
                }
                db = Db::open(options(&d, &l, torn)).unwrap();
            }
            5 => {
                db.drop_table("b").unwrap();
                assert!(matches!(
                    db.begin_write().unwrap().open_table("b"),
                    Err(Error::NoSuchTable(_))
                ));
                db.create_table("b").unwrap();
                model.insert("b", Map::new());
            }
            _ => {
                let table = if rng.gen_bool(0.8) { "a" } else { "b" };
                let tx = db.begin_write().unwrap();
                let mut local = model[table].clone();
                for _ in 0..rng.gen_range(1..12) {
                    match rng.gen_range(0..10) {
                        0..=4 => {
                            let (k, v) = (rand_key(&mut rng), rand_val(&mut rng));
                            tx.open_table(table).unwrap().put(&k, &v).unwrap();
                            local.insert(k, v);
                        }
                        5 => {
                            let k = local
                                .keys()
                                .nth(rng.gen_range(0..local.len().max(1)))
                                .cloned()
                                .unwrap_or_else(|| rand_key(&mut rng));
                            tx.open_table(table).unwrap().delete(&k).unwrap();
                            local.remove(&k);
                        }
                        6..=7 => {
                            let k = rand_key(&mut rng);
                            assert_eq!(
                                tx.open_table(table).unwrap().get(&k).unwrap(),
                                local.get(&k).cloned(),
                                "{ctx} get"
                            );
                        }
                        _ => {
                            let (lo, hi) = rand_bounds(&mut rng);
                            let want = model_range(&local, &lo, &hi);
                            let rev = rng.gen_bool(0.5);
                            let got: Vec<_> = if rev {
                                tx.open_table(table)
                                    .unwrap()
                                    .range_rev((as_ref(&lo), as_ref(&hi)))
                                    .map(|x| x.unwrap())
                                    .collect()
                            } else {
                                tx.open_table(table)
                                    .unwrap()
                                    .range((as_ref(&lo), as_ref(&hi)))
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
    // Final full comparison, after a crash and recovery.
    db.abandon();
    dropped += power_cut(&d, &l, seed << 16 | 0xffff);
    let db = Db::open(options(&d, &l, torn)).unwrap();
    let tx = db.begin_read().unwrap();
    for (t, m) in &model {
        let got: Map = tx
            .open_table(t)
            .unwrap()
            .range(..)
            .map(|x| x.unwrap())
            .collect();
        assert!(
            got == *m,
            "seed {seed} torn {torn}: final state of {t} differs after a power cut ({} vs {} keys)",
            got.len(),
            m.len()
        );
    }
    dropped
}

#[test]
fn model_single_thread() {
    let mut dropped = 0;
    for seed in seeds(&[1, 2, 3, 4]) {
        let torn = torn_for(seed);
        let lost = run_single(seed, torn);
        eprintln!("seed {seed} {torn}: power cuts lost {lost} unflushed sectors");
        dropped += lost;
    }
    assert!(
        dropped > 0 || std::env::var("PAGODA_SEED").is_ok(),
        "no power cut lost an unflushed write: the crashes tested nothing"
    );
}

/// Threads own disjoint key prefixes (each has its own oracle) while also contending on shared
/// counters incremented read-modify-write with retry on `Conflict`: no increment may be lost,
/// not even across a crash (abandon and power cut) and recovery.
#[test]
fn model_concurrent_threads() {
    const THREADS: u64 = 4;
    const STEPS: u64 = 150;
    let mut dropped = 0;
    for seed in seeds(&[7, 8]) {
        let torn = torn_for(seed);
        let (d, l) = devices();
        let opts = || options(&d, &l, torn).buffer_bytes(48 * 4096);
        let db = Db::open(opts()).unwrap();
        db.create_table("t").unwrap();
        db.create_table("c").unwrap();
        let results: Vec<(u64, Map)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..THREADS)
                .map(|t| {
                    let db = &db;
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(seed * 100 + t);
                        let mut mine = Map::new();
                        let mut incs = 0u64;
                        for step in 0..STEPS {
                            let ctx = format!("seed {seed} thread {t} step {step}");
                            // Own keys.
                            let tx = db.begin_write().unwrap();
                            let mut local = mine.clone();
                            for _ in 0..rng.gen_range(1..5) {
                                let k = format!("{t}-{:04}", rng.gen_range(0..200)).into_bytes();
                                if rng.gen_bool(0.2) {
                                    tx.open_table("t").unwrap().delete(&k).unwrap();
                                    local.remove(&k);
                                } else {
                                    let v = rand_val(&mut rng);
                                    tx.open_table("t").unwrap().put(&k, &v).unwrap();
                                    local.insert(k, v);
                                }
                            }
                            let got = own_keys(|r| tx.open_table("t").unwrap().range(r), t);
                            assert!(got == local, "{ctx}: own range differs");
                            tx.commit().unwrap();
                            mine = local;
                            // Shared counter (a bounded number of retries: an engine that
                            // conflicts for ever must fail the test, not hang it).
                            let c = format!("counter{}", rng.gen_range(0..3)).into_bytes();
                            for attempt in 0.. {
                                assert!(attempt < 10_000, "{ctx}: endless conflicts");
                                let tx = db.begin_write().unwrap();
                                let n = tx
                                    .open_table("c")
                                    .unwrap()
                                    .get(&c)
                                    .unwrap()
                                    .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
                                match tx
                                    .open_table("c")
                                    .and_then(|mut t| t.put(&c, &(n + 1).to_le_bytes()))
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
                                tx.open_table("t").unwrap().get(k).unwrap().as_ref(),
                                Some(v),
                                "seed {seed} thread {t}"
                            );
                        }
                        (incs, mine)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let total: u64 = results.iter().map(|(incs, _)| incs).sum();
        let check = |db: &Db, when: &str| {
            let tx = db.begin_read().unwrap();
            let sum: u64 = tx
                .open_table("c")
                .unwrap()
                .range(..)
                .map(|x| u64::from_le_bytes(x.unwrap().1.try_into().unwrap()))
                .sum();
            assert_eq!(sum, total, "seed {seed} {when}: lost update");
            for (t, (_, mine)) in results.iter().enumerate() {
                let got = own_keys(|r| tx.open_table("t").unwrap().range(r), t as u64);
                assert!(
                    got == *mine,
                    "seed {seed} {when}: keys of thread {t} differ ({} vs {} keys)",
                    got.len(),
                    mine.len()
                );
            }
        };
        check(&db, "before the crash");
        // Every successful commit is counted once: each step commits its own keys and one
        // increment; conflicting attempts are not commits.
        let st = db.stats();
        assert_eq!(st.commits, THREADS * STEPS + total, "seed {seed}: {st:?}");
        // Every commit waited for a sync covering its record, and every sync made at least
        // one new record durable: the commits and the two table creations.
        assert!(
            st.log_syncs > 0 && st.log_syncs <= st.commits + 2,
            "seed {seed}: {} syncs for {} commits",
            st.log_syncs,
            st.commits
        );
        eprintln!(
            "seed {seed}: {} commits, {} syncs, {:.3} commits per sync",
            st.commits, st.log_syncs, st.commits_per_sync
        );
        db.abandon();
        let lost = power_cut(&d, &l, seed);
        eprintln!("seed {seed} {torn}: the power cut lost {lost} unflushed sectors");
        dropped += lost;
        let db = Db::open(opts()).unwrap();
        check(&db, "after a power cut and recovery");
        db.close().unwrap();
    }
    assert!(
        dropped > 0 || std::env::var("PAGODA_SEED").is_ok(),
        "no power cut lost an unflushed write: the crash tested nothing"
    );
}

/// Doublewrite syncs every page it writes; atomic mode leaves written pages unflushed until
/// the next checkpoint, so its power cuts lose page writes that recovery must redo.
fn torn_for(seed: u64) -> TornMode {
    if seed.is_multiple_of(2) {
        TornMode::Atomic
    } else {
        TornMode::Doublewrite
    }
}

/// The keys of thread `t` in table `t`, as the transaction behind `scan` sees them.
fn own_keys<'t>(scan: impl FnOnce((Bound<&[u8]>, Bound<&[u8]>)) -> Scan<'t>, t: u64) -> Map {
    let prefix = format!("{t}-").into_bytes();
    let mut hi = prefix.clone();
    hi.push(0xff);
    scan((Bound::Included(&prefix[..]), Bound::Excluded(&hi[..])))
        .map(|x| x.unwrap())
        .collect()
}
