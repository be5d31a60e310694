//! db_bench-named micro-benchmarks — `fillrandom`, `readrandom`, `updaterandom`,
//! `readwhilewriting` — and db_bench's result line, the common language of key-value engines.
//!
//! Keys are db_bench's 16-digit zero-padded decimal numbers below `num`, drawn uniformly with
//! replacement; values are `value_size` random printable bytes. Each operation is its own
//! transaction (so `--commit sync` gives db_bench's `--sync=1`). `readwhilewriting`: client 0
//! writes, the others read. Differences: the line's `micros/op` is the mean operation latency
//! (db_bench divides summed thread time by operations, which is the same thing), and values
//! are not built to a compression ratio.

use std::fmt::Write as _;
use std::str::FromStr;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::driver::{
    self, DriverConfig, Finish, OpStatus, ProgressFn, TxnRunner, Worker, Workload,
};
use crate::error::{ConfigError, WorkloadError};
use crate::report::RunReport;
use crate::store::{Store, StoreError};

/// Table the benchmarks use.
pub const TABLE: &str = "dbbench";

/// A db_bench benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DbBench {
    /// Puts of random keys.
    FillRandom,
    /// Gets of random keys.
    ReadRandom,
    /// Get then put of random keys.
    UpdateRandom,
    /// Client 0 puts while the others get.
    ReadWhileWriting,
}

impl DbBench {
    /// db_bench's name.
    pub fn name(self) -> &'static str {
        match self {
            DbBench::FillRandom => "fillrandom",
            DbBench::ReadRandom => "readrandom",
            DbBench::UpdateRandom => "updaterandom",
            DbBench::ReadWhileWriting => "readwhilewriting",
        }
    }
}

impl FromStr for DbBench {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        [
            DbBench::FillRandom,
            DbBench::ReadRandom,
            DbBench::UpdateRandom,
            DbBench::ReadWhileWriting,
        ]
        .into_iter()
        .find(|b| b.name() == s)
        .ok_or_else(|| ConfigError::OutOfRange {
            what: "benchmark",
            value: s.to_string(),
            fix: "use fillrandom, readrandom, updaterandom or readwhilewriting".to_string(),
        })
    }
}

/// Parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DbBenchConfig {
    /// The benchmark.
    pub benchmark: DbBench,
    /// Key space (`--num`).
    pub num: u64,
    /// Value bytes (`--value_size`, default 100).
    pub value_size: usize,
}

impl DbBenchConfig {
    /// db_bench's defaults (100-byte values) over `num` keys.
    pub fn new(benchmark: DbBench, num: u64) -> Self {
        DbBenchConfig {
            benchmark,
            num,
            value_size: 100,
        }
    }

    /// Rejects parameters that cannot run.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.num == 0 {
            return Err(ConfigError::Zero {
                what: "--num",
                fix: "use a key space of at least 1 key",
            });
        }
        if self.value_size == 0 || self.value_size > 16 << 20 {
            return Err(ConfigError::OutOfRange {
                what: "--value-size",
                value: self.value_size.to_string(),
                fix: "use 1 byte ..= 16 MiB".to_string(),
            });
        }
        Ok(())
    }
}

/// db_bench's 16-byte key of number `k`.
pub fn key(k: u64) -> Vec<u8> {
    format!("{k:016}").into_bytes()
}

/// Operation names in report order.
pub const OP_NAMES: [&str; 3] = ["READ", "WRITE", "UPDATE"];

/// Runs the benchmark (creating the table; `readrandom` and `updaterandom` expect it filled,
/// e.g. by a `fillrandom` run or [`fill_sequential`]).
pub fn run(
    store: &dyn Store,
    cfg: &DbBenchConfig,
    driver_cfg: &DriverConfig,
    progress: Option<ProgressFn<'_>>,
) -> Result<RunReport, WorkloadError> {
    cfg.validate()?;
    driver_cfg.validate()?;
    driver::create_tables(store, &[TABLE])?;
    let m = driver::run(store, &DbRun { cfg }, driver_cfg, progress)?;
    let config =
        serde_json::json!({ "dbbench": cfg, "driver": driver_cfg, "store": store.describe() });
    Ok(RunReport::new(
        &format!("bench {}", cfg.benchmark.name()),
        config,
        &m,
        store,
    ))
}

/// Writes every key `0..num` once, 1,000 per transaction (a quick fill before read tests).
pub fn fill_sequential(
    store: &dyn Store,
    cfg: &DbBenchConfig,
    threads: usize,
    seed: u64,
    progress: Option<ProgressFn<'_>>,
) -> Result<driver::LoadReport, WorkloadError> {
    cfg.validate()?;
    driver::validate_threads(threads)?;
    driver::create_tables(store, &[TABLE])?;
    let per = 1000;
    let unit = |u: u64, txns: &mut TxnRunner| -> Result<u64, WorkloadError> {
        let mut rng = SmallRng::seed_from_u64(driver::thread_seed(seed, u as usize));
        let first = u * per;
        let last = (first + per).min(cfg.num);
        let rows: Vec<(Vec<u8>, Vec<u8>)> = (first..last)
            .map(|k| (key(k), value(&mut rng, cfg.value_size)))
            .collect();
        txns.run(store, false, |t| {
            let table_t = t.open(TABLE)?;
            for (k, v) in &rows {
                t.put(table_t, k, v)?;
            }
            Ok(Finish::Commit(()))
        })
        .map_err(|e| WorkloadError::store("filling db_bench keys", e))?;
        Ok(last - first)
    };
    driver::load_parallel(
        "dbbench",
        threads,
        cfg.num.div_ceil(per),
        progress,
        &unit,
        100,
    )
}

