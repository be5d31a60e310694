//! Real files and block devices (`file:PATH`).
//!
//! A [`FileDevice`] maps 4 KiB sectors onto a regular file or an existing block device with
//! positional I/O (`pread`/`pwrite`), so any number of threads can do I/O at once without a lock.
//!
//! * **Capacity.** A block device has the size the kernel reports (seek to its end); a smaller
//!   `capacity_bytes` limits it. A regular file is created if missing and extended (sparsely,
//!   with `ftruncate`) to `capacity_bytes`, or to [`DEFAULT_FILE_CAPACITY`] (64 GiB logical)
//!   when none is given, or kept at its own size when that is larger. Sectors never written
//!   read as zeros because the file is sparse.
//! * **O_DIRECT** (`direct: true`). The kernel needs 4 KiB-aligned buffers. A caller buffer that
//!   is not aligned is copied through an aligned bounce buffer (counted by
//!   [`FileDevice::bounce_copies`]) instead of being rejected. A filesystem that refuses
//!   O_DIRECT (tmpfs) gives a [`DeviceError::Config`] saying so.
//! * **flush** is `fdatasync`.
//! * **trim** is `fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)`: on a regular file it
//!   frees the blocks; on a block device the kernel zeroes the range only when the device can
//!   do so without writing (discard that reads back zeros), otherwise the device answers
//!   [`DeviceError::Unsupported`].
//! * **Atomic writes** use `pwritev2(RWF_ATOMIC)` and are offered only when `statx` reports an
//!   atomic-write unit for the file (`STATX_WRITE_ATOMIC`) *and* the device is opened with
//!   O_DIRECT (the kernel only honours `RWF_ATOMIC` on direct I/O). Otherwise
//!   `atomic_write_unit` is `None`: never claimed without the kernel's guarantee.
//!   `atomic=SIZE` asks for atomic writes of exactly SIZE (the engine's page): it turns O_DIRECT
//!   on, and the open fails with [`DeviceError::NoAtomicWrites`] (what statx reported, how to
//!   get a file system that offers them) unless statx's range covers SIZE. On XFS with reflink
//!   (Linux ≥ 6.16) these writes are copy-on-write remaps done by the file system: untorn
//!   without hardware support, at the cost of allocation and log work per write.
//!   Without `atomic=`, a direct file reports statx's largest unit.
//! * **O_DIRECT alignment.** Offsets are whole 4 KiB sectors; the open refuses a file whose
//!   `STATX_DIOALIGN` asks for more than 4 KiB (memory or offset), which no bounce buffer fixes.
//! * **Streams** are a placement hint only: ids below `streams` are accepted and counted.

use crate::aligned::AlignedBuf;
use crate::error::{DeviceError, Result};
use crate::stats::{DeviceStats, StreamStats};
use crate::{
    check_hints, check_io, check_range, BlockDevice, Capabilities, WriteHints, SECTOR_SIZE,
};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

mod sys;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
pub use sys::{atomic_report, fs_name, AtomicReport};

/// Logical size of a regular file opened without a capacity: 64 GiB (sparse, costs nothing).
pub const DEFAULT_FILE_CAPACITY: u64 = 64 << 30;

/// Alignment O_DIRECT buffers get.
const DIRECT_ALIGN: usize = 4096;

/// Options of [`FileDevice::open`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOptions {
    /// Open with O_DIRECT (bypass the page cache).
    pub direct: bool,
    /// Host-visible size in bytes (a multiple of 4 KiB). `None`: the block device's size, or
    /// [`DEFAULT_FILE_CAPACITY`] (or the file's own size when larger) for a regular file.
    pub capacity_bytes: Option<u64>,
    /// Number of write streams accepted (hint only), 1..=64.
    pub streams: u16,
    /// Atomic writes of exactly this many bytes (`atomic=SIZE`; implies O_DIRECT). The open
    /// fails unless statx reports a range covering it. `None`: see the module docs.
    pub atomic: Option<usize>,
}

impl Default for FileOptions {
    fn default() -> Self {
        Self {
            direct: false,
            capacity_bytes: None,
            streams: 1,
            atomic: None,
        }
    }
}

