//! Fuzzy checkpoints, and the pacing of the background one.
//!
//! A checkpoint notes the log end `c`, writes every page first dirtied before it, syncs, and
//! moves the redo start to `c` in both superblock copies (one after the other, so that one is
//! always intact), and only then the log's reclaim point: recovery from either copy finds its
//! whole redo range in the log. The background thread starts one when half the log ring is in
//! use; a commit waits for log space only at three quarters. A
//! background checkpoint spreads its page writes over a share of that gap (as PostgreSQL's
//! `checkpoint_completion_target` spreads them over the checkpoint distance): it writes a
//! batch, then, while its share of pages written is ahead of the share of the gap the log has
//! used (or of the time window), it does the background thread's other chores and waits a
//! little. Written at full speed, a checkpoint's page writes and flushes queue ahead of the
//! commits' log syncs on the same device. It turns to full speed as soon as a commit waits for
//! log space, the database closes, or it fails.

use super::{CheckpointInfo, Db};
use crate::error::{Error, Result};
use crate::probe::{self, Event, Sabotage};
use pagoda_device::WriteHints;
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The longest a paced checkpoint waits between two checks of its schedule.
const PACE_TICK: Duration = Duration::from_millis(5);

/// The time window of a checkpoint that no interval sets: an idle database's paced checkpoint
/// still ends within `pacing` of it.
const DEFAULT_WINDOW: Duration = Duration::from_secs(60);

impl Db {
    /// Takes a fuzzy checkpoint: notes the log end, writes every page dirtied before it (commits
    /// continue meanwhile), syncs, and records the new redo start in both superblock copies;
    /// the log before it is reused. Its page writes go at full speed (only the background
    /// thread's checkpoints are paced).
    pub fn checkpoint(&self) -> Result<CheckpointInfo> {
        self.check_writable()?;
        self.hurrying(|| {
            let one = self.inner.ckpt_lock.lock();
            self.checkpoint_held(&one, false)
        })
    }

    /// Runs `f` (which waits for the checkpoint lock) with a paced checkpoint running at
    /// full speed meanwhile.
    pub(super) fn hurrying<R>(&self, f: impl FnOnce() -> R) -> R {
        self.inner.ckpt_hurry.fetch_add(1, Ordering::AcqRel);
        let r = f();
        self.inner.ckpt_hurry.fetch_sub(1, Ordering::AcqRel);
        r
    }

    /// [`Db::checkpoint`] by the holder of the checkpoint lock (`_one`); `paced` spreads the
    /// page writes (see the module docs).
    pub(super) fn checkpoint_held(
        &self,
        _one: &MutexGuard<'_, ()>,
        paced: bool,
    ) -> Result<CheckpointInfo> {
        let t0 = Instant::now();
        let obs = &self.inner.opts.observer;
        probe::emit(obs, Event::CheckpointBegin);
        // Set once the pacer actually held the writes back (what `paced_checkpoints` counts).
        let held = std::cell::Cell::new(false);
        let res = (|| {
            // The redo start is fixed under the commit lock (every commit before it has
            // stamped its pages); the log sync that makes it durable happens outside the lock.
            let (c, cts) = {
                crate::buffer::latch_order::assert_no_latch("the commit lock");
                let cs = self.inner.commit.lock();
                (self.inner.wal.close_group(), cs.next_cts - 1)
            };
            let pacer = paced.then(|| Pacer::new(self, c, t0, &held));
            self.inner.wal.wait_durable(c)?;
            if !probe::is(self.inner.opts.sabotage, Sabotage::SkipCheckpointFlush) {
                let mut pace = |done: usize, total: usize| {
                    if let Some(p) = &pacer {
                        p.pace(done, total);
                    }
                };
                self.inner.pool.flush_dirty(Some(c), &mut pace)?;
            }
            // Pages a commit spilled past the budget are clean now: the pool is back to its size.
            self.inner.pool.trim();
            // With a flash cache the pages went there: the superblock names the cache and how
            // far its ring had got, so a missing or older cache is never taken for it.
            let fc = self.inner.pool.flash();
            let (fc_id, fc_seq, fc_dep) = fc.map_or((0, 0, false), |f| {
                (f.cache_id(), f.next_seq(), f.has_dirty())
            });
            self.inner.pool.move_redo_start(c, || {
                self.write_superblock(|sb| {
                    sb.checkpoint_lsn = c;
                    sb.checkpoint_cts = cts;
                    sb.flash_cache_id = fc_id;
                    sb.flash_seq = fc_seq;
                    sb.flash_dependent = fc_dep;
                })?;
                if probe::is(self.inner.opts.sabotage, Sabotage::SuperblockOneCopy) {
                    return Ok(());
                }
                // The same again into the other slot. Recovery falls back to the older copy
                // when the newest is torn or damaged, and must find that copy's redo range in
                // the log: only once both copies name `c` may the log before it be reused.
                self.write_superblock(|_| {})
            })?;
            self.inner.wal.set_reclaim(c);
            Ok::<_, Error>(c)
        })();
        probe::emit(obs, Event::CheckpointEnd);
        match res {
            Ok(lsn) => {
                let c = &self.inner.counters;
                c.checkpoints.fetch_add(1, Ordering::Relaxed);
                if held.get() {
                    c.paced_checkpoints.fetch_add(1, Ordering::Relaxed);
                }
                Ok(CheckpointInfo {
                    lsn,
                    duration_ms: t0.elapsed().as_secs_f64() * 1000.0,
                })
            }
            // Until the superblock names the new checkpoint nothing durable depends on it, so
            // only an I/O error (or a bug) fails the database; a stalled checkpoint is retried.
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The background thread's checkpoint: paced unless pacing is off.
    pub(super) fn checkpoint_background(&self) -> Result<CheckpointInfo> {
        self.check_writable()?;
        let one = self.inner.ckpt_lock.lock();
        self.checkpoint_held(&one, self.inner.opts.checkpoint_pacing > 0.0)
    }

    /// Writes the next superblock (into the other slot) changed by `f`, and syncs it.
    pub(super) fn write_superblock(
        &self,
        f: impl FnOnce(&mut crate::format::Superblock),
    ) -> Result<()> {
        let mut sb = self.inner.sb.lock();
        let mut next = sb.clone();
        next.generation += 1;
        f(&mut next);
        let slot = next.generation % 2;
        self.inner.data.write(
            slot,
            &next.encode(),
            WriteHints::stream(self.inner.data_stream),
        )?;
        self.inner.data.flush()?;
        *sb = next;
        Ok(())
    }
}

/// The schedule of one paced checkpoint.
struct Pacer<'a> {
    db: &'a Db,
    /// The checkpoint's redo start: the log end when it began.
    c: u64,
    /// Log bytes the checkpoint may take its writes over: its share of the gap between the
    /// log in use when it began and the point where a commit would wait for space.
    span: u64,
    t0: Instant,
    /// Its share of the time window.
    window: Duration,
    /// Set when it first waits.
    held: &'a std::cell::Cell<bool>,
}

impl<'a> Pacer<'a> {
    fn new(db: &'a Db, c: u64, t0: Instant, held: &'a std::cell::Cell<bool>) -> Self {
        let share = db.inner.opts.checkpoint_pacing;
        let wal = &db.inner.wal;
        let gap = (wal.capacity() / 4 * 3).saturating_sub(wal.used());
        let window = db.inner.opts.checkpoint_interval.unwrap_or(DEFAULT_WINDOW);
        Self {
            db,
            c,
            span: (gap as f64 * share) as u64,
            t0,
            window: window.mul_f64(share),
            held,
        }
    }

