//! A host page cache in front of any device: buffered I/O, as a database gets it when it does not
//! open its files with O_DIRECT (the 16 KiB atomic-write paper's `no_double` run: MariaDB with the
//! double-write buffer off went through the page cache; its atomic run used O_DIRECT).
//!
//! [`PageCache`] keeps 4 KiB pages in RAM:
//!
//! * a **write** copies its data into the cache (the pages become dirty) and returns without
//!   device I/O;
//! * a **flush** (fsync) writes every dirty page back as the kernel's writeback does: in 4 KiB
//!   page units sorted by address, contiguous pages of one stream merged into requests of up to
//!   `max_request_bytes`, several requests in flight at once, **never with the atomic hint**
//!   (buffered writeback cannot carry it, so the cache claims no atomic-write unit), then
//!   flushes the device;
//! * a **read** is served from the cache when all its pages are there; missing runs are read
//!   from the device and kept (clean);
//! * **capacity** is bounded: clean pages are evicted least recently used first; when the cache
//!   holds no clean page to evict, the writer writes the dirty pages back itself, as the
//!   kernel's dirty limits throttle a writer (the dirty limit is the whole cache here).
//!
//! A power cut loses every dirty page, then cuts the device below.
//!
//! **Time.** The cache adds no emulated latency: a hit or a buffered write costs its real
//! memcpy (CPU of this machine), and device time is whatever the inner device charges for the
//! writeback and the misses. Writeback copies each page once more out of the cache (the kernel
//! writes from the page itself); the copy is taken so that writers never wait on writeback.

use crate::error::{DeviceError, Result};
use crate::stats::{DeviceStats, PageCacheStats};
use crate::units::{format_size, parse_size};
use crate::{
    check_hints, check_io, check_range, BlockDevice, Capabilities, DeviceRef, PowerCut,
    PowerCutReport, WriteHints, SECTOR_SIZE,
};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(test)]
mod tests;

/// Device-spec keys of the page cache (on any device: `sata-ssd,pagecache=64MiB`).
pub(crate) const KEYS: [&str; 3] = ["pagecache", "pagecache_request", "pagecache_depth"];

/// The smallest cache: a few writeback requests' worth, so that a writer always finds room.
const MIN_CAPACITY: u64 = 1 << 20;

/// Options of a [`PageCache`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PageCacheOptions {
    /// Bytes of RAM the cache holds (key `pagecache`, at least 1 MiB).
    pub capacity_bytes: u64,
    /// Largest writeback request (key `pagecache_request`; default 512 KiB, Linux's usual
    /// `max_sectors_kb`).
    pub max_request_bytes: usize,
    /// Writeback requests in flight at once (key `pagecache_depth`; default 32, a SATA
    /// drive's NCQ depth: the kernel submits writeback asynchronously).
    pub depth: usize,
}

impl Default for PageCacheOptions {
    fn default() -> Self {
        Self {
            capacity_bytes: 0,
            max_request_bytes: 512 << 10,
            depth: 32,
        }
    }
}

impl PageCacheOptions {
    /// Applies one `key=value` option of a device spec (one of [`KEYS`]).
    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let bad = |fix: &str| DeviceError::config(format!("{key}={value}: {fix}"));
        match key {
            "pagecache" => {
                self.capacity_bytes = parse_size(value)
                    .map_err(|_| bad("give the cache's size, e.g. pagecache=64MiB"))?;
            }
            "pagecache_request" => {
                self.max_request_bytes = parse_size(value)
                    .ok()
                    .and_then(|b| usize::try_from(b).ok())
                    .ok_or_else(|| bad("give a size, e.g. pagecache_request=512KiB"))?;
            }
            "pagecache_depth" => {
                self.depth = value
                    .parse()
                    .map_err(|_| bad("give a number of requests, e.g. pagecache_depth=32"))?;
            }
            _ => {
                return Err(DeviceError::config(format!(
                    "'{key}' is not a page-cache key; use {}",
                    KEYS.join(", ")
                )))
            }
        }
        Ok(())
    }

    fn validate(&self) -> Result<()> {
        let c = self.capacity_bytes;
        if c < MIN_CAPACITY || !c.is_multiple_of(SECTOR_SIZE as u64) {
            return Err(DeviceError::config(format!(
                "pagecache={c} bytes: give a multiple of 4KiB of at least 1MiB, e.g. \
                 pagecache=64MiB (pagecache_request and pagecache_depth need it too)"
            )));
        }
        let r = self.max_request_bytes;
        if r < SECTOR_SIZE || !r.is_multiple_of(SECTOR_SIZE) || r as u64 > c / 2 {
            return Err(DeviceError::config(format!(
                "pagecache_request={r} bytes: give a multiple of 4KiB no larger than half the \
                 cache, e.g. pagecache_request=512KiB"
            )));
        }
        if !(1..=1024).contains(&self.depth) {
            return Err(DeviceError::config(format!(
                "pagecache_depth={}: give 1..=1024 requests in flight, e.g. pagecache_depth=32",
                self.depth
            )));
        }
        Ok(())
    }
}

