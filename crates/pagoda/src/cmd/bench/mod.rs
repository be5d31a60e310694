//! `pagoda bench ycsb | tpcc | linkbench`: a workload on the engine, on any device, with live
//! progress, a result table, the workload's own report format and `--json`.

mod ceiling;
mod compare;
mod devices;
mod flash;
pub(crate) mod log_partition;
mod peer;
mod regime;
mod restart;
mod session;
mod summary;

use crate::error::{CliError, CliResult};
use crate::progress::Progress as Bar;
use crate::units::{Size, Span};
use clap::{Args, Subcommand};
use pagoda::cli::flash::FlashCacheFlags;
use pagoda_engine::{CommitMode, TornMode};
use pagoda_workload::driver::Progress;
use pagoda_workload::{
    linkbench, render_linkbench, render_load, render_text, render_tpcc, render_ycsb, tpcc, ycsb,
    DriverConfig, RunLimit, RunReport,
};
use parking_lot::Mutex;
use peer::EngineChoice;
use serde_json::json;
pub(crate) use session::Bench;
use std::path::PathBuf;
use std::time::Duration;

/// `pagoda bench ...`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// YCSB core workloads A–F and update-only (the WiredTiger pipelined-commit paper's).
    Ycsb(Box<YcsbArgs>),
    /// TPC-C as tpcc-mysql runs it (tpmC), with `--check` for consistency conditions 1–4.
    Tpcc(Box<TpccArgs>),
    /// LinkBench (default mix, the DWB-FTL paper's write-only mix, or a mix file).
    Linkbench(Box<LinkbenchArgs>),
    /// pagoda against its peers (SQLite, LMDB, redb, fjall, RocksDB, WiredTiger): the same
    /// YCSB cells on each, one after another; a table, compare.json, compare.csv and
    /// compare.svg.
    Compare(Box<compare::CompareArgs>),
}

/// When the process started: `main` sets it first thing, so a load timed from it includes
/// the open (a new log zero-filled at create) as a user waiting for the command sees it.
pub(crate) static PROCESS_START: std::sync::OnceLock<std::time::Instant> =
    std::sync::OnceLock::new();

/// Seconds since [`PROCESS_START`].
fn since_start() -> f64 {
    PROCESS_START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}

