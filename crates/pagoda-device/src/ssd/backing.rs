//! Where unit data lives: sparse RAM, nowhere, or a file addressed by physical unit.

use super::config::Backing;
use crate::error::{DeviceError, Result};
use crate::SECTOR_SIZE;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// Data of physical units. The FTL decides which physical unit holds what; this only stores it.
#[derive(Debug)]
pub(crate) enum Store {
    /// Reads give zeros.
    None,
    /// One optional boxed unit per physical unit; `None` = zeros (or erased).
    Ram(Vec<Option<Box<[u8]>>>),
    /// `ppn × 4 KiB` offsets in a sparse file.
    File { file: File, path: PathBuf },
}

impl Store {
    pub(crate) fn open(backing: &Backing, physical_units: u64) -> Result<Self> {
        Ok(match backing {
            Backing::None => Store::None,
            Backing::Ram => {
                let n = usize::try_from(physical_units).map_err(|_| {
                    DeviceError::config("device too large for RAM backing; use backing=PATH")
                })?;
                let mut v = Vec::new();
                v.try_reserve_exact(n).map_err(|_| {
                    DeviceError::config(format!(
                        "cannot allocate the RAM index of {n} units; use backing=PATH or none"
                    ))
                })?;
                v.resize_with(n, || None);
                Store::Ram(v)
            }
            Backing::File(path) => {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(path)
                    .map_err(|e| DeviceError::io(path, e))?;
                file.set_len(physical_units * SECTOR_SIZE as u64)
                    .map_err(|e| DeviceError::io(path, e))?;
                Store::File {
                    file,
                    path: path.clone(),
                }
            }
        })
    }

    /// Stores one unit; `None` means a zero-filled unit. (Inlined check: with no backing the
    /// hot paths pay no call.)
    #[inline]
    pub(crate) fn write(&mut self, ppn: u32, data: Option<&[u8]>) -> Result<()> {
        if let Store::None = self {
            return Ok(());
        }
        self.write_backed(ppn, data)
    }

    fn write_backed(&mut self, ppn: u32, data: Option<&[u8]>) -> Result<()> {
        match self {
            Store::None => Ok(()),
            Store::Ram(v) => {
                let slot = &mut v[ppn as usize];
                match (data, slot.as_mut()) {
                    (Some(d), Some(buf)) => buf.copy_from_slice(d),
                    (Some(d), None) => *slot = Some(d.into()),
                    (None, _) => *slot = None,
                }
                Ok(())
            }
            Store::File { file, path } => {
                let zeros = [0u8; SECTOR_SIZE];
                file.write_all_at(data.unwrap_or(&zeros), offset(ppn))
                    .map_err(|e| DeviceError::io(&*path, e))
            }
        }
    }

    /// Reads one unit into `out` (4 KiB).
    pub(crate) fn read(&self, ppn: u32, out: &mut [u8]) -> Result<()> {
        match self {
            Store::None => {
                out.fill(0);
                Ok(())
            }
            Store::Ram(v) => {
                match &v[ppn as usize] {
                    Some(d) => out.copy_from_slice(d),
                    None => out.fill(0),
                }
                Ok(())
            }
            Store::File { file, path } => file
                .read_exact_at(out, offset(ppn))
                .map_err(|e| DeviceError::io(&*path, e)),
        }
    }

    /// GC relocation: the source is erased right after, so RAM moves the box.
    #[inline]
    pub(crate) fn relocate(&mut self, from: u32, to: u32) -> Result<()> {
        if let Store::None = self {
            return Ok(());
        }
        self.relocate_backed(from, to)
    }

    fn relocate_backed(&mut self, from: u32, to: u32) -> Result<()> {
        match self {
            Store::None => Ok(()),
            Store::Ram(v) => {
                let d = v[from as usize].take();
                v[to as usize] = d;
                Ok(())
            }
            Store::File { .. } => {
                let mut buf = [0u8; SECTOR_SIZE];
                self.read(from, &mut buf)?;
                self.write(to, Some(&buf))
            }
        }
    }

    /// Erase: frees RAM; a file keeps stale bytes (the OOB marks the units erased).
    pub(crate) fn erase(&mut self, first: u32, n: u32) {
        if let Store::Ram(v) = self {
            for s in &mut v[first as usize..(first + n) as usize] {
                *s = None;
            }
        }
    }
}

fn offset(ppn: u32) -> u64 {
    u64::from(ppn) * SECTOR_SIZE as u64
}
