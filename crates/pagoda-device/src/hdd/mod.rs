//! Emulated hard disk (`hdd-15k`): one actuator, seek + rotation + transfer.
//!
//! # The model
//!
//! * **Data** lives in a [`MemDevice`] (sparse RAM), so an emulated disk also supports power
//!   cuts (delegated). Disks have no atomic-write unit and one stream.
//! * **One actuator with a queue.** With `ncq=1` (the default) every request reserves a stretch
//!   of the actuator's modeled timeline under a short lock (start = when the actuator is free,
//!   or now if it is idle), then — in `latency=emulate` — waits for its modeled completion with
//!   [`EmuClock::wait_until`] outside the lock. Requests from many threads therefore serialize
//!   in arrival order, like a FIFO queue in front of a single head. In `latency=count` nothing
//!   sleeps, requests run back to back on the modeled timeline, and the modeled busy time is
//!   still accounted (`busy_time_us`), so a synthetic run can report modeled throughput.
//! * **Command queueing** (`ncq=N`, N > 1, `latency=emulate` only): a request that arrives
//!   while the actuator is busy waits in a pending set; when the actuator finishes, the next
//!   request is chosen among the N oldest pending ones by shortest positioning time (seek +
//!   rotational wait from the head's position then), except that a request pending longer than
//!   [`NCQ_AGE_MS`] is served first (oldest first), so none starves. Cached writes are
//!   acknowledged when they fit in the cache and destaged through the same queue. See
//!   `hdd/queue.rs`; `docs/devices.md` has the measured IOPS by queue depth.
//! * **Seek time** by distance `d` (fraction of the full stroke, `|Δsector| / capacity`):
//!   `t(d) = track + (full − track) · d^p` for `d > 0`, `0` for `d = 0`. The exponent `p` is
//!   solved in closed form so that the mean over two uniformly random positions (whose distance
//!   has density `2(1−d)`, so `E[d^p] = 2/((p+1)(p+2))`) equals the preset's average seek. For the
//!   15k preset `p ≈ 0.62`: close to the square-root law of short, acceleration-bound seeks.
//!   Writes add a write-settle time (datasheets list write seeks ≈ 0.5 ms slower).
//! * **Rotation** is derived from modeled time, not drawn at random: the platter angle at time
//!   `t` is `(t mod T_rev)/T_rev`; a sector's angle is its index inside its track. After the
//!   seek the head waits until the target sector comes round. Random requests thus see a
//!   uniform wait with mean `T_rev/2` (2 ms at 15k RPM), while back-to-back sequential requests
//!   see none, as on a real disk.
//! * **Transfer / zoning.** The disk is split into 16 zones of equal size; the outer zone holds
//!   `transfer_mb_s × T_rev` bytes per track, the inner `transfer_inner_mb_s × T_rev`, linearly in
//!   between (zoned bit recording). Media transfer of `n` sectors takes `n / sectors_per_track`
//!   revolutions.
//! * **Read-ahead.** A read that starts where the previous read ended is served from the
//!   drive's read-ahead buffer without seek or rotational wait (the drive kept reading while
//!   idle), at media rate.
//! * **Write cache** (`cache=on`): a write is acknowledged at once while its mechanical time
//!   is still reserved on the actuator; a flush waits until the actuator is idle. In emulate
//!   mode the cache holds at most `cache_size` bytes (16 MiB) of writes not yet on the platter: a
//!   write that does not fit waits until enough earlier writes have reached the platter. Unflushed
//!   writes are lost or torn by a power cut. With `cache=off` (the default, as databases run
//!   enterprise disks) a write returns when it is on the platter and is durable at once.
//!
//! # The `hdd-15k` preset
//!
//! Seagate Cheetah 15K.7 (ST3600057SS family) product manual / datasheet: 15,000 RPM
//! (2.0 ms average rotational latency), average seek 3.4 ms read / 3.9 ms write, track-to-track
//! 0.2 ms read / 0.44 ms write, sustained transfer 204 MB/s outer to 122 MB/s inner, 16 MiB
//! cache, 300/450/600 GB. The full-stroke seek (not in the datasheet) is taken as 7.0 ms,
//! typical of 15k enterprise drives. Expected: ≈ 175–185 random 4 KiB reads per second at QD1
//! (3.4 + 2.0 + 0.02 ms) and ≈ 200 MB/s sequential at the outer edge.

