//! The buffer pool (seed 004): a fixed number of frames, a page table, an LRU list split into a
//! hot (young) and a cold (old) zone with midpoint insertion, and a page cleaner that writes
//! dirty pages in batches sorted by page number through the torn-write guard (seed 003).
//!
//! Locking: the pool mutex guards the page table and LRU lists; each frame has a page latch
//! (`RwLock`, held while a page is read or modified) and a small state mutex (dirty flag,
//! modification version, recovery LSN). Lock order: pool mutex → frame state; latch → frame
//! state. Pinned frames are never evicted.
//!
//! Write-back rules: a page is written only when (1) it is not being modified by a running
//! commit, (2) its page LSN is at most the applied LSN (every commit up to it finished), and
//! (3) the log is durable up to its page LSN (the WAL rule, asserted before every write).

use crate::error::{Error, Result};
use crate::format::{decode_page, encode_page, is_zero, Page, SECTOR};
use crate::probe::{self, Sabotage};
use crate::wal::Wal;
use crate::TornMode;
use pagoda_device::{DeviceRef, WriteHints};
use parking_lot::lock_api::{ArcRwLockReadGuard, ArcRwLockWriteGuard};
use parking_lot::{Mutex, RawRwLock, RwLock};
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

const NIL: u32 = u32::MAX;
const YOUNG: usize = 0;
const OLD: usize = 1;
/// `rec_lsn` of a page not yet stamped by its commit.
pub const UNSET: u64 = u64::MAX;

/// Write streams of the engine (clamped to what the device offers).
#[derive(Clone, Copy, Debug)]
pub struct Streams {
    /// Data pages.
    pub data: u16,
    /// Double-write area.
    pub dw: u16,
}

#[derive(Debug)]
struct FState {
    dirty: bool,
    in_progress: bool,
    version: u64,
    rec_lsn: u64,
}

#[derive(Debug)]
struct Frame {
    latch: Arc<RwLock<Option<Page>>>,
    pin: AtomicU32,
    state: Mutex<FState>,
}

#[derive(Debug)]
struct Lru {
    prev: Vec<u32>,
    next: Vec<u32>,
    list: Vec<u8>,
    head: [u32; 2],
    tail: [u32; 2],
    len: [usize; 2],
    young_target: usize,
}

impl Lru {
    fn new(n: usize) -> Self {
        Self {
            prev: vec![NIL; n],
            next: vec![NIL; n],
            list: vec![u8::MAX; n],
            head: [NIL; 2],
            tail: [NIL; 2],
            len: [0; 2],
            young_target: (n * 5 / 8).max(1),
        }
    }

    fn unlink(&mut self, i: u32) {
        let l = self.list[i as usize];
        if l == u8::MAX {
            return;
        }
        let l = l as usize;
        let (p, n) = (self.prev[i as usize], self.next[i as usize]);
        if p == NIL {
            self.head[l] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail[l] = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.list[i as usize] = u8::MAX;
        self.len[l] -= 1;
    }

    fn push_head(&mut self, l: usize, i: u32) {
        self.unlink(i);
        let h = self.head[l];
        self.prev[i as usize] = NIL;
        self.next[i as usize] = h;
        if h == NIL {
            self.tail[l] = i;
        } else {
            self.prev[h as usize] = i;
        }
        self.head[l] = i;
        self.list[i as usize] = l as u8;
        self.len[l] += 1;
    }

    /// A new page enters at the midpoint: the head of the old zone.
    fn insert_mid(&mut self, i: u32) {
        self.push_head(OLD, i);
    }

    /// A hit: pages in the old zone are promoted to the young head; a scan touches each page
    /// once and so never reaches the young zone.
    fn touch(&mut self, i: u32) {
        if self.head[YOUNG] == i {
            return;
        }
        self.push_head(YOUNG, i);
        while self.len[YOUNG] > self.young_target {
            let t = self.tail[YOUNG];
            self.push_head(OLD, t);
        }
    }

    /// Frames from the cold end: old zone tail first, then young tail.
    fn cold_order(&self) -> impl Iterator<Item = u32> + '_ {
        let mut cur = self.tail[OLD];
        let mut list = OLD;
        std::iter::from_fn(move || loop {
            if cur != NIL {
                let c = cur;
                cur = self.prev[c as usize];
                return Some(c);
            }
            if list == OLD {
                list = YOUNG;
                cur = self.tail[YOUNG];
                continue;
            }
            return None;
        })
    }
}

#[derive(Debug)]
struct Inner {
    table: HashMap<u64, u32>,
    ids: Vec<u64>,
    lru: Lru,
    free: Vec<u32>,
}

