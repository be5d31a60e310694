//! What crash-test workers do until the power goes: multi-key transactions over several tables
//! (short keys, long keys that deepen the trees, overflow values, deletes), each with a marker
//! row that says whether it committed; create and drop table; checkpoints. Every transaction
//! and DDL operation is recorded with its outcome for the oracle.

use crate::met::Met;
use pagoda_engine::{CommitInfo, CommitMode, CommitTicket, Db, Error, Result, Table, WriteTxn};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Table of short keys.
pub(crate) const SHORT: &str = "t0";
/// Table of long keys (up to 1000 bytes), so that internal nodes hold few keys and trees grow deep.
pub(crate) const LONG: &str = "t1";
/// Table of markers: one row per transaction, present exactly when the transaction committed.
pub(crate) const MARKS: &str = "marks";
/// The tables every database of the crash test has.
pub(crate) const STATIC_TABLES: [&str; 3] = [SHORT, LONG, MARKS];
/// Prefix of tables created and dropped during the run.
pub(crate) const DYN_PREFIX: &str = "d";
/// Keys of a dynamic table.
const DYN_KEYS: usize = 40;
/// Pipelined commits a worker keeps in flight.
pub const PIPELINE_DEPTH: usize = 4;

/// Outcome of a transaction or DDL operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Commit call not finished (or ticket not resolved) when the run ended.
    Pending,
    /// Acknowledged with this commit timestamp (DDL: 0).
    Acked(u64),
    /// Refused cleanly (conflict, dropped table): must not be visible.
    Aborted,
    /// Failed with an error that leaves the outcome open (power cut).
    Unknown,
}

/// One write of a transaction.
#[derive(Clone, Debug)]
pub(crate) struct Write {
    pub table: String,
    pub key: Vec<u8>,
    pub val: Option<Vec<u8>>,
}

/// A recorded transaction.
#[derive(Clone, Debug)]
pub(crate) struct TxRec {
    pub uid: u64,
    pub snapshot: u64,
    pub writes: Vec<Write>,
    pub status: Status,
}

/// A recorded DDL operation.
#[derive(Clone, Debug)]
pub(crate) struct DdlRec {
    pub create: bool,
    pub name: String,
    pub status: Status,
}

/// The marker key of transaction `uid`.
pub(crate) fn marker_key(uid: u64) -> Vec<u8> {
    format!("m{uid:012}").into_bytes()
}

fn marker_value(uid: u64, writes: usize) -> Vec<u8> {
    format!("{uid}|marker|{writes}").into_bytes()
}

/// The transaction id in a value written by the crash test.
pub(crate) fn uid_of(v: &[u8]) -> Option<u64> {
    let end = v.iter().position(|&b| b == b'|')?;
    std::str::from_utf8(&v[..end]).ok()?.parse().ok()
}

fn short_key(i: usize) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn long_key(i: usize) -> Vec<u8> {
    let len = 700 + (i * 37) % 300;
    let mut k = format!("L{i:05}-").into_bytes();
    let fill = b'a' + (i % 26) as u8;
    k.resize(len, fill);
    k
}

/// Whether `v` is a value the crash test could have written to `key` of `table`: its bytes
/// follow from the transaction id it names, the table and the key (marker rows: from the id).
pub(crate) fn well_formed(table: &str, key: &[u8], v: &[u8]) -> bool {
    let Some(uid) = uid_of(v) else { return false };
    if table == MARKS {
        let ok = key == marker_key(uid).as_slice();
        let writes = std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.rsplit('|').next()?.parse::<usize>().ok());
        return ok && writes.is_some_and(|n| v == marker_value(uid, n).as_slice());
    }
    v == value(uid, table, key, v.len()).as_slice()
}

fn value(uid: u64, table: &str, key: &[u8], len: usize) -> Vec<u8> {
    let h = crc32c::crc32c(key);
    let mut v = format!("{uid}|{table}|{h:08x}|").into_bytes();
    let fill = (uid % 251) as u8;
    v.resize(len.max(v.len()), fill);
    v
}

