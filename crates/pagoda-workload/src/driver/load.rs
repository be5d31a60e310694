//! The workloads' load phase: tables, loader threads and the parallel loader.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::txn::TxnRunner;
use super::{Progress, ProgressFn};
use crate::error::{ConfigError, WorkloadError};
use crate::store::Store;

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
    // When the last loader finished: the progress loop below wakes every 20 ms, and timing the
    // load by it made a 100 ms load's rate vary in 20 ms steps (248k, 198k, 165k rows/s).
    let finished = Mutex::new(start);
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
                {
                    let mut f = finished.lock();
                    *f = (*f).max(Instant::now());
                }
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
    let duration_s = finished.into_inner().duration_since(start).as_secs_f64();
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
