#![allow(clippy::unwrap_used)]
//! The proof that the crash test can fail: each sabotage (one safety step of the engine
//! removed) must be caught by the finding the removed step protects against, on one thread,
//! within 500 cycles, and the same seed and options without the sabotage must pass. With sync
//! commits a seed replays exactly; pipelined and lazy commits start a flush thread whose timing
//! varies between runs, so the comments there give the cycles of several runs.
//!
//! `PAGODA_SEED` changes the default seed (the cycles named below are for the default; tests
//! that pin a seed ignore it).

mod common;

use common::{caught, caught_on, seed};
use pagoda_crashtest::{run, CrashTestOptions, CrashTestReport, Failure, FindingKind};
use pagoda_engine::{fault::Sabotage, CommitMode, TornMode};
use FindingKind::{Corruption, LostCommit, PartialTransaction, PendingExposed, UncommittedVisible};

/// The options of a sabotage run: `seed() ^ salt`, 4 KiB pages.
fn options(torn: TornMode, commit: CommitMode, salt: u64) -> CrashTestOptions {
    CrashTestOptions {
        torn,
        commit,
        seed: seed() ^ salt,
        page_size: 4096,
        ..CrashTestOptions::default()
    }
}

/// [`caught`] with the default options of `torn` and `commit`.
fn sabotaged(
    s: Sabotage,
    torn: TornMode,
    commit: CommitMode,
    expected: &[FindingKind],
    max: u64,
) -> (Failure, CrashTestReport) {
    caught(s, expected, max, || options(torn, commit, 0x5ab0))
}

#[test]
fn sabotage_skip_log_sync_is_caught() {
    // Each log group's header records the LSN the engine believed durable, so a later group
    // proves that the lost one was acknowledged: recovery refuses the log (the engine's named
    // detection of lost acknowledged commits) before the oracle could count them. Caught at
    // cycle 0 (seeds 1-10: cycle 0 or 1, always this detection).
    let (f, _) = sabotaged(
        Sabotage::SkipLogSync,
        TornMode::Doublewrite,
        CommitMode::Sync,
        &[Corruption],
        100,
    );
    assert!(
        f.findings[0]
            .found
            .contains("was written after it was synced"),
        "not the log's detection of a lost synced group: {f}"
    );
}

#[test]
fn sabotage_skip_doublewrite_is_caught() {
    // A batch written in place without its copy tears, and nothing can repair it: recovery
    // finds the page's checksum wrong. Caught at cycle 19; the same seed without the
    // sabotage repairs torn pages from their copies within 100 cycles.
    sabotaged(
        Sabotage::SkipDoublewrite,
        TornMode::Doublewrite,
        CommitMode::Sync,
        &[Corruption],
        100,
    );
    let control = run(CrashTestOptions {
        cycles: 100,
        threads: 1,
        ..options(TornMode::Doublewrite, CommitMode::Sync, 0x5ab0)
    })
    .unwrap();
    assert!(control.torn_pages_repaired > 0, "{control:?}");
}

/// In the InnoDB-like mode too, for its own reason (a torn page recovery cannot repair).
#[test]
fn sabotage_skip_doublewrite_is_caught_in_full_mode() {
    // Caught at cycle 21.
    let (_, control) = sabotaged(
        Sabotage::SkipDoublewrite,
        TornMode::DoublewriteFull,
        CommitMode::Sync,
        &[Corruption],
        100,
    );
    assert!(control.torn_pages_repaired > 0, "{control:?}");
}

#[test]
fn sabotage_ack_before_durable_is_caught() {
    // A commit acknowledged before its record is durable is lost when the cut drops the
    // record. Caught at cycle 11.
    sabotaged(
        Sabotage::AckBeforeDurable,
        TornMode::Doublewrite,
        CommitMode::Sync,
        &[LostCommit],
        100,
    );
    // Pipelined: the ticket resolved early. The flush thread's timing moves the catch: cycle 2
    // in 8 runs of 10, cycles 1 and 14 once each.
    sabotaged(
        Sabotage::AckBeforeDurable,
        TornMode::Atomic,
        CommitMode::Pipelined,
        &[LostCommit],
        100,
    );
}

/// Every finding of `f` is a lost acknowledged commit: the oracle missed one, or the log's
/// own check did (a later group's header records a durable LSN past a group that was lost).
fn assert_lost_acknowledged(f: &Failure) {
    assert!(
        f.findings
            .iter()
            .all(|x| x.kind == LostCommit || x.found.contains("was written after it was synced")),
        "not a lost acknowledged commit: {f}"
    );
}