/// Where a cached page stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PageState {
    /// Same as the device; evictable. `tick` orders the LRU.
    Clean { tick: u64 },
    /// Newer than the device, last written on `stream`.
    Dirty { stream: u16 },
    /// Being written back: not evictable until the device has it.
    Writeback,
}

#[derive(Clone, Copy, Debug)]
struct Page {
    slot: usize,
    state: PageState,
}

/// One writeback request: contiguous dirty pages of one stream, copied out of the cache.
struct Run {
    sector: u64,
    stream: u16,
    data: Vec<u8>,
}

#[derive(Debug)]
struct State {
    pages: HashMap<u64, Page>,
    /// Page data, `SECTOR_SIZE` bytes per slot (allocated at once, touched lazily).
    arena: Vec<u8>,
    free: Vec<usize>,
    /// Dirty pages by address: writeback's order.
    dirty: BTreeSet<u64>,
    /// Clean pages by last use (tick → sector): the eviction order.
    clean: BTreeMap<u64, u64>,
    tick: u64,
    /// Bumped whenever the device's copy of a page may change (a writeback starts, a trim, a
    /// power cut), so that a read that went to the device without the lock can tell whether
    /// a page it missed may have been written meanwhile (and dropped from the cache since).
    device_changes: u64,
    stats: PageCacheStats,
}

impl State {
    fn slot(&self, slot: usize) -> &[u8] {
        &self.arena[slot * SECTOR_SIZE..(slot + 1) * SECTOR_SIZE]
    }

    fn slot_mut(&mut self, slot: usize) -> &mut [u8] {
        &mut self.arena[slot * SECTOR_SIZE..(slot + 1) * SECTOR_SIZE]
    }

    /// Slots a new page can take without writeback: free ones and clean (evictable) ones.
    fn room(&self) -> usize {
        self.free.len() + self.clean.len()
    }

