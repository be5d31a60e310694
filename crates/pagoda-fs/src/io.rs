//! File data I/O in three steps, so that the FUSE workers move data without holding the file
//! system's lock: a plan under the lock (block mapping, allocation, which device writes), the
//! device I/O without it, and a finish under it (size, times, counters).
//!
//! A [`crate::gate::Gate`] counts the plans whose I/O is in flight. Whatever names or frees blocks waits
//! for it to empty while holding the lock (a commit, a power cut, a truncate, a fallocate):
//! so a commit never names a newly allocated block before its data reached the device, and a
//! freed block is never reused while a late write to it is still on its way.

use crate::error::{FsError, Result};
use crate::fs::Fs;
use crate::gate::Ticket;
use crate::layout::{Kind, Time, SECTOR};
use crate::streams::stream_at;
use pagoda_device::{DeviceRef, WriteHints};

const S: u64 = SECTOR as u64;

/// Where a plan's device writes go: the device itself, or `Fs::dev_write` under the lock.
pub(crate) type DevWrite<'a> = dyn FnMut(u64, &[u8], WriteHints) -> Result<()> + 'a;

/// The device reads of one file read.
#[derive(Debug)]
pub(crate) struct ReadPlan {
    dev: DeviceRef,
    /// (device sector, sectors, byte offset in the buffer).
    runs: Vec<(u64, u64, usize)>,
    sectors: u64,
    skip: usize,
    len: usize,
    _ticket: Option<Ticket>,
}

impl ReadPlan {
    /// Reads; holes stay zero.
    pub(crate) fn run(self) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; (self.sectors * S) as usize];
        for &(p, n, at) in &self.runs {
            self.dev.read(p, &mut buf[at..at + (n * S) as usize])?;
        }
        buf.drain(..self.skip);
        buf.truncate(self.len);
        Ok(buf)
    }
}

/// The device writes of one file write.
#[derive(Debug)]
pub(crate) struct WritePlan {
    dev: DeviceRef,
    ino: u64,
    offset: u64,
    end: u64,
    /// (device sector, newly allocated) of each file block the write covers.
    phys: Vec<(u64, bool)>,
    /// (first index in `phys`, sectors, hints) of each device write.
    pieces: Vec<(usize, usize, WriteHints)>,
    atomic_writes: u64,
    atomic_fallbacks: u64,
    /// A device write (not a read) failed: the file system goes down.
    write_failed: bool,
    ticket: Option<Ticket>,
}

impl WritePlan {
    /// Builds the blocks (reading the old ones a partial write keeps part of) and hands them
    /// to `write`, one call per device write. Ends the I/O (its gate ticket), so the caller
    /// may then wait for the lock to finish.
    pub(crate) fn run(&mut self, data: &[u8], write: &mut DevWrite<'_>) -> Result<()> {
        let r = self.run_io(data, write);
        // A failed write is recorded in the gate before the ticket ends: a commit draining
        // the gate must not name blocks whose data never reached the device.
        if let (Err(e), Some(t)) = (&r, &self.ticket) {
            if self.write_failed {
                t.fail(format!("device error: {e}"));
            }
        }
        self.ticket = None;
        r
    }

    /// The device this plan writes to.
    pub(crate) fn device(&self) -> DeviceRef {
        self.dev.clone()
    }

    fn run_io(&mut self, data: &[u8], write: &mut DevWrite<'_>) -> Result<()> {
        let first = self.offset / S;
        let mut buf = vec![0u8; self.phys.len() * SECTOR];
        for (k, &(p, fresh)) in self.phys.iter().enumerate() {
            let b = first + k as u64;
            let lo = self.offset.max(b * S);
            let hi = self.end.min((b + 1) * S);
            let at = k * SECTOR;
            if !fresh && (hi - lo) < S {
                self.dev.read(p, &mut buf[at..at + SECTOR])?;
            }
            let (d0, d1) = ((lo - self.offset) as usize, (hi - self.offset) as usize);
            let o = at + (lo - b * S) as usize;
            buf[o..o + (d1 - d0)].copy_from_slice(&data[d0..d1]);
        }
        for &(k, n, hints) in &self.pieces {
            let r = write(self.phys[k].0, &buf[k * SECTOR..(k + n) * SECTOR], hints);
            if r.is_err() {
                self.write_failed = true;
                return r;
            }
        }
        Ok(())
    }
}

/// A device flush to run outside the lock (an fsync with no metadata to commit).
#[derive(Debug)]
pub(crate) struct FlushPlan {
    dev: DeviceRef,
    _ticket: Ticket,
}

impl FlushPlan {
    pub(crate) fn run(self) -> std::result::Result<(), pagoda_device::DeviceError> {
        self.dev.flush()
    }
}

impl Fs {
    /// Whether data I/O must stay under the lock: a `--power-cut-after` countdown counts
    /// device writes one by one.
    pub(crate) fn serial_io(&self) -> bool {
        self.cut_after.is_some()
    }

