//! Checks the crash-test suites share.

// Each test binary uses only some of these helpers.
#![allow(dead_code)]

use pagoda_crashtest::{run, CrashTestOptions, CrashTestReport, Failure, FindingKind, Sabotage};
use pagoda_engine::Result;

/// The seed of the suites: `PAGODA_SEED`, or 0x5eed.
pub fn seed() -> u64 {
    std::env::var("PAGODA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed)
}

/// `n` cycles, or `PAGODA_CRASH_CYCLES`.
pub fn cycles(n: u64) -> u64 {
    std::env::var("PAGODA_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(n)
}

/// The run exercised what it claims to check: more acknowledged and checked transactions
/// than cycles, and at least one power cut during recovery.
pub fn assert_exercised(report: &CrashTestReport, cycles: u64) {
    assert!(
        report.commits_acknowledged > cycles,
        "too little work: {report:?}"
    );
    assert!(
        report.transactions_checked > cycles,
        "too few checked: {report:?}"
    );
    assert!(
        report.cuts_during_recovery > 0,
        "no cut during recovery: {report:?}"
    );
    // Every transaction run was verified, or counted apart when its cycle could not be.
    assert_eq!(
        report.transactions_checked + report.transactions_unverified,
        report.transactions_run,
        "{report:?}"
    );
}

/// Runs `base()` with sabotage `s` on one thread for up to `max` cycles and demands that the
/// crash test catch it, with findings of the `expected` kinds only (a catch for another reason,
/// such as an engine failure, proves nothing about the removed step); then runs the same seed
/// and options without the sabotage for as many cycles, which must pass (the sabotage, not the
/// seed, made the difference). Returns the failure (its `cycle` is the cycle of the catch) and
/// the control run's report.
pub fn caught(
    s: Sabotage,
    expected: &[FindingKind],
    max: u64,
    base: impl Fn() -> CrashTestOptions,
) -> (Failure, CrashTestReport) {
    caught_by(run, s, expected, max, base)
}

/// [`caught`] with another crash test than [`run`] (e.g. `run_bulk`).
pub fn caught_by(
    run: fn(CrashTestOptions) -> Result<CrashTestReport>,
    s: Sabotage,
    expected: &[FindingKind],
    max: u64,
    base: impl Fn() -> CrashTestOptions,
) -> (Failure, CrashTestReport) {
    caught_on(1, run, s, expected, max, base)
}

/// [`caught_by`] on `threads` threads: for a missing step that only concurrent workers reach
/// (the seed then does not replay exactly, so the control run meets other interleavings).
pub fn caught_on(
    threads: usize,
    run: fn(CrashTestOptions) -> Result<CrashTestReport>,
    s: Sabotage,
    expected: &[FindingKind],
    max: u64,
    base: impl Fn() -> CrashTestOptions,
) -> (Failure, CrashTestReport) {
    let opts = |sabotage, cycles| CrashTestOptions {
        threads,
        cycles,
        sabotage,
        ..base()
    };
    let o = opts(Some(s), max);
    let (torn, seed) = (o.torn, o.seed);
    let what = format!("sabotage {s} ({torn}, {} commit, seed {seed})", o.commit);
    let bad = run(o).unwrap_or_else(|e| panic!("{what}: {e}"));
    let Some(first) = bad.failures.first() else {
        panic!("{what} was not caught in {max} cycles: {bad:?}");
    };
    assert!(
        !first.findings.is_empty() && first.findings.iter().all(|f| expected.contains(&f.kind)),
        "{what} was caught at cycle {} for another reason than {expected:?}: {first}",
        first.cycle
    );
    eprintln!("{what} caught at cycle {}: {first}", first.cycle);
    let control = run(opts(None, bad.cycles)).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        !control.failed(torn),
        "{what}: the control run without the sabotage failed too: {}",
        control
            .failures
            .first()
            .map_or_else(|| format!("{control:?}"), ToString::to_string)
    );
    assert_eq!(control.cycles, bad.cycles, "{what}: control run");
    (first.clone(), control)
}