/// Buffer pool counters.
#[derive(Debug, Default)]
pub struct PoolCounters {
    /// Page requests served from memory.
    pub hits: AtomicU64,
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
}

/// The buffer pool.
#[derive(Debug)]
pub struct Pool {
    frames: Vec<Frame>,
    inner: Mutex<Inner>,
    dev: DeviceRef,
    page_size: usize,
    capacity_pages: u64,
    torn: TornMode,
    dw_start: u64,
    dw_pages: usize,
    streams: Streams,
    wal: Arc<Wal>,
    /// LSN up to which every commit has finished applying.
    pub applied: AtomicU64,
    /// Counters.
    pub counters: PoolCounters,
    clean_lock: Mutex<()>,
    sabotage: Option<Sabotage>,
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

/// A page latched for reading.
#[derive(Debug)]
pub struct ReadPage<'a> {
    guard: ArcRwLockReadGuard<RawRwLock, Option<Page>>,
    _pin: Pin<'a>,
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
    guard: ArcRwLockWriteGuard<RawRwLock, Option<Page>>,
    pin: Pin<'a>,
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
        let mut st = self.pin.pool.frames[self.pin.idx as usize].state.lock();
        st.dirty = true;
        st.in_progress = true;
        st.version += 1;
    }

    /// Marks the page dirty with a known LSN (recovery).
    pub fn modified_at(&mut self, lsn: u64) {
        let mut st = self.pin.pool.frames[self.pin.idx as usize].state.lock();
        st.dirty = true;
        st.version += 1;
        if st.rec_lsn == UNSET {
            st.rec_lsn = lsn;
        }
    }
}

/// A page image prepared for write-back.
struct Out {
    pid: u64,
    idx: u32,
    version: u64,
    lsn: u64,
    bytes: Vec<u8>,
}

