//! `pagoda crashtest`: concurrent transactions on an emulated device, power cuts at random
//! I/O operations (so also mid-checkpoint and mid-double-write), recovery, verification against
//! a model.
//!
//! Verification: every acknowledged commit must be in the recovered database. A transaction
//! whose commit did not return (in flight at the cut) may or may not be there, but only as a
//! whole: the recovered state must equal "all acknowledged commits" followed by some subset of
//! the in-flight transactions in some order. Anything else is a lost commit (an acknowledged
//! write missing) or an uncommitted effect (a value no committed transaction wrote). In mode
//! `none`, keys whose reads fail with [`Error::Corruption`] are excused (the torn page was
//! detected); a wrong value without such an error is an undetected torn page.
//!
//! With [`CommitMode::Pipelined`] each worker keeps up to [`PIPELINE_DEPTH`] commits in
//! flight; a commit counts as acknowledged only once its ticket resolves (pending ones at the
//! cut are in flight). While running, a worker also reads back each key it has just committed
//! through a new snapshot: seeing its value while the log is not yet durable up to the commit
//! record would expose a pending commit, and is counted as an uncommitted effect.

use crate::error::{Error, Result};
use crate::{CommitMode, Db, DbOptions, TornMode};
use pagoda_device::mem::{MemConfig, MemDevice};
use pagoda_device::spec::DeviceSpec;
use pagoda_device::stats::DeviceStats;
use pagoda_device::{
    BlockDevice, Capabilities, DeviceError, DeviceRef, PowerCut, PowerCutReport, WriteHints,
};
use parking_lot::{Mutex, RwLock};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

/// Pipelined commits a crash-test worker keeps in flight.
pub const PIPELINE_DEPTH: usize = 4;

/// Options of a crash test.
pub struct CrashTestOptions {
    /// Torn-write protection under test.
    pub torn: TornMode,
    /// Commit mode.
    pub commit: CommitMode,
    /// Power-cut cycles.
    pub cycles: u64,
    /// Seed of every random choice (workload, cut points, which sectors survive).
    pub seed: u64,
    /// Device to emulate (data and log each get one); `None` = [`MemDevice`].
    pub device: Option<DeviceSpec>,
    /// Concurrent transaction threads.
    pub threads: usize,
    /// Called after each cycle with the number of cycles done.
    pub progress: Option<Box<dyn Fn(u64) + Send + Sync>>,
    /// Page size (small pages give more pages, splits and torn writes per cycle).
    pub page_size: usize,
    /// Keys in the working set.
    pub keys: usize,
    /// Largest number of I/O operations before a cut (the cut point is uniform below it).
    pub max_ops_before_cut: u64,
}

impl Default for CrashTestOptions {
    fn default() -> Self {
        Self {
            torn: TornMode::Doublewrite,
            commit: CommitMode::Sync,
            cycles: 100,
            seed: 1,
            device: None,
            threads: 4,
            progress: None,
            page_size: 16384,
            keys: 160,
            max_ops_before_cut: 400,
        }
    }
}

impl fmt::Debug for CrashTestOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrashTestOptions")
            .field("torn", &self.torn)
            .field("cycles", &self.cycles)
            .field("seed", &self.seed)
            .field("device", &self.device)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

/// What a crash test found.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CrashTestReport {
    /// Cycles run.
    pub cycles: u64,
    /// Acknowledged commits (keys) missing after recovery.
    pub lost_commits: u64,
    /// Effects of transactions that never committed, visible after recovery.
    pub uncommitted_visible: u64,
    /// Torn pages repaired by recovery.
    pub torn_pages_repaired: u64,
    /// Corrupt pages detected (by recovery or on read).
    pub corruption_detected: u64,
    /// Wrong values without a corruption report (a torn page used undetected).
    pub undetected_torn: u64,
    /// The seed.
    pub seed: u64,
    /// Acknowledged commits over all cycles.
    pub commits_acknowledged: u64,
    /// Cuts that hit while a checkpoint was running.
    pub cuts_mid_checkpoint: u64,
    /// Cuts that hit between a double-write and the sync of the in-place writes.
    pub cuts_mid_doublewrite: u64,
    /// Databases re-created after detected corruption (mode none).
    pub resets: u64,
}

