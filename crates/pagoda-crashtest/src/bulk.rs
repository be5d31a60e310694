//! The bulk-load crash test ([`run_bulk`]): power cuts during [`Db::bulk_load`].
//!
//! One thread, so a seed replays exactly. Each cycle opens the database (cutting power during
//! recovery in some cycles, as [`crate::run`] does), checks the recovered tables, then runs
//! operations until the power is cut at a seeded I/O operation: create a table and bulk-load
//! it (0 to a few thousand rows, keys of 5 to 700 bytes, some values in overflow pages),
//! update a few keys of a loaded table in an ordinary transaction (redo then replays changes
//! onto loaded leaves), drop a loaded table, checkpoint. Operations run one at a time, so at
//! most one is unfinished at the cut; the recovered tables must equal the state before it or
//! after it (all or nothing: a load is never partly there), and open's paranoid check must
//! find every tree well formed.

use crate::open::{count_cut, fresh_devices, open_cycle, OpenState};
use crate::oracle::{abbrev, note, Finding, FindingKind};
use crate::power::CutPoint;
use crate::run::{cycle_seed, tally, FINDINGS_KEPT};
use crate::{CrashTestOptions, CrashTestReport, Failure};
use pagoda_engine::{Db, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

/// The key of [`CrashTestReport::cut_phases`] that counts cuts during a create-and-load.
pub const LOAD_CUT: &str = "bulk load (create and load unfinished)";

/// Prefix of the bulk-loaded tables.
const PREFIX: &str = "bulk";

type Rows = BTreeMap<Vec<u8>, Vec<u8>>;
type State = BTreeMap<String, Rows>;

/// One operation of the workload.
#[derive(Clone, Debug)]
enum Op {
    /// Create the table and load these rows.
    Load(String, Rows),
    /// Overwrite these keys of a loaded table.
    Update(String, Rows),
    Drop(String),
    Checkpoint,
}

impl Op {
    /// The state after the operation.
    fn apply(&self, s: &State) -> State {
        let mut s = s.clone();
        match self {
            Op::Load(t, rows) => {
                s.insert(t.clone(), rows.clone());
            }
            Op::Update(t, rows) => {
                if let Some(cur) = s.get_mut(t) {
                    cur.extend(rows.clone());
                }
            }
            Op::Drop(t) => {
                s.remove(t);
            }
            Op::Checkpoint => {}
        }
        s
    }

    fn table(&self) -> &str {
        match self {
            Op::Load(t, _) | Op::Update(t, _) | Op::Drop(t) => t,
            Op::Checkpoint => "",
        }
    }
}

fn rows(rng: &mut SmallRng, page_size: usize) -> Rows {
    let n = match rng.gen_range(0..10) {
        0 => 0,
        1..=3 => rng.gen_range(1..40),
        _ => rng.gen_range(40..1500),
    };
    let long = rng.gen_bool(0.3);
    let big = pagoda_engine::limits::inline_max(page_size);
    (0..n)
        .map(|i| {
            let mut k = format!("r{i:06}").into_bytes();
            if long {
                // Long keys: few separators per internal node, deep trees.
                k.resize(rng.gen_range(8..700), b'a' + (i % 26) as u8);
            }
            let len = if rng.gen_bool(0.03) {
                rng.gen_range(big + 1..3 * page_size)
            } else {
                rng.gen_range(1..400)
            };
            let mut v = format!("{i}|").into_bytes();
            v.resize(len.max(v.len()), rng.gen());
            (k, v)
        })
        .collect()
}

/// Reads every bulk table.
fn read_state(db: &Db) -> Result<State> {
    let r = db.begin_read()?;
    let mut s = State::new();
    for t in db
        .list_tables()
        .into_iter()
        .filter(|t| t.starts_with(PREFIX))
    {
        let rows = r.open_table(&t)?.range(..).collect::<Result<Rows>>()?;
        s.insert(t, rows);
    }
    Ok(s)
}

/// The first difference: table, key, expected value, found value.
type Diff = (String, Vec<u8>, Option<Vec<u8>>, Option<Vec<u8>>);

/// What differs between `want` and `got`: the first table and key.
fn diff(want: &State, got: &State) -> Option<Diff> {
    let names: std::collections::BTreeSet<&String> = want.keys().chain(got.keys()).collect();
    for t in names {
        let (w, g) = (want.get(t), got.get(t));
        if w == g {
            continue;
        }
        let empty = Rows::new();
        let (w, g) = (w.unwrap_or(&empty), g.unwrap_or(&empty));
        let keys: std::collections::BTreeSet<&Vec<u8>> = w.keys().chain(g.keys()).collect();
        let k = keys.into_iter().find(|k| w.get(*k) != g.get(*k));
        return Some(match k {
            Some(k) => (t.clone(), k.clone(), w.get(k).cloned(), g.get(k).cloned()),
            // The table itself is missing or present.
            None => (t.clone(), Vec::new(), None, None),
        });
    }
    None
}

/// Checks the recovered state against the state before the unfinished operation and after it.
fn verify(db: &Db, before: &State, pending: Option<&Op>) -> (Vec<Finding>, State) {
    let got = match read_state(db) {
        Ok(s) => s,
        Err(e) => {
            let kind = if e.is_corruption() {
                FindingKind::Corruption
            } else {
                FindingKind::RecoveryFailed
            };
            return (
                vec![note(kind, format!("reading the tables: {e}"))],
                State::new(),
            );
        }
    };
    let after = pending.map(|op| op.apply(before));
    // A load is a create and then the load: the create alone may have become durable.
    let created = match pending {
        Some(Op::Load(t, _)) => Some(Op::Load(t.clone(), Rows::new()).apply(before)),
        _ => None,
    };
    if got == *before || after.as_ref() == Some(&got) || created.as_ref() == Some(&got) {
        return (Vec::new(), got);
    }
    // Neither: compare with the nearer end.
    let want = after.as_ref().unwrap_or(before);
    let Some((table, key, expected, found)) = diff(want, &got) else {
        return (Vec::new(), got);
    };
    let kind = match pending {
        Some(op) if op.table() == table => FindingKind::PartialTransaction,
        _ if found.is_some() && expected.is_none() => FindingKind::UncommittedVisible,
        _ => FindingKind::LostCommit,
    };
    let finding = Finding {
        kind,
        table,
        key: String::from_utf8_lossy(&key[..key.len().min(40)]).into_owned(),
        txn: None,
        expected: abbrev(expected.as_deref()),
        found: abbrev(found.as_deref()),
    };
    (vec![finding], got)
}

/// Runs one operation; `false` when it failed (the power went, or the engine failed).
fn run_op(db: &Db, op: &Op) -> bool {
    let r = match op {
        Op::Load(t, rows) => db.create_table(t).and_then(|()| {
            let mut it = rows.clone().into_iter();
            db.bulk_load(t, &mut it).map(|_| ())
        }),
        Op::Update(t, rows) => db.begin_write().and_then(|tx| {
            let mut table = tx.open_table(t)?;
            for (k, v) in rows {
                table.put(k, v)?;
            }
            drop(table);
            tx.commit().map(|_| ())
        }),
        Op::Drop(t) => db.drop_table(t),
        Op::Checkpoint => db.checkpoint().map(|_| ()),
    };
    r.is_ok()
}

fn next_op(rng: &mut SmallRng, state: &State, n: &mut u64, page_size: usize) -> Op {
    let loaded: Vec<&String> = state.keys().collect();
    let pick = |rng: &mut SmallRng| loaded[rng.gen_range(0..loaded.len())].clone();
    match rng.gen_range(0..10) {
        0..=4 => {
            *n += 1;
            Op::Load(format!("{PREFIX}{n}"), rows(rng, page_size))
        }
        5..=7 if !loaded.is_empty() => {
            let t = pick(rng);
            let keys: Vec<&Vec<u8>> = state[&t].keys().collect();
            let mut rows = Rows::new();
            for _ in 0..rng.gen_range(1..6) {
                let k = match keys.is_empty() || rng.gen_bool(0.2) {
                    true => format!("new{}", rng.gen_range(0..1000)).into_bytes(),
                    false => keys[rng.gen_range(0..keys.len())].clone(),
                };
                rows.insert(k, format!("upd{}", rng.gen::<u32>()).into_bytes());
            }
            Op::Update(t, rows)
        }
        8 if loaded.len() > 3 => Op::Drop(pick(rng)),
        _ => Op::Checkpoint,
    }
}

/// Runs the bulk-load crash test with `opts` (its `threads`, `keys` and flash cache are not
/// used: one thread, its own tables, no flash cache).
pub fn run_bulk(opts: CrashTestOptions) -> Result<CrashTestReport> {
    let opts = CrashTestOptions {
        threads: 1,
        flash_cache: None,
        ..opts
    };
    opts.validate()?;
    let mut report = CrashTestReport {
        seed: opts.seed,
        sabotage: opts.sabotage.map(|s| s.to_string()),
        ..CrashTestReport::default()
    };
    let devs = fresh_devices(&opts)?;
    let mut st = OpenState::new();
    let mut state = State::new();
    let mut pending: Option<(u64, Op, Option<CutPoint>)> = None;
    let mut tables = 0u64;
    for cycle in 0..=opts.cycles {
        let mut rng = SmallRng::seed_from_u64(cycle_seed(opts.seed, cycle));
        let recovering = cycle > 0;
        let (opened, recovery_cuts) =
            open_cycle(&opts, &devs, &mut rng, recovering, &mut st, &mut report)?;
        let mut findings = Vec::new();
        let db = match opened {
            Ok((db, switch)) => Some((db, switch)),
            Err(e) => {
                let kind = if e.is_corruption() {
                    FindingKind::Corruption
                } else {
                    FindingKind::RecoveryFailed
                };
                findings.push(note(kind, format!("open failed: {e}")));
                None
            }
        };
        if let Some((db, _)) = &db {
            if recovering {
                let op = pending.as_ref().map(|p| &p.1);
                let (f, got) = verify(db, &state, op);
                report.transactions_checked += 1;
                findings.extend(f);
                state = got;
            }
        }
        if !findings.is_empty() {
            let (failed_cycle, cut) = pending
                .as_ref()
                .map_or((cycle, None), |p| (p.0, p.2.clone()));
            let at = (opts.seed, failed_cycle, cut, recovery_cuts);
            push_failure(&mut report, at, findings);
            if let Some((db, _)) = db {
                db.abandon();
            }
            break;
        }
        let Some((db, switch)) = db else { break };
        for t in db.list_tables() {
            report.deepest_tree = report.deepest_tree.max(db.tree_depth(&t)? as u64);
        }
        if cycle == opts.cycles {
            db.abandon();
            break;
        }
        switch.arm(rng.gen_range(1..=opts.max_ops_before_cut) as i64);
        let mut run = Ops {
            state: &mut state,
            tables: &mut tables,
            report: &mut report,
        };
        let unfinished = run.until_cut(&db, &mut rng, opts.page_size);
        let engine_failure = (!switch.is_dead())
            .then(|| db.failure().map(|f| f.to_string()))
            .flatten();
        db.abandon();
        let _ = switch.cut_now();
        let cut = switch.cut_point();
        if let Some(c) = &cut {
            count_cut(&mut report, c);
        }
        if let Some(why) = engine_failure {
            let f = vec![note(
                FindingKind::EngineFailed,
                format!("the database failed with the power on: {why}"),
            )];
            push_failure(&mut report, (opts.seed, cycle, cut, Vec::new()), f);
            break;
        }
        if let Some(Op::Load(..)) = &unfinished {
            *report.cut_phases.entry(LOAD_CUT.into()).or_default() += 1;
        }
        pending = unfinished.map(|op| (cycle, op, cut));
        // Each cycle's state is verified once, at the next open.
        report.transactions_run += 1;
        report.cycles = cycle + 1;
        if let Some(pr) = &opts.progress {
            pr(cycle + 1);
        }
    }
    Ok(report)
}

/// Where a failure happened: the seed, the cycle, the cut that ended it, the cuts during
/// the recovery that found it.
type At = (u64, u64, Option<CutPoint>, Vec<CutPoint>);

/// Records a failed cycle with its findings.
fn push_failure(report: &mut CrashTestReport, at: At, findings: Vec<Finding>) {
    let (seed, cycle, cut, recovery_cuts) = at;
    tally(report, &findings, false);
    report.failures.push(Failure {
        seed,
        cycle,
        cut,
        fault: None,
        recovery_cuts,
        total_findings: findings.len(),
        threads: 1,
        findings: findings.into_iter().take(FINDINGS_KEPT).collect(),
    });
}

/// The workload of a cycle: the state it builds and what it counts.
struct Ops<'a> {
    state: &'a mut State,
    tables: &'a mut u64,
    report: &'a mut CrashTestReport,
}

impl Ops<'_> {
    /// Runs operations one at a time until the power is cut (or 200 ran); returns the one the
    /// cut left unfinished.
    fn until_cut(&mut self, db: &Db, rng: &mut SmallRng, page_size: usize) -> Option<Op> {
        for _ in 0..200 {
            let op = next_op(rng, self.state, self.tables, page_size);
            if !run_op(db, &op) {
                return Some(op);
            }
            if matches!(op, Op::Load(..)) {
                self.report.commits_acknowledged += 1;
            }
            self.report.ddl_operations += u64::from(matches!(op, Op::Load(..) | Op::Drop(_)));
            *self.state = op.apply(self.state);
        }
        None
    }
}
