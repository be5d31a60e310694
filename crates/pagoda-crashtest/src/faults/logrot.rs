//! Bit rot in the log (`bitrot` armed on the log device): one bit of a log group flips while
//! the power is off, after the cut, and the next open must refuse the log as corrupt at that
//! group's LSN. The group is one a later group vouches for (it records that the log was
//! synced past it): damage to a group no later one vouches for looks exactly like the torn
//! tail of a crash and cannot be reported (docs/failure-model.md), so it is not aimed at; a
//! cycle whose log has no vouched group counts the fault as armed but not fired.

use super::Armed;
use pagoda_device::{DeviceRef, WriteHints, SECTOR_SIZE};
use pagoda_engine::inspect::inspect_devices;
use pagoda_engine::Result;

/// A log group's rotten bit, which the next open must report.
#[derive(Clone, Debug)]
pub(crate) struct LogRot {
    /// The group's LSN: the open must refuse the log as corrupt there.
    pub lsn: u64,
    /// The flipped bit: log device sector, byte in it, bit.
    pub at: (u64, usize, u8),
    /// The fault it came from.
    pub armed: Armed,
}

impl LogRot {
    /// Flips a bit of a vouched group of the database on `data` and `log` (raw devices, the
    /// power off), chosen by `pick`; `None` when no group is vouched for.
    pub(crate) fn apply(
        data: &DeviceRef,
        log: &DeviceRef,
        pick: u64,
        armed: &Armed,
    ) -> Result<Option<Self>> {
        let report = inspect_devices(data, log)?;
        let vouched: Vec<_> = report.log_group_list.iter().filter(|g| g.vouched).collect();
        if vouched.is_empty() || report.log_capacity == 0 {
            return Ok(None);
        }
        let g = vouched[(pick % vouched.len() as u64) as usize];
        // A byte of the group (header or records), on the ring (it may wrap).
        let k = (pick >> 20) % g.len;
        let ring = (g.offset - SECTOR_SIZE as u64 + k) % report.log_capacity;
        let byte = SECTOR_SIZE as u64 + ring;
        let at = (
            byte / SECTOR_SIZE as u64,
            (byte % SECTOR_SIZE as u64) as usize,
            ((pick >> 8) % 8) as u8,
        );
        flip(log, at)?;
        Ok(Some(Self {
            lsn: g.lsn,
            at,
            armed: armed.clone(),
        }))
    }

    /// Whether `e` is the report of this damage: log corruption at its group's LSN.
    pub(crate) fn reported_by(&self, e: &pagoda_engine::Error) -> bool {
        matches!(e, pagoda_engine::Error::LogCorruption { lsn, .. } if *lsn == self.lsn)
    }

    /// Flips the bit back, as restoring the log from a mirror would.
    pub(crate) fn undo(&self, log: &DeviceRef) -> Result<()> {
        flip(log, self.at)
    }
}

/// Flips bit `bit` of byte `byte` of `sector` on `dev`.
fn flip(dev: &DeviceRef, (sector, byte, bit): (u64, usize, u8)) -> Result<()> {
    let mut b = vec![0u8; SECTOR_SIZE];
    dev.read(sector, &mut b)?;
    b[byte] ^= 1 << bit;
    dev.write(sector, &b, WriteHints::default())?;
    Ok(dev.flush()?)
}
