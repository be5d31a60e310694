//! SSD configuration: presets, `key=value` options, validation and derived geometry.
//!
//! Where each preset figure comes from (sourced, derived, assumed or calibrated), and which
//! features the modeled drives lack, is written down in `docs/devices.md`.

use crate::error::{DeviceError, Result};
use crate::units::parse_size;
use crate::SECTOR_SIZE;
use std::path::PathBuf;

/// The mapping unit of the FTL (4 KiB) as u64.
pub(crate) const UNIT: u64 = SECTOR_SIZE as u64;
/// Bytes of out-of-band metadata each 4 KiB mapping unit needs (LPN 4, sequence number 8,
/// atomic group size 2 + index 2).
pub const OOB_BYTES_PER_UNIT: usize = 16;

/// How an emulated device spends time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyMode {
    /// Only count; every I/O returns at once.
    Count,
    /// Block each I/O until its modeled completion on the channel/die timelines.
    Emulate,
}

/// Where unit data lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Sparse in RAM (only written units take memory).
    Ram,
    /// Nowhere: reads return zeros; only counters and mapping matter (synthetic workloads).
    None,
    /// In a file addressed by physical unit (`ppn × 4 KiB`), for devices larger than RAM.
    File(PathBuf),
}

/// Victim selection of garbage collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcPolicy {
    /// The closed block with the fewest valid units (O(1) amortized via valid-count buckets).
    Greedy,
    /// Rosenblum's cost-benefit: maximise `(1 − u) · age / (2u)`; scans all closed blocks per
    /// victim (O(blocks) per GC run, i.e. O(blocks / units_per_block) per relocated unit).
    CostBenefit,
}

