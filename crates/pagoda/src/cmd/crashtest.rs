//! `pagoda crashtest`: concurrent transactions, power cuts at random points, recovery, checks.

use crate::error::{CliError, CliResult};
use crate::progress::Progress;
use crate::report::write_json;
use clap::Args;
use pagoda_crashtest::{self as crashtest, CrashTestOptions};
use pagoda_device::spec::{DeviceKind, DeviceSpec};
use pagoda_engine::{CommitMode, Sabotage, TornMode};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;

/// Flags of `crashtest`.
#[derive(Debug, Args)]
pub struct CrashtestArgs {
    /// Torn-write protection under test: doublewrite | atomic | none.
    #[arg(long)]
    torn: TornMode,
    /// Power-cut cycles.
    #[arg(long)]
    cycles: u64,
    /// Seed of every random choice; the same seed replays the same run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Commit mode: sync | pipelined (each worker keeps 4 commits in flight; only resolved
    /// tickets count as acknowledged, and a pending commit seen by a reader is a failure).
    #[arg(long, default_value = "sync")]
    commit: CommitMode,
    /// Emulated device for data and log (each gets its own), e.g. sata-ssd or mem.
    #[arg(long, default_value = "sata-ssd")]
    device: String,
    /// Concurrent transaction threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Page size.
    #[arg(long, default_value = "16KiB")]
    page_size: String,
    /// Buffer pool size (default 96 pages up to 8 KiB pages, else 48: small, so that pages are
    /// written back all the time).
    #[arg(long)]
    buffer: Option<String>,
    /// Remove one safety step of the engine on purpose (skip-log-sync, skip-doublewrite,
    /// ack-before-durable, skip-wal-rule, skip-checkpoint-flush, non-atomic-pages,
    /// visible-before-durable, redo-partial-writes, merge-unmarked-sibling, ignore-log-epoch):
    /// the crash test must then fail, which proves it can (ignore-log-epoch needs a rare
    /// alignment of two crashes; its deterministic proof is in the engine's log tests).
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
}

/// Runs the crash test; fails when the report shows loss or corruption the mode must prevent.
pub fn run(a: &CrashtestArgs) -> CliResult<()> {
    if a.cycles == 0 || a.threads == 0 {
        return Err(CliError::Usage(
            "--cycles and --threads must be at least 1".to_string(),
        ));
    }
    let page_size = pagoda_device::units::parse_size(&a.page_size)? as usize;
    let spec = DeviceSpec::parse(&a.device)?;
    // Fail on a device without power cuts before any cycle runs (and before creating files).
    let can_cut = !matches!(spec.kind, DeviceKind::File(_)) && spec.open()?.caps().power_cut;
    if !can_cut {
        return Err(CliError::Usage(format!(
            "--device {} cannot emulate a power cut; use an emulated SSD (sata-ssd, nvme-ssd) or mem",
            a.device
        )));
    }
    let progress = Arc::new(Mutex::new(Progress::new("crashtest", "cycles", a.cycles)));
    let bar = Arc::clone(&progress);
    let opts = CrashTestOptions {
        torn: a.torn,
        commit: a.commit,
        cycles: a.cycles,
        seed: a.seed,
        device: Some(spec.clone()),
        threads: a.threads,
        progress: Some(Box::new(move |done| bar.lock().set(done))),
        page_size,
        sabotage: a.sabotage,
        buffer_bytes: a
            .buffer
            .as_deref()
            .map(pagoda_device::units::parse_size)
            .transpose()?
            .map(|b| b as usize),
        stop_on_failure: !a.keep_going,
        replay_cycle: a.replay_cycle,
        ..CrashTestOptions::default()
    };
    opts.validate()?;
    if a.torn == TornMode::Atomic {
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
    let report = crashtest::run(opts)?;
    if let Ok(p) = Arc::try_unwrap(progress) {
        p.into_inner().finish();
    }
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
    for f in &report.failures {
        eprintln!("FAILED {f}");
    }
    println!("{}", report.summary_line());
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    if report.failed(a.torn) {
        let sab = a
            .sabotage
            .map_or(String::new(), |s| format!(" with --sabotage {s}"));
        return Err(CliError::CheckFailed(format!(
            "crashtest failed for --torn {}{sab} (seed {}): see the failures above",
            a.torn, a.seed
        )));
    }
    Ok(())
}
