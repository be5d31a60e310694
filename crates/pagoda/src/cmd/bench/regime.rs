//! The regime of a measured run: what bounded it. Every seed experiment was I/O-bound on a
//! named device (or commit-bound on the log); on a 2-core machine a cell can as easily be
//! CPU-bound, and then its ratio says nothing about the seed's effect. A run reports each
//! device's busy fraction over the measured window (the share of wall time with at least one
//! request in service, as iostat's %util), the CPU utilisation, the buffer hit ratio and the
//! bottleneck these imply.

use pagoda_engine::{
    stats::{CpuUsage, PhaseStat, ProfileStats},
    Db,
};
use serde_json::{json, Value};

/// A device busy at least this share of the window bounds the run.
const DEVICE_BOUND: f64 = 0.8;
/// CPU utilisation (all cores) from which the CPU bounds the run. Emulated devices wait for
/// their last 100 µs by yielding, which counts as CPU: the devices are judged first.
const CPU_BOUND: f64 = 0.9;

/// Counters at one instant.
pub(super) struct Snapshot {
    busy_us: [Option<u64>; 3],
    hits: u64,
    misses: u64,
}

const DEVICES: [&str; 3] = ["data", "log", "flash_cache"];

impl Snapshot {
    pub(super) fn take(db: &Db) -> Self {
        let (data, log) = db.device_stats();
        let flash = db.flash_device_stats();
        let b = db.stats().buffer;
        Self {
            busy_us: [
                Some(data.busy_time_us),
                Some(log.busy_time_us),
                flash.map(|f| f.busy_time_us),
            ],
            hits: b.hits,
            misses: b.misses,
        }
    }
}

/// The regime between two snapshots, as JSON: `window_s`, `busy` per device, `cpu_utilisation`,
/// `buffer_hit_ratio` and `bottleneck` (`data`, `log`, `flash_cache`, `cpu` or `none`).
pub(super) fn describe(before: &Snapshot, after: &Snapshot, cpu: &CpuUsage) -> Value {
    let window_us = cpu.wall_s * 1e6;
    let mut busy = serde_json::Map::new();
    let mut top: Option<(&str, f64)> = None;
    for (i, name) in DEVICES.iter().enumerate() {
        let (Some(a), Some(b)) = (before.busy_us[i], after.busy_us[i]) else {
            continue;
        };
        // Busy time is modelled; a device whose model runs ahead of the wall clock can report
        // more than the window, which still means saturated.
        let f = if window_us > 0.0 {
            (b.saturating_sub(a) as f64 / window_us).min(1.0)
        } else {
            0.0
        };
        busy.insert((*name).to_string(), json!(f));
        if top.is_none_or(|(_, t)| f > t) {
            top = Some((name, f));
        }
    }
    let (hits, misses) = (
        after.hits.saturating_sub(before.hits),
        after.misses.saturating_sub(before.misses),
    );
    let hit_ratio = if hits + misses > 0 {
        hits as f64 / (hits + misses) as f64
    } else {
        1.0
    };
    let bottleneck = match top {
        Some((name, f)) if f >= DEVICE_BOUND => name,
        _ if cpu.utilisation >= CPU_BOUND => "cpu",
        _ => "none",
    };
    json!({
        "window_s": cpu.wall_s,
        "busy": busy,
        "cpu_utilisation": cpu.utilisation,
        "buffer_hit_ratio": hit_ratio,
        "bottleneck": bottleneck,
    })
}

/// The regime of a run without device counters (a peer engine on files): the CPU alone.
pub(super) fn cpu_only(cpu: &CpuUsage) -> Value {
    json!({
        "window_s": cpu.wall_s,
        "busy": {},
        "cpu_utilisation": cpu.utilisation,
        "buffer_hit_ratio": null,
        "bottleneck": if cpu.utilisation >= CPU_BOUND { "cpu" } else { "none" },
    })
}

/// Adds where the clients' time went to a regime: each top-level phase's share of the summed
/// transaction time (`phases`), and within commit its largest sub-phase. A run bound by
/// neither a device nor the CPU is bound by what its clients wait for, and this names it.
pub(super) fn add_phases(regime: &mut Value, profile: &ProfileStats) {
    let top: Vec<&PhaseStat> = profile
        .phases
        .iter()
        .filter(|p| !p.phase.contains('.'))
        .collect();
    let total: f64 = top.iter().map(|p| p.total_ms).sum();
    if total <= 0.0 {
        return;
    }
    let shares: serde_json::Map<String, Value> = top
        .iter()
        .map(|p| (p.phase.clone(), json!(p.total_ms / total)))
        .collect();
    let commit_top = profile
        .phases
        .iter()
        .filter(|p| p.phase.starts_with("commit.") || p.phase.starts_with("log."))
        .max_by(|a, b| a.total_ms.total_cmp(&b.total_ms))
        .map(|p| p.phase.clone());
    regime["phases"] = Value::Object(shares);
    regime["commit_top_phase"] = json!(commit_top);
}

/// One line for the terminal.
pub(super) fn line(r: &Value) -> String {
    let busy = r["busy"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k} {:.0}%", v.as_f64().unwrap_or(0.0) * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let commit = r["phases"]["commit"].as_f64().map_or(String::new(), |c| {
        format!(
            "; commit {:.0}% of transaction time (most in {})",
            c * 100.0,
            r["commit_top_phase"].as_str().unwrap_or("?")
        )
    });
    format!(
        "regime: bottleneck {}; devices busy {busy}; cpu {:.0}%; buffer hit ratio {:.4}{commit}",
        r["bottleneck"].as_str().unwrap_or("?"),
        r["cpu_utilisation"].as_f64().unwrap_or(0.0) * 100.0,
        r["buffer_hit_ratio"].as_f64().unwrap_or(0.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(busy: [u64; 2], hits: u64, misses: u64) -> Snapshot {
        Snapshot {
            busy_us: [Some(busy[0]), Some(busy[1]), None],
            hits,
            misses,
        }
    }

    fn usage(wall_s: f64, utilisation: f64) -> CpuUsage {
        CpuUsage {
            wall_s,
            utilisation,
            ..CpuUsage::default()
        }
    }

    #[test]
    fn the_busiest_device_past_the_threshold_is_the_bottleneck() {
        let r = describe(
            &snap([1_000_000, 0], 10, 0),
            &snap([1_900_000, 300_000], 110, 100),
            &usage(1.0, 0.95),
        );
        assert_eq!(r["bottleneck"], "data");
        assert!((r["busy"]["data"].as_f64().unwrap() - 0.9).abs() < 1e-9);
        assert!((r["busy"]["log"].as_f64().unwrap() - 0.3).abs() < 1e-9);
        assert!(r["busy"].get("flash_cache").is_none());
        assert!((r["buffer_hit_ratio"].as_f64().unwrap() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn idle_devices_and_busy_cores_mean_cpu_bound_else_none() {
        let (a, b) = (snap([0, 0], 0, 0), snap([100_000, 200_000], 5, 0));
        assert_eq!(describe(&a, &b, &usage(1.0, 0.97))["bottleneck"], "cpu");
        assert_eq!(describe(&a, &b, &usage(1.0, 0.5))["bottleneck"], "none");
    }
}
