//! Typed errors of the device layer. Every message names the problem and, where there is one,
//! the fix.

use std::path::PathBuf;

/// Result alias for the device layer.
pub type Result<T, E = DeviceError> = std::result::Result<T, E>;

/// Everything that can go wrong below the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// A buffer whose length is not a whole number of sectors, or whose address is not aligned
    /// where the device needs it (O_DIRECT).
    #[error(
        "misaligned I/O: {what}; use buffers that are a multiple of {sector_size} bytes{extra}"
    )]
    Misaligned {
        /// Which length or address is off.
        what: String,
        /// The sector size the I/O must be a multiple of.
        sector_size: usize,
        /// More of the fix (e.g. the alignment O_DIRECT needs), or empty.
        extra: &'static str,
    },
    /// An address range that does not fit in the device.
    #[error(
        "out of range: sectors {start}..{end} but the device has {capacity_sectors} sectors \
         of 4 KiB; address inside the device or give it a larger capacity"
    )]
    OutOfRange {
        /// First sector asked for.
        start: u64,
        /// Sector after the last one asked for.
        end: u64,
        /// Sectors the device has.
        capacity_sectors: u64,
    },
    /// An atomic write the device cannot honour (misaligned, too large, or no atomic support).
    #[error("atomic write rejected: {0}")]
    AtomicRejected(String),
    /// Atomic writes of `unit` bytes asked of a file (`atomic=SIZE`, or the engine's
    /// `--torn atomic`) whose file system does not offer them; `reported` is what statx said.
    #[error(
        "no {size} atomic writes: {reported}. Atomic writes of files need a file \
         system that offers them: XFS formatted with reflink (mkfs.xfs -m reflink=1) on Linux \
         >= 6.16 offers them in software (copy-on-write), from one block up to a maximum the mount \
         option max_atomic_write=SIZE raises; scripts/xfs-atomic.sh builds one on a loop device. \
         Or use torn-write protection doublewrite",
        size = crate::human::format_size(*.unit as u64)
    )]
    NoAtomicWrites {
        /// The file.
        path: PathBuf,
        /// Atomic write size asked for, bytes.
        unit: usize,
        /// What the file system reported (statx).
        reported: String,
    },
    /// A stream id beyond the device's stream count.
    #[error("stream {stream} does not exist: the device has {streams} stream(s); set streams=N")]
    BadStream {
        /// The stream asked for.
        stream: u16,
        /// Streams the device has.
        streams: u16,
    },
    /// Bad configuration: geometry, preset keys, option values.
    #[error("bad device configuration: {0}")]
    Config(String),
    /// An emulated SSD whose capacity is too small to keep one write point per parallel
    /// unit for every stream, even with the smallest erase blocks (see `ssd::layout`).
    #[error(
        "capacity {} is too small for this SSD geometry: {reason}; raise capacity to at least \
         {}, {fix}",
        crate::human::format_size(*.capacity),
        crate::human::format_size(*.min_capacity)
    )]
    CapacityTooSmall {
        /// The capacity asked for, bytes.
        capacity: u64,
        /// The smallest capacity that holds the geometry at this op, bytes.
        min_capacity: u64,
        /// What does not fit.
        reason: String,
        /// The other ways out (op, streams, stripe).
        fix: String,
    },
    /// A trace file line that cannot be parsed.
    #[error("trace {path}:{line}: {msg}")]
    Trace {
        /// The trace file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong with the line.
        msg: String,
    },
    /// The emulated device ran out of free flash blocks (over-provisioning too small for the
    /// workload and GC could not reclaim space).
    #[error("device full: {0}")]
    Full(String),
    /// A read or write shorter than asked (a short file or block device).
    #[error("short {op} on {path}: {done} of {wanted} bytes; the file or device is smaller than expected")]
    Short {
        /// `read` or `write`.
        op: &'static str,
        /// The file or device.
        path: PathBuf,
        /// Bytes transferred.
        done: usize,
        /// Bytes asked for.
        wanted: usize,
    },
    /// An operation the device does not support (e.g. power_cut on a real file).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// An OS error with the path it happened on.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or device.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl DeviceError {
    /// Convenience constructor for configuration errors.
    pub fn config(msg: impl Into<String>) -> Self {
        Self::Config(msg.into())
    }

    /// Wraps an OS error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
