#![allow(clippy::unwrap_used)]
//! Model check of the log's group-commit protocol (`src/wal/group.rs`, compiled here with
//! loom's locks): loom runs every interleaving of three committers that append a record and
//! wait for it to be durable, over a log device whose write and sync yield (a slow sync is
//! one that other threads overtake), and checks the protocol's invariants in each:
//! - a committer told "durable" has its record inside a sync that succeeded;
//! - at most one write+sync is in flight;
//! - after a failed sync no waiter it covered, and no later one, is told "durable";
//! - nobody waits forever (loom reports a deadlock).
//!
//! The sabotage the engine names `ack-before-sync` must break the first invariant.

mod prims {
    pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};

    /// loom cannot time a wait: a timed wait here lets every other thread run and then
    /// retakes the lock, which covers both a timeout and a wake-up at any point.
    pub(crate) fn wait_for<'a, T>(
        _cv: &Condvar,
        m: &'a Mutex<T>,
        g: MutexGuard<'a, T>,
        _d: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        drop(g);
        loom::thread::yield_now();
        m.lock().unwrap()
    }
}

#[allow(dead_code)]
#[path = "../src/wal/group.rs"]
mod group;

use group::{Group, Io, Wait};
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use loom::sync::Arc;

/// Gathering waits over every explored interleaving (outside the model: a plain counter).
static GATHERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The pending side: records are numbered 1, 2, ...; a record's LSN end is its number.
#[derive(Debug, Default)]
struct Pending {
    appended: u64,
    taken: u64,
}

/// A device that keeps what a sync made durable apart from what was only written.
#[derive(Debug, Default)]
struct Dev {
    written: AtomicU64,
    durable: AtomicU64,
    in_flight: AtomicU64,
    /// The next sync fails (once), dropping what it covered.
    fail_next: AtomicBool,
    /// The model's clock: each reading is 1 µs after the last (deterministic per schedule).
    clock: AtomicU64,
}

impl Io<Pending> for Dev {
    type Taken = u64;
    type Error = &'static str;
    type Stamp = ();

    fn take(&self, p: &mut Pending) -> Option<(u64, u64, u32)> {
        (p.appended > p.taken).then(|| {
            let n = (p.appended - p.taken) as u32;
            p.taken = p.appended;
            (p.appended, p.appended, n)
        })
    }

    fn write(&self, end: &mut u64, _durable: u64) -> Result<(), &'static str> {
        assert_eq!(
            self.in_flight.fetch_add(1, SeqCst),
            0,
            "two rounds in flight"
        );
        loom::thread::yield_now();
        self.written.store(*end, SeqCst);
        Ok(())
    }

    fn sync(&self) -> Result<(), &'static str> {
        let covers = self.written.load(SeqCst);
        loom::thread::yield_now();
        let r = if self.fail_next.swap(false, SeqCst) {
            Err("sync failed")
        } else {
            self.durable.fetch_max(covers, SeqCst);
            Ok(())
        };
        self.in_flight.fetch_sub(1, SeqCst);
        r
    }

    fn recycle(&self, _: &mut Pending, _: u64) {}

    fn beyond(&self, _: u64, _: u64) -> &'static str {
        "beyond"
    }

    fn stamp(&self) {}

    fn now_ns(&self) -> u64 {
        self.clock.fetch_add(1000, SeqCst)
    }

    fn waited(&self, w: Wait, _: ()) {
        if w == Wait::Gather {
            GATHERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// loom's exploration, bounded: every interleaving with at most this many preemptions (the
/// bound loom's authors recommend; the protocol's bugs found so far needed two).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(
        std::env::var("PAGODA_LOOM_PREEMPTIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2),
    );
    b.check(f);
}

/// Three committers; returns, per committer, its record's end and whether it was told durable.
fn run(fail_first_sync: bool, gather: bool, ack_before_sync: bool) -> Vec<(u64, bool)> {
    let dev = Arc::new(Dev::default());
    dev.fail_next.store(fail_first_sync, SeqCst);
    let mut g = Group::new(Pending::default(), 0, true, false);
    if ack_before_sync {
        g.ack_before_sync();
    }
    let g = Arc::new(g);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (g, dev) = (g.clone(), dev.clone());
            loom::thread::spawn(move || {
                let end = {
                    let mut st = g.lock();
                    if st.failed().is_some() {
                        return (0, false);
                    }
                    st.pending.appended += 1;
                    let end = st.pending.appended;
                    g.joined(&*dev, &mut st);
                    end
                };
                let ok = g.wait_durable(&*dev, end, gather).is_ok();
                if ok && !ack_before_sync {
                    assert!(
                        dev.durable.load(SeqCst) >= end,
                        "record {end} acknowledged before a sync made it durable"
                    );
                }
                (end, ok)
            })
        })
        .collect();
    let out: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(dev.in_flight.load(SeqCst), 0);
    if fail_first_sync {
        // Nothing after a failed sync is acknowledged, nor anything it covered: with the first
        // sync failing, no committer is ever told durable.
        assert!(
            out.iter().all(|&(_, ok)| !ok),
            "acknowledged after a failed sync: {out:?}"
        );
    }
    out
}

#[test]
fn acknowledged_commits_are_durable_and_rounds_never_overlap() {
    model(|| {
        let out = run(false, false, false);
        assert!(out.iter().all(|&(_, ok)| ok), "{out:?}");
    });
}

#[test]
fn a_failed_sync_acknowledges_nothing() {
    model(|| {
        run(true, false, false);
    });
}

#[test]
fn gathering_leaders_keep_the_invariants() {
    model(|| {
        let out = run(false, true, false);
        assert!(out.iter().all(|&(_, ok)| ok), "{out:?}");
    });
    // The model went through the gathering wait, not only around it.
    assert!(GATHERS.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

#[test]
fn the_model_catches_ack_before_sync() {
    // The planted bug: some interleaving acknowledges a record before its sync. loom stops
    // at the first interleaving that panics; the panic must be the durability check's.
    let caught = std::panic::catch_unwind(|| {
        model(|| {
            let dev_checks = run(true, false, true);
            // With the sabotage a committer may be told durable although the sync failed.
            assert!(
                dev_checks.iter().all(|&(_, ok)| !ok),
                "acknowledged after a failed sync"
            );
        });
    });
    let msg = caught.expect_err("loom found no interleaving that breaks the sabotaged protocol");
    let text = msg
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| msg.downcast_ref::<&str>().map(ToString::to_string))
        .unwrap_or_default();
    assert!(text.contains("acknowledged after a failed sync"), "{text}");
}
