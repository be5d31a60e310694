//! What a run measured: per-operation counters and HdrHistogram latencies, merged over the
//! client threads into a [`Measurement`].

use std::time::Duration;

use hdrhistogram::Histogram;

use super::OpStatus;
use crate::store::StoreError;

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
    pub(super) fn new(name: &'static str) -> Self {
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

    pub(super) fn record(
        &mut self,
        status: &Result<OpStatus, StoreError>,
        nanos: u64,
        conflicts: u64,
    ) {
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

    pub(super) fn merge(&mut self, other: &OpStats) {
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
    /// Per operation, in [`Workload::op_names`](super::Workload::op_names) order.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{run, DriverConfig, RunLimit, TxnRunner, Worker, Workload};
    use crate::store::{MemStore, Store};

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
}
