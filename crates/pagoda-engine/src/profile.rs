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
    /// Rows, one per phase in this order: begin, search, update, commit, commit.lock,
    /// commit.apply, log.join, log.wait_slot, log.write, log.sync, commit.wait_durable.
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

    /// Zeroes every counter (e.g. after loading, before a measured run).
    pub fn reset(&self) {
        for a in self.nanos.iter().chain(self.counts.iter()) {
            a.store(0, Ordering::Relaxed);
        }
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

/// CPU time of the process (user + system, all threads) with a wall-clock start, to give the
/// CPU utilisation of a run: CPU seconds over wall seconds times cores.
#[derive(Clone, Copy, Debug)]
pub struct CpuClock {
    wall: Instant,
    user: f64,
    sys: f64,
}

/// CPU utilisation of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct CpuUsage {
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// User CPU seconds (all threads).
    pub user_s: f64,
    /// System CPU seconds (all threads).
    pub sys_s: f64,
    /// Cores available to the process.
    pub cores: usize,
    /// (user + sys) / (wall × cores), 0..=1.
    pub utilisation: f64,
}

fn rusage_self() -> (f64, f64) {
    // SAFETY: getrusage only writes the struct we pass; a zeroed rusage is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer to an rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return (0.0, 0.0);
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

impl CpuClock {
    /// Starts measuring now.
    pub fn start() -> Self {
        let (user, sys) = rusage_self();
        Self {
            wall: Instant::now(),
            user,
            sys,
        }
    }

    /// Utilisation since [`CpuClock::start`].
    pub fn usage(&self) -> CpuUsage {
        let (user, sys) = rusage_self();
        let wall_s = self.wall.elapsed().as_secs_f64();
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        let (user_s, sys_s) = ((user - self.user).max(0.0), (sys - self.sys).max(0.0));
        CpuUsage {
            wall_s,
            user_s,
            sys_s,
            cores,
            utilisation: if wall_s > 0.0 {
                (user_s + sys_s) / (wall_s * cores as f64)
            } else {
                0.0
            },
        }
    }
}

impl ProfileStats {
    /// The phase table as text (seed 002 style): phase, events, mean µs, total ms, and the
    /// share of the transaction time (begin + search + update + commit).
    pub fn render(&self) -> String {
        let txn_ms: f64 = ["begin", "search", "update", "commit"]
            .iter()
            .filter_map(|p| self.get(p))
            .map(|p| p.total_ms)
            .sum();
        let mut out = format!(
            "{:<22} {:>12} {:>12} {:>12} {:>8}\n",
            "phase", "events", "mean_us", "total_ms", "% txn"
        );
        for p in &self.phases {
            out.push_str(&format!(
                "{:<22} {:>12} {:>12.2} {:>12.1} {:>7.1}%\n",
                p.phase,
                p.count,
                p.mean_us,
                p.total_ms,
                if txn_ms > 0.0 {
                    100.0 * p.total_ms / txn_ms
                } else {
                    0.0
                }
            ));
        }
        out
    }
}
