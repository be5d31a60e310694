//! Garbage collection: victim selection (greedy via valid-count buckets, or cost-benefit) and
//! relocation of a victim's valid units to its stream's GC write point.

use super::config::GcPolicy;
use super::ftl::{prefetch, BState, Ftl, NONE};
use crate::error::{DeviceError, Result};

/// Closed blocks bucketed by valid count: intrusive doubly-linked lists (`next`/`prev` per
/// block, one head per count). Insert/remove/move are O(1); the minimum is found from a hint
/// that only moves down on insert and up past empty buckets on pop, so a greedy victim costs
/// O(1) amortized (at most `units_per_block + 1` buckets are skipped between decreases).
#[derive(Debug)]
pub(crate) struct Buckets {
    head: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    min_hint: usize,
    len: usize,
}

impl Buckets {
    pub(crate) fn new(blocks: u32, units_per_block: u32) -> Self {
        Self {
            head: vec![NONE; units_per_block as usize + 1],
            next: vec![NONE; blocks as usize],
            prev: vec![NONE; blocks as usize],
            min_hint: 0,
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn insert(&mut self, b: u32, valid: u32) {
        let v = valid as usize;
        let h = self.head[v];
        self.next[b as usize] = h;
        self.prev[b as usize] = NONE;
        if h != NONE {
            self.prev[h as usize] = b;
        }
        self.head[v] = b;
        self.min_hint = self.min_hint.min(v);
        self.len += 1;
    }

    #[inline]
    pub(crate) fn remove(&mut self, b: u32, valid: u32) {
        let (n, p) = (self.next[b as usize], self.prev[b as usize]);
        if p == NONE {
            self.head[valid as usize] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NONE {
            self.prev[n as usize] = p;
        }
        self.len -= 1;
    }

    /// The block with the fewest valid units, removed from its bucket.
    pub(crate) fn pop_min(&mut self) -> Option<(u32, u32)> {
        if self.len == 0 {
            return None;
        }
        while self.head[self.min_hint] == NONE {
            self.min_hint += 1;
        }
        let v = self.min_hint as u32;
        let b = self.head[self.min_hint];
        self.remove(b, v);
        Some((b, v))
    }

    pub(crate) fn clear(&mut self) {
        self.head.iter_mut().for_each(|h| *h = NONE);
        self.min_hint = 0;
        self.len = 0;
    }
}

/// How many units ahead relocation prefetches L2P entries.
const RELOCATE_PREFETCH: usize = 8;

impl Ftl {
    /// Runs GC while free blocks are below the low mark, until the high mark.
    pub(crate) fn maybe_gc(&mut self) -> Result<()> {
        if self.free_total < self.gc_low {
            while self.free_total < self.gc_high {
                self.gc_once()?;
            }
        }
        Ok(())
    }

    fn pick_victim(&mut self) -> Option<u32> {
        match self.policy {
            GcPolicy::Greedy => self.buckets.pop_min().map(|(b, _)| b),
            GcPolicy::CostBenefit => {
                // Rosenblum & Ousterhout: benefit/cost = (1 − u) · age / (2u), with u the valid
                // fraction and age the time (in sequence numbers) since the block was closed.
                // Scans every block: O(blocks) per victim.
                let upb = f64::from(self.geo.units_per_block);
                let mut best = None;
                let mut best_score = f64::NEG_INFINITY;
                for b in 0..self.geo.blocks {
                    if self.state[b as usize] != BState::Closed {
                        continue;
                    }
                    let u = f64::from(self.valid[b as usize]) / upb;
                    let age = (self.next_seq - self.closed_seq[b as usize]) as f64 + 1.0;
                    let score = if u == 0.0 {
                        f64::INFINITY
                    } else {
                        (1.0 - u) * age / (2.0 * u)
                    };
                    if score > best_score {
                        best_score = score;
                        best = Some(b);
                    }
                }
                let b = best?;
                self.buckets.remove(b, self.valid[b as usize]);
                Some(b)
            }
        }
    }

    /// Reclaims one victim block.
    pub(crate) fn gc_once(&mut self) -> Result<()> {
        let Some(victim) = self.pick_victim() else {
            return Err(DeviceError::Full(
                "no closed block to collect; raise op or lower streams/stripe".into(),
            ));
        };
        let upb = self.geo.units_per_block;
        if self.valid[victim as usize] >= upb {
            self.buckets.insert(victim, self.valid[victim as usize]);
            return Err(DeviceError::Full(format!(
                "every closed block is fully valid ({upb} units); raise op"
            )));
        }
        self.state[victim as usize] = BState::Open; // out of the buckets while being moved
        let stream = self.bstream[victim as usize];
        let first = victim * upb;
        let src_pu = self.pu_of_block(victim);
        // The units to move are those counted valid (live or pinned): read from the valid
        // bitmap, so the scan touches neither the OOB nor the (cache-missing) L2P table.
        let mut buf = std::mem::take(&mut self.gc_buf);
        buf.clear();
        self.collect_valid(first, self.written[victim as usize], &mut buf);
        let moved = self.relocate_all(&buf, stream, src_pu);
        if let Err(e) = moved {
            // Cannot happen while GC keeps free blocks above its low mark; stay consistent
            // anyway: the victim goes back to the closed blocks with its true valid count.
            let mut v = 0;
            for p in first..first + upb {
                let l = self.oob[p as usize].lpn;
                if (l != NONE && self.l2p[l as usize] == p) || self.is_pinned(p) {
                    v += 1;
                } else {
                    self.clear_valid_bit(p);
                }
            }
            self.valid[victim as usize] = v;
            self.state[victim as usize] = BState::Closed;
            self.buckets.insert(victim, v);
            self.gc_buf = buf;
            return Err(e);
        }
        let moved = buf.len() as u64;
        self.gc_buf = buf;
        self.erase(victim);
        let st = &mut self.stats;
        st.copybacks += moved;
        st.flash_reads += moved;
        st.flash_programs += moved;
        st.gc_runs += 1;
        let ss = &mut st.streams[usize::from(stream)];
        ss.copybacks += moved;
        ss.gc_runs += 1;
        Ok(())
    }

    /// Moves the units `buf` to `stream`'s GC write point, a block-sized run at a time.
    fn relocate_all(&mut self, buf: &[u32], stream: u16, src_pu: u32) -> Result<()> {
        let upb = self.geo.units_per_block;
        let mut i = 0;
        while i < buf.len() {
            let db = self.gc_block(stream)?;
            let w = self.written[db as usize];
            let k = ((upb - w) as usize).min(buf.len() - i);
            let base = db * upb + w;
            let mut max_seq = self.max_seq[db as usize];
            for (j, &ppn) in buf[i..i + k].iter().enumerate() {
                let dst = base + j as u32;
                // The L2P entries updated below are random (cache-missing) lines: request the
                // one a few units ahead now so the misses overlap. The victim's OOB (written
                // long ago) is requested twice as far ahead, as it feeds that L2P prefetch.
                if let Some(&ahead) = buf.get(i + j + RELOCATE_PREFETCH) {
                    let lpn = self.oob[ahead as usize].lpn;
                    prefetch(self.l2p.as_ptr().wrapping_add(lpn as usize));
                }
                if let Some(&ahead) = buf.get(i + j + 2 * RELOCATE_PREFETCH) {
                    prefetch(self.oob.as_ptr().wrapping_add(ahead as usize));
                }
                if let Err(e) = self.store.relocate(ppn, dst) {
                    // Keep the block's counts true to what was moved so far.
                    self.max_seq[db as usize] = max_seq;
                    self.written[db as usize] += j as u32;
                    self.valid[db as usize] += j as u32;
                    return Err(e);
                }
                let o = self.oob[ppn as usize];
                self.oob[dst as usize] = o;
                max_seq = max_seq.max(o.seq);
                // A valid unit is either pinned (superseded, kept until the next flush) or live.
                if self.is_pinned(ppn) {
                    self.unpin_bit(ppn);
                    self.pin(dst);
                } else {
                    debug_assert_eq!(self.l2p[o.lpn as usize], ppn);
                    self.l2p[o.lpn as usize] = dst;
                }
                self.clear_valid_bit(ppn);
                self.set_valid_bit(dst);
                if let Some(t) = self.timing.as_mut() {
                    t.copyback(src_pu, db % self.geo.pus);
                }
            }
            self.max_seq[db as usize] = max_seq;
            self.written[db as usize] += k as u32;
            self.valid[db as usize] += k as u32;
            if self.written[db as usize] == upb {
                self.gc_wp[usize::from(stream)] = NONE;
                self.after_program(db);
            }
            i += k;
        }
        Ok(())
    }
}
