//! `pagoda bench ycsb | tpcc | linkbench`: a workload on the engine, on any device, with live
//! progress, a result table, the workload's own report format and `--json`.

use crate::error::{CliError, CliResult};
use crate::progress::Progress as Bar;
use crate::report::write_json;
use clap::{Args, Subcommand};
use pagoda::store::PagodaStore;
use pagoda_device::spec::{DeviceKind, DeviceSpec};
use pagoda_device::units::{parse_duration, parse_size};
use pagoda_engine::{CommitMode, Db, DbOptions, TornMode};
use pagoda_workload::driver::Progress;
use pagoda_workload::{
    linkbench, render_linkbench, render_load, render_text, render_tpcc, render_ycsb, tpcc, ycsb,
    DriverConfig, RunLimit, RunReport,
};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// `pagoda bench ...`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// YCSB core workloads A–F and seed 002's update-only.
    Ycsb(YcsbArgs),
    /// TPC-C as tpcc-mysql runs it (tpmC), with `--check` for consistency conditions 1–4.
    Tpcc(TpccArgs),
    /// LinkBench (default mix, seed 001's write-heavy mix, or a mix file).
    Linkbench(LinkbenchArgs),
}

/// Engine and device options shared by every workload (CLI.md).
#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Where real files go when devices are not named (default: a temporary directory,
    /// removed at the end). Needed for --load-only / --run-only.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Data-page device: file:PATH | mem | sata-ssd | nvme-ssd | hdd-15k | raid0-8x-hdd-15k
    /// with ,key=value options.
    #[arg(long)]
    data: Option<String>,
    /// Write-ahead-log device (default: like --data when that is emulated, else a file in --dir).
    #[arg(long)]
    log: Option<String>,
    /// DRAM buffer pool size.
    #[arg(long, default_value = "64MiB")]
    buffer: String,
    /// Page size (4KiB to 64KiB).
    #[arg(long, default_value = "16KiB")]
    page_size: String,
    /// Torn-write protection: doublewrite | atomic | none.
    #[arg(long, default_value = "doublewrite")]
    torn: TornMode,
    /// Commit mode: sync | pipelined (the flush thread writes and syncs the log; each client
    /// thread keeps up to --pipeline-depth commits in flight).
    #[arg(long, default_value = "sync")]
    commit: CommitMode,
    /// Commits each client thread keeps in flight with --commit pipelined (operations count,
    /// and their latency ends, only once durable).
    #[arg(long, default_value_t = 32)]
    pipeline_depth: usize,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the result as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Phase and client options shared by every workload.
#[derive(Debug, Args)]
pub struct PhaseArgs {
    /// Client threads (also loader threads).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Measured run length in time (instead of an operation count), e.g. 30s, 2m.
    #[arg(long)]
    duration: Option<String>,
    /// Time run before measuring, excluded from the results.
    #[arg(long)]
    warmup: Option<String>,
    /// Load the database and stop (needs --dir).
    #[arg(long, conflicts_with = "run_only")]
    load_only: bool,
    /// Run on a database loaded before with the same parameters (needs --dir).
    #[arg(long)]
    run_only: bool,
}