impl Pool {
    /// A pool of `frames` frames over `dev`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        dev: DeviceRef,
        page_size: usize,
        frames: usize,
        torn: TornMode,
        dw_start: u64,
        dw_pages: usize,
        streams: Streams,
        wal: Arc<Wal>,
    ) -> Self {
        let capacity_pages = dev.caps().capacity_bytes() / page_size as u64;
        Self {
            frames: (0..frames)
                .map(|_| Frame {
                    latch: Arc::new(RwLock::new(None)),
                    pin: AtomicU32::new(0),
                    state: Mutex::new(FState {
                        dirty: false,
                        in_progress: false,
                        version: 0,
                        rec_lsn: UNSET,
                    }),
                })
                .collect(),
            inner: Mutex::new(Inner {
                table: HashMap::with_capacity(frames),
                ids: vec![u64::MAX; frames],
                lru: Lru::new(frames),
                free: (0..frames as u32).rev().collect(),
            }),
            dev,
            page_size,
            capacity_pages,
            torn,
            dw_start,
            dw_pages,
            streams,
            wal,
            applied: AtomicU64::new(0),
            counters: PoolCounters::default(),
            clean_lock: Mutex::new(()),
            sabotage: None,
        }
    }

    /// The safety step removed on purpose, if any.
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
        self.frames.len()
    }

    /// Number of dirty frames.
    pub fn dirty_frames(&self) -> usize {
        self.frames.iter().filter(|f| f.state.lock().dirty).count()
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

    /// Pins the frame of `pid`, loading it when missing (`load = None` installs `install`
    /// instead of reading).
    fn pin(&self, pid: u64, install: Option<&mut Option<Page>>) -> Result<Pin<'_>> {
        let mut attempts = 0;
        loop {
            let mut inner = self.inner.lock();
            if let Some(&idx) = inner.table.get(&pid) {
                self.frames[idx as usize]
                    .pin
                    .fetch_add(1, Ordering::Acquire);
                inner.lru.touch(idx);
                drop(inner);
                self.counters.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(Pin { pool: self, idx });
            }
            let Some(idx) = self.victim(&mut inner) else {
                drop(inner);
                attempts += 1;
                if attempts > 50 {
                    return Err(Error::BufferFull);
                }
                let _ = self.clean_batch(None)?;
                if attempts > 2 {
                    std::thread::yield_now();
                }
                continue;
            };
            let frame = &self.frames[idx as usize];
            let Some(mut guard) = frame.latch.try_write_arc() else {
                // Someone still holds the latch (should not happen for an unpinned frame).
                inner.lru.insert_mid(idx);
                inner.free.retain(|&f| f != idx);
                continue;
            };
            let old = inner.ids[idx as usize];
            if old != u64::MAX {
                inner.table.remove(&old);
                self.counters.evictions.fetch_add(1, Ordering::Relaxed);
            }
            inner.ids[idx as usize] = pid;
            inner.table.insert(pid, idx);
            inner.lru.insert_mid(idx);
            frame.pin.fetch_add(1, Ordering::Acquire);
            drop(inner);
            {
                let mut st = frame.state.lock();
                st.dirty = false;
                st.in_progress = false;
                st.rec_lsn = UNSET;
                st.version += 1;
            }
            let pin = Pin { pool: self, idx };
            let loaded = match install {
                Some(p) => Ok(p.take()),
                None => {
                    self.counters.misses.fetch_add(1, Ordering::Relaxed);
                    self.read_raw(pid).and_then(|b| {
                        if is_zero(&b) {
                            Err(Error::corrupt(
                                pid,
                                "page was never written (reads as zeros)",
                            ))
                        } else {
                            decode_page(&b, pid).map(Some)
                        }
                    })
                }
            };
            match loaded {
                Ok(p) => {
                    *guard = p;
                    return Ok(pin);
                }
                Err(e) => {
                    *guard = None;
                    drop(guard);
                    let mut inner = self.inner.lock();
                    if inner.table.get(&pid) == Some(&idx) {
                        inner.table.remove(&pid);
                        inner.ids[idx as usize] = u64::MAX;
                        inner.lru.unlink(idx);
                        inner.free.push(idx);
                    }
                    return Err(e);
                }
            }
        }
    }

    fn victim(&self, inner: &mut Inner) -> Option<u32> {
        if let Some(i) = inner.free.pop() {
            return Some(i);
        }
        let found = inner.lru.cold_order().find(|&i| {
            let f = &self.frames[i as usize];
            f.pin.load(Ordering::Acquire) == 0 && !f.state.lock().dirty
        });
        if let Some(i) = found {
            inner.lru.unlink(i);
        }
        found
    }

    /// Latches `pid` for reading.
    pub fn read(&self, pid: u64) -> Result<ReadPage<'_>> {
        loop {
            let pin = self.pin(pid, None)?;
            let guard = self.frames[pin.idx as usize].latch.read_arc();
            if guard.as_ref().is_some_and(|p| p.id == pid) {
                return Ok(ReadPage { guard, _pin: pin });
            }
        }
    }

    /// Latches `pid` for writing.
    pub fn write(&self, pid: u64) -> Result<WritePage<'_>> {
        loop {
            let pin = self.pin(pid, None)?;
            let guard = self.frames[pin.idx as usize].latch.write_arc();
            if guard.as_ref().is_some_and(|p| p.id == pid) {
                return Ok(WritePage { guard, pin });
            }
        }
    }

    /// Installs a page without reading the device (new pages, recovery images); returns it
    /// latched for writing. The caller marks it modified.
    pub fn install(&self, page: Page) -> Result<WritePage<'_>> {
        let pid = page.id;
        if pid >= self.capacity_pages {
            return Err(Error::Full {
                page: pid,
                capacity_pages: self.capacity_pages,
            });
        }
        let mut slot = Some(page);
        loop {
            let pin = self.pin(pid, Some(&mut slot))?;
            let mut guard = self.frames[pin.idx as usize].latch.write_arc();
            if let Some(p) = slot.take() {
                // The page was resident: replace its contents.
                *guard = Some(p);
            }
            if guard.as_ref().is_some_and(|p| p.id == pid) {
                return Ok(WritePage { guard, pin });
            }
        }
    }

    /// Stamps the pages a commit modified with its LSN and makes them writable.
    pub fn stamp(&self, pids: &[u64], lsn: u64) -> Result<()> {
        for &pid in pids {
            let mut p = self.write(pid)?;
            p.lsn = p.lsn.max(lsn);
            let mut st = self.frames[p.pin.idx as usize].state.lock();
            st.in_progress = false;
            if st.rec_lsn == UNSET {
                st.rec_lsn = lsn;
            }
        }
        Ok(())
    }

    /// Writes one batch of dirty pages (cold end first), sorted by page number. With
    /// `rec_below`, only pages first dirtied before that LSN (checkpoint). Returns pages
    /// written.
    pub fn clean_batch(&self, rec_below: Option<u64>) -> Result<usize> {
        let _one = self.clean_lock.lock();
        let limit = match self.torn {
            TornMode::Doublewrite => self.dw_pages,
            _ => 64,
        };
        let mut pins = Vec::new();
        {
            let inner = self.inner.lock();
            for i in inner.lru.cold_order() {
                if pins.len() >= limit {
                    break;
                }
                let f = &self.frames[i as usize];
                let st = f.state.lock();
                if st.dirty && !st.in_progress && rec_below.is_none_or(|b| st.rec_lsn < b) {
                    f.pin.fetch_add(1, Ordering::Acquire);
                    pins.push(Pin { pool: self, idx: i });
                }
            }
        }
        let applied = self.applied.load(Ordering::Acquire);
        let mut outs = Vec::with_capacity(pins.len());
        for pin in &pins {
            let f = &self.frames[pin.idx as usize];
            let Some(g) = f.latch.try_read() else {
                continue;
            };
            let Some(page) = g.as_ref() else { continue };
            let st = f.state.lock();
            if !st.dirty || st.in_progress || page.lsn > applied {
                continue;
            }
            let mut bytes = Vec::with_capacity(self.page_size);
            encode_page(page, self.page_size, &mut bytes);
            outs.push(Out {
                pid: page.id,
                idx: pin.idx,
                version: st.version,
                lsn: page.lsn,
                bytes,
            });
        }
        if outs.is_empty() {
            return Ok(0);
        }
        outs.sort_by_key(|o| o.pid);
        let max_lsn = outs.iter().map(|o| o.lsn).max().unwrap_or(0);
        // WAL rule: the log must be durable up to every page LSN before the page is written.
        if !probe::is(self.sabotage, Sabotage::SkipWalRule) {
            self.wal.wait_durable(max_lsn)?;
            let durable = self.wal.durable();
            assert!(
                max_lsn <= durable,
                "WAL rule: page LSN {max_lsn} > durable LSN {durable}"
            );
        }
        self.write_out(&outs)?;
        for o in &outs {
            let mut st = self.frames[o.idx as usize].state.lock();
            if st.version == o.version {
                st.dirty = false;
                st.rec_lsn = UNSET;
            }
        }
        self.counters
            .cleaner_batches
            .fetch_add(1, Ordering::Relaxed);
        Ok(outs.len())
    }

    fn write_out(&self, outs: &[Out]) -> Result<()> {
        let data = WriteHints::stream(self.streams.data);
        match self.torn {
            TornMode::Doublewrite if probe::is(self.sabotage, Sabotage::SkipDoublewrite) => {
                self.write_runs(outs, data)?;
                self.dev.flush()?;
            }
            TornMode::Atomic if probe::is(self.sabotage, Sabotage::NonAtomicPages) => {
                for o in outs {
                    self.dev.write(self.sector_of(o.pid), &o.bytes, data)?;
                }
            }
            TornMode::Doublewrite => {
                let mut buf = Vec::with_capacity(outs.len() * self.page_size);
                for o in outs {
                    buf.extend_from_slice(&o.bytes);
                }
                self.dev.write(
                    self.sector_of(self.dw_start),
                    &buf,
                    WriteHints::stream(self.streams.dw),
                )?;
                self.dev.flush()?;
                self.counters
                    .dw_writes
                    .fetch_add(outs.len() as u64, Ordering::Relaxed);
                self.write_runs(outs, data)?;
                self.dev.flush()?;
            }
            TornMode::Atomic => {
                let hints = WriteHints::atomic(self.streams.data);
                for o in outs {
                    self.dev.write(self.sector_of(o.pid), &o.bytes, hints)?;
                }
            }
            TornMode::None => self.write_runs(outs, data)?,
        }
        self.counters
            .writes
            .fetch_add(outs.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Writes sorted pages, merging runs of consecutive page ids into one request.
    fn write_runs(&self, outs: &[Out], hints: WriteHints) -> Result<()> {
        let mut i = 0;
        while i < outs.len() {
            let mut j = i + 1;
            while j < outs.len() && outs[j].pid == outs[j - 1].pid + 1 {
                j += 1;
            }
            if j == i + 1 {
                self.dev
                    .write(self.sector_of(outs[i].pid), &outs[i].bytes, hints)?;
            } else {
                let mut buf = Vec::with_capacity((j - i) * self.page_size);
                for o in &outs[i..j] {
                    buf.extend_from_slice(&o.bytes);
                }
                self.dev.write(self.sector_of(outs[i].pid), &buf, hints)?;
            }
            i = j;
        }
        Ok(())
    }

    /// Writes every page first dirtied before `below` (all dirty pages with `None`), then syncs.
    pub fn flush_dirty(&self, below: Option<u64>) -> Result<()> {
        let mut idle = 0;
        loop {
            let remaining = self
                .frames
                .iter()
                .filter(|f| {
                    let st = f.state.lock();
                    st.dirty && below.is_none_or(|b| st.rec_lsn < b)
                })
                .count();
            if remaining == 0 {
                break;
            }
            let n = self.clean_batch(below)?;
            if n == 0 {
                idle += 1;
                if idle > 10_000 {
                    return Err(Error::Failed(
                        "checkpoint could not write dirty pages (latched for too long)".into(),
                    ));
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            } else {
                idle = 0;
            }
        }
        self.dev.flush()?;
        Ok(())
    }
}
