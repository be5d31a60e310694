//! The ledger of a run with faults: what each fault kind did across the cycles (fired,
//! detected by its own report, repaired, verified), and the damage still on the medium that
//! explains a later report of corruption or (a lost write) a finding.

use crate::cycle::Pending;
use crate::faults::{
    names_slot_at, Armed, FaultCounts, FaultKind, Injector, LogRot, Reach, Repair,
};
use crate::met::{carries_tag, corrupt_pages, is_corruption};
use crate::oracle::{Finding, FindingKind, Verdict};
use crate::workload::{marker_key, TxRec, WrongRead, MARKS};
use pagoda_device::fault::FaultDevice;
use pagoda_engine::{Db, Error, Result};
use std::collections::{BTreeMap, BTreeSet};

/// Damage a fault left on one page of the medium, outstanding until the page is written
/// again or the devices are replaced. (A page whose newer copy sits in the flash cache can keep
/// its damage hidden for many cycles.)
#[derive(Clone, Debug)]
struct Damage {
    kind: FaultKind,
    /// Already counted as detected.
    detected: bool,
    /// How to undo it (empty: it cannot be).
    repairs: Vec<Repair>,
}

/// The faults of a run across its cycles: the counts by kind, and the damage outstanding.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    pub(crate) counts: BTreeMap<String, FaultCounts>,
    /// Damaged data pages, by page id.
    damage: BTreeMap<u64, Damage>,
    /// The kind of the damage registered last (repairs are counted to it).
    latest: Option<FaultKind>,
    /// A superblock copy (sector) left rotten by a fault, which the next open must report.
    superblock: Option<(u64, Armed)>,
    /// A log group left rotten by a fault, which the next open must report.
    log_rot: Option<LogRot>,
    /// Pages written that [`Ledger::restore`] learnt of and left for the next
    /// [`Ledger::overwritten`].
    unlearned: BTreeSet<u64>,
    /// What the lost writes since the devices were made reached. Unlike `damage` it stays
    /// when the page is written again: after a recovery the engine reads the stale image back
    /// and builds on it, so what the lost write dropped stays lost.
    lost: Reach,
}

/// Whether `page` lies in the double-write area (it follows the superblock area).
fn in_copy_area(page: u64, page_size: u64) -> bool {
    let start = pagoda_engine::format::HEADER_BYTES / page_size;
    (start..start + u64::from(crate::DW_PAGES)).contains(&page)
}

/// Whether a report of corruption saying `detail` comes from the check that catches faults of
/// `kind`: the page checksum for flipped bits, and also the page id in the header for a page
/// that landed elsewhere.
fn signature(kind: FaultKind, detail: &str) -> bool {
    let checksum = detail.contains("checksum mismatch");
    match kind {
        FaultKind::Bitrot => checksum,
        FaultKind::Misdirected => checksum || detail.contains("misdirected write"),
        // Whatever a lost write breaks is undetectable by design.
        FaultKind::LostWrite => true,
        _ => false,
    }
}

impl Ledger {
    fn count(&mut self, kind: FaultKind) -> &mut FaultCounts {
        self.counts.entry(kind.name().to_string()).or_default()
    }

    /// Pages written whole since the last call: their damage is gone.
    pub(crate) fn overwritten(&mut self, pages: &BTreeSet<u64>) {
        let pages: BTreeSet<u64> = pages
            .union(&std::mem::take(&mut self.unlearned))
            .copied()
            .collect();
        self.damage.retain(|p, _| !pages.contains(p));
    }

