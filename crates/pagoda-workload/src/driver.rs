//! The multi-threaded driver: runs a workload's operations from N client threads for an op
//! count or a duration, excludes a warm-up (TPC-C's ramp-up), retries conflicts, and collects
//! per-operation latency histograms. It also runs the workloads' parallel loaders.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use parking_lot::Mutex;

use crate::error::{ConfigError, WorkloadError};
use crate::store::{PendingCommit, Store, StoreError, StoreTxn};
use crate::window::{InFlight, Outcome, Window};

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

/// What a transaction body asks for at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish<T> {
    /// Commit and return the value.
    Commit(T),
    /// Roll back and return the value.
    Rollback(T),
}

/// An operation submitted by [`Worker::step_pipelined`].
pub enum Submitted<T> {
    /// Completed (durable if it wrote).
    Done(T),
    /// Its commit is in flight; the operation completes with `T` when it resolves.
    Pending(T, Box<dyn PendingCommit>),
}

impl<T: std::fmt::Debug> std::fmt::Debug for Submitted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Submitted::Done(v) => f.debug_tuple("Done").field(v).finish(),
            Submitted::Pending(v, _) => f.debug_tuple("Pending").field(v).finish(),
        }
    }
}

/// Runs transaction bodies with conflict retries and counts the conflicts.
#[derive(Debug)]
pub struct TxnRunner {
    max_retries: u32,
    conflicts: u64,
    /// The thread's pipelined commits in flight, bounded by the driver's depth.
    window: Window,
}

impl TxnRunner {
    /// A runner retrying each transaction up to `max_retries` times.
    pub fn new(max_retries: u32) -> Self {
        TxnRunner {
            max_retries,
            conflicts: 0,
            window: Window::default(),
        }
    }

    /// Conflicts seen since the last [`TxnRunner::take_conflicts`].
    pub fn take_conflicts(&mut self) -> u64 {
        std::mem::take(&mut self.conflicts)
    }

    /// Runs `body` in a transaction, retrying from scratch on [`StoreError::Conflict`] (from
    /// the body or from commit). The body must draw no new random inputs, so a retry repeats
    /// the same transaction.
    pub fn run<T>(
        &mut self,
        store: &dyn Store,
        read_only: bool,
        mut body: impl FnMut(&mut dyn StoreTxn) -> Result<Finish<T>, StoreError>,
    ) -> Result<T, StoreError> {
        let max_retries = self.max_retries;
        let mut conflicts = 0;
        let out = retry_conflicts(max_retries, &mut conflicts, || {
            Self::attempt(store, read_only, &mut body)
        });
        self.conflicts += conflicts;
        out
    }

    /// Like [`TxnRunner::run`], but a transaction that commits uses a pipelined commit and is
    /// returned pending. Conflicts seen before the commit is queued are retried. Under the
    /// driver, the commit is queued only once the thread's window has room (after the body).
    pub fn run_pipelined<T>(
        &mut self,
        store: &dyn Store,
        mut body: impl FnMut(&mut dyn StoreTxn) -> Result<Finish<T>, StoreError>,
    ) -> Result<Submitted<T>, StoreError> {
        let mut conflicts = 0;
        let window = &mut self.window;
        let out = retry_conflicts(self.max_retries, &mut conflicts, || {
            let mut txn = store.begin()?;
            match body(&mut *txn) {
                Ok(Finish::Commit(v)) => {
                    window.make_room();
                    Ok(Submitted::Pending(v, txn.commit_pipelined()?))
                }
                Ok(Finish::Rollback(v)) => {
                    txn.rollback()?;
                    Ok(Submitted::Done(v))
                }
                Err(e) => {
                    let _ = txn.rollback();
                    Err(e)
                }
            }
        });
        self.conflicts += conflicts;
        out
    }

