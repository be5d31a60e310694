//! The crash tester's flags and run: concurrent transactions, power cuts at random points,
//! recovery, checks.

use crate::publish;
use clap::Args;
use pagoda::cli::error::{CliError, CliResult};
use pagoda::cli::flash::FlashCacheFlags;
use pagoda::cli::progress::Progress;
use pagoda::cli::report::write_json;
use pagoda::cli::units::{at_least_one, Size};
use pagoda_crashtest::{
    self as crashtest, CrashFlashCache, CrashTestOptions, CrashTestReport, FaultKind, Sabotage,
};
use pagoda_device::spec::{DeviceKind, DeviceSpec};
use pagoda_device::units::format_size;
use pagoda_engine::{CommitMode, TornMode};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;

/// Flags of `crashtest`.
#[derive(Debug, Args)]
pub struct CrashtestArgs {
    /// Torn-write protection under test: doublewrite | doublewrite-full | atomic | none
    /// (default: doublewrite; none with --flash-cache, which replaces the double-write buffer).
    #[arg(long)]
    torn: Option<TornMode>,
    /// Power-cut cycles.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    cycles: u64,
    /// Seed of every random choice; the same seed replays the same run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Commit mode: sync | pipelined (each worker keeps 4 commits in flight; only resolved
    /// tickets count as acknowledged, and a pending commit seen by a reader is a failure) |
    /// lazy (commits return before they are durable: a cut may lose acknowledged commits, but
    /// only a suffix of the commit order; one lost while a later one survived is a failure).
    #[arg(long, default_value = "sync")]
    commit: CommitMode,
    /// Emulated device for data and log (each gets its own), e.g. sata-ssd or mem.
    #[arg(long, default_value = "sata-ssd")]
    device: String,
    /// Concurrent transaction threads.
    #[arg(long, default_value_t = 4, value_parser = at_least_one())]
    threads: usize,
    /// Page size.
    #[arg(long, default_value = "16KiB")]
    page_size: Size,
    /// Buffer pool size (default 96 pages up to 8 KiB pages, else 48: small, so that pages are
    /// written back all the time).
    #[arg(long)]
    buffer: Option<Size>,
    /// Remove one safety step of the engine on purpose (skip-log-sync, skip-doublewrite,
    /// ack-before-durable, ack-before-sync (with --threads 2 or more), skip-wal-rule,
    /// skip-checkpoint-flush, non-atomic-pages,
    /// visible-before-durable, redo-partial-writes, merge-unmarked-sibling, ignore-log-epoch,
    /// drop-ops-of-imaged-records, doublewrite-old-images, doublewrite-stale-copy;
    /// with --commit lazy: salvage-torn-log; with --sparse-log and --threads 2 or more:
    /// write-log-past-ready; with --flash-cache: flash-unsynced-writeback, flash-trust-torn-slots;
    /// with --faults: trust-page-checksum and log-damage-as-tail (bitrot), trust-page-id (misdirected),
    /// retry-failed-log-sync and write-out-after-failure (fsync-fail; the latter with
    /// --threads 2 or more), ignore-write-error and ignore-log-write-error
    /// (eio-write, enospc),
    /// ignore-read-error (eio-read), superblock-one-copy (bitrot; caught within a few dozen
    /// cycles with --log-size 256KiB); with --flash-cache and --faults eio-write:
    /// flash-write-after-failure): the crash test
    /// must then fail, which proves it can (ignore-log-epoch needs a rare alignment of two
    /// crashes, doublewrite-stale-copy a stale copy left in the double-write area over a
    /// damaged page, about once in 18,000 cycles with --faults bitrot --log-size 256KiB;
    /// their deterministic proofs are in the engine's tests).
    #[arg(long)]
    sabotage: Option<Sabotage>,
    /// Run up to this cycle of the seed's run and report it in full (use the seed and flags of
    /// the failing run; exact with --threads 1).
    #[arg(long)]
    replay_cycle: Option<u64>,
    /// Keep going after a failed cycle (default: stop at the first).
    #[arg(long)]
    keep_going: bool,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Append this run's row (flags, counters, verdict, date, commit) to the Markdown page
    /// FILE, creating it with the machine's description first: how `docs/results/crashtest.md`
    /// is made. A file that a crashtest did not write is refused before the run.
    #[arg(long, value_name = "FILE")]
    publish: Option<PathBuf>,
    #[command(flatten)]
    flash: FlashCacheFlags,
    /// Faults beyond power cuts, comma-separated (or all): bitrot, eio-read, eio-write,
    /// misdirected, lost-write (undetectable, counted apart), fsync-fail, enospc. One is armed
    /// on the data or log device in a share of the cycles (--fault-chance); workers then also
    /// check every value they read.
    #[arg(long, value_name = "LIST")]
    faults: Option<String>,
    /// Share of the cycles in which a fault is armed (with --faults).
    #[arg(long, value_name = "P", default_value_t = 0.5)]
    fault_chance: f64,
    /// Take the log device as sparse at every open: the engine writes zeros ahead of its log
    /// writer while the workload runs (as it does for a new log file), and power cuts meet
    /// those writes too.
    #[arg(long)]
    sparse_log: bool,
    /// Size of the log ring (at least 256KiB): a small one wraps within a few cycles, so the
    /// log before an older checkpoint is reused often.
    #[arg(long, value_name = "SIZE", default_value = "1MiB")]
    log_size: Size,
}

