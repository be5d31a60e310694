//! The FaCE flash cache tier: a persistent cache of page images on its own device
//! between the DRAM pool and the data device.
//!
//! Every page the cleaner writes goes here first (the data device is written only from a
//! durable flash copy), so a torn data-page write is always repaired from flash. A directory
//! maps each cached page to the slot holding its newest copy; older copies become invalid where
//! they lie. Policies: `face` and `face-gsc` append at the head of a FIFO ring of segments
//! ([`ring`]); `lru` writes each page into the least recently used slot ([`lru`]). The
//! directory is checkpointed on the cache device and rebuilt at open ([`rebuild`]).
//!
//! Concurrency: `io` serialises everything that writes the cache device; `state` (the
//! directory and slot metadata) is held only briefly. A slot is reused only after the directory
//! stops pointing at it, so a reader validates after its read that its entry is unchanged.

use crate::error::{Error, Failure, Result};
use crate::format::{check_page, SECTOR};
use crate::probe::{self, Event, FlashStep, Observer, Sabotage};
use crate::{FlashPages, FlashPolicy};
use damage::SlotFault;
use pagoda_device::{DeviceRef, WriteHints};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

mod damage;
mod geometry;
mod lru;
mod rebuild;
mod ring;
mod stats;

pub(crate) use geometry::Geometry;
pub(crate) use rebuild::Binding;
pub use stats::FlashCacheStats;

/// `Slot::pid` of a slot holding no valid page.
const NONE: u64 = u64::MAX;

/// Metadata of one slot.
#[derive(Clone, Copy, Debug)]
struct Slot {
    pid: u64,
    lsn: u64,
    seq: u64,
    crc: u32,
    /// Newer than the data device's copy.
    dirty: bool,
    /// Read since it was written (Group Second Chance).
    referenced: bool,
}

impl Slot {
    const EMPTY: Slot = Slot {
        pid: NONE,
        lsn: 0,
        seq: 0,
        crc: 0,
        dirty: false,
        referenced: false,
    };
}

/// The directory and slot metadata.
#[derive(Debug)]
struct State {
    dir: HashMap<u64, u32>,
    slots: Vec<Slot>,
    /// Policy `face`: the segment the next batch goes to.
    head: u32,
    /// After a rebuild the head segment may still hold pages (not known written back).
    head_unretired: bool,
    next_seq: u64,
    valid: u64,
    dirty: u64,
    /// Policy `lru`: last-use tick → slot, and per slot its tick (0: not in the list).
    lru: BTreeMap<u64, u32>,
    tick: Vec<u64>,
    clock: u64,
    free: Vec<u32>,
    /// Policy `lru`: per segment, whether its next header write goes to the second sector.
    hdr_alt: Vec<bool>,
    /// Per page, the sequence number of its latest dirty write here: a clean image staged
    /// before it is older than the data device's copy may become (pages `all`).
    last_dirty: HashMap<u64, u64>,
    /// Policy `face-gsc`: pages read from here or written here from DRAM and not evicted
    /// from DRAM since (Group Second Chance counts them as used).
    resident: HashSet<u64>,
}

impl State {
    fn empty(slots: usize) -> Self {
        Self {
            dir: HashMap::new(),
            slots: vec![Slot::EMPTY; slots],
            head: 0,
            head_unretired: false,
            next_seq: 1,
            valid: 0,
            dirty: 0,
            lru: BTreeMap::new(),
            tick: vec![0; slots],
            clock: 0,
            free: (0..slots as u32).rev().collect(),
            hdr_alt: Vec::new(),
            last_dirty: HashMap::new(),
            resident: HashSet::new(),
        }
    }

    /// Makes `slot` the newest copy of its page (the caller filled `slots[slot]`).
    fn install(&mut self, slot: u32, lru: bool) {
        let s = self.slots[slot as usize];
        if let Some(old) = self.dir.insert(s.pid, slot) {
            if old != slot {
                self.invalidate(old, lru);
            }
        }
        self.valid += 1;
        self.dirty += u64::from(s.dirty);
        if s.dirty {
            self.last_dirty.insert(s.pid, s.seq);
        }
        if lru {
            self.touch(slot);
        }
    }

