//! The cycle loop of the crash test: open (with cuts during recovery), verify, run to the cut.
//! The loop's state lives in [`Cycles`]; each step of a cycle is one of its methods (the
//! steps after an open are in `verify_cycle.rs`).

use crate::cycle::{workload, Pending, Run};
use crate::ledger::Ledger;
use crate::open::{count_cut, fresh_devices, open_armed, Devices, OpenState};
use crate::oracle::{Finding, FindingKind, Model};
use crate::power::{CutPoint, Switch, TornSector};
use crate::workload::Status;
use crate::{CrashTestOptions, CrashTestReport, Failure, FlashCrashReport};
use pagoda_engine::{stats::FlashCacheStats, Db, Result};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::collections::BTreeSet;
use std::sync::Arc;

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
pub(crate) fn count_unverified(
    report: &mut CrashTestReport,
    ledger: &mut Ledger,
    p: &Pending,
    how: &str,
) {
    *report.verification.entry(how.to_string()).or_default() += 1;
    for a in &p.armed {
        ledger.verified(a.kind, how == "verified");
    }
}

/// What a step leaves the cycle loop to do.
pub(crate) enum Flow<T> {
    /// Go on with the cycle.
    Go(T),
    /// Open the same cycle again (damage undone, or fresh devices).
    Reopen,
    /// A failure with `stop_on_failure`: the run ends.
    Stop,
}

/// The state the cycles carry from one to the next.
pub(crate) struct Cycles<'o> {
    pub(crate) opts: &'o CrashTestOptions,
    pub(crate) report: CrashTestReport,
    /// Torn mode none without a flash cache: detected corruption is no failure.
    pub(crate) excused: bool,
    /// Findings kept per failed cycle.
    keep: usize,
    pub(crate) devs: Devices,
    pub(crate) st: OpenState,
    /// The committed state the oracle holds the database to.
    pub(crate) model: Model,
    /// The run cut last, until an open verifies it.
    pub(crate) pending: Option<Pending>,
    pub(crate) ledger: Ledger,
    uid_next: u64,
}

/// An open's outcome: the database and its power switch, or why it failed.
type Opening = std::result::Result<(Db, Arc<Switch>), pagoda_engine::Error>;

/// What an open left for the steps after it: the run it recovered and how.
pub(crate) struct Recovered {
    failed_cycle: u64,
    cut: Option<CutPoint>,
    fault: Option<String>,
    pub(crate) recovery_cuts: Vec<CutPoint>,
    /// Sectors torn by cuts during this open's recovery.
    pub(crate) rec_torn: Vec<TornSector>,
    /// Data pages cuts tore on these devices.
    torn_pages: BTreeSet<u64>,
    /// A fault failed an attempt of this open (which was then retried).
    pub(crate) failed_by_fault: bool,
}

impl Recovered {
    /// A cut tore data page `p` on these devices.
    pub(crate) fn torn_at(&self, p: &u64) -> bool {
        self.torn_pages.contains(p)
    }
}

/// Runs a crash test.
pub fn run(opts: CrashTestOptions) -> Result<CrashTestReport> {
    opts.validate()?;
    let mut c = Cycles::new(&opts)?;
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
        let (opened, r) = c.open(cycle, &mut rng)?;
        let (db, switch) = match opened {
            Ok(x) => x,
            Err(e) => match c.open_failed(e, &r, again)? {
                Flow::Stop => break,
                Flow::Go(()) | Flow::Reopen => continue,
            },
        };
        let flash_findings = c.after_open(&db, &r);
        let db = match c.pending.take() {
            Some(p) => c.verify(db, p, flash_findings, &r)?,
            None => c.first_open(db, flash_findings, &r)?,
        };
        let db = match db {
            Flow::Go(db) => db,
            Flow::Reopen => continue,
            Flow::Stop => break,
        };
        for t in db.list_tables() {
            c.report.deepest_tree = c.report.deepest_tree.max(db.tree_depth(&t)? as u64);
        }
        if cycle == last {
            db.abandon();
            break;
        }
        c.run_to_cut(db, &switch, cycle, &mut rng)?;
        cycle += 1;
        c.report.cycles = cycle;
        if let Some(pr) = &opts.progress {
            pr(cycle);
        }
    }
    c.report.faults = c.ledger.counts;
    Ok(c.report)
}

