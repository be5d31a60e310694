//! The power switch of a crash-test cycle: wraps the data and log devices (and the flash cache
//! device, when there is one), counts their writes, flushes and trims, cuts power on all of them
//! at once at a chosen operation, and can tear unflushed 4 KiB sectors at 512-byte granularity
//! (a device with 512-byte physical sectors).
//!
//! The cut report names what the engine was doing: the recovery step, a checkpoint, the cleaner
//! or a commit, and the flash cache step in progress. The engine reports a flash step
//! ([`Event::Flash`]) on the thread that runs it, before it starts, and reports no end; the
//! step counts as in progress on that thread while the thread's operations stay on the devices
//! the step writes (the cache device for an append or a directory checkpoint, the data device
//! for a write-back, whose sync of the data device ends it), until the thread starts another
//! step, a checkpoint or a recovery step.
//! While the flash cache rebuilds its directory at open (it mostly reads), reads of the cache
//! device count as operations too, so that cuts can fall inside the rebuild.

use pagoda_device::{BlockDevice, DeviceError, DeviceRef, WriteHints, SECTOR_SIZE};
use pagoda_engine::{
    fault::{Event, FlashStep, Observer, RecoveryStep},
    format::Stream,
};
use parking_lot::{Mutex, RwLock};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;

/// Index of the data device behind a switch.
pub(crate) const DATA: usize = 0;
/// Index of the log device.
pub(crate) const LOG: usize = 1;
/// Index of the flash cache device (when there is one).
pub(crate) const FLASH: usize = 2;

/// Name of device `dev` in cut reports.
fn device_name(dev: usize) -> &'static str {
    match dev {
        DATA => "data",
        LOG => "log",
        _ => "flash",
    }
}

/// Size of the pieces a torn sector is made of.
pub(crate) const TEAR_UNIT: usize = 512;

/// Where a power cut fell.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CutPoint {
    /// The operation (1-based count of writes, flushes and trims since power-on) that was cut.
    pub op: u64,
    /// `data`, `log` or `flash` (the flash cache device).
    pub device: String,
    /// `write`, `flush`, `trim`, or `read` (a read of the cache device during its rebuild).
    pub kind: String,
    /// First sector (4 KiB) of the request.
    pub sector: u64,
    /// Sectors of the request.
    pub sectors: u64,
    /// Write stream of the request.
    pub stream: u16,
    /// Whether the request was an atomic write.
    pub atomic: bool,
    /// What the engine was doing (recovery step, checkpoint, cleaner, commit).
    pub phase: String,
    /// The flash cache step in progress on the thread whose operation was cut, if any.
    pub flash_step: Option<FlashStep>,
    /// Unflushed sectors torn at 512-byte granularity after the cut.
    pub torn_512: u64,
}

impl std::fmt::Display for CutPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "op {} ({} {} at sector {}+{}, stream {}{}) during {}",
            self.op,
            self.device,
            self.kind,
            self.sector,
            self.sectors,
            self.stream,
            if self.atomic { ", atomic" } else { "" },
            self.phase
        )?;
        if let Some(step) = self.flash_step {
            write!(f, " ({step})")?;
        }
        if self.torn_512 > 0 {
            write!(f, ", {} sectors torn at 512 B", self.torn_512)?;
        }
        Ok(())
    }
}

/// An unflushed sector: sequence number of its last write, pre-image, newest image.
type Images = (u64, Arc<[u8]>, Arc<[u8]>);

/// Sectors written since the last flush.
#[derive(Debug, Default)]
struct Unflushed {
    seq: u64,
    sectors: HashMap<u64, Images>,
}

#[derive(Debug, Clone, Copy)]
struct Req {
    dev: usize,
    kind: &'static str,
    sector: u64,
    sectors: u64,
    stream: u16,
    atomic: bool,
}

impl Req {
    fn new(dev: usize, kind: &'static str, sector: u64, sectors: u64) -> Self {
        Self {
            dev,
            kind,
            sector,
            sectors,
            stream: 0,
            atomic: false,
        }
    }
}

