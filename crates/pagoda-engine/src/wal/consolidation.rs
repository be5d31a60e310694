//! The log's consolidation array (Aether's; the log path of WiredTiger that the pipelined-commit
//! paper measures): the slots committers join, and how a round of group commit takes and writes
//! them.
//!
//! A committing thread *joins* the open slot ([`Wal::append`]): under the log's short lock it
//! gets an LSN range and copies in its sealed record (built and checksummed before, outside any
//! lock). A slot closes when it reaches [`MAX_GROUP_BYTES`], when a round takes it
//! ([`Pending::take`]) or when a checkpoint needs a group boundary ([`Wal::close_group`]); the
//! next joiner opens a new one. Each slot becomes one group on the log: a round seals every slot
//! it took (group header in front, zeros to the sector boundary behind) and writes consecutive
//! groups in one request ([`Wal::write_slots`]). Making them durable, and who does it, is
//! [`super::group`]'s.
//!
//! A slot's body is built in a 4 KiB-aligned buffer with room for its group header in front,
//! so a round of one slot writes that buffer as it is (no copy, no O_DIRECT bounce copy).

use super::{Round, Wal};
use crate::error::{Error, Result};
use crate::format::{align_up, seal_record, GroupHeader, GROUP_HEADER, SECTOR};
use crate::profile::{Phase, Stamp};
use pagoda_device::aligned::AlignedBuf;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

/// A group reaching this size is closed so that the next joiner opens a new slot. A soft
/// target for batching only: one record may make a group much larger, and recovery assumes
/// no group size.
pub(crate) const MAX_GROUP_BYTES: u64 = 1 << 20;

/// A round takes pending slots up to this many bytes (at least one slot), so one request of
/// a bulk load stays bounded.
const MAX_ROUND_BYTES: usize = 16 << 20;

/// A slot or write buffer larger than this is not kept for the next one.
const KEPT_BUF: usize = 4 << 20;

/// Spare slot bodies kept.
const KEPT_SPARES: usize = 4;

/// One slot of the array: a group being filled (open) or waiting for its round (closed).
#[derive(Debug)]
pub(super) struct Slot {
    start: u64,
    end: u64,
    open: bool,
    /// The group as it will be written: [`GROUP_HEADER`] bytes left for the header, then the
    /// records. A record is copied in by the thread that appends it, which then frees it:
    /// records freed by the writing thread (the flush thread of lazy and pipelined commits)
    /// sent every allocation of the committers to glibc's slow path.
    body: AlignedBuf,
    records: u32,
}

/// The consolidation array: what committers append to, under the log's lock.
#[derive(Debug)]
pub(super) struct Pending {
    /// The LSN the next record gets (or, with no slot open, the next group's start).
    pub(super) next_lsn: u64,
    /// Slots not yet taken by a round, in LSN order; only the last may be open.
    slots: VecDeque<Slot>,
    /// Bodies of written groups, kept for the next slots (a fresh one grew by doubling to
    /// each group's size, in new memory).
    spare: Vec<AlignedBuf>,
    /// Records before this LSN may be overwritten.
    pub(super) reclaim: u64,
}

impl Pending {
    /// No slots yet; the next record goes at `next_lsn` (a group boundary).
    pub(super) fn new(next_lsn: u64, reclaim: u64) -> Self {
        Self {
            next_lsn,
            slots: VecDeque::new(),
            spare: Vec::new(),
            reclaim,
        }
    }

    /// Takes the pending slots for a round, up to [`MAX_ROUND_BYTES`] (at least one), closing
    /// the open one: the slots, the end of the last group, and the records they hold.
    pub(super) fn take(&mut self) -> Option<(Vec<Slot>, u64, u32)> {
        let mut bytes = 0usize;
        let mut n = 0;
        for s in &self.slots {
            let len = s.body.len();
            if n > 0 && bytes + len > MAX_ROUND_BYTES {
                break;
            }
            bytes += len;
            n += 1;
        }
        if n == 0 {
            return None;
        }
        let mut taken: Vec<Slot> = self.slots.drain(..n).collect();
        let last = taken.last_mut()?;
        if last.open {
            last.open = false;
            self.next_lsn = align_up(self.next_lsn);
        }
        let end = align_up(last.end);
        let records = taken.iter().map(|s| s.records).sum();
        Some((taken, end, records))
    }

    /// Keeps the bodies of a written round's slots for the next slots.
    pub(super) fn recycle(&mut self, taken: Vec<Slot>) {
        for s in taken {
            if s.body.capacity() <= KEPT_BUF && self.spare.len() < KEPT_SPARES {
                self.spare.push(s.body);
            }
        }
    }
}

