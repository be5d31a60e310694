//! Counters a [`Db`] reports: buffer, log, commits, recovery, profile.

use super::Db;
use crate::buffer::flash_cache::FlashCacheStats;
use crate::options::{CommitMode, TornMode};
use crate::profile::ProfileStats;
use std::sync::atomic::{AtomicU64, Ordering};

/// What recovery did at the last open.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RecoveryStats {
    /// Wall time of recovery in milliseconds.
    pub duration_ms: f64,
    /// Pages read from the data device during recovery.
    pub pages_read: u64,
    /// Commit records replayed.
    pub records_replayed: u64,
    /// Log groups read.
    pub log_groups: u64,
    /// Torn pages repaired (from the double-write area, or from full page images in the log).
    pub torn_pages_repaired: u64,
    /// Pages found corrupt and not repairable (mode `none`).
    pub corrupt_pages: Vec<u64>,
    /// Whether the log ended in a torn, unacknowledged group.
    pub torn_log_tail: bool,
    /// Checkpoint LSN recovery started from.
    pub checkpoint_lsn: u64,
    /// Highest commit timestamp recovered.
    pub last_cts: u64,
    /// Whether recovery started from the older superblock copy because the newer one was
    /// damaged or torn (the log holds the older copy's redo range too: nothing committed is
    /// lost).
    pub superblock_fallback: bool,
    /// Which superblock copy was found damaged, why, and which copy recovery used (the open's
    /// checkpoint then wrote over the damaged one).
    pub superblock_damage: Option<String>,
}

/// Buffer pool counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BufferStats {
    /// Page requests served from memory.
    pub hits: u64,
    /// Page requests that read the device.
    pub misses: u64,
    /// hits / (hits + misses).
    pub hit_ratio: f64,
    /// Pages read.
    pub reads: u64,
    /// Pages written in place.
    pub writes: u64,
    /// Pages evicted.
    pub evictions: u64,
    /// Cleaner batches.
    pub cleaner_batches: u64,
    /// Pages written to the double-write area.
    pub doublewrite_pages: u64,
    /// Pages written in place without a double-write copy (torn mode `doublewrite`; always 0
    /// in `doublewrite-full`): the log recovery would read holds their image.
    pub doublewrite_skipped: u64,
    /// Frames in the pool.
    pub frames: u64,
    /// Dirty frames now.
    pub dirty_frames: u64,
}

/// Counters of a [`Db`] (serialisable for `--json`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DbStats {
    /// Buffer pool.
    pub buffer: BufferStats,
    /// Committed write transactions.
    pub commits: u64,
    /// Transactions aborted by a write-write conflict.
    pub conflicts: u64,
    /// Log bytes written.
    pub log_bytes: u64,
    /// Log syncs.
    pub log_syncs: u64,
    /// Commit records per log sync (group commit factor).
    pub commits_per_sync: f64,
    /// Checkpoints taken.
    pub checkpoints: u64,
    /// Of those, background checkpoints whose pacing held their page writes back at least once
    /// (one hurried from the start is not counted).
    pub paced_checkpoints: u64,
    /// Log bytes in use (since the last checkpoint).
    pub log_used_bytes: u64,
    /// Versions held in memory for snapshots.
    pub mvcc_versions: u64,
    /// Recovery at the last open.
    pub recovery: RecoveryStats,
    /// Page size.
    pub page_size: usize,
    /// Torn-write mode.
    pub torn: TornMode,
    /// Failure reason, once the database refuses writes.
    pub failed: Option<String>,
    /// Commit mode.
    pub commit_mode: CommitMode,
    /// Pipelined commits admitted and not yet durable.
    pub pipelined_inflight: u64,
    /// Per-phase time of transactions and of the log path.
    pub profile: ProfileStats,
    /// The flash cache, when one is configured.
    pub flash_cache: Option<FlashCacheStats>,
}