/// Engine and device options shared by every workload.
#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Engine: pagoda | sqlite | sqlite-rowid | lmdb | redb | fjall | rocksdb | wiredtiger
    /// (rocksdb and wiredtiger need their cargo features). A peer runs on real files in --dir; --buffer is its cache.
    #[arg(long, default_value = "pagoda", value_parser = peer::parse_engine)]
    pub(crate) engine: EngineChoice,
    /// LMDB's map size: the most its database may grow to (a sparse file; --engine lmdb).
    #[arg(long, default_value = "64GiB")]
    pub(crate) lmdb_map_size: Size,
    /// Where real files go when devices are not named (default: a temporary directory,
    /// removed at the end). Needed for --load-only / --run-only.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Data-page device: file:PATH | mem | sata-ssd | nvme-ssd | hdd-15k | raid0-8x-hdd-15k
    /// with ,key=value options.
    #[arg(long)]
    pub(crate) data: Option<String>,
    /// Write-ahead-log device (default: like --data when that is emulated, else a file in --dir):
    /// a device string as for --data, or `data-partition,size=SIZE` for the last SIZE bytes of
    /// the --data device itself (data, double-write area and log on one drive).
    #[arg(long)]
    pub(crate) log: Option<String>,
    /// DRAM buffer pool size.
    #[arg(long, default_value = "64MiB")]
    pub(crate) buffer: Size,
    /// Buffer pool size while loading (default: --buffer). The database is then checkpointed,
    /// closed and opened again with --buffer on the same devices, with their counters zeroed:
    /// a small-buffer run on a slow device without a slow load.
    #[arg(long, conflicts_with = "run_only")]
    pub(crate) load_buffer: Option<Size>,
    /// Load with the emulated devices' latency paused: the open and the load run at CPU speed,
    /// and the devices end the load in the state a timed load leaves (mapping, GC, wear, head
    /// position). Timing resumes before the measured run; the result's `load` then says its
    /// times are not emulated ones.
    #[arg(long, conflicts_with = "run_only")]
    pub(crate) fast_load: bool,
    /// No background thread: the cleaner runs only when a page fault finds no clean frame and
    /// checkpoints only when the log fills. With one client thread and sync commits the I/O
    /// sequence is then a function of the seed: the same device counters run after run.
    #[arg(long)]
    pub(crate) no_background: bool,
    /// Page size (4KiB to 64KiB).
    #[arg(long, default_value = "16KiB")]
    pub(crate) page_size: Size,
    /// Torn-write protection: doublewrite | doublewrite-full (every flushed page copied to the
    /// double-write area first, as InnoDB does; the papers' baseline) | atomic | none.
    #[arg(long, default_value = "doublewrite")]
    torn: TornMode,
    /// Commit mode: sync | pipelined (the flush thread writes and syncs the log; each client
    /// thread may have up to --pipeline-depth commits in flight) | lazy (no sync on commit:
    /// committed and visible at once, made durable by a flush thread within --lazy-flush; a
    /// crash may lose that window's commits, only ever a suffix of the commit order).
    #[arg(long, default_value = "sync")]
    commit: CommitMode,
    /// The log ring's size (default: the whole log device). A checkpoint is due when half of it is
    /// used, so a log small beside the buffer makes checkpoints, and page writes, fall inside a run
    /// (InnoDB's 128 MB log beside a 1 GB buffer, as the 16 KiB atomic-write paper ran it).
    #[arg(long)]
    log_size: Option<Size>,
    /// With --commit lazy: the longest a commit waits before the flush thread syncs it.
    #[arg(long, default_value = "10ms")]
    lazy_flush: Span,
    /// With --commit sync: a thread that leads a log round first waits (at most two rounds'
    /// time) for the committers the last round acknowledged, so that one sync carries all of
    /// them instead of alternating half-batches. `off` is the ablation.
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    commit_gather: bool,
    /// The share (0 to 1) of the log left before commits would wait for space over which a
    /// background checkpoint spreads its page writes (and of the checkpoint interval); a
    /// commit that waits for space turns it to full speed. 0 writes at full speed (the
    /// ablation).
    #[arg(long, default_value_t = 0.5)]
    checkpoint_pacing: f64,
    /// Commits each client thread may have unresolved at once with --commit pipelined: the
    /// thread hands a commit off and runs its next transaction, but before queuing another
    /// commit waits until fewer than this many are unresolved. 1 keeps one commit in flight per
    /// thread, as --commit sync does. Operations count, and their latency ends, only once
    /// durable.
    #[arg(long, default_value_t = 32)]
    pipeline_depth: usize,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Write the result as JSON here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) flash: FlashCacheFlags,
}

/// Phase and client options shared by every workload.
#[derive(Debug, Args)]
pub struct PhaseArgs {
    /// Client threads (also loader threads).
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// Measured run length in time (instead of an operation count), e.g. 30s, 2m.
    #[arg(long)]
    pub(crate) duration: Option<Span>,
    /// Time run before measuring, excluded from the results.
    #[arg(long)]
    warmup: Option<Span>,
    /// Load the database and stop (needs --dir).
    #[arg(long, conflicts_with = "run_only")]
    pub(crate) load_only: bool,
    /// Run on a database loaded before with the same parameters (needs --dir).
    #[arg(long)]
    run_only: bool,
}