/// Configuration of an emulated SSD. Sizes are bytes, times microseconds, bandwidths MB/s
/// (10⁶ bytes per second).
#[derive(Clone, Debug, PartialEq)]
pub struct SsdConfig {
    /// Preset name, for `describe`.
    pub name: String,
    /// Host-visible capacity in bytes; a positive multiple of 4 KiB. Key `capacity`.
    pub capacity_bytes: u64,
    /// Over-provisioning, (physical − logical) / logical, in `0.0..=4.0`. Key `op`. The block
    /// count is derived as ⌈logical units · (1 + op) / units per block⌉ and spread round-robin
    /// over all parallel units (channels × dies × planes; their block counts differ by at most
    /// one); capacity changes the blocks per unit, never the units (see `layout`). Rounding to
    /// whole blocks raises op by less than op/9. It is [`DeviceError::CapacityTooSmall`] if
    /// even the smallest blocks leave too few spare blocks for the write points.
    pub op: f64,
    /// Write streams, 1..=64. Key `streams`. The presets enable 4 as an emulated research feature
    /// (stream separation, as the DWB-FTL paper's FTL does): the drive `sata-ssd` models has no
    /// streams (`streams=1` models it as it is); see `docs/devices.md`.
    pub streams: u16,
    /// The streams that get write points of their own, all others sharing stream 0's
    /// (`None`: every stream its own). Key `separate`, ids joined by `+` (`separate=3`):
    /// an FTL with one extra region for one kind of write, as the DWB-FTL paper's custom FTL keeps
    /// only the double-write area apart, while the host still tags every write. The
    /// per-stream counters are kept by the stream a write lands in.
    pub separate: Option<Vec<u16>>,
    /// Atomic-write unit in bytes (power of two, 4 KiB..=1 MiB) or `None`. Key `atomic` (`0` =
    /// none). The presets set 16 KiB as an emulated research feature (16 KiB atomic writes): the
    /// drive `sata-ssd` models guarantees no atomic write above the sector (`atomic=0` models it as
    /// it is); see `docs/devices.md`.
    pub atomic_unit_bytes: Option<usize>,
    /// Largest request a non-atomic write reaches the flash in, bytes (multiple of 4 KiB; 0 = as
    /// issued). A larger one is served as such requests one after another, as a host path that
    /// breaks a page into file-system blocks (extents not aligned to the page) issues it; atomic
    /// writes stay whole. Key `split`; 0 in every preset (an ablation in the 16 KiB
    /// atomic-write experiment).
    pub split_bytes: u64,
    /// Key `latency=count|emulate`.
    pub latency: LatencyMode,
    /// Real time = modeled time × `time_scale`, in `1e-9..=1000`. Key `time_scale`.
    pub time_scale: f64,
    /// Key `backing=ram|none|PATH`.
    pub backing: Backing,
    /// Flash channels (buses), 1..=64. Key `channels`.
    pub channels: u32,
    /// Dies per channel, 1..=64. Key `dies`.
    pub dies_per_channel: u32,
    /// Planes per die, 1..=8. Each plane is modeled as an independent program/read timeline
    /// (i.e. multi-plane operations are assumed always possible). Key `planes`.
    pub planes: u32,
    /// Flash pages per erase block of the drive, 2..=4096. Key `pages_per_block`: a value
    /// given there is laid out as given (and clears [`Self::block_pages`]). A capacity too
    /// small to keep every write point with such blocks is laid out with smaller ones (halved
    /// down to `layout::MIN_PAGES_PER_BLOCK`, erase time scaled alike); the blocks in use are
    /// [`Geometry::pages_per_block`].
    pub pages_per_block: u32,
    /// Pages per block the presets lay out at every capacity, smaller than the drive's
    /// `pages_per_block` (`None`: lay out the drive's). So that capacity changes the blocks
    /// per parallel unit and nothing else, a preset uses one block size: the largest with
    /// which [`layout::REFERENCE_CAPACITY`](super::layout::REFERENCE_CAPACITY) keeps every
    /// write point. Erases are charged per byte at the drive's rate. Smaller capacities fall
    /// back to halving it. Not a key: `pages_per_block=` sets the block directly.
    pub block_pages: Option<u32>,
    /// Flash page size in bytes, a multiple of 4 KiB up to 64 KiB; a page holds
    /// `page_size / 4 KiB` mapping units. Key `page_size`.
    pub page_size_bytes: usize,
    /// Spare (OOB) bytes per flash page; must hold 16 B of metadata per mapping unit.
    /// Key `spare`.
    pub spare_bytes_per_page: usize,
    /// Key `gc=greedy|cost-benefit`.
    pub gc: GcPolicy,
    /// GC starts when free blocks drop below this (≥ 2). Key `gc_low`.
    pub gc_low_blocks: u32,
    /// GC stops once free blocks reach this (> `gc_low_blocks`). Key `gc_high`.
    pub gc_high_blocks: u32,
    /// Host write points per stream (striping width over parallel units), 1..=parallel units.
    /// `None` = one per parallel unit, at every capacity. All open blocks may use at most half
    /// of the spare blocks; a small capacity gets smaller blocks to make room. Key `stripe`.
    pub stripe: Option<u32>,
    /// Volatile write cache in bytes (multiple of 4 KiB; 0 = write-through: every
    /// acknowledged write is durable). At most this much acknowledged data can be lost at a
    /// power cut; when more is unflushed the device drains (makes durable) on its own.
    /// Key `cache`.
    pub cache_bytes: u64,
    /// Bring the device to steady state when it is created, as a drive that has been in use:
    /// one full sequential fill, then one capacity of uniform random 4 KiB overwrites, then
    /// zeroed counters (the fill runs without emulated delay). Without it a fresh device
    /// has every block free and garbage collection starts only after a capacity of writes.
    /// Key `precondition=1`.
    pub precondition: bool,
    /// Power-loss protection of the write cache (capacitors drain it at a power cut), as on
    /// enterprise drives: an acknowledged write is durable at once, so a power cut loses
    /// nothing acknowledged and a flush is acknowledged after the command overhead instead
    /// of waiting for the cache to be programmed. Key `plp=0|1`; off in every preset.
    pub plp: bool,
    /// Cell read time of one flash page (tR), µs. Key `read_us`.
    pub read_us: f64,
    /// Program time of one flash page (tPROG), µs. Key `program_us`.
    pub program_us: f64,
    /// Block erase time (tBERS), µs. Key `erase_us`.
    pub erase_us: f64,
    /// Bandwidth of one flash channel bus, MB/s. Key `channel_mbps`.
    pub channel_mbps: f64,
    /// Bandwidth of the host link (SATA, PCIe), MB/s. Key `link_mbps`.
    pub link_mbps: f64,
    /// Fixed controller/firmware overhead per host command, µs. Key `cmd_us`.
    pub cmd_us: f64,
}

