//! `pagoda bench ... --engine PEER` (sqlite, sqlite-rowid, lmdb, redb, fjall, rocksdb,
//! wiredtiger): the same workloads, driver and reports on a peer engine (crate
//! `pagoda-peers`), on real files in `--dir` (or a temporary one).
//!
//! Pagoda-only flags (devices, torn-write protection, flash cache, page size, background,
//! pipelined commits) are refused with a peer, naming the flag; `--buffer` is the peer's cache.
//! A peer keeps its load identity in a table of its own, as pagoda does, so `--load-only` and
//! `--run-only` work the same way. Peers have no device counters: the JSON's `devices` and
//! `profile` are null.

use super::{with_bar, EngineArgs, LinkbenchArgs, PhaseArgs, TpccArgs, YcsbArgs};
use crate::error::{CliError, CliResult};
use crate::report::write_json;
use pagoda_engine::{CommitMode, TornMode};
use pagoda_peers::{PeerDurability, PeerKind, PeerOptions};
use pagoda_workload::{
    linkbench, render_linkbench, render_load, render_text, render_tpcc, render_ycsb, tpcc, ycsb,
    LoadReport, RunReport, Store, WorkloadError,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `--engine`: pagoda or one of the peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EngineChoice {
    Pagoda,
    Peer(PeerKind),
}

impl EngineChoice {
    pub(crate) fn name(self) -> &'static str {
        match self {
            EngineChoice::Pagoda => "pagoda",
            EngineChoice::Peer(k) => k.name(),
        }
    }
}

/// Parses `--engine` (clap value parser): an unknown name lists the choices.
pub(crate) fn parse_engine(s: &str) -> Result<EngineChoice, String> {
    if s == "pagoda" {
        return Ok(EngineChoice::Pagoda);
    }
    s.parse::<PeerKind>()
        .map(EngineChoice::Peer)
        .map_err(|e| e.to_string())
}

/// Table and key where a peer records what was loaded into it (as pagoda's `Bench` does).
const META_TABLE: &str = "_pagoda_bench";
const META_KEY: &[u8] = b"loaded";

/// Refuses the flags that configure pagoda or its emulated devices: a peer runs on real
/// files and has none of them. A flag left at its default is not "given".
fn refuse_pagoda_flags(e: &EngineArgs, kind: PeerKind) -> CliResult<()> {
    let given = [
        ("--data", e.data.is_some()),
        ("--log", e.log.is_some()),
        ("--load-buffer", e.load_buffer.is_some()),
        ("--fast-load", e.fast_load),
        ("--no-background", e.no_background),
        ("--page-size", e.page_size.bytes() != 16 << 10),
        ("--torn", e.torn != TornMode::Doublewrite),
        ("--pipeline-depth", e.pipeline_depth != 32),
        (
            "--lazy-flush",
            e.lazy_flush.duration() != Duration::from_millis(10),
        ),
        ("--commit-gather", !e.commit_gather),
        ("--checkpoint-pacing", e.checkpoint_pacing != 0.5),
        ("--flash-cache", e.flash.given()),
    ];
    if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
        return Err(CliError::Usage(format!(
            "{flag} configures pagoda or its emulated devices; --engine {kind} runs on real files \
             in --dir: drop {flag} (or use --engine pagoda)"
        )));
    }
    Ok(())
}

/// The peer durability `--commit` asks for: sync, or lazy (each engine's no-sync mode:
/// SQLite `synchronous=NORMAL`, LMDB `NO_SYNC`, redb `Durability::None`, RocksDB `sync=false`).
fn durability(e: &EngineArgs, kind: PeerKind) -> CliResult<PeerDurability> {
    match e.commit {
        CommitMode::Sync => Ok(PeerDurability::Sync),
        CommitMode::Lazy => Ok(PeerDurability::Lazy),
        CommitMode::Pipelined => Err(CliError::Usage(format!(
            "--commit pipelined is pagoda's; --engine {kind} commits sync or lazy: use --commit \
             sync or --commit lazy"
        ))),
    }
}

/// The peer options the flags ask for.
pub(crate) fn options(cache_bytes: u64, lmdb_map_bytes: u64) -> PeerOptions {
    PeerOptions {
        cache_bytes,
        durability: PeerDurability::Sync,
        lmdb_map_bytes,
    }
}

/// An open peer for one benchmark, with what it needs to check the load and to report.
struct PeerBench {
    store: Box<dyn Store>,
    kind: PeerKind,
    ident: Value,
    config: Value,
    json: Option<PathBuf>,
    dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    cpu: Option<pagoda_engine::stats::CpuUsage>,
}

