//! Group commit by leader and followers: at most one log write+sync is in flight, and every
//! record appended while it runs rides the next one.
//!
//! A thread that needs the log durable up to some LSN either finds a *leader* at work and
//! waits (a follower), or becomes the leader itself: it takes every pending group (the open
//! one closes; later records open the next), writes them in one request, syncs once, and on
//! success moves the durable LSN past all of them; then it wakes everyone, and a follower whose
//! record came after the batch becomes the next leader with whatever piled up meanwhile.
//!
//! Invariants (checked by the model in `tests/wal_model.rs`, which runs this file under
//! `loom`):
//! - at most one write+sync is in flight (`leader`);
//! - `durable` moves only after a sync that began after the write of everything below it
//!   succeeded, so no caller is told "durable" before its record is;
//! - a failed write or sync fails the log for good: it acknowledges nothing it covers (a
//!   failed fsync may have dropped the writes, so a retry could not be trusted) and every
//!   waiter not yet durable gets the failure.
//!
//! **Gathering.** With one sync in flight and work shorter than a sync, committers split into
//! two cohorts that alternate (those acknowledged by sync k run their next transaction while
//! the others ride sync k+1), so each sync carries about half the threads. A leader that
//! knows the previous sync acknowledged `n` committers therefore waits, briefly, for `n`
//! records to arrive after that sync ended: at most [`GATHER_ROUNDS`] times the measured time
//! of a round (and at most [`MAX_GATHER`]); only when others joined during the last round (the
//! log was busy back to back), and not while the acknowledged committers have lately taken
//! longer than a round to come back (long transactions: the wait would only add latency).
//! Only synchronous committers gather; a flush thread never does.
//!
//! This file uses nothing of the crate but `super::prims` (the locks), so the model test
//! compiles it with loom's locks in their place.

use super::prims::{wait_for, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// A leader waits for returning committers at most this many times a round's (write+sync)
/// time. `pagoda bench ycsb --workload update-only`, 100,000 records, 10 s on an ext4 file:
/// a limit of 0 / 1 / 2 rounds gave 2.2 / 3.7 / 3.8 commits per sync at 4 threads. Gathering
/// whenever the committers came back within the limit cost TPC-C 15 % of its tpmC (`bench
/// tpcc --threads 4`, 93k vs 107-115k: its long transactions rarely come back in time), so a
/// leader gathers only while the log is busy and the committers came back within one round.
/// With that rule, on vs off (one or two 10 s runs each): TPC-C 96k, 110k vs 101k, 112k tpmC;
/// update-only 4 threads 15.0k vs 13.1k updates/s (3.7 vs 2.2 commits per sync), 16 threads
/// 20.2k vs 21.1k (6.3 vs 5.7); on the emulated NVMe (`reproduce pipelined-commit --scale
/// quick`) sync commits carry 4.0 / 7.9 / 15.6 per sync at 4 / 8 / 16 threads.
const GATHER_ROUNDS: u64 = 2;

/// The longest a leader waits for returning committers, whatever a round takes.
const MAX_GATHER: Duration = Duration::from_millis(2);

/// What a waiter is waiting for (the profile books each as its own phase).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// A leader's round that does not carry this record (it rides the next one).
    Slot,
    /// A leader's round that carries this record.
    Sync,
    /// This thread leads and waits for the committers the last sync acknowledged to return.
    Gather,
}

/// The log's side of a round: taking the pending groups, writing them, syncing.
pub(crate) trait Io<P> {
    /// What a leader took from the pending groups.
    type Taken;
    /// The log's failure (cloned to every waiter).
    type Error: Clone;
    /// A point in time for [`Io::waited`].
    type Stamp;

    /// Takes pending groups (closing the open one): `(taken, end LSN after them, records)`,
    /// or `None` when nothing is pending.
    fn take(&self, pending: &mut P) -> Option<(Self::Taken, u64, u32)>;
    /// Writes what was taken; `durable` is the durable LSN when it was taken.
    fn write(&self, taken: &mut Self::Taken, durable: u64) -> Result<(), Self::Error>;
    /// Makes every write before it durable.
    fn sync(&self) -> Result<(), Self::Error>;
    /// Gives the taken groups' memory back to the pending side (under the lock).
    fn recycle(&self, pending: &mut P, taken: Self::Taken);
    /// The error for a target beyond everything appended (a caller's bug).
    fn beyond(&self, target: u64, durable: u64) -> Self::Error;
    /// Now, for the profile.
    fn stamp(&self) -> Self::Stamp;
    /// Now in nanoseconds from any fixed origin (the gathering's clock; the model's is
    /// deterministic).
    fn now_ns(&self) -> u64;
    /// A wait of kind `w` that began at `since` ended.
    fn waited(&self, w: Wait, since: Self::Stamp);
}

