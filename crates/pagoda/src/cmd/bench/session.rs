//! The database of one benchmark: opening it from the engine flags (flash cache included),
//! checking that a persistent database holds what the run expects, and reporting at the end.

use super::flash::{self, FlashPlan};
use super::log_partition;
use super::{summary, EngineArgs, PhaseArgs};
use crate::error::{CliError, CliResult};
use crate::report::write_json;
use crate::units::Size;
use pagoda::store::PagodaStore;
use pagoda_device::spec::{DeviceKind, DeviceSpec};
use pagoda_device::DeviceRef;
use pagoda_engine::{CommitMode, Db, DbOptions, TornMode};
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
        let buffer = e.buffer.bytes();
        let load_buffer = e.load_buffer.as_ref().map(Size::bytes);
        let log_size = e.log_size.as_ref().map(Size::bytes);
        if load_buffer.is_some() && p.run_only {
            return Err(CliError::Usage(
                "--load-buffer applies to the load; a --run-only run has none: drop it".to_string(),
            ));
        }
        if e.fast_load && p.run_only {
            return Err(CliError::Usage(
                "--fast-load applies to the load; a --run-only run has none: drop it".to_string(),
            ));
        }
        let page_size = e.page_size.bytes();
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
        let log_part = log_partition::parse(e.log.as_deref())?;
        log_partition::check(log_part, data.as_ref())?;
        let log = match log_part {
            Some(_) => None,
            None => e.log.as_deref().map(DeviceSpec::parse).transpose()?,
        };
        let flash = e.flash.plan()?;
        let emulated = |s: &Option<DeviceSpec>| {
            s.as_ref()
                .is_some_and(|s| !matches!(s.kind, DeviceKind::File(_)))
        };
        // Without --dir, a file goes to a temporary directory removed at exit: the data file
        // when --data is not given, the log file when --data is a file and --log is not.
        let file_data = data
            .as_ref()
            .is_some_and(|s| matches!(s.kind, DeviceKind::File(_)));
        if (p.load_only || p.run_only)
            && e.dir.is_none()
            && (data.is_none() || (file_data && log.is_none()))
        {
            return Err(CliError::Usage(
                "--load-only and --run-only need a persistent database: give --dir PATH \
                 (or file: devices for both --data and --log)"
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
        if let Some(f) = &flash {
            // The files data and log will use, as opened below (a temporary directory is new
            // and cannot hold the cache's file).
            let in_dir = |name: &str| e.dir.iter().map(|d| d.join(name)).collect::<Vec<_>>();
            let data_files = data
                .as_ref()
                .map_or_else(|| in_dir("data.pagoda"), flash::device_files);
            let log_files = match (&log, &data) {
                (Some(l), _) => flash::device_files(l),
                (None, Some(d)) if emulated(&data) || log_part.is_some() => flash::device_files(d),
                _ => in_dir("log.pagoda"),
            };
            f.check_own_device(&data_files, &log_files)?;
            if let Some(note) = f.phase_note(p) {
                eprintln!("{note}");
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
        // The cache device first: a device string it refuses leaves no data or log file behind.
        let flash_opts = flash.as_ref().map(FlashPlan::open).transpose()?;
        // `--torn atomic` on a file: the data file asks for atomic writes of one page (the
        // engine's own files under --dir do the same in the engine).
        let data = data.map(|d| atomic_pages(d, e.torn, page_size));
        let opts = match (&data, &log) {
            (None, None) => DbOptions::in_dir(&dir),
            (Some(d), _) if log_part.is_some() => {
                let (data_dev, log_dev) = log_partition::open(d, log_part.unwrap_or_default())?;
                DbOptions::with_devices(data_dev, log_dev)
            }
            (Some(d), l) => {
                let log = match l {
                    Some(l) => l.clone(),
                    None if !matches!(d.kind, DeviceKind::File(_)) => d.clone(),
                    None => {
                        DeviceSpec::parse(&format!("file:{}", dir.join("log.pagoda").display()))?
                    }
                };
                DbOptions::with_devices(d.open()?, open_log(&log, buffer, log_size)?)
            }
            (None, Some(l)) => DbOptions::with_devices(
                atomic_pages(
                    DeviceSpec::parse(&format!("file:{}", dir.join("data.pagoda").display()))?,
                    e.torn,
                    page_size,
                )
                .open()?,
                open_log(l, buffer, log_size)?,
            ),
        };
        let mut opts = opts
            .page_size(page_size as usize)
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
            "pagoda(data={dd}, log={ld}, {}buffer={}, page={}, torn={}, commit={:?})",
            flash
                .as_ref()
                .map_or_else(String::new, |f| format!("{}, ", f.describe())),
            e.buffer,
            e.page_size,
            e.torn,
            e.commit
        );
        eprintln!("engine: {describe}");
        let store = PagodaStore::new(db, describe);
        // What the comparison of commit modes holds equal: a sync thread has one commit in
        // flight; a pipelined one up to its depth (window.rs in pagoda-workload).
        let in_flight = match e.commit {
            // A lazy commit returns before it is durable: one call in flight, none waited on.
            CommitMode::Sync | CommitMode::Lazy => 1,
            CommitMode::Pipelined => e.pipeline_depth.max(1),
        };
        let mut config = json!({
            "dir": e.dir, "data": dd, "log": ld, "buffer_bytes": buffer, "load_buffer_bytes": load_buffer, "fast_load": e.fast_load, "background": !e.no_background,
            "page_size": page_size, "torn": e.torn.to_string(), "commit": e.commit.to_string(), "pipeline_depth": e.pipeline_depth, "lazy_flush": e.lazy_flush, "commit_gather": e.commit_gather, "checkpoint_pacing": e.checkpoint_pacing, "log_size": e.log_size,
            "commits_in_flight_per_thread": in_flight,
            "seed": e.seed, "threads": p.threads, "load_only": p.load_only, "run_only": p.run_only,
        });
        let flash_config = flash
            .as_ref()
            .map_or_else(flash::no_cache_config_json, FlashPlan::config_json);
        if let (Some(c), Some(fc)) = (config.as_object_mut(), flash_config.as_object()) {
            c.extend(fc.clone());
        }
        let bench = Self {
            store,
            ident,
            config,
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

/// Opens the log device. A new `file:` log without a capacity is written out with zeros first,
/// sized as the engine sizes its own (`DbOptions::new_log_file_bytes`: `--log-size`, else
/// `buffer` up to 1 GiB): appending
/// to a sparse file allocates blocks, and every fdatasync then commits file-system metadata
/// too (on this machine's ext4 that halved single-thread durable commits). An existing file
/// keeps its size. Without a `direct` key the log is opened with O_DIRECT where the file
/// system allows it.
fn open_log(
    spec: &DeviceSpec,
    buffer: u64,
    log_size: Option<u64>,
) -> CliResult<pagoda_device::DeviceRef> {
    let DeviceKind::File(path) = &spec.kind else {
        return Ok(spec.open()?);
    };
    if spec.options.iter().any(|(k, _)| k == "capacity") || is_block_device(path) {
        return Ok(spec.open()?);
    }
    let bytes = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(_) => {
            let mut o =
                DbOptions::default().buffer_bytes(usize::try_from(buffer).unwrap_or(usize::MAX));
            if let Some(size) = log_size {
                o = o.log_capacity(size);
            }
            let bytes = o.new_log_file_bytes() + 4096;
            pagoda_engine::files::preallocate_log_file(path, bytes)?;
            bytes
        }
    };
    let spec = spec.clone().with("capacity", bytes / 4096 * 4096);
    if spec.options.iter().any(|(k, _)| k == "direct") {
        return Ok(spec.open()?);
    }
    // As `DbOptions::in_dir` does: O_DIRECT where the file system allows it (not tmpfs).
    Ok(spec
        .clone()
        .with("direct", 1)
        .open()
        .or_else(|_| spec.open())?)
}

fn is_block_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

/// With `--torn atomic`, a `file:` data device that names no atomic unit gets `atomic=PAGE`:
/// the file device then writes each page with RWF_ATOMIC (O_DIRECT), or its open says what
/// statx reported and where to get a file system that offers atomic writes.
fn atomic_pages(spec: DeviceSpec, torn: TornMode, page_size: u64) -> DeviceSpec {
    let names_unit = spec.options.iter().any(|(k, _)| k == "atomic");
    if torn == TornMode::Atomic && matches!(spec.kind, DeviceKind::File(_)) && !names_unit {
        spec.with("atomic", page_size)
    } else {
        spec
    }
}