/// Whether the device `spec` names can have its power cut (refused before anything is created).
fn refuse_without_power_cut(flag: &str, text: &str, spec: &DeviceSpec) -> CliResult<()> {
    let file = matches!(spec.kind, DeviceKind::File(_));
    let can_cut = !file && spec.open()?.caps().power_cut;
    if !can_cut {
        // A real file cannot lose power on its own; the script kills a writer on one instead.
        let real = if file {
            " (for real files, `scripts/xfs-atomic.sh kill` SIGKILLs a --torn atomic writer on XFS \
             and checks the reopened database)"
        } else {
            ""
        };
        return Err(CliError::Usage(format!(
            "{flag} {text} cannot emulate a power cut; use an emulated SSD (sata-ssd, nvme-ssd) or mem{real}"
        )));
    }
    Ok(())
}

/// The flash cache of the flags, if any (clap refused its other flags without
/// `--flash-cache`).
fn flash_cache(a: &CrashtestArgs) -> CliResult<Option<CrashFlashCache>> {
    let Some(text) = &a.flash.device else {
        return Ok(None);
    };
    let spec = DeviceSpec::parse(text)?;
    refuse_without_power_cut("--flash-cache", text, &spec)?;
    Ok(Some(CrashFlashCache {
        device: Some(spec),
        size_bytes: a.flash.size_bytes()?,
        policy: a.flash.policy(),
        pages: a.flash.pages(),
    }))
}

/// The flash cache's counters, for the text summary on stderr.
fn print_flash(report: &CrashTestReport) {
    let Some(f) = &report.flash else { return };
    eprintln!(
        "flash cache {} ({} pages, {}): stale versions served {}, slots checked {}, \
         rebuilds (warm starts) {}, cold starts {}, pages found in flash {}, ring segments rebuilt {}",
        f.policy,
        f.pages,
        format_size(f.size_bytes),
        f.stale_versions_served,
        f.slots_checked,
        f.rebuilds,
        f.cold_starts,
        f.rebuild_pages,
        f.rebuild_segments
    );
    eprintln!(
        "  write-backs {}, ring page writes {}, directory checkpoints {}, GSC re-appends {}, \
         flash hits {}, corrupt slots {}",
        f.write_backs,
        f.ring_page_writes,
        f.dir_checkpoints,
        f.gsc_reappends,
        f.hits,
        f.corrupt_slots
    );
    eprintln!(
        "  cuts during flash append {}, write-back {}, directory checkpoint {}, rebuild {}",
        f.cuts_append, f.cuts_write_back, f.cuts_dir_checkpoint, f.cuts_rebuild
    );
}

/// What the injected faults did, by kind, for the text summary on stderr.
fn print_faults(report: &CrashTestReport) {
    for (kind, c) in &report.faults {
        eprintln!(
            "fault {kind}: injected {}, fired {}, detected {}, fired in recovery {} (reported \
             there {}), repaired {}, restored {}, checked {}, unverified {}, databases re-created \
             {}, unreported {}, undetectable {}",
            c.injected,
            c.fired,
            c.detected,
            c.at_recovery,
            c.detected_at_recovery,
            c.repaired,
            c.restored,
            c.checked,
            c.unverified,
            c.resets,
            c.unreported,
            c.undetectable
        );
    }
    for (kind, c) in &report.faults {
        eprintln!(
            "  {kind} fired/armed by target: {}",
            pagoda_crashtest::by_target(c)
        );
    }
    if !report.faults.is_empty() {
        eprintln!(
            "cycles with two faults (one per device) {}; opens failed by a fault still armed {}",
            report.two_fault_cycles, report.opens_failed_by_faults
        );
        eprintln!("wrong values read {}", report.wrong_values);
    }
    for (how, n) in &report.verification {
        eprintln!("cycles {how}: {n}");
    }
}

