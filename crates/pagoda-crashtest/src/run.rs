//! The cycle loop of the crash test: open (with cuts during recovery), verify, run to the cut.

use crate::cycle::{workload, Pending, Run};
use crate::faults::{Armed, Injector};
use crate::ledger::Ledger;
use crate::oracle::{self, note, Finding, FindingKind, Model};
use crate::power::{CutPoint, Switch, TornSector};
use crate::workload::{Status, STATIC_TABLES};
use crate::{CrashTestOptions, CrashTestReport, Failure, FlashCrashReport};
use pagoda_device::mem::{MemConfig, MemDevice};
use pagoda_device::{DeviceRef, SECTOR_SIZE};
use pagoda_engine::{
    fault::{FlashStep, RecoveryStep},
    stats::FlashCacheStats,
    CommitMode, Db, DbOptions, Error, FlashCacheOptions, Result,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// Findings kept per failed cycle (all of them when replaying a cycle).
pub(crate) const FINDINGS_KEPT: usize = 10;

/// The devices of a database under test.
pub(crate) struct Devices {
    data: DeviceRef,
    log: DeviceRef,
    /// The flash cache device, when the run has a flash cache.
    flash: Option<DeviceRef>,
    /// The fault devices under data and log, when the run injects faults.
    injector: Option<Injector>,
}

impl Devices {
    /// Writes the sectors cuts tore back as they were before the torn writes (`torn` in the
    /// order they tore: undone from the last, so a sector torn twice gets its first state).
    fn untear(&self, torn: &[TornSector]) -> Result<()> {
        for (dev, sector, pre) in torn.iter().rev() {
            let d = match dev {
                0 => &self.data,
                1 => &self.log,
                _ => match &self.flash {
                    Some(f) => f,
                    None => continue,
                },
            };
            d.write(*sector, pre, pagoda_device::WriteHints::default())?;
            d.flush()?;
        }
        Ok(())
    }
}

fn can_cut(d: DeviceRef) -> Result<DeviceRef> {
    if d.as_power_cut().is_none() {
        return Err(Error::config(format!(
            "device {} cannot emulate a power cut; use an emulated SSD (sata-ssd, nvme-ssd) or mem",
            d.describe()
        )));
    }
    Ok(d)
}

pub(crate) fn fresh_devices(opts: &CrashTestOptions) -> Result<Devices> {
    let (mut data, mut log) = fresh_data_log(opts)?;
    let mut injector = None;
    if !opts.faults.is_empty() {
        let (i, d, l) = Injector::new(&opts.faults, opts.fault_chance, opts.page_size, data, log);
        (data, log, injector) = (d, l, Some(i));
    }
    let flash = match &opts.flash_cache {
        None => None,
        Some(fc) => Some(can_cut(match (&fc.device, &opts.device) {
            (Some(spec), _) | (None, Some(spec)) => spec.open()?,
            (None, None) => {
                // Just the cache's size (whole sectors): the engine must keep within it. No
                // atomic writes, so that unflushed slots can tear.
                let size = opts.flash_cache_bytes().div_ceil(SECTOR_SIZE as u64);
                Arc::new(MemDevice::new(MemConfig {
                    capacity_bytes: size.max(1) * SECTOR_SIZE as u64,
                    atomic_write_unit: None,
                    streams: 4,
                })?)
            }
        })?),
    };
    Ok(Devices {
        data,
        log,
        flash,
        injector,
    })
}

fn fresh_data_log(opts: &CrashTestOptions) -> Result<(DeviceRef, DeviceRef)> {
    match &opts.device {
        None => {
            let cfg = MemConfig {
                capacity_bytes: 256 << 20,
                atomic_write_unit: Some(opts.page_size),
                streams: 4,
            };
            let d: DeviceRef = Arc::new(MemDevice::new(cfg.clone())?);
            let l: DeviceRef = Arc::new(MemDevice::new(MemConfig {
                capacity_bytes: 4 << 20,
                ..cfg
            })?);
            Ok((d, l))
        }
        Some(spec) => {
            let (d, l) = (spec.open()?, spec.open()?);
            Ok((can_cut(d)?, l))
        }
    }
}

/// The seed of cycle `n`: every cycle's choices depend only on the run's seed and `n`.
pub(crate) fn cycle_seed(seed: u64, n: u64) -> u64 {
    let mut z = seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub(crate) fn db_options(opts: &CrashTestOptions, switch: &Arc<Switch>) -> DbOptions {
    let (d, l, f) = switch.devices();
    let o = DbOptions::with_devices(d, l)
        .page_size(opts.page_size)
        // Small enough that the cleaner and evictions run all the time, large enough for the
        // pages one commit changes (it cannot write them before its record is logged).
        .buffer_bytes(opts.pool_bytes())
        .torn(opts.torn)
        .commit(opts.commit)
        .log_capacity(1 << 20)
        .observer(switch.observer())
        .sabotage(opts.sabotage)
        // Recovery must leave every tree well formed, not only the rows the oracle reads.
        .paranoid(true)
        // One thread: no background thread, so that the run is deterministic.
        .background(opts.threads > 1);
    let o = if opts.sparse_log {
        o.log_ready_bytes(0)
    } else {
        o
    };
    let o = match opts.commit_spill_bytes {
        Some(b) => o.commit_spill_bytes(b),
        None => o,
    };
    let o = match (&opts.flash_cache, f) {
        (Some(fc), Some(f)) => o.flash_cache(
            FlashCacheOptions::new(f)
                .size_bytes(opts.flash_cache_bytes())
                .policy(fc.policy)
                .pages(fc.pages),
        ),
        _ => o,
    };
    o.dw_pages(crate::DW_PAGES)
}

/// Where the opens of a run stand between cycles.
pub(crate) struct OpenState {
    /// Operations the last open without a cut took (cuts during recovery fall below).
    pub(crate) open_ops: u64,
    /// Operations counted when that open's final checkpoint started.
    pub(crate) open_ckpt_ops: u64,
    /// No database was opened on the devices yet.
    pub(crate) new_devices: bool,
    /// The sectors torn by cuts during the last open's recovery (see `Switch::torn`).
    pub(crate) torn_in_recovery: Vec<TornSector>,
}

impl OpenState {
    pub(crate) fn new() -> Self {
        Self {
            open_ops: 16,
            open_ckpt_ops: 0,
            new_devices: true,
            torn_in_recovery: Vec::new(),
        }
    }
}

/// The open result of a cycle's database and the cuts during its recovery.
pub(crate) type Opened = (std::result::Result<(Db, Arc<Switch>), Error>, Vec<CutPoint>);

/// Opens a cycle's database; when `recovering` a workload, power is cut during recovery in
/// some cycles and the open retried. `Err`: a configuration the engine refuses on new devices.
pub(crate) fn open_cycle(
    opts: &CrashTestOptions,
    devs: &Devices,
    rng: &mut SmallRng,
    recovering: bool,
    st: &mut OpenState,
    report: &mut CrashTestReport,
) -> Result<Opened> {
    open_armed(
        opts,
        devs,
        rng,
        recovering,
        st,
        report,
        (&[], &mut Vec::new()),
    )
}

/// [`open_cycle`] with the faults `armed` still armed: an open that fails with one's own
/// error (it reached recovery) is retried once the faults are disarmed, and that fault's flag
/// in `heard` says so.
pub(crate) fn open_armed(
    opts: &CrashTestOptions,
    devs: &Devices,
    rng: &mut SmallRng,
    recovering: bool,
    st: &mut OpenState,
    report: &mut CrashTestReport,
    (armed, heard): (&[Armed], &mut Vec<bool>),
) -> Result<Opened> {
    let mut recovery_cuts = Vec::new();
    st.torn_in_recovery.clear();
    let opened = loop {
        let cut_open =
            recovering && recovery_cuts.len() < 2 && rng.gen_bool(opts.recovery_cut_chance);
        let countdown = if cut_open {
            let lo = if opts.bias_open_checkpoint && st.open_ckpt_ops > 0 {
                (st.open_ckpt_ops + 1).min(st.open_ops)
            } else {
                1
            };
            rng.gen_range(lo..=st.open_ops) as i64
        } else {
            i64::MAX
        };
        let switch = Switch::new(
            devs.data.clone(),
            devs.log.clone(),
            devs.flash.clone(),
            rng.gen(),
            rng.gen_bool(0.5),
            countdown,
        );
        match Db::open(db_options(opts, &switch)) {
            Ok(db) => {
                switch.arm(i64::MAX);
                if switch.is_dead() {
                    // The background thread met the cut right after open: recover again.
                    db.abandon();
                    st.torn_in_recovery.extend(switch.torn());
                    if let Some(c) = switch.cut_point() {
                        count_cut(report, &c);
                        recovery_cuts.push(c);
                    }
                    report.cuts_during_recovery += 1;
                    continue;
                }
                if !cut_open {
                    st.open_ops = switch.ops().max(1);
                    st.open_ckpt_ops = switch.open_checkpoint_at();
                }
                st.new_devices = false;
                break Ok((db, switch));
            }
            Err(e)
                if armed.iter().any(|a| {
                    devs.injector
                        .as_ref()
                        .is_some_and(|i| i.carries(a, &e.to_string()))
                }) =>
            {
                // Recovery reported the device's failure: the device is replaced (disarmed)
                // and the database opened again, as an operator would.
                heard.resize(armed.len(), false);
                if let Some(i) = &devs.injector {
                    for (a, h) in armed.iter().zip(heard.iter_mut()) {
                        *h |= i.carries(a, &e.to_string());
                    }
                    i.disarm();
                }
                report.opens_failed_by_faults += 1;
            }
            Err(_) if switch.is_dead() => {
                st.torn_in_recovery.extend(switch.torn());
                if let Some(c) = switch.cut_point() {
                    count_cut(report, &c);
                    recovery_cuts.push(c);
                }
                report.cuts_during_recovery += 1;
            }
            // A configuration the engine refuses, on the first open of new devices; later,
            // a refusal is a failed recovery (e.g. a flash cache it cannot use).
            Err(e @ Error::Config(_)) if st.new_devices => return Err(e),
            Err(e) => break Err(e),
        }
    };
    Ok((opened, recovery_cuts))
}

pub(crate) fn count_cut(report: &mut CrashTestReport, c: &CutPoint) {
    let key = match c.flash_step {
        Some(step) => format!("{} ({step})", c.phase),
        None => c.phase.clone(),
    };
    *report.cut_phases.entry(key).or_default() += 1;
    report.torn_512_sectors += c.torn_512;
    if c.phase == "checkpoint" || c.phase == "open: checkpoint" {
        report.cuts_mid_checkpoint += 1;
    }
    if let Some(f) = &mut report.flash {
        match c.flash_step {
            Some(FlashStep::Append) => f.cuts_append += 1,
            Some(FlashStep::WriteBack) => f.cuts_write_back += 1,
            Some(FlashStep::DirCheckpoint) => f.cuts_dir_checkpoint += 1,
            None => {}
        }
        if c.phase == RecoveryStep::FlashRebuild.to_string() {
            f.cuts_rebuild += 1;
        }
    }
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
fn audit_flash(report: &mut CrashTestReport, db: &Db, existing: bool) -> Vec<Finding> {
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
            // A fault that fired inside recovery must have been heard there.
            for ((a, before), heard) in armed.iter().zip(&tags_before).zip(&heard) {
                let fired = inj.tags(a) > *before;
                p.found.extend(ledger.at_recovery(a, fired, *heard));
            }
            inj.disarm();
        }
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
                // After a lost write, any failure of recovery is undetectable by design.
                let pages = match &e {
                    pagoda_engine::Error::Corruption { all_pages, .. } => all_pages.clone(),
                    _ => Vec::new(),
                };
                let lost = ledger.lost_write();
                let explains = (e.is_corruption() || lost)
                    && ledger.explains(&pages, &e.to_string(), opts.page_size);
                if let (true, Some(inj), Some(_)) = (explains, &devs.injector, &pending) {
                    // Recovery refused the damage a fault left: undo it (a restore of those
                    // pages) and open the same cycle again, to verify it whole.
                    if ledger.restore(inj)? {
                        continue;
                    }
                }
                if let (true, Some(p)) = (e.is_corruption() && excused, &mut pending) {
                    // Torn mode none detected a page the cut tore: it cannot repair it. Put the
                    // torn sectors back as they were before the write (a cut that kept none of
                    // it, as an atomic device would) and open the same cycle again.
                    let mut torn = std::mem::take(&mut p.torn);
                    torn.append(&mut st.torn_in_recovery);
                    // Bounded: each try's recovery may be cut and tear again.
                    if !torn.is_empty() && again < 4 {
                        devs.untear(&torn)?;
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
                    .map(|p| p.findings_but(|w| ledger.explains_wrong(None, &w.table, &w.key)))
                    .unwrap_or_default();
                let reason = if explained && lost {
                    "recovery refused after a lost write"
                } else if explained {
                    "recovery refused: damage it detected"
                } else if e.is_corruption() && excused {
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
                model.clear();
                pending = None;
                continue;
            }
        };
        let flash_findings = audit_flash(&mut report, &db, pending.is_some());
        if let Some(p) = &mut pending {
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
            let explained = corrupt
                && verdict
                    .corrupt_details
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
            findings.extend(p.findings_but(|w| ledger.explains_wrong(Some(&db), &w.table, &w.key)));
            if corrupt && !(excused || explained) {
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
                let (explains, unreported) = ledger.settle(inj, a, cause, &p.met, &p.heard);
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
