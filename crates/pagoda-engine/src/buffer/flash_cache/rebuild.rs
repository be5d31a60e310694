//! Persistence of the flash cache: formatting, directory checkpoints, and the rebuild at open
//! from the last directory checkpoint plus the ring writes after it (never a scan of every
//! slot). The cache is bound to its database (ids and ring sequence numbers in the
//! superblock): a missing, foreign or older cache starts cold with a note, unless the database
//! depends on it.

use super::{Counters, FlashCache, Geometry, Io, Slot, Start, State, NONE};
use crate::error::{Error, Result};
use crate::format::{CacheHeader, DirCheckpoint, SegmentHeader, SlotEntry, SECTOR};
use crate::probe::{FlashStep, Observer, Sabotage};
use crate::stream::Stream;
use crate::{FlashCacheOptions, FlashPolicy, TornMode};
use pagoda_device::{DeviceRef, WriteHints};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// What the superblock records about the flash cache.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Binding {
    pub(crate) cache_id: u64,
    pub(crate) seq: u64,
    pub(crate) dependent: bool,
}

/// The directory and ring position a rebuild found.
struct Rebuilt {
    state: State,
    segments_read: u64,
}

impl FlashCache {
    /// Opens the cache for the database `db_id`: rebuilds its directory when the device holds
    /// this database's cache in the state the superblock expects, else formats it (or refuses,
    /// when the database's newest pages are only there).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        opts: &FlashCacheOptions,
        data: &DeviceRef,
        page_size: usize,
        db_id: u64,
        binding: Binding,
        torn: TornMode,
        observer: Option<Observer>,
        sabotage: Option<Sabotage>,
    ) -> Result<Self> {
        let t0 = Instant::now();
        let dev = opts.device.clone();
        let caps = dev.caps();
        if !page_size.is_multiple_of(caps.sector_size) {
            return Err(Error::config(format!(
                "the flash cache device {} has {} byte sectors, which do not divide the page size \
                 {page_size}: give a device with 4 KiB sectors",
                dev.describe(),
                caps.sector_size
            )));
        }
        let size = opts.size_bytes.unwrap_or(caps.capacity_bytes());
        let geo = Geometry::for_size(size, page_size)?;
        let dcaps = data.caps();
        let mut fc = FlashCache {
            data_hints: if torn == TornMode::Atomic {
                WriteHints::atomic(Stream::Data.on(&dcaps))
            } else {
                WriteHints::stream(Stream::Data.on(&dcaps))
            },
            stream: Stream::FlashCache.on(&caps),
            data: data.clone(),
            dev,
            page_size,
            geo,
            policy: opts.policy,
            pages: opts.pages,
            db_id,
            cache_id: 0,
            state: Mutex::new(State::empty(geo.slots())),
            io: Mutex::new(Io {
                generation: 0,
                since_ckpt: 0,
                last_start: u64::MAX,
                last_end: u64::MAX,
            }),
            staged: Mutex::new(Vec::new()),
            broken: Mutex::new(None),
            c: Counters::default(),
            sabotage,
            observer,
            start: Start::default(),
        };
        let reason = fc.warm_start(opts, binding)?;
        if let Some(why) = reason {
            if binding.dependent {
                return Err(Error::config(format!(
                    "this database's newest pages are in its flash cache, but the flash cache \
                     device {} cannot be used: {why}. Open the database with the flash cache it \
                     last ran with (same device and --flash-cache-size)",
                    fc.dev.describe()
                )));
            }
            fc.format()?;
            fc.start.note = Some(format!(
                "flash cache {} started cold: {why}",
                fc.dev.describe()
            ));
        }
        if fc.start.warm {
            // The ring writes after the old directory checkpoint are needed until a newer one
            // exists: write it now, before the ring can wrap onto them.
            let mut io = fc.io.lock();
            fc.dir_checkpoint(&mut io)?;
        }
        fc.start.rebuild_ms = t0.elapsed().as_secs_f64() * 1000.0;
        Ok(fc)
    }

    /// Starts warm from the cache device's ring when it is this database's cache as the
    /// database last used it (its directory rebuilt from the ring); else says why not.
    fn warm_start(&mut self, opts: &FlashCacheOptions, binding: Binding) -> Result<Option<String>> {
        let header = self.read_header()?;
        let page_size = self.page_size;
        let geo = self.geo;
        let db_id = self.db_id;
        Ok(match header {
            None => Some("it holds no flash cache (new or emptied)".to_string()),
            Some(h) if h.db_id != db_id => Some("it belongs to another database".into()),
            Some(_) if binding.cache_id == 0 => Some("the database was last run without it".into()),
            Some(h) if h.cache_id != binding.cache_id => Some(
                "it is another formatting of the cache than the one the database last used".into(),
            ),
            Some(h) if h.page_size as usize != page_size || Geometry::of_header(&h) != geo => {
                Some("it was formatted with another size".into())
            }
            Some(h) if h.layout != u32::from(opts.policy == FlashPolicy::Lru) => Some(
                "it was written by another policy (lru places pages, face and face-gsc append)"
                    .into(),
            ),
            Some(h) => {
                self.cache_id = h.cache_id;
                self.io.lock().generation = h.generation;
                match self.rebuild(&h, binding.seq)? {
                    Ok(r) if r.state.next_seq >= binding.seq => {
                        self.start = Start {
                            warm: true,
                            note: None,
                            rebuild_ms: 0.0,
                            segments_read: r.segments_read,
                            pages: r.state.valid,
                        };
                        *self.state.lock() = r.state;
                        None
                    }
                    Ok(r) => Some(format!(
                        "it is older than the database (its ring ends at sequence {}, the \
                         database expects at least {})",
                        r.state.next_seq, binding.seq
                    )),
                    Err(why) => Some(why),
                }
            }
        })
    }

    /// The valid header with the higher generation, if any.
    fn read_header(&self) -> Result<Option<CacheHeader>> {
        let mut buf = vec![0u8; 2 * SECTOR];
        self.dev.read(0, &mut buf)?;
        Ok(buf
            .chunks(SECTOR)
            .filter_map(|c| CacheHeader::decode(c).ok())
            .max_by_key(|h| h.generation))
    }

    /// Starts an empty cache with a new id.
    fn format(&mut self) -> Result<()> {
        self.cache_id = rand::random::<u64>() | 1;
        *self.state.lock() = State::empty(self.geo.slots());
        let mut io = self.io.lock();
        io.generation = 0;
        self.dir_checkpoint(&mut io)
    }

    /// Writes the directory checkpoint into the area the next header generation names, syncs,
    /// then writes that header and syncs. The ring's head segment is free when this runs.
    pub(super) fn dir_checkpoint(&self, io: &mut Io) -> Result<()> {
        if self.state.lock().head_unretired {
            let head = self.state.lock().head;
            self.retire(head, &Default::default())?;
            self.state.lock().head_unretired = false;
        }
        self.emit(FlashStep::DirCheckpoint);
        let snap = {
            let st = self.state.lock();
            let mut entries: Vec<(u32, SlotEntry)> = st
                .dir
                .values()
                .map(|&s| {
                    let m = st.slots[s as usize];
                    (
                        s,
                        SlotEntry {
                            pid: m.pid,
                            lsn: m.lsn,
                            seq: m.seq,
                            crc: m.crc,
                            dirty: m.dirty,
                        },
                    )
                })
                .collect();
            entries.sort_by_key(|(s, _)| *s);
            DirCheckpoint {
                next_seq: st.next_seq,
                head: st.head,
                entries,
            }
        };
        let mut b = snap.encode();
        let len = b.len();
        let crc = crc32c::crc32c(&b);
        b.resize(len.div_ceil(SECTOR) * SECTOR, 0);
        let generation = io.generation + 1;
        let hints = WriteHints::stream(self.stream);
        self.dev
            .write(self.geo.dir_sector(generation % 2), &b, hints)?;
        self.dev.flush()?;
        let h = CacheHeader {
            generation,
            db_id: self.db_id,
            cache_id: self.cache_id,
            page_size: self.page_size as u32,
            segments: self.geo.segments,
            per_segment: self.geo.per_segment,
            dir_sectors: self.geo.dir_sectors,
            dir_bytes: len as u32,
            dir_crc: crc,
            layout: u32::from(self.policy == FlashPolicy::Lru),
        };
        self.dev.write(generation % 2, &h.encode(), hints)?;
        self.dev.flush()?;
        io.generation = generation;
        io.since_ckpt = 0;
        self.c.dir_ckpts.fetch_add(1, Ordering::Relaxed);
        self.c
            .dir_bytes
            .fetch_add((b.len() + SECTOR) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Rebuilds the directory from the checkpoint `h` names plus the ring writes after it.
    /// Writes numbered below `synced` were synced before the database's last checkpoint: a
    /// damaged slot among them is damage, kept in the directory so that a read reports it,
    /// not a torn write to skip. `Ok(Err(why))` when the cache is unusable (not an I/O error).
    fn rebuild(
        &self,
        h: &CacheHeader,
        synced: u64,
    ) -> Result<std::result::Result<Rebuilt, String>> {
        let mut buf = vec![0u8; h.dir_sectors as usize * SECTOR];
        self.dev
            .read(self.geo.dir_sector(h.generation % 2), &mut buf)?;
        let body = buf.get(..h.dir_bytes as usize).unwrap_or(&[]);
        let snap = match DirCheckpoint::decode(body) {
            Some(s) if crc32c::crc32c(body) == h.dir_crc && s.head < self.geo.segments => s,
            _ => return Ok(Err("its directory checkpoint is damaged".into())),
        };
        if snap
            .entries
            .iter()
            .any(|(s, _)| *s as usize >= self.geo.slots())
        {
            return Ok(Err(
                "its directory checkpoint names slots beyond the ring".into()
            ));
        }
        match self.policy {
            FlashPolicy::Lru => self.rebuild_lru(&snap, synced).map(Ok),
            _ => self.rebuild_ring(&snap, synced).map(Ok),
        }
    }

    fn rebuild_ring(&self, snap: &DirCheckpoint, synced: u64) -> Result<Rebuilt> {
        let mut st = State::empty(self.geo.slots());
        for (slot, e) in &snap.entries {
            put(&mut st, *slot, e, false);
        }
        // The ring writes after the checkpoint: consecutive segments with consecutive
        // sequence numbers, all synced except possibly the last.
        let mut chain = Vec::new();
        let (mut seg, mut seq) = (snap.head, snap.next_seq);
        let mut sector = vec![0u8; SECTOR];
        for _ in 0..self.geo.segments {
            self.dev.read(self.geo.segment_sector(seg), &mut sector)?;
            match SegmentHeader::decode(&sector) {
                Some(h) if h.cache_id == self.cache_id && h.seq == seq => chain.push((seg, h)),
                _ => break,
            }
            seg = (seg + 1) % self.geo.segments;
            seq += 1;
        }
        let segments_read = chain.len() as u64 + 1;
        let last = chain.len().saturating_sub(1);
        for (i, (seg, h)) in chain.iter().enumerate() {
            for s in self.geo.slots_of(*seg) {
                st.evict(s, false);
            }
            let verify =
                i == last && h.seq >= synced && !self.sabotaged(Sabotage::FlashTrustTornSlots);
            for (k, e) in h.slots.iter().enumerate() {
                let Some(e) = e else { continue };
                let slot = seg * self.geo.per_segment + k as u32;
                if verify && !self.slot_intact(slot, e)? {
                    continue;
                }
                put(&mut st, slot, e, false);
            }
        }
        st.head = seg;
        st.next_seq = seq;
        st.head_unretired = self
            .geo
            .slots_of(seg)
            .any(|s| st.slots[s as usize].pid != NONE);
        Ok(Rebuilt {
            state: st,
            segments_read,
        })
    }

    fn rebuild_lru(&self, snap: &DirCheckpoint, synced: u64) -> Result<Rebuilt> {
        let trusted: HashMap<u32, SlotEntry> = snap.entries.iter().copied().collect();
        let mut best: HashMap<u64, (u32, SlotEntry)> = HashMap::new();
        let mut max_seq = snap.next_seq.saturating_sub(1);
        let mut sectors = vec![0u8; 2 * SECTOR];
        let mut hdr_alt = vec![false; self.geo.segments as usize];
        for seg in 0..self.geo.segments {
            self.dev.read(self.geo.segment_sector(seg), &mut sectors)?;
            // The newer intact copy of the two (the other may be torn or older).
            let copies: Vec<(usize, SegmentHeader)> = sectors
                .chunks(SECTOR)
                .enumerate()
                .filter_map(|(k, c)| SegmentHeader::decode(c).map(|h| (k, h)))
                .filter(|(_, h)| h.cache_id == self.cache_id)
                .collect();
            // Sequence numbers are never reused, not even those of slots found torn: a torn
            // entry left on the device must never look newer than a later copy.
            for (_, h) in &copies {
                max_seq = max_seq.max(h.seq);
            }
            let Some((k, h)) = copies.into_iter().max_by_key(|(_, h)| h.seq) else {
                continue;
            };
            hdr_alt[seg as usize] = k == 0;
            for (k, e) in h.slots.iter().enumerate() {
                let Some(e) = e else { continue };
                let slot = seg * self.geo.per_segment + k as u32;
                let e = if e.seq >= snap.next_seq {
                    // Written after the checkpoint: maybe not synced, so check it.
                    if e.seq >= synced
                        && !self.sabotaged(Sabotage::FlashTrustTornSlots)
                        && !self.slot_intact(slot, e)?
                    {
                        continue;
                    }
                    *e
                } else {
                    match trusted.get(&slot) {
                        Some(t) if t.seq == e.seq && t.pid == e.pid => *t,
                        _ => continue,
                    }
                };
                max_seq = max_seq.max(e.seq);
                if best.get(&e.pid).is_none_or(|(_, b)| b.seq < e.seq) {
                    best.insert(e.pid, (slot, e));
                }
            }
        }
        let mut st = State::empty(self.geo.slots());
        let mut chosen: Vec<(u32, SlotEntry)> = best.into_values().collect();
        chosen.sort_by_key(|(_, e)| e.seq);
        for (slot, e) in &chosen {
            put(&mut st, *slot, e, true);
        }
        st.free = (0..self.geo.slots() as u32)
            .rev()
            .filter(|s| st.slots[*s as usize].pid == NONE)
            .collect();
        st.next_seq = max_seq + 1;
        st.hdr_alt = hdr_alt;
        Ok(Rebuilt {
            state: st,
            segments_read: u64::from(self.geo.segments),
        })
    }

    /// Whether `slot` holds the page image `e` describes.
    fn slot_intact(&self, slot: u32, e: &SlotEntry) -> Result<bool> {
        let mut buf = vec![0u8; self.page_size];
        self.dev.read(self.geo.slot_sector(slot), &mut buf)?;
        Ok(super::slot_ok(&buf, &slot_of(e)))
    }
}

fn slot_of(e: &SlotEntry) -> Slot {
    Slot {
        pid: e.pid,
        lsn: e.lsn,
        seq: e.seq,
        crc: e.crc,
        dirty: e.dirty,
        referenced: false,
    }
}

/// Installs `e` in `slot` when it is newer than the copy the directory has.
fn put(st: &mut State, slot: u32, e: &SlotEntry, lru: bool) {
    if let Some(&cur) = st.dir.get(&e.pid) {
        if st.slots[cur as usize].seq > e.seq {
            return;
        }
    }
    st.evict(slot, lru);
    st.slots[slot as usize] = slot_of(e);
    st.install(slot, lru);
}
