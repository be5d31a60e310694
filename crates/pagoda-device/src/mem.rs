//! `mem`: a RAM-only device with no latency, but with the same volatile-cache and power-cut
//! semantics as the emulated SSD, so that crash tests run at memory speed.
//!
//! Reads see every acknowledged write. A flush makes them durable. A power cut keeps, for each
//! unflushed write in order, each of its sectors with probability ½ (atomic writes: all sectors
//! or none), then resumes from the durable image.

use crate::error::{DeviceError, Result};
use crate::stats::{DeviceStats, StreamStats};
use crate::{
    check_hints, check_io, check_range, BlockDevice, Capabilities, PowerCut, PowerCutReport,
    WriteHints, SECTOR_SIZE,
};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::Arc;

/// Configuration of a [`MemDevice`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemConfig {
    /// Host-visible capacity in bytes (a multiple of 4 KiB). Storage is sparse.
    pub capacity_bytes: u64,
    /// Atomic-write unit in bytes, or `None` for no atomic writes.
    pub atomic_write_unit: Option<usize>,
    /// Number of write streams.
    pub streams: u16,
}

impl Default for MemConfig {
    fn default() -> Self {
        Self {
            capacity_bytes: 1 << 30,
            atomic_write_unit: Some(16 * 1024),
            streams: 4,
        }
    }
}

impl MemConfig {
    /// Applies one `key=value` option of a device spec.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "capacity" => self.capacity_bytes = crate::units::parse_size(value)?,
            "atomic" => {
                let v = crate::units::parse_size(value)?;
                self.atomic_write_unit = if v == 0 { None } else { Some(v as usize) };
            }
            "streams" => {
                self.streams = value.parse().map_err(|_| {
                    DeviceError::config(format!("streams={value}: expected a number 1..=64"))
                })?;
            }
            _ => {
                return Err(DeviceError::config(format!(
                    "mem does not take key '{key}'; it takes capacity, atomic, streams"
                )))
            }
        }
        Ok(())
    }

    fn validate(&self) -> Result<()> {
        if self.capacity_bytes == 0 || !self.capacity_bytes.is_multiple_of(SECTOR_SIZE as u64) {
            return Err(DeviceError::config(format!(
                "mem capacity {} is not a positive multiple of 4 KiB",
                self.capacity_bytes
            )));
        }
        if let Some(u) = self.atomic_write_unit {
            if u < SECTOR_SIZE || !u.is_power_of_two() {
                return Err(DeviceError::config(format!(
                    "atomic unit {u} must be a power of two of at least 4 KiB (or 0 for none)"
                )));
            }
        }
        if !(1..=64).contains(&self.streams) {
            return Err(DeviceError::config(format!(
                "streams={} is out of range; use 1..=64",
                self.streams
            )));
        }
        Ok(())
    }
}

type Sector = Arc<[u8]>;

#[derive(Debug)]
struct Pending {
    sector: u64,
    /// `None` for a trim.
    data: Option<Vec<Sector>>,
    sectors: u64,
    atomic: bool,
}

#[derive(Debug, Default)]
struct Inner {
    current: HashMap<u64, Sector>,
    durable: HashMap<u64, Sector>,
    pending: Vec<Pending>,
    stats: DeviceStats,
}

/// A RAM device with a volatile write cache and power cuts.
#[derive(Debug)]
pub struct MemDevice {
    caps: Capabilities,
    inner: Mutex<Inner>,
}

impl MemDevice {
    /// Creates a device.
    pub fn new(config: MemConfig) -> Result<Self> {
        config.validate()?;
        let caps = Capabilities {
            sector_size: SECTOR_SIZE,
            capacity_sectors: config.capacity_bytes / SECTOR_SIZE as u64,
            atomic_write_unit: config.atomic_write_unit,
            streams: config.streams,
            power_cut: true,
        };
        let inner = Inner {
            stats: fresh_stats(config.streams),
            ..Inner::default()
        };
        Ok(Self {
            caps,
            inner: Mutex::new(inner),
        })
    }