    /// Forgets the page in `slot` (its directory entry must already point elsewhere or be
    /// removed by the caller).
    fn invalidate(&mut self, slot: u32, lru: bool) {
        let s = &mut self.slots[slot as usize];
        if s.pid == NONE {
            return;
        }
        self.valid -= 1;
        self.dirty -= u64::from(s.dirty);
        *s = Slot::EMPTY;
        if lru {
            let t = std::mem::take(&mut self.tick[slot as usize]);
            self.lru.remove(&t);
            self.free.push(slot);
        }
    }

    /// Removes the page of `slot` from the directory if it is its newest copy.
    fn evict(&mut self, slot: u32, lru: bool) {
        let pid = self.slots[slot as usize].pid;
        if pid != NONE && self.dir.get(&pid) == Some(&slot) {
            self.dir.remove(&pid);
        }
        self.invalidate(slot, lru);
    }

    fn touch(&mut self, slot: u32) {
        let old = self.tick[slot as usize];
        if old != 0 {
            self.lru.remove(&old);
        }
        self.clock += 1;
        self.tick[slot as usize] = self.clock;
        self.lru.insert(self.clock, slot);
    }
}

/// A page image on its way into the cache.
#[derive(Debug)]
pub(crate) struct Img {
    pub(crate) pid: u64,
    pub(crate) lsn: u64,
    pub(crate) bytes: Vec<u8>,
    pub(crate) dirty: bool,
    /// For a staged clean image: the ring's next sequence number when it was staged.
    pub(crate) staged_at: u64,
}

impl Img {
    fn crc(&self) -> u32 {
        u32::from_le_bytes([self.bytes[0], self.bytes[1], self.bytes[2], self.bytes[3]])
    }
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    page_writes: AtomicU64,
    bytes: AtomicU64,
    requests: AtomicU64,
    sequential: AtomicU64,
    write_backs: AtomicU64,
    gsc: AtomicU64,
    dir_ckpts: AtomicU64,
    dir_bytes: AtomicU64,
    corrupt: AtomicU64,
    rereads: AtomicU64,
}

/// What the open found.
#[derive(Clone, Debug, Default)]
pub(crate) struct Start {
    pub(crate) warm: bool,
    pub(crate) note: Option<String>,
    pub(crate) rebuild_ms: f64,
    pub(crate) segments_read: u64,
    pub(crate) pages: u64,
}

/// Ring writes' state (under `FlashCache::io`).
#[derive(Debug)]
struct Io {
    /// Generation of the newest cache header.
    generation: u64,
    /// Ring writes (segments, or pages / per-segment for `lru`) since the directory
    /// checkpoint.
    since_ckpt: u64,
    /// Start and end sector of the previous ring write (sequential-write accounting).
    last_start: u64,
    last_end: u64,
}

/// The flash cache.
pub(crate) struct FlashCache {
    dev: DeviceRef,
    data: DeviceRef,
    data_hints: WriteHints,
    stream: u16,
    page_size: usize,
    geo: Geometry,
    policy: FlashPolicy,
    pages: FlashPages,
    db_id: u64,
    cache_id: u64,
    state: Mutex<State>,
    io: Mutex<Io>,
    staged: Mutex<Vec<Img>>,
    /// The first failed write, write-back or sync: the in-memory ring state no longer matches
    /// the device (a head segment written but its successor not retired, say), so every later
    /// write is refused rather than overwriting a page's only durable copy.
    broken: Mutex<Option<Failure>>,
    c: Counters,
    sabotage: Option<Sabotage>,
    observer: Option<Observer>,
    start: Start,
}

impl std::fmt::Debug for FlashCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlashCache")
            .field("device", &self.dev.describe())
            .field("policy", &self.policy)
            .field("pages", &self.pages)
            .field("geometry", &self.geo)
            .finish_non_exhaustive()
    }
}

impl FlashCache {
    /// The cache device.
    pub(crate) fn device(&self) -> &DeviceRef {
        &self.dev
    }

    /// Id of this formatting of the cache (recorded in the superblock).
    pub(crate) fn cache_id(&self) -> u64 {
        self.cache_id
    }

    /// Sequence number the next ring write takes.
    /// (Every ring write numbered below it is synced: taken between writes.)
    pub(crate) fn next_seq(&self) -> u64 {
        let _io = self.io.lock();
        self.state.lock().next_seq
    }

    /// Whether a page newer than the data device's copy is cached (the database depends on
    /// the cache).
    pub(crate) fn has_dirty(&self) -> bool {
        self.state.lock().dirty > 0
    }