/// The shared power switch of one cycle.
pub(crate) struct Switch {
    /// Data, log and (optionally) flash cache devices, at [`DATA`], [`LOG`], [`FLASH`].
    inner: Vec<DeviceRef>,
    /// The same devices beneath their faults: the switch's own reads (pre-images) and
    /// writes (torn sectors) go there, so that no injected fault acts on them.
    raw: Vec<DeviceRef>,
    gate: RwLock<()>,
    dead: AtomicBool,
    countdown: AtomicI64,
    ops: AtomicU64,
    seed: u64,
    tear512: bool,
    unflushed: Vec<Mutex<Unflushed>>,
    order: Vec<RwLock<()>>,
    opening: Mutex<Option<RecoveryStep>>,
    /// The flash cache is rebuilding its directory (reads of its device count as operations).
    rebuilding: AtomicBool,
    /// The flash step each thread started last and is still in (see the module doc).
    flash_steps: Mutex<HashMap<ThreadId, FlashStep>>,
    in_checkpoint: AtomicU32,
    dw_pending: AtomicBool,
    cut: Mutex<Option<CutPoint>>,
    cut_mid_dw: AtomicBool,
    /// Operations counted when the checkpoint that ends recovery started.
    open_ckpt_at: AtomicU64,
    /// Hunting aid: (chance, max ops) with which a workload checkpoint arms the cut.
    ckpt_bias: Mutex<Option<(f64, u64, SmallRng)>>,
    /// The sectors the cut tore (device index, sector, the contents before the write).
    torn: Mutex<Vec<TornSector>>,
    /// The data sectors unflushed at the cut, which the device itself may have kept or
    /// dropped, one by one (a page of several sectors then mixes two versions).
    at_risk: Mutex<Vec<TornSector>>,
    /// Errors that reached the database's failure path carrying an injected fault's tag
    /// (the engine keeps only its first cause; a fault's error may come second).
    heard: Mutex<Vec<String>>,
    /// Reads the engine served another way after an error or a failed check (a flash cache
    /// slot's page from the data device), naming the slot and the error.
    served: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Switch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Switch")
            .field("dead", &self.dead)
            .field("ops", &self.ops)
            .finish_non_exhaustive()
    }
}

/// A device under test and the device beneath its injected faults (the same device when
/// none are injected).
pub(crate) type Layered = (DeviceRef, DeviceRef);

/// A sector a cut tore.
#[derive(Clone, Debug)]
pub(crate) struct TornSector {
    /// The device's index ([`DATA`], [`LOG`], [`FLASH`]).
    pub dev: usize,
    pub sector: u64,
    /// Its contents before the torn write.
    pub pre: Arc<[u8]>,
    /// What the tear left there.
    pub torn: Arc<[u8]>,
}

/// Tagged failure texts kept per switch.
const HEARD_KEPT: usize = 64;

fn off() -> DeviceError {
    DeviceError::Unsupported("power is off (emulated power cut)".into())
}

impl Switch {
    /// A switch over `devices`: data, log and the flash cache device, if any; `countdown` =
    /// operations until the cut (`i64::MAX`: none).
    pub(crate) fn new(
        devices: Vec<Layered>,
        seed: u64,
        tear512: bool,
        countdown: i64,
    ) -> Arc<Self> {
        let (inner, raw): (Vec<DeviceRef>, Vec<DeviceRef>) = devices.into_iter().unzip();
        let n = inner.len();
        Arc::new(Self {
            inner,
            raw,
            gate: RwLock::new(()),
            dead: AtomicBool::new(false),
            countdown: AtomicI64::new(countdown),
            ops: AtomicU64::new(0),
            seed,
            tear512,
            unflushed: (0..n).map(|_| Mutex::default()).collect(),
            order: (0..n).map(|_| RwLock::new(())).collect(),
            opening: Mutex::new(None),
            rebuilding: AtomicBool::new(false),
            flash_steps: Mutex::default(),
            in_checkpoint: AtomicU32::new(0),
            dw_pending: AtomicBool::new(false),
            cut: Mutex::new(None),
            cut_mid_dw: AtomicBool::new(false),
            open_ckpt_at: AtomicU64::new(0),
            ckpt_bias: Mutex::new(None),
            heard: Mutex::default(),
            served: Mutex::default(),
            torn: Mutex::default(),
            at_risk: Mutex::default(),
        })
    }

