//! The page-mapping FTL: flat L2P table over 4 KiB units, out-of-band metadata per physical
//! unit (which doubles as the P2L map: a unit is live iff `l2p[oob.lpn] == ppn`), per-block
//! valid/written/erase counts, stream write points, the volatile-cache bookkeeping (pins and
//! the unflushed log) and counters.
//!
//! ## Volatile cache model
//! Writes are programmed to flash at once (so GC and counters behave as with a write-back
//! cache that drains immediately), but a write is only *guaranteed* durable after a flush.
//! At a power cut each unflushed unit independently did or did not reach flash with its OOB
//! (decided from the cut's seed and the unit's sequence number; all GC copies of a unit share
//! its fate). To keep "old or new" true, a durable unit superseded by an unflushed write (or
//! trim) is *pinned*: it still counts as valid and GC relocates it, until the next flush.
//! The device drains by itself (an internal flush) when more than `cache` bytes are unflushed,
//! bounding what a cut can lose. A flush also persists the durable sequence watermark
//! (`flushed_seq`), which recovery uses to know which atomic groups need a completeness check.

use super::backing::Store;
use super::config::{GcPolicy, Geometry, SsdConfig};
use super::gc::Buckets;
use super::timing::Timeline;
use crate::error::{DeviceError, Result};
use crate::stats::{DeviceStats, StreamStats};
use std::collections::VecDeque;

/// OOB entries per 64-byte cache line.
const OOB_PER_LINE: usize = 64 / std::mem::size_of::<Oob>();

/// "No unit / no block / unmapped".
pub(crate) const NONE: u32 = u32::MAX;

/// Out-of-band metadata programmed with each unit (16 bytes, see
/// [`super::config::OOB_BYTES_PER_UNIT`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Oob {
    /// Logical unit, or [`NONE`] for an erased unit or a program that did not complete.
    pub lpn: u32,
    /// Atomic group size (0 = not atomic).
    pub group_n: u16,
    /// Index of this unit in its atomic group; the group id is `seq - group_idx`.
    pub group_idx: u16,
    /// Global write sequence number (monotonic; copybacks keep the original).
    pub seq: u64,
}

impl Oob {
    pub(crate) const ERASED: Oob = Oob {
        lpn: NONE,
        group_n: 0,
        group_idx: 0,
        seq: 0,
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BState {
    Free,
    Open,
    Closed,
}

/// An acknowledged, not yet flushed request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unflushed {
    pub n: u32,
    pub seq: u64,
    pub kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Write,
    Atomic,
    Trim,
}

/// A trim persisted in the mapping journal: units `lpn..lpn+n` are unmapped as of `seq`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TrimRec {
    pub lpn: u32,
    pub n: u32,
    pub seq: u64,
}

#[derive(Debug)]
pub(crate) struct Ftl {
    pub geo: Geometry,
    /// log2(units_per_block) when it is a power of two, else `u32::MAX` (divide).
    upb_shift: u32,
    pub policy: GcPolicy,
    pub gc_low: u32,
    pub gc_high: u32,
    pub l2p: Vec<u32>,
    pub oob: Vec<Oob>,
    pinned: Vec<u64>,
    pin_list: Vec<u32>,
    /// One bit per physical unit, set iff the unit counts in its block's `valid` count (live or
    /// pinned): GC finds the units to move from it without touching the L2P table.
    vbits: Vec<u64>,
    pub valid: Vec<u32>,
    pub written: Vec<u32>,
    pub erase_count: Vec<u32>,
    pub bstream: Vec<u16>,
    pub state: Vec<BState>,
    pub closed_seq: Vec<u64>,
    /// Highest sequence number programmed into each block (host or copyback): a block whose
    /// maximum is at or below the watermark holds only durable units, so `supersede` needs no
    /// OOB read (a cache miss) for it.
    pub max_seq: Vec<u64>,
    /// Scratch list of a GC victim's units to move (reused, no allocation per GC).
    pub gc_buf: Vec<u32>,
    pub buckets: Buckets,
    free: Vec<VecDeque<u32>>,
    pub free_total: u32,
    /// Write points, `stream * stripe + i`: host writes round-robin over them, GC moves a
    /// victim's units to the one of the victim's parallel unit.
    pub host_wp: Vec<u32>,
    host_wp_allocs: Vec<u32>,
    rr: Vec<u32>,
    pub next_seq: u64,
    pub flushed_seq: u64,
    pub unflushed: Vec<Unflushed>,
    unflushed_units: u64,
    pub trims: Vec<TrimRec>,
    trims_after_prune: usize,
    pub stats: DeviceStats,
    pub store: Store,
    pub timing: Option<Timeline>,
}