    /// Whether clean pages evicted from DRAM are cached too.
    pub(crate) fn caches_clean(&self) -> bool {
        self.pages == FlashPages::All
    }

    fn emit(&self, step: FlashStep) {
        probe::emit(&self.observer, Event::Flash(step));
    }

    fn sabotaged(&self, s: Sabotage) -> bool {
        probe::is(self.sabotage, s)
    }

    /// Reads the newest flash copy of `pid`, if the cache has one. A damaged or unreadable
    /// slot is dropped and the page read from the data device, unless that copy is older (then
    /// the read fails naming the slot and the page, never a stale version: [`damage`]).
    pub(crate) fn read(&self, pid: u64) -> Result<Option<Vec<u8>>> {
        loop {
            let (slot, meta) = {
                let mut st = self.state.lock();
                let Some(&slot) = st.dir.get(&pid) else {
                    self.c.misses.fetch_add(1, Ordering::Relaxed);
                    return Ok(None);
                };
                st.slots[slot as usize].referenced = true;
                if self.policy == FlashPolicy::FaceGsc {
                    st.resident.insert(pid);
                }
                if self.policy == FlashPolicy::Lru {
                    st.touch(slot);
                }
                (slot, st.slots[slot as usize])
            };
            let mut buf = vec![0u8; self.page_size];
            let got = self.dev.read(self.geo.slot_sector(slot), &mut buf);
            {
                // The slot may have been reused during the read: then look again.
                let st = self.state.lock();
                if st.dir.get(&pid) != Some(&slot) || st.slots[slot as usize].seq != meta.seq {
                    continue;
                }
            }
            let fault = match got {
                Ok(()) if slot_ok(&buf, &meta) => {
                    self.c.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(Some(buf));
                }
                Ok(()) => SlotFault::Damaged,
                Err(e) => SlotFault::Unreadable(e),
            };
            return self.reread(slot, &meta, fault).map(Some);
        }
    }

    fn data_sector(&self, pid: u64) -> u64 {
        pid * (self.page_size / SECTOR) as u64
    }

    /// Holds a clean page evicted from DRAM for the next ring write (pages `all`), unless the
    /// cache already has a copy of it.
    /// `img.staged_at` must come from [`FlashCache::stage_mark`] taken before its frame was
    /// given up (a dirty copy written after that makes the image stale).
    pub(crate) fn stage(&self, img: Img) {
        if self.state.lock().dir.contains_key(&img.pid) {
            return;
        }
        let mut s = self.staged.lock();
        // Bounded: clean pages are a bonus, never worth unbounded memory.
        if s.len() < 4 * self.geo.per_segment as usize {
            s.push(img);
        }
    }

    /// A page left the DRAM buffer.
    pub(crate) fn left_dram(&self, pid: u64) {
        if self.policy == FlashPolicy::FaceGsc {
            self.state.lock().resident.remove(&pid);
        }
    }

    /// The mark a clean image leaving DRAM carries into [`FlashCache::stage`].
    pub(crate) fn stage_mark(&self) -> u64 {
        self.state.lock().next_seq
    }

    /// Whether enough clean pages wait for a ring write of their own.
    pub(crate) fn staged_full(&self) -> bool {
        self.staged.lock().len() >= self.geo.per_segment as usize
    }

    /// Writes a batch of dirty pages (the WAL rule already holds for them) and any staged
    /// clean pages to the cache, durably. The pages count as written once this returns.
    pub(crate) fn write(&self, imgs: Vec<Img>) -> Result<()> {
        let mut io = self.io.lock();
        self.guard(|| self.write_locked(&mut io, imgs))
    }

    /// Runs a step that writes the cache or the data device, unless an earlier one failed;
    /// a failure of this one breaks the cache for good (see `FlashCache::broken`).
    fn guard(&self, step: impl FnOnce() -> Result<()>) -> Result<()> {
        if self.sabotaged(Sabotage::FlashWriteAfterFailure) {
            return step();
        }
        if let Some(f) = &*self.broken.lock() {
            return Err(Error::Failed(f.clone()));
        }
        step().map_err(|e| {
            let f = match e {
                Error::Failed(f) => f,
                e => Failure::new(e),
            };
            *self.broken.lock() = Some(f.clone());
            Error::Failed(f)
        })
    }

