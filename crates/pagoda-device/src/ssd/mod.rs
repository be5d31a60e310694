//! Emulated flash SSD: NAND geometry, page-mapping FTL, GC, streams, atomic writes, power cut + SPOR.
//!
//! # Model
//! * **Geometry** ([`config`]): channels × dies × planes parallel units (PUs); erase blocks of
//!   [`Geometry::pages_per_block`] flash pages of `page_size` (a page holds `page_size / 4 KiB` mapping
//!   units) with `spare` OOB bytes per page. The block count is derived from `capacity` and
//!   `op`; blocks are spread round-robin over all PUs at any capacity ([`layout`]). Presets
//!   `sata-ssd` and `nvme-ssd` document their figures and sources on [`SsdConfig::preset`].
//! * **FTL** (`ftl`): page mapping on 4 KiB units — flat `Vec<u32>` L2P, 16-byte OOB per
//!   physical unit (LPN, sequence number, atomic group size/index) which also serves as P2L
//!   (a unit is live iff `l2p[oob.lpn] == ppn`), a valid bitmap (live or pinned units, so GC
//!   finds what to move without L2P lookups), per-block valid/written/erase counts. Each
//!   stream has `stripe` write points (round-robin over PUs, for parallelism), shared by host
//!   writes and GC; with `separate` only the streams it names keep their own, the others
//!   write to stream 0's. Free blocks sit in FIFO lists per PU, so erases rotate over all blocks
//!   (simple dynamic wear levelling); erase counts are lifetime figures (not reset by
//!   `reset_stats`).
//! * **GC** (`gc`): when free blocks fall below `gc_low`, victims are collected until
//!   `gc_high`. Greedy takes the closed block with the fewest valid units from valid-count
//!   buckets (intrusive lists, O(1) amortized, no scan); cost-benefit scans all blocks
//!   (O(blocks) per victim). A victim's valid units go to its own stream's write point on
//!   its own PU (on-die copyback, so GC runs on every PU in parallel, as host writes do),
//!   carrying their OOB (sequence number included), so streams never mix.
//! * **Volatile cache, power cut, SPOR** (`ftl`, `spor`): writes are programmed at once but
//!   are only guaranteed durable after `flush` (or after the device drains by itself once more
//!   than `cache` bytes are unflushed). A power cut decides per unflushed 4 KiB unit, from the
//!   seed, whether its program completed; durable versions superseded by unflushed writes are
//!   kept ("pinned") until the next flush, so every unit reads old or new. Recovery rebuilds
//!   the mapping only from OOB, the trim journal and the flushed sequence watermark: newest
//!   sequence number per LPN wins, atomic groups newer than the watermark only if complete.
//!   With `plp=1` (a power-loss-protected cache, as on enterprise NVMe drives) every
//!   acknowledged write is durable, so a cut loses nothing acknowledged and a flush costs
//!   only the command overhead.
//! * **Time** (`timing`): `latency=count` returns at once (busy time is then estimated as
//!   nominal work spread over the PUs); `latency=emulate` reserves link, channel and PU time
//!   per request under the lock, releases it and sleeps until the modeled completion
//!   ([`crate::clock::EmuClock`], `time_scale`), so concurrent requests overlap on different
//!   PUs. GC copybacks and erases occupy PUs too.
//!
//! # Limits
//! * Open blocks (stripe × streams, plus one block per stream of GC headroom) may use at most
//!   half of the spare blocks, so GC can always find a victim. Capacity never narrows the
//!   stripe: the presets use one block size at every capacity, so a smaller device has fewer
//!   blocks per PU; only below the presets' reference capacity are blocks halved (erase time
//!   scaled with them), down to a minimum capacity ([`layout`]).
//! * Up to 2³² − 2 physical units (about 16 TiB of flash).
//!
//! Sub-modules: [`config`] (presets, keys, geometry), [`synth`] (synthetic workloads),
//! [`model`] (analytic WAF of greedy GC).

mod backing;
pub mod config;
mod ftl;
mod gc;
pub mod layout;
pub mod model;
mod spor;
pub mod synth;
mod timing;

