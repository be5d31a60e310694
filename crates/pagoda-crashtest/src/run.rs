//! The cycle loop of the crash test: open (with cuts during recovery), verify, run to the cut.

use crate::cycle::{workload, Pending, Run};
use crate::ledger::Ledger;
use crate::open::{count_cut, fresh_devices, open_armed, OpenState};
use crate::oracle::{self, note, Finding, FindingKind, Model};
use crate::workload::{Status, STATIC_TABLES};
use crate::{CrashTestOptions, CrashTestReport, Failure, FlashCrashReport};
use pagoda_engine::{stats::FlashCacheStats, CommitMode, Db, Result};
use rand::rngs::SmallRng;
use rand::SeedableRng;

/// Findings kept per failed cycle (all of them when replaying a cycle).
pub(crate) const FINDINGS_KEPT: usize = 10;

/// The seed of cycle `n`: every cycle's choices depend only on the run's seed and `n`.
pub(crate) fn cycle_seed(seed: u64, n: u64) -> u64 {
    let mut z = seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Adds the flash cache's counters of one open-to-cut run.
fn count_flash_run(report: &mut CrashTestReport, s: &FlashCacheStats) {
    if let Some(f) = &mut report.flash {
        f.write_backs += s.write_backs;
        f.ring_page_writes += s.ring_page_writes;
        f.dir_checkpoints += s.dir_checkpoints;
        f.gsc_reappends += s.gsc_reappends;
        f.hits += s.hits;
        f.corrupt_slots += s.corrupt_slots;
    }
}

/// After a successful open: how the flash cache came up, and the audit of its slots against the
/// data device (a stale slot is a finding). `existing`: the database existed before this open.
/// `explained`: whether a fault's damage explains corruption of these pages reported so (the
/// verification that follows meets it and settles it).
fn audit_flash(
    report: &mut CrashTestReport,
    db: &Db,
    existing: bool,
    explained: impl Fn(&[u64], &str) -> bool,
) -> Vec<Finding> {
    let Some(f) = &mut report.flash else {
        return Vec::new();
    };
    let mut findings = Vec::new();
    match db.stats().flash_cache {
        Some(s) => {
            if existing {
                if s.warm_start {
                    f.rebuilds += 1;
                } else {
                    f.cold_starts += 1;
                }
            }
            f.rebuild_pages += s.rebuild_pages;
            f.rebuild_segments += s.rebuild_segments;
        }
        None => findings.push(note(
            FindingKind::RecoveryFailed,
            "the database opened without its flash cache (no flash cache stats)".into(),
        )),
    }
    match db.check() {
        Ok(c) => {
            f.slots_checked += c.flash_slots_checked;
            f.stale_versions_served += c.flash_stale_slots;
            if c.flash_stale_slots > 0 {
                findings.push(Finding {
                    kind: FindingKind::StaleVersion,
                    table: String::new(),
                    key: String::new(),
                    txn: None,
                    expected: "no flash slot older than the data device's copy of its page".into(),
                    found: format!(
                        "{} of {} valid flash slots stale after recovery",
                        c.flash_stale_slots, c.flash_slots_checked
                    ),
                });
            }
        }
        Err(pagoda_engine::Error::Corruption {
            all_pages, detail, ..
        }) if explained(&all_pages, &detail) => {}
        Err(e) => findings.push(note(
            if e.is_corruption() {
                FindingKind::Corruption
            } else {
                FindingKind::RecoveryFailed
            },
            format!("the check after recovery failed: {e}"),
        )),
    }
    findings
}

/// Counts findings; `excused`: detected corruption is no failure (torn mode none without a
/// flash cache), and a wrong value there is a torn page used undetected.
pub(crate) fn tally(report: &mut CrashTestReport, findings: &[Finding], excused: bool) {
    for f in findings {
        match f.kind {
            FindingKind::LostCommit => report.lost_commits += 1,
            FindingKind::UncommittedVisible | FindingKind::PendingExposed => {
                report.uncommitted_visible += 1;
            }
            FindingKind::PartialTransaction => report.partial_transactions += 1,
            FindingKind::IsolationViolation | FindingKind::ReadMismatch => {
                report.isolation_violations += 1;
            }
            FindingKind::WrongValue => report.wrong_values += 1,
            FindingKind::Corruption => report.corruption_detected += 1,
            FindingKind::Unreported => report.unreported += 1,
            FindingKind::RecoveryFailed | FindingKind::EngineFailed | FindingKind::StaleVersion => {
            }
        }
        let engine = matches!(
            f.kind,
            FindingKind::RecoveryFailed | FindingKind::EngineFailed
        );
        if excused && !engine {
            report.undetected_torn += 1;
        }
    }
}

/// Counts how the cycle of `p` was verified: `how` is "verified" or why it was not (wholly).
fn count_unverified(report: &mut CrashTestReport, ledger: &mut Ledger, p: &Pending, how: &str) {
    *report.verification.entry(how.to_string()).or_default() += 1;
    for a in &p.armed {
        ledger.verified(a.kind, how == "verified");
    }
}

/// Runs a crash test.
pub fn run(opts: CrashTestOptions) -> Result<CrashTestReport> {
    opts.validate()?;
    let mut report = CrashTestReport {
        seed: opts.seed,
        sabotage: opts.sabotage.map(|s| s.to_string()),
        flash: opts.flash_cache.as_ref().map(|fc| FlashCrashReport {
            policy: fc.policy.to_string(),
            pages: fc.pages.to_string(),
            size_bytes: opts.flash_cache_bytes(),
            ..FlashCrashReport::default()
        }),
        ..CrashTestReport::default()
    };
    let excused = opts.corruption_excused();
    let keep = if opts.replay_cycle.is_some() {
        usize::MAX
    } else {
        FINDINGS_KEPT
    };
    let mut devs = fresh_devices(&opts)?;
    let mut st = OpenState::new();
    let mut model = Model::new();
    let mut pending: Option<Pending> = None;
    let mut ledger = Ledger::default();
    let mut uid_next: u64 = 1;
    let last = opts.replay_cycle.map_or(opts.cycles, |r| r + 1);
    let mut cycle = 0;
    // Opens of the same cycle again (after damage was undone): each draws new choices.
    let mut again = 0u64;
    let mut again_cycle = 0;
    // Cycle `last` only recovers and verifies the last workload.
    while cycle <= last {
        if again_cycle != cycle {
            (again, again_cycle) = (0, cycle);
        }
        let mut rng = SmallRng::seed_from_u64(
            cycle_seed(opts.seed, cycle) ^ again.wrapping_mul(0x5851_f42d_4c95_7f2d),
        );
        again += 1;
        let armed = pending
            .as_ref()
            .map(|p| p.armed.clone())
            .unwrap_or_default();
        let tags_before: Vec<u64> = match &devs.injector {
            Some(i) => armed.iter().map(|a| i.tags(a)).collect(),
            None => Vec::new(),
        };
        let mut heard = vec![false; armed.len()];
        let retried_before = report.opens_failed_by_faults;
        let (opened, recovery_cuts) = open_armed(
            &opts,
            &devs,
            &mut rng,
            pending.is_some(),
            &mut st,
            &mut report,
            (&armed, &mut heard),
        )?;
        if let (Some(inj), Some(p)) = (&devs.injector, &mut pending) {
            // A fault that fired inside recovery must have been heard there, or its read
            // served another way (a flash cache page from the data device).
            for ((a, before), heard) in armed.iter().zip(&tags_before).zip(&heard) {
                let fired = inj.tags(a) > *before;
                let reread = st.served_in_recovery.iter().any(|t| inj.carries(a, t));
                p.found
                    .extend(ledger.at_recovery(a, fired, *heard || reread));
            }
            inj.disarm();
        }
        // Torn mode none excuses detected corruption only on the pages cuts tore.
        let spp = (opts.page_size / pagoda_device::SECTOR_SIZE).max(1) as u64;
        let rec_torn = std::mem::take(&mut st.torn_in_recovery);
        st.tore(&rec_torn, spp);
        if let Some(p) = &pending {
            st.tore(&p.torn, spp);
        }
        let torn_pages = st.torn_pages.clone();
        let torn_at = |p: &u64| torn_pages.contains(p);
        let failed_cycle = pending.as_ref().map_or(cycle, |p| p.cycle);
        let cut = pending.as_ref().and_then(|p| p.cut.clone());
        let fault = pending.as_ref().and_then(|p| p.fault.clone());
        let fail = |report: &mut CrashTestReport, findings: Vec<Finding>| {
            tally(report, &findings, excused);
            report.failures.push(Failure {
                seed: opts.seed,
                cycle: failed_cycle,
                cut: cut.clone(),
                fault: fault.clone(),
                recovery_cuts: recovery_cuts.clone(),
                total_findings: findings.len(),
                threads: opts.threads,
                findings: findings.into_iter().take(keep).collect(),
            });
        };
        let (db, switch) = match opened {
            Ok(x) => x,
            Err(e) => {
                if let (Some(inj), Some(_)) = (&devs.injector, &pending) {
                    // Recovery refused the log group a fault rotted: restore it, open again.
                    if ledger.log_rot_reported(&e, inj)? {
                        continue;
                    }
                }
                // After a lost write, any failure of recovery is undetectable by design.
                let pages = match &e {
                    pagoda_engine::Error::Corruption { all_pages, .. } => all_pages.clone(),
                    _ => Vec::new(),
                };
                let lost = ledger.lost_write();
                // Torn mode none: the pages cuts tore explain their own corruption, the damage
                // a fault left must explain the rest.
                let (torn_hit, rest): (Vec<u64>, Vec<u64>) =
                    pages.iter().partition(|p| excused && torn_at(p));
                let torn_page = e.is_corruption() && !torn_hit.is_empty();
                let explains = (e.is_corruption() || lost)
                    && !(torn_page && rest.is_empty())
                    && ledger.explains(&rest, &e.to_string(), opts.page_size);
                // Undoes what the cuts tore, as an atomic device would have kept none of it.
                let untear = |p: &mut Pending| -> Result<u64> {
                    let mut torn = std::mem::take(&mut p.torn);
                    torn.extend(rec_torn.iter().cloned());
                    devs.untear(&torn)
                };
                if let (true, Some(inj), Some(p)) = (explains, &devs.injector, &mut pending) {
                    // Recovery refused the damage a fault left: undo it (a restore of those
                    // pages) and open the same cycle again, to verify it whole.
                    if ledger.restore(inj)? {
                        if torn_page {
                            untear(p)?;
                        }
                        continue;
                    }
                }
                let torn_page = torn_page && (rest.is_empty() || explains);
                if let (true, Some(p)) = (torn_page, &mut pending) {
                    // Torn mode none detected a page a cut tore: it cannot repair it. Put the
                    // torn sectors back as they were before the write and open the same cycle
                    // again (bounded: each try's recovery may be cut and tear again).
                    if again < 4 && untear(p)? > 0 {
                        report.untorn += 1;
                        report.corruption_detected += 1;
                        continue;
                    }
                }
                let explained = explains && ledger.explains_corruption();
                if e.is_corruption() && !explained {
                    report.corruption_detected += 1;
                }
                // What the workload found stands whatever recovery does.
                let mut findings = pending
                    .as_ref()
                    .map(|p| p.findings_but(|w| ledger.explains_wrong(None, w)))
                    .unwrap_or_default();
                let reason = if explained && lost {
                    "recovery refused after a lost write"
                } else if explained {
                    "recovery refused: damage it detected"
                } else if torn_page {
                    "recovery refused: a torn page (torn mode none)"
                } else {
                    let kind = if e.is_corruption() {
                        FindingKind::Corruption
                    } else {
                        FindingKind::RecoveryFailed
                    };
                    findings.push(note(kind, format!("open failed: {e}")));
                    "recovery failed"
                };
                if !findings.is_empty() {
                    fail(&mut report, findings);
                    if opts.stop_on_failure {
                        break;
                    }
                }
                // The database is gone: start over (the cycle runs on a fresh one).
                if let Some(p) = &pending {
                    report.transactions_unverified += p.ops();
                    count_unverified(&mut report, &mut ledger, p, reason);
                }
                report.resets += 1;
                devs = fresh_devices(&opts)?;
                ledger.reset();
                st.new_devices = true;
                st.torn_pages.clear();
                model.clear();
                pending = None;
                continue;
            }
        };
        let flash_findings = audit_flash(&mut report, &db, pending.is_some(), |pages, d| {
            ledger.explains(pages, d, opts.page_size)
        });
        if let Some(p) = &mut pending {
            // Recovery reads the log before it writes: a rotten group must have stopped it.
            p.found.extend(ledger.log_rot_unreported());
            if recovery_cuts.is_empty() && report.opens_failed_by_faults == retried_before {
                let damage = db.stats().recovery.superblock_damage;
                p.found
                    .extend(ledger.superblock_reported(damage.as_deref()));
            } else {
                // An attempt cut (or failed by a fault) during recovery may have written the
                // copy already.
                ledger.superblock_unchecked();
            }
        }
        if let Some(p) = pending.take() {
            let repaired = db.stats().recovery.torn_pages_repaired;
            report.torn_pages_repaired += repaired;
            ledger.repaired(repaired);
            let lazy = opts.commit == CommitMode::Lazy;
            let mut verdict = oracle::verify(&db, &model, &p.txns, &p.ddl, lazy)?;
            if let Some(inj) = &devs.injector {
                let clean = verdict.findings.is_empty() && flash_findings.is_empty();
                if clean
                    && !verdict.corrupt_pages.is_empty()
                    && verdict
                        .corrupt_details
                        .iter()
                        .all(|(pages, d)| ledger.explains(pages, d, opts.page_size))
                    && ledger.restorable()
                {
                    // Reads met the damage a fault left: undo it (a restore of those pages)
                    // and verify the same cycle again, whole.
                    db.abandon();
                    if !ledger.restore(inj)? {
                        // Recovery rewrote the damaged pages meanwhile: nothing to undo, and
                        // what the reads met cannot be told apart any more.
                        ledger.explains_corruption();
                        report.transactions_checked += verdict.checked;
                        report.transactions_unverified += verdict.unverified;
                        count_unverified(&mut report, &mut ledger, &p, "verified in part");
                        report.resets += 1;
                        devs = fresh_devices(&opts)?;
                        ledger.reset();
                        st.new_devices = true;
                        st.torn_pages.clear();
                        st.torn_pages.clear();
                        model.clear();
                        continue;
                    }
                    pending = Some(p);
                    continue;
                }
            }
            report.lazy_commits_lost += verdict.suffix_lost;
            report.transactions_checked += verdict.checked;
            report.transactions_unverified += verdict.unverified;
            let corrupt = !verdict.corrupt_pages.is_empty();
            // Torn mode none: pages cuts tore explain their own corruption; the damage a fault
            // left must explain the rest.
            let damaged: Vec<(Vec<u64>, String)> = verdict
                .corrupt_details
                .iter()
                .map(|(pages, d)| {
                    let rest = pages.iter().copied();
                    let rest = rest.filter(|p| !(excused && torn_at(p)));
                    (pages.is_empty(), rest.collect::<Vec<u64>>(), d.clone())
                })
                .filter(|(unnamed, rest, _)| *unnamed || !rest.is_empty())
                .map(|(_, rest, d)| (rest, d))
                .collect();
            let explained = corrupt
                && !damaged.is_empty()
                && damaged
                    .iter()
                    .all(|(pages, d)| ledger.explains(pages, d, opts.page_size))
                && ledger.explains_corruption();
            if corrupt && !explained {
                report.corruption_detected += verdict.corrupt_pages.len() as u64;
            }
            // A lost write excuses only the findings whose keys lead through a page it hit.
            let excused_by_lost = ledger.excuse_lost(&db, &mut verdict, &p.txns);
            let mut findings = verdict.findings;
            findings.extend(flash_findings);
            findings.extend(p.findings_but(|w| ledger.explains_wrong(Some(&db), w)));
            let torn_only = damaged.is_empty();
            if corrupt && !(torn_only || explained) {
                let pages: Vec<u64> = verdict.corrupt_pages.iter().copied().collect();
                findings.push(note(
                    FindingKind::Corruption,
                    format!("corrupt pages {pages:?} on read"),
                ));
            }
            if !findings.is_empty() {
                fail(&mut report, findings);
                if opts.stop_on_failure {
                    db.abandon();
                    break;
                }
            }
            if corrupt || excused_by_lost {
                // Damage stays on the medium: the cycle runs on a fresh database.
                let how = if verdict.unverified > 0 {
                    "verified in part: damaged pages hid some outcomes"
                } else {
                    "verified"
                };
                count_unverified(&mut report, &mut ledger, &p, how);
                db.abandon();
                report.resets += 1;
                devs = fresh_devices(&opts)?;
                ledger.reset();
                st.new_devices = true;
                st.torn_pages.clear();
                model.clear();
                continue;
            }
            count_unverified(&mut report, &mut ledger, &p, "verified");
            model = verdict.state;
        } else {
            if !flash_findings.is_empty() {
                fail(&mut report, flash_findings);
                if opts.stop_on_failure {
                    db.abandon();
                    break;
                }
            }
            for t in STATIC_TABLES {
                if !db.list_tables().iter().any(|x| x == t) {
                    db.create_table(t)?;
                }
            }
            model = STATIC_TABLES
                .iter()
                .map(|t| (t.to_string(), Default::default()))
                .collect();
        }
        for t in db.list_tables() {
            report.deepest_tree = report.deepest_tree.max(db.tree_depth(&t)? as u64);
        }
        if cycle == last {
            db.abandon();
            break;
        }
        let armed = match &devs.injector {
            Some(i) => {
                ledger.overwritten(&i.learn_pages());
                i.arm(&mut rng, opts.max_ops_before_cut)?
            }
            None => Vec::new(),
        };
        let run = Run {
            opts: &opts,
            switch: &switch,
            model: &model,
            cycle,
        };
        let mut p = workload(&run, db, &mut rng, &mut uid_next);
        if let (Some(inj), false) = (&devs.injector, armed.is_empty()) {
            let cause = p.failure.as_ref().map(pagoda_engine::Failure::cause);
            let mut expected = false;
            for a in &armed {
                let (explains, unreported) = ledger.settle(inj, a, cause, &p);
                expected |= explains;
                p.found.extend(unreported);
                // A fault that fails requests stays armed through the next recovery.
                if !a.kind.fails_requests() {
                    inj.disarm_dev(a.dev);
                }
            }
            if expected {
                p.engine_failure = None;
            }
            let what: Vec<String> = armed
                .iter()
                .map(|a| format!("{}: {}", a.kind, a.what))
                .collect();
            p.fault = Some(what.join("; "));
            report.two_fault_cycles += u64::from(armed.len() > 1);
            p.armed = armed;
        }
        report.ddl_operations += p.ddl.len() as u64;
        report.transactions_run += p.ops();
        report.commits_acknowledged += p
            .txns
            .iter()
            .filter(|t| matches!(t.status, Status::Acked(_)))
            .count() as u64;
        if let Some(c) = &p.cut {
            count_cut(&mut report, c);
        }
        if let Some(s) = &p.flash {
            count_flash_run(&mut report, s);
        }
        if switch.cut_mid_doublewrite() {
            report.cuts_mid_doublewrite += 1;
        }
        pending = Some(p);
        cycle += 1;
        report.cycles = cycle;
        if let Some(pr) = &opts.progress {
            pr(cycle);
        }
    }
    report.faults = ledger.counts;
    Ok(report)
}
