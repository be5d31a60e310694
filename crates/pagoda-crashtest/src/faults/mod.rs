//! Faults beyond power cuts (`--faults`): in a seeded share of the cycles, one fault is armed
//! on the data or log device at the start of the workload, through a
//! [`pagoda_device::fault::FaultDevice`] under the power switch: flipped bits (on the medium or
//! on reads), failed reads or writes, a write that lands on another page, a flush that fails
//! and loses what it should have made durable, a full device. The cycle then runs to its cut
//! as usual, and the fault is disarmed before the next open (damage on the medium stays).
//!
//! What must happen (`docs/failure-model.md`): a wrong value is never returned (the workers
//! check every value they read); a device failure reaches the caller as a device error and fails
//! the database at once; damage is repaired at recovery or reported as corruption, by the check
//! that catches it; no acknowledged commit is lost. The exception is a lost write (`lost-write`;
//! also the other half of a misdirected write): the page keeps an older, intact version, which
//! no checksum can see once the log no longer covers it. What follows one is counted as
//! undetectable, not as a failure, and the database is re-created.

mod arm;
mod logrot;

pub(crate) use logrot::LogRot;
use pagoda_device::fault::{Fault, FaultDevice, Op};
use pagoda_device::{BlockDevice, DeviceRef, WriteHints, SECTOR_SIZE};
use pagoda_engine::{fault::Sabotage, Error, Result};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// A bit of a written page flips, on the medium (persistent) or on every read (transient).
    Bitrot,
    /// Reads of the data or log device fail with an I/O error (once, or until the fault is
    /// disarmed after the next recovery; the log is read only by recovery).
    EioRead,
    /// One write to the data or log device fails with an I/O error.
    EioWrite,
    /// The writes of one page also land on another page, overwriting it (the half of a
    /// misdirected write that a check can catch; the other half is `LostWrite`).
    Misdirected,
    /// The writes of one page are acknowledged but never reach it: it keeps its old version
    /// (undetectable by design, counted apart).
    LostWrite,
    /// One flush of the data or log device fails, and the writes it should have made durable
    /// are gone (Linux drops the dirty pages after a failed fsync).
    FsyncFail,
    /// Every write to the data or log device fails with "no space left".
    Enospc,
    /// Every read, write or flush of the data or log device is delayed (a slow or busy
    /// device): nothing fails, and nothing may be lost or go wrong for it.
    Slow,
}

impl FaultKind {
    /// Whether the fault fails requests (then it stays armed through the next recovery,
    /// which must report it too); the others damage the medium, which recovery meets anyway.
    pub fn fails_requests(self) -> bool {
        matches!(
            self,
            Self::EioRead | Self::EioWrite | Self::FsyncFail | Self::Enospc
        )
    }

    /// Whether the fault concerns data pages only (it is never armed on the log).
    pub fn data_only(self) -> bool {
        matches!(self, Self::Misdirected | Self::LostWrite)
    }

    /// Whether nothing is there to detect (a slow device fails nothing).
    pub fn silent(self) -> bool {
        self == Self::Slow
    }

    /// Every kind.
    pub const ALL: [FaultKind; 8] = [
        Self::Bitrot,
        Self::EioRead,
        Self::EioWrite,
        Self::Misdirected,
        Self::LostWrite,
        Self::FsyncFail,
        Self::Enospc,
        Self::Slow,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bitrot => "bitrot",
            Self::EioRead => "eio-read",
            Self::EioWrite => "eio-write",
            Self::Misdirected => "misdirected",
            Self::LostWrite => "lost-write",
            Self::FsyncFail => "fsync-fail",
            Self::Enospc => "enospc",
            Self::Slow => "slow",
        }
    }

    /// Parses a comma-separated list (`all`: every kind).
    pub fn parse_list(s: &str) -> Result<Vec<FaultKind>> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "all" {
                out.extend(Self::ALL);
            } else {
                out.push(part.parse()?);
            }
        }
        if out.is_empty() {
            return Err(Error::config(format!(
                "--faults needs at least one fault: {} or all",
                Self::names()
            )));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }
}