    /// After the workload of a cycle with `armed`: counts what the fault did and returns
    /// whether the engine's failure with the power on (`failure`) is the report of that fault
    /// (then it is no finding), and the finding of a failed request nobody heard of. `p`: the
    /// cycle (the errors its workers met, the tagged errors that reached the database's
    /// failure path, the flash cache's reads from the data device). A failed request counts as
    /// reported only by an error carrying its own tag; damage only by the check named for it,
    /// on the page (or flash cache slot) it hit. A read the engine served from elsewhere after
    /// the fault's error or on its slot (the data device's copy instead of a flash cache slot)
    /// repairs it.
    pub(crate) fn settle(
        &mut self,
        inj: &Injector,
        armed: &Armed,
        failure: Option<&Error>,
        p: &Pending,
    ) -> (bool, Option<Finding>) {
        let (met, heard) = (&p.met, &p.heard);
        let kind = armed.kind;
        // A log group rots now, with the power off: the next open must report it.
        let rot = inj.rot_log(armed).ok().flatten();
        let fired = inj.fired(armed) || rot.is_some();
        if rot.is_some() {
            self.log_rot = rot;
        }
        let damaging = matches!(
            kind,
            FaultKind::Bitrot | FaultKind::Misdirected | FaultKind::LostWrite
        );
        // A stale page (lost write) can send a lookup to any page: corruption the engine
        // reports anywhere after one is its undetectable effect, reported safely.
        let on_page = |pages: &[u64]| {
            kind == FaultKind::LostWrite || pages.iter().any(|p| armed.pages.contains(p))
        };
        // The check named for the damage, where it is: a flash cache slot's, naming the slot.
        let hit = |text: &str, pages: &[u64]| match armed.flash_at {
            Some(at) => names_slot_at(text, at, inj.page_bytes()),
            None => signature(kind, text) && on_page(pages),
        };
        let tagged = |t: &str| carries_tag(t, armed.dev, armed.first_tag);
        let reports = |e: &Error| {
            if damaging {
                is_corruption(e) && hit(&e.to_string(), &corrupt_pages(e))
            } else {
                tagged(&e.to_string())
            }
        };
        let seen = met.iter().any(|m| {
            if damaging {
                m.corruption && hit(&m.text, &m.pages)
            } else {
                tagged(&m.text)
            }
        }) || (!damaging && heard.iter().any(|h| tagged(h)));
        // Served from elsewhere after this very fault's error, or after the check on the slot
        // it rotted: repaired.
        let reread = fired
            && p.served.iter().any(|t| {
                tagged(t)
                    || armed
                        .flash_at
                        .is_some_and(|at| names_slot_at(t, at, inj.page_bytes()))
            });
        // Nothing can detect a lost write: what it breaks counts as undetectable.
        let lost = kind == FaultKind::LostWrite;
        let detected = fired && !lost && (failure.is_some_and(reports) || seen);
        let leaves_damage = armed.on_medium
            || (matches!(kind, FaultKind::Misdirected | FaultKind::LostWrite) && fired);
        let c = self.count(kind);
        c.injected += 1;
        c.fired += u64::from(fired);
        let t = c.targets.entry(armed.target.clone()).or_default();
        t[0] += 1;
        t[1] += u64::from(fired);
        c.detected += u64::from(detected);
        c.repaired += u64::from(reread && !detected);
        c.undetectable += u64::from(lost && failure.is_some_and(reports));
        let unreported =
            (fired && !damaging && !detected && !reread && !kind.silent()).then(|| {
                c.unreported += 1;
                unreported(
                    format!(
                        "an error tagged {} or later reaches a caller or fails the database",
                        FaultDevice::tag(armed.dev, armed.first_tag)
                    ),
                    format!("{kind} fired ({}) and no caller heard of it", armed.what),
                )
            });
        if let Some(sector) = armed.superblock {
            self.rot_superblock(inj, armed, sector);
        }
        let (reach, mut repairs) = inj.take_redirected();
        self.lost.pages.extend(reach.pages);
        self.lost.keys.extend(reach.keys);
        self.lost.spans.extend(reach.spans);
        repairs.splice(0..0, armed.repairs.iter().cloned());
        if leaves_damage {
            self.record_damage(inj, armed, detected, repairs);
        }
        (failure.is_some_and(reports), unreported)
    }

