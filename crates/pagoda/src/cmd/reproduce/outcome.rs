//! What a cell's result says, typed: the figures of a `pagoda bench ... --json` result the
//! report reads, through serde rather than by JSON paths, so that a renamed field is a
//! failed read the report lists, not a silent "–". The device counters are the emulator's
//! own [`DeviceStats`], read back as they were written. The crash tester's and the buffer
//! advisor's results have views of their own ([`Crash`], [`Advice`]).

use pagoda_device::DeviceStats;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A figure of a bench result, as a report reads it (`None`: the result does not have it).
pub(crate) type Fig = fn(&Outcome) -> Option<f64>;

/// The part of a `pagoda bench ... --json` result that the report reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Outcome {
    pub throughput_ops_s: Option<f64>,
    #[serde(rename = "tpmC")]
    pub tpmc: Option<f64>,
    /// The measured window the driver was asked for (seconds).
    pub duration_s: Option<f64>,
    /// Measured operations, and those of the warm-up before them.
    pub ops: Option<f64>,
    pub warmup_ops: Option<f64>,
    pub latency_us: Option<Latency>,
    pub cpu: Option<Cpu>,
    pub engine: Option<Engine>,
    /// By role: `data`, `log`, `flash_cache` (`null` for a peer, which runs on files).
    #[serde(default)]
    pub devices: Option<BTreeMap<String, DeviceStats>>,
    pub regime: Option<Regime>,
    pub config: Option<Config>,
    /// The restart after a power cut, when the cell asked for one.
    pub restart: Option<Restart>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Latency {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Cpu {
    /// Of all cores, 0-1.
    pub utilisation: Option<f64>,
}

/// The engine's figures (pagoda's; a peer reports fewer).
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Engine {
    pub buffer_hit_ratio: Option<f64>,
    pub flash_cache_hit_ratio: Option<f64>,
    pub commits_per_sync: Option<f64>,
    /// Share of the commit time per phase of the log path (`slot_join`, `slot_wait`,
    /// `log_release`, `log_cond_wait`), named as the seed's profile names them.
    #[serde(default, rename = "commit_phases_seed002")]
    pub commit_phases: BTreeMap<String, Option<f64>>,
    pub detail: Option<EngineDetail>,
}

/// The engine's own counters.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct EngineDetail {
    pub checkpoints: Option<f64>,
    pub buffer: Option<BufferDetail>,
    pub flash_cache: Option<FlashCacheDetail>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct BufferDetail {
    /// Pages copied to the double-write area.
    pub doublewrite_pages: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct FlashCacheDetail {
    /// Pages Group Second Chance appended again instead of evicting them.
    pub gsc_reappends: Option<f64>,
}

/// What bound the run over its measured window.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Regime {
    /// `data`, `log`, `flash_cache`, `cpu`, `none`, ...
    pub bottleneck: Option<String>,
    /// Share of the window each device had a request in service, by role.
    #[serde(default)]
    pub busy: BTreeMap<String, Option<f64>>,
    /// Share of the transaction time per phase (`commit`, `search`, ...).
    #[serde(default)]
    pub phases: BTreeMap<String, Option<f64>>,
    /// The commit phase that took most of the commit time (`commit.lock`, ...).
    pub commit_top_phase: Option<String>,
    /// The measured window (seconds).
    pub window_s: Option<f64>,
    pub buffer_hit_ratio: Option<f64>,
    pub cpu_utilisation: Option<f64>,
}

/// The run's configuration, as far as the report reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Config {
    pub buffer_bytes: Option<f64>,
    /// The data device's spec.
    pub data: Option<String>,
    pub driver: Option<Driver>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Driver {
    pub warmup_s: Option<f64>,
    pub limit: Option<Limit>,
}

/// When the measured run stopped: after `ops` operations (`None`: after a time).
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Limit {
    pub ops: Option<f64>,
}

/// The restart after a power cut at the end of the run.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Restart {
    pub open_ms: Option<f64>,
    pub flash_rebuild_ms: Option<f64>,
    pub records_replayed: Option<f64>,
    pub pages_read_from_data: Option<f64>,
    pub after: Option<AfterRestart>,
}

