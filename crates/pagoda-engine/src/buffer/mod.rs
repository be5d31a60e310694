//! The buffer pool: frames and the page table here; latching pages in [`access`]
//! (with the lock-free [`hint`] table), the hot/cold LRU in [`lru`], the page cleaner in [`cleaner`],
//! torn-write protection (double-write area, 16 KiB atomic writes) in [`torn`], the FaCE flash
//! cache tier between the pool and the data device in [`flash_cache`].
//!
//! The pool: a fixed number of frames, a page table, an LRU list split into a
//! hot (young) and a cold (old) zone with midpoint insertion, and a page cleaner that writes
//! dirty pages in batches sorted by page number through the torn-write guard.
//!
//! Locking: the pool mutex guards the page table and LRU lists; each frame has a page latch
//! (`RwLock`, held while a page is read or modified) and a small state mutex (dirty flag,
//! modification version, recovery LSN). Lock order: pool mutex → frame state; latch → frame
//! state. Pinned frames are never evicted.
//!
//! Write-back rules: a page is written only when (1) it is not being modified by a running
//! commit, (2) its page LSN is at most the applied LSN (every commit up to it finished), and
//! (3) the log is durable up to its page LSN (the WAL rule, asserted before every write).

use crate::error::{Error, Failure, Result};
use crate::format::{Page, SECTOR};
use crate::probe::Sabotage;
use crate::stream::Stream;
use crate::wal::Wal;
use crate::TornMode;
use pagoda_device::DeviceRef;
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use std::collections::{BTreeSet, HashMap};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

mod access;
mod bulk;
mod cleaner;
mod evict;
pub(crate) mod flash_cache;
mod held;
mod hint;
mod lru;
mod miss;
mod runs;
mod torn;
mod trace;
mod undo;
pub(crate) use held::Held;
pub(crate) use undo::LeafUndo;

use lru::Lru;

/// Page-table shards.
const SHARDS: usize = 64;
/// How long a pin waits without a free frame, and without the cleaner freeing any, before the
/// pool counts as exhausted. (Generous: on a loaded machine a thread may not run for a while,
/// and frames wait for log syncs, which a busy disk can take long to finish.)
const PIN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

pub(crate) mod latch_order;

/// `rec_lsn` of a page not yet stamped by its commit.
pub const UNSET: u64 = u64::MAX;

#[derive(Debug)]
struct FState {
    dirty: bool,
    /// Clean, but its LSN was raised by a commit that freed it (see [`Pool::stamp`]).
    relabeled: bool,
    in_progress: bool,
    version: u64,
    rec_lsn: u64,
    /// LSN of the newest commit record holding this page's whole image (`UNSET`: none known).
    /// While the recovery start is at or below it, a torn write of the page is repaired from
    /// the log, so it needs no double-write copy ([`Pool::redo_start`]).
    imaged: u64,
}

#[derive(Debug)]
struct Frame {
    latch: RwLock<Option<Page>>,
    pin: AtomicU32,
    state: Mutex<FState>,
    /// The page the page table maps to this frame (`u64::MAX`: none); changed only under that
    /// page's shard write lock. A hit found by a [`hint`] is valid only while this names it.
    mapped: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    ids: Vec<u64>,
    lru: Lru,
    free: Vec<u32>,
    /// Frames holding a page (at most `budget`, except while a commit spills).
    resident: usize,
}

/// Buffer pool counters.
#[derive(Debug, Default)]
pub struct PoolCounters {
    /// Page requests served from memory (striped: every hit adds to it, on every thread).
    pub hits: crate::striped::Striped<1>,
    /// Page requests that read the device.
    pub misses: AtomicU64,
    /// Pages read from the device.
    pub reads: AtomicU64,
    /// Pages written in place.
    pub writes: AtomicU64,
    /// Pages evicted.
    pub evictions: AtomicU64,
    /// Cleaner batches written.
    pub cleaner_batches: AtomicU64,
    /// Pages written to the double-write area.
    pub dw_writes: AtomicU64,
    /// Pages written in torn mode `doublewrite` without a double-write copy (their image is in
    /// the log recovery would read); never in `doublewrite-full`.
    pub dw_skipped: AtomicU64,
}

