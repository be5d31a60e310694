//! The oracle: what must be in the database after recovery, exactly.
//!
//! A transaction committed iff its marker row is present (the marker is one of its writes, so
//! the engine's all-or-nothing promise covers it). Every acknowledged transaction must be
//! present; an aborted one must not. The expected contents are then determined: for each key,
//! the present transactions that wrote it are ordered by their snapshots (under snapshot
//! isolation with first-committer-wins, a later writer of a key began after the earlier writer
//! was committed, so its snapshot is strictly larger), and the last one's write wins; keys no
//! present transaction wrote keep the state verified at the previous cycle. Anything else is a
//! lost commit (an acknowledged write missing), an uncommitted effect (a write of a transaction
//! that is not present), or a partial transaction (a present transaction missing a write).
//! Tables follow the acknowledged creates and drops; unacknowledged DDL may go either way.
//! With lazy commits an acknowledged transaction may be lost, but only as part of a suffix of
//! the commit order: one missing while a later-committed one is present is a lost commit.

use crate::workload::{marker_key, uid_of, DdlRec, Status, TxRec, MARKS};
use pagoda_engine::{Db, Error, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Contents of one table.
pub(crate) type Table = BTreeMap<Vec<u8>, Vec<u8>>;

/// The verified state: every table and its contents.
pub(crate) type Model = BTreeMap<String, Table>;

/// Kinds of findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// An acknowledged transaction or DDL operation is missing (wholly or partly).
    LostCommit,
    /// A write of a transaction that did not commit is visible.
    UncommittedVisible,
    /// A committed, unacknowledged transaction is visible only in part.
    PartialTransaction,
    /// Two committed writers of one key had the same snapshot (a lost update).
    IsolationViolation,
    /// A point read and a scan disagree.
    ReadMismatch,
    /// A value read while running is not one the crash test wrote to that key (a damaged page
    /// served).
    WrongValue,
    /// Recovery failed (other than a detected torn page in torn mode none).
    RecoveryFailed,
    /// The engine failed while the power was still on.
    EngineFailed,
    /// Detected corruption in a torn mode that must prevent it.
    Corruption,
    /// A pending commit was visible to another transaction while running.
    PendingExposed,
    /// After recovery, a flash cache slot held a version older than the data device's copy of
    /// its page (a read would have served the stale version).
    StaleVersion,
    /// A request failed (an injected fault fired) and no caller heard of it: the engine went
    /// on as if it had worked.
    Unreported,
}

/// One thing the oracle found wrong.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// What kind of failure.
    pub kind: FindingKind,
    /// Table, when it concerns a key or table.
    pub table: String,
    /// Key (lossy UTF-8, abbreviated).
    pub key: String,
    /// The transaction concerned (id in the values it wrote).
    pub txn: Option<u64>,
    /// Expected (abbreviated; `absent` for no row).
    pub expected: String,
    /// Found (abbreviated).
    pub found: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.kind)?;
        if !self.table.is_empty() {
            write!(f, " in table {}", self.table)?;
        }
        if !self.key.is_empty() {
            write!(f, " key {}", self.key)?;
        }
        if let Some(t) = self.txn {
            write!(f, " (transaction {t})")?;
        }
        write!(f, ": expected {}, found {}", self.expected, self.found)
    }
}

pub(crate) fn abbrev(v: Option<&[u8]>) -> String {
    match v {
        None => "absent".into(),
        Some(v) => {
            let head: String = String::from_utf8_lossy(&v[..v.len().min(40)])
                .chars()
                .map(|c| if c.is_control() { '.' } else { c })
                .collect();
            format!("{head:?} ({} bytes)", v.len())
        }
    }
}

/// A finding about the run rather than a key.
pub(crate) fn note(kind: FindingKind, found: String) -> Finding {
    Finding {
        kind,
        table: String::new(),
        key: String::new(),
        txn: None,
        expected: "no failure".into(),
        found,
    }
}

/// What verification of one cycle found.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    pub findings: Vec<Finding>,
    /// Corrupt pages reported by reads (torn mode none: the cycle is excused and the
    /// database re-created).
    pub corrupt_pages: BTreeSet<u64>,
    /// Each corruption the engine reported on read: its pages and what it said.
    pub corrupt_details: Vec<(Vec<u64>, String)>,
    /// The recovered state (the next cycle's base).
    pub state: Model,
    /// Transactions and DDL operations verified.
    pub checked: u64,
    /// Transactions whose outcome could not be verified: a read of their marker row (or of
    /// a key they wrote) met a damaged page.
    pub unverified: u64,
    /// Keys whose reads met a damaged page (their state is unknown), by table.
    pub unknown: BTreeSet<(String, Vec<u8>)>,
    /// For each finding, the table and raw key it concerns (an empty key for a table).
    pub keys: Vec<(String, Vec<u8>)>,
    /// Lazy commits lost as a suffix of the commit order (allowed; counted).
    pub suffix_lost: u64,
}

