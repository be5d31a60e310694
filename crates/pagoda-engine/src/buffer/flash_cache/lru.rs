//! Policy `lru`, the conventional flash cache the FaCE paper compares with: each page goes
//! into a free slot or the least recently used one, wherever it lies (random writes).
//!
//! Crash safety as in the ring: a page never overwrites its own previous copy (that stays valid
//! until the new one is synced), a victim's dirty page is written back to the data device and
//! synced before its slot is overwritten, and each segment header is rewritten after its slots,
//! so a torn slot never matches its entry.

use super::{FlashCache, Img, Io, Slot, NONE};
use crate::error::{Error, Result};
use crate::format::{SegmentHeader, SlotEntry};
use crate::probe::FlashStep;
use pagoda_device::WriteHints;
use std::collections::{BTreeSet, HashSet};

impl FlashCache {
    pub(super) fn place(&self, io: &mut Io, imgs: Vec<Img>) -> Result<()> {
        let per = u64::from(self.geo.per_segment);
        for chunk in imgs.chunks(64) {
            let victims = self.victims(chunk)?;
            let dirty: Vec<(u32, Slot)> = {
                let st = self.state.lock();
                victims
                    .iter()
                    .filter(|(s, m)| m.pid != NONE && m.dirty && st.dir.get(&m.pid) == Some(s))
                    .copied()
                    .collect()
            };
            self.write_back(&dirty)?;
            let seq0 = self.empty_slots(&victims, chunk.len());
            self.emit(FlashStep::Append);
            let metas = self.write_slots(io, chunk, &victims, seq0)?;
            // Headers after slots: each segment's entries as they will be once installed
            // (other slots as they are now, so an old copy stays findable until then).
            let segs: BTreeSet<u32> = metas
                .iter()
                .map(|(s, _)| s / self.geo.per_segment)
                .collect();
            self.write_headers(io, &segs, &metas)?;
            self.dev.flush()?;
            let olds: BTreeSet<u32> = {
                let mut st = self.state.lock();
                let mut olds = BTreeSet::new();
                for (slot, m) in &metas {
                    if let Some(&old) = st.dir.get(&m.pid) {
                        olds.insert(old / self.geo.per_segment);
                    }
                    st.slots[*slot as usize] = *m;
                    st.install(*slot, true);
                }
                olds
            };
            // The replaced copies' entries go too, now that the new copies are durable: else,
            // once a new copy is evicted, a rebuild could take an old one for the newest.
            if !olds.is_empty() {
                self.write_headers(io, &olds, &[])?;
                self.dev.flush()?;
            }
            io.since_ckpt += chunk.len() as u64;
            if io.since_ckpt >= self.geo.checkpoint_every() * per {
                self.dir_checkpoint(io)?;
            }
        }
        Ok(())
    }

    /// The slots `chunk` goes to: free slots first, then the least recently used slots not
    /// holding a page of this chunk (its old copy must survive until the new one is synced).
    fn victims(&self, chunk: &[Img]) -> Result<Vec<(u32, Slot)>> {
        let pids: HashSet<u64> = chunk.iter().map(|i| i.pid).collect();
        let mut st = self.state.lock();
        let mut v = Vec::with_capacity(chunk.len());
        while v.len() < chunk.len() {
            if let Some(s) = st.free.pop() {
                v.push((s, st.slots[s as usize]));
                continue;
            }
            // The ring holds two batches, so a slot outside this one always exists.
            let Some(pick) = st
                .lru
                .values()
                .copied()
                .find(|&s| !pids.contains(&st.slots[s as usize].pid))
            else {
                return Err(Error::Internal(
                    "flash cache (lru): no slot left to reuse".into(),
                ));
            };
            let t = std::mem::take(&mut st.tick[pick as usize]);
            st.lru.remove(&t);
            v.push((pick, st.slots[pick as usize]));
        }
        Ok(v)
    }

    /// Empties the victims' slots (their pages leave the directory) and takes `n` sequence
    /// numbers; returns the first.
    fn empty_slots(&self, victims: &[(u32, Slot)], n: usize) -> u64 {
        let mut st = self.state.lock();
        for (s, _) in victims {
            let pid = st.slots[*s as usize].pid;
            if pid != NONE && st.dir.get(&pid) == Some(s) {
                st.dir.remove(&pid);
            }
            let m = st.slots[*s as usize];
            if m.pid != NONE {
                st.valid -= 1;
                st.dirty -= u64::from(m.dirty);
            }
            st.slots[*s as usize] = Slot::EMPTY;
        }
        let seq0 = st.next_seq;
        st.next_seq += n as u64;
        seq0
    }

    /// Writes each page of `chunk` into its victim's slot; returns the slots' new metadata.
    fn write_slots(
        &self,
        io: &mut Io,
        chunk: &[Img],
        victims: &[(u32, Slot)],
        seq0: u64,
    ) -> Result<Vec<(u32, Slot)>> {
        let hints = WriteHints::stream(self.stream);
        let mut metas = Vec::with_capacity(chunk.len());
        for (k, (img, (slot, _))) in chunk.iter().zip(victims).enumerate() {
            let at = self.geo.slot_sector(*slot);
            self.dev.write(at, &img.bytes, hints)?;
            self.count_write(io, at, self.geo.page_sectors, 1);
            metas.push((
                *slot,
                Slot {
                    pid: img.pid,
                    lsn: img.lsn,
                    seq: seq0 + k as u64,
                    crc: img.crc(),
                    dirty: img.dirty,
                    referenced: false,
                },
            ));
        }
        Ok(metas)
    }

    /// Rewrites the headers of `segs` from the slot metadata (`overrides` first), each into the
    /// copy not holding its newest header, under a fresh sequence number.
    fn write_headers(
        &self,
        io: &mut Io,
        segs: &BTreeSet<u32>,
        overrides: &[(u32, Slot)],
    ) -> Result<()> {
        let hints = WriteHints::stream(self.stream);
        for &seg in segs {
            let (header, alt) = {
                let mut st = self.state.lock();
                let slots = self
                    .geo
                    .slots_of(seg)
                    .map(|s| {
                        let m = overrides
                            .iter()
                            .find(|(x, _)| *x == s)
                            .map_or(st.slots[s as usize], |(_, m)| *m);
                        (m.pid != NONE).then_some(SlotEntry {
                            pid: m.pid,
                            lsn: m.lsn,
                            seq: m.seq,
                            crc: m.crc,
                            dirty: m.dirty,
                        })
                    })
                    .collect::<Vec<_>>();
                // A fresh number: the newer of the two copies is always the later write.
                let seq = st.next_seq;
                st.next_seq += 1;
                if st.hdr_alt.is_empty() {
                    st.hdr_alt = vec![false; self.geo.segments as usize];
                }
                let alt = st.hdr_alt[seg as usize];
                st.hdr_alt[seg as usize] = !alt;
                let h = SegmentHeader {
                    cache_id: self.cache_id,
                    seq,
                    slots,
                };
                (h, alt)
            };
            let at = self.geo.segment_sector(seg) + u64::from(alt);
            self.dev.write(at, &header.encode(), hints)?;
            self.count_write(io, at, 1, 0);
        }
        Ok(())
    }
}