/// Settings of the workers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WorkCfg {
    pub keys: usize,
    pub page_size: usize,
    pub max_txns: usize,
    /// Per transaction: chance to run a DDL operation instead.
    pub ddl_chance: f64,
    /// Per transaction: chance to take a checkpoint first (single-threaded runs).
    pub checkpoint_chance: f64,
    /// Read each key before writing it and check the value read (runs with faults).
    pub check_reads: bool,
}

/// Errors kept per cycle.
const MET_KEPT: usize = 8;

/// Errors with a fault's tag kept per cycle.
const TAGGED_KEPT: usize = 64;

/// A value read during the run that the crash test never wrote there.
#[derive(Clone, Debug)]
pub(crate) struct WrongRead {
    pub table: String,
    pub key: Vec<u8>,
    pub found: Vec<u8>,
    /// The pages the key's lookup passed through when it was read (overflow pages included):
    /// by the time the cycle is verified, redo or a drop may have moved the key elsewhere.
    pub pages: Vec<u64>,
}

/// What the workers of one cycle share.
pub(crate) struct Shared<'a> {
    pub db: &'a Db,
    pub txns: &'a Mutex<Vec<TxRec>>,
    pub ddl: &'a Mutex<Vec<DdlRec>>,
    pub dyn_tables: &'a Mutex<Vec<String>>,
    pub uid: &'a AtomicU64,
    pub stop: &'a AtomicBool,
    pub exposed: &'a AtomicU64,
    /// Errors the workers met.
    pub met: &'a Mutex<Vec<Met>>,
    /// Wrong values read.
    pub wrong: &'a Mutex<Vec<WrongRead>>,
    pub cfg: WorkCfg,
}

/// The handle of `name` among the tables `tx` has open, opening it on first use.
fn table_of<'a, 't>(
    tx: &'t WriteTxn<'_>,
    open: &'a mut Vec<Table<'t>>,
    name: &str,
) -> Result<&'a mut Table<'t>> {
    let i = match open.iter().position(|t| t.name() == name) {
        Some(i) => i,
        None => {
            open.push(tx.open_table(name)?);
            open.len() - 1
        }
    };
    Ok(&mut open[i])
}

fn status_of(r: &Result<CommitInfo>) -> Status {
    match r {
        Ok(info) => Status::Acked(info.cts),
        Err(Error::Conflict { .. } | Error::NoSuchTable(_)) => Status::Aborted,
        Err(_) => Status::Unknown,
    }
}

