//! Opening a cycle's database: its devices (fresh, each with the device beneath its faults),
//! the options, cuts during recovery, faults still armed through it, and, in torn mode none,
//! the torn sectors put back.

use crate::faults::{Armed, Injector};
use crate::power::{CutPoint, Layered, Switch, TornSector};
use crate::{CrashTestOptions, CrashTestReport};
use pagoda_device::mem::{MemConfig, MemDevice};
use pagoda_device::{DeviceRef, SECTOR_SIZE};
use pagoda_engine::{
    fault::{FlashStep, RecoveryStep},
    Db, DbOptions, Error, FlashCacheOptions, Result,
};
use rand::rngs::SmallRng;
use rand::Rng;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The devices of a database under test.
pub(crate) struct Devices {
    data: DeviceRef,
    log: DeviceRef,
    /// The flash cache device, when the run has a flash cache.
    flash: Option<DeviceRef>,
    /// The fault devices under data and log, when the run injects faults.
    pub(crate) injector: Option<Injector>,
}

impl Devices {
    /// Each device (data, log, flash cache) with the device beneath its faults, for a
    /// [`Switch`]: the cut's own reads and writes must not meet a fault.
    fn layered(&self) -> Vec<Layered> {
        let (data, log, flash) = match &self.injector {
            Some(i) => i.raw(),
            None => (self.data.clone(), self.log.clone(), self.flash.clone()),
        };
        let flash = self.flash.clone().zip(flash);
        [(self.data.clone(), data), (self.log.clone(), log)]
            .into_iter()
            .chain(flash)
            .collect()
    }

    /// Writes the data sectors cuts tore back as they were before the torn writes (`torn` in
    /// the order they tore: undone from the last, so a sector torn twice gets its first state).
    /// Only a sector that still holds what its tear left: one an open wrote since has a state
    /// recovery chose, and restoring an older one under it would fake a lost write. Log and
    /// flash cache sectors stay torn: their checks must cope with a torn tail. Returns the
    /// sectors restored.
    pub(crate) fn untear(&self, torn: &[TornSector]) -> Result<u64> {
        let layers = self.layered();
        let mut restored = 0;
        for t in torn.iter().rev().filter(|t| t.dev == crate::power::DATA) {
            let (_, d) = &layers[t.dev];
            let mut now = vec![0u8; t.torn.len()];
            d.read(t.sector, &mut now)?;
            if now[..] != t.torn[..] {
                continue;
            }
            d.write(t.sector, &t.pre, pagoda_device::WriteHints::default())?;
            d.flush()?;
            restored += 1;
        }
        Ok(restored)
    }
}

fn can_cut(d: DeviceRef) -> Result<DeviceRef> {
    if d.as_power_cut().is_none() {
        return Err(Error::config(format!(
            "device {} cannot emulate a power cut; use an emulated SSD (sata-ssd, nvme-ssd) or mem",
            d.describe()
        )));
    }
    Ok(d)
}

pub(crate) fn fresh_devices(opts: &CrashTestOptions) -> Result<Devices> {
    let (mut data, mut log) = fresh_data_log(opts)?;
    let mut injector = None;
    if !opts.faults.is_empty() {
        let (i, d, l) = Injector::new(&opts.faults, opts.fault_chance, opts.page_size, data, log);
        (data, log, injector) = (d, l, Some(i));
    }
    let flash = match &opts.flash_cache {
        None => None,
        Some(fc) => Some(can_cut(match (&fc.device, &opts.device) {
            (Some(spec), _) | (None, Some(spec)) => spec.open()?,
            (None, None) => {
                // Just the cache's size (whole sectors): the engine must keep within it. No
                // atomic writes, so that unflushed slots can tear.
                let size = opts.flash_cache_bytes().div_ceil(SECTOR_SIZE as u64);
                Arc::new(MemDevice::new(MemConfig {
                    capacity_bytes: size.max(1) * SECTOR_SIZE as u64,
                    atomic_write_unit: None,
                    streams: 4,
                })?)
            }
        })?),
    };
    let flash = match &mut injector {
        Some(i) => flash.map(|f| i.wrap_flash(f)),
        None => flash,
    };
    Ok(Devices {
        data,
        log,
        flash,
        injector,
    })
}

fn fresh_data_log(opts: &CrashTestOptions) -> Result<(DeviceRef, DeviceRef)> {
    match &opts.device {
        None => {
            let cfg = MemConfig {
                capacity_bytes: 256 << 20,
                atomic_write_unit: Some(opts.page_size),
                streams: 4,
            };
            let d: DeviceRef = Arc::new(MemDevice::new(cfg.clone())?);
            let l: DeviceRef = Arc::new(MemDevice::new(MemConfig {
                capacity_bytes: 4 << 20,
                ..cfg
            })?);
            Ok((d, l))
        }
        Some(spec) => {
            let (d, l) = (spec.open()?, spec.open()?);
            Ok((can_cut(d)?, l))
        }
    }
}

