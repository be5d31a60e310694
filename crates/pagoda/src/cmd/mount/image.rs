//! `--backing PATH`: the device's logical contents in a sparse, capacity-sized image file.

use crate::error::{CliError, CliResult};
use pagoda_device::{DeviceRef, SECTOR_SIZE};
use std::os::unix::fs::FileExt;
use std::path::Path;

const CHUNK: usize = 256 * SECTOR_SIZE;

fn io(path: &Path) -> impl Fn(std::io::Error) -> CliError + '_ {
    move |e| CliError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Writes the image into the device (zero runs are trimmed, so they read as zeros whatever
/// preconditioning left there). Returns false when there is no image yet.
pub(super) fn load(path: &Path, dev: &DeviceRef) -> CliResult<bool> {
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io(path)(e)),
    };
    let cap = dev.caps().capacity_bytes();
    let len = f.metadata().map_err(io(path))?.len();
    if len == 0 {
        return Ok(false);
    }
    if len != cap {
        return Err(CliError::Usage(format!(
            "--backing {}: the image holds {len} bytes but the device has {cap}; use the \
             capacity= it was made with, or another --backing file",
            path.display()
        )));
    }
    let mut buf = vec![0u8; CHUNK];
    let mut off = 0u64;
    while off < cap {
        let n = CHUNK.min((cap - off) as usize);
        f.read_exact_at(&mut buf[..n], off).map_err(io(path))?;
        let first = off / SECTOR_SIZE as u64;
        let mut k = 0;
        while k < n / SECTOR_SIZE {
            let zero = is_zero(&buf[k * SECTOR_SIZE..(k + 1) * SECTOR_SIZE]);
            let mut j = k + 1;
            while j < n / SECTOR_SIZE
                && is_zero(&buf[j * SECTOR_SIZE..(j + 1) * SECTOR_SIZE]) == zero
            {
                j += 1;
            }
            let sector = first + k as u64;
            if zero {
                dev.trim(sector, (j - k) as u64)?;
            } else {
                let hints = pagoda_device::WriteHints::NORMAL;
                dev.write(sector, &buf[k * SECTOR_SIZE..j * SECTOR_SIZE], hints)?;
            }
            k = j;
        }
        off += n as u64;
    }
    dev.flush()?;
    Ok(true)
}

/// Reads the whole device into the image (all-zero chunks stay holes) and syncs it.
pub(super) fn save(path: &Path, dev: &DeviceRef) -> CliResult<()> {
    let tmp = path.with_extension("tmp");
    let f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let cap = dev.caps().capacity_bytes();
    f.set_len(cap).map_err(io(&tmp))?;
    let mut buf = vec![0u8; CHUNK];
    let mut off = 0u64;
    while off < cap {
        let n = CHUNK.min((cap - off) as usize);
        dev.read(off / SECTOR_SIZE as u64, &mut buf[..n])?;
        if !is_zero(&buf[..n]) {
            f.write_all_at(&buf[..n], off).map_err(io(&tmp))?;
        }
        off += n as u64;
    }
    f.sync_all().map_err(io(&tmp))?;
    // A crash while saving leaves the previous image whole.
    std::fs::rename(&tmp, path).map_err(io(path))?;
    Ok(())
}

fn is_zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}