fn value(rng: &mut SmallRng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.gen_range(b' '..=b'~')).collect()
}

/// db_bench's result line: `name : X micros/op Y ops/sec;`.
pub fn render_line(name: &str, r: &RunReport) -> String {
    let done: u64 = r.operations.iter().map(|o| o.count).sum();
    let sum_us: f64 = r
        .operations
        .iter()
        .map(|o| o.latency_us.mean * o.count as f64)
        .sum();
    let micros = if done > 0 { sum_us / done as f64 } else { 0.0 };
    let mut s = String::new();
    let _ = write!(
        s,
        "{name:<12} : {micros:11.3} micros/op {:.0} ops/sec;",
        r.throughput_ops_s
    );
    s
}

struct DbRun<'a> {
    cfg: &'a DbBenchConfig,
}

impl Workload for DbRun<'_> {
    fn op_names(&self) -> Vec<&'static str> {
        OP_NAMES.to_vec()
    }

    fn worker(&self, thread: usize, seed: u64) -> Box<dyn Worker + '_> {
        Box::new(DbWorker {
            cfg: self.cfg,
            writer: thread == 0,
            rng: SmallRng::seed_from_u64(seed),
        })
    }
}

struct DbWorker<'a> {
    cfg: &'a DbBenchConfig,
    writer: bool,
    rng: SmallRng,
}

impl Worker for DbWorker<'_> {
    fn step(
        &mut self,
        store: &dyn Store,
        txns: &mut TxnRunner,
    ) -> (usize, Result<OpStatus, StoreError>) {
        let k = key(self.rng.gen_range(0..self.cfg.num));
        let read = |txns: &mut TxnRunner| {
            txns.run(store, true, |t| {
                let table_t = t.open(TABLE)?;
                Ok(Finish::Commit(match t.get(table_t, &k)? {
                    Some(_) => OpStatus::Ok,
                    None => OpStatus::NotFound,
                }))
            })
        };
        match self.cfg.benchmark {
            DbBench::ReadRandom => (0, read(txns)),
            DbBench::ReadWhileWriting if !self.writer => (0, read(txns)),
            DbBench::FillRandom | DbBench::ReadWhileWriting => {
                let v = value(&mut self.rng, self.cfg.value_size);
                let r = txns.run(store, false, |t| {
                    let table_t = t.open(TABLE)?;
                    t.put(table_t, &k, &v)?;
                    Ok(Finish::Commit(OpStatus::Ok))
                });
                (1, r)
            }
            DbBench::UpdateRandom => {
                let v = value(&mut self.rng, self.cfg.value_size);
                let r = txns.run(store, false, |t| {
                    let table_t = t.open(TABLE)?;
                    let found = t.get(table_t, &k)?.is_some();
                    t.put(table_t, &k, &v)?;
                    Ok(Finish::Commit(if found {
                        OpStatus::Ok
                    } else {
                        OpStatus::NotFound
                    }))
                });
                (2, r)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::RunLimit;
    use crate::store::MemStore;

    fn d(threads: usize, ops: u64) -> DriverConfig {
        DriverConfig {
            threads,
            limit: RunLimit::Ops(ops),
            ..DriverConfig::default()
        }
    }

    #[test]
    fn fill_then_read_update_and_read_while_writing() {
        let store = MemStore::new();
        let fill = run(
            &store,
            &DbBenchConfig::new(DbBench::FillRandom, 1000),
            &d(2, 800),
            None,
        )
        .unwrap();
        assert_eq!(fill.op("WRITE").unwrap().count, 800);
        // With replacement: fewer distinct keys than writes.
        let distinct = store.table_len(TABLE);
        assert!((400..800).contains(&distinct), "{distinct}");
        let line = render_line("fillrandom", &fill);
        assert!(
            line.starts_with("fillrandom   : ") && line.ends_with(" ops/sec;"),
            "{line}"
        );
        assert!(line.contains(" micros/op "));

        fill_sequential(
            &store,
            &DbBenchConfig::new(DbBench::FillRandom, 1000),
            2,
            1,
            None,
        )
        .unwrap();
        assert_eq!(store.table_len(TABLE), 1000);
        let read = run(
            &store,
            &DbBenchConfig::new(DbBench::ReadRandom, 1000),
            &d(2, 500),
            None,
        )
        .unwrap();
        assert_eq!(read.op("READ").unwrap().ok, 500);
        let upd = run(
            &store,
            &DbBenchConfig::new(DbBench::UpdateRandom, 1000),
            &d(1, 300),
            None,
        )
        .unwrap();
        assert_eq!(upd.op("UPDATE").unwrap().ok, 300);
        let rww = run(
            &store,
            &DbBenchConfig::new(DbBench::ReadWhileWriting, 1000),
            // Timed, so the writer (client 0) surely gets scheduled.
            &DriverConfig {
                threads: 3,
                limit: RunLimit::Duration(std::time::Duration::from_millis(200)),
                ..DriverConfig::default()
            },
            None,
        )
        .unwrap();
        assert!(rww.op("READ").unwrap().count > 0 && rww.op("WRITE").unwrap().count > 0);
        assert_eq!(key(7), b"0000000000000007");
        assert!("fillseq".parse::<DbBench>().is_err());
        assert!(DbBenchConfig::new(DbBench::ReadRandom, 0)
            .validate()
            .is_err());
    }
}
