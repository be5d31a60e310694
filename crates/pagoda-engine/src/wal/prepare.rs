//! A log ready at open, made ready ahead of its writer.
//!
//! Log writes must not allocate blocks: an fdatasync after a write into a hole (or into an
//! unwritten extent from `fallocate`) also commits the file system's metadata, several times
//! slower than a sync of data alone. The log file used to be written out with zeros when it
//! was created (2.1 s for the 1 GiB log of a 1 GiB pool, charged to the first open). Now a new
//! log file is created sparse, and its ring is made ready (zeros written and synced) ahead of
//! the log's write point: by a background thread that keeps [`AHEAD`] bytes ready, or, when the
//! writer overtakes it, by the round that needs the room. Ready space is always a prefix of the
//! ring (the writer never writes past it), so how much of an existing log file is ready can be
//! read back from the blocks the file holds. Once the ring is ready to its end (one lap),
//! nothing more is done. Zeros go only beyond everything the log ever wrote, so they never
//! touch a group recovery could need.

use crate::error::Result;
use crate::format::SECTOR;
use pagoda_device::aligned::AlignedBuf;
use pagoda_device::{DeviceRef, WriteHints};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How far ahead of the log's end the background thread keeps the ring ready (at most a
/// quarter of the ring).
pub(crate) const AHEAD: u64 = 64 << 20;

/// Zeros written per request (at most a sixteenth of the ring, so that on the small rings of
/// the crash tests the writer and the zeros meet often).
const CHUNK: u64 = 4 << 20;

/// Chunk size for a ring of `capacity` bytes: whole sectors.
fn chunk(capacity: u64) -> u64 {
    (capacity / 16).clamp(SECTOR as u64, CHUNK) / SECTOR as u64 * SECTOR as u64
}

/// The background thread syncs after this many bytes of zeros (so their allocation is
/// durable before a log sync would have to commit it).
const SYNC_EVERY: u64 = 16 << 20;

/// The ready prefix of a log ring.
#[derive(Debug)]
pub(crate) struct Prepare {
    /// The ready prefix, locked while zeros are written past it, so a round never writes
    /// where zeros are still going.
    ready: Mutex<Ready>,
    /// `ready`, readable without the lock (a round's fast check).
    hint: AtomicU64,
    capacity: u64,
    stream: u16,
}

/// The ready prefix and the zeros that grow it (used only under its lock).
#[derive(Debug)]
struct Ready {
    /// Ring bytes from its start that are allocated (zeros or log).
    end: u64,
    zeros: AlignedBuf,
}

impl Prepare {
    /// A ring of `capacity` bytes whose first `ready` bytes are allocated (a sector multiple).
    pub(crate) fn new(capacity: u64, ready: u64, stream: u16) -> Self {
        let ready = ready.min(capacity) / SECTOR as u64 * SECTOR as u64;
        Self {
            ready: Mutex::new(Ready {
                end: ready,
                zeros: AlignedBuf::default(),
            }),
            hint: AtomicU64::new(ready),
            capacity,
            stream,
        }
    }

    /// Ring bytes ready.
    pub(crate) fn ready(&self) -> u64 {
        self.hint.load(Ordering::Acquire)
    }

    /// Whether the whole ring is ready (nothing left to do).
    pub(crate) fn complete(&self) -> bool {
        self.ready() >= self.capacity
    }

    /// Makes the ring ready up to byte `end` (a round about to write below it), writing the
    /// zeros itself if the background thread has not got there. No sync: the round's own
    /// sync follows.
    pub(crate) fn ensure(&self, dev: &DeviceRef, end: u64) -> Result<()> {
        let end = end.min(self.capacity);
        if self.ready() >= end {
            return Ok(());
        }
        let mut ready = self.ready.lock();
        while ready.end < end {
            self.zero_chunk(dev, &mut ready)?;
        }
        Ok(())
    }

    /// One step of the background thread: makes up to [`SYNC_EVERY`] more bytes ready if the
    /// ready prefix ends less than [`AHEAD`] past the log's `end`, then syncs them. Returns
    /// whether it wrote anything.
    pub(crate) fn step(&self, dev: &DeviceRef, end: u64) -> Result<bool> {
        let target = end
            .saturating_add(AHEAD.min(self.capacity / 4))
            .min(self.capacity);
        let mut wrote = false;
        let mut done = 0;
        while done < SYNC_EVERY {
            let mut ready = self.ready.lock();
            if ready.end >= target {
                break;
            }
            done += self.zero_chunk(dev, &mut ready)?;
            wrote = true;
        }
        if wrote {
            dev.flush()?;
        }
        Ok(wrote)
    }

    /// Writes zeros from the ready end to the next chunk boundary (or the ring's end) and
    /// moves the end there; returns the bytes made ready.
    fn zero_chunk(&self, dev: &DeviceRef, ready: &mut Ready) -> Result<u64> {
        let chunk = chunk(self.capacity);
        let at = ready.end;
        let end = ((at / chunk + 1) * chunk).min(self.capacity);
        let len = (end - at) as usize;
        if ready.zeros.len() < len {
            ready.zeros.resize(chunk as usize);
        }
        dev.write(
            (SECTOR as u64 + at) / SECTOR as u64,
            &ready.zeros.as_slice()[..len],
            WriteHints::stream(self.stream),
        )?;
        ready.end = end;
        self.hint.store(end, Ordering::Release);
        Ok(end - at)
    }
}

/// Ring bytes of a log file that are ready, from the blocks it holds (`allocated` bytes):
/// ready space is a prefix (sector 0, the log header, then the ring), rounded down to a
/// whole chunk in case the file system counts a block or two of its own.
pub(crate) fn ready_from_allocated(allocated: u64, capacity: u64) -> u64 {
    let ring = allocated.saturating_sub(SECTOR as u64);
    if ring >= capacity {
        capacity
    } else {
        let c = chunk(capacity);
        ring / c * c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagoda_device::mem::MemDevice;
    use std::sync::Arc;

    #[test]
    fn ready_space_grows_as_a_prefix_and_never_past_the_ring() {
        let dev: DeviceRef = Arc::new(MemDevice::with_capacity(4096 + (10 << 20)).unwrap());
        let p = Prepare::new(10 << 20, 0, 0);
        p.ensure(&dev, 5000).unwrap();
        assert_eq!(p.ready(), chunk(10 << 20));
        assert_eq!(chunk(10 << 20), 640 << 10);
        while p.step(&dev, 10 << 20).unwrap() {}
        assert!(p.complete());
        assert_eq!(p.ready(), 10 << 20);
        assert!(!p.step(&dev, 10 << 20).unwrap());
        assert_eq!(
            ready_from_allocated(4096 + (700 << 10), 10 << 20),
            640 << 10
        );
        assert_eq!(ready_from_allocated(u64::MAX, 10 << 20), 10 << 20);
    }
}