    /// A superblock copy `armed` rots now, with the power off: the next open must report it.
    fn rot_superblock(&mut self, inj: &Injector, armed: &Armed, sector: u64) {
        self.overwritten(&inj.learn_pages());
        inj.take_sb_written();
        if inj.rot_superblock(armed).is_ok() {
            self.superblock = Some((sector, armed.clone()));
        }
    }

    /// Notes the damage `armed` left on its pages (`detected`: the engine reported it), with
    /// the repairs that undo it where they still can: none once the cycle wrote the page
    /// again, or for a lost write (its page stays stale).
    fn record_damage(
        &mut self,
        inj: &Injector,
        armed: &Armed,
        detected: bool,
        mut repairs: Vec<Repair>,
    ) {
        let kind = armed.kind;
        // What the cycle wrote before or after the damage is not known: pages written
        // whole after the cycle clear it (see `overwritten`).
        let written = inj.learn_pages();
        self.overwritten(&written);
        for &p in &armed.pages {
            // The page was also written in the cycle: over the rot (which a power cut may
            // have undone, the write not yet flushed), or before or after a stray copy. What
            // it holds is not known, so the damage cannot be undone.
            let rewritten = written.contains(&p);
            let old = self.damage.remove(&p);
            let before = old.as_ref().is_some_and(|d| d.detected);
            let mut undo = std::mem::take(&mut repairs);
            if kind == FaultKind::LostWrite {
                // Not undone (see `Injector::take_redirected`): a page left stale by a lost
                // write makes its database re-created.
                undo.clear();
            } else if rewritten {
                undo.clear();
            }
            // Older damage on the page is undone after the new (a stray copy's `before`
            // holds it); none of it can be once a lost write left the page stale, which
            // stays what the page is known for.
            let mut kind = kind;
            match old {
                Some(o) if o.repairs.is_empty() => {
                    undo.clear();
                    if o.kind == FaultKind::LostWrite {
                        kind = o.kind;
                    }
                }
                Some(o) if !undo.is_empty() => undo.extend(o.repairs),
                _ => {}
            }
            self.damage.insert(
                p,
                Damage {
                    kind,
                    detected: detected || before,
                    repairs: undo,
                },
            );
        }
        self.latest = Some(kind);
    }

    /// Whether the outstanding damage explains a report of corruption of `pages` saying
    /// `detail`: each page is damaged and the check that catches its fault is the one that
    /// spoke (a damaged page that got past it and broke something else was used, which is a
    /// failure). Damage in the double-write area explains a checksum report on any page: a
    /// page torn by the power cut had its repair copy there. Outstanding lost writes explain
    /// anything (undetectable by design).
    pub(crate) fn explains(&self, pages: &[u64], detail: &str, page_size: usize) -> bool {
        if self.lost_write() {
            return true;
        }
        let copy_lost = detail.contains("checksum mismatch")
            && self
                .damage
                .keys()
                .any(|&p| in_copy_area(p, page_size as u64));
        !pages.is_empty()
            && (copy_lost
                || pages.iter().all(|p| {
                    self.damage
                        .get(p)
                        .is_some_and(|d| signature(d.kind, detail))
                }))
    }

    /// Whether damage is outstanding and all of it can be undone.
    pub(crate) fn restorable(&self) -> bool {
        !self.damage.is_empty() && self.damage.values().all(|d| !d.repairs.is_empty())
    }

    /// Corruption reported by an open or a read after a cycle, which [`Ledger::explains`]:
    /// counts it as the detection of the outstanding damage and undoes that damage on the
    /// medium, as restoring those pages from a backup would, so that the same cycle can be
    /// opened again and verified whole. False (nothing done) when some damage cannot be
    /// undone: the database must then be re-created ([`Ledger::explains_corruption`]).
    pub(crate) fn restore(&mut self, inj: &Injector) -> Result<bool> {
        // A page written since the damage (e.g. by the recovery that refused) may no longer
        // hold it (or hold it again, the write lost at a cut): undoing it could damage the
        // page anew, so nothing is undone then.
        let written = inj.learn_pages();
        let rewritten = self.damage.keys().any(|p| written.contains(p));
        self.unlearned.extend(written);
        if rewritten || !self.restorable() {
            return Ok(false);
        }
        let damage = std::mem::take(&mut self.damage);
        for d in damage.values() {
            inj.repair(&d.repairs)?;
        }
        self.reported(&damage, |c| c.restored += 1);
        Ok(true)
    }

