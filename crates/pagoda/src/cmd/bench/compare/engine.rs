//! One engine's round of `bench compare`: its store opened on a fresh directory, every phase
//! run on it in order (the no-sync phases on the store opened again without syncs), each
//! phase's cells with the engine's profile over them.

use super::{config, targets, tpcc_config, Cell, CompareArgs, PhaseSpec, Work, LOAD_DURABLE};
use crate::cmd::bench::peer::{self, EngineChoice};
use crate::error::{CliError, CliResult};
use crate::progress::Progress as Bar;
use pagoda_engine::{CommitMode, Db, DbOptions, TornMode};
use pagoda_peers::PagodaStore;
use pagoda_workload::driver::Progress;
use pagoda_workload::ycsb::{self, YcsbWorkload};
use pagoda_workload::{tpcc, DriverConfig, RunLimit, Store, WorkloadError};
use parking_lot::Mutex;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// Where an engine's run falls in the whole: its round, its place in the round, and the
/// cells done before it (for the progress bar).
#[derive(Debug, Clone, Copy)]
pub(super) struct Round {
    pub(super) repeat: usize,
    pub(super) position: usize,
    pub(super) done: u64,
}

/// Every phase on one engine, on a fresh database in `dir`: its cells and what the JSON says
/// about it. The first error names the engine, the phase and the round.
#[allow(clippy::too_many_arguments)] // the run's parts, passed once per engine
pub(super) fn run_engine(
    a: &CompareArgs,
    engine: EngineChoice,
    dir: &Path,
    buffer: u64,
    phases: &[PhaseSpec],
    at: Round,
    bar: &Mutex<Bar>,
    times: (Duration, Duration),
) -> CliResult<(Vec<Cell>, serde_json::Value)> {
    let mut cells = Vec::new();
    let mut info = json!({});
    let mut store: Option<Open> = None;
    let mut lazy = false;
    for (pi, ph) in phases.iter().enumerate() {
        // The no-sync phases run on the engine opened again without syncs.
        if ph.lazy != lazy {
            if let Some(s) = store.take() {
                info["stats"] = s.as_store().stats_json();
                s.close()?;
            }
            lazy = ph.lazy;
        }
        let run = PhaseRun {
            a,
            engine,
            ph,
            at,
            times,
            name: format!("{} {} (round {})", engine.name(), ph.label, at.repeat + 1),
            started: Instant::now(),
        };
        let s = match store.take() {
            Some(s) => s,
            None => open(engine, dir, buffer, a, lazy).map_err(|e| run.fail(e))?,
        };
        let key = if lazy { "describe_no_sync" } else { "describe" };
        info[key] = json!(s.as_store().describe());
        cells.extend(run.cells(s.as_store(), bar, at.done + pi as u64)?);
        store = Some(s);
    }
    if let Some(s) = store {
        info[if lazy { "stats_no_sync" } else { "stats" }] = s.as_store().stats_json();
        s.close()?;
    }
    Ok((cells, info))
}

/// One phase of an engine's round.
struct PhaseRun<'a> {
    a: &'a CompareArgs,
    engine: EngineChoice,
    ph: &'a PhaseSpec,
    at: Round,
    /// Measured window and warm-up of the timed cells.
    times: (Duration, Duration),
    /// `ENGINE PHASE (round N)`, for the progress bar and errors.
    name: String,
    /// Before the store opened (the load's times count the open).
    started: Instant,
}