use crate::clock::EmuClock;
use crate::error::{DeviceError, Result};
use crate::mem::{MemConfig, MemDevice};
use crate::stats::{DeviceStats, StreamStats};
use crate::{
    check_hints, check_io, check_range, BlockDevice, Capabilities, PowerCut, PowerCutReport,
    WriteHints, SECTOR_SIZE,
};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

mod queue;
pub use queue::{QueueStats, NCQ_AGE_MS};

/// Whether an emulated device sleeps for its modeled latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyMode {
    /// Only count: no sleeping, modeled time is accounted.
    Count,
    /// Each I/O blocks until its modeled completion (scaled by `time_scale`).
    Emulate,
}

/// Number of zones of the zoned-bit-recording model.
const ZONES: u64 = 16;

/// Keys [`HddConfig::set`] accepts.
pub const HDD_KEYS: [&str; 13] = [
    "capacity",
    "latency",
    "time_scale",
    "rpm",
    "seek_track_ms",
    "seek_avg_ms",
    "seek_full_ms",
    "write_settle_ms",
    "transfer_mb_s",
    "transfer_inner_mb_s",
    "cache",
    "cache_size",
    "ncq",
];

/// Configuration of an emulated disk.
#[derive(Clone, Debug, PartialEq)]
pub struct HddConfig {
    /// Host-visible capacity in bytes (a multiple of 4 KiB). Storage is sparse RAM.
    pub capacity_bytes: u64,
    /// Count or emulate latency.
    pub latency: LatencyMode,
    /// Real time per modeled time in emulate mode (1.0 = real time, 0.1 = ten times faster).
    pub time_scale: f64,
    /// Spindle speed.
    pub rpm: u32,
    /// Track-to-track (shortest) seek, ms.
    pub seek_track_ms: f64,
    /// Average seek over random positions, ms.
    pub seek_avg_ms: f64,
    /// Full-stroke seek, ms.
    pub seek_full_ms: f64,
    /// Extra settle time of a write seek, ms.
    pub write_settle_ms: f64,
    /// Media transfer rate at the outer edge (sector 0), MB/s (10^6 bytes).
    pub transfer_mb_s: f64,
    /// Media transfer rate at the inner edge, MB/s.
    pub transfer_inner_mb_s: f64,
    /// Volatile write-back cache on.
    pub cache: bool,
    /// Write-cache size in bytes.
    pub cache_bytes: u64,
    /// Command queue depth: how many pending requests the disk reorders (1 = arrival order).
    pub ncq: u32,
}

impl HddConfig {
    /// A named preset: `hdd-15k` (see the module documentation for its sources).
    pub fn preset(name: &str) -> Result<HddConfig> {
        match name {
            "hdd-15k" => Ok(HddConfig {
                capacity_bytes: 300_000_000_000 / SECTOR_SIZE as u64 * SECTOR_SIZE as u64,
                latency: LatencyMode::Count,
                time_scale: 1.0,
                rpm: 15_000,
                seek_track_ms: 0.2,
                seek_avg_ms: 3.4,
                seek_full_ms: 7.0,
                write_settle_ms: 0.5,
                transfer_mb_s: 204.0,
                transfer_inner_mb_s: 122.0,
                cache: false,
                cache_bytes: 16 << 20,
                // FIFO by default, so results published before command queueing do not move.
                ncq: 1,
            }),
            _ => Err(DeviceError::config(format!(
                "unknown disk preset '{name}'; the disk preset is hdd-15k"
            ))),
        }
    }