/// The state under the log's lock: the pending groups (`P`, the log's) and the protocol's.
#[derive(Debug)]
pub(crate) struct State<P, E> {
    /// What committers append to (the log's open and closed groups).
    pub(crate) pending: P,
    /// Everything before this LSN is durable.
    durable: u64,
    /// A round (write + sync) is in flight.
    leader: bool,
    /// The end of the round in flight (its waiters wait for `Sync`, later ones for `Slot`).
    cover: u64,
    /// The first failure; the log refuses everything after it.
    failed: Option<E>,
    /// Records the last successful sync acknowledged.
    acked_last: u32,
    /// Records appended since the last round ended.
    joined_since: u32,
    /// Records appended while the round in flight runs; and whether the log is busy: others
    /// joined during the last round, or it was gathered (then everyone rode it, and nobody was
    /// left to join). Only a busy log gains from gathering.
    joined_in_round: u32,
    busy: bool,
    /// The round in flight was gathered.
    gathered: bool,
    /// When the last round ended ([`Io::now_ns`]).
    done_at: Option<u64>,
    /// A leader is gathering (appends wake it).
    gathering: bool,
    /// Moving averages (ns): a round's write+sync, and how long after a round the committers
    /// it acknowledged were all back.
    round_ns: u64,
    return_ns: u64,
    /// Rounds (syncs) that succeeded, and the records they carried.
    pub(crate) syncs: u64,
    pub(crate) synced_records: u64,
}

impl<P, E: Clone> State<P, E> {
    /// The log's failure, if it failed.
    pub(crate) fn failed(&self) -> Option<&E> {
        self.failed.as_ref()
    }

    /// The durable LSN.
    pub(crate) fn durable(&self) -> u64 {
        self.durable
    }
}

/// The protocol's locks and switches.
#[derive(Debug)]
pub(crate) struct Group<P, E> {
    state: Mutex<State<P, E>>,
    /// Wakes followers when a round ends.
    done: Condvar,
    /// Wakes a gathering leader when enough records arrived.
    gather: Condvar,
    /// Leaders may gather (off: every leader goes at once).
    gathers: bool,
    /// Sabotage: a round acknowledges its records once written, before its sync.
    ack_before_sync: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic under this lock fails the database elsewhere; the state stays consistent
    // (every change is made before anything that can panic), so a poisoned lock is used.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn ewma(old: u64, new: u64) -> u64 {
    if old == 0 {
        new
    } else {
        (old * 7 + new) / 8
    }
}

impl<P, E: Clone> Group<P, E> {
    /// A log durable up to `durable`, appending to `pending`.
    pub(crate) fn new(pending: P, durable: u64, gathers: bool, ack_before_sync: bool) -> Self {
        Self {
            state: Mutex::new(State {
                pending,
                durable,
                leader: false,
                cover: durable,
                failed: None,
                acked_last: 0,
                joined_since: 0,
                joined_in_round: 0,
                busy: false,
                gathered: false,
                done_at: None,
                gathering: false,
                round_ns: 0,
                return_ns: 0,
                syncs: 0,
                synced_records: 0,
            }),
            done: Condvar::new(),
            gather: Condvar::new(),
            gathers,
            ack_before_sync,
        }
    }

    /// Sabotage: every round acknowledges its records once written, before its sync.
    pub(crate) fn ack_before_sync(&mut self) {
        self.ack_before_sync = true;
    }

    /// Whether leaders of synchronous commits gather (module docs).
    pub(crate) fn set_gathers(&mut self, on: bool) {
        self.gathers = on;
    }