    fn ticket(&mut self, detach: bool) -> Option<Ticket> {
        detach.then(|| {
            let (t, n) = self.gate.enter();
            self.stats.peak_io_in_flight = self.stats.peak_io_in_flight.max(n);
            t
        })
    }

    /// Waits for the data I/O running outside the lock (see the module's comment); a device
    /// write among it that failed takes the file system down (an error from here on).
    pub(crate) fn drain_io(&mut self) -> Result<()> {
        if let Some(why) = self.gate.drain() {
            self.down.get_or_insert(why);
        }
        self.check_up()
    }

    pub(crate) fn file(&self, ino: u64) -> Result<&crate::layout::Inode> {
        let i = self.inode(ino)?;
        match i.kind {
            Kind::File => Ok(i),
            Kind::Dir => Err(FsError::IsDir),
            Kind::Symlink => Err(FsError::Invalid("a symbolic link has no data".into())),
        }
    }

    /// Plans a read of up to `size` bytes at `offset`; `detach`: the plan runs outside the
    /// lock (it holds a gate ticket).
    pub(crate) fn plan_read(
        &mut self,
        ino: u64,
        offset: u64,
        size: usize,
        detach: bool,
    ) -> Result<ReadPlan> {
        self.check_up()?;
        let i = self.file(ino)?;
        let end = i.size.min(offset.saturating_add(size as u64));
        let mut plan = ReadPlan {
            dev: self.dev.clone(),
            runs: Vec::new(),
            sectors: 0,
            skip: 0,
            len: 0,
            _ticket: None,
        };
        if offset >= end {
            return Ok(plan);
        }
        let (first, last) = (offset / S, (end - 1) / S);
        let phys = |b: u64| i.blocks.get(b as usize).copied().unwrap_or(0);
        // Runs of consecutive sectors become one device read.
        let mut b = first;
        while b <= last {
            let p = phys(b);
            if p == 0 {
                b += 1;
                continue;
            }
            let mut n = 1;
            while b + n <= last && phys(b + n) == p + n {
                n += 1;
            }
            plan.runs.push((p, n, ((b - first) * S) as usize));
            b += n;
        }
        plan.sectors = last - first + 1;
        plan.skip = (offset - first * S) as usize;
        plan.len = (end - offset) as usize;
        plan._ticket = self.ticket(detach && !plan.runs.is_empty());
        Ok(plan)
    }

    /// Plans a write of `len` (> 0) bytes at `offset`: maps and allocates the blocks and cuts
    /// the write into device writes (one per run of consecutive sectors on one stream; with
    /// `direct` on a device with an atomic unit, each whole aligned unit on an aligned run is
    /// one atomic write).
    pub(crate) fn plan_write(
        &mut self,
        ino: u64,
        offset: u64,
        len: usize,
        direct: bool,
        detach: bool,
    ) -> Result<WritePlan> {
        self.check_up()?;
        let end = offset.saturating_add(len as u64);
        let max = self.sb.capacity * S;
        if end > max {
            return Err(FsError::TooLarge { max });
        }
        self.file(ino)?;
        let (first, last) = (offset / S, (end - 1) / S);
        let phys = self.map_blocks(ino, first, last)?;
        let streams = self.inode(ino)?.streams.clone();
        let stream = |b: u64| stream_at(streams.as_deref(), b * S);
        let unit = if direct && self.atomic_unit > 1 {
            self.atomic_unit
        } else {
            0
        };
        let mut plan = WritePlan {
            dev: self.dev.clone(),
            ino,
            offset,
            end,
            phys,
            pieces: Vec::new(),
            atomic_writes: 0,
            atomic_fallbacks: 0,
            write_failed: false,
            ticket: None,
        };
        let phys = &plan.phys;
        let mut k = 0;
        while k < phys.len() {
            let b = first + k as u64;
            let st = stream(b);
            let whole =
                unit > 0 && b.is_multiple_of(unit) && b * S >= offset && (b + unit) * S <= end;
            if whole {
                let u = unit as usize;
                let aligned = phys[k].0.is_multiple_of(unit)
                    && (1..u).all(|j| phys[k + j].0 == phys[k].0 + j as u64)
                    && (1..unit).all(|j| stream(b + j) == st);
                if aligned {
                    plan.pieces.push((k, u, WriteHints::atomic(st)));
                    plan.atomic_writes += 1;
                    k += u;
                    continue;
                }
                plan.atomic_fallbacks += 1;
            }
            let mut n = 1;
            while k + n < phys.len()
                && phys[k + n].0 == phys[k].0 + n as u64
                && stream(b + n as u64) == st
                && (unit == 0 || !(b + n as u64).is_multiple_of(unit))
            {
                n += 1;
            }
            plan.pieces.push((k, n, WriteHints::stream(st)));
            k += n;
        }
        plan.ticket = self.ticket(detach);
        Ok(plan)
    }

