//! Opening the data and log devices an options value names.

use crate::error::{Error, Result};
use crate::format::SECTOR;
use crate::options::{DbOptions, TornMode};
use pagoda_device::spec::{DeviceKind, DeviceSpec};
use pagoda_device::DeviceRef;

/// Torn mode `atomic` writes each page as one atomic write: the data device must offer atomic
/// writes of exactly the page size.
pub(super) fn check_atomic_unit(torn: TornMode, data: &DeviceRef, page_size: usize) -> Result<()> {
    if torn != TornMode::Atomic {
        return Ok(());
    }
    match data.caps().atomic_write_unit {
        Some(u) if u == page_size => Ok(()),
        Some(u) => Err(Error::config(format!(
            "torn mode atomic needs an atomic write unit equal to the page size ({page_size} bytes), \
             but the data device's unit is {u} bytes ({}); use --page-size {u}, a file: device \
             with atomic={page_size}, or --torn doublewrite",
            data.describe()
        ))),
        None => Err(Error::config(format!(
            "torn mode atomic needs a device with atomic writes; this data device has none \
             ({}; a file: device takes atomic={page_size}) (use --torn doublewrite)",
            data.describe()
        ))),
    }
}

/// The devices an options value names.
pub(crate) struct Devices {
    pub(crate) data: DeviceRef,
    pub(crate) log: DeviceRef,
    /// Bytes the log file holds on disk (its ready prefix, see the log's `prepare`), when
    /// the engine made the log file itself; `None` for devices given by the caller.
    pub(crate) log_allocated: Option<u64>,
}

/// Opens the devices an options value names.
pub(crate) fn devices(opts: &DbOptions, read_only: bool) -> Result<Devices> {
    if let (Some(d), Some(l)) = (&opts.data, &opts.log) {
        return Ok(Devices {
            data: d.clone(),
            log: l.clone(),
            log_allocated: None,
        });
    }
    let Some(dir) = &opts.dir else {
        return Err(Error::config("no directory and no devices given"));
    };
    if !read_only {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Device(pagoda_device::DeviceError::io(dir, e)))?;
    }
    let data = dir.join("data.pagoda");
    let log = dir.join("log.pagoda");
    if read_only && !data.exists() {
        return Err(Error::config(format!(
            "{} has no data.pagoda: not a pagoda database",
            dir.display()
        )));
    }
    // `--torn atomic` on files: the data file asks the kernel for atomic writes of one page
    // (RWF_ATOMIC, O_DIRECT); the open says what statx reported when the file system has none.
    let atomic = (opts.torn == TornMode::Atomic && !read_only).then_some(opts.page_size);
    let open = |path: &std::path::Path,
                default: u64,
                atomic: Option<usize>,
                direct: bool|
     -> Result<DeviceRef> {
        let existing = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let cap = if read_only {
            existing
        } else {
            existing.max(default)
        };
        // Through the device crate's generic opener: the engine sees only the device trait.
        let spec = DeviceSpec {
            kind: DeviceKind::File(path.to_path_buf()),
            options: Vec::new(),
        }
        .with("direct", u64::from(direct))
        .with("capacity", cap / SECTOR as u64 * SECTOR as u64)
        .with("streams", 4);
        let spec = match atomic {
            Some(unit) => spec.with("atomic", unit),
            None => spec,
        };
        Ok(spec.open()?)
    };
    // The data file first: when it is refused (no atomic writes there), no log was written.
    let d = open(&data, opts.data_file_bytes, atomic, false)?;
    if !read_only && !log.exists() {
        create_sparse_log_file(&log, opts.new_log_file_bytes() + SECTOR as u64)?;
    }
    // The log bypasses the page cache where the file system allows it (not tmpfs): a commit's
    // write then goes to the device at once and its fdatasync has only the flush left to do
    // (single-thread durable commits measured 10-25 % faster on this machine's ext4).
    let log_bytes = opts.new_log_file_bytes() + SECTOR as u64;
    let l = match open(&log, log_bytes, None, !read_only) {
        Ok(l) => l,
        Err(_) => open(&log, log_bytes, None, false)?,
    };
    let log_allocated = if read_only {
        None
    } else {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&log)
            .map_err(|e| Error::Device(pagoda_device::DeviceError::io(&log, e)))?;
        // A block device is taken as all ready.
        m.is_file().then(|| m.blocks() * 512)
    };
    Ok(Devices {
        data: d,
        log: l,
        log_allocated,
    })
}

/// Creates a new log file of `bytes`, sparse (nothing written): the log makes its ring ready
/// ahead of its writer (the log's `prepare`), so creating a database writes no log.
fn create_sparse_log_file(path: &std::path::Path, bytes: u64) -> Result<()> {
    let io = |e| Error::Device(pagoda_device::DeviceError::io(path, e));
    let tmp = path.with_extension("pagoda.tmp");
    let f = std::fs::File::create(&tmp).map_err(io)?;
    f.set_len(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(())
}

/// Writes a new log file full of zeros, so that log writes never allocate blocks (an fsync
/// after an allocating write also commits file-system metadata: several times slower). For
/// callers that open a `file:` log device themselves and pass it as a device;
/// [`DbOptions::in_dir`] makes its log file ready as it goes instead.
pub fn preallocate_log_file(path: &std::path::Path, bytes: u64) -> Result<()> {
    use std::io::Write;
    let io = |e| Error::Device(pagoda_device::DeviceError::io(path, e));
    let tmp = path.with_extension("pagoda.tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    let chunk = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).map_err(io)?;
        left -= n as u64;
    }
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(())
}