/// The buffer pool.
#[derive(Debug)]
pub struct Pool {
    frames: Vec<Frame>,
    /// The page table, sharded by page id: a hit takes one shard's read lock and no global
    /// lock. Mappings change only under `inner` (so a miss re-checks there), and a frame is
    /// pinned or latched while its shard is read-locked, so an evictor that holds the shard's
    /// write lock sees every user of the frame.
    shards: Vec<RwLock<HashMap<u64, u32>>>,
    /// Page id -> frame guesses for the hit path, checked there ([`hint`]).
    hints: hint::Hints,
    /// Per frame: the eviction count when it last moved to the young head (`UNSET` when not
    /// young); a hit on a recently promoted page changes no list.
    young_at: Vec<AtomicU64>,
    fresh_span: u64,
    inner: Mutex<Inner>,
    /// Frames the pool keeps resident normally (the configured size); `frames` may be more
    /// ([`Pool::with_spill`]).
    budget: usize,
    dev: DeviceRef,
    page_size: usize,
    capacity_pages: u64,
    torn: TornMode,
    dw_start: u64,
    dw_pages: usize,
    /// Stream ids of data pages and of the double-write area on this device.
    data_stream: u16,
    dw_stream: u16,
    wal: Arc<Wal>,
    /// LSN up to which every commit has finished applying.
    pub applied: AtomicU64,
    /// Counters.
    pub counters: PoolCounters,
    /// Held by a cleaner batch from its first write to its last sync, and while the redo
    /// start moves ([`Pool::move_redo_start`]).
    clean_lock: Mutex<()>,
    /// The first failed write-out (a batch's page writes or syncs, a checkpoint's sync, the
    /// superblock that moves the redo start): that batch's pages may be torn in place, and
    /// their copies in the double-write area (or their images in the log) are what repairs
    /// them, so every later write-out is refused rather than overwrite those copies
    /// (`Pool::guard`).
    broken: Mutex<Option<Failure>>,
    /// The redo start of the durable superblock (`UNSET` until known): a page imaged at or
    /// after it skips the double-write area.
    redo_start: AtomicU64,
    sabotage: Option<Sabotage>,
    /// Before-images of the running commit's pages ([`undo`]); `journaling` avoids taking
    /// the journal's lock on every page access when no commit keeps one.
    journal: Mutex<undo::Journal>,
    journaling: std::sync::atomic::AtomicBool,
    /// Set when a commit spilled past the budget; cleared once [`Pool::trim`] is back in it.
    over_budget: std::sync::atomic::AtomicBool,
    /// Frames whose `dirty` flag is set (changed with it, under the frame's state lock): the
    /// background thread asks every 20 ms, and counting the 131k frames of a 2 GiB pool one
    /// by one took 5 % of a read run's CPU samples, on cores the readers needed.
    dirty: std::sync::atomic::AtomicUsize,
    /// The FaCE flash cache tier: page writes go there, misses look there first.
    flash: Option<flash_cache::FlashCache>,
    /// Page-reference recorder for miss-ratio curves ([`trace`]); off unless started.
    trace: crate::sizing::Recorder,
    /// Free pages older snapshots may still read (allocation skips them).
    held: Held,
}

/// A pinned frame; unpins on drop.
#[derive(Debug)]
struct Pin<'a> {
    pool: &'a Pool,
    idx: u32,
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        self.pool.frames[self.idx as usize]
            .pin
            .fetch_sub(1, Ordering::Release);
    }
}

/// A page latched for reading. A hit is latched under its page-table shard's read lock and
/// needs no pin: an evictor unmaps a frame under that shard's write lock and must then latch
/// it exclusively, which it cannot while the page is latched here. A miss (or a page a writer
/// holds) is pinned, then latched.
#[derive(Debug)]
pub struct ReadPage<'a> {
    // Dropped before the pin.
    guard: RwLockReadGuard<'a, Option<Page>>,
    _pin: Option<Pin<'a>>,
}