impl Wal {
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
        let mut guard = self.group.lock();
        let st = &mut *guard;
        if let Some(f) = st.failed() {
            return Err(Error::Failed(f.clone()));
        }
        let p = &mut st.pending;
        let len = rec.len() as u64;
        let open = p.slots.back().is_some_and(|s| s.open);
        let need = len
            + if open {
                0
            } else {
                GROUP_HEADER as u64 + SECTOR as u64
            };
        if p.next_lsn + need - p.reclaim > self.capacity {
            return Err(Error::LogFull {
                need,
                capacity: self.capacity,
            });
        }
        if !open {
            let start = p.next_lsn;
            let mut body = p.spare.pop().unwrap_or_default();
            body.clear();
            body.resize(GROUP_HEADER);
            body.reserve(rec.len());
            p.slots.push_back(Slot {
                start,
                end: start + GROUP_HEADER as u64,
                open: true,
                body,
                records: 0,
            });
            p.next_lsn = start + GROUP_HEADER as u64;
        }
        let lsn = p.next_lsn;
        seal_record(rec, lsn);
        p.next_lsn += len;
        let next = p.next_lsn;
        let Some(slot) = p.slots.back_mut() else {
            return Err(Error::Internal("log slot vanished".into()));
        };
        slot.body.extend_from_slice(rec);
        slot.records += 1;
        slot.end = next;
        debug_assert_eq!(slot.body.len() as u64, slot.end - slot.start);
        if slot.end - slot.start >= MAX_GROUP_BYTES {
            slot.open = false;
            p.next_lsn = align_up(next);
        }
        self.group.joined(&Round { wal: self }, st);
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        Ok((lsn, next))
    }

    /// Closes the open group so that the log end is a group boundary, and returns it: every
    /// record appended so far lies before it, every later one after it (a checkpoint's redo
    /// start, taken under the commit lock without waiting for any I/O there).
    pub fn close_group(&self) -> u64 {
        let mut st = self.group.lock();
        let p = &mut st.pending;
        if let Some(s) = p.slots.back_mut() {
            if s.open {
                s.open = false;
                p.next_lsn = align_up(p.next_lsn);
            }
        }
        p.next_lsn
    }

    /// Seals a slot for writing: its group header in front (`durable` is the durable LSN the
    /// header records), zeros to the next sector boundary behind.
    fn seal_slot(&self, slot: &mut Slot, durable: u64) {
        let len = slot.body.len();
        debug_assert_eq!(len as u64, slot.end - slot.start);
        let buf = slot.body.as_mut_slice();
        let hdr = GroupHeader {
            lsn: slot.start,
            len: len as u32,
            records: slot.records,
            body_crc: crc32c::crc32c(&buf[GROUP_HEADER..]),
            durable,
            db_id: self.db_id,
            epoch: self.epoch,
        };
        hdr.encode(&mut buf[..GROUP_HEADER]);
        slot.body.resize(align_up(len as u64) as usize);
    }

    /// Writes consecutive groups (one device request; no sync): a single slot from its own
    /// buffer, several through the leader's buffer.
    pub(super) fn write_slots(&self, slots: &mut [Slot], durable: u64) -> Result<()> {
        for slot in slots.iter_mut() {
            self.seal_slot(slot, durable);
        }
        let (first, rest) = match slots {
            [] => return Ok(()),
            [one] => {
                self.write_ring(one.start, one.body.as_slice())?;
                self.counters
                    .bytes
                    .fetch_add(one.body.len() as u64, Ordering::Relaxed);
                return Ok(());
            }
            [first, rest @ ..] => (first, rest),
        };
        let mut kept = self.write_buf.lock();
        let buf = &mut *kept;
        buf.clear();
        buf.extend_from_slice(first.body.as_slice());
        for slot in rest {
            // Log group order, kept in release builds: groups written in one request must
            // follow each other without a gap, or the scan at recovery would stop at the gap
            // and drop acknowledged commits after it.
            assert_eq!(
                slot.start,
                first.start + buf.len() as u64,
                "log groups out of order in one write"
            );
            buf.extend_from_slice(slot.body.as_slice());
        }
        self.write_ring(first.start, buf.as_slice())?;
        self.counters
            .bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        if buf.capacity() > KEPT_BUF {
            *buf = AlignedBuf::default();
        }
        Ok(())
    }
}