    /// Counts `damage`, which a report of corruption explained, as detected (a lost write's
    /// as undetectable), and what was done about it (`done`), once per kind.
    fn reported(&mut self, damage: &BTreeMap<u64, Damage>, done: fn(&mut FaultCounts)) {
        let mut kinds: BTreeMap<FaultKind, bool> = BTreeMap::new();
        for d in damage.values() {
            *kinds.entry(d.kind).or_default() |= !d.detected;
        }
        for (kind, undetected) in kinds {
            let c = self.count(kind);
            if kind == FaultKind::LostWrite {
                c.undetectable += 1;
            } else if undetected {
                c.detected += 1;
            }
            done(c);
        }
    }

    /// Corruption reported by an open or a read after a cycle, which [`Ledger::explains`]:
    /// counts it as the detection of the outstanding damage (the database is re-created, so
    /// the damage goes with it).
    pub(crate) fn explains_corruption(&mut self) -> bool {
        let damage = std::mem::take(&mut self.damage);
        if damage.is_empty() {
            return false;
        }
        self.reported(&damage, |c| c.resets += 1);
        true
    }

    /// Takes out of `v`'s findings those that a lost write explains: the lookup of the key
    /// a finding concerns passes through a page whose write was lost (the page keeps an
    /// older, intact version: undetectable by design), or the key was on such a page; and so
    /// for the marker row of a transaction, whose outcome is then unknown, with every key it
    /// wrote. Returns whether any was taken out (the database must then be re-created: the
    /// stale page stays).
    pub(crate) fn excuse_lost(&mut self, db: &Db, v: &mut Verdict, txns: &[TxRec]) -> bool {
        if self.lost.pages.is_empty() || v.findings.is_empty() {
            return false;
        }
        let hit = |table: &str, key: &[u8]| self.reached(Some(db), table, key);
        let unsure: Vec<&TxRec> = txns
            .iter()
            .filter(|t| hit(MARKS, &marker_key(t.uid)))
            .collect();
        let unsure_uids: BTreeSet<u64> = unsure.iter().map(|t| t.uid).collect();
        let unsure_keys: BTreeSet<(&str, &[u8])> = unsure
            .iter()
            .flat_map(|t| &t.writes)
            .map(|w| (w.table.as_str(), w.key.as_slice()))
            .collect();
        let mut kept = Vec::new();
        let mut excused = 0;
        for (f, (table, key)) in std::mem::take(&mut v.findings).into_iter().zip(&v.keys) {
            if hit(table, key)
                || unsure_keys.contains(&(table.as_str(), key.as_slice()))
                || f.txn.is_some_and(|u| unsure_uids.contains(&u))
            {
                excused += 1;
            } else {
                kept.push(f);
            }
        }
        v.findings = kept;
        if excused == 0 {
            return false;
        }
        let c = self.count(FaultKind::LostWrite);
        c.undetectable += excused;
        c.resets += 1;
        true
    }

    /// After the recovery that followed a cycle armed with `a` (a fault that fails requests,
    /// still armed): counts a fault that acted inside recovery, and detected there when the
    /// open failed with its error (`heard`); returns the finding of one recovery dropped.
    pub(crate) fn at_recovery(&mut self, a: &Armed, fired: bool, heard: bool) -> Option<Finding> {
        if !fired {
            return None;
        }
        let c = self.count(a.kind);
        c.at_recovery += 1;
        if heard {
            c.detected_at_recovery += 1;
            return None;
        }
        c.unreported += 1;
        Some(unreported(
            format!(
                "the open fails with the error tagged {} or later",
                FaultDevice::tag(a.dev, a.first_tag)
            ),
            format!(
                "{} fired inside recovery ({}) and the open went on",
                a.kind, a.what
            ),
        ))
    }

