//! A programmable fault device for tests (cargo feature `fault-injection`, off by default, so
//! no product build can carry it). It wraps any device and, on command: holds an operation
//! until released, fails the n-th operation of a kind (an I/O error, a full device, or a
//! failed flush that loses the writes it should have made durable),
//! delays operations, flips a bit on reads (transient) or on the medium (persistent), lands a
//! sector's write on another sector (misdirected) or also on another sector (a stray copy),
//! acknowledges a sector's write without doing it (lost), cuts power after n writes (alone,
//! or with the other devices on its [`Rail`]), and records every request. [`Recording`] is
//! the other end: a device that records what a wrapper passes down to it. Storage engines
//! meet these faults in production; power loss alone is what the emulated devices model.

use crate::{BlockDevice, DeviceError, DeviceRef, Result, WriteHints, SECTOR_SIZE};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod rail;
mod recording;
pub use rail::Rail;
pub use recording::Recording;

/// The kind of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// [`BlockDevice::read`].
    Read,
    /// [`BlockDevice::write`].
    Write,
    /// [`BlockDevice::flush`].
    Flush,
    /// [`BlockDevice::trim`].
    Trim,
}

impl Op {
    fn index(self) -> usize {
        self as usize
    }
}

/// How an injected failure looks to the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// An I/O error (EIO).
    Eio,
    /// No space left ([`DeviceError::Full`]).
    Full,
    /// On a flush: an I/O error, and the writes that flush should have made durable are gone
    /// (the wrapped device loses them as in a power cut, seeded by the flush's number), which
    /// is what Linux does after a failed fsync: it drops the dirty pages, so a retried fsync
    /// succeeds without them. On other requests: an I/O error.
    EioLosingWrites,
}

/// One fault. Several may be armed at once; they act in the order they were injected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Fails the operations of kind `op` numbered `after .. after + times`, counted from the
    /// injection (0 = the next one). A failed write or trim changes nothing.
    Fail {
        /// The kind of operation that fails.
        op: Op,
        /// How many of them pass first.
        after: u64,
        /// How many then fail (`u64::MAX`: all).
        times: u64,
        /// What the caller gets.
        failure: Failure,
    },
    /// Sleeps this long before every operation of kind `op`.
    Delay {
        /// The kind of operation delayed.
        op: Op,
        /// By how much.
        by: Duration,
    },
    /// Flips one bit of `sector`: on every read that covers it (the medium stays intact),
    /// or, `persistent`, once on the medium itself when injected (bit rot).
    FlipBit {
        /// The sector.
        sector: u64,
        /// The byte in it (below 4096).
        byte: usize,
        /// The bit in that byte (below 8).
        bit: u8,
        /// On the medium (bit rot) instead of on reads.
        persistent: bool,
    },
    /// A write covering sector `from` puts that sector's new contents at `to` instead; `from`
    /// keeps its old contents, `to` loses its own.
    Misdirect {
        /// The sector the host writes.
        from: u64,
        /// Where its contents land.
        to: u64,
    },
    /// A write covering sector `from` also puts that sector's new contents at `to` (a stray
    /// copy: `from` is written as asked, `to` loses its own contents).
    Stray {
        /// The sector the host writes.
        from: u64,
        /// Where a copy of its contents lands too.
        to: u64,
    },
    /// A write covering `sector` is acknowledged but that sector keeps its old contents.
    LoseWrite {
        /// The sector whose writes are lost.
        sector: u64,
    },
    /// After `writes` more writes, cuts the wrapped device's power (it must emulate a power
    /// cut) with `seed`; every request then fails until [`FaultDevice::power_on`].
    CutAfter {
        /// Writes that complete before the cut.
        writes: u64,
        /// The seed of the wrapped device's power cut (which unflushed sectors survive).
        seed: u64,
    },
}

/// A recorded request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The request's kind.
    pub op: Op,
    /// Its first sector (0 for a flush).
    pub sector: u64,
    /// Its length in sectors (0 for a flush).
    pub sectors: u64,
    /// A write's stream hint (0 otherwise).
    pub stream: u16,
    /// A write's bytes, when recording with data ([`FaultDevice::record_data`]); else empty.
    pub data: Vec<u8>,
    /// Whether the request failed (injected or not).
    pub failed: bool,
}