    /// Applies one `key=value` option (see [`HDD_KEYS`]).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let num = |v: &str| -> Result<f64> {
            match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => Err(DeviceError::config(format!(
                    "{key}={v}: expected a positive number"
                ))),
            }
        };
        match key {
            "capacity" => self.capacity_bytes = crate::units::parse_size(value)?,
            "latency" => {
                self.latency = match value {
                    "count" => LatencyMode::Count,
                    "emulate" => LatencyMode::Emulate,
                    _ => {
                        return Err(DeviceError::config(format!(
                            "latency={value}: expected count or emulate"
                        )))
                    }
                }
            }
            "time_scale" => self.time_scale = num(value)?,
            "rpm" => {
                self.rpm = value
                    .parse()
                    .ok()
                    .filter(|r| (1000..=30_000).contains(r))
                    .ok_or_else(|| {
                        DeviceError::config(format!("rpm={value}: expected 1000..=30000"))
                    })?;
            }
            "seek_track_ms" => self.seek_track_ms = num(value)?,
            "seek_avg_ms" => self.seek_avg_ms = num(value)?,
            "seek_full_ms" => self.seek_full_ms = num(value)?,
            "write_settle_ms" => {
                self.write_settle_ms = match value.parse::<f64>() {
                    Ok(x) if x.is_finite() && x >= 0.0 => x,
                    _ => {
                        return Err(DeviceError::config(format!(
                            "write_settle_ms={value}: expected a number ≥ 0"
                        )))
                    }
                }
            }
            "transfer_mb_s" => self.transfer_mb_s = num(value)?,
            "transfer_inner_mb_s" => self.transfer_inner_mb_s = num(value)?,
            "cache" => {
                self.cache = match value {
                    "on" | "1" | "true" | "yes" => true,
                    "off" | "0" | "false" | "no" => false,
                    _ => {
                        return Err(DeviceError::config(format!(
                            "cache={value}: expected on or off"
                        )))
                    }
                }
            }
            "cache_size" => {
                self.cache_bytes = crate::units::parse_size(value)?;
                if self.cache_bytes < SECTOR_SIZE as u64 {
                    return Err(DeviceError::config(format!(
                        "cache_size={value}: give at least 4KiB, e.g. cache_size=16MiB"
                    )));
                }
            }
            "ncq" => {
                self.ncq = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=256).contains(n))
                    .ok_or_else(|| {
                        DeviceError::config(format!(
                            "ncq={value}: expected a queue depth 1..=256 (1 = arrival order; \
                             a SAS disk queues 64, SATA NCQ 32), e.g. ncq=32"
                        ))
                    })?;
            }
            _ => {
                return Err(DeviceError::config(format!(
                    "hdd-15k does not take key '{key}'; it takes {}",
                    HDD_KEYS.join(", ")
                )))
            }
        }
        Ok(())
    }

    fn validate(&self) -> Result<()> {
        if self.capacity_bytes < ZONES * SECTOR_SIZE as u64
            || !self.capacity_bytes.is_multiple_of(SECTOR_SIZE as u64)
        {
            return Err(DeviceError::config(format!(
                "disk capacity {} must be a multiple of 4 KiB and at least 64 KiB",
                self.capacity_bytes
            )));
        }
        if !(self.seek_track_ms < self.seek_avg_ms && self.seek_avg_ms < self.seek_full_ms) {
            return Err(DeviceError::config(format!(
                "seeks must satisfy seek_track_ms < seek_avg_ms < seek_full_ms (got {} < {} < {})",
                self.seek_track_ms, self.seek_avg_ms, self.seek_full_ms
            )));
        }
        let m = (self.seek_avg_ms - self.seek_track_ms) / (self.seek_full_ms - self.seek_track_ms);
        if m < 0.1 {
            return Err(DeviceError::config(format!(
                "seek_avg_ms={} is too close to seek_track_ms for a seek curve; raise it",
                self.seek_avg_ms
            )));
        }
        if self.transfer_inner_mb_s > self.transfer_mb_s {
            return Err(DeviceError::config(
                "transfer_inner_mb_s must not exceed transfer_mb_s (outer tracks are faster)",
            ));
        }
        if self.ncq == 0 {
            return Err(DeviceError::config(
                "ncq must be at least 1 (1 = arrival order)",
            ));
        }
        if self.time_scale <= 0.0 || !self.time_scale.is_finite() {
            return Err(DeviceError::config("time_scale must be a positive number"));
        }
        Ok(())
    }
}

/// Derived timing constants.
#[derive(Clone, Debug)]
struct Geometry {
    capacity_sectors: u64,
    rev_ns: u64,
    track_ns: f64,
    full_ns: f64,
    exponent: f64,
    write_settle_ns: u64,
    zone_sectors: u64,
    /// Sectors per track of each zone.
    spt: [u64; ZONES as usize],
}

