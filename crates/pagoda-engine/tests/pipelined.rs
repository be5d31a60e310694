#![allow(clippy::unwrap_used)]
//! Pipelined commit: tickets resolve only when durable, pending commits are invisible, hold
//! their keys, are bounded (back-pressure), and fail cleanly with the database.
mod common;

use common::fail_syncs;
use pagoda_device::fault::{FaultDevice, Op};
use pagoda_device::mem::MemDevice;
use pagoda_device::{DeviceRef, PowerCut};
use pagoda_engine::{CommitMode, CommitTicket, Db, DbOptions, Error, TornMode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Waits until the log's sync is held (the flush thread is stuck in it), failing the test
/// after 20 s.
fn sync_held(gate: &FaultDevice) {
    assert!(
        gate.wait_until_held(Op::Flush, 1, Duration::from_secs(20)),
        "no log sync reached the held device"
    );
}

fn open(max_inflight: usize) -> (Db, Arc<FaultDevice>, DeviceRef) {
    let data: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let log_inner: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
    let gate = Arc::new(FaultDevice::new(log_inner.clone()));
    let log: DeviceRef = gate.clone();
    let db = Db::open(
        DbOptions::with_devices(data.clone(), log)
            .buffer_bytes(1 << 20)
            .torn(TornMode::None)
            .commit(CommitMode::Pipelined)
            .max_inflight_commits(max_inflight)
            .background(false),
    )
    .unwrap();
    db.create_table("t").unwrap();
    (db, gate, data)
}

fn get(db: &Db, k: &[u8]) -> Option<Vec<u8>> {
    common::read(db, "t", k)
}

#[test]
fn commit_mode_parses_and_displays() {
    for m in ["sync", "pipelined"] {
        assert_eq!(m.parse::<CommitMode>().unwrap().to_string(), m);
    }
    assert!(matches!(
        "eager".parse::<CommitMode>(),
        Err(Error::Config(_))
    ));
}

#[test]
fn pending_commit_is_invisible_holds_its_keys_and_resolves_when_durable() {
    let (db, gate, _) = open(16);
    gate.hold(Op::Flush);
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"k", b"v1").unwrap();
    let ticket = tx.commit_pipelined().unwrap();
    // The flush thread is stuck in the sync: the commit is pending.
    sync_held(&gate);
    assert!(ticket.try_wait().is_none());
    assert!(!ticket.is_durable());
    assert_eq!(get(&db, b"k"), None, "a pending commit must be invisible");
    assert!(db.durable_lsn() < ticket.info().lsn);
    // A concurrent writer of the same key loses (first committer wins, pending counts).
    let other = db.begin_write().unwrap();
    assert!(matches!(
        other.open_table("t").unwrap().put(b"k", b"v2"),
        Err(Error::Conflict { .. })
    ));
    drop(other);
    let (tx_cb, rx_cb) = std::sync::mpsc::channel();
    let tx2 = db.begin_write().unwrap();
    tx2.open_table("t").unwrap().put(b"j", b"w").unwrap();
    tx2.commit_pipelined()
        .unwrap()
        .on_durable(move |r| tx_cb.send(r.map(|i| i.cts)).unwrap());
    assert!(rx_cb.try_recv().is_err());
    assert_eq!(db.stats().pipelined_inflight, 2);
    gate.release(Op::Flush);
    let info = ticket.wait().unwrap();
    assert!(ticket.is_durable());
    assert!(db.durable_lsn() >= info.lsn);
    assert_eq!(get(&db, b"k").as_deref(), Some(&b"v1"[..]));
    let cts = rx_cb.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
    assert!(cts > info.cts);
    assert_eq!(get(&db, b"j").as_deref(), Some(&b"w"[..]));
    // A callback on a resolved ticket runs at once.
    let tx3 = db.begin_write().unwrap();
    tx3.open_table("t").unwrap().put(b"x", b"y").unwrap();
    let t3 = tx3.commit_pipelined().unwrap();
    t3.wait().unwrap();
    let hit = Arc::new(AtomicBool::new(false));
    let h = hit.clone();
    t3.on_durable(move |r| h.store(r.is_ok(), Ordering::Release));
    assert!(hit.load(Ordering::Acquire));
    let st = db.stats();
    assert_eq!(st.commits, 3);
    assert_eq!(st.pipelined_inflight, 0);
    db.close().unwrap();
}

