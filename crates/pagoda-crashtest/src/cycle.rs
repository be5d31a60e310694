//! One cycle's workload: workers run transactions, DDL and checkpoints until the power is cut
//! (or they finish), and the cycle's history is kept for the oracle.

use crate::met::Met;
use crate::oracle::{note, Finding, FindingKind, Model};
use crate::power::{CutPoint, Switch, TornSector};
use crate::workload::{Shared, WorkCfg, Write, WrongRead, DYN_PREFIX, MARKS};
use crate::CrashTestOptions;
use pagoda_engine::{stats::FlashCacheStats, Db, Failure};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Marker rows deleted per clean-up transaction.
const CLEANUP_CHUNK: usize = 40;

/// The history of one cycle's workload.
pub(crate) struct Pending {
    pub(crate) cycle: u64,
    pub(crate) txns: Vec<crate::workload::TxRec>,
    pub(crate) ddl: Vec<crate::workload::DdlRec>,
    pub(crate) cut: Option<CutPoint>,
    /// Pending commits seen by a reader while running.
    pub(crate) exposed: u64,
    /// Why the engine failed while the power was still on.
    pub(crate) engine_failure: Option<String>,
    /// The flash cache's counters since the open, taken at the cut.
    pub(crate) flash: Option<FlashCacheStats>,
    /// Reads the engine served another way after an error or a failed check (see
    /// `Switch::served`).
    pub(crate) served: Vec<String>,
    /// Values read while running that the crash test never wrote there.
    pub(crate) wrong: Vec<WrongRead>,
    /// The database's failure, if it failed (also when the power cut came after it).
    pub(crate) failure: Option<Failure>,
    /// Errors the workers met.
    pub(crate) met: Vec<Met>,
    /// Tagged errors that reached the database's failure path (see `Switch::heard`).
    pub(crate) heard: Vec<String>,
    /// Findings known when the workload ended (an injected failure nobody heard of).
    pub(crate) found: Vec<Finding>,
    /// The sectors the cut tore, with their contents before (see `Switch::torn`).
    pub(crate) torn: Vec<TornSector>,
    /// The fault armed in the cycle, if any (`--faults`).
    pub(crate) fault: Option<String>,
    /// The faults armed (a second one, on the other device, in some cycles); those that fail
    /// requests stay armed through the next recovery.
    pub(crate) armed: Vec<crate::faults::Armed>,
}

impl Pending {
    /// Transactions and DDL operations the workload ran.
    pub(crate) fn ops(&self) -> u64 {
        (self.txns.len() + self.ddl.len()) as u64
    }

    /// What the workload itself found (wrong values read, a failure nobody heard of, the
    /// engine failing with the power on, pending commits seen): findings whatever recovery
    /// and verification then do.
    /// Wrong values that `explained` excuses (a lost write's, undetectable) are left out.
    pub(crate) fn findings_but(
        &self,
        mut explained: impl FnMut(&WrongRead) -> bool,
    ) -> Vec<Finding> {
        let mut out: Vec<Finding> = self
            .wrong
            .iter()
            .filter(|w| !explained(w))
            .map(wrong_value)
            .collect();
        out.extend(self.found.iter().cloned());
        if let Some(why) = &self.engine_failure {
            out.push(note(
                FindingKind::EngineFailed,
                format!("the database failed with the power on: {why}"),
            ));
        }
        if self.exposed > 0 {
            out.push(Finding {
                kind: FindingKind::PendingExposed,
                table: String::new(),
                key: String::new(),
                txn: None,
                expected: "no reader sees a commit before it is durable".into(),
                found: format!("{} reads saw a pending commit", self.exposed),
            });
        }
        out
    }
}

/// The finding of a wrong value read while running.
fn wrong_value(w: &WrongRead) -> Finding {
    let short = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned();
    Finding {
        kind: FindingKind::WrongValue,
        table: w.table.clone(),
        key: short(&w.key),
        txn: None,
        expected: "a value the crash test wrote to this key".into(),
        found: short(&w.found),
    }
}