impl Geometry {
    fn new(c: &HddConfig) -> Self {
        let rev_s = 60.0 / f64::from(c.rpm);
        let m = (c.seek_avg_ms - c.seek_track_ms) / (c.seek_full_ms - c.seek_track_ms);
        // E[d^p] for two uniform positions is 2/((p+1)(p+2)); solve for p.
        let exponent = (-3.0 + (1.0 + 8.0 / m).sqrt()) / 2.0;
        let capacity_sectors = c.capacity_bytes / SECTOR_SIZE as u64;
        let mut spt = [1u64; ZONES as usize];
        for (z, s) in spt.iter_mut().enumerate() {
            let f = z as f64 / (ZONES - 1) as f64;
            let rate = c.transfer_mb_s + (c.transfer_inner_mb_s - c.transfer_mb_s) * f;
            *s = ((rate * 1e6 * rev_s / SECTOR_SIZE as f64).round() as u64).max(1);
        }
        Self {
            capacity_sectors,
            rev_ns: (rev_s * 1e9) as u64,
            track_ns: c.seek_track_ms * 1e6,
            full_ns: c.seek_full_ms * 1e6,
            exponent,
            write_settle_ns: (c.write_settle_ms * 1e6) as u64,
            zone_sectors: capacity_sectors.div_ceil(ZONES),
            spt,
        }
    }

    fn seek_ns(&self, from: u64, to: u64) -> u64 {
        if from == to {
            return 0;
        }
        let d = from.abs_diff(to) as f64 / self.capacity_sectors as f64;
        (self.track_ns + (self.full_ns - self.track_ns) * d.powf(self.exponent)) as u64
    }

    fn zone(&self, sector: u64) -> usize {
        ((sector / self.zone_sectors) as usize).min(ZONES as usize - 1)
    }

    /// Angle of `sector` as a fraction of a revolution.
    fn angle(&self, sector: u64) -> f64 {
        let z = self.zone(sector);
        let idx = (sector - z as u64 * self.zone_sectors) % self.spt[z];
        idx as f64 / self.spt[z] as f64
    }

    fn transfer_ns(&self, sector: u64, sectors: u64) -> u64 {
        let spt = self.spt[self.zone(sector)];
        sectors * self.rev_ns / spt
    }

    /// Rotational wait at modeled time `t` for `sector` to pass under the head.
    fn rotation_ns(&self, t: u64, sector: u64) -> u64 {
        let head = (t % self.rev_ns) as f64 / self.rev_ns as f64;
        let diff = (self.angle(sector) - head).rem_euclid(1.0);
        (diff * self.rev_ns as f64) as u64
    }
}

#[derive(Debug, Default)]
struct Actuator {
    /// Modeled time at which the actuator finishes its queued work.
    free_at: u64,
    /// Sector under the head after the last request.
    head: u64,
    /// End of the last read (read-ahead continues from there).
    read_ahead_from: Option<u64>,
    busy_ns: u64,
    /// Cached writes not yet on the platter: (modeled completion, bytes), oldest first.
    cached: std::collections::VecDeque<(u64, u64)>,
    cached_bytes: u64,
    reads: u64,
    writes: u64,
    read_pages: u64,
    write_pages: u64,
    flushes: u64,
    trimmed: u64,
    /// Requests waiting for the actuator (`ncq` > 1 in emulate mode).
    queue: queue::Queue,
}

/// An emulated hard disk. See the [module documentation](self) for the model.
#[derive(Debug)]
pub struct Hdd {
    config: HddConfig,
    geo: Geometry,
    clock: EmuClock,
    data: MemDevice,
    caps: Capabilities,
    act: Mutex<Actuator>,
    /// Latency suspended by [`BlockDevice::pause_timing`].
    paused: AtomicBool,
}

