//! pagoda-fs: a small file system on a pagoda [`BlockDevice`](pagoda_device::BlockDevice), so
//! that real programs (a real MariaDB) run on an emulated SSD, and its FUSE adapter.
//!
//! * [`Fs`] is the file system core: an inode table with extents of 4 KiB sectors, directories,
//!   symlinks, hard links, a free-space bitmap. Metadata lives in memory; a commit on fsync
//!   writes the whole inode table into the other of two slots (`layout.rs`). File data goes to
//!   the device at once, in place, on the stream the [`StreamRules`] give its byte range.
//!   fsync/fdatasync flush the device's volatile cache; after a power cut the file system
//!   is the one of the last commit, with every file's data up to its last fsync.
//! * [`fuse::PagodaFuse`] serves an [`Fs`] through FUSE (crate `fuser`, without libfuse: the
//!   kernel mount needs root and `/dev/fuse`, nothing else).
//! * [`backing::ImageDevice`] keeps the device's contents in an image file that is durable at
//!   each flush, so an fsynced file outlives the process (`pagoda mount --backing`).

#![warn(missing_docs)]

mod alloc;
pub mod backing;
mod data;
mod error;
mod fs;
pub mod fuse;
mod gate;
mod io;
mod layout;
mod namespace;
pub mod streams;

pub use error::{FsError, Result};
pub use fs::{Attr, Fs, FsOptions, FsStats, SetAttr, StatFs, ROOT};
pub use layout::{Kind, Time};
pub use streams::{StreamRule, StreamRuleError, StreamRules};