impl PeerBench {
    fn open(e: &EngineArgs, p: &PhaseArgs, kind: PeerKind, ident: Value) -> CliResult<Self> {
        refuse_pagoda_flags(e, kind)?;
        let mut opts = options(e.buffer.bytes(), e.lmdb_map_size.bytes());
        opts.durability = durability(e, kind)?;
        if !kind.is_built() {
            return Err(CliError::Other(
                pagoda_peers::PeerError::not_built(kind).to_string(),
            ));
        }
        if (p.load_only || p.run_only) && e.dir.is_none() {
            return Err(CliError::Usage(
                "--load-only and --run-only need a persistent database: give --dir PATH"
                    .to_string(),
            ));
        }
        let (tmp, dir) = match &e.dir {
            Some(d) => (None, d.clone()),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("pagoda-bench-")
                    .tempdir()
                    .map_err(|err| CliError::Io {
                        path: std::env::temp_dir(),
                        source: err,
                    })?;
                let d = t.path().to_path_buf();
                (Some(t), d)
            }
        };
        let path = kind.path(&dir);
        if p.run_only && !path.exists() {
            // Refuse before anything is created: a run needs a loaded database.
            return Err(CliError::Usage(format!(
                "--run-only: no loaded benchmark database at {} (nothing was created); \
                 load one first with --load-only, --engine {kind} and the same --dir",
                path.display()
            )));
        }
        let store = pagoda_peers::open(kind, &dir, &opts)
            .map_err(|err| CliError::Other(err.to_string()))?;
        eprintln!("engine: {}", store.describe());
        let config = json!({
            "engine": kind.name(), "dir": e.dir, "path": path, "buffer_bytes": opts.cache_bytes,
            "commit": e.commit.to_string(), "durability": opts.durability.name(),
            "lmdb_map_bytes": opts.lmdb_map_bytes, "seed": e.seed, "threads": p.threads,
            "load_only": p.load_only, "run_only": p.run_only,
        });
        let bench = PeerBench {
            store,
            kind,
            ident,
            config,
            json: e.json.clone(),
            dir,
            _tmp: tmp,
            cpu: None,
        };
        bench.check_loaded(p.run_only)?;
        Ok(bench)
    }

    fn loaded(&self) -> CliResult<Option<Value>> {
        let fail = |err| CliError::Workload(WorkloadError::store("reading the load record", err));
        self.store.create_table(META_TABLE).map_err(fail)?;
        let mut tx = self.store.begin_read().map_err(fail)?;
        let meta = tx.open(META_TABLE).map_err(fail)?;
        let v = tx.get(meta, META_KEY).map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(v.and_then(|b| serde_json::from_slice(&b).ok()))
    }

    /// A run-only database must hold exactly what this run asks for; a load must not go
    /// into a loaded database.
    fn check_loaded(&self, run_only: bool) -> CliResult<()> {
        let (dir, kind) = (self.dir.display(), self.kind);
        match (run_only, self.loaded()?) {
            (true, None) => Err(CliError::Usage(format!(
                "{dir} holds no loaded {kind} benchmark database; load it first with --load-only and the same parameters"
            ))),
            (true, Some(v)) if v != self.ident => Err(CliError::Usage(format!(
                "{dir} was loaded with {v} but this run asks for {}; use the same parameters or load another --dir",
                self.ident
            ))),
            (false, Some(v)) => Err(CliError::Usage(format!(
                "{dir} already holds a loaded {kind} database ({v}); add --run-only to run on it, or use an empty --dir"
            ))),
            _ => Ok(()),
        }
    }

    fn mark_loaded(&self) -> CliResult<()> {
        let fail = |err| CliError::Workload(WorkloadError::store("recording the load", err));
        let mut tx = self.store.begin().map_err(fail)?;
        let meta = tx.open(META_TABLE).map_err(fail)?;
        tx.put(meta, META_KEY, self.ident.to_string().as_bytes())
            .map_err(fail)?;
        tx.commit().map_err(fail)
    }

    /// Prints the engine's settings and counters and writes the JSON (the keys pagoda's has;
    /// `devices` and `profile` are null: a peer has no device counters, so its regime names
    /// only the CPU).
    fn finish(self, report: Option<RunReport>) -> CliResult<()> {
        let stats = self.store.stats_json();
        eprintln!("engine: {stats}");
        if let Some(c) = &self.cpu {
            println!("{}", super::summary::cpu_line(c));
        }
        if let (Some(path), Some(r)) = (&self.json, &report) {
            let v = super::summary::report_json(
                r,
                &self.config,
                vec![
                    ("devices", Value::Null),
                    ("profile", Value::Null),
                    ("cpu", json!(self.cpu)),
                    (
                        "regime",
                        self.cpu
                            .map_or(Value::Null, |c| super::regime::cpu_only(&c)),
                    ),
                ],
            )?;
            write_json(path, &v)?;
            eprintln!("wrote {}", path.display());
        }
        Ok(())
    }
}