pub use config::{Backing, GcPolicy, Geometry, LatencyMode, SsdConfig};

use crate::clock::EmuClock;
use crate::error::Result;
use crate::stats::DeviceStats;
use crate::units::format_size;
use crate::{
    check_hints, check_io, check_range, BlockDevice, Capabilities, PowerCut, PowerCutReport,
    WriteHints, SECTOR_SIZE,
};
use ftl::{Ftl, NONE};
use parking_lot::Mutex;
use timing::Timeline;

/// An emulated flash SSD. See the module documentation for the model.
pub struct Ssd {
    cfg: SsdConfig,
    geo: Geometry,
    caps: Capabilities,
    clock: Option<EmuClock>,
    ftl: Mutex<Ftl>,
    /// The timeline while [`BlockDevice::pause_timing`] holds it out of the FTL.
    paused: Mutex<Option<Timeline>>,
    /// Address of the L2P table (allocated once, never resized), only for prefetching the
    /// entry a write will read before the lock is taken; never dereferenced.
    l2p_addr: usize,
}

impl Ssd {
    /// Builds a device (validating the configuration).
    pub fn new(cfg: SsdConfig) -> Result<Self> {
        let geo = cfg.geometry()?;
        let store = backing::Store::open(&cfg.backing, geo.physical_units())?;
        let ftl = Ftl::new(&cfg, geo, store)?;
        let l2p_addr = ftl.l2p.as_ptr() as usize;
        let caps = Capabilities {
            sector_size: SECTOR_SIZE,
            capacity_sectors: u64::from(geo.logical_units),
            atomic_write_unit: cfg.atomic_unit_bytes,
            streams: cfg.streams,
            power_cut: true,
        };
        let emulate = cfg.latency == LatencyMode::Emulate;
        let mut ssd = Self {
            cfg,
            geo,
            caps,
            clock: None,
            ftl: Mutex::new(ftl),
            paused: Mutex::new(None),
            l2p_addr,
        };
        if ssd.cfg.precondition {
            // Without the clock and the timeline: an aged drive, not minutes of emulated
            // writes, and no flash operations still pending when the first request comes.
            let timing = ssd.ftl.lock().timing.take();
            synth::precondition(&ssd, 0x00A6_ED00)?;
            ssd.ftl.lock().timing = timing;
        }
        if emulate {
            ssd.clock = Some(EmuClock::new(ssd.cfg.time_scale));
        }
        Ok(ssd)
    }

    /// A preset with `key=value` overrides, e.g. `Ssd::from_preset("sata-ssd", &[("op", "0.28")])`.
    pub fn from_preset(name: &str, options: &[(&str, &str)]) -> Result<Self> {
        let mut cfg = SsdConfig::preset(name)?;
        for (k, v) in options {
            cfg.set(k, v)?;
        }
        Self::new(cfg)
    }

    /// The configuration in force.
    pub fn config(&self) -> &SsdConfig {
        &self.cfg
    }

    /// The derived geometry.
    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Fast path for synthetic workloads: writes `n` zero-filled 4 KiB units at `lpn` without
    /// a buffer (same FTL path, counters, timing and power-cut semantics as [`BlockDevice::write`]).
    pub fn write_units(&self, lpn: u64, n: u64, hints: WriteHints) -> Result<()> {
        self.prefetch_l2p(lpn);
        if n == 0 {
            check_io(&self.caps, lpn, 0)?;
        }
        check_range(&self.caps, lpn, n)?;
        // In range, so n ≤ capacity < 2³² units and the byte length fits.
        let bytes = usize::try_from(n * SECTOR_SIZE as u64).unwrap_or(usize::MAX);
        check_hints(&self.caps, lpn, bytes, hints)?;
        self.do_write(lpn as u32, n as u32, hints, None)
    }

    /// Starts loading the (usually cache-missing) L2P entry of `lpn` so the miss overlaps with
    /// argument checks and locking. Harmless for any `lpn`: a prefetch never faults.
    #[inline(always)]
    fn prefetch_l2p(&self, lpn: u64) {
        let addr = self.l2p_addr.wrapping_add((lpn as usize).wrapping_mul(4));
        ftl::prefetch(std::ptr::without_provenance::<u32>(addr));
    }