/// Flags of `bench ycsb`.
#[derive(Debug, Args)]
pub struct YcsbArgs {
    /// a | b | c | d | e | f | update-only.
    #[arg(long, default_value = "a")]
    workload: String,
    /// Records loaded.
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Measured operations (default 100,000 unless --duration is given).
    #[arg(long)]
    ops: Option<u64>,
    /// Request distribution: zipfian | uniform | latest | hotspot (default: the workload's).
    #[arg(long)]
    distribution: Option<String>,
    /// Fields per record (default: the workload's).
    #[arg(long)]
    field_count: Option<usize>,
    /// Bytes per field (default: the workload's).
    #[arg(long)]
    field_length: Option<usize>,
    #[command(flatten)]
    phase: PhaseArgs,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Flags of `bench tpcc`.
#[derive(Debug, Args)]
pub struct TpccArgs {
    /// Warehouses.
    #[arg(long, default_value_t = 1)]
    warehouses: u32,
    /// Check consistency conditions 1–4 after the run (fails the command when one is broken).
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    phase: PhaseArgs,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Flags of `bench linkbench`.
#[derive(Debug, Args)]
pub struct LinkbenchArgs {
    /// Nodes loaded.
    #[arg(long, default_value_t = 100_000)]
    nodes: u64,
    /// Measured requests (default 100,000 unless --duration is given).
    #[arg(long)]
    requests: Option<u64>,
    /// default | seed-001 | FILE (lines `name = percent`).
    #[arg(long, default_value = "default")]
    mix: String,
    #[command(flatten)]
    phase: PhaseArgs,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Runs a `bench` subcommand.
pub fn run(cmd: BenchCommand) -> CliResult<()> {
    match cmd {
        BenchCommand::Ycsb(a) => bench_ycsb(&a),
        BenchCommand::Tpcc(a) => bench_tpcc(&a),
        BenchCommand::Linkbench(a) => bench_linkbench(&a),
    }
}

fn bench_ycsb(a: &YcsbArgs) -> CliResult<()> {
    let mut cfg = ycsb::YcsbConfig::new(a.workload.parse()?, a.records);
    if let Some(d) = &a.distribution {
        cfg.distribution = d.parse()?;
    }
    if let Some(n) = a.field_count {
        cfg.field_count = n;
    }
    if let Some(n) = a.field_length {
        cfg.field_length = n;
    }
    cfg.validate()?;
    let driver = driver_config(&a.phase, &a.engine, a.ops, Duration::ZERO)?;
    let ident = json!({ "workload": "ycsb", "records": cfg.record_count,
        "field_count": cfg.field_count, "field_length": cfg.field_length,
        "table": cfg.table, "insert_order": format!("{:?}", cfg.insert_order) });
    let bench = Bench::open(&a.engine, &a.phase, ident)?;
    let store = &bench.store;
    if !a.phase.run_only {
        let load = with_bar("load", |p| {
            ycsb::load(store, &cfg, a.phase.threads, a.engine.seed, Some(p))
        })?;
        eprint!("{}", render_load(&load));
        bench.mark_loaded()?;
    }
    if a.phase.load_only {
        return bench.finish(None);
    }
    store.db().reset_profile();
    let cpu = pagoda_engine::CpuClock::start();
    let report = with_bar("run", |p| ycsb::run(store, &cfg, &driver, Some(p)))?;
    let mut bench = bench;
    bench.cpu = Some(cpu.usage());
    print!("{}", render_text(&report));
    print!("{}", render_ycsb(&report));
    bench.finish(Some(report))
}

fn bench_tpcc(a: &TpccArgs) -> CliResult<()> {
    let cfg = tpcc::TpccConfig::new(a.warehouses);
    cfg.validate()?;
    let rampup = Duration::from_secs(5);
    let mut phase_limit = a.phase.duration.clone();
    if phase_limit.is_none() {
        phase_limit = Some("60s".to_string());
    }
    let driver = driver_config(
        &PhaseArgs {
            duration: phase_limit,
            ..a.phase.clone()
        },
        &a.engine,
        None,
        rampup,
    )?;
    let ident = json!({ "workload": "tpcc", "warehouses": a.warehouses,
        "scale": format!("{:?}", cfg.scale) });
    let bench = Bench::open(&a.engine, &a.phase, ident)?;
    let store = &bench.store;
    if !a.phase.run_only {
        let load = with_bar("load", |p| {
            tpcc::load(store, &cfg, a.phase.threads, a.engine.seed, Some(p))
        })?;
        eprint!("{}", render_load(&load));
        bench.mark_loaded()?;
    }
    let report = if a.phase.load_only {
        None
    } else {
        let r = with_bar("run", |p| tpcc::run(store, &cfg, &driver, Some(p)))?;
        print!("{}", render_text(&r));
        print!("{}", render_tpcc(&r));
        Some(r)
    };
    if a.check {
        let check = tpcc::check(store, a.warehouses)?;
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

fn bench_linkbench(a: &LinkbenchArgs) -> CliResult<()> {
    let mix = linkbench::LinkMix::from_arg(&a.mix)?;
    let cfg = linkbench::LinkbenchConfig::new(a.nodes, mix);
    cfg.validate()?;
    let driver = driver_config(&a.phase, &a.engine, a.requests, Duration::ZERO)?;
    let ident = json!({ "workload": "linkbench", "nodes": a.nodes });
    let bench = Bench::open(&a.engine, &a.phase, ident)?;
    let store = &bench.store;
    if !a.phase.run_only {
        let load = with_bar("load", |p| {
            linkbench::load(store, &cfg, a.phase.threads, a.engine.seed, Some(p))
        })?;
        eprint!("{}", render_load(&load));
        bench.mark_loaded()?;
    }
    if a.phase.load_only {
        return bench.finish(None);
    }
    let report = with_bar("run", |p| linkbench::run(store, &cfg, &driver, Some(p)))?;
    print!("{}", render_text(&report));
    print!("{}", render_linkbench(&report));
    bench.finish(Some(report))
}

impl Clone for PhaseArgs {
    fn clone(&self) -> Self {
        Self {
            threads: self.threads,
            duration: self.duration.clone(),
            warmup: self.warmup.clone(),
            load_only: self.load_only,
            run_only: self.run_only,
        }
    }
}

fn driver_config(
    p: &PhaseArgs,
    e: &EngineArgs,
    ops: Option<u64>,
    default_warmup: Duration,
) -> CliResult<DriverConfig> {
    let limit = match (&p.duration, ops) {
        (Some(_), Some(_)) => {
            return Err(CliError::Usage(
                "give either an operation count or --duration, not both".to_string(),
            ))
        }
        (Some(d), None) => RunLimit::Duration(parse_duration(d)?),
        (None, Some(n)) => RunLimit::Ops(n),
        (None, None) => RunLimit::Ops(100_000),
    };
    let warmup = match &p.warmup {
        Some(w) => parse_duration(w)?,
        None => default_warmup,
    };
    let cfg = DriverConfig {
        threads: p.threads,
        limit,
        warmup,
        seed: e.seed,
        pipeline_depth: if e.commit == CommitMode::Pipelined {
            e.pipeline_depth
        } else {
            0
        },
        ..DriverConfig::default()
    };
    cfg.validate()?;
    Ok(cfg)
}

/// Runs `f` with a progress bar fed by the workload's progress callback.
fn with_bar<T>(
    phase: &str,
    f: impl FnOnce(&(dyn Fn(Progress) + Sync)) -> Result<T, pagoda_workload::WorkloadError>,
) -> CliResult<T> {
    let bar: Mutex<Option<Bar>> = Mutex::new(None);
    let callback = |p: Progress| {
        let mut bar = bar.lock();
        let secs = p.elapsed.as_secs_f64().max(1e-9);
        let rate = format!("{} ops, {:.0} ops/s", p.done, p.done as f64 / secs);
        let status = if p.warming_up {
            format!("warming up; {rate}")
        } else {
            rate
        };
        match (p.total, p.planned) {
            (Some(total), _) => bar
                .get_or_insert_with(|| Bar::new(phase, "ops", total))
                .set_with_message(p.done, status),
            (None, Some(planned)) => bar
                .get_or_insert_with(|| Bar::new(phase, "s", planned.as_secs().max(1)))
                .set_with_message(p.elapsed.as_secs(), status),
            (None, None) => {}
        }
    };
    let out = f(&callback);
    if let Some(b) = bar.into_inner() {
        b.finish();
    }
    Ok(out?)
}

/// An open database for a benchmark, with what it needs to report and to check that a
/// persistent database holds what the run expects.
struct Bench {
    store: PagodaStore,
    ident: Value,
    config: Value,
    json: Option<PathBuf>,
    _tmp: Option<tempfile::TempDir>,
    /// CPU utilisation of the measured run.
    cpu: Option<pagoda_engine::CpuUsage>,
}

/// Table and key where a persistent database records what was loaded into it.
const META_TABLE: &str = "_pagoda_bench";
const META_KEY: &[u8] = b"loaded";

impl Bench {
    fn open(e: &EngineArgs, p: &PhaseArgs, ident: Value) -> CliResult<Self> {
        let buffer = parse_size(&e.buffer)?;
        let page_size = parse_size(&e.page_size)?;
        if let Some(mem) = total_memory_bytes() {
            if buffer >= mem {
                return Err(CliError::Usage(format!(
                    "--buffer {} is larger than this machine's memory ({} MiB); give a smaller buffer",
                    e.buffer,
                    mem >> 20
                )));
            }
        }
        let data = e.data.as_deref().map(DeviceSpec::parse).transpose()?;
        let log = e.log.as_deref().map(DeviceSpec::parse).transpose()?;
        let emulated = |s: &Option<DeviceSpec>| {
            s.as_ref()
                .is_some_and(|s| !matches!(s.kind, DeviceKind::File(_)))
        };
        if (p.load_only || p.run_only) && (e.dir.is_none() && e.data.is_none()) {
            return Err(CliError::Usage(
                "--load-only and --run-only need a persistent database: give --dir PATH"
                    .to_string(),
            ));
        }
        if p.run_only && (emulated(&data) || emulated(&log)) {
            return Err(CliError::Usage(
                "--run-only cannot use an emulated device: it starts empty each run; use --dir or file: devices"
                    .to_string(),
            ));
        }
        if p.run_only {
            // Refuse before anything is created: a run needs a loaded database.
            let data_path = match &data {
                Some(DeviceSpec {
                    kind: DeviceKind::File(path),
                    ..
                }) => path.clone(),
                _ => e
                    .dir
                    .as_ref()
                    .map_or_else(Default::default, |d| d.join("data.pagoda")),
            };
            if !data_path.exists() {
                return Err(CliError::Usage(format!(
                    "--run-only: no loaded benchmark database at {} (nothing was created); \
                     load one first with --load-only and the same --dir",
                    data_path.display()
                )));
            }
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
        let opts = match (&data, &log) {
            (None, None) => DbOptions::in_dir(&dir),
            (Some(d), l) => {
                let log = match l {
                    Some(l) => l.clone(),
                    None if !matches!(d.kind, DeviceKind::File(_)) => d.clone(),
                    None => {
                        DeviceSpec::parse(&format!("file:{}", dir.join("log.pagoda").display()))?
                    }
                };
                DbOptions::with_devices(d.open()?, log.open()?)
            }
            (None, Some(l)) => DbOptions::with_devices(
                DeviceSpec::parse(&format!("file:{}", dir.join("data.pagoda").display()))?
                    .open()?,
                l.open()?,
            ),
        };
        let opts = opts
            .page_size(page_size as usize)
            .buffer_bytes(buffer as usize)
            .torn(e.torn)
            .commit(e.commit);
        let db = Db::open(opts)?;
        let (dd, ld) = (
            e.data
                .clone()
                .unwrap_or_else(|| format!("file:{}/data.pagoda", dir.display())),
            e.log.clone().unwrap_or_else(|| {
                if emulated(&data) {
                    e.data.clone().unwrap_or_default()
                } else {
                    format!("file:{}/log.pagoda", dir.display())
                }
            }),
        );
        let describe = format!(
            "pagoda(data={dd}, log={ld}, buffer={}, page={}, torn={}, commit={:?})",
            e.buffer, e.page_size, e.torn, e.commit
        );
        eprintln!("engine: {describe}");
        let store = PagodaStore::new(db, describe);
        let config = json!({
            "dir": e.dir, "data": dd, "log": ld, "buffer_bytes": buffer,
            "page_size": page_size, "torn": e.torn.to_string(), "commit": e.commit.to_string(), "pipeline_depth": e.pipeline_depth,
            "seed": e.seed, "threads": p.threads, "load_only": p.load_only, "run_only": p.run_only,
        });
        let bench = Self {
            store,
            ident,
            config,
            json: e.json.clone(),
            _tmp: tmp,
            cpu: None,
        };
        bench.check_loaded(p.run_only, &dir)?;
        Ok(bench)
    }

    fn loaded(&self) -> CliResult<Option<Value>> {
        if !self
            .store
            .db()
            .list_tables()
            .iter()
            .any(|t| t == META_TABLE)
        {
            return Ok(None);
        }
        let tx = self.store.db().begin_read()?;
        let v = tx.get(META_TABLE, META_KEY)?;
        Ok(v.and_then(|b| serde_json::from_slice(&b).ok()))
    }

    /// Before any work: a run-only database must hold exactly what this run asks for; a load
    /// must not go into a database that is already loaded.
    fn check_loaded(&self, run_only: bool, dir: &std::path::Path) -> CliResult<()> {
        let loaded = self.loaded()?;
        match (run_only, loaded) {
            (true, None) => Err(CliError::Usage(format!(
                "{} holds no loaded benchmark database; load it first with --load-only and the same parameters",
                dir.display()
            ))),
            (true, Some(v)) if v != self.ident => Err(CliError::Usage(format!(
                "{} was loaded with {v} but this run asks for {}; use the same parameters or load another --dir",
                dir.display(),
                self.ident
            ))),
            (false, Some(v)) => Err(CliError::Usage(format!(
                "{} already holds a loaded database ({v}); add --run-only to run on it, or use an empty --dir",
                dir.display()
            ))),
            _ => Ok(()),
        }
    }

    fn mark_loaded(&self) -> CliResult<()> {
        let db = self.store.db();
        if !db.list_tables().iter().any(|t| t == META_TABLE) {
            db.create_table(META_TABLE)?;
        }
        let mut tx = db.begin()?;
        tx.put(META_TABLE, META_KEY, self.ident.to_string().as_bytes())?;
        tx.commit()?;
        Ok(())
    }

    /// Prints the engine and device counters, writes the JSON, closes the database.
    fn finish(self, report: Option<RunReport>) -> CliResult<()> {
        let stats = self.store.db().stats();
        let (data, log) = self.store.db().device_stats();
        eprintln!(
            "engine: buffer hit ratio {:.4}, buffer reads {}, writes {}; commits {}, log syncs {} ({:.1} commits/sync)",
            stats.buffer.hit_ratio,
            stats.buffer.reads,
            stats.buffer.writes,
            stats.commits,
            stats.log_syncs,
            stats.commits_per_sync
        );
        eprintln!(
            "devices: data {} host writes (4 KiB), {} reads, WAF {:.2}; log {} host writes",
            data.host_write_pages, data.host_read_pages, data.waf, log.host_write_pages
        );
        if report.is_some() {
            println!("phase profile (commit mode {}):", stats.commit_mode);
            print!("{}", stats.profile.render());
        }
        if let Some(c) = &self.cpu {
            println!(
                "cpu: utilisation {:.1}% (user {:.2} s + sys {:.2} s over {:.2} s wall x {} cores)",
                100.0 * c.utilisation,
                c.user_s,
                c.sys_s,
                c.wall_s,
                c.cores
            );
        }
        if let (Some(path), Some(r)) = (&self.json, &report) {
            let mut v = serde_json::to_value(r)
                .map_err(|e| CliError::Other(format!("cannot encode the report: {e}")))?;
            if let Some(obj) = v.as_object_mut() {
                let mut config = self.config.clone();
                if let (Some(c), Some(w)) = (config.as_object_mut(), r.config.as_object()) {
                    for (k, val) in w {
                        c.insert(k.clone(), val.clone());
                    }
                }
                obj.insert("config".to_string(), config);
                obj.insert("devices".to_string(), json!({ "data": data, "log": log }));
                obj.insert("profile".to_string(), json!(stats.profile));
                if let Some(c) = &self.cpu {
                    obj.insert("cpu".to_string(), json!(c));
                }
            }
            write_json(path, &v)?;
            eprintln!("wrote {}", path.display());
        }
        self.store.close()?;
        Ok(())
    }
}

/// Physical memory from /proc/meminfo (None where it cannot be read).
fn total_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