impl PhaseRun<'_> {
    /// An error of this phase, naming it.
    fn fail(&self, e: impl std::fmt::Display) -> CliError {
        CliError::Other(format!("{}: {e}", self.name))
    }

    /// A cell of this phase with `c`'s figures.
    fn cell(&self, phase: &str, c: Cell, profile: Option<targets::CellProfile>) -> Cell {
        Cell {
            repeat: self.at.repeat,
            position: self.at.position,
            engine: self.engine.name().to_string(),
            phase: phase.to_string(),
            profile,
            ..c
        }
    }

    /// A cell with only a count and a rate.
    fn blank(&self, ops: u64, ops_per_s: f64) -> Cell {
        Cell {
            repeat: 0,
            position: 0,
            engine: String::new(),
            phase: String::new(),
            threads: self.ph.threads,
            ops,
            ops_per_s,
            p50_us: None,
            p99_us: None,
            conflicts: 0,
            errors: 0,
            first_error: None,
            profile: None,
        }
    }

    /// Runs the phase on `s` (`done`: cells finished before it, for the bar): its cells,
    /// each with the engine's profile over it.
    fn cells(&self, s: &dyn Store, bar: &Mutex<Bar>, done: u64) -> CliResult<Vec<Cell>> {
        let (a, ph, name) = (self.a, self.ph, &self.name);
        let before = (self.engine.name() == "pagoda").then(|| s.stats_json());
        let cpu = pagoda_engine::stats::CpuClock::start();
        bar.lock().set_with_message(done, name.clone());
        let progress = |p: Progress| {
            let rate = p.done as f64 / p.elapsed.as_secs_f64().max(1e-9);
            bar.lock()
                .set_with_message(done, format!("{name}: {rate:.0} ops/s"));
        };
        // The profile is taken when the cell ends (the load's two cells share it).
        let profile = || {
            let used = cpu.usage().utilisation;
            Some(match &before {
                Some(b) => targets::pagoda_profile(b, &s.stats_json(), used),
                None => targets::CellProfile {
                    cpu: used,
                    ..Default::default()
                },
            })
        };
        let mut cells = Vec::new();
        match ph.work {
            Work::Load => {
                let (rows, to_commit, to_durable) =
                    bulk_load(s, a, self.started).map_err(|e| self.fail(e))?;
                let rate = |t: Duration| rows as f64 / t.as_secs_f64().max(1e-9);
                let p = profile();
                cells.push(self.cell(&ph.label, self.blank(rows, rate(to_commit)), p.clone()));
                cells.push(self.cell(LOAD_DURABLE, self.blank(rows, rate(to_durable)), p));
            }
            Work::Ycsb(w) => {
                if w == YcsbWorkload::C {
                    warm(s, a).map_err(|e| self.fail(format!("warming the cache: {e}")))?;
                }
                let c = run_ycsb(s, w, ph.threads, a, self.times, &progress)
                    .map_err(|e| self.fail(e))?;
                cells.push(self.cell(&ph.label, c, profile()));
            }
            Work::Tpcc => {
                let cfg = tpcc_config(a);
                tpcc::load(s, &cfg, a.read_threads, a.seed, Some(&progress))
                    .map_err(|e| self.fail(e))?;
                let driver = DriverConfig {
                    threads: ph.threads,
                    limit: RunLimit::Duration(self.times.0),
                    warmup: self.times.1,
                    seed: a.seed,
                    ..DriverConfig::default()
                };
                let r = tpcc::run(s, &cfg, &driver, Some(&progress)).map_err(|e| self.fail(e))?;
                let tpmc = r
                    .tpmc
                    .ok_or_else(|| self.fail("the TPC-C report has no tpmC"))?;
                let c = Cell {
                    p50_us: Some(r.latency_us.p50),
                    p99_us: Some(r.latency_us.p99),
                    conflicts: r.conflicts,
                    errors: r.errors,
                    first_error: r.first_error.clone(),
                    ..self.blank(r.ops, tpmc)
                };
                cells.push(self.cell(&ph.label, c, profile()));
            }
        }
        Ok(cells)
    }
}

/// Loads the records through the store's bulk path; returns the rows and the times from
/// `started` (before the open) to the last commit and to data durable on disk.
fn bulk_load(
    store: &dyn Store,
    a: &CompareArgs,
    started: Instant,
) -> Result<(u64, Duration, Duration), pagoda_workload::StoreError> {
    let cfg = config(YcsbWorkload::UpdateOnly, a.records);
    store.create_table(&cfg.table)?;
    let mut rng = a.seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut rows = (0..a.records).map(|k| (cfg.key(k), value(&mut rng)));
    let n = store.bulk_load(&cfg.table, &mut rows)?;
    let to_commit = started.elapsed();
    store.make_durable()?;
    Ok((n, to_commit, started.elapsed()))
}