impl Verdict {
    fn find(
        &mut self,
        kind: FindingKind,
        table: &str,
        key: &[u8],
        txn: Option<u64>,
        e: Option<&[u8]>,
        g: Option<&[u8]>,
    ) {
        self.keys.push((table.to_string(), key.to_vec()));
        self.findings.push(Finding {
            kind,
            table: table.into(),
            key: abbrev(Some(key))
                .split(" (")
                .next()
                .unwrap_or_default()
                .to_string(),
            txn,
            expected: abbrev(e),
            found: abbrev(g),
        });
    }

    /// A finding about `table` (and `key`, which the text does not show), e.g. a missing
    /// marker row or a missing table.
    #[allow(clippy::too_many_arguments)]
    fn note(
        &mut self,
        kind: FindingKind,
        table: &str,
        key: &[u8],
        txn: Option<u64>,
        expected: &str,
        found: &str,
    ) {
        self.keys.push((table.to_string(), key.to_vec()));
        self.findings.push(Finding {
            kind,
            table: table.into(),
            key: String::new(),
            txn,
            expected: expected.into(),
            found: found.into(),
        });
    }
}

/// Reads every table of `db`: a full scan, cross-checked by point reads of `probe` keys (the
/// keys the model has and those the cycle's transactions wrote). A read that meets a damaged
/// page is recorded ([`Verdict::corrupt_pages`]); its keys are unknown ([`Verdict::unknown`])
/// and the rest is still read: what can be verified is.
fn read_all(
    db: &Db,
    model: &Model,
    written: &BTreeMap<&str, BTreeSet<&[u8]>>,
    v: &mut Verdict,
) -> Result<Model> {
    let tx = db.begin_read()?;
    let mut out = Model::new();
    for name in db.list_tables() {
        let mut got = Table::new();
        let table = tx.open_table(&name)?;
        let mut scanned = true;
        match table.range(..).collect::<Result<Vec<_>>>() {
            Ok(rows) => got.extend(rows),
            Err(Error::Corruption {
                all_pages, detail, ..
            }) => {
                v.corrupt_pages.extend(&all_pages);
                v.corrupt_details.push((all_pages, detail));
                scanned = false;
            }
            Err(e) => return Err(e),
        }
        // Point reads of every key the scan saw, the model has, or the cycle wrote.
        let keys: BTreeSet<&[u8]> = got
            .keys()
            .map(Vec::as_slice)
            .chain(
                model
                    .get(&name)
                    .into_iter()
                    .flat_map(|t| t.keys())
                    .map(Vec::as_slice),
            )
            .chain(written.get(name.as_str()).into_iter().flatten().copied())
            .collect();
        let mut read = Table::new();
        for k in keys {
            match table.get(k) {
                Ok(p) if !scanned => {
                    read.extend(p.map(|p| (k.to_vec(), p)));
                }
                Ok(p) if p.as_ref() == got.get(k) => {}
                Ok(p) => v.find(
                    FindingKind::ReadMismatch,
                    &name,
                    k,
                    None,
                    got.get(k).map(Vec::as_slice),
                    p.as_deref(),
                ),
                Err(Error::Corruption {
                    all_pages, detail, ..
                }) => {
                    v.corrupt_pages.extend(&all_pages);
                    v.corrupt_details.push((all_pages, detail));
                    v.unknown.insert((name.clone(), k.to_vec()));
                }
                Err(e) => return Err(e),
            }
        }
        if !scanned {
            // Only point reads: keys the scan would have found beyond them stay unseen.
            got = read;
        }
        out.insert(name, got);
    }
    Ok(out)
}

/// Which tables may and must exist after recovery.
fn check_tables(base: &Model, ddl: &[DdlRec], got: &Model, v: &mut Verdict) -> BTreeSet<String> {
    // name -> (must exist, may exist)
    let mut allowed: BTreeMap<String, (bool, bool)> =
        base.keys().map(|n| (n.clone(), (true, true))).collect();
    for d in ddl {
        let e = allowed.entry(d.name.clone()).or_insert((false, false));
        match (d.create, d.status) {
            (_, Status::Aborted) => {}
            (true, Status::Acked(_)) => *e = (true, true),
            (true, _) => e.1 = true,
            (false, Status::Acked(_)) => *e = (false, false),
            (false, _) => e.0 = false,
        }
    }
    let mut dropped = BTreeSet::new();
    for (name, (must, may)) in &allowed {
        let exists = got.contains_key(name);
        if *must && !exists {
            v.note(
                FindingKind::LostCommit,
                name,
                b"",
                None,
                "table exists (acknowledged)",
                "no such table",
            );
        } else if !*may && exists {
            v.note(
                FindingKind::UncommittedVisible,
                name,
                b"",
                None,
                "no such table (dropped or never created)",
                "table exists",
            );
        }
        if !exists {
            dropped.insert(name.clone());
        }
    }
    for name in got.keys() {
        if !allowed.contains_key(name) {
            v.note(
                FindingKind::UncommittedVisible,
                name,
                b"",
                None,
                "no such table",
                "table exists",
            );
        }
    }
    dropped
}