/// Valid keys of [`SsdConfig::set`], for error messages.
pub const KEYS: &str =
    "capacity, op, streams, separate, atomic, split, latency, time_scale, backing, channels, \
     dies, planes, pages_per_block, page_size, spare, gc, gc_low, gc_high, stripe, cache, \
     plp, precondition, read_us, program_us, erase_us, channel_mbps, link_mbps, cmd_us";

impl SsdConfig {
    /// A named preset. The source of every figure (or the plain statement that it has none)
    /// is in `docs/devices.md`; this is a summary.
    ///
    /// * `sata-ssd` — a Samsung 840 Pro-class MLC SATA SSD (see `docs/devices.md`, section
    ///   "`sata-ssd`"). Sourced: the 256 GB 840 Pro's MDX controller has 8 channels; its NAND is
    ///   21-nm 64 Gbit Toggle-DDR 2.0 MLC (400 MB/s per channel); SATA 6 Gb/s. Derived: 32 dies
    ///   (4 per channel); OP 7 % (256 GiB of NAND for 256 GB). Assumed, typical of 2x-nm MLC
    ///   with no public Samsung source: 2 planes, 8 KiB pages, 128 pages per block (1 MiB
    ///   blocks), tR 60 µs, tPROG 800 µs, tBERS 3 ms, a 512 KiB write cache. Calibrated
    ///   (no public source): link 550 MB/s, command overhead 5 µs. The figures are not fitted
    ///   to the spec sheet's IOPS (540/520 MB/s; 100 K/90 K random 4 KiB IOPS at QD32,
    ///   9.9 K/31 K at QD1): the model is faster than the drive.
    ///
    ///   The real drive has **no write streams and no 16 KiB atomic writes**; the preset's
    ///   `streams=4` (stream separation) and `atomic=16KiB` (16 KiB atomic writes) are emulated
    ///   research features.
    ///   `streams=1,atomic=0` models the drive as it is.
    /// * `nvme-ssd` — a generic many-channel enterprise NVMe SSD with 3D TLC, not a particular
    ///   model: 16 channels × 4 dies × 2 planes, 16 KiB pages, 128 pages per block. tR 60 µs,
    ///   tPROG 660 µs per page (one-shot TLC programming amortized per page), tBERS 3.5 ms,
    ///   800 MB/s channels (ONFI 4 / Toggle 3 class), link 3.5 GB/s (PCIe 3.0 ×4; the WiredTiger
    ///   paper's NVMe drive); OP 28 % (enterprise class); 2 MiB write cache. These figures are
    ///   assumed or calibrated; none has a drive-specific source. Streams and atomic writes
    ///   are emulated as for `sata-ssd`.
    ///
    /// Both default to 1 GiB logical capacity so tests are quick; set `capacity` for more.
    /// Both lay out one block size at every capacity, smaller than the drive's
    /// ([`Self::block_pages`]: 64 KiB on `sata-ssd`, 128 KiB on `nvme-ssd`), so a larger
    /// capacity adds blocks to each parallel unit and changes nothing else.
    pub fn preset(name: &str) -> Result<Self> {
        let base = Self {
            name: name.to_string(),
            capacity_bytes: 1 << 30,
            op: 0.07,
            streams: 4,
            separate: None,
            atomic_unit_bytes: Some(16 * 1024),
            split_bytes: 0,
            latency: LatencyMode::Count,
            time_scale: 1.0,
            backing: Backing::Ram,
            channels: 8,
            dies_per_channel: 4,
            planes: 2,
            pages_per_block: 128,
            block_pages: None,
            page_size_bytes: 8192,
            spare_bytes_per_page: 448,
            gc: GcPolicy::Greedy,
            gc_low_blocks: 3,
            gc_high_blocks: 4,
            stripe: None,
            cache_bytes: 512 * 1024,
            precondition: false,
            plp: false,
            read_us: 60.0,
            program_us: 800.0,
            erase_us: 3000.0,
            channel_mbps: 400.0,
            link_mbps: 550.0,
            cmd_us: 5.0,
        };
        let drive = match name {
            "sata-ssd" => base,
            "nvme-ssd" => Self {
                op: 0.28,
                channels: 16,
                dies_per_channel: 4,
                planes: 2,
                pages_per_block: 128,
                page_size_bytes: 16384,
                spare_bytes_per_page: 1952,
                cache_bytes: 2 << 20,
                read_us: 60.0,
                program_us: 660.0,
                erase_us: 3500.0,
                channel_mbps: 800.0,
                link_mbps: 3500.0,
                cmd_us: 3.0,
                ..base
            },
            _ => {
                return Err(DeviceError::config(format!(
                    "unknown SSD preset '{name}': choose sata-ssd or nvme-ssd"
                )))
            }
        };
        let block_pages = super::layout::preset_block_pages(&drive)?;
        Ok(Self {
            block_pages: (block_pages != drive.pages_per_block).then_some(block_pages),
            ..drive
        })
    }

