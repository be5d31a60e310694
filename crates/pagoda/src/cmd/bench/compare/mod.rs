//! `pagoda bench compare`: pagoda against its peers on the same YCSB cells and TPC-C, each
//! engine in this process, one after another, through the same driver.
//!
//! Each of `--repeats` rounds runs every engine once, in an order rotated by one engine per
//! round (so no engine always runs first, on a cold machine, or last, after the others warmed
//! or aged the disk). For each engine, on a fresh database in `OUT/db-ENGINE` (removed
//! afterwards unless `--keep`): load N records (16-byte keys `user` + 12 digits, one 1000-byte
//! value) through the engine's own bulk path, timed to the last commit and to data durable on
//! disk; durable single-update transactions (YCSB update-only, uniform) at each `--threads`
//! count; point reads (YCSB C, uniform) and YCSB A at `--read-threads`; TPC-C; no-sync updates.
//! The buffer defaults to twice the data, and every engine reads the whole table once before
//! the point-read cell, so the reads are in cache. Out: a table of medians
//! with min–max on stdout, `compare.json`, `compare.csv`, `compare.svg` in `--out`, and a
//! Markdown result with `--publish`. A failed cell stops the run with one line and writes no
//! result file.

mod summary;
mod targets;

use super::peer::{self, EngineChoice};
use crate::error::{CliError, CliResult};
use crate::progress::Progress as Bar;
use crate::units::{Size, Span};
use clap::Args;
use pagoda::store::PagodaStore;
use pagoda_engine::{CommitMode, Db, DbOptions, TornMode};
use pagoda_workload::driver::Progress;
use pagoda_workload::ycsb::{self, RequestDistribution, YcsbConfig, YcsbWorkload};
use pagoda_workload::{tpcc, DriverConfig, RunLimit, Store, WorkloadError};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Flags of `bench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Engines, comma-separated: pagoda, sqlite, sqlite-rowid, lmdb, redb, rocksdb (rocksdb
    /// needs the `rocksdb` cargo feature).
    #[arg(long, default_value = "pagoda,sqlite,lmdb,redb", value_delimiter = ',',
          value_parser = peer::parse_engine)]
    engines: Vec<EngineChoice>,
    /// Client threads of the update cells, comma-separated.
    #[arg(long, default_value = "1,4,16", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Client threads of the read (YCSB C) and YCSB A cells (also the loader's threads).
    #[arg(long, default_value_t = 2)]
    read_threads: usize,
    /// Records loaded (16-byte keys, 1000-byte values). The reference: 1000000.
    #[arg(long, default_value_t = 20_000)]
    records: u64,
    /// Measured time of each cell. The reference: 20s.
    #[arg(long, default_value = "3s")]
    duration: Span,
    /// Time each cell runs before it is measured.
    #[arg(long, default_value = "500ms")]
    warmup: Span,
    /// Cache of every engine (pagoda's buffer pool, SQLite's page cache, redb's and RocksDB's
    /// caches; LMDB uses the OS page cache). Default: twice the loaded data, at least 64 MiB.
    #[arg(long)]
    buffer: Option<Size>,
    /// LMDB's map size (the most its database may grow to; a sparse file).
    #[arg(long, default_value = "64GiB")]
    lmdb_map_size: Size,
    /// Output directory (the databases go to OUT/db-ENGINE while they run).
    #[arg(long, default_value = "compare-out")]
    out: PathBuf,
    /// Keep the databases in OUT/db-ENGINE.
    #[arg(long)]
    keep: bool,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Rounds of every engine; the order rotates by one engine each round, and each figure
    /// is the median over the rounds with its min–max.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// TPC-C warehouses of the TPC-C cell (0: no TPC-C cell).
    #[arg(long, default_value_t = 1)]
    tpcc_warehouses: u32,
    /// Client threads of the TPC-C cell.
    #[arg(long, default_value_t = 4)]
    tpcc_threads: usize,
    /// TPC-C items instead of 100,000 (tests only: a smaller database is not TPC-C).
    #[arg(long, hide = true)]
    tpcc_items: Option<u32>,
    /// TPC-C customers per district instead of 3,000 (tests only).
    #[arg(long, hide = true)]
    tpcc_customers: Option<u32>,
    /// Also write the result as Markdown to FILE (with the command, machine, UTC date and
    /// commit), its plot beside it as FILE-STEM.svg: how `docs/results/compare-*.md` is made.
    #[arg(long, value_name = "FILE")]
    publish: Option<PathBuf>,
    /// Also replace the README's `compare targets` block (between its `<!-- compare targets:
    /// begin -->` and `<!-- compare targets: end -->` lines) with this run's targets table,
    /// linking to the --publish file.
    #[arg(long, value_name = "README", requires = "publish")]
    readme: Option<PathBuf>,
}

