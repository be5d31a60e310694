//! Engine benchmarks with a peer in the same run: SQLite (rusqlite, bundled) in WAL mode with
//! `synchronous=FULL`, on real files in the same directory.
//!
//! `cargo bench -p pagoda-engine --bench engine [-- --secs S --dir DIR --quick]`
//!
//! Rows: durable single-key update transactions per second (1 KiB values) with 1, 4 and 16
//! threads, and commits per log sync; point reads per second with 2 threads when the data fits
//! the buffer; hit ratio and throughput when it does not.
#![allow(clippy::unwrap_used)]

use pagoda_engine::{Db, DbOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rusqlite::{params, Connection};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

struct Cfg {
    secs: f64,
    dir: PathBuf,
    keys_fit: u64,
    keys_big: u64,
}

fn key(i: u64) -> Vec<u8> {
    format!("user{i:016}").into_bytes()
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = vec![(i ^ round) as u8; 1024];
    v[..8].copy_from_slice(&round.to_le_bytes());
    v
}

/// Runs `f(thread, rng)` on `threads` threads for `secs` after a warm-up of a third of that;
/// returns operations per second.
fn timed(threads: usize, secs: f64, f: impl Fn(usize, &mut SmallRng) + Sync) -> f64 {
    // Let the OS finish writing back what earlier steps left dirty, so it does not land in
    // this measurement.
    let _ = std::process::Command::new("sync").status();
    std::thread::sleep(Duration::from_millis(300));
    run_for(threads, secs / 3.0, &f);
    run_for(threads, secs, &f)
}

fn run_for(threads: usize, secs: f64, f: &(impl Fn(usize, &mut SmallRng) + Sync)) -> f64 {
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (stop, ops) = (&stop, &ops);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t as u64 + 1);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    f(t, &mut rng);
                    n += 1;
                }
                ops.fetch_add(n, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    });
    ops.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64()
}

fn pagoda_open(dir: &Path, buffer: usize) -> Db {
    let _ = std::fs::remove_dir_all(dir);
    Db::open(
        DbOptions::in_dir(dir)
            .buffer_bytes(buffer)
            .verify_on_open(false),
    )
    .unwrap()
}

fn pagoda_load(db: &Db, n: u64) {
    db.create_table("kv").unwrap();
    let mut i = 0;
    while i < n {
        let tx = db.begin_write().unwrap();
        for j in i..(i + 500).min(n) {
            tx.open_table("kv")
                .unwrap()
                .put(&key(j), &value(j, 0))
                .unwrap();
        }
        tx.commit().unwrap();
        i += 500;
    }
    db.checkpoint().unwrap();
}

fn sqlite_open(dir: &Path, cache_bytes: usize) -> PathBuf {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("db.sqlite");
    let c = sqlite_conn(&path, cache_bytes);
    c.execute_batch("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;")
        .unwrap();
    path
}

fn sqlite_conn(path: &Path, cache_bytes: usize) -> Connection {
    let c = Connection::open(path).unwrap();
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    c.execute_batch(&format!(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA cache_size=-{};",
        cache_bytes / 1024
    ))
    .unwrap();
    c
}

fn sqlite_load(path: &Path, n: u64, cache: usize) {
    let mut c = sqlite_conn(path, cache);
    let mut i = 0;
    while i < n {
        let tx = c.transaction().unwrap();
        {
            let mut st = tx
                .prepare_cached("INSERT INTO kv (k, v) VALUES (?1, ?2)")
                .unwrap();
            for j in i..(i + 500).min(n) {
                st.execute(params![key(j), value(j, 0)]).unwrap();
            }
        }
        tx.commit().unwrap();
        i += 500;
    }
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
}

fn row(name: &str, pagoda: f64, peer: f64, extra: &str) {
    let lead = if peer > 0.0 {
        format!("{:.2}x", pagoda / peer)
    } else {
        "-".into()
    };
    println!("| {name:<44} | {pagoda:>12.0} | {peer:>12.0} | {lead:>6} | {extra} |");
}

