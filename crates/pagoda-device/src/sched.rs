//! I/O queue that merges adjacent writes, never an atomic write with a normal one.
//!
//! [`IoQueue`] wraps any device. Single requests pass straight through (and are counted). A batch
//! given to [`IoQueue::submit_writes`] is sorted by address and adjacent writes are merged into
//! larger requests, as a block-layer elevator does, under the rules of the 16 KiB atomic-write
//! paper:
//!
//! * a write is merged with the one right after it only when they are contiguous, on the same
//!   stream, and the merged request is at most `max_request_bytes`;
//! * an **atomic write is never merged with a normal one** (counted as a refused merge);
//! * two contiguous atomic writes merge only when the result still fits one atomic unit of the
//!   device and is aligned to it (so the device still accepts it as one atomic write);
//!   otherwise they stay apart. (With this crate's rule that every atomic write starts on a
//!   unit boundary — [`crate::check_hints`] — two valid atomic writes can never form one, so in
//!   practice contiguous atomic writes are issued separately; the check is kept so that the
//!   queue stays correct if that rule is ever relaxed.)
//!
//! Writes in a batch that overlap keep their submission order: the batch is cut into
//! consecutive segments without overlaps, each of which is sorted and merged on its own, so the
//! device contents afterwards equal those of issuing every write alone, in order.

use crate::error::Result;
use crate::stats::{DeviceStats, QueueStats};
use crate::{check_hints, check_io, BlockDevice, Capabilities, DeviceRef, WriteHints};
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// Options of an [`IoQueue`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// Largest request the queue builds by merging, in bytes (default 512 KiB, Linux's usual
    /// `max_sectors_kb`). A single larger write is issued as it is.
    pub max_request_bytes: usize,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            max_request_bytes: 512 << 10,
        }
    }
}

/// One write of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRequest {
    /// First sector.
    pub sector: u64,
    /// Whole sectors of data.
    pub data: Vec<u8>,
    /// Hints (atomic, stream).
    pub hints: WriteHints,
}

/// A merging request queue in front of a device.
#[derive(Debug)]
pub struct IoQueue {
    inner: DeviceRef,
    opts: QueueOptions,
    stats: Mutex<QueueStats>,
}

impl IoQueue {
    /// Wraps `inner`.
    pub fn new(inner: DeviceRef, opts: QueueOptions) -> IoQueue {
        IoQueue {
            inner,
            opts,
            stats: Mutex::new(QueueStats::default()),
        }
    }

    /// The wrapped device.
    pub fn inner(&self) -> &DeviceRef {
        &self.inner
    }

    /// The queue counters alone.
    pub fn queue_stats(&self) -> QueueStats {
        self.stats.lock().clone()
    }

    /// Issues a batch of writes, sorted and merged (see the module documentation). Every
    /// request is validated before any is issued, so a bad request fails the batch without
    /// side effects. On a device error mid-batch, the writes issued before it stay done.
    pub fn submit_writes(&self, batch: Vec<WriteRequest>) -> Result<()> {
        let caps = self.inner.caps();
        for w in &batch {
            check_io(&caps, w.sector, w.data.len())?;
            check_hints(&caps, w.sector, w.data.len(), w.hints)?;
        }
        let submitted = batch.len() as u64;
        let mut issued = 0u64;
        let mut merged = 0u64;
        let mut refused = 0u64;
        let mut result = Ok(());
        'segments: for mut segment in split_overlapping(batch) {
            segment.sort_by_key(|w| w.sector);
            let mut it = segment.into_iter();
            let Some(mut cur) = it.next() else { continue };
            for next in it {
                match self.can_merge(&caps, &cur, &next) {
                    Merge::Yes => {
                        cur.data.extend_from_slice(&next.data);
                        merged += 1;
                    }
                    verdict => {
                        if verdict == Merge::RefusedAtomic {
                            refused += 1;
                        }
                        issued += 1;
                        if let Err(e) = self.inner.write(cur.sector, &cur.data, cur.hints) {
                            result = Err(e);
                            break 'segments;
                        }
                        cur = next;
                    }
                }
            }
            issued += 1;
            if let Err(e) = self.inner.write(cur.sector, &cur.data, cur.hints) {
                result = Err(e);
                break;
            }
        }
        let mut s = self.stats.lock();
        s.submitted_writes += submitted;
        s.issued_writes += issued;
        s.merged_writes += merged;
        s.refused_atomic_merges += refused;
        result
    }

    fn can_merge(&self, caps: &Capabilities, a: &WriteRequest, b: &WriteRequest) -> Merge {
        let a_sectors = (a.data.len() / caps.sector_size) as u64;
        if a.sector + a_sectors != b.sector || a.hints.stream != b.hints.stream {
            return Merge::No;
        }
        if a.hints.atomic != b.hints.atomic {
            return Merge::RefusedAtomic;
        }
        let len = a.data.len() + b.data.len();
        if len > self.opts.max_request_bytes {
            return Merge::No;
        }
        if a.hints.atomic && check_hints(caps, a.sector, len, a.hints).is_err() {
            return Merge::No;
        }
        Merge::Yes
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Merge {
    Yes,
    No,
    RefusedAtomic,
}

/// Cuts a batch, in submission order, into segments whose requests do not overlap.
fn split_overlapping(batch: Vec<WriteRequest>) -> Vec<Vec<WriteRequest>> {
    let mut segments = Vec::new();
    let mut current: Vec<WriteRequest> = Vec::new();
    // start -> end of the ranges in the current segment (non-overlapping, so ordered by both).
    let mut ranges: BTreeMap<u64, u64> = BTreeMap::new();
    for w in batch {
        let start = w.sector;
        let end = start + (w.data.len() / crate::SECTOR_SIZE) as u64;
        let overlaps = ranges
            .range(..end)
            .next_back()
            .is_some_and(|(_, &e)| e > start);
        if overlaps {
            segments.push(std::mem::take(&mut current));
            ranges.clear();
        }
        ranges.insert(start, end);
        current.push(w);
    }
    if !current.is_empty() {
        segments.push(current);
    }
    segments
}

// Counts the writes it passes on and reports its queue; the rest is the device's.
impl crate::DelegateDevice for IoQueue {
    fn inner(&self) -> &dyn BlockDevice {
        &*self.inner
    }

    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        self.inner.write(sector, buf, hints)?;
        let mut s = self.stats.lock();
        s.submitted_writes += 1;
        s.issued_writes += 1;
        Ok(())
    }

    fn stats(&self) -> DeviceStats {
        let mut s = self.inner.stats();
        s.queue = Some(self.queue_stats());
        s
    }

    fn reset_stats(&self) {
        self.inner.reset_stats();
        *self.stats.lock() = QueueStats::default();
    }

    fn describe(&self) -> String {
        format!(
            "queue(max_request={}) -> {}",
            crate::units::format_size(self.opts.max_request_bytes as u64),
            self.inner.describe()
        )
    }
}