/// One measured cell.
#[derive(Debug, Clone, Serialize)]
struct Cell {
    /// The round (0-based) and the engine's place in that round's order.
    repeat: usize,
    position: usize,
    engine: String,
    phase: String,
    threads: usize,
    ops: u64,
    ops_per_s: f64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    conflicts: u64,
    errors: u64,
    /// The first failed operation's error, if any (why `errors` is not 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    first_error: Option<String>,
    /// CPU over the cell (warm-up included), and for pagoda where its transactions spent
    /// their time.
    profile: Option<targets::CellProfile>,
}

/// What a phase runs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Work {
    /// The bulk load; its cell and the `load durable` one.
    Load,
    Ycsb(YcsbWorkload),
    /// TPC-C (loaded first); the cell's figure is tpmC.
    Tpcc,
}

/// One column of the matrix.
struct PhaseSpec {
    label: String,
    work: Work,
    threads: usize,
    /// Run with each engine's no-sync commit (pagoda `--commit lazy`, SQLite
    /// `synchronous=NORMAL`, LMDB `NO_SYNC`, redb `Durability::None`, RocksDB `sync=false`).
    lazy: bool,
}

/// The phases in order; the no-sync phase comes last (the engine is reopened for it).
fn phases(a: &CompareArgs) -> Vec<PhaseSpec> {
    let spec = |label: String, work, threads, lazy| PhaseSpec {
        label,
        work,
        threads,
        lazy,
    };
    let r = a.read_threads;
    let mut p = vec![spec("load".to_string(), Work::Load, 1, false)];
    for &t in &a.threads {
        p.push(spec(
            format!("update {t}t"),
            Work::Ycsb(YcsbWorkload::UpdateOnly),
            t,
            false,
        ));
    }
    p.push(spec(
        format!("read {r}t"),
        Work::Ycsb(YcsbWorkload::C),
        r,
        false,
    ));
    p.push(spec(
        format!("ycsb-a {r}t"),
        Work::Ycsb(YcsbWorkload::A),
        r,
        false,
    ));
    if a.tpcc_warehouses > 0 {
        let t = a.tpcc_threads;
        p.push(spec(format!("tpcc {t}t tpmC"), Work::Tpcc, t, false));
    }
    p.push(spec(
        "no-sync update 1t".to_string(),
        Work::Ycsb(YcsbWorkload::UpdateOnly),
        1,
        true,
    ));
    p
}

/// The labels of the table's rows: the phases, with `load durable` after `load`.
fn labels(phases: &[PhaseSpec]) -> Vec<String> {
    let mut l = Vec::new();
    for p in phases {
        l.push(p.label.clone());
        if p.work == Work::Load {
            l.push(LOAD_DURABLE.to_string());
        }
    }
    l
}

/// The row of the load timed to data durable on disk.
const LOAD_DURABLE: &str = "load durable";

/// The TPC-C configuration of the TPC-C cell.
fn tpcc_config(a: &CompareArgs) -> tpcc::TpccConfig {
    let mut cfg = tpcc::TpccConfig::new(a.tpcc_warehouses.max(1));
    if let Some(n) = a.tpcc_items {
        cfg.scale.items = n;
    }
    if let Some(n) = a.tpcc_customers {
        cfg.scale.customers_per_district = n;
    }
    cfg
}

/// The record shape every cell shares: 16-byte keys in key order, one 1000-byte value.
fn config(workload: YcsbWorkload, records: u64) -> YcsbConfig {
    let mut c = YcsbConfig::new(workload, records);
    c.field_count = 1;
    c.field_length = 1000;
    c.zero_padding = 12;
    c.insert_order = ycsb::InsertOrder::Ordered;
    if workload != YcsbWorkload::A {
        c.distribution = RequestDistribution::Uniform;
    }
    c
}