    fn write_locked(&self, io: &mut Io, imgs: Vec<Img>) -> Result<()> {
        let mut imgs = imgs;
        if self.policy == FlashPolicy::FaceGsc {
            // Dirty images come from frames still in DRAM.
            let mut st = self.state.lock();
            st.resident
                .extend(imgs.iter().filter(|i| i.dirty).map(|i| i.pid));
        }
        {
            let staged = std::mem::take(&mut *self.staged.lock());
            if !staged.is_empty() {
                let st = self.state.lock();
                let mine: std::collections::HashSet<u64> = imgs.iter().map(|i| i.pid).collect();
                // A staged image is still the data device's version only if no dirty copy of
                // its page was written here since (even one written back and gone by now).
                imgs.extend(staged.into_iter().filter(|s| {
                    !mine.contains(&s.pid)
                        && !st.dir.contains_key(&s.pid)
                        && st.last_dirty.get(&s.pid).is_none_or(|&d| d < s.staged_at)
                }));
            }
        }
        if imgs.is_empty() {
            return Ok(());
        }
        match self.policy {
            FlashPolicy::Face | FlashPolicy::FaceGsc => self.append(io, imgs),
            FlashPolicy::Lru => self.place(io, imgs),
        }
    }

    /// Counts one ring write request of `sectors` at `sector`; it is sequential when it
    /// starts where the previous one ended or, in the ring, at the segment after the previous
    /// one's (a partly filled segment leaves its tail unwritten).
    fn count_write(&self, io: &mut Io, sector: u64, sectors: u64, pages: u64) {
        self.c.requests.fetch_add(1, Ordering::Relaxed);
        let geo = &self.geo;
        let next_segment = if io.last_start >= geo.ring_start && io.last_start < geo.ring_end() {
            let seg = (io.last_start - geo.ring_start) / geo.segment_sectors();
            geo.segment_sector(((seg + 1) % u64::from(geo.segments)) as u32)
        } else {
            u64::MAX
        };
        if sector == io.last_end || sector == next_segment {
            self.c.sequential.fetch_add(1, Ordering::Relaxed);
        }
        io.last_start = sector;
        io.last_end = sector + sectors;
        self.c.page_writes.fetch_add(pages, Ordering::Relaxed);
        self.c
            .bytes
            .fetch_add(sectors * SECTOR as u64, Ordering::Relaxed);
    }

