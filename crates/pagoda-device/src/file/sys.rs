//! What the kernel says about one open file: `statx` (atomic-write limits, direct-I/O alignment)
//! and `fstatfs` (the file system's name, so that a refusal can say where the file is).

use crate::error::{DeviceError, Result};
use crate::units::format_size;
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Atomic-write support of one file as `statx(STATX_WRITE_ATOMIC)` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicReport {
    /// The kernel does not answer `STATX_WRITE_ATOMIC` (Linux < 6.11, or statx failed).
    NotReported,
    /// The kernel answers, with no unit: the file system (or the device under it) offers none.
    Unsupported,
    /// Writes of a power of two from `min` to `max` bytes, aligned to their length, are untorn.
    Range {
        /// `stx_atomic_write_unit_min`.
        min: usize,
        /// `stx_atomic_write_unit_max`.
        max: usize,
        /// `stx_atomic_write_unit_max_opt`: above this size the kernel falls back to a slower
        /// method (XFS: copy-on-write remap instead of the device's atomic command); 0 = none.
        max_opt: usize,
    },
}

impl AtomicReport {
    /// Whether an atomic write of `unit` bytes is in the reported range.
    pub fn covers(&self, unit: usize) -> bool {
        matches!(*self, AtomicReport::Range { min, max, .. } if min <= unit && unit <= max)
    }
}

/// `statx(2)` on an open file with `mask`, through the raw system call (so it works whatever
/// the C library's version). `None` when the call fails.
pub(crate) fn statx_fd(file: &File, mask: u32) -> Option<libc::statx> {
    // SAFETY: `statx` is plain old data; all-zero is a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let empty = c"";
    // SAFETY: the fd is open for the duration of the call, the path is a valid NUL-terminated
    // empty string used with AT_EMPTY_PATH, and `stx` is a writable `struct statx`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_statx,
            file.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH,
            mask,
            &mut stx as *mut libc::statx,
        )
    };
    (rc == 0).then_some(stx)
}

/// Atomic-write support of an open file. Only meaningful on a file opened with O_DIRECT:
/// the kernel honours `RWF_ATOMIC` on direct I/O only.
pub fn atomic_report(file: &File) -> AtomicReport {
    let Some(stx) = statx_fd(file, libc::STATX_WRITE_ATOMIC) else {
        return AtomicReport::NotReported;
    };
    if stx.stx_mask & libc::STATX_WRITE_ATOMIC == 0 {
        return AtomicReport::NotReported;
    }
    let (min, max) = (
        stx.stx_atomic_write_unit_min as usize,
        stx.stx_atomic_write_unit_max as usize,
    );
    if min == 0 || max < min {
        return AtomicReport::Unsupported;
    }
    AtomicReport::Range {
        min,
        max,
        max_opt: stx.stx_atomic_write_unit_max_opt as usize,
    }
}

/// `(memory, file offset)` alignment O_DIRECT needs (`STATX_DIOALIGN`), when reported.
pub(crate) fn dio_alignment(file: &File) -> Option<(usize, usize)> {
    let stx = statx_fd(file, libc::STATX_DIOALIGN)?;
    if stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return None;
    }
    Some((
        stx.stx_dio_mem_align as usize,
        stx.stx_dio_offset_align as usize,
    ))
}

/// The name of the file system holding an open file ("ext4", "xfs", ...), from `fstatfs`.
pub fn fs_name(file: &File) -> String {
    // SAFETY: `statfs` is plain old data; all-zero is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the fd is open and `st` is a writable `struct statfs`.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    if rc != 0 {
        return "unknown file system".to_string();
    }
    magic_name(st.f_type as u64)
}

/// The name of the file system holding `path`, or its directory when it does not exist yet.
pub(crate) fn fs_name_at(path: &Path) -> String {
    let probe = if path.exists() {
        path
    } else {
        path.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    };
    match File::open(probe) {
        Ok(f) => fs_name(&f),
        Err(_) => "unknown file system".to_string(),
    }
}