/// Runs `bench compare`.
pub(super) fn run(a: &CompareArgs) -> CliResult<()> {
    if a.engines.is_empty() || a.threads.is_empty() || a.threads.contains(&0) {
        return Err(CliError::Usage(
            "--engines and --threads need at least one value each, and no 0 threads".to_string(),
        ));
    }
    if let Some((i, e)) = a
        .engines
        .iter()
        .enumerate()
        .find(|(i, e)| a.engines[..*i].contains(e))
    {
        return Err(CliError::Usage(format!(
            "--engines names {} twice (position {}): give each engine once",
            e.name(),
            i + 1
        )));
    }
    if let Some(readme) = &a.readme {
        crate::readme::check_block(readme, summary::README_BLOCK)?;
    }
    if a.repeats == 0 || a.read_threads == 0 || a.tpcc_threads == 0 {
        return Err(CliError::Usage(
            "--repeats, --read-threads and --tpcc-threads need at least 1".to_string(),
        ));
    }
    for e in &a.engines {
        if let EngineChoice::Peer(k) = e {
            if !k.is_built() {
                return Err(CliError::Other(
                    pagoda_peers::PeerError::NotBuilt.to_string(),
                ));
            }
        }
    }
    let duration = a.duration.duration();
    let warmup = a.warmup.duration();
    config(YcsbWorkload::UpdateOnly, a.records).validate()?;
    if a.tpcc_warehouses > 0 {
        tpcc_config(a).validate()?;
    }
    let data = a.records * 1016;
    let buffer = match &a.buffer {
        Some(b) => b.bytes(),
        None => (2 * data).max(64 << 20),
    };
    // Checked before any work: an unwritable --publish should not waste the run.
    if let Some(p) = &a.publish {
        if p.extension().is_none_or(|e| e != "md") {
            return Err(CliError::Usage(format!(
                "--publish {} should name a Markdown file (FILE.md)",
                p.display()
            )));
        }
    }
    std::fs::create_dir_all(&a.out).map_err(|e| io(&a.out, e))?;
    let _lock = lock_out(&a.out)?;
    let machine = crate::provenance::machine();
    let phases = phases(a);
    let probe = duration.min(Duration::from_secs(3));
    let ceiling_before = super::ceiling::measure(&a.out, probe)?;
    let n = a.engines.len();
    let total = (a.repeats * n * phases.len()) as u64;
    let bar = Mutex::new(Bar::new("compare", "cells", total));
    let mut cells = Vec::new();
    let mut engines = serde_json::Map::new();
    for repeat in 0..a.repeats {
        for position in 0..n {
            let engine = a.engines[(position + repeat) % n];
            let at = Round {
                repeat,
                position,
                done: ((repeat * n + position) * phases.len()) as u64,
            };
            let dir = peer::fresh_dir(&a.out, engine.name())?;
            let r = run_engine(
                a,
                engine,
                &dir,
                buffer,
                &phases,
                at,
                &bar,
                (duration, warmup),
            );
            let remove = !a.keep || r.is_err();
            if remove && dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(|e| io(&dir, e))?;
            }
            let (mut c, info) = r?;
            cells.append(&mut c);
            engines.insert(engine.name().to_string(), info);
        }
    }
    bar.into_inner().finish();
    let ceiling = [ceiling_before, super::ceiling::measure(&a.out, probe)?];
    let labels = labels(&phases);
    let names: Vec<&str> = a.engines.iter().map(|e| e.name()).collect();
    let table = summary::render(&cells, &labels, &names);
    print!("{table}");
    println!(
        "device ceiling of a 1-thread durable commit (4 KiB write + fdatasync, file in {}): \
         {:.0}/s before the engines, {:.0}/s after",
        a.out.display(),
        ceiling[0],
        ceiling[1]
    );
    let written = summary::write(
        a,
        &cells,
        &summary::Outputs {
            labels: &labels,
            names: &names,
            buffer,
            engines: json!(engines),
            ceiling,
            table: &table,
            machine,
        },
    )?;
    let paths: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    eprintln!("wrote {}", paths.join(", "));
    Ok(())
}

/// Where an engine's run falls in the whole: its round, its place in the round, and the
/// cells done before it (for the progress bar).
#[derive(Debug, Clone, Copy)]
struct Round {
    repeat: usize,
    position: usize,
    done: u64,
}