impl<'o> Cycles<'o> {
    fn new(opts: &'o CrashTestOptions) -> Result<Self> {
        let report = CrashTestReport {
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
        Ok(Self {
            opts,
            report,
            excused: opts.corruption_excused(),
            keep: if opts.replay_cycle.is_some() {
                usize::MAX
            } else {
                FINDINGS_KEPT
            },
            devs: fresh_devices(opts)?,
            st: OpenState::new(),
            model: Model::new(),
            pending: None,
            ledger: Ledger::default(),
            uid_next: 1,
        })
    }

    /// Opens the database of `cycle`, recovering the run cut before it (with cuts during
    /// recovery in some cycles); settles what the faults armed for recovery did there.
    fn open(&mut self, cycle: u64, rng: &mut SmallRng) -> Result<(Opening, Recovered)> {
        let armed = self
            .pending
            .as_ref()
            .map(|p| p.armed.clone())
            .unwrap_or_default();
        let tags_before: Vec<u64> = match &self.devs.injector {
            Some(i) => armed.iter().map(|a| i.tags(a)).collect(),
            None => Vec::new(),
        };
        let mut heard = vec![false; armed.len()];
        let retried_before = self.report.opens_failed_by_faults;
        let (opened, recovery_cuts) = open_armed(
            self.opts,
            &self.devs,
            rng,
            self.pending.is_some(),
            &mut self.st,
            &mut self.report,
            (&armed, &mut heard),
        )?;
        if let (Some(inj), Some(p)) = (&self.devs.injector, &mut self.pending) {
            // A fault that fired inside recovery must have been heard there, or its read
            // served another way (a flash cache page from the data device).
            for ((a, before), heard) in armed.iter().zip(&tags_before).zip(&heard) {
                let fired = inj.tags(a) > *before;
                let reread = self.st.served_in_recovery.iter().any(|t| inj.carries(a, t));
                p.found
                    .extend(self.ledger.at_recovery(a, fired, *heard || reread));
            }
            inj.disarm();
        }
        // Torn mode none excuses detected corruption only on the pages cuts tore.
        let spp = (self.opts.page_size / pagoda_device::SECTOR_SIZE).max(1) as u64;
        let rec_torn = std::mem::take(&mut self.st.torn_in_recovery);
        self.st.tore(&rec_torn, spp);
        if let Some(p) = &self.pending {
            self.st.tore(&p.torn, spp);
        }
        let p = self.pending.as_ref();
        let r = Recovered {
            failed_cycle: p.map_or(cycle, |p| p.cycle),
            cut: p.and_then(|p| p.cut.clone()),
            fault: p.and_then(|p| p.fault.clone()),
            recovery_cuts,
            rec_torn,
            torn_pages: self.st.torn_pages.clone(),
            failed_by_fault: self.report.opens_failed_by_faults != retried_before,
        };
        Ok((opened, r))
    }

    /// Records a failed cycle with its findings.
    pub(crate) fn fail(&mut self, r: &Recovered, findings: Vec<Finding>) {
        tally(&mut self.report, &findings, self.excused);
        self.report.failures.push(Failure {
            seed: self.opts.seed,
            cycle: r.failed_cycle,
            cut: r.cut.clone(),
            fault: r.fault.clone(),
            recovery_cuts: r.recovery_cuts.clone(),
            total_findings: findings.len(),
            threads: self.opts.threads,
            findings: findings.into_iter().take(self.keep).collect(),
        });
    }

    /// The database is gone or damaged for good: the next cycle runs on fresh devices.
    pub(crate) fn start_over(&mut self) -> Result<()> {
        self.report.resets += 1;
        self.devs = fresh_devices(self.opts)?;
        self.ledger.reset();
        self.st.new_devices = true;
        self.st.torn_pages.clear();
        self.model.clear();
        Ok(())
    }

    /// Arms the faults of the next run, runs the workload of `cycle` until the power is cut,
    /// settles what the faults did, and keeps the run for the next open to verify.
    fn run_to_cut(
        &mut self,
        db: Db,
        switch: &Arc<Switch>,
        cycle: u64,
        rng: &mut SmallRng,
    ) -> Result<()> {
        let armed = match &self.devs.injector {
            Some(i) => {
                self.ledger.overwritten(&i.learn_pages());
                i.arm(rng, self.opts.max_ops_before_cut)?
            }
            None => Vec::new(),
        };
        let run = Run {
            opts: self.opts,
            switch,
            model: &self.model,
            cycle,
        };
        let mut p = workload(&run, db, rng, &mut self.uid_next);
        if let (Some(inj), false) = (&self.devs.injector, armed.is_empty()) {
            let cause = p.failure.as_ref().map(pagoda_engine::Failure::cause);
            let mut expected = false;
            for a in &armed {
                let (explains, unreported) = self.ledger.settle(inj, a, cause, &p);
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
            self.report.two_fault_cycles += u64::from(armed.len() > 1);
            p.armed = armed;
        }
        let report = &mut self.report;
        report.ddl_operations += p.ddl.len() as u64;
        report.transactions_run += p.ops();
        report.commits_acknowledged += p
            .txns
            .iter()
            .filter(|t| matches!(t.status, Status::Acked(_)))
            .count() as u64;
        if let Some(c) = &p.cut {
            count_cut(report, c);
        }
        if let Some(s) = &p.flash {
            count_flash_run(report, s);
        }
        if switch.cut_mid_doublewrite() {
            report.cuts_mid_doublewrite += 1;
        }
        self.pending = Some(p);
        Ok(())
    }
}
