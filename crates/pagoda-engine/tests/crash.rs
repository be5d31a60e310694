#![allow(clippy::unwrap_used)]
//! Power-cut crash tests across the three torn-write modes (≥ 500 cycles in all).

use pagoda_engine::crashtest::{run, CrashTestOptions};
use pagoda_engine::{CommitMode, TornMode};

fn seed() -> u64 {
    std::env::var("PAGODA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed)
}

fn check(torn: TornMode, cycles: u64, salt: u64) {
    let seed = seed() ^ salt;
    let report = run(CrashTestOptions {
        torn,
        cycles,
        seed,
        ..CrashTestOptions::default()
    })
    .unwrap_or_else(|e| panic!("crashtest {torn} seed {seed}: {e}"));
    eprintln!("{torn}: {} {:?}", report.summary_line(), report);
    assert_eq!(report.cycles, cycles, "seed {seed}");
    assert!(
        !report.failed(torn),
        "crashtest {torn} failed with seed {seed}: {report:?}"
    );
    assert!(
        report.commits_acknowledged > cycles,
        "too little work, seed {seed}: {report:?}"
    );
    assert!(
        report.cuts_mid_checkpoint > 0,
        "no cut hit a checkpoint, seed {seed}: {report:?}"
    );
    match torn {
        // The harness must actually produce torn pages, or the other modes prove nothing.
        TornMode::None => assert!(report.corruption_detected > 0, "no torn page, seed {seed}"),
        TornMode::Doublewrite => {
            assert!(report.torn_pages_repaired > 0, "no repair, seed {seed}");
            assert!(
                report.cuts_mid_doublewrite > 0,
                "no cut mid-doublewrite, seed {seed}"
            );
        }
        TornMode::Atomic => {}
    }
}

#[test]
fn crash_doublewrite() {
    check(TornMode::Doublewrite, 180, 1);
}

#[test]
fn crash_atomic() {
    check(TornMode::Atomic, 170, 2);
}

#[test]
fn crash_none() {
    check(TornMode::None, 170, 3);
}

fn check_pipelined(torn: TornMode, cycles: u64, salt: u64) {
    let seed = seed() ^ salt;
    let report = run(CrashTestOptions {
        torn,
        commit: CommitMode::Pipelined,
        cycles,
        seed,
        ..CrashTestOptions::default()
    })
    .unwrap_or_else(|e| panic!("crashtest pipelined {torn} seed {seed}: {e}"));
    eprintln!("pipelined {torn}: {} {:?}", report.summary_line(), report);
    assert_eq!(report.cycles, cycles, "seed {seed}");
    assert!(
        !report.failed(torn),
        "crashtest pipelined {torn} failed with seed {seed}: {report:?}"
    );
    assert!(
        report.commits_acknowledged > cycles,
        "too little work, seed {seed}: {report:?}"
    );
}

#[test]
fn crash_pipelined_doublewrite() {
    check_pipelined(TornMode::Doublewrite, 120, 11);
}

#[test]
fn crash_pipelined_atomic() {
    check_pipelined(TornMode::Atomic, 110, 12);
}

#[test]
fn crash_pipelined_none() {
    check_pipelined(TornMode::None, 110, 13);
}