/// What a cycle's workload runs on.
pub(crate) struct Run<'a> {
    pub(crate) opts: &'a CrashTestOptions,
    pub(crate) switch: &'a Arc<Switch>,
    pub(crate) model: &'a Model,
    pub(crate) cycle: u64,
}

/// Runs one cycle's workload until the power is cut; returns its history.
pub(crate) fn workload(run: &Run<'_>, db: Db, rng: &mut SmallRng, uid_next: &mut u64) -> Pending {
    let Run {
        opts,
        switch,
        model,
        cycle,
    } = *run;
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
    let met: Mutex<Vec<Met>> = Mutex::default();
    let wrong: Mutex<Vec<WrongRead>> = Mutex::default();
    let single = opts.threads == 1;
    let shared = Shared {
        db: &db,
        txns: &txns,
        ddl: &ddl,
        dyn_tables: &dyn_tables,
        uid: &uid,
        stop: &stop,
        exposed: &exposed,
        met: &met,
        wrong: &wrong,
        cfg: WorkCfg {
            keys: opts.keys,
            page_size: opts.page_size,
            max_txns: 1000,
            ddl_chance: 0.02,
            checkpoint_chance: if single { 0.02 } else { 0.0 },
            check_reads: !opts.faults.is_empty(),
        },
    };
    if delete_markers(&shared, model) {
        run_clients(&shared, opts, switch, rng);
    }
    stop.store(true, Ordering::Release);
    // The engine must fail only because the power went (or an injected fault, see `Ledger`);
    // a failure that came before the cut still tells whether a fault was reported.
    let failure = db.failure();
    let engine_failure = failure
        .as_ref()
        .filter(|_| !switch.is_dead())
        .map(ToString::to_string);
    let flash = db.stats().flash_cache;
    db.abandon();
    // A workload that ended before the chosen operation is cut at a quiet moment.
    let _ = switch.cut_now();
    *uid_next = uid.load(Ordering::Acquire);
    Pending {
        cycle,
        txns: txns.into_inner(),
        exposed: exposed.load(Ordering::Acquire),
        engine_failure,
        failure,
        heard: switch.heard(),
        met: met.into_inner(),
        fault: None,
        armed: Vec::new(),
        found: Vec::new(),
        wrong: wrong.into_inner(),
        ddl: ddl.into_inner(),
        cut: switch.cut_point(),
        torn: switch.torn(),
        flash,
        served: switch.served(),
    }
}

/// Deletes the previous cycle's markers (their transactions are verified); `false` when the
/// power went meanwhile.
fn delete_markers(shared: &Shared<'_>, model: &Model) -> bool {
    let old: Vec<Vec<u8>> = model
        .get(MARKS)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
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
            return false;
        }
    }
    true
}

/// Runs the workload's client threads until the cut, with a thread of frequent checkpoints
/// beside them when there are several (so that cuts fall inside checkpoints).
fn run_clients(shared: &Shared<'_>, opts: &CrashTestOptions, switch: &Switch, rng: &mut SmallRng) {
    let single = opts.threads == 1;
    let running = AtomicUsize::new(opts.threads);
    let seeds: Vec<u64> = (0..opts.threads).map(|_| rng.gen()).collect();
    std::thread::scope(|s| {
        for seed in seeds {
            let running = &running;
            s.spawn(move || {
                shared.run(seed);
                running.fetch_sub(1, Ordering::AcqRel);
            });
        }
        if !single {
            let running = &running;
            s.spawn(move || {
                while !shared.stop.load(Ordering::Acquire)
                    && !switch.is_dead()
                    && running.load(Ordering::Acquire) > 0
                {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    let r = shared.db.checkpoint();
                    shared.met(&r);
                    if r.is_err() {
                        break;
                    }
                }
            });
        }
    });
}
