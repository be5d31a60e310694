#![allow(clippy::unwrap_used)]
//! Power-cut crash tests across torn-write modes x commit modes, and the proof that the crash
//! test can fail: each sabotage (one safety step removed) must be caught.
//!
//! `PAGODA_SEED` changes the seed; `PAGODA_CRASH_CYCLES` scales the cycle counts.

mod common;

use pagoda_crashtest::{run, CrashTestOptions, CrashTestReport, FindingKind};
use pagoda_engine::{fault::Sabotage, CommitMode, TornMode};

fn seed() -> u64 {
    std::env::var("PAGODA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed)
}

fn cycles(n: u64) -> u64 {
    std::env::var("PAGODA_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(n)
}

fn crash(torn: TornMode, commit: CommitMode, cycles: u64, salt: u64) -> CrashTestReport {
    let seed = seed() ^ salt;
    let report = run(CrashTestOptions {
        torn,
        commit,
        cycles,
        seed,
        page_size: 4096,
        ..CrashTestOptions::default()
    })
    .unwrap_or_else(|e| panic!("crashtest {torn} {commit} seed {seed}: {e}"));
    eprintln!("{torn} {commit}: {} {report:?}", report.summary_line());
    for f in &report.failures {
        eprintln!("{f}");
    }
    assert!(
        !report.failed(torn),
        "crashtest {torn} {commit} failed with seed {seed}: {}",
        report.failures[0]
    );
    assert_eq!(report.cycles, cycles, "seed {seed}");
    // The run must have exercised what it claims to check.
    common::assert_exercised(&report, cycles);
    assert!(report.ddl_operations > 0, "no DDL: {report:?}");
    assert!(report.deepest_tree >= 3, "trees stayed shallow: {report:?}");
    if torn != TornMode::Atomic {
        // (Atomic mode tears only the log, whose unflushed tail is short.)
        assert!(report.torn_512_sectors > 0, "no 512-byte tear: {report:?}");
    }
    assert!(
        report.cuts_mid_checkpoint > 0,
        "no cut hit a checkpoint: {report:?}"
    );
    if torn != TornMode::None {
        // (Mode none re-creates the database after each detected torn page: it stays small.)
        assert!(
            report.cut_phases.contains_key("cleaner (page write-back)"),
            "no cut hit the cleaner: {report:?}"
        );
    }
    report
}

#[test]
fn crash_doublewrite_sync() {
    let r = crash(TornMode::Doublewrite, CommitMode::Sync, cycles(150), 1);
    assert!(r.torn_pages_repaired > 0, "no torn page repaired: {r:?}");
    assert!(
        r.cuts_mid_doublewrite > 0,
        "no cut between double-write and in-place: {r:?}"
    );
}

/// The InnoDB-like baseline (every flushed page copied first) survives the same cuts.
#[test]
fn crash_doublewrite_full_sync() {
    let r = crash(TornMode::DoublewriteFull, CommitMode::Sync, cycles(150), 16);
    assert!(r.torn_pages_repaired > 0, "no torn page repaired: {r:?}");
    assert!(
        r.cuts_mid_doublewrite > 0,
        "no cut between double-write and in-place: {r:?}"
    );
}

#[test]
fn crash_atomic_sync() {
    let r = crash(TornMode::Atomic, CommitMode::Sync, cycles(150), 2);
    // Atomic page writes never need repair: nothing may be torn or corrupt.
    assert_eq!(r.corruption_detected, 0, "{r:?}");
}

#[test]
fn crash_none_sync() {
    let r = crash(TornMode::None, CommitMode::Sync, cycles(150), 3);
    // The harness must actually tear pages, or the other modes prove nothing.
    assert!(r.corruption_detected > 0, "no torn page detected: {r:?}");
}

#[test]
fn crash_doublewrite_pipelined() {
    // More cycles than the others: with pipelined commit a cut lands in the cleaner's write-back
    // rarely (6 to 15 times in 400 cycles, three runs here), and the run must show one (at 120
    // cycles it showed none in 1 run of 5 to 12).
    crash(
        TornMode::Doublewrite,
        CommitMode::Pipelined,
        cycles(400),
        11,
    );
}

#[test]
fn crash_atomic_pipelined() {
    crash(TornMode::Atomic, CommitMode::Pipelined, cycles(120), 12);
}

#[test]
fn crash_none_pipelined() {
    crash(TornMode::None, CommitMode::Pipelined, cycles(120), 13);
}

#[test]
fn crash_atomic_lazy() {
    let r = crash(TornMode::Atomic, CommitMode::Lazy, cycles(120), 14);
    // Lazy commits are acknowledged before they are durable: the cuts must have lost some
    // (each time a suffix of the commit order, or the run would have failed above).
    assert!(r.lazy_commits_lost > 0, "no lazy commit was lost: {r:?}");
}

#[test]
fn crash_doublewrite_lazy() {
    let r = crash(TornMode::Doublewrite, CommitMode::Lazy, cycles(120), 15);
    assert!(r.lazy_commits_lost > 0, "no lazy commit was lost: {r:?}");
}

/// Runs a sabotaged engine until the crash test fails (at most `max` cycles).
fn sabotaged(s: Sabotage, torn: TornMode, commit: CommitMode, max: u64) {
    let seed = seed() ^ 0x5ab0;
    let report = run(CrashTestOptions {
        torn,
        commit,
        cycles: max,
        seed,
        page_size: 4096,
        sabotage: Some(s),
        ..CrashTestOptions::default()
    })
    .unwrap_or_else(|e| panic!("crashtest --sabotage {s} seed {seed}: {e}"));
    assert!(
        report.failed(torn),
        "sabotage {s} ({torn}, {commit}) was not caught in {max} cycles, seed {seed}: {report:?}"
    );
    eprintln!(
        "sabotage {s} caught after {} cycles: {}",
        report.cycles, report.failures[0]
    );
}

#[test]
fn sabotage_skip_log_sync_is_caught() {
    sabotaged(
        Sabotage::SkipLogSync,
        TornMode::Doublewrite,
        CommitMode::Sync,
        200,
    );
}

#[test]
fn sabotage_skip_doublewrite_is_caught() {
    sabotaged(
        Sabotage::SkipDoublewrite,
        TornMode::Doublewrite,
        CommitMode::Sync,
        200,
    );
}

/// In the InnoDB-like mode too, a batch written in place with no double-write copy is caught,
/// for its own reason (a torn page recovery cannot repair), and the same seed passes without
/// the sabotage. One thread: the seed replays exactly (seeds 1-3: caught at cycles 16, 4, 51).
#[test]
fn sabotage_skip_doublewrite_is_caught_in_full_mode() {
    let torn = TornMode::DoublewriteFull;
    let seed = seed() ^ 0x5ab1;
    let opts = |sabotage| CrashTestOptions {
        torn,
        cycles: 200,
        seed,
        threads: 1,
        page_size: 4096,
        sabotage,
        ..CrashTestOptions::default()
    };
    let bad = run(opts(Some(Sabotage::SkipDoublewrite))).unwrap();
    assert!(bad.failed(torn), "not caught in 200 cycles, seed {seed}");
    let first = &bad.failures[0];
    assert!(
        first.findings[0].kind == FindingKind::Corruption && bad.corruption_detected > 0,
        "caught for another reason than a torn page, seed {seed}: {first}"
    );
    let control = run(opts(None)).unwrap();
    assert!(
        !control.failed(torn),
        "the control run failed, seed {seed}: {}",
        control.failures[0]
    );
    assert!(control.torn_pages_repaired > 0, "{control:?}");
}

#[test]
fn sabotage_ack_before_durable_is_caught() {
    sabotaged(
        Sabotage::AckBeforeDurable,
        TornMode::Doublewrite,
        CommitMode::Sync,
        200,
    );
    sabotaged(
        Sabotage::AckBeforeDurable,
        TornMode::Atomic,
        CommitMode::Pipelined,
        200,
    );
}

#[test]
fn sabotage_skip_wal_rule_is_caught() {
    // Caught when a cut falls between a page written ahead of the log and the next log sync:
    // a timing window, so the cycle of the catch varies with the machine's load (1 to 285 in 24
    // runs on 2 busy cores, and one CI run needed more than 300). The run stops at the catch, so
    // a high ceiling costs nothing when the checker works.
    sabotaged(
        Sabotage::SkipWalRule,
        TornMode::Atomic,
        CommitMode::Pipelined,
        3000,
    );
}

#[test]
fn sabotage_skip_checkpoint_flush_is_caught() {
    sabotaged(
        Sabotage::SkipCheckpointFlush,
        TornMode::Doublewrite,
        CommitMode::Sync,
        200,
    );
}

#[test]
fn sabotage_drop_ops_of_imaged_records_is_caught() {
    sabotaged(
        Sabotage::DropOpsOfImagedRecords,
        TornMode::Doublewrite,
        CommitMode::Sync,
        200,
    );
}

#[test]
fn sabotage_non_atomic_pages_is_caught() {
    sabotaged(
        Sabotage::NonAtomicPages,
        TornMode::Atomic,
        CommitMode::Sync,
        200,
    );
}

#[test]
fn sabotage_visible_before_durable_is_caught() {
    sabotaged(
        Sabotage::VisibleBeforeDurable,
        TornMode::Atomic,
        CommitMode::Pipelined,
        200,
    );
}

#[test]
fn sabotage_salvage_torn_log_is_caught() {
    // Needs a cut that tears a log group so that a lost record precedes a kept one: in 12
    // runs under load the catch came after 29 to 426 cycles; the run stops at the catch.
    sabotaged(
        Sabotage::SalvageTornLog,
        TornMode::Atomic,
        CommitMode::Lazy,
        3000,
    );
}

/// The first defect this crash test found, planted back: redo writes partly applied records.
#[test]
fn sabotage_redo_partial_writes_is_caught() {
    // The seeds that found it first, then others in turn: which seed shows it moves with
    // every change to the engine's page I/O.
    let more = (1..=16u64).flat_map(|seed| [(seed, 96 << 10, 120), (seed, 128 << 10, 120)]);
    let caught = REDO_SEEDS.into_iter().chain(more).find(|&sb| {
        let r = redo_run(sb, Some(Sabotage::RedoPartialWrites));
        if let Some(f) = r.failures.first() {
            eprintln!("sabotage redo-partial-writes caught with {sb:?}: {f}");
        }
        r.failed(TornMode::Atomic)
    });
    assert!(
        caught.is_some(),
        "sabotage redo-partial-writes was not caught"
    );
}

#[test]
fn bad_options_are_refused() {
    let bad = |o: CrashTestOptions| run(o).unwrap_err().to_string();
    assert!(bad(CrashTestOptions {
        cycles: 0,
        ..Default::default()
    })
    .contains("at least one cycle"));
    assert!(bad(CrashTestOptions {
        torn: TornMode::Atomic,
        sabotage: Some(Sabotage::SkipDoublewrite),
        ..Default::default()
    })
    .contains("--torn doublewrite"));
    assert!(bad(CrashTestOptions {
        replay_cycle: Some(5),
        cycles: 3,
        ..Default::default()
    })
    .contains("--cycles 6"));
    assert!("skip-everything"
        .parse::<Sabotage>()
        .unwrap_err()
        .to_string()
        .contains("skip-log-sync"));
}

/// Seeds, buffer sizes and cycles with which the sabotage redo-partial-writes (the redo defect)
/// is caught; deterministic: one thread, a small pool so that redo evicts. (The defect was found
/// with seeds 2 and 7, 128 and 96 KiB, 40 cycles; the merge fix of defect C changed the runs'
/// I/O, and so where their cuts fall, and these were found again with the sabotage.)
const REDO_SEEDS: [(u64, usize, u64); 2] = [(1, 96 << 10, 120), (2, 64 << 10, 65)];

fn redo_run(
    (seed, buffer, cycles): (u64, usize, u64),
    sabotage: Option<Sabotage>,
) -> CrashTestReport {
    run(CrashTestOptions {
        torn: TornMode::Atomic,
        cycles,
        seed,
        threads: 1,
        page_size: 4096,
        buffer_bytes: Some(buffer),
        // The pool alone, so that redo itself must evict (and write) pages.
        commit_spill_bytes: Some(0),
        sabotage,
        ..CrashTestOptions::default()
    })
    .unwrap()
}

/// Regression (found by this crash test with these seeds): redo let the cleaner write a leaf
/// stamped with a record's LSN while only some of the record's operations were applied to it;
/// after a second cut during recovery, the next recovery skipped the rest of the record and an
/// acknowledged update was lost.
#[test]
fn regression_redo_writes_no_partly_applied_record() {
    for sb in REDO_SEEDS {
        let report = redo_run(sb, None);
        assert!(
            !report.failed(TornMode::Atomic),
            "seed {}: {}",
            sb.0,
            report.failures[0]
        );
        assert!(report.cuts_during_recovery > 0);
    }
}

/// Defect C, planted back: a merge empties the sibling it absorbs without marking it in
/// progress (and the sabotage runs the cleaner right after each merge, so that the rare race
/// always happens). One thread, so the seeds replay exactly; with these seeds the crash test
/// loses neighbouring keys of a leaf (the defect's signature) within the first cycles.
#[test]
fn sabotage_merge_unmarked_sibling_is_caught() {
    // Seeds are tried in turn (each run stops at its first finding): which seed shows the
    // race moves whenever the engine's page I/O changes, so the test does not pin one.
    let caught = (1..=12u64).find(|&seed| {
        let r = run(CrashTestOptions {
            torn: TornMode::Doublewrite,
            commit: CommitMode::Sync,
            cycles: 300,
            seed,
            threads: 1,
            page_size: 4096,
            sabotage: Some(Sabotage::MergeUnmarkedSibling),
            ..CrashTestOptions::default()
        })
        .unwrap();
        if let Some(f) = r.failures.first() {
            eprintln!("sabotage merge-unmarked-sibling caught with seed {seed}: {f}");
        }
        r.lost_commits > 0
    });
    assert!(
        caught.is_some(),
        "sabotage merge-unmarked-sibling was not caught with seeds 1 to 12"
    );
}

/// A power-loss-protected SSD (`plp=1`): acknowledged writes survive the cut, so the harness
/// tears nothing, and the engine still loses no acknowledged commit.
#[test]
fn crash_on_power_loss_protected_ssd_tears_nothing() {
    let seed = seed() ^ 0x91b;
    let device = pagoda_device::spec::DeviceSpec::parse("nvme-ssd,plp=1,capacity=256MiB").unwrap();
    let report = run(CrashTestOptions {
        torn: TornMode::Doublewrite,
        cycles: cycles(40),
        seed,
        page_size: 4096,
        device: Some(device),
        ..CrashTestOptions::default()
    })
    .unwrap();
    assert!(
        !report.failed(TornMode::Doublewrite),
        "seed {seed}: {}",
        report.failures[0]
    );
    assert!(
        report.commits_acknowledged > 40,
        "too little work: {report:?}"
    );
    assert_eq!(report.torn_512_sectors, 0, "a plp write tore: {report:?}");
}

#[test]
fn sabotage_doublewrite_old_images_is_caught() {
    // The page must keep its frame from an image before a checkpoint to a torn write after
    // it: a pool larger than the default, one thread (deterministic, with a checkpoint every
    // 50 transactions or so). Seeds are tried in turn, each up to its first finding (seeds
    // 1-6 of one run: caught at cycles 1271, 360, none in 3000, 245, 1057, 361).
    let caught = (1..=8u64).find(|&seed| {
        let r = run(CrashTestOptions {
            torn: TornMode::Doublewrite,
            commit: CommitMode::Sync,
            cycles: 1500,
            seed,
            threads: 1,
            page_size: 4096,
            buffer_bytes: Some(4 << 20),
            sabotage: Some(Sabotage::DoublewriteOldImages),
            ..CrashTestOptions::default()
        })
        .unwrap();
        if let Some(f) = r.failures.first() {
            eprintln!("sabotage doublewrite-old-images caught with seed {seed}: {f}");
        }
        r.failed(TornMode::Doublewrite)
    });
    assert!(
        caught.is_some(),
        "sabotage doublewrite-old-images was not caught with seeds 1-8"
    );
}
