#![allow(clippy::unwrap_used)]
//! Log syncs overlap: a commit whose own sync succeeded is acknowledged only once every sync
//! that started before it has completed without failing. A failed fsync may have dropped
//! writes that the later sync then reports durable without them (what Linux does: the dirty
//! pages are marked clean after a failed fsync). The sabotage `count-overlapped-sync` puts the
//! old rule back, and the same test then sees the commit acknowledged.

use pagoda_device::fault::{Failure, Fault, FaultDevice, Op};
use pagoda_device::mem::MemDevice;
use pagoda_device::DeviceRef;
use pagoda_engine::{fault::Sabotage, CommitMode, Db, DbOptions, Result};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the failing sync takes: far longer than a commit on a RAM device, so the second
/// commit's sync starts and succeeds inside it.
const SLOW_SYNC: Duration = Duration::from_secs(2);

/// Runs commit A, whose sync is slow and fails, and commit B, whose sync starts after A's and
/// succeeds first (covering A's record too); returns both outcomes.
fn outcomes(sabotage: Option<Sabotage>) -> (Result<()>, Result<()>) {
    let d: DeviceRef = Arc::new(MemDevice::with_capacity(64 << 20).unwrap());
    let gate = Arc::new(FaultDevice::new(Arc::new(
        MemDevice::with_capacity(4 << 20).unwrap(),
    )));
    let l: DeviceRef = gate.clone();
    let o = DbOptions::with_devices(d, l)
        .page_size(4096)
        .background(false)
        .commit(CommitMode::Sync)
        .sabotage(sabotage);
    let db = Db::open(o).unwrap();
    db.create_table("t").unwrap();
    let put = |k: &[u8]| {
        let tx = db.begin_write().unwrap();
        tx.open_table("t").unwrap().put(k, b"v").unwrap();
        tx
    };
    let (a, b) = (put(b"a"), put(b"b"));
    // The next sync (A's) is slow and fails, losing its writes.
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
        let first = s.spawn(move || a.commit());
        // Once A's sync has entered the device (its delay and failure are fixed), later syncs
        // are fast and succeed.
        let until = Instant::now() + Duration::from_secs(10);
        while gate.seen(Op::Flush) == seen {
            assert!(Instant::now() < until, "A's commit never synced");
            std::thread::sleep(Duration::from_millis(1));
        }
        gate.clear();
        let started = Instant::now();
        let second = b.commit().map(|_| ());
        assert!(
            started.elapsed() < SLOW_SYNC || second.is_err(),
            "B finished after A's sync: the test did not overlap the syncs"
        );
        (first.join().unwrap().map(|_| ()), second)
    });
    db.abandon();
    r
}

#[test]
fn a_sync_overlapping_a_failed_one_acknowledges_nothing() {
    let (a, b) = outcomes(None);
    assert!(a.is_err(), "A was acknowledged although its sync failed");
    assert!(
        b.is_err(),
        "B was acknowledged although A's overlapping sync failed"
    );
}

#[test]
fn sabotage_count_overlapped_sync_acknowledges_both_commits() {
    // Proves the test above can fail: with the old rule B's successful sync counts at once,
    // and, as it covered A's record too, A's commit is acknowledged after its own sync failed.
    let (a, b) = outcomes(Some(Sabotage::CountOverlappedSync));
    assert!(a.is_ok() && b.is_ok(), "{a:?} {b:?}");
}
