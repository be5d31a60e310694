//! The disk's command queue (`ncq=N`, N > 1, in `latency=emulate`): requests that arrive while
//! the actuator is busy wait here, and the actuator takes the next one by shortest positioning
//! time, as tagged / native command queueing lets a real disk do.
//!
//! Who dispatches: every waiting thread, under the actuator lock, runs `pump`, which
//! starts — at their modeled times — every request the actuator would have started by now. A
//! chosen request's thread is unparked and sleeps until its modeled completion as in FIFO mode;
//! then it pumps once more, so the next request starts on time. Of the threads still waiting,
//! exactly one (the *timer*) sleeps only until the actuator is free, so the queue moves even
//! when nobody is in service with a thread of its own (a cached write); the others sleep until
//! they are chosen. A timer that is chosen wakes another waiter to take its place, so a waiting
//! thread is always eventually dispatched. Dispatch decisions use modeled times only (a request
//! is a candidate when it arrived before the actuator became free), so a late wake-up of a
//! thread delays no modeled completion.

use super::{Actuator, Hdd};
use crate::SECTOR_SIZE;
use std::collections::{HashMap, VecDeque};
use std::thread::{self, Thread};
use std::time::Duration;

/// A request pending longer than this (modeled) is served before any other, oldest first, so
/// that far-away requests do not starve. A full round of 32 reordered random reads over the
/// whole disk takes about 65 ms (509 IOPS measured at QD32): the bound overrides the
/// shortest-positioning choice only for a request passed over for several rounds.
pub const NCQ_AGE_MS: u64 = 250;
const AGE_NS: u64 = NCQ_AGE_MS * 1_000_000;

/// Modeled figures of the actuator's queue since the last `reset_stats`, for tests and benches.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueueStats {
    /// Requests the actuator served.
    pub served: u64,
    /// Mean positioning time (seek, settle, rotational wait) per request, ns.
    pub mean_position_ns: f64,
    /// Longest modeled wait of a request from arrival to the start of its service, ns
    /// (`latency=emulate` only).
    pub max_wait_ns: u64,
}

#[derive(Debug)]
struct Pending {
    id: u64,
    sector: u64,
    sectors: u64,
    write: bool,
    /// Modeled arrival; the queue is in arrival order.
    arrival: u64,
    /// The thread waiting for the completion; `None` for a cached write (acknowledged when it
    /// reached the cache).
    waiter: Option<Thread>,
}

#[derive(Debug, Default)]
pub(super) struct Queue {
    next_id: u64,
    pending: VecDeque<Pending>,
    /// Completions of dispatched requests whose threads have not collected them yet.
    done: HashMap<u64, u64>,
    /// The waiter that sleeps only until the actuator is free (see the module documentation).
    timer: Option<(u64, Thread)>,
    served: u64,
    position_ns: u64,
    max_wait_ns: u64,
}

impl Queue {
    fn push(
        &mut self,
        sector: u64,
        sectors: u64,
        write: bool,
        now: u64,
        waiter: Option<Thread>,
    ) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.push_back(Pending {
            id,
            sector,
            sectors,
            write,
            arrival: now,
            waiter,
        });
        id
    }

    /// Bytes of the cached writes still waiting for the actuator.
    pub(super) fn cached_bytes(&self) -> u64 {
        self.pending
            .iter()
            .filter(|p| p.waiter.is_none())
            .map(|p| p.sectors * SECTOR_SIZE as u64)
            .sum()
    }

    /// Wakes the timer, e.g. when the actuator became free earlier than it slept for.
    pub(super) fn wake_timer(&self) {
        if let Some((_, t)) = &self.timer {
            t.unpark();
        }
    }

    /// Forgets the cached writes not yet dispatched (a power cut lost them).
    pub(super) fn drop_cached_writes(&mut self) {
        self.pending.retain(|p| p.waiter.is_some());
    }

    pub(super) fn note_served(&mut self, position_ns: u64) {
        self.served += 1;
        self.position_ns += position_ns;
    }

    pub(super) fn note_wait(&mut self, wait_ns: u64) {
        self.max_wait_ns = self.max_wait_ns.max(wait_ns);
    }

    pub(super) fn reset_stats(&mut self) {
        self.served = 0;
        self.position_ns = 0;
        self.max_wait_ns = 0;
    }

    /// Leaves the queue as a waiter: if no timer remains, another waiter is woken to become it.
    fn leave(&mut self, id: u64) {
        if self.timer.as_ref().is_some_and(|(t, _)| *t == id) {
            self.timer = None;
        }
        if self.timer.is_none() {
            if let Some(t) = self.pending.iter().find_map(|p| p.waiter.as_ref()) {
                t.unpark();
            }
        }
    }
}

