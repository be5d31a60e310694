//! Write-ahead log: redo-only commit records in a ring on the log device, written in groups by a
//! consolidation array (seed 002).
//!
//! Committing threads *join* the open slot: under a short lock they get an LSN range and hand
//! over their sealed record (built and checksummed before, outside any lock). A waiting thread
//! that finds no write in progress closes the open slot (later joiners open the next one) and
//! writes every pending slot as consecutive groups in one device request; a waiting thread
//! whose record is written but not covered by a sync in flight starts a sync, which makes every
//! group written before it durable (group commit: one sync serves every commit of the groups).
//! Writes stay in LSN order; syncs overlap (at most [`MAX_INFLIGHT_GROUPS`] groups unsynced),
//! so every group header records how far the log was durable when it was written: recovery
//! ([`scan`]) uses it to tell a torn tail from damage to synced groups.
//! The write and sync steps are plain functions of `wait_durable`, so a dedicated flush thread
//! (pipelined commit) can run them instead without changing the format or the join path.
//!
//! Layout: sector 0 of the log device is the log header; the ring starts at sector 1. An LSN is
//! a byte offset in the unbounded log stream; its position is `4096 + lsn % capacity`. Every
//! group starts at a sector boundary with a [`GroupHeader`] whose LSN must equal its position's
//! LSN, so stale groups from an earlier lap are never mistaken for new ones.

use crate::error::{Error, Failure, Result};
use crate::format::{align_up, seal_record, GroupHeader, LogHeader, GROUP_HEADER, SECTOR};
use crate::probe::{self, Sabotage};
use crate::profile::{Phase, Profile, Stamp};
use pagoda_device::{DeviceRef, WriteHints};
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

mod scan;
pub(crate) use scan::scan_log;
pub use scan::{read_ring, scan};

/// A group reaching this size is closed so that the next joiner opens a new slot. A soft
/// target for batching only: one record may make a group much larger, and recovery assumes
/// no group size.
pub const MAX_GROUP_BYTES: u64 = 1 << 20;

/// A group writer's buffer larger than this is not kept for the next write.
const KEPT_WRITE_BUF: usize = 4 << 20;

/// Groups written but not yet synced, at most. Syncs overlap (a sync started after a group's
/// write covers it), so a crash can keep a later group and lose an earlier one; recovery then
/// discards both, unless a later group's header shows the earlier one was synced.
pub const MAX_INFLIGHT_GROUPS: usize = 4;

#[derive(Debug)]
struct Slot {
    start: u64,
    end: u64,
    open: bool,
    /// The group's records, concatenated. A record is copied in by the thread that appends
    /// it, which then frees it: records freed by the writing thread (the flush thread of
    /// lazy and pipelined commits) sent every allocation of the committers to glibc's slow
    /// path (17 % of a no-sync update run's CPU was `_int_malloc`).
    body: Vec<u8>,
    records: u32,
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
    /// Bodies of written groups, kept for the next slots: a fresh one grew by doubling to
    /// each group's size (a bulk load's groups are 100 KiB and more), in new memory.
    spare: Vec<Vec<u8>>,
    /// Largest `written` value a started sync covers.
    sync_cover: u64,
    /// Syncs started so far (each is numbered in start order).
    syncs_started: u64,
    /// Every sync numbered below this has completed.
    syncs_done_below: u64,
    /// Completed syncs numbered at or above `syncs_done_below`.
    syncs_done: BTreeSet<u64>,
    /// Successful syncs not counted yet, in completion order: (syncs started when it
    /// completed, its cover). See [`Wal::wait_durable`].
    held: VecDeque<(u64, u64)>,
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
    /// Written into every group header (groups of another database never match).
    db_id: u64,
    epoch: u32,
    stream: u16,
    state: Mutex<State>,
    cond: Condvar,
    /// The group writer's buffer ([`Wal::write_slots`]).
    write_buf: Mutex<Vec<u8>>,
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

