//! Typed errors of the file system. Each names the problem and, where there is one, the fix.

use pagoda_device::DeviceError;

/// A file-system error.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// No file or directory by that name (ENOENT).
    #[error("no such file or directory")]
    NotFound,
    /// The name is taken (EEXIST).
    #[error("file exists")]
    Exists,
    /// A path component, or the target, is not a directory (ENOTDIR).
    #[error("not a directory")]
    NotDir,
    /// A file operation on a directory (EISDIR).
    #[error("is a directory")]
    IsDir,
    /// Removing a directory that still has entries (ENOTEMPTY).
    #[error("directory not empty")]
    NotEmpty,
    /// No free block left (ENOSPC).
    #[error("no space left on the device: free files or use a larger capacity= in --device")]
    NoSpace,
    /// A file would grow past the device (EFBIG).
    #[error("file too large: a file may not exceed the device capacity ({max} bytes)")]
    TooLarge {
        /// The largest file size, bytes.
        max: u64,
    },
    /// A name that is empty, has a slash, is not UTF-8 or is too long.
    #[error("bad name {0:?}: names are non-empty UTF-8 without '/' and at most 255 bytes")]
    BadName(String),
    /// A bad argument (EINVAL).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// An operation, or a mode of one, this file system does not provide (EOPNOTSUPP).
    #[error("not supported: {0}")]
    Unsupported(String),
    /// The serialized metadata outgrew its region.
    #[error(
        "the metadata no longer fits its region ({need} of {have} bytes): use a larger device"
    )]
    MetadataFull {
        /// Bytes the metadata needs.
        need: usize,
        /// Bytes of the region.
        have: usize,
    },
    /// Formatting a device too small for the layout.
    #[error(
        "device too small for a file system: {capacity} bytes, need at least {need} bytes; \
         use a larger capacity= in --device"
    )]
    TooSmall {
        /// The device capacity, bytes.
        capacity: u64,
        /// The least capacity that holds the layout, bytes.
        need: u64,
    },
    /// Mounting a device without a pagoda file system.
    #[error("the device holds no pagoda file system (no superblock)")]
    NotFormatted,
    /// The on-device metadata fails its checks.
    #[error("file system damaged: {0}")]
    Corrupt(String),
    /// The emulated device lost power; the mount refuses writes.
    #[error(
        "the device's power was cut ({0}); the file system is read-only until it is unmounted \
         and mounted again"
    )]
    PoweredOff(String),
    /// An error of the device below.
    #[error("device error: {0}")]
    Device(#[from] DeviceError),
}

impl FsError {
    /// The errno a FUSE reply carries for this error.
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => libc::ENOENT,
            FsError::Exists => libc::EEXIST,
            FsError::NotDir => libc::ENOTDIR,
            FsError::IsDir => libc::EISDIR,
            FsError::NotEmpty => libc::ENOTEMPTY,
            FsError::NoSpace | FsError::MetadataFull { .. } => libc::ENOSPC,
            FsError::TooLarge { .. } => libc::EFBIG,
            FsError::BadName(n) if n.len() > 255 => libc::ENAMETOOLONG,
            FsError::BadName(_) | FsError::Invalid(_) => libc::EINVAL,
            FsError::Unsupported(_) => libc::EOPNOTSUPP,
            FsError::PoweredOff(_) => libc::EIO,
            FsError::TooSmall { .. }
            | FsError::NotFormatted
            | FsError::Corrupt(_)
            | FsError::Device(_) => libc::EIO,
        }
    }
}

/// Result with [`FsError`].
pub type Result<T> = std::result::Result<T, FsError>;