    /// Ends a write whose plan ran with result `r`: counters, times and the new size.
    pub(crate) fn finish_write(&mut self, plan: WritePlan, r: Result<()>) -> Result<usize> {
        if let Err(e) = r {
            // What reached the device is unknown (an earlier reason, e.g. a cut, stays).
            if plan.write_failed && self.down.is_none() {
                self.down = Some(format!("device error: {e}"));
            }
            return Err(e);
        }
        self.check_up()?;
        self.stats.data_sectors += plan.pieces.iter().map(|p| p.1 as u64).sum::<u64>();
        self.stats.atomic_writes += plan.atomic_writes;
        self.stats.atomic_fallbacks += plan.atomic_fallbacks;
        let now = Time::now();
        let i = self.inode_mut(plan.ino)?;
        i.mtime = now;
        i.ctime = now;
        if plan.end > i.size {
            i.size = plan.end;
            self.dirty = true;
        }
        Ok((plan.end - plan.offset) as usize)
    }

    /// An fsync: commits changed metadata now (under the lock) and returns `None`, or
    /// returns the device flush to run outside the lock.
    pub(crate) fn plan_fsync(&mut self) -> Result<Option<FlushPlan>> {
        if self.dirty {
            return self.commit().map(|()| None);
        }
        // A write that failed outside the lock since: the file system is down.
        if let Some(why) = self.gate.failure() {
            self.down.get_or_insert(why);
        }
        self.check_up()?;
        self.stats.flushes += 1;
        let (ticket, _) = self.gate.enter();
        Ok(Some(FlushPlan {
            dev: self.dev.clone(),
            _ticket: ticket,
        }))
    }

    /// A device error met outside the lock takes the file system down.
    pub(crate) fn device_failed(&mut self, e: pagoda_device::DeviceError) -> FsError {
        if self.down.is_none() {
            self.down = Some(format!("device error: {e}"));
        }
        FsError::Device(e)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::{Fs, FsError, FsOptions, Kind, ROOT};
    use pagoda_device::fault::{Failure, Fault, FaultDevice, Op};
    use pagoda_device::mem::MemDevice;
    use pagoda_device::DeviceRef;
    use std::sync::Arc;

    /// A write served outside the lock fails at the device; before its finish takes the lock,
    /// an fsync commits. The commit must fail (it would name blocks that never got their
    /// data), and so must every call after.
    #[test]
    fn an_fsync_after_a_failed_detached_write_fails() {
        let mem: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
        let fault = Arc::new(FaultDevice::new(mem));
        let mut fs = Fs::format(fault.clone(), FsOptions::default()).unwrap();
        let f = fs
            .create(ROOT, "f", Kind::File, 0o644, (0, 0), b"")
            .unwrap();
        fs.fsync(f.ino).unwrap();
        let data = vec![9u8; 64 << 10];
        // New blocks: the commit would name them.
        let mut plan = fs.plan_write(f.ino, 0, data.len(), false, true).unwrap();
        fault
            .inject(Fault::Fail {
                op: Op::Write,
                after: 0,
                times: 1,
                failure: Failure::Eio,
            })
            .unwrap();
        let dev = plan.device();
        let r = plan.run(&data, &mut |s, b, h| Ok(dev.write(s, b, h)?));
        assert!(r.is_err());
        // The finish has not taken the lock yet; the file system is not marked down.
        fs.dirty = true;
        let e = fs.fsync(f.ino).unwrap_err();
        assert!(
            matches!(e, FsError::PoweredOff(ref why) if why.contains("device error")),
            "{e}"
        );
        assert!(fs.finish_write(plan, r).is_err());
        assert!(fs.fsync(f.ino).is_err(), "the file system stays down");
    }

    /// The same without a failure: the fsync after the finish succeeds (the control).
    #[test]
    fn an_fsync_after_a_detached_write_succeeds() {
        let mem: DeviceRef = Arc::new(MemDevice::with_capacity(16 << 20).unwrap());
        let mut fs = Fs::format(mem, FsOptions::default()).unwrap();
        let f = fs
            .create(ROOT, "f", Kind::File, 0o644, (0, 0), b"")
            .unwrap();
        let data = vec![9u8; 64 << 10];
        let mut plan = fs.plan_write(f.ino, 0, data.len(), false, true).unwrap();
        let dev = plan.device();
        let r = plan.run(&data, &mut |s, b, h| Ok(dev.write(s, b, h)?));
        fs.dirty = true;
        fs.fsync(f.ino).unwrap();
        assert_eq!(fs.finish_write(plan, r).unwrap(), data.len());
        fs.fsync(f.ino).unwrap();
        assert_eq!(fs.read(f.ino, 0, data.len()).unwrap(), data);
    }
}