/// The run right after the restart.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct AfterRestart {
    #[serde(rename = "tpmC")]
    pub tpmc: Option<f64>,
}

impl Outcome {
    /// Reads a cell's saved result (`Err`: it is no bench result, with serde's reason).
    pub(crate) fn of(result: &serde_json::Value) -> Result<Self, String> {
        Self::deserialize(result).map_err(|e| e.to_string())
    }

    /// The counters of the device in `role` (`data`, `log`, `flash_cache`).
    pub(crate) fn device(&self, role: &str) -> Option<&DeviceStats> {
        self.devices.as_ref()?.get(role)
    }

    /// The data device's counters.
    pub(crate) fn data(&self) -> Option<&DeviceStats> {
        self.device("data")
    }

    /// What bound the run (`?` when the result does not say).
    pub(crate) fn bottleneck(&self) -> &str {
        self.regime
            .as_ref()
            .and_then(|r| r.bottleneck.as_deref())
            .unwrap_or("?")
    }

    /// The busy share of the device in `role` over the measured window.
    pub(crate) fn busy(&self, role: &str) -> Option<f64> {
        (*self.regime.as_ref()?.busy.get(role)?).filter(|v| v.is_finite())
    }

    /// The share of the transaction time in `phase`.
    pub(crate) fn phase(&self, phase: &str) -> Option<f64> {
        *self.regime.as_ref()?.phases.get(phase)?
    }

    /// The engine's counters.
    pub(crate) fn detail(&self) -> Option<&EngineDetail> {
        self.engine.as_ref()?.detail.as_ref()
    }

    /// The driver's configuration.
    pub(crate) fn driver(&self) -> Option<&Driver> {
        self.config.as_ref()?.driver.as_ref()
    }

    /// The operation count the run stopped at (`None`: it ran for a time).
    pub(crate) fn op_limit(&self) -> Option<f64> {
        self.driver()?.limit.as_ref()?.ops
    }

    /// The warm-up before the measured window (seconds).
    pub(crate) fn warmup_s(&self) -> Option<f64> {
        self.driver()?.warmup_s
    }
}

/// The figures the sections read most, by name.
pub(crate) mod fig {
    use super::Outcome;

    pub(crate) fn tpmc(o: &Outcome) -> Option<f64> {
        o.tpmc
    }

    pub(crate) fn throughput(o: &Outcome) -> Option<f64> {
        o.throughput_ops_s
    }

    pub(crate) fn duration(o: &Outcome) -> Option<f64> {
        o.duration_s
    }

    pub(crate) fn cpu(o: &Outcome) -> Option<f64> {
        o.cpu.as_ref()?.utilisation
    }

    pub(crate) fn buffer_hit_ratio(o: &Outcome) -> Option<f64> {
        o.engine.as_ref()?.buffer_hit_ratio
    }

    pub(crate) fn flash_cache_hit_ratio(o: &Outcome) -> Option<f64> {
        o.engine.as_ref()?.flash_cache_hit_ratio
    }

    pub(crate) fn commits_per_sync(o: &Outcome) -> Option<f64> {
        o.engine.as_ref()?.commits_per_sync
    }

    pub(crate) fn checkpoints(o: &Outcome) -> Option<f64> {
        o.detail()?.checkpoints
    }

    /// The data device's busy share of the measured window.
    pub(crate) fn data_busy(o: &Outcome) -> Option<f64> {
        o.busy("data")
    }

    /// The share of the transaction time spent committing.
    pub(crate) fn commit_share(o: &Outcome) -> Option<f64> {
        o.phase("commit")
    }

    /// 4 KiB units the host wrote to the data device.
    pub(crate) fn data_writes(o: &Outcome) -> Option<f64> {
        Some(o.data()?.host_write_pages as f64)
    }

    pub(crate) fn data_write_requests(o: &Outcome) -> Option<f64> {
        Some(o.data()?.host_write_requests as f64)
    }

    pub(crate) fn data_read_requests(o: &Outcome) -> Option<f64> {
        Some(o.data()?.host_read_requests as f64)
    }

    pub(crate) fn data_flushes(o: &Outcome) -> Option<f64> {
        Some(o.data()?.flushes as f64)
    }

