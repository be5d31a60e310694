//! The block-device layer of pagoda: everything below the engine.
//!
//! A [`BlockDevice`] reads and writes whole 4 KiB sectors at sector addresses, accepts write
//! hints (atomic, stream id), flushes its volatile cache, trims, and reports capabilities and
//! counters. Implementations: real files ([`file`](mod@file)), RAM ([`mem`]), emulated flash SSDs
//! ([`ssd`]), emulated disks ([`hdd`], [`raid`]); wrappers add an I/O queue ([`sched`]), a host
//! page cache (buffered I/O, the device-string key `pagecache=SIZE`) or capture a trace
//! ([`trace`]), each through one delegation ([`delegate`]). [`spec`] turns a CLI device string
//! into a device.

#![warn(missing_docs)]

pub mod aligned;
pub mod clock;
pub mod delegate;
#[cfg(all(test, feature = "fault-injection"))]
mod delegate_tests;
pub mod error;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod file;
pub mod hdd;
mod human;
pub mod mem;
mod pagecache;
pub mod partition;
pub mod raid;
pub mod sched;
pub mod spec;
pub mod ssd;
pub mod stats;
pub mod trace;
pub mod units;

pub use delegate::DelegateDevice;
pub use error::{DeviceError, Result};
pub use stats::{DeviceStats, EraseCountStats, PageCacheStats, QueueStats, StreamStats};

use std::sync::Arc;

/// The addressing unit of every device: 4 KiB.
pub const SECTOR_SIZE: usize = 4096;

/// Hints attached to a write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WriteHints {
    /// The write must be all-or-nothing across a power cut. It must be aligned to, and no larger
    /// than, the device's atomic-write unit; otherwise the device rejects it.
    pub atomic: bool,
    /// Write stream (placement hint): 0 is the default stream. Devices with one stream accept
    /// only 0.
    pub stream: u16,
    /// The write belongs to a long stream the caller flushes at its end (a bulk load): a
    /// device with a write-back cache starts writing it out now (a file: `sync_file_range`),
    /// so the final flush finds little left. Changes nothing a reader or a power cut sees.
    pub write_behind: bool,
}

impl WriteHints {
    /// A plain write on stream 0.
    pub const NORMAL: Self = Self {
        atomic: false,
        stream: 0,
        write_behind: false,
    };

    /// A plain write on stream `stream`.
    pub fn stream(stream: u16) -> Self {
        Self {
            atomic: false,
            stream,
            write_behind: false,
        }
    }

    /// An atomic write on stream `stream`.
    pub fn atomic(stream: u16) -> Self {
        Self {
            atomic: true,
            stream,
            write_behind: false,
        }
    }

    /// These hints with [`WriteHints::write_behind`] set.
    pub fn behind(self) -> Self {
        Self {
            write_behind: true,
            ..self
        }
    }
}

/// What a device can do. Sizes are bytes unless named otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Always [`SECTOR_SIZE`] today; kept so callers do not hard-code it.
    pub sector_size: usize,
    /// Host-visible size in sectors.
    pub capacity_sectors: u64,
    /// Largest atomic write in bytes (a power of two, multiple of the sector size), or `None`
    /// when the device cannot write atomically. Never claimed without being honoured.
    pub atomic_write_unit: Option<usize>,
    /// Number of write streams (≥ 1).
    pub streams: u16,
    /// Whether [`PowerCut::power_cut`] is available (emulated devices).
    pub power_cut: bool,
}

impl Capabilities {
    /// Capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_sectors * self.sector_size as u64
    }
}

/// A device addressed in 4 KiB sectors. Safe for many threads issuing I/O at once.
///
/// Buffers must be a whole, non-zero number of sectors; addresses must lie inside the device.
/// Violations give [`DeviceError::Misaligned`] or [`DeviceError::OutOfRange`], never a panic.
///
/// A device that wraps another implements [`DelegateDevice`] instead, which forwards every
/// method it does not override; a method added here must be added there too.
pub trait BlockDevice: Send + Sync + std::fmt::Debug {
    /// Capabilities (constant over the device's life).
    fn caps(&self) -> Capabilities;
    /// Reads `buf.len() / 4096` sectors starting at `sector`. Never-written sectors read as zeros.
    fn read(&self, sector: u64, buf: &mut [u8]) -> Result<()>;
    /// Writes `buf` at `sector` with `hints`. Acknowledged writes may sit in a volatile cache
    /// until [`BlockDevice::flush`].
    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()>;
    /// Makes every acknowledged write durable.
    fn flush(&self) -> Result<()>;
    /// Declares `sectors` sectors from `sector` unused; they read as zeros afterwards.
    fn trim(&self, sector: u64, sectors: u64) -> Result<()>;
    /// Counters since creation (or the last [`BlockDevice::reset_stats`]).
    fn stats(&self) -> DeviceStats;
    /// Zeroes the counters (e.g. after preconditioning), keeping the data.
    fn reset_stats(&self) {}
    /// Suspends (`true`) or resumes (`false`) emulated latency. While suspended, requests
    /// complete at once and accrue no busy time, but the device's state (mapping, GC, wear,
    /// head position) evolves exactly as it would: for set-up work whose time nobody
    /// measures, such as a benchmark's load. A no-op where latency is not emulated.
    fn pause_timing(&self, _paused: bool) {}
    /// A short human description, e.g. `sata-ssd(capacity=1GiB, op=0.07)`.
    fn describe(&self) -> String;
    /// The power-cut interface, on devices that emulate one.
    fn as_power_cut(&self) -> Option<&dyn PowerCut> {
        None
    }
}