impl CrashTestReport {
    /// The line the CLI prints.
    pub fn summary_line(&self) -> String {
        format!(
            "crashtest: cycles {}, lost commits {}, uncommitted visible {}, torn pages repaired {}, corruption detected {}",
            self.cycles, self.lost_commits, self.uncommitted_visible, self.torn_pages_repaired, self.corruption_detected
        )
    }

    /// Whether the run failed for mode `torn`.
    pub fn failed(&self, torn: TornMode) -> bool {
        self.uncommitted_visible > 0
            || self.undetected_torn > 0
            || (torn != TornMode::None && (self.lost_commits > 0 || self.corruption_detected > 0))
    }
}

/// Shared power switch of the data and log devices.
#[derive(Debug)]
struct Switch {
    devices: Vec<DeviceRef>,
    gate: RwLock<()>,
    dead: AtomicBool,
    countdown: AtomicI64,
    seed: AtomicU64,
    in_checkpoint: AtomicBool,
    dw_pending: AtomicBool,
    cut_mid_ckpt: AtomicBool,
    cut_mid_dw: AtomicBool,
}

impl Switch {
    fn cut(&self) -> Result<()> {
        let _g = self.gate.write();
        self.cut_locked()
    }

    fn cut_locked(&self) -> Result<()> {
        if self.dead.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.cut_mid_ckpt.store(
            self.in_checkpoint.load(Ordering::Acquire),
            Ordering::Release,
        );
        self.cut_mid_dw
            .store(self.dw_pending.load(Ordering::Acquire), Ordering::Release);
        let seed = self.seed.load(Ordering::Acquire);
        for (i, d) in self.devices.iter().enumerate() {
            let pc = d.as_power_cut().ok_or_else(|| {
                Error::config(format!(
                    "device {} cannot emulate a power cut",
                    d.describe()
                ))
            })?;
            pc.power_cut(seed.wrapping_add(i as u64))?;
        }
        Ok(())
    }

    /// Runs one I/O unless the power is off; cuts when the countdown reaches zero.
    fn io<T>(&self, f: impl FnOnce() -> pagoda_device::Result<T>) -> pagoda_device::Result<T> {
        let off = || DeviceError::Unsupported("power is off (emulated power cut)".into());
        {
            let _g = self.gate.read();
            if self.dead.load(Ordering::Acquire) {
                return Err(off());
            }
            if self.countdown.fetch_sub(1, Ordering::AcqRel) > 1 {
                return f();
            }
        }
        let _g = self.gate.write();
        let _ = self.cut_locked();
        Err(off())
    }
}

/// A device whose power the crash test can cut.
#[derive(Debug)]
struct CutDevice {
    inner: DeviceRef,
    switch: Arc<Switch>,
    is_data: bool,
}

impl BlockDevice for CutDevice {
    fn caps(&self) -> Capabilities {
        self.inner.caps()
    }
    fn read(&self, sector: u64, buf: &mut [u8]) -> pagoda_device::Result<()> {
        let _g = self.switch.gate.read();
        if self.switch.dead.load(Ordering::Acquire) {
            return Err(DeviceError::Unsupported(
                "power is off (emulated power cut)".into(),
            ));
        }
        self.inner.read(sector, buf)
    }
    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> pagoda_device::Result<()> {
        self.switch.io(|| {
            if self.is_data && hints.stream == 3 {
                self.switch.dw_pending.store(true, Ordering::Release);
            }
            self.inner.write(sector, buf, hints)
        })
    }
    fn flush(&self) -> pagoda_device::Result<()> {
        self.switch.io(|| {
            let r = self.inner.flush();
            if self.is_data && r.is_ok() && self.switch.dw_pending.load(Ordering::Acquire) {
                // The flush after the double-write arms the in-place phase; the next one ends it.
                self.switch.dw_pending.store(false, Ordering::Release);
            }
            r
        })
    }
    fn trim(&self, sector: u64, sectors: u64) -> pagoda_device::Result<()> {
        self.switch.io(|| self.inner.trim(sector, sectors))
    }
    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
    fn describe(&self) -> String {
        format!("cut({})", self.inner.describe())
    }
    fn as_power_cut(&self) -> Option<&dyn PowerCut> {
        Some(self)
    }
}