    /// Called before each batch with the pages written so far of `total`: returns at once
    /// when the checkpoint is behind its schedule, else waits (doing the background chores)
    /// until it is, or until it must hurry.
    fn pace(&self, done: usize, total: usize) {
        let inner = &self.db.inner;
        loop {
            if inner.ckpt_hurry.load(Ordering::Acquire) > 0
                || inner.closed.load(Ordering::Acquire)
                || *inner.bg_stop.lock()
                || self.db.failure().is_some()
            {
                return;
            }
            let logged = inner.wal.end().saturating_sub(self.c);
            if !ahead(
                done,
                total,
                logged,
                self.span,
                self.t0.elapsed(),
                self.window,
            ) {
                return;
            }
            self.held.set(true);
            super::background::chores(self.db);
            let mut stop = inner.bg_stop.lock();
            if !*stop {
                inner.bg_cond.wait_for(&mut stop, PACE_TICK);
            }
        }
    }
}

/// Whether a checkpoint that wrote `done` of its `total` pages is ahead of its schedule: of
/// the log (`logged` of its `span` bytes since it began) and of the time (`elapsed` of its
/// `window`), whichever lets it write more. No span or no pages: never ahead.
fn ahead(
    done: usize,
    total: usize,
    logged: u64,
    span: u64,
    elapsed: Duration,
    window: Duration,
) -> bool {
    if span == 0 || total == 0 || window.is_zero() {
        return false;
    }
    let work = done as f64 / total as f64;
    let by_log = logged as f64 / span as f64;
    let by_time = elapsed.as_secs_f64() / window.as_secs_f64();
    work > by_log.max(by_time)
}

#[cfg(test)]
mod tests {
    use super::ahead;
    use std::time::Duration;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_checkpoint_is_ahead_only_while_its_writes_lead_both_the_log_and_the_clock() {
        let ms = Duration::from_millis;
        // Half written, a quarter of the log and of the time gone: wait.
        assert!(ahead(50, 100, 25, 100, ms(250), S));
        // The log caught up (or the clock did): write.
        assert!(!ahead(50, 100, 50, 100, ms(250), S));
        assert!(!ahead(50, 100, 25, 100, ms(500), S));
        // Past the span (the log grew faster than planned): write at full speed.
        assert!(!ahead(99, 100, 400, 100, ms(0), S));
        // Nothing to pace by: never wait.
        assert!(!ahead(50, 100, 0, 0, ms(0), S));
        assert!(!ahead(0, 0, 0, 100, ms(0), S));
        assert!(!ahead(50, 100, 0, 100, ms(0), Duration::ZERO));
        // Nothing written yet is never ahead.
        assert!(!ahead(0, 100, 0, 100, ms(0), S));
    }
}
