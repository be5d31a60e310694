//! Arming the faults of a cycle: which kind, on which device, where and when.

use super::{Armed, FaultKind, Injector, Repair, LOG_READS, SUPERBLOCK_SHARE};
use pagoda_device::fault::{Failure, Fault, Op};
use pagoda_device::SECTOR_SIZE;
use pagoda_engine::Result;
use rand::rngs::SmallRng;
use rand::Rng;

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
    /// concerns data pages is armed on the data device only).
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
        let on_log = name == "log";
        let dev = self.dev(name);
        let mut flash_at = None;
        let base = self.acted_so_far(name);
        let after = rng.gen_range(0..(max_ops / 4).max(1));
        let fail = |op: Op, after: u64, times: u64, failure: Failure| Fault::Fail {
            op,
            after,
            times,
            failure,
        };
        let mut damaged = Vec::new();
        let mut repairs = Vec::new();
        let mut superblock = None;
        let (fault, dev, what) = match kind {
            FaultKind::EioRead => {
                let once = rng.gen_bool(0.5);
                // The log is read at recovery only (a few dozen reads): its fault stays armed
                // through the next open and fails one of them.
                let after = if on_log {
                    rng.gen_range(0..LOG_READS)
                } else {
                    after
                };
                let f = fail(
                    Op::Read,
                    after,
                    if once { 1 } else { u64::MAX },
                    Failure::Eio,
                );
                let what = if once {
                    format!("{name} read #{after} fails")
                } else {
                    format!("{name} reads fail from #{after} on")
                };
                (f, dev, what)
            }
            FaultKind::EioWrite => {
                let f = fail(Op::Write, after, 1, Failure::Eio);
                (f, dev, format!("{name} write #{after} fails"))
            }
            FaultKind::FsyncFail => {
                let after = rng.gen_range(0..(max_ops / 16).max(1));
                let f = fail(Op::Flush, after, 1, Failure::EioLosingWrites);
                (
                    f,
                    dev,
                    format!("{name} flush #{after} fails, losing its writes"),
                )
            }
            FaultKind::Enospc => {
                let f = fail(Op::Write, after, u64::MAX, Failure::Full);
                (
                    f,
                    dev,
                    format!("{name} writes from #{after} on find the device full"),
                )
            }
            FaultKind::Slow => {
                let op = [Op::Read, Op::Write, Op::Flush][rng.gen_range(0..3)];
                let by = std::time::Duration::from_micros(rng.gen_range(50..=300));
                let f = Fault::Delay { op, by };
                let what = format!("every {name} {op:?} is delayed by {} us", by.as_micros());
                (f, dev, what)
            }
            FaultKind::Bitrot if on_log => {
                // The log's groups change until the cut: the bit flips after it.
                return Ok(Some(Armed {
                    kind,
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
                }));
            }
            FaultKind::Bitrot if name == "flash" => {
                // On reads only: a cached copy that fails its checksum must be read from the
                // data device, or the read fails naming the slot.
                let sectors = self.flash_sectors.lock();
                if sectors.is_empty() {
                    return Ok(None);
                }
                let sector = *sectors
                    .iter()
                    .nth(rng.gen_range(0..sectors.len()))
                    .unwrap_or(&0);
                let (byte, bit) = (rng.gen_range(0..SECTOR_SIZE), rng.gen_range(0..8u8));
                flash_at = Some(sector * SECTOR_SIZE as u64 + byte as u64);
                let f = Fault::FlipBit {
                    sector,
                    byte,
                    bit,
                    persistent: false,
                };
                let what =
                    format!("bit {bit} of byte {byte} of flash sector {sector} flips on reads");
                (f, dev, what)
            }
            FaultKind::Bitrot if rng.gen_bool(SUPERBLOCK_SHARE) => {
                // A copy of the superblock: recovery falls back to the other copy and says so.
                let sector = rng.gen_range(0..2);
                let byte = rng.gen_range(0..pagoda_engine::format::SB_BODY + 4);
                let bit = rng.gen_range(0..8u8);
                superblock = Some(sector);
                let f = Fault::FlipBit {
                    sector,
                    byte,
                    bit,
                    persistent: true,
                };
                let what = format!("bit {bit} of byte {byte} of superblock copy {sector} flips");
                (f, &self.data, what)
            }
            FaultKind::Bitrot => {
                let Some(page) = self.random_page(rng) else {
                    return Ok(None);
                };
                let sector = page * self.spp + rng.gen_range(0..self.spp);
                let (byte, bit) = (rng.gen_range(0..SECTOR_SIZE), rng.gen_range(0..8u8));
                let persistent = rng.gen_bool(0.5);
                let f = Fault::FlipBit {
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
                damaged = vec![page];
                repairs = vec![Repair::Flip { sector, byte, bit }];
                (f, &self.data, what)
            }
            FaultKind::Misdirected | FaultKind::LostWrite => {
                let (Some(from), Some(to)) = (self.random_page(rng), self.random_page(rng)) else {
                    return Ok(None);
                };
                if from == to {
                    return Ok(None);
                }
                for i in 0..self.spp {
                    let (from, to) = (from * self.spp + i, to * self.spp + i);
                    self.data.inject(match kind {
                        FaultKind::Misdirected => Fault::Stray { from, to },
                        _ => Fault::LoseWrite { sector: from },
                    })?;
                }
                let what = match kind {
                    FaultKind::Misdirected => {
                        format!("writes of data page {from} also land on page {to}")
                    }
                    _ => format!("writes of data page {from} are lost"),
                };
                return Ok(Some(Armed {
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
                    pages: vec![if kind == FaultKind::Misdirected {
                        to
                    } else {
                        from
                    }],
                    repairs: Vec::new(),
                }));
            }
        };
        let on_medium = matches!(
            fault,
            Fault::FlipBit {
                persistent: true,
                ..
            }
        );
        let first_tag = dev.failures();
        let dev_name = name;
        let target = match &fault {
            Fault::Fail { op, .. } | Fault::Delay { op, .. } => {
                format!("{dev_name} {}", format!("{op:?}").to_lowercase())
            }
            Fault::FlipBit { .. } if superblock.is_some() => "data superblock".into(),
            Fault::FlipBit {
                persistent: true, ..
            } => format!("{dev_name} medium"),
            _ => format!("{dev_name} read"),
        };
        // A superblock copy rots while the power is off, after the cut (the workload's
        // checkpoints would write over it): `rot_superblock` applies it then.
        let deferred = superblock.is_some().then(|| fault.clone());
        if deferred.is_none() {
            dev.inject(fault)?;
        }
        Ok(Some(Armed {
            deferred,
            log_rot: None,
            flash_at,
            kind,
            what,
            target,
            superblock,
            dev: dev_name,
            first_tag,
            base,
            on_medium,
            pages: damaged,
            repairs,
        }))
    }
}