pub(crate) fn db_options(opts: &CrashTestOptions, switch: &Arc<Switch>) -> DbOptions {
    let (d, l, f) = switch.devices();
    let o = DbOptions::with_devices(d, l)
        .page_size(opts.page_size)
        // Small enough that the cleaner and evictions run all the time, large enough for the
        // pages one commit changes (it cannot write them before its record is logged).
        .buffer_bytes(opts.pool_bytes())
        .torn(opts.torn)
        .commit(opts.commit)
        .log_capacity(opts.log_bytes)
        .observer(switch.observer())
        .sabotage(opts.sabotage)
        // Recovery must leave every tree well formed, not only the rows the oracle reads.
        .paranoid(true)
        // One thread: no background thread, so that the run is deterministic.
        .background(opts.threads > 1);
    let o = if opts.sparse_log {
        o.log_ready_bytes(0)
    } else {
        o
    };
    let o = match opts.commit_spill_bytes {
        Some(b) => o.commit_spill_bytes(b),
        None => o,
    };
    let o = match (&opts.flash_cache, f) {
        (Some(fc), Some(f)) => o.flash_cache(
            FlashCacheOptions::new(f)
                .size_bytes(opts.flash_cache_bytes())
                .policy(fc.policy)
                .pages(fc.pages),
        ),
        _ => o,
    };
    o.dw_pages(crate::DW_PAGES)
}

/// Where the opens of a run stand between cycles.
pub(crate) struct OpenState {
    /// Operations the last open without a cut took (cuts during recovery fall below).
    pub(crate) open_ops: u64,
    /// Operations counted when that open's final checkpoint started.
    pub(crate) open_ckpt_ops: u64,
    /// No database was opened on the devices yet.
    pub(crate) new_devices: bool,
    /// The sectors torn by cuts during the last open's recovery (see `Switch::torn`).
    pub(crate) torn_in_recovery: Vec<TornSector>,
    /// What the last open's recovery (every attempt) served another way (`Switch::served`).
    pub(crate) served_in_recovery: Vec<String>,
    /// Data pages cuts tore on these devices (torn mode none excuses detected corruption
    /// only there).
    pub(crate) torn_pages: BTreeSet<u64>,
}

impl OpenState {
    /// Notes the data pages `torn` tore (`spp` sectors per page).
    pub(crate) fn tore(&mut self, torn: &[TornSector], spp: u64) {
        let data = torn.iter().filter(|t| t.dev == crate::power::DATA);
        self.torn_pages.extend(data.map(|t| t.sector / spp));
    }

    pub(crate) fn new() -> Self {
        Self {
            open_ops: 16,
            open_ckpt_ops: 0,
            new_devices: true,
            torn_in_recovery: Vec::new(),
            served_in_recovery: Vec::new(),
            torn_pages: BTreeSet::new(),
        }
    }
}

/// The open result of a cycle's database and the cuts during its recovery.
pub(crate) type Opened = (std::result::Result<(Db, Arc<Switch>), Error>, Vec<CutPoint>);

/// Opens a cycle's database; when `recovering` a workload, power is cut during recovery in
/// some cycles and the open retried. `Err`: a configuration the engine refuses on new devices.
pub(crate) fn open_cycle(
    opts: &CrashTestOptions,
    devs: &Devices,
    rng: &mut SmallRng,
    recovering: bool,
    st: &mut OpenState,
    report: &mut CrashTestReport,
) -> Result<Opened> {
    open_armed(
        opts,
        devs,
        rng,
        recovering,
        st,
        report,
        (&[], &mut Vec::new()),
    )
}