/// Hints the CPU to start loading the cache line at `p` (no effect on results).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never dereferences `p` architecturally and never
    // faults, whatever the address, so any pointer value is fine.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

fn alloc<T: Clone>(n: usize, v: T) -> Result<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| {
        DeviceError::config(format!(
            "cannot allocate the FTL tables ({n} entries of {} bytes); lower capacity",
            std::mem::size_of::<T>()
        ))
    })?;
    out.resize(n, v);
    Ok(out)
}

pub(crate) fn fresh_stats(streams: u16) -> DeviceStats {
    DeviceStats {
        streams: (0..streams)
            .map(|id| StreamStats {
                id,
                ..StreamStats::default()
            })
            .collect(),
        ..DeviceStats::default()
    }
}

impl Ftl {
    pub(crate) fn new(cfg: &SsdConfig, geo: Geometry, store: Store) -> Result<Self> {
        let blocks = geo.blocks as usize;
        let streams = cfg.streams;
        // The big tables are allocated fallibly: a device too large for RAM is a typed error.
        let l2p = alloc(geo.logical_units as usize, NONE)?;
        let oob = alloc(geo.physical_units() as usize, Oob::ERASED)?;
        let pinned = alloc((geo.physical_units() as usize).div_ceil(64), 0u64)?;
        let vbits = alloc((geo.physical_units() as usize).div_ceil(64), 0u64)?;
        let upb = geo.units_per_block;
        let mut ftl = Self {
            geo,
            upb_shift: if upb.is_power_of_two() {
                upb.trailing_zeros()
            } else {
                u32::MAX
            },
            policy: cfg.gc,
            gc_low: cfg.gc_low_blocks,
            gc_high: cfg.gc_high_blocks,
            l2p,
            oob,
            pinned,
            pin_list: Vec::new(),
            vbits,
            valid: vec![0; blocks],
            written: vec![0; blocks],
            erase_count: vec![0; blocks],
            bstream: vec![0; blocks],
            state: vec![BState::Free; blocks],
            closed_seq: vec![0; blocks],
            max_seq: vec![0; blocks],
            gc_buf: Vec::with_capacity(geo.units_per_block as usize),
            buckets: Buckets::new(geo.blocks, geo.units_per_block, geo.pus),
            free: vec![VecDeque::new(); geo.pus as usize],
            free_total: 0,
            host_wp: vec![NONE; usize::from(streams) * geo.stripe as usize],
            host_wp_allocs: vec![0; usize::from(streams) * geo.stripe as usize],
            rr: vec![0; usize::from(streams)],
            next_seq: 1,
            flushed_seq: 0,
            unflushed: Vec::new(),
            unflushed_units: 0,
            trims: Vec::new(),
            trims_after_prune: 0,
            stats: fresh_stats(streams),
            store,
            timing: if cfg.latency == super::config::LatencyMode::Emulate {
                Some(Timeline::new(cfg, &geo))
            } else {
                None
            },
        };
        ftl.rebuild_free_lists();
        Ok(ftl)
    }

    /// The erase block holding physical unit `ppn` (a shift for power-of-two blocks).
    #[inline]
    pub(crate) fn block_of(&self, ppn: u32) -> u32 {
        if self.upb_shift < 32 {
            ppn >> self.upb_shift
        } else {
            ppn / self.geo.units_per_block
        }
    }

