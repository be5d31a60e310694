//! The figures an experiment file may compare, by the names the file writes
//! (`throughput`, `data.copybacks`, ...), each read from the typed bench result.

use super::super::outcome::Outcome;
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::str::FromStr;

/// A figure of a result an experiment can divide: one name per figure, as the file writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Metric {
    Throughput,
    TpmC,
    P50LatencyUs,
    P99LatencyUs,
    CpuUtilisation,
    BufferHitRatio,
    FlashCacheHitRatio,
    CommitsPerSync,
    Device(Role, Counter),
}

/// Which device of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Data,
    Log,
    FlashCache,
}

/// A device counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counter {
    Waf,
    Copybacks,
    GcRuns,
    Erases,
    HostWritePages,
    HostReadPages,
    FlashPrograms,
}

const PLAIN: [(&str, Metric); 8] = [
    ("throughput", Metric::Throughput),
    ("tpmc", Metric::TpmC),
    ("p50-latency-us", Metric::P50LatencyUs),
    ("p99-latency-us", Metric::P99LatencyUs),
    ("cpu-utilisation", Metric::CpuUtilisation),
    ("buffer-hit-ratio", Metric::BufferHitRatio),
    ("flash-cache-hit-ratio", Metric::FlashCacheHitRatio),
    ("commits-per-sync", Metric::CommitsPerSync),
];
const ROLES: [(&str, Role); 3] = [
    ("data", Role::Data),
    ("log", Role::Log),
    ("flash-cache", Role::FlashCache),
];
const COUNTERS: [(&str, Counter); 7] = [
    ("waf", Counter::Waf),
    ("copybacks", Counter::Copybacks),
    ("gc-runs", Counter::GcRuns),
    ("erases", Counter::Erases),
    ("host-write-pages", Counter::HostWritePages),
    ("host-read-pages", Counter::HostReadPages),
    ("flash-programs", Counter::FlashPrograms),
];

fn names<T>(list: &[(&str, T)]) -> String {
    list.iter().map(|x| x.0).collect::<Vec<_>>().join(", ")
}

impl FromStr for Metric {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(m) = PLAIN.iter().find(|x| x.0 == s) {
            return Ok(m.1);
        }
        let Some((role, counter)) = s.split_once('.') else {
            return Err(format!(
                "unknown metric '{s}': give one of {}, or DEVICE.COUNTER with DEVICE one of {} and COUNTER one of {}",
                names(&PLAIN),
                names(&ROLES),
                names(&COUNTERS)
            ));
        };
        let r = ROLES.iter().find(|x| x.0 == role).ok_or_else(|| {
            format!(
                "unknown device '{role}' in metric '{s}': give one of {}",
                names(&ROLES)
            )
        })?;
        let c = COUNTERS.iter().find(|x| x.0 == counter).ok_or_else(|| {
            format!(
                "unknown counter '{counter}' in metric '{s}': give one of {}",
                names(&COUNTERS)
            )
        })?;
        Ok(Metric::Device(r.1, c.1))
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = PLAIN.iter().find(|x| x.1 == *self) {
            return f.write_str(p.0);
        }
        if let Metric::Device(r, c) = self {
            let r = ROLES.iter().find(|x| x.1 == *r).map_or("?", |x| x.0);
            let c = COUNTERS.iter().find(|x| x.1 == *c).map_or("?", |x| x.0);
            return write!(f, "{r}.{c}");
        }
        f.write_str("?")
    }
}

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Metric {
    /// This figure of `o` (`None`: the result does not report it).
    pub(crate) fn of(self, o: &Outcome) -> Option<f64> {
        match self {
            Metric::Throughput => o.throughput_ops_s,
            Metric::TpmC => o.tpmc,
            Metric::P50LatencyUs => o.latency_us.as_ref()?.p50,
            Metric::P99LatencyUs => o.latency_us.as_ref()?.p99,
            Metric::CpuUtilisation => o.cpu.as_ref()?.utilisation,
            Metric::BufferHitRatio => o.engine.as_ref()?.buffer_hit_ratio,
            Metric::FlashCacheHitRatio => o.engine.as_ref()?.flash_cache_hit_ratio,
            Metric::CommitsPerSync => o.engine.as_ref()?.commits_per_sync,
            Metric::Device(r, c) => {
                let d = o.device(match r {
                    Role::Data => "data",
                    Role::Log => "log",
                    Role::FlashCache => "flash_cache",
                })?;
                Some(match c {
                    Counter::Waf => d.waf,
                    Counter::Copybacks => d.copybacks as f64,
                    Counter::GcRuns => d.gc_runs as f64,
                    Counter::Erases => d.erases as f64,
                    Counter::HostWritePages => d.host_write_pages as f64,
                    Counter::HostReadPages => d.host_read_pages as f64,
                    Counter::FlashPrograms => d.flash_programs as f64,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_name_parses_back_to_itself() {
        for (n, m) in PLAIN {
            assert_eq!(n.parse::<Metric>().unwrap(), m);
            assert_eq!(m.to_string(), n);
        }
        for (r, _) in ROLES {
            for (c, _) in COUNTERS {
                let n = format!("{r}.{c}");
                assert_eq!(n.parse::<Metric>().unwrap().to_string(), n);
            }
        }
        let e = "data.wa".parse::<Metric>().unwrap_err();
        assert!(
            e.contains("unknown counter 'wa'") && e.contains("waf"),
            "{e}"
        );
        let e = "tps".parse::<Metric>().unwrap_err();
        assert!(
            e.contains("unknown metric 'tps'") && e.contains("throughput"),
            "{e}"
        );
    }

    #[test]
    fn figures_come_from_their_fields() {
        let data = pagoda_device::DeviceStats {
            copybacks: 7,
            ..Default::default()
        };
        let cache = pagoda_device::DeviceStats {
            waf: 1.5,
            ..Default::default()
        };
        let v = serde_json::json!({
            "throughput_ops_s": 100.0, "tpmC": 1770.0,
            "engine": { "flash_cache_hit_ratio": 0.4, "buffer_hit_ratio": 0.9 },
            "devices": { "flash_cache": cache, "data": data },
            "unrelated": { "x": 1 }
        });
        let o = Outcome::of(&v).unwrap();
        let get = |m: &str| m.parse::<Metric>().unwrap().of(&o);
        assert_eq!(get("throughput"), Some(100.0));
        assert_eq!(get("tpmc"), Some(1770.0));
        assert_eq!(get("flash-cache.waf"), Some(1.5));
        assert_eq!(get("data.copybacks"), Some(7.0));
        assert_eq!(get("log.waf"), None);
        assert_eq!(get("buffer-hit-ratio"), Some(0.9));
    }
}
