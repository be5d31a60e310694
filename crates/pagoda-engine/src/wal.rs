//! Write-ahead log: redo-only commit records in a ring on the log device, written in groups by a
//! consolidation array (seed 002).
//!
//! Committing threads *join* the open slot: under a short lock they get an LSN range and hand
//! over their sealed record (built and checksummed before, outside any lock). A waiting thread
//! that finds no write in progress closes the open slot (later joiners open the next one) and
//! writes every pending slot as consecutive groups in one device request; a waiting thread
//! whose record is written but not covered by a sync in flight starts a sync, which makes every
//! group written before it durable (group commit: one sync serves every commit of the groups).
//! Writes stay in LSN order; syncs overlap (at most [`MAX_INFLIGHT_GROUPS`] groups unsynced).
//! The write and sync steps are plain functions of `wait_durable`, so a dedicated flush thread
//! (pipelined commit) can run them instead without changing the format or the join path.
//!
//! Layout: sector 0 of the log device is the log header; the ring starts at sector 1. An LSN is
//! a byte offset in the unbounded log stream; its position is `4096 + lsn % capacity`. Every
//! group starts at a sector boundary with a [`GroupHeader`] whose LSN must equal its position's
//! LSN, so stale groups from an earlier lap are never mistaken for new ones.

use crate::error::{Error, Failure, Result};
use crate::format::{
    align_up, parse_records, seal_record, CommitRecord, GroupHeader, GROUP_HEADER, SECTOR,
};
use crate::probe::{self, Sabotage};
use crate::profile::{Phase, Profile};
use pagoda_device::{DeviceRef, WriteHints};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A group larger than this is closed so that the next joiner opens a new slot.
pub const MAX_GROUP_BYTES: u64 = 1 << 20;

/// Groups written but not yet synced, at most. Syncs overlap (a sync started after a group's
/// write covers it), so a crash can keep a later group and lose an earlier one; recovery then
/// discards both, and treats damage as corruption only when more valid groups follow than
/// can be in flight.
pub const MAX_INFLIGHT_GROUPS: usize = 4;

/// How far after a damaged group recovery looks for valid later groups.
pub const INFLIGHT_SPAN: u64 = MAX_INFLIGHT_GROUPS as u64 * (MAX_GROUP_BYTES + 64 * 1024);

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
    /// A thread is writing groups (writes are issued in LSN order, one writer at a time).
    writing: bool,
    /// Everything before this LSN has been written (not necessarily synced).
    written: u64,
    /// Ends of written groups not yet durable (bounded by `MAX_INFLIGHT_GROUPS`).
    unsynced: VecDeque<u64>,
    /// Largest `written` value a started sync covers.
    sync_cover: u64,
    durable: u64,
    reclaim: u64,
    failed: Option<Failure>,
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
    /// Phase times of the log path (and of the transactions of the database using it).
    pub profile: Profile,
    sabotage: Option<Sabotage>,
}

