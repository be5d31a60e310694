//! The multi-threaded driver: runs a workload's operations from N client threads for an op
//! count or a duration, excludes a warm-up (TPC-C's ramp-up), retries conflicts, and collects
//! per-operation latency histograms. It also runs the workloads' parallel loaders.

pub(crate) mod load;
pub(crate) mod stats;
pub(crate) mod txn;
mod window;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

pub use load::{create_tables, load_parallel, validate_threads, LoadReport};
pub use stats::{Latency, Measurement, OpStats};
pub use txn::{Finish, Submitted, TxnRunner};

use crate::error::{ConfigError, WorkloadError};
use crate::store::{Store, StoreError};
use window::{InFlight, Outcome};

/// When the measured part of a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunLimit {
    /// After this many measured operations in total (over all threads).
    Ops(u64),
    /// After this much measured time.
    #[serde(rename = "duration_s", serialize_with = "as_secs")]
    Duration(Duration),
}

/// Durations appear in the JSON report as seconds.
fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// How the driver runs a phase.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DriverConfig {
    /// Client threads (≥ 1).
    pub threads: usize,
    /// End of the measured part.
    pub limit: RunLimit,
    /// Time run before measuring starts; its operations are not in the results (TPC-C's
    /// ramp-up, a warm-up for the others).
    #[serde(rename = "warmup_s", serialize_with = "as_secs")]
    pub warmup: Duration,
    /// How often a transaction that hit [`StoreError::Conflict`] is retried before the
    /// operation counts as an error.
    pub max_retries: u32,
    /// Seed of every random choice; a run is reproducible from it (given one thread).
    pub seed: u64,
    /// Pipelined commits each client thread may have unresolved at any instant (0: commit
    /// synchronously). With K > 0 a thread hands a commit off and goes on with its next
    /// operation; before queuing another commit it waits until fewer than K are unresolved.
    /// K = 1 therefore keeps one commit in flight per thread, as synchronous commit does, but
    /// overlaps the next transaction's body with the sync (`window.rs` has the details). An
    /// operation completes, and its latency ends, only when its commit is durable, so the
    /// throughput counts durable commits only. Workloads without a pipelined path
    /// ([`Worker::step_pipelined`]) run synchronously.
    pub pipeline_depth: usize,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            threads: 1,
            limit: RunLimit::Ops(1000),
            warmup: Duration::ZERO,
            max_retries: 100,
            seed: 1,
            pipeline_depth: 0,
        }
    }
}

impl DriverConfig {
    /// Rejects configurations that cannot run.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.threads == 0 {
            return Err(ConfigError::Zero {
                what: "--threads",
                fix: "use at least 1 client thread",
            });
        }
        if self.threads > 4096 {
            return Err(ConfigError::OutOfRange {
                what: "--threads",
                value: self.threads.to_string(),
                fix: "use 1..=4096 client threads".to_string(),
            });
        }
        match self.limit {
            RunLimit::Ops(0) => Err(ConfigError::Zero {
                what: "--ops",
                fix: "give a positive operation count or a --duration",
            }),
            RunLimit::Duration(d) if d.is_zero() => Err(ConfigError::Zero {
                what: "--duration",
                fix: "give a positive duration such as 30s, or an --ops count",
            }),
            _ => Ok(()),
        }
    }
}

/// How an operation ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpStatus {
    /// Done.
    Ok,
    /// The key/row/node was not there (YCSB's `NOT_FOUND`, a LinkBench miss).
    NotFound,
    /// Rolled back on purpose (TPC-C's 1 % of New-Orders); counts as completed.
    RolledBack,
}

/// One client's stream of operations.
pub trait Worker {
    /// Draws the next operation's inputs and runs it. Returns the operation's index in
    /// [`Workload::op_names`] and its outcome.
    fn step(
        &mut self,
        store: &dyn Store,
        txns: &mut TxnRunner,
    ) -> (usize, Result<OpStatus, StoreError>);