    pub(crate) fn pu_of_block(&self, b: u32) -> u32 {
        b % self.geo.pus
    }

    /// Puts every block with nothing written on its parallel unit's free list.
    pub(crate) fn rebuild_free_lists(&mut self) {
        self.free.iter_mut().for_each(VecDeque::clear);
        self.free_total = 0;
        for b in 0..self.geo.blocks {
            if self.written[b as usize] == 0 {
                self.state[b as usize] = BState::Free;
                self.free[(b % self.geo.pus) as usize].push_back(b);
                self.free_total += 1;
            }
        }
    }

    /// Forgets write points and the unflushed log (recovery).
    pub(crate) fn reset_write_points(&mut self) {
        self.host_wp.iter_mut().for_each(|w| *w = NONE);
        self.rr.iter_mut().for_each(|r| *r = 0);
        self.unflushed.clear();
        self.unflushed_units = 0;
    }

    // ---- pins ------------------------------------------------------------------------------

    #[inline]
    pub(crate) fn is_pinned(&self, ppn: u32) -> bool {
        self.pinned[(ppn / 64) as usize] & (1 << (ppn % 64)) != 0
    }

    #[inline]
    pub(crate) fn pin(&mut self, ppn: u32) {
        self.pinned[(ppn / 64) as usize] |= 1 << (ppn % 64);
        self.pin_list.push(ppn);
    }

    #[inline]
    pub(crate) fn unpin_bit(&mut self, ppn: u32) {
        self.pinned[(ppn / 64) as usize] &= !(1 << (ppn % 64));
    }

    pub(crate) fn clear_pins(&mut self) {
        self.pinned.iter_mut().for_each(|w| *w = 0);
        self.pin_list.clear();
    }

    // ---- valid bitmap --------------------------------------------------------------------

    #[cfg(test)]
    pub(crate) fn is_valid_bit(&self, ppn: u32) -> bool {
        self.vbits[(ppn / 64) as usize] & (1 << (ppn % 64)) != 0
    }

    #[inline]
    pub(crate) fn set_valid_bit(&mut self, ppn: u32) {
        self.vbits[(ppn / 64) as usize] |= 1 << (ppn % 64);
    }

    #[inline]
    pub(crate) fn clear_valid_bit(&mut self, ppn: u32) {
        self.vbits[(ppn / 64) as usize] &= !(1 << (ppn % 64));
    }

    /// Clears the valid bits of units `first..first + n`.
    pub(crate) fn clear_valid_range(&mut self, first: u32, n: u32) {
        let (mut p, end) = (first, first + n);
        while p < end {
            let bit = p % 64;
            let take = (64 - bit).min(end - p);
            let mask = if take == 64 {
                u64::MAX
            } else {
                ((1u64 << take) - 1) << bit
            };
            self.vbits[(p / 64) as usize] &= !mask;
            p += take;
        }
    }

    /// Appends to `out` the units of `first..first + n` whose valid bit is set, in order.
    pub(crate) fn collect_valid(&self, first: u32, n: u32, out: &mut Vec<u32>) {
        let (mut p, end) = (first, first + n);
        while p < end {
            let bit = p % 64;
            let take = (64 - bit).min(end - p);
            let mask = if take == 64 {
                u64::MAX
            } else {
                ((1u64 << take) - 1) << bit
            };
            let mut w = self.vbits[(p / 64) as usize] & mask;
            let base = p - bit;
            while w != 0 {
                out.push(base + w.trailing_zeros());
                w &= w - 1;
            }
            p += take;
        }
    }

    /// Rebuilds the valid bitmap from the mapping (no pins; recovery).
    pub(crate) fn rebuild_valid_bits(&mut self) {
        self.vbits.iter_mut().for_each(|w| *w = 0);
        for i in 0..self.l2p.len() {
            let ppn = self.l2p[i];
            if ppn != NONE {
                self.set_valid_bit(ppn);
            }
        }
    }

