//! Partitions: a sector range of one device exposed as a device of its own, so that two users
//! (e.g. the engine's data and its log) share one emulated SSD, its parallel units, its cache
//! and its garbage collection, as they would on one real drive.
//!
//! [`split`] cuts a device in two at a sector boundary. Each partition checks its own bounds
//! (a request past its end is [`DeviceError::OutOfRange`] of the partition, never a write into
//! the neighbour) and adds its offset. Flush, counters and power cut are the whole device's:
//! a flush makes every acknowledged write durable, flash counters (programs, copybacks, GC)
//! cannot be split by address range, and a power cut hits both partitions at once.

use crate::error::{DeviceError, Result};
use crate::units::format_size;
use crate::{check_io, check_range, BlockDevice, Capabilities, DeviceRef, WriteHints, SECTOR_SIZE};
use std::sync::Arc;

/// Sectors `first..first + len` of a shared device.
#[derive(Debug)]
pub struct Partition {
    dev: DeviceRef,
    first: u64,
    len: u64,
    name: &'static str,
}

/// Splits `dev` into its first sectors and its last `tail_bytes` (a positive multiple of 4 KiB
/// leaving at least one sector before it): `(head, tail)`. The tail's atomic writes stay
/// aligned to the device's atomic unit only if its start is; a tail not on a unit boundary
/// claims no atomic writes.
pub fn split(dev: DeviceRef, tail_bytes: u64) -> Result<(Partition, Partition)> {
    let caps = dev.caps();
    let total = caps.capacity_sectors;
    if tail_bytes == 0 || !tail_bytes.is_multiple_of(SECTOR_SIZE as u64) {
        return Err(DeviceError::config(format!(
            "partition size {tail_bytes} bytes: give a positive multiple of 4 KiB, e.g. size=64MiB"
        )));
    }
    let tail = tail_bytes / SECTOR_SIZE as u64;
    if tail >= total {
        return Err(DeviceError::config(format!(
            "partition of {} does not fit in {} with room left for the rest: give a smaller \
             size or a larger capacity",
            format_size(tail_bytes),
            format_size(caps.capacity_bytes()),
        )));
    }
    let head = total - tail;
    Ok((
        Partition {
            dev: Arc::clone(&dev),
            first: 0,
            len: head,
            name: "head",
        },
        Partition {
            dev,
            first: head,
            len: tail,
            name: "tail",
        },
    ))
}

impl Partition {
    /// The first sector of the partition on the shared device.
    pub fn first_sector(&self) -> u64 {
        self.first
    }

    /// The shared device.
    pub fn device(&self) -> &DeviceRef {
        &self.dev
    }
}

// Its own range and atomic unit; flush, counters, timing and the power cut are the shared
// device's (pausing twice, for data and log, is the same as once).
impl crate::DelegateDevice for Partition {
    fn inner(&self) -> &dyn BlockDevice {
        &*self.dev
    }

    fn caps(&self) -> Capabilities {
        let mut c = self.dev.caps();
        c.capacity_sectors = self.len;
        let aligned = |unit: usize| (self.first * SECTOR_SIZE as u64).is_multiple_of(unit as u64);
        c.atomic_write_unit = c.atomic_write_unit.filter(|&u| aligned(u));
        c
    }

    fn read(&self, sector: u64, buf: &mut [u8]) -> Result<()> {
        check_io(&BlockDevice::caps(self), sector, buf.len())?;
        self.dev.read(self.first + sector, buf)
    }

    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        // Own bounds and atomic unit first (the device would check its own, larger ones).
        let caps = BlockDevice::caps(self);
        check_io(&caps, sector, buf.len())?;
        crate::check_hints(&caps, sector, buf.len(), hints)?;
        self.dev.write(self.first + sector, buf, hints)
    }

    fn trim(&self, sector: u64, sectors: u64) -> Result<()> {
        check_range(&BlockDevice::caps(self), sector, sectors)?;
        self.dev.trim(self.first + sector, sectors)
    }

    fn describe(&self) -> String {
        format!(
            "partition {} (sectors {}..{}, {}) of {}",
            self.name,
            self.first,
            self.first + self.len,
            format_size(self.len * SECTOR_SIZE as u64),
            self.dev.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssd::Ssd;

    fn ssd() -> DeviceRef {
        Arc::new(
            Ssd::from_preset("sata-ssd", &[("capacity", "512MiB"), ("streams", "4")]).expect("ssd"),
        )
    }

    #[test]
    fn partitions_address_their_own_range_of_one_device() {
        let dev = ssd();
        let total = dev.caps().capacity_sectors;
        let (data, log) = split(Arc::clone(&dev), 64 << 20).expect("split");
        assert_eq!(log.caps().capacity_sectors, 16384);
        assert_eq!(data.caps().capacity_sectors, total - 16384);
        log.write(0, &[7u8; SECTOR_SIZE], WriteHints::stream(1))
            .expect("log write");
        data.write(0, &[9u8; SECTOR_SIZE], WriteHints::stream(2))
            .expect("data write");
        let mut b = [0u8; SECTOR_SIZE];
        dev.read(total - 16384, &mut b).expect("read");
        assert_eq!(
            b[0], 7,
            "the log's sector 0 is the device's first tail sector"
        );
        dev.read(0, &mut b).expect("read");
        assert_eq!(b[0], 9);
        // One device: its counters see both partitions' writes, on their streams.
        let s = log.stats();
        assert_eq!(s.host_write_pages, 2);
        assert_eq!(s.streams[1].host_write_pages, 1);
        assert_eq!(s.streams[2].host_write_pages, 1);
    }

    #[test]
    fn a_partition_refuses_what_lies_past_its_end() {
        let dev = ssd();
        let (data, log) = split(Arc::clone(&dev), 64 << 20).expect("split");
        let end = data.caps().capacity_sectors;
        let e = data
            .write(end, &[1u8; SECTOR_SIZE], WriteHints::NORMAL)
            .expect_err("past the data partition: the log's first sector");
        assert!(matches!(e, DeviceError::OutOfRange { .. }), "{e}");
        assert!(matches!(
            log.read(16384, &mut [0u8; SECTOR_SIZE]),
            Err(DeviceError::OutOfRange { .. })
        ));
        assert!(log.trim(16000, 1000).is_err());
        // Nothing reached the log.
        let mut b = [1u8; SECTOR_SIZE];
        log.read(0, &mut b).expect("read");
        assert_eq!(b, [0u8; SECTOR_SIZE]);
    }

    #[test]
    fn bad_sizes_are_typed_errors() {
        for size in [0, 100, 512 << 20, 1 << 40] {
            let e = split(ssd(), size).expect_err("bad size");
            assert!(matches!(e, DeviceError::Config(_)), "{size}: {e}");
        }
    }
}
