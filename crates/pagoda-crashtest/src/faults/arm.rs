//! Arming the faults of a cycle: which kind, on which device, where and when.

use super::{Armed, FaultKind, Injector, Repair, LOG_READS, SUPERBLOCK_SHARE};
use pagoda_device::fault::{Failure, Fault, FaultDevice, Op};
use pagoda_device::SECTOR_SIZE;
use pagoda_engine::Result;
use rand::rngs::SmallRng;
use rand::Rng;
use std::sync::Arc;

impl Injector {
    /// Arms faults for the coming workload in a share of the cycles (`max_ops`: the largest
    /// number of operations before the cut): one, and in a quarter of those cycles a second
    /// one on another device (each device's errors carry its own tags).
    pub(crate) fn arm(&self, rng: &mut SmallRng, max_ops: u64) -> Result<Vec<Armed>> {
        self.learn_flash_sectors();
        if !rng.gen_bool(self.chance) {
            return Ok(Vec::new());
        }
        let mut out: Vec<Armed> = self.arm_one(rng, max_ops, None)?.into_iter().collect();
        if let (Some(first), true) = (out.first(), rng.gen_bool(0.25)) {
            let others: Vec<&'static str> = self
                .names()
                .into_iter()
                .filter(|d| *d != first.dev)
                .collect();
            let other = match others.len() {
                1 => others[0],
                n => others[rng.gen_range(0..n)],
            };
            out.extend(self.arm_one(rng, max_ops, Some(other))?);
        }
        Ok(out)
    }

    /// Arms one fault, on the device named `on` if given, else on one drawn (a kind that only
    /// concerns data pages is armed on the data device only). The draws keep one order for a
    /// seed, so a cycle replays.
    fn arm_one(
        &self,
        rng: &mut SmallRng,
        max_ops: u64,
        on: Option<&'static str>,
    ) -> Result<Option<Armed>> {
        let kind = self.kinds[rng.gen_range(0..self.kinds.len())];
        let name = match on {
            Some(d) => d,
            None if self.flash.is_some() => ["data", "log", "flash"][rng.gen_range(0..3)],
            None if rng.gen_bool(0.5) => "log",
            None => "data",
        };
        if name != "data" && on.is_some() && kind.data_only() {
            return Ok(None);
        }
        let name = if kind.data_only() { "data" } else { name };
        let base = self.acted_so_far(name);
        let after = rng.gen_range(0..(max_ops / 4).max(1));
        let drawn = match kind {
            FaultKind::Bitrot if name == "log" => return Ok(Some(self.log_rot(rng, base))),
            FaultKind::Bitrot => self.bitrot(rng, name),
            FaultKind::Misdirected | FaultKind::LostWrite => {
                return self.stray_or_lost(rng, kind, base)
            }
            _ => Some(self.request_fault(rng, kind, name, after, max_ops)),
        };
        match drawn {
            Some(d) => self.arm_drawn(kind, name, base, d).map(Some),
            None => Ok(None),
        }
    }