type Load<'a> = dyn FnOnce(
        &dyn Store,
        &(dyn Fn(pagoda_workload::driver::Progress) + Sync),
    ) -> Result<LoadReport, WorkloadError>
    + 'a;
type Run<'a> = dyn FnOnce(
        &dyn Store,
        &(dyn Fn(pagoda_workload::driver::Progress) + Sync),
    ) -> Result<RunReport, WorkloadError>
    + 'a;

/// Load (unless --run-only), record the load, run (unless --load-only), as pagoda's path does.
fn phases(
    e: &EngineArgs,
    p: &PhaseArgs,
    kind: PeerKind,
    ident: Value,
    load: Box<Load<'_>>,
    run: Box<Run<'_>>,
) -> CliResult<(PeerBench, Option<RunReport>)> {
    let mut bench = PeerBench::open(e, p, kind, ident)?;
    if !p.run_only {
        let l = with_bar("load", |pr| load(&*bench.store, pr))?;
        eprint!("{}", render_load(&l));
        bench.mark_loaded()?;
    }
    if p.load_only {
        return Ok((bench, None));
    }
    let cpu = pagoda_engine::stats::CpuClock::start();
    let report = with_bar("run", |pr| run(&*bench.store, pr))?;
    bench.cpu = Some(cpu.usage());
    print!("{}", render_text(&report));
    Ok((bench, Some(report)))
}

pub(super) fn bench_ycsb(a: &YcsbArgs, kind: PeerKind) -> CliResult<()> {
    let cfg = a.config()?;
    let driver = super::driver_config(&a.phase, &a.engine, a.ops, Duration::ZERO)?;
    let ident = json!({ "workload": "ycsb", "records": cfg.record_count,
        "field_count": cfg.field_count, "field_length": cfg.field_length,
        "table": cfg.table, "insert_order": format!("{:?}", cfg.insert_order),
        "zero_padding": cfg.zero_padding });
    let (threads, seed) = (a.phase.threads, a.engine.seed);
    let (bench, report) = phases(
        &a.engine,
        &a.phase,
        kind,
        ident,
        Box::new(|s, pr| ycsb::load(s, &cfg, threads, seed, Some(pr))),
        Box::new(|s, pr| ycsb::run(s, &cfg, &driver, Some(pr))),
    )?;
    if let Some(r) = &report {
        print!("{}", render_ycsb(r));
    }
    bench.finish(report)
}

pub(super) fn bench_tpcc(
    a: &TpccArgs,
    kind: PeerKind,
    cfg: &tpcc::TpccConfig,
    driver: &pagoda_workload::DriverConfig,
) -> CliResult<()> {
    let ident = json!({ "workload": "tpcc", "warehouses": a.warehouses,
        "scale": format!("{:?}", cfg.scale) });
    let (threads, seed) = (a.phase.threads, a.engine.seed);
    let (bench, report) = phases(
        &a.engine,
        &a.phase,
        kind,
        ident,
        Box::new(|s, pr| tpcc::load(s, cfg, threads, seed, Some(pr))),
        Box::new(|s, pr| tpcc::run(s, cfg, driver, Some(pr))),
    )?;
    if let Some(r) = &report {
        print!("{}", render_tpcc(r));
    }
    if a.check {
        let check = tpcc::check(&*bench.store, a.warehouses)?;
        print!("{}", check.render());
        if !check.is_consistent() {
            bench.finish(report)?;
            return Err(CliError::CheckFailed(
                "TPC-C consistency check failed (see the violations above)".to_string(),
            ));
        }
    }
    bench.finish(report)
}

pub(super) fn bench_linkbench(
    a: &LinkbenchArgs,
    kind: PeerKind,
    cfg: &linkbench::LinkbenchConfig,
    driver: &pagoda_workload::DriverConfig,
) -> CliResult<()> {
    let ident = json!({ "workload": "linkbench", "nodes": a.nodes });
    let (threads, seed) = (a.phase.threads, a.engine.seed);
    let (bench, report) = phases(
        &a.engine,
        &a.phase,
        kind,
        ident,
        Box::new(|s, pr| linkbench::load(s, cfg, threads, seed, Some(pr))),
        Box::new(|s, pr| linkbench::run(s, cfg, driver, Some(pr))),
    )?;
    if let Some(r) = &report {
        print!("{}", render_linkbench(r));
    }
    bench.finish(report)
}

/// Where `bench compare` puts an engine's database: `DIR/db-ENGINE`, emptied first.
pub(crate) fn fresh_dir(out: &Path, engine: &str) -> CliResult<PathBuf> {
    let d = out.join(format!("db-{engine}"));
    if d.exists() {
        std::fs::remove_dir_all(&d).map_err(|e| CliError::Io {
            path: d.clone(),
            source: e,
        })?;
    }
    std::fs::create_dir_all(&d).map_err(|e| CliError::Io {
        path: d.clone(),
        source: e,
    })?;
    Ok(d)
}
