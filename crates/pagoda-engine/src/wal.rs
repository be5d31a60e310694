//! Write-ahead log: redo-only commit records in a ring on the log device, written in groups by a
//! consolidation array (seed 002).
//!
//! Committing threads *join* the open slot: under a short lock they get an LSN range and hand
//! over their sealed record (no copy under the lock beyond moving a `Vec`). The first waiter
//! that finds no write in flight becomes the slot's *leader*: it closes the slot (later
//! joiners open the next slot), assembles the group, writes it and syncs the device once for
//! every commit in it (group commit), then wakes the followers. The leader role is a function
//! (`write_slot`) any thread can run, so a dedicated flush thread (pipelined commit) can take it
//! over without changing the format or the join path.
//!
//! Layout: sector 0 of the log device is the log header; the ring starts at sector 1. An LSN is
//! a byte offset in the unbounded log stream; its position is `4096 + lsn % capacity`. Every
//! group starts at a sector boundary with a [`GroupHeader`] whose LSN must equal its position's
//! LSN, so stale groups from an earlier lap are never mistaken for new ones.

use crate::error::{Error, Result};
use crate::format::{
    align_up, parse_records, seal_record, CommitRecord, GroupHeader, GROUP_HEADER, SECTOR,
};
use pagoda_device::{DeviceRef, WriteHints};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// A group larger than this is closed so that the next joiner opens a new slot.
pub const MAX_GROUP_BYTES: u64 = 1 << 20;

#[derive(Debug)]
struct Slot {
    start: u64,
    end: u64,
    open: bool,
    records: Vec<Vec<u8>>,
}

#[derive(Debug)]
struct State {
    next_lsn: u64,
    slots: VecDeque<Slot>,
    leader: bool,
    durable: u64,
    reclaim: u64,
    failed: Option<String>,
}

/// Log counters.
#[derive(Debug, Default)]
pub struct WalCounters {
    /// Commit records appended.
    pub commits: AtomicU64,
    /// Bytes written to the log device (padded groups).
    pub bytes: AtomicU64,
    /// Device syncs of the log.
    pub syncs: AtomicU64,
}

/// The write-ahead log.
#[derive(Debug)]
pub struct Wal {
    dev: DeviceRef,
    capacity: u64,
    stream: u16,
    state: Mutex<State>,
    cond: Condvar,
    /// Counters.
    pub counters: WalCounters,
}

impl Wal {
    /// A log on `dev` whose ring holds `capacity` bytes, continuing at `next_lsn` (a group
    /// boundary); records before `reclaim` may be overwritten.
    pub fn new(dev: DeviceRef, capacity: u64, stream: u16, next_lsn: u64, reclaim: u64) -> Self {
        debug_assert_eq!(next_lsn % SECTOR as u64, 0);
        Self {
            dev,
            capacity,
            stream,
            state: Mutex::new(State {
                next_lsn,
                slots: VecDeque::new(),
                leader: false,
                durable: next_lsn,
                reclaim,
                failed: None,
            }),
            cond: Condvar::new(),
            counters: WalCounters::default(),
        }
    }

    /// Ring capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes of log between the reclaim point and the end.
    pub fn used(&self) -> u64 {
        let st = self.state.lock();
        st.next_lsn - st.reclaim
    }

    /// The durable LSN.
    pub fn durable(&self) -> u64 {
        self.state.lock().durable
    }

    /// Lets records before `lsn` be overwritten (after a checkpoint made them unnecessary).
    pub fn set_reclaim(&self, lsn: u64) {
        let mut st = self.state.lock();
        st.reclaim = st.reclaim.max(lsn);
    }

    /// Joins the open slot with an encoded record (see [`CommitRecord::encode`]). Returns the
    /// record's `(lsn, end)`. Records are ordered by the caller (the commit critical section).
    pub fn append(&self, mut rec: Vec<u8>) -> Result<(u64, u64)> {
        let mut st = self.state.lock();
        if let Some(f) = &st.failed {
            return Err(Error::Failed(f.clone()));
        }
        let len = rec.len() as u64;
        let open = st.slots.back().is_some_and(|s| s.open);
        let need = len
            + if open {
                0
            } else {
                GROUP_HEADER as u64 + SECTOR as u64
            };
        if st.next_lsn + need - st.reclaim > self.capacity {
            return Err(Error::LogFull {
                need,
                capacity: self.capacity,
            });
        }
        if !open {
            let start = st.next_lsn;
            st.slots.push_back(Slot {
                start,
                end: start + GROUP_HEADER as u64,
                open: true,
                records: Vec::new(),
            });
            st.next_lsn = start + GROUP_HEADER as u64;
        }
        let lsn = st.next_lsn;
        seal_record(&mut rec, lsn);
        st.next_lsn += len;
        let next = st.next_lsn;
        let Some(slot) = st.slots.back_mut() else {
            return Err(Error::Failed("log slot vanished".into()));
        };
        slot.records.push(rec);
        slot.end = next;
        let close = slot.end - slot.start >= MAX_GROUP_BYTES;
        if close {
            slot.open = false;
            st.next_lsn = align_up(next);
        }
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        Ok((lsn, next))
    }