    /// After an open that failed with `e`: whether `e` reports the rotten log group (log
    /// corruption at its LSN); then the bit is flipped back (a restore of the log) and
    /// counted, for the same cycle to be opened again.
    pub(crate) fn log_rot_reported(&mut self, e: &Error, inj: &Injector) -> Result<bool> {
        let Some(rot) = self.log_rot.take_if(|r| r.reported_by(e)) else {
            return Ok(false);
        };
        inj.undo_log_rot(&rot)?;
        let c = self.count(rot.armed.kind);
        c.detected_at_recovery += 1;
        c.restored += 1;
        Ok(true)
    }

    /// After an open that succeeded: the finding if a log group was left rotten (recovery read
    /// past it, or took it for a torn tail).
    pub(crate) fn log_rot_unreported(&mut self) -> Option<Finding> {
        let rot = self.log_rot.take()?;
        self.count(rot.armed.kind).unreported += 1;
        Some(unreported(
            format!("recovery refuses the log as corrupt at LSN {}", rot.lsn),
            format!(
                "the open succeeded over a flipped bit (log sector {}, byte {}, bit {}) in the \
                 group at LSN {}, which a later group vouches for",
                rot.at.0, rot.at.1, rot.at.2, rot.lsn
            ),
        ))
    }

    /// After an open without a cut during its recovery: the rotten superblock copy must be
    /// in the recovery's report (`damage`), the finding if not. The open's checkpoint wrote
    /// both copies: the damage is gone either way.
    pub(crate) fn superblock_reported(&mut self, damage: Option<&str>) -> Option<Finding> {
        let (sector, a) = self.superblock.take()?;
        let c = self.count(a.kind);
        if damage.is_some_and(|d| d.contains(&format!("superblock copy {sector} "))) {
            c.detected_at_recovery += 1;
            return None;
        }
        c.unreported += 1;
        Some(unreported(
            format!("recovery reports superblock copy {sector} damaged"),
            format!(
                "{} ({}) went unreported: {}",
                a.kind,
                a.what,
                damage.unwrap_or("no damage reported")
            ),
        ))
    }

    /// A superblock copy was (or may have been) written since the damage: it is gone.
    pub(crate) fn superblock_unchecked(&mut self) {
        self.superblock = None;
    }

    /// Whether a lost write explains a wrong value read while running (`w`): the key was on a
    /// page it hit (in the image kept or the one lost), or its lookup passed through a page it
    /// reached, when it was read or now (`db`, when a database is open). Counted as
    /// undetectable.
    pub(crate) fn explains_wrong(&mut self, db: Option<&Db>, w: &WrongRead) -> bool {
        let hit = self.reached(db, &w.table, &w.key)
            || w.pages.iter().any(|p| self.lost.pages.contains(p));
        if hit {
            self.count(FaultKind::LostWrite).undetectable += 1;
        }
        hit
    }

    /// Counts how a cycle armed with `kind` was verified.
    pub(crate) fn verified(&mut self, kind: FaultKind, whole: bool) {
        let c = self.count(kind);
        if whole {
            c.checked += 1;
        } else {
            c.unverified += 1;
        }
    }

    /// Whether a lost write reached `key` of `table`: the key, or the table's name (a catalog
    /// entry: the table's root, or its very existence), was on a leaf whose write was lost, or
    /// its lookup (`db`, when a database is open) passes through a page a lost write reached.
    fn reached(&self, db: Option<&Db>, table: &str, key: &[u8]) -> bool {
        let keys = &self.lost.keys;
        let spanned = || {
            self.lost
                .spans
                .iter()
                .any(|(lo, hi)| (lo.as_slice()..=hi.as_slice()).contains(&key))
        };
        (!table.is_empty() && (keys.contains(key) || keys.contains(table.as_bytes()) || spanned()))
            || db.is_some_and(|db| {
                db.key_pages(table, key)
                    .iter()
                    .any(|p| self.lost.pages.contains(p))
            })
    }