    /// A device with `capacity_bytes` and the default atomic unit and streams.
    pub fn with_capacity(capacity_bytes: u64) -> Result<Self> {
        Self::new(MemConfig {
            capacity_bytes,
            ..MemConfig::default()
        })
    }
}

fn fresh_stats(streams: u16) -> DeviceStats {
    DeviceStats {
        streams: (0..streams)
            .map(|id| StreamStats {
                id,
                ..StreamStats::default()
            })
            .collect(),
        ..DeviceStats::default()
    }
}

impl BlockDevice for MemDevice {
    fn caps(&self) -> Capabilities {
        self.caps.clone()
    }

    fn read(&self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let n = check_io(&self.caps, sector, buf.len())?;
        let mut inner = self.inner.lock();
        for (i, chunk) in buf.chunks_exact_mut(SECTOR_SIZE).enumerate() {
            match inner.current.get(&(sector + i as u64)) {
                Some(data) => chunk.copy_from_slice(data),
                None => chunk.fill(0),
            }
        }
        inner.stats.host_read_pages += n;
        inner.stats.host_read_requests += 1;
        Ok(())
    }

    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        let n = check_io(&self.caps, sector, buf.len())?;
        check_hints(&self.caps, sector, buf.len(), hints)?;
        let data: Vec<Sector> = buf.chunks_exact(SECTOR_SIZE).map(Sector::from).collect();
        let mut inner = self.inner.lock();
        for (i, d) in data.iter().enumerate() {
            inner.current.insert(sector + i as u64, d.clone());
        }
        inner.pending.push(Pending {
            sector,
            data: Some(data),
            sectors: n,
            atomic: hints.atomic,
        });
        inner.stats.host_write_pages += n;
        inner.stats.host_write_requests += 1;
        inner.stats.flash_programs += n;
        inner.stats.streams[usize::from(hints.stream)].host_write_pages += n;
        inner.stats.update_waf();
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        let mut inner = self.inner.lock();
        let pending = std::mem::take(&mut inner.pending);
        for p in &pending {
            for s in p.sector..p.sector + p.sectors {
                match inner.current.get(&s).cloned() {
                    Some(d) => inner.durable.insert(s, d),
                    None => inner.durable.remove(&s),
                };
            }
        }
        inner.stats.flushes += 1;
        Ok(())
    }

    fn trim(&self, sector: u64, sectors: u64) -> Result<()> {
        check_range(&self.caps, sector, sectors)?;
        let mut inner = self.inner.lock();
        for s in sector..sector + sectors {
            inner.current.remove(&s);
        }
        inner.pending.push(Pending {
            sector,
            data: None,
            sectors,
            atomic: false,
        });
        inner.stats.trimmed_pages += sectors;
        Ok(())
    }

    fn stats(&self) -> DeviceStats {
        self.inner.lock().stats.clone()
    }

    fn reset_stats(&self) {
        self.inner.lock().stats = fresh_stats(self.caps.streams);
    }

    fn describe(&self) -> String {
        format!(
            "mem(capacity={}, atomic={}, streams={})",
            crate::units::format_size(self.caps.capacity_bytes()),
            self.caps
                .atomic_write_unit
                .map_or("none".to_string(), |u| crate::units::format_size(u as u64)),
            self.caps.streams
        )
    }

    fn as_power_cut(&self) -> Option<&dyn PowerCut> {
        Some(self)
    }
}

impl PowerCut for MemDevice {
    fn power_cut(&self, seed: u64) -> Result<PowerCutReport> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut inner = self.inner.lock();
        let pending = std::mem::take(&mut inner.pending);
        let mut report = PowerCutReport::default();
        for p in &pending {
            if p.atomic {
                if rng.gen_bool(0.5) {
                    apply(&mut inner.durable, p, None);
                    report.atomic_kept += 1;
                    report.kept_sectors += p.sectors;
                } else {
                    report.atomic_dropped += 1;
                    report.dropped_sectors += p.sectors;
                }
            } else {
                let keep: Vec<bool> = (0..p.sectors).map(|_| rng.gen_bool(0.5)).collect();
                let kept = keep.iter().filter(|k| **k).count() as u64;
                report.kept_sectors += kept;
                report.dropped_sectors += p.sectors - kept;
                apply(&mut inner.durable, p, Some(&keep));
            }
        }
        inner.current = inner.durable.clone();
        Ok(report)
    }
}

