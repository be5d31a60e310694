//! The durable-commit ceiling of the disk under `bench compare`: how many 4 KiB writes, each
//! followed by a flush (`fdatasync`), one thread makes per second on a file in the output
//! directory, opened as pagoda opens its log (O_DIRECT where the file system allows it,
//! written out first so that no write allocates). No engine can acknowledge more single-thread
//! durable commits per second than one such write and flush allow, so the figure tells how
//! close each engine's 1-thread row comes to the device, and whether the device drifted
//! between the first engine and the last (it is measured before and after them).

use crate::error::{CliError, CliResult};
use pagoda_device::spec::DeviceSpec;
use pagoda_device::WriteHints;
use std::path::Path;
use std::time::{Duration, Instant};

/// Sectors the probe cycles over (a 16 MiB file).
const SECTORS: u64 = 4096;

/// Writes+flushes per second on a file in `dir` over `time` (at least 50 of them).
pub(super) fn measure(dir: &Path, time: Duration) -> CliResult<f64> {
    let path = dir.join("ceiling.probe");
    let cleanup = |r: CliResult<f64>| {
        let _ = std::fs::remove_file(&path);
        r
    };
    cleanup((|| {
        let spec = DeviceSpec::parse(&format!("file:{},capacity=16MiB", path.display()))?;
        let dev = spec
            .clone()
            .with("direct", 1)
            .open()
            .or_else(|_| spec.open())?;
        let zeros = vec![0u8; 1 << 20];
        for chunk in 0..SECTORS / 256 {
            dev.write(chunk * 256, &zeros, WriteHints::NORMAL)?;
        }
        dev.flush()?;
        let page = vec![0x5au8; 4096];
        let start = Instant::now();
        let mut n: u64 = 0;
        while n < 50 || start.elapsed() < time {
            dev.write(n % SECTORS, &page, WriteHints::NORMAL)?;
            dev.flush()?;
            n += 1;
        }
        let secs = start.elapsed().as_secs_f64();
        if secs <= 0.0 {
            return Err(CliError::Other("device probe took no time".to_string()));
        }
        Ok(n as f64 / secs)
    })())
}