    /// Like [`Worker::step`], but may return with the operation's commit in flight
    /// ([`TxnRunner::run_pipelined`]). The default runs [`Worker::step`].
    fn step_pipelined(
        &mut self,
        store: &dyn Store,
        txns: &mut TxnRunner,
    ) -> (usize, Result<Submitted<OpStatus>, StoreError>) {
        let (op, r) = self.step(store, txns);
        (op, r.map(Submitted::Done))
    }
}

/// A workload the driver can run.
pub trait Workload: Sync {
    /// Operation names, as reports show them (e.g. `READ`, `NewOrder`, `ADD_LINK`).
    fn op_names(&self) -> Vec<&'static str>;
    /// The worker of client `thread`, with its own random source seeded from `seed`.
    fn worker(&self, thread: usize, seed: u64) -> Box<dyn Worker + '_>;
}

/// Where a phase is, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Measured operations (or loaded units) done so far.
    pub done: u64,
    /// Total to do when it is a count.
    pub total: Option<u64>,
    /// Time since the phase started (warm-up included).
    pub elapsed: Duration,
    /// Length of the phase when it is timed (warm-up included).
    pub planned: Option<Duration>,
    /// Whether the warm-up is still running.
    pub warming_up: bool,
}

/// A progress callback; called from the thread that started the phase, about 50 times a second
/// (throttle drawing there if needed).
pub type ProgressFn<'a> = &'a (dyn Fn(Progress) + Sync);