#[test]
fn inflight_commits_are_bounded_with_back_pressure() {
    let (db, gate, _) = open(2);
    gate.hold(Op::Flush);
    let mut tickets = Vec::new();
    for i in 0..2u8 {
        let tx = db.begin_write().unwrap();
        tx.open_table("t").unwrap().put(&[i], b"v").unwrap();
        tickets.push(tx.commit_pipelined().unwrap());
    }
    sync_held(&gate);
    let returned = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        let r = returned.clone();
        let db2 = &db;
        let h = s.spawn(move || {
            let tx = db2.begin_write().unwrap();
            tx.open_table("t").unwrap().put(b"third", b"v").unwrap();
            let t = tx.commit_pipelined().unwrap();
            r.store(true, Ordering::Release);
            t.wait().unwrap()
        });
        std::thread::sleep(Duration::from_millis(100));
        let blocked = !returned.load(Ordering::Acquire);
        let inflight = db.stats().pipelined_inflight;
        // Release the sync before asserting, so that a failure does not hang the test.
        gate.release(Op::Flush);
        h.join().unwrap();
        assert!(
            blocked,
            "the third commit must block while two are in flight"
        );
        assert!(inflight <= 2, "{inflight} in flight");
    });
    for t in &tickets {
        t.wait().unwrap();
    }
    assert_eq!(get(&db, b"third").as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
}

#[test]
fn failed_sync_fails_pending_tickets_and_later_commits() {
    let (db, gate, _) = open(16);
    gate.hold(Op::Flush);
    fail_syncs(&gate);
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"k", b"v").unwrap();
    let ticket = tx.commit_pipelined().unwrap();
    gate.release(Op::Flush);
    assert!(matches!(ticket.wait(), Err(Error::Failed(_))));
    assert!(matches!(ticket.try_wait(), Some(Err(Error::Failed(_)))));
    assert!(!ticket.is_durable());
    assert_eq!(
        get(&db, b"k"),
        None,
        "a failed commit must never be visible"
    );
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"k2", b"v").unwrap();
    assert!(matches!(tx.commit_pipelined(), Err(Error::Failed(_))));
    assert!(db.failure().is_some());
    db.abandon();
}

#[test]
fn abandon_fails_pending_tickets_without_hanging() {
    let (db, gate, _) = open(16);
    gate.hold(Op::Flush);
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"k", b"v").unwrap();
    let ticket = tx.commit_pipelined().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            gate.release(Op::Flush);
        });
        db.abandon();
    });
    // Either it became durable before the abandon took effect, or it failed: never hangs.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(ticket.wait().map(|_| ()));
    });
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the ticket of an abandoned database never resolved");
    assert!(r.is_ok() || matches!(r, Err(Error::Failed(_))), "{r:?}");
}

/// How one pipelined transaction of [`resolved_commits_survive_a_power_cut_under_load`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// The ticket resolved Ok: committed, must survive the crash.
    Durable,
    /// The ticket failed: may survive, but only whole.
    TicketFailed,
    /// `commit_pipelined` itself returned an error: never committed, must be absent.
    Refused,
}

/// Keys written by transaction `i` of thread `th`, and the value of them all.
fn txn_keys(th: u32, i: u32) -> (Vec<Vec<u8>>, Vec<u8>) {
    let keys = (0..3)
        .map(|j| format!("{th}-{i:05}-{j}").into_bytes())
        .collect();
    (keys, format!("value of {th}/{i}").into_bytes())
}

