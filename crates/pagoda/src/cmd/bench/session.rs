//! The database of one benchmark: opening it from the engine flags (flash cache included),
//! checking that a persistent database holds what the run expects, and reporting at the end.

use super::devices::DevicePlan;
use super::flash::{self, FlashPlan};
use super::{summary, EngineArgs, PhaseArgs};
use crate::error::{CliError, CliResult};
use crate::report::write_json;
use crate::units::Size;
use pagoda_device::DeviceRef;
use pagoda_engine::{CommitMode, Db, DbOptions};
use pagoda_peers::PagodaStore;
use pagoda_workload::{LoadReport, RunReport, Store, WorkloadError};
use parking_lot::{Condvar, Mutex};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// An open database for a benchmark, with what it needs to report and to check that a
/// persistent database holds what the run expects.
pub(crate) struct Bench {
    pub(crate) store: PagodaStore,
    ident: Value,
    config: Value,
    json: Option<PathBuf>,
    _tmp: Option<tempfile::TempDir>,
    /// With `--load-buffer`: the options to reopen the database with for the measured run.
    reopen: Option<DbOptions>,
    /// The options of the measured run (`--crash-restart` reopens with them).
    run_opts: DbOptions,
    /// CPU utilisation of the measured run.
    pub(crate) cpu: Option<pagoda_engine::stats::CpuUsage>,
    /// What bounded the measured run (see [`super::regime`]).
    regime: Option<Value>,
    /// The load's timing ([`summary::load_json`]), when this process loaded.
    load: Option<Value>,
    /// With `--fast-load`: the devices whose latency is paused until the load is done.
    paused: Vec<DeviceRef>,
    /// The first `Db::open` of this process, whole (files created, recovery), in ms.
    open_ms: f64,
}

/// Table and key where a persistent database records what was loaded into it.
const META_TABLE: &str = "_pagoda_bench";
const META_KEY: &[u8] = b"loaded";