    /// The log of database `db_id` on `dev` whose ring holds `capacity` bytes, continuing at
    /// `next_lsn` (a group boundary, durable); records before `reclaim` may be overwritten.
    pub fn new(
        dev: DeviceRef,
        capacity: u64,
        id: LogHeader,
        stream: u16,
        next_lsn: u64,
        reclaim: u64,
    ) -> Self {
        debug_assert_eq!(next_lsn % SECTOR as u64, 0);
        Self {
            dev,
            capacity,
            db_id: id.db_id,
            epoch: id.epoch,
            stream,
            state: Mutex::new(State {
                next_lsn,
                slots: VecDeque::new(),
                writing: false,
                written: next_lsn,
                unsynced: VecDeque::new(),
                spare: Vec::new(),
                sync_cover: next_lsn,
                syncs_started: 0,
                syncs_done_below: 0,
                syncs_done: BTreeSet::new(),
                held: VecDeque::new(),
                durable: next_lsn,
                reclaim,
                failed: None,
            }),
            cond: Condvar::new(),
            write_buf: Mutex::new(Vec::new()),
            counters: WalCounters::default(),
            profile: Profile::new(),
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

    /// The end of the log appended so far: waiting for it makes every appended record durable.
    pub fn end(&self) -> u64 {
        self.state.lock().next_lsn
    }

    /// Lets records before `lsn` be overwritten (after a checkpoint made them unnecessary).
    pub fn set_reclaim(&self, lsn: u64) {
        let mut st = self.state.lock();
        st.reclaim = st.reclaim.max(lsn);
    }

    /// Joins the open slot with an encoded record (see [`CommitRecord::encode`]), which it
    /// seals and copies (the caller keeps its buffer). Returns the record's `(lsn, end)`.
    /// Records are ordered by the caller (the commit critical section).
    pub fn append(&self, rec: &mut [u8]) -> Result<(u64, u64)> {
        let t0 = Stamp::now();
        let r = self.append_inner(rec);
        self.profile.add(Phase::LogJoin, t0);
        r
    }

    fn append_inner(&self, rec: &mut [u8]) -> Result<(u64, u64)> {
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
            let mut body = st.spare.pop().unwrap_or_default();
            body.reserve(rec.len());
            st.slots.push_back(Slot {
                start,
                end: start + GROUP_HEADER as u64,
                open: true,
                body,
                records: 0,
            });
            st.next_lsn = start + GROUP_HEADER as u64;
        }
        let lsn = st.next_lsn;
        seal_record(rec, lsn);
        st.next_lsn += len;
        let next = st.next_lsn;
        let Some(slot) = st.slots.back_mut() else {
            return Err(Error::Internal("log slot vanished".into()));
        };
        slot.body.extend_from_slice(rec);
        slot.records += 1;
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
                    // Only syncs completed by now count: commits below it may be acknowledged.
                    let durable = st.durable;
                    drop(st);
                    let t0 = Stamp::now();
                    let res = self.write_slots(&slots, durable);
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
                    for sl in slots {
                        let mut body = sl.body;
                        if body.capacity() <= KEPT_WRITE_BUF
                            && st.spare.len() < 2 * MAX_INFLIGHT_GROUPS
                        {
                            body.clear();
                            st.spare.push(body);
                        }
                    }
                    self.cond.notify_all();
                    continue;
                }
                // With every in-flight group unsynced and no sync in flight for them, nobody
                // else may be due to sync (e.g. the pipelined flush thread alone): sync them
                // here to make room. Otherwise wait for the writer or the sync in flight.
                if !(room == 0 && st.sync_cover < st.written) {
                    let t0 = Stamp::now();
                    self.cond.wait(&mut st);
                    self.profile.add(Phase::LogWaitSlot, t0);
                    continue;
                }
            } else if st.sync_cover >= target {
                // A sync in flight covers the target.
                let t0 = Stamp::now();
                self.cond.wait(&mut st);
                self.profile.add(Phase::LogWaitSync, t0);
                continue;
            }
            let cover = st.written;
            st.sync_cover = cover;
            let seq = st.syncs_started;
            st.syncs_started += 1;
            drop(st);
            let t0 = Stamp::now();
            let res = if probe::is(self.sabotage, Sabotage::SkipLogSync) {
                Ok(())
            } else if probe::is(self.sabotage, Sabotage::RetryFailedLogSync) {
                self.dev.flush().or_else(|_| self.dev.flush())
            } else {
                self.dev.flush()
            };
            self.profile.add(Phase::LogSync, t0);
            st = self.state.lock();
            st.syncs_done.insert(seq);
            let mut below = st.syncs_done_below;
            while st.syncs_done.remove(&below) {
                below += 1;
            }
            st.syncs_done_below = below;
            match res {
                Ok(()) => {
                    // Sabotage: counted at once, as if no overlapping sync could fail.
                    let started = if probe::is(self.sabotage, Sabotage::CountOverlappedSync) {
                        0
                    } else {
                        st.syncs_started
                    };
                    st.held.push_back((started, cover));
                    self.counters.syncs.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    if st.failed.is_none() {
                        st.failed = Some(Failure::new(e.into()));
                    }
                }
            }
            // A sync's success counts only once every sync that overlapped it has completed
            // without failing: a failed fsync may have dropped the writes (Linux marks the
            // pages clean), and an overlapping fsync can then report success without them.
            // (Found by the crash test's fsync-fail fault with 4 threads.)
            while st.failed.is_none() {
                let Some(&(started, cover)) = st.held.front() else {
                    break;
                };
                if started > st.syncs_done_below {
                    break;
                }
                st.held.pop_front();
                st.durable = st.durable.max(cover);
                while st.unsynced.front().is_some_and(|&e| e <= cover) {
                    st.unsynced.pop_front();
                }
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

    /// Writes consecutive groups (one device request; no sync); `durable` is the durable LSN
    /// their headers record.
    fn write_slots(&self, slots: &[Slot], durable: u64) -> Result<()> {
        let Some(first) = slots.first() else {
            return Ok(());
        };
        // Only one thread writes at a time: the buffer is this writer's alone, kept between
        // writes (a new one per group was a fresh allocation the kernel zeroed every time).
        let mut kept = self.write_buf.lock();
        let buf = &mut *kept;
        buf.clear();
        for slot in slots {
            debug_assert_eq!(slot.start, first.start + buf.len() as u64);
            let base = buf.len();
            buf.resize(base + GROUP_HEADER, 0);
            buf.extend_from_slice(&slot.body);
            let len = buf.len() - base;
            debug_assert_eq!(len as u64, slot.end - slot.start);
            let hdr = GroupHeader {
                lsn: slot.start,
                len: len as u32,
                records: slot.records,
                body_crc: crc32c::crc32c(&buf[base + GROUP_HEADER..]),
                durable,
                db_id: self.db_id,
                epoch: self.epoch,
            };
            hdr.encode(&mut buf[base..base + GROUP_HEADER]);
            buf.resize(base + align_up(len as u64) as usize, 0);
        }
        self.write_ring(first.start, buf)?;
        self.counters
            .bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        if buf.capacity() > KEPT_WRITE_BUF {
            *buf = Vec::new();
        }
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