    /// A free slot, evicting the least recently used clean page if needed.
    fn alloc(&mut self) -> Option<usize> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        let (_, sector) = self.clean.pop_first()?;
        let page = self.pages.remove(&sector)?;
        self.stats.evicted_pages += 1;
        Some(page.slot)
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Marks a page just used (moves a clean page to the LRU's young end).
    fn touch(&mut self, sector: u64) {
        let tick = self.next_tick();
        if let Some(p) = self.pages.get_mut(&sector) {
            if let PageState::Clean { tick: old } = p.state {
                self.clean.remove(&old);
                self.clean.insert(tick, sector);
                p.state = PageState::Clean { tick };
            }
        }
    }

    /// Copies one page of new data in and marks it dirty. The caller made room.
    fn put_dirty(&mut self, sector: u64, data: &[u8], stream: u16) {
        let slot = match self.pages.get(&sector).copied() {
            Some(p) => {
                if let PageState::Clean { tick } = p.state {
                    self.clean.remove(&tick);
                }
                p.slot
            }
            None => match self.alloc() {
                Some(s) => s,
                None => unreachable!("put_dirty without room"),
            },
        };
        self.slot_mut(slot).copy_from_slice(data);
        self.pages.insert(
            sector,
            Page {
                slot,
                state: PageState::Dirty { stream },
            },
        );
        self.dirty.insert(sector);
    }

    /// Keeps a page read from the device as clean, when a slot is free or evictable (a read
    /// never forces writeback).
    fn put_clean(&mut self, sector: u64, data: &[u8]) {
        let Some(slot) = self.alloc() else { return };
        self.slot_mut(slot).copy_from_slice(data);
        let tick = self.next_tick();
        self.clean.insert(tick, sector);
        self.pages.insert(
            sector,
            Page {
                slot,
                state: PageState::Clean { tick },
            },
        );
    }

    /// Drops a page whatever its state (trim, power cut).
    fn drop_page(&mut self, sector: u64) {
        if let Some(p) = self.pages.remove(&sector) {
            match p.state {
                PageState::Clean { tick } => {
                    self.clean.remove(&tick);
                }
                PageState::Dirty { .. } => {
                    self.dirty.remove(&sector);
                }
                PageState::Writeback => {}
            }
            self.free.push(p.slot);
        }
    }
}

/// Buffered I/O through a host page cache in front of a device (see the module documentation).
#[derive(Debug)]
pub(crate) struct PageCache {
    inner: DeviceRef,
    opts: PageCacheOptions,
    state: Mutex<State>,
    /// Held for a whole writeback (and by trim and power cut), so that two writebacks never
    /// race one page to the device with an older copy landing last.
    writeback: Mutex<()>,
}

impl PageCache {
    /// Wraps `inner` with a cache of `opts.capacity_bytes`.
    pub(crate) fn new(inner: DeviceRef, opts: PageCacheOptions) -> Result<Self> {
        opts.validate()?;
        let slots = (opts.capacity_bytes / SECTOR_SIZE as u64) as usize;
        Ok(Self {
            inner,
            state: Mutex::new(State {
                pages: HashMap::new(),
                arena: vec![0; slots * SECTOR_SIZE],
                free: (0..slots).rev().collect(),
                dirty: BTreeSet::new(),
                clean: BTreeMap::new(),
                tick: 0,
                device_changes: 0,
                stats: PageCacheStats::default(),
            }),
            opts,
            writeback: Mutex::new(()),
        })
    }

    fn slots(&self) -> usize {
        (self.opts.capacity_bytes / SECTOR_SIZE as u64) as usize
    }

    /// Writes the dirty pages of `sector..end` back to the device (no device flush); `forced`
    /// when a full cache made the writer do it.
    fn write_back(&self, sector: u64, end: u64, forced: bool) -> Result<()> {
        let _wb = self.writeback.lock();
        let per_request = self.opts.max_request_bytes / SECTOR_SIZE;
        let runs = {
            let mut st = self.state.lock();
            let sectors: Vec<u64> = st.dirty.range(sector..end).copied().collect();
            let mut runs: Vec<Run> = Vec::new();
            for s in sectors {
                st.dirty.remove(&s);
                let Some(p) = st.pages.get_mut(&s) else {
                    continue;
                };
                let PageState::Dirty { stream } = p.state else {
                    continue;
                };
                p.state = PageState::Writeback;
                let slot = p.slot;
                let extend = runs.last().is_some_and(|r| {
                    let n = r.data.len() / SECTOR_SIZE;
                    r.sector + n as u64 == s && r.stream == stream && n < per_request
                });
                if !extend {
                    runs.push(Run {
                        sector: s,
                        stream,
                        data: Vec::with_capacity(SECTOR_SIZE),
                    });
                }
                if let Some(r) = runs.last_mut() {
                    r.data.extend_from_slice(st.slot(slot));
                }
            }
            if !runs.is_empty() {
                st.device_changes += 1;
                st.stats.forced_writebacks += u64::from(forced);
            }
            runs
        };
        if runs.is_empty() {
            return Ok(());
        }
        let result = self.issue(&runs);
        let mut st = self.state.lock();
        for r in &runs {
            for i in 0..(r.data.len() / SECTOR_SIZE) as u64 {
                let s = r.sector + i;
                let tick = st.next_tick();
                let Some(p) = st.pages.get_mut(&s) else {
                    continue;
                };
                // A page written again meanwhile is dirty with newer data: it stays so.
                if p.state != PageState::Writeback {
                    continue;
                }
                if result.is_ok() {
                    p.state = PageState::Clean { tick };
                    st.clean.insert(tick, s);
                } else {
                    // Kept dirty: a failed writeback must not make the cache forget the data.
                    p.state = PageState::Dirty { stream: r.stream };
                    st.dirty.insert(s);
                }
            }
        }
        if result.is_ok() {
            st.stats.writeback_requests += runs.len() as u64;
            st.stats.writeback_pages += runs
                .iter()
                .map(|r| (r.data.len() / SECTOR_SIZE) as u64)
                .sum::<u64>();
        }
        result
    }

