//! The throughput model of buffer-pool sizing: from a run's own figures, a miss-ratio curve and
//! each device's read latency and throughput, predicted TPS at every buffer size; the knee; the
//! advice ([`Advice`]).
//!
//! For buffer `B` (pages), with `MR(B)` the curve's miss ratio:
//!
//! ```text
//! m(B)   = accesses_per_op × MR(B)                          page reads per operation
//! TPS(B) = min( clients / (cpu_per_op + m(B) × read_latency),  closed system, no queueing
//!               device_iops_at_clients / m(B),                 the device saturates
//!               cores / cpu_per_op )                           the CPU saturates
//! ```
//!
//! The first term is the buffer-sizing paper's `A*HR + B*(1-HR)` per operation: `cpu_per_op`
//! already holds the in-memory work `A` of every access, `read_latency` is `B`.

use super::mrc::{Mrc, PageTrace};
use pagoda_device::units::format_size;
use std::fmt::Write as _;

/// Doubling the buffer past the knee buys less than this much more TPS on every device.
pub const KNEE_GAIN: f64 = 0.05;
/// The smallest pool the engine opens, in pages: the smallest size advised on.
pub const MIN_PAGES: u64 = 16;
/// Log-spaced buffer sizes the advice covers (the run's own size comes on top).
pub const POINTS: usize = 24;

/// What the run measured.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Client threads (the closed system's population).
    pub clients: usize,
    /// CPU cores the run could use.
    pub cores: usize,
    /// CPU seconds (user + system) per operation.
    pub cpu_s_per_op: f64,
    /// Buffer-pool page accesses (hits and misses) per operation.
    pub accesses_per_op: f64,
    /// Page size in bytes.
    pub page_size: u64,
    /// The run's own buffer, in pages.
    pub buffer_pages: u64,
}

/// A device's figures for the model (`pagoda advise buffer` probes them).
#[derive(Clone, Debug)]
pub struct DeviceFigures {
    /// The device's name in tables and advice.
    pub name: String,
    /// Seconds per page read at queue depth 1.
    pub read_latency_s: f64,
    /// Page reads per second with `clients` readers.
    pub iops: f64,
}

impl Measured {
    /// Predicted operations per second with miss ratio `mr` on device `d`.
    pub fn tps(&self, d: &DeviceFigures, mr: f64) -> f64 {
        let cpu = self.cpu_s_per_op.max(1e-9);
        let misses = self.accesses_per_op * mr.clamp(0.0, 1.0);
        let closed = self.clients as f64 / (cpu + misses * d.read_latency_s);
        let device = if misses > 0.0 {
            d.iops / misses
        } else {
            f64::INFINITY
        };
        closed.min(device).min(self.cores as f64 / cpu)
    }
}

