//! Write-ahead log: redo-only commit records in a ring on the log device, written in groups by a
//! consolidation array (the log path the pipelined-commit paper studies in WiredTiger).
//!
//! Committing threads *join* the open slot of the consolidation array ([`consolidation`]):
//! under a short lock they get an LSN range and copy in their sealed record (built and
//! checksummed before, outside any lock). Making the log durable is leader/follower group
//! commit ([`group`]): at most one write+sync is in flight; the thread that finds none leads a
//! round (it takes every pending slot, the open one closes, writes them in one request and
//! syncs once), and every record that joins meanwhile rides the next round. A failed write or
//! sync fails the log: nothing it covers is acknowledged. The rounds are the same whoever leads
//! them, so a dedicated flush thread (pipelined commit) runs them without changing the format
//! or the join path.
//!
//! Layout: sector 0 of the log device is the log header; the ring starts at sector 1. An LSN is
//! a byte offset in the unbounded log stream; its position is `4096 + lsn % capacity`. Every
//! group starts at a sector boundary with a [`GroupHeader`] whose LSN must equal its position's
//! LSN, so stale groups from an earlier lap are never mistaken for new ones. Each header also
//! records how far the log was durable when it was written, which recovery ([`scan`]) uses to
//! tell a torn tail from damage to synced groups.

use crate::error::{Error, Failure, Result};
use crate::format::{LogHeader, SECTOR};
use crate::probe::{self, Sabotage};
use crate::profile::{Phase, Profile, Stamp};
use pagoda_device::aligned::AlignedBuf;
use pagoda_device::{DeviceRef, WriteHints};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

mod consolidation;
mod group;
mod prepare;
mod scan;
pub(crate) use prepare::ready_from_allocated;
pub(crate) use scan::scan_log;
pub use scan::{device_offset, read_ring, scan};

use consolidation::{Pending, Slot};
use group::{Group, Wait};

/// The locks of the group-commit protocol (the model test puts loom's in their place).
mod prims {
    pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

    /// Waits on `cv` for at most `d` (`m` is the mutex `g` guards: the model, which cannot
    /// time a wait, releases and retakes it instead, a timeout at any point).
    pub(crate) fn wait_for<'a, T>(
        cv: &Condvar,
        _m: &'a Mutex<T>,
        g: MutexGuard<'a, T>,
        d: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        match cv.wait_timeout(g, d) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }
}

/// Log counters.
#[derive(Debug, Default)]
pub struct WalCounters {
    /// Commit records appended.
    pub commits: AtomicU64,
    /// Bytes written to the log device (padded groups).
    pub bytes: AtomicU64,
    /// Device syncs of the log.
    pub syncs: AtomicU64,
}

/// The write-ahead log.
#[derive(Debug)]
pub struct Wal {
    dev: DeviceRef,
    capacity: u64,
    /// Written into every group header (groups of another database never match).
    db_id: u64,
    epoch: u32,
    stream: u16,
    group: Group<Pending, Failure>,
    /// The ring's ready prefix, when the log file is made ready as it goes ([`prepare`]);
    /// `None`: every byte of the ring is ready.
    prep: Option<prepare::Prepare>,
    /// The leader's buffer for a round of several slots ([`Wal::write_slots`]).
    write_buf: Mutex<AlignedBuf>,
    /// Counters.
    pub counters: WalCounters,
    /// Phase times of the log path (and of the transactions of the database using it).
    pub profile: Profile,
    sabotage: Option<Sabotage>,
}

impl Wal {
    /// The log device.
    pub(crate) fn device(&self) -> &DeviceRef {
        &self.dev
    }

    /// The log of database `db_id` on `dev` whose ring holds `capacity` bytes, continuing at
    /// `next_lsn` (a group boundary, durable); records before `reclaim` may be overwritten.
    pub fn new(
        dev: DeviceRef,
        capacity: u64,
        id: LogHeader,
        stream: u16,
        next_lsn: u64,
        reclaim: u64,
    ) -> Self {
        // The log resumes at a group boundary: groups start on a sector.
        assert_eq!(
            next_lsn % SECTOR as u64,
            0,
            "log end {next_lsn} is no group boundary"
        );
        let pending = Pending::new(next_lsn, reclaim);
        Self {
            dev,
            capacity,
            db_id: id.db_id,
            epoch: id.epoch,
            stream,
            group: Group::new(pending, next_lsn, true, false),
            prep: None,
            write_buf: Mutex::new(AlignedBuf::default()),
            counters: WalCounters::default(),
            profile: Profile::new(),
            sabotage: None,
        }
    }

    /// Removes a safety step on purpose (crash-test self-checks).
    pub(crate) fn sabotaged(mut self, s: Option<Sabotage>) -> Self {
        self.sabotage = s;
        if probe::is(s, Sabotage::AckBeforeSync) {
            self.group.ack_before_sync();
        }
        self
    }

    /// Whether a synchronous committer that leads a round first waits briefly for the
    /// committers the last round acknowledged ([`group`]'s gathering; on by default).
    pub(crate) fn gathering(mut self, on: bool) -> Self {
        self.group.set_gathers(on);
        self
    }

