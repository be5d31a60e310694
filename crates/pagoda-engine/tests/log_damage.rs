#![allow(clippy::unwrap_used)]
//! Damage in the log (issue 10, defect 5). A damaged group that a later group proves durable
//! holds acknowledged commits: open refuses with `Error::LogCorruption` naming its LSN and
//! `inspect` names its device offset. Only the in-flight tail (groups no later group proves
//! durable) may be cut, whatever the size of the groups.

mod common;

use common::superblock;
use pagoda_device::fault::{Failure, Fault, FaultDevice, Op};
use pagoda_device::mem::MemDevice;
use pagoda_device::{DeviceRef, WriteHints};
use pagoda_engine::format::{align_up, GroupHeader, GROUP_HEADER};
use pagoda_engine::inspect::inspect_devices;
use pagoda_engine::inspect::read_ring;
use pagoda_engine::{fault::Sabotage, Db, DbOptions, Error};
use std::time::{Duration, Instant};

const PAGE: usize = 4096;

fn mem(bytes: u64) -> DeviceRef {
    std::sync::Arc::new(MemDevice::with_capacity(bytes).unwrap())
}

fn opts(d: &DeviceRef, l: &DeviceRef) -> DbOptions {
    DbOptions::with_devices(d.clone(), l.clone())
        .page_size(PAGE)
        .buffer_bytes(32 << 20)
        .background(false)
}

/// The groups recovery reads, `(lsn, len, records)`, up to the first invalid header.
fn groups(d: &DeviceRef, l: &DeviceRef) -> Vec<(u64, u64, u32)> {
    let sb = superblock(d);
    let mut out = Vec::new();
    let mut lsn = sb.checkpoint_lsn;
    loop {
        let b = read_ring(l, sb.log_capacity, lsn, 4096).unwrap();
        match GroupHeader::decode(&b) {
            Some(h) if h.lsn == lsn => {
                out.push((lsn, u64::from(h.len), h.records));
                lsn = align_up(lsn + u64::from(h.len));
            }
            _ => return out,
        }
    }
}

/// The group holding the record that ends at `end` (a commit's LSN), and how many follow it.
fn group_of(d: &DeviceRef, l: &DeviceRef, end: u64) -> ((u64, u64), usize) {
    let gs = groups(d, l);
    let i = gs
        .iter()
        .position(|&(g, len, _)| g < end && end <= g + len)
        .unwrap();
    ((gs[i].0, gs[i].1), gs.len() - i - 1)
}

/// Flips one bit of the log stream at `lsn`; returns its byte offset on the log device.
fn flip_log(d: &DeviceRef, l: &DeviceRef, lsn: u64) -> u64 {
    let pos = lsn % superblock(d).log_capacity;
    let mut b = vec![0u8; 4096];
    l.read(1 + pos / 4096, &mut b).unwrap();
    b[(pos % 4096) as usize] ^= 0x04;
    l.write(1 + pos / 4096, &b, WriteHints::NORMAL).unwrap();
    l.flush().unwrap();
    4096 + pos
}

fn commit(db: &Db, key: &str, val: &[u8]) -> u64 {
    let tx = db.begin_write().unwrap();
    tx.open_table("t")
        .unwrap()
        .put(key.as_bytes(), val)
        .unwrap();
    tx.commit().unwrap().lsn
}

/// Open refuses with the damaged group's LSN; inspect reports it with its device offset.
fn expect_corruption(d: &DeviceRef, l: &DeviceRef, group: u64, offset: u64, ctx: &str) {
    let report = inspect_devices(d, l).unwrap();
    let text = report.to_string();
    assert!(
        !report.log_problems.is_empty() && !report.torn_log_tail,
        "{ctx}: inspect did not report corruption: {text}"
    );
    assert!(
        text.contains(&format!("byte {offset}")),
        "{ctx}: inspect does not name device byte {offset}: {text}"
    );
    match report.into_result() {
        Err(Error::LogCorruption { lsn, .. }) => assert_eq!(lsn, group, "{ctx}"),
        other => panic!("{ctx}: inspect result {:?}", other.map(|_| ())),
    }
    match Db::open(opts(d, l)) {
        Err(Error::LogCorruption { lsn, .. }) => assert_eq!(lsn, group, "{ctx}"),
        Err(e) => panic!("{ctx}: expected log corruption at LSN {group}, got {e}"),
        Ok(db) => {
            let gone = db
                .begin_read()
                .unwrap()
                .open_table("t")
                .unwrap()
                .get(b"acked")
                .unwrap()
                .is_none();
            panic!("{ctx}: opened (acknowledged row gone: {gone})");
        }
    }
}