#[test]
fn sabotage_ack_before_sync_is_caught() {
    // A group-commit round tells the commits it carries "durable" once their records are
    // written, before its sync: a power cut in between drops records that were acknowledged.
    // A follower then returns early, so it takes concurrent committers (four threads); their
    // interleaving varies: caught at cycles 1, 1, 1, 1, 2, 3 and 17 in seven runs, each time
    // as a lost acknowledged commit.
    let (f, _) = caught_on(
        4,
        pagoda_crashtest::run,
        Sabotage::AckBeforeSync,
        &[LostCommit, Corruption],
        300,
        || options(TornMode::Doublewrite, CommitMode::Sync, 0xac5),
    );
    assert_lost_acknowledged(&f);
}

#[test]
fn sabotage_write_log_past_ready_is_caught() {
    // With a sparse log, a round that writes past the ready prefix without making it ready
    // first has its groups overwritten by the zeros written ahead of the log (the thread that
    // writes them runs with background threads: four threads). Only the ring's first lap is
    // sparse (the crash test's ring is 1 MiB), so the race falls in a run's first cycles or
    // not at all: 3 runs of 4 caught it at cycle 0, one not in 300. Fresh runs on other
    // seeds are tried until one catches it; that seed's control run must pass.
    for salt in 0..8u64 {
        let opts = |sabotage| CrashTestOptions {
            sparse_log: true,
            threads: 4,
            cycles: 5,
            sabotage,
            ..options(TornMode::Doublewrite, CommitMode::Sync, 0x5ba ^ salt)
        };
        let bad = pagoda_crashtest::run(opts(Some(Sabotage::WriteLogPastReady))).unwrap();
        let Some(f) = bad.failures.first() else {
            continue;
        };
        assert!(
            f.findings
                .iter()
                .all(|x| [LostCommit, Corruption].contains(&x.kind)),
            "caught for another reason: {f}"
        );
        assert_lost_acknowledged(f);
        let control = pagoda_crashtest::run(opts(None)).unwrap();
        assert!(
            !control.failed(TornMode::Doublewrite),
            "the control run failed too: {control:?}"
        );
        return;
    }
    panic!("write-log-past-ready was not caught on 8 seeds");
}

#[test]
fn sabotage_visible_before_durable_is_caught() {
    // A reader sees a pipelined commit still waiting for its log sync. Caught at cycle 0 in 6
    // runs of 6.
    sabotaged(
        Sabotage::VisibleBeforeDurable,
        TornMode::Atomic,
        CommitMode::Pipelined,
        &[PendingExposed],
        100,
    );
}

/// Whether every corruption among the findings is the open's check of the trees refusing a
/// page (not a checksum: in mode atomic no page tears).
fn only_tree_damage(f: &Failure) -> bool {
    f.findings.iter().filter(|x| x.kind == Corruption).all(|x| {
        x.found.starts_with("open failed: corruption in page") && !x.found.contains("checksum")
    })
}

#[test]
fn sabotage_skip_wal_rule_is_caught() {
    // A page written ahead of the log carries writes of a commit the cut then loses: they are
    // visible without their marker, and the LSNs recovery hands out again fall below the page's
    // own, so later records are skipped on it (an acknowledged commit lost, or one the cut
    // caught unacknowledged left partial); a split or overflow page written ahead of its record
    // leaves a tree the open's check refuses (seen with seeds 7 and 8). With lazy commits pages
    // run far ahead of the log (with pipelined commits seeds 1-10 were caught twice in 500
    // cycles, and seed 9, once caught at cycle 1, then not in 4 runs). The lazy flush thread's
    // timing moves the catch: cycle 2 in 6 runs of 7 (by the first two kinds), cycle 10 once.
    let (f, _) = sabotaged(
        Sabotage::SkipWalRule,
        TornMode::Atomic,
        CommitMode::Lazy,
        &[
            UncommittedVisible,
            LostCommit,
            PartialTransaction,
            Corruption,
        ],
        200,
    );
    assert!(only_tree_damage(&f), "not damage to a tree: {f}");
}

#[test]
fn sabotage_salvage_torn_log_is_caught() {
    // Recovery goes on past a torn log group: a commit after a lost one survives (a lost
    // commit in the middle of the order, which lazy commit never allows), or a record is
    // applied without an earlier one it builds on and the open's check refuses the tree.
    // Needs a cut that tears a group with a lost record before a kept one. Cuts within 100
    // operations leave the lazy flush thread less time to sync the log before them; its timing
    // still moves the catch: cycle 27 or 28 in 8 runs of 10, 70 and 98 (the tree check) in
    // the others (with the default 400 operations: 24 to 293 in 8 runs).
    let (f, _) = caught(
        Sabotage::SalvageTornLog,
        &[LostCommit, Corruption],
        500,
        || CrashTestOptions {
            max_ops_before_cut: 100,
            ..options(TornMode::Atomic, CommitMode::Lazy, 0x5ab0)
        },
    );
    assert!(only_tree_damage(&f), "not damage to a tree: {f}");
}

