//! Per-phase time of transactions and of the log path (seed 002's tables), cheap enough to
//! leave on: one clock read at each phase boundary and one relaxed atomic add per phase.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A measured phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Phase {
    /// `Db::begin` / `begin_read` (snapshot registration).
    Begin,
    /// Point reads and scans of a transaction (B+tree search plus MVCC resolution).
    Search,
    /// Buffered writes of a transaction (key checks, early conflict check).
    Update,
    /// The whole commit call (for a pipelined commit: until the ticket is handed out).
    Commit,
    /// Commit: waiting for the commit lock.
    CommitLock,
    /// Commit: validation, MVCC versions and tree changes under the commit lock.
    CommitApply,
    /// Log: joining a slot (taking the log lock, copying the sealed record in).
    LogJoin,
    /// Log: waiting while another thread writes (the slot closes and is written by it).
    LogWaitSlot,
    /// Log: writing groups to the device (and releasing them).
    LogWrite,
    /// Log: device syncs.
    LogSync,
    /// Commit: waiting for durability (sync commits; the caller's thread idles or does I/O).
    WaitDurable,
}

const NAMES: [&str; 11] = [
    "begin",
    "search",
    "update",
    "commit",
    "commit.lock",
    "commit.apply",
    "log.join",
    "log.wait_slot",
    "log.write",
    "log.sync",
    "commit.wait_durable",
];

/// Nanosecond and event counters per phase.
#[derive(Debug, Default)]
pub struct Profile {
    nanos: [AtomicU64; 11],
    counts: [AtomicU64; 11],
}

/// One row of the phase table.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct PhaseStat {
    /// Phase name.
    pub phase: String,
    /// Events.
    pub count: u64,
    /// Total time in milliseconds (summed over threads).
    pub total_ms: f64,
    /// Mean time per event in microseconds.
    pub mean_us: f64,
}

/// The phase table of [`crate::DbStats::profile`]. Transaction phases (begin, search, update,
/// commit) are disjoint; the `commit.*` and `log.*` rows break the commit down (the log rows
/// may be done by the flush thread, outside any transaction).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ProfileStats {
    /// Rows, in the order of [`Phase`].
    pub phases: Vec<PhaseStat>,
}

impl ProfileStats {
    /// The row of `phase`.
    pub fn get(&self, phase: &str) -> Option<&PhaseStat> {
        self.phases.iter().find(|p| p.phase == phase)
    }
}

impl Profile {
    /// Adds one event of `phase` that started at `t0`; returns now.
    #[inline]
    pub fn add(&self, phase: Phase, t0: Instant) -> Instant {
        let now = Instant::now();
        let ns = now.saturating_duration_since(t0).as_nanos() as u64;
        self.nanos[phase as usize].fetch_add(ns, Ordering::Relaxed);
        self.counts[phase as usize].fetch_add(1, Ordering::Relaxed);
        now
    }

    /// The table.
    pub fn stats(&self) -> ProfileStats {
        ProfileStats {
            phases: NAMES
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let ns = self.nanos[i].load(Ordering::Relaxed);
                    let c = self.counts[i].load(Ordering::Relaxed);
                    PhaseStat {
                        phase: (*n).to_string(),
                        count: c,
                        total_ms: ns as f64 / 1e6,
                        mean_us: if c == 0 {
                            0.0
                        } else {
                            ns as f64 / 1e3 / c as f64
                        },
                    }
                })
                .collect(),
        }
    }
}