/// Checks the recovered database against the base state and the cycle's history.
pub(crate) fn verify(
    db: &Db,
    base: &Model,
    txns: &[TxRec],
    ddl: &[DdlRec],
    lazy: bool,
) -> Result<Verdict> {
    let mut v = Verdict::default();
    let mut written: BTreeMap<&str, BTreeSet<&[u8]>> = BTreeMap::new();
    for w in txns.iter().flat_map(|t| &t.writes) {
        written.entry(&w.table).or_default().insert(&w.key);
    }
    let mut got = read_all(db, base, &written, &mut v)?;
    let txns = set_aside_unsure(txns, &mut v, &mut got);
    let txns = txns.as_slice();
    v.checked = txns.len() as u64 + ddl.len() as u64;
    let gone = check_tables(base, ddl, &got, &mut v);
    let present = committed(txns, &got, lazy, &mut v);
    let (expect, last_writer) = expected(base, txns, &present, &got, &gone, &mut v);
    let outcome = Outcome {
        base,
        txns,
        present: &present,
        last_writer: &last_writer,
    };
    outcome.compare(&expect, &got, &mut v);
    v.state = got;
    Ok(v)
}

/// A transaction whose marker could not be read has an unknown outcome: so have the keys it
/// wrote. Marks those keys unknown (and drops them from `got`), counts the transactions
/// unverified, and returns the others, the ones the checks hold to account.
fn set_aside_unsure(txns: &[TxRec], v: &mut Verdict, got: &mut Model) -> Vec<TxRec> {
    let unknown_txn =
        |t: &TxRec, v: &Verdict| v.unknown.contains(&(MARKS.to_string(), marker_key(t.uid)));
    let unsure: Vec<&TxRec> = txns.iter().filter(|t| unknown_txn(t, v)).collect();
    for t in &unsure {
        for w in &t.writes {
            v.unknown.insert((w.table.clone(), w.key.clone()));
        }
    }
    v.unverified = unsure.len() as u64;
    let unsure: BTreeSet<u64> = unsure.iter().map(|t| t.uid).collect();
    for (table, key) in &v.unknown {
        if let Some(t) = got.get_mut(table) {
            t.remove(key);
        }
    }
    txns.iter()
        .filter(|t| !unsure.contains(&t.uid))
        .cloned()
        .collect()
}

/// Which transactions committed, by their marker rows: a marker of an aborted transaction
/// (or with another value) is uncommitted data made visible, a missing marker of an
/// acknowledged one a lost commit (with lazy commits, only when a later commit was kept: a
/// crash may lose a suffix of the commit order, which is counted).
fn committed(txns: &[TxRec], got: &Model, lazy: bool, v: &mut Verdict) -> BTreeSet<u64> {
    let marks = got.get(MARKS).cloned().unwrap_or_default();
    let mut present: BTreeSet<u64> = BTreeSet::new();
    // Lazy mode: acknowledged transactions missing, as (commit timestamp, uid).
    let mut missing: Vec<(u64, u64)> = Vec::new();
    for t in txns {
        let mk = marker_key(t.uid);
        let found = marks.get(&mk);
        let wrote = t.writes.iter().find(|w| w.table == MARKS && w.key == mk);
        match (found, t.status) {
            (Some(f), Status::Aborted) => {
                v.find(
                    FindingKind::UncommittedVisible,
                    MARKS,
                    &mk,
                    Some(t.uid),
                    None,
                    Some(f),
                );
            }
            (Some(f), _) => {
                if wrote.and_then(|w| w.val.as_deref()) != Some(f.as_slice()) {
                    v.find(
                        FindingKind::UncommittedVisible,
                        MARKS,
                        &mk,
                        Some(t.uid),
                        wrote.and_then(|w| w.val.as_deref()),
                        Some(f),
                    );
                }
                present.insert(t.uid);
            }
            (None, Status::Acked(cts)) if lazy => missing.push((cts, t.uid)),
            (None, Status::Acked(cts)) => {
                v.note(
                    FindingKind::LostCommit,
                    MARKS,
                    &mk,
                    Some(t.uid),
                    &format!("transaction acknowledged at commit timestamp {cts}"),
                    "its marker row is missing",
                );
            }
            (None, _) => {}
        }
    }
    let newest_present = txns
        .iter()
        .filter(|t| present.contains(&t.uid))
        .filter_map(|t| match t.status {
            Status::Acked(cts) => Some(cts),
            _ => None,
        })
        .max();
    for (cts, uid) in missing {
        match newest_present {
            Some(later) if later > cts => v.note(
                FindingKind::LostCommit,
                MARKS,
                &marker_key(uid),
                Some(uid),
                &format!(
                    "lazy commit at timestamp {cts} kept, as the later one at {later} was \
                     (a crash may lose only a suffix of the commit order)"
                ),
                "its marker row is missing",
            ),
            _ => v.suffix_lost += 1,
        }
    }
    present
}