    /// Returns once the log is durable up to `target`, leading group writes as needed.
    pub fn wait_durable(&self, target: u64) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            if st.durable >= target {
                return Ok(());
            }
            if let Some(f) = &st.failed {
                return Err(Error::Failed(f.clone()));
            }
            if st.leader {
                self.cond.wait(&mut st);
                continue;
            }
            let Some(mut slot) = st.slots.pop_front() else {
                return Ok(());
            };
            if slot.open {
                slot.open = false;
                st.next_lsn = align_up(st.next_lsn);
            }
            st.leader = true;
            drop(st);
            let res = self.write_slot(&slot);
            st = self.state.lock();
            st.leader = false;
            match res {
                Ok(()) => st.durable = align_up(slot.end),
                Err(e) => st.failed = Some(format!("log write failed: {e}")),
            }
            self.cond.notify_all();
        }
    }

    /// Makes everything appended so far durable.
    pub fn flush_all(&self) -> Result<u64> {
        let end = self.state.lock().next_lsn;
        self.wait_durable(end)?;
        Ok(self.durable())
    }

    /// Writes and syncs one group (the leader's job).
    fn write_slot(&self, slot: &Slot) -> Result<()> {
        let len = (slot.end - slot.start) as usize;
        let mut buf = Vec::with_capacity(align_up(len as u64) as usize);
        buf.resize(GROUP_HEADER, 0);
        for r in &slot.records {
            buf.extend_from_slice(r);
        }
        debug_assert_eq!(buf.len(), len);
        let hdr = GroupHeader {
            lsn: slot.start,
            len: len as u32,
            records: slot.records.len() as u32,
            body_crc: crc32c::crc32c(&buf[GROUP_HEADER..]),
        };
        hdr.encode(&mut buf[..GROUP_HEADER]);
        buf.resize(align_up(len as u64) as usize, 0);
        self.write_ring(slot.start, &buf)?;
        self.dev.flush()?;
        self.counters
            .bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn write_ring(&self, lsn: u64, buf: &[u8]) -> Result<()> {
        let hints = WriteHints::stream(self.stream);
        let off = lsn % self.capacity;
        let first = ((self.capacity - off) as usize).min(buf.len());
        self.dev
            .write((SECTOR as u64 + off) / SECTOR as u64, &buf[..first], hints)?;
        if first < buf.len() {
            self.dev.write(1, &buf[first..], hints)?;
        }
        Ok(())
    }
}

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
}

fn group_at(dev: &DeviceRef, capacity: u64, lsn: u64) -> Result<Option<GroupHeader>> {
    let b = read_ring(dev, capacity, lsn, SECTOR)?;
    Ok(GroupHeader::decode(&b).filter(|h| {
        h.lsn == lsn && (h.len as usize) >= GROUP_HEADER && u64::from(h.len) <= capacity
    }))
}

/// Whether a valid group exists after `lsn` within reach of one group: that proves the group at
/// `lsn` is damaged rather than a torn tail.
fn later_group_exists(
    dev: &DeviceRef,
    capacity: u64,
    lsn: u64,
    hint_next: Option<u64>,
) -> Result<bool> {
    if let Some(n) = hint_next {
        if group_at(dev, capacity, n)?.is_some() {
            return Ok(true);
        }
    }
    let limit = (MAX_GROUP_BYTES + 2 * SECTOR as u64).min(capacity - SECTOR as u64);
    let mut off = SECTOR as u64;
    while off <= limit {
        if group_at(dev, capacity, lsn + off)?.is_some() {
            return Ok(true);
        }
        off += SECTOR as u64;
    }
    Ok(false)
}

/// Scans the log from `start` (a group boundary) to its end.
pub fn scan(dev: &DeviceRef, capacity: u64, start: u64) -> Result<LogScan> {
    let mut out = LogScan {
        end: start,
        ..LogScan::default()
    };
    let mut lsn = start;
    loop {
        if lsn - start >= capacity {
            break;
        }
        let Some(h) = group_at(dev, capacity, lsn)? else {
            if later_group_exists(dev, capacity, lsn, None)? {
                return Err(Error::LogCorruption {
                    lsn,
                    detail: "group header damaged but later groups exist".into(),
                });
            }
            break;
        };
        let buf = read_ring(dev, capacity, lsn, h.len as usize)?;
        let body = &buf[GROUP_HEADER..h.len as usize];
        let next = align_up(lsn + u64::from(h.len));
        if crc32c::crc32c(body) != h.body_crc {
            if later_group_exists(dev, capacity, lsn, Some(next))? {
                return Err(Error::LogCorruption {
                    lsn,
                    detail: "group body fails its checksum but later groups exist".into(),
                });
            }
            out.torn_tail = true;
            break;
        }
        let recs = parse_records(body, lsn + GROUP_HEADER as u64)
            .map_err(|detail| Error::LogCorruption { lsn, detail })?;
        out.records.extend(recs);
        out.groups += 1;
        lsn = next;
    }
    out.end = lsn;
    Ok(out)
}