fn apply(durable: &mut HashMap<u64, Sector>, p: &Pending, keep: Option<&[bool]>) {
    for i in 0..p.sectors {
        if keep.is_some_and(|k| !k[i as usize]) {
            continue;
        }
        let s = p.sector + i;
        match &p.data {
            Some(d) => durable.insert(s, d[i as usize].clone()),
            None => durable.remove(&s),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sector_of(b: u8) -> Vec<u8> {
        vec![b; SECTOR_SIZE]
    }

    #[test]
    fn flushed_data_survives_and_unflushed_is_old_or_new() {
        let dev = MemDevice::with_capacity(1 << 20).unwrap();
        dev.write(0, &sector_of(1), WriteHints::NORMAL).unwrap();
        dev.flush().unwrap();
        let mut big = Vec::new();
        for b in 0..4u8 {
            big.extend(sector_of(10 + b));
        }
        dev.write(0, &big, WriteHints::NORMAL).unwrap();
        let mut kept_any = false;
        let mut dropped_any = false;
        for seed in 0..32 {
            let d = MemDevice::with_capacity(1 << 20).unwrap();
            d.write(0, &sector_of(1), WriteHints::NORMAL).unwrap();
            d.flush().unwrap();
            d.write(0, &big, WriteHints::NORMAL).unwrap();
            d.power_cut(seed).unwrap();
            let mut buf = vec![0; 4 * SECTOR_SIZE];
            d.read(0, &mut buf).unwrap();
            for (i, c) in buf.chunks(SECTOR_SIZE).enumerate() {
                let old = if i == 0 { 1 } else { 0 };
                assert!(c.iter().all(|&x| x == old) || c.iter().all(|&x| x == 10 + i as u8));
                if c[0] == 10 + i as u8 {
                    kept_any = true;
                } else {
                    dropped_any = true;
                }
            }
        }
        assert!(
            kept_any && dropped_any,
            "power cuts should both keep and drop"
        );
    }

    #[test]
    fn atomic_writes_are_whole_or_absent() {
        for seed in 0..64 {
            let d = MemDevice::with_capacity(1 << 20).unwrap();
            let mut big = Vec::new();
            for b in 0..4u8 {
                big.extend(sector_of(20 + b));
            }
            d.write(4, &big, WriteHints::atomic(0)).unwrap();
            d.power_cut(seed).unwrap();
            let mut buf = vec![0; 4 * SECTOR_SIZE];
            d.read(4, &mut buf).unwrap();
            let news = buf
                .chunks(SECTOR_SIZE)
                .enumerate()
                .filter(|(i, c)| c[0] == 20 + *i as u8)
                .count();
            assert!(
                news == 0 || news == 4,
                "seed {seed}: torn atomic write ({news}/4)"
            );
        }
    }

    #[test]
    fn bad_requests_are_typed_errors() {
        let d = MemDevice::with_capacity(1 << 20).unwrap();
        let mut small = vec![0; 100];
        assert!(matches!(
            d.read(0, &mut small),
            Err(DeviceError::Misaligned { .. })
        ));
        let mut one = vec![0; SECTOR_SIZE];
        assert!(matches!(
            d.read(256, &mut one),
            Err(DeviceError::OutOfRange { .. })
        ));
        assert!(matches!(
            d.write(1, &vec![0; 16384], WriteHints::atomic(0)),
            Err(DeviceError::AtomicRejected(_))
        ));
        assert!(matches!(
            d.write(0, &vec![0; 32768], WriteHints::atomic(0)),
            Err(DeviceError::AtomicRejected(_))
        ));
        assert!(matches!(
            d.write(0, &one, WriteHints::stream(9)),
            Err(DeviceError::BadStream { .. })
        ));
        assert!(matches!(
            d.trim(250, 10),
            Err(DeviceError::OutOfRange { .. })
        ));
    }
}