impl Hdd {
    /// Creates a disk.
    pub fn new(cfg: HddConfig) -> Result<Hdd> {
        cfg.validate()?;
        let data = MemDevice::new(MemConfig {
            capacity_bytes: cfg.capacity_bytes,
            atomic_write_unit: None,
            streams: 1,
        })?;
        let caps = Capabilities {
            sector_size: SECTOR_SIZE,
            capacity_sectors: cfg.capacity_bytes / SECTOR_SIZE as u64,
            atomic_write_unit: None,
            streams: 1,
            power_cut: true,
        };
        Ok(Hdd {
            geo: Geometry::new(&cfg),
            clock: EmuClock::new(cfg.time_scale),
            data,
            caps,
            act: Mutex::new(Actuator::default()),
            paused: AtomicBool::new(false),
            config: cfg,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &HddConfig {
        &self.config
    }

    /// Modeled service time (ns) of a seek between two sectors, for tests and calibration.
    pub fn seek_time_ns(&self, from: u64, to: u64) -> u64 {
        self.geo.seek_ns(from, to)
    }

    /// Modeled time (ns) at which the actuator finishes the work queued so far.
    pub fn modeled_now_ns(&self) -> u64 {
        self.act.lock().free_at
    }

    /// Counts a request when it arrives (queued or not).
    fn count(a: &mut Actuator, sectors: u64, write: bool) {
        if write {
            a.writes += 1;
            a.write_pages += sectors;
        } else {
            a.reads += 1;
            a.read_pages += sectors;
        }
    }

    /// Positioning time (seek, settle, rotational wait) of a request that starts at modeled
    /// time `start` from where the head is now; 0 for a read that continues the read-ahead.
    fn position_ns(&self, a: &Actuator, start: u64, sector: u64, write: bool) -> u64 {
        if !write && a.read_ahead_from == Some(sector) {
            return 0;
        }
        let mut t = self.geo.seek_ns(a.head, sector);
        if write && t > 0 {
            t += self.geo.write_settle_ns;
        }
        t + self.geo.rotation_ns(start + t, sector)
    }

    /// Serves a request on the actuator from modeled time `start`; returns its completion.
    fn serve(&self, a: &mut Actuator, start: u64, sector: u64, sectors: u64, write: bool) -> u64 {
        let position = self.position_ns(a, start, sector, write);
        a.queue.note_served(position);
        let end = start + position + self.geo.transfer_ns(sector, sectors);
        if !self.paused.load(Ordering::Relaxed) {
            a.busy_ns += end - start;
        }
        a.free_at = end;
        a.head = sector + sectors;
        a.read_ahead_from = (!write).then_some(sector + sectors);
        end
    }

    /// Drops cached writes that reached the platter by modeled time `now`.
    fn destaged(a: &mut Actuator, now: u64) {
        while a.cached.front().is_some_and(|&(e, _)| e <= now) {
            if let Some((_, b)) = a.cached.pop_front() {
                a.cached_bytes -= b;
            }
        }
    }

    /// Reserves actuator time for a request in arrival order; returns its modeled completion
    /// and, for a cached write in emulate mode, the time until which it must wait for room in
    /// the cache.
    fn reserve(&self, sector: u64, sectors: u64, write: bool) -> (u64, u64) {
        let emulate = self.emulating();
        let now = if emulate { self.clock.now_ns() } else { 0 };
        let mut a = self.act.lock();
        Self::count(&mut a, sectors, write);
        let start = a.free_at.max(now);
        if emulate {
            a.queue.note_wait(start.saturating_sub(now));
        }
        let end = self.serve(&mut a, start, sector, sectors, write);
        let mut room_at = 0;
        if write && self.config.cache && emulate {
            Self::destaged(&mut a, now);
            let bytes = sectors * SECTOR_SIZE as u64;
            let mut excess = (a.cached_bytes + bytes).saturating_sub(self.config.cache_bytes);
            for &(e, b) in &a.cached {
                if excess == 0 {
                    break;
                }
                room_at = e;
                excess = excess.saturating_sub(b);
            }
            if excess > 0 {
                // Larger than the whole cache: wait for the write itself.
                room_at = end;
            }
            a.cached.push_back((end, bytes));
            a.cached_bytes += bytes;
        }
        (end, room_at)
    }

    fn wait(&self, until: u64) {
        if self.emulating() {
            self.clock.wait_until(until);
        }
    }

    fn emulating(&self) -> bool {
        self.config.latency == LatencyMode::Emulate && !self.paused.load(Ordering::Relaxed)
    }

    /// Whether this request goes through the reordering queue. In `latency=count` nothing
    /// sleeps: a request is over when its call returns, so no two are ever pending together
    /// and there is nothing to reorder; arrival order is kept there (and while paused).
    fn queued(&self) -> bool {
        self.config.ncq > 1 && self.emulating()
    }
}

impl BlockDevice for Hdd {
    fn caps(&self) -> Capabilities {
        self.caps.clone()
    }

    fn read(&self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let n = check_io(&self.caps, sector, buf.len())?;
        self.data.read(sector, buf)?;
        if self.queued() {
            self.queued_io(sector, n, false);
        } else {
            let (end, _) = self.reserve(sector, n, false);
            self.wait(end);
        }
        Ok(())
    }

    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        let n = check_io(&self.caps, sector, buf.len())?;
        check_hints(&self.caps, sector, buf.len(), hints)?;
        self.data.write(sector, buf, hints)?;
        if self.queued() {
            if self.config.cache {
                self.queued_cached_write(sector, n);
            } else {
                self.data.flush()?;
                self.queued_io(sector, n, true);
            }
            return Ok(());
        }
        let (end, room_at) = self.reserve(sector, n, true);
        if self.config.cache {
            self.wait(room_at);
        } else {
            // Write-through: on the platter, hence durable, when acknowledged.
            self.data.flush()?;
            self.wait(end);
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        let until = if self.queued() {
            self.drain()
        } else {
            let mut a = self.act.lock();
            a.flushes += 1;
            a.free_at
        };
        self.wait(until);
        self.data.flush()
    }

    fn trim(&self, sector: u64, sectors: u64) -> Result<()> {
        check_range(&self.caps, sector, sectors)?;
        // A disk has no trim; the emulation forgets the data so it reads as zeros, at no cost.
        self.data.trim(sector, sectors)?;
        if !self.config.cache {
            self.data.flush()?;
        }
        self.act.lock().trimmed += sectors;
        Ok(())
    }

    fn stats(&self) -> DeviceStats {
        let a = self.act.lock();
        DeviceStats {
            host_read_pages: a.read_pages,
            host_write_pages: a.write_pages,
            host_read_requests: a.reads,
            host_write_requests: a.writes,
            flushes: a.flushes,
            trimmed_pages: a.trimmed,
            busy_time_us: a.busy_ns / 1000,
            streams: vec![StreamStats {
                id: 0,
                host_write_pages: a.write_pages,
                ..StreamStats::default()
            }],
            ..DeviceStats::default()
        }
    }

    fn pause_timing(&self, paused: bool) {
        let was = self.paused.swap(paused, Ordering::Relaxed);
        if was && !paused && self.config.latency == LatencyMode::Emulate {
            // The paused requests queued modeled time past the clock, and their writes sit in
            // the modeled cache: resumed, the disk is idle with an empty cache (its head where
            // the last request left it).
            let now = self.clock.now_ns();
            let mut a = self.act.lock();
            a.free_at = a.free_at.min(now);
            a.cached.clear();
            // Queued cached writes still hold their room in the cache.
            a.cached_bytes = a.queue.cached_bytes();
            // The timed waiter slept towards the old `free_at`: wake it to dispatch now.
            a.queue.wake_timer();
        }
    }

    fn reset_stats(&self) {
        let mut a = self.act.lock();
        a.busy_ns = 0;
        a.reads = 0;
        a.writes = 0;
        a.read_pages = 0;
        a.write_pages = 0;
        a.flushes = 0;
        a.trimmed = 0;
        a.queue.reset_stats();
    }

    fn describe(&self) -> String {
        let c = &self.config;
        format!(
            "hdd-15k(capacity={}, rpm={}, seek_avg_ms={}, transfer_mb_s={}, cache={}, {}latency={}, time_scale={})",
            crate::units::format_size(c.capacity_bytes),
            c.rpm,
            c.seek_avg_ms,
            c.transfer_mb_s,
            if c.cache { "on" } else { "off" },
            // Named only when set, so descriptions of FIFO disks read as before.
            if c.ncq > 1 {
                format!("ncq={}, ", c.ncq)
            } else {
                String::new()
            },
            match c.latency {
                LatencyMode::Count => "count",
                LatencyMode::Emulate => "emulate",
            },
            c.time_scale
        )
    }

    fn as_power_cut(&self) -> Option<&dyn PowerCut> {
        Some(self)
    }
}

impl PowerCut for Hdd {
    fn power_cut(&self, seed: u64) -> Result<PowerCutReport> {
        let r = self.data.power_cut(seed)?;
        let mut a = self.act.lock();
        a.read_ahead_from = None;
        a.cached.clear();
        a.cached_bytes = 0;
        // Cached writes still in the queue never reached the platter: the cut lost them.
        a.queue.drop_cached_writes();
        Ok(r)
    }
}
