//! The cycle loop of the crash test: open (with cuts during recovery), verify, run to the cut.

use crate::oracle::{self, Finding, FindingKind, Model};
use crate::power::{CutPoint, Switch};
use crate::workload::{Shared, Status, WorkCfg, Write, DYN_PREFIX, MARKS, STATIC_TABLES};
use crate::{CrashTestOptions, CrashTestReport, Failure};
use pagoda_device::mem::{MemConfig, MemDevice};
use pagoda_device::DeviceRef;
use pagoda_engine::{Db, DbOptions, Error, Result, TornMode};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Findings kept per failed cycle (all of them when replaying a cycle).
const FINDINGS_KEPT: usize = 10;
/// Marker rows deleted per clean-up transaction.
const CLEANUP_CHUNK: usize = 40;

fn fresh_devices(opts: &CrashTestOptions) -> Result<(DeviceRef, DeviceRef)> {
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
            if d.as_power_cut().is_none() {
                return Err(Error::config(format!(
                    "device {} cannot emulate a power cut; use an emulated SSD (sata-ssd, nvme-ssd) or mem",
                    d.describe()
                )));
            }
            Ok((d, l))
        }
    }
}

/// The seed of cycle `n`: every cycle's choices depend only on the run's seed and `n`.
fn cycle_seed(seed: u64, n: u64) -> u64 {
    let mut z = seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn db_options(opts: &CrashTestOptions, switch: &Arc<Switch>) -> DbOptions {
    let (d, l) = switch.devices();
    let o = DbOptions::with_devices(d, l)
        .page_size(opts.page_size)
        // Small enough that the cleaner and evictions run all the time, large enough for the
        // pages one commit changes (it cannot write them before its record is logged).
        .buffer_bytes(
            opts.buffer_bytes
                .unwrap_or(if opts.page_size <= 8192 { 96 } else { 48 } * opts.page_size),
        )
        .torn(opts.torn)
        .commit(opts.commit)
        .log_capacity(1 << 20)
        .observer(switch.observer())
        .sabotage(opts.sabotage)
        // Recovery must leave every tree well formed, not only the rows the oracle reads.
        .paranoid(true)
        // One thread: no background thread, so that the run is deterministic.
        .background(opts.threads > 1);
    let o = match opts.commit_spill_bytes {
        Some(b) => o.commit_spill_bytes(b),
        None => o,
    };
    DbOptions { dw_pages: 8, ..o }
}

/// The history of one cycle's workload.
struct Pending {
    cycle: u64,
    txns: Vec<crate::workload::TxRec>,
    ddl: Vec<crate::workload::DdlRec>,
    cut: Option<CutPoint>,
    /// Pending commits seen by a reader while running.
    exposed: u64,
    /// Why the engine failed while the power was still on.
    engine_failure: Option<String>,
}

fn count_cut(report: &mut CrashTestReport, c: &CutPoint) {
    *report.cut_phases.entry(c.phase.clone()).or_default() += 1;
    report.torn_512_sectors += c.torn_512;
    if c.phase == "checkpoint" || c.phase == "open: checkpoint" {
        report.cuts_mid_checkpoint += 1;
    }
}

fn tally(report: &mut CrashTestReport, findings: &[Finding], torn: TornMode) {
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
            FindingKind::Corruption => report.corruption_detected += 1,
            FindingKind::RecoveryFailed | FindingKind::EngineFailed => {}
        }
        let engine = matches!(
            f.kind,
            FindingKind::RecoveryFailed | FindingKind::EngineFailed
        );
        if torn == TornMode::None && !engine {
            report.undetected_torn += 1;
        }
    }
}

fn note(kind: FindingKind, found: String) -> Finding {
    Finding {
        kind,
        table: String::new(),
        key: String::new(),
        txn: None,
        expected: "no failure".into(),
        found,
    }
}