/// Reads the whole table once, in key order, before the cached-read cell: that cell measures
/// reads from each engine's cache, so each gets the warm cache its users would give it. Without
/// this, RocksDB started the cell from disk: its bulk load's `SstFileWriter` drops the files it
/// writes from the OS page cache, and its block cache had seen only the updated keys.
fn warm(store: &dyn Store, a: &CompareArgs) -> Result<u64, pagoda_workload::StoreError> {
    const CHUNK: usize = 10_000;
    let table = config(YcsbWorkload::C, a.records).table;
    let mut txn = store.begin_read()?;
    let t = txn.open(&table)?;
    let (mut start, mut seen) = (Vec::new(), 0u64);
    loop {
        let rows = txn.scan(t, &start, None, CHUNK, false)?;
        seen += rows.len() as u64;
        match rows.last() {
            Some((k, _)) if rows.len() == CHUNK => {
                start = k.clone();
                start.push(0);
            }
            _ => break,
        }
    }
    txn.commit()?;
    Ok(seen)
}

/// A 1000-byte value of pseudo-random bytes (splitmix64), as incompressible as YCSB's.
fn value(state: &mut u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(1000);
    while v.len() < 1000 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        v.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    v.truncate(1000);
    v
}

/// pagoda or a peer, open on its directory.
enum Open {
    Pagoda(PagodaStore),
    Peer(Box<dyn Store>),
}

impl Open {
    fn as_store(&self) -> &dyn Store {
        match self {
            Open::Pagoda(s) => s,
            Open::Peer(s) => &**s,
        }
    }

    fn close(self) -> CliResult<()> {
        match self {
            Open::Pagoda(s) => Ok(s.close()?),
            Open::Peer(s) => {
                drop(s);
                Ok(())
            }
        }
    }
}

fn open(
    engine: EngineChoice,
    dir: &Path,
    buffer: u64,
    a: &CompareArgs,
    lazy: bool,
) -> CliResult<Open> {
    Ok(match engine {
        // pagoda as `bench` runs it by default: files in the directory, 16 KiB pages,
        // double-write protection, synchronous (or lazy) commits, the background thread.
        EngineChoice::Pagoda => {
            let commit = if lazy {
                CommitMode::Lazy
            } else {
                CommitMode::Sync
            };
            let opts = DbOptions::in_dir(dir)
                .page_size(16 << 10)
                .buffer_bytes(usize::try_from(buffer).unwrap_or(usize::MAX))
                .torn(TornMode::Doublewrite)
                .commit(commit)
                .background(true);
            let describe = format!(
                "pagoda(dir={}, buffer={buffer}, page=16KiB, torn=doublewrite, commit={commit})",
                dir.display()
            );
            Open::Pagoda(PagodaStore::new(Db::open(opts)?, describe))
        }
        EngineChoice::Peer(kind) => {
            let mut opts = peer::options(buffer, a.lmdb_map_size.bytes());
            if lazy {
                opts.durability = pagoda_peers::PeerDurability::Lazy;
            }
            Open::Peer(
                pagoda_peers::open(kind, dir, &opts).map_err(|e| CliError::Other(e.to_string()))?,
            )
        }
    })
}

fn run_ycsb(
    store: &dyn Store,
    w: YcsbWorkload,
    threads: usize,
    a: &CompareArgs,
    (duration, warmup): (Duration, Duration),
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Cell, WorkloadError> {
    let driver = DriverConfig {
        threads,
        limit: RunLimit::Duration(duration),
        warmup,
        seed: a.seed,
        ..DriverConfig::default()
    };
    let r = ycsb::run(store, &config(w, a.records), &driver, Some(progress))?;
    Ok(Cell {
        repeat: 0,
        position: 0,
        engine: String::new(),
        phase: String::new(),
        threads,
        ops: r.ops,
        ops_per_s: r.throughput_ops_s,
        p50_us: Some(r.latency_us.p50),
        p99_us: Some(r.latency_us.p99),
        conflicts: r.conflicts,
        errors: r.errors,
        first_error: r.first_error.clone(),
        profile: None,
    })
}