impl Bench {
    pub(super) fn open(e: &EngineArgs, p: &PhaseArgs, ident: Value) -> CliResult<Self> {
        check_buffer_fits(e)?;
        let devices = DevicePlan::of(e, p)?;
        let (tmp, dir) = work_dir(e)?;
        let buffer = e.buffer.bytes();
        let load_buffer = e.load_buffer.as_ref().map(Size::bytes);
        let log_size = e.log_size.as_ref().map(Size::bytes);
        // The cache device first: a device string it refuses leaves no data or log file behind.
        let flash_opts = devices.flash.as_ref().map(FlashPlan::open).transpose()?;
        let mut opts = devices
            .options(e, &dir)?
            .page_size(e.page_size.bytes() as usize)
            .buffer_bytes(buffer as usize)
            .torn(e.torn)
            .commit(e.commit)
            .lazy_flush_interval(e.lazy_flush.duration())
            .commit_gather(e.commit_gather)
            .checkpoint_pacing(e.checkpoint_pacing)
            .background(!e.no_background);
        if let Some(fc) = flash_opts {
            opts = opts.flash_cache(fc);
        }
        if let Some(size) = log_size {
            opts = opts.log_capacity(size);
        }
        let reopen = load_buffer.map(|_| opts.clone());
        let run_opts = opts.clone();
        let paused: Vec<DeviceRef> = if e.fast_load {
            opts.devices()
        } else {
            Vec::new()
        };
        for d in &paused {
            d.pause_timing(true);
        }
        let t_open = Instant::now();
        let db = Db::open(match load_buffer {
            Some(b) => opts.buffer_bytes(b as usize),
            None => opts,
        })?;
        let open_ms = t_open.elapsed().as_secs_f64() * 1000.0;
        let (dd, ld) = devices.names(e, &dir);
        let describe = format!(
            "pagoda(data={dd}, log={ld}, {}buffer={}, page={}, torn={}, commit={:?})",
            devices
                .flash
                .as_ref()
                .map_or_else(String::new, |f| format!("{}, ", f.describe())),
            e.buffer,
            e.page_size,
            e.torn,
            e.commit
        );
        eprintln!("engine: {describe}");
        let bench = Self {
            store: PagodaStore::new(db, describe),
            ident,
            config: config_json(e, p, &devices, (dd, ld)),
            json: e.json.clone(),
            _tmp: tmp,
            reopen,
            run_opts,
            cpu: None,
            regime: None,
            load: None,
            paused,
            open_ms,
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
        let v = tx.open_table(META_TABLE)?.get(META_KEY)?;
        Ok(v.and_then(|b| serde_json::from_slice(&b).ok()))
    }

    /// Before any work: a run-only database must hold exactly what this run asks for; a load
    /// must not go into a database that is already loaded.
    fn check_loaded(&self, run_only: bool, dir: &Path) -> CliResult<()> {
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

    /// Records the load in the database and checkpoints it (the load may have spilled past
    /// the buffer: the checkpoint writes it out and trims the pool to its budget, so the run
    /// starts with the buffer it asked for). With `--load-buffer`, then closes the database
    /// and opens it again with `--buffer` on the same devices, their counters zeroed: the
    /// run's engine and device figures then cover the run alone.
    ///
    /// The load is timed two ways from process start: to its last acknowledged commit (now),
    /// and to its data durable on disk (after [`Store::make_durable`], a checkpoint).
    pub(super) fn mark_loaded(mut self, load: &LoadReport) -> CliResult<Self> {
        let acked_s = super::since_start();
        let t = Instant::now();
        self.store
            .make_durable()
            .map_err(|e| CliError::Workload(WorkloadError::store("checkpointing the load", e)))?;
        let timing = summary::LoadTiming {
            open_ms: self.open_ms,
            acked_s,
            durable_s: super::since_start(),
            make_durable_s: t.elapsed().as_secs_f64(),
        };
        eprintln!("{}", summary::load_line(load, &timing));
        let mut load_json = summary::load_json(load, &timing);
        if !self.paused.is_empty() {
            load_json["device_latency"] = json!("paused (--fast-load): not emulated times");
        }
        self.load = Some(load_json);
        let db = self.store.db();
        if !db.list_tables().iter().any(|t| t == META_TABLE) {
            db.create_table(META_TABLE)?;
        }
        let tx = db.begin_write()?;
        tx.open_table(META_TABLE)?
            .put(META_KEY, self.ident.to_string().as_bytes())?;
        tx.commit()?;
        db.checkpoint()?;
        let Some(opts) = self.reopen.take() else {
            self.resume_timing();
            return Ok(self);
        };
        let describe = self.store.describe().to_string();
        self.store.close()?;
        for dev in opts.devices() {
            dev.reset_stats();
        }
        self.store = PagodaStore::new(Db::open(opts)?, describe);
        self.resume_timing();
        Ok(self)
    }

    /// Ends `--fast-load`: the measured run waits for every modeled delay again.
    fn resume_timing(&mut self) {
        for d in self.paused.drain(..) {
            d.pause_timing(false);
        }
    }

    /// Runs the measured phase `f`, recording its CPU use and its regime (device busy
    /// fractions, buffer hit ratio, the bottleneck) over exactly the driver's measured window:
    /// the open's log scan, the load and the first `warmup` of `f` stay out of it.
    pub(crate) fn measure<T>(
        &mut self,
        warmup: Duration,
        f: impl FnOnce(&PagodaStore) -> CliResult<T>,
    ) -> CliResult<T> {
        // A load that did not go through `mark_loaded` still must not leave timing paused.
        self.resume_timing();
        let db = self.store.db();
        // The phase profile covers the same window (a TPC-C load's commits stay out).
        let mark = || {
            db.reset_profile();
            (
                super::regime::Snapshot::take(db),
                pagoda_engine::stats::CpuClock::start(),
            )
        };
        let start = Mutex::new(mark());
        let done = (Mutex::new(false), Condvar::new());
        let out = std::thread::scope(|s| {
            if !warmup.is_zero() {
                // The driver measures from `warmup` after it starts; a run that ends sooner
                // (an operation count) keeps the whole run as its window.
                s.spawn(|| {
                    let until = Instant::now() + warmup;
                    let mut finished = done.0.lock();
                    while !*finished && !done.1.wait_until(&mut finished, until).timed_out() {}
                    if !*finished {
                        *start.lock() = mark();
                    }
                });
            }
            let out = f(&self.store);
            *done.0.lock() = true;
            done.1.notify_all();
            out
        })?;
        let (before, cpu) = start.into_inner();
        let usage = cpu.usage();
        let after = super::regime::Snapshot::take(self.store.db());
        self.regime = Some(super::regime::describe(&before, &after, &usage));
        self.cpu = Some(usage);
        Ok(out)
    }

    /// Closes the database without reporting (a caller that reports on its own).
    pub(crate) fn close(self) -> CliResult<()> {
        self.store.close()?;
        Ok(())
    }

    /// The options of the measured run.
    pub(super) fn run_options(&self) -> &DbOptions {
        &self.run_opts
    }

    /// Prints the engine and device counters, writes the JSON, closes the database.
    pub(super) fn finish(self, report: Option<RunReport>) -> CliResult<()> {
        self.finish_then(report, None)
    }

    /// As [`Bench::finish`], with `then` run on the store once the run's figures are taken
    /// (`--crash-restart`): what it returns goes into the JSON under `restart`.
    pub(super) fn finish_then(
        mut self,
        report: Option<RunReport>,
        then: Option<Then<'_>>,
    ) -> CliResult<()> {
        let stats = self.store.db().stats();
        let (data, log) = self.store.db().device_stats();
        let flash_dev = self.store.db().flash_device_stats();
        eprintln!(
            "engine: buffer hit ratio {:.4}, buffer reads {}, writes {}; commits {}, log syncs {} ({:.1} commits/sync); checkpoints {} ({} paced)",
            stats.buffer.hit_ratio,
            stats.buffer.reads,
            stats.buffer.writes,
            stats.commits,
            stats.log_syncs,
            stats.commits_per_sync,
            stats.checkpoints,
            stats.paced_checkpoints
        );
        let flash_line = flash_dev.as_ref().map_or_else(String::new, |f| {
            format!(
                "; flash cache {} host writes, {} reads, WAF {:.2}",
                f.host_write_pages, f.host_read_pages, f.waf
            )
        });
        eprintln!(
            "devices: data {} host writes (4 KiB), {} reads, WAF {:.2}; log {} host writes{flash_line}",
            data.host_write_pages, data.host_read_pages, data.waf, log.host_write_pages
        );
        print!("{}", summary::render(&stats, flash_dev.as_ref()));
        if report.is_some() {
            println!("phase profile (commit mode {}):", stats.commit_mode);
            print!("{}", stats.profile.render());
        }
        if let Some(c) = &self.cpu {
            println!("{}", summary::cpu_line(c));
        }
        if let Some(r) = &mut self.regime {
            super::regime::add_phases(r, &stats.profile);
            println!("{}", super::regime::line(r));
        }
        let mut store = self.store;
        let restart = match then {
            Some(f) => {
                let (s, v) = f(store, &self.run_opts)?;
                store = s;
                Some(v)
            }
            None => None,
        };
        if let Some(l) = &self.load {
            print!("{}", summary::render_load(l));
        }
        if let (Some(path), None, Some(l)) = (&self.json, &report, &self.load) {
            // --load-only: the load is the result.
            let v =
                serde_json::json!({ "command": "bench load", "config": self.config, "load": l });
            write_json(path, &v)?;
            eprintln!("wrote {}", path.display());
        }
        if let (Some(path), Some(r)) = (&self.json, &report) {
            let mut devices = json!({ "data": data, "log": log });
            if let (Some(d), Some(f)) = (devices.as_object_mut(), &flash_dev) {
                d.insert("flash_cache".to_string(), json!(f));
            }
            let mut keys = vec![("devices", devices), ("profile", json!(stats.profile))];
            if let Some(c) = &self.cpu {
                keys.push(("cpu", json!(c)));
            }
            if let Some(r) = &self.regime {
                keys.push(("regime", r.clone()));
            }
            if let Some(r) = restart {
                keys.push(("restart", r));
            }
            if let Some(l) = &self.load {
                keys.push(("load", l.clone()));
            }
            let v = summary::report_json(r, &self.config, keys)?;
            write_json(path, &v)?;
            eprintln!("wrote {}", path.display());
        }
        store.close()?;
        Ok(())
    }
}

/// Work run on the store after the measured run's figures are taken (see
/// [`Bench::finish_then`]): returns the store to close and a JSON object.
pub(super) type Then<'a> =
    Box<dyn FnOnce(PagodaStore, &DbOptions) -> CliResult<(PagodaStore, Value)> + 'a>;

/// Physical memory from /proc/meminfo (None where it cannot be read).
fn total_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A buffer larger than the machine's memory, refused before anything is opened (flags
/// that contradict each other clap refuses).
fn check_buffer_fits(e: &EngineArgs) -> CliResult<()> {
    if let Some(mem) = total_memory_bytes() {
        if e.buffer.bytes() >= mem {
            return Err(CliError::Usage(format!(
                "--buffer {} is larger than this machine's memory ({} MiB); give a smaller buffer",
                e.buffer,
                mem >> 20
            )));
        }
    }
    Ok(())
}

/// The directory of the run's files: --dir, else a temporary one removed at exit.
fn work_dir(e: &EngineArgs) -> CliResult<(Option<tempfile::TempDir>, PathBuf)> {
    Ok(match &e.dir {
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
    })
}

/// The report's `config`: the engine flags as run, the devices by name, the flash cache.
fn config_json(
    e: &EngineArgs,
    p: &PhaseArgs,
    devices: &DevicePlan,
    names: (String, String),
) -> Value {
    // What the comparison of commit modes holds equal: a sync thread has one commit in
    // flight; a pipelined one up to its depth (window.rs in pagoda-workload).
    let in_flight = match e.commit {
        // A lazy commit returns before it is durable: one call in flight, none waited on.
        CommitMode::Sync | CommitMode::Lazy => 1,
        CommitMode::Pipelined => e.pipeline_depth.max(1),
    };
    let (dd, ld) = names;
    let mut config = json!({
        "dir": e.dir, "data": dd, "log": ld, "buffer_bytes": e.buffer.bytes(), "load_buffer_bytes": e.load_buffer.as_ref().map(Size::bytes), "fast_load": e.fast_load, "background": !e.no_background,
        "page_size": e.page_size.bytes(), "torn": e.torn.to_string(), "commit": e.commit.to_string(), "pipeline_depth": e.pipeline_depth, "lazy_flush": e.lazy_flush, "commit_gather": e.commit_gather, "checkpoint_pacing": e.checkpoint_pacing, "log_size": e.log_size,
        "commits_in_flight_per_thread": in_flight,
        "seed": e.seed, "threads": p.threads, "load_only": p.load_only, "run_only": p.run_only,
    });
    let flash_config = devices
        .flash
        .as_ref()
        .map_or_else(flash::no_cache_config_json, FlashPlan::config_json);
    if let (Some(c), Some(fc)) = (config.as_object_mut(), flash_config.as_object()) {
        c.extend(fc.clone());
    }
    config
}