/// (a) An acknowledged commit's group, damaged (header or body), followed by 1-3 valid groups:
/// before the fix this opened "successfully" with the commit silently gone (a torn tail).
#[test]
fn damaged_group_before_later_groups_is_corruption() {
    for later in 1..=3 {
        for header in [false, true] {
            let ctx = format!(
                "{later} later groups, damage in the {}",
                if header { "header" } else { "body" }
            );
            let (d, l) = (mem(8 << 20), mem(1 << 20));
            let db = Db::open(opts(&d, &l)).unwrap();
            db.create_table("t").unwrap();
            let lsn = commit(&db, "acked", &[7; 300]);
            for i in 0..later {
                commit(&db, &format!("later{i}"), &[1; 300]);
            }
            db.abandon();
            let ((g, _), after) = group_of(&d, &l, lsn);
            assert_eq!(after, later, "{ctx}: one group per commit");
            let byte = if header { 6 } else { GROUP_HEADER as u64 + 10 };
            let offset = flip_log(&d, &l, g + byte) - byte;
            expect_corruption(&d, &l, g, offset, &ctx);
        }
    }
}

/// (b) Groups larger than 1 MiB: one transaction with a 5 MiB value is one group of more than
/// 5 MiB. Damage to its header (its length unknown) or to a later group is still told apart
/// from a torn tail by what later groups record, not by an assumed group size.
#[test]
fn large_groups_are_classified_without_a_size_limit() {
    let big = vec![0x5a; 5 << 20];
    for case in ["big header", "after big", "big is the tail"] {
        let (d, l) = (mem(32 << 20), mem(32 << 20));
        let db = Db::open(opts(&d, &l)).unwrap();
        db.create_table("t").unwrap();
        let first = commit(&db, "first", &[3; 100]);
        let big_lsn = commit(&db, "acked", &big);
        let mut small = Vec::new();
        if case != "big is the tail" {
            for i in 0..2 {
                small.push(commit(&db, &format!("later{i}"), &[1; 100]));
            }
        }
        db.abandon();
        let ((g, len), _) = group_of(&d, &l, big_lsn);
        assert!(
            len > 5 << 20,
            "{case}: the big commit is one group of {len} bytes"
        );
        match case {
            "big header" => {
                let offset = flip_log(&d, &l, g + 6) - 6;
                expect_corruption(&d, &l, g, offset, case);
            }
            "after big" => {
                // The first small group (one group follows it) is damaged.
                let ((s, _), after) = group_of(&d, &l, small[0]);
                assert_eq!(after, 1, "{case}");
                let offset =
                    flip_log(&d, &l, s + GROUP_HEADER as u64 + 3) - GROUP_HEADER as u64 - 3;
                expect_corruption(&d, &l, s, offset, case);
            }
            _ => {
                // Nothing follows the big group: it may have been in flight at a crash.
                flip_log(&d, &l, g + (3 << 20));
                let report = inspect_devices(&d, &l).unwrap();
                assert!(report.is_ok() && report.torn_log_tail, "{case}: {report}");
                let db = Db::open(opts(&d, &l)).unwrap();
                assert!(db.stats().recovery.torn_log_tail, "{case}");
                let tx = db.begin_read().unwrap();
                assert!(
                    tx.open_table("t").unwrap().get(b"first").unwrap().is_some(),
                    "{case}: {first}"
                );
                assert!(
                    tx.open_table("t").unwrap().get(b"acked").unwrap().is_none(),
                    "{case}"
                );
            }
        }
    }
}

/// (c) A true torn tail: the first group of the round in flight is damaged and the groups
/// written after it in the same request are intact (their sync never completed). Recovery cuts
/// them all, keeps every acknowledged commit, and calls it a torn tail, not corruption. (This
/// passes before the fix too: it guards the other side of the rule.)
#[test]
fn torn_in_flight_tail_with_later_in_flight_groups_recovers() {
    let replayed = in_flight_tail_then_a_commit_up_to_the_next(None);
    assert!(
        replayed.is_empty(),
        "in-flight groups left from before the first crash were replayed: {replayed:?}"
    );
}

/// The check can fail: with the epoch rule removed (sabotage `ignore-log-epoch`), the stale
/// in-flight groups are read as the new log's continuation.
#[test]
fn sabotage_ignore_log_epoch_is_caught() {
    let replayed = in_flight_tail_then_a_commit_up_to_the_next(Some(Sabotage::IgnoreLogEpoch));
    assert!(!replayed.is_empty(), "the sabotage went unnoticed");
}