#[derive(Debug, Default)]
struct State {
    /// Each armed fault with the count of its kind's operations when it was injected.
    faults: Vec<(Fault, u64)>,
    /// Operations seen per kind since creation.
    seen: [u64; 4],
    recording: bool,
    /// Also keep each write's bytes.
    with_data: bool,
    records: Vec<Record>,
    powered_off: bool,
    /// Requests an injected fault acted on, per kind.
    injected: [u64; 4],
    /// Errors injected so far (each carries its number in its tag, see [`FaultDevice::tag`]).
    failures: u64,
    /// Sectors whose writes a [`Fault::LoseWrite`] lost, not yet taken.
    lost: Vec<LostSector>,
    /// Sectors a misdirected or stray copy overwrote, with what they held, not yet taken.
    overwritten: Vec<(u64, Vec<u8>)>,
}

/// A sector write that a [`Fault::LoseWrite`] acknowledged without doing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostSector {
    /// The sector.
    pub sector: u64,
    /// What it kept (its contents before the write).
    pub kept: Vec<u8>,
    /// What the lost write carried.
    pub lost: Vec<u8>,
}

/// See the module documentation.
#[derive(Debug)]
pub struct FaultDevice {
    inner: DeviceRef,
    /// Names the device in the tags of the errors it injects.
    name: String,
    /// The rail this device loses power with, if any.
    rail: Option<Arc<Rail>>,
    state: Mutex<State>,
    /// Serialises the requests that rewrite the medium around a write (misdirect, lose).
    rewrite: Mutex<()>,
    held: [AtomicBool; 4],
    /// Requests of each kind waiting in a hold right now.
    waiting: [AtomicU64; 4],
}

fn eio(what: &str) -> DeviceError {
    DeviceError::Io {
        path: "fault-device".into(),
        source: std::io::Error::other(what.to_string()),
    }
}

/// Why a request fails before it reaches the wrapped device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    /// An armed [`Fault::Fail`]: the error carries tag number `id`.
    Injected(Failure, u64),
    /// A [`Fault::CutAfter`] cut the power (not a fault of the request: no tag).
    PoweredOff,
}

impl FaultDevice {
    /// Wraps `inner`; no fault is armed.
    pub fn new(inner: DeviceRef) -> Self {
        Self {
            inner,
            name: "device".into(),
            state: Mutex::new(State::default()),
            rewrite: Mutex::new(()),
            held: Default::default(),
            waiting: Default::default(),
            rail: None,
        }
    }

    /// The device beneath the faults: for a test harness's own I/O (a power cut's torn
    /// sectors, the pre-images it keeps) that no fault may touch nor be counted for.
    pub fn inner(&self) -> &DeviceRef {
        &self.inner
    }

    /// Wraps `inner` on `rail`: it loses power with the rail's other devices (`inner` must
    /// emulate a power cut).
    pub fn on_rail(inner: DeviceRef, rail: &Arc<Rail>) -> Result<Self> {
        if inner.as_power_cut().is_none() {
            return Err(DeviceError::Unsupported(format!(
                "a power rail over {}: wrap an emulated device",
                inner.describe()
            )));
        }
        rail.devices.lock().push(inner.clone());
        Ok(Self {
            rail: Some(rail.clone()),
            ..Self::new(inner)
        })
    }

    /// Names the device in the tags of its injected errors (default `device`).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// The tag that the `n`-th error (from 0) injected by the device named `name` carries in
    /// its text: `[fault NAME#N]`. A caller's error, or the database's failure, that contains
    /// it came from that very injected error: a test counts a fault as reported only then,
    /// never from another error that happened to arrive (a power cut's carries no tag).
    pub fn tag(name: &str, n: u64) -> String {
        format!("[fault {name}#{n}]")
    }

    /// The device's name in its tags.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Errors injected so far: the next one carries tag number `failures()`.
    pub fn failures(&self) -> u64 {
        self.state.lock().failures
    }

    /// Runs a request through the rail, if the device is on one.
    fn powered<T>(&self, counts: bool, f: impl FnOnce() -> Result<T>) -> Result<T> {
        match &self.rail {
            Some(r) => r.run(counts, f),
            None => f(),
        }
    }