impl Hdd {
    /// Modeled queueing figures since the last `reset_stats` (both queue modes).
    pub fn queue_stats(&self) -> QueueStats {
        let a = self.act.lock();
        let q = &a.queue;
        QueueStats {
            served: q.served,
            mean_position_ns: if q.served > 0 {
                q.position_ns as f64 / q.served as f64
            } else {
                0.0
            },
            max_wait_ns: q.max_wait_ns,
        }
    }

    /// Real time left until modeled time `until`.
    fn real_left(&self, until: u64, now: u64) -> Duration {
        let left = until.saturating_sub(now) as f64 * self.clock.time_scale();
        Duration::from_nanos(left as u64)
    }

    /// Starts, at their modeled times, every pending request the actuator would have started
    /// by modeled time `now`.
    fn pump(&self, a: &mut Actuator, now: u64) {
        while let Some(first) = a.queue.pending.front() {
            let start = a.free_at.max(first.arrival);
            if start > now {
                break;
            }
            let i = self.choose(a, start);
            let Some(p) = a.queue.pending.remove(i) else {
                break;
            };
            a.queue.note_wait(start - p.arrival);
            let end = self.serve(a, start, p.sector, p.sectors, p.write);
            match p.waiter {
                Some(t) => {
                    a.queue.done.insert(p.id, end);
                    t.unpark();
                }
                // Its room in the cache is already counted in `cached_bytes`.
                None => a.cached.push_back((end, p.sectors * SECTOR_SIZE as u64)),
            }
        }
    }

    /// The next request at modeled time `start`: the oldest if it has waited past the aging
    /// bound, else the one with the shortest positioning time among the `ncq` oldest that had
    /// arrived by `start` (ties to the older).
    fn choose(&self, a: &Actuator, start: u64) -> usize {
        let q = &a.queue.pending;
        if q.front().is_some_and(|p| start - p.arrival >= AGE_NS) {
            return 0;
        }
        q.iter()
            .take(self.config.ncq as usize)
            .take_while(|p| p.arrival <= start)
            .enumerate()
            .min_by_key(|(_, p)| self.position_ns(a, start, p.sector, p.write))
            .map_or(0, |(i, _)| i)
    }

    /// A read or write-through write through the queue: waits until it is chosen, then until
    /// its modeled completion, then starts the next request.
    pub(super) fn queued_io(&self, sector: u64, sectors: u64, write: bool) {
        let me = thread::current();
        let mut a = self.act.lock();
        let mut now = self.clock.now_ns();
        Self::count(&mut a, sectors, write);
        let id = a.queue.push(sector, sectors, write, now, Some(me.clone()));
        let end = loop {
            self.pump(&mut a, now);
            if let Some(end) = a.queue.done.remove(&id) {
                a.queue.leave(id);
                break end;
            }
            let timer = match &a.queue.timer {
                None => {
                    a.queue.timer = Some((id, me.clone()));
                    true
                }
                Some((t, _)) => *t == id,
            };
            let left = self.real_left(a.free_at, now);
            drop(a);
            if timer {
                thread::park_timeout(left);
            } else {
                thread::park();
            }
            a = self.act.lock();
            now = self.clock.now_ns();
        };
        drop(a);
        self.wait(end);
        let mut a = self.act.lock();
        let now = self.clock.now_ns();
        self.pump(&mut a, now);
    }

    /// A write with the cache on: acknowledged once it fits in the cache, destaged through the
    /// queue later. A write larger than the whole cache goes through as a write-through one.
    pub(super) fn queued_cached_write(&self, sector: u64, sectors: u64) {
        let bytes = sectors * SECTOR_SIZE as u64;
        if bytes > self.config.cache_bytes {
            self.queued_io(sector, sectors, true);
            return;
        }
        let mut a = self.act.lock();
        let mut now = self.clock.now_ns();
        Self::count(&mut a, sectors, true);
        loop {
            self.pump(&mut a, now);
            Self::destaged(&mut a, now);
            if a.cached_bytes + bytes <= self.config.cache_bytes {
                a.cached_bytes += bytes;
                a.queue.push(sector, sectors, true, now, None);
                // An idle actuator starts it at once.
                self.pump(&mut a, now);
                return;
            }
            // Room appears when the oldest cached write reaches the platter, or, if none is
            // on its way, when the next one is dispatched.
            let until = a.cached.front().map_or(a.free_at, |c| c.0);
            let left = self.real_left(until, now);
            drop(a);
            thread::park_timeout(left);
            a = self.act.lock();
            now = self.clock.now_ns();
        }
    }

    /// A flush: waits until every request queued before it has been dispatched; returns when
    /// the actuator will be idle after them.
    pub(super) fn drain(&self) -> u64 {
        let mut a = self.act.lock();
        a.flushes += 1;
        let before = a.queue.next_id;
        loop {
            let now = self.clock.now_ns();
            self.pump(&mut a, now);
            if !a.queue.pending.iter().any(|p| p.id < before) {
                return a.free_at;
            }
            let left = self.real_left(a.free_at, now);
            drop(a);
            thread::park_timeout(left);
            a = self.act.lock();
        }
    }
}