/// Emulated power loss. Of the acknowledged but unflushed writes an arbitrary subset of 4 KiB
/// sectors survives (a multi-sector write can tear); atomic writes survive whole or not at all.
/// The same seed on the same history gives the same outcome.
pub trait PowerCut {
    /// Cuts power and brings the device back (for an SSD: SPOR rebuilds the mapping).
    fn power_cut(&self, seed: u64) -> Result<PowerCutReport>;

    /// Whether every acknowledged write survives a cut (no cache, or one with power-loss
    /// protection), so that nothing acknowledged can tear.
    fn durable_on_ack(&self) -> bool {
        false
    }
}

/// What a power cut did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PowerCutReport {
    /// Unflushed sectors whose new contents survived.
    pub kept_sectors: u64,
    /// Unflushed sectors whose new contents were lost (the sector reads its previous contents).
    pub dropped_sectors: u64,
    /// Atomic writes that survived whole.
    pub atomic_kept: u64,
    /// Atomic writes dropped whole (some of their sectors may have reached flash; recovery
    /// discarded them).
    pub atomic_dropped: u64,
    /// Units scanned by recovery (SPOR), where it applies.
    pub recovery_scanned_units: u64,
}

/// A shared device handle.
pub type DeviceRef = Arc<dyn BlockDevice>;

/// Checks a request against the device: whole sectors, inside capacity. Returns the sector
/// count. Every implementation calls this first.
pub fn check_io(caps: &Capabilities, sector: u64, len: usize) -> Result<u64> {
    if len == 0 || !len.is_multiple_of(SECTOR_SIZE) {
        return Err(DeviceError::Misaligned {
            what: format!("buffer of {len} bytes"),
            sector_size: SECTOR_SIZE,
            extra: "",
        });
    }
    let n = (len / SECTOR_SIZE) as u64;
    let end = sector.saturating_add(n);
    if end > caps.capacity_sectors {
        return Err(DeviceError::OutOfRange {
            start: sector,
            end,
            capacity_sectors: caps.capacity_sectors,
        });
    }
    Ok(n)
}

/// Checks a sector range (for trim).
pub fn check_range(caps: &Capabilities, sector: u64, sectors: u64) -> Result<()> {
    let end = sector.saturating_add(sectors);
    if end > caps.capacity_sectors {
        return Err(DeviceError::OutOfRange {
            start: sector,
            end,
            capacity_sectors: caps.capacity_sectors,
        });
    }
    Ok(())
}

/// Checks write hints against capabilities: stream exists; an atomic write is aligned to and no
/// larger than the atomic unit.
pub fn check_hints(caps: &Capabilities, sector: u64, len: usize, hints: WriteHints) -> Result<()> {
    if hints.stream >= caps.streams {
        return Err(DeviceError::BadStream {
            stream: hints.stream,
            streams: caps.streams,
        });
    }
    if hints.atomic {
        let Some(unit) = caps.atomic_write_unit else {
            return Err(DeviceError::AtomicRejected(
                "this device has no atomic-write unit; use torn-write protection (doublewrite) \
                 or a device with atomic writes"
                    .into(),
            ));
        };
        let offset = sector * SECTOR_SIZE as u64;
        if len > unit {
            return Err(DeviceError::AtomicRejected(format!(
                "{len} bytes is larger than the atomic unit of {unit} bytes; split the write"
            )));
        }
        if !offset.is_multiple_of(unit as u64) {
            return Err(DeviceError::AtomicRejected(format!(
                "byte offset {offset} (+{len}) crosses a {unit}-byte atomic-unit boundary; \
                 align atomic writes to the unit"
            )));
        }
    }
    Ok(())
}
