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

mod engine;
use engine::{run_engine, Round};
mod summary;
mod targets;

use super::peer::{self, EngineChoice};
use crate::error::{CliError, CliResult};
use crate::progress::Progress as Bar;
use crate::units::{at_least_one, Size, Span};
use clap::Args;
use pagoda_workload::tpcc;
use pagoda_workload::ycsb::{self, RequestDistribution, YcsbConfig, YcsbWorkload};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Flags of `bench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Engines, comma-separated: pagoda, sqlite, sqlite-rowid, lmdb, redb, fjall, rocksdb,
    /// wiredtiger (rocksdb and wiredtiger need their cargo features).
    #[arg(long, default_value = "pagoda,sqlite,lmdb,redb", value_delimiter = ',',
          value_parser = peer::parse_engine)]
    engines: Vec<EngineChoice>,
    /// Client threads of the update cells, comma-separated.
    #[arg(long, default_value = "1,4,16", value_delimiter = ',', value_parser = at_least_one())]
    threads: Vec<usize>,
    /// Client threads of the read (YCSB C) and YCSB A cells (also the loader's threads).
    #[arg(long, default_value_t = 2, value_parser = at_least_one())]
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
    #[arg(long, default_value_t = 5, value_parser = at_least_one())]
    repeats: usize,
    /// TPC-C warehouses of the TPC-C cell (0: no TPC-C cell).
    #[arg(long, default_value_t = 1)]
    tpcc_warehouses: u32,
    /// Client threads of the TPC-C cell.
    #[arg(long, default_value_t = 4, value_parser = at_least_one())]
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
    check(a)?;
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
    std::fs::create_dir_all(&a.out).map_err(|e| io(&a.out, e))?;
    let _lock = lock_out(&a.out)?;
    let machine = crate::provenance::machine();
    let phases = phases(a);
    let probe = duration.min(Duration::from_secs(3));
    let ceiling_before = super::ceiling::measure(&a.out, probe)?;
    let n = a.engines.len();
    let total = (a.repeats * n * phases.len()) as u64;
    let bar = Mutex::new(Bar::new("compare", "cells", total));
    let (cells, engines) = rounds(a, &phases, buffer, &bar, (duration, warmup))?;
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

/// Refuses a run that cannot give a result, before any work: no engines or threads, an engine
/// named twice, a README without the markers, a peer not built, a --publish that is no
/// Markdown file.
fn check(a: &CompareArgs) -> CliResult<()> {
    if a.engines.is_empty() || a.threads.is_empty() {
        return Err(CliError::Usage(
            "--engines and --threads need at least one value each".to_string(),
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
    for e in &a.engines {
        if let EngineChoice::Peer(k) = e {
            if !k.is_built() {
                return Err(CliError::Other(
                    pagoda_peers::PeerError::not_built(*k).to_string(),
                ));
            }
        }
    }
    // Checked before any work: an unwritable --publish should not waste the run.
    if let Some(p) = &a.publish {
        if p.extension().is_none_or(|e| e != "md") {
            return Err(CliError::Usage(format!(
                "--publish {} should name a Markdown file (FILE.md)",
                p.display()
            )));
        }
    }
    Ok(())
}

/// Every round: each engine once on a fresh directory, in an order rotated by one engine
/// per round. Returns the cells and what each engine's JSON says.
fn rounds(
    a: &CompareArgs,
    phases: &[PhaseSpec],
    buffer: u64,
    bar: &Mutex<Bar>,
    times: (Duration, Duration),
) -> CliResult<(Vec<Cell>, serde_json::Map<String, serde_json::Value>)> {
    let n = a.engines.len();
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
            let r = run_engine(a, engine, &dir, buffer, phases, at, bar, times);
            let remove = !a.keep || r.is_err();
            if remove && dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(|e| io(&dir, e))?;
            }
            let (mut c, info) = r?;
            cells.append(&mut c);
            engines.insert(engine.name().to_string(), info);
        }
    }
    Ok((cells, engines))
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
