//! Emulated flash SSD: NAND geometry, page-mapping FTL, GC, streams, atomic writes, power cut + SPOR.
//!
//! * [`config`] — presets (`sata-ssd`, `nvme-ssd`), `key=value` options, geometry checks.
//! * [`ftl`](self) — flat L2P over 4 KiB units, OOB per physical unit, write points per stream,
//!   volatile-cache bookkeeping; [`gc`](self) — greedy (bucketed) or cost-benefit victims;
//!   `spor` — power cut and recovery from OOB; `timing` — channel/die timelines.
//! * [`synth`] — synthetic workloads (precondition, uniform / hot-cold / sequential).
//! * [`model`] — analytic WAF of greedy GC (Hu et al., Desnoyers) for comparison.
//!
//! All FTL state sits behind one `parking_lot::Mutex`. In emulate mode a request computes its
//! completion time under the lock (reserving link, channel and die time) and sleeps after
//! releasing it, so concurrent requests overlap on different dies.

mod backing;
pub mod config;
mod ftl;
mod gc;
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

/// An emulated flash SSD. See the module documentation for the model.
pub struct Ssd {
    cfg: SsdConfig,
    geo: Geometry,
    caps: Capabilities,
    clock: Option<EmuClock>,
    ftl: Mutex<Ftl>,
}

impl Ssd {
    /// Builds a device (validating the configuration).
    pub fn new(cfg: SsdConfig) -> Result<Self> {
        let geo = cfg.geometry()?;
        let store = backing::Store::open(&cfg.backing, geo.physical_units())?;
        let ftl = Ftl::new(&cfg, geo, store);
        let caps = Capabilities {
            sector_size: SECTOR_SIZE,
            capacity_sectors: u64::from(geo.logical_units),
            atomic_write_unit: cfg.atomic_unit_bytes,
            streams: cfg.streams,
            power_cut: true,
        };
        let clock = (cfg.latency == LatencyMode::Emulate).then(|| EmuClock::new(cfg.time_scale));
        Ok(Self {
            cfg,
            geo,
            caps,
            clock,
            ftl: Mutex::new(ftl),
        })
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
        if n == 0 {
            check_io(&self.caps, lpn, 0)?;
        }
        check_range(&self.caps, lpn, n)?;
        // In range, so n ≤ capacity < 2³² units and the byte length fits.
        let bytes = usize::try_from(n * SECTOR_SIZE as u64).unwrap_or(usize::MAX);
        check_hints(&self.caps, lpn, bytes, hints)?;
        self.do_write(lpn as u32, n as u32, hints, None)
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
        let now = self.now();
        let done = {
            let mut f = self.ftl.lock();
            if let Some(t) = f.timing.as_mut() {
                t.now = now;
            }
            f.write(lpn, n, hints.stream, hints.atomic, data)?
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
        let n = check_io(&self.caps, sector, buf.len())?;
        check_hints(&self.caps, sector, buf.len(), hints)?;
        if matches!(self.cfg.backing, Backing::None) {
            return self.do_write(sector as u32, n as u32, hints, None);
        }
        self.do_write(sector as u32, n as u32, hints, Some(buf))
    }

    fn flush(&self) -> Result<()> {
        let done = {
            let mut f = self.ftl.lock();
            f.make_durable();
            f.stats.flushes += 1;
            f.timing.as_ref().map_or(0, timing::Timeline::drained)
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
        s.busy_time_us = match &f.timing {
            Some(t) => t.busy_us(),
            // Count mode: the work at nominal timings spread perfectly over the dies.
            None => {
                let c = &self.cfg;
                let pages = s.flash_programs as f64 / f64::from(self.geo.units_per_page);
                let us = s.flash_reads as f64 * c.read_us
                    + pages * c.program_us
                    + s.erases as f64 * c.erase_us;
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
    }

    fn describe(&self) -> String {
        let c = &self.cfg;
        format!(
            "{}(capacity={}, op={:.3}, streams={}, atomic={}, {}x{}x{} pus, {} blocks of {} units, \
             page={}, stripe={}, gc={:?}, cache={}, latency={:?})",
            c.name,
            format_size(c.capacity_bytes),
            self.geo.effective_op(),
            c.streams,
            c.atomic_unit_bytes
                .map_or("none".to_string(), |u| format_size(u as u64)),
            c.channels,
            c.dies_per_channel,
            c.planes,
            self.geo.blocks,
            self.geo.units_per_block,
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