/// About `points` buffer sizes in pages, log-spaced from `min` to `max`, plus `own`.
pub(crate) fn sizes(min: u64, max: u64, own: u64, points: usize) -> Vec<u64> {
    let max = max.max(min + 1);
    let ratio = (max as f64 / min as f64).powf(1.0 / (points.max(2) - 1) as f64);
    let mut v: Vec<u64> = (0..points)
        .map(|i| (min as f64 * ratio.powi(i as i32)).round() as u64)
        .chain([max, own])
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The knee: the smallest size `B` of `sizes` such that at `B` and at every larger size,
/// doubling the buffer raises the predicted TPS by less than [`KNEE_GAIN`] on every device.
/// `tps(device, pages)` predicts. The largest size when no smaller one qualifies.
pub(crate) fn knee(sizes: &[u64], devices: usize, tps: impl Fn(usize, f64) -> f64) -> Option<u64> {
    let flat = |b: u64| {
        (0..devices).all(|d| {
            let (now, doubled) = (tps(d, b as f64), tps(d, 2.0 * b as f64));
            doubled < (1.0 + KNEE_GAIN) * now
        })
    };
    let mut knee = *sizes.last()?;
    for &b in sizes.iter().rev() {
        if !flat(b) {
            break;
        }
        knee = b;
    }
    Some(knee)
}

/// The advice text: the knee, and at the current buffer on the slowest device, doubling the
/// buffer against moving to the fastest device.
pub(crate) fn advice(
    m: &Measured,
    devices: &[DeviceFigures],
    knee_pages: u64,
    tps: impl Fn(usize, f64) -> f64,
) -> String {
    let own = m.buffer_pages as f64;
    let size = |pages: f64| format_size((pages * m.page_size as f64) as u64);
    let mut t = String::new();
    let _ = write!(
        t,
        "Knee at {}: from there on, doubling the buffer buys less than {:.0} % more TPS on every \
         device modeled; ",
        size(knee_pages as f64),
        100.0 * KNEE_GAIN
    );
    let _ = writeln!(
        t,
        "the current buffer ({}) is {} it.",
        size(own),
        if m.buffer_pages < knee_pages {
            "below"
        } else {
            "at or past"
        }
    );
    let by_tps = |a: &usize, b: &usize| tps(*a, own).total_cmp(&tps(*b, own));
    let (Some(slow), Some(fast)) = (
        (0..devices.len()).min_by(by_tps),
        (0..devices.len()).max_by(by_tps),
    ) else {
        return t;
    };
    let now = tps(slow, own);
    let doubled = tps(slow, 2.0 * own);
    let _ = write!(
        t,
        "On {} ({}) at the current buffer: {:.0} ops/s predicted. Doubling the buffer to {} \
         gives {:.0} ops/s ({:.2}x)",
        devices[slow].name,
        if slow == fast {
            "the only device here"
        } else {
            "the slowest here"
        },
        now,
        size(2.0 * own),
        doubled,
        doubled / now,
    );
    if slow == fast {
        t.push_str("; name more devices with --devices to compare them.");
        return t;
    }
    let moved = tps(fast, own);
    let _ = write!(
        t,
        "; moving to {} at the current buffer gives {:.0} ops/s ({:.2}x): {}",
        devices[fast].name,
        moved,
        moved / now,
        if doubled >= moved {
            "the bigger buffer buys more for this workload."
        } else {
            "the faster device buys more for this workload."
        }
    );
    t
}

/// The database's extent in pages as a trace saw it: past the highest page referenced, at
/// least the curve's distinct pages and [`MIN_PAGES`]. The largest size advised on (and the
/// range a device probe should read over).
pub fn extent_pages(trace: &PageTrace, mrc: &Mrc) -> u64 {
    trace
        .warm
        .iter()
        .chain(&trace.references)
        .max()
        .map_or(MIN_PAGES, |p| p + 1)
        .max(mrc.distinct_pages().ceil() as u64)
}

/// Buffer-pool sizing from one run: predicted TPS per device at [`POINTS`] log-spaced buffer
/// sizes from [`MIN_PAGES`] to the database's extent (and the run's own), the knee, and
/// whether a bigger buffer or a faster device buys more.
///
/// ```
/// use pagoda_engine::sizing::{Advice, DeviceFigures, Measured, Mrc, ShardsRate};
/// // A trace of a loop over 1,000 pages (a real one comes from `Db::take_page_trace`).
/// let refs: Vec<u64> = (0..10_000).map(|i| i % 1_000).collect();
/// let mrc = Mrc::from_references(&refs, 0, ShardsRate::FULL);
/// let run = Measured { clients: 8, cores: 2, cpu_s_per_op: 50e-6, accesses_per_op: 3.0,
///     page_size: 4096, buffer_pages: 500 };
/// let disk = DeviceFigures { name: "disk".into(), read_latency_s: 5e-3, iops: 300.0 };
/// let advice = Advice::new(mrc, run, vec![disk], 1_000);
/// assert!(advice.knee_pages() >= 1_000); // a loop hits only once it all fits
/// assert!(advice.text().starts_with("Knee at"));
/// ```
#[derive(Debug)]
pub struct Advice {
    mrc: Mrc,
    measured: Measured,
    devices: Vec<DeviceFigures>,
    sizes: Vec<u64>,
    knee_pages: u64,
    text: String,
}

impl Advice {
    /// Advice from the run's curve and figures, for the devices given, over buffer sizes up to
    /// `extent_pages` (see [`extent_pages`]).
    pub fn new(
        mrc: Mrc,
        measured: Measured,
        devices: Vec<DeviceFigures>,
        extent_pages: u64,
    ) -> Self {
        let sizes = sizes(MIN_PAGES, extent_pages, measured.buffer_pages, POINTS);
        let tps = |d: usize, pages: f64| measured.tps(&devices[d], mrc.miss_ratio(pages));
        let knee_pages = knee(&sizes, devices.len(), tps).unwrap_or(extent_pages);
        let text = advice(&measured, &devices, knee_pages, tps);
        Self {
            mrc,
            measured,
            devices,
            sizes,
            knee_pages,
            text,
        }
    }

    /// [`Advice::new`] straight from a page trace ([`crate::Db::take_page_trace`]).
    pub fn from_trace(trace: &PageTrace, measured: Measured, devices: Vec<DeviceFigures>) -> Self {
        let mrc = Mrc::from_trace(trace);
        let extent = extent_pages(trace, &mrc);
        Self::new(mrc, measured, devices, extent)
    }

    /// Predicted operations per second on `device` with a buffer of `pages`.
    pub fn tps(&self, device: &DeviceFigures, pages: f64) -> f64 {
        self.measured.tps(device, self.mrc.miss_ratio(pages))
    }

    /// The miss-ratio curve the advice rests on.
    pub fn mrc(&self) -> &Mrc {
        &self.mrc
    }

    /// The run's figures.
    pub fn measured(&self) -> &Measured {
        &self.measured
    }

    /// The devices modeled.
    pub fn devices(&self) -> &[DeviceFigures] {
        &self.devices
    }

    /// The buffer sizes covered, in pages, ascending (the run's own among them).
    pub fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// The knee: from this size on, doubling the buffer buys less than [`KNEE_GAIN`] more
    /// TPS on every device.
    pub fn knee_pages(&self) -> u64 {
        self.knee_pages
    }

    /// The advice in words: the knee, and a bigger buffer against a faster device.
    pub fn text(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Measured {
        Measured {
            clients: 10,
            cores: 2,
            cpu_s_per_op: 100e-6,
            accesses_per_op: 4.0,
            page_size: 16384,
            buffer_pages: 100,
        }
    }

    fn disk() -> DeviceFigures {
        DeviceFigures {
            name: "disk".into(),
            read_latency_s: 5e-3,
            iops: 200.0,
        }
    }

    #[test]
    fn the_model_takes_the_smallest_of_its_three_bounds() {
        let m = m();
        // Two cores, ten clients.
        // No misses: the CPU bound, 2 cores / 100 µs.
        assert!((m.tps(&disk(), 0.0) - 20_000.0).abs() < 1e-6);
        // All misses: 4 reads per op at 200 reads/s, below 10 / (0.1 ms + 20 ms).
        assert!((m.tps(&disk(), 1.0) - 50.0).abs() < 1e-9);
        // A fast device at a small miss ratio: the closed-system term.
        let fast = DeviceFigures {
            name: "ssd".into(),
            read_latency_s: 100e-6,
            iops: 1e6,
        };
        let many_cores = Measured { cores: 16, ..m };
        let want = 10.0 / (100e-6 + 0.4 * 100e-6);
        assert!((many_cores.tps(&fast, 0.1) - want).abs() < 1e-6);
    }

    #[test]
    fn sizes_are_log_spaced_and_hold_the_run_s_own() {
        let s = sizes(16, 100_000, 777, 20);
        assert_eq!(s.first(), Some(&16));
        assert_eq!(s.last(), Some(&100_000));
        assert!(s.contains(&777));
        assert!(s.len() >= 20);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn the_knee_is_where_doubling_stops_paying_for_good() {
        // TPS doubles with the buffer up to 1,000 pages, then is flat; also flat at the very
        // start (an S-curve's low region), which must not count as the knee.
        let tps = |_: usize, b: f64| {
            if b < 10.0 {
                1.0
            } else {
                b.min(1_000.0)
            }
        };
        let s = [2, 4, 8, 16, 100, 500, 1_000, 4_000];
        assert_eq!(knee(&s, 1, tps), Some(1_000));
        assert_eq!(knee(&[], 1, tps), None);
    }

    #[test]
    fn advice_compares_a_bigger_buffer_with_a_faster_device() {
        let m = m();
        let devs = [disk(), {
            let mut d = disk();
            d.name = "ssd".into();
            d
        }];
        // The second device is 10x faster at any size; doubling gives 1.5x.
        let tps = |d: usize, b: f64| if d == 0 { b / 100.0 * 1.5 } else { 10.0 };
        let text = advice(&m, &devs, 400, tps);
        assert!(text.contains("below it"), "{text}");
        assert!(text.contains("the faster device buys more"), "{text}");
        assert!(text.contains("On disk"), "{text}");
        let alone = advice(&m, &devs[..1], 400, tps);
        assert!(alone.contains("the only device here"), "{alone}");
        assert!(alone.contains("--devices"), "{alone}");
    }
}