impl Drop for ReadPage<'_> {
    fn drop(&mut self) {
        latch_order::released();
    }
}

impl Deref for ReadPage<'_> {
    type Target = Page;
    fn deref(&self) -> &Page {
        // Invariant: a handed-out guard always holds a page (checked in `latch_read`).
        self.guard
            .as_ref()
            .unwrap_or_else(|| unreachable!("latched frame without a page"))
    }
}

/// A page latched for writing. Call [`WritePage::modified`] before changing it.
#[derive(Debug)]
pub struct WritePage<'a> {
    guard: parking_lot::RwLockWriteGuard<'a, Option<Page>>,
    pin: Pin<'a>,
}

impl Drop for WritePage<'_> {
    fn drop(&mut self) {
        latch_order::released();
    }
}

impl Deref for WritePage<'_> {
    type Target = Page;
    fn deref(&self) -> &Page {
        self.guard
            .as_ref()
            .unwrap_or_else(|| unreachable!("latched frame without a page"))
    }
}

impl DerefMut for WritePage<'_> {
    fn deref_mut(&mut self) -> &mut Page {
        self.guard
            .as_mut()
            .unwrap_or_else(|| unreachable!("latched frame without a page"))
    }
}

impl WritePage<'_> {
    /// Marks the page dirty and being modified by the running commit (not writable until
    /// [`Pool::stamp`]).
    pub fn modified(&mut self) {
        let pool = self.pin.pool;
        let mut st = pool.frames[self.pin.idx as usize].state.lock();
        pool.set_dirty(&mut st, true);
        st.in_progress = true;
        st.version += 1;
    }

    /// Marks the page dirty with a known LSN (recovery).
    pub fn modified_at(&mut self, lsn: u64) {
        let pool = self.pin.pool;
        let mut st = pool.frames[self.pin.idx as usize].state.lock();
        pool.set_dirty(&mut st, true);
        st.version += 1;
        if st.rec_lsn == UNSET {
            st.rec_lsn = lsn;
        }
    }
}
impl Pool {
    /// A pool of `frames` frames over `dev` (no spill room; see [`Pool::with_spill`]).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        dev: DeviceRef,
        page_size: usize,
        frames: usize,
        torn: TornMode,
        dw_start: u64,
        dw_pages: usize,
        wal: Arc<Wal>,
    ) -> Self {
        let caps = dev.caps();
        let capacity_pages = caps.capacity_bytes() / page_size as u64;
        Self {
            frames: Self::new_frames(frames),
            shards: Self::new_shards(),
            hints: hint::Hints::new(frames),
            young_at: Self::new_young_at(frames),
            fresh_span: Lru::new(0, frames).fresh_span(),
            inner: Mutex::new(Self::new_inner(frames, frames)),
            budget: frames,
            dev,
            page_size,
            capacity_pages,
            torn,
            dw_start,
            dw_pages,
            data_stream: Stream::Data.on(&caps),
            dw_stream: Stream::Doublewrite.on(&caps),
            wal,
            applied: AtomicU64::new(0),
            counters: PoolCounters::default(),
            clean_lock: Mutex::new(()),
            broken: Mutex::new(None),
            redo_start: AtomicU64::new(UNSET),
            sabotage: None,
            journal: Mutex::new(undo::Journal::default()),
            journaling: std::sync::atomic::AtomicBool::new(false),
            over_budget: std::sync::atomic::AtomicBool::new(false),
            dirty: std::sync::atomic::AtomicUsize::new(0),
            flash: None,
            trace: crate::sizing::Recorder::default(),
            held: Held::default(),
        }
    }

    /// Puts a flash cache between this pool and the data device. (Call before use.)
    pub(crate) fn with_flash(mut self, fc: Option<flash_cache::FlashCache>) -> Self {
        self.flash = fc;
        self
    }

    /// The flash cache, if any.
    pub(crate) fn flash(&self) -> Option<&flash_cache::FlashCache> {
        self.flash.as_ref()
    }

    /// Tells the flash cache that `pid` left DRAM (Group Second Chance counts pages still in
    /// DRAM as used).
    fn left_dram(&self, pid: u64) {
        if let Some(fc) = &self.flash {
            fc.left_dram(pid);
        }
    }

    fn new_frames(n: usize) -> Vec<Frame> {
        (0..n)
            .map(|_| Frame {
                latch: RwLock::new(None),
                pin: AtomicU32::new(0),
                state: Mutex::new(FState {
                    dirty: false,
                    relabeled: false,
                    in_progress: false,
                    version: 0,
                    rec_lsn: UNSET,
                    imaged: UNSET,
                }),
                mapped: AtomicU64::new(u64::MAX),
            })
            .collect()
    }

    fn new_shards() -> Vec<RwLock<HashMap<u64, u32>>> {
        (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect()
    }

    fn new_young_at(n: usize) -> Vec<AtomicU64> {
        (0..n).map(|_| AtomicU64::new(UNSET)).collect()
    }

    fn shard(&self, pid: u64) -> &RwLock<HashMap<u64, u32>> {
        &self.shards[(pid % SHARDS as u64) as usize]
    }

    fn new_inner(n: usize, budget: usize) -> Inner {
        Inner {
            ids: vec![u64::MAX; n],
            lru: Lru::new(n, budget),
            free: (0..n as u32).rev().collect(),
            resident: 0,
        }
    }

    /// Adds `spill` frames that only a running commit may fill, and only when no clean page
    /// can be evicted: a commit's changed pages cannot be written before its record is logged,
    /// so a commit that changes more pages than the pool holds would otherwise fail. The pool
    /// shrinks back to its budget as those pages are written and evicted. (Call before use.)
    pub fn with_spill(mut self, spill: usize) -> Self {
        let n = self.budget + spill;
        self.frames = Self::new_frames(n);
        self.young_at = Self::new_young_at(n);
        self.inner = Mutex::new(Self::new_inner(n, self.budget));
        self
    }

    /// The safety step removed on purpose, if any.
    pub(crate) fn held(&self) -> &Held {
        &self.held
    }

    pub(crate) fn sabotage(&self) -> Option<Sabotage> {
        self.sabotage
    }

    /// Removes a safety step on purpose (crash-test self-checks).
    pub(crate) fn sabotaged(mut self, s: Option<Sabotage>) -> Self {
        self.sabotage = s;
        self
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Pages the data device holds.
    pub fn capacity_pages(&self) -> u64 {
        self.capacity_pages
    }

    /// Number of frames.
    pub fn frames(&self) -> usize {
        self.budget
    }

    /// Flash cache counters, when a flash cache is configured.
    pub fn flash_stats(&self) -> Option<flash_cache::FlashCacheStats> {
        self.flash.as_ref().map(flash_cache::FlashCache::stats)
    }

    /// The flash cache device, if any.
    pub fn flash_device(&self) -> Option<&DeviceRef> {
        self.flash.as_ref().map(flash_cache::FlashCache::device)
    }

    /// Whether `pid` is in the pool (tests).
    #[cfg(test)]
    pub(crate) fn is_resident(&self, pid: u64) -> bool {
        self.shard(pid).read().contains_key(&pid)
    }

    /// Number of dirty frames.
    pub fn dirty_frames(&self) -> usize {
        self.dirty.load(Ordering::Relaxed)
    }

    /// Dirty frames counted one by one (tests check the running count against it).
    #[cfg(test)]
    pub(crate) fn count_dirty_frames(&self) -> usize {
        self.frames.iter().filter(|f| f.state.lock().dirty).count()
    }

    /// Sets a frame's dirty flag (its state lock held), keeping [`Pool::dirty_frames`].
    fn set_dirty(&self, st: &mut FState, dirty: bool) {
        if st.dirty != dirty {
            st.dirty = dirty;
            if dirty {
                self.dirty.fetch_add(1, Ordering::Relaxed);
            } else {
                self.dirty.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    fn sector_of(&self, pid: u64) -> u64 {
        pid * (self.page_size / SECTOR) as u64
    }

    /// Reads a page image straight from the device (no caching).
    pub fn read_raw(&self, pid: u64) -> Result<Vec<u8>> {
        if pid >= self.capacity_pages {
            return Err(Error::corrupt(pid, "page id beyond the device"));
        }
        let mut buf = vec![0u8; self.page_size];
        self.dev.read(self.sector_of(pid), &mut buf)?;
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        Ok(buf)
    }

    /// Reads the newest durable image of a page: its flash copy when the flash cache has one,
    /// else the data device's.
    pub fn read_page(&self, pid: u64) -> Result<Vec<u8>> {
        if let Some(fc) = &self.flash {
            if pid < self.capacity_pages {
                if let Some(b) = fc.read(pid)? {
                    return Ok(b);
                }
            }
        }
        self.read_raw(pid)
    }

    /// The hit path: pins `pid`'s frame if it is mapped, taking only its shard's read lock
    /// (and the global lock only to promote a page that is old or far down the young zone).
    fn pin_resident(&self, pid: u64) -> Option<Pin<'_>> {
        let idx = self.lookup_pin(pid)?;
        if self.needs_promotion(idx) {
            let mut inner = self.inner.lock();
            self.promote(&mut inner, idx);
        }
        Some(Pin { pool: self, idx })
    }

    /// Pins `pid`'s frame under its shard's read lock, if mapped (a hit).
    fn lookup_pin(&self, pid: u64) -> Option<u32> {
        let t = self.shard(pid).read();
        let idx = *t.get(&pid)?;
        self.frames[idx as usize]
            .pin
            .fetch_add(1, Ordering::Acquire);
        drop(t);
        self.counters.hits.add(0, 1);
        Some(idx)
    }

    /// A hit moves its page to the young head when it is in the old zone, or when more than
    /// `fresh_span` pages were evicted since it last moved there (InnoDB's freed-page clock).
    /// Young pages can only matter to the choice of a victim once pages are evicted, so a pool
    /// that holds the whole working set changes no list (and takes no global lock) on a hit;
    /// a promotion count instead kept a working set just above the span moving for ever.
    fn needs_promotion(&self, idx: u32) -> bool {
        let at = self.young_at[idx as usize].load(Ordering::Relaxed);
        let now = self.counters.evictions.load(Ordering::Relaxed);
        at == UNSET || now.saturating_sub(at) > self.fresh_span
    }

    /// Moves a hit frame (pinned, so still mapped and in the lists) to the young head.
    fn promote(&self, inner: &mut Inner, idx: u32) {
        if !self.needs_promotion(idx) {
            return;
        }
        inner.lru.touch(idx, |d| {
            self.young_at[d as usize].store(UNSET, Ordering::Relaxed);
        });
        let now = self.counters.evictions.load(Ordering::Relaxed);
        self.young_at[idx as usize].store(now, Ordering::Relaxed);
    }

    /// Stamps the pages a commit modified with its LSN and makes them writable; `imaged` are
    /// those whose whole image its record holds.
    pub fn stamp(&self, pids: &[u64], lsn: u64, imaged: &BTreeSet<u64>) -> Result<()> {
        for &pid in pids {
            let mut p = self.write(pid)?;
            let raised = lsn > p.lsn;
            p.lsn = p.lsn.max(lsn);
            let mut st = self.frames[p.pin.idx as usize].state.lock();
            if raised {
                // A cleaner that copied the page before this must not mark it clean.
                st.version += 1;
                if !st.dirty {
                    // A page the commit freed without changing it: only its LSN now differs
                    // from the durable copy, so it must not be cached as that copy (pages
                    // `all`).
                    st.relabeled = true;
                }
            }
            st.in_progress = false;
            if st.rec_lsn == UNSET {
                st.rec_lsn = lsn;
            }
            if imaged.contains(&pid) {
                st.imaged = lsn;
            }
        }
        Ok(())
    }
}