    /// Arms a fault. A persistent bit flip is applied to the medium at once.
    pub fn inject(&self, f: Fault) -> Result<()> {
        if let Fault::FlipBit {
            sector,
            byte,
            bit,
            persistent: true,
        } = f
        {
            return self.rot(sector, byte, bit);
        }
        if let Fault::CutAfter { .. } = f {
            if self.inner.as_power_cut().is_none() {
                return Err(DeviceError::Unsupported(format!(
                    "a power cut on {}: wrap an emulated device",
                    self.inner.describe()
                )));
            }
        }
        let mut s = self.state.lock();
        let base = match &f {
            Fault::Fail { op, .. } | Fault::Delay { op, .. } => s.seen[op.index()],
            _ => s.seen[Op::Write.index()],
        };
        s.faults.push((f, base));
        Ok(())
    }

    /// Disarms every fault (holds and the power state stay).
    pub fn clear(&self) {
        self.state.lock().faults.clear();
    }

    /// Operations of kind `op` wait from now until [`FaultDevice::release`].
    pub fn hold(&self, op: Op) {
        self.held[op.index()].store(true, Ordering::Release);
    }

    /// Lets held operations of kind `op` go on.
    pub fn release(&self, op: Op) {
        self.held[op.index()].store(false, Ordering::Release);
    }

    /// Requests of kind `op` waiting in a hold right now.
    pub fn waiting(&self, op: Op) -> u64 {
        self.waiting[op.index()].load(Ordering::Acquire)
    }