    /// Issues writeback requests, up to `depth` in flight (the inner device sleeps out each
    /// one's modelled time on the thread that issued it).
    fn issue(&self, runs: &[Run]) -> Result<()> {
        let write = |r: &Run| {
            self.inner
                .write(r.sector, &r.data, WriteHints::stream(r.stream))
        };
        let threads = self.opts.depth.min(runs.len());
        if threads <= 1 {
            return runs.iter().try_for_each(write);
        }
        let next = AtomicUsize::new(0);
        let first_error: Mutex<Option<DeviceError>> = Mutex::new(None);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    while let Some(r) = runs.get(next.fetch_add(1, Ordering::Relaxed)) {
                        if let Err(e) = write(r) {
                            first_error.lock().get_or_insert(e);
                            return;
                        }
                    }
                });
            }
        });
        match first_error.into_inner() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Copies `n` pages of `buf` into the cache as dirty, writing dirty pages back first when
    /// there is no room.
    fn buffer(&self, sector: u64, buf: &[u8], stream: u16) -> Result<()> {
        let n = (buf.len() / SECTOR_SIZE) as u64;
        loop {
            {
                let mut st = self.state.lock();
                let (mut absent, mut clean) = (0, 0);
                for s in sector..sector + n {
                    match st.pages.get(&s).map(|p| p.state) {
                        None => absent += 1,
                        Some(PageState::Clean { .. }) => clean += 1,
                        Some(_) => {}
                    }
                }
                // The request's own clean pages turn dirty first (so that making room for its
                // absent pages cannot evict them): they do not count as room.
                if absent + clean <= st.room() {
                    let pages = buf.chunks_exact(SECTOR_SIZE).zip(sector..);
                    let (cached, new): (Vec<_>, Vec<_>) =
                        pages.partition(|(_, s)| st.pages.contains_key(s));
                    for (page, s) in cached.into_iter().chain(new) {
                        st.put_dirty(s, page, stream);
                    }
                    st.stats.buffered_pages += n;
                    return Ok(());
                }
            }
            // Full of dirty pages (or pages in writeback, which this waits for): write them
            // back so that they become evictable, then try again.
            self.write_back(0, u64::MAX, true)?;
        }
    }
}

// Reads, writes, flushes and trims go through the cache, which reports and resets its own
// counters and is lost in a power cut; timing is the device's.
impl crate::DelegateDevice for PageCache {
    fn inner(&self) -> &dyn BlockDevice {
        &*self.inner
    }

    fn caps(&self) -> Capabilities {
        let mut c = self.inner.caps();
        // Buffered writeback cannot carry the atomic flag.
        c.atomic_write_unit = None;
        c
    }

    fn read(&self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let n = check_io(&BlockDevice::caps(self), sector, buf.len())?;
        let page =
            |i: u64| (i * SECTOR_SIZE as u64) as usize..((i + 1) * SECTOR_SIZE as u64) as usize;
        // Runs of pages missing from the cache, as (first page index, count).
        let mut missing: Vec<(u64, u64)> = Vec::new();
        let changes = {
            let mut st = self.state.lock();
            for i in 0..n {
                let s = sector + i;
                if let Some(p) = st.pages.get(&s).copied() {
                    buf[page(i)].copy_from_slice(st.slot(p.slot));
                    st.touch(s);
                } else if let Some(last) = missing.last_mut().filter(|m| m.0 + m.1 == i) {
                    last.1 += 1;
                } else {
                    missing.push((i, 1));
                }
            }
            let missed: u64 = missing.iter().map(|m| m.1).sum();
            st.stats.read_hit_pages += n - missed;
            st.stats.read_miss_pages += missed;
            if missing.is_empty() {
                return Ok(());
            }
            st.device_changes
        };
        let read_runs = |buf: &mut [u8]| -> Result<()> {
            for &(i, k) in &missing {
                let range = page(i).start..page(i + k - 1).end;
                self.inner.read(sector + i, &mut buf[range])?;
            }
            Ok(())
        };
        read_runs(buf)?;
        let mut st = self.state.lock();
        if st.device_changes != changes {
            // A page missed may have been written back and dropped while the device read ran
            // (the read could predate the writeback): read again under the lock, which no
            // writeback of an absent page can start without.
            read_runs(buf)?;
        }
        for &(i, k) in &missing {
            for j in i..i + k {
                let s = sector + j;
                match st.pages.get(&s).copied() {
                    // Written while the device read ran: the cache's copy is the newer.
                    Some(p) => buf[page(j)].copy_from_slice(st.slot(p.slot)),
                    None => st.put_clean(s, &buf[page(j)]),
                }
            }
        }
        Ok(())
    }