#[test]
fn sabotage_skip_checkpoint_flush_is_caught() {
    // The redo start moves past records whose pages were never written: recovery skips them
    // and acknowledged commits (here a table's creation) are lost. Caught at cycle 0.
    sabotaged(
        Sabotage::SkipCheckpointFlush,
        TornMode::Doublewrite,
        CommitMode::Sync,
        &[LostCommit],
        100,
    );
}

#[test]
fn sabotage_drop_ops_of_imaged_records_is_caught() {
    // Redo loses a record's changes to leaves it did not image: the acknowledged transaction's
    // marker row is lost while its writes in imaged leaves survive, which the oracle (keyed
    // by the marker) sees as a write of a transaction that did not commit. Caught at cycle 0.
    sabotaged(
        Sabotage::DropOpsOfImagedRecords,
        TornMode::Doublewrite,
        CommitMode::Sync,
        &[LostCommit, UncommittedVisible],
        100,
    );
}

#[test]
fn sabotage_non_atomic_pages_is_caught() {
    // A page written without the atomic hint tears, and mode atomic keeps no copy to repair
    // it from: recovery finds the page's checksum wrong. Caught at cycle 4.
    sabotaged(
        Sabotage::NonAtomicPages,
        TornMode::Atomic,
        CommitMode::Sync,
        &[Corruption],
        100,
    );
}

#[test]
fn sabotage_doublewrite_old_images_is_caught() {
    // The page must keep its frame from an image before a checkpoint to a torn write after
    // it: a pool larger than the default (a checkpoint every 50 transactions or so). Which
    // seed shows it moves with the engine's I/O: since checkpoints write both superblock
    // copies, seeds 1-30 were caught within 200 cycles 11 times (seeds 5, 6, 7, 9, 15, 18,
    // 20, 21, 22, 28: cycles 69, 107, 153, 143, 74, 7, 5, 86, 72, 76); seed 20 is pinned. The
    // torn page has neither a copy nor an image recovery reads: its checksum fails.
    caught(Sabotage::DoublewriteOldImages, &[Corruption], 200, || {
        CrashTestOptions {
            seed: 20,
            buffer_bytes: Some(4 << 20),
            ..options(TornMode::Doublewrite, CommitMode::Sync, 0)
        }
    });
}

/// The first defect this crash test found, planted back: redo writes partly applied records.
#[test]
fn sabotage_redo_partial_writes_is_caught() {
    // A small pool alone (no spill room), so that redo itself must evict and write pages; a
    // second cut during recovery then makes the next recovery skip the rest of a record that
    // a written page claims: an acknowledged update is lost. Which seed shows it moves with
    // the engine's page I/O (the seeds that found it no longer do): since a commit's freed
    // overflow pages are held for older snapshots (not reused within the commit), seeds 1-180
    // were caught within 120 cycles 8 times (seeds 23, 42, 89, 93, 100, 104, 135, 179; of
    // seeds 31-180, 7 against 14 before); seed 23 (cycle 8) is pinned.
    caught(Sabotage::RedoPartialWrites, &[LostCommit], 120, || {
        CrashTestOptions {
            seed: 23,
            buffer_bytes: Some(96 << 10),
            commit_spill_bytes: Some(0),
            ..options(TornMode::Atomic, CommitMode::Sync, 0)
        }
    });
}

/// Defect C, planted back: a merge empties the sibling it absorbs without marking it in
/// progress (and the sabotage runs the cleaner right after each merge, so that the rare race
/// always happens).
#[test]
fn sabotage_merge_unmarked_sibling_is_caught() {
    // The emptied sibling reaches the disk before the merge's record: the crash test loses
    // neighbouring keys of a leaf (the defect's signature). Seeds 1-10: caught at cycles 166,
    // 18, 118, -, 60, 107, 3, -, 91, 102 (-: not in 150); seed 7 is pinned.
    caught(Sabotage::MergeUnmarkedSibling, &[LostCommit], 100, || {
        CrashTestOptions {
            seed: 7,
            ..options(TornMode::Doublewrite, CommitMode::Sync, 0)
        }
    });
}

/// skip-doublewrite with the default seed, whatever `PAGODA_SEED` says: caught at cycle 21 by a
/// torn page.
fn skip_doublewrite(expected: &[FindingKind], max: u64) {
    caught(Sabotage::SkipDoublewrite, expected, max, || {
        CrashTestOptions {
            seed: 0x5eed ^ 0x5ab0,
            ..options(TornMode::Doublewrite, CommitMode::Sync, 0)
        }
    });
}

/// The helper can fail: a catch by another kind than the one the test names.
#[test]
#[should_panic(expected = "for another reason than [LostCommit]")]
fn a_catch_for_another_reason_fails() {
    skip_doublewrite(&[LostCommit], 100);
}

/// The helper can fail: no catch within the ceiling.
#[test]
#[should_panic(expected = "was not caught in 10 cycles")]
fn no_catch_within_the_ceiling_fails() {
    skip_doublewrite(&[Corruption], 10);
}