/// Pipelined commits from many threads, then a crash under load: the log's sync is held while
/// commits keep arriving (so a written group waits, unsynced, for it), then fails (the
/// database fails its pending tickets), the database is abandoned without a checkpoint and
/// both RAM devices lose power (a seeded part of the unsynced writes survives). After
/// recovery every commit whose ticket resolved Ok is there; every other ticketed commit is
/// there whole or not at all; a refused commit is absent.
#[test]
fn resolved_commits_survive_a_power_cut_under_load() {
    const THREADS: u32 = 4;
    let (mut lost_whole, mut kept_whole) = (0, 0);
    for seed in [1u64, 2, 3, 4] {
        let data = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
        let log_mem = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
        let gate = Arc::new(FaultDevice::new(log_mem.clone()));
        let (data_ref, log_ref): (DeviceRef, DeviceRef) = (data.clone(), gate.clone());
        let opts = |log: &DeviceRef| {
            DbOptions::with_devices(data_ref.clone(), log.clone())
                .buffer_bytes(4 << 20)
                .commit(CommitMode::Pipelined)
                .max_inflight_commits(16)
                .background(false)
        };
        let db = Db::open(opts(&log_ref)).unwrap();
        db.create_table("t").unwrap();
        let durable = AtomicU64::new(0);
        let running = AtomicU64::new(u64::from(THREADS));
        let (reached, crash) = std::sync::mpsc::channel();
        let outcomes: Vec<Vec<(u32, Outcome)>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..THREADS)
                .map(|th| {
                    let (db, durable, reached) = (&db, &durable, reached.clone());
                    let running = &running;
                    s.spawn(move || {
                        let mut out = Vec::new();
                        let mut pending = std::collections::VecDeque::new();
                        let settle = |i: u32, t: CommitTicket| {
                            let o = match t.wait() {
                                Ok(_) => {
                                    if durable.fetch_add(1, Ordering::AcqRel) + 1 == 200 {
                                        let _ = reached.send(());
                                    }
                                    Outcome::Durable
                                }
                                Err(Error::Failed(_)) => Outcome::TicketFailed,
                                Err(e) => panic!("seed {seed} thread {th} txn {i}: {e}"),
                            };
                            (i, o)
                        };
                        // Bounded so that a broken crash cannot run forever.
                        for i in 0..20_000u32 {
                            let Ok(tx) = db.begin_write() else { break };
                            let (keys, value) = txn_keys(th, i);
                            for k in &keys {
                                tx.open_table("t").unwrap().put(k, &value).unwrap();
                            }
                            match tx.commit_pipelined() {
                                Ok(t) => pending.push_back((i, t)),
                                Err(Error::Failed(_) | Error::Closed) => {
                                    out.push((i, Outcome::Refused));
                                    break;
                                }
                                Err(e) => panic!("seed {seed} thread {th} txn {i}: {e}"),
                            }
                            if pending.len() > 4 {
                                let (i, t) = pending.pop_front().unwrap();
                                out.push(settle(i, t));
                            }
                        }
                        for (i, t) in pending {
                            out.push(settle(i, t));
                        }
                        running.fetch_sub(1, Ordering::AcqRel);
                        out
                    })
                })
                .collect();
            drop(reached);
            // The crash: once 200 commits are durable, hold the log's next sync (a group is
            // written and waits for it), then let it fail.
            let reached = crash.recv().is_ok();
            gate.hold(Op::Flush);
            // Held once a sync waits; given up once every worker ended without one.
            let held = loop {
                if gate.waiting(Op::Flush) > 0 {
                    break true;
                }
                if running.load(Ordering::Acquire) == 0 {
                    break gate.waiting(Op::Flush) > 0;
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            fail_syncs(&gate);
            gate.release(Op::Flush);
            let outcomes = hs.into_iter().map(|h| h.join().unwrap()).collect();
            assert!(
                reached && held,
                "seed {seed}: the workers ended before the crash"
            );
            outcomes
        });
        let count = |o: Outcome| outcomes.iter().flatten().filter(|x| x.1 == o).count() as u64;
        let (ok, failed) = (count(Outcome::Durable), count(Outcome::TicketFailed));
        let st = db.stats();
        assert!(
            db.failure().is_some(),
            "seed {seed}: the database must have failed"
        );
        assert!(ok >= 200, "seed {seed}: {ok} durable commits");
        // A resolved ticket is a counted commit. Every counted sync made at least one record
        // durable (the table's creation or a commit), and so resolved its tickets.
        assert_eq!(st.commits, ok, "seed {seed}");
        assert!(
            st.log_syncs > 0 && st.log_syncs <= st.commits + 1,
            "seed {seed}: {} syncs for {} commits",
            st.log_syncs,
            st.commits
        );
        let commit = st.profile.get("commit").unwrap();
        assert!(commit.count >= ok && commit.total_ms > 0.0);
        assert!(st.profile.get("log.sync").unwrap().count > 0);

        db.abandon();
        let cut = log_mem.power_cut(seed).unwrap();
        data.power_cut(seed + 100).unwrap();
        assert!(
            cut.kept_sectors + cut.dropped_sectors > 0,
            "seed {seed}: no unsynced log write at the cut"
        );

        // Recovery, on the bare log device.
        let log_mem_ref: DeviceRef = log_mem.clone();
        let db = Db::open(opts(&log_mem_ref)).unwrap();
        let tx = db.begin_read().unwrap();
        let mut expected_keys = 0;
        for (th, out) in outcomes.iter().enumerate() {
            for &(i, o) in out {
                let (keys, value) = txn_keys(th as u32, i);
                let present = keys
                    .iter()
                    .filter(|k| match tx.open_table("t").unwrap().get(k).unwrap() {
                        Some(v) => {
                            assert_eq!(v, value, "seed {seed}: thread {th} txn {i}: wrong value");
                            true
                        }
                        None => false,
                    })
                    .count();
                let ctx = format!("seed {seed}: thread {th} txn {i} ({o:?}): {present} of 3 keys");
                match o {
                    Outcome::Durable => assert_eq!(present, 3, "{ctx}: a durable commit lost"),
                    Outcome::TicketFailed => {
                        assert!(present == 0 || present == 3, "{ctx}: a partial commit");
                        if present == 0 {
                            lost_whole += 1;
                        } else {
                            kept_whole += 1;
                        }
                    }
                    Outcome::Refused => assert_eq!(present, 0, "{ctx}: a refused commit"),
                }
                expected_keys += present;
            }
        }
        // Nothing that no transaction wrote.
        assert_eq!(
            tx.open_table("t").unwrap().range(..).count(),
            expected_keys,
            "seed {seed}: keys of no known transaction"
        );
        drop(tx);
        db.close().unwrap();
        assert!(
            failed > 0,
            "seed {seed}: the crash left no commit in flight ({ok} durable)"
        );
    }
    eprintln!("in-flight commits lost whole {lost_whole}, kept whole {kept_whole}");
    assert!(
        lost_whole > 0,
        "no in-flight commit was lost: the crashes did not fall mid-run"
    );
}