fn updates(cfg: &Cfg) {
    let n = cfg.keys_fit;
    let pdir = cfg.dir.join("pagoda-upd");
    let db = pagoda_open(&pdir, 64 << 20);
    pagoda_load(&db, n);
    let sdir = cfg.dir.join("sqlite-upd");
    let spath = sqlite_open(&sdir, 64 << 20);
    sqlite_load(&spath, n, 64 << 20);
    for threads in [1usize, 4, 16] {
        let before = db.stats();
        let round = AtomicU64::new(1);
        let p = timed(threads, cfg.secs, |_, rng| {
            let i = rng.gen_range(0..n);
            let r = round.fetch_add(1, Ordering::Relaxed);
            let tx = db.begin_write().unwrap();
            match tx
                .open_table("kv")
                .and_then(|mut t| t.put(&key(i), &value(i, r)))
                .and_then(|()| tx.commit().map(|_| ()))
            {
                Ok(_) | Err(pagoda_engine::Error::Conflict { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        });
        let after = db.stats();
        let ckpts = after.checkpoints - before.checkpoints;
        let cps = (after.commits - before.commits) as f64
            / (after.log_syncs - before.log_syncs).max(1) as f64;
        let conns: Vec<_> = (0..threads)
            .map(|_| parking_lot::Mutex::new(sqlite_conn(&spath, 64 << 20)))
            .collect();
        let s = timed(threads, cfg.secs, |t, rng| {
            let i = rng.gen_range(0..n);
            let mut c = conns[t].lock();
            let tx = c
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .unwrap();
            tx.prepare_cached("UPDATE kv SET v = ?1 WHERE k = ?2")
                .unwrap()
                .execute(params![value(i, 7), key(i)])
                .unwrap();
            tx.commit().unwrap();
        });
        row(
            &format!("durable 1-key update tx/s, {threads} thread(s)"),
            p,
            s,
            &format!("pagoda commits/sync {cps:.1}, {ckpts} checkpoint(s); SQLite 1 sync/commit"),
        );
    }
    db.close().unwrap();
}

fn reads(cfg: &Cfg, n: u64, buffer: usize, label: &str) {
    let pdir = cfg.dir.join(format!("pagoda-{label}"));
    let db = pagoda_open(&pdir, buffer);
    pagoda_load(&db, n);
    // Warm up, then measure.
    let warm = |db: &Db| {
        let tx = db.begin_read().unwrap();
        for x in tx.open_table("kv").unwrap().range(..) {
            x.unwrap();
        }
    };
    warm(&db);
    let before = db.stats().buffer;
    let p = timed(2, cfg.secs, |_, rng| {
        let i = rng.gen_range(0..n);
        let tx = db.begin_read().unwrap();
        assert!(tx.open_table("kv").unwrap().get(&key(i)).unwrap().is_some());
    });
    let after = db.stats().buffer;
    // Readers beside a writer: latch coupling lets readers pass a leaf being updated.
    let mixed = if label.contains("fits") {
        let stop = AtomicBool::new(false);
        let r = std::thread::scope(|s| {
            let (db, stop) = (&db, &stop);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(99);
                while !stop.load(Ordering::Relaxed) {
                    let i = rng.gen_range(0..n);
                    let tx = db.begin_write().unwrap();
                    if tx
                        .open_table("kv")
                        .and_then(|mut t| t.put(&key(i), &value(i, 3)))
                        .and_then(|()| tx.commit().map(|_| ()))
                        .is_err()
                    {
                        continue;
                    }
                }
            });
            let r = timed(2, cfg.secs, |_, rng| {
                let i = rng.gen_range(0..n);
                let tx = db.begin_read().unwrap();
                assert!(tx.open_table("kv").unwrap().get(&key(i)).unwrap().is_some());
            });
            stop.store(true, Ordering::Relaxed);
            r
        });
        Some(r)
    } else {
        None
    };
    let (h, m) = (after.hits - before.hits, after.misses - before.misses);
    let hit = h as f64 / (h + m).max(1) as f64;
    let sdir = cfg.dir.join(format!("sqlite-{label}"));
    let spath = sqlite_open(&sdir, buffer);
    sqlite_load(&spath, n, buffer);
    let conns: Vec<_> = (0..2)
        .map(|_| parking_lot::Mutex::new(sqlite_conn(&spath, buffer)))
        .collect();
    for c in &conns {
        let c = c.lock();
        let mut st = c.prepare("SELECT count(v) FROM kv").unwrap();
        let _: i64 = st.query_row([], |r| r.get(0)).unwrap();
    }
    let s = timed(2, cfg.secs, |t, rng| {
        let i = rng.gen_range(0..n);
        let c = conns[t].lock();
        let mut st = c.prepare_cached("SELECT v FROM kv WHERE k = ?1").unwrap();
        let v: Vec<u8> = st.query_row(params![key(i)], |r| r.get(0)).unwrap();
        assert_eq!(v.len(), 1024);
    });
    let data_mib = n * 1044 / (1 << 20);
    row(
        &format!("point reads/s, 2 threads, {label}"),
        p,
        s,
        &format!(
            "{n} keys (~{data_mib} MiB), buffer {} MiB for both, pagoda hit ratio {:.3}",
            buffer >> 20,
            hit
        ),
    );
    if let Some(r) = mixed {
        println!(
            "| {:<44} | {r:>12.0} | {:>12} | {:>6} | pagoda only: 2 reader threads while 1 thread commits updates |",
            "point reads/s beside a writer, fits", "-", "-"
        );
    }
    db.close().unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let quick = args.iter().any(|a| a == "--quick");
    let tmp =
        tempfile::tempdir_in(arg("--dir").map_or_else(std::env::temp_dir, PathBuf::from)).unwrap();
    let cfg = Cfg {
        secs: arg("--secs")
            .and_then(|s| s.parse().ok())
            .unwrap_or(if quick { 0.3 } else { 3.0 }),
        dir: tmp.path().to_path_buf(),
        keys_fit: if quick { 2_000 } else { 20_000 },
        keys_big: if quick { 4_000 } else { 60_000 },
    };
    println!(
        "pagoda engine vs SQLite {} (WAL, synchronous=FULL), files in {}",
        rusqlite::version(),
        cfg.dir.display()
    );
    println!(
        "| {:<44} | {:>12} | {:>12} | {:>6} | notes |",
        "benchmark", "pagoda", "SQLite", "ratio"
    );
    println!("|{:-<46}|{:->14}|{:->14}|{:->8}|-------|", "", "", "", "");
    {
        let p = sqlite_open(&cfg.dir.join("sqlite-check"), 1 << 20);
        let c = sqlite_conn(&p, 1 << 20);
        let jm: String = c
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        let sy: i64 = c.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
        println!("SQLite journal_mode={jm} synchronous={sy} (2 = FULL)");
    }
    updates(&cfg);
    reads(&cfg, cfg.keys_fit, 64 << 20, "data fits the buffer");
    reads(&cfg, cfg.keys_big, 8 << 20, "data 8x the buffer");
}