    /// The data, log and flash cache (if any) devices behind this switch.
    pub(crate) fn devices(self: &Arc<Self>) -> (DeviceRef, DeviceRef, Option<DeviceRef>) {
        let dev = |dev| -> DeviceRef {
            Arc::new(CutDevice {
                switch: self.clone(),
                dev,
            })
        };
        (dev(DATA), dev(LOG), self.has_flash().then(|| dev(FLASH)))
    }

    fn has_flash(&self) -> bool {
        self.inner.len() > FLASH
    }

    /// Ends the flash step the calling thread was in.
    fn end_flash_step(&self) {
        if self.has_flash() {
            self.flash_steps.lock().remove(&std::thread::current().id());
        }
    }

    /// The flash step the calling thread is in, for operation `req`: a step is over once its
    /// thread works on a device the step does not write, and a write-back once it synced the
    /// data device (what follows on the data device, such as a superblock, is not part of it).
    fn flash_step_for(&self, req: &Req) -> Option<FlashStep> {
        if !self.has_flash() {
            return None;
        }
        let me = std::thread::current().id();
        let mut steps = self.flash_steps.lock();
        let step = *steps.get(&me)?;
        let on = match step {
            FlashStep::Append | FlashStep::DirCheckpoint => FLASH,
            FlashStep::WriteBack => DATA,
        };
        if on != req.dev {
            steps.remove(&me);
            return None;
        }
        if step == FlashStep::WriteBack && req.kind == "flush" {
            steps.remove(&me);
        }
        Some(step)
    }

    /// An observer that tracks what the engine is doing, for the cut report.
    pub(crate) fn observer(self: &Arc<Self>) -> Observer {
        let me = Arc::downgrade(self);
        Arc::new(move |e| {
            let Some(s) = me.upgrade() else { return };
            match e {
                Event::Recovery(step) => {
                    if step == RecoveryStep::Checkpoint {
                        s.open_ckpt_at.store(s.ops(), Ordering::Release);
                    }
                    s.rebuilding
                        .store(step == RecoveryStep::FlashRebuild, Ordering::Release);
                    s.end_flash_step();
                    *s.opening.lock() = Some(step);
                }
                Event::Opened => {
                    s.rebuilding.store(false, Ordering::Release);
                    s.end_flash_step();
                    *s.opening.lock() = None;
                }
                Event::CheckpointBegin => {
                    s.end_flash_step();
                    s.in_checkpoint.fetch_add(1, Ordering::AcqRel);
                    if s.opening.lock().is_none() {
                        if let Some((p, n, rng)) = &mut *s.ckpt_bias.lock() {
                            if rng.gen_bool(*p) {
                                let at = rng.gen_range(1..=*n) as i64;
                                if s.countdown.load(Ordering::Acquire) > at {
                                    s.countdown.store(at, Ordering::Release);
                                }
                            }
                        }
                    }
                }
                Event::CheckpointEnd => {
                    s.end_flash_step();
                    s.in_checkpoint.fetch_sub(1, Ordering::AcqRel);
                }
                Event::Flash(step) => {
                    if s.has_flash() {
                        s.flash_steps
                            .lock()
                            .insert(std::thread::current().id(), step);
                    }
                }
                Event::Failed(text) => {
                    let mut heard = s.heard.lock();
                    if text.contains(crate::met::TAG_START) && heard.len() < HEARD_KEPT {
                        heard.push(text);
                    }
                }
                Event::Served(text) => {
                    let mut served = s.served.lock();
                    if served.len() < HEARD_KEPT {
                        served.push(text);
                    }
                }
            }
        })
    }