    // ---- allocation ------------------------------------------------------------------------

    /// Takes a free block, preferring parallel unit `pu`, else the one with most free blocks.
    fn take_free(&mut self, pu: u32, stream: u16) -> Result<u32> {
        let mut p = pu as usize;
        if self.free[p].is_empty() {
            p = (0..self.free.len())
                .max_by_key(|&i| self.free[i].len())
                .unwrap_or(0);
        }
        let Some(b) = self.free[p].pop_front() else {
            return Err(DeviceError::Full(
                "no free flash block left; raise op or lower streams/stripe".into(),
            ));
        };
        self.free_total -= 1;
        self.state[b as usize] = BState::Open;
        self.bstream[b as usize] = stream;
        Ok(b)
    }

    /// Free blocks on parallel unit `pu`.
    pub(crate) fn free_on(&self, pu: u32) -> usize {
        self.free[pu as usize].len()
    }

    /// Next physical unit of a host write point of `stream` (round-robin over the stripe).
    fn host_ppn(&mut self, stream: u16) -> Result<u32> {
        let stripe = self.geo.stripe;
        let s = usize::from(stream);
        let i = self.rr[s];
        self.rr[s] = if i + 1 == stripe { 0 } else { i + 1 };
        let w = s * stripe as usize + i as usize;
        let mut b = self.host_wp[w];
        let pref = (i + stripe * self.host_wp_allocs[w]) % self.geo.pus;
        if b == NONE {
            // The device-wide reserve first: a unit's GC may take one block elsewhere.
            self.maybe_gc()?;
            self.gc_on_unit(pref)?;
            // GC relocates into the write points, so it may have opened this one.
            b = self.host_wp[w];
        }
        if b == NONE {
            self.host_wp_allocs[w] = self.host_wp_allocs[w].wrapping_add(1);
            b = self.take_free(pref, stream)?;
            self.host_wp[w] = b;
        }
        let ppn = b * self.geo.units_per_block + self.written[b as usize];
        self.written[b as usize] += 1;
        if self.written[b as usize] == self.geo.units_per_block {
            self.host_wp[w] = NONE;
        }
        Ok(ppn)
    }

    /// The open block GC of a victim on parallel unit `pu` relocates `stream`'s units to: the
    /// stream's host write point of that unit, opened (never triggering GC) if needed. Each
    /// victim's copies stay on (usually) its own unit, so GC runs on every unit in parallel as
    /// the host writes do, needs no open block of its own, and keeps streams apart.
    pub(crate) fn gc_block(&mut self, stream: u16, pu: u32) -> Result<(u32, usize)> {
        let w = usize::from(stream) * self.geo.stripe as usize + (pu % self.geo.stripe) as usize;
        if self.host_wp[w] == NONE {
            self.host_wp[w] = self.take_free(pu, stream)?;
        }
        Ok((self.host_wp[w], w))
    }

    /// After a unit of block `b` was programmed and counted valid: close the block when full.
    pub(crate) fn after_program(&mut self, b: u32) {
        if self.written[b as usize] == self.geo.units_per_block {
            self.state[b as usize] = BState::Closed;
            self.closed_seq[b as usize] = self.next_seq;
            self.buckets.insert(b, self.valid[b as usize]);
        }
    }

    pub(crate) fn erase(&mut self, b: u32) {
        let upb = self.geo.units_per_block;
        let first = b * upb;
        for o in &mut self.oob[first as usize..(first + upb) as usize] {
            *o = Oob::ERASED;
        }
        self.store.erase(first, upb);
        self.clear_valid_range(first, upb);
        self.valid[b as usize] = 0;
        self.written[b as usize] = 0;
        self.max_seq[b as usize] = 0;
        self.erase_count[b as usize] += 1;
        self.state[b as usize] = BState::Free;
        self.free[(b % self.geo.pus) as usize].push_back(b);
        self.free_total += 1;
        self.stats.erases += 1;
        if let Some(t) = self.timing.as_mut() {
            t.erase(b % self.geo.pus);
        }
    }