/// The last committed writer of each key, by uid.
type LastWriter<'t> = HashMap<(&'t str, &'t [u8]), u64>;

/// The contents the database must have: `base`, then per key the value of the committed
/// writer with the largest snapshot (two committed writers of one key with the same
/// snapshot break isolation), without the tables DDL dropped. Also each key's last writer.
fn expected<'t>(
    base: &Model,
    txns: &'t [TxRec],
    present: &BTreeSet<u64>,
    got: &Model,
    gone: &BTreeSet<String>,
    v: &mut Verdict,
) -> (Model, LastWriter<'t>) {
    let mut writers: BTreeMap<(&str, &[u8]), Vec<&TxRec>> = BTreeMap::new();
    for t in txns.iter().filter(|t| present.contains(&t.uid)) {
        for w in &t.writes {
            writers
                .entry((w.table.as_str(), w.key.as_slice()))
                .or_default()
                .push(t);
        }
    }
    let mut expect: Model = base.clone();
    for name in got.keys() {
        expect.entry(name.clone()).or_default();
    }
    let mut last_writer: LastWriter<'t> = HashMap::new();
    for ((table, key), mut ws) in writers {
        ws.sort_by_key(|t| t.snapshot);
        if ws.windows(2).any(|p| p[0].snapshot == p[1].snapshot) {
            v.find(
                FindingKind::IsolationViolation,
                table,
                key,
                Some(ws[0].uid),
                None,
                None,
            );
        }
        let Some(last) = ws.last() else { continue };
        last_writer.insert((table, key), last.uid);
        if gone.contains(table) {
            continue;
        }
        let w = last
            .writes
            .iter()
            .rev()
            .find(|w| w.table == table && w.key == key);
        let t = expect.entry(table.to_string()).or_default();
        match w.and_then(|w| w.val.clone()) {
            Some(val) => {
                t.insert(key.to_vec(), val);
            }
            None => {
                t.remove(key);
            }
        }
    }
    for name in gone {
        expect.remove(name);
    }
    (expect, last_writer)
}

/// What the cycle's transactions did, to name the kind of a difference.
struct Outcome<'a> {
    base: &'a Model,
    txns: &'a [TxRec],
    present: &'a BTreeSet<u64>,
    last_writer: &'a LastWriter<'a>,
}

impl Outcome<'_> {
    /// Every key where `got` differs from `expect` (keys whose state is unknown aside) is a
    /// finding: a value no committed transaction wrote is uncommitted data made visible; a
    /// missing or old value is a partial transaction when its last writer was not
    /// acknowledged, else a lost commit.
    fn compare(&self, expect: &Model, got: &Model, v: &mut Verdict) {
        let by_uid: HashMap<u64, &TxRec> = self.txns.iter().map(|t| (t.uid, t)).collect();
        for (name, exp) in expect {
            let empty = Table::new();
            let act = got.get(name).unwrap_or(&empty);
            let keys: BTreeSet<&Vec<u8>> = exp.keys().chain(act.keys()).collect();
            for k in keys {
                let (e, g) = (exp.get(k), act.get(k));
                if e == g || v.unknown.contains(&(name.clone(), k.clone())) {
                    continue;
                }
                let found_uid = g.and_then(|g| uid_of(g));
                let expect_uid = self
                    .last_writer
                    .get(&(name.as_str(), k.as_slice()))
                    .copied();
                let found_committed = found_uid.is_some_and(|u| self.present.contains(&u))
                    || self.base.get(name).and_then(|t| t.get(k)) == g && g.is_some();
                let (kind, txn) = if g.is_some() && !found_committed {
                    (FindingKind::UncommittedVisible, found_uid)
                } else {
                    match expect_uid.and_then(|u| by_uid.get(&u)) {
                        Some(t) if !matches!(t.status, Status::Acked(_)) => {
                            (FindingKind::PartialTransaction, Some(t.uid))
                        }
                        _ => (FindingKind::LostCommit, expect_uid.or(found_uid)),
                    }
                };
                v.find(
                    kind,
                    name,
                    k,
                    txn,
                    e.map(Vec::as_slice),
                    g.map(Vec::as_slice),
                );
            }
        }
    }
}