    /// Waits until at least `n` requests of kind `op` wait in a hold (so a test knows the
    /// caller is blocked in that request, not merely slow); false after `timeout`.
    pub fn wait_until_held(&self, op: Op, n: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.waiting(op) < n {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Starts (`true`) or stops recording requests.
    pub fn record(&self, on: bool) {
        let mut s = self.state.lock();
        s.recording = on;
        s.with_data = false;
    }

    /// Starts (`true`) or stops recording requests with the bytes of every write.
    pub fn record_data(&self, on: bool) {
        let mut s = self.state.lock();
        s.recording = on;
        s.with_data = on;
    }

    /// The requests recorded so far.
    pub fn records(&self) -> Vec<Record> {
        self.state.lock().records.clone()
    }

    /// The requests recorded so far, forgetting them (recording goes on).
    pub fn take_records(&self) -> Vec<Record> {
        std::mem::take(&mut self.state.lock().records)
    }

    /// The sector writes a [`Fault::LoseWrite`] lost since the last call, in order.
    pub fn take_lost(&self) -> Vec<LostSector> {
        std::mem::take(&mut self.state.lock().lost)
    }

    /// The sectors a [`Fault::Misdirect`] or [`Fault::Stray`] copy overwrote since the last
    /// call, in order, each with the contents it held before.
    pub fn take_overwritten(&self) -> Vec<(u64, Vec<u8>)> {
        std::mem::take(&mut self.state.lock().overwritten)
    }

    /// Requests of kind `op` an injected fault acted on so far: failed, delayed, read with a
    /// flipped bit, misdirected or lost.
    pub fn injected(&self, op: Op) -> u64 {
        self.state.lock().injected[op.index()]
    }

    /// Operations of kind `op` seen so far.
    pub fn seen(&self, op: Op) -> u64 {
        self.state.lock().seen[op.index()]
    }

    /// Whether an armed [`Fault::CutAfter`] has cut the power.
    pub fn powered_off(&self) -> bool {
        self.state.lock().powered_off
    }

    /// Powers the device on again after a cut (the wrapped device already recovered).
    pub fn power_on(&self) {
        self.state.lock().powered_off = false;
    }

    fn rot(&self, sector: u64, byte: usize, bit: u8) -> Result<()> {
        if byte >= SECTOR_SIZE || bit >= 8 {
            return Err(DeviceError::config(format!(
                "bit {bit} of byte {byte}: a sector has {SECTOR_SIZE} bytes of 8 bits"
            )));
        }
        let mut buf = vec![0u8; SECTOR_SIZE];
        self.inner.read(sector, &mut buf)?;
        buf[byte] ^= 1 << bit;
        self.inner.write(sector, &buf, WriteHints::default())?;
        self.inner.flush()
    }

    /// Before a request: waits while held, sleeps for delays, counts it, and returns why it
    /// fails, if it does.
    fn enter(&self, op: Op) -> Option<Refusal> {
        if self.held[op.index()].load(Ordering::Acquire) {
            self.waiting[op.index()].fetch_add(1, Ordering::AcqRel);
            while self.held[op.index()].load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.waiting[op.index()].fetch_sub(1, Ordering::AcqRel);
        }
        let (delay, failure) = {
            let mut s = self.state.lock();
            let n = s.seen[op.index()];
            s.seen[op.index()] += 1;
            let mut delay = Duration::ZERO;
            let mut failure = None;
            for (f, base) in &s.faults {
                match *f {
                    Fault::Delay { op: o, by } if o == op => delay += by,
                    Fault::Fail {
                        op: o,
                        after,
                        times,
                        failure: kind,
                    } if o == op && failure.is_none() => {
                        let k = n - base;
                        if k >= after && k < after.saturating_add(times) {
                            failure = Some(kind);
                        }
                    }
                    _ => {}
                }
            }
            if !delay.is_zero() {
                s.injected[op.index()] += 1;
            }
            let failure = if s.powered_off {
                Some(Refusal::PoweredOff)
            } else if let Some(f) = failure {
                s.injected[op.index()] += 1;
                s.failures += 1;
                Some(Refusal::Injected(f, s.failures - 1))
            } else {
                None
            };
            (delay, failure)
        };
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        failure
    }

    fn log(&self, op: Op, sector: u64, sectors: u64, failed: bool) {
        self.log_write(op, sector, sectors, failed, None);
    }

    /// Records a request; `write` holds a write's hints and bytes.
    fn log_write(
        &self,
        op: Op,
        sector: u64,
        sectors: u64,
        failed: bool,
        write: Option<(WriteHints, &[u8])>,
    ) {
        let mut s = self.state.lock();
        if s.recording {
            let (stream, data) = match write {
                Some((h, buf)) if s.with_data => (h.stream, buf.to_vec()),
                Some((h, _)) => (h.stream, Vec::new()),
                None => (0, Vec::new()),
            };
            s.records.push(Record {
                op,
                sector,
                sectors,
                stream,
                data,
                failed,
            });
        }
    }

    fn fail(&self, op: Op, sector: u64, sectors: u64, r: Refusal) -> DeviceError {
        self.log(op, sector, sectors, true);
        match r {
            Refusal::PoweredOff => eio(&format!(
                "power is off (fault device cut): {op:?} of sector {sector}"
            )),
            Refusal::Injected(Failure::Eio | Failure::EioLosingWrites, id) => eio(&format!(
                "injected I/O error {}: {op:?} of sector {sector}",
                Self::tag(&self.name, id)
            )),
            Refusal::Injected(Failure::Full, id) => DeviceError::Full(format!(
                "injected {}: no space for the {op:?} of sector {sector}",
                Self::tag(&self.name, id)
            )),
        }
    }

    /// The sectors of a write at `sector` of `n` sectors that a misdirect, a stray copy or a
    /// lost write concerns: (the sector written, where a copy of its contents goes if
    /// anywhere, whether it keeps its old contents).
    fn redirections(&self, sector: u64, n: u64) -> Vec<(u64, Option<u64>, bool)> {
        let s = self.state.lock();
        let covers = |x: u64| (sector..sector + n).contains(&x);
        s.faults
            .iter()
            .filter_map(|(f, _)| match *f {
                Fault::Misdirect { from, to } if covers(from) => Some((from, Some(to), true)),
                Fault::Stray { from, to } if covers(from) => Some((from, Some(to), false)),
                Fault::LoseWrite { sector: x } if covers(x) => Some((x, None, true)),
                _ => None,
            })
            .collect()
    }

    /// Counts a completed write against armed power cuts, cutting when one falls due.
    fn after_write(&self) -> Result<()> {
        let due = {
            let mut s = self.state.lock();
            let done = s.seen[Op::Write.index()];
            let due = s.faults.iter().find_map(|(f, base)| match *f {
                Fault::CutAfter { writes, seed } if done - base >= writes => Some(seed),
                _ => None,
            });
            if due.is_some() {
                s.faults
                    .retain(|(f, _)| !matches!(f, Fault::CutAfter { .. }));
                s.powered_off = true;
            }
            due
        };
        if let (Some(seed), Some(pc)) = (due, self.inner.as_power_cut()) {
            pc.power_cut(seed)?;
        }
        Ok(())
    }
}

// Faults and power-off act on I/O; counters, timing and the power cut are the device's.
impl crate::DelegateDevice for FaultDevice {
    fn inner(&self) -> &dyn BlockDevice {
        &*self.inner
    }

    fn read(&self, sector: u64, buf: &mut [u8]) -> Result<()> {
        self.powered(false, || self.read_now(sector, buf))
    }

    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        self.powered(true, || self.write_now(sector, buf, hints))
    }

    fn flush(&self) -> Result<()> {
        self.powered(true, || self.flush_now())
    }

    fn trim(&self, sector: u64, sectors: u64) -> Result<()> {
        self.powered(true, || self.trim_now(sector, sectors))
    }

    fn describe(&self) -> String {
        format!("faults({})", self.inner.describe())
    }
}

impl FaultDevice {
    fn read_now(&self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let n = crate::check_io(&self.caps(), sector, buf.len())?;
        if let Some(f) = self.enter(Op::Read) {
            return Err(self.fail(Op::Read, sector, n, f));
        }
        let r = self.inner.read(sector, buf);
        if r.is_ok() {
            let mut s = self.state.lock();
            let mut flipped = 0;
            for (f, _) in &s.faults {
                if let Fault::FlipBit {
                    sector: x,
                    byte,
                    bit,
                    persistent: false,
                } = *f
                {
                    if (sector..sector + n).contains(&x) && byte < SECTOR_SIZE && bit < 8 {
                        buf[(x - sector) as usize * SECTOR_SIZE + byte] ^= 1 << bit;
                        flipped = 1;
                    }
                }
            }
            s.injected[Op::Read.index()] += flipped;
        }
        self.log(Op::Read, sector, n, r.is_err());
        r
    }

