//! The steps of a cycle after its open: an open that failed (damage a fault left is undone
//! and the cycle opened again; anything else is a finding or, where the run made it
//! unavoidable, a fresh start), the audit of what recovery left (flash cache, superblock),
//! and the verification of the run cut before it against the oracle.

use crate::cycle::Pending;
use crate::oracle::{self, note, Finding, FindingKind, Verdict};
use crate::run::{count_unverified, Cycles, Flow, Recovered};
use crate::workload::STATIC_TABLES;
use crate::CrashTestReport;
use pagoda_engine::{CommitMode, Db, Error, Result};

impl Cycles<'_> {
    /// The open of a cycle failed with `e`: undo damage a fault or a cut explains and open
    /// again, or record the findings and start over on fresh devices. `again`: opens of this
    /// cycle so far.
    pub(crate) fn open_failed(&mut self, e: Error, r: &Recovered, again: u64) -> Result<Flow<()>> {
        if let (Some(inj), Some(_)) = (&self.devs.injector, &self.pending) {
            // Recovery refused the log group a fault rotted: restore it, open again.
            if self.ledger.log_rot_reported(&e, inj)? {
                return Ok(Flow::Reopen);
            }
        }
        // After a lost write, any failure of recovery is undetectable by design.
        let pages = match &e {
            Error::Corruption { all_pages, .. } => all_pages.clone(),
            _ => Vec::new(),
        };
        let lost = self.ledger.lost_write();
        // Torn mode none: the pages cuts tore explain their own corruption, the damage a
        // fault left must explain the rest.
        let (torn_hit, rest): (Vec<u64>, Vec<u64>) =
            pages.iter().partition(|p| self.excused && r.torn_at(p));
        let torn_page = e.is_corruption() && !torn_hit.is_empty();
        let explains = (e.is_corruption() || lost)
            && !(torn_page && rest.is_empty())
            && self
                .ledger
                .explains(&rest, &e.to_string(), self.opts.page_size);
        // Undoes what the cuts tore, as an atomic device would have kept none of it.
        let untear = |devs: &crate::open::Devices, p: &mut Pending| -> Result<u64> {
            let mut torn = std::mem::take(&mut p.torn);
            torn.extend(r.rec_torn.iter().cloned());
            devs.untear(&torn)
        };
        if let (true, Some(inj), Some(p)) = (explains, &self.devs.injector, &mut self.pending) {
            // Recovery refused the damage a fault left: undo it (a restore of those pages)
            // and open the same cycle again, to verify it whole.
            if self.ledger.restore(inj)? {
                if torn_page {
                    untear(&self.devs, p)?;
                }
                return Ok(Flow::Reopen);
            }
        }
        let torn_page = torn_page && (rest.is_empty() || explains);
        if let (true, Some(p)) = (torn_page, &mut self.pending) {
            // Torn mode none detected a page a cut tore: it cannot repair it. Put the torn
            // sectors back as they were before the write and open the same cycle again
            // (bounded: each try's recovery may be cut and tear again).
            if again < 4 && untear(&self.devs, p)? > 0 {
                self.report.untorn += 1;
                self.report.corruption_detected += 1;
                return Ok(Flow::Reopen);
            }
        }
        let explained = explains && self.ledger.explains_corruption();
        if e.is_corruption() && !explained {
            self.report.corruption_detected += 1;
        }
        // What the workload found stands whatever recovery does.
        let mut findings = match &self.pending {
            Some(p) => p.findings_but(|w| self.ledger.explains_wrong(None, w)),
            None => Vec::new(),
        };
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
            self.fail(r, findings);
            if self.opts.stop_on_failure {
                return Ok(Flow::Stop);
            }
        }
        // The database is gone: start over (the cycle runs on a fresh one).
        if let Some(p) = &self.pending {
            self.report.transactions_unverified += p.ops();
            count_unverified(&mut self.report, &mut self.ledger, p, reason);
        }
        self.start_over()?;
        self.pending = None;
        Ok(Flow::Reopen)
    }

    /// After an open: how the flash cache came up and the audit of its slots, and whether
    /// recovery reported the damage faults left on the log and the superblock. Returns the
    /// audit's findings.
    pub(crate) fn after_open(&mut self, db: &Db, r: &Recovered) -> Vec<Finding> {
        let (ledger, page_size) = (&self.ledger, self.opts.page_size);
        let flash_findings =
            audit_flash(&mut self.report, db, self.pending.is_some(), |pages, d| {
                ledger.explains(pages, d, page_size)
            });
        if let Some(p) = &mut self.pending {
            // Recovery reads the log before it writes: a rotten group must have stopped it.
            p.found.extend(self.ledger.log_rot_unreported());
            if r.recovery_cuts.is_empty() && !r.failed_by_fault {
                let damage = db.stats().recovery.superblock_damage;
                p.found
                    .extend(self.ledger.superblock_reported(damage.as_deref()));
            } else {
                // An attempt cut (or failed by a fault) during recovery may have written the
                // copy already.
                self.ledger.superblock_unchecked();
            }
        }
        flash_findings
    }

    /// Verifies the run `p` cut before this open against the oracle: every transaction all
    /// or nothing, no acknowledged commit lost. Damage a fault explains is undone and the
    /// cycle opened again; damage that stays, or a write the device lost, starts over on
    /// fresh devices.
    pub(crate) fn verify(
        &mut self,
        db: Db,
        p: Pending,
        flash_findings: Vec<Finding>,
        r: &Recovered,
    ) -> Result<Flow<Db>> {
        let page_size = self.opts.page_size;
        let repaired = db.stats().recovery.torn_pages_repaired;
        self.report.torn_pages_repaired += repaired;
        self.ledger.repaired(repaired);
        let lazy = self.opts.commit == CommitMode::Lazy;
        let mut verdict = oracle::verify(&db, &self.model, &p.txns, &p.ddl, lazy)?;
        if let Some(inj) = &self.devs.injector {
            let clean = verdict.findings.is_empty() && flash_findings.is_empty();
            if clean
                && !verdict.corrupt_pages.is_empty()
                && verdict
                    .corrupt_details
                    .iter()
                    .all(|(pages, d)| self.ledger.explains(pages, d, page_size))
                && self.ledger.restorable()
            {
                // Reads met the damage a fault left: undo it (a restore of those pages) and
                // verify the same cycle again, whole.
                db.abandon();
                if !self.ledger.restore(inj)? {
                    // Recovery rewrote the damaged pages meanwhile: nothing to undo, and what
                    // the reads met cannot be told apart any more.
                    self.ledger.explains_corruption();
                    self.report.transactions_checked += verdict.checked;
                    self.report.transactions_unverified += verdict.unverified;
                    count_unverified(&mut self.report, &mut self.ledger, &p, "verified in part");
                    self.start_over()?;
                    return Ok(Flow::Reopen);
                }
                self.pending = Some(p);
                return Ok(Flow::Reopen);
            }
        }
        self.report.lazy_commits_lost += verdict.suffix_lost;
        self.report.transactions_checked += verdict.checked;
        self.report.transactions_unverified += verdict.unverified;
        let corrupt = !verdict.corrupt_pages.is_empty();
        let (explained, torn_only) = self.judge_damage(&verdict, r);
        // A lost write excuses only the findings whose keys lead through a page it hit.
        let excused_by_lost = self.ledger.excuse_lost(&db, &mut verdict, &p.txns);
        let mut findings = std::mem::take(&mut verdict.findings);
        findings.extend(flash_findings);
        findings.extend(p.findings_but(|w| self.ledger.explains_wrong(Some(&db), w)));
        if corrupt && !(torn_only || explained) {
            let pages: Vec<u64> = verdict.corrupt_pages.iter().copied().collect();
            findings.push(note(
                FindingKind::Corruption,
                format!("corrupt pages {pages:?} on read"),
            ));
        }
        if !findings.is_empty() {
            self.fail(r, findings);
            if self.opts.stop_on_failure {
                db.abandon();
                return Ok(Flow::Stop);
            }
        }
        if corrupt || excused_by_lost {
            // Damage stays on the medium: the cycle runs on a fresh database.
            let how = if verdict.unverified > 0 {
                "verified in part: damaged pages hid some outcomes"
            } else {
                "verified"
            };
            count_unverified(&mut self.report, &mut self.ledger, &p, how);
            db.abandon();
            self.start_over()?;
            return Ok(Flow::Reopen);
        }
        count_unverified(&mut self.report, &mut self.ledger, &p, "verified");
        self.model = verdict.state;
        Ok(Flow::Go(db))
    }

    /// The corruption the reads of `verdict` met, against what explains it: whether the
    /// damage faults left explains all of it, and whether only pages cuts tore were corrupt
    /// (torn mode none: those explain their own corruption; a fault must explain the rest).
    /// Unexplained corruption is counted as detected.
    fn judge_damage(&mut self, verdict: &Verdict, r: &Recovered) -> (bool, bool) {
        let corrupt = !verdict.corrupt_pages.is_empty();
        let damaged: Vec<(Vec<u64>, String)> = verdict
            .corrupt_details
            .iter()
            .map(|(pages, d)| {
                let rest = pages.iter().copied();
                let rest = rest.filter(|p| !(self.excused && r.torn_at(p)));
                (pages.is_empty(), rest.collect::<Vec<u64>>(), d.clone())
            })
            .filter(|(unnamed, rest, _)| *unnamed || !rest.is_empty())
            .map(|(_, rest, d)| (rest, d))
            .collect();
        let page_size = self.opts.page_size;
        let explained = corrupt
            && !damaged.is_empty()
            && damaged
                .iter()
                .all(|(pages, d)| self.ledger.explains(pages, d, page_size))
            && self.ledger.explains_corruption();
        if corrupt && !explained {
            self.report.corruption_detected += verdict.corrupt_pages.len() as u64;
        }
        (explained, damaged.is_empty())
    }

    /// The first open on these devices (nothing to verify): the audit's findings, and the
    /// tables every cycle's workload uses.
    pub(crate) fn first_open(
        &mut self,
        db: Db,
        flash_findings: Vec<Finding>,
        r: &Recovered,
    ) -> Result<Flow<Db>> {
        if !flash_findings.is_empty() {
            self.fail(r, flash_findings);
            if self.opts.stop_on_failure {
                db.abandon();
                return Ok(Flow::Stop);
            }
        }
        for t in STATIC_TABLES {
            if !db.list_tables().iter().any(|x| x == t) {
                db.create_table(t)?;
            }
        }
        self.model = STATIC_TABLES
            .iter()
            .map(|t| (t.to_string(), Default::default()))
            .collect();
        Ok(Flow::Go(db))
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
