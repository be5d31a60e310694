//! The backing image of `pagoda mount --backing IMG`: the device's logical contents in one
//! sparse, capacity-sized file (sector N at byte N × 4096), in step with the device at every
//! flush, so what an fsync acknowledged survives a `kill -9` of the mount process.
//!
//! [`ImageDevice`] wraps the device the file system runs on. A write goes to the device, then
//! into the image (pwrite, not synced); a trim punches a hole in it. A flush flushes the
//! device, then fdatasyncs the image, and fails if either fails. What was written after the
//! last flush may or may not be in the image after a kill, as after a power cut — with one
//! difference: a kill inside the pwrite of an atomic write can leave that write torn in the
//! image (the kernel copies it page by page); an emulated power cut never tears it.
//!
//! An emulated power cut ([`PowerCut`]) keeps only a subset of the unflushed writes, but the
//! image holds all of them: after the cut, the sectors written or trimmed since the last flush
//! are copied back from the device (timing paused; these reads show in the read counters), so
//! the image holds exactly what survived the cut — the file system refuses requests after a
//! cut, so no later flush would put it in step.
//!
//! After an I/O error on the image, every later write, trim and flush fails: a failed
//! fdatasync may have dropped dirty pages that a later, successful one would not write, so
//! acknowledging a flush then could lose data that an fsync reported as durable.
//!
//! The image is an [`ImageFile`]: a [`File`] in `pagoda mount`; a test puts it in a store
//! that forgets what was never synced when the "process dies" (`tests/kill.rs`), which a
//! kill of the process alone cannot show (the kernel keeps its page cache).

use pagoda_device::{
    BlockDevice, DeviceError, DeviceRef, PowerCut, PowerCutReport, Result, WriteHints, SECTOR_SIZE,
};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

/// Sectors per read or write of the image while loading or copying back (1 MiB).
const CHUNK: usize = 256;
const S: u64 = SECTOR_SIZE as u64;

/// What an image lives in: the positional I/O and syncs of a file. Offsets and lengths are
/// whole sectors, except the size.
pub trait ImageFile: Send + Sync + std::fmt::Debug {
    /// The length in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Sets the length (a new image: zeros, sparse where possible).
    fn set_size(&self, len: u64) -> io::Result<()>;
    /// Reads `buf.len()` bytes at `offset`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes `buf` at `offset`; durable only after [`ImageFile::sync_data`].
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every write (and hole, and the size) so far durable: fdatasync.
    fn sync_data(&self) -> io::Result<()>;
    /// Zeros `len` bytes at `offset` by punching a hole, keeping the size; `EOPNOTSUPP`
    /// where holes cannot be punched (the caller then writes zeros).
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()>;
}