    fn write(&self, sector: u64, buf: &[u8], hints: WriteHints) -> Result<()> {
        let caps = BlockDevice::caps(self);
        check_io(&caps, sector, buf.len())?;
        check_hints(&caps, sector, buf.len(), hints)?;
        // In pieces of at most a quarter of the cache, so that any write finds room (a
        // buffered write is not atomic anyway).
        let piece = (self.slots() / 4).max(1) * SECTOR_SIZE;
        for (k, chunk) in buf.chunks(piece).enumerate() {
            let at = sector + (k * piece / SECTOR_SIZE) as u64;
            self.buffer(at, chunk, hints.stream)?;
        }
        if hints.write_behind {
            // `sync_file_range`: start writing this range now, without a device flush.
            let end = sector + (buf.len() / SECTOR_SIZE) as u64;
            self.write_back(sector, end, false)?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.write_back(0, u64::MAX, false)?;
        self.inner.flush()
    }

    fn trim(&self, sector: u64, sectors: u64) -> Result<()> {
        check_range(&BlockDevice::caps(self), sector, sectors)?;
        // The device first, then the cache: a read that filled the cache from the device
        // before the trim landed leaves nothing behind, and one still running sees the change.
        let _wb = self.writeback.lock();
        self.inner.trim(sector, sectors)?;
        let mut st = self.state.lock();
        let end = sector + sectors;
        let cached: Vec<u64> = if sectors as usize > st.pages.len() {
            st.pages
                .keys()
                .copied()
                .filter(|s| (sector..end).contains(s))
                .collect()
        } else {
            (sector..end).filter(|s| st.pages.contains_key(s)).collect()
        };
        for s in cached {
            st.drop_page(s);
        }
        st.device_changes += 1;
        Ok(())
    }

    fn stats(&self) -> DeviceStats {
        let mut s = self.inner.stats();
        let st = self.state.lock();
        s.page_cache = Some(PageCacheStats {
            dirty_pages: st.dirty.len() as u64,
            ..st.stats.clone()
        });
        s
    }

    fn reset_stats(&self) {
        self.inner.reset_stats();
        self.state.lock().stats = PageCacheStats::default();
    }

    fn describe(&self) -> String {
        format!(
            "pagecache({}, writeback requests up to {}, {} in flight) -> {}",
            format_size(self.opts.capacity_bytes),
            format_size(self.opts.max_request_bytes as u64),
            self.opts.depth,
            self.inner.describe()
        )
    }

    fn as_power_cut(&self) -> Option<&dyn PowerCut> {
        self.inner.as_power_cut().map(|_| self as &dyn PowerCut)
    }
}

impl PowerCut for PageCache {
    /// The cache is RAM: every dirty page is lost (counted as dropped), clean ones too; then
    /// the device below loses what its own cache held.
    fn power_cut(&self, seed: u64) -> Result<PowerCutReport> {
        let Some(inner) = self.inner.as_power_cut() else {
            return Err(DeviceError::config(
                "the device below the page cache cannot cut power; use an emulated device",
            ));
        };
        let _wb = self.writeback.lock();
        let lost = {
            let mut st = self.state.lock();
            let lost = st.dirty.len() as u64;
            let all: Vec<u64> = st.pages.keys().copied().collect();
            for s in all {
                st.drop_page(s);
            }
            lost
        };
        let mut report = inner.power_cut(seed)?;
        self.state.lock().device_changes += 1;
        report.dropped_sectors += lost;
        Ok(report)
    }
}
