//! Reading the log at recovery: where it ends, and whether a damaged group is the torn tail
//! of a crash (cut) or damage to durable log (refused).
//!
//! The rule: a damaged group at LSN `L` was durable when a later valid group of this log
//! records a durable LSN above `L` (the writer records, in every group header, how far the
//! log was synced when it wrote the group; syncs cover whole groups). Then commits in it may
//! have been acknowledged, and recovery fails with [`Error::LogCorruption`]. Otherwise no sync
//! is known to have covered it: it and everything after it were in flight at a crash (no
//! commit there was acknowledged), and the log ends there. Group sizes are not assumed: the
//! later groups are found by walking sector boundaries to the end of the ring.

use crate::error::{Error, Result};
use crate::format::{
    align_up, parse_records, salvage_records, CommitRecord, GroupHeader, GROUP_HEADER, SECTOR,
};
use crate::probe::{self, Sabotage};
use pagoda_device::DeviceRef;

/// Bytes read per request while looking past a damaged group.
const WALK_CHUNK: u64 = 1 << 20;

/// Reads `len` bytes of the ring at `lsn`.
pub fn read_ring(dev: &DeviceRef, capacity: u64, lsn: u64, len: usize) -> Result<Vec<u8>> {
    let len = align_up(len as u64) as usize;
    let mut buf = vec![0u8; len];
    let off = lsn % capacity;
    let first = ((capacity - off) as usize).min(len);
    dev.read((SECTOR as u64 + off) / SECTOR as u64, &mut buf[..first])?;
    if first < len {
        dev.read(1, &mut buf[first..])?;
    }
    Ok(buf)
}

/// Byte offset on the log device where `lsn` lives.
pub fn device_offset(capacity: u64, lsn: u64) -> u64 {
    SECTOR as u64 + lsn % capacity
}

/// The result of scanning the log from a checkpoint.
#[derive(Debug, Default)]
pub struct LogScan {
    /// Commit records in LSN order.
    pub records: Vec<(u64, CommitRecord)>,
    /// Where the next group goes.
    pub end: u64,
    /// Groups read.
    pub groups: u64,
    /// Whether the log ended in a torn (unacknowledged) group.
    pub torn_tail: bool,
    /// The headers of the groups read, in LSN order.
    pub headers: Vec<GroupHeader>,
}

/// Where and what to read: the log's ring and the database it belongs to.
struct Ring<'a> {
    dev: &'a DeviceRef,
    capacity: u64,
    db_id: u64,
}

impl Ring<'_> {
    /// The header in `sector` if it is one of this log's groups at `lsn` (not a stale lap, not
    /// another database's).
    fn header(&self, sector: &[u8], lsn: u64) -> Option<GroupHeader> {
        GroupHeader::decode(sector).filter(|h| {
            h.lsn == lsn
                && h.db_id == self.db_id
                && h.durable <= lsn
                && (h.len as usize) >= GROUP_HEADER
                && u64::from(h.len) <= self.capacity
        })
    }

    fn group_at(&self, lsn: u64) -> Result<Option<GroupHeader>> {
        let b = read_ring(self.dev, self.capacity, lsn, SECTOR)?;
        Ok(self.header(&b, lsn))
    }

    /// A later group (from `from` up to `stop`) whose header says the log was durable past
    /// `lsn` when it was written, i.e. proof that the group at `lsn` was synced. Valid groups
    /// are stepped over whole; elsewhere every sector boundary is tried, since a damaged
    /// header leaves its group's length unknown.
    fn durable_witness(&self, lsn: u64, from: u64, stop: u64) -> Result<Option<u64>> {
        let mut buf = Vec::new();
        let mut buf_at = from;
        let mut pos = from;
        while pos < stop {
            if pos < buf_at || pos + SECTOR as u64 > buf_at + buf.len() as u64 {
                let n = WALK_CHUNK.min(stop - pos);
                buf = read_ring(self.dev, self.capacity, pos, n as usize)?;
                buf_at = pos;
            }
            let i = (pos - buf_at) as usize;
            match self.header(&buf[i..i + SECTOR], pos) {
                Some(h) if h.durable > lsn => return Ok(Some(pos)),
                Some(h) => pos = align_up(pos + u64::from(h.len)),
                None => pos += SECTOR as u64,
            }
        }
        Ok(None)
    }

    /// The error for damage at `lsn` that the group at `witness` proves durable.
    fn corruption(&self, lsn: u64, what: &str, witness: u64) -> Error {
        Error::LogCorruption {
            lsn,
            offset: device_offset(self.capacity, lsn),
            detail: format!(
                "{what}, but the group at LSN {witness} was written after it was synced \
                 (its commits may have been acknowledged)"
            ),
        }
    }
}

/// Scans the log of database `db_id` from `start` (a group boundary) to its end. A damaged
/// group ends the log when it may have been in flight at a crash; damage to a group that a
/// later group proves durable is [`Error::LogCorruption`] naming its LSN and device offset.
pub fn scan(dev: &DeviceRef, capacity: u64, db_id: u64, start: u64) -> Result<LogScan> {
    scan_log(dev, capacity, db_id, start, None)
}

/// [`scan`], with a sabotage of its rules (`ignore-log-epoch`, `salvage-torn-log`) if any.
pub(crate) fn scan_log(
    dev: &DeviceRef,
    capacity: u64,
    db_id: u64,
    start: u64,
    sabotage: Option<Sabotage>,
) -> Result<LogScan> {
    let epochs = !probe::is(sabotage, Sabotage::IgnoreLogEpoch);
    let witness = !probe::is(sabotage, Sabotage::LogDamageAsTail);
    let ring = Ring {
        dev,
        capacity,
        db_id,
    };
    // Positions from `start + capacity` on alias the live log: the walk stops before them.
    let stop = start + capacity;
    let mut out = LogScan::default();
    let mut lsn = start;
    let mut epoch = 0;
    while lsn < stop {
        // A group of an earlier open after a later one's is left from before a crash.
        let Some(h) = ring.group_at(lsn)?.filter(|h| !epochs || h.epoch >= epoch) else {
            // The end of the log, or a damaged header (its length unknown).
            if let Some(w) = ring.durable_witness(lsn, lsn + SECTOR as u64, stop)? {
                if witness {
                    return Err(ring.corruption(lsn, "group header damaged", w));
                }
            }
            break;
        };
        let buf = read_ring(dev, capacity, lsn, h.len as usize)?;
        let body = &buf[GROUP_HEADER..h.len as usize];
        let next = align_up(lsn + u64::from(h.len));
        if crc32c::crc32c(body) != h.body_crc {
            if let Some(w) = ring.durable_witness(lsn, next, stop)? {
                if witness {
                    return Err(ring.corruption(lsn, "group body fails its checksum", w));
                }
            }
            if probe::is(sabotage, Sabotage::SalvageTornLog) {
                out.records
                    .extend(salvage_records(body, lsn + GROUP_HEADER as u64));
                out.groups += 1;
                epoch = h.epoch;
                lsn = next;
                continue;
            }
            out.torn_tail = true;
            break;
        }
        let recs = parse_records(body, lsn + GROUP_HEADER as u64).map_err(|detail| {
            Error::LogCorruption {
                lsn,
                offset: device_offset(capacity, lsn),
                detail,
            }
        })?;
        out.records.extend(recs);
        out.groups += 1;
        out.headers.push(h);
        epoch = h.epoch;
        lsn = next;
    }
    out.end = lsn;
    Ok(out)
}
