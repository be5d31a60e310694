#![allow(clippy::unwrap_used)]
//! Power cuts during bulk loads (`Db::bulk_load`): every load is all or nothing after
//! recovery (also after cuts during recovery), and the planted bug `bulk-skip-sync` (the
//! install record logged before the new pages are synced) is caught on one thread, with a
//! passing control run on the same seed.
//!
//! `PAGODA_SEED` changes the seed; `PAGODA_CRASH_CYCLES` scales the cycle count.

mod common;

use common::caught_by;
use pagoda_crashtest::{run_bulk, CrashTestOptions, CrashTestReport, FindingKind, LOAD_CUT};
use pagoda_engine::{fault::Sabotage, TornMode};

fn seed() -> u64 {
    std::env::var("PAGODA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xb01c)
}

fn cycles() -> u64 {
    std::env::var("PAGODA_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
}

fn bulk(torn: TornMode, sabotage: Option<Sabotage>) -> CrashTestReport {
    run_bulk(options(torn, sabotage)).unwrap()
}

fn options(torn: TornMode, sabotage: Option<Sabotage>) -> CrashTestOptions {
    CrashTestOptions {
        torn,
        cycles: cycles(),
        seed: seed(),
        page_size: 4096,
        buffer_bytes: Some(64 * 4096),
        // Loads write a few requests each: cuts soon after the start fall inside them.
        max_ops_before_cut: 60,
        recovery_cut_chance: 0.3,
        sabotage,
        ..CrashTestOptions::default()
    }
}

fn control(torn: TornMode) {
    let r = bulk(torn, None);
    for f in &r.failures {
        eprintln!("{f}");
    }
    eprintln!("{torn}: {} {:?}", r.summary_line(), r.cut_phases);
    assert!(!r.failed(torn), "bulk crash test {torn}, seed {}", seed());
    assert_eq!(r.cycles, cycles());
    let load_cuts = r.cut_phases.get(LOAD_CUT).copied().unwrap_or(0);
    assert!(load_cuts >= cycles() / 10, "few cuts hit a load: {r:?}");
    assert!(r.cuts_during_recovery > 0, "no cut during recovery: {r:?}");
    assert!(r.deepest_tree >= 3, "loaded trees stayed shallow: {r:?}");
    assert!(
        r.commits_acknowledged > cycles() / 2,
        "few loads finished: {r:?}"
    );
}

#[test]
fn bulk_loads_are_all_or_nothing_doublewrite() {
    control(TornMode::Doublewrite);
}

#[test]
fn bulk_loads_are_all_or_nothing_atomic() {
    control(TornMode::Atomic);
}

#[test]
fn sabotage_bulk_skip_sync_is_caught() {
    // The install record is durable while a page of the new tree is not: recovery finds that
    // page torn or never written, and a loaded page has no double-write copy to repair it
    // from. Caught at cycle 2.
    caught_by(
        run_bulk,
        Sabotage::BulkSkipSync,
        &[FindingKind::Corruption],
        100,
        || options(TornMode::Doublewrite, None),
    );
}