    /// Applies one `key=value` option (see [`KEYS`]).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let v = value.trim();
        match key.trim() {
            "capacity" => self.capacity_bytes = parse_size(v)?,
            "op" => self.op = float(key, v)?,
            "streams" => self.streams = int(key, v)?,
            "separate" => {
                self.separate = Some(
                    v.split('+')
                        .map(|id| int(key, id.trim()))
                        .collect::<Result<Vec<u16>>>()?,
                );
            }
            "atomic" => {
                let b = parse_size(v)?;
                self.atomic_unit_bytes = if b == 0 {
                    None
                } else {
                    Some(usize::try_from(b).map_err(|_| {
                        DeviceError::config(format!("atomic={v} is too large; use at most 1MiB"))
                    })?)
                };
            }
            "split" => self.split_bytes = parse_size(v)?,
            "latency" => {
                self.latency = match v {
                    "count" => LatencyMode::Count,
                    "emulate" => LatencyMode::Emulate,
                    _ => {
                        return Err(DeviceError::config(format!(
                            "latency={v}: choose count or emulate"
                        )))
                    }
                }
            }
            "time_scale" => self.time_scale = float(key, v)?,
            "backing" => {
                self.backing = match v {
                    "ram" => Backing::Ram,
                    "none" => Backing::None,
                    "" => {
                        return Err(DeviceError::config(
                            "backing= needs ram, none or a file path",
                        ))
                    }
                    p => Backing::File(PathBuf::from(p)),
                }
            }
            "channels" => self.channels = int(key, v)?,
            "dies" => self.dies_per_channel = int(key, v)?,
            "planes" => self.planes = int(key, v)?,
            "pages_per_block" => {
                self.pages_per_block = int(key, v)?;
                self.block_pages = None;
            }
            "page_size" => {
                self.page_size_bytes = usize::try_from(parse_size(v)?)
                    .map_err(|_| DeviceError::config(format!("page_size={v} is too large")))?;
            }
            "spare" => {
                self.spare_bytes_per_page = usize::try_from(parse_size(v)?)
                    .map_err(|_| DeviceError::config(format!("spare={v} is too large")))?;
            }
            "gc" => {
                self.gc = match v {
                    "greedy" => GcPolicy::Greedy,
                    "cost-benefit" => GcPolicy::CostBenefit,
                    _ => {
                        return Err(DeviceError::config(format!(
                            "gc={v}: choose greedy or cost-benefit"
                        )))
                    }
                }
            }
            "gc_low" => self.gc_low_blocks = int(key, v)?,
            "gc_high" => self.gc_high_blocks = int(key, v)?,
            "stripe" => self.stripe = Some(int(key, v)?),
            "cache" => self.cache_bytes = parse_size(v)?,
            "plp" => self.plp = flag(key, v, "power-loss-protected cache")?,
            "precondition" => {
                self.precondition = flag(key, v, "fill to steady state at creation")?;
            }
            "read_us" => self.read_us = float(key, v)?,
            "program_us" => self.program_us = float(key, v)?,
            "erase_us" => self.erase_us = float(key, v)?,
            "channel_mbps" => self.channel_mbps = float(key, v)?,
            "link_mbps" => self.link_mbps = float(key, v)?,
            "cmd_us" => self.cmd_us = float(key, v)?,
            other => {
                return Err(DeviceError::config(format!(
                    "SSD does not take key '{other}'; valid keys: {KEYS}"
                )))
            }
        }
        Ok(())
    }

    /// The stream whose write points a write tagged `stream` lands in (see [`Self::separate`]).
    pub fn write_point_stream(&self, stream: u16) -> u16 {
        match &self.separate {
            Some(own) if !own.contains(&stream) => 0,
            _ => stream,
        }
    }

    /// How many streams hold write points: all of them, or stream 0 and the separate ones.
    pub fn write_point_streams(&self) -> u16 {
        (0..self.streams)
            .filter(|s| self.write_point_stream(*s) == *s)
            .count() as u16
    }

    /// Checks the options and that capacity, op and geometry agree.
    pub fn validate(&self) -> Result<()> {
        self.geometry().map(|_| ())
    }

    /// Validates and derives the geometry.
    pub fn geometry(&self) -> Result<Geometry> {
        self.check_host_view()?;
        self.check_flash_array()?;
        let cfg = |m: String| Err(DeviceError::config(m));
        let units_per_page = (self.page_size_bytes / SECTOR_SIZE) as u32;
        let oob_needed = units_per_page as usize * OOB_BYTES_PER_UNIT;
        if self.spare_bytes_per_page < oob_needed {
            return cfg(format!(
                "spare={} B per page cannot hold the {oob_needed} B of out-of-band metadata \
                 ({units_per_page} units x {OOB_BYTES_PER_UNIT} B); raise spare",
                self.spare_bytes_per_page
            ));
        }
        self.check_timing()?;
        super::layout::derive(self, units_per_page)
    }

    /// What the host sees: capacity, over-provisioning, streams, atomic unit, split, time
    /// scale.
    fn check_host_view(&self) -> Result<()> {
        let cfg = |m: String| Err(DeviceError::config(m));
        if self.capacity_bytes == 0 || !self.capacity_bytes.is_multiple_of(UNIT) {
            return cfg(format!(
                "capacity={} is not a positive multiple of 4KiB",
                self.capacity_bytes
            ));
        }
        if !(self.op.is_finite() && (0.0..=4.0).contains(&self.op)) {
            return cfg(format!("op={} is out of range; use 0.0..=4.0", self.op));
        }
        if !(1..=64).contains(&self.streams) {
            return cfg(format!(
                "streams={} is out of range; use 1..=64",
                self.streams
            ));
        }
        if let Some(own) = &self.separate {
            if let Some(id) = own.iter().find(|id| **id == 0 || **id >= self.streams) {
                return cfg(format!(
                    "separate={id} is not a stream of its own on a device with streams={}; \
                     give ids 1..={} joined by '+' (stream 0 is the shared one)",
                    self.streams,
                    self.streams - 1
                ));
            }
        }
        if let Some(u) = self.atomic_unit_bytes {
            if u < SECTOR_SIZE || !u.is_power_of_two() || u > 1 << 20 {
                return cfg(format!(
                    "atomic={u} must be a power of two from 4KiB to 1MiB (or 0 for none)"
                ));
            }
        }
        if !self.split_bytes.is_multiple_of(SECTOR_SIZE as u64) {
            return cfg(format!(
                "split={} is not a multiple of 4KiB; use e.g. split=4KiB (or 0 for none)",
                self.split_bytes
            ));
        }
        if !(self.time_scale.is_finite() && (1e-9..=1e3).contains(&self.time_scale)) {
            return cfg(format!(
                "time_scale={} is out of range; use 1e-9..=1000 (1 = real time)",
                self.time_scale
            ));
        }
        Ok(())
    }

    /// The flash array: channels, dies, planes, block and page sizes.
    fn check_flash_array(&self) -> Result<()> {
        let cfg = |m: String| Err(DeviceError::config(m));
        for (k, v, max) in [
            ("channels", self.channels, 64),
            ("dies", self.dies_per_channel, 64),
            ("planes", self.planes, 8),
        ] {
            if !(1..=max).contains(&v) {
                return cfg(format!("{k}={v} is out of range; use 1..={max}"));
            }
        }
        if !(2..=4096).contains(&self.pages_per_block) {
            return cfg(format!(
                "pages_per_block={} is out of range; use 2..=4096",
                self.pages_per_block
            ));
        }
        if let Some(b) = self.block_pages {
            if !(2..=self.pages_per_block).contains(&b) {
                return cfg(format!(
                    "block_pages={b} must lie in 2..=pages_per_block ({}); set \
                     pages_per_block= for another block",
                    self.pages_per_block
                ));
            }
        }
        if self.page_size_bytes == 0
            || !self.page_size_bytes.is_multiple_of(SECTOR_SIZE)
            || self.page_size_bytes > 64 * 1024
        {
            return cfg(format!(
                "page_size={} must be a multiple of 4KiB up to 64KiB",
                self.page_size_bytes
            ));
        }
        Ok(())
    }

    /// Latencies, bandwidths, the garbage-collection thresholds and the write cache.
    fn check_timing(&self) -> Result<()> {
        let cfg = |m: String| Err(DeviceError::config(m));
        for (k, v) in [
            ("read_us", self.read_us),
            ("program_us", self.program_us),
            ("erase_us", self.erase_us),
            ("cmd_us", self.cmd_us),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return cfg(format!("{k}={v} must be a non-negative number"));
            }
        }
        for (k, v) in [
            ("channel_mbps", self.channel_mbps),
            ("link_mbps", self.link_mbps),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return cfg(format!("{k}={v} must be a positive number"));
            }
        }
        if self.gc_low_blocks < 2 || self.gc_high_blocks <= self.gc_low_blocks {
            return cfg(format!(
                "gc_low={} / gc_high={}: need gc_low >= 2 and gc_high > gc_low",
                self.gc_low_blocks, self.gc_high_blocks
            ));
        }
        if !self.cache_bytes.is_multiple_of(UNIT) {
            return cfg(format!(
                "cache={} is not a multiple of 4KiB",
                self.cache_bytes
            ));
        }
        Ok(())
    }
}

