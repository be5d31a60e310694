//! A small positional-I/O file device used for the real-file default of [`crate::DbOptions::in_dir`]
//! until `pagoda_device::file::FileDevice` lands on main. Files are sparse and sized at
//! creation; `flush` is `fdatasync`.

use pagoda_device::stats::DeviceStats;
use pagoda_device::{
    check_hints, check_io, check_range, BlockDevice, Capabilities, DeviceError, WriteHints,
    SECTOR_SIZE,
};
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A regular file as a block device.
#[derive(Debug)]
pub struct EngineFile {
    file: File,
    path: PathBuf,
    caps: Capabilities,
    stats: Mutex<DeviceStats>,
}

impl EngineFile {
    /// Opens `path` (created if missing) with `capacity_bytes` (a file already larger keeps its
    /// size). `read_only` opens without creating or growing.
    pub fn open(path: &Path, capacity_bytes: u64, read_only: bool) -> pagoda_device::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(!read_only)
            .create(!read_only)
            .truncate(false)
            .open(path)
            .map_err(|e| DeviceError::io(path, e))?;
        let len = file.metadata().map_err(|e| DeviceError::io(path, e))?.len();
        let cap = if read_only {
            len
        } else {
            len.max(capacity_bytes)
        };
        let cap = cap / SECTOR_SIZE as u64 * SECTOR_SIZE as u64;
        if !read_only && len < cap {
            file.set_len(cap).map_err(|e| DeviceError::io(path, e))?;
        }
        Ok(Self {
            file,
            path: path.to_path_buf(),
            caps: Capabilities {
                sector_size: SECTOR_SIZE,
                capacity_sectors: cap / SECTOR_SIZE as u64,
                atomic_write_unit: None,
                streams: 1,
                power_cut: false,
            },
            stats: Mutex::new(DeviceStats::default()),
        })
    }
}

impl BlockDevice for EngineFile {
    fn caps(&self) -> Capabilities {
        self.caps.clone()
    }

    fn read(&self, sector: u64, buf: &mut [u8]) -> pagoda_device::Result<()> {
        let n = check_io(&self.caps, sector, buf.len())?;
        self.file
            .read_exact_at(buf, sector * SECTOR_SIZE as u64)
            .map_err(|e| DeviceError::io(&self.path, e))?;
        let mut s = self.stats.lock();
        s.host_read_pages += n;
        s.host_read_requests += 1;
        Ok(())
    }

    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> pagoda_device::Result<()> {
        let n = check_io(&self.caps, sector, buf.len())?;
        check_hints(&self.caps, sector, buf.len(), hints)?;
        self.file
            .write_all_at(buf, sector * SECTOR_SIZE as u64)
            .map_err(|e| DeviceError::io(&self.path, e))?;
        let mut s = self.stats.lock();
        s.host_write_pages += n;
        s.host_write_requests += 1;
        Ok(())
    }

    fn flush(&self) -> pagoda_device::Result<()> {
        self.file
            .sync_data()
            .map_err(|e| DeviceError::io(&self.path, e))?;
        self.stats.lock().flushes += 1;
        Ok(())
    }

    fn trim(&self, sector: u64, sectors: u64) -> pagoda_device::Result<()> {
        check_range(&self.caps, sector, sectors)?;
        Ok(())
    }

    fn stats(&self) -> DeviceStats {
        self.stats.lock().clone()
    }

    fn describe(&self) -> String {
        format!("file:{}", self.path.display())
    }
}