impl FileOptions {
    /// Applies one `key=value` option of a device spec: `direct=0|1`, `capacity=SIZE`,
    /// `streams=N`, `atomic=SIZE` (0: none asked).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "direct" => {
                self.direct = match value {
                    "1" | "true" | "on" | "yes" => true,
                    "0" | "false" | "off" | "no" => false,
                    _ => {
                        return Err(DeviceError::config(format!(
                            "direct={value}: expected 1 or 0"
                        )))
                    }
                }
            }
            "capacity" => self.capacity_bytes = Some(crate::units::parse_size(value)?),
            "streams" => {
                self.streams = value.parse().map_err(|_| {
                    DeviceError::config(format!("streams={value}: expected a number 1..=64"))
                })?;
            }
            "atomic" => {
                let size = crate::units::parse_size(value)?;
                self.atomic = (size != 0).then_some(size as usize);
            }
            _ => {
                return Err(DeviceError::config(format!(
                    "file devices do not take key '{key}'; they take direct, capacity, streams, \
                     atomic"
                )))
            }
        }
        Ok(())
    }
}

/// A regular file or block device used as a [`BlockDevice`].
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    path: PathBuf,
    caps: Capabilities,
    direct: bool,
    block_device: bool,
    /// Smallest atomic write the kernel accepts (bytes), when atomic writes are on.
    atomic_min: usize,
    counters: Counters,
}

#[derive(Debug)]
struct Counters {
    read_pages: AtomicU64,
    write_pages: AtomicU64,
    read_requests: AtomicU64,
    write_requests: AtomicU64,
    flushes: AtomicU64,
    trimmed_pages: AtomicU64,
    bounce_copies: AtomicU64,
    streams: Vec<AtomicU64>,
}

impl Counters {
    fn new(streams: u16) -> Self {
        Self {
            read_pages: AtomicU64::new(0),
            write_pages: AtomicU64::new(0),
            read_requests: AtomicU64::new(0),
            write_requests: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            trimmed_pages: AtomicU64::new(0),
            bounce_copies: AtomicU64::new(0),
            streams: (0..streams).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl FileDevice {
    /// Opens (creating if missing) a regular file, or opens an existing block device.
    pub fn open(path: &Path, opts: FileOptions) -> Result<FileDevice> {
        check_options(path, &opts)?;
        let existing = std::fs::metadata(path).ok();
        let block_device = existing
            .as_ref()
            .is_some_and(|m| m.file_type().is_block_device());
        if let Some(m) = &existing {
            if !block_device && !m.is_file() {
                return Err(DeviceError::config(format!(
                    "{} is neither a regular file nor a block device; name a file or a device node",
                    path.display()
                )));
            }
        }
        // RWF_ATOMIC is honoured on direct I/O only.
        let direct = opts.direct || opts.atomic.is_some();
        let mut file = open_file(path, &opts, block_device, direct)?;
        let checked = if direct {
            check_dio_alignment(path, &file).and_then(|()| atomic_unit(path, &file, opts.atomic))
        } else {
            Ok((None, 0))
        };
        let (atomic_write_unit, atomic_min) = match checked {
            Ok(unit) => unit,
            Err(e) => {
                // A refused open leaves nothing behind: a file it created goes again.
                if existing.is_none() {
                    drop(file);
                    let _ = std::fs::remove_file(path);
                }
                return Err(e);
            }
        };
        let capacity = if block_device {
            device_capacity(path, &mut file, opts.capacity_bytes)?
        } else {
            file_capacity(path, &file, opts.capacity_bytes)?
        };
        if capacity < SECTOR_SIZE as u64 {
            return Err(DeviceError::config(format!(
                "{} holds less than one 4 KiB sector",
                path.display()
            )));
        }
        let caps = Capabilities {
            sector_size: SECTOR_SIZE,
            capacity_sectors: capacity / SECTOR_SIZE as u64,
            atomic_write_unit,
            streams: opts.streams,
            power_cut: false,
        };
        Ok(FileDevice {
            file,
            path: path.to_path_buf(),
            caps,
            direct,
            block_device,
            atomic_min,
            counters: Counters::new(opts.streams),
        })
    }

    /// The path this device was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the device was opened with O_DIRECT.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Whether the path is a block device (rather than a regular file).
    pub fn is_block_device(&self) -> bool {
        self.block_device
    }

    /// Requests that went through an aligned bounce buffer because the caller's buffer was not
    /// 4 KiB-aligned (O_DIRECT only).
    pub fn bounce_copies(&self) -> u64 {
        self.counters.bounce_copies.load(Relaxed)
    }

    fn needs_bounce(&self, ptr: *const u8) -> bool {
        self.direct && !(ptr as usize).is_multiple_of(DIRECT_ALIGN)
    }

    fn read_at_all(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    return Err(DeviceError::Short {
                        op: "read",
                        path: self.path.clone(),
                        done,
                        wanted: buf.len(),
                    })
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(DeviceError::io(&self.path, e)),
            }
        }
        Ok(())
    }

    fn write_at_all(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.write_at(&buf[done..], offset + done as u64) {
                Ok(0) => {
                    return Err(DeviceError::Short {
                        op: "write",
                        path: self.path.clone(),
                        done,
                        wanted: buf.len(),
                    })
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(DeviceError::io(&self.path, e)),
            }
        }
        Ok(())
    }

    /// One `pwritev2(RWF_ATOMIC)`: all of `buf` or an error, never a partial write.
    fn write_atomic(&self, buf: &[u8], offset: u64) -> Result<()> {
        let len = buf.len();
        if !len.is_power_of_two() || len < self.atomic_min || !offset.is_multiple_of(len as u64) {
            return Err(DeviceError::AtomicRejected(format!(
                "the kernel's RWF_ATOMIC needs a power-of-two length of at least {} bytes at an \
                 offset aligned to that length (got {len} bytes at byte {offset}); issue atomic \
                 writes of whole, aligned units",
                self.atomic_min
            )));
        }
        let iov = libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: len,
        };
        // SAFETY: `iov` points at `buf`, which lives and is not mutated for the whole call; the
        // kernel only reads from it. The fd is owned by `self.file` and open.
        let n = unsafe {
            libc::pwritev2(
                self.file.as_raw_fd(),
                &iov,
                1,
                offset as libc::off_t,
                libc::RWF_ATOMIC,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => {
                    DeviceError::AtomicRejected(format!(
                        "the kernel refused RWF_ATOMIC for {len} bytes at byte {offset} on {}: {e}",
                        self.path.display()
                    ))
                }
                _ => DeviceError::io(&self.path, e),
            });
        }
        if n as usize != len {
            return Err(DeviceError::Short {
                op: "atomic write",
                path: self.path.clone(),
                done: n as usize,
                wanted: len,
            });
        }
        Ok(())
    }
}