    fn now(&self) -> u64 {
        self.clock.as_ref().map_or(0, EmuClock::now_ns)
    }

    fn wait(&self, until: u64) {
        if let Some(c) = &self.clock {
            c.wait_until(until);
        }
    }

    fn do_write(&self, lpn: u32, n: u32, hints: WriteHints, data: Option<&[u8]>) -> Result<()> {
        // `split`: a non-atomic write larger than the split reaches the flash in pieces, one after
        // another, each paying its own command (an ablation of the host path in the 16 KiB
        // atomic-write experiment).
        let split = u32::try_from(self.cfg.split_bytes / SECTOR_SIZE as u64).unwrap_or(u32::MAX);
        if split == 0 || hints.atomic || n <= split {
            return self.write_piece(lpn, n, hints, data);
        }
        let mut off = 0;
        while off < n {
            let len = split.min(n - off);
            let piece = data.map(|d| {
                let at = off as usize * SECTOR_SIZE;
                &d[at..at + len as usize * SECTOR_SIZE]
            });
            self.write_piece(lpn + off, len, hints, piece)?;
            off += len;
        }
        Ok(())
    }

    fn write_piece(&self, lpn: u32, n: u32, hints: WriteHints, data: Option<&[u8]>) -> Result<()> {
        let now = self.now();
        let done = {
            let mut f = self.ftl.lock();
            if let Some(t) = f.timing.as_mut() {
                t.now = now;
            }
            let stream = self.cfg.write_point_stream(hints.stream);
            f.write(lpn, n, stream, hints.atomic, data)?
        };
        self.wait(done);
        Ok(())
    }

    /// Checks the FTL's internal invariants (tests).
    #[cfg(test)]
    fn check_invariants(&self) {
        self.ftl.lock().check_invariants();
    }
}

impl std::fmt::Debug for Ssd {
    // The FTL tables are large; show the configuration instead.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl BlockDevice for Ssd {
    fn caps(&self) -> Capabilities {
        self.caps.clone()
    }