    // ---- mapping updates ---------------------------------------------------------------------

    #[inline]
    fn invalidate(&mut self, ppn: u32) {
        let b = self.block_of(ppn);
        let v = self.valid[b as usize];
        debug_assert!(v > 0, "valid count of block {b} underflows");
        self.valid[b as usize] = v - 1;
        self.clear_valid_bit(ppn);
        if self.state[b as usize] == BState::Closed {
            self.buckets.remove(b, v);
            self.buckets.insert(b, v - 1);
        }
    }

    /// The unit `old` no longer holds the newest version of its LPN.
    #[inline]
    fn supersede(&mut self, old: u32) {
        let b = self.block_of(old) as usize;
        if self.geo.volatile_cache
            && (self.max_seq[b] <= self.flushed_seq
                || self.oob[old as usize].seq <= self.flushed_seq)
        {
            // Durable version replaced by an unflushed one: keep it until the next flush.
            self.pin(old);
        } else {
            self.invalidate(old);
        }
    }

    /// Writes `n` units from `lpn` on `stream`; `data` holds `n` × 4 KiB or `None` for zeros.
    /// Returns the modeled acknowledgement time in emulate mode.
    pub(crate) fn write(
        &mut self,
        lpn: u32,
        n: u32,
        stream: u16,
        atomic: bool,
        data: Option<&[u8]>,
    ) -> Result<u64> {
        let seq0 = self.next_seq;
        let t0 = self.timing.as_ref().map_or(0, Timeline::command_start);
        let mut ack = t0;
        for i in 0..n {
            let l = lpn + i;
            // Load the (usually cache-missing) L2P entry before allocating, so the miss overlaps
            // with the allocation; reload only if GC ran and may have moved the unit.
            let early = self.l2p[l as usize];
            let gc_before = self.stats.gc_runs;
            let ppn = self.host_ppn(stream)?;
            let old = if self.stats.gc_runs == gc_before {
                early
            } else {
                self.l2p[l as usize]
            };
            if old != NONE {
                self.supersede(old);
            }
            // Host writes rotate over `stripe` open blocks, too many streams for the hardware
            // prefetcher: fetch this block's next OOB line now, long before it is written.
            prefetch(self.oob.as_ptr().wrapping_add(ppn as usize + OOB_PER_LINE));
            let seq = self.next_seq;
            self.next_seq += 1;
            self.oob[ppn as usize] = Oob {
                lpn: l,
                group_n: if atomic { n as u16 } else { 0 },
                group_idx: if atomic { i as u16 } else { 0 },
                seq,
            };
            self.l2p[l as usize] = ppn;
            let chunk = data.map(|d| {
                let o = i as usize * crate::SECTOR_SIZE;
                &d[o..o + crate::SECTOR_SIZE]
            });
            self.store.write(ppn, chunk)?;
            let b = self.block_of(ppn);
            self.valid[b as usize] += 1;
            self.set_valid_bit(ppn);
            self.max_seq[b as usize] = seq;
            if let Some(t) = self.timing.as_mut() {
                ack = ack.max(t.host_write_unit(b % self.geo.pus, t0));
            }
            self.after_program(b);
        }
        let st = &mut self.stats;
        st.host_write_pages += u64::from(n);
        st.host_write_requests += 1;
        st.flash_programs += u64::from(n);
        st.streams[usize::from(stream)].host_write_pages += u64::from(n);
        self.log(Unflushed {
            n,
            seq: seq0,
            kind: if atomic { Kind::Atomic } else { Kind::Write },
        });
        Ok(ack)
    }