    /// A fault of the requests to device `name` (`after` of them succeed first): an I/O
    /// error, a failed flush that loses its writes, a full device, or a delay.
    fn request_fault(
        &self,
        rng: &mut SmallRng,
        kind: FaultKind,
        name: &'static str,
        after: u64,
        max_ops: u64,
    ) -> Drawn<'_> {
        let fail = |op: Op, after: u64, times: u64, failure: Failure| Fault::Fail {
            op,
            after,
            times,
            failure,
        };
        let (fault, what) = match kind {
            FaultKind::EioRead => {
                let once = rng.gen_bool(0.5);
                // The log is read at recovery only (a few dozen reads): its fault stays armed
                // through the next open and fails one of them.
                let after = if name == "log" {
                    rng.gen_range(0..LOG_READS)
                } else {
                    after
                };
                let times = if once { 1 } else { u64::MAX };
                let what = if once {
                    format!("{name} read #{after} fails")
                } else {
                    format!("{name} reads fail from #{after} on")
                };
                (fail(Op::Read, after, times, Failure::Eio), what)
            }
            FaultKind::EioWrite => (
                fail(Op::Write, after, 1, Failure::Eio),
                format!("{name} write #{after} fails"),
            ),
            FaultKind::FsyncFail => {
                let after = rng.gen_range(0..(max_ops / 16).max(1));
                (
                    fail(Op::Flush, after, 1, Failure::EioLosingWrites),
                    format!("{name} flush #{after} fails, losing its writes"),
                )
            }
            FaultKind::Enospc => (
                fail(Op::Write, after, u64::MAX, Failure::Full),
                format!("{name} writes from #{after} on find the device full"),
            ),
            // Slow, and any kind without a request fault of its own.
            _ => {
                let op = [Op::Read, Op::Write, Op::Flush][rng.gen_range(0..3)];
                let by = std::time::Duration::from_micros(rng.gen_range(50..=300));
                let what = format!("every {name} {op:?} is delayed by {} us", by.as_micros());
                (Fault::Delay { op, by }, what)
            }
        };
        Drawn::on(fault, self.dev(name), what)
    }

    /// A bit of a log group flips after the cut (the log's groups change until then), one a
    /// later group vouches for: the next open must report it.
    fn log_rot(&self, rng: &mut SmallRng, base: u64) -> Armed {
        Armed {
            kind: FaultKind::Bitrot,
            what: "a bit of a log group a later group vouches for flips".into(),
            target: "log medium".into(),
            superblock: None,
            deferred: None,
            log_rot: Some(rng.gen()),
            flash_at: None,
            dev: "log",
            first_tag: self.log.failures(),
            base,
            on_medium: false,
            pages: Vec::new(),
            repairs: Vec::new(),
        }
    }

    /// A flipped bit on the flash cache device (on reads), on a superblock copy, or on a
    /// data page (on reads or on the medium); `None` when there is nothing to flip yet.
    fn bitrot(&self, rng: &mut SmallRng, name: &'static str) -> Option<Drawn<'_>> {
        if name == "flash" {
            // On reads only: a cached copy that fails its checksum must be read from the
            // data device, or the read fails naming the slot.
            let sectors = self.flash_sectors.lock();
            if sectors.is_empty() {
                return None;
            }
            let sector = *sectors
                .iter()
                .nth(rng.gen_range(0..sectors.len()))
                .unwrap_or(&0);
            let (byte, bit) = (rng.gen_range(0..SECTOR_SIZE), rng.gen_range(0..8u8));
            let fault = Fault::FlipBit {
                sector,
                byte,
                bit,
                persistent: false,
            };
            let what = format!("bit {bit} of byte {byte} of flash sector {sector} flips on reads");
            let mut d = Drawn::on(fault, self.dev(name), what);
            d.flash_at = Some(sector * SECTOR_SIZE as u64 + byte as u64);
            return Some(d);
        }
        if rng.gen_bool(SUPERBLOCK_SHARE) {
            // A copy of the superblock: recovery falls back to the other copy and says so.
            let sector = rng.gen_range(0..2);
            let byte = rng.gen_range(0..pagoda_engine::format::SB_BODY + 4);
            let bit = rng.gen_range(0..8u8);
            let fault = Fault::FlipBit {
                sector,
                byte,
                bit,
                persistent: true,
            };
            let what = format!("bit {bit} of byte {byte} of superblock copy {sector} flips");
            let mut d = Drawn::on(fault, &self.data, what);
            d.superblock = Some(sector);
            return Some(d);
        }
        let page = self.random_page(rng)?;
        let sector = page * self.spp + rng.gen_range(0..self.spp);
        let (byte, bit) = (rng.gen_range(0..SECTOR_SIZE), rng.gen_range(0..8u8));
        let persistent = rng.gen_bool(0.5);
        let fault = Fault::FlipBit {
            sector,
            byte,
            bit,
            persistent,
        };
        let how = if persistent {
            "on the medium"
        } else {
            "on reads"
        };
        let what = format!("bit {bit} of byte {byte} of data sector {sector} flips {how}");
        let mut d = Drawn::on(fault, &self.data, what);
        d.pages = vec![page];
        d.repairs = vec![Repair::Flip { sector, byte, bit }];
        Some(d)
    }

    /// Writes of one data page also land on another (misdirected) or are lost, armed at once
    /// on every sector of the page.
    fn stray_or_lost(
        &self,
        rng: &mut SmallRng,
        kind: FaultKind,
        base: u64,
    ) -> Result<Option<Armed>> {
        let (Some(from), Some(to)) = (self.random_page(rng), self.random_page(rng)) else {
            return Ok(None);
        };
        if from == to {
            return Ok(None);
        }
        let stray = kind == FaultKind::Misdirected;
        for i in 0..self.spp {
            let (from, to) = (from * self.spp + i, to * self.spp + i);
            self.data.inject(if stray {
                Fault::Stray { from, to }
            } else {
                Fault::LoseWrite { sector: from }
            })?;
        }
        let what = if stray {
            format!("writes of data page {from} also land on page {to}")
        } else {
            format!("writes of data page {from} are lost")
        };
        Ok(Some(Armed {
            kind,
            what,
            target: "data write".into(),
            superblock: None,
            deferred: None,
            log_rot: None,
            flash_at: None,
            dev: "data",
            first_tag: self.data.failures(),
            base,
            on_medium: false,
            // The stray copy lands on `to`; a lost write leaves `from` stale.
            pages: vec![if stray { to } else { from }],
            repairs: Vec::new(),
        }))
    }

    /// Arms a drawn fault on its device (a superblock copy's after the cut, by
    /// `rot_superblock`: the workload's checkpoints would write over it).
    fn arm_drawn(
        &self,
        kind: FaultKind,
        name: &'static str,
        base: u64,
        d: Drawn<'_>,
    ) -> Result<Armed> {
        let on_medium = matches!(
            d.fault,
            Fault::FlipBit {
                persistent: true,
                ..
            }
        );
        let first_tag = d.dev.failures();
        let target = match &d.fault {
            Fault::Fail { op, .. } | Fault::Delay { op, .. } => {
                format!("{name} {}", format!("{op:?}").to_lowercase())
            }
            Fault::FlipBit { .. } if d.superblock.is_some() => "data superblock".into(),
            Fault::FlipBit {
                persistent: true, ..
            } => format!("{name} medium"),
            _ => format!("{name} read"),
        };
        let deferred = d.superblock.is_some().then(|| d.fault.clone());
        if deferred.is_none() {
            d.dev.inject(d.fault)?;
        }
        Ok(Armed {
            deferred,
            log_rot: None,
            flash_at: d.flash_at,
            kind,
            what: d.what,
            target,
            superblock: d.superblock,
            dev: name,
            first_tag,
            base,
            on_medium,
            pages: d.pages,
            repairs: d.repairs,
        })
    }
}

/// A fault drawn for a device, before it is armed: the fault, the device it goes on, the
/// report's text, and what it damages (for the ledger).
struct Drawn<'i> {
    fault: Fault,
    dev: &'i Arc<FaultDevice>,
    what: String,
    /// Data pages it damages, and how to undo that.
    pages: Vec<u64>,
    repairs: Vec<Repair>,
    /// The superblock copy it rots (after the cut).
    superblock: Option<u64>,
    /// The flash cache device's byte it flips.
    flash_at: Option<u64>,
}

impl<'i> Drawn<'i> {
    fn on(fault: Fault, dev: &'i Arc<FaultDevice>, what: String) -> Self {
        Self {
            fault,
            dev,
            what,
            pages: Vec::new(),
            repairs: Vec::new(),
            superblock: None,
            flash_at: None,
        }
    }
}