/// A crash leaves a torn in-flight group followed by an intact in-flight one (one round writes
/// both); after recovery, commits end where the stale group starts; after a second crash,
/// returns the in-flight keys that reappeared (none may).
fn in_flight_tail_then_a_commit_up_to_the_next(sabotage: Option<Sabotage>) -> Vec<String> {
    let (d, raw) = (mem(32 << 20), mem(8 << 20));
    // The log's second sync from the injection on fails: the round of big groups written
    // behind a held first round stays in flight, and its commits are never acknowledged.
    let held = std::sync::Arc::new(FaultDevice::new(raw.clone()));
    let l: DeviceRef = held.clone();
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    for i in 0..5 {
        commit(&db, &format!("acked{i}"), &[2; 200]);
    }
    let base = groups(&d, &raw).len();
    held.inject(Fault::Fail {
        op: Op::Flush,
        after: 1,
        times: u64::MAX,
        failure: Failure::Eio,
    })
    .unwrap();
    held.hold(Op::Flush);
    // 700 KiB records: two fill a group past MAX_GROUP_BYTES, so four make two groups.
    let big = vec![9u8; 700 << 10];
    std::thread::scope(|s| {
        let committer = |i: usize| {
            let (db, big) = (&db, &big);
            move || {
                let tx = db.begin_write().unwrap();
                tx.open_table("t")
                    .unwrap()
                    .put(format!("inflight{i}").as_bytes(), big)
                    .unwrap();
                let r = tx.commit();
                assert!(
                    r.is_err(),
                    "an in-flight commit was acknowledged: {:?}",
                    r.map(|i| i.lsn)
                );
            }
        };
        // A small commit leads a round whose sync waits in the hold (and then succeeds).
        let lead = s.spawn(|| commit(&db, "acked5", &[2; 200]));
        assert!(
            held.wait_until_held(Op::Flush, 1, Duration::from_secs(20)),
            "the first round was never synced"
        );
        let joins = || db.stats().profile.get("log.join").unwrap().count;
        let joined = joins();
        for i in 1..5 {
            s.spawn(committer(i));
        }
        let t0 = Instant::now();
        while joins() < joined + 4 {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the big commits never joined the log"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        held.release(Op::Flush);
        lead.join().unwrap();
    });
    // The crash: the first in-flight group is torn, the later one survives unsynced.
    let gs = groups(&d, &raw);
    assert_eq!(gs.len(), base + 3, "{gs:?}");
    let (torn, stale) = (gs[base + 1], gs[base + 2]);
    assert_eq!((torn.2, stale.2), (2, 2), "{gs:?}");
    flip_log(&d, &raw, torn.0 + GROUP_HEADER as u64 + 1);
    db.abandon();
    let report = inspect_devices(&d, &raw).unwrap();
    assert!(report.is_ok() && report.torn_log_tail, "{report}");
    let db = Db::open(opts(&d, &raw)).unwrap();
    assert!(db.stats().recovery.torn_log_tail);
    let tx = db.begin_read().unwrap();
    for i in 0..6 {
        assert!(tx
            .open_table("t")
            .unwrap()
            .get(format!("acked{i}").as_bytes())
            .unwrap()
            .is_some());
    }
    for i in 1..5 {
        assert!(tx
            .open_table("t")
            .unwrap()
            .get(format!("inflight{i}").as_bytes())
            .unwrap()
            .is_none());
    }
    drop(tx);
    // The stale group is still on the device (the ring is not erased at open). Small commits
    // (one 4 KiB group each, once the first has imaged the leaf) bring the log's end exactly
    // to where it starts; after another crash, it must not be read as their continuation (its
    // epoch is older than theirs).
    let mut end = 0;
    let mut n = 0;
    while end < stale.0 {
        let tx = db.begin_write().unwrap();
        tx.open_table("t")
            .unwrap()
            .put(b"replaced0", &[n; 8])
            .unwrap();
        end = align_up(tx.commit().unwrap().lsn);
        n = n.wrapping_add(1);
    }
    assert_eq!(
        end, stale.0,
        "the padding commits stepped over the stale group"
    );
    db.abandon();
    let db = Db::open(opts(&d, &raw).sabotage(sabotage)).unwrap();
    let tx = db.begin_read().unwrap();
    assert!(tx
        .open_table("t")
        .unwrap()
        .get(b"replaced0")
        .unwrap()
        .is_some());
    (1..5)
        .map(|i| format!("inflight{i}"))
        .filter(|k| {
            tx.open_table("t")
                .unwrap()
                .get(k.as_bytes())
                .unwrap()
                .is_some()
        })
        .collect()
}

/// `inspect` lists the log's groups and which a later group vouches for: exactly those whose
/// damage open refuses as corruption (sync commits: each group is synced before the next).
#[test]
fn inspect_lists_the_groups_later_ones_vouch_for() {
    let (d, l) = (mem(8 << 20), mem(1 << 20));
    let db = Db::open(opts(&d, &l)).unwrap();
    db.create_table("t").unwrap();
    for i in 0..4 {
        commit(&db, &format!("k{i}"), &[2; 300]);
    }
    db.abandon();
    let listed = inspect_devices(&d, &l).unwrap().log_group_list;
    let read: Vec<(u64, u64)> = groups(&d, &l).iter().map(|g| (g.0, g.1)).collect();
    let seen: Vec<(u64, u64)> = listed.iter().map(|g| (g.lsn, g.len)).collect();
    assert_eq!(seen, read, "inspect lists the groups recovery reads");
    let vouched: Vec<bool> = listed.iter().map(|g| g.vouched).collect();
    assert!(vouched.len() >= 4, "{vouched:?}");
    assert!(!vouched[vouched.len() - 1], "the last group has no witness");
    assert!(
        vouched[..vouched.len() - 1].iter().all(|&v| v),
        "{vouched:?}"
    );
    for g in &listed {
        assert_eq!(g.offset, 4096 + g.lsn % superblock(&d).log_capacity);
    }
    // Damage to a vouched group is corruption at its LSN.
    let g = &listed[listed.len() - 2];
    flip_log(&d, &l, g.lsn + GROUP_HEADER as u64 + 1);
    expect_corruption(&d, &l, g.lsn, g.offset, "a vouched group");
}