    /// Unmaps `n` units from `lpn`.
    pub(crate) fn trim(&mut self, lpn: u32, n: u32) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut any = false;
        for l in lpn..lpn + n {
            let old = self.l2p[l as usize];
            if old != NONE {
                any = true;
                self.supersede(old);
                self.l2p[l as usize] = NONE;
            }
        }
        // Nothing mapped and nothing pending: the range is durably unmapped already.
        if any || !self.unflushed.is_empty() {
            self.trims.push(TrimRec { lpn, n, seq });
        }
        self.stats.trimmed_pages += u64::from(n);
        self.log(Unflushed {
            n,
            seq,
            kind: Kind::Trim,
        });
    }

    fn log(&mut self, u: Unflushed) {
        // Write-through, or a cache the capacitors drain at a cut: durable once acknowledged.
        if !self.geo.volatile_cache {
            self.make_durable();
            return;
        }
        // A trim occupies no cache data, but its log entry counts as one unit.
        self.unflushed_units += if u.kind == Kind::Trim {
            1
        } else {
            u64::from(u.n)
        };
        self.unflushed.push(u);
        if self.unflushed_units > u64::from(self.geo.cache_units) {
            self.make_durable();
        }
    }

    /// Everything acknowledged so far becomes durable: persist the sequence watermark, release
    /// pinned old versions, forget the unflushed log, compact the trim journal now and then.
    pub(crate) fn make_durable(&mut self) {
        self.flushed_seq = self.next_seq - 1;
        let list = std::mem::take(&mut self.pin_list);
        for &ppn in &list {
            if self.is_pinned(ppn) {
                self.unpin_bit(ppn);
                self.invalidate(ppn);
            }
        }
        self.pin_list = list;
        self.pin_list.clear();
        self.unflushed.clear();
        self.unflushed_units = 0;
        if self.trims.len() > 2 * self.trims_after_prune + 64 {
            self.prune_trims();
        }
    }

    /// Drops journal records whose units were all rewritten since (a newer, durable version
    /// wins over the old copies by sequence number anyway). Repeats of the same range keep only
    /// the newest record, so repeatedly trimming the same unwritten space does not grow the
    /// journal; it stays bounded by the distinct ranges.
    fn prune_trims(&mut self) {
        let l2p = &self.l2p;
        self.trims
            .retain(|t| (t.lpn..t.lpn + t.n).any(|l| l2p[l as usize] == NONE));
        let mut newest: std::collections::HashMap<(u32, u32), u64> =
            std::collections::HashMap::new();
        for t in &self.trims {
            let e = newest.entry((t.lpn, t.n)).or_insert(t.seq);
            *e = (*e).max(t.seq);
        }
        self.trims
            .retain(|t| newest.get(&(t.lpn, t.n)) == Some(&t.seq));
        self.trims_after_prune = self.trims.len();
    }

    pub(crate) fn erase_stats(&self) -> crate::stats::EraseCountStats {
        let n = self.erase_count.len().max(1) as f64;
        crate::stats::EraseCountStats {
            min: self.erase_count.iter().copied().min().map_or(0, u64::from),
            mean: self.erase_count.iter().map(|&e| f64::from(e)).sum::<f64>() / n,
            max: self.erase_count.iter().copied().max().map_or(0, u64::from),
        }
    }

    /// Debug check: valid count of each block = live + pinned units in it.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let upb = self.geo.units_per_block;
        for b in 0..self.geo.blocks {
            let mut v = 0;
            for ppn in b * upb..b * upb + self.written[b as usize] {
                let lpn = self.oob[ppn as usize].lpn;
                let live = lpn != NONE && self.l2p[lpn as usize] == ppn;
                let counted = live || self.is_pinned(ppn);
                assert_eq!(counted, self.is_valid_bit(ppn), "valid bit of unit {ppn}");
                if counted {
                    v += 1;
                }
            }
            assert_eq!(v, self.valid[b as usize], "block {b} valid count");
            for ppn in b * upb + self.written[b as usize]..(b + 1) * upb {
                assert!(!self.is_valid_bit(ppn), "valid bit of unwritten unit {ppn}");
            }
        }
    }
}