/// The seed of client `thread` derived from the run seed (splitmix64, so nearby seeds and
/// threads give unrelated streams).
pub fn thread_seed(seed: u64, thread: usize) -> u64 {
    let mut z = seed
        .wrapping_add((thread as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Runs `workload` on `store` as `cfg` says.
pub fn run(
    store: &dyn Store,
    workload: &dyn Workload,
    cfg: &DriverConfig,
    progress: Option<ProgressFn<'_>>,
) -> Result<Measurement, WorkloadError> {
    cfg.validate()?;
    let names = workload.op_names();
    let start = Instant::now();
    let measure_start = start + cfg.warmup;
    let end = match cfg.limit {
        RunLimit::Duration(d) => Some(measure_start + d),
        RunLimit::Ops(_) => None,
    };
    let run = Clients {
        cfg,
        names: &names,
        measure_start,
        end,
        claimed: AtomicU64::new(0),
        done: AtomicU64::new(0),
        running: AtomicUsize::new(cfg.threads),
        stop: AtomicBool::new(false),
        first_error: Mutex::new(None),
        results: Mutex::new(Vec::new()),
    };
    std::thread::scope(|scope| {
        for thread in 0..cfg.threads {
            let run = &run;
            scope.spawn(move || run.client(store, workload, thread));
        }
        watch(&run.running, &run.done, start, cfg, progress);
    });
    Ok(run.measurement())
}

/// One client thread's figures: per-operation stats, warm-up operations, when it finished.
type ClientResult = (Vec<OpStats>, u64, Instant);

/// What the client threads of one run share.
struct Clients<'a> {
    cfg: &'a DriverConfig,
    names: &'a [&'static str],
    measure_start: Instant,
    /// The end of a timed run's window.
    end: Option<Instant>,
    /// Operations claimed (an op-count run stops at its count).
    claimed: AtomicU64,
    /// Operations measured, for the progress line.
    done: AtomicU64,
    running: AtomicUsize,
    stop: AtomicBool,
    first_error: Mutex<Option<String>>,
    results: Mutex<Vec<ClientResult>>,
}

impl Clients<'_> {
    /// Whether client threads take another operation now (`now` is past the warm-up).
    fn go_on(&self, now: Instant) -> bool {
        match self.cfg.limit {
            RunLimit::Ops(n) => self.claimed.fetch_add(1, Ordering::Relaxed) < n,
            RunLimit::Duration(_) => self.end.is_none_or(|e| now < e),
        }
    }

    /// Client `thread`: runs the workload's operations until the run's limit, each counted
    /// when it completes (a pipelined commit when it resolves).
    fn client(&self, store: &dyn Store, workload: &dyn Workload, thread: usize) {
        let cfg = self.cfg;
        let mut worker = workload.worker(thread, thread_seed(cfg.seed, thread));
        let mut txns = TxnRunner::new(cfg.max_retries);
        txns.window.set_depth(cfg.pipeline_depth);
        let mut stats: Vec<OpStats> = self.names.iter().map(|n| OpStats::new(n)).collect();
        let mut warmup_ops = 0u64;
        let mut complete = |o: Outcome| {
            if let Err(e) = &o.status {
                let mut fe = self.first_error.lock();
                if fe.is_none() {
                    *fe = Some(format!("{}: {e}", self.names.get(o.op).unwrap_or(&"?")));
                }
            }
            if o.warming {
                warmup_ops += 1;
                return;
            }
            if self.end.is_some_and(|e| o.at > e) {
                return;
            }
            if let Some(s) = stats.get_mut(o.op) {
                s.record(&o.status, o.nanos, o.conflicts);
            }
            self.done.fetch_add(1, Ordering::Relaxed);
        };
        loop {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let now = Instant::now();
            let warming = now < self.measure_start;
            if !warming && !self.go_on(now) {
                break;
            }
            txns.take_conflicts();
            let t0 = Instant::now();
            let (op, status) = if cfg.pipeline_depth > 0 {
                match worker.step_pipelined(store, &mut txns) {
                    (op, Ok(Submitted::Pending(status, pending))) => {
                        let conflicts = txns.take_conflicts();
                        txns.window.push(InFlight {
                            op,
                            status,
                            pending,
                            t0,
                            warming,
                            conflicts,
                        });
                        txns.window.poll();
                        txns.window.take_done().for_each(&mut complete);
                        continue;
                    }
                    (op, Ok(Submitted::Done(s))) => (op, Ok(s)),
                    (op, Err(e)) => (op, Err(e)),
                }
            } else {
                worker.step(store, &mut txns)
            };
            let conflicts = txns.take_conflicts();
            // Commits of the window that resolved meanwhile finished first.
            txns.window.poll();
            txns.window.take_done().for_each(&mut complete);
            // A synchronous operation started inside the window counts (as before
            // pipelining existed); a pipelined one counts only if it resolved inside.
            // `now` is the instant the window was checked at (a later clock reading could
            // fall past the end and drop an operation that did run).
            let mut o = Outcome::new(op, status, t0, warming, conflicts, Instant::now());
            o.at = now;
            complete(o);
        }
        // Drain: an operation counts only if its commit resolved inside the window.
        txns.window.drain();
        txns.window.take_done().for_each(&mut complete);
        self.results
            .lock()
            .push((stats, warmup_ops, Instant::now()));
        self.running.fetch_sub(1, Ordering::Release);
    }

    /// The clients' figures merged, over the measured window.
    fn measurement(self) -> Measurement {
        let mut ops: Vec<OpStats> = self.names.iter().map(|n| OpStats::new(n)).collect();
        let mut warmup_ops = 0;
        let mut last = self.measure_start;
        for (stats, w, finished) in &self.results.into_inner() {
            for (acc, s) in ops.iter_mut().zip(stats) {
                acc.merge(s);
            }
            warmup_ops += w;
            last = last.max(*finished);
        }
        let duration = match self.end {
            // A timed run is measured over its planned window (threads finish within one op).
            Some(e) => e.min(last).saturating_duration_since(self.measure_start),
            None => last.saturating_duration_since(self.measure_start),
        };
        Measurement {
            ops,
            duration,
            warmup_ops,
            first_error: self.first_error.into_inner(),
        }
    }
}