    fn attempt<T>(
        store: &dyn Store,
        read_only: bool,
        body: &mut impl FnMut(&mut dyn StoreTxn) -> Result<Finish<T>, StoreError>,
    ) -> Result<T, StoreError> {
        let mut txn = if read_only {
            store.begin_read()?
        } else {
            store.begin()?
        };
        match body(&mut *txn) {
            Ok(Finish::Commit(v)) => {
                txn.commit()?;
                Ok(v)
            }
            Ok(Finish::Rollback(v)) => {
                txn.rollback()?;
                Ok(v)
            }
            Err(e) => {
                // The body's error is what matters; a failing rollback adds nothing.
                let _ = txn.rollback();
                Err(e)
            }
        }
    }
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

/// Runs `attempt` until it ends in something other than [`StoreError::Conflict`], at most
/// `max_retries` retries, backing off exponentially (up to ~1 ms) so the winner can finish.
/// Every conflict seen is added to `conflicts`.
fn retry_conflicts<R>(
    max_retries: u32,
    conflicts: &mut u64,
    mut attempt: impl FnMut() -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let mut retries = 0;
    loop {
        match attempt() {
            Err(StoreError::Conflict) if retries < max_retries => {
                *conflicts += 1;
                retries += 1;
                if retries > 1 {
                    std::thread::sleep(Duration::from_micros(1 << retries.min(10)));
                }
            }
            Err(StoreError::Conflict) => {
                *conflicts += 1;
                return Err(StoreError::Conflict);
            }
            other => return other,
        }
    }
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

/// Latency figures in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    /// Smallest.
    pub min: f64,
    /// Arithmetic mean (exact, not from the histogram).
    pub mean: f64,
    /// 25th percentile.
    pub p25: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// Per-operation counters and latency histogram (nanoseconds) of one phase.
#[derive(Debug, Clone)]
pub struct OpStats {
    /// Operation name.
    pub name: &'static str,
    /// Completed operations (ok + not found + rolled back).
    pub count: u64,
    /// Ended with [`OpStatus::Ok`].
    pub ok: u64,
    /// Ended with [`OpStatus::NotFound`].
    pub not_found: u64,
    /// Ended with [`OpStatus::RolledBack`].
    pub rolled_back: u64,
    /// Failed (store error, or conflicts beyond the retry limit).
    pub errors: u64,
    /// Conflicts retried (or given up on).
    pub conflicts: u64,
    sum_ns: u128,
    hist: Histogram<u64>,
}

fn new_histogram() -> Histogram<u64> {
    // Auto-resizing with 3 significant digits; the first value fixes nothing, so no bound
    // is needed. `new` only fails for a bad precision.
    Histogram::new(3).unwrap_or_else(|_| unreachable_histogram())
}

#[allow(clippy::panic)]
fn unreachable_histogram() -> Histogram<u64> {
    panic!("hdrhistogram rejected 3 significant digits")
}

impl OpStats {
    fn new(name: &'static str) -> Self {
        OpStats {
            name,
            count: 0,
            ok: 0,
            not_found: 0,
            rolled_back: 0,
            errors: 0,
            conflicts: 0,
            sum_ns: 0,
            hist: new_histogram(),
        }
    }

    fn record(&mut self, status: &Result<OpStatus, StoreError>, nanos: u64, conflicts: u64) {
        self.conflicts += conflicts;
        match status {
            Ok(s) => {
                self.count += 1;
                match s {
                    OpStatus::Ok => self.ok += 1,
                    OpStatus::NotFound => self.not_found += 1,
                    OpStatus::RolledBack => self.rolled_back += 1,
                }
                self.sum_ns += u128::from(nanos);
                // `record` grows the auto-resizing histogram; `saturating_record` would clamp
                // to its initial (tiny) range instead.
                if self.hist.record(nanos).is_err() {
                    self.hist.saturating_record(nanos);
                }
            }
            Err(_) => self.errors += 1,
        }
    }

    fn merge(&mut self, other: &OpStats) {
        self.count += other.count;
        self.ok += other.ok;
        self.not_found += other.not_found;
        self.rolled_back += other.rolled_back;
        self.errors += other.errors;
        self.conflicts += other.conflicts;
        self.sum_ns += other.sum_ns;
        // Both are auto-resizing, so adding cannot fail; ignore to stay panic-free.
        let _ = self.hist.add(&other.hist);
    }

    /// Latency of the completed operations, in microseconds.
    pub fn latency(&self) -> Latency {
        latency_of(&self.hist, self.sum_ns, self.count)
    }
}

fn latency_of(h: &Histogram<u64>, sum_ns: u128, count: u64) -> Latency {
    if count == 0 {
        return Latency::default();
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    Latency {
        min: us(h.min()),
        mean: sum_ns as f64 / count as f64 / 1000.0,
        p25: us(h.value_at_quantile(0.25)),
        p50: us(h.value_at_quantile(0.50)),
        p75: us(h.value_at_quantile(0.75)),
        p95: us(h.value_at_quantile(0.95)),
        p99: us(h.value_at_quantile(0.99)),
        max: us(h.max()),
    }
}

/// The measured part of a run.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// Per operation, in [`Workload::op_names`] order.
    pub ops: Vec<OpStats>,
    /// Measured wall time (warm-up excluded).
    pub duration: Duration,
    /// Operations done during the warm-up (not in `ops`).
    pub warmup_ops: u64,
    /// The first store error seen, if any.
    pub first_error: Option<String>,
}

impl Measurement {
    /// Completed operations of all kinds.
    pub fn total_ops(&self) -> u64 {
        self.ops.iter().map(|o| o.count).sum()
    }

    /// Failed operations of all kinds.
    pub fn total_errors(&self) -> u64 {
        self.ops.iter().map(|o| o.errors).sum()
    }

    /// Conflicts of all kinds.
    pub fn total_conflicts(&self) -> u64 {
        self.ops.iter().map(|o| o.conflicts).sum()
    }

    /// Latency over all completed operations.
    pub fn overall_latency(&self) -> Latency {
        let mut h = new_histogram();
        let mut sum = 0u128;
        for o in &self.ops {
            let _ = h.add(&o.hist);
            sum += o.sum_ns;
        }
        latency_of(&h, sum, self.total_ops())
    }

    /// Completed operations per second of measured time.
    pub fn throughput(&self) -> f64 {
        let s = self.duration.as_secs_f64();
        if s > 0.0 {
            self.total_ops() as f64 / s
        } else {
            0.0
        }
    }

    /// Stats of the operation called `name`.
    pub fn op(&self, name: &str) -> Option<&OpStats> {
        self.ops.iter().find(|o| o.name == name)
    }
}

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
    let claimed = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let running = AtomicUsize::new(cfg.threads);
    let stop = AtomicBool::new(false);
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let results: Mutex<Vec<(Vec<OpStats>, u64, Instant)>> = Mutex::new(Vec::new());

    std::thread::scope(|scope| {
        for thread in 0..cfg.threads {
            let names = &names;
            let (claimed, done, running, stop) = (&claimed, &done, &running, &stop);
            let (first_error, results) = (&first_error, &results);
            scope.spawn(move || {
                let mut worker = workload.worker(thread, thread_seed(cfg.seed, thread));
                let mut txns = TxnRunner::new(cfg.max_retries);
                txns.window.set_depth(cfg.pipeline_depth);
                let mut stats: Vec<OpStats> = names.iter().map(|n| OpStats::new(n)).collect();
                let mut warmup_ops = 0u64;
                let mut complete = |o: Outcome| {
                    if let Err(e) = &o.status {
                        let mut fe = first_error.lock();
                        if fe.is_none() {
                            *fe = Some(format!("{}: {e}", names.get(o.op).unwrap_or(&"?")));
                        }
                    }
                    if o.warming {
                        warmup_ops += 1;
                        return;
                    }
                    if end.is_some_and(|e| o.at > e) {
                        return;
                    }
                    if let Some(s) = stats.get_mut(o.op) {
                        s.record(&o.status, o.nanos, o.conflicts);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                };
                loop {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let now = Instant::now();
                    let warming = now < measure_start;
                    if !warming {
                        match cfg.limit {
                            RunLimit::Ops(n) => {
                                if claimed.fetch_add(1, Ordering::Relaxed) >= n {
                                    break;
                                }
                            }
                            RunLimit::Duration(_) => {
                                if end.is_some_and(|e| now >= e) {
                                    break;
                                }
                            }
                        }
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
                    // `now` is the instant the window was checked at (a later clock reading
                    // could fall past the end and drop an operation that did run).
                    let mut o = Outcome::new(op, status, t0, warming, conflicts, Instant::now());
                    o.at = now;
                    complete(o);
                }
                // Drain: an operation counts only if its commit resolved inside the window.
                txns.window.drain();
                txns.window.take_done().for_each(&mut complete);
                results.lock().push((stats, warmup_ops, Instant::now()));
                running.fetch_sub(1, Ordering::Release);
            });
        }
        watch(&running, &done, start, cfg, progress);
    });

    let results = results.into_inner();
    let mut ops: Vec<OpStats> = names.iter().map(|n| OpStats::new(n)).collect();
    let mut warmup_ops = 0;
    let mut last = measure_start;
    for (stats, w, finished) in &results {
        for (acc, s) in ops.iter_mut().zip(stats) {
            acc.merge(s);
        }
        warmup_ops += w;
        last = last.max(*finished);
    }
    let duration = match end {
        // A timed run is measured over its planned window (threads finish within one op).
        Some(e) => e.min(last).saturating_duration_since(measure_start),
        None => last.saturating_duration_since(measure_start),
    };
    Ok(Measurement {
        ops,
        duration,
        warmup_ops,
        first_error: first_error.into_inner(),
    })
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

/// Result of a load phase.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoadReport {
    /// What was loaded, e.g. `ycsb` or `tpcc`.
    pub workload: String,
    /// Rows written (index entries included).
    pub rows: u64,
    /// Wall time of the load.
    pub duration_s: f64,
    /// `rows / duration_s`.
    pub rows_per_s: f64,
    /// Conflicts retried while loading.
    pub conflicts: u64,
}

/// Creates `tables` (idempotent), naming the table in an error.
pub fn create_tables(store: &dyn Store, tables: &[&str]) -> Result<(), WorkloadError> {
    for t in tables {
        store
            .create_table(t)
            .map_err(|e| WorkloadError::store(format!("creating table {t}"), e))?;
    }
    Ok(())
}

/// Rejects a loader thread count of 0.
pub fn validate_threads(threads: usize) -> Result<(), ConfigError> {
    if threads == 0 {
        return Err(ConfigError::Zero {
            what: "--threads",
            fix: "use at least 1 loader thread",
        });
    }
    Ok(())
}

/// Runs `units` independent load units on `threads` threads; `unit(i, txns)` loads unit `i`
/// and returns the rows it wrote. Stops at the first error.
pub fn load_parallel(
    name: &str,
    threads: usize,
    units: u64,
    progress: Option<ProgressFn<'_>>,
    unit: &(dyn Fn(u64, &mut TxnRunner) -> Result<u64, WorkloadError> + Sync),
    max_retries: u32,
) -> Result<LoadReport, WorkloadError> {
    validate_threads(threads)?;
    let start = Instant::now();
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let rows = AtomicU64::new(0);
    let conflicts = AtomicU64::new(0);
    let running = AtomicUsize::new(threads);
    let failed: Mutex<Option<WorkloadError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut txns = TxnRunner::new(max_retries);
                loop {
                    if failed.lock().is_some() {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= units {
                        break;
                    }
                    match unit(i, &mut txns) {
                        Ok(n) => {
                            rows.fetch_add(n, Ordering::Relaxed);
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            failed.lock().get_or_insert(e);
                            break;
                        }
                    }
                }
                conflicts.fetch_add(txns.take_conflicts(), Ordering::Relaxed);
                running.fetch_sub(1, Ordering::Release);
            });
        }
        while running.load(Ordering::Acquire) > 0 {
            std::thread::sleep(Duration::from_millis(20));
            if let Some(p) = progress {
                p(Progress {
                    done: done.load(Ordering::Relaxed),
                    total: Some(units),
                    elapsed: start.elapsed(),
                    planned: None,
                    warming_up: false,
                });
            }
        }
    });
    if let Some(e) = failed.into_inner() {
        return Err(e);
    }
    let duration_s = start.elapsed().as_secs_f64();
    let rows = rows.into_inner();
    Ok(LoadReport {
        workload: name.to_string(),
        rows,
        duration_s,
        rows_per_s: if duration_s > 0.0 {
            rows as f64 / duration_s
        } else {
            0.0
        },
        conflicts: conflicts.into_inner(),
    })
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
                t.put("t", &key, b"v")?;
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

    struct Sleeper;
    struct SleeperWorker {
        n: u64,
    }

    impl Worker for SleeperWorker {
        fn step(
            &mut self,
            _store: &dyn Store,
            _txns: &mut TxnRunner,
        ) -> (usize, Result<OpStatus, StoreError>) {
            self.n += 1;
            // Op 0 takes about 2 ms, op 1 next to nothing.
            if self.n & 1 == 0 {
                std::thread::sleep(Duration::from_millis(2));
                (0, Ok(OpStatus::Ok))
            } else {
                (1, Ok(OpStatus::NotFound))
            }
        }
    }

    impl Workload for Sleeper {
        fn op_names(&self) -> Vec<&'static str> {
            vec!["SLOW", "FAST"]
        }
        fn worker(&self, _thread: usize, _seed: u64) -> Box<dyn Worker + '_> {
            Box::new(SleeperWorker { n: 0 })
        }
    }

    #[test]
    fn latencies_are_measured_in_microseconds() {
        let store = MemStore::new();
        let cfg = DriverConfig {
            threads: 2,
            limit: RunLimit::Ops(100),
            ..DriverConfig::default()
        };
        let m = run(&store, &Sleeper, &cfg, None).unwrap();
        let slow = m.op("SLOW").unwrap();
        assert_eq!(slow.count, 50);
        let l = slow.latency();
        for (name, v) in [
            ("p25", l.p25),
            ("p50", l.p50),
            ("p99", l.p99),
            ("max", l.max),
        ] {
            assert!((1900.0..100_000.0).contains(&v), "{name} = {v} us");
        }
        assert!(l.min <= l.p50 && l.p50 <= l.p95 && l.p95 <= l.max);
        assert!(
            (l.mean - l.p50).abs() < l.mean,
            "mean {} p50 {}",
            l.mean,
            l.p50
        );
        let fast = m.op("FAST").unwrap();
        assert_eq!((fast.count, fast.not_found), (50, 50));
        assert!(fast.latency().p50 < 1000.0);
        let all = m.overall_latency();
        assert!(all.p25 < 1000.0 && all.p75 >= 1900.0, "{all:?}");
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