    fn write_now(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        let n = crate::check_io(&self.caps(), sector, buf.len())?;
        if let Some(f) = self.enter(Op::Write) {
            return Err(self.fail(Op::Write, sector, n, f));
        }
        let redirect = self.redirections(sector, n);
        if !redirect.is_empty() {
            self.state.lock().injected[Op::Write.index()] += 1;
        }
        let r = if redirect.is_empty() {
            self.inner.write(sector, buf, hints)
        } else {
            // The write lands, then the sectors that keep their old contents get them back, and
            // a misdirected or stray one's new contents land elsewhere (not atomic: a test
            // device).
            let _one = self.rewrite.lock();
            let mut old = Vec::new();
            for &(x, to, keep) in &redirect {
                let mut b = vec![0u8; SECTOR_SIZE];
                if keep {
                    self.inner.read(x, &mut b)?;
                }
                old.push(b);
                if let Some(to) = to {
                    // What the stray copy destroys, for a test to restore.
                    let mut before = vec![0u8; SECTOR_SIZE];
                    self.inner.read(to, &mut before)?;
                    self.state.lock().overwritten.push((to, before));
                }
            }
            self.inner.write(sector, buf, hints).and_then(|()| {
                for (&(x, to, keep), b) in redirect.iter().zip(&old) {
                    if keep {
                        self.inner.write(x, b, WriteHints::default())?;
                    }
                    if keep && to.is_none() {
                        let at = (x - sector) as usize * SECTOR_SIZE;
                        self.state.lock().lost.push(LostSector {
                            sector: x,
                            kept: b.clone(),
                            lost: buf[at..at + SECTOR_SIZE].to_vec(),
                        });
                    }
                    if let Some(to) = to {
                        let at = (x - sector) as usize * SECTOR_SIZE;
                        self.inner
                            .write(to, &buf[at..at + SECTOR_SIZE], WriteHints::default())?;
                    }
                }
                Ok(())
            })
        };
        self.log_write(Op::Write, sector, n, r.is_err(), Some((hints, buf)));
        r?;
        self.after_write()
    }

    fn flush_now(&self) -> Result<()> {
        if let Some(f) = self.enter(Op::Flush) {
            if matches!(f, Refusal::Injected(Failure::EioLosingWrites, _)) {
                if let Some(pc) = self.inner.as_power_cut() {
                    pc.power_cut(self.seen(Op::Flush))?;
                }
            }
            return Err(self.fail(Op::Flush, 0, 0, f));
        }
        let r = self.inner.flush();
        self.log(Op::Flush, 0, 0, r.is_err());
        r
    }

    fn trim_now(&self, sector: u64, sectors: u64) -> Result<()> {
        crate::check_range(&self.caps(), sector, sectors)?;
        if let Some(f) = self.enter(Op::Trim) {
            return Err(self.fail(Op::Trim, sector, sectors, f));
        }
        let r = self.inner.trim(sector, sectors);
        self.log(Op::Trim, sector, sectors, r.is_err());
        r
    }
}