fn float(key: &str, v: &str) -> Result<f64> {
    v.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .ok_or_else(|| DeviceError::config(format!("{key}={v}: expected a number")))
}

/// A 0/1 switch (also true/false, yes/no, on/off); `what` says what 1 turns on.
fn flag(key: &str, v: &str, what: &str) -> Result<bool> {
    match v {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(DeviceError::config(format!(
            "{key}={v}: give 1 ({what}) or 0"
        ))),
    }
}

fn int<T: std::str::FromStr>(key: &str, v: &str) -> Result<T> {
    v.parse()
        .map_err(|_| DeviceError::config(format!("{key}={v}: expected a whole number")))
}

/// Geometry derived from a validated [`SsdConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// 4 KiB mapping units per flash page.
    pub units_per_page: u32,
    /// Mapping units per erase block.
    pub units_per_block: u32,
    /// Flash pages per block as laid out: the preset's block ([`SsdConfig::block_pages`]) or
    /// an explicit `pages_per_block`, halved as often as a capacity below the one it was
    /// chosen for needs to keep every write point (see `docs/devices.md`).
    pub pages_per_block: u32,
    /// The drive's (configured) pages per block; an erase of a smaller block is charged
    /// `pages_per_block / drive_pages_per_block` of tBERS.
    pub drive_pages_per_block: u32,
    /// Erase blocks in the device (≥ `pus`).
    pub blocks: u32,
    /// Host-visible units.
    pub logical_units: u32,
    /// Parallel units: channels × dies × planes. Block `b` lives on parallel unit `b % pus`.
    pub pus: u32,
    /// Channels; parallel unit `p` sits on channel `p % channels`.
    pub channels: u32,
    /// Parallel units per channel.
    pub planes_per_channel: u32,
    /// Host write points per stream.
    pub stripe: u32,
    /// Write cache size in units.
    pub cache_units: u32,
    /// Whether acknowledged writes can be lost at a power cut: a cache without power-loss
    /// protection (`cache > 0`, `plp=0`).
    pub volatile_cache: bool,
}

impl Geometry {
    /// Physical units.
    pub fn physical_units(&self) -> u64 {
        u64::from(self.blocks) * u64::from(self.units_per_block)
    }

    /// The share of the drive's tBERS one erase of a (possibly scaled-down) block costs.
    pub fn erase_fraction(&self) -> f64 {
        f64::from(self.pages_per_block) / f64::from(self.drive_pages_per_block)
    }

    /// Effective over-provisioning after rounding to whole blocks.
    pub fn effective_op(&self) -> f64 {
        self.physical_units() as f64 / f64::from(self.logical_units) - 1.0
    }
}