impl Shared<'_> {
    fn record(&self, rec: TxRec) -> usize {
        let mut t = self.txns.lock();
        t.push(rec);
        t.len() - 1
    }

    fn set(&self, idx: usize, status: Status) {
        self.txns.lock()[idx].status = status;
    }

    /// Keeps an error a worker met: the first few of the cycle, and every one that carries
    /// an injected fault's tag, up to [`TAGGED_KEPT`].
    pub(crate) fn met<T>(&self, r: &Result<T>) {
        // Only errors that say something about the database (not a conflict, a dropped table).
        if let Err(e) = r {
            if !e.fails_database() {
                return;
            }
            let met = Met::of(e);
            let mut m = self.met.lock();
            if m.len() < MET_KEPT || (met.tagged() && m.len() < MET_KEPT + TAGGED_KEPT) {
                m.push(met);
            }
        }
    }

    /// Reads `key` of `table` before a write to it and checks what it finds; false when the
    /// read failed (the worker stops).
    fn check_read(&self, t: &Table<'_>, table: &str, key: &[u8]) -> bool {
        let r = t.get(key);
        self.met(&r);
        match r {
            Ok(Some(v)) if !well_formed(table, key, &v) => {
                let pages = self.db.key_pages(table, key);
                self.wrong.lock().push(WrongRead {
                    table: table.to_string(),
                    key: key.to_vec(),
                    found: v,
                    pages,
                });
                true
            }
            Ok(_) => true,
            Err(_) => false,
        }
    }

    /// Runs one transaction of `writes` plus its marker; returns false when the worker must stop.
    pub(crate) fn transact(
        &self,
        writes: Vec<Write>,
        inflight: Option<&mut VecDeque<(usize, CommitTicket)>>,
    ) -> bool {
        let tx = self.db.begin_write();
        self.met(&tx);
        let Ok(tx) = tx else {
            return false;
        };
        // Each table is opened once, at its first write in this transaction.
        let mut open: Vec<Table<'_>> = Vec::new();
        let uid = self.uid.fetch_add(1, Ordering::AcqRel);
        let snapshot = tx.snapshot();
        let mut done = Vec::with_capacity(writes.len() + 1);
        for mut w in writes {
            if let Some(v) = &mut w.val {
                // The value carries the id of the transaction that wrote it.
                *v = value(uid, &w.table, &w.key, v.len());
            }
            if self.cfg.check_reads {
                match table_of(&tx, &mut open, &w.table) {
                    Ok(t) => {
                        if !self.check_read(t, &w.table, &w.key) {
                            return false;
                        }
                    }
                    Err(Error::Conflict { .. } | Error::NoSuchTable(_)) => {
                        drop(open);
                        tx.rollback();
                        return true;
                    }
                    Err(e) => {
                        self.met::<()>(&Err(e));
                        return false;
                    }
                }
            }
            let r = table_of(&tx, &mut open, &w.table).and_then(|t| match &w.val {
                Some(v) => t.put(&w.key, v),
                None => t.delete(&w.key),
            });
            if !matches!(r, Err(Error::Conflict { .. } | Error::NoSuchTable(_))) {
                self.met(&r);
            }
            match r {
                Ok(()) => {
                    done.retain(|d: &Write| !(d.table == w.table && d.key == w.key));
                    done.push(w);
                }
                Err(Error::Conflict { .. } | Error::NoSuchTable(_)) => {
                    drop(open);
                    tx.rollback();
                    return true;
                }
                Err(_) => return false,
            }
        }
        let mk = marker_key(uid);
        let mv = marker_value(uid, done.len());
        let r = table_of(&tx, &mut open, MARKS).and_then(|t| t.put(&mk, &mv));
        self.met(&r);
        if r.is_err() {
            return false;
        }
        drop(open);
        let probe = done
            .iter()
            .find_map(|w| w.val.clone().map(|v| (w.table.clone(), w.key.clone(), v)));
        done.push(Write {
            table: MARKS.into(),
            key: mk,
            val: Some(mv),
        });
        let idx = self.record(TxRec {
            uid,
            snapshot,
            writes: done,
            status: Status::Pending,
        });
        let Some(inflight) = inflight else {
            let r = tx.commit();
            if !matches!(r, Err(Error::Conflict { .. })) {
                self.met(&r);
            }
            let s = status_of(&r);
            self.set(idx, s);
            return s != Status::Unknown;
        };
        self.commit_pipelined(tx, idx, probe, inflight)
    }

    /// Hands the commit to the flush thread (a reader must not see it yet), then settles
    /// the commits in flight that resolved, waiting for the oldest beyond the pipeline depth.
    /// `false`: the database failed.
    fn commit_pipelined(
        &self,
        tx: WriteTxn<'_>,
        idx: usize,
        probe: Option<(String, Vec<u8>, Vec<u8>)>,
        inflight: &mut VecDeque<(usize, CommitTicket)>,
    ) -> bool {
        match tx.commit_pipelined() {
            Ok(t) => {
                if let Some((table, key, v)) = probe {
                    self.check_not_exposed(&table, &key, &v, t.info().lsn);
                }
                inflight.push_back((idx, t));
            }
            Err(e) => {
                let r = Err(e);
                let s = status_of(&r);
                if s == Status::Unknown {
                    self.met(&r);
                }
                self.set(idx, s);
                return s != Status::Unknown;
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
            let s = status_of(&r);
            self.set(i, s);
            if s == Status::Unknown {
                self.met(&r);
                return false;
            }
        }
        true
    }

    /// A pending commit must not be visible: read a key it put through a new snapshot.
    fn check_not_exposed(&self, table: &str, key: &[u8], value: &[u8], end_lsn: u64) {
        let r = self.db.begin_read();
        self.met(&r);
        let Ok(r) = r else { return };
        let got = r.open_table(table).and_then(|t| t.get(key));
        self.met(&got);
        if let Ok(Some(v)) = got {
            if v == value && self.db.durable_lsn() < end_lsn {
                self.exposed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Creates a table, or drops one of the live dynamic tables; false when the worker must stop.
    fn ddl_op(&self, rng: &mut SmallRng) -> bool {
        let victim = {
            let mut live = self.dyn_tables.lock();
            if live.len() >= 2 && rng.gen_bool(0.5) {
                let i = rng.gen_range(0..live.len());
                Some(live.swap_remove(i))
            } else {
                None
            }
        };
        let (create, name) = match victim {
            Some(n) => (false, n),
            None => (
                true,
                format!("{DYN_PREFIX}{}", self.uid.fetch_add(1, Ordering::AcqRel)),
            ),
        };
        let idx = {
            let mut d = self.ddl.lock();
            d.push(DdlRec {
                create,
                name: name.clone(),
                status: Status::Pending,
            });
            d.len() - 1
        };
        let r = if create {
            self.db.create_table(&name)
        } else {
            self.db.drop_table(&name)
        };
        let status = match &r {
            Ok(()) => Status::Acked(0),
            Err(Error::TableExists(_) | Error::NoSuchTable(_)) => Status::Aborted,
            Err(_) => {
                self.met(&r);
                Status::Unknown
            }
        };
        self.ddl.lock()[idx].status = status;
        if create && status == Status::Acked(0) {
            self.dyn_tables.lock().push(name);
        }
        status != Status::Unknown
    }

    fn random_writes(&self, rng: &mut SmallRng) -> Vec<Write> {
        let cfg = self.cfg;
        let inline_max = pagoda_engine::limits::inline_max(cfg.page_size);
        let mut big = false;
        let n = rng.gen_range(1..=5);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let r: f64 = rng.gen();
            let dyn_table = if r >= 0.85 {
                let live = self.dyn_tables.lock();
                (!live.is_empty()).then(|| live[rng.gen_range(0..live.len())].clone())
            } else {
                None
            };
            let (table, key) = match dyn_table {
                Some(t) => (t, short_key(rng.gen_range(0..DYN_KEYS))),
                None if !(0.5..0.85).contains(&r) => {
                    (SHORT.to_string(), short_key(rng.gen_range(0..cfg.keys)))
                }
                None => (LONG.to_string(), long_key(rng.gen_range(0..cfg.keys))),
            };
            let val = if rng.gen_bool(0.2) {
                None
            } else if !big && rng.gen_bool(0.08) {
                // One overflow value at most per transaction (the log record must stay small).
                big = true;
                Some(vec![0; rng.gen_range(inline_max + 1..=2 * cfg.page_size)])
            } else {
                Some(vec![0; rng.gen_range(16..300)])
            };
            out.push(Write { table, key, val });
        }
        out
    }

    /// A worker: transactions (and DDL, checkpoints) until told to stop or the power goes.
    pub(crate) fn run(&self, seed: u64) {
        let db = self.db;
        let pipelined = db.commit_mode() == CommitMode::Pipelined;
        let mut inflight: VecDeque<(usize, CommitTicket)> = VecDeque::new();
        let mut rng = SmallRng::seed_from_u64(seed);
        for _ in 0..self.cfg.max_txns {
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            if rng.gen_bool(self.cfg.ddl_chance) {
                if !self.ddl_op(&mut rng) {
                    break;
                }
                continue;
            }
            if rng.gen_bool(self.cfg.checkpoint_chance) {
                let r = db.checkpoint();
                self.met(&r);
                if r.is_err() {
                    break;
                }
            }
            let writes = self.random_writes(&mut rng);
            let more = self.transact(writes, pipelined.then_some(&mut inflight));
            if !more {
                break;
            }
        }
        for (i, t) in inflight {
            let r = t.wait();
            let s = status_of(&r);
            if s == Status::Unknown {
                self.met(&r);
            }
            self.set(i, s);
        }
    }
}
