//! `pagoda bench compare`: pagoda against its peers on the same YCSB cells, each engine in
//! this process, one after another, through the same driver.
//!
//! For each engine, on a fresh database in `OUT/db-ENGINE` (removed afterwards unless `--keep`):
//! load N records (16-byte keys `user` + 12 digits, one 1000-byte value), then durable
//! single-update transactions (YCSB update-only, uniform) at each `--threads` count, point
//! reads (YCSB C, uniform) and YCSB A at `--read-threads`. The buffer defaults to twice the
//! data, so the reads are in cache. Out: a table on stdout, `compare.json`, `compare.csv`,
//! `compare.svg` in `--out`.

use super::peer::{self, EngineChoice};
use crate::cmd::reproduce::plot::{bar_chart, BarChart};
use crate::error::{CliError, CliResult};
use crate::progress::Progress as Bar;
use crate::report::{write_json, Table};
use clap::Args;
use pagoda::store::PagodaStore;
use pagoda_device::units::{parse_duration, parse_size};
use pagoda_engine::{CommitMode, Db, DbOptions, TornMode};
use pagoda_workload::driver::Progress;
use pagoda_workload::ycsb::{self, RequestDistribution, YcsbConfig, YcsbWorkload};
use pagoda_workload::{DriverConfig, RunLimit, Store, WorkloadError};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::json;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Flags of `bench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Engines, comma-separated: pagoda, sqlite, lmdb, redb, rocksdb (rocksdb needs the
    /// `rocksdb` cargo feature).
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
    duration: String,
    /// Time each cell runs before it is measured.
    #[arg(long, default_value = "500ms")]
    warmup: String,
    /// Cache of every engine (pagoda's buffer pool, SQLite's page cache, redb's and RocksDB's
    /// caches; LMDB uses the OS page cache). Default: twice the loaded data, at least 64 MiB.
    #[arg(long)]
    buffer: Option<String>,
    /// LMDB's map size (the most its database may grow to; a sparse file).
    #[arg(long, default_value = "64GiB")]
    lmdb_map_size: String,
    /// Output directory (the databases go to OUT/db-ENGINE while they run).
    #[arg(long, default_value = "compare-out")]
    out: PathBuf,
    /// Keep the databases in OUT/db-ENGINE.
    #[arg(long)]
    keep: bool,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// One measured cell.
#[derive(Debug, Clone, Serialize)]
struct Cell {
    engine: String,
    phase: String,
    threads: usize,
    ops: u64,
    ops_per_s: f64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    conflicts: u64,
    errors: u64,
}

/// One column of the matrix.
struct PhaseSpec {
    label: String,
    /// `None`: the load.
    workload: Option<YcsbWorkload>,
    threads: usize,
    /// Run with each engine's no-sync commit (pagoda `--commit lazy`, SQLite
    /// `synchronous=NORMAL`, LMDB `NO_SYNC`, redb `Durability::None`, RocksDB `sync=false`).
    lazy: bool,
}

/// The phases in order; the no-sync phase comes last (the engine is reopened for it).
fn phases(a: &CompareArgs) -> Vec<PhaseSpec> {
    let spec = |label: String, workload, threads, lazy| PhaseSpec {
        label,
        workload,
        threads,
        lazy,
    };
    let r = a.read_threads;
    let mut p = vec![spec("load".to_string(), None, r, false)];
    for &t in &a.threads {
        p.push(spec(
            format!("update {t}t"),
            Some(YcsbWorkload::UpdateOnly),
            t,
            false,
        ));
    }
    p.push(spec(format!("read {r}t"), Some(YcsbWorkload::C), r, false));
    p.push(spec(
        format!("ycsb-a {r}t"),
        Some(YcsbWorkload::A),
        r,
        false,
    ));
    p.push(spec(
        "no-sync update 1t".to_string(),
        Some(YcsbWorkload::UpdateOnly),
        1,
        true,
    ));
    p
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
    for e in &a.engines {
        if let EngineChoice::Peer(k) = e {
            if !k.is_built() {
                return Err(CliError::Other(
                    pagoda_peers::PeerError::NotBuilt.to_string(),
                ));
            }
        }
    }
    let duration = parse_duration(&a.duration)?;
    let warmup = parse_duration(&a.warmup)?;
    config(YcsbWorkload::UpdateOnly, a.records).validate()?;
    let data = a.records * 1016;
    let buffer = match &a.buffer {
        Some(b) => parse_size(b)?,
        None => (2 * data).max(64 << 20),
    };
    std::fs::create_dir_all(&a.out).map_err(|e| io(&a.out, e))?;
    let _lock = lock_out(&a.out)?;
    let phases = phases(a);
    let probe = duration.min(Duration::from_secs(3));
    let ceiling_before = super::ceiling::measure(&a.out, probe)?;
    let total = (a.engines.len() * phases.len()) as u64;
    let bar = Mutex::new(Bar::new("compare", "cells", total));
    let mut cells = Vec::new();
    let mut engines = serde_json::Map::new();
    for (ei, &engine) in a.engines.iter().enumerate() {
        let dir = peer::fresh_dir(&a.out, engine.name())?;
        let mut store = open(engine, &dir, buffer, a, false)?;
        let mut lazy = false;
        engines.insert(
            engine.name().to_string(),
            json!({ "describe": store.as_store().describe() }),
        );
        for (pi, ph) in phases.iter().enumerate() {
            let (label, workload, threads) = (&ph.label, &ph.workload, &ph.threads);
            if ph.lazy != lazy {
                if let Some(v) = engines.get_mut(engine.name()) {
                    v["stats"] = store.as_store().stats_json();
                }
                store.close()?;
                store = open(engine, &dir, buffer, a, ph.lazy)?;
                lazy = ph.lazy;
                if let Some(v) = engines.get_mut(engine.name()) {
                    v["describe_no_sync"] = json!(store.as_store().describe());
                }
            }
            let done = (ei * phases.len() + pi) as u64;
            let name = format!("{} {label}", engine.name());
            bar.lock().set_with_message(done, name.clone());
            let progress = |p: Progress| {
                let rate = p.done as f64 / p.elapsed.as_secs_f64().max(1e-9);
                bar.lock()
                    .set_with_message(done, format!("{name}: {rate:.0} ops/s"));
            };
            let cell = run_cell(
                store.as_store(),
                *workload,
                *threads,
                a,
                (duration, warmup),
                &progress,
            )
            .map_err(|e| CliError::Other(format!("{name}: {e}")))?;
            cells.push(Cell {
                engine: engine.name().to_string(),
                phase: label.clone(),
                ..cell
            });
        }
        if let Some(v) = engines.get_mut(engine.name()) {
            v[if lazy { "stats_no_sync" } else { "stats" }] = store.as_store().stats_json();
        }
        store.close()?;
        if !a.keep {
            std::fs::remove_dir_all(&dir).map_err(|e| io(&dir, e))?;
        }
    }
    bar.into_inner().finish();
    let ceiling = [ceiling_before, super::ceiling::measure(&a.out, probe)?];
    let labels: Vec<String> = phases.iter().map(|p| p.label.clone()).collect();
    let names: Vec<&str> = a.engines.iter().map(|e| e.name()).collect();
    let table = render(&cells, &labels, &names);
    print!("{table}");
    println!(
        "device ceiling of a 1-thread durable commit (4 KiB write + fdatasync, file in {}): \
         {:.0}/s before the engines, {:.0}/s after",
        a.out.display(),
        ceiling[0],
        ceiling[1]
    );
    write_outputs(a, &cells, &labels, &names, buffer, json!(engines), ceiling)
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
            let mut opts = peer::options(buffer, &a.lmdb_map_size)?;
            if lazy {
                opts.durability = pagoda_peers::PeerDurability::Lazy;
            }
            Open::Peer(
                pagoda_peers::open(kind, dir, &opts).map_err(|e| CliError::Other(e.to_string()))?,
            )
        }
    })
}

fn run_cell(
    store: &dyn Store,
    workload: Option<YcsbWorkload>,
    threads: usize,
    a: &CompareArgs,
    (duration, warmup): (Duration, Duration),
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Cell, WorkloadError> {
    let blank = |ops, ops_per_s| Cell {
        engine: String::new(),
        phase: String::new(),
        threads,
        ops,
        ops_per_s,
        p50_us: None,
        p99_us: None,
        conflicts: 0,
        errors: 0,
    };
    let Some(w) = workload else {
        let cfg = config(YcsbWorkload::UpdateOnly, a.records);
        let l = ycsb::load(store, &cfg, threads, a.seed, Some(progress))?;
        return Ok(Cell {
            conflicts: l.conflicts,
            ..blank(l.rows, l.rows_per_s)
        });
    };
    let driver = DriverConfig {
        threads,
        limit: RunLimit::Duration(duration),
        warmup,
        seed: a.seed,
        ..DriverConfig::default()
    };
    let r = ycsb::run(store, &config(w, a.records), &driver, Some(progress))?;
    Ok(Cell {
        p50_us: Some(r.latency_us.p50),
        p99_us: Some(r.latency_us.p99),
        conflicts: r.conflicts,
        errors: r.errors,
        ..blank(r.ops, r.throughput_ops_s)
    })
}

/// pagoda's ops/s over the best peer's in one phase (None without pagoda or a peer).
fn ratio(cells: &[Cell], phase: &str) -> Option<f64> {
    let of = |c: &&Cell| c.phase == phase;
    let pagoda = cells.iter().filter(of).find(|c| c.engine == "pagoda")?;
    let best = cells
        .iter()
        .filter(of)
        .filter(|c| c.engine != "pagoda")
        .map(|c| c.ops_per_s)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))?;
    (best > 0.0).then(|| pagoda.ops_per_s / best)
}

fn render(cells: &[Cell], labels: &[String], names: &[&str]) -> String {
    let mut header = vec!["ops/s".to_string()];
    header.extend(names.iter().map(ToString::to_string));
    header.push("pagoda/best peer".to_string());
    let mut t = Table::new(&header);
    for l in labels {
        let mut row = vec![l.clone()];
        for n in names {
            let c = cells.iter().find(|c| &c.phase == l && c.engine == *n);
            row.push(c.map_or_else(String::new, |c| format!("{:.0}", c.ops_per_s)));
        }
        row.push(ratio(cells, l).map_or_else(|| "-".to_string(), |r| format!("{r:.2}x")));
        t.row(&row);
    }
    t.render()
}

fn write_outputs(
    a: &CompareArgs,
    cells: &[Cell],
    labels: &[String],
    names: &[&str],
    buffer: u64,
    engines: serde_json::Value,
    ceiling: [f64; 2],
) -> CliResult<()> {
    let ratios: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|l| (l.clone(), json!(ratio(cells, l))))
        .collect();
    let v = json!({
        "command": "bench compare",
        "config": { "engines": names, "threads": a.threads, "read_threads": a.read_threads,
            "records": a.records, "key_bytes": 16, "value_bytes": 1000,
            "duration": a.duration, "warmup": a.warmup, "buffer_bytes": buffer,
            "lmdb_map_size": a.lmdb_map_size, "seed": a.seed, "commit": "sync" },
        "cells": cells,
        "pagoda_over_best_peer": ratios,
        "device_ceiling_ops_per_s": { "before": ceiling[0], "after": ceiling[1],
            "what": "one thread, 4 KiB write + fdatasync each, O_DIRECT where allowed" },
        "engines": engines,
    });
    let json_path = a.out.join("compare.json");
    write_json(&json_path, &v)?;
    let mut csv =
        String::from("engine,phase,threads,ops_per_s,p50_us,p99_us,ops,conflicts,errors\n");
    let opt = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.1}"));
    for c in cells {
        let _ = writeln!(
            csv,
            "{},{},{},{:.1},{},{},{},{},{}",
            c.engine,
            c.phase,
            c.threads,
            c.ops_per_s,
            opt(c.p50_us),
            opt(c.p99_us),
            c.ops,
            c.conflicts,
            c.errors
        );
    }
    let csv_path = a.out.join("compare.csv");
    std::fs::write(&csv_path, csv).map_err(|e| io(&csv_path, e))?;
    // Reads run orders of magnitude faster than durable updates: each phase is drawn
    // relative to its fastest engine, so every group is readable (the table has ops/s).
    let series: Vec<(String, Vec<f64>)> = names
        .iter()
        .map(|n| {
            let vals = labels
                .iter()
                .map(|l| {
                    let best = cells
                        .iter()
                        .filter(|c| &c.phase == l)
                        .map(|c| c.ops_per_s)
                        .fold(0.0, f64::max);
                    cells
                        .iter()
                        .find(|c| &c.phase == l && c.engine == *n)
                        .map_or(0.0, |c| if best > 0.0 { c.ops_per_s / best } else { 0.0 })
                })
                .collect();
            (n.to_string(), vals)
        })
        .collect();
    let svg_path = a.out.join("compare.svg");
    bar_chart(
        &svg_path,
        &BarChart {
            title: "pagoda and peers: ops/s relative to the fastest engine per phase",
            y_label: "ops/s / fastest",
            categories: labels,
            series: &series,
        },
    )?;
    eprintln!(
        "wrote {}, {}, {}",
        json_path.display(),
        csv_path.display(),
        svg_path.display()
    );
    Ok(())
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
