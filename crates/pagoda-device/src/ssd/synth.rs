//! Synthetic write workloads for `pagoda ssd synth`: 4 KiB writes through
//! [`Ssd::write_units`], no data.

use super::Ssd;
use crate::error::{DeviceError, Result};
use crate::stats::DeviceStats;
use crate::{BlockDevice, WriteHints};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Where the writes go.
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// Uniformly random 4 KiB units over the whole logical space.
    Uniform,
    /// `hot_access_pct` % of writes go to the first `hot_data_pct` % of the logical space,
    /// the rest to the remainder (e.g. 80/20). On a device with ≥ 2 streams, hot writes are
    /// tagged stream 1 and cold ones stream 0 (perfect separation hints); with one stream all
    /// go to stream 0.
    HotCold {
        /// Share of writes that go to the hot part, percent.
        hot_access_pct: f64,
        /// Size of the hot part, percent of the logical space.
        hot_data_pct: f64,
    },
    /// Sequential 4 KiB writes wrapping around the logical space.
    Sequential,
}

impl std::str::FromStr for Pattern {
    type Err = DeviceError;

    /// `uniform`, `sequential`, or `hotcold:HOT%/DATA%` (e.g. `hotcold:80/20`).
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            DeviceError::config(format!(
                "pattern '{s}': use uniform, sequential or hotcold:HOT/DATA (percentages, \
                 e.g. hotcold:80/20)"
            ))
        };
        match s.trim() {
            "uniform" => Ok(Self::Uniform),
            "sequential" => Ok(Self::Sequential),
            t => {
                let rest = t.strip_prefix("hotcold:").ok_or_else(bad)?;
                let (a, d) = rest.split_once('/').ok_or_else(bad)?;
                let pct = |x: &str| -> Result<f64> {
                    let v: f64 = x.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
                    if v > 0.0 && v < 100.0 {
                        Ok(v)
                    } else {
                        Err(bad())
                    }
                };
                Ok(Self::HotCold {
                    hot_access_pct: pct(a)?,
                    hot_data_pct: pct(d)?,
                })
            }
        }
    }
}

/// Brings the device to steady state: one full sequential fill, then one capacity of uniform
/// random 4 KiB overwrites (enough for greedy GC's free-space distribution to settle), then
/// zeroes the counters.
pub fn precondition(ssd: &Ssd, seed: u64) -> Result<()> {
    let n = ssd.caps().capacity_sectors;
    let mut lpn = 0;
    while lpn < n {
        let k = 64.min(n - lpn);
        ssd.write_units(lpn, k, WriteHints::NORMAL)?;
        lpn += k;
    }
    write_pattern(ssd, &Pattern::Uniform, n, seed ^ 0x5EED)?;
    ssd.flush()?;
    ssd.reset_stats();
    Ok(())
}

/// Preconditions, warms up with one capacity of `pattern` (unmeasured), then measures
/// `writes_multiple_of_capacity` × capacity 4 KiB writes of `pattern`; returns their counters.
pub fn run(
    ssd: &Ssd,
    pattern: &Pattern,
    writes_multiple_of_capacity: f64,
    seed: u64,
) -> Result<DeviceStats> {
    if !(writes_multiple_of_capacity.is_finite() && writes_multiple_of_capacity >= 0.0) {
        return Err(DeviceError::config(format!(
            "--writes {writes_multiple_of_capacity}: give a non-negative multiple of capacity"
        )));
    }
    precondition(ssd, seed)?;
    let n = ssd.caps().capacity_sectors;
    write_pattern(ssd, pattern, n, seed.wrapping_add(1))?;
    ssd.reset_stats();
    let count = (writes_multiple_of_capacity * n as f64).round() as u64;
    write_pattern(ssd, pattern, count, seed.wrapping_add(2))?;
    ssd.flush()?;
    Ok(ssd.stats())
}

/// Writes `count` 4 KiB units of `pattern` (no preconditioning, counters untouched).
pub fn write_pattern(ssd: &Ssd, pattern: &Pattern, count: u64, seed: u64) -> Result<()> {
    let n = ssd.caps().capacity_sectors;
    let two_streams = ssd.caps().streams >= 2;
    let mut rng = SmallRng::seed_from_u64(seed);
    match *pattern {
        Pattern::Uniform => {
            for _ in 0..count {
                ssd.write_units(rng.gen_range(0..n), 1, WriteHints::NORMAL)?;
            }
        }
        Pattern::Sequential => {
            let mut lpn = 0;
            for _ in 0..count {
                ssd.write_units(lpn, 1, WriteHints::NORMAL)?;
                lpn = if lpn + 1 == n { 0 } else { lpn + 1 };
            }
        }
        Pattern::HotCold {
            hot_access_pct,
            hot_data_pct,
        } => {
            if n < 2 {
                return Err(DeviceError::config(
                    "hotcold needs a device of at least 2 units",
                ));
            }
            let hot_n = ((n as f64 * hot_data_pct / 100.0) as u64).clamp(1, n - 1);
            let p_hot = hot_access_pct / 100.0;
            for _ in 0..count {
                let (lpn, hot) = if rng.gen_bool(p_hot) {
                    (rng.gen_range(0..hot_n), true)
                } else {
                    (rng.gen_range(hot_n..n), false)
                };
                let stream = u16::from(hot && two_streams);
                ssd.write_units(lpn, 1, WriteHints::stream(stream))?;
            }
        }
    }
    Ok(())
}