/// Result of a checkpoint.
#[derive(Clone, Copy, Debug)]
pub struct CheckpointInfo {
    /// Redo will start here.
    pub lsn: u64,
    /// Milliseconds taken.
    pub duration_ms: f64,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) commits: AtomicU64,
    pub(super) conflicts: AtomicU64,
    pub(super) checkpoints: AtomicU64,
    pub(super) paced_checkpoints: AtomicU64,
}

impl Db {
    /// Counters.
    pub fn stats(&self) -> DbStats {
        let i = &self.inner;
        let pc = &i.pool.counters;
        let hits = pc.hits.sum(0);
        let misses = pc.misses.load(Ordering::Relaxed);
        let commits = i.wal.counters.commits.load(Ordering::Relaxed);
        let syncs = i.wal.counters.syncs.load(Ordering::Relaxed);
        let mut recovery = i.recovery.clone();
        let (ms, reads) = *i.rec_times.lock();
        recovery.duration_ms = ms;
        recovery.pages_read = reads;
        recovery.corrupt_pages = i.corrupt.read().iter().copied().collect();
        DbStats {
            buffer: BufferStats {
                hits,
                misses,
                hit_ratio: if hits + misses == 0 {
                    0.0
                } else {
                    hits as f64 / (hits + misses) as f64
                },
                reads: pc.reads.load(Ordering::Relaxed),
                writes: pc.writes.load(Ordering::Relaxed),
                evictions: pc.evictions.load(Ordering::Relaxed),
                cleaner_batches: pc.cleaner_batches.load(Ordering::Relaxed),
                doublewrite_pages: pc.dw_writes.load(Ordering::Relaxed),
                doublewrite_skipped: pc.dw_skipped.load(Ordering::Relaxed),
                frames: i.pool.frames() as u64,
                dirty_frames: i.pool.dirty_frames() as u64,
            },
            commits: i.counters.commits.load(Ordering::Relaxed),
            conflicts: i.counters.conflicts.load(Ordering::Relaxed),
            log_bytes: i.wal.counters.bytes.load(Ordering::Relaxed),
            log_syncs: syncs,
            commits_per_sync: if syncs == 0 {
                0.0
            } else {
                commits as f64 / syncs as f64
            },
            checkpoints: i.counters.checkpoints.load(Ordering::Relaxed),
            paced_checkpoints: i.counters.paced_checkpoints.load(Ordering::Relaxed),
            log_used_bytes: i.wal.used(),
            mvcc_versions: i.mvcc.versions() as u64,
            recovery,
            page_size: i.pool.page_size(),
            torn: i.opts.torn,
            failed: i.failed.lock().as_ref().map(ToString::to_string),
            commit_mode: i.opts.commit,
            pipelined_inflight: i.pipe.as_ref().map_or(0, |p| p.inflight() as u64),
            profile: i.wal.profile.stats(),
            flash_cache: i.pool.flash_stats(),
        }
    }

    /// Counters of the data and log devices (host I/O, and FTL counters on an emulated SSD).
    pub fn device_stats(&self) -> (pagoda_device::DeviceStats, pagoda_device::DeviceStats) {
        (self.inner.data.stats(), self.inner.wal.device().stats())
    }

    /// Counters of the flash cache device, when a flash cache is configured.
    pub fn flash_device_stats(&self) -> Option<pagoda_device::DeviceStats> {
        self.inner.pool.flash_device().map(|d| d.stats())
    }

    /// Starts recording every page fix of the buffer pool (hit or miss, by page id) for a
    /// miss-ratio curve ([`crate::sizing`]), keeping the pages `rate` samples; replaces a
    /// recording already running. Off (the default) the recorder costs one relaxed load per
    /// fix; on, 16 bytes per kept reference, up to [`crate::sizing::PageTrace::MAX_REFERENCES`].
    pub fn start_page_trace(&self, rate: crate::sizing::ShardsRate) {
        self.inner.pool.start_trace(rate);
    }

    /// Stops recording and returns the references recorded since
    /// [`Db::start_page_trace`] (an empty trace when none was started).
    pub fn take_page_trace(&self) -> crate::sizing::PageTrace {
        self.inner.pool.take_trace()
    }
}
