//! A device that records the calls a wrapper must pass down, so that a test can put it under
//! any wrapper and see what reaches it.

use crate::mem::{MemConfig, MemDevice};
use crate::{BlockDevice, DeviceStats, PowerCut, PowerCutReport, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A RAM device (with power cut) that counts [`BlockDevice::reset_stats`] calls, remembers the
/// last [`BlockDevice::pause_timing`] and counts power cuts. Its [`BlockDevice::stats`] carry
/// [`Recording::STATS_MARK`] in `gc_runs`, which a RAM device never runs.
#[derive(Debug)]
pub struct Recording {
    mem: MemDevice,
    resets: AtomicU64,
    paused: AtomicBool,
    cuts: AtomicU64,
}

impl Recording {
    /// What `stats().gc_runs` reads, so that a test can tell these counters through a wrapper.
    pub const STATS_MARK: u64 = 4242;

    /// A device of `capacity_bytes` (a multiple of 4 KiB), one stream, no atomic writes.
    pub fn new(capacity_bytes: u64) -> Result<Self> {
        let mem = MemDevice::new(MemConfig {
            capacity_bytes,
            atomic_write_unit: None,
            streams: 1,
        })?;
        Ok(Self {
            mem,
            resets: AtomicU64::new(0),
            paused: AtomicBool::new(false),
            cuts: AtomicU64::new(0),
        })
    }

    /// Calls of `reset_stats` so far.
    pub fn resets(&self) -> u64 {
        self.resets.load(Ordering::SeqCst)
    }

    /// Whether timing is paused (the last `pause_timing`).
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Power cuts so far.
    pub fn cuts(&self) -> u64 {
        self.cuts.load(Ordering::SeqCst)
    }

    /// Calls `reset_stats`, `pause_timing` (on, then off) and `stats` on `dev`, a wrapper of
    /// this device, and returns the names of those that did not reach it (empty: all did).
    pub fn unforwarded(&self, dev: &dyn BlockDevice) -> Vec<&'static str> {
        let mut missed = Vec::new();
        let resets = self.resets();
        dev.reset_stats();
        if self.resets() == resets {
            missed.push("reset_stats");
        }
        dev.pause_timing(true);
        let on = self.paused();
        dev.pause_timing(false);
        if !on || self.paused() {
            missed.push("pause_timing");
        }
        if dev.stats().gc_runs != Self::STATS_MARK {
            missed.push("stats");
        }
        missed
    }
}

impl crate::DelegateDevice for Recording {
    fn inner(&self) -> &dyn BlockDevice {
        &self.mem
    }
    fn stats(&self) -> DeviceStats {
        DeviceStats {
            gc_runs: Self::STATS_MARK,
            ..self.mem.stats()
        }
    }
    fn reset_stats(&self) {
        self.resets.fetch_add(1, Ordering::SeqCst);
        self.mem.reset_stats();
    }
    fn pause_timing(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }
    fn describe(&self) -> String {
        format!("recording({})", self.mem.describe())
    }
    fn as_power_cut(&self) -> Option<&dyn PowerCut> {
        Some(self)
    }
}

impl PowerCut for Recording {
    fn power_cut(&self, seed: u64) -> Result<PowerCutReport> {
        self.cuts.fetch_add(1, Ordering::SeqCst);
        self.mem
            .as_power_cut()
            .map_or(Ok(PowerCutReport::default()), |pc| pc.power_cut(seed))
    }
}