    /// The tagged errors that reached the database's failure path so far (see `heard`).
    pub(crate) fn heard(&self) -> Vec<String> {
        self.heard.lock().clone()
    }

    /// What the engine served another way so far (see `served`).
    pub(crate) fn served(&self) -> Vec<String> {
        self.served.lock().clone()
    }

    /// Hunting aid: each workload checkpoint arms the cut within its first `ops` operations
    /// with chance `p`.
    pub(crate) fn bias_checkpoints(&self, p: f64, ops: u64) {
        if p > 0.0 {
            *self.ckpt_bias.lock() =
                Some((p, ops.max(1), SmallRng::seed_from_u64(self.seed ^ 0xb1a5)));
        }
    }

    /// Operations counted when the checkpoint that ends recovery started (0: not reached).
    pub(crate) fn open_checkpoint_at(&self) -> u64 {
        self.open_ckpt_at.load(Ordering::Acquire)
    }

    /// Arms the cut `ops` operations from now.
    pub(crate) fn arm(&self, ops: i64) {
        self.countdown.store(ops, Ordering::Release);
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// Operations counted since power-on.
    pub(crate) fn ops(&self) -> u64 {
        self.ops.load(Ordering::Acquire)
    }

    /// The sectors the cut may have torn, each with its contents before the write: the data
    /// sectors unflushed at the cut (holding, if the device kept them, their new image), then
    /// the sectors the switch tore in 512-byte pieces (holding that mix).
    pub(crate) fn torn(&self) -> Vec<TornSector> {
        let mut all = self.at_risk.lock().clone();
        all.extend(self.torn.lock().iter().cloned());
        all
    }

    pub(crate) fn cut_point(&self) -> Option<CutPoint> {
        self.cut.lock().clone()
    }

    pub(crate) fn cut_mid_doublewrite(&self) -> bool {
        self.cut_mid_dw.load(Ordering::Acquire)
    }

    fn phase(&self, dev: usize) -> String {
        if let Some(step) = *self.opening.lock() {
            return step.to_string();
        }
        if self.in_checkpoint.load(Ordering::Acquire) > 0 {
            return "checkpoint".into();
        }
        match dev {
            DATA => "cleaner (page write-back)".into(),
            LOG => "commit (log write or sync)".into(),
            _ => "cleaner".into(),
        }
    }

    /// Cuts power now (if it is still on): a quiet-moment cut after the workload ended.
    pub(crate) fn cut_now(&self) -> pagoda_device::Result<()> {
        let _g = self.gate.write();
        self.cut_locked(None)
    }

    fn cut_locked(&self, req: Option<(Req, Option<FlashStep>)>) -> pagoda_device::Result<()> {
        if self.dead.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let mut point = match req {
            Some((r, flash_step)) => CutPoint {
                op: self.ops.load(Ordering::Acquire),
                device: device_name(r.dev).into(),
                kind: r.kind.into(),
                sector: r.sector,
                sectors: r.sectors,
                stream: r.stream,
                atomic: r.atomic,
                phase: self.phase(r.dev),
                flash_step,
                torn_512: 0,
            },
            None => CutPoint {
                op: self.ops.load(Ordering::Acquire),
                kind: "none".into(),
                phase: "idle (workload ended before the chosen operation)".into(),
                ..CutPoint::default()
            },
        };
        self.cut_mid_dw
            .store(self.dw_pending.load(Ordering::Acquire), Ordering::Release);
        // What the device's own cut may keep or drop, sector by sector (with its new image
        // where it `torn` stands for what the sector may hold now).
        let at_risk: Vec<TornSector> = self.unflushed[DATA]
            .lock()
            .sectors
            .iter()
            .map(|(&sector, (_, pre, new))| TornSector {
                dev: DATA,
                sector,
                pre: pre.clone(),
                torn: new.clone(),
            })
            .collect();
        self.at_risk.lock().extend(at_risk);
        for (i, d) in self.inner.iter().enumerate() {
            let pc = d.as_power_cut().ok_or_else(|| {
                DeviceError::Unsupported(format!(
                    "device {} cannot emulate a power cut",
                    d.describe()
                ))
            })?;
            pc.power_cut(self.seed.wrapping_add(i as u64))?;
        }
        if self.tear512 {
            point.torn_512 = self.tear()?;
        }
        *self.cut.lock() = Some(point);
        Ok(())
    }

    /// After the devices' own cut: some unflushed sectors end up as a mix of their pre-image
    /// and their newest image, in 512-byte pieces.
    fn tear(&self) -> pagoda_device::Result<u64> {
        let mut rng = SmallRng::seed_from_u64(self.seed ^ 0x7ea5);
        let mut torn = 0;
        for (i, d) in self.raw.iter().enumerate() {
            let mut u = self.unflushed[i].lock();
            let mut sectors: Vec<_> = u.sectors.drain().collect();
            sectors.sort_by_key(|(s, _)| *s);
            let mut wrote = false;
            for (sector, (_, pre, new)) in sectors {
                if !rng.gen_bool(0.3) {
                    continue;
                }
                let mut mix = pre.to_vec();
                let mut changed = false;
                for p in 0..SECTOR_SIZE / TEAR_UNIT {
                    if rng.gen_bool(0.5) {
                        let r = p * TEAR_UNIT..(p + 1) * TEAR_UNIT;
                        changed |= mix[r.clone()] != new[r.clone()];
                        mix[r.clone()].copy_from_slice(&new[r]);
                    }
                }
                if changed && mix[..] != new[..] {
                    d.write(sector, &mix, WriteHints::NORMAL)?;
                    self.torn.lock().push(TornSector {
                        dev: i,
                        sector,
                        pre: pre.clone(),
                        torn: mix.into(),
                    });
                    wrote = true;
                    torn += 1;
                }
            }
            if wrote {
                d.flush()?;
            }
        }
        Ok(torn)
    }

    /// Runs one counted operation unless the power is off; cuts when the countdown ends.
    fn io<T>(
        &self,
        req: Req,
        f: impl FnOnce() -> pagoda_device::Result<T>,
    ) -> pagoda_device::Result<T> {
        let flash_step;
        {
            let _g = self.gate.read();
            if self.is_dead() {
                return Err(off());
            }
            // Also keeps the thread's flash step current (it ends when the thread moves on).
            flash_step = self.flash_step_for(&req);
            self.ops.fetch_add(1, Ordering::AcqRel);
            if self.countdown.fetch_sub(1, Ordering::AcqRel) > 1 {
                return f();
            }
        }
        let _g = self.gate.write();
        self.cut_locked(Some((req, flash_step)))?;
        Err(off())
    }

    fn write(
        &self,
        dev: usize,
        sector: u64,
        buf: &[u8],
        hints: WriteHints,
    ) -> pagoda_device::Result<()> {
        let n = (buf.len() / SECTOR_SIZE) as u64;
        let req = Req {
            dev,
            kind: "write",
            sector,
            sectors: n,
            stream: hints.stream,
            atomic: hints.atomic,
        };
        self.io(req, || {
            let inner = &self.inner[dev];
            if dev == DATA && hints.stream == Stream::Doublewrite.on(&inner.caps()) {
                self.dw_pending.store(true, Ordering::Release);
            }
            if !self.tracks(dev) {
                return inner.write(sector, buf, hints);
            }
            let durable = inner
                .as_power_cut()
                .is_some_and(pagoda_device::PowerCut::durable_on_ack);
            if hints.atomic || durable {
                // An atomic write never tears, nor does a write a power-loss-protected cache
                // acknowledged: forget older unflushed images of its sectors.
                let mut u = self.unflushed[dev].lock();
                for s in sector..sector + n {
                    u.sectors.remove(&s);
                }
                drop(u);
                return inner.write(sector, buf, hints);
            }
            let mut pre = vec![0u8; buf.len()];
            self.raw[dev].read(sector, &mut pre)?;
            // A flush waits for writes in flight (and writes for a flush), so that what a flush
            // made durable is exactly what it forgets: a durable sector is never torn.
            let _order = self.order[dev].read();
            let mut u = self.unflushed[dev].lock();
            u.seq += 1;
            let seq = u.seq;
            for (i, s) in (sector..sector + n).enumerate() {
                let r = i * SECTOR_SIZE..(i + 1) * SECTOR_SIZE;
                let new: Arc<[u8]> = Arc::from(&buf[r.clone()]);
                let e = u
                    .sectors
                    .entry(s)
                    .or_insert_with(|| (seq, Arc::from(&pre[r]), new.clone()));
                e.0 = seq;
                e.2 = new;
            }
            drop(u);
            inner.write(sector, buf, hints)
        })
    }

    /// Whether the unflushed sectors of `dev` are kept: for 512-byte tears, and on the data
    /// device always (its own cut keeps or drops each: see `at_risk`).
    fn tracks(&self, dev: usize) -> bool {
        self.tear512 || dev == DATA
    }

    fn flush(&self, dev: usize) -> pagoda_device::Result<()> {
        let req = Req::new(dev, "flush", 0, 0);
        self.io(req, || {
            let tracked = self.tracks(dev);
            let _order = tracked.then(|| self.order[dev].write());
            let start = self.unflushed[dev].lock().seq;
            self.inner[dev].flush()?;
            if dev == DATA && self.dw_pending.load(Ordering::Acquire) {
                // The flush after the double-write arms the in-place phase; the next one ends it.
                self.dw_pending.store(false, Ordering::Release);
            }
            if tracked {
                self.unflushed[dev]
                    .lock()
                    .sectors
                    .retain(|_, (seq, _, _)| *seq > start);
            }
            Ok(())
        })
    }

    fn trim(&self, dev: usize, sector: u64, sectors: u64) -> pagoda_device::Result<()> {
        let req = Req::new(dev, "trim", sector, sectors);
        self.io(req, || {
            if self.tracks(dev) {
                let mut u = self.unflushed[dev].lock();
                for s in sector..sector + sectors {
                    u.sectors.remove(&s);
                }
            }
            self.inner[dev].trim(sector, sectors)
        })
    }
}

/// One of the devices behind a [`Switch`].
#[derive(Debug)]
struct CutDevice {
    switch: Arc<Switch>,
    dev: usize,
}

// I/O goes through the switch (which can be off); capabilities, counters and timing are the
// device's.
impl pagoda_device::DelegateDevice for CutDevice {
    fn inner(&self) -> &dyn BlockDevice {
        &*self.switch.inner[self.dev]
    }
    fn read(&self, sector: u64, buf: &mut [u8]) -> pagoda_device::Result<()> {
        let s = &self.switch;
        if self.dev == FLASH && s.rebuilding.load(Ordering::Acquire) {
            let req = Req::new(FLASH, "read", sector, (buf.len() / SECTOR_SIZE) as u64);
            return s.io(req, || s.inner[FLASH].read(sector, buf));
        }
        let _g = s.gate.read();
        if s.is_dead() {
            return Err(off());
        }
        s.inner[self.dev].read(sector, buf)
    }
    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> pagoda_device::Result<()> {
        self.switch.write(self.dev, sector, buf, hints)
    }
    fn flush(&self) -> pagoda_device::Result<()> {
        self.switch.flush(self.dev)
    }
    fn trim(&self, sector: u64, sectors: u64) -> pagoda_device::Result<()> {
        self.switch.trim(self.dev, sector, sectors)
    }
    fn describe(&self) -> String {
        // The role is part of the name: the engine tells its devices apart by their names, and
        // data and flash cache may be the same kind of device.
        format!(
            "cut-{}({})",
            device_name(self.dev),
            self.switch.inner[self.dev].describe()
        )
    }
    /// None: the switch cuts power, to all its devices at once and with its own bookkeeping;
    /// a cut of one device beneath it would bypass both.
    fn as_power_cut(&self) -> Option<&dyn pagoda_device::PowerCut> {
        None
    }
}

#[cfg(test)]
mod tests;