fn watch(
    running: &AtomicUsize,
    done: &AtomicU64,
    start: Instant,
    cfg: &DriverConfig,
    progress: Option<ProgressFn<'_>>,
) {
    let total = match cfg.limit {
        RunLimit::Ops(n) => Some(n),
        RunLimit::Duration(_) => None,
    };
    let planned = match cfg.limit {
        RunLimit::Duration(d) => Some(cfg.warmup + d),
        RunLimit::Ops(_) => None,
    };
    while running.load(Ordering::Acquire) > 0 {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(p) = progress {
            let elapsed = start.elapsed();
            p(Progress {
                done: done.load(Ordering::Relaxed),
                total,
                elapsed,
                planned,
                warming_up: elapsed < cfg.warmup,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    struct Counter;
    struct CounterWorker {
        n: u64,
    }

    impl Worker for CounterWorker {
        fn step(
            &mut self,
            store: &dyn Store,
            txns: &mut TxnRunner,
        ) -> (usize, Result<OpStatus, StoreError>) {
            self.n += 1;
            let key = self.n.to_be_bytes();
            let r = txns.run(store, false, |t| {
                let t_t = t.open("t")?;
                t.put(t_t, &key, b"v")?;
                Ok(Finish::Commit(OpStatus::Ok))
            });
            ((self.n % 2) as usize, r)
        }
    }

    impl Workload for Counter {
        fn op_names(&self) -> Vec<&'static str> {
            vec!["EVEN", "ODD"]
        }
        fn worker(&self, thread: usize, _seed: u64) -> Box<dyn Worker + '_> {
            Box::new(CounterWorker {
                n: thread as u64 * 1_000_000,
            })
        }
    }

    #[test]
    fn op_limit_is_exact_and_conflicts_are_retried() {
        let store = MemStore::with_conflict_rate(0.3, 9);
        store.create_table("t").unwrap();
        let cfg = DriverConfig {
            threads: 3,
            limit: RunLimit::Ops(3000),
            ..DriverConfig::default()
        };
        let calls = AtomicU64::new(0);
        let cb = |_: Progress| {
            calls.fetch_add(1, Ordering::Relaxed);
        };
        let m = run(&store, &Counter, &cfg, Some(&cb)).unwrap();
        assert_eq!(m.total_ops(), 3000);
        assert_eq!(m.total_errors(), 0);
        assert!(m.total_conflicts() > 500, "{}", m.total_conflicts());
        assert_eq!(store.table_len("t"), 3000);
        assert!(m.op("EVEN").unwrap().count > 1000);
        assert!(m.throughput() > 0.0);
        let l = m.overall_latency();
        assert!(l.min <= l.p50 && l.p50 <= l.p99 && l.p99 <= l.max);
    }

    #[test]
    fn warmup_is_excluded_and_duration_is_honoured() {
        let store = MemStore::new();
        store.create_table("t").unwrap();
        let cfg = DriverConfig {
            threads: 2,
            limit: RunLimit::Duration(Duration::from_millis(150)),
            warmup: Duration::from_millis(100),
            ..DriverConfig::default()
        };
        let m = run(&store, &Counter, &cfg, None).unwrap();
        assert!(m.warmup_ops > 0);
        assert_eq!(store.table_len("t") as u64, m.total_ops() + m.warmup_ops);
        let d = m.duration.as_secs_f64();
        assert!((0.12..0.5).contains(&d), "measured {d}s");
    }

    #[test]
    fn exhausted_retries_are_errors() {
        let store = MemStore::with_conflict_rate(1.0, 1);
        store.create_table("t").unwrap();
        let cfg = DriverConfig {
            limit: RunLimit::Ops(10),
            max_retries: 3,
            ..DriverConfig::default()
        };
        let m = run(&store, &Counter, &cfg, None).unwrap();
        assert_eq!(m.total_errors(), 10);
        assert_eq!(m.total_conflicts(), 40);
        assert!(m.first_error.is_some());
    }

    #[test]
    fn bad_driver_configs_are_rejected() {
        let zero_threads = DriverConfig {
            threads: 0,
            ..DriverConfig::default()
        };
        assert!(zero_threads
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--threads"));
        let zero_ops = DriverConfig {
            limit: RunLimit::Ops(0),
            ..DriverConfig::default()
        };
        assert!(zero_ops
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--ops"));
    }
}