/// Flags of `bench ycsb`.
#[derive(Debug, Args)]
pub struct YcsbArgs {
    /// a | b | c | d | e | f | update-only.
    #[arg(long, default_value = "a")]
    pub(crate) workload: String,
    /// Records loaded.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) records: u64,
    /// Measured operations (default 100,000 unless --duration is given).
    #[arg(long, conflicts_with = "duration")]
    pub(crate) ops: Option<u64>,
    /// Request distribution: zipfian | uniform | latest | hotspot (default: the workload's).
    #[arg(long)]
    pub(crate) distribution: Option<String>,
    /// Fields per record (default: the workload's).
    #[arg(long)]
    field_count: Option<usize>,
    /// Bytes per field (default: the workload's).
    #[arg(long)]
    field_length: Option<usize>,
    /// Order of keys in the key space: hashed (YCSB's default for every workload, inserts
    /// land everywhere) or ordered (key numbers as they are; the load then goes through the
    /// engine's bulk path in key order, as db_bench's fillseq). Give the loader's order to
    /// run another workload on its data.
    #[arg(long)]
    insert_order: Option<String>,
    /// Digits of the key number ("user" + this many digits, zero-padded; default 1, YCSB's,
    /// for every workload; the WiredTiger paper's 20-byte keys are 16 with --insert-order ordered).
    #[arg(long)]
    zero_padding: Option<usize>,
    #[command(flatten)]
    pub(crate) phase: PhaseArgs,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
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
    /// Items (and stock rows per warehouse) instead of TPC-C's 100,000: a smaller database
    /// for smoke tests; results are then not TPC-C's.
    #[arg(long, hide = true)]
    items: Option<u32>,
    /// Customers per district instead of TPC-C's 3,000 (see --items).
    #[arg(long, hide = true)]
    customers: Option<u32>,
    /// After the measured run: crash (no checkpoint, power cut on every emulated device),
    /// reopen with the same options timing the recovery, then run again for this long with
    /// no warm-up (the restarted database warming up). Adds `restart` to the JSON.
    #[arg(long, value_name = "DURATION", conflicts_with = "load_only")]
    crash_restart: Option<Span>,
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
    #[arg(long, conflicts_with = "duration")]
    requests: Option<u64>,
    /// default | write-only | FILE (lines `name = percent`).
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
        BenchCommand::Compare(a) => compare::run(&a),
    }
}

fn bench_ycsb(a: &YcsbArgs) -> CliResult<()> {
    if let EngineChoice::Peer(kind) = a.engine.engine {
        return peer::bench_ycsb(a, kind);
    }
    let (bench, report) = load_and_run_ycsb(a, |_| Ok(()))?;
    if let Some(r) = &report {
        print!("{}", render_ycsb(r));
    }
    bench.finish(report)
}

/// Loads (unless --run-only) and runs YCSB as `bench ycsb` does, printing the load and the
/// run's text report; `before_run` sees the database just before the measured run. No report
/// with --load-only. (`advise buffer` runs its workload through this too.)
pub(crate) fn load_and_run_ycsb(
    a: &YcsbArgs,
    before_run: impl FnOnce(&pagoda_engine::Db) -> CliResult<()>,
) -> CliResult<(Bench, Option<RunReport>)> {
    if a.engine.engine != EngineChoice::Pagoda {
        return Err(CliError::Usage(format!(
            "this command measures pagoda's engine; --engine {} is for `bench` workloads",
            a.engine.engine.name()
        )));
    }
    let cfg = a.config()?;
    let driver = driver_config(&a.phase, &a.engine, a.ops, Duration::ZERO)?;
    let ident = json!({ "workload": "ycsb", "records": cfg.record_count,
        "field_count": cfg.field_count, "field_length": cfg.field_length,
        "table": cfg.table, "insert_order": format!("{:?}", cfg.insert_order),
        "zero_padding": cfg.zero_padding });
    let mut bench = Bench::open(&a.engine, &a.phase, ident)?;
    if !a.phase.run_only {
        let load = with_bar("load", |p| {
            ycsb::load(&bench.store, &cfg, a.phase.threads, a.engine.seed, Some(p))
        })?;
        eprint!("{}", render_load(&load));
        bench = bench.mark_loaded(&load)?;
    }
    if a.phase.load_only {
        return Ok((bench, None));
    }
    bench.store.db().reset_profile();
    before_run(bench.store.db())?;
    let report = bench.measure(driver.warmup, |store| {
        with_bar("run", |p| ycsb::run(store, &cfg, &driver, Some(p)))
    })?;
    print!("{}", render_text(&report));
    Ok((bench, Some(report)))
}