    pub(crate) fn data_copybacks(o: &Outcome) -> Option<f64> {
        Some(o.data()?.copybacks as f64)
    }

    pub(crate) fn data_gc_runs(o: &Outcome) -> Option<f64> {
        Some(o.data()?.gc_runs as f64)
    }

    pub(crate) fn data_flash_programs(o: &Outcome) -> Option<f64> {
        Some(o.data()?.flash_programs as f64)
    }
}

/// A `pagoda crashtest --json` result, as far as the report reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Crash {
    pub cycles: u64,
    pub corruption_detected: u64,
    pub undetected_torn: u64,
    pub torn_pages_repaired: u64,
    pub lost_commits: u64,
    pub partial_transactions: u64,
    pub uncommitted_visible: u64,
}

impl Crash {
    /// Reads a crash-test cell's saved result.
    pub(crate) fn of(result: &serde_json::Value) -> Result<Self, String> {
        Self::deserialize(result).map_err(|e| e.to_string())
    }
}

/// A `pagoda advise buffer --json` result, as far as the report reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Advice {
    pub advice: AdviceText,
    /// Per device the advisor modelled: its predicted throughput per buffer size.
    pub devices: Vec<AdvisedDevice>,
    /// The miss-ratio curve: hit ratio per buffer size.
    pub mrc: Vec<MrcPoint>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct AdviceText {
    pub text: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct AdvisedDevice {
    pub device: String,
    pub predicted: Vec<Predicted>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Predicted {
    pub buffer_bytes: f64,
    pub tps: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct MrcPoint {
    pub buffer_bytes: f64,
    pub hit_ratio: Option<f64>,
}

impl Advice {
    /// Reads an advisor cell's saved result.
    pub(crate) fn of(result: &serde_json::Value) -> Result<Self, String> {
        Self::deserialize(result).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_come_from_their_fields() {
        let v = serde_json::json!({
            "throughput_ops_s": 100.0, "tpmC": 1770.0, "duration_s": 2.0,
            "engine": { "buffer_hit_ratio": 0.9, "detail": { "checkpoints": 3 } },
            "regime": { "bottleneck": "data", "busy": { "data": 0.8, "log": null },
                        "phases": { "commit": 0.6 } },
            "config": { "driver": { "warmup_s": 1.0, "limit": { "ops": 6000 } } },
            "devices": { "data": serde_json::to_value(DeviceStats {
                copybacks: 7, ..DeviceStats::default() }).unwrap() },
            "unrelated": { "x": 1 }
        });
        let o = Outcome::of(&v).unwrap();
        assert_eq!(fig::tpmc(&o), Some(1770.0));
        assert_eq!(fig::throughput(&o), Some(100.0));
        assert_eq!(fig::data_copybacks(&o), Some(7.0));
        assert_eq!(fig::checkpoints(&o), Some(3.0));
        assert_eq!(fig::data_busy(&o), Some(0.8));
        assert_eq!(o.busy("log"), None);
        assert_eq!(fig::commit_share(&o), Some(0.6));
        assert_eq!(o.bottleneck(), "data");
        assert_eq!((o.op_limit(), o.warmup_s()), (Some(6000.0), Some(1.0)));
        assert_eq!(o.device("flash_cache").map(|d| d.waf), None);
        assert_eq!(Outcome::default().bottleneck(), "?");
        // A peer's result: no devices, no engine detail.
        let peer = serde_json::json!({ "throughput_ops_s": 5.0, "devices": null,
            "engine": { "commits": 10 }, "regime": { "bottleneck": "cpu" } });
        let o = Outcome::of(&peer).unwrap();
        assert_eq!((fig::data_writes(&o), fig::checkpoints(&o)), (None, None));
    }

    #[test]
    fn a_field_of_the_wrong_type_fails_the_read_and_says_where() {
        let e = Outcome::of(&serde_json::json!({ "throughput_ops_s": "fast" })).unwrap_err();
        assert!(e.contains("invalid type"), "{e}");
        let e = Crash::of(&serde_json::json!({ "cycles": 20 })).unwrap_err();
        assert!(e.contains("missing field"), "{e}");
    }
}