    /// The log's file holds only the first `ready` bytes of the ring (a new file is sparse):
    /// the rest is made ready ahead of the writer ([`prepare`]). `None`: all of it is.
    pub(crate) fn prepared(mut self, ready: Option<u64>) -> Self {
        self.prep = ready
            .map(|r| prepare::Prepare::new(self.capacity, r, self.stream))
            .filter(|p| !p.complete());
        self
    }

    /// Whether part of the ring still has to be made ready ([`Wal::prepare_ahead`]).
    pub(crate) fn preparing(&self) -> bool {
        self.prep.as_ref().is_some_and(|p| !p.complete())
    }

    /// One step of making the ring ready ahead of the log's end (the background thread's);
    /// returns whether it wrote anything.
    pub(crate) fn prepare_ahead(&self) -> Result<bool> {
        let Some(p) = &self.prep else {
            return Ok(false);
        };
        p.step(&self.dev, self.end())
    }

    /// Ring capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes of log between the reclaim point and the end.
    pub fn used(&self) -> u64 {
        let st = self.group.lock();
        st.pending.next_lsn - st.pending.reclaim
    }

    /// The durable LSN.
    pub fn durable(&self) -> u64 {
        self.group.lock().durable()
    }

    /// The end of the log appended so far: waiting for it makes every appended record durable.
    pub fn end(&self) -> u64 {
        self.group.lock().pending.next_lsn
    }

    /// Lets records before `lsn` be overwritten (once no durable superblock copy starts its
    /// redo before it).
    pub fn set_reclaim(&self, lsn: u64) {
        let mut st = self.group.lock();
        st.pending.reclaim = st.pending.reclaim.max(lsn);
    }

    /// Returns once the log is durable up to `target`, leading a round (write every pending
    /// slot, sync once) when none is in flight, else riding the round in flight or the next.
    pub fn wait_durable(&self, target: u64) -> Result<()> {
        self.group
            .wait_durable(&Round { wal: self }, target, false)
            .map_err(Error::Failed)
    }

    /// [`Wal::wait_durable`] for a synchronous committer: as a leader it may first gather the
    /// committers the last round acknowledged ([`group`]).
    pub fn wait_committed(&self, target: u64) -> Result<()> {
        self.group
            .wait_durable(&Round { wal: self }, target, true)
            .map_err(Error::Failed)
    }

    fn write_ring(&self, lsn: u64, buf: &[u8]) -> Result<()> {
        if let Some(p) = &self.prep {
            // Only the first lap can meet space that is not ready.
            if lsn < self.capacity && !probe::is(self.sabotage, Sabotage::WriteLogPastReady) {
                p.ensure(&self.dev, lsn + buf.len() as u64)?;
            }
        }
        let hints = WriteHints::stream(self.stream);
        let off = lsn % self.capacity;
        let first = ((self.capacity - off) as usize).min(buf.len());
        let r = self
            .dev
            .write((SECTOR as u64 + off) / SECTOR as u64, &buf[..first], hints)
            .and_then(|()| {
                if first < buf.len() {
                    self.dev.write(1, &buf[first..], hints)?;
                }
                Ok(())
            });
        if probe::is(self.sabotage, Sabotage::IgnoreLogWriteError) {
            return Ok(());
        }
        Ok(r?)
    }

    fn sync(&self) -> Result<()> {
        if probe::is(self.sabotage, Sabotage::SkipLogSync) {
            return Ok(());
        }
        if probe::is(self.sabotage, Sabotage::RetryFailedLogSync) {
            return Ok(self.dev.flush().or_else(|_| self.dev.flush())?);
        }
        Ok(self.dev.flush()?)
    }
}

/// One round of the log's group commit: the [`group::Io`] of a [`Wal`].
struct Round<'a> {
    wal: &'a Wal,
}

impl group::Io<Pending> for Round<'_> {
    type Taken = Vec<Slot>;
    type Error = Failure;
    type Stamp = Stamp;

    fn take(&self, p: &mut Pending) -> Option<(Self::Taken, u64, u32)> {
        p.take()
    }

    fn write(&self, taken: &mut Vec<Slot>, durable: u64) -> std::result::Result<(), Failure> {
        let t0 = Stamp::now();
        let r = self.wal.write_slots(taken, durable);
        self.wal.profile.add(Phase::LogWrite, t0);
        r.map_err(Failure::new)
    }

    fn sync(&self) -> std::result::Result<(), Failure> {
        let t0 = Stamp::now();
        let r = self.wal.sync();
        self.wal.profile.add(Phase::LogSync, t0);
        if r.is_ok() {
            self.wal.counters.syncs.fetch_add(1, Ordering::Relaxed);
        }
        r.map_err(Failure::new)
    }

    fn recycle(&self, p: &mut Pending, taken: Self::Taken) {
        p.recycle(taken);
    }

    fn beyond(&self, target: u64, durable: u64) -> Failure {
        Failure::new(Error::Internal(format!(
            "asked the log durable to {target}, beyond every record appended (durable to \
             {durable})"
        )))
    }

    fn stamp(&self) -> Stamp {
        Stamp::now()
    }

    fn now_ns(&self) -> u64 {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        ORIGIN
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }

    fn waited(&self, w: Wait, since: Stamp) {
        let phase = match w {
            Wait::Slot => Phase::LogWaitSlot,
            Wait::Sync => Phase::LogWaitSync,
            Wait::Gather => Phase::LogGather,
        };
        self.wal.profile.add(phase, since);
    }
}
