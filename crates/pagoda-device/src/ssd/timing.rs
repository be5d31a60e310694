//! Modeled time (`latency=emulate`): timelines of the host link, each channel bus and each
//! parallel unit (die-plane). An operation reserves time on the resources it uses, in order,
//! each starting when both the previous step and the resource are free. All times are modeled
//! nanoseconds of the device's [`crate::clock::EmuClock`].
//!
//! Simplifications (documented so figures can be judged):
//! * a 4 KiB unit's program occupies its parallel unit for `tPROG / units_per_page` (the page
//!   is programmed once it is full, so the die's throughput is one page per tPROG), while the
//!   unit becomes durable `tPROG` after its transfer;
//! * planes are independent timelines (multi-plane operations always possible);
//! * units of one read request in the same flash page share one cell read;
//! * with a write cache, a write is acknowledged once its data crossed the link and it has a
//!   cache slot; a slot frees when the unit it holds is programmed (back-pressure). Without a
//!   cache a write is acknowledged when programmed;
//! * a flush completes when everything issued is programmed, or, with a power-loss-protected
//!   cache (`plp=1`), after the command overhead alone: the cache already counts as durable.

use super::config::{Geometry, SsdConfig};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Debug)]
pub(crate) struct Timeline {
    pu_free: Vec<u64>,
    chan_free: Vec<u64>,
    link_free: u64,
    t_read: u64,
    t_prog: u64,
    t_prog_unit: u64,
    t_erase: u64,
    chan_unit: u64,
    link_unit: u64,
    cmd: u64,
    channels: u32,
    cache_units: usize,
    /// Power-loss-protected cache: a flush need not wait for programs.
    plp: bool,
    /// Completion times of programs holding a cache slot (min-heap).
    cache: BinaryHeap<Reverse<u64>>,
    busy_until: u64,
    busy_ns: u64,
    /// Time of the request being served.
    pub(crate) now: u64,
}

fn ns(us: f64) -> u64 {
    (us * 1000.0).round() as u64
}

impl Timeline {
    pub(crate) fn new(cfg: &SsdConfig, geo: &Geometry) -> Self {
        let unit = crate::SECTOR_SIZE as f64;
        Self {
            pu_free: vec![0; geo.pus as usize],
            chan_free: vec![0; geo.channels as usize],
            link_free: 0,
            t_read: ns(cfg.read_us),
            t_prog: ns(cfg.program_us),
            t_prog_unit: ns(cfg.program_us / f64::from(geo.units_per_page)),
            t_erase: ns(cfg.erase_us * geo.erase_fraction()),
            chan_unit: (unit / cfg.channel_mbps * 1000.0).round() as u64,
            link_unit: (unit / cfg.link_mbps * 1000.0).round() as u64,
            cmd: ns(cfg.cmd_us),
            channels: geo.channels,
            cache_units: geo.cache_units as usize,
            plp: cfg.plp,
            cache: BinaryHeap::new(),
            busy_until: 0,
            busy_ns: 0,
            now: 0,
        }
    }

    fn busy(&mut self, start: u64, end: u64) {
        if end > self.busy_until {
            self.busy_ns += end - start.max(self.busy_until);
            self.busy_until = end;
        }
    }

    fn chan_of(&self, pu: u32) -> usize {
        (pu % self.channels) as usize
    }

    /// Start of a host command (controller overhead).
    pub(crate) fn command_start(&self) -> u64 {
        self.now + self.cmd
    }

    /// One host unit written to parallel unit `pu`; returns when the host may consider it
    /// acknowledged.
    pub(crate) fn host_write_unit(&mut self, pu: u32, t0: u64) -> u64 {
        let ls = t0.max(self.link_free);
        let le = ls + self.link_unit;
        self.link_free = le;
        let mut enter = le;
        if self.cache_units > 0 {
            while self.cache.peek().is_some_and(|Reverse(t)| *t <= self.now) {
                self.cache.pop();
            }
            if self.cache.len() >= self.cache_units {
                if let Some(Reverse(t)) = self.cache.pop() {
                    enter = enter.max(t);
                }
            }
        }
        let done = self.program(pu, enter, true);
        self.busy(ls, done);
        if self.cache_units > 0 {
            self.cache.push(Reverse(done));
            enter
        } else {
            done
        }
    }

    /// Channel transfer in, then program; returns when the unit is durable.
    fn program(&mut self, pu: u32, ready: u64, transfer: bool) -> u64 {
        let mut t = ready;
        if transfer {
            let c = self.chan_of(pu);
            let cs = t.max(self.chan_free[c]);
            t = cs + self.chan_unit;
            self.chan_free[c] = t;
        }
        let p = pu as usize;
        let ps = t.max(self.pu_free[p]);
        self.pu_free[p] = ps + self.t_prog_unit;
        ps + self.t_prog
    }

    /// One host unit read from `pu` (`cell_read` false when it shares a page already read by
    /// this request); returns when its data has crossed the link.
    pub(crate) fn host_read_unit(&mut self, pu: Option<u32>, cell_read: bool, t0: u64) -> u64 {
        let mut t = t0;
        if let Some(pu) = pu {
            let p = pu as usize;
            if cell_read {
                let rs = t.max(self.pu_free[p]);
                self.pu_free[p] = rs + self.t_read;
                t = rs + self.t_read;
            } else {
                t = t.max(self.pu_free[p]);
            }
            let c = self.chan_of(pu);
            let cs = t.max(self.chan_free[c]);
            t = cs + self.chan_unit;
            self.chan_free[c] = t;
        }
        let ls = t.max(self.link_free);
        self.link_free = ls + self.link_unit;
        self.busy(t0, ls + self.link_unit);
        ls + self.link_unit
    }

    /// GC moves one unit from `src` to `dst` parallel unit (on-die copyback when equal).
    pub(crate) fn copyback(&mut self, src: u32, dst: u32) {
        let s = src as usize;
        let rs = self.now.max(self.pu_free[s]);
        self.pu_free[s] = rs + self.t_read;
        let done = self.program(dst, rs + self.t_read, src != dst);
        self.busy(rs, done);
    }

    /// A block erase on `pu`.
    pub(crate) fn erase(&mut self, pu: u32) {
        let p = pu as usize;
        let s = self.now.max(self.pu_free[p]);
        self.pu_free[p] = s + self.t_erase;
        self.busy(s, s + self.t_erase);
    }

    /// When a flush issued now completes.
    pub(crate) fn flushed(&self) -> u64 {
        if self.plp {
            self.command_start()
        } else {
            self.drained()
        }
    }

    /// When everything issued so far is programmed.
    fn drained(&self) -> u64 {
        let cache = self.cache.iter().map(|Reverse(t)| *t).max().unwrap_or(0);
        let pus = self.pu_free.iter().copied().max().unwrap_or(0);
        cache.max(pus).max(self.link_free).max(self.now)
    }

    /// Forgets in-flight work (power cut).
    pub(crate) fn reset(&mut self, now: u64) {
        self.pu_free.iter_mut().for_each(|t| *t = now);
        self.chan_free.iter_mut().for_each(|t| *t = now);
        self.link_free = now;
        self.cache.clear();
    }

    /// Modeled busy time (union of operation intervals), µs.
    pub(crate) fn busy_us(&self) -> u64 {
        self.busy_ns / 1000
    }

    pub(crate) fn reset_busy(&mut self) {
        self.busy_ns = 0;
    }
}