/// Bounce buffers up to this size are kept per thread and reused.
const KEPT_BOUNCE: usize = 4 << 20;

thread_local! {
    /// This thread's bounce buffer: a new zeroed one per request (a log group of 100 KiB, say)
    /// cost a fresh allocation that the kernel zeroed page by page on every write.
    static BOUNCE: std::cell::RefCell<Option<AlignedBuf>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` on an aligned buffer of `len` bytes (contents unspecified): this thread's kept one
/// when `len` is at most [`KEPT_BOUNCE`], else a new one.
fn with_bounce<R>(len: usize, f: impl FnOnce(&mut [u8]) -> Result<R>) -> Result<R> {
    if len > KEPT_BOUNCE {
        let mut b = AlignedBuf::with_capacity(len);
        b.resize(len);
        return f(b.as_mut_slice());
    }
    BOUNCE.with(|cell| {
        let mut kept = cell.borrow_mut();
        let b = kept.get_or_insert_with(AlignedBuf::default);
        if b.capacity() < len {
            *b = AlignedBuf::with_capacity(len.next_power_of_two().max(64 << 10));
        }
        // Contents unspecified: no zero-fill beyond what the buffer already held.
        b.resize(len);
        f(b.as_mut_slice())
    })
}

/// `(atomic_write_unit, smallest atomic write)` of a file opened with O_DIRECT: the unit asked
/// (`atomic=SIZE`) when statx's range covers it, else a refusal saying what statx reported;
/// with none asked, statx's largest unit when it reports one.
fn atomic_unit(path: &Path, file: &File, asked: Option<usize>) -> Result<(Option<usize>, usize)> {
    Ok(match asked {
        Some(unit) => {
            let min = sys::check_atomic_unit(path, file, unit)?;
            (Some(unit), min.max(SECTOR_SIZE))
        }
        None => match sys::atomic_report(file) {
            AtomicReport::Range { min, max, .. } if max >= SECTOR_SIZE && max.is_power_of_two() => {
                (Some(max), min.max(SECTOR_SIZE))
            }
            _ => (None, 0),
        },
    })
}

/// Refuses a file whose direct I/O needs more alignment than the 4 KiB sectors and the 4 KiB
/// bounce buffers give (a disk with 8 KiB logical blocks, say): every request would fail.
fn check_dio_alignment(path: &Path, file: &File) -> Result<()> {
    match sys::dio_alignment(file) {
        Some((mem, offset)) if mem > DIRECT_ALIGN || offset > SECTOR_SIZE => {
            Err(DeviceError::config(format!(
                "O_DIRECT on {} needs buffers aligned to {mem} bytes and offsets to {offset} \
                 bytes (statx), more than the 4 KiB this device uses; drop direct=1 (and \
                 atomic=), or use a file system with at most 4 KiB blocks",
                path.display()
            )))
        }
        _ => Ok(()),
    }
}

impl BlockDevice for FileDevice {
    fn caps(&self) -> Capabilities {
        self.caps.clone()
    }

    fn read(&self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let n = check_io(&self.caps, sector, buf.len())?;
        let offset = sector * SECTOR_SIZE as u64;
        if self.needs_bounce(buf.as_ptr()) {
            self.counters.bounce_copies.fetch_add(1, Relaxed);
            with_bounce(buf.len(), |b| {
                self.read_at_all(b, offset)?;
                buf.copy_from_slice(b);
                Ok(())
            })?;
        } else {
            self.read_at_all(buf, offset)?;
        }
        self.counters.read_pages.fetch_add(n, Relaxed);
        self.counters.read_requests.fetch_add(1, Relaxed);
        Ok(())
    }

    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        let n = check_io(&self.caps, sector, buf.len())?;
        check_hints(&self.caps, sector, buf.len(), hints)?;
        let offset = sector * SECTOR_SIZE as u64;
        let put = |data: &[u8]| {
            if hints.atomic {
                self.write_atomic(data, offset)
            } else {
                self.write_at_all(data, offset)
            }
        };
        if self.needs_bounce(buf.as_ptr()) {
            self.counters.bounce_copies.fetch_add(1, Relaxed);
            with_bounce(buf.len(), |b| {
                b.copy_from_slice(buf);
                put(b)
            })?;
        } else {
            put(buf)?;
        }
        // Direct writes bypass the page cache: nothing to write behind.
        if hints.write_behind && !self.direct {
            sys::start_writeback(&self.file, offset, buf.len())
                .map_err(|e| DeviceError::io(&self.path, e))?;
        }
        self.counters.write_pages.fetch_add(n, Relaxed);
        self.counters.write_requests.fetch_add(1, Relaxed);
        self.counters.streams[usize::from(hints.stream)].fetch_add(n, Relaxed);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| DeviceError::io(&self.path, e))?;
        self.counters.flushes.fetch_add(1, Relaxed);
        Ok(())
    }

    fn trim(&self, sector: u64, sectors: u64) -> Result<()> {
        check_range(&self.caps, sector, sectors)?;
        if sectors == 0 {
            return Ok(());
        }
        let offset = sector * SECTOR_SIZE as u64;
        let len = sectors * SECTOR_SIZE as u64;
        // SAFETY: fallocate only takes integers and an fd owned by `self.file`.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) => DeviceError::Unsupported(format!(
                    "trim on {}: the filesystem or device cannot punch holes / zero without \
                     writing ({e}); skip trims on this device",
                    self.path.display()
                )),
                _ => DeviceError::io(&self.path, e),
            });
        }
        self.counters.trimmed_pages.fetch_add(sectors, Relaxed);
        Ok(())
    }

    fn stats(&self) -> DeviceStats {
        let c = &self.counters;
        DeviceStats {
            host_read_pages: c.read_pages.load(Relaxed),
            host_write_pages: c.write_pages.load(Relaxed),
            host_read_requests: c.read_requests.load(Relaxed),
            host_write_requests: c.write_requests.load(Relaxed),
            flushes: c.flushes.load(Relaxed),
            trimmed_pages: c.trimmed_pages.load(Relaxed),
            streams: c
                .streams
                .iter()
                .enumerate()
                .map(|(id, w)| StreamStats {
                    id: id as u16,
                    host_write_pages: w.load(Relaxed),
                    ..StreamStats::default()
                })
                .collect(),
            ..DeviceStats::default()
        }
    }

    fn reset_stats(&self) {
        let c = &self.counters;
        for a in [
            &c.read_pages,
            &c.write_pages,
            &c.read_requests,
            &c.write_requests,
            &c.flushes,
            &c.trimmed_pages,
            &c.bounce_copies,
        ] {
            a.store(0, Relaxed);
        }
        for s in &c.streams {
            s.store(0, Relaxed);
        }
    }

    fn describe(&self) -> String {
        format!(
            "file:{}(capacity={}, direct={}, atomic={}, {})",
            self.path.display(),
            crate::units::format_size(self.caps.capacity_bytes()),
            u8::from(self.direct),
            self.caps
                .atomic_write_unit
                .map_or("none".to_string(), |u| crate::units::format_size(u as u64)),
            if self.block_device {
                "block device"
            } else {
                "regular file"
            }
        )
    }
}

/// The options a file device refuses before touching the file: streams, capacity, atomic
/// unit.
fn check_options(path: &Path, opts: &FileOptions) -> Result<()> {
    if !(1..=64).contains(&opts.streams) {
        return Err(DeviceError::config(format!(
            "streams={} is out of range for {}; use 1..=64",
            opts.streams,
            path.display()
        )));
    }
    if let Some(c) = opts.capacity_bytes {
        if c == 0 || !c.is_multiple_of(SECTOR_SIZE as u64) {
            return Err(DeviceError::config(format!(
                "capacity {c} for {} is not a positive multiple of 4 KiB",
                path.display()
            )));
        }
    }
    if let Some(unit) = opts.atomic {
        if !unit.is_power_of_two() || unit < SECTOR_SIZE {
            return Err(DeviceError::config(format!(
                "atomic={unit} for {}: the kernel's atomic writes are a power of two of at \
                 least 4 KiB; give e.g. atomic=16KiB",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Opens (a regular file: creates) `path` for reading and writing, with O_DIRECT when
/// `direct`; a file system that refuses O_DIRECT is named in the error.
fn open_file(path: &Path, opts: &FileOptions, block_device: bool, direct: bool) -> Result<File> {
    let mut oo = OpenOptions::new();
    oo.read(true).write(true);
    if !block_device {
        oo.create(true);
    }
    if direct {
        oo.custom_flags(libc::O_DIRECT);
    }
    match oo.open(path) {
        Ok(f) => Ok(f),
        Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
            let fs = sys::fs_name_at(path);
            Err(match opts.atomic {
                Some(unit) => DeviceError::NoAtomicWrites {
                    path: path.to_path_buf(),
                    unit,
                    reported: format!(
                        "the file system holding {} ({fs}) refuses O_DIRECT, which \
                         RWF_ATOMIC needs",
                        path.display()
                    ),
                },
                None => DeviceError::config(format!(
                    "the filesystem holding {} ({fs}) refuses O_DIRECT: put the file on \
                     ext4/xfs or drop direct=1",
                    path.display()
                )),
            })
        }
        Err(e) => Err(DeviceError::io(path, e)),
    }
}

/// A block device's capacity: its size in whole sectors, or the smaller one asked for.
fn device_capacity(path: &Path, file: &mut File, asked: Option<u64>) -> Result<u64> {
    let size = file
        .seek(SeekFrom::End(0))
        .map_err(|e| DeviceError::io(path, e))?;
    let size = size - size % SECTOR_SIZE as u64;
    match asked {
        Some(c) if c > size => Err(DeviceError::config(format!(
            "capacity {c} is larger than block device {} ({size} bytes); give a smaller \
             capacity or none",
            path.display()
        ))),
        Some(c) => Ok(c),
        None => Ok(size),
    }
}

/// A regular file's capacity: the one asked for, else its own size in whole sectors (at
/// least the default); the file grows to it.
fn file_capacity(path: &Path, file: &File, asked: Option<u64>) -> Result<u64> {
    let len = file.metadata().map_err(|e| DeviceError::io(path, e))?.len();
    let want = asked.unwrap_or_else(|| {
        let own = len - len % SECTOR_SIZE as u64;
        own.max(DEFAULT_FILE_CAPACITY)
    });
    if len < want {
        file.set_len(want).map_err(|e| DeviceError::io(path, e))?;
    }
    Ok(want)
}