impl FromStr for FaultKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                Error::config(format!(
                    "no fault named '{s}': use one of {} (comma-separated), or all",
                    Self::names()
                ))
            })
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The faults whose detection sabotage `s` removes, if it concerns faults.
pub(crate) fn detecting(s: Sabotage) -> Option<&'static [FaultKind]> {
    match s {
        Sabotage::TrustPageChecksum | Sabotage::LogDamageAsTail => Some(&[FaultKind::Bitrot]),
        Sabotage::TrustPageId => Some(&[FaultKind::Misdirected]),
        Sabotage::RetryFailedLogSync | Sabotage::WriteOutAfterFailure => {
            Some(&[FaultKind::FsyncFail])
        }
        Sabotage::IgnoreWriteError | Sabotage::IgnoreLogWriteError => {
            Some(&[FaultKind::EioWrite, FaultKind::Enospc])
        }
        Sabotage::IgnoreReadError => Some(&[FaultKind::EioRead]),
        Sabotage::FlashWriteAfterFailure => Some(&[
            FaultKind::EioWrite,
            FaultKind::EioRead,
            FaultKind::FsyncFail,
            FaultKind::Enospc,
        ]),
        _ => None,
    }
}

/// What the faults of one kind did over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FaultCounts {
    /// Cycles in which the fault was armed.
    pub injected: u64,
    /// Of those, cycles in which it acted: a request failed, a flipped bit was read or put on
    /// the medium, a write was misdirected.
    pub fired: u64,
    /// The engine reported it: a device error or detected corruption reached a caller, failed
    /// the database, or stopped a recovery.
    pub detected: u64,
    /// Damaged pages that recovery repaired (from the double-write copy or the log) while the
    /// damage was outstanding.
    pub repaired: u64,
    /// Databases re-created because recovery or a read reported the damage.
    pub resets: u64,
    /// Times the damage was undone after recovery or a read reported it (as restoring the
    /// pages from a backup would), and the same cycle opened again and verified.
    pub restored: u64,
    /// Recoveries (after a cycle with the fault) inside which it acted: it stays armed
    /// through the next open.
    pub at_recovery: u64,
    /// Reports at recovery: opens that failed with its error (then retried on a healthy
    /// device), and superblock copies it rotted that the next recovery reported.
    pub detected_at_recovery: u64,
    /// Cycles armed and cycles fired, by where the fault acted (`log write`, `data read`,
    /// `data medium`, ...).
    pub targets: BTreeMap<String, [u64; 2]>,
    /// Cycles with the fault whose workload was then verified whole.
    pub checked: u64,
    /// Cycles with the fault whose workload was verified only in part (damaged pages hid some
    /// outcomes) or not at all (recovery refused the database).
    pub unverified: u64,
    /// A failed request that fired and that no caller saw: the engine went on as if it had
    /// worked. Must be 0.
    pub unreported: u64,
    /// Findings after a lost write, which leaves an older intact version where the page should
    /// be: undetectable by design, counted here, not as failures.
    pub undetectable: u64,
}

/// How to undo damage a fault left on the medium (what restoring the page from a backup
/// does), once it has been detected.
#[derive(Clone, Debug)]
pub(crate) enum Repair {
    /// Flip the rotten bit back.
    Flip { sector: u64, byte: usize, bit: u8 },
    /// Write these contents to the sector.
    Write { sector: u64, bytes: Vec<u8> },
}