/// Runs a crash test.
pub fn run(opts: CrashTestOptions) -> Result<CrashTestReport> {
    opts.validate()?;
    let mut report = CrashTestReport {
        seed: opts.seed,
        sabotage: opts.sabotage.map(|s| s.to_string()),
        ..CrashTestReport::default()
    };
    let keep = if opts.replay_cycle.is_some() {
        usize::MAX
    } else {
        FINDINGS_KEPT
    };
    let mut devs = fresh_devices(&opts)?;
    let mut model = Model::new();
    let mut pending: Option<Pending> = None;
    let mut open_ops: u64 = 16;
    let mut open_ckpt_ops: u64 = 0;
    let mut uid_next: u64 = 1;
    let last = opts.replay_cycle.map_or(opts.cycles, |r| r + 1);
    let mut cycle = 0;
    // Cycle `last` only recovers and verifies the last workload.
    while cycle <= last {
        let mut rng = SmallRng::seed_from_u64(cycle_seed(opts.seed, cycle));
        let mut recovery_cuts = Vec::new();
        let opened = loop {
            let cut_open = pending.is_some()
                && recovery_cuts.len() < 2
                && rng.gen_bool(opts.recovery_cut_chance);
            let countdown = if cut_open {
                let lo = if opts.bias_open_checkpoint && open_ckpt_ops > 0 {
                    (open_ckpt_ops + 1).min(open_ops)
                } else {
                    1
                };
                rng.gen_range(lo..=open_ops) as i64
            } else {
                i64::MAX
            };
            let switch = Switch::new(
                devs.0.clone(),
                devs.1.clone(),
                rng.gen(),
                rng.gen_bool(0.5),
                countdown,
            );
            match Db::open(db_options(&opts, &switch)) {
                Ok(db) => {
                    switch.arm(i64::MAX);
                    if switch.is_dead() {
                        // The background thread met the cut right after open: recover again.
                        db.abandon();
                        if let Some(c) = switch.cut_point() {
                            count_cut(&mut report, &c);
                            recovery_cuts.push(c);
                        }
                        report.cuts_during_recovery += 1;
                        continue;
                    }
                    if !cut_open {
                        open_ops = switch.ops().max(1);
                        open_ckpt_ops = switch.open_checkpoint_at();
                    }
                    break Ok((db, switch));
                }
                Err(_) if switch.is_dead() => {
                    if let Some(c) = switch.cut_point() {
                        count_cut(&mut report, &c);
                        recovery_cuts.push(c);
                    }
                    report.cuts_during_recovery += 1;
                }
                Err(e @ Error::Config(_)) => return Err(e),
                Err(e) => break Err(e),
            }
        };
        let failed_cycle = pending.as_ref().map_or(cycle, |p| p.cycle);
        let cut = pending.as_ref().and_then(|p| p.cut.clone());
        let fail = |report: &mut CrashTestReport, findings: Vec<Finding>| {
            tally(report, &findings, opts.torn);
            report.failures.push(Failure {
                seed: opts.seed,
                cycle: failed_cycle,
                cut: cut.clone(),
                recovery_cuts: recovery_cuts.clone(),
                total_findings: findings.len(),
                threads: opts.threads,
                findings: findings.into_iter().take(keep).collect(),
            });
        };
        let (db, switch) = match opened {
            Ok(x) => x,
            Err(e) => {
                if e.is_corruption() {
                    report.corruption_detected += 1;
                }
                if !(e.is_corruption() && opts.torn == TornMode::None) {
                    let kind = if e.is_corruption() {
                        FindingKind::Corruption
                    } else {
                        FindingKind::RecoveryFailed
                    };
                    fail(&mut report, vec![note(kind, format!("open failed: {e}"))]);
                    if opts.stop_on_failure {
                        break;
                    }
                }
                // The database is gone: start over (the cycle runs on a fresh one).
                report.resets += 1;
                devs = fresh_devices(&opts)?;
                model.clear();
                pending = None;
                continue;
            }
        };
        if let Some(p) = pending.take() {
            report.torn_pages_repaired += db.stats().recovery.torn_pages_repaired;
            let mut verdict = oracle::verify(&db, &model, &p.txns, &p.ddl)?;
            if let Some(why) = &p.engine_failure {
                verdict.findings.push(note(
                    FindingKind::EngineFailed,
                    format!("the database failed with the power on: {why}"),
                ));
            }
            if p.exposed > 0 {
                verdict.findings.push(Finding {
                    kind: FindingKind::PendingExposed,
                    table: String::new(),
                    key: String::new(),
                    txn: None,
                    expected: "no reader sees a commit before it is durable".into(),
                    found: format!("{} reads saw a pending commit", p.exposed),
                });
            }
            report.transactions_checked += verdict.checked;
            if !verdict.corrupt_pages.is_empty() {
                report.corruption_detected += verdict.corrupt_pages.len() as u64;
                if opts.torn != TornMode::None {
                    let pages: Vec<u64> = verdict.corrupt_pages.iter().copied().collect();
                    fail(
                        &mut report,
                        vec![note(
                            FindingKind::Corruption,
                            format!("corrupt pages {pages:?} on read"),
                        )],
                    );
                    if opts.stop_on_failure {
                        db.abandon();
                        break;
                    }
                }
                db.abandon();
                report.resets += 1;
                devs = fresh_devices(&opts)?;
                model.clear();
                continue;
            }
            if !verdict.findings.is_empty() {
                fail(&mut report, verdict.findings);
                if opts.stop_on_failure {
                    db.abandon();
                    break;
                }
            }
            model = verdict.state;
        } else {
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
        let p = workload(&opts, &db, &switch, &model, &mut rng, &mut uid_next, cycle);
        report.ddl_operations += p.ddl.len() as u64;
        report.commits_acknowledged += p
            .txns
            .iter()
            .filter(|t| matches!(t.status, Status::Acked(_)))
            .count() as u64;
        if let Some(c) = &p.cut {
            count_cut(&mut report, c);
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
    Ok(report)
}

/// Runs one cycle's workload until the power is cut; returns its history.
fn workload(
    opts: &CrashTestOptions,
    db: &Db,
    switch: &Arc<Switch>,
    model: &Model,
    rng: &mut SmallRng,
    uid_next: &mut u64,
    cycle: u64,
) -> Pending {
    switch.arm(rng.gen_range(1..=opts.max_ops_before_cut) as i64);
    switch.bias_checkpoints(opts.bias_checkpoint_cut, opts.bias_checkpoint_ops);
    let txns = Mutex::new(Vec::new());
    let ddl = Mutex::new(Vec::new());
    let dyn_tables = Mutex::new(
        model
            .keys()
            .filter(|n| n.starts_with(DYN_PREFIX))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let uid = AtomicU64::new(*uid_next);
    let stop = AtomicBool::new(false);
    let exposed = AtomicU64::new(0);
    let single = opts.threads == 1;
    let shared = Shared {
        db,
        txns: &txns,
        ddl: &ddl,
        dyn_tables: &dyn_tables,
        uid: &uid,
        stop: &stop,
        exposed: &exposed,
        cfg: WorkCfg {
            keys: opts.keys,
            page_size: opts.page_size,
            max_txns: 1000,
            ddl_chance: 0.02,
            checkpoint_chance: if single { 0.02 } else { 0.0 },
        },
    };
    // Delete the previous cycle's markers (their transactions are verified).
    let old: Vec<Vec<u8>> = model
        .get(MARKS)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
    let mut alive = true;
    for chunk in old.chunks(CLEANUP_CHUNK) {
        let writes = chunk
            .iter()
            .map(|k| Write {
                table: MARKS.into(),
                key: k.clone(),
                val: None,
            })
            .collect();
        if !shared.transact(writes, None) {
            alive = false;
            break;
        }
    }
    if alive {
        let running = AtomicUsize::new(opts.threads);
        let seeds: Vec<u64> = (0..opts.threads).map(|_| rng.gen()).collect();
        std::thread::scope(|s| {
            for seed in seeds {
                let (shared, running) = (&shared, &running);
                s.spawn(move || {
                    shared.run(seed);
                    running.fetch_sub(1, Ordering::AcqRel);
                });
            }
            if !single {
                // Frequent checkpoints, so that cuts fall inside them.
                let (stop, running) = (&stop, &running);
                s.spawn(move || {
                    while !stop.load(Ordering::Acquire)
                        && !switch.is_dead()
                        && running.load(Ordering::Acquire) > 0
                    {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        if db.checkpoint().is_err() {
                            break;
                        }
                    }
                });
            }
        });
    }
    stop.store(true, Ordering::Release);
    // The engine must fail only because the power went.
    let engine_failure = if switch.is_dead() {
        None
    } else {
        db.failure().map(|f| f.to_string())
    };
    db.clone().abandon();
    // A workload that ended before the chosen operation is cut at a quiet moment.
    let _ = switch.cut_now();
    *uid_next = uid.load(Ordering::Acquire);
    Pending {
        cycle,
        txns: txns.into_inner(),
        exposed: exposed.load(Ordering::Acquire),
        engine_failure,
        ddl: ddl.into_inner(),
        cut: switch.cut_point(),
    }
}