#[test]
fn sync_mode_commit_pipelined_is_resolved_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(DbOptions::in_dir(dir.path()).buffer_bytes(4 << 20)).unwrap();
    db.create_table("t").unwrap();
    let tx = db.begin_write().unwrap();
    tx.open_table("t").unwrap().put(b"a", b"b").unwrap();
    let t = tx.commit_pipelined().unwrap();
    assert!(t.is_durable());
    assert_eq!(t.wait().unwrap(), t.info());
    assert_eq!(get(&db, b"a").as_deref(), Some(&b"b"[..]));
    let st = db.stats();
    assert!(st.profile.get("commit.wait_durable").unwrap().count >= 1);
    assert!(st.profile.get("begin").unwrap().count >= 2);
    db.close().unwrap();
}

#[test]
fn groups_queued_behind_a_held_sync_ride_one_round() {
    // Many groups (8 MiB) queue up behind a held sync, with no committing thread doing I/O:
    // the flush thread writes all of them in the next round and syncs once.
    let data: DeviceRef = Arc::new(MemDevice::with_capacity(256 << 20).unwrap());
    let log_inner: DeviceRef = Arc::new(MemDevice::with_capacity(32 << 20).unwrap());
    let gate = Arc::new(FaultDevice::new(log_inner));
    let log: DeviceRef = gate.clone();
    let db = Db::open(
        DbOptions::with_devices(data, log)
            .buffer_bytes(128 << 20)
            .torn(TornMode::None)
            .commit(CommitMode::Pipelined)
            .background(false),
    )
    .unwrap();
    db.create_table("t").unwrap();
    let before = gate.seen(Op::Flush);
    gate.hold(Op::Flush);
    let big = vec![7u8; 700 << 10];
    let tickets: Vec<_> = (0..12u8)
        .map(|i| {
            let tx = db.begin_write().unwrap();
            tx.open_table("t").unwrap().put(&[i], &big).unwrap();
            tx.commit_pipelined().unwrap()
        })
        .collect();
    gate.release(Op::Flush);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ok = tickets.iter().all(|t| t.wait().is_ok());
        let _ = tx.send(ok);
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(20)),
        Ok(true),
        "pipelined commits must resolve (flush thread stuck?)"
    );
    assert_eq!(get(&db, &[11]).map(|v| v.len()), Some(700 << 10));
    // The held round, then one round for everything that queued behind it.
    let rounds = gate.seen(Op::Flush) - before;
    assert!(rounds <= 2, "{rounds} log syncs for one queue of groups");
    db.close().unwrap();
}