    /// The state, locked (to append, or to read it).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State<P, E>> {
        lock(&self.state)
    }

    /// Counts one record appended (the caller holds the lock and appended it): a gathering
    /// leader wakes once the committers the last sync acknowledged are back.
    pub(crate) fn joined<I: Io<P>>(&self, io: &I, st: &mut State<P, E>) {
        st.joined_since += 1;
        if st.leader {
            st.joined_in_round += 1;
        }
        if st.joined_since == st.acked_last {
            if let Some(at) = st.done_at {
                let ns = io.now_ns().saturating_sub(at);
                st.return_ns = ewma(st.return_ns, ns);
            }
            if st.gathering {
                self.gather.notify_one();
            }
        }
    }

    /// Returns once everything before `target` is durable, leading rounds while none is in
    /// flight. `gather`: this caller is a synchronous committer (see the module docs).
    pub(crate) fn wait_durable<I>(&self, io: &I, target: u64, gather: bool) -> Result<(), E>
    where
        I: Io<P, Error = E>,
    {
        let mut st = self.lock();
        loop {
            if st.durable >= target {
                return Ok(());
            }
            if let Some(e) = &st.failed {
                return Err(e.clone());
            }
            if st.leader {
                let kind = if st.cover >= target {
                    Wait::Sync
                } else {
                    Wait::Slot
                };
                let t0 = io.stamp();
                st = self
                    .done
                    .wait(st)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                io.waited(kind, t0);
                continue;
            }
            st.leader = true;
            st.gathered = false;
            if gather && self.gathers {
                st = self.gather(st, io);
            }
            let Some((mut taken, end, records)) = io.take(&mut st.pending) else {
                st.leader = false;
                return Err(io.beyond(target, st.durable));
            };
            st.cover = end;
            st.joined_in_round = 0;
            let durable = st.durable;
            drop(st);
            let started = io.now_ns();
            let mut res = io.write(&mut taken, durable);
            if res.is_ok() && self.ack_before_sync {
                let mut s = self.lock();
                s.durable = s.durable.max(end);
                self.done.notify_all();
            }
            if res.is_ok() {
                res = io.sync();
            }
            let round = io.now_ns().saturating_sub(started);
            st = self.lock();
            io.recycle(&mut st.pending, taken);
            st.leader = false;
            match res {
                Ok(()) => {
                    st.durable = st.durable.max(end);
                    st.syncs += 1;
                    st.synced_records += u64::from(records);
                    // Committers that came back too late for the last gather push the
                    // estimate up, so a run of long transactions stops gathering.
                    if st.joined_since < st.acked_last {
                        let late = 2 * st.round_ns.max(round);
                        st.return_ns = ewma(st.return_ns, late);
                    }
                    st.acked_last = records;
                    st.busy = st.joined_in_round > 0 || st.gathered;
                    st.joined_since = 0;
                    st.done_at = Some(io.now_ns());
                    st.round_ns = ewma(st.round_ns, round);
                }
                Err(e) => {
                    if st.failed.is_none() {
                        st.failed = Some(e);
                    }
                }
            }
            self.done.notify_all();
        }
    }

    /// A new leader's wait for the committers the last sync acknowledged (module docs).
    fn gather<'a, I>(
        &'a self,
        mut st: MutexGuard<'a, State<P, E>>,
        io: &I,
    ) -> MutexGuard<'a, State<P, E>>
    where
        I: Io<P, Error = E>,
    {
        let Some(done_at) = st.done_at else {
            return st;
        };
        // Nobody joined during the last round: the log is not the bottleneck, and waiting
        // would only add latency (TPC-C's long transactions lost 15 % of tpmC to it).
        if !st.busy || st.joined_since >= st.acked_last {
            return st;
        }
        let limit = Duration::from_nanos(st.round_ns * GATHER_ROUNDS).min(MAX_GATHER);
        // The committers must have come back well inside the limit lately: a wait that
        // often runs to its end holds the round's commits for nothing.
        if Duration::from_nanos(st.return_ns.saturating_mul(2)) > limit {
            return st;
        }
        let since = io.now_ns().saturating_sub(done_at);
        let Some(left) = limit
            .checked_sub(Duration::from_nanos(since))
            .filter(|l| !l.is_zero())
        else {
            return st;
        };
        let t0 = io.stamp();
        st.gathering = true;
        // One timed wait: the wake-up comes when the last expected record joins, so a rare
        // spurious one only shortens the gather.
        st = wait_for(&self.gather, &self.state, st, left);
        st.gathering = false;
        st.gathered = true;
        io.waited(Wait::Gather, t0);
        st
    }
}