    /// Whether a lost write is outstanding.
    pub(crate) fn lost_write(&self) -> bool {
        self.damage.values().any(|d| d.kind == FaultKind::LostWrite)
    }

    /// Pages recovery repaired while damage was outstanding.
    pub(crate) fn repaired(&mut self, pages: u64) {
        if let (Some(kind), false) = (self.latest, self.damage.is_empty()) {
            self.count(kind).repaired += pages;
        }
    }

    /// The devices were replaced: no damage is outstanding.
    pub(crate) fn reset(&mut self) {
        self.damage.clear();
        self.superblock = None;
        self.log_rot = None;
        self.lost = Reach::default();
    }
}

/// The finding of a failure nobody heard of.
fn unreported(expected: String, found: String) -> Finding {
    Finding {
        kind: FindingKind::Unreported,
        table: String::new(),
        key: String::new(),
        txn: None,
        expected,
        found,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pagoda_device::mem::MemDevice;
    use pagoda_device::DeviceRef;
    use pagoda_engine::DbOptions;
    use std::sync::Arc;

    fn finding(key: &str) -> Finding {
        crate::oracle::note(FindingKind::LostCommit, format!("key {key}"))
    }

    #[test]
    fn a_lost_write_excuses_only_findings_on_keys_it_explains() {
        let mem = |mb: u64| -> DeviceRef { Arc::new(MemDevice::with_capacity(mb << 20).unwrap()) };
        let db = Db::open(DbOptions::with_devices(mem(64), mem(8)).page_size(4096)).unwrap();
        db.create_table("t").unwrap();
        let key = |i: u32| format!("key{i:05}").into_bytes();
        let tx = db.begin_write().unwrap();
        let mut t = tx.open_table("t").unwrap();
        for i in 0..3000 {
            t.put(&key(i), &[7u8; 100]).unwrap();
        }
        drop(t);
        tx.commit().unwrap();
        let (a, b, c) = (key(10), key(2990), key(1500));
        let leaf = |k: &[u8]| *db.key_pages("t", k).last().unwrap();
        assert_ne!(leaf(&a), leaf(&b), "the keys must sit in different leaves");
        let mut ledger = Ledger::default();
        // Written again since: what the lost write dropped stays lost all the same.
        ledger.lost.pages.insert(leaf(&a));
        // `c` was on a page whose write was lost, wherever redo has moved it since.
        ledger.lost.keys.insert(c.clone());
        // A catalog leaf with table `u` lost its write: `u`'s root (or existence) is stale.
        ledger.lost.keys.insert(b"u".to_vec());
        // A stale internal page routed 2000..=2100: a row under it may sit on a leaf neither
        // of its images names.
        ledger.lost.spans.push((key(2000), key(2100)));
        let d = key(2100);
        let mut v = Verdict::default();
        for (t, k) in [("t", &a), ("t", &b), ("t", &c), ("u", &b), ("t", &d)] {
            v.findings.push(finding(&String::from_utf8_lossy(k)));
            v.keys.push((t.into(), k.to_vec()));
        }
        assert!(ledger.excuse_lost(&db, &mut v, &[]));
        assert_eq!(
            v.findings,
            vec![finding("key02990")],
            "only b's finding in t stays"
        );
        assert_eq!(ledger.counts["lost-write"].undetectable, 4);
        // Without lost-write damage nothing is excused.
        let mut none = Ledger::default();
        let mut v = Verdict::default();
        v.findings.push(finding("key00010"));
        v.keys.push(("t".into(), a.clone()));
        assert!(!none.excuse_lost(&db, &mut v, &[]));
        assert_eq!(v.findings.len(), 1);
    }
}