impl Wal {
    /// The log device.
    pub(crate) fn device(&self) -> &DeviceRef {
        &self.dev
    }

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
                writing: false,
                written: next_lsn,
                unsynced: VecDeque::new(),
                sync_cover: next_lsn,
                durable: next_lsn,
                reclaim,
                failed: None,
            }),
            cond: Condvar::new(),
            counters: WalCounters::default(),
            profile: Profile::default(),
            sabotage: None,
        }
    }

    /// Removes a safety step on purpose (crash-test self-checks).
    pub(crate) fn sabotaged(mut self, s: Option<Sabotage>) -> Self {
        self.sabotage = s;
        self
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
    pub fn append(&self, rec: Vec<u8>) -> Result<(u64, u64)> {
        let t0 = Instant::now();
        let r = self.append_inner(rec);
        self.profile.add(Phase::LogJoin, t0);
        r
    }

    fn append_inner(&self, mut rec: Vec<u8>) -> Result<(u64, u64)> {
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
            return Err(Error::Internal("log slot vanished".into()));
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

    /// Returns once the log is durable up to `target`. The calling thread does the work that
    /// is due: it writes every closed-or-open slot when no other thread is writing (in LSN
    /// order), and it starts a sync when no sync in flight covers `target`. Syncs of
    /// consecutive groups overlap, and the device merges them.
    pub fn wait_durable(&self, target: u64) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            if st.durable >= target {
                return Ok(());
            }
            if let Some(f) = &st.failed {
                return Err(Error::Failed(f.clone()));
            }
            if st.written < target {
                let room = MAX_INFLIGHT_GROUPS.saturating_sub(st.unsynced.len());
                if !st.writing && room > 0 && !st.slots.is_empty() {
                    let take = room.min(st.slots.len());
                    let mut slots: Vec<Slot> = st.slots.drain(..take).collect();
                    if let Some(last) = slots.last_mut() {
                        if last.open {
                            last.open = false;
                            st.next_lsn = align_up(st.next_lsn);
                        }
                    }
                    st.writing = true;
                    drop(st);
                    let t0 = Instant::now();
                    let res = self.write_slots(&slots);
                    self.profile.add(Phase::LogWrite, t0);
                    st = self.state.lock();
                    st.writing = false;
                    match res {
                        Ok(()) => {
                            for sl in &slots {
                                let end = align_up(sl.end);
                                st.written = end;
                                st.unsynced.push_back(end);
                            }
                        }
                        Err(e) => st.failed = Some(Failure::new(e)),
                    }
                    self.cond.notify_all();
                    continue;
                }
                // With every in-flight group unsynced and no sync in flight for them, nobody
                // else may be due to sync (e.g. the pipelined flush thread alone): sync them
                // here to make room. Otherwise wait for the writer or the sync in flight.
                if !(room == 0 && st.sync_cover < st.written) {
                    let t0 = Instant::now();
                    self.cond.wait(&mut st);
                    self.profile.add(Phase::LogWaitSlot, t0);
                    continue;
                }
            } else if st.sync_cover >= target {
                // A sync in flight covers the target.
                let t0 = Instant::now();
                self.cond.wait(&mut st);
                self.profile.add(Phase::LogSync, t0);
                continue;
            }
            let cover = st.written;
            st.sync_cover = cover;
            drop(st);
            let t0 = Instant::now();
            let res = if probe::is(self.sabotage, Sabotage::SkipLogSync) {
                Ok(())
            } else {
                self.dev.flush()
            };
            self.profile.add(Phase::LogSync, t0);
            st = self.state.lock();
            match res {
                Ok(()) => {
                    st.durable = st.durable.max(cover);
                    while st.unsynced.front().is_some_and(|&e| e <= cover) {
                        st.unsynced.pop_front();
                    }
                    self.counters.syncs.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => st.failed = Some(Failure::new(e.into())),
            }
            self.cond.notify_all();
        }
    }

    /// Closes the open group so that the log end is a group boundary, and returns it: every
    /// record appended so far lies before it, every later one after it (a checkpoint's redo
    /// start, taken under the commit lock without waiting for any I/O there).
    pub fn close_group(&self) -> u64 {
        let mut st = self.state.lock();
        let open = st.slots.back().is_some_and(|s| s.open);
        if open {
            if let Some(s) = st.slots.back_mut() {
                s.open = false;
            }
            st.next_lsn = align_up(st.next_lsn);
        }
        st.next_lsn
    }

    /// Writes consecutive groups (one device request; no sync).
    fn write_slots(&self, slots: &[Slot]) -> Result<()> {
        let Some(first) = slots.first() else {
            return Ok(());
        };
        let mut buf = Vec::new();
        for slot in slots {
            debug_assert_eq!(slot.start, first.start + buf.len() as u64);
            let base = buf.len();
            buf.resize(base + GROUP_HEADER, 0);
            for r in &slot.records {
                buf.extend_from_slice(r);
            }
            let len = buf.len() - base;
            debug_assert_eq!(len as u64, slot.end - slot.start);
            let hdr = GroupHeader {
                lsn: slot.start,
                len: len as u32,
                records: slot.records.len() as u32,
                body_crc: crc32c::crc32c(&buf[base + GROUP_HEADER..]),
            };
            hdr.encode(&mut buf[base..base + GROUP_HEADER]);
            buf.resize(base + align_up(len as u64) as usize, 0);
        }
        self.write_ring(first.start, &buf)?;
        self.counters
            .bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
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

fn valid_group(dev: &DeviceRef, capacity: u64, lsn: u64) -> Result<Option<GroupHeader>> {
    let Some(h) = group_at(dev, capacity, lsn)? else {
        return Ok(None);
    };
    let buf = read_ring(dev, capacity, lsn, h.len as usize)?;
    Ok((crc32c::crc32c(&buf[GROUP_HEADER..h.len as usize]) == h.body_crc).then_some(h))
}

/// Whether the damaged group at `lsn` is followed by more valid groups than can have been in
/// flight at a crash: then it is damage to acknowledged data, not a torn tail.
fn damaged_not_torn(
    dev: &DeviceRef,
    capacity: u64,
    lsn: u64,
    hint_next: Option<u64>,
) -> Result<bool> {
    let limit = INFLIGHT_SPAN.min(capacity - SECTOR as u64);
    let mut first = None;
    if let Some(n) = hint_next {
        if valid_group(dev, capacity, n)?.is_some() {
            first = Some(n);
        }
    }
    let mut off = SECTOR as u64;
    while first.is_none() && off <= limit {
        if valid_group(dev, capacity, lsn + off)?.is_some() {
            first = Some(lsn + off);
        }
        off += SECTOR as u64;
    }
    let Some(mut at) = first else {
        return Ok(false);
    };
    let mut count = 0;
    while let Some(h) = valid_group(dev, capacity, at)? {
        count += 1;
        if count >= MAX_INFLIGHT_GROUPS {
            return Ok(true);
        }
        at = align_up(at + u64::from(h.len));
    }
    Ok(false)
}

/// Zeroes the dead part of the ring (after `end`, up to the oldest LSN still needed), where
/// groups that were in flight at a crash may survive, so that they can never be mistaken for
/// later log. `live_start` is the oldest LSN still needed.
pub fn clear_after(
    dev: &DeviceRef,
    capacity: u64,
    stream: u16,
    live_start: u64,
    end: u64,
) -> Result<()> {
    let room = (capacity - (end - live_start)) / SECTOR as u64 * SECTOR as u64;
    let hints = WriteHints::stream(stream);
    let chunk = 1u64 << 20;
    let zeros = vec![0u8; chunk as usize];
    let mut done = 0u64;
    while done < room {
        let lsn = end + done;
        let off = lsn % capacity;
        let n = (room - done).min(chunk).min(capacity - off);
        dev.write(
            (SECTOR as u64 + off) / SECTOR as u64,
            &zeros[..n as usize],
            hints,
        )?;
        done += n;
    }
    if room > 0 {
        dev.flush()?;
    }
    Ok(())
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
            if damaged_not_torn(dev, capacity, lsn, None)? {
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
            if damaged_not_torn(dev, capacity, lsn, Some(next))? {
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
