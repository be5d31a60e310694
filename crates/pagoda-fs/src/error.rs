//! Typed errors of the file system. Each names the problem and, where there is one, the fix.

use pagoda_device::DeviceError;

/// A file-system error.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("no space left on the device: free files or use a larger capacity= in --device")]
    NoSpace,
    #[error("file too large: a file may not exceed the device capacity ({max} bytes)")]
    TooLarge { max: u64 },
    #[error("bad name {0:?}: names are non-empty UTF-8 without '/' and at most 255 bytes")]
    BadName(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error(
        "the metadata no longer fits its region ({need} of {have} bytes): use a larger device"
    )]
    MetadataFull { need: usize, have: usize },
    #[error(
        "device too small for a file system: {capacity} bytes, need at least {need} bytes; \
         use a larger capacity= in --device"
    )]
    TooSmall { capacity: u64, need: u64 },
    #[error("the device holds no pagoda file system (no superblock)")]
    NotFormatted,
    #[error("file system damaged: {0}")]
    Corrupt(String),
    #[error(
        "the device's power was cut ({0}); the file system is read-only until it is unmounted \
         and mounted again"
    )]
    PoweredOff(String),
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