/// `statfs.f_type` magic numbers of the file systems a database file is likely to sit on.
fn magic_name(magic: u64) -> String {
    let name = match magic {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x794C_7630 => "overlayfs",
        0xF2F5_2010 => "f2fs",
        0x2FC1_2FC1 => "zfs",
        0xCA45_1A4E => "bcachefs",
        0x6969 => "nfs",
        0x6573_5546 => "fuse",
        0x0102_1997 => "9p",
        _ => return format!("file system type {magic:#x}"),
    };
    name.to_string()
}

/// Checks that atomic writes of `unit` bytes are possible on `file` (opened with O_DIRECT) and
/// returns the smallest atomic write the kernel accepts. The refusal says what statx reported
/// and how to get a file system that offers such writes.
pub(crate) fn check_atomic_unit(path: &Path, file: &File, unit: usize) -> Result<usize> {
    let report = atomic_report(file);
    if report.covers(unit) {
        if let AtomicReport::Range { min, .. } = report {
            return Ok(min);
        }
    }
    let fs = fs_name(file);
    let reported = match report {
        AtomicReport::NotReported => format!(
            "statx does not report atomic write limits on {} ({fs}): this kernel predates \
             STATX_WRITE_ATOMIC (Linux 6.11)",
            path.display()
        ),
        AtomicReport::Unsupported => format!(
            "statx reports no atomic write support on {} ({fs})",
            path.display()
        ),
        AtomicReport::Range { min, max, .. } => format!(
            "statx reports atomic write units {}..{} on {} ({fs}), which do not cover {}",
            format_size(min as u64),
            format_size(max as u64),
            path.display(),
            format_size(unit as u64)
        ),
    };
    Err(DeviceError::NoAtomicWrites {
        path: path.to_path_buf(),
        unit,
        reported,
    })
}

/// Starts write-back of `len` bytes at `offset` from the page cache without waiting for it
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`): a later `fdatasync` then waits for less. Not
/// a durability step (no metadata, no device cache flush). `Ok(false)` when the file system
/// does not support it (a hint, nothing lost).
pub(crate) fn start_writeback(file: &File, offset: u64, len: usize) -> std::io::Result<bool> {
    let (Ok(off), Ok(n)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Ok(false);
    };
    // SAFETY: integers and an fd owned by `file`, which outlives the call.
    let rc =
        unsafe { libc::sync_file_range(file.as_raw_fd(), off, n, libc::SYNC_FILE_RANGE_WRITE) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINVAL | libc::ENOSYS | libc::ESPIPE | libc::EOPNOTSUPP) => Ok(false),
        _ => Err(e),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn statx_syscall_is_called_correctly() {
        let dir = tempfile::tempdir().unwrap();
        let f = File::create(dir.path().join("s")).unwrap();
        f.set_len(12345).unwrap();
        let stx = statx_fd(&f, libc::STATX_SIZE).expect("statx works on Linux ≥ 4.11");
        assert!(stx.stx_mask & libc::STATX_SIZE != 0);
        assert_eq!(stx.stx_size, 12345);
        // Whatever the filesystem, the answer is well-formed.
        if let AtomicReport::Range { min, max, .. } = atomic_report(&f) {
            assert!(min <= max);
        }
        assert!(!fs_name(&f).is_empty());
    }

    #[test]
    fn names_the_common_file_systems() {
        assert_eq!(magic_name(0xEF53), "ext4");
        assert_eq!(magic_name(0x5846_5342), "xfs");
        assert_eq!(magic_name(0x1234), "file system type 0x1234");
    }

    #[test]
    fn a_range_covers_the_units_inside_it() {
        let r = AtomicReport::Range {
            min: 4096,
            max: 8192,
            max_opt: 0,
        };
        assert!(r.covers(4096) && r.covers(8192));
        assert!(!r.covers(16384));
        assert!(!AtomicReport::Unsupported.covers(4096));
    }
}