impl ImageFile for File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn set_size(&self, len: u64) -> io::Result<()> {
        self.set_len(len)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: fallocate on a descriptor `self` owns; no memory is passed.
        let r = unsafe {
            libc::fallocate(
                self.as_raw_fd(),
                mode,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// A device whose contents are mirrored into an image file that is durable at each flush.
#[derive(Debug)]
pub struct ImageDevice {
    inner: DeviceRef,
    file: Box<dyn ImageFile>,
    path: PathBuf,
    /// Writes and trims hold it shared, a flush or a power cut alone: neither then runs while
    /// a request is in the device but not yet in the image.
    order: RwLock<()>,
    /// Sector runs written or trimmed since the last flush: what a power cut may undo.
    unflushed: Mutex<Vec<(u64, u64)>>,
    /// The first image error; once set, writes, trims and flushes fail.
    broken: Mutex<Option<String>>,
}

impl ImageDevice {
    /// Opens the image at `path` for `inner`, creating it (sized to the device, synced) when
    /// it is missing or empty. An existing image is written into `inner` (all-zero runs are
    /// trimmed, so they read as zeros whatever was there) and `inner` is flushed. Returns the
    /// wrapper and whether an image was loaded. One process at a time may use an image.
    pub fn open(path: &Path, inner: DeviceRef) -> Result<(Self, bool)> {
        let err = |e| DeviceError::io(path, e);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(err)?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::WouldBlock {
                return Err(err(e));
            }
            return Err(err(std::io::Error::other(
                "another process uses this image (a pagoda mount still running?); stop it, or \
                 give another image file",
            )));
        }
        let new = file.metadata().map_err(err)?.len() == 0;
        let opened = Self::open_in(Box::new(file), path, inner)?;
        // The new name must outlive a crash too.
        if let Some(dir) = path.parent().filter(|d| new && !d.as_os_str().is_empty()) {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| DeviceError::io(dir, e))?;
        }
        Ok(opened)
    }

    /// As [`ImageDevice::open`], with the image in `file` (`path` names it in messages):
    /// created (sized, synced) when empty, else loaded into `inner`. The caller keeps other
    /// users away from `file`.
    pub fn open_in(
        file: Box<dyn ImageFile>,
        path: &Path,
        inner: DeviceRef,
    ) -> Result<(Self, bool)> {
        let err = |e| DeviceError::io(path, e);
        let cap = inner.caps().capacity_bytes();
        let len = file.size().map_err(err)?;
        let loaded = if len == 0 {
            file.set_size(cap).map_err(err)?;
            file.sync_data().map_err(err)?;
            false
        } else if len != cap {
            return Err(DeviceError::config(format!(
                "the image {} holds {len} bytes but the device has {cap}; use the capacity= it \
                 was made with, or another image file",
                path.display()
            )));
        } else {
            load(&*file, path, &inner)?;
            true
        };
        let dev = Self {
            inner,
            file,
            path: path.to_path_buf(),
            order: RwLock::new(()),
            unflushed: Mutex::new(Vec::new()),
            broken: Mutex::new(None),
        };
        Ok((dev, loaded))
    }

    /// The image file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes what the image holds durable (without flushing the device); fails when an
    /// earlier image error left it out of step.
    pub fn sync_image(&self) -> Result<()> {
        let _alone = self.order.write().unwrap_or_else(PoisonError::into_inner);
        self.check()?;
        self.file.sync_data().map_err(|e| self.broke_io(e))
    }

    fn check(&self) -> Result<()> {
        match &*lock(&self.broken) {
            None => Ok(()),
            Some(first) => Err(DeviceError::io(
                &self.path,
                std::io::Error::other(format!(
                    "an earlier error left the image out of step with the device ({first}); \
                     unmount, fix the cause and mount again (the image holds what was fsynced \
                     before the error)"
                )),
            )),
        }
    }

    /// Records the first image error and passes it on.
    fn broke(&self, e: DeviceError) -> DeviceError {
        lock(&self.broken).get_or_insert_with(|| e.to_string());
        e
    }

    fn broke_io(&self, e: std::io::Error) -> DeviceError {
        self.broke(DeviceError::io(&self.path, e))
    }

    fn note(&self, sector: u64, sectors: u64) {
        let mut runs = lock(&self.unflushed);
        match runs.last_mut() {
            Some((s, n)) if *s + *n == sector => *n += sectors,
            _ => runs.push((sector, sectors)),
        }
    }

    /// Zeros in the image: a hole where the file system can punch one.
    fn punch(&self, sector: u64, sectors: u64) -> std::io::Result<()> {
        match self.file.punch_hole(sector * S, sectors * S) {
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
            done => return done,
        }
        let zero = vec![0u8; CHUNK.min(sectors as usize) * SECTOR_SIZE];
        let mut s = sector;
        while s < sector + sectors {
            let k = (sector + sectors - s).min(CHUNK as u64);
            self.file
                .write_all_at(&zero[..k as usize * SECTOR_SIZE], s * S)?;
            s += k;
        }
        Ok(())
    }

    /// After a power cut: the sectors of `runs` as the device now reads them, into the image,
    /// synced.
    fn copy_back(&self, mut runs: Vec<(u64, u64)>) -> Result<()> {
        runs.sort_unstable();
        let mut buf = vec![0u8; CHUNK * SECTOR_SIZE];
        let mut done = 0;
        for (start, n) in runs {
            let end = start + n;
            let mut s = start.max(done);
            while s < end {
                let k = (end - s).min(CHUNK as u64);
                let b = &mut buf[..k as usize * SECTOR_SIZE];
                self.inner.read(s, b)?;
                self.file
                    .write_all_at(b, s * S)
                    .map_err(|e| DeviceError::io(&self.path, e))?;
                s += k;
            }
            done = done.max(end);
        }
        self.file
            .sync_data()
            .map_err(|e| DeviceError::io(&self.path, e))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded values stay consistent at every point a panic could leave them.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes the image into `dev` (runs of zero sectors trimmed) and flushes it.
fn load(file: &dyn ImageFile, path: &Path, dev: &DeviceRef) -> Result<()> {
    let cap = dev.caps().capacity_sectors;
    let mut buf = vec![0u8; CHUNK * SECTOR_SIZE];
    let mut first = 0;
    while first < cap {
        let n = (cap - first).min(CHUNK as u64) as usize;
        let b = &mut buf[..n * SECTOR_SIZE];
        file.read_exact_at(b, first * S)
            .map_err(|e| DeviceError::io(path, e))?;
        let zero = |k: usize| {
            b[k * SECTOR_SIZE..(k + 1) * SECTOR_SIZE]
                .iter()
                .all(|&x| x == 0)
        };
        let mut k = 0;
        while k < n {
            let z = zero(k);
            let mut j = k + 1;
            while j < n && zero(j) == z {
                j += 1;
            }
            let sector = first + k as u64;
            if z {
                dev.trim(sector, (j - k) as u64)?;
            } else {
                let data = &b[k * SECTOR_SIZE..j * SECTOR_SIZE];
                dev.write(sector, data, WriteHints::NORMAL)?;
            }
            k = j;
        }
        first += n as u64;
    }
    dev.flush()
}

// Writes, flushes, trims and power cuts reach the image too; the rest is the device's, its
// description included (the image is where the data lives, not what it runs on: reports name
// the device).
impl pagoda_device::DelegateDevice for ImageDevice {
    fn inner(&self) -> &dyn BlockDevice {
        &*self.inner
    }

    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        let _shared = self.order.read().unwrap_or_else(PoisonError::into_inner);
        self.check()?;
        self.inner.write(sector, buf, hints)?;
        self.note(sector, (buf.len() / SECTOR_SIZE) as u64);
        self.file
            .write_all_at(buf, sector * S)
            .map_err(|e| self.broke_io(e))
    }

    fn flush(&self) -> Result<()> {
        let _alone = self.order.write().unwrap_or_else(PoisonError::into_inner);
        self.check()?;
        self.inner.flush()?;
        self.file.sync_data().map_err(|e| self.broke_io(e))?;
        lock(&self.unflushed).clear();
        Ok(())
    }

    fn trim(&self, sector: u64, sectors: u64) -> Result<()> {
        let _shared = self.order.read().unwrap_or_else(PoisonError::into_inner);
        self.check()?;
        self.inner.trim(sector, sectors)?;
        if sectors == 0 {
            return Ok(());
        }
        self.note(sector, sectors);
        self.punch(sector, sectors).map_err(|e| self.broke_io(e))
    }

    fn as_power_cut(&self) -> Option<&dyn PowerCut> {
        self.inner.as_power_cut().map(|_| self as &dyn PowerCut)
    }
}

impl PowerCut for ImageDevice {
    fn power_cut(&self, seed: u64) -> Result<PowerCutReport> {
        let pc = self.inner.as_power_cut().ok_or_else(|| {
            DeviceError::Unsupported("power cut on a device that cannot emulate one".into())
        })?;
        let _alone = self.order.write().unwrap_or_else(PoisonError::into_inner);
        let report = pc.power_cut(seed)?;
        let runs = std::mem::take(&mut *lock(&self.unflushed));
        // Bookkeeping, not the workload: no emulated time.
        self.inner.pause_timing(true);
        let copied = self.copy_back(runs);
        self.inner.pause_timing(false);
        copied.map_err(|e| self.broke(e))?;
        Ok(report)
    }

    fn durable_on_ack(&self) -> bool {
        self.inner
            .as_power_cut()
            .is_some_and(PowerCut::durable_on_ack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagoda_device::fault::Recording;
    use std::sync::Arc;

    #[test]
    fn the_image_passes_counters_timing_and_the_cut_down() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rec = Arc::new(Recording::new(1 << 20).expect("recording"));
        let (img, _) = ImageDevice::open(&dir.path().join("img"), rec.clone()).expect("image");
        assert!(
            rec.unforwarded(&img).is_empty(),
            "{:?}",
            rec.unforwarded(&img)
        );
        let pc = img.as_power_cut().expect("cut");
        pc.power_cut(1).expect("cut");
        assert_eq!(rec.cuts(), 1);
        assert_eq!(img.describe(), rec.describe());
    }
}