/// `c`'s fire rates by target, e.g. `data write 12/30, log write 10/31` (fired/armed).
pub fn by_target(c: &FaultCounts) -> String {
    c.targets
        .iter()
        .map(|(t, [armed, fired])| format!("{t} {fired}/{armed}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `text` reports a flash cache slot (`... flash cache slot S (... byte B)`) whose page
/// image, `page_bytes` long from byte B of the cache device, holds byte `at`.
pub(crate) fn names_slot_at(text: &str, at: u64, page_bytes: u64) -> bool {
    text.match_indices("flash cache slot ").any(|(i, _)| {
        let rest = &text[i..];
        rest.find("byte ")
            .and_then(|b| {
                let n = &rest[b + 5..];
                let end = n.find(|c: char| !c.is_ascii_digit()).unwrap_or(n.len());
                n[..end].parse::<u64>().ok()
            })
            .is_some_and(|start| (start..start + page_bytes).contains(&at))
    })
}

/// The fault armed in one cycle.
#[derive(Clone, Debug)]
pub(crate) struct Armed {
    pub kind: FaultKind,
    /// What was armed where, for reports.
    pub what: String,
    /// The fault device it was armed on (its name in the tags).
    pub dev: &'static str,
    /// The tag number of the first error it can inject (see [`FaultDevice::tag`]).
    pub first_tag: u64,
    /// Requests that injected faults acted on, on data and log, before arming.
    base: u64,
    /// The fault put damage on the medium at once (persistent bit rot).
    pub on_medium: bool,
    /// The data pages the fault damages on the medium (or leaves stale) when it fires.
    pub pages: Vec<u64>,
    /// How to undo what it did to the medium (bit rot; the rest is learnt when it fired).
    pub repairs: Vec<Repair>,
    /// Where it acts: the device and the request kind (`log write`, `data medium`, ...).
    pub target: String,
    /// The superblock copy (data device sector) whose bit rots, if that is the target.
    pub superblock: Option<u64>,
    /// A fault applied only after the workload (the superblock's rot).
    deferred: Option<Fault>,
    /// Bit rot of a log group, applied after the workload: the random choice of group, byte
    /// and bit (see [`LogRot::apply`]).
    pub log_rot: Option<u64>,
    /// The byte of the flash cache device whose bit flips on every read (bit rot there): a
    /// report names the slot holding it.
    pub flash_at: Option<u64>,
}

/// What lost writes reached: a finding on these keys or on a lookup through these pages may
/// be theirs, for the rest of the database's life.
#[derive(Debug, Default)]
pub(crate) struct Reach {
    /// The pages whose writes were lost, and the children either image of an internal one
    /// names (the subtree a stale pointer hides or a lost one would have shown).
    pub(crate) pages: BTreeSet<u64>,
    /// The keys on the leaf pages whose writes were lost, in the image kept or in the one
    /// lost: redo can carry a stale page's rows to other pages (a merge).
    pub(crate) keys: BTreeSet<Vec<u8>>,
    /// From the first to the last separator of each image of an internal page whose write
    /// was lost (both ends included): rows under it may have moved to pages neither image
    /// names (a child split after the loss).
    pub(crate) spans: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The fault devices of a run with faults, around the data and log devices.
pub(crate) struct Injector {
    kinds: Vec<FaultKind>,
    chance: f64,
    data: Arc<FaultDevice>,
    log: Arc<FaultDevice>,
    /// The flash cache's device, when the run has a flash cache.
    flash: Option<Arc<FaultDevice>>,
    /// Sectors of the flash cache device written so far (the targets of its bit rot).
    flash_sectors: Mutex<BTreeSet<u64>>,
    /// Sectors per page.
    spp: u64,
    /// The first page after the superblock area (see `learn_pages`).
    first_page: u64,
    /// Pages of the data device written so far (the targets of bit rot and misdirects).
    pages: Mutex<BTreeSet<u64>>,
    /// Superblock copies (sectors 0 and 1) written since [`Injector::take_sb_written`].
    sb_written: Mutex<BTreeSet<u64>>,
}

const OPS: [Op; 4] = [Op::Read, Op::Write, Op::Flush, Op::Trim];

/// The share of bit rot aimed at a superblock copy.
const SUPERBLOCK_SHARE: f64 = 0.15;

/// Reads of the log by one recovery, about (the sweep in `tests/recovery_sweep.rs` counts 16).
const LOG_READS: u64 = 16;

impl Injector {
    /// Wraps `data` and `log`; returns the devices to use in their place.
    pub(crate) fn new(
        kinds: &[FaultKind],
        chance: f64,
        page_size: usize,
        data: DeviceRef,
        log: DeviceRef,
    ) -> (Self, DeviceRef, DeviceRef) {
        let data = Arc::new(FaultDevice::new(data).named("data"));
        let log = Arc::new(FaultDevice::new(log).named("log"));
        data.record(true);
        let (d, l): (DeviceRef, DeviceRef) = (data.clone(), log.clone());
        let me = Self {
            kinds: kinds.to_vec(),
            chance,
            data,
            log,
            flash: None,
            flash_sectors: Mutex::new(BTreeSet::new()),
            spp: (page_size / SECTOR_SIZE).max(1) as u64,
            first_page: pagoda_engine::format::HEADER_BYTES.div_ceil(page_size as u64),
            pages: Mutex::new(BTreeSet::new()),
            sb_written: Mutex::new(BTreeSet::new()),
        };
        (me, d, l)
    }

    /// Wraps the flash cache's device `flash` too; returns the device to use in its place.
    pub(crate) fn wrap_flash(&mut self, flash: DeviceRef) -> DeviceRef {
        let f = Arc::new(FaultDevice::new(flash).named("flash"));
        f.record(true);
        self.flash = Some(f.clone());
        f
    }

    /// The data, log and flash cache (if any) devices beneath the faults.
    pub(crate) fn raw(&self) -> (DeviceRef, DeviceRef, Option<DeviceRef>) {
        let flash = self.flash.as_ref().map(|f| f.inner().clone());
        (self.data.inner().clone(), self.log.inner().clone(), flash)
    }

    /// Bytes per page.
    pub(crate) fn page_bytes(&self) -> u64 {
        self.spp * SECTOR_SIZE as u64
    }

    /// The names of the devices faults can be armed on.
    fn names(&self) -> Vec<&'static str> {
        let mut v = vec!["data", "log"];
        if self.flash.is_some() {
            v.push("flash");
        }
        v
    }

    /// The fault device named `dev`.
    fn dev(&self, dev: &str) -> &Arc<FaultDevice> {
        match (dev, &self.flash) {
            ("log", _) => &self.log,
            ("flash", Some(f)) => f,
            _ => &self.data,
        }
    }

    /// Requests that injected faults acted on so far on the device named `dev`.
    fn acted_so_far(&self, dev: &str) -> u64 {
        let d = self.dev(dev);
        OPS.iter().map(|&op| d.injected(op)).sum()
    }

    /// Takes note of the flash cache device's sectors written since the last call.
    fn learn_flash_sectors(&self) {
        if let Some(f) = &self.flash {
            let mut s = self.flash_sectors.lock();
            for r in f.take_records() {
                if r.op == Op::Write && !r.failed {
                    s.extend(r.sector..r.sector + r.sectors);
                }
            }
        }
    }

    /// Takes note of the data pages written since the last call, and returns them. The
    /// superblock area is no target yet: with its newest copy damaged, recovery falls back to
    /// the older copy, whose redo start the log may no longer hold, and refuses the log
    /// (detected, but by the log's check; docs/failure-model.md).
    pub(crate) fn learn_pages(&self) -> BTreeSet<u64> {
        let mut pages = self.pages.lock();
        let mut written = BTreeSet::new();
        for r in self.data.take_records() {
            if r.op != Op::Write || r.failed {
                continue;
            }
            self.sb_written
                .lock()
                .extend((r.sector..r.sector + r.sectors).filter(|&x| x < 2));
            let first = r.sector.div_ceil(self.spp).max(self.first_page);
            let end = (r.sector + r.sectors) / self.spp;
            written.extend(first..end);
        }
        pages.extend(&written);
        written
    }

    /// Applies `a`'s fault that waits for the workload's end (a superblock copy's rot).
    pub(crate) fn rot_superblock(&self, a: &Armed) -> Result<()> {
        if let Some(f) = &a.deferred {
            self.data.inject(f.clone())?;
        }
        Ok(())
    }

    /// Applies `a`'s log rot, if any, while the power is off; `None` when it found no group to
    /// aim at.
    pub(crate) fn rot_log(&self, a: &Armed) -> Result<Option<LogRot>> {
        match a.log_rot {
            Some(pick) => LogRot::apply(self.data.inner(), self.log.inner(), pick, a),
            None => Ok(None),
        }
    }

    /// Undoes a log rot that recovery reported.
    pub(crate) fn undo_log_rot(&self, r: &LogRot) -> Result<()> {
        r.undo(self.log.inner())
    }

    /// The superblock copies written since the last call, as far as [`Injector::learn_pages`]
    /// has learnt.
    pub(crate) fn take_sb_written(&self) -> BTreeSet<u64> {
        std::mem::take(&mut *self.sb_written.lock())
    }

    fn random_page(&self, rng: &mut SmallRng) -> Option<u64> {
        let pages = self.pages.lock();
        if pages.is_empty() {
            return None;
        }
        pages.iter().nth(rng.gen_range(0..pages.len())).copied()
    }

    /// What the misdirected and lost writes since the last call did to the medium: what the
    /// lost writes reached, and how to undo the stray copies (the sectors they overwrote given
    /// back what they held).
    pub(crate) fn take_redirected(&self) -> (Reach, Vec<Repair>) {
        let mut reach = Reach::default();
        let mut repairs = Vec::new();
        let lost = self.data.take_lost();
        let page_bytes = self.spp as usize * SECTOR_SIZE;
        // Sectors of one page arrive together and in order (one write covers the page).
        for chunk in lost.chunks(self.spp as usize) {
            let pid = chunk[0].sector / self.spp;
            reach.pages.insert(pid);
            for image in [
                chunk
                    .iter()
                    .flat_map(|l| l.kept.iter().copied())
                    .collect::<Vec<u8>>(),
                chunk.iter().flat_map(|l| l.lost.iter().copied()).collect(),
            ] {
                if image.len() != page_bytes {
                    continue;
                }
                match pagoda_engine::format::decode_page(&image, pid).map(|p| p.node) {
                    Ok(pagoda_engine::format::Node::Leaf(es)) => {
                        reach.keys.extend(es.into_iter().map(|(k, _)| k.to_vec()));
                    }
                    Ok(pagoda_engine::format::Node::Internal { children, keys }) => {
                        reach.pages.extend(children);
                        if let (Some(lo), Some(hi)) = (keys.first(), keys.last()) {
                            reach.spans.push((lo.to_vec(), hi.to_vec()));
                        }
                    }
                    _ => {}
                }
            }
        }
        // A lost write is not undone: after it the engine may have read the stale page back
        // and built on it, so no image it wrote is known to be right.
        // The first overwrite of a sector holds its original contents: undo in reverse.
        let over = self.data.take_overwritten();
        repairs.extend(
            over.into_iter()
                .rev()
                .map(|(sector, bytes)| Repair::Write { sector, bytes }),
        );
        (reach, repairs)
    }

    /// Undoes damage on the data device (no database is open).
    pub(crate) fn repair(&self, repairs: &[Repair]) -> Result<()> {
        for r in repairs {
            match r {
                Repair::Flip { sector, byte, bit } => {
                    let mut b = vec![0u8; SECTOR_SIZE];
                    self.data.read(*sector, &mut b)?;
                    b[*byte] ^= 1 << bit;
                    self.data.write(*sector, &b, WriteHints::default())?;
                }
                Repair::Write { sector, bytes } => {
                    self.data.write(*sector, bytes, WriteHints::default())?;
                }
            }
        }
        Ok(self.data.flush()?)
    }

    /// Whether the armed fault acted during the workload.
    pub(crate) fn fired(&self, a: &Armed) -> bool {
        a.on_medium || self.acted_so_far(a.dev) > a.base
    }

    /// Errors injected so far by the device `a` was armed on.
    pub(crate) fn tags(&self, a: &Armed) -> u64 {
        self.dev(a.dev).failures()
    }

    /// Whether `text` carries the tag of an error that `a` injected.
    pub(crate) fn carries(&self, a: &Armed, text: &str) -> bool {
        crate::met::carries_tag(text, a.dev, a.first_tag)
    }

    /// Disarms the faults of the device named `dev` (damage on the medium stays).
    pub(crate) fn disarm_dev(&self, dev: &str) {
        self.dev(dev).clear();
    }

    /// Disarms every fault (damage on the medium stays).
    pub(crate) fn disarm(&self) {
        for d in self.names() {
            self.dev(d).clear();
        }
    }
}