/// [`open_cycle`] with the faults `armed` still armed: an open that fails with one's own
/// error (it reached recovery) is retried once the faults are disarmed, and that fault's flag
/// in `heard` says so.
pub(crate) fn open_armed(
    opts: &CrashTestOptions,
    devs: &Devices,
    rng: &mut SmallRng,
    recovering: bool,
    st: &mut OpenState,
    report: &mut CrashTestReport,
    (armed, heard): (&[Armed], &mut Vec<bool>),
) -> Result<Opened> {
    let mut recovery_cuts = Vec::new();
    st.torn_in_recovery.clear();
    st.served_in_recovery.clear();
    let opened = loop {
        let cut_open =
            recovering && recovery_cuts.len() < 2 && rng.gen_bool(opts.recovery_cut_chance);
        let countdown = if cut_open {
            let lo = if opts.bias_open_checkpoint && st.open_ckpt_ops > 0 {
                (st.open_ckpt_ops + 1).min(st.open_ops)
            } else {
                1
            };
            rng.gen_range(lo..=st.open_ops) as i64
        } else {
            i64::MAX
        };
        let switch = Switch::new(devs.layered(), rng.gen(), rng.gen_bool(0.5), countdown);
        let opened = Db::open(db_options(opts, &switch));
        st.served_in_recovery.extend(switch.served());
        match opened {
            Ok(db) => {
                switch.arm(i64::MAX);
                if switch.is_dead() {
                    // The background thread met the cut right after open: recover again.
                    db.abandon();
                    recovery_cut(&switch, st, report, &mut recovery_cuts);
                    continue;
                }
                if !cut_open {
                    st.open_ops = switch.ops().max(1);
                    st.open_ckpt_ops = switch.open_checkpoint_at();
                }
                st.new_devices = false;
                break Ok((db, switch));
            }
            Err(e)
                if armed.iter().any(|a| {
                    devs.injector
                        .as_ref()
                        .is_some_and(|i| i.carries(a, &e.to_string()))
                }) =>
            {
                // Recovery reported the device's failure: the device is replaced (disarmed)
                // and the database opened again, as an operator would.
                heard.resize(armed.len(), false);
                if let Some(i) = &devs.injector {
                    for (a, h) in armed.iter().zip(heard.iter_mut()) {
                        *h |= i.carries(a, &e.to_string());
                    }
                    i.disarm();
                }
                report.opens_failed_by_faults += 1;
            }
            Err(_) if switch.is_dead() => recovery_cut(&switch, st, report, &mut recovery_cuts),
            // A configuration the engine refuses, on the first open of new devices; later,
            // a refusal is a failed recovery (e.g. a flash cache it cannot use).
            Err(e @ Error::Config(_)) if st.new_devices => return Err(e),
            Err(e) => break Err(e),
        }
    };
    Ok((opened, recovery_cuts))
}

/// Notes a cut during recovery: what it tore, where it fell.
fn recovery_cut(
    switch: &Switch,
    st: &mut OpenState,
    report: &mut CrashTestReport,
    cuts: &mut Vec<CutPoint>,
) {
    st.torn_in_recovery.extend(switch.torn());
    if let Some(c) = switch.cut_point() {
        count_cut(report, &c);
        cuts.push(c);
    }
    report.cuts_during_recovery += 1;
}

pub(crate) fn count_cut(report: &mut CrashTestReport, c: &CutPoint) {
    let key = match c.flash_step {
        Some(step) => format!("{} ({step})", c.phase),
        None => c.phase.clone(),
    };
    *report.cut_phases.entry(key).or_default() += 1;
    report.torn_512_sectors += c.torn_512;
    if c.phase == "checkpoint" || c.phase == "open: checkpoint" {
        report.cuts_mid_checkpoint += 1;
    }
    if let Some(f) = &mut report.flash {
        match c.flash_step {
            Some(FlashStep::Append) => f.cuts_append += 1,
            Some(FlashStep::WriteBack) => f.cuts_write_back += 1,
            Some(FlashStep::DirCheckpoint) => f.cuts_dir_checkpoint += 1,
            None => {}
        }
        if c.phase == RecoveryStep::FlashRebuild.to_string() {
            f.cuts_rebuild += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power::{DATA, LOG};
    use pagoda_device::WriteHints;

    fn put(d: &DeviceRef, sector: u64, byte: u8) {
        d.write(sector, &[byte; SECTOR_SIZE], WriteHints::NORMAL)
            .unwrap();
    }

    fn at(d: &DeviceRef, sector: u64) -> u8 {
        let mut b = vec![0; SECTOR_SIZE];
        d.read(sector, &mut b).unwrap();
        b[0]
    }

    fn torn(dev: usize, sector: u64, pre: u8, left: u8) -> TornSector {
        TornSector {
            dev,
            sector,
            pre: vec![pre; SECTOR_SIZE].into(),
            torn: vec![left; SECTOR_SIZE].into(),
        }
    }

    #[test]
    fn untear_puts_back_only_data_sectors_nobody_wrote_since() {
        let devs = fresh_devices(&CrashTestOptions::default()).unwrap();
        put(&devs.data, 10, 2); // as the tear left it
        put(&devs.data, 11, 9); // rewritten by an open since its tear
        put(&devs.data, 12, 5); // torn twice: by the workload's cut, then by recovery's
        put(&devs.log, 10, 2); // a torn log tail stays: recovery must cope with it
        let cuts = [
            torn(DATA, 10, 1, 2),
            torn(DATA, 11, 1, 2),
            torn(DATA, 12, 3, 4),
            torn(DATA, 12, 4, 5),
            torn(LOG, 10, 1, 2),
        ];
        assert_eq!(devs.untear(&cuts).unwrap(), 3);
        assert_eq!(at(&devs.data, 10), 1);
        assert_eq!(at(&devs.data, 11), 9, "an open's write was undone");
        assert_eq!(
            at(&devs.data, 12),
            3,
            "a sector torn twice gets its first state"
        );
        assert_eq!(at(&devs.log, 10), 2, "the log's torn tail was put back");
    }
}