    /// Writes `todo` (valid dirty slots about to be reused) back to the data device and syncs
    /// it. Returns the slots written (their pages are then clean).
    fn write_back(&self, todo: &[(u32, Slot)]) -> Result<()> {
        if todo.is_empty() {
            return Ok(());
        }
        self.emit(FlashStep::WriteBack);
        let mut out: Vec<(u64, Vec<u8>)> = Vec::with_capacity(todo.len());
        let slots = self.read_slots(todo)?;
        for ((slot, meta), buf) in todo.iter().zip(slots) {
            if slot_ok(&buf, meta) {
                out.push((meta.pid, buf));
            } else {
                // Damaged in flash: fine only if the data device already has this version.
                self.instead_of(*slot, meta, SlotFault::Damaged)?;
            }
        }
        out.sort_by_key(|(p, _)| *p);
        let pages: Vec<(u64, &[u8])> = out.iter().map(|(p, b)| (*p, b.as_slice())).collect();
        super::runs::write_runs(&self.data, &pages, self.page_size, self.data_hints)?;
        if !self.sabotaged(Sabotage::FlashUnsyncedWriteback) {
            self.data.flush()?;
        }
        self.c
            .write_backs
            .fetch_add(out.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Reads the images of `slots`; slots of one segment (a retiring segment: most of its
    /// slots) in one request spanning them.
    fn read_slots(&self, slots: &[(u32, Slot)]) -> Result<Vec<Vec<u8>>> {
        let per = self.geo.per_segment;
        let ps = self.page_size;
        let mut out = Vec::with_capacity(slots.len());
        let mut i = 0;
        while i < slots.len() {
            let seg = slots[i].0 / per;
            let mut j = i + 1;
            while j < slots.len() && slots[j].0 / per == seg && slots[j].0 > slots[j - 1].0 {
                j += 1;
            }
            let (first, last) = (slots[i].0, slots[j - 1].0);
            let mut buf = vec![0u8; (last - first + 1) as usize * ps];
            self.dev.read(self.geo.slot_sector(first), &mut buf)?;
            for (s, _) in &slots[i..j] {
                let at = (s - first) as usize * ps;
                out.push(buf[at..at + ps].to_vec());
            }
            i = j;
        }
        Ok(out)
    }

    /// Writes every dirty page back to the data device (a clean close); the cache stays warm.
    pub(crate) fn drain(&self) -> Result<()> {
        let mut io = self.io.lock();
        self.guard(|| self.drain_locked(&mut io))
    }

    fn drain_locked(&self, io: &mut Io) -> Result<()> {
        let mut todo: Vec<(u32, Slot)> = {
            let st = self.state.lock();
            st.dir
                .values()
                .map(|&s| (s, st.slots[s as usize]))
                .filter(|(_, m)| m.dirty)
                .collect()
        };
        todo.sort_by_key(|(s, _)| *s);
        for chunk in todo.chunks(256) {
            self.write_back(chunk)?;
            let mut st = self.state.lock();
            for (slot, meta) in chunk {
                let s = &mut st.slots[*slot as usize];
                if s.seq == meta.seq && s.dirty {
                    s.dirty = false;
                    st.dirty -= 1;
                }
            }
        }
        self.data.flush()?;
        self.dir_checkpoint(io)
    }

    /// Compares every valid slot with the data device's copy of its page: returns (slots
    /// checked, stale slots), where a stale slot is older than the data device's copy, or
    /// marked clean while the data device's copy differs.
    pub(crate) fn audit(&self) -> Result<(u64, u64)> {
        let _io = self.io.lock();
        let all: Vec<(u32, Slot)> = {
            let st = self.state.lock();
            st.dir
                .values()
                .map(|&s| (s, st.slots[s as usize]))
                .collect()
        };
        let mut stale = 0;
        for (slot, meta) in &all {
            let mut buf = vec![0u8; self.page_size];
            self.dev.read(self.geo.slot_sector(*slot), &mut buf)?;
            let flash = slot_ok(&buf, meta);
            self.data.read(self.data_sector(meta.pid), &mut buf)?;
            let disk = check_page(&buf, meta.pid).ok();
            // A data copy that fails its own check (bit rot, a torn write) makes no slot stale:
            // the slot is then the good copy, and the data page's damage is its own finding.
            let bad = disk.is_some_and(|d| d > meta.lsn || (!meta.dirty && d != meta.lsn));
            // A damaged flash copy is not served (the read falls back and checks the other).
            if flash && bad {
                stale += 1;
            }
        }
        Ok((all.len() as u64, stale))
    }

    /// Counters for `Db::stats`.
    pub(crate) fn stats(&self) -> FlashCacheStats {
        let c = &self.c;
        let (valid, dirty) = {
            let st = self.state.lock();
            (st.valid, st.dirty)
        };
        let hits = c.hits.load(Ordering::Relaxed);
        let misses = c.misses.load(Ordering::Relaxed);
        let reqs = c.requests.load(Ordering::Relaxed);
        let slots = self.geo.slots() as u64;
        FlashCacheStats {
            policy: self.policy.to_string(),
            pages: self.pages.to_string(),
            slots,
            hits,
            misses,
            hit_ratio: ratio(hits, hits + misses),
            ring_page_writes: c.page_writes.load(Ordering::Relaxed),
            ring_bytes: c.bytes.load(Ordering::Relaxed),
            sequential_fraction: ratio(c.sequential.load(Ordering::Relaxed), reqs),
            write_backs: c.write_backs.load(Ordering::Relaxed),
            gsc_reappends: c.gsc.load(Ordering::Relaxed),
            valid_slots: valid,
            dirty_slots: dirty,
            invalid_fraction: ratio(slots - valid.min(slots), slots),
            dir_checkpoints: c.dir_ckpts.load(Ordering::Relaxed),
            dir_checkpoint_bytes: c.dir_bytes.load(Ordering::Relaxed),
            corrupt_slots: c.corrupt.load(Ordering::Relaxed),
            data_rereads: c.rereads.load(Ordering::Relaxed),
            warm_start: self.start.warm,
            start_note: self.start.note.clone(),
            rebuild_ms: self.start.rebuild_ms,
            rebuild_segments: self.start.segments_read,
            rebuild_pages: self.start.pages,
        }
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Whether `buf` is the page image `meta` describes.
fn slot_ok(buf: &[u8], meta: &Slot) -> bool {
    let crc = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    crc == meta.crc && check_page(buf, meta.pid) == Ok(meta.lsn)
}
