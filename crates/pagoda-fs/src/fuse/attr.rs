//! Attributes and small conversions between `pagoda-fs` and fuser.

use super::{CTL_CMD, CTL_DIR};
use crate::error::FsError;
use crate::fs::Attr;
use crate::layout::{Kind, Time};
use fuser::{FileAttr, FileType, TimeOrNow};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// FUSE 7.36 (Linux 6.2), not in fuser 0.15's constants; older kernels ignore the bit.
const FOPEN_PARALLEL_DIRECT_WRITES: u32 = 1 << 6;

pub(super) fn to_system(t: Time) -> SystemTime {
    if t.secs >= 0 {
        UNIX_EPOCH + Duration::new(t.secs as u64, t.nanos)
    } else {
        UNIX_EPOCH
    }
}

pub(super) fn from_time_or_now(t: TimeOrNow) -> Time {
    let st = match t {
        TimeOrNow::SpecificTime(st) => st,
        TimeOrNow::Now => SystemTime::now(),
    };
    let d = st.duration_since(UNIX_EPOCH).unwrap_or_default();
    Time {
        secs: d.as_secs() as i64,
        nanos: d.subsec_nanos(),
    }
}

pub(super) fn file_type(k: Kind) -> FileType {
    match k {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
    }
}

pub(super) fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: a.ino,
        size: a.size,
        blocks: a.blocks * 8,
        atime: to_system(a.atime),
        mtime: to_system(a.mtime),
        ctime: to_system(a.ctime),
        crtime: to_system(a.ctime),
        kind: file_type(a.kind),
        perm: a.perm as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

pub(super) fn control_attr(ino: u64) -> FileAttr {
    let now = SystemTime::now();
    let (kind, perm, nlink) = if ino == CTL_DIR {
        (FileType::Directory, 0o755, 2)
    } else {
        (
            FileType::RegularFile,
            if ino == CTL_CMD { 0o200 } else { 0o444 },
            1,
        )
    };
    FileAttr {
        ino,
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm,
        nlink,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// An `O_DIRECT` open bypasses the kernel's page cache (FOPEN_DIRECT_IO), so each write
/// arrives whole, as the program issued it, and can be handed to the device atomically.
pub(super) fn direct_io(flags: i32) -> u32 {
    if flags & libc::O_DIRECT != 0 {
        // Without it the kernel lets one direct write per file in at a time (inode lock).
        fuser::consts::FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES
    } else {
        0
    }
}

pub(super) fn name_str(name: &OsStr) -> Result<&str, FsError> {
    std::str::from_utf8(name.as_bytes())
        .map_err(|_| FsError::BadName(name.to_string_lossy().into_owned()))
}