    fn read(&self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let n = check_io(&self.caps, sector, buf.len())?;
        let now = self.now();
        let done = {
            let mut f = self.ftl.lock();
            let t0 = f.timing.as_mut().map_or(0, |t| {
                t.now = now;
                t.command_start()
            });
            let mut done = t0;
            let (upb, upp, pus) = (
                self.geo.units_per_block,
                self.geo.units_per_page,
                self.geo.pus,
            );
            let mut last_page = NONE;
            let mut flash = 0;
            for (i, chunk) in buf.chunks_exact_mut(SECTOR_SIZE).enumerate() {
                let ppn = f.l2p[sector as usize + i];
                if ppn == NONE {
                    chunk.fill(0);
                } else {
                    f.store.read(ppn, chunk)?;
                    flash += 1;
                }
                if let Some(t) = f.timing.as_mut() {
                    let (pu, cell) = if ppn == NONE {
                        (None, false)
                    } else {
                        let page = ppn / upp;
                        let cell = page != last_page;
                        last_page = page;
                        (Some((ppn / upb) % pus), cell)
                    };
                    done = done.max(t.host_read_unit(pu, cell, t0));
                }
            }
            f.stats.host_read_pages += n;
            f.stats.host_read_requests += 1;
            f.stats.flash_reads += flash;
            done
        };
        self.wait(done);
        Ok(())
    }

    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        self.prefetch_l2p(sector);
        let n = check_io(&self.caps, sector, buf.len())?;
        check_hints(&self.caps, sector, buf.len(), hints)?;
        if matches!(self.cfg.backing, Backing::None) {
            return self.do_write(sector as u32, n as u32, hints, None);
        }
        self.do_write(sector as u32, n as u32, hints, Some(buf))
    }

    fn flush(&self) -> Result<()> {
        let now = self.now();
        let done = {
            let mut f = self.ftl.lock();
            f.make_durable();
            f.stats.flushes += 1;
            f.timing.as_mut().map_or(0, |t| {
                t.now = now;
                t.flushed()
            })
        };
        self.wait(done);
        Ok(())
    }

    fn trim(&self, sector: u64, sectors: u64) -> Result<()> {
        check_range(&self.caps, sector, sectors)?;
        if sectors > 0 {
            self.ftl.lock().trim(sector as u32, sectors as u32);
        }
        Ok(())
    }

    fn stats(&self) -> DeviceStats {
        let f = self.ftl.lock();
        let mut s = f.stats.clone();
        s.update_waf();
        s.erase_count = Some(f.erase_stats());
        let held = self.paused.lock();
        s.busy_time_us = match f.timing.as_ref().or(held.as_ref()) {
            Some(t) => t.busy_us(),
            // Count mode: the work at nominal timings spread perfectly over the dies.
            None => {
                let c = &self.cfg;
                let pages = s.flash_programs as f64 / f64::from(self.geo.units_per_page);
                let us = s.flash_reads as f64 * c.read_us
                    + pages * c.program_us
                    + s.erases as f64 * c.erase_us * self.geo.erase_fraction();
                (us / f64::from(self.geo.pus)) as u64
            }
        };
        s
    }

    fn reset_stats(&self) {
        let mut f = self.ftl.lock();
        f.stats = ftl::fresh_stats(self.cfg.streams);
        if let Some(t) = f.timing.as_mut() {
            t.reset_busy();
        }
        if let Some(t) = self.paused.lock().as_mut() {
            t.reset_busy();
        }
    }

    fn pause_timing(&self, paused: bool) {
        // The timeline's resources only hold "free at" times: resumed later, they lie in the
        // past, so the first request after the pause finds the device idle.
        let mut f = self.ftl.lock();
        let mut slot = self.paused.lock();
        if paused {
            if let Some(t) = f.timing.take() {
                *slot = Some(t);
            }
        } else if let Some(t) = slot.take() {
            f.timing = Some(t);
        }
    }

    fn describe(&self) -> String {
        let c = &self.cfg;
        format!(
            "{}(capacity={}, op={:.3}, streams={}{}, atomic={}, {}x{}x{} pus, \
             {} blocks of {} ({} pages{}), page={}, stripe={}, gc={:?}, cache={}, latency={:?})",
            c.name,
            format_size(c.capacity_bytes),
            self.geo.effective_op(),
            c.streams,
            c.separate.as_ref().map_or(String::new(), |own| {
                let ids: Vec<String> = own.iter().map(u16::to_string).collect();
                format!(" (own write points: {}; the rest share 0's)", ids.join("+"))
            }),
            c.atomic_unit_bytes
                .map_or("none".to_string(), |u| format_size(u as u64)),
            c.channels,
            c.dies_per_channel,
            c.planes,
            self.geo.blocks,
            format_size(u64::from(self.geo.units_per_block) * SECTOR_SIZE as u64),
            self.geo.pages_per_block,
            if self.geo.pages_per_block == c.pages_per_block {
                String::new()
            } else {
                format!(
                    "; the drive's block is {}",
                    format_size(u64::from(c.pages_per_block) * c.page_size_bytes as u64)
                )
            },
            format_size(c.page_size_bytes as u64),
            self.geo.stripe,
            c.gc,
            format_size(c.cache_bytes),
            c.latency,
        )
    }

    fn as_power_cut(&self) -> Option<&dyn PowerCut> {
        Some(self)
    }
}

impl PowerCut for Ssd {
    fn durable_on_ack(&self) -> bool {
        !self.geo.volatile_cache
    }

    fn power_cut(&self, seed: u64) -> Result<PowerCutReport> {
        let now = self.now();
        let mut f = self.ftl.lock();
        let r = f.power_cut(seed);
        if let Some(t) = f.timing.as_mut() {
            t.reset(now);
        }
        Ok(r)
    }
}

// A compile-time check that the device can be shared between threads.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Ssd>();
};

#[cfg(test)]
mod tests;