/// Every phase on one engine, on a fresh database in `dir`: its cells and what the JSON says
/// about it. The first error names the engine, the phase and the round.
#[allow(clippy::too_many_arguments)] // the run's parts, passed once per engine
fn run_engine(
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
        let name = format!("{} {} (round {})", engine.name(), ph.label, at.repeat + 1);
        let fail = |e: String| CliError::Other(format!("{name}: {e}"));
        if ph.lazy != lazy {
            if let Some(s) = store.take() {
                info["stats"] = s.as_store().stats_json();
                s.close()?;
            }
            lazy = ph.lazy;
        }
        let started = Instant::now();
        let s = match store.take() {
            Some(s) => s,
            None => open(engine, dir, buffer, a, lazy).map_err(|e| fail(e.to_string()))?,
        };
        let key = if lazy { "describe_no_sync" } else { "describe" };
        info[key] = json!(s.as_store().describe());
        let is_pagoda = engine.name() == "pagoda";
        let before = is_pagoda.then(|| s.as_store().stats_json());
        let cpu = pagoda_engine::stats::CpuClock::start();
        let done = at.done + pi as u64;
        bar.lock().set_with_message(done, name.clone());
        let progress = |p: Progress| {
            let rate = p.done as f64 / p.elapsed.as_secs_f64().max(1e-9);
            bar.lock()
                .set_with_message(done, format!("{name}: {rate:.0} ops/s"));
        };
        // The profile is taken when the cell ends (the load's two cells share it).
        let profile = |store: &dyn Store| {
            let used = cpu.usage().utilisation;
            Some(match &before {
                Some(b) => targets::pagoda_profile(b, &store.stats_json(), used),
                None => targets::CellProfile {
                    cpu: used,
                    ..Default::default()
                },
            })
        };
        let cell = |phase: &str, c: Cell, profile: Option<targets::CellProfile>| Cell {
            repeat: at.repeat,
            position: at.position,
            engine: engine.name().to_string(),
            phase: phase.to_string(),
            profile,
            ..c
        };
        let blank = |ops, ops_per_s| Cell {
            repeat: 0,
            position: 0,
            engine: String::new(),
            phase: String::new(),
            threads: ph.threads,
            ops,
            ops_per_s,
            p50_us: None,
            p99_us: None,
            conflicts: 0,
            errors: 0,
            first_error: None,
            profile: None,
        };
        match ph.work {
            Work::Load => {
                let (rows, to_commit, to_durable) =
                    bulk_load(s.as_store(), a, started).map_err(|e| fail(e.to_string()))?;
                let rate = |t: Duration| rows as f64 / t.as_secs_f64().max(1e-9);
                let p = profile(s.as_store());
                cells.push(cell(&ph.label, blank(rows, rate(to_commit)), p.clone()));
                cells.push(cell(LOAD_DURABLE, blank(rows, rate(to_durable)), p));
            }
            Work::Ycsb(w) => {
                if w == YcsbWorkload::C {
                    warm(s.as_store(), a).map_err(|e| fail(format!("warming the cache: {e}")))?;
                }
                let c = run_ycsb(s.as_store(), w, ph.threads, a, times, &progress)
                    .map_err(|e| fail(e.to_string()))?;
                cells.push(cell(&ph.label, c, profile(s.as_store())));
            }
            Work::Tpcc => {
                let cfg = tpcc_config(a);
                tpcc::load(s.as_store(), &cfg, a.read_threads, a.seed, Some(&progress))
                    .map_err(|e| fail(e.to_string()))?;
                let driver = DriverConfig {
                    threads: ph.threads,
                    limit: RunLimit::Duration(times.0),
                    warmup: times.1,
                    seed: a.seed,
                    ..DriverConfig::default()
                };
                let r = tpcc::run(s.as_store(), &cfg, &driver, Some(&progress))
                    .map_err(|e| fail(e.to_string()))?;
                let tpmc = r
                    .tpmc
                    .ok_or_else(|| fail("the TPC-C report has no tpmC".to_string()))?;
                cells.push(cell(
                    &ph.label,
                    Cell {
                        p50_us: Some(r.latency_us.p50),
                        p99_us: Some(r.latency_us.p99),
                        conflicts: r.conflicts,
                        errors: r.errors,
                        first_error: r.first_error.clone(),
                        ..blank(r.ops, tpmc)
                    },
                    profile(s.as_store()),
                ));
            }
        }
        store = Some(s);
    }
    if let Some(s) = store {
        info[if lazy { "stats_no_sync" } else { "stats" }] = s.as_store().stats_json();
        s.close()?;
    }
    Ok((cells, info))
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
    let (mut start, mut seen) = (Vec::new(), 0u64);
    loop {
        let rows = txn.scan(&table, &start, None, CHUNK, false)?;
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

fn io(path: &Path, e: std::io::Error) -> CliError {
    CliError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Holds `OUT/.compare.lock` for the run: a second `bench compare` on the same `--out` would
/// otherwise delete the databases this one is running on (each engine starts from a fresh
/// `OUT/db-ENGINE`). The lock goes with the process, so a killed run leaves none behind.
fn lock_out(out: &Path) -> CliResult<std::fs::File> {
    use std::os::fd::AsRawFd;
    let path = out.join(".compare.lock");
    let f = std::fs::File::create(&path).map_err(|e| io(&path, e))?;
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock {
            return Err(CliError::Usage(format!(
                "another `bench compare` is running with --out {}: wait for it or give another --out",
                out.display()
            )));
        }
        return Err(io(&path, e));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn a_second_run_on_the_same_out_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let first = super::lock_out(d.path()).unwrap();
        let e = super::lock_out(d.path()).unwrap_err().to_string();
        assert!(e.contains("another `bench compare` is running"), "{e}");
        drop(first);
        super::lock_out(d.path()).unwrap();
    }

    #[test]
    fn the_device_ceiling_is_measured_and_cleaned_up() {
        let d = tempfile::tempdir().unwrap();
        let t = std::time::Instant::now();
        let rate =
            super::super::ceiling::measure(d.path(), std::time::Duration::from_millis(1)).unwrap();
        // At least 50 writes+flushes were timed, so the rate is bounded by their time.
        assert!(
            rate > 0.0 && rate >= 50.0 / t.elapsed().as_secs_f64(),
            "{rate}"
        );
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