/// Runs the crash test; fails when the report shows loss or corruption the mode must prevent.
pub fn run(a: &CrashtestArgs) -> CliResult<()> {
    let mut opts = options(a)?;
    let progress = Arc::new(Mutex::new(Progress::new("crashtest", "cycles", a.cycles)));
    let bar = Arc::clone(&progress);
    opts.progress = Some(Box::new(move |done| bar.lock().set(done)));
    let torn = opts.torn;
    let report = crashtest::run(opts)?;
    if let Ok(p) = Arc::try_unwrap(progress) {
        p.into_inner().finish();
    }
    print_report(&report);
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    let failed = report.failed(torn);
    if let Some(path) = &a.publish {
        publish::append(path, &report, failed)?;
        eprintln!(
            "added a row ({}) to {}",
            publish::verdict(&report, failed),
            path.display()
        );
    }
    if failed {
        let flash = a
            .flash
            .device
            .as_ref()
            .map_or(String::new(), |d| format!(" --flash-cache {d}"));
        let sab = a
            .sabotage
            .map_or(String::new(), |s| format!(" with --sabotage {s}"));
        return Err(CliError::CheckFailed(format!(
            "crashtest failed for --torn {torn}{flash}{sab} (seed {}): see the failures above",
            a.seed
        )));
    }
    Ok(())
}

/// The crash test the flags ask for, checked before any cycle runs (and before any file is
/// created): a device that can lose power, a valid configuration, a --publish file of the
/// right kind, and for atomic writes a device whose atomic unit is the page.
fn options(a: &CrashtestArgs) -> CliResult<CrashTestOptions> {
    let page_size = usize::try_from(a.page_size.bytes()).unwrap_or(usize::MAX);
    let spec = DeviceSpec::parse(&a.device)?;
    refuse_without_power_cut("--device", &a.device, &spec)?;
    let flash = flash_cache(a)?;
    let faults = a
        .faults
        .as_deref()
        .map(FaultKind::parse_list)
        .transpose()?
        .unwrap_or_default();
    // A flash cache replaces the double-write buffer: its default torn mode is none. (An
    // explicit --torn doublewrite reaches the engine, which says why it refuses.)
    let torn = a.torn.unwrap_or(if flash.is_some() {
        TornMode::None
    } else {
        TornMode::Doublewrite
    });
    let opts = CrashTestOptions {
        torn,
        commit: a.commit,
        cycles: a.cycles,
        seed: a.seed,
        device: Some(spec.clone()),
        threads: a.threads,
        page_size,
        sabotage: a.sabotage,
        buffer_bytes: a
            .buffer
            .as_ref()
            .map(|b| usize::try_from(b.bytes()).unwrap_or(usize::MAX)),
        stop_on_failure: !a.keep_going,
        replay_cycle: a.replay_cycle,
        flash_cache: flash,
        faults,
        fault_chance: a.fault_chance,
        sparse_log: a.sparse_log,
        log_bytes: a.log_size.bytes(),
        ..CrashTestOptions::default()
    };
    opts.validate()?;
    if let Some(p) = &a.publish {
        publish::check(p, !opts.faults.is_empty())?;
    }
    if torn == TornMode::Atomic {
        let unit = spec.open()?.caps().atomic_write_unit;
        if unit != Some(page_size) {
            return Err(CliError::Usage(format!(
                "--torn atomic needs a device whose atomic write unit is the page size ({page_size} bytes); \
                 --device {} offers {}; use --torn doublewrite, or a device with atomic={page_size}",
                a.device,
                unit.map_or("none".to_string(), |u| format!("{u} bytes"))
            )));
        }
    }
    Ok(opts)
}

/// The run's counters on stderr, its failures, and its summary line on stdout.
fn print_report(report: &CrashTestReport) {
    eprintln!(
        "acknowledged commits {}, cuts mid-checkpoint {}, cuts mid-double-write {}, undetected torn {}, \
         partial transactions {}, isolation violations {}, sectors torn at 512 B {}",
        report.commits_acknowledged,
        report.cuts_mid_checkpoint,
        report.cuts_mid_doublewrite,
        report.undetected_torn,
        report.partial_transactions,
        report.isolation_violations,
        report.torn_512_sectors
    );
    for (phase, n) in &report.cut_phases {
        eprintln!("  cuts during {phase}: {n}");
    }
    print_flash(report);
    print_faults(report);
    for f in &report.failures {
        eprintln!("FAILED {f}");
    }
    println!("{}", report.summary_line());
}