impl PowerCut for CutDevice {
    fn power_cut(&self, _seed: u64) -> pagoda_device::Result<PowerCutReport> {
        let _ = self.switch.cut();
        Ok(PowerCutReport::default())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Status {
    Pending,
    Acked(u64),
    Aborted,
    Unknown,
}

#[derive(Clone, Debug)]
struct TxRec {
    writes: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    status: Status,
}

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn key_name(i: usize) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn value_for(key: &[u8], uid: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{}|{uid}|", String::from_utf8_lossy(key)).into_bytes();
    let fill = (uid % 251) as u8;
    while v.len() < len {
        v.push(fill);
    }
    v
}

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
        Some(spec) => Ok((spec.open()?, spec.open()?)),
    }
}

/// Runs a crash test.
pub fn run(opts: CrashTestOptions) -> Result<CrashTestReport> {
    if opts.threads == 0 || opts.keys == 0 {
        return Err(Error::config(
            "crashtest needs at least one thread and one key",
        ));
    }
    let mut rng = SmallRng::seed_from_u64(opts.seed);
    let mut report = CrashTestReport {
        seed: opts.seed,
        ..CrashTestReport::default()
    };
    let mut devs = fresh_devices(&opts)?;
    let mut base: State = State::new();
    let mut uid_next: u64 = 1;
    let mut cycle = 0;
    let mut pending_history: Vec<TxRec> = Vec::new();
    while cycle < opts.cycles {
        let switch = Arc::new(Switch {
            devices: vec![devs.0.clone(), devs.1.clone()],
            gate: RwLock::new(()),
            dead: AtomicBool::new(false),
            countdown: AtomicI64::new(i64::MAX),
            seed: AtomicU64::new(rng.gen()),
            in_checkpoint: AtomicBool::new(false),
            dw_pending: AtomicBool::new(false),
            cut_mid_ckpt: AtomicBool::new(false),
            cut_mid_dw: AtomicBool::new(false),
        });
        let data: DeviceRef = Arc::new(CutDevice {
            inner: devs.0.clone(),
            switch: switch.clone(),
            is_data: true,
        });
        let log: DeviceRef = Arc::new(CutDevice {
            inner: devs.1.clone(),
            switch: switch.clone(),
            is_data: false,
        });
        let dbo = DbOptions::with_devices(data, log)
            .page_size(opts.page_size)
            .buffer_bytes(16 * opts.page_size)
            .torn(opts.torn)
            .commit(opts.commit)
            .log_capacity(1024 * 1024);
        let dbo = DbOptions { dw_pages: 8, ..dbo };
        // Recover and verify the previous cycle.
        let db = match Db::open(dbo) {
            Ok(db) => db,
            Err(Error::Corruption {
                all_pages, detail, ..
            }) => {
                if std::env::var("PAGODA_CRASH_DEBUG").is_ok() {
                    eprintln!("OPEN CORRUPT {all_pages:?} {detail}");
                }
                report.corruption_detected += all_pages.len().max(1) as u64;
                report.resets += 1;
                devs = fresh_devices(&opts)?;
                base.clear();
                pending_history.clear();
                cycle += 1;
                if let Some(p) = &opts.progress {
                    p(cycle);
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        let fresh = !db.list_tables().iter().any(|t| t == "t");
        if fresh {
            db.create_table("t")?;
        } else {
            let st = db.stats();
            report.torn_pages_repaired += st.recovery.torn_pages_repaired;
            let outcome = verify(&db, &base, &pending_history, opts.keys, opts.torn)?;
            report.lost_commits += outcome.lost;
            report.uncommitted_visible += outcome.uncommitted;
            report.undetected_torn += outcome.undetected;
            report.corruption_detected += outcome.corrupt_pages;
            if outcome.corrupt_pages > 0 {
                db.abandon();
                report.resets += 1;
                devs = fresh_devices(&opts)?;
                base.clear();
                pending_history.clear();
                cycle += 1;
                if let Some(p) = &opts.progress {
                    p(cycle);
                }
                continue;
            }
            base = outcome.state;
        }
        pending_history.clear();
        // Run until the cut.
        let history: Arc<Mutex<Vec<TxRec>>> = Arc::new(Mutex::new(Vec::new()));
        let uid = Arc::new(AtomicU64::new(uid_next));
        let stop = Arc::new(AtomicBool::new(false));
        let running = Arc::new(AtomicU64::new(opts.threads as u64));
        let exposed = Arc::new(AtomicU64::new(0));
        switch.countdown.store(
            rng.gen_range(1..=opts.max_ops_before_cut) as i64,
            Ordering::Release,
        );
        std::thread::scope(|s| {
            for t in 0..opts.threads {
                let db = db.clone();
                let history = history.clone();
                let uid = uid.clone();
                let stop = stop.clone();
                let running = running.clone();
                let exposed = exposed.clone();
                let seed = rng.gen::<u64>() ^ t as u64;
                let keys = opts.keys;
                let ps = opts.page_size;
                s.spawn(move || {
                    let w = Work {
                        db: &db,
                        history: &history,
                        uid: &uid,
                        stop: &stop,
                        exposed: &exposed,
                    };
                    w.run(seed, keys, ps);
                    running.fetch_sub(1, Ordering::AcqRel);
                });
            }
            let db2 = db.clone();
            let stop2 = stop.clone();
            let sw = switch.clone();
            let running2 = running.clone();
            s.spawn(move || {
                while !stop2.load(Ordering::Acquire)
                    && !sw.dead.load(Ordering::Acquire)
                    && running2.load(Ordering::Acquire) > 0
                {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    sw.in_checkpoint.store(true, Ordering::Release);
                    let r = db2.checkpoint();
                    sw.in_checkpoint.store(false, Ordering::Release);
                    if r.is_err() {
                        break;
                    }
                }
            });
            // Workers stop on their own after a bounded number of transactions.
        });
        stop.store(true, Ordering::Release);
        report.uncommitted_visible += exposed.load(Ordering::Acquire);
        db.abandon();
        switch.cut()?;
        if switch.cut_mid_ckpt.load(Ordering::Acquire) {
            report.cuts_mid_checkpoint += 1;
        }
        if switch.cut_mid_dw.load(Ordering::Acquire) {
            report.cuts_mid_doublewrite += 1;
        }
        uid_next = uid.load(Ordering::Acquire);
        pending_history = std::mem::take(&mut *history.lock());
        report.commits_acknowledged += pending_history
            .iter()
            .filter(|t| matches!(t.status, Status::Acked(_)))
            .count() as u64;
        cycle += 1;
        report.cycles = cycle;
        if let Some(p) = &opts.progress {
            p(cycle);
        }
    }
    report.cycles = cycle;
    Ok(report)
}

struct Work<'a> {
    db: &'a Db,
    history: &'a Mutex<Vec<TxRec>>,
    uid: &'a AtomicU64,
    stop: &'a AtomicBool,
    exposed: &'a AtomicU64,
}

impl Work<'_> {
    /// Records the outcome of a resolved pipelined commit; false when the worker must stop.
    fn settle(&self, idx: usize, r: Result<crate::CommitInfo>) -> bool {
        let status = match r {
            Ok(info) => Status::Acked(info.cts),
            Err(_) => Status::Unknown,
        };
        let unknown = status == Status::Unknown;
        self.history.lock()[idx].status = status;
        !unknown
    }

    /// A pending commit must not be visible: read a key it put through a new snapshot.
    fn check_not_exposed(&self, key: &[u8], value: &[u8], end_lsn: u64) {
        let Ok(r) = self.db.begin_read() else { return };
        if let Ok(Some(v)) = r.get("t", key) {
            if v == value && self.db.durable_lsn() < end_lsn {
                self.exposed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn run(&self, seed: u64, keys: usize, page_size: usize) {
        let db = self.db;
        let pipelined = db.commit_mode() == CommitMode::Pipelined;
        let mut inflight: VecDeque<(usize, crate::CommitTicket)> = VecDeque::new();
        let mut rng = SmallRng::seed_from_u64(seed);
        for _ in 0..150 {
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            let Ok(mut tx) = db.begin() else { break };
            let n = rng.gen_range(1..=3);
            let mut writes = Vec::new();
            let mut ok = true;
            for _ in 0..n {
                let k = key_name(rng.gen_range(0..keys));
                let u = self.uid.fetch_add(1, Ordering::AcqRel);
                let v = if rng.gen_bool(0.2) {
                    None
                } else {
                    let len = if rng.gen_bool(0.1) {
                        rng.gen_range(page_size..3 * page_size)
                    } else {
                        rng.gen_range(16..400)
                    };
                    Some(value_for(&k, u, len))
                };
                let r = match &v {
                    Some(v) => tx.put("t", &k, v),
                    None => tx.delete("t", &k),
                };
                match r {
                    Ok(()) => {
                        writes.retain(|(wk, _): &(Vec<u8>, Option<Vec<u8>>)| *wk != k);
                        writes.push((k, v));
                    }
                    Err(Error::Conflict { .. }) => {
                        ok = false;
                        break;
                    }
                    Err(_) => return,
                }
            }
            if !ok {
                tx.rollback();
                continue;
            }
            let probe = writes
                .iter()
                .find_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone())));
            let idx = {
                let mut h = self.history.lock();
                h.push(TxRec {
                    writes,
                    status: Status::Pending,
                });
                h.len() - 1
            };
            if pipelined {
                match tx.commit_pipelined() {
                    Ok(t) => {
                        if let Some((k, v)) = probe {
                            self.check_not_exposed(&k, &v, t.info().lsn);
                        }
                        inflight.push_back((idx, t));
                    }
                    Err(Error::Conflict { .. }) => {
                        self.history.lock()[idx].status = Status::Aborted;
                    }
                    Err(_) => {
                        self.history.lock()[idx].status = Status::Unknown;
                        break;
                    }
                }
                // Settle what resolved; wait for the oldest beyond the pipeline depth.
                while let Some((i, t)) = inflight.front() {
                    let r = if inflight.len() > PIPELINE_DEPTH {
                        Some(t.wait())
                    } else {
                        t.try_wait()
                    };
                    let Some(r) = r else { break };
                    let i = *i;
                    inflight.pop_front();
                    if !self.settle(i, r) {
                        ok = false;
                        break;
                    }
                }
                if !ok {
                    break;
                }
                continue;
            }
            let status = match tx.commit() {
                Ok(info) => Status::Acked(info.cts),
                Err(Error::Conflict { .. }) => Status::Aborted,
                Err(_) => Status::Unknown,
            };
            let unknown = status == Status::Unknown;
            self.history.lock()[idx].status = status;
            if unknown {
                return;
            }
        }
        for (i, t) in inflight {
            self.settle(i, t.wait());
        }
    }
}

struct Outcome {
    lost: u64,
    uncommitted: u64,
    undetected: u64,
    corrupt_pages: u64,
    state: State,
}

fn apply(state: &mut State, t: &TxRec) {
    for (k, v) in &t.writes {
        match v {
            Some(v) => {
                state.insert(k.clone(), v.clone());
            }
            None => {
                state.remove(k);
            }
        }
    }
}

fn verify(
    db: &Db,
    base: &State,
    history: &[TxRec],
    keys: usize,
    torn: TornMode,
) -> Result<Outcome> {
    let mut acked: Vec<(u64, &TxRec)> = history
        .iter()
        .filter_map(|t| match t.status {
            Status::Acked(c) => Some((c, t)),
            _ => None,
        })
        .collect();
    acked.sort_by_key(|(c, _)| *c);
    let mut expect = base.clone();
    for (_, t) in &acked {
        apply(&mut expect, t);
    }
    let inflight: Vec<&TxRec> = history
        .iter()
        .filter(|t| matches!(t.status, Status::Unknown | Status::Pending))
        .collect();
    // Read everything: point reads of every key (corruption excused per key) and a full scan.
    let tx = db.begin_read()?;
    let mut got = State::new();
    let mut excused = BTreeSet::new();
    let mut corrupt = BTreeSet::new();
    for i in 0..keys {
        let k = key_name(i);
        match tx.get("t", &k) {
            Ok(Some(v)) => {
                got.insert(k, v);
            }
            Ok(None) => {}
            Err(Error::Corruption { all_pages, .. }) if torn == TornMode::None => {
                corrupt.extend(all_pages);
                excused.insert(k);
            }
            Err(Error::Corruption { all_pages, .. }) => {
                corrupt.extend(all_pages);
                excused.insert(k);
            }
            Err(e) => return Err(e),
        }
    }
    if corrupt.is_empty() {
        let scanned: Result<State> = tx.range("t", ..)?.collect();
        let scanned = scanned?;
        if scanned != got {
            // A scan that disagrees with point reads is an engine bug; count as uncommitted.
            let diff = scanned.len().abs_diff(got.len()).max(1) as u64;
            return Ok(Outcome {
                lost: 0,
                uncommitted: diff,
                undetected: 0,
                corrupt_pages: 0,
                state: got,
            });
        }
    }
    drop(tx);
    // Explain the state: each key shows its acknowledged value or the value of an in-flight
    // transaction; an in-flight transaction that shows anywhere must show everywhere it wrote
    // (or be overwritten there by another visible in-flight transaction).
    let committed_value = |k: &Vec<u8>, v: &Vec<u8>| {
        base.get(k) == Some(v)
            || acked.iter().any(|(_, t)| {
                t.writes
                    .iter()
                    .any(|(wk, wv)| wk == k && wv.as_ref() == Some(v))
            })
    };
    let writer_of = |k: &Vec<u8>, v: Option<&Vec<u8>>| -> Vec<usize> {
        inflight
            .iter()
            .enumerate()
            .filter(|(_, t)| t.writes.iter().any(|(wk, wv)| wk == k && wv.as_ref() == v))
            .map(|(i, _)| i)
            .collect()
    };
    let mut lost = 0u64;
    let mut unc = 0u64;
    let mut visible = BTreeSet::new();
    let keys_all: BTreeSet<&Vec<u8>> = expect.keys().chain(got.keys()).collect();
    for k in &keys_all {
        if excused.contains(*k) {
            continue;
        }
        let (e, g) = (expect.get(*k), got.get(*k));
        if e == g {
            continue;
        }
        let ws = writer_of(k, g);
        if let (Some(v), true) = (g, ws.len() == 1) {
            // A put by exactly one in-flight transaction: it is visible.
            let _ = v;
            visible.insert(ws[0]);
        } else if !ws.is_empty() {
            // A delete (or a value) that in-flight transactions wrote: consistent.
        } else {
            match g {
                Some(v) if !committed_value(k, v) => unc += 1,
                _ => lost += 1,
            }
        }
    }
    for &u in &visible {
        for (k, _) in &inflight[u].writes {
            if excused.contains(k) {
                continue;
            }
            let g = got.get(k);
            // An acknowledged transaction may have overwritten it: an in-flight commit whose
            // sync failed can still precede an acknowledged one in the log.
            let acked_wrote = acked
                .iter()
                .any(|(_, t)| t.writes.iter().any(|(wk, wv)| wk == k && wv.as_ref() == g));
            let explained = writer_of(k, g)
                .iter()
                .any(|w| *w == u || visible.contains(w))
                || (g.is_none() && !writer_of(k, None).is_empty())
                || acked_wrote;
            if !explained {
                // Part of a transaction visible without the rest.
                unc += 1;
            }
        }
    }
    if (lost > 0 || unc > 0 || !corrupt.is_empty()) && std::env::var("PAGODA_CRASH_DEBUG").is_ok() {
        eprintln!(
            "MISMATCH lost {lost} unc {unc} corrupt {corrupt:?} inflight {} acked {}",
            inflight.len(),
            acked.len()
        );
        for (k, v) in expect.iter() {
            let g = got.get(k);
            if g != Some(v) {
                eprintln!(
                    "  key {:?}: expect {:?} got {:?}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(&v[..v.len().min(20)]),
                    g.map(|g| String::from_utf8_lossy(&g[..g.len().min(20)]).into_owned())
                );
            }
        }
        for (k, g) in got.iter() {
            if !expect.contains_key(k) {
                eprintln!(
                    "  key {:?}: expect none got {:?}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(&g[..g.len().min(20)])
                );
            }
        }
        eprintln!("  stats {:?}", db.stats().recovery);
    }
    let undetected = if torn == TornMode::None {
        lost + unc
    } else {
        0
    };
    Ok(Outcome {
        lost,
        uncommitted: unc,
        undetected,
        corrupt_pages: corrupt.len() as u64,
        state: got,
    })
}