impl YcsbArgs {
    /// The workload configuration the flags ask for, checked.
    pub(crate) fn config(&self) -> CliResult<ycsb::YcsbConfig> {
        let mut cfg = ycsb::YcsbConfig::new(self.workload.parse()?, self.records);
        if let Some(d) = &self.distribution {
            cfg.distribution = d.parse()?;
        }
        if let Some(n) = self.field_count {
            cfg.field_count = n;
        }
        if let Some(n) = self.field_length {
            cfg.field_length = n;
        }
        if let Some(o) = &self.insert_order {
            cfg.insert_order = o.parse()?;
        }
        if let Some(n) = self.zero_padding {
            cfg.zero_padding = n;
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

fn bench_tpcc(a: &TpccArgs) -> CliResult<()> {
    let mut cfg = tpcc::TpccConfig::new(a.warehouses);
    if let Some(n) = a.items {
        cfg.scale.items = n;
    }
    if let Some(n) = a.customers {
        cfg.scale.customers_per_district = n;
    }
    cfg.validate()?;
    let rampup = Duration::from_secs(5);
    let mut phase_limit = a.phase.duration.clone();
    if phase_limit.is_none() {
        phase_limit = Some("60s".parse().map_err(CliError::Usage)?);
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
    if let EngineChoice::Peer(kind) = a.engine.engine {
        return peer::bench_tpcc(a, kind, &cfg, &driver);
    }
    let ident = json!({ "workload": "tpcc", "warehouses": a.warehouses,
        "scale": format!("{:?}", cfg.scale) });
    let mut bench = Bench::open(&a.engine, &a.phase, ident)?;
    let after = match &a.crash_restart {
        Some(d) => {
            restart::check(&bench)?;
            let mut after = driver.clone();
            after.limit = RunLimit::Duration(d.duration());
            after.warmup = Duration::ZERO;
            Some(after)
        }
        None => None,
    };
    if !a.phase.run_only {
        let load = with_bar("load", |p| {
            tpcc::load(&bench.store, &cfg, a.phase.threads, a.engine.seed, Some(p))
        })?;
        eprint!("{}", render_load(&load));
        bench = bench.mark_loaded(&load)?;
    }
    let report = if a.phase.load_only {
        None
    } else {
        let r = bench.measure(driver.warmup, |store| {
            with_bar("run", |p| tpcc::run(store, &cfg, &driver, Some(p)))
        })?;
        print!("{}", render_text(&r));
        print!("{}", render_tpcc(&r));
        Some(r)
    };
    if a.check {
        let check = tpcc::check(&bench.store, a.warehouses)?;
        print!("{}", check.render());
        if !check.is_consistent() {
            bench.finish(report)?;
            return Err(CliError::CheckFailed(
                "TPC-C consistency check failed (see the violations above)".to_string(),
            ));
        }
    }
    let Some(after) = after.filter(|_| report.is_some()) else {
        return bench.finish(report);
    };
    let seed = a.engine.seed;
    bench.finish_then(
        report,
        Some(Box::new(move |store, opts| {
            restart::crash_and_rerun(store, opts, seed, |s| {
                with_bar("after restart", |p| tpcc::run(s, &cfg, &after, Some(p)))
            })
        })),
    )
}

fn bench_linkbench(a: &LinkbenchArgs) -> CliResult<()> {
    let mix = linkbench::LinkMix::from_arg(&a.mix)?;
    let cfg = linkbench::LinkbenchConfig::new(a.nodes, mix);
    cfg.validate()?;
    let driver = driver_config(&a.phase, &a.engine, a.requests, Duration::ZERO)?;
    if let EngineChoice::Peer(kind) = a.engine.engine {
        return peer::bench_linkbench(a, kind, &cfg, &driver);
    }
    let ident = json!({ "workload": "linkbench", "nodes": a.nodes });
    let mut bench = Bench::open(&a.engine, &a.phase, ident)?;
    if !a.phase.run_only {
        let load = with_bar("load", |p| {
            linkbench::load(&bench.store, &cfg, a.phase.threads, a.engine.seed, Some(p))
        })?;
        eprint!("{}", render_load(&load));
        bench = bench.mark_loaded(&load)?;
    }
    if a.phase.load_only {
        return bench.finish(None);
    }
    let report = bench.measure(driver.warmup, |store| {
        with_bar("run", |p| linkbench::run(store, &cfg, &driver, Some(p)))
    })?;
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
        (Some(d), None) => RunLimit::Duration(d.duration()),
        (None, Some(n)) => RunLimit::Ops(n),
        (None, None) => RunLimit::Ops(100_000),
    };
    let warmup = match &p.warmup {
        Some(w) => w.duration(),
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

/// `on` or `off`, for a switch flag with a default.
fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("'{s}': use on or off")),
    }
}
