#![allow(clippy::unwrap_used)]
//! Group commit: one log sync in flight, everyone who arrives while it runs rides the next
//! one, and a failed sync acknowledges nothing it covers (a failed fsync may have dropped the
//! writes: Linux marks the dirty pages clean). The sabotage `ack-before-sync` acknowledges a
//! round's commits once written, and the same test then sees the commit acknowledged.

use pagoda_device::fault::{Failure, Fault, FaultDevice, Op};
use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use pagoda_engine::{fault::Sabotage, CommitMode, Db, DbOptions, Result};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the failing sync takes: far longer than a commit on a RAM device, so the second
/// commit arrives while it runs.
const SLOW_SYNC: Duration = Duration::from_millis(500);

fn open(gate: &Arc<FaultDevice>, sabotage: Option<Sabotage>) -> Db {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let l: DeviceRef = gate.clone();
    let o = DbOptions::with_devices(d, l)
        .page_size(4096)
        .background(false)
        .commit(CommitMode::Sync)
        .sabotage(sabotage);
    let db = Db::open(o).unwrap();
    db.create_table("t").unwrap();
    db
}

fn log() -> Arc<FaultDevice> {
    Arc::new(FaultDevice::new(Arc::new(
        MemDevice::with_capacity(4 << 20).unwrap(),
    )))
}

/// Waits until the log device has seen more than `n` flushes.
fn wait_flushes(gate: &FaultDevice, n: u64) {
    let until = Instant::now() + Duration::from_secs(10);
    while gate.seen(Op::Flush) <= n {
        assert!(Instant::now() < until, "no log sync started");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Commit A's sync is slow and fails; commit B arrives while it runs. Returns both outcomes
/// and the log syncs that entered the device while A's ran.
fn outcomes(sabotage: Option<Sabotage>) -> (Result<()>, Result<()>, u64) {
    let gate = log();
    let db = open(&gate, sabotage);
    let put = |k: &[u8]| {
        let tx = db.begin_write().unwrap();
        tx.open_table("t").unwrap().put(k, b"v").unwrap();
        tx
    };
    let (a, b) = (put(b"a"), put(b"b"));
    gate.inject(Fault::Delay {
        op: Op::Flush,
        by: SLOW_SYNC,
    })
    .unwrap();
    gate.inject(Fault::Fail {
        op: Op::Flush,
        after: 0,
        times: 1,
        failure: Failure::EioLosingWrites,
    })
    .unwrap();
    let seen = gate.seen(Op::Flush);
    let r = std::thread::scope(|s| {
        let first = s.spawn(move || a.commit().map(|_| ()));
        wait_flushes(&gate, seen);
        // Later syncs would be fast and succeed: only A's is slow and fails.
        gate.clear();
        let second = s.spawn(move || b.commit().map(|_| ()));
        let a = first.join().unwrap();
        // A's round has ended: count the syncs that overlapped it.
        let during = gate.seen(Op::Flush) - seen - 1;
        (a, second.join().unwrap(), during)
    });
    db.abandon();
    r
}

#[test]
fn a_failed_sync_acknowledges_nothing_and_no_sync_overlaps_it() {
    let (a, b, during) = outcomes(None);
    assert_eq!(during, 0, "a second log sync ran beside the first");
    assert!(a.is_err(), "A was acknowledged although its sync failed");
    assert!(b.is_err(), "B was acknowledged after the log failed");
}

#[test]
fn sabotage_ack_before_sync_acknowledges_the_failed_commit() {
    // Proves the test above can fail: the round tells A "durable" once its record is written,
    // before the sync that then fails.
    let (a, _, _) = outcomes(Some(Sabotage::AckBeforeSync));
    assert!(a.is_ok(), "{a:?}");
}

#[test]
fn commits_arriving_during_a_sync_ride_the_next_one_together() {
    let gate = log();
    let db = open(&gate, None);
    let seen = gate.seen(Op::Flush);
    gate.hold(Op::Flush);
    std::thread::scope(|s| {
        let first = s.spawn(|| {
            let tx = db.begin_write().unwrap();
            tx.open_table("t").unwrap().put(b"first", b"v").unwrap();
            tx.commit().unwrap();
        });
        let until = Instant::now() + Duration::from_secs(10);
        while gate.waiting(Op::Flush) == 0 {
            assert!(Instant::now() < until, "the first commit never synced");
            std::thread::sleep(Duration::from_millis(1));
        }
        let joins = || db.stats().profile.get("log.join").unwrap().count;
        let joined = joins();
        let others: Vec<_> = (0..7u8)
            .map(|i| {
                let db = &db;
                s.spawn(move || {
                    let tx = db.begin_write().unwrap();
                    tx.open_table("t").unwrap().put(&[i], b"v").unwrap();
                    tx.commit().unwrap();
                })
            })
            .collect();
        // Every other commit has joined the log (its record appended) before the release.
        let until = Instant::now() + Duration::from_secs(10);
        while joins() < joined + 7 {
            assert!(Instant::now() < until, "the other commits never joined");
            std::thread::sleep(Duration::from_millis(1));
        }
        gate.release(Op::Flush);
        first.join().unwrap();
        for t in others {
            t.join().unwrap();
        }
    });
    let syncs = gate.seen(Op::Flush) - seen;
    assert_eq!(
        syncs, 2,
        "seven commits that waited together took {syncs} syncs"
    );
    db.close().unwrap();
}
