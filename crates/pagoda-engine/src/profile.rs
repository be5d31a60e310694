//! Per-phase time of transactions and of the log path (the WiredTiger paper's tables), cheap enough
//! to leave on: one clock read at each phase boundary and one relaxed atomic add per phase. The
//! clock is the CPU's time-stamp counter where it is usable (quanta falls back to the system clock
//! elsewhere): a read costs a third of `Instant::now` on a VM, and a point read crosses four phase
//! boundaries. Ticks are summed and turned into time only in the table.

use crate::striped::Striped;
use std::sync::OnceLock;
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
    /// Log: device syncs this thread issued.
    LogSync,
    /// Commit: waiting for durability (sync commits; the caller's thread idles or does I/O).
    WaitDurable,
    /// Log: waiting for a sync another thread issued that covers this record.
    LogWaitSync,
    /// Log: a round's leader waits for the committers the last round acknowledged to join
    /// (the slot's leader waiting for its slot to fill).
    LogGather,
    /// Commit: waiting for room in the log ring (a checkpoint must free it first).
    LogWaitSpace,
}

const PHASES: usize = 14;

const NAMES: [&str; PHASES] = [
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
    "log.wait_sync",
    "log.gather",
    "log.wait_space",
];

/// Nanosecond and event counters per phase (counter `2 * phase` the nanoseconds, `2 * phase
/// + 1` the events), striped: every transaction adds to them, on every thread.
#[derive(Debug, Default)]
pub struct Profile {
    counters: Striped<{ 2 * PHASES }>,
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

/// The phase table of [`crate::stats::DbStats::profile`]. Transaction phases (begin, search, update,
/// commit) are disjoint; the `commit.*` and `log.*` rows break the commit down (the log rows
/// may be done by the flush thread, outside any transaction).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ProfileStats {
    /// Rows, one per phase in this order: begin, search, update, commit, commit.lock,
    /// commit.apply, log.join, log.wait_slot, log.write, log.sync, commit.wait_durable,
    /// log.wait_sync, log.gather, log.wait_space.
    pub phases: Vec<PhaseStat>,
}

/// The four phases of WiredTiger's log path (its consolidation array), as the pipelined-commit
/// paper measures them, from ours (times in ms, or fractions of their sum, as the paper gives
/// them):
///
/// | WiredTiger | what it is there | ours |
/// |---|---|---|
/// | `slot_join` | copy the record into the open slot | `log.join` |
/// | `slot_wait` | the slot's leader waits for the slot to close | `log.gather` (a round's leader waits for committers to join) + `log.wait_slot` (waiting for the round in flight, which does not carry this record, to end) |
/// | `log_release` | the last one out writes and syncs the slot | `log.write` + `log.sync` (this thread writes the slots / syncs the device) |
/// | `log_cond_wait` | the others wait on a condition variable for that sync | `log.wait_sync` (waiting for a sync another thread issued) |
///
/// Our commit lock and apply (`commit.lock`, `commit.apply`) have no counterpart in WiredTiger's
/// four and are left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct LogPathPhases {
    /// Joining a slot.
    pub slot_join: f64,
    /// Waiting for the slot's leader.
    pub slot_wait: f64,
    /// Writing and syncing the log.
    pub log_release: f64,
    /// Waiting for a sync by another thread.
    pub log_cond_wait: f64,
}

impl LogPathPhases {
    /// The same phases as fractions of their sum (all 0 when nothing was measured).
    pub fn fractions(&self) -> Self {
        let sum = self.slot_join + self.slot_wait + self.log_release + self.log_cond_wait;
        let f = |x: f64| if sum > 0.0 { x / sum } else { 0.0 };
        Self {
            slot_join: f(self.slot_join),
            slot_wait: f(self.slot_wait),
            log_release: f(self.log_release),
            log_cond_wait: f(self.log_cond_wait),
        }
    }
}

impl ProfileStats {
    /// The row of `phase`.
    pub fn get(&self, phase: &str) -> Option<&PhaseStat> {
        self.phases.iter().find(|p| p.phase == phase)
    }

    fn total_ms(&self, phases: &[&str]) -> f64 {
        phases
            .iter()
            .filter_map(|p| self.get(p))
            .map(|p| p.total_ms)
            .sum()
    }

    /// WiredTiger's four log-path phases in ms, summed over threads ([`LogPathPhases`]).
    pub fn log_path_ms(&self) -> LogPathPhases {
        LogPathPhases {
            slot_join: self.total_ms(&["log.join"]),
            slot_wait: self.total_ms(&["log.wait_slot", "log.gather"]),
            log_release: self.total_ms(&["log.write", "log.sync"]),
            log_cond_wait: self.total_ms(&["log.wait_sync"]),
        }
    }
}

fn clock() -> &'static quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

/// A phase boundary, in clock ticks.
#[derive(Clone, Copy, Debug)]
pub struct Stamp(u64);

impl Stamp {
    /// Now.
    #[inline]
    pub fn now() -> Self {
        Self(clock().raw())
    }
}

impl Profile {
    /// A profile with its clock calibrated (the first calibration takes about a millisecond,
    /// which belongs at open, not in the first transaction).
    pub fn new() -> Self {
        clock();
        Self::default()
    }

    /// Adds one event of `phase` that started at `t0`; returns now.
    #[inline]
    pub fn add(&self, phase: Phase, t0: Stamp) -> Stamp {
        let now = Stamp::now();
        self.counters
            .add(2 * phase as usize, now.0.saturating_sub(t0.0));
        self.counters.add(2 * phase as usize + 1, 1);
        now
    }

    /// Zeroes every counter (e.g. after loading, before a measured run).
    pub fn reset(&self) {
        self.counters.reset();
    }

    /// The table.
    pub fn stats(&self) -> ProfileStats {
        ProfileStats {
            phases: NAMES
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let ns = clock().delta_as_nanos(0, self.counters.sum(2 * i));
                    let c = self.counters.sum(2 * i + 1);
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
    /// The phase table as text (as the WiredTiger paper tabulates it): phase, events, mean µs,
    /// total ms, and the share of the transaction time (begin + search + update + commit).
    pub fn render(&self) -> String {
        let txn_ms = self.total_ms(&["begin", "search", "update", "commit"]);
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
        let s = self.log_path_ms().fractions();
        out.push_str(&format!(
            "WiredTiger log path: slot_join {:.2}%, slot_wait {:.1}%, log_release {:.1}%, \
             log_cond_wait {:.1}%\n",
            100.0 * s.slot_join,
            100.0 * s.slot_wait,
            100.0 * s.log_release,
            100.0 * s.log_cond_wait
        ));
        out
    }
}
