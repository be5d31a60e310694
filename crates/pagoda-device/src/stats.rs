//! Device counters, serialised as the `devices` entries of `pagoda bench --json` and as
//! `pagoda ssd synth|replay` write them. Counts are in 4 KiB units.

use serde::{Deserialize, Serialize};

/// Counters of one device. Fields that do not apply to a device stay zero / `None`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceStats {
    /// 4 KiB units read by the host.
    pub host_read_pages: u64,
    /// 4 KiB units written by the host.
    pub host_write_pages: u64,
    /// Host read requests.
    pub host_read_requests: u64,
    /// Host write requests.
    pub host_write_requests: u64,
    /// Flush (cache sync) requests.
    pub flushes: u64,
    /// 4 KiB units trimmed.
    pub trimmed_pages: u64,
    /// Flash unit reads (host reads + GC reads).
    pub flash_reads: u64,
    /// Flash unit programs (host + GC).
    pub flash_programs: u64,
    /// Block erases.
    pub erases: u64,
    /// Garbage-collection victim blocks reclaimed.
    pub gc_runs: u64,
    /// Valid units moved by GC.
    pub copybacks: u64,
    /// `flash_programs / host_write_pages` (0 when nothing was written).
    pub waf: f64,
    /// Per-stream counters (one entry per stream).
    pub streams: Vec<StreamStats>,
    /// Erase counts per block: min / mean / max.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub erase_count: Option<EraseCountStats>,
    /// I/O queue counters when the device sits behind a [`crate::sched::IoQueue`].
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub queue: Option<QueueStats>,
    /// Host page-cache counters when the device sits behind one (`pagecache=SIZE`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub page_cache: Option<PageCacheStats>,
    /// Modeled busy time of the device in microseconds (emulated devices).
    #[serde(default)]
    pub busy_time_us: u64,
}

impl DeviceStats {
    /// Recomputes `waf` from the counts.
    pub fn update_waf(&mut self) {
        self.waf = if self.host_write_pages == 0 {
            0.0
        } else {
            self.flash_programs as f64 / self.host_write_pages as f64
        };
    }
}

/// Counters of one write stream.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamStats {
    /// Stream id.
    pub id: u16,
    /// Host 4 KiB units written on this stream.
    pub host_write_pages: u64,
    /// GC victim blocks of this stream.
    pub gc_runs: u64,
    /// Valid units moved by GC in this stream's blocks.
    pub copybacks: u64,
}

/// Erase-count spread over all blocks (wear).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EraseCountStats {
    /// Fewest erases of any block.
    pub min: u64,
    /// Mean erases per block.
    pub mean: f64,
    /// Most erases of any block.
    pub max: u64,
}

/// I/O queue counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Write requests submitted to the queue.
    pub submitted_writes: u64,
    /// Write requests issued to the device after merging.
    pub issued_writes: u64,
    /// Requests absorbed into a neighbour by merging.
    pub merged_writes: u64,
    /// Merges refused because one side was atomic and the other not.
    pub refused_atomic_merges: u64,
}

/// Host page-cache counters (buffered I/O in front of a device). Pages are 4 KiB.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageCacheStats {
    /// Pages read that the cache held.
    pub read_hit_pages: u64,
    /// Pages read from the device below.
    pub read_miss_pages: u64,
    /// Pages written into the cache by the host.
    pub buffered_pages: u64,
    /// Pages written back to the device.
    pub writeback_pages: u64,
    /// Writeback requests issued to the device (contiguous pages merged).
    pub writeback_requests: u64,
    /// Writebacks a writer ran itself because the cache held no clean page to evict.
    pub forced_writebacks: u64,
    /// Clean pages evicted to make room.
    pub evicted_pages: u64,
    /// Dirty pages held when the counters were read.
    pub dirty_pages: u64,
}
